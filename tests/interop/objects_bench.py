#!/usr/bin/env python3
"""The "objects" workload on real sockets: recoup serve next to quic-go's HTTP/3 server.

One unmodified quic-go HTTP/3 client (tests/peers/quicgo/cmd/client) fetches 12 KB objects at
10 per second on one connection for a fixed duration, each request issued on its own schedule
(requests overlap when responses are slow), through `recoup link` on loopback: 60 ms RTT,
12 Mbit/s, a 100-packet droptail queue and Bernoulli loss on both directions, a fresh link seed
per run (the same seeds for every server). Servers, each with its defaults:

    quicgo          quic-go's http3 server around net/http's file server (cmd/server)
    recoup          recoup serve
    recoup-CC       recoup serve --cc CC (bbr, newreno, cubic, copa, none)

--serve-args adds flags to every recoup server (--serve-args="--policy autorec"; the `=` form
lets one flag alone, such as --serve-args=--no-gso, through). The client sets its connection up
with a HEAD request before the clock starts, so no object's time includes the handshake. Per
run, the time of each object from its request's issue to its last byte gives p50, p95, p99 and
max; an object that fails (error, timeout, wrong size, no result) counts as infinitely slow in
those and is named in the report, never dropped. Per server and loss rate the report gives the
mean of each percentile over runs ± the 95 % confidence half-width (Student t). A server that
does not start is named with its error and shown as skipped (the exit status is then 1).

Usually run by scripts/objects-bench.sh, which builds the Go programs first:

    python3 tests/interop/objects_bench.py --recoup BIN --quicgo-dir DIR [--runs 5]
        [--loss 2%,5%] [--duration 30s] [--servers quicgo,recoup,recoup-cubic,recoup-newreno]
        [--serve-args="--policy autorec"] [--quick] [--qlog DIR] [--out results/objects-bench/]

With --qlog, the first run of each server and loss rate writes both endpoints' qlog traces
under DIR/LOSS/SERVER/{server,client}/, and the report summarises the server's: congestion
window and bytes in flight (recovery:metrics_updated), packets lost, PTOs.
"""

import argparse
import csv
import glob
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_harness import (  # noqa: E402
    Processes,
    ServerFailed,
    machine,
    mean_ci,
    parse_seconds,
    parse_size,
    percentile,
    recoup_version,
    summarise_qlog,
    time_weighted,
    tool_version,
)
from common import markdown_table  # noqa: E402
from matrix import parse_link_report  # noqa: E402

DEFAULT_SERVERS = "quicgo,recoup,recoup-cubic,recoup-newreno"
RECOUP_CCS = ("newreno", "cubic", "bbr", "copa", "none")
PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))


def server_cmd(name, args, root):
    """The command line of a server, or ServerFailed for a name we do not know."""
    if name == "quicgo":
        return [os.path.join(args.quicgo_dir, "server"), "-listen", "127.0.0.1:0", "-root", root]
    if name == "recoup" or name.startswith("recoup-"):
        cmd = [args.recoup, "serve", "--listen", "127.0.0.1:0", "--root", root]
        if name != "recoup":
            cc = name.removeprefix("recoup-")
            if cc not in RECOUP_CCS:
                raise ServerFailed(f"{name}: unknown server (recoup-CC takes CC in {RECOUP_CCS})")
            cmd += ["--cc", cc]
        return cmd + shlex.split(args.serve_args)
    raise ServerFailed(f"{name}: unknown server (quicgo, recoup or recoup-CC)")


def versions(args):
    """What each kind of server is, for the report: quic-go's module version from the binary's
    build information, recoup's --version and a hash of the binary."""
    return {
        "quicgo": tool_version([os.path.join(args.quicgo_dir, "server"), "-version"]),
        "recoup": recoup_version(args.recoup),
    }


def link_cmd(args, upstream, loss, seed):
    return [
        args.recoup,
        "link",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        upstream,
        "--rtt",
        args.rtt,
        "--rate",
        args.link_rate,
        "--queue",
        args.queue,
        "--loss",
        f"bernoulli {loss}",
        "--seed",
        str(seed),
        # A backstop: the link exits by itself even if nothing stops it.
        "--duration",
        f"{int(args.duration + args.object_timeout + 120)}s",
    ]


