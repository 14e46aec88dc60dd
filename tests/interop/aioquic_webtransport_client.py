#!/usr/bin/env python3
"""WebTransport over HTTP/3 (draft-ietf-webtrans-http3) with the unmodified aioquic library,
against `recoup serve --datagram-frame-size ...`'s echo session.

`python3 aioquic_webtransport_client.py --port PORT [--path /webtransport/echo] [--case CASE]`
connects to 127.0.0.1:PORT over HTTP/3 (`H3Connection(enable_webtransport=True)`), first asks
for a session at an unknown path (must be answered 404), then opens the session at --path and,
for --case:

- `echo` (default): one bidirectional stream echoed byte for byte, one unidirectional stream
  echoed on a new unidirectional stream, --datagrams datagrams echoed (on loopback, all of
  them, or --min-datagrams), a datagram for a session that does not exist (not echoed), then
  CLOSE_WEBTRANSPORT_SESSION and FIN on the CONNECT stream, which the server must answer with
  FIN;
- `malformed-capsule`: a CLOSE_WEBTRANSPORT_SESSION too short for its error code, which the
  server must answer by resetting the CONNECT stream with H3_MESSAGE_ERROR (RFC 9297 §3.3);
- `drain`: waits (at most 30 s) for the server to end the session, as `recoup serve` does on
  SIGTERM: it must end the CONNECT stream with FIN (the capsules before it are reported);
- `moq-malformed`: against `recoup serve --moq` (--path /moq), a bidirectional stream whose
  first bytes are no MoQ stream type moq-lite knows: the server must close the session with
  CLOSE_WEBTRANSPORT_SESSION carrying a non-zero code, and FIN;
- `no-settings`: the client does not offer WebTransport in its SETTINGS, yet sends the CONNECT:
  the session must not be accepted (h3-webtransport closes the connection with
  H3_SETTINGS_ERROR).

Prints one JSON line of what happened; exits non-zero, with the reason on stderr, when the
server did not behave as described. Certificates are not checked (test servers are
self-signed).
"""

import argparse
import asyncio
import json
import ssl
import struct
import sys

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import encode_uint_var
from aioquic.h3.connection import FrameType, H3Connection
from aioquic.h3.events import (
    DatagramReceived,
    DataReceived,
    HeadersReceived,
    WebTransportStreamDataReceived,
)
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamReset

# draft-ietf-webtrans-http3, IANA Considerations and RFC 9114 §8.1.
CLOSE_WEBTRANSPORT_SESSION = 0x2843
H3_MESSAGE_ERROR = 0x10E
H3_SETTINGS_ERROR = 0x109


