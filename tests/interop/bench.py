#!/usr/bin/env python3
"""Bulk-download benchmark over loopback: `recoup serve` next to a quinn server (crates/recoup-
interop), each serving the same file to the same client (the quinn client), in one run.

Reports goodput (client-measured, first packet to last byte), server CPU time (user+system
from /proc) per GB served, the client's CPU per GB (a client-bound download's goodput follows
it), and the recoup/quinn ratios. Not a test: numbers go to BENCHMARKS.md.

    cargo build --release -p recoup-cli -p recoup-interop
    python3 tests/interop/bench.py --bin target/release --size-mb 200 --rounds 40

A 200 MiB download takes about half a second on loopback, so 40 rounds take a few minutes; the
round-by-round intervals of fewer rounds are too wide to tell the servers apart.

With --before-bin DIR, that directory's `recoup serve` (an older build) joins the same
interleaved rounds as "recoup-before", so a change is measured against both in one run.

Each round downloads once from every server, the order rotating from round to round so no
server always goes first. Besides the medians, each server's ratios to quinn are taken round by
round (the two downloads of a round saw the same machine state) and summarised by their median
with a 95 % bootstrap interval: an interval that excludes 1 is a difference beyond the noise.
"""

import argparse
import os
import random
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat(5); index from the state field (3).
    return (int(fields[11]) + int(fields[12])) / TICK


def start(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.match(r"listening on (\S+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"{cmd[0]} printed {line!r}")
    return proc, m.group(1)


def children_cpu():
    """User + system CPU seconds of the finished child processes (the clients)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def download(client, addr, out):
    """Bytes, seconds, and the client's CPU seconds of one download."""
    before = children_cpu()
    r = subprocess.run(
        [client, f"https://{addr}/bulk.bin", "-o", out],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        raise SystemExit(f"client failed against {addr}:\n{r.stdout}\n{r.stderr}")
    m = re.search(r"(\d+) bytes in ([\d.]+) s", r.stdout)
    return int(m.group(1)), float(m.group(2)), children_cpu() - before


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--policy", default="arq")
    ap.add_argument("--before-bin", help="also serve with this directory's recoup")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="also serve with --bin's recoup and these extra `recoup serve` arguments, "
        "e.g. mds1452='--max-datagram-size 1452' (repeatable)",
    )
    args = ap.parse_args()
    # Checked before any server starts, so a bad one leaves no server running.
    variants = []
    for variant in args.variant:
        name, sep, extra = variant.partition("=")
        if not sep or not name:
            ap.error(f"--variant {variant!r}: expected NAME=ARGS")
        variants.append((name, shlex.split(extra)))
    client = os.path.join(args.bin, "quinn-client")
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "www")
        os.mkdir(root)
        with open(os.path.join(root, "bulk.bin"), "wb") as f:
            f.write(os.urandom(args.size_mb * 1024 * 1024))
        out = os.path.join(tmp, "out.bin")

        def recoup_serve(bin_dir, extra=()):
            cmd = [os.path.join(bin_dir, "recoup"), "serve", "--listen", "127.0.0.1:0"]
            return start(cmd + ["--root", root, "--policy", args.policy, *extra])

        servers = {"recoup": recoup_serve(args.bin)}
        if args.before_bin:
            servers["recoup-before"] = recoup_serve(args.before_bin)
        for name, extra in variants:
            servers[f"recoup-{name}"] = recoup_serve(args.bin, extra)
        servers["quinn"] = start(
            [os.path.join(args.bin, "quinn-server"), "--listen", "127.0.0.1:0", "--root", root]
        )
        results = {
            name: {"goodput": [], "cpu_gb": [], "bytes": 0, "cpu": 0.0, "client_cpu": 0.0}
            for name in servers
        }
        order = list(servers)
        try:
            for _proc, addr in servers.values():
                download(client, addr, out)  # warm-up, not counted
            for round_no in range(args.rounds):
                shift = round_no % len(order)
                for name in order[shift:] + order[:shift]:
                    proc, addr = servers[name]
                    before = cpu_seconds(proc.pid)
                    n, secs, client_cpu = download(client, addr, out)
                    time.sleep(0.2)  # let the server finish closing before reading its CPU
                    cpu = cpu_seconds(proc.pid) - before
                    results[name]["cpu"] += cpu
                    results[name]["cpu_gb"].append(cpu / (n / 1e9))
                    results[name]["client_cpu"] += client_cpu
                    results[name]["bytes"] += n
                    results[name]["goodput"].append(n * 8 / secs / 1e6)
        finally:
            for proc, _ in servers.values():
                proc.kill()
                proc.wait()
    print(
        f"{args.rounds} rounds of {args.size_mb} MiB, client quinn-client, policy {args.policy}, "
        f"{os.cpu_count()} cores"
    )
    print(
        "| server | goodput Mbit/s (median) | min | max | server CPU s per GB "
        "| client CPU s per GB |"
    )
    print("|---|---|---|---|---|---|")
    summary = {}
    for name, r in results.items():
        med = statistics.median(r["goodput"])
        cpu_gb = r["cpu"] / (r["bytes"] / 1e9)
        summary[name] = (med, cpu_gb)
        print(
            f"| {name} | {med:.0f} | {min(r['goodput']):.0f} | {max(r['goodput']):.0f} | "
            f"{cpu_gb:.2f} | {r['client_cpu'] / (r['bytes'] / 1e9):.2f} |"
        )
    print()
    for name in summary:
        if name == "quinn":
            continue
        g = summary[name][0] / summary["quinn"][0]
        c = summary[name][1] / summary["quinn"][1]
        print(f"{name}/quinn goodput ratio: {g:.2f}x; CPU per GB ratio: {c:.2f}x")
        for what, key in (("goodput", "goodput"), ("CPU per GB", "cpu_gb")):
            ratios = [a / b for a, b in zip(results[name][key], results["quinn"][key]) if b > 0]
            lo, hi = bootstrap_interval(ratios)
            print(
                f"  {what}, round by round: median {statistics.median(ratios):.3f}x, "
                f"95 % interval {lo:.3f}-{hi:.3f}x ({len(ratios)} rounds)"
            )


def bootstrap_interval(values, resamples=2000):
    """95 % percentile-bootstrap interval of the median; seeded, so a report is repeatable."""
    rng = random.Random(1)
    medians = sorted(
        statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples)
    )
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


if __name__ == "__main__":
    sys.exit(main())
