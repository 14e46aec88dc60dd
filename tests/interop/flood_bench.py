#!/usr/bin/env python3
"""5000 silent Initials against recoup serve: its memory before, during and after, and a real
client served throughout, for each --retry setting side by side.

Each setting gets a fresh `recoup serve --metrics` on loopback. The flood: INITIALS client
Initials (aioquic's QuicConnection makes each ClientHello, a new connection ID each, from
SOCKETS source ports), sent at RATE per second, each client silent after its first datagram,
as a half-open flood is. A real client (`recoup get`) fetches a 1 MiB file every second from
WARMUP seconds before the flood to the end; the starting memory is taken after the warm-up, at
steady state under that client (`--control` adds a run without the flood). The server's RSS
(/proc/PID/status) is sampled every 250 ms until the idle timeout has ended the half-open
connections (--idle-timeout plus a margin), and its metrics tell the connections accepted, the
Retries sent and the handshakes in flight.

    python3 tests/interop/flood_bench.py --bin target/release [--retry off,auto] [--control]
        [--initials 5000] [--rate 1000] [--idle-timeout 30s] [--warmup 20]

Prints one Markdown table. Not a test: the numbers go to docs/EDGE.md.
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metric(addr, name):
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")


def initials(target, count):
    """The first datagram of `count` client connections (distinct connection IDs)."""
    host, port = target.rsplit(":", 1)
    config = QuicConfiguration(is_client=True, alpn_protocols=["h3"], server_name="localhost")
    config.verify_mode = False
    out = []
    for _ in range(count):
        conn = QuicConnection(configuration=config)
        conn.connect((host, int(port)), now=time.time())
        datagrams = conn.datagrams_to_send(now=time.time())
        out.append(datagrams[0][0])
    return out


def flood(target, datagrams, sockets, rate):
    host, port = target.rsplit(":", 1)
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(sockets)]
    start = time.monotonic()
    for i, d in enumerate(datagrams):
        socks[i % sockets].sendto(d, (host, int(port)))
        due = start + (i + 1) / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    # The sockets stay open and silent: the server's answers are dropped unread.
    return socks


def real_client(args, addr, out_dir, stop, results):
    url = f"https://{addr}/file.bin"
    n = 0
    while not stop.is_set():
        out = os.path.join(out_dir, f"real{n}.bin")
        t0 = time.monotonic()
        r = subprocess.run(
            [os.path.join(args.bin, "recoup"), "get", "--insecure", url, "-o", out],
            capture_output=True,
            text=True,
            timeout=60,
        )
        secs = time.monotonic() - t0
        ok = r.returncode == 0 and os.path.getsize(out) == 1 << 20
        results.append((ok, secs, r.stderr.strip().splitlines()[-1:] if not ok else []))
        if os.path.exists(out):
            os.remove(out)
        n += 1
        stop.wait(max(0.0, 1.0 - secs))


def one_setting(args, retry, count, work, datagrams_for):
    cmd = [os.path.join(args.bin, "recoup"), "serve", "--listen", "127.0.0.1:0"]
    cmd += ["--root", os.path.join(work, "www"), "--metrics", "127.0.0.1:0"]
    cmd += ["--retry", retry, "--idle-timeout", args.idle_timeout, "--workers", "1"]
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        addr = re.match(r"listening on (\S+)", srv.stdout.readline()).group(1)
        maddr = re.match(r"metrics on http://(\S+)/metrics", srv.stdout.readline()).group(1)
        out_dir = os.path.join(work, f"out-{retry}-{count}")
        os.makedirs(out_dir)
        results, stop = [], threading.Event()
        t = threading.Thread(target=real_client, args=(args, addr, out_dir, stop, results))
        t.start()
        # The starting value is the server's memory at steady state under the real client.
        time.sleep(args.warmup)
        before = rss_mb(srv.pid)
        warmup_downloads = len(results)
        samples = []
        sampling = threading.Event()

        def sample():
            while not sampling.is_set():
                samples.append((time.monotonic(), rss_mb(srv.pid)))
                sampling.wait(0.25)

        sampler = threading.Thread(target=sample)
        sampler.start()
        t0 = time.monotonic()
        socks = flood(addr, datagrams_for(addr, count), args.sockets, args.rate)
        flood_secs = time.monotonic() - t0
        time.sleep(0.5)
        in_flight = metric(maddr, "recoup_handshakes_in_flight")
        accepted = metric(maddr, "recoup_connections_accepted_total")
        retries = metric(maddr, "recoup_retries_sent_total")
        idle = float(args.idle_timeout.rstrip("s"))
        time.sleep(idle + 5)
        stop.set()
        t.join()
        sampling.set()
        sampler.join()
        after = rss_mb(srv.pid)
        open_after = metric(maddr, "recoup_connections_open")
        for s in socks:
            s.close()
    finally:
        srv.kill()
        srv.wait()
    peak = max(r for _, r in samples)
    # The real client during the flood and after it, not its warm-up.
    results = results[warmup_downloads:]
    ok = [secs for good, secs, _ in results if good]
    return {
        "before": before,
        "peak": peak,
        "after": after,
        "accepted": accepted,
        "retries": retries,
        "in_flight": in_flight,
        "open_after": open_after,
        "served": f"{len(ok)}/{len(results)}",
        "client_max": max(ok) if ok else float("nan"),
        "client_p50": statistics.median(ok) if ok else float("nan"),
        "flood_secs": flood_secs,
        "failures": [why for good, _, why in results if not good][:3],
    }


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--retry", default="off,auto")
    ap.add_argument("--initials", type=int, default=5000)
    ap.add_argument("--sockets", type=int, default=50)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--idle-timeout", default="30s")
    ap.add_argument(
        "--warmup", type=float, default=20.0, help="seconds of the real client before the flood"
    )
    ap.add_argument(
        "--control", action="store_true", help="also a run of the last setting without a flood"
    )
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="recoup-flood-")
    try:
        os.makedirs(os.path.join(work, "www"))
        with open(os.path.join(work, "www", "file.bin"), "wb") as f:
            f.write(os.urandom(1 << 20))
        rows = {}
        settings = [(r, args.initials) for r in args.retry.split(",")]
        if args.control:
            settings.append((settings[-1][0], 0))
        for retry, count in settings:
            name = f"{retry}" if count else f"{retry}, no flood (control)"
            rows[name] = one_setting(args, retry, count, work, initials)
            print(f"--retry {name}: {rows[name]}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{args.initials} silent Initials at {args.rate:.0f}/s from {args.sockets} ports, "
        f"--idle-timeout {args.idle_timeout}, one worker, {os.cpu_count()} cores"
    )
    print(
        "| --retry | RSS before MB | peak MB | after the idle timeout MB | after / before | "
        "accepted | Retries | handshakes in flight | real client served | its p50 / max s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for retry, r in rows.items():
        print(
            f"| {retry} | {r['before']:.1f} | {r['peak']:.1f} | {r['after']:.1f} | "
            f"{r['after'] / r['before']:.2f} | {r['accepted']:.0f} | {r['retries']:.0f} | "
            f"{r['in_flight']:.0f} | {r['served']} | {r['client_p50']:.2f} / "
            f"{r['client_max']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
