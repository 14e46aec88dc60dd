#!/usr/bin/env python3
"""Plays a recoup page in headless Chromium over HTTP/3: the live player (web/player.html), the
DASH player (web/dash/index.html, dash.js) or the WebTransport echo (web/webtransport.html).

Starts Debian's `chromium` headless with QUIC forced to the page's origin and the server's
certificate pinned by its SPKI hash, drives it through the DevTools protocol over a pipe
(`--remote-debugging-pipe`: no port, no websocket library), waits until the page publishes its
summary (`window.recoupResult`: `ok`, `failure`, `page_protocol`, `stream_protocol` (not on the
WebTransport page, which sets `webtransport`) and the page's own metrics), saves a screenshot
and prints one JSON line: the page's summary plus
`netlog`, what Chromium's own net log says about the QUIC session (the ALPN it negotiated and the
packets it exchanged), and for the live player `model_check`, the page's freezes recomputed from
its arrival times by live_player.py's model (the Python port of recoup's player). Exits
non-zero, with the reason on stderr, if Chromium is missing or fails, the page never reports
within --timeout, the page reports a failure (a stream not intact, a dash.js error), or HTTP/3
was not used.

    python3 chromium_player.py --cert cert.pem \\
        --url "https://127.0.0.1:4433/player.html?stream=/live/cam%3Fduration%3D20s" \\
        --screenshot player.png
    python3 chromium_player.py --cert cert.pem \\
        --url "https://127.0.0.1:4433/index.html?mpd=media/manifest.mpd" --screenshot dash.png

With --frames FILE the live player's frames are written one per line with their capture and
arrival times on the wall clock (tests/interop/recovery_bench.py's browser run).
"""

import argparse
import base64
import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlparse

from cryptography import x509
from cryptography.hazmat.primitives import serialization

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_player import NS, Player  # noqa: E402

# Resource Timing's nextHopProtocol for HTTP/3 (the ALPN token, RFC 9114 §3.1): the page
# and the stream must both have come over it.
HTTP3 = "h3"
PROTOCOLS = ("page_protocol", "stream_protocol")


def spki_hash(cert_pem):
    """Base64 SHA-256 of the certificate's SubjectPublicKeyInfo, as Chromium's pin list wants."""
    with open(cert_pem, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


class DevTools:
    """The DevTools protocol over Chromium's debugging pipe: NUL-separated JSON messages,
    commands written to the browser's fd 3, answers and events read from its fd 4."""

    def __init__(self, to_browser, from_browser):
        self.out = to_browser
        self.inp = from_browser
        self.buf = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None, timeout=30.0):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self.read(deadline)
            if reply is None:
                raise TimeoutError(f"no answer to {method} within {timeout} s")
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.inp], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed the debugging pipe (it exited)")
            self.buf += chunk
        message, _, self.buf = self.buf.partition(b"\0")
        return json.loads(message)

    def console(self):
        """What the page logged, threw and Chromium reported, for failure messages."""
        lines = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.consoleAPICalled":
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
                lines.append(f"console.{p['type']}: {args}")
            elif e.get("method") == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                lines.append(f"exception: {d.get('exception', {}).get('description', d['text'])}")
            elif e.get("method") == "Log.entryAdded":
                lines.append(f"{p['entry']['level']}: {p['entry']['text']}")
        return lines


def find_browser(args):
    browser = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        raise SystemExit(
            "chromium-player: no chromium found (install Debian's `chromium`; scripts/test.sh "
            "does as root, or set --chromium)"
        )
    return browser


def launch(args, browser, origin, profile, netlog):
    """Chromium, headless, with the debugging pipe on its fds 3 (in) and 4 (out)."""
    command = [
        browser,
        "--headless=new",
        "--no-sandbox",  # as root, Chromium refuses to start with its sandbox
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--hide-scrollbars",
        f"--window-size={args.window_size}",
        f"--user-data-dir={profile}",
        "--enable-quic",
        f"--origin-to-force-quic-on={origin}",
        f"--ignore-certificate-errors-spki-list={spki_hash(args.cert)}",
        f"--log-net-log={netlog}",
        "--remote-debugging-pipe",
        "about:blank",
    ]
    to_child, browser_in = os.pipe()
    browser_out, from_child = os.pipe()

    def pipe_fds():
        # In the child: its end of each pipe to fds 3 and 4 (via fresh numbers, since the
        # pipes' own numbers may be 3 or 4). dup2 leaves them inheritable; every other fd
        # Python opened is not (PEP 446), so close_fds=False passes just these two.
        a, b = os.dup(to_child), os.dup(from_child)
        os.dup2(a, 3)
        os.dup2(b, 4)

    log = open(os.path.join(profile, "chromium.log"), "wb")
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=pipe_fds,
            close_fds=False,
        )
    except OSError as e:
        raise SystemExit(f"chromium-player: cannot start {browser}: {e}") from e
    os.close(to_child)
    os.close(from_child)
    return proc, DevTools(browser_in, browser_out)


