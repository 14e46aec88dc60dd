#!/usr/bin/env python3
"""A MoQ live path, end to end, with real software on every hop but one, recoup:

    encoder    Debian's ffmpeg encodes a live test pattern in real time (H.264, no B-frames,
               one keyframe per --gop, fragmented MP4 with a fragment per frame)
    publisher  moq-cli (`moq ... import fmp4`, unmodified, crates.io) puts it on the relay as
               broadcast `test`; its catalog's clock maps presentation times to the wall clock
               at which the frames reached it
    relay      moq-relay (unmodified, crates.io), anonymous access under /anon
    edge       `recoup serve --moq https://RELAY/anon --policy P`: subscribes upstream, serves
               viewers over WebTransport at /moq with policy P's loss recovery; it also serves
               the page
    link       `recoup link`: --rtt, --rate, Bernoulli --loss on the edge-to-viewer direction
    player     @moq/watch (unmodified, npm) in headless Chromium (chromium_player.py), on
               web/moq/index.html, for --seconds after the first frame; or, with
               --viewer quic, moq-cli subscribing over raw QUIC (`moq --connect
               moql://LINK/ export fmp4`, unmodified), its fMP4 written to a file for
               --seconds and its H.264 frames counted by ffprobe

With --direct, the edge and link are left out: the page (still served by `recoup serve`)
plays straight from moq-relay, which shows the unmodified parts interoperate on their own.

One encoder, publisher and relay serve every run, so every policy sees the same stream. Runs
alternate between the policies (--runs rounds), each with a fresh edge, link (seeded by its
round) and browser. Measured in the page from the player's own signals: latency (wall clock
at presentation minus the frame's wall time at the publisher; mean and p95 over the frames),
stalls and stalled time, frames dropped (presentation times skipped); at the link, the bytes
the edge sent. With --viewer quic there is no page: the run counts the frames the subscriber
wrote and names the ALPN the edge's raw-QUIC MoQ session ran on.

    python3 tests/interop/moq_live.py --recoup target/release/recoup --relay moq-relay \\
        --publisher moq --site web/moq/dist --policies arq,autorec,crest --runs 5 \\
        --seconds 30 --out results/moq-live

Writes OUT/runs.jsonl (one line per run, as it finishes), OUT/moq-live.md (the table) and the
screenshot of the last run of each policy, OUT/player-POLICY.png. Exits non-zero, naming the
run, if a run fails (no frame, the page reports a failure, HTTP/3 not used).
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from urllib.parse import quote

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from aioquic_server import self_signed  # noqa: E402
from bench_harness import (  # noqa: E402
    Processes,
    ServerFailed,
    machine,
    mean_ci,
    parse_seconds,
    recoup_version,
    tool_version,
)
from common import markdown_table  # noqa: E402
from live_cdn import (  # noqa: E402
    analyze_edge,
    finish_report,
    keep_screenshots,
    path_arguments,
    path_problems,
    per_policy,
    run_rounds,
    watch_in_chromium,
)
from matrix import parse_link_report  # noqa: E402

FPS = 30
BROADCAST = "test"


def free_udp_port():
    """A UDP port free now on loopback (moq-relay prints no address of its own)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def encoder_command(args):
    """ffmpeg: a live test pattern, H.264 without B-frames, fMP4 with one fragment per frame,
    on stdout."""
    return [
        "ffmpeg", "-hide_banner", "-loglevel", "warning", "-re",
        "-f", "lavfi", "-i", f"testsrc2=size={args.size}:rate={FPS}",
        "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency",
        "-profile:v", "baseline", "-pix_fmt", "yuv420p", "-bf", "0",
        "-g", str(round(args.gop * FPS)), "-b:v", f"{args.bitrate}k",
        "-f", "mp4", "-movflags", "cmaf+separate_moof+delay_moov+skip_trailer+frag_every_frame",
        "-",
    ]  # fmt: skip


def start_source(procs, args, cert, work):
    """moq-relay, and ffmpeg piped into moq-cli publishing to it; the relay's URL."""
    port = free_udp_port()
    relay_cmd = [args.relay, "--listen", f"127.0.0.1:{port}"]
    relay_cmd += ["--listen-tls-cert", cert[0], "--listen-tls-key", cert[1]]
    relay_cmd += ["--auth-public", "anon/**"]
    procs.start("moq-relay", relay_cmd, f"{args.out}/relay.log")
    url = f"https://127.0.0.1:{port}/anon"
    time.sleep(1.0)
    script = os.path.join(work, "publish.sh")
    with open(script, "w") as f:
        f.write(
            "set -o pipefail\n"
            + " ".join(map(quote_sh, encoder_command(args)))
            + " | "
            + " ".join(
                map(
                    quote_sh,
                    [args.publisher, "--connect", url, "--connect-tls-root", cert[0]]
                    + ["import", "--broadcast", BROADCAST, "fmp4"],
                )
            )
            + "\n"
        )
    publisher = procs.start("publisher", ["bash", script], f"{args.out}/publisher.log")
    return url, publisher


