#!/usr/bin/env python3
"""recoup serve with 1 and 2 workers under the same client load, side by side.

Two loads per worker count, against `recoup serve --workers N` on loopback (no link: the
server's CPU is the bottleneck), with the unmodified quinn client (`quinn-client`,
crates/recoup-interop) as the load, whose processes share the machine's cores with the server:

- goodput: CLIENTS concurrent downloads of one SIZE file each (one quinn-client process, one
  connection each); aggregate goodput = all bytes / the time from the first start to the last
  end; the server's CPU seconds over that time (from /proc), and how the connections spread
  over the workers (the server's "connection accepted ... worker=N" log lines);
- connections per second: PROCS quinn-client processes, each making CONNS connections one
  after the other (`--multiconnect`) for a 1 KiB file; connections completed / wall time.

    python3 tests/interop/workers_bench.py --bin target/release [--workers 1,2] [--clients 50]
        [--size 4MB] [--procs 10] [--conns 30] [--repeats 3] [--serve-flags '--cc cubic']

Prints one Markdown table (means over the repeats, each row's individual runs beside).
Not a test: the numbers go to docs/EDGE.md.
"""

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_harness import parse_size  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Server:
    def __init__(self, args, workers, root, log):
        cmd = [os.path.join(args.bin, "recoup"), "serve", "--listen", "127.0.0.1:0"]
        cmd += ["--root", root, "--workers", str(workers), *args.serve_flags.split()]
        self.log = log
        env = dict(os.environ, RUST_LOG="info")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, env=env
        )
        line = self.proc.stdout.readline()
        m = re.match(r"listening on (\S+)", line)
        if not m:
            self.stop()
            raise SystemExit(f"recoup serve did not start: {line!r}\n{open(log).read()}")
        self.addr = m.group(1)

    def per_worker(self):
        counts = {}
        with open(self.log, errors="replace") as f:
            for line in f:
                m = re.search(r"connection accepted.*worker=(\d+)", line) or re.search(
                    r"worker=(\d+).*connection accepted", line
                )
                if m:
                    counts[int(m.group(1))] = counts.get(int(m.group(1)), 0) + 1
        return counts

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def client(args, url, out, multiconnect=False, urls=None):
    cmd = [os.path.join(args.bin, "quinn-client")]
    if multiconnect:
        return subprocess.Popen(
            cmd + ["--multiconnect", "-d", out, *urls],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    return subprocess.Popen(
        cmd + [url, "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def wait_all(procs, what):
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"{what}: quinn-client failed: {err.strip()[-400:]}")


def goodput_run(args, workers, work):
    root = os.path.join(work, "www")
    srv = Server(args, workers, root, os.path.join(work, f"server-{workers}.log"))
    try:
        outs = [os.path.join(work, "out", f"{i}.bin") for i in range(args.clients)]
        cpu0, t0 = cpu_seconds(srv.proc.pid), time.monotonic()
        procs = [client(args, f"https://{srv.addr}/big.bin", o) for o in outs]
        wait_all(procs, "goodput")
        elapsed = time.monotonic() - t0
        server_cpu = cpu_seconds(srv.proc.pid) - cpu0
        for o in outs:
            if os.path.getsize(o) != args.size:
                raise SystemExit(f"{o}: {os.path.getsize(o)} bytes, not {args.size}")
            os.remove(o)
        spread = srv.per_worker()
    finally:
        srv.stop()
    mbps = args.clients * args.size * 8 / elapsed / 1e6
    return mbps, server_cpu / elapsed, spread, elapsed


def conns_run(args, workers, work):
    root = os.path.join(work, "www")
    srv = Server(args, workers, root, os.path.join(work, f"server-conns-{workers}.log"))
    try:
        urls = [f"https://{srv.addr}/small.bin"] * args.conns
        dirs = [os.path.join(work, "out", f"c{i}") for i in range(args.procs)]
        for d in dirs:
            os.makedirs(d, exist_ok=True)
        cpu0, t0 = cpu_seconds(srv.proc.pid), time.monotonic()
        procs = [client(args, None, d, multiconnect=True, urls=urls) for d in dirs]
        wait_all(procs, "connections")
        elapsed = time.monotonic() - t0
        server_cpu = cpu_seconds(srv.proc.pid) - cpu0
    finally:
        srv.stop()
    return args.procs * args.conns / elapsed, server_cpu / elapsed


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--size", type=parse_size, default=4 * 1024 * 1024)
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--conns", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--serve-flags",
        default="--cc cubic",
        help="more flags for recoup serve (default: CUBIC, since BBRv1 on loopback is held to a "
        "few packets by ACK aggregation and would measure its window, not the workers)",
    )
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="recoup-workers-")
    try:
        os.makedirs(os.path.join(work, "www"))
        os.makedirs(os.path.join(work, "out"))
        with open(os.path.join(work, "www", "big.bin"), "wb") as f:
            f.write(os.urandom(args.size))
        with open(os.path.join(work, "www", "small.bin"), "wb") as f:
            f.write(os.urandom(1024))
        counts = [int(w) for w in args.workers.split(",")]
        rows = {w: {"mbps": [], "cpu": [], "spread": [], "cps": [], "ccpu": []} for w in counts}
        clients_cpu0 = children_cpu()
        # Interleaved, so that a change in the machine's load touches every worker count.
        for r in range(args.repeats):
            for w in counts:
                mbps, cpu, spread, secs = goodput_run(args, w, work)
                cps, ccpu = conns_run(args, w, work)
                row = rows[w]
                row["mbps"].append(mbps)
                row["cpu"].append(cpu)
                row["spread"].append(spread)
                row["cps"].append(cps)
                row["ccpu"].append(ccpu)
                print(
                    f"repeat {r + 1}, {w} worker(s): {mbps:.0f} Mbit/s in {secs:.1f} s, "
                    f"server {cpu:.2f} cores, spread {spread}; {cps:.0f} connections/s, "
                    f"server {ccpu:.2f} cores",
                    flush=True,
                )
        clients_cpu = children_cpu() - clients_cpu0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.mean(rows[counts[0]]["mbps"])
    print(
        f"\n{args.clients} concurrent downloads of {args.size} bytes; {args.procs} x "
        f"{args.conns} connections for 1 KiB; {args.repeats} repeats; {os.cpu_count()} cores; "
        f"recoup serve {args.serve_flags}; "
        f"quinn-client processes used {clients_cpu:.0f} CPU-s in all"
    )
    print(
        "| workers | goodput Mbit/s | vs first | server cores busy | connections per worker "
        "(share of the busiest) | connections/s | server cores busy (conn/s) |"
    )
    print("|---|---|---|---|---|---|---|")
    for w in counts:
        row = rows[w]
        mbps = statistics.mean(row["mbps"])
        shares = []
        for spread in row["spread"]:
            total = sum(spread.values()) or 1
            shares.append(max(spread.values(), default=0) / total)
        spreads = "; ".join("/".join(str(s.get(i, 0)) for i in range(w)) for s in row["spread"])
        runs = ", ".join(f"{m:.0f}" for m in row["mbps"])
        print(
            f"| {w} | {mbps:.0f} ({runs}) | {mbps / base:.2f}x | "
            f"{statistics.mean(row['cpu']):.2f} | {spreads} ({max(shares):.0%}) | "
            f"{statistics.mean(row['cps']):.0f} | {statistics.mean(row['ccpu']):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
