#!/usr/bin/env python3
"""Downloads over QUIC with the unmodified aioquic library: hq-interop (HTTP/0.9) or HTTP/3.

aioquic's wheel ships no example client, so this is a small one on its public API:
`python3 aioquic_client.py https://127.0.0.1:PORT/file -o FILE`, or several URLs into a
directory, `-d DIR URL...` (all on one connection, each on its own stream, as the QUIC interop
runner's `transfer` and `multiplexing` test cases ask). `--multiconnect` opens one connection per
URL (the runner's `handshakeloss`), `--keyupdate` updates the 1-RTT keys as soon as the handshake
is confirmed (`keyupdate`), `--h3` speaks HTTP/3 (`http3`), `--migrate` moves to a new local
port with the server's next connection ID once a quarter of the first file has arrived
(`connectionmigration`, RFC 9000 §9.2, §9.5; aioquic's `change_connection_id`).

Certificates are not checked (test servers are self-signed). Honours SSLKEYLOGFILE and
QLOGDIR. Exits non-zero on any failure.
"""

import argparse
import asyncio
import os
import socket
import ssl
import sys
import time
from urllib.parse import urlparse

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamDataReceived, StreamReset
from aioquic.quic.logger import QuicFileLogger


class Client(QuicConnectionProtocol):
    # Key updates this client started, over all its connections (RFC 9001 §6).
    key_updates = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pending = {}
        self._h3 = None
        # Bytes between key updates this client starts; 0: none.
        self.key_update_every = 0
        self._since_update = 0
        # Migrate once this many body bytes have arrived; None: never, or done.
        self.migrate_after = None
        self._received = 0

    async def _migrate(self):
        """A new local port (a new dual-stack socket, as aioquic's `connect` binds) and the
        server's next connection ID, then the old socket closes."""
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(("::", 0, 0, 0))
        old = self._transport
        await asyncio.get_running_loop().create_datagram_endpoint(lambda: self, sock=sock)
        old.close()
        self.change_connection_id()
        print(
            f"aioquic-client: migrated to port {sock.getsockname()[1]} after "
            f"{self._received} bytes",
            file=sys.stderr,
        )

    def use_h3(self):
        self._h3 = H3Connection(self._quic)

    async def get(self, url, out):
        stream_id = self._quic.get_next_available_stream_id()
        done = asyncio.get_running_loop().create_future()
        self._pending[stream_id] = {"done": done, "out": out, "bytes": 0, "status": None}
        if self._h3 is not None:
            self._h3.send_headers(
                stream_id,
                [
                    (b":method", b"GET"),
                    (b":scheme", b"https"),
                    (b":authority", url.netloc.encode()),
                    (b":path", (url.path or "/").encode()),
                ],
                end_stream=True,
            )
        else:
            self._quic.send_stream_data(
                stream_id, f"GET {url.path or '/'}\r\n".encode(), end_stream=True
            )
        self.transmit()
        return await done

    def _finish(self, stream_id):
        p = self._pending.pop(stream_id)
        if p["status"] not in (None, "200"):
            p["done"].set_exception(RuntimeError(f"HTTP status {p['status']}"))
        else:
            p["done"].set_result(p["bytes"])

    def _data(self, stream_id, data, end):
        p = self._pending.get(stream_id)
        if p is None:
            return
        p["out"].write(data)
        p["bytes"] += len(data)
        self._received += len(data)
        if self.migrate_after is not None and self._received >= self.migrate_after:
            self.migrate_after = None
            asyncio.ensure_future(self._migrate())
        self._since_update += len(data)
        if self.key_update_every and self._since_update >= self.key_update_every:
            self._since_update = 0
            self._quic.request_key_update()
            Client.key_updates += 1
            self.transmit()
        if end:
            self._finish(stream_id)

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            for p in self._pending.values():
                if not p["done"].done():
                    p["done"].set_exception(
                        RuntimeError(
                            f"connection closed: code {event.error_code} {event.reason_phrase!r}"
                        )
                    )
            self._pending.clear()
            return
        if isinstance(event, StreamReset) and event.stream_id in self._pending:
            p = self._pending.pop(event.stream_id)
            p["done"].set_exception(
                RuntimeError(f"stream reset by the server, code {event.error_code}")
            )
            return
        if self._h3 is not None:
            for h3_event in self._h3.handle_event(event):
                if isinstance(h3_event, HeadersReceived) and h3_event.stream_id in self._pending:
                    status = dict(h3_event.headers).get(b":status", b"").decode()
                    self._pending[h3_event.stream_id]["status"] = status
                    if h3_event.stream_ended:
                        self._finish(h3_event.stream_id)
                elif isinstance(h3_event, DataReceived):
                    self._data(h3_event.stream_id, h3_event.data, h3_event.stream_ended)
        elif isinstance(event, StreamDataReceived):
            self._data(event.stream_id, event.data, event.end_stream)


