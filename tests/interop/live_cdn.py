#!/usr/bin/env python3
"""A live CDN path, end to end: an encoder, an origin, a recoup edge, a lossy link and a real
low-latency live player, with the edge's loss-recovery policy as the one thing that changes.

    encoder    Debian's ffmpeg encodes a live test pattern in real time (VP9, two rungs) into
               low-latency DASH: CMAF segments of --segment, each uploaded as it is encoded, one
               chunk per --fragment (ffmpeg's dash muxer, -ldash -streaming, HTTP PUT)
    origin     ll_dash_origin.py (HTTP/1.1): serves each segment while its upload still runs
               (chunked), the manifest, the player page and /time for the clock
    edge       `recoup serve --origin http://ORIGIN --origin-kind live --policy P`, HTTP/3
    link       `recoup link`: --rtt, --rate, Bernoulli --loss on the edge-to-viewer direction
    player     dash.js (web/dash/, the manifest switches on its low-latency mode) in headless
               Chromium (chromium_player.py), watching for --seconds after playback starts

One encoder and origin serve every run, so every policy sees the same stream. Runs alternate
between the policies (--runs rounds), each with a fresh edge, link (seeded by its round) and
browser. Measured by dash.js in the page: live latency (mean, p95 of its samples every 250 ms),
stalls and stall time (buffer empty), the mean bitrate of the segments loaded and the start-up
delay; at the link, what the edge sent downstream per second of the page's run (where each
policy's copies show); from the edge's own qlog (`recoup analyze`), its lost ranges, copies and
recovery latency.

    python3 tests/interop/live_cdn.py --recoup target/release/recoup --site SITE \\
        --policies arq,autorec,crest --runs 5 --seconds 60 --out results/live-cdn

SITE holds the player page and dash.js (scripts/live-cdn.sh makes it). Writes OUT/runs.jsonl
(one line per run, as it finishes), OUT/live-cdn.md (the table) and the screenshot of the last
run of each policy. Exits non-zero, naming the run, if a run fails (the page reports a dash.js
error, HTTP/3 was not used, nothing played).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
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
from matrix import parse_link_report  # noqa: E402

# The two rungs: (bit rate, size). Low enough that 5 % loss at the default rate leaves room to
# recover, two so that dash.js's ABR has a choice to make.
RUNGS = ((1_200_000, "640x360"), (400_000, "320x180"))
FPS = 30


def ffmpeg_command(origin, segment_s, fragment_s, target_s):
    """ffmpeg encoding a live test pattern in real time to low-latency DASH at `origin`."""
    cmd = ["ffmpeg", "-hide_banner", "-loglevel", "warning", "-nostdin", "-re"]
    cmd += ["-f", "lavfi", "-i", f"testsrc2=size=640x360:rate={FPS}"]
    for i, (rate, size) in enumerate(RUNGS):
        cmd += ["-map", "0:v", f"-b:v:{i}", str(rate), f"-maxrate:v:{i}", str(rate)]
        cmd += [f"-bufsize:v:{i}", str(rate // 2), f"-s:v:{i}", size]
    gop = round(segment_s * FPS)
    cmd += ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "1"]
    cmd += ["-pix_fmt", "yuv420p", "-g", str(gop), "-keyint_min", str(gop)]
    cmd += ["-f", "dash", "-dash_segment_type", "mp4", "-ldash", "1", "-streaming", "1"]
    cmd += ["-seg_duration", f"{segment_s:g}", "-frag_type", "duration"]
    cmd += ["-frag_duration", f"{fragment_s:g}", "-target_latency", f"{target_s:g}"]
    cmd += ["-use_template", "1", "-use_timeline", "0", "-window_size", "10"]
    cmd += ["-extra_window_size", "5", "-remove_at_exit", "1", "-utc_timing_url", "/time"]
    cmd += ["-format_options", "movflags=cmaf", "-adaptation_sets", "id=0,streams=v"]
    cmd += ["-method", "PUT", "-http_persistent", "1", f"http://{origin}/live/manifest.mpd"]
    return cmd


def wait_for_manifest(origin, encoder, timeout):
    """Waits until the origin has a manifest listing a segment; RuntimeError naming why not."""
    deadline = time.monotonic() + timeout
    url = f"http://{origin}/live/manifest.mpd"
    while time.monotonic() < deadline:
        if encoder.proc.poll() is not None:
            raise RuntimeError(f"ffmpeg exited ({encoder.proc.returncode}):\n{encoder.output()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if b"SegmentTemplate" in r.read():
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no manifest at {url} within {timeout} s:\n{encoder.output()}")


def watch_in_chromium(procs, args, cert, url, run_dir):
    """Plays `url` in headless Chromium (chromium_player.py, trusting `cert`) for args.seconds
    plus args.timeout; returns the screenshot's path, the page's JSON summary (None if it
    printed none) and what failed (None if the page reported success)."""
    shot = os.path.join(run_dir, "player.png")
    cmd = [sys.executable, os.path.join(HERE, "chromium_player.py"), "--cert", cert]
    cmd += ["--url", url, "--screenshot", shot]
    cmd += ["--timeout", f"{args.seconds + args.timeout + 10:g}"]
    player = procs.start("player", cmd, f"{run_dir}/player.log")
    failure = None
    try:
        player.proc.wait(timeout=args.seconds + args.timeout + 60)
    except subprocess.TimeoutExpired:
        failure = "the player did not finish in time"
    out = procs.stop(player, signal.SIGKILL)
    summary = None
    for line in out.splitlines():
        if line.startswith("{"):
            summary = json.loads(line)
    if summary is None:
        failure = failure or f"no summary from the player:\n{out[-2000:]}"
    elif not summary.get("ok"):
        problems = [summary.get("failure")] + summary.get("problems", [])
        failure = failure or "; ".join(str(p) for p in problems if p)
    return shot, summary, failure


def one_run(procs, args, ctx, policy, seed, run_dir):
    """One viewer session through a fresh edge and link; the run's record."""
    os.makedirs(run_dir, exist_ok=True)
    cert, key = ctx["cert"]
    edge_cmd = [args.recoup, "serve", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key]
    edge_cmd += ["--origin", f"http://{ctx['origin']}", "--origin-kind", "live"]
    edge_cmd += ["--policy", policy, "--qlog-dir", os.path.join(run_dir, "qlog")]
    edge, edge_addr = procs.start_listening("edge", edge_cmd, f"{run_dir}/edge.log")
    limit = args.seconds + args.timeout + 60
    link_cmd = [args.recoup, "link", "--listen", "127.0.0.1:0", "--upstream", edge_addr]
    link_cmd += ["--rtt", args.rtt, "--rate", args.rate, "--seed", str(seed)]
    link_cmd += ["--duration", f"{int(limit)}s"]
    if args.loss > 0:
        link_cmd += ["--down-loss", f"bernoulli {args.loss:g}%"]
    link, link_addr = procs.start_listening("link", link_cmd, f"{run_dir}/link.log")
    note = (
        f"live: ffmpeg -> HTTP/1.1 origin -> recoup serve --policy {policy} -> recoup link "
        f"({args.rtt}, {args.rate}, {args.loss:g} % loss) -> dash.js"
    )
    page = f"mpd={quote('/live/manifest.mpd')}&live={args.seconds:g}&note={quote(note)}"
    page += f"&timeout={args.seconds + args.timeout:g}"
    shot, summary, failure = watch_in_chromium(
        procs, args, cert, f"https://{link_addr}/index.html?{page}", run_dir
    )
    procs.stop(edge, signal.SIGINT)
    link_report = parse_link_report(procs.stop(link, signal.SIGINT))
    # The page's wall time from its start to its end (video.currentTime is a position on the
    # live timeline, not time played).
    watched = (summary or {}).get("wall_s") or 0
    recovery = analyze_edge(args.recoup, os.path.join(run_dir, "qlog"), run_dir)
    down = link_report["down"]
    return {
        "policy": policy,
        "seed": seed,
        "ok": failure is None,
        "failure": failure,
        "page": summary,
        "link": link_report,
        "down_kbps": down["bytes_in"] * 8 / 1000 / watched if watched else None,
        "edge": recovery,
        "screenshot": shot,
    }


