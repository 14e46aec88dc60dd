"""LADR Table 2 over real sockets: the four rows' cloud-gaming sessions
played by `recoup game` from `recoup serve` through `recoup link`, beside the simulator's runs of
the same sessions.

    python3 experiments/ladr/real_sockets.py [--quick] [--sessions N] [--duration 20s]
        [--setting shallow|deep|wifi]

Each session: one base RTT of table2.py's fleet (the first N quantiles of the same log-normal),
the setting's bottleneck on loopback (`recoup link`: 20 Mbit/s both ways, the setting's buffer,
its loss towards the client), and the row's configuration, as in table2.py:
- Default: `recoup serve --cc copa --loss-detection rack-tlp`, plain retransmission;
- +LBBC: the session asks for `loss_controller=lbbc`;
- +LBBC+RRL: and `pending_limit=true`, with `recoup serve --policy ladr-rrl`;
- LADR: and `recoup serve --fec ladr` (the client decodes).
Sessions run one at a time (real time: two at once would share the two cores). Per session the
client measures each frame's delay from its capture on the server to its last byte
(`recoup game`), the server reports its sender-side metrics (lossy, loss-affected frames, frame
delay to the acknowledgement, >100 ms), and the link's summary gives the packet loss towards the
client (lost and queue-dropped over datagrams in). The simulator runs the same sessions (same
RTTs, seeds, duration) with table2.py's scenario. Means over sessions go to
experiments/figures/ladr-real-sockets.md (`-quick` for --quick, gitignored), raw JSON to
experiments/results/ladr-real-sockets/.

The binary is $RECOUP_BIN, else the release build (common.recoup_binary()).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import table2  # noqa: E402

RATE = "20Mbps"
# The session's query per row; `seed` and `duration` are added per session.
QUERY = {
    "Default": "",
    "+LBBC": "loss_controller=lbbc",
    "+LBBC+RRL": "loss_controller=lbbc&pending_limit=true",
    "LADR": "loss_controller=lbbc&pending_limit=true",
}
SERVE = {
    "Default": [],
    "+LBBC": [],
    "+LBBC+RRL": ["--policy", "ladr-rrl"],
    "LADR": ["--policy", "ladr-rrl", "--fec", "ladr"],
}
STARTUP = 15.0


class Proc:
    """A server-like process that prints `listening on ADDR`; killed when closed."""

    def __init__(self, cmd: list[str], log: Path):
        self.log = log
        self.file = open(log, "w")
        self.p = subprocess.Popen(cmd, stdout=self.file, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            m = re.search(r"listening on (\S+)", log.read_text())
            if m:
                self.addr = m.group(1)
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        sys.exit(f"{cmd[1]} did not start: {log.read_text()[-2000:]}")

    def interrupt(self) -> str:
        """SIGINT (the link prints its summary), then its output."""
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.file.close()
        return self.log.read_text()

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.file.close()


def down_link(summary: str) -> tuple[int, int, float]:
    """(datagrams in, lost + queue-dropped, p99 timing error in ms) towards the client, from the
    link's summary. The timing error (a datagram's send minus its scheduled time) says whether
    the machine kept the link's schedule: a loaded machine's milliseconds are as large as the
    8-packet buffer's."""
    lines = summary.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("down:"))
    line = lines[at]
    n = lambda key: int(re.search(rf"{key} (\d+)", line).group(1))  # noqa: E731
    timing = re.search(r"p99 (\d+) us", lines[at + 1])
    if timing is None:
        sys.exit(f"recoup link's summary has no timing line after the down line: {summary!r}")
    return n("in"), n("lost") + n("queue-dropped"), int(timing.group(1)) / 1000


