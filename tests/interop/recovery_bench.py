#!/usr/bin/env python3
"""The recovery benchmark: recoup serve's loss-recovery policies next to the QUIC servers people
run, through the same emulated paths (`recoup link` on loopback), read by the same client.

Servers (recovery_peers.py): quic-go's http3 server, Caddy, quinn (h3), aioquic, quiche and
`recoup serve` with each policy under BBR and under CUBIC (the peers' kind of controller, so
that recovery and congestion control are not confounded), every peer with its defaults.

Workloads, the same bytes from every server:
    live      a live stream (30 fps, GOP 30, key frames 5x) from one HTTP/1.1 origin
              (live_origin.py), frames stamped with the origin's send time, relayed by each server
              that can stream a response and read by the client as it arrives
    segments  0.5 s segments of the same bit rate, fetched at real time (one every 0.5 s)
    frames    the live stream's frames as static objects, fetched at 30 per second
    rpc       16 KB responses at the stream's bit rate (10 per second is 1.3 Mbit/s)
    file      one 20 MB file
All object workloads issue every request on its own schedule over one connection.

Paths (PATHS below): AutoRec's testbed, ART's, Gilbert-Elliott bursts, a Mahimahi LTE trace read
in place from ../shared/traces, and 0 / 1 / 2 / 10 % random loss. Each path names the stream's
bit rate: one the peers' default (loss-based) controllers can carry there.

The client is quic-go's http3 client (tests/peers/quicgo/cmd/client), unmodified library, for
every server. Measured per run: each frame's delay beyond the path's one-way delay (its arrival
at the client minus its send time at the origin minus half the RTT), or each object's time from
request to last byte beyond one RTT; p50 / p95 / p99, the share over 100 and 200 ms, freezes per
100 s of the live stream (the project's player model, live_player.Player: 1 s start-up buffer,
0.5 s rebuffer), and at the link the bytes the server sent downstream over the payload bytes. A
frame or object that never arrived counts as infinitely late and is named with its server. The
report gives each measure's mean over runs ± the 95 % half-width (Student t), and `recoup
analyze` of each server's own qlog (first run) where it writes one.

Usually run by scripts/recovery-bench.sh, which installs and builds the peers first. Runs are
appended to OUT/records.jsonl as they finish; --resume skips those already there, so a long
measurement can be run in parts and the report (--report-only) covers all of them.
"""

import argparse
import json
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from urllib.parse import quote

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import recovery_peers as peers  # noqa: E402
from aioquic_server import self_signed  # noqa: E402
from bench_harness import (  # noqa: E402
    BURST_GAP_MS,
    REPO,
    Processes,
    ServerFailed,
    machine,
    mean_half_width,
    parse_seconds,
    percentile,
    recoup_version,
    summarise_qlog,
    time_weighted,
    tool_version,
)
from common import markdown_table, provenance  # noqa: E402
from live_origin import parse_rate, write_frame_files  # noqa: E402
from live_player import Player  # noqa: E402
from matrix import parse_link_report  # noqa: E402

TRACES = os.path.join(os.path.dirname(REPO), "shared", "traces", "mahimahi")


@dataclass
class Path:
    what: str
    flags: list
    rtt_ms: float
    bitrate: str


def _loss_path(pct, bitrate):
    return Path(
        f"{pct} % random loss both ways, 12 Mbit/s, 60 ms RTT, 100-packet droptail queue",
        ["--rtt", "60ms", "--rate", "12Mbps", "--queue", "droptail packets=100"]
        + ["--loss", f"bernoulli {pct}%"],
        60,
        bitrate,
    )


PATHS = {
    "autorec": Path(
        "AutoRec's testbed: 12 Mbit/s, 60 ms RTT, 5 % random loss both ways, 100-packet queue",
        ["--rtt", "60ms", "--rate", "12Mbps", "--queue", "droptail packets=100"]
        + ["--loss", "bernoulli 5%"],
        60,
        "500kbps",
    ),
    "art": Path(
        "ART's testbed: 100 Mbit/s, 30 ms RTT, 4 % random loss both ways, 300-packet queue",
        ["--rtt", "30ms", "--rate", "100Mbps", "--queue", "droptail packets=300"]
        + ["--loss", "bernoulli 4%"],
        30,
        "1Mbps",
    ),
    "ge": Path(
        "Gilbert-Elliott bursts (gemodel 1.39 % 33.3 %: mean 4 %, bursts of 3 on average) both "
        "ways, 12 Mbit/s, 60 ms RTT, 100-packet queue",
        ["--rtt", "60ms", "--rate", "12Mbps", "--queue", "droptail packets=100"]
        + ["--loss", "gemodel 1.3889% 33.333%"],
        60,
        "500kbps",
    ),
    "lte": Path(
        "Mahimahi's TMobile-LTE-short traces (down and up), 40 ms base RTT, 200-packet queue",
        ["--rtt", "40ms", "--queue", "droptail packets=200"]
        + ["--down-trace", os.path.join(TRACES, "TMobile-LTE-short.down")]
        + ["--up-trace", os.path.join(TRACES, "TMobile-LTE-short.up")],
        40,
        "2Mbps",
    ),
    "loss0": _loss_path(0, "4Mbps"),
    "loss1": _loss_path(1, "1Mbps"),
    "loss2": _loss_path(2, "1Mbps"),
    "loss10": _loss_path(10, "250kbps"),
}
WORKLOADS = ("live", "segments", "frames", "rpc", "file", "live-chromium")
LIVE = ("live", "live-chromium")
# The live player page and its scripts, served next to the static files for the browser run.
PLAYER_FILES = ("player.html", "player.js", "frames.js", "playback.js", "player.css")
FPS, GOP, SEGMENT_S = 30, 30, 0.5
RPC_SIZE, FILE_SIZE = 16 * 1024, 20 * 1024 * 1024
# The live player model's buffers (recoup-apps' LiveConfig defaults).
STARTUP_NS, REBUFFER_NS = 1_000_000_000, 500_000_000
DEFAULT_SERVERS = (
    "quicgo,caddy,quinn,aioquic,quiche,"
    + ",".join(f"recoup-{p}-bbr" for p in peers.RECOUP_POLICIES)
    + ",recoup-arq-cubic,recoup-autorec-cubic"
)
QUICK = dict(
    paths="loss2", workloads="live,segments", servers="quicgo,recoup-autorec-bbr", duration=5.0
)