def analyze_edge(recoup, qlog_dir, run_dir):
    """`recoup analyze` of the edge's traces of the run: lost ranges, retransmissions, copies
    (summed over its connections: Chromium opens two, the page's and the media's) and the p95
    recovery latency of the connection that sent the most; None, with the reason in
    run_dir/analyze.log, if it cannot."""
    traces = (
        sorted(os.path.join(qlog_dir, f) for f in os.listdir(qlog_dir) if f.endswith("qlog"))
        if os.path.isdir(qlog_dir)
        else []
    )
    if not traces:
        return None
    out = os.path.join(run_dir, "analyze")
    res = subprocess.run(
        [recoup, "analyze", *traces, "--out", out], capture_output=True, text=True, timeout=120
    )
    with open(os.path.join(run_dir, "analyze.log"), "w") as f:
        f.write(res.stdout + res.stderr)
    if res.returncode != 0:
        return None
    with open(os.path.join(out, "analyze.json")) as f:
        rows = json.load(f)
    busiest = max(rows, key=lambda r: r.get("packets_sent") or 0)
    return {
        "connections": len(rows),
        "lost_ranges": sum(r.get("lost_ranges") or 0 for r in rows),
        "retransmissions": sum(r.get("retransmissions_sent") or 0 for r in rows),
        "copies": sum(r.get("copies_sent") or 0 for r in rows),
        "recovery_p95_ms": busiest.get("recovery_latency_p95_ms"),
    }