def netlog_summary(path, origin):
    """Chromium's own record (its JSON net log) of the QUIC sessions to `origin`: whether the
    handshake completed, whether HTTP/3 ran on it (SETTINGS from the server, response headers
    decoded by QPACK), the statuses of the responses, and packet counts as Chromium saw them."""
    try:
        with open(path) as f:
            text = f.read()
        # A log cut short (browser killed) lacks its closing brackets.
        log = json.loads(text) if text.rstrip().endswith("}") else json.loads(text + "]}")
    except (OSError, ValueError) as e:
        return {"error": f"net log unreadable: {e}"}
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    host, _, port = origin.rpartition(":")
    sessions = {}
    counted = {
        "QUIC_SESSION_PACKET_RECEIVED": "packets_received",
        "QUIC_SESSION_PACKET_SENT": "packets_sent",
        "QUIC_SESSION_PACKET_LOST": "packets_lost",
        "QUIC_SESSION_ACK_FRAME_SENT": "acks_sent",
    }
    for e in log["events"]:
        name = types.get(e["type"])
        p = e.get("params", {})
        if name == "QUIC_SESSION" and p.get("host") == host and str(p.get("port")) == port:
            sessions[e["source"]["id"]] = {
                "handshake_complete": False,
                "http3_settings_received": False,
                "statuses": [],
                **{v: 0 for v in counted.values()},
            }
        s = sessions.get(e["source"]["id"])
        if s is None:
            continue
        if name == "QUIC_SESSION_CRYPTO_HANDSHAKE_COMPLETE":
            s["handshake_complete"] = True
        elif name == "HTTP3_SETTINGS_RECEIVED":
            s["http3_settings_received"] = True
        elif name == "HTTP3_HEADERS_DECODED":
            s["statuses"] += [h.split(": ", 1)[1] for h in p["headers"] if h.startswith(":status")]
        elif name == "QUIC_SESSION_CLOSED":
            s["closed"] = f"{p.get('details')} (from peer: {p.get('from_peer')})"
        elif name in counted:
            s[counted[name]] += 1
    return {"quic_sessions": list(sessions.values())}


def http3_used(net):
    """Whether the net log shows a QUIC session that completed its handshake and ran HTTP/3."""
    return any(
        s["handshake_complete"] and s["http3_settings_received"] and "200" in s["statuses"]
        for s in net.get("quic_sessions", [])
    )


def model_check(result):
    """The page's freezes recomputed from its arrival times by live_player.py's Player."""
    if not result.get("fps") or not result.get("arrivals"):
        return None
    fps = result["fps"]
    player = Player(
        0,
        fps,
        round(result["startup_setting_ms"] * 1e6),
        round(result["rebuffer_setting_ms"] * 1e6),
    )
    arrivals = result["arrivals"]
    for t, frames, fin in arrivals:
        player.arrive(round(t * NS / 1000), frames, fin)
    last = arrivals[-1][0] if result["fin"] else result["duration"] * 1000
    player.finish(round(last * NS / 1000))
    return {
        "freezes": player.freezes,
        "frozen_ms": player.frozen / 1e6,
        "frames_played": player.played,
        "agrees": player.freezes == result["freezes"]
        and player.played == result["frames_played"]
        and abs(player.frozen / 1e6 - result["frozen_ms"]) < 1.0,
    }