def bitrate_of(args, path):
    return parse_rate(args.bitrate or PATHS[path].bitrate)


def www_layout(www, bitrate, duration):
    """Writes (once per bit rate) the static files of the object workloads, all directly under
    `www` (aioquic's and quinn's servers serve no subdirectories); returns {workload: (pattern,
    count, rate per s, [sizes])}."""
    b = f"b{round(bitrate)}"
    seg_size = round(bitrate * SEGMENT_S / 8)
    # RPCs at the path's bit rate, as every other workload but the file: a fixed rate would
    # exceed what the peers' loss-based controllers carry on the lossy paths (10 per second is
    # 1.3 Mbit/s; CUBIC at 5 % loss and 60 ms carries about 0.9) and measure their queue.
    rpc_rate = bitrate / (RPC_SIZE * 8)
    layout = {
        "segments": (f"/seg-{b}-%05d.bin", round(duration / SEGMENT_S), 1 / SEGMENT_S),
        "frames": (f"/frame-{b}-%05d.bin", round(duration * FPS), float(FPS)),
        "rpc": ("/rpc-%05d.bin", round(duration * rpc_rate), rpc_rate),
        "file": ("/file-%d.bin", 1, 1.0),
    }
    for i in range(layout["segments"][1]):
        with open(os.path.join(www, layout["segments"][0][1:] % i), "wb") as f:
            f.write(os.urandom(seg_size))
    frames = layout["frames"]
    write_frame_files(www, frames[0][1:], frames[1], bitrate, FPS, GOP, 1)
    for i in range(layout["rpc"][1]):
        p = os.path.join(www, layout["rpc"][0][1:] % i)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(os.urandom(RPC_SIZE))
    if not os.path.exists(os.path.join(www, "file-0.bin")):
        with open(os.path.join(www, "file-0.bin"), "wb") as f:
            f.write(os.urandom(FILE_SIZE))
    sizes = {
        "segments": [seg_size] * layout["segments"][1],
        "frames": [os.path.getsize(os.path.join(www, frames[0][1:] % i)) for i in range(frames[1])],
        "rpc": [RPC_SIZE] * layout["rpc"][1],
        "file": [FILE_SIZE],
    }
    return {w: layout[w] + (sizes[w],) for w in layout}


def link_cmd(args, path, upstream, seed, limit_s):
    return (
        [args.recoup, "link", "--listen", "127.0.0.1:0", "--upstream", upstream]
        + PATHS[path].flags
        + ["--seed", str(seed), "--duration", f"{int(limit_s)}s"]
    )


def run_key(path, workload, server, seed, args):
    return f"{path}|{workload}|{server}|{seed}|{args.duration:g}|{bitrate_of(args, path):g}"


def one_run(procs, ctx, path, workload, server, seed, run_dir, qlog_dir):
    """One client session against one server through the link; the run's record."""
    args = ctx["args"]
    # A fresh directory: a run measured again (it fell behind, or the path's bit rate changed)
    # must not find the last one's state, such as Caddy's certificate, which it then does not
    # obtain and announce, so that it never looked ready.
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    if qlog_dir and peers.writes_qlog(server):
        os.makedirs(qlog_dir, exist_ok=True)
    else:
        qlog_dir = None
    load_before = os.getloadavg()[0]
    bitrate = bitrate_of(args, path)
    live = workload in LIVE
    browser = workload == "live-chromium"
    srv, addr = peers.start(
        procs,
        server,
        ctx["tools"],
        ctx["www"],
        ctx["origin"] if live else None,
        run_dir,
        qlog_dir,
        ctx["cert"] if browser else None,
    )
    limit = args.duration + args.timeout + 60
    if workload == "file":
        limit = args.timeout + 60
    link = procs.start("link", link_cmd(args, path, addr, seed, limit), f"{run_dir}/link.log")
    try:
        link_addr = link.wait_for(r"listening on (\S+)", 20).group(1)
    except RuntimeError:
        procs.stop_all()
        raise
    out = os.path.join(run_dir, "client.jsonl")
    cmd = [os.path.join(args.quicgo_dir, "client"), "-insecure", "-url", f"https://{link_addr}"]
    cmd += ["-out", out, "-warmup", "/warmup.txt"]
    tag = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{path}_{workload}_{server}_s{seed}_{time.time_ns()}")
    query = f"bitrate={round(bitrate)}bps&fps={FPS}&gop={GOP}&duration={args.duration:g}s"
    stream = f"/live/{tag}?{query}&seed={seed}"
    if browser:
        cmd = [sys.executable, os.path.join(HERE, "chromium_player.py"), "--cert", ctx["cert"][0]]
        cmd += ["--frames", out]
        cmd += ["--timeout", f"{args.duration + args.timeout:g}"]
        cmd += ["--url", f"https://{link_addr}/player.html?stream={quote(stream, safe='')}"]
        wait = args.duration + args.timeout + 60
    elif live:
        cmd += ["-live", stream]
        cmd += ["-timeout", f"{args.duration + args.timeout:g}s"]
        wait = args.duration + args.timeout + 30
    else:
        pattern, count, rate, _ = ctx["layout"][bitrate][workload]
        cmd += ["-pattern", pattern, "-count", str(count), "-rate", f"{rate:g}"]
        cmd += ["-timeout", f"{args.timeout:g}s"]
        wait = count / rate + args.timeout + 30
    client = procs.start("client", cmd, f"{run_dir}/client.log")
    note = ""
    try:
        code = client.proc.wait(timeout=wait)
        if code != 0:
            note = f"client exited with {code}: {client.output().strip()[-300:]}"
    except subprocess.TimeoutExpired:
        note = "client killed after its time limit"
    procs.stop(client, signal.SIGKILL)
    link_report = parse_link_report(procs.stop(link))
    srv_exit = srv.proc.poll()
    if qlog_dir:
        # aioquic writes a connection's trace when the connection's draining period (three
        # PTOs, RFC 9000 §10.2) has passed after the client's close.
        time.sleep(2)
    procs.stop(srv)
    if srv_exit is not None:
        note += f" server exited during the run with {srv_exit}: {srv.output().strip()[-300:]}"
    record = {
        "key": run_key(path, workload, server, seed, args),
        "path": path,
        "workload": workload,
        "server": server,
        "seed": seed,
        "duration": args.duration,
        "bitrate": bitrate,
        "link": link_report,
        "load": [load_before, os.getloadavg()[0]],
        "note": note.strip(),
        "command": args.command,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "qlog": qlog_dir,
    }
    owd = PATHS[path].rtt_ms / 2
    origin_log = os.path.join(ctx["origin_logs"], f"{tag}.jsonl")
    if live:
        record.update(read_live(out, origin_log, owd))
    else:
        _, count, _, sizes = ctx["layout"][bitrate][workload]
        record.update(read_objects(out, ctx["layout"][bitrate][workload][0], sizes, 2 * owd))
    return record