def path_arguments(parser, site, seconds, timeout):
    """The flags of a path measured in a player: the recoup binary, the page's directory,
    the policies and runs, the link, and the harness's pid file."""
    parser.add_argument("--recoup", required=True, help="the recoup binary")
    parser.add_argument("--site", required=True, help=site)
    parser.add_argument("--policies", default="arq,autorec,crest")
    parser.add_argument("--runs", type=int, default=5, help="rounds over the policies")
    parser.add_argument("--seconds", type=parse_seconds, default=seconds, help="watched per run")
    parser.add_argument("--timeout", type=float, default=timeout, help="slack for start-up, s")
    parser.add_argument("--rtt", default="60ms")
    parser.add_argument("--rate", default="12Mbit")
    parser.add_argument("--loss", type=float, default=5.0, help="%% of edge-to-viewer datagrams")
    parser.add_argument("--pid-file", help="list started processes here (for the shell script)")


def path_problems(args, policies, browser=True):
    """What is wrong with [`path_arguments`]' flags or the machine (ffmpeg, and Chromium when
    the path ends in the `browser`)."""
    problems = []
    for tool in ("ffmpeg", "chromium") if browser else ("ffmpeg",):
        if not shutil.which(tool):
            problems.append(f"{tool} not found (Debian: apt-get install {tool}, as root)")
    if args.runs < 1 or args.seconds <= 0:
        problems.append("--runs and --seconds must be positive")
    if not policies:
        problems.append("--policies is empty")
    return problems


def run_rounds(name, args, policies, run, source, describe, records):
    """--runs rounds over the policies, alternating: `run(policy, seed, run_dir)` makes each
    run's record, appended to `records` and to OUT/runs.jsonl as it finishes, with a line
    naming the run and one saying how it went (`describe(page)`). RuntimeError if the stream's
    `source` process stopped."""
    total = args.runs * len(policies)
    with open(os.path.join(args.out, "runs.jsonl"), "w") as out:
        for rnd in range(args.runs):
            for policy in policies:
                print(
                    f"{name}: run {len(records) + 1}/{total}: {policy}, seed {rnd + 1}", flush=True
                )
                rec = run(policy, rnd + 1, os.path.join(args.out, f"{policy}-{rnd + 1}"))
                records.append(rec)
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(
                    f"{name}:   {'ok' if rec['ok'] else 'FAILED'}: {describe(rec['page'] or {})}"
                    + (f"; {rec['failure']}" if rec["failure"] else ""),
                    flush=True,
                )
                if source.proc.poll() is not None:
                    raise RuntimeError(f"{source.name} stopped:\n{source.output()}")


def keep_screenshots(records, policies, out):
    """The last run's screenshot of each policy, as OUT/player-POLICY.png."""
    for policy in policies:
        last = [
            r
            for r in records
            if r["policy"] == policy and r["screenshot"] and os.path.isfile(r["screenshot"])
        ]
        if last:
            shutil.copy(last[-1]["screenshot"], os.path.join(out, f"player-{policy}.png"))


def per_policy(records, policies):
    """Per policy: its name, its runs, those that went well, and `col(key, spec)`, a page
    measure's mean over the good runs ± its 95 % half-width (`–` when no run has it)."""
    for policy in policies:
        runs = [r for r in records if r["policy"] == policy]
        ok = [r for r in runs if r["ok"]]

        def col(key, spec, ok=ok):
            vals = [r["page"][key] for r in ok if r["page"].get(key) is not None]
            return mean_ci(vals, spec) if vals else "–"

        yield policy, runs, ok, col


