#!/usr/bin/env python3
"""Handshake and a 3 MB transfer at 30 % loss in both directions, with every peer.

recoup serve against the aioquic and quinn clients, and recoup get against the aioquic and quinn
servers, through `recoup link` on loopback (15 ms one way, Bernoulli 30 % loss on each
direction, a fresh seed per run), N runs each. Prints per pairing the successes (the file
arrived byte-exact) and the distribution of the time from the client's start to its exit, and
the causes of the failures. Not a test: the table goes to docs/INTEROP.md.

    python3 tests/interop/loss_bench.py --bin target/release [--runs 20] [--jobs 1]
        [--policy arq] [--size 3MB] [--timeout 120] [--keep DIR] [--recoup-flags FLAGS]

With --keep, a failed run's logs and both endpoints' qlogs (QLOGDIR) stay in DIR/SERVER_CLIENT_SEED.
With --gaps, recoup serve writes a qlog in every run and the longest time it went without sending
(its backed-off probe timeout) and without receiving is reported per run and per pairing.

Other links and workloads for the same counting: --link replaces the link's flags, --files N
downloads N files of --size each on a new connection per file (the interop runner's
multiconnect), and pairs may name two peers (quinn-quinn) to measure a peer against itself:

    python3 tests/interop/loss_bench.py --bin target/debug --pairs quinn-recoup,quinn-quinn \
        --link "--delay 15ms --corrupt '30% burst=3 within=50'" --files 10 --size 1KB --runs 30
"""

import argparse
import concurrent.futures
import filecmp
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matrix import Proc, client_cmds, server_cmd  # noqa: E402

PAIRS = [("recoup", "aioquic"), ("recoup", "quinn"), ("aioquic", "recoup"), ("quinn", "recoup")]


def longest_gaps(qlog_dir):
    """The longest time recoup serve went without receiving a packet and without sending one,
    in seconds, over the traces in `qlog_dir` (its backed-off probe timeout shows in the second).
    """
    longest = {"receive": 0.0, "send": 0.0}
    for name in os.listdir(qlog_dir):
        last = {}
        with open(os.path.join(qlog_dir, name), encoding="utf-8") as f:
            for line in f:
                try:
                    event = json.loads(line.strip("\x1e\n"))
                except ValueError:
                    continue
                kind = {"transport:packet_received": "receive", "transport:packet_sent": "send"}
                k = kind.get(event.get("name"))
                if k is None:
                    continue
                t = event["time"] / 1000.0
                if k in last:
                    longest[k] = max(longest[k], t - last[k])
                last[k] = t
    return longest


def one_run(server, client, seed, args, work):
    gaps = {}
    ok, secs, why = one_run_inner(server, client, seed, args, work, gaps)
    return ok, secs, why, gaps


def one_run_inner(server, client, seed, args, work, gaps):
    run = os.path.join(work, f"{server}_{client}_{seed}")
    www, down = os.path.join(run, "www"), os.path.join(run, "down")
    os.makedirs(www)
    os.makedirs(down)
    names = [f"bench{i}.bin" for i in range(args.files)]
    for name in names:
        with open(os.path.join(www, name), "wb") as f:
            f.write(os.urandom(args.size))
    qlogs = {side: os.path.join(run, f"qlog-{side}") for side in ("server", "client")}
    env = {}
    for side, d in qlogs.items():
        os.makedirs(d)
        traced = args.keep or (args.gaps and side == "server" and server == "recoup")
        env[side] = dict(os.environ, QLOGDIR=d) if traced else None
    procs = []
    ok = False
    try:
        scmd = server_cmd(server, args.bin, www, None, args.policy)
        if server == "recoup":
            scmd += shlex.split(args.recoup_flags)
        srv = Proc(
            "server",
            scmd,
            f"{run}/server.log",
            env["server"],
        )
        procs.append(srv)
        addr = srv.wait_for(r"listening on (\S+)", 20).group(1)
        link = Proc(
            "link",
            [os.path.join(args.bin, "recoup"), "link", "--listen", "127.0.0.1:0", "--upstream"]
            + [addr, *shlex.split(args.link), "--seed", str(seed)],
            f"{run}/link.log",
        )
        procs.append(link)
        link_addr = link.wait_for(r"listening on (\S+)", 20).group(1)
        urls = [f"https://{link_addr}/{name}" for name in names]
        mode = "multiconnect" if len(names) > 1 else None
        cmds = client_cmds(client, args.bin, urls, down, mode, args.timeout)
        start = time.monotonic()
        for cmd in cmds:
            if client == "recoup":
                cmd += shlex.split(args.recoup_flags)
            left = args.timeout - (time.monotonic() - start)
            try:
                r = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=left, env=env["client"]
                )
            except subprocess.TimeoutExpired:
                return False, args.timeout, f"no result after {args.timeout:.0f} s"
            with open(f"{run}/client.log", "a") as f:
                f.write(r.stdout + r.stderr)
            if r.returncode != 0:
                lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
                last = lines[-1][:200] if lines else ""
                return False, time.monotonic() - start, f"exit {r.returncode}: {last}"
        elapsed = time.monotonic() - start
        ok = all(
            filecmp.cmp(os.path.join(www, n), os.path.join(down, n), shallow=False)
            if os.path.exists(os.path.join(down, n))
            else False
            for n in names
        )
        if ok:
            return True, elapsed, ""
        return False, elapsed, "a file is missing or differs"
    finally:
        for p in procs:
            p.stop(signal.SIGKILL)
        if args.gaps and server == "recoup":
            gaps.update(longest_gaps(qlogs["server"]))
        if ok or not args.keep:
            shutil.rmtree(run, ignore_errors=True)
        else:
            shutil.rmtree(www, ignore_errors=True)
            shutil.rmtree(down, ignore_errors=True)