def play(args):
    url = urlparse(args.url)
    if url.scheme != "https" or not url.hostname or not url.port:
        raise SystemExit(f"expected --url https://HOST:PORT/player.html?..., got {args.url}")
    origin = f"{url.hostname}:{url.port}"
    browser = find_browser(args)
    profile = tempfile.mkdtemp(prefix="recoup-chromium-")
    netlog = os.path.join(profile, "netlog.json")
    try:
        proc, devtools = launch(args, browser, origin, profile, netlog)
    except SystemExit:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    result, failure = None, None
    try:
        target = devtools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = devtools.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            devtools.send(f"{domain}.enable", session=session)
        nav = devtools.send("Page.navigate", {"url": args.url}, session=session)
        if "errorText" in nav:
            failure = f"navigation failed: {nav['errorText']}"
        deadline = time.monotonic() + args.timeout
        while failure is None and time.monotonic() < deadline:
            expression = "JSON.stringify(window.recoupResult || null)"
            value = devtools.send(
                "Runtime.evaluate",
                {"expression": expression, "returnByValue": True},
                session=session,
            )["result"].get("value")
            if value and value != "null":
                result = json.loads(value)
                break
            time.sleep(0.25)
        else:
            if failure is None:
                failure = f"the page did not report within {args.timeout} s"
        if args.screenshot:
            shot = devtools.send("Page.captureScreenshot", {"format": "png"}, session=session)
            with open(args.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        console = devtools.console()
        try:
            devtools.send("Browser.close", timeout=10)
        except (ConnectionError, TimeoutError):
            pass
    except (ConnectionError, TimeoutError, RuntimeError) as e:
        failure = f"DevTools: {e}"
        console = devtools.console()
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with open(os.path.join(profile, "chromium.log"), "rb") as f:
        chromium_log = f.read().decode("utf-8", "replace")
    net = netlog_summary(netlog, origin)
    shutil.rmtree(profile, ignore_errors=True)
    return result, failure, console, net, chromium_log


def write_frames(path, result, arrivals, summary):
    """The page's good frames with their capture time (the sender's wall clock, us) and arrival
    time (this machine's wall clock, us: the page's arrival times are ms after start_epoch_ms),
    then `{"end": true, "error": ...}`."""
    with open(path, "w") as f:
        last = None
        if result and "captures" in result and arrivals:
            start = result["start_epoch_ms"]
            per_frame = (t for t, n, _ in arrivals for _ in range(n))
            for capture, t in zip(result["captures"], per_frame):
                last = round((start + t) * 1000)
                f.write(json.dumps({"capture_us": capture, "arrival_us": last, "crc_ok": True}))
                f.write("\n")
        error = ""
        if not summary["ok"]:
            error = "; ".join(map(str, [summary.get("failure")] + summary.get("problems", [])))
        elif not result or "captures" not in result:
            error = "the page published no capture times"
        f.write(json.dumps({"end": True, "arrival_us": last, "error": error}) + "\n")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True, help="https://HOST:PORT/player.html?stream=...")
    parser.add_argument("--cert", required=True, help="the server's certificate (PEM) to pin")
    parser.add_argument("--screenshot", help="write a PNG of the page here when it reports")
    parser.add_argument("--timeout", type=float, default=90.0, help="wait for the page, s")
    parser.add_argument("--chromium", help="the browser binary (default: chromium on PATH)")
    parser.add_argument("--window-size", default="900,720")
    parser.add_argument(
        "--frames",
        help="live player: write one JSON line per good frame here (capture_us, arrival_us on "
        "the wall clock) and an end line, as the recovery benchmark's quic-go client does",
    )
    args = parser.parse_args()
    result, failure, console, net, chromium_log = play(args)
    summary = dict(result or {"ok": False})
    arrivals = summary.pop("arrivals", None)
    if result:
        summary["model_check"] = model_check(result)
    summary["netlog"] = net
    if failure:
        summary["ok"] = False
        summary["failure"] = failure
    problems = []
    if result:
        problems += [] if result["ok"] else [result.get("failure") or "stream not intact"]
        # The WebTransport page has no stream fetched over HTTP: its session's protocol is
        # WebTransport over HTTP/3 by construction, and the net log shows the session.
        fetched = ("page_protocol",) if result.get("webtransport") else PROTOCOLS
        for what in fetched:
            if result.get(what) != HTTP3:
                problems.append(f"{what} is {result.get(what)!r}, not {HTTP3!r}")
        check = summary["model_check"]
        if check is not None and not check["agrees"]:
            problems.append(f"the page's player disagrees with live_player.py's: {check}")
        if not http3_used(net):
            problems.append(f"Chromium's net log shows no HTTP/3 session to the origin: {net}")
    if problems:
        summary["ok"] = False
        summary["problems"] = problems
    summary["reads"] = len(arrivals) if arrivals else 0
    if args.frames:
        write_frames(args.frames, result, arrivals, summary)
    print(json.dumps(summary))
    if not summary["ok"]:
        for line in ([failure] if failure else []) + problems + summary.get("errors", []):
            print(f"chromium-player: {line}", file=sys.stderr)
        for line in console[-30:]:
            print(f"chromium-player: page: {line}", file=sys.stderr)
        print("chromium-player: chromium's log (end):", file=sys.stderr)
        print(chromium_log[-4000:], file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
