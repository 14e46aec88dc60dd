#!/usr/bin/env python3
"""Live-stream player over hq-interop (HTTP/0.9 over QUIC) with the unmodified aioquic library.

Requests `/live/NAME?...` from `recoup serve`, parses the frames as they arrive and checks every
one (header magic and version, CRC-32 of the payload, sequence numbers 0, 1, 2 ... without gaps,
the stream ending on a frame boundary with FIN, and, when the query names the duration, as many
frames as the duration holds). Playback is measured as recoup's simulated player does
(crates/recoup-apps/src/live.rs, LivePlayer): playback starts once the start-up buffer is
full, then one frame per frame interval; a frame not complete at its turn freezes the picture
until the rebuffer amount has arrived (or the stream ended). Prints one JSON summary on stdout
and exits non-zero if any frame is bad or missing.

    python3 live_player.py --url "https://127.0.0.1:4433/live/cam?bitrate=4Mbps&duration=20s"
    python3 live_player.py --host 127.0.0.1 --port 4433 --path /live/cam --qlog-dir qlog

Frame format (32-byte header, big-endian; crates/recoup-apps/src/frame.rs):
magic "RCPF", version 1, kind (0 P, 1 I), 2 reserved bytes, sequence u64, capture time u64
(microseconds, the server's clock), payload length u32, CRC-32 of the payload u32.
"""

import argparse
import asyncio
import json
import os
import ssl
import struct
import sys
import time
import zlib
from collections import deque
from urllib.parse import parse_qs, urlparse

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamDataReceived, StreamReset
from aioquic.quic.logger import QuicFileLogger

HEADER = struct.Struct(">4sBBHQQII")
MAGIC = b"RCPF"
VERSION = 1
MAX_PAYLOAD = 1 << 30
NS = 1_000_000_000


class FrameChecker:
    """Parses and verifies frames from the in-order stream bytes as they arrive.

    A bad checksum or a sequence gap is counted and parsing goes on (the header still says where
    the next frame starts); a bad header loses the framing and stops parsing.
    """

    def __init__(self):
        self.head = bytearray()
        self.current = None  # (sequence, capture_us, remaining, crc, expected_crc)
        self.next_sequence = 0
        self.frames = 0
        self.bytes = 0
        self.bad_frames = 0
        self.missing = 0
        self.errors = []
        self.framing_lost = False
        self.repeat = False  # the frame being read repeats an earlier sequence number
        self.captures = []  # capture_us of every good frame, in order
        self.prefix = bytearray()  # the stream's first bytes, to show a server's error text

    def error(self, message):
        if len(self.errors) < 20:
            self.errors.append(message)

    def push(self, data):
        """Consumes `data`; returns how many good frames it completed."""
        if len(self.prefix) < 512:
            self.prefix += data[: 512 - len(self.prefix)]
        self.bytes += len(data)
        done = 0
        view = memoryview(data)
        while view and not self.framing_lost:
            if self.current is None:
                take = min(HEADER.size - len(self.head), len(view))
                self.head += view[:take]
                view = view[take:]
                if len(self.head) < HEADER.size:
                    break
                done += self.start_frame(bytes(self.head))
                self.head.clear()
                continue
            sequence, capture, remaining, crc, expected = self.current
            take = min(remaining, len(view))
            crc = zlib.crc32(view[:take], crc)
            view = view[take:]
            remaining -= take
            self.current = (sequence, capture, remaining, crc, expected)
            if remaining == 0:
                done += self.end_frame()
        return done

    def start_frame(self, head):
        magic, version, kind, reserved, sequence, capture, length, checksum = HEADER.unpack(head)
        if magic != MAGIC or version != VERSION or kind > 1 or reserved or length > MAX_PAYLOAD:
            self.bad_frames += 1
            self.framing_lost = True
            self.error(f"bad header where frame {self.next_sequence} should start: {head.hex()}")
            return 0
        if sequence > self.next_sequence:
            self.missing += sequence - self.next_sequence
            self.error(f"frames {self.next_sequence}..{sequence - 1} missing")
        self.repeat = sequence < self.next_sequence
        if self.repeat:
            # Counted bad once here; its payload is still read to keep the framing.
            self.bad_frames += 1
            self.error(f"frame {sequence} again after frame {self.next_sequence - 1}")
        self.next_sequence = max(self.next_sequence, sequence + 1)
        self.current = (sequence, capture, length, 0, checksum)
        return self.end_frame() if length == 0 else 0

    def end_frame(self):
        sequence, capture, _, crc, expected = self.current
        self.current = None
        if self.repeat:
            return 0
        if crc != expected:
            self.bad_frames += 1
            self.error(f"frame {sequence}: CRC-32 {crc:08x}, header says {expected:08x}")
            return 0
        self.frames += 1
        self.captures.append(capture)
        return 1

    def finish(self, fin):
        """The stream ended (`fin`) or was given up on: checks it ended on a frame boundary."""
        if not fin:
            self.error("the stream did not end (no FIN)")
        elif self.current is not None or self.head:
            self.bad_frames += 1
            self.error(f"the stream ended inside frame {self.next_sequence - 1}")