def read_live(client_out, origin_log, owd_ms):
    """Per frame the origin sent: its delay beyond the one-way delay (ms) or why it is missing;
    the freezes of the player model; payload bytes. Frames are matched by sequence number, or
    by capture time when the client gives none (the browser's page)."""
    sent = []
    if os.path.exists(origin_log):
        with open(origin_log) as f:
            sent = [json.loads(line) for line in f if line.strip()]
    got, end = {}, {"error": "the client wrote no end line"}
    if os.path.exists(client_out):
        with open(client_out) as f:
            for line in f:
                if not line.strip():
                    continue
                o = json.loads(line)
                if o.get("end"):
                    end = o
                else:
                    got[o.get("seq", o["capture_us"])] = o
    if sent and got and "seq" not in next(iter(got.values())):
        by_capture = {s["capture_us"]: s["seq"] for s in sent}
        got = {by_capture.get(c, -1): o for c, o in got.items()}
    items = []
    for s in sent:
        g = got.get(s["seq"])
        if g is None:
            items.append(
                [s["seq"], None, "never arrived" + (f" ({end['error']})" * bool(end["error"]))]
            )
        elif not g["crc_ok"]:
            items.append([s["seq"], None, "bad checksum"])
        else:
            items.append([s["seq"], (g["arrival_us"] - s["capture_us"]) / 1000 - owd_ms, ""])
    if not sent:
        items.append([0, None, f"the origin sent nothing ({end['error'] or 'no stream'})"])
    freezes = math.nan
    if sent:
        start = sent[0]["capture_us"] * 1000
        player = Player(start, FPS, STARTUP_NS, REBUFFER_NS)
        good = sorted(
            got[s["seq"]]["arrival_us"] for s in sent if s["seq"] in got and got[s["seq"]]["crc_ok"]
        )
        for i, t in enumerate(good):
            player.arrive(t * 1000, 1, i == len(good) - 1)
        player.finish(max([end.get("arrival_us", 0)] + good) * 1000)
        freezes = player.freezes
    return {
        "items": items,
        "payload": sum(s["bytes"] for s in sent),
        "freezes": freezes,
        "session_s": len(sent) / FPS,
        "end_error": end["error"],
    }


def read_objects(client_out, pattern, sizes, rtt_ms):
    """Per object asked for: its time from request to last byte beyond one RTT (ms) or why it
    failed."""
    got = {}
    if os.path.exists(client_out):
        with open(client_out) as f:
            for line in f:
                if line.strip():
                    o = json.loads(line)
                    got[o["path"]] = o
    items = []
    for i, size in enumerate(sizes):
        o = got.get(pattern % i)
        if o is None:
            items.append([i, None, "no result"])
        elif o["error"] or o["bytes"] != size:
            items.append([i, None, o["error"] or f"{o['bytes']} bytes, not {size}"])
        else:
            items.append([i, (o["done_s"] - o["issue_s"]) * 1000 - rtt_ms, ""])
    # What arrived, finished or not, over the time from the first request to the last answer:
    # a 20 MB file that misses its deadline still shows the rate its server reached.
    ends = [(o["issue_s"], o["done_s"]) for o in got.values()]
    return {
        "items": items,
        "payload": sum(sizes),
        "freezes": math.nan,
        "session_s": math.nan,
        "received": sum(o["bytes"] for o in got.values()),
        "elapsed_s": max(d for _, d in ends) - min(i for i, _ in ends) if ends else math.nan,
    }


def run_stats(r):
    """The run's measures: percentiles of the delays (a missing item is infinitely late), the
    share over 100 and 200 ms (%), freezes per 100 s, bytes downstream over payload bytes."""
    delays = sorted(math.inf if d is None else d for _, d, _ in r["items"])
    n = len(delays) or 1
    s = {q: percentile(delays, v) for q, v in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))}
    s["over100"] = 100 * sum(d > 100 for d in delays) / n
    s["over200"] = 100 * sum(d > 200 for d in delays) / n
    s["stalls"] = 100 * r["freezes"] / r["session_s"] if r["session_s"] else math.nan
    # Over the payload that arrived where a run records it (objects): a file cut off by its
    # deadline paid for what it delivered, not for the whole file.
    paid = r.get("received", r["payload"])
    s["bytes"] = r["link"]["down"]["bytes_in"] / paid if paid else math.nan
    elapsed = r.get("elapsed_s", math.nan)
    s["goodput"] = r["received"] * 8e-6 / elapsed if elapsed > 0 else math.nan
    s["missing"] = [(i, e) for i, d, e in r["items"] if d is None]
    return s