def one_run(procs, name, loss, seed, args, www, run_dir, qlog_dir):
    """Runs the client against one server through the link; returns the run's record."""
    os.makedirs(run_dir, exist_ok=True)
    env = {}
    for side in ("server", "client"):
        env[side] = None
        if qlog_dir:
            d = os.path.join(qlog_dir, side)
            os.makedirs(d, exist_ok=True)
            env[side] = dict(os.environ, QLOGDIR=os.path.abspath(d))
    srv, addr = procs.start_listening(
        name, server_cmd(name, args, www), f"{run_dir}/server.log", env["server"]
    )
    link = procs.start("link", link_cmd(args, addr, loss, seed), f"{run_dir}/link.log")
    try:
        link_addr = link.wait_for(r"listening on (\S+)", 20).group(1)
    except RuntimeError:
        procs.stop_all()
        raise
    results = os.path.join(run_dir, "objects.jsonl")
    cmd = [
        os.path.join(args.quicgo_dir, "client"),
        "-insecure",
        "-url",
        f"https://{link_addr}",
        "-pattern",
        "/obj-%04d.bin",
        "-count",
        str(args.count),
        "-rate",
        str(args.rate),
        "-timeout",
        f"{args.object_timeout}s",
        "-out",
        results,
    ]
    client = procs.start("client", cmd, f"{run_dir}/client.log", env["client"])
    client_error = ""
    try:
        code = client.proc.wait(timeout=args.duration + args.object_timeout + 30)
        if code != 0:
            client_error = f"client exited with {code}"
    except subprocess.TimeoutExpired:
        client_error = "client killed after its time limit"
    procs.stop(client, signal.SIGKILL)
    link_report = parse_link_report(procs.stop(link))
    srv_exit = srv.proc.poll()
    procs.stop(srv)
    record = {
        "server": name,
        "loss": loss,
        "seed": seed,
        "objects": read_objects(results, args.count, args.size, client_error),
        "link": link_report,
        "note": client_error,
    }
    if srv_exit is not None:
        record["note"] += f" server exited during the run with {srv_exit}"
    return record


def read_objects(path, count, size, client_error):
    """{path: (ms or None, error)} for every object asked for; one the client wrote nothing
    about failed with the client's error."""
    got = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                o = json.loads(line)
                err = o["error"]
                if not err and o["bytes"] != size:
                    err = f"{o['bytes']} bytes, not {size}"
                ms = None if err else (o["done_s"] - o["issue_s"]) * 1000
                got[o["path"]] = (ms, err)
    out = {}
    for i in range(count):
        p = f"/obj-{i:04d}.bin"
        out[p] = got.get(p, (None, "no result" + (f" ({client_error})" if client_error else "")))
    return out


def run_stats(record):
    ms = sorted(math.inf if v is None else v for v, _ in record["objects"].values())
    stats = {k: percentile(ms, q) for k, q in PERCENTILES}
    stats["failed"] = {p: e for p, (v, e) in record["objects"].items() if v is None}
    return stats


def qlog_rows(qlog_root):
    rows = []
    for path in sorted(glob.glob(os.path.join(qlog_root, "*", "*", "server", "*"))):
        if not path.endswith((".sqlog", ".qlog")):
            continue
        loss, server = path.split(os.sep)[-4:-2]
        s = summarise_qlog(path)
        cw_mean, cw_med = time_weighted(s["cwnd"])
        bif_mean, _ = time_weighted(s["bytes_in_flight"])
        lost = s["lost"]
        rows.append(
            [
                loss,
                server,
                min((v for _, v in s["cwnd"]), default=math.nan),
                cw_med,
                cw_mean,
                max((v for _, v in s["cwnd"]), default=math.nan),
                bif_mean,
                sum(lost.values()),
                ", ".join(f"{k} {n}" for k, n in sorted(lost.items())),
                "not logged" if s["ptos"] is None else s["ptos"],
                os.path.relpath(path, qlog_root),
            ]
        )
    return rows


QLOG_HEADER = [
    "loss",
    "server",
    "cwnd min",
    "cwnd p50",
    "cwnd mean",
    "cwnd max",
    "in flight mean",
    "packets lost",
    "lost by trigger",
    "PTOs",
    "trace",
]


def qlog_table(qlog_root):
    return markdown_table(QLOG_HEADER, qlog_rows(qlog_root), spec=".0f")