def output_path(args, url):
    if args.output:
        return args.output
    return os.path.join(args.dir, os.path.basename(url.path))


async def one_connection(args, config, urls):
    url0 = urls[0]
    async with connect(url0.hostname, url0.port, configuration=config, create_protocol=Client) as c:
        if args.h3:
            c.use_h3()
        c.key_update_every = args.key_update_every
        if args.migrate:
            c.migrate_after = args.migrate_after
        if args.keyupdate:
            # Deferred by aioquic until the handshake is confirmed (RFC 9001 §6.1).
            c._quic.request_key_update()
        files = [open(output_path(args, u), "wb") for u in urls]
        try:
            got = await asyncio.wait_for(
                asyncio.gather(*(c.get(u, f) for u, f in zip(urls, files))), args.timeout
            )
        finally:
            for f in files:
                f.close()
        c.close()
        await c.wait_closed()
    return sum(got)


async def main(args):
    urls = [urlparse(u) for u in args.urls]
    for u, raw in zip(urls, args.urls):
        if u.scheme != "https" or not u.hostname or not u.port:
            raise SystemExit(f"expected https://HOST:PORT/PATH, got {raw}")
    if args.output and len(urls) != 1:
        raise SystemExit("-o takes one URL; use -d DIR for several")
    if not args.output and not args.dir:
        raise SystemExit("give -o FILE or -d DIR")

    def config():
        c = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN if args.h3 else ["hq-interop"])
        c.verify_mode = ssl.CERT_NONE
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog:
            c.secrets_log_file = open(keylog, "a")
        if os.environ.get("QLOGDIR"):
            c.quic_logger = QuicFileLogger(os.environ["QLOGDIR"])
        return c

    start = time.monotonic()
    if args.multiconnect:
        n = 0
        for u in urls:
            n += await one_connection(args, config(), [u])
    else:
        n = await one_connection(args, config(), urls)
    elapsed = time.monotonic() - start
    print(
        f"aioquic-client: {n} bytes in {elapsed:.3f} s, {n * 8 / elapsed / 1e6:.1f} Mbit/s, "
        f"key_updates={Client.key_updates}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("urls", nargs="+", metavar="URL")
    parser.add_argument("-o", "--output", help="the body of the one URL goes here")
    parser.add_argument("-d", "--dir", help="each body goes to DIR/<last path segment>")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--multiconnect", action="store_true")
    parser.add_argument("--keyupdate", action="store_true")
    parser.add_argument(
        "--key-update-every",
        type=int,
        default=0,
        metavar="BYTES",
        help="request a 1-RTT key update after every BYTES received",
    )
    parser.add_argument("--h3", action="store_true")
    parser.add_argument("--migrate", action="store_true", help="migrate once, mid-transfer")
    parser.add_argument(
        "--migrate-after",
        type=int,
        default=512 * 1024,
        metavar="BYTES",
        help="with --migrate: body bytes before the migration",
    )
    args = parser.parse_args()
    try:
        asyncio.run(main(args))
    except Exception as e:  # report, do not hide: the test shows this output
        print(f"aioquic-client: failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