def cell(values, spec=".0f"):
    """`mean ± half-width` over runs, as text, and (mean, half) for comparisons."""
    inf = sum(1 for v in values if math.isinf(v))
    if inf:
        return f"∞ in {inf}/{len(values)} runs", (math.inf, 0.0)
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "–", (math.nan, math.nan)
    mean, half = mean_half_width(values)
    text = f"{mean:{spec}}" if math.isnan(half) else f"{mean:{spec}} ± {half:{spec}}"
    return text, (mean, half)


MEASURES = (
    ("p50", "p50 ms", ".0f"),
    ("p95", "p95 ms", ".0f"),
    ("p99", "p99 ms", ".0f"),
    ("over100", "> 100 ms %", ".1f"),
    ("over200", "> 200 ms %", ".1f"),
    ("stalls", "freezes /100 s", ".1f"),
    ("bytes", "bytes down / payload", ".3f"),
    ("goodput", "goodput Mbit/s", ".2f"),
)


def measures(workload):
    """The measures a workload's table shows: freezes only for a live stream, goodput (what
    arrived over the time from the request to the answer, finished or not) only for the file."""
    drop = {"goodput"} if workload in LIVE else {"stalls"}
    if workload != "file":
        drop.add("goodput")
    return [m for m in MEASURES if m[0] not in drop]


def link_late_ms(r):
    """How late (p99, ms) the link sent downstream datagrams behind their schedule: on a loaded
    machine the emulated path itself adds this to every delay."""
    return r["link"]["down"]["late_p99_us"] / 1000


def valid(r, max_late_ms):
    return link_late_ms(r) <= max_late_ms


def summarise(records, path, workload, server, max_late_ms=math.inf):
    """A cell's measures over its runs; runs whose link ran more than `max_late_ms` behind its
    schedule (p99) are left out and counted."""
    rs = [r for r in records if (r["path"], r["workload"], r["server"]) == (path, workload, server)]
    late = [r for r in rs if not valid(r, max_late_ms)]
    rs = [r for r in rs if valid(r, max_late_ms)]
    stats = [run_stats(r) for r in rs]
    out = {"runs": len(rs), "late_runs": len(late)}
    for key, _, spec in measures(workload):
        out[key] = cell([s[key] for s in stats], spec)
    out["missing"] = [
        f"seed {r['seed']}: {'frame' if workload in LIVE else 'object'} {i} ({e})"
        for r, s in zip(rs, stats)
        for i, e in s["missing"]
    ]
    out["notes"] = sorted({r["note"] for r in rs if r["note"]})
    out["late"] = max(map(link_late_ms, rs), default=math.nan)
    return out


def ranking(cells, servers):
    """Whether recoup's best entry (lowest mean p95) has a p95 interval wholly below every
    peer's, and its bytes within 1.3 times each peer's; text lines."""
    recoup = [s for s in servers if s.startswith("recoup-") and s in cells]
    others = [s for s in servers if not s.startswith("recoup-") and s in cells]
    if not recoup or not others:
        return []
    best = min(recoup, key=lambda s: cells[s]["p95"][1][0])
    bm, bh = cells[best]["p95"][1]
    bb = cells[best]["bytes"][1][0]
    lines = [f"best recoup entry by mean p95: `{best}` ({cells[best]['p95'][0]} ms)"]
    for o in others:
        om, oh = cells[o]["p95"][1]
        ob = cells[o]["bytes"][1][0]
        if math.isnan(bh) or math.isnan(oh):
            verdict = ("lower" if bm < om else "NOT lower") + " (one run: no interval)"
        elif bm + bh < om - oh:
            verdict = "lower, intervals apart"
        else:
            verdict = "lower, intervals overlap" if bm < om else "NOT lower"
        lines.append(
            f"vs `{o}` (p95 {cells[o]['p95'][0]} ms): {verdict}; bytes {bb:.3f} vs {ob:.3f} "
            f"= {bb / ob:.2f}x the peer's ({'within' if bb <= 1.3 * ob else 'MORE than'} 1.3x)"
        )
    return lines


def browser_agreement(path, client, chromium):
    """One line comparing the order by mean p95 of the servers both clients measured."""
    if not client or not chromium:
        return None
    both = [s for s in client if s in chromium]
    if len(both) < 2:
        return None

    def order(cells):
        return sorted(both, key=lambda s: cells[s]["p95"][1][0])

    def rank(cells):
        return " < ".join(f"`{s}` {cells[s]['p95'][0]}" for s in order(cells))

    a, b = order(client), order(chromium)
    pairs = [(x, y) for i, x in enumerate(both) for y in both[i + 1 :]]
    # Per pair: whether both clients put the same one first.
    alike = {(x, y): (a.index(x) < a.index(y)) == (b.index(x) < b.index(y)) for x, y in pairs}
    agree = sum(alike.values())
    tau = (2 * agree - len(pairs)) / len(pairs)

    def apart(x, y):
        (mx, hx), (my, hy) = client[x]["p95"][1], client[y]["p95"][1]
        return not (math.isnan(hx) or math.isnan(hy)) and abs(mx - my) > hx + hy

    # The pairs the measuring client tells apart (95 % intervals apart): the ranking it shows.
    shown = [(x, y) for x, y in pairs if apart(x, y)]
    kept = sum(alike[p] for p in shown)
    flipped = [
        f"`{x}` < `{y}`" if a.index(x) < a.index(y) else f"`{y}` < `{x}`"
        for x, y in shown
        if not alike[(x, y)]
    ]
    return (
        f"- **{path}**: quic-go client {rank(client)}; Chromium {rank(chromium)}; "
        f"{agree} of {len(pairs)} pairs concordant (tau {tau:+.2f})"
        + ("; the same order" if a == b else "")
        + f"; of the {len(shown)} pairs the quic-go client's intervals separate, Chromium orders "
        f"{kept} alike" + (f" and reverses {', '.join(flipped)}" if flipped else "")
    )