def report(records, skipped, args, vers, elapsed):
    lines = [
        "# Objects benchmark: recoup serve and quic-go",
        "",
        f"Machine: {machine()}. Peers: {vers['quicgo']}; {vers['recoup']} at `{args.recoup}`.",
        "",
        f"Workload: the quic-go HTTP/3 client fetches {args.count} objects of {args.size} bytes "
        f"at {args.rate:g}/s ({args.duration:g} s) on one connection, each request on its own "
        f"schedule; through `recoup link --rtt {args.rtt} --rate {args.link_rate} "
        f"--queue '{args.queue}' --loss 'bernoulli LOSS'` (both directions), seeds "
        f"{args.first_seed}..{args.first_seed + args.runs - 1}. recoup serve flags added: "
        f"`{args.serve_args or '(none)'}`. Times in ms from a request's issue to its last byte "
        "(nearest-rank percentiles per run; a failed object counts as infinitely slow), as the "
        "mean over runs ± the 95 % confidence half-width (Student t). "
        f"{elapsed:.0f} s in all.",
        "",
    ]
    for loss in args.losses:
        lines += [f"## {loss} loss", ""]
        rows = []
        for name in args.servers:
            if (name, loss) in skipped:
                why = " ".join(skipped[(name, loss)].split()).replace("|", "\\|")
                version = vers["quicgo" if name == "quicgo" else "recoup"].split(" (")[0]
                rows.append([name, version, 0, "skipped", "", "", "", why])
                continue
            rs = [r for r in records if r["server"] == name and r["loss"] == loss]
            stats = [run_stats(r) for r in rs]
            failed = [
                f"seed {r['seed']}: {p} ({e})"
                for r, s in zip(rs, stats)
                for p, e in s["failed"].items()
            ]
            shown = "; ".join(failed[:6]) + (
                f"; and {len(failed) - 6} more" if len(failed) > 6 else ""
            )
            version = vers["quicgo" if name == "quicgo" else "recoup"].split(" (")[0]
            rows.append(
                [name, version, len(rs)]
                + [mean_ci([s[k] for s in stats]) for k, _ in PERCENTILES]
                + [f"{len(failed)}" + (f": {shown}" if failed else "")]
            )
        lines.append(
            markdown_table(
                [
                    "server",
                    "version",
                    "runs",
                    "p50 ms",
                    "p95 ms",
                    "p99 ms",
                    "max ms",
                    "failed objects",
                ],
                rows,
            )
        )
    lines += ["## Runs", ""]
    rows = []
    for r in records:
        s = run_stats(r)
        link = r["link"]
        rows.append(
            [r["loss"], r["server"], r["seed"]]
            + [f"{s[k]:.0f}" for k, _ in PERCENTILES]
            + [len(s["failed"])]
            + [f"{link[d]['lost']} / {link[d]['queue']}" for d in ("down", "up")]
            + [r["note"] or ""]
        )
    lines.append(
        markdown_table(
            [
                "loss",
                "server",
                "seed",
                "p50",
                "p95",
                "p99",
                "max",
                "failed",
                "down lost / queue-dropped",
                "up lost / queue-dropped",
                "note",
            ],
            rows,
        )
    )
    if args.qlog:
        lines += [
            "## Server qlog (first run of each)",
            "",
            "Congestion window and bytes in flight in bytes from `recovery:metrics_updated`, "
            "weighted by the time each value held (quic-go logs them on every send and ACK, "
            "recoup on every RTT sample, so its bytes in flight are seen only after ACKs); "
            "`recovery:packet_lost` by trigger; PTO expiries from `recovery:loss_timer_updated` "
            "(or `pto_count`), which recoup's qlog does not log.",
            "",
            qlog_table(args.qlog),
        ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--recoup", default=os.environ.get("RECOUP_BIN"), help="recoup binary (or RECOUP_BIN)"
    )
    ap.add_argument("--quicgo-dir", help="directory with the built quic-go server and client")
    ap.add_argument("--runs", type=int, default=5, help="runs per server and loss rate")
    ap.add_argument("--first-seed", type=int, default=1, help="link seeds FIRST .. FIRST+RUNS-1")
    ap.add_argument("--loss", default="2%", help="loss rates, comma-separated (e.g. 2%%,5%%)")
    ap.add_argument("--duration", type=parse_seconds, default=30.0)
    ap.add_argument("--rate", type=float, default=10.0, help="objects per second")
    ap.add_argument("--size", type=parse_size, default=12 * 1024, help="object size (12KB)")
    ap.add_argument("--servers", default=DEFAULT_SERVERS)
    ap.add_argument("--serve-args", default="", help="more flags for every recoup serve")
    ap.add_argument("--rtt", default="60ms")
    ap.add_argument("--link-rate", default="12Mbps")
    ap.add_argument("--queue", default="droptail packets=100")
    ap.add_argument("--object-timeout", type=float, default=30.0, help="seconds per object")
    ap.add_argument("--quick", action="store_true", help="one run of 5 s per server")
    ap.add_argument("--qlog", help="both sides' qlog of each server's first run go here")
    ap.add_argument(
        "--out",
        default=os.path.join(REPO, "results", "objects-bench"),
        help="directory, or a .md file",
    )
    ap.add_argument("--pid-file", help=argparse.SUPPRESS)
    ap.add_argument(
        "--qlog-summary",
        metavar="DIR",
        help="only print the server qlog table of an earlier run's --qlog DIR",
    )
    args = ap.parse_args()
    if args.qlog_summary:
        print(qlog_table(args.qlog_summary))
        return 0
    if not args.quicgo_dir:
        ap.error("--quicgo-dir DIR is needed (scripts/objects-bench.sh passes it)")
    if not args.recoup:
        ap.error("the recoup binary: --recoup BIN or RECOUP_BIN")
    args.recoup = os.path.abspath(args.recoup)
    if args.quick:
        args.runs, args.duration = 1, 5.0
    args.count = round(args.duration * args.rate)
    args.losses = [x.strip() for x in args.loss.split(",") if x.strip()]
    args.servers = [x.strip() for x in args.servers.split(",") if x.strip()]
    for tool in (args.recoup, os.path.join(args.quicgo_dir, "client")):
        if not os.access(tool, os.X_OK):
            ap.error(f"{tool} is not an executable (the link and the client need it)")
    if args.out.endswith(".md"):
        out_md, raw = args.out, args.out[:-3] + "-runs"
    else:
        out_md, raw = os.path.join(args.out, "objects-bench.md"), os.path.join(args.out, "runs")
    os.makedirs(raw, exist_ok=True)

    # SIGTERM (the shell script's trap) unwinds through the finally below like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    procs = Processes(args.pid_file)
    vers = versions(args)
    records, skipped = [], {}
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="objects-bench-") as www:
            for i in range(args.count):
                with open(os.path.join(www, f"obj-{i:04d}.bin"), "wb") as f:
                    f.write(os.urandom(args.size))
            for loss in args.losses:
                for run in range(args.runs):
                    seed = args.first_seed + run
                    for name in args.servers:
                        if (name, loss) in skipped:
                            continue
                        tag = f"{loss.replace('%', 'pct')}/{name}"
                        qdir = None
                        if args.qlog and run == 0:
                            qdir = os.path.join(args.qlog, loss.replace("%", "pct"), name)
                        try:
                            r = one_run(
                                procs, name, loss, seed, args, www, f"{raw}/{tag}/seed-{seed}", qdir
                            )
                        except ServerFailed as e:
                            print(
                                f"objects-bench: server {e}; skipping it",
                                file=sys.stderr,
                                flush=True,
                            )
                            skipped[(name, loss)] = str(e)
                            continue
                        records.append(r)
                        s = run_stats(r)
                        print(
                            f"{loss} {name} seed {seed}: p50 {s['p50']:.0f} p95 {s['p95']:.0f} "
                            f"p99 {s['p99']:.0f} max {s['max']:.0f} ms, "
                            f"{len(s['failed'])} failed {r['note']}",
                            flush=True,
                        )
    finally:
        procs.stop_all()
    with open(os.path.join(raw, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["loss", "server", "seed", "path", "ms", "error"])
        for r in records:
            for p, (ms, err) in r["objects"].items():
                w.writerow(
                    [r["loss"], r["server"], r["seed"], p, "" if ms is None else f"{ms:.3f}", err]
                )
    text = report(records, skipped, args, vers, time.monotonic() - t0)
    with open(out_md, "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"\nreport: {out_md}; per-object times: {raw}/runs.csv")
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