def quote_sh(word):
    return "'" + word.replace("'", "'\\''") + "'"


def one_run(procs, args, ctx, policy, seed, run_dir):
    """One viewer session (through a fresh edge and link unless --direct); the run's record."""
    os.makedirs(run_dir, exist_ok=True)
    cert, key = ctx["cert"]
    edge_cmd = [args.recoup, "serve", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key]
    edge_cmd += ["--root", args.site]
    if not args.direct:
        edge_cmd += ["--moq", ctx["relay"], "--moq-root", cert]
        edge_cmd += ["--moq-deadline", args.deadline, "--policy", policy]
        edge_cmd += ["--qlog-dir", os.path.join(run_dir, "qlog")]
    edge, edge_addr = procs.start_listening(
        "edge", edge_cmd, f"{run_dir}/edge.log", env={**os.environ, "RUST_LOG": "info"}
    )
    link, link_addr = None, edge_addr
    if not args.direct:
        limit = args.seconds + args.timeout + 60
        link_cmd = [args.recoup, "link", "--listen", "127.0.0.1:0", "--upstream", edge_addr]
        link_cmd += ["--rtt", args.rtt, "--rate", args.rate, "--seed", str(seed)]
        link_cmd += ["--duration", f"{int(limit)}s"]
        if args.loss > 0:
            link_cmd += ["--down-loss", f"bernoulli {args.loss:g}%"]
        link, link_addr = procs.start_listening("link", link_cmd, f"{run_dir}/link.log")
    if args.viewer == "quic":
        shot = None
        summary, failure = watch_over_quic(procs, args, cert, link_addr, run_dir)
        summary["alpn"] = raw_moq_alpn(f"{run_dir}/edge.log")
        if failure is None and summary["alpn"] is None:
            failure = "the edge logged no raw-QUIC MoQ session"
    else:
        if args.direct:
            note = "ffmpeg -> moq-cli -> moq-relay -> @moq/watch (direct)"
            relay = ctx["relay"]
        else:
            note = (
                f"ffmpeg -> moq-cli -> moq-relay -> recoup serve --moq --policy {policy} -> "
                f"recoup link ({args.rtt}, {args.rate}, {args.loss:g} % loss) -> @moq/watch"
            )
            relay = f"https://{link_addr}/moq"
        page = f"url={quote(relay)}&name={BROADCAST}&seconds={args.seconds:g}&fps={FPS}"
        page += f"&note={quote(note)}"
        shot, summary, failure = watch_in_chromium(
            procs, args, cert, f"https://{link_addr}/index.html?{page}", run_dir
        )
    procs.stop(edge, signal.SIGINT)
    link_report = parse_link_report(procs.stop(link, signal.SIGINT)) if link else None
    recovery = (
        None if args.direct else analyze_edge(args.recoup, os.path.join(run_dir, "qlog"), run_dir)
    )
    watched = (summary or {}).get("seconds") or args.seconds
    frames_sent, late = late_group_frames(os.path.join(run_dir, "qlog"), parse_ms(args.deadline))
    return {
        "policy": policy,
        "seed": seed,
        "ok": failure is None,
        "failure": failure,
        "page": summary,
        "link": link_report,
        "down_kbps": link_report["down"]["bytes_in"] * 8 / 1000 / watched if link else None,
        "edge": recovery,
        "group_frames_sent": frames_sent,
        "group_frames_late": late,
        "screenshot": shot,
    }


def watch_over_quic(procs, args, cert, addr, run_dir):
    """moq-cli subscribing to the broadcast over raw QUIC at `addr` (`moql://`, every MoQ ALPN
    it knows offered) for args.seconds, its fMP4 export written to RUN_DIR/viewer.mp4; the
    summary (frames ffprobe decodes from it, bytes) and what failed (None if frames came)."""
    video = os.path.join(run_dir, "viewer.mp4")
    cmd = ["bash", "-c", 'exec "$@" > "$0"', video, args.publisher]
    cmd += ["--connect", f"moql://{addr}/", "--connect-tls-root", cert, "--connect-once"]
    cmd += ["export", "--broadcast", BROADCAST, "fmp4"]
    viewer = procs.start("viewer", cmd, f"{run_dir}/viewer.log")
    time.sleep(args.seconds)
    exited = viewer.proc.poll()
    out = procs.stop(viewer, signal.SIGINT)
    size = os.path.getsize(video) if os.path.isfile(video) else 0
    frames = count_frames(video) if size else 0
    summary = {"ok": frames > 0, "seconds": args.seconds, "frames_received": frames}
    summary["bytes_received"] = size
    failure = None
    if exited is not None:
        failure = f"the subscriber exited early ({exited}):\n{out[-2000:]}"
    elif frames == 0:
        failure = f"no frame from the subscriber ({size} bytes):\n{out[-2000:]}"
    return summary, failure


