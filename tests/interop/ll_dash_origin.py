#!/usr/bin/env python3
"""A low-latency DASH origin over HTTP/1.1: an encoder uploads, players (or an edge) download
while the upload still runs.

    python3 ll_dash_origin.py --root SITE [--listen 127.0.0.1:0]

Prints `listening HOST:PORT` once it accepts. What it does:
- `PUT` (or `POST`) of any path under `/live/`: the body is stored in memory as it arrives, read
  with chunked transfer coding or a Content-Length. ffmpeg's dash muxer in streaming mode
  (`-streaming 1 -method PUT`) uploads each CMAF segment this way, one chunk per fragment, while
  it encodes; it re-uploads the manifest whole after each segment.
- `GET` of an uploaded path: 200 with chunked transfer coding, the bytes received so far at once
  and the rest as they arrive, until the upload ends. That is what lets a player fetch a segment
  at its availability start time and play its first fragments before the encoder has finished
  it (ISO/IEC 23009-1 Annex K's low-latency operation). An upload that breaks off ends the
  response without its last chunk, so the client sees a broken body, not a short segment.
- `DELETE` of an uploaded path forgets it (ffmpeg removes segments that left its window).
- `GET /time`: this machine's UTC time in ISO 8601 with milliseconds, for the manifest's
  UTCTiming (`urn:mpeg:dash:utc:http-iso:2014`), so players measure live latency against the
  encoder's clock.
- Any other `GET`: the file under --root (the player page, dash.js), else 404.

Manifests and the time are sent with `Cache-Control: no-cache`; segments may be cached.
"""

import argparse
import datetime
import mimetypes
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# How long a GET waits for the next bytes of an upload before giving up on it.
STALL_TIMEOUT_S = 10.0


class Upload:
    """One uploaded path: its bytes so far and whether the upload ended (or broke off)."""

    def __init__(self):
        self.data = bytearray()
        self.done = False
        self.broken = False
        self.cond = threading.Condition()

    def append(self, chunk):
        with self.cond:
            self.data += chunk
            self.cond.notify_all()

    def finish(self, broken=False):
        with self.cond:
            self.done = True
            self.broken = broken
            self.cond.notify_all()

    def read_from(self, offset):
        """Bytes after `offset` once there are any (or the upload ended), and whether it ended:
        (bytes, done, broken); None if nothing came for STALL_TIMEOUT_S."""
        with self.cond:
            ready = self.cond.wait_for(
                lambda: len(self.data) > offset or self.done, timeout=STALL_TIMEOUT_S
            )
            if not ready:
                return None
            return bytes(self.data[offset:]), self.done, self.broken


class Store:
    def __init__(self):
        self.lock = threading.Lock()
        self.uploads = {}

    def start(self, path):
        upload = Upload()
        with self.lock:
            self.uploads[path] = upload
        return upload

    def get(self, path):
        with self.lock:
            return self.uploads.get(path)

    def delete(self, path):
        with self.lock:
            return self.uploads.pop(path, None) is not None


def content_type(path):
    if path.endswith(".mpd"):
        return "application/dash+xml"
    if path.endswith((".m4s", ".mp4")):
        return "video/mp4"
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ll-dash-origin"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("ll-dash-origin: " + fmt % args + "\n")

    def path_only(self):
        return self.path.split("?", 1)[0]

    def do_PUT(self):
        path = self.path_only()
        if not path.startswith("/live/"):
            self.send_error(403, f"uploads go under /live/, not {path}")
            return
        upload = self.server.store.start(path)
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self.read_chunked(upload)
            else:
                length = int(self.headers.get("Content-Length", "0"))
                while length > 0:
                    chunk = self.rfile.read1(min(length, 65536))
                    if not chunk:
                        raise ConnectionError(f"upload of {path} ended {length} bytes short")
                    upload.append(chunk)
                    length -= len(chunk)
        except (ConnectionError, ValueError, OSError) as e:
            upload.finish(broken=True)
            self.log_message("upload of %s broke off: %s", path, e)
            self.close_connection = True
            return
        upload.finish()
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT

    def read_chunked(self, upload):
        """Reads a chunked body (RFC 9112 §7.1) into `upload` as each chunk arrives."""
        while True:
            line = self.rfile.readline(1024)
            if not line:
                raise ConnectionError("upload closed inside its chunked body")
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                # Trailer fields, then the empty line.
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return
            remaining = size
            while remaining > 0:
                chunk = self.rfile.read1(remaining)
                if not chunk:
                    raise ConnectionError("upload closed inside a chunk")
                upload.append(chunk)
                remaining -= len(chunk)
            self.rfile.readline(16)

    def do_DELETE(self):
        found = self.server.store.delete(self.path_only())
        self.send_response(204 if found else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        path = self.path_only()
        if path == "/time":
            now = datetime.datetime.now(datetime.timezone.utc)
            body = now.isoformat(timespec="milliseconds").replace("+00:00", "Z").encode()
            self.send_small(200, "text/plain", body, cache=False)
            return
        upload = self.server.store.get(path)
        if upload is not None:
            self.send_upload(path, upload)
            return
        file = os.path.realpath(os.path.join(self.server.root, path.lstrip("/")))
        if not file.startswith(self.server.root + os.sep) or not os.path.isfile(file):
            self.send_small(404, "text/plain", f"no {path}\n".encode(), cache=False)
            return
        with open(file, "rb") as f:
            body = f.read()
        self.send_small(200, content_type(file), body, cache=True)

    def send_small(self, status, ctype, body, cache):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if not cache:
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(body)

    def send_upload(self, path, upload):
        self.send_response(200)
        self.send_header("Content-Type", content_type(path))
        self.send_header("Transfer-Encoding", "chunked")
        if path.endswith(".mpd"):
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        offset = 0
        while True:
            got = upload.read_from(offset)
            if got is None:
                self.log_message("upload of %s stalled; response ends unfinished", path)
                self.close_connection = True
                return
            data, done, broken = got
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                offset += len(data)
            if done:
                if broken:
                    self.close_connection = True
                else:
                    self.wfile.write(b"0\r\n\r\n")
                return


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", required=True, help="static files (the player page)")
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    try:
        server = ThreadingHTTPServer((host, int(port)), Handler)
    except (OSError, ValueError) as e:
        sys.exit(f"ll-dash-origin: cannot listen on {args.listen}: {e}")
    server.daemon_threads = True
    server.store = Store()
    server.root = os.path.realpath(args.root)
    server.verbose = args.verbose
    print(f"listening {server.server_address[0]}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