class Client(QuicConnectionProtocol):
    def __init__(self, *args, webtransport=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.http = H3Connection(self._quic, enable_webtransport=webtransport)
        self.headers = {}
        self.streams = {}  # stream id -> [bytes, ended]
        self.connect_data = {}  # CONNECT stream id -> [bytes, ended]
        self.resets = {}
        self.datagrams = []
        self.closed = None
        self.changed = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, StreamReset):
            self.resets[event.stream_id] = event.error_code
        elif isinstance(event, ConnectionTerminated):
            self.closed = (event.error_code, event.reason_phrase)
        for e in self.http.handle_event(event):
            if isinstance(e, HeadersReceived):
                self.headers[e.stream_id] = dict(e.headers)
            elif isinstance(e, WebTransportStreamDataReceived):
                s = self.streams.setdefault(e.stream_id, [b"", False])
                s[0] += e.data
                s[1] |= e.stream_ended
            elif isinstance(e, DataReceived):
                s = self.connect_data.setdefault(e.stream_id, [b"", False])
                s[0] += e.data
                s[1] |= e.stream_ended
            elif isinstance(e, DatagramReceived):
                self.datagrams.append((e.stream_id, e.data))
        self.changed.set()

    async def until(self, what, timeout):
        """Waits until `what()` is true; False after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not what():
            left = deadline - loop.time()
            if left <= 0:
                return False
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except asyncio.TimeoutError:
                return what()
        return True

    def open_session(self, authority, path):
        stream_id = self._quic.get_next_available_stream_id()
        self.http.send_headers(
            stream_id,
            [
                (b":method", b"CONNECT"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", path.encode()),
                (b":protocol", b"webtransport"),
                (b"origin", f"https://{authority}".encode()),
            ],
        )
        self.transmit()
        return stream_id


def pattern(seed, size):
    return bytes((seed * 7 + i * 13) % 256 for i in range(size))


def varint(data, i):
    """The QUIC varint at `i` (RFC 9000 §16) and the index after it."""
    n = 1 << (data[i] >> 6)
    value = data[i] & 0x3F
    for b in data[i + 1 : i + n]:
        value = (value << 8) | b
    return value, i + n


def capsule(kind, value):
    return encode_uint_var(kind) + encode_uint_var(len(value)) + value


async def run(args):
    config = QuicConfiguration(is_client=True, alpn_protocols=["h3"], max_datagram_frame_size=65536)
    config.verify_mode = ssl.CERT_NONE
    authority = f"127.0.0.1:{args.port}"
    report = {"case": args.case}
    problems = []

    def create(*a, **kw):
        return Client(*a, webtransport=args.case != "no-settings", **kw)

    async with connect("127.0.0.1", args.port, configuration=config, create_protocol=create) as c:
        if args.case == "no-settings":
            sid = c.open_session(authority, args.path)
            await c.until(lambda: c.closed or sid in c.headers, 10)
            report["closed"] = c.closed
            report["status"] = c.headers.get(sid, {}).get(b":status", b"").decode()
            if report["status"] == "200":
                problems.append("a session without WebTransport SETTINGS was accepted")
            if not c.closed or c.closed[0] != H3_SETTINGS_ERROR:
                problems.append(f"expected H3_SETTINGS_ERROR, got close {c.closed}")
            return report, problems

        # An unknown path first: 404, and the connection stays usable for the real session.
        bad = c.open_session(authority, args.path + "-nope")
        await c.until(lambda: bad in c.headers or c.closed, 10)
        report["unknown_path_status"] = c.headers.get(bad, {}).get(b":status", b"").decode()
        if report["unknown_path_status"] != "404":
            problems.append(f"unknown path answered {report['unknown_path_status']!r}, not 404")

        sid = c.open_session(authority, args.path)
        await c.until(lambda: sid in c.headers or c.closed, 10)
        report["status"] = c.headers.get(sid, {}).get(b":status", b"").decode()
        if report["status"] != "200":
            problems.append(f"session answered {report['status']!r}: {c.closed}")
            return report, problems

        if args.case == "drain":
            print("session open", file=sys.stderr, flush=True)
            await c.until(lambda: c.connect_data.get(sid, [b"", False])[1] or c.closed, 30)
            report["server_fin"] = bool(c.connect_data.get(sid, [b"", False])[1])
            # The capsules the server sent before its FIN (aioquic strips the DATA frames).
            report["server_capsules"] = c.connect_data.get(sid, [b""])[0].hex()
            if not report["server_fin"]:
                problems.append(f"the server did not end the session: {c.resets} {c.closed}")
            await c.until(lambda: c.closed, 10)
            report["closed"] = c.closed
            return report, problems

        if args.case == "malformed-capsule":
            # A CLOSE_WEBTRANSPORT_SESSION whose value cannot hold its 32-bit error code.
            c.http.send_data(sid, capsule(CLOSE_WEBTRANSPORT_SESSION, b"\x00\x01"), False)
            c.transmit()
            await c.until(lambda: sid in c.resets or c.closed, 10)
            report["connect_reset"] = c.resets.get(sid)
            if c.resets.get(sid) != H3_MESSAGE_ERROR:
                problems.append(f"CONNECT stream not reset with H3_MESSAGE_ERROR: {c.resets}")
            return report, problems

        if args.case == "moq-malformed":
            bad_stream = c.http.create_webtransport_stream(sid, is_unidirectional=False)
            # A 2-byte varint stream type (0x3fff) that no moq-lite version defines.
            c._quic.send_stream_data(bad_stream, b"\x7f\xff" + b"\x00" * 16, end_stream=False)
            c.transmit()
            await c.until(lambda: c.connect_data.get(sid, [b"", False])[1] or c.closed, 10)
            data, fin = c.connect_data.get(sid, [b"", False])
            report["server_fin"] = fin
            report["server_capsules"] = data.hex()
            code = None
            if len(data) >= 2:
                kind, i = varint(data, 0)
                _, i = varint(data, i)
                if kind == CLOSE_WEBTRANSPORT_SESSION and len(data) >= i + 4:
                    code = struct.unpack(">I", data[i : i + 4])[0]
            report["close_code"] = code
            if not fin or not code:
                problems.append(f"no CLOSE_WEBTRANSPORT_SESSION with an error code and FIN: {data}")
            return report, problems

        bidi_data = pattern(1, args.stream_bytes)
        bidi = c.http.create_webtransport_stream(sid, is_unidirectional=False)
        # aioquic 1.7.2 parses what arrives on a WebTransport stream it opened as HTTP/3 frames
        # (its WebTransport support is written for servers): mark the stream as its own
        # peer's would be, so the echo is delivered as WebTransport data.
        with c.http._get_or_create_stream(bidi) as local:
            local.frame_type, local.session_id = FrameType.WEBTRANSPORT_STREAM, sid
        c._quic.send_stream_data(bidi, bidi_data, end_stream=True)
        uni_data = pattern(2, args.stream_bytes)
        uni = c.http.create_webtransport_stream(sid, is_unidirectional=True)
        c._quic.send_stream_data(uni, uni_data, end_stream=True)
        c.transmit()

        def uni_echo():
            return [s for s, (_, ended) in c.streams.items() if s % 4 == 3 and ended]

        await c.until(lambda: c.streams.get(bidi, [b"", False])[1] and uni_echo(), 20)
        report["bidi_bytes"] = len(c.streams.get(bidi, [b""])[0])
        if c.streams.get(bidi, [b""])[0] != bidi_data:
            problems.append(f"bidirectional echo differs: {report['bidi_bytes']} bytes")
        back = uni_echo()
        report["uni_bytes"] = len(c.streams[back[0]][0]) if back else 0
        if not back or c.streams[back[0]][0] != uni_data:
            problems.append(f"unidirectional echo missing or different: {report['uni_bytes']}")

        # A datagram for a session that does not exist (a stream never opened): not echoed.
        c.http.send_datagram(sid + 400, b"stray")
        for n in range(args.datagrams):
            c.http.send_datagram(sid, n.to_bytes(4, "big") + pattern(n, args.datagram_size - 4))
            c.transmit()
            await asyncio.sleep(0.002)
        await c.until(lambda: len(c.datagrams) >= args.datagrams, 5)
        echoed = {d[:4] for s, d in c.datagrams if s == sid}
        wrong = [
            d
            for s, d in c.datagrams
            if s != sid or d[4:] != pattern(int.from_bytes(d[:4], "big"), args.datagram_size - 4)
        ]
        report["datagrams_sent"] = args.datagrams
        report["datagrams_echoed"] = len(echoed)
        if len(echoed) < args.min_datagrams:
            problems.append(f"{len(echoed)} of {args.datagrams} datagrams echoed")
        if wrong:
            problems.append(f"{len(wrong)} echoed datagrams differ or name another session")

        # Close: CLOSE_WEBTRANSPORT_SESSION, then FIN (draft-ietf-webtrans-http3, Session
        # Termination); the server answers with FIN.
        c.http.send_data(
            sid, capsule(CLOSE_WEBTRANSPORT_SESSION, struct.pack(">I", 7) + b"bye"), True
        )
        c.transmit()
        await c.until(lambda: c.connect_data.get(sid, [b"", False])[1] or c.closed, 10)
        report["server_fin"] = bool(c.connect_data.get(sid, [b"", False])[1])
        if not report["server_fin"]:
            problems.append(f"the server did not end the CONNECT stream: {c.resets} {c.closed}")
        report["closed"] = c.closed
    return report, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/webtransport/echo")
    parser.add_argument(
        "--case",
        choices=["echo", "malformed-capsule", "drain", "no-settings", "moq-malformed"],
        default="echo",
    )
    parser.add_argument("--stream-bytes", type=int, default=100_000)
    parser.add_argument("--datagrams", type=int, default=100)
    parser.add_argument("--datagram-size", type=int, default=500)
    parser.add_argument("--min-datagrams", type=int, default=None)
    args = parser.parse_args()
    if args.min_datagrams is None:
        args.min_datagrams = args.datagrams
    report, problems = asyncio.run(run(args))
    report["ok"] = not problems
    print(json.dumps(report))
    for p in problems:
        print(f"aioquic-webtransport: {p}", file=sys.stderr)
    sys.exit(0 if not problems else 1)


if __name__ == "__main__":
    main()