def count_frames(video):
    """The video frames ffprobe decodes from `video` (0 if it cannot read it)."""
    res = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0"]
        + ["-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", video],
        capture_output=True,
        text=True,
        timeout=60,
    )
    digits = res.stdout.strip().rstrip(",")
    return int(digits) if digits.isdigit() else 0


def raw_moq_alpn(edge_log):
    """The ALPN of the first raw-QUIC MoQ session the edge logged (None without one)."""
    pattern = re.compile(r'MoQ session accepted \(raw QUIC\).*alpn="([^"]+)"')
    with open(edge_log, errors="replace") as f:
        for line in f:
            m = pattern.search(line)
            if m:
                return m.group(1)
    return None


def parse_ms(text):
    """`500ms` or `1s` in milliseconds."""
    return parse_seconds(text) * 1000


def late_group_frames(qlog_dir, deadline_ms):
    """From the edge's qlog: STREAM frames of the unidirectional streams the edge opened
    (moq-lite's group streams: stream IDs 3 mod 4, RFC 9000 §2.1) that it sent, and of those the
    ones sent more than `deadline_ms` after the first transmission of the bytes they carry
    (a retransmission or copy of an object past its deadline; the edge resets a group stream
    `deadline_ms` after each write at the latest, and a byte's first transmission is never
    before its write). Returns (sent, late)."""
    sent = late = 0
    if not os.path.isdir(qlog_dir):
        return sent, late
    for name in sorted(os.listdir(qlog_dir)):
        first = {}  # stream -> [(start, end, time of first transmission)]
        with open(os.path.join(qlog_dir, name)) as f:
            for line in f:
                if '"transport:packet_sent"' not in line or '"stream"' not in line:
                    continue
                event = json.loads(line.lstrip("\x1e"))
                t = event["time"]
                for frame in event["data"].get("frames", []):
                    if frame.get("frame_type") != "stream" or frame["stream_id"] % 4 != 3:
                        continue
                    sent += 1
                    a, b = frame["offset"], frame["offset"] + frame["length"]
                    ranges = first.setdefault(frame["stream_id"], [])
                    earlier = [t0 for start, end, t0 in ranges if start < b and a < end]
                    if earlier:
                        late += t > min(earlier) + deadline_ms
                    else:
                        ranges.append((a, b, t))
    return sent, late


def edge_columns(ok):
    """The edge's measures over the good runs `ok`: kbit/s at the link (mean ± 95 % half-width),
    copies / lost ranges, and group frames sent after the deadline of those sent."""
    kbps = [r["down_kbps"] for r in ok if r["down_kbps"]]
    edge = [r["edge"] for r in ok if r.get("edge")]
    return [
        mean_ci(kbps, ".0f") if kbps else "–",
        f"{sum(e['copies'] for e in edge)} / {sum(e['lost_ranges'] for e in edge)}"
        if edge
        else "–",
        f"{sum(r['group_frames_late'] for r in ok)} of {sum(r['group_frames_sent'] for r in ok)}",
    ]


def quic_table(records, policies):
    """Per policy, with the raw-QUIC subscriber: frames and bytes it received, and the edge's
    measures."""
    header = ["edge policy", "runs ok", "ALPN", "frames received per run", "kB received per run"]
    header += ["edge sent kbit/s", "edge copies / lost ranges"]
    header += ["group frames sent after the deadline"]
    rows = []
    for policy, runs, ok, col in per_policy(records, policies):
        alpns = sorted({r["page"]["alpn"] for r in ok if r["page"].get("alpn")})
        rows.append(
            [f"`{policy}`", f"{len(ok)}/{len(runs)}", ", ".join(alpns) or "–"]
            + [col("frames_received", ".0f")]
            + [mean_ci([r["page"]["bytes_received"] / 1000 for r in ok], ".0f") if ok else "–"]
            + edge_columns(ok)
        )
    return markdown_table(header, rows)


