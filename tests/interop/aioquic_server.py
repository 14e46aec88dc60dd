#!/usr/bin/env python3
"""hq-interop (HTTP/0.9 over QUIC) and HTTP/3 file server on the unmodified aioquic library.

`python3 aioquic_server.py --root DIR [--port 0] [--retry]`: listens on 127.0.0.1 with a fresh
self-signed certificate, prints `listening on 127.0.0.1:PORT`, serves plain file names under
DIR until killed, over the ALPN the client offers (`h3` or `hq-interop`). `--retry` sends a
Retry to every new client (the QUIC interop runner's `retry` test case). Honours SSLKEYLOGFILE
and QLOGDIR.
"""

import argparse
import asyncio
import datetime
import ipaddress
import os
import sys
import tempfile

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ProtocolNegotiated, StreamDataReceived
from aioquic.quic.logger import QuicFileLogger
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ROOT = "."


def self_signed(directory):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(directory, "cert.pem")
    key_path = os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_path, key_path


class HqServer(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._requests = {}

        self._h3 = None

    def quic_event_received(self, event):
        if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self._h3 = H3Connection(self._quic)
        if self._h3 is not None:
            for h3_event in self._h3.handle_event(event):
                if isinstance(h3_event, HeadersReceived):
                    self._h3_request(h3_event)
            return
        if not isinstance(event, StreamDataReceived):
            return
        buf = self._requests.get(event.stream_id, b"") + event.data
        if b"\n" not in buf and not event.end_stream:
            self._requests[event.stream_id] = buf[:8192]
            return
        self._requests.pop(event.stream_id, None)
        line = buf.split(b"\n", 1)[0].decode(errors="replace").strip()
        parts = line.split()
        name = parts[1].lstrip("/") if len(parts) == 2 and parts[0] == "GET" else ""
        path = resolve(name)
        if path is None:
            self._quic.reset_stream(event.stream_id, 0x10)
        else:
            with open(path, "rb") as f:
                self._quic.send_stream_data(event.stream_id, f.read(), end_stream=True)
        self.transmit()

    def _h3_request(self, event):
        headers = dict(event.headers)
        name = headers.get(b":path", b"").decode(errors="replace").lstrip("/")
        path = resolve(name) if headers.get(b":method") == b"GET" else None
        if path is None:
            self._h3.send_headers(event.stream_id, [(b":status", b"404")], end_stream=True)
        else:
            with open(path, "rb") as f:
                body = f.read()
            self._h3.send_headers(
                event.stream_id,
                [(b":status", b"200"), (b"content-length", str(len(body)).encode())],
            )
            self._h3.send_data(event.stream_id, body, end_stream=True)
        self.transmit()


def resolve(name):
    """A plain file name directly under ROOT, or None."""
    path = os.path.join(ROOT, name)
    if not name or "/" in name or name.startswith(".") or not os.path.isfile(path):
        return None
    return path


async def main(args):
    global ROOT
    ROOT = os.path.realpath(args.root)
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = self_signed(tmp)
        config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN + ["hq-interop"])
        config.load_cert_chain(cert, key)
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog:
            config.secrets_log_file = open(keylog, "a")
        if os.environ.get("QLOGDIR"):
            config.quic_logger = QuicFileLogger(os.environ["QLOGDIR"])
        server = await serve(
            "127.0.0.1",
            args.port,
            configuration=config,
            create_protocol=HqServer,
            retry=args.retry,
        )
        host, port = server._transport.get_extra_info("sockname")[:2]
        print(f"listening on {host}:{port}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--retry", action="store_true", help="send a Retry to every new client")
    try:
        asyncio.run(main(parser.parse_args()))
    except KeyboardInterrupt:
        sys.exit(0)