def session(binary: str, row: str, rtt: str, seed: int, duration: str, setting: str, folder: Path):
    queue, loss = table2.SETTINGS[setting]
    folder.mkdir(parents=True, exist_ok=True)
    serve = Proc(
        [
            binary,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--cc",
            "copa",
            "--loss-detection",
            "rack-tlp",
            *SERVE[row],
        ],
        folder / "serve.log",
    )
    try:
        link = Proc(
            [
                binary,
                "link",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                serve.addr,
                "--rtt",
                rtt,
                "--rate",
                RATE,
                "--queue",
                queue,
                "--down-loss",
                loss,
                "--seed",
                str(seed),
            ],
            folder / "link.log",
        )
        try:
            query = "&".join(q for q in (QUERY[row], f"duration={duration}", f"seed={seed}") if q)
            report = folder / "game.json"
            game = subprocess.run(
                [
                    binary,
                    "game",
                    "--insecure",
                    "--json",
                    str(report),
                    f"https://{link.addr}/gaming?{query}",
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            (folder / "game.txt").write_text(game.stdout + game.stderr)
            if game.returncode != 0:
                sys.exit(f"{row} rtt {rtt}: recoup game failed: {game.stderr[-2000:]}")
        finally:
            summary = link.interrupt()
    finally:
        serve.close()
    j = json.loads(report.read_text())
    sent, lost, timing_p99 = down_link(summary)
    j["link"] = {"down_in": sent, "down_lost": lost, "timing_p99_ms": timing_p99}
    return j


def real_rows(binary: str, rtts: list[str], duration: str, setting: str, out: Path):
    rows = []
    total = len(table2.ROWS) * len(rtts)
    done = 0
    t0 = time.monotonic()
    for row in table2.ROWS:
        for i, rtt in enumerate(rtts):
            j = session(
                binary,
                row,
                rtt,
                i + 1,
                duration,
                setting,
                out / row.strip("+").replace("+", "-") / f"s{i + 1}",
            )
            c, s, link = j["client"], j["server"], j["link"]
            frames = s["frames"] or float("nan")
            rows.append(
                {
                    "row": row,
                    "rtt": rtt,
                    "packet_loss_pct": 100.0 * s["packets_lost"] / max(s["packets_sent"], 1),
                    "link_drop_pct": 100.0 * link["down_lost"] / max(link["down_in"], 1),
                    "link_timing_p99_ms": link["timing_p99_ms"],
                    "repair_sent": s["repair_packets"],
                    "rate_limited_pct": 100.0
                    * s["rate_limited_packets"]
                    / max(s["packets_sent"], 1),
                    "lossy_pct": 100.0 * s["lossy_frames"] / frames,
                    "loss_affected_pct": 100.0 * s["loss_affected_frames"] / frames,
                    "sender_over_pct": 100.0 * s["frames_over_deadline"] / frames,
                    "sender_delay_ms": s["frame_delay_mean_ms"],
                    "client_over_pct": c["frames_over_deadline_pct"],
                    "client_delay_ms": c["frame_delay_mean_ms"],
                    "client_delay_p90_ms": c["frame_delay_p90_ms"],
                    "encoder_mbps": s["mean_bitrate_mbps"],
                    "repair_frames": c["repair_frames"],
                    "fec_recovered": c["fec_recovered_packets"],
                }
            )
            done += 1
            delay, lossy = c["frame_delay_mean_ms"], rows[-1]["lossy_pct"]
            print(
                f"[{done}/{total}] {row} rtt {rtt}: client delay {delay:.1f} ms, "
                f"lossy {lossy:.1f} %, {time.monotonic() - t0:.0f} s",
                flush=True,
            )
    return common.pd.DataFrame(rows)


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "2 sessions of 5 s per row",
        seeds=8,
        quick_seeds=2,
        jobs=2,
        count="--sessions",
        count_help="sessions per row",
        extra=lambda p: (
            p.add_argument("--duration", help="length of each session (default 20s, --quick 5s)"),
            p.add_argument("--setting", choices=sorted(table2.SETTINGS), default="shallow"),
        ),
    )
    duration = args.duration or ("5s" if args.quick else "20s")
    # The commit is taken before the sessions, which run for minutes.
    common.provenance()
    binary = str(common.recoup_binary())
    stem = "ladr-real-sockets" + ("" if args.setting == "shallow" else f"-{args.setting}")
    out = common.RESULTS / (stem + ("-quick" if args.quick else ""))
    if out.exists():
        shutil.rmtree(out)
    rtts = table2.fleet_rtts(args.seeds)
    real = real_rows(binary, rtts, duration, args.setting, out / "real")
    sim_parts = []
    for row in table2.ROWS:
        plan = table2.plan(row, rtts, duration, args.setting)
        folder = out / "sim" / row.strip("+").replace("+", "-")
        df = common.run(plan, folder / "scenario.toml", args)
        df["row"] = row
        sim_parts.append(df)
    sim = common.pd.concat(sim_parts, ignore_index=True)
    table = []
    for row in table2.ROWS:
        r = real[real["row"] == row]
        s = sim[sim["row"] == row]

        def pair(a: str, b: str, scale: float, d: int, r=r, s=s) -> str:
            return f"{r[a].mean():.{d}f} / {scale * s[b].mean():.{d}f}"

        table.append(
            [
                row,
                pair("packet_loss_pct", "loss_rate", 100, 2),
                pair("lossy_pct", "lossy_frame_rate", 100, 1),
                pair("loss_affected_pct", "loss_affected_frame_rate", 100, 1),
                pair("sender_over_pct", "frames_over_deadline_rate", 100, 2),
                pair("sender_delay_ms", "frame_delay_ms", 1, 1),
                f"{r['client_over_pct'].mean():.2f}",
                f"{r['client_delay_ms'].mean():.1f} / {r['client_delay_p90_ms'].mean():.1f}",
                pair("encoder_mbps", "encoder_bitrate_mbps", 1, 2),
                f"{r['repair_sent'].mean():.0f} / {s['repair_packets'].fillna(0).mean():.0f}",
                f"{r['fec_recovered'].mean():.1f}",
                pair("rate_limited_pct", "rate_limited_rate", 100, 1),
                f"{r['link_drop_pct'].mean():.2f}",
                f"{r['link_timing_p99_ms'].max():.2f}",
            ]
        )
    md = common.markdown_table(
        [
            "row",
            "packet loss % real / sim",
            "lossy frame %",
            "loss-affected %",
            ">100 ms % (sender)",
            "frame delay ms (sender)",
            ">100 ms % (client)",
            "client frame delay ms mean / p90",
            "encoder Mbit/s",
            "repair packets sent real / sim",
            "restored (client)",
            "RRL-limited packets %",
            "link drops % (down)",
            "link timing error p99 ms, worst session",
        ],
        table,
    )
    queue, loss = table2.SETTINGS[args.setting]
    md += (
        f"\n{args.seeds} sessions x {duration} per row, RTTs {', '.join(rtts)}; `recoup link` "
        f"{RATE}, `{queue}`, down loss `{loss}`; binary {binary}; {common.machine()}.\n"
        "Sender-side columns: real (the server's report) / simulated (the same sessions in the "
        "simulator). Client columns: real sockets only (capture on the server to the last byte "
        "at the client). Packet loss: packets the sender declared lost / packets sent; link "
        "drops: what `recoup link` lost or queue-dropped towards the client / datagrams in; its "
        "timing error: how late the link sent a datagram against its schedule (a loaded machine "
        "shows here, and its real columns then measure the machine).\n"
    )
    real.to_csv(out / "real.csv", index=False)
    figs = common.figure_dir(args.quick)
    common.save_text(figs / f"{stem}.md", md)
    print(md)


if __name__ == "__main__":
    main()
