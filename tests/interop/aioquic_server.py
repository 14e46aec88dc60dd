#!/usr/bin/env python3
"""hq-interop (HTTP/0.9 over QUIC) file server on the unmodified aioquic library.

`python3 aioquic_server.py --root DIR [--port 0] [--retry]`: listens on 127.0.0.1 with a fresh
self-signed certificate, prints `listening on 127.0.0.1:PORT`, serves plain file names under
DIR until killed; with --retry it validates each client's address with a Retry first.
Honours SSLKEYLOGFILE.
"""

import argparse
import asyncio
import datetime
import os
import sys
import tempfile

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived
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
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
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

    def quic_event_received(self, event):
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
        path = os.path.join(ROOT, name)
        if not name or "/" in name or name.startswith(".") or not os.path.isfile(path):
            self._quic.reset_stream(event.stream_id, 0x10)
        else:
            with open(path, "rb") as f:
                self._quic.send_stream_data(event.stream_id, f.read(), end_stream=True)
        self.transmit()


async def main(args):
    global ROOT
    ROOT = os.path.realpath(args.root)
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = self_signed(tmp)
        config = QuicConfiguration(is_client=False, alpn_protocols=["hq-interop"])
        config.load_cert_chain(cert, key)
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog:
            config.secrets_log_file = open(keylog, "a")
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