def frames_in(duration_ns, fps):
    """Whole frames in a duration at `fps`, rounded up, at least one (recoup-apps' frames_in)."""
    return max(1, -(-duration_ns * fps // NS))


class Player:
    """recoup-apps' LivePlayer on arrival times in nanoseconds."""

    def __init__(self, start, fps, startup_ns, rebuffer_ns):
        self.start = start
        self.interval = NS // fps
        self.startup_frames = frames_in(startup_ns, fps)
        self.rebuffer_frames = frames_in(rebuffer_ns, fps)
        self.buffer = deque()
        self.state = ("startup", None)
        self.ended_at = None
        self.played = 0
        self.startup_delay = None
        self.freezes = 0
        self.frozen = 0
        self.session = 0

    def buffered_at(self, need):
        if len(self.buffer) >= need:
            return self.buffer[need - 1]
        if self.ended_at is None:
            return None
        return max(self.buffer[-1], self.ended_at) if self.buffer else self.ended_at

    def advance(self, now):
        while True:
            state, at = self.state
            if state == "startup":
                t = self.buffered_at(self.startup_frames)
                if t is not None and not self.buffer:
                    self.state = ("ended", None)
                elif t is not None and t <= now:
                    self.startup_delay = t - self.start
                    self.state = ("playing", t)
                else:
                    break
            elif state == "playing":
                if at > now:
                    break
                if self.buffer and self.buffer[0] <= at:
                    self.buffer.popleft()
                    self.played += 1
                    self.state = ("playing", at + self.interval)
                elif not self.buffer and self.ended_at is not None and self.ended_at <= at:
                    self.state = ("ended", None)
                else:
                    self.freezes += 1
                    self.state = ("stalled", at)
            elif state == "stalled":
                t = self.buffered_at(self.rebuffer_frames)
                if t is None or max(t, at) > now:
                    break
                resume = max(t, at)
                self.frozen += resume - at
                self.state = ("playing", resume) if self.buffer else ("ended", None)
            else:
                break

    def arrive(self, now, frames, fin):
        """Bytes arrived at `now`, completing `frames` frames (and ending the stream if `fin`)."""
        # As the simulated player: what was due strictly before this arrival plays first.
        self.advance(now - 1)
        self.buffer.extend([now] * frames)
        if fin:
            self.ended_at = now

    def finish(self, now):
        self.advance(now)
        state, at = self.state
        if state == "stalled":
            self.frozen += now - at
            self.state = ("stalled", now)
        self.session = now - self.start


class LiveClient(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stream_id = None
        self.checker = FrameChecker()
        self.arrivals = []  # (monotonic ns, good frames completed, fin)
        self.done = None
        self.started = None

    async def play(self, path):
        self.stream_id = self._quic.get_next_available_stream_id()
        self.done = asyncio.get_running_loop().create_future()
        self.started = time.monotonic_ns()
        self._quic.send_stream_data(self.stream_id, f"GET {path}\r\n".encode(), end_stream=True)
        self.transmit()
        return await self.done

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived) and event.stream_id == self.stream_id:
            now = time.monotonic_ns()
            frames = self.checker.push(event.data)
            self.arrivals.append((now, frames, event.end_stream))
            if event.end_stream and not self.done.done():
                self.done.set_result(None)
        elif isinstance(event, StreamReset) and event.stream_id == self.stream_id:
            if not self.done.done():
                self.done.set_exception(
                    RuntimeError(f"stream reset by the server, code {event.error_code}")
                )
        elif isinstance(event, ConnectionTerminated) and self.done and not self.done.done():
            self.done.set_exception(
                RuntimeError(f"connection closed: code {event.error_code} {event.reason_phrase!r}")
            )


def target(args):
    """(host, port, path) from --url or --host/--port/--path."""
    if args.url:
        url = urlparse(args.url)
        if url.scheme != "https" or not url.hostname or not url.port:
            raise SystemExit(f"expected --url https://HOST:PORT/live/NAME?..., got {args.url}")
        path = url.path + (f"?{url.query}" if url.query else "")
        return url.hostname, url.port, path
    if not args.port:
        raise SystemExit("give --url, or --port (with --host and --path)")
    return args.host, args.port, args.path


def stream_fps(args, query, captures):
    """The frame rate: --fps, else the query's, else from the capture times of the frames."""
    if args.fps:
        return args.fps
    if "fps" in query:
        return int(query["fps"][0])
    if len(captures) >= 2 and captures[-1] > captures[0]:
        return max(1, round((len(captures) - 1) * 1e6 / (captures[-1] - captures[0])))
    return 30


def parse_duration_ns(text):
    """recoup's duration syntax (`20s`, `500ms`) in nanoseconds; None if not understood."""
    for unit, scale in (("ms", 10**6), ("us", 10**3), ("ns", 1), ("s", NS)):
        if text.endswith(unit):
            try:
                return round(float(text[: -len(unit)]) * scale)
            except ValueError:
                return None
    return None


async def run(args):
    host, port, path = target(args)
    query = parse_qs(urlparse(path).query)
    config = QuicConfiguration(is_client=True, alpn_protocols=["hq-interop"])
    if args.insecure:
        config.verify_mode = ssl.CERT_NONE
    if args.ca:
        config.load_verify_locations(args.ca)
    secrets = args.secrets_log or os.environ.get("SSLKEYLOGFILE")
    if secrets:
        config.secrets_log_file = open(secrets, "a")
    if args.qlog_dir:
        os.makedirs(args.qlog_dir, exist_ok=True)
        config.quic_logger = QuicFileLogger(args.qlog_dir)
    failure = None
    async with connect(host, port, configuration=config, create_protocol=LiveClient) as client:
        try:
            await asyncio.wait_for(client.play(path), args.timeout)
        except Exception as e:  # the summary still reports what arrived
            failure = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        client.close()
        await client.wait_closed()
    return client, failure, query


def summarize(args, client, failure, query):
    checker = client.checker
    fin = any(fin for _, _, fin in client.arrivals)
    checker.finish(fin)
    fps = stream_fps(args, query, checker.captures)
    player = Player(client.started, fps, round(args.startup * 1e6), round(args.rebuffer * 1e6))
    for now, frames, end in client.arrivals:
        player.arrive(now, frames, end)
    last = client.arrivals[-1][0] if client.arrivals else time.monotonic_ns()
    player.finish(last)
    expected = None
    if "duration" in query:
        duration = parse_duration_ns(query["duration"][0])
        if duration is not None:
            expected = frames_in(duration, fps)
    received = checker.frames + checker.bad_frames
    if (
        fin
        and not checker.framing_lost
        and expected is not None
        and checker.next_sequence < expected
    ):
        checker.missing += expected - checker.next_sequence
        checker.error(f"frames {checker.next_sequence}..{expected - 1} never came")
    if checker.framing_lost and checker.frames == 0 and checker.prefix.startswith(b"error:"):
        failure = "server refused: " + checker.prefix.decode("utf-8", "replace").strip()
    session = player.session / NS
    ok = failure is None and fin and checker.frames > 0 and not checker.bad_frames
    ok = ok and not checker.missing and not checker.errors
    summary = {
        "ok": ok,
        "frames": checker.frames,
        "expected_frames": expected,
        "bytes": checker.bytes,
        "bad_frames": checker.bad_frames,
        "missing_frames": checker.missing,
        "frames_received": received,
        "frames_played": player.played,
        "fps": fps,
        "startup_ms": None if player.startup_delay is None else player.startup_delay / 1e6,
        "freezes": player.freezes,
        "frozen_ms": player.frozen / 1e6,
        "freezes_per_100s": player.freezes * 100 / session if session > 0 else None,
        "frozen_ms_per_100s": player.frozen / 1e6 * 100 / session if session > 0 else None,
        "duration": session,
        "fin": fin,
        "errors": checker.errors,
        "failure": failure,
    }
    return summary, ok


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="https://HOST:PORT/live/NAME?bitrate=4Mbps&duration=20s")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--path", default="/live/stream", help="request path with its query")
    parser.add_argument("--insecure", action="store_true", help="do not check the certificate")
    parser.add_argument("--ca", help="PEM file of certificates to trust")
    parser.add_argument("--qlog-dir", help="write aioquic's qlog here, one file per connection")
    parser.add_argument("--secrets-log", help="append TLS secrets here (default $SSLKEYLOGFILE)")
    parser.add_argument("--fps", type=int, help="frame rate (default: the query's, else measured)")
    parser.add_argument("--startup", type=float, default=1000, help="start-up buffer, ms")
    parser.add_argument("--rebuffer", type=float, default=500, help="rebuffer after a freeze, ms")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after this, s")
    args = parser.parse_args()
    try:
        client, failure, query = asyncio.run(run(args))
    except Exception as e:  # report, do not hide: the tests show this output
        print(f"live-player: failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    summary, ok = summarize(args, client, failure, query)
    print(json.dumps(summary))
    if not ok:
        failure = summary["failure"]
        for line in ([failure] if failure else []) + summary["errors"]:
            print(f"live-player: {line}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
