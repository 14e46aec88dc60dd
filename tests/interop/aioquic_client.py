#!/usr/bin/env python3
"""hq-interop (HTTP/0.9 over QUIC) download with the unmodified aioquic library.

aioquic's wheel ships no example client, so this is a small one on its public API:
`python3 aioquic_client.py https://127.0.0.1:PORT/file -o FILE`. Certificates are not checked
(test servers are self-signed). Honours SSLKEYLOGFILE. Exits non-zero on any failure.
"""

import argparse
import asyncio
import os
import ssl
import sys
import time
from urllib.parse import urlparse

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamDataReceived, StreamReset


class HqClient(QuicConnectionProtocol):
    def __init__(self, *args, key_update_every=0, **kwargs):
        super().__init__(*args, **kwargs)
        self._pending = {}
        # Bytes between key updates this client starts (RFC 9001 §6); 0: none.
        self.key_update_every = key_update_every
        self.key_updates = 0
        self._since_update = 0

    async def get(self, path, out):
        stream_id = self._quic.get_next_available_stream_id()
        done = asyncio.get_running_loop().create_future()
        self._pending[stream_id] = (done, out, [0])
        self._quic.send_stream_data(stream_id, f"GET {path}\r\n".encode(), end_stream=True)
        self.transmit()
        return await done

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived) and event.stream_id in self._pending:
            done, out, count = self._pending[event.stream_id]
            out.write(event.data)
            count[0] += len(event.data)
            self._since_update += len(event.data)
            if self.key_update_every and self._since_update >= self.key_update_every:
                self._since_update = 0
                self._quic.request_key_update()
                self.key_updates += 1
                self.transmit()
            if event.end_stream:
                del self._pending[event.stream_id]
                done.set_result(count[0])
        elif isinstance(event, StreamReset) and event.stream_id in self._pending:
            done, _, _ = self._pending.pop(event.stream_id)
            done.set_exception(RuntimeError(f"stream reset by the server, code {event.error_code}"))
        elif isinstance(event, ConnectionTerminated):
            for done, _, _ in self._pending.values():
                if not done.done():
                    done.set_exception(
                        RuntimeError(
                            f"connection closed: code {event.error_code} {event.reason_phrase!r}"
                        )
                    )
            self._pending.clear()


async def main(args):
    url = urlparse(args.url)
    if url.scheme != "https" or not url.hostname or not url.port:
        raise SystemExit(f"expected https://HOST:PORT/PATH, got {args.url}")
    config = QuicConfiguration(is_client=True, alpn_protocols=["hq-interop"])
    config.verify_mode = ssl.CERT_NONE
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog:
        config.secrets_log_file = open(keylog, "a")
    start = time.monotonic()

    def protocol(*a, **kw):
        return HqClient(*a, key_update_every=args.key_update_every, **kw)

    async with connect(
        url.hostname, url.port, configuration=config, create_protocol=protocol
    ) as client:
        with open(args.output, "wb") as out:
            n = await asyncio.wait_for(client.get(url.path or "/", out), args.timeout)
        client.close()
    elapsed = time.monotonic() - start
    print(f"aioquic-client: {n} bytes in {elapsed:.3f} s, {n * 8 / elapsed / 1e6:.1f} Mbit/s")
    print(f"aioquic-client: key_updates={client.key_updates}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--key-update-every",
        type=int,
        default=0,
        metavar="BYTES",
        help="request a 1-RTT key update after every BYTES received",
    )
    try:
        asyncio.run(main(parser.parse_args()))
    except Exception as e:  # report, do not hide: the test shows this output
        print(f"aioquic-client: failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