# `recoup analyze`'s columns shown (DESIGN.md's metric definitions).
ANALYZE_COLUMNS = (
    ("lost_ranges", "lost ranges"),
    ("t_unit_ms", "T_unit ms (send to retransmission)"),
    ("recovery_latency_ms", "recovery latency mean ms"),
    ("recovery_latency_p95_ms", "recovery latency p95 ms"),
    ("n_max", "N_max"),
    ("retran_ratio", "retransmitted / sent"),
    ("redundancy_cost", "redundancy cost"),
)


def analyze_rows(records, recoup):
    """`recoup analyze` of each server's own qlog (the first run of each cell that wrote one),
    with the congestion window and losses from the trace itself."""
    rows = []
    seen = set()
    for r in records:
        k = (r["path"], r["workload"], r["server"])
        if not r.get("qlog") or k in seen or not os.path.isdir(r["qlog"]):
            continue
        traces = [
            os.path.join(r["qlog"], f)
            for f in sorted(os.listdir(r["qlog"]))
            if f.endswith((".sqlog", ".qlog")) and "client" not in f
        ]
        if not traces:
            continue
        seen.add(k)
        trace = max(traces, key=os.path.getsize)
        a = run_analyze(recoup, trace)
        q = summarise_qlog(trace)
        cw_mean, _ = time_weighted(q["cwnd"])
        rows.append(
            list(k)
            + [a.get(c, "–") for c, _ in ANALYZE_COLUMNS]
            + [
                cw_mean,
                ", ".join(f"{t} {n}" for t, n in sorted(q["lost"].items())),
                "not logged" if q["ptos"] is None else q["ptos"],
                burst_end_cell(q),
                mean_or_dash(q["detect_other_ms"]),
                mean_or_dash(q["declared_to_send_ms"]),
                a.get("error", ""),
            ]
        )
    return rows


def mean_or_dash(xs):
    return f"{statistics.mean(xs):.1f}" if xs else "–"


def burst_end_cell(q):
    tails, others = q["detect_tail_ms"], q["detect_other_ms"]
    if not tails:
        return "–"
    return f"{statistics.mean(tails):.1f} ({len(tails) / (len(tails) + len(others)):.0%})"


def run_analyze(recoup, trace):
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            [recoup, "analyze", trace, "--out", d], capture_output=True, text=True, timeout=300
        )
        if out.returncode != 0:
            return {"error": " ".join(out.stderr.split())[-200:]}
        with open(os.path.join(d, "analyze.json")) as f:
            rows = json.load(f)
    row = rows[0] if isinstance(rows, list) and rows else rows
    return row if isinstance(row, dict) else {}


def peer_versions(args):
    v = {"recoup": recoup_version(args.recoup)}
    v["quicgo"] = tool_version([os.path.join(args.quicgo_dir, "server"), "-version"])
    v["caddy"] = (
        tool_version(["caddy", "version"]) + " (Debian package, HTTP/3 over its vendored quic-go)"
        if shutil.which("caddy")
        else "not installed"
    )
    lock = open(os.path.join(REPO, "Cargo.lock")).read()
    crates = [
        f"{n} {m.group(1)}"
        for n in ("quinn", "quinn-proto", "h3", "h3-quinn")
        if (m := re.search(rf'name = "{n}"\nversion = "([^"]+)"', lock))
    ]
    v["quinn"] = ", ".join(crates)
    v["aioquic"] = tool_version(
        [sys.executable, "-c", "import aioquic; print('aioquic', aioquic.__version__)"]
    )
    v["quiche"] = (
        tool_version([args.quiche_server, "--version"]) if args.quiche_server else "not built"
    )
    v["client"] = tool_version([os.path.join(args.quicgo_dir, "client"), "-version"])
    return v


def version_of(name, vers):
    kind = peers.parse_server(name)[0]
    return vers.get(kind, "").split(" (")[0]


def recorded(records, key, current):
    """Each value of a record's `key` with its count of runs, in order of appearance; runs
    recorded before the key existed count as `current`."""
    counts = {}
    for r in records:
        v = r.get(key, current)
        counts[v] = counts.get(v, 0) + 1
    return counts or {current: 0}


