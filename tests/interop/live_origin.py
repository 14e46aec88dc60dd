#!/usr/bin/env python3
"""An HTTP/1.1 live origin: recoup's live frames, stamped with the time the origin sends them.

`python3 live_origin.py --root DIR [--listen 127.0.0.1:0] [--log-dir DIR]` prints `listening on
127.0.0.1:PORT` and serves until killed:

    GET /live/NAME?bitrate=4Mbps&fps=30&gop=30&duration=20s&seed=1
        a chunked response of live video frames (recoup's frame format, crates/recoup-apps/src/
        frame.rs: 32-byte header with the sequence number, the capture time and the payload's
        CRC-32), frame i written at start + i/fps, each in one chunk the moment it is stamped.
        The capture time is the wall clock (microseconds since the Unix epoch), so a client on
        the same machine measures each frame's delay from the origin to it. Sizes follow
        recoup's live encoder: mean bitrate / 8 / fps bytes with the header, a key frame every
        `gop` frames `key_ratio` (5) times larger than the others, ±10 % noise drawn from `seed`.
        With --log-dir, every frame sent is a JSON line (seq, capture_us, bytes) in
        LOG_DIR/NAME.jsonl: what a client of that stream should have received.
    GET/HEAD anything else
        the file under --root (http.server's static files).

The payload bytes are a pure function of (seed, sequence): every relay in front of this origin
is handed the same bytes. The benchmark tests/interop/recovery_bench.py writes the same frames
as static files (`write_frame_files`) for its frame-sized objects.
"""

import argparse
import functools
import itertools
import json
import os
import random
import re
import socket
import struct
import sys
import threading
import time
import zlib
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

HEADER = struct.Struct(">4sBBHQQII")
MAGIC = b"RCPF"
VERSION = 1
KIND_P, KIND_I = 0, 1
KEY_RATIO = 5.0
SIZE_NOISE = 0.1


def parse_rate(text):
    """Bits per second from `4Mbps`, `500kbps`, `2000000`."""
    m = re.fullmatch(r"([\d.]+)\s*(bps|kbps|Mbps|Gbps)?", text.strip())
    if not m:
        raise ValueError(f"not a bit rate: {text!r} (e.g. 4Mbps, 500kbps)")
    return (
        float(m.group(1)) * {"bps": 1, "kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, None: 1}[m.group(2)]
    )


def parse_duration(text):
    m = re.fullmatch(r"([\d.]+)\s*(ms|s)?", text.strip())
    if not m:
        raise ValueError(f"not a duration: {text!r} (e.g. 20s, 500ms)")
    return float(m.group(1)) * (0.001 if m.group(2) == "ms" else 1)


def frame_sizes(bitrate, fps, gop, seed):
    """Frame lengths (header included) of an endless stream, as recoup's live encoder sizes
    them: the mean of a GOP is bitrate / 8 / fps, a key frame KEY_RATIO times a P frame."""
    mean = bitrate / 8 / fps
    p_size = mean * gop / (gop - 1 + KEY_RATIO)
    rng = random.Random(seed)
    for i in itertools.count():
        size = p_size * (KEY_RATIO if i % gop == 0 else 1.0)
        size *= 1 + rng.uniform(-SIZE_NOISE, SIZE_NOISE)
        yield max(HEADER.size + 1, round(size)), KIND_I if i % gop == 0 else KIND_P


def payload(seed, seq, length):
    return random.Random(seed * 1_000_003 + seq).randbytes(length)


def encode_frame(seed, seq, kind, length, capture_us):
    body = payload(seed, seq, length - HEADER.size)
    head = HEADER.pack(MAGIC, VERSION, kind, 0, seq, capture_us, len(body), zlib.crc32(body))
    return head + body


def write_frame_files(directory, pattern, count, bitrate, fps, gop, seed):
    """The first `count` frames of the stream, each as a file named pattern % i (capture time
    0); returns their lengths."""
    sizes = []
    for i, (length, kind) in zip(range(count), frame_sizes(bitrate, fps, gop, seed)):
        with open(os.path.join(directory, pattern % i), "wb") as f:
            f.write(encode_frame(seed, i, kind, length, 0))
        sizes.append(length)
    return sizes


class Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_dir = None

    def log_message(self, fmt, *args):
        sys.stderr.write(f"origin: {self.address_string()} {fmt % args}\n")

    def do_GET(self):
        url = urlparse(self.path)
        if url.path.startswith("/live/"):
            self.live(url)
        else:
            super().do_GET()

    def live(self, url):
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            bitrate = parse_rate(query.get("bitrate", "4Mbps"))
            fps = int(query.get("fps", "30"))
            gop = int(query.get("gop", "30"))
            duration = parse_duration(query.get("duration", "20s"))
            seed = int(query.get("seed", "1"))
            if fps <= 0 or gop <= 0 or bitrate <= 0:
                raise ValueError("bitrate, fps and gop must be positive")
        except ValueError as e:
            self.send_error(400, f"bad live query: {e}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        log = None
        if self.log_dir:
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", url.path.rsplit("/", 1)[-1]) or "stream"
            log = open(os.path.join(self.log_dir, f"{name}.jsonl"), "w")
        frames = round(duration * fps)
        start = time.monotonic()
        try:
            for seq, (length, kind) in zip(range(frames), frame_sizes(bitrate, fps, gop, seed)):
                time.sleep(max(0.0, start + seq / fps - time.monotonic()))
                capture_us = time.time_ns() // 1000
                frame = encode_frame(seed, seq, kind, length, capture_us)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
                if log:
                    rec = {"seq": seq, "capture_us": capture_us, "bytes": length}
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as e:
            sys.stderr.write(f"origin: {url.path}: the relay went away: {e}\n")
            self.close_connection = True
        finally:
            if log:
                log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="directory of the static files")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--log-dir", help="one JSON-lines file of the frames sent per live stream")
    args = ap.parse_args()
    host, _, port = args.listen.rpartition(":")
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    Handler.log_dir = args.log_dir
    handler = functools.partial(Handler, directory=args.root)
    server = ThreadingHTTPServer((host, int(port)), handler)
    server.daemon_threads = True
    print(f"listening on {host}:{server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    server.shutdown()


if __name__ == "__main__":
    main()
