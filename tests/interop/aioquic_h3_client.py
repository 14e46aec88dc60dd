#!/usr/bin/env python3
"""HTTP/3 download with the unmodified aioquic library (its `aioquic.h3` API).

`python3 aioquic_h3_client.py https://127.0.0.1:PORT/path -o FILE [--range bytes=0-9]
[--method POST]`.
Certificates are not checked (test servers are self-signed). Prints the status and headers on
stderr, writes the body to FILE, exits non-zero on a transport failure or, unless
`--any-status`, on a status other than 200/206. Honours SSLKEYLOGFILE.
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
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamReset


class H3Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        self._pending = {}

    async def get(self, method, authority, path, out, extra_headers):
        stream_id = self._quic.get_next_available_stream_id()
        headers = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"user-agent", b"aioquic"),
        ] + extra_headers
        self._http.send_headers(stream_id, headers, end_stream=True)
        done = asyncio.get_running_loop().create_future()
        self._pending[stream_id] = {"done": done, "out": out, "bytes": 0, "headers": None}
        self.transmit()
        return await done

    def quic_event_received(self, event):
        if isinstance(event, StreamReset) and event.stream_id in self._pending:
            state = self._pending.pop(event.stream_id)
            state["done"].set_exception(RuntimeError(f"stream reset, code {event.error_code:#x}"))
            return
        if isinstance(event, ConnectionTerminated):
            for state in self._pending.values():
                if not state["done"].done():
                    state["done"].set_exception(
                        RuntimeError(
                            f"connection closed: code {event.error_code:#x} {event.reason_phrase!r}"
                        )
                    )
            self._pending.clear()
            return
        for h3_event in self._http.handle_event(event):
            state = self._pending.get(h3_event.stream_id)
            if state is None:
                continue
            if isinstance(h3_event, HeadersReceived):
                state["headers"] = h3_event.headers
            elif isinstance(h3_event, DataReceived):
                state["out"].write(h3_event.data)
                state["bytes"] += len(h3_event.data)
            if h3_event.stream_ended:
                del self._pending[h3_event.stream_id]
                state["done"].set_result((state["headers"], state["bytes"]))


async def main(args):
    url = urlparse(args.url)
    if url.scheme != "https" or not url.hostname or not url.port:
        raise SystemExit(f"expected https://HOST:PORT/PATH, got {args.url}")
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog:
        config.secrets_log_file = open(keylog, "a")
    extra = [(b"range", args.range.encode())] if args.range else []
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    start = time.monotonic()
    async with connect(
        url.hostname, url.port, configuration=config, create_protocol=H3Client
    ) as client:
        with open(args.output, "wb") as out:
            headers, n = await asyncio.wait_for(
                client.get(args.method, url.netloc, path, out, extra), args.timeout
            )
        client.close()
    elapsed = time.monotonic() - start
    status = dict(headers or []).get(b":status", b"?").decode()
    for name, value in headers or []:
        print(f"aioquic-h3-client: {name.decode()}: {value.decode()}", file=sys.stderr)
    print(
        f"aioquic-h3-client: status {status}, {n} bytes in {elapsed:.3f} s, "
        f"{n * 8 / elapsed / 1e6:.1f} Mbit/s"
    )
    if not args.any_status and status not in ("200", "206"):
        raise RuntimeError(f"status {status}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--range")
    parser.add_argument("--method", default="GET")
    parser.add_argument("--any-status", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    try:
        asyncio.run(main(parser.parse_args()))
    except Exception as e:  # report, do not hide: the test shows this output
        print(f"aioquic-h3-client: failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