def table(records, policies):
    """The report's table: per policy, each measure's mean over runs ± its 95 % half-width."""
    header = [
        "edge policy",
        "runs ok",
        "live latency mean s",
        "live latency p95 s",
        "stalls per run",
        "stall time ms per run",
        "mean bitrate kbit/s",
        "start-up ms",
        "edge sent kbit/s",
        "edge copies / lost ranges",
        "edge recovery p95 ms",
    ]
    rows = []
    for policy, runs, ok, col in per_policy(records, policies):
        kbps = [r["down_kbps"] for r in ok if r["down_kbps"]]
        edge = [r["edge"] for r in ok if r.get("edge")]
        copies = sum(e["copies"] for e in edge)
        lost = sum(e["lost_ranges"] for e in edge)
        p95 = [e["recovery_p95_ms"] for e in edge if e["recovery_p95_ms"] is not None]
        rows.append(
            [
                f"`{policy}`",
                f"{len(ok)}/{len(runs)}",
                col("latency_mean_s", ".2f"),
                col("latency_p95_s", ".2f"),
                col("stalls", ".1f"),
                col("stall_ms", ".0f"),
                col("bitrate_kbps", ".0f"),
                col("startup_ms", ".0f"),
                mean_ci(kbps, ".0f") if kbps else "–",
                f"{copies} / {lost}" if edge else "–",
                mean_ci(p95, ".0f") if p95 else "–",
            ]
        )
    return markdown_table(header, rows)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    path_arguments(parser, "the player page and dash.js", seconds=60.0, timeout=40.0)
    parser.add_argument("--segment", type=parse_seconds, default=1.0)
    parser.add_argument("--fragment", type=parse_seconds, default=0.2)
    parser.add_argument("--target-latency", type=parse_seconds, default=1.5)
    parser.add_argument("--out", default="results/live-cdn")
    args = parser.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    problems = path_problems(args, policies)
    if not os.access(args.recoup, os.X_OK):
        problems.append(f"--recoup {args.recoup}: not an executable")
    dashjs = os.path.join(args.site, "dash.all.min.js")
    if not os.path.isfile(dashjs):
        problems.append(f"--site {args.site}: no dash.all.min.js (scripts/live-cdn.sh makes it)")
    if problems:
        sys.exit("live-cdn: " + "; ".join(problems))
    os.makedirs(args.out, exist_ok=True)
    procs = Processes(args.pid_file)
    # SIGTERM (the shell script's trap) unwinds through the finally below like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    records = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory() as work:
            ctx = {"cert": self_signed(work)}
            origin_cmd = [sys.executable, os.path.join(HERE, "ll_dash_origin.py")]
            origin_cmd += ["--root", args.site]
            _, ctx["origin"] = procs.start_listening(
                "origin", origin_cmd, f"{args.out}/origin.log", pattern=r"listening (\S+)"
            )
            encoder = procs.start(
                "ffmpeg",
                ffmpeg_command(ctx["origin"], args.segment, args.fragment, args.target_latency),
                f"{args.out}/ffmpeg.log",
            )
            wait_for_manifest(ctx["origin"], encoder, 30)
            run_rounds(
                "live-cdn",
                args,
                policies,
                lambda policy, seed, run_dir: one_run(procs, args, ctx, policy, seed, run_dir),
                encoder,
                lambda page: (
                    f"latency {page.get('latency_mean_s')} s mean, "
                    f"{page.get('stalls')} stalls, {page.get('bitrate_kbps')} kbit/s"
                ),
                records,
            )
    except (ServerFailed, RuntimeError) as e:
        procs.stop_all()
        sys.exit(f"live-cdn: {e}")
    finally:
        procs.stop_all()
    keep_screenshots(records, policies, args.out)
    pages = [r["page"] for r in records if r["page"]]
    dashjs = pages[0].get("dashjs_version") if pages else "?"
    finish_report(
        os.path.join(args.out, "live-cdn.md"),
        (
            f"{started}, {machine()}, load average {load_before:.2f} before the runs; "
            f"{recoup_version(args.recoup)}; {tool_version(['ffmpeg', '-version'])}; "
            f"{tool_version(['chromium', '--version'])}; "
            f"dash.js {dashjs}. "
            f"Path {args.rtt}, {args.rate}, {args.loss:g} % loss edge to viewer; "
            f"{args.runs} runs of {args.seconds:g} s per policy; segments {args.segment:g} s, "
            f"chunks {args.fragment:g} s, target latency {args.target_latency:g} s.\n\n"
        )
        + table(records, policies),
        records,
        "live-cdn",
    )


def finish_report(doc: str, text: str, records: list, name: str) -> None:
    """Writes a player run's report `text` to `doc` and prints it; names each failed run and
    exits 1 if any failed or none ran (shared by live-cdn and moq-live)."""
    with open(doc, "w") as f:
        f.write(text)
    print(text, end="")
    failed = [r for r in records if not r["ok"]]
    for r in failed:
        print(f"{name}: {r['policy']} run {r['seed']} failed: {r['failure']}", file=sys.stderr)
    if failed or not records:
        sys.exit(1)


if __name__ == "__main__":
    main()
