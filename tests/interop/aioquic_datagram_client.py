#!/usr/bin/env python3
"""DATAGRAM frames (RFC 9221) with the unmodified aioquic library, against an echo.

`python3 aioquic_datagram_client.py --port PORT [--count N] [--size BYTES]`: connects to
127.0.0.1:PORT over hq-interop announcing max_datagram_frame_size 65536, sends N numbered
datagrams of BYTES bytes once the handshake completes, and waits (at most 10 s) for the server
to echo them (`recoup serve --datagram-frame-size ...` does on hq-interop connections). Prints
`sent N echoed M peer_max_datagram_frame_size P` and exits non-zero unless every datagram came
back unchanged: on loopback nothing is lost, so a missing echo is a failure, not bad luck.
Certificates are not checked (test servers are self-signed).
"""

import argparse
import asyncio
import ssl
import sys

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, DatagramFrameReceived


class EchoClient(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.echoed = {}
        self.expected = 0
        self.all_back = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event):
        if isinstance(event, DatagramFrameReceived):
            seq = int.from_bytes(event.data[:4], "big")
            self.echoed[seq] = event.data
            if len(self.echoed) >= self.expected and not self.all_back.done():
                self.all_back.set_result(None)
        elif isinstance(event, ConnectionTerminated) and not self.all_back.done():
            self.all_back.set_exception(
                RuntimeError(f"connection closed: code {event.error_code} {event.reason_phrase!r}")
            )


def payload(seq, size):
    return seq.to_bytes(4, "big") + bytes((seq + i) % 251 for i in range(size - 4))


async def run(args):
    config = QuicConfiguration(
        is_client=True, alpn_protocols=["hq-interop"], max_datagram_frame_size=65536
    )
    config.verify_mode = ssl.CERT_NONE
    async with connect(
        "127.0.0.1", args.port, configuration=config, create_protocol=EchoClient
    ) as client:
        peer_max = client._quic._remote_max_datagram_frame_size
        client.expected = args.count
        for seq in range(args.count):
            client._quic.send_datagram_frame(payload(seq, args.size))
            client.transmit()
            # A little spacing, so that the echo's queue is never the limit under test.
            await asyncio.sleep(0.002)
        try:
            await asyncio.wait_for(client.all_back, timeout=10)
        except asyncio.TimeoutError:
            pass
        wrong = [s for s, d in client.echoed.items() if d != payload(s, args.size)]
        echoed = len(client.echoed)
        print(f"sent {args.count} echoed {echoed} peer_max_datagram_frame_size {peer_max}")
        if wrong:
            print(f"echoes differ from what was sent: {sorted(wrong)[:10]}", file=sys.stderr)
        return len(client.echoed) == args.count and not wrong


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    if args.size < 4:
        parser.error("--size must be at least 4 (the sequence number)")
    sys.exit(0 if asyncio.run(run(args)) else 1)


if __name__ == "__main__":
    main()