def parse_size(s):
    units = {"KB": 1024, "MB": 1024 * 1024}
    for u, m in units.items():
        if s.upper().endswith(u):
            return int(float(s[: -len(u)]) * m)
    return int(s)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1, help="seeds FIRST .. FIRST+RUNS-1")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--policy", default=None, help="recoup's policy (default: its default)")
    ap.add_argument("--size", type=parse_size, default=3 * 1024 * 1024)
    ap.add_argument("--files", type=int, default=1, help="files, one connection each")
    ap.add_argument(
        "--link",
        default="--delay 15ms --loss 'bernoulli 30%'",
        help="recoup link's flags (the seed is added)",
    )
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--pairs", default=",".join(f"{s}-{c}" for s, c in PAIRS))
    ap.add_argument(
        "--recoup-flags",
        default="",
        help="more flags for recoup serve / recoup get, e.g. '--idle-timeout 60s'",
    )
    ap.add_argument("--keep", help="keep the logs and qlogs of failed runs here")
    ap.add_argument(
        "--gaps",
        action="store_true",
        help="report recoup serve's longest gaps between packets sent and received (its qlog)",
    )
    args = ap.parse_args()
    pairs = [tuple(p.split("-")) for p in args.pairs.split(",")]
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    work = args.keep or tempfile.mkdtemp(prefix="recoup-lossbench-")
    results = {p: [] for p in pairs}
    gap_rows = {p: [] for p in pairs}
    t0 = time.monotonic()
    jobs = [
        (s, c, seed)
        for seed in range(args.first_seed, args.first_seed + args.runs)
        for s, c in pairs
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(one_run, *job, args, work): job for job in jobs}
        for f in concurrent.futures.as_completed(futures):
            s, c, seed = futures[f]
            ok, secs, why, gaps = f.result()
            results[(s, c)].append((ok, secs, why, seed))
            if gaps:
                gap_rows[(s, c)].append(gaps)
            shown = "".join(f" longest {k} gap {v:.2f} s" for k, v in gaps.items())
            print(
                f"{s} server <- {c} client seed {seed}: {'ok' if ok else 'FAILED'} "
                f"{secs:.1f} s {why}{shown}",
                flush=True,
            )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{args.runs} runs per pair, {args.files} x {args.size} bytes, link: {args.link}, "
        f"recoup policy {args.policy or 'default'} {args.recoup_flags}, "
        f"{os.cpu_count()} cores, "
        f"{time.monotonic() - t0:.0f} s in all"
    )
    print("| server | client | completed | time p50 s | p90 s | min s | max s | failures |")
    print("|---|---|---|---|---|---|---|---|")
    for (s, c), rs in results.items():
        done = sorted(secs for ok, secs, _, _ in rs if ok)
        causes = {}
        for ok, _, why, seed in rs:
            if not ok:
                causes.setdefault(why, []).append(seed)
        if done:
            p90 = done[min(len(done) - 1, int(0.9 * len(done)))]
            stats = f"{statistics.median(done):.1f} | {p90:.1f} | {done[0]:.1f} | {done[-1]:.1f}"
        else:
            stats = "- | - | - | -"
        fails = "; ".join(f"{w} (seeds {', '.join(map(str, n))})" for w, n in causes.items())
        print(f"| {s} | {c} | {len(done)}/{len(rs)} | {stats} | {fails or '-'} |")
    if any(gap_rows.values()):
        print("\nrecoup serve's longest gaps between packets per run (its qlog), seconds:")
        print("| server | client | runs | send gap max | send gap p50 | receive gap max |")
        print("|---|---|---|---|---|---|")
        for (s, c), rows in gap_rows.items():
            if rows:
                send = sorted(r["send"] for r in rows)
                recv = max(r["receive"] for r in rows)
                med = statistics.median(send)
                print(f"| {s} | {c} | {len(rows)} | {send[-1]:.2f} | {med:.2f} | {recv:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