def report(records, skipped, args, vers):
    loads = [x for r in records for x in r["load"]]
    machines = recorded(records, "machine", machine())
    earlier = {}
    for r in records:
        for kind, v in r.get("versions", {}).items():
            if v != vers.get(kind):
                earlier.setdefault(kind, {})[v] = None
    vers = {
        k: v + "".join(f" (some runs: {e})" for e in earlier.get(k, {})) for k, v in vers.items()
    }
    done = [r["finished"] for r in records if "finished" in r]
    lines = [
        "# Recovery benchmark: recoup's policies against the QUIC servers people run",
        "",
        "```sh",
        *dict.fromkeys(r.get("command", "(command not recorded)") for r in records),
        "```",
        "",
        "These commands made the runs below (BIN: the recoup binary named under Peers); "
        f"this report was written by `{args.command}`.",
        "",
        "One client, quic-go's HTTP/3 client (tests/peers/quicgo/cmd/client, "
        f"{vers['client']}), for every server, through `recoup link` on loopback "
        "(tests/interop/recovery_bench.py says what each number is). Each cell: mean over runs "
        "± the 95 % half-width (Student t) over its runs, run k on link seed k for every server.",
        "",
        (
            f"Machine: {next(iter(machines))}"
            if len(machines) == 1
            else "Machines: " + "; ".join(f"{m} ({n} runs)" for m, n in machines.items())
        )
        + f"; 1-minute load average {min(loads, default=0):.1f} to "
        f"{max(loads, default=0):.1f} during the runs (a shared machine). A run whose link sent "
        f"its downstream datagrams more than {args.max_late:g} ms (p99) behind their schedule "
        "is left out of the statistics (the loaded machine, not the server, delayed it) and "
        "counted in `runs`; the largest p99 of the runs kept is in `link late`. "
        f"{len(records)} runs"
        + (f", finished from {min(done)} to {max(done)}" if done else "")
        + ".",
        "",
        "Peers: " + "; ".join(f"{k}: {v}" for k, v in vers.items()) + ".",
        "",
        "Delay: live frames from the origin's send time to their arrival at the client, minus "
        "the path's one-way delay; objects from request to last byte, minus one RTT (both keep "
        "the serialisation at the link rate). A frame or object that never arrived is "
        "infinitely late. Bytes: what the server sent into the link's downstream direction "
        "over the payload bytes (for objects, those that arrived): QUIC and HTTP/3 overhead, "
        "retransmissions and redundancy. Goodput (the file): the bytes that arrived over the "
        "time from the request to the answer or the deadline.",
        "",
    ]
    ranking_lines, all_cells = [], {}
    for path in args.paths:
        p = PATHS[path]
        lines += [f"## {path}: {p.what}", "", f"Stream bit rate {args.bitrate or p.bitrate}.", ""]
        for workload in args.workloads:
            shown_measures = measures(workload)
            cells, rows = {}, []
            for server in args.servers:
                why = skipped.get((path, workload, server)) or skipped.get(server)
                if why:
                    rows.append([server, version_of(server, vers), 0, "skipped: " + why])
                    continue
                c = summarise(records, path, workload, server, args.max_late)
                if not c["runs"] and not c["late_runs"]:
                    continue
                cells[server] = c
                missing = c["missing"]
                shown = "; ".join(missing[:5]) + (
                    f"; and {len(missing) - 5} more" if len(missing) > 5 else ""
                )
                runs = str(c["runs"]) + (f" (+{c['late_runs']} left out)" if c["late_runs"] else "")
                rows.append(
                    [server, version_of(server, vers), runs]
                    + [c[k][0] for k, _, _ in shown_measures]
                    + [c["late"]]
                    + [f"{len(missing)}" + (f": {shown}" if missing else "")]
                    + ["; ".join(c["notes"])[:300]]
                )
            if not rows:
                continue
            width = 3 + len(shown_measures) + 3
            rows = [r + [""] * (width - len(r)) for r in rows]
            header = ["server", "version", "runs"] + [h for _, h, _ in shown_measures]
            lines += [f"### {path} / {workload}", ""]
            lines.append(
                markdown_table(
                    header + ["link late p99 ms (max)", "missing", "notes"],
                    [[x.replace("|", "\\|") if isinstance(x, str) else x for x in r] for r in rows],
                )
            )
            all_cells[(path, workload)] = cells
            rank = ranking(cells, args.servers)
            if rank:
                ranking_lines += [f"- **{path} / {workload}**: " + rank[0]] + [
                    f"  - {x}" for x in rank[1:]
                ]
                lines += ["Ranking (p95): " + "; ".join(rank), ""]
    if ranking_lines:
        lines += ["## Ranking per cell", ""] + ranking_lines + [""]
    browser = [
        line
        for path in args.paths
        if (
            line := browser_agreement(
                path, all_cells.get((path, "live")), all_cells.get((path, "live-chromium"))
            )
        )
    ]
    if browser:
        lines += (
            [
                "## The live push seen by Chromium and by the measuring client",
                "",
                "Servers measured by both, ordered by mean p95 (lowest first); concordant "
                "pairs are the pairs of servers both clients order alike (Kendall's tau = "
                "(concordant - discordant) / pairs). The ranking the measuring client shows is "
                "its pairs with 95 % intervals apart; Chromium's means order each of them alike "
                "or reverse it.",
                "",
            ]
            + browser
            + [""]
        )
    rows = analyze_rows(records, args.recoup)
    if rows:
        lines += [
            "## Each server's own qlog (first run of each cell)",
            "",
            "`recoup analyze` on the server's trace (DESIGN.md's definitions: T_unit from a lost "
            "packet's send to its retransmission, the loss detection time; recovery latency from "
            "the first loss detection to the send of the copy that arrived, 0 when the first "
            "retransmission arrives), and from the trace itself the time-weighted mean "
            "congestion window, the packets declared lost by trigger and the PTO expiries. "
            "Also from the trace: the mean time to find a lost packet (declaration minus send) "
            "for packets that ended a burst (no packet followed within "
            f"{BURST_GAP_MS:g} ms: only a later burst's ACK reveals them) and for the others, "
            "with the share of burst ends among the lost; and the mean time from a declaration "
            "to the sender's next packet with stream data (a window or pacer holding the "
            "retransmission shows here).",
            "",
            markdown_table(
                ["path", "workload", "server"]
                + [h for _, h in ANALYZE_COLUMNS]
                + [
                    "cwnd mean B",
                    "lost by trigger",
                    "PTOs",
                    "found ms: burst end (share)",
                    "found ms: other",
                    "declared to next data ms",
                    "analyze error",
                ],
                rows,
                spec=".3g",
            ),
        ]
    commit = provenance().split(" by ")[0]
    lines += ["", f"{commit}; reproduced by the command at the top."]
    return "\n".join(lines)