def table(records, policies):
    """Per policy, each measure's mean over runs ± its 95 % half-width."""
    header = [
        "edge policy",
        "runs ok",
        "latency mean ms",
        "latency p95 ms",
        "stalls per run",
        "stalled ms per run",
        "frames dropped per run",
        "frames presented per run",
        "edge sent kbit/s",
        "edge copies / lost ranges",
        "group frames sent after the deadline",
    ]
    rows = []
    for policy, runs, ok, col in per_policy(records, policies):
        rows.append(
            [
                f"`{policy}`",
                f"{len(ok)}/{len(runs)}",
                col("latency_mean_ms", ".0f"),
                col("latency_p95_ms", ".0f"),
                col("stalls", ".1f"),
                col("stalled_ms", ".0f"),
                col("frames_dropped", ".1f"),
                col("frames_presented", ".0f"),
            ]
            + edge_columns(ok)
        )
    return markdown_table(header, rows)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    path_arguments(parser, "the page and its bundle (web/moq/dist)", seconds=30.0, timeout=30.0)
    parser.add_argument("--relay", required=True, help="the moq-relay binary")
    parser.add_argument("--publisher", required=True, help="moq-cli's binary (`moq`)")
    parser.add_argument("--deadline", default="500ms", help="the edge's --moq-deadline")
    parser.add_argument("--gop", type=parse_seconds, default=1.0, help="keyframe interval")
    parser.add_argument("--bitrate", type=int, default=1500, help="video kbit/s")
    parser.add_argument("--size", default="640x360")
    parser.add_argument("--direct", action="store_true", help="play from moq-relay itself")
    parser.add_argument(
        "--viewer",
        choices=["chromium", "quic"],
        default="chromium",
        help="@moq/watch in Chromium (WebTransport), or moq-cli over raw QUIC",
    )
    parser.add_argument("--out", default="results/moq-live")
    args = parser.parse_args()
    policies = ["direct"] if args.direct else [p for p in args.policies.split(",") if p]
    problems = path_problems(args, policies, browser=args.viewer == "chromium")
    if args.viewer == "quic" and args.direct:
        problems.append("--viewer quic subscribes through the edge: it excludes --direct")
    for name in ("recoup", "relay", "publisher"):
        if not os.access(getattr(args, name), os.X_OK):
            problems.append(f"--{name} {getattr(args, name)}: not an executable")
    if not os.path.isfile(os.path.join(args.site, "moq-player.js")):
        problems.append(f"--site {args.site}: no moq-player.js (scripts/moq-live.sh makes it)")
    if problems:
        sys.exit("moq-live: " + "; ".join(problems))
    os.makedirs(args.out, exist_ok=True)
    procs = Processes(args.pid_file)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    records = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory() as work:
            ctx = {"cert": self_signed(work)}
            ctx["relay"], publisher = start_source(procs, args, ctx["cert"], work)
            # The relay has the broadcast once the publisher's first group is in.
            time.sleep(3.0)
            if publisher.proc.poll() is not None:
                raise RuntimeError(f"the publisher stopped:\n{publisher.output()[-2000:]}")
            run_rounds(
                "moq-live",
                args,
                policies,
                lambda policy, seed, run_dir: one_run(procs, args, ctx, policy, seed, run_dir),
                publisher,
                lambda page: (
                    f"{page.get('frames_received')} frames over {page.get('alpn')}"
                    if args.viewer == "quic"
                    else f"latency {page.get('latency_mean_ms')} ms mean, "
                    f"{page.get('stalls')} stalls, {page.get('frames_dropped')} frames dropped"
                ),
                records,
            )
    except (ServerFailed, RuntimeError) as e:
        procs.stop_all()
        sys.exit(f"moq-live: {e}")
    finally:
        procs.stop_all()
    keep_screenshots(records, policies, args.out)
    report = quic_table if args.viewer == "quic" else table
    finish_report(
        os.path.join(args.out, "moq-live.md"),
        (
            f"{started}, {machine()}, load average {load_before:.2f} before the runs; "
            f"{recoup_version(args.recoup)}; {tool_version([args.relay, '--version'])}; "
            f"{tool_version([args.publisher, '--version'])}; "
            f"{tool_version(['ffmpeg', '-version'])}; {tool_version(['chromium', '--version'])}. "
            + (
                "Direct from moq-relay, no edge. "
                if args.direct
                else f"Path {args.rtt}, {args.rate}, {args.loss:g} % loss edge to viewer; "
                f"edge deadline {args.deadline}; "
            )
            + f"{args.runs} runs of {args.seconds:g} s per policy; H.264 {args.size} "
            f"{FPS} fps {args.bitrate} kbit/s, a group per {args.gop:g} s.\n\n"
        )
        + report(records, policies),
        records,
        "moq-live",
    )


if __name__ == "__main__":
    main()