def plot(records, args, png):
    """One panel per path (row) and workload (column): p95 delay per server with its 95 %
    interval, or for the file its goodput; an infinite p95 (something never arrived) is a
    hatched bar past the longest finite one, marked ∞."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"recovery-bench: no plot ({e})", file=sys.stderr)
        return False
    have = {(r["path"], r["workload"]) for r in records}
    paths = [p for p in args.paths if any((p, w) in have for w in args.workloads)]
    workloads = [w for w in args.workloads if any((p, w) in have for p in paths)]
    if not paths:
        return False
    fig, axes = plt.subplots(
        len(paths),
        len(workloads),
        figsize=(3.6 * len(workloads), 0.22 * len(args.servers) * len(paths) + 0.8),
        squeeze=False,
    )
    for row, p in zip(axes, paths):
        for ax, w in zip(row, workloads):
            measure = "goodput" if w == "file" else "p95"
            names, means, halves, colors = [], [], [], []
            for s in args.servers:
                c = summarise(records, p, w, s, args.max_late)
                if not c["runs"]:
                    continue
                m, h = c[measure][1]
                if math.isnan(m):
                    # No value (no run recorded it): nothing to draw, and not "never arrived".
                    continue
                names.append(s.replace("recoup-", "r-"))
                means.append(m)
                halves.append(0 if math.isnan(h) else h)
                colors.append("tab:blue" if s.startswith("recoup-") else "tab:orange")
            if not names:
                ax.axis("off")
                continue
            finite = [m for m in means if math.isfinite(m)]
            top = 1.15 * max(finite, default=1.0)
            inf = [math.isinf(m) for m in means]
            bars = ax.barh(
                names,
                [top if i else m for i, m in zip(inf, means)],
                xerr=[0 if i else h for i, h in zip(inf, halves)],
                color=colors,
            )
            for bar, i in zip(bars, inf):
                if i:
                    bar.set_hatch("//")
                    bar.set_alpha(0.4)
                    ax.text(top, bar.get_y() + bar.get_height() / 2, " ∞", va="center", fontsize=7)
            ax.invert_yaxis()
            ax.set_title(f"{p} / {w}", fontsize=8)
            ax.set_xlabel(
                "goodput Mbit/s (± 95 % CI)" if w == "file" else "p95 delay ms (± 95 % CI)",
                fontsize=7,
            )
            ax.tick_params(labelsize=6)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return True


def load_records(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            out = [json.loads(line) for line in f if line.strip()]
    return out


def peer_status(path):
    """{peer: error} from scripts/install-peers.sh --status."""
    out = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                name, state, text = (line.rstrip("\n").split("\t") + ["", ""])[:3]
                if state != "ok":
                    out[name] = f"not installed: {text}"
    return out


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--recoup", default=os.environ.get("RECOUP_BIN"), help="recoup binary")
    ap.add_argument("--servers", default=DEFAULT_SERVERS)
    ap.add_argument("--paths", default=",".join(PATHS), help=f"of {', '.join(PATHS)}")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"of {', '.join(WORKLOADS)}")
    ap.add_argument("--runs", type=int, default=5, help="runs (link seeds) per cell")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--duration", type=parse_seconds, default=20.0, help="per run")
    ap.add_argument("--bitrate", help="stream bit rate on every path (default: the path's)")
    ap.add_argument("--timeout", type=parse_seconds, default=30.0, help="slack per object/stream")
    ap.add_argument(
        "--quick", action="store_true", help="one 5 s run: loss2, live and segments, 2 servers"
    )
    ap.add_argument("--no-qlog", action="store_true", help="no server qlog on first runs")
    ap.add_argument(
        "--max-late",
        type=float,
        default=20.0,
        help="leave out (and with --resume, rerun) runs whose link sent downstream datagrams "
        "more than this many ms (p99) behind schedule: a loaded machine (default 20)",
    )
    ap.add_argument("--resume", action="store_true", help="skip runs already in OUT")
    ap.add_argument("--report-only", action="store_true", help="only rewrite the report")
    ap.add_argument("--out", default=os.path.join(REPO, "results", "recovery-bench"))
    ap.add_argument("--doc", help="also write the report here (docs/RECOVERY-BENCH.md)")
    # Passed by scripts/recovery-bench.sh.
    ap.add_argument("--quicgo-dir", help=argparse.SUPPRESS)
    ap.add_argument("--quinn-server", help=argparse.SUPPRESS)
    ap.add_argument("--quiche-server", help=argparse.SUPPRESS)
    ap.add_argument("--peer-status", help=argparse.SUPPRESS)
    ap.add_argument("--pid-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    internal = (
        "--recoup",
        "--quicgo-dir",
        "--quinn-server",
        "--quiche-server",
        "--peer-status",
        "--pid-file",
    )
    shown, skip_next = [], False
    for a in sys.argv[1:]:
        if skip_next:
            skip_next = False
        elif a in internal:
            skip_next = True
        elif not a.startswith(tuple(i + "=" for i in internal)):
            shown.append(a)
    args.command = shlex.join(["bash", "scripts/recovery-bench.sh", "--recoup", "BIN"] + shown)
    if not args.quicgo_dir:
        ap.error("--quicgo-dir DIR is needed (scripts/recovery-bench.sh passes it)")
    if not args.recoup:
        ap.error("the recoup binary: --recoup BIN or RECOUP_BIN")
    args.recoup = os.path.abspath(args.recoup)
    if args.quick:
        args.runs = 1
        for k, v in QUICK.items():
            if f"--{k}" not in sys.argv:
                setattr(args, k, v)
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    args.paths, args.workloads, args.servers = (
        split(args.paths),
        split(args.workloads),
        split(args.servers),
    )
    for p in args.paths:
        if p not in PATHS:
            ap.error(f"unknown path {p!r} (of {', '.join(PATHS)})")
    for w in args.workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r} (of {', '.join(WORKLOADS)})")
    if "lte" in args.paths and not os.path.isdir(TRACES):
        ap.error(f"the lte path reads its traces from {TRACES}, which is missing")
    for tool in (args.recoup, os.path.join(args.quicgo_dir, "client")):
        if not os.access(tool, os.X_OK):
            ap.error(f"{tool} is not an executable (the link and the client need it)")
    os.makedirs(args.out, exist_ok=True)
    records_file = os.path.join(args.out, "records.jsonl")
    vers = peer_versions(args)

    skipped = {}
    for name in args.servers:
        try:
            kind = peers.parse_server(name)[0]
        except ServerFailed as e:
            skipped[name] = str(e)
            continue
        why = peer_status(args.peer_status).get(kind)
        if kind == "quinn" and not (args.quinn_server and os.access(args.quinn_server, os.X_OK)):
            why = why or "h3-quinn-server not built"
        if kind == "quiche" and not (args.quiche_server and os.access(args.quiche_server, os.X_OK)):
            why = why or "quiche-h3-server not built"
        if kind == "caddy" and not shutil.which("caddy"):
            why = why or "caddy not installed"
        if why:
            skipped[name] = why
    for name, why in skipped.items():
        print(f"recovery-bench: {name}: skipped: {why}", file=sys.stderr, flush=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    for path in args.paths:
        for w in args.workloads:
            for s in args.servers:
                if s in skipped or w not in LIVE:
                    continue
                if not peers.relays(s):
                    skipped[(path, w, s)] = peers.FILES_ONLY
                elif w == "live-chromium" and not chromium:
                    skipped[(path, w, s)] = (
                        "chromium not installed (scripts/test.sh installs Debian's as root)"
                    )

    records = load_records(records_file) if (args.resume or args.report_only) else []
    if not args.report_only:
        if not args.resume and os.path.exists(records_file):
            os.replace(records_file, records_file + ".old")
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        procs = Processes(args.pid_file)
        # A run whose link fell behind is measured again.
        done = {r["key"] for r in records if valid(r, args.max_late)}
        ctx = {"args": args, "layout": {}}
        ctx["tools"] = argparse.Namespace(
            recoup=args.recoup,
            quicgo_dir=args.quicgo_dir,
            quinn_server=args.quinn_server,
            quiche_server=args.quiche_server,
        )
        work = tempfile.mkdtemp(prefix="recovery-bench-")
        try:
            ctx["www"] = os.path.join(work, "www")
            ctx["origin_logs"] = os.path.join(work, "origin-logs")
            os.makedirs(ctx["www"])
            with open(os.path.join(ctx["www"], "warmup.txt"), "w") as f:
                f.write("warm-up\n")
            for name in PLAYER_FILES:
                shutil.copy(os.path.join(REPO, "web", name), ctx["www"])
            ctx["cert"] = self_signed(work)
            for path in args.paths:
                b = bitrate_of(args, path)
                if b not in ctx["layout"]:
                    ctx["layout"][b] = www_layout(ctx["www"], b, args.duration)
            origin_cmd = [sys.executable, os.path.join(HERE, "live_origin.py")]
            origin_cmd += ["--root", ctx["www"], "--log-dir", ctx["origin_logs"]]
            _, ctx["origin"] = procs.start_listening(
                "origin", origin_cmd, os.path.join(work, "origin.log")
            )
            with open(records_file, "a") as rec_out:
                for run in range(args.runs):
                    seed = args.first_seed + run
                    for path in args.paths:
                        for workload in args.workloads:
                            for server in args.servers:
                                if server in skipped or (path, workload, server) in skipped:
                                    continue
                                if run_key(path, workload, server, seed, args) in done:
                                    continue
                                tag = f"{path}/{workload}/{server}/seed-{seed}"
                                qdir = None
                                if run == 0 and not args.no_qlog:
                                    qdir = os.path.join(args.out, "qlog", path, workload, server)
                                    shutil.rmtree(qdir, ignore_errors=True)
                                try:
                                    r = one_run(
                                        procs,
                                        ctx,
                                        path,
                                        workload,
                                        server,
                                        seed,
                                        os.path.join(args.out, "runs", tag),
                                        qdir,
                                    )
                                except ServerFailed as e:
                                    print(f"recovery-bench: {e}; skipping it", file=sys.stderr)
                                    skipped[(path, workload, server)] = str(e)
                                    continue
                                # What made it, so that a report over runs from several
                                # sessions names every machine and peer version it covers.
                                r["machine"] = machine()
                                kind = peers.parse_server(server)[0]
                                r["versions"] = {kind: vers[kind], "client": vers["client"]}
                                rec_out.write(json.dumps(r) + "\n")
                                rec_out.flush()
                                records.append(r)
                                s = run_stats(r)
                                print(
                                    f"{tag}: p50 {s['p50']:.0f} p95 {s['p95']:.0f} "
                                    f"p99 {s['p99']:.0f} ms, >200 ms {s['over200']:.1f} %, "
                                    f"freezes/100 s {s['stalls']:.1f}, bytes {s['bytes']:.3f}, "
                                    f"{len(s['missing'])} missing, load {r['load'][1]:.1f} "
                                    f"{r['note']}",
                                    flush=True,
                                )
        finally:
            procs.stop_all()
            shutil.rmtree(work, ignore_errors=True)
    wanted = {(p, w, s) for p in args.paths for w in args.workloads for s in args.servers}
    records = [r for r in records if (r["path"], r["workload"], r["server"]) in wanted]
    text = report(records, skipped, args, vers)
    md = os.path.join(args.out, "recovery-bench.md")
    png = os.path.join(args.out, "recovery-bench.png")
    has_plot = plot(records, args, png)
    if has_plot:
        text += f"\n![p95 delay per server, path and workload]({os.path.basename(png)})\n"
    with open(md, "w") as f:
        f.write(text + "\n")
    if args.doc:
        # The plot beside the doc takes the doc's name (RECOVERY-BENCH.md: recovery-bench.png),
        # so two reports in one folder keep their own.
        doc_abs = os.path.abspath(args.doc)
        doc_png = os.path.splitext(doc_abs)[0].lower() + ".png"
        doc_png = os.path.join(os.path.dirname(doc_abs), os.path.basename(doc_png))
        with open(args.doc, "w") as f:
            f.write(text.replace(os.path.basename(png), os.path.basename(doc_png)) + "\n")
        # A report written into OUT itself already has its plot there.
        if has_plot and os.path.abspath(png) != doc_png:
            shutil.copy(png, doc_png)
    print(text)
    print(f"\nreport: {md}; runs: {records_file}")
    missing = [r for r in records if run_stats(r)["missing"]]
    for r in missing:
        m = run_stats(r)["missing"]
        print(
            f"recovery-bench: {r['server']} lost {len(m)} of its {r['workload']} items on "
            f"{r['path']} seed {r['seed']}: " + ", ".join(str(i) for i, _ in m[:20]),
            file=sys.stderr,
        )
    failed = [k for k, why in skipped.items() if not why.startswith(peers.FILES_ONLY)]
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
