"""ART Fig. 23: per-loss reduction of retransmission rounds (Delta N = N_quic - N_art) and of
recovery latency (Delta T_wait = T_wait_quic - T_wait_art) of ART against QUIC on 100 MB files.

    python3 experiments/art/fig23_rounds_latency.py [--quick] [--seeds N] [--jobs N] [--replot]

ART §7.3 measures on its testbed over loss 1-10 %, bandwidth 10-200 Mbit/s and RTT 20-100 ms;
this runs the corners and middle of that box (1, 5, 10 % x 10, 200 Mbit/s x 20, 100 ms) on the
Mahimahi-style constant-rate link, BBR, one 100 MB file per run.

Pairing: the paper pairs "a packet" of QUIC with the same packet under ART and says only that
the conditions were kept similar. Here the two runs of a seed share their loss draws (`crn
bernoulli`: a packet's fate follows from the seed, the data it carries and its 1 ms time slot),
so the same data sent at the same time meets the same fate under both policies. `recoup run
--losses` writes every lost data range of a run with its rounds N and its send times; a piece of
the file (each 1 KiB step of stream offset) lost on its first transmission under both policies
is one pair, with N of the range that held it in each run and T_wait minus the one-way delay
(first send to the send of the copy that arrived; the one-way delay is the same in both runs
and cancels in Delta T_wait). Data lost in one run only is counted, not paired: its Delta is a
matter of which packets a different schedule put in the lossy slots, not of recovery.

Raw rows and loss records in experiments/results/art-fig23/, the plot in
experiments/figures/art-fig23.png and the table in experiments/figures/art-fig23.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

POLICIES = [
    {"label": "QUIC (arq)", "name": "arq"},
    {"label": "ART", "name": "art"},
]
# ART §7.3: percentiles of Delta T_wait, ms; Delta N "up to 5".
PAPER_DT = {50: 3.23, 95: 32.83, 99: 78.48}
PAPER_DN_MAX = 5
STEP = 1024


def pieces(losses: pd.DataFrame) -> pd.DataFrame:
    """One row per STEP-aligned offset of every lost range: stream, offset, rounds, extra_ms
    (first send to the send of the copy that arrived) and detect_ms (first send to detection)."""
    rows = []
    for r in losses.itertuples():
        first = -(-r.start // STEP) * STEP
        offsets = np.arange(first, r.end, STEP)
        piece = {
            "stream": r.stream,
            "offset": offsets,
            "rounds": r.rounds,
            "extra_ms": r.recovered_by_sent_ms - r.first_sent_ms,
            "detect_ms": r.first_detected_ms - r.first_sent_ms,
        }
        rows.append(pd.DataFrame(piece))
    if not rows:
        return pd.DataFrame(columns=["stream", "offset", "rounds", "extra_ms", "detect_ms"])
    return pd.concat(rows, ignore_index=True)


def pair(folder: Path, scenario: str, seed: int) -> tuple[pd.DataFrame, int, int]:
    """The pieces lost under both policies on `seed` (columns *_quic, *_art), and how many were
    lost under QUIC only and ART only."""

    def load(policy: str) -> pd.DataFrame:
        name = common.losses_file(folder, scenario, policy, seed)
        return pieces(pd.read_csv(name)).set_index(["stream", "offset"])

    q, a = load("QUIC (arq)"), load("ART")
    both = pd.merge(q, a, left_index=True, right_index=True, suffixes=("_quic", "_art"))
    return both, len(q.index.difference(a.index)), len(a.index.difference(q.index))


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "10 MB files, 1 seed, 10 % loss only (a smoke run)",
        seeds=2,
        quick_seeds=1,
        jobs=0,
        replot=True,
    )
    size = "10MB" if args.quick else "100MB"
    losses = ["10%"] if args.quick else ["1%", "5%", "10%"]
    rates = [10, 200]
    plan = {
        "name": "art-fig23",
        "seed": 1,
        "repetitions": args.seeds,
        # 100 MB at 10 Mbit/s takes 84 s without loss; room for 10 % loss and slow start.
        "duration": "30s" if args.quick else "200s",
        "path": {"rtt": "20ms", "queue": common.ART_QUEUE},
        "app": {"kind": "file", "size": size, "count": 1},
        "transport": {"cc": "bbr"},
        "policy": POLICIES,
        "sweep": {
            "path.trace": [str(common.mahimahi_constant_trace(m)) for m in rates],
            "path.rtt": ["20ms", "100ms"],
            "path.down.loss": [f"crn bernoulli {p}" for p in losses],
        },
    }
    out = common.RESULTS / "art-fig23"
    rows = common.run(plan, out / "scenario.toml", args, losses=True)
    incomplete = int(rows["transfers_incomplete"].fillna(0).sum())
    if incomplete:
        sys.exit(f"{incomplete} transfers did not complete within {plan['duration']}: see {out}")

    paired, only_quic, only_art = [], 0, 0
    for (scenario, seed), _ in rows.groupby(["scenario", "seed"]):
        both, oq, oa = pair(out, scenario, seed)
        both["scenario"] = scenario
        paired.append(both)
        only_quic += oq
        only_art += oa
    d = pd.concat(paired, ignore_index=True)
    dn = d["rounds_quic"] - d["rounds_art"]
    dt = d["extra_ms_quic"] - d["extra_ms_art"]
    pct = {p: float(np.percentile(dt, p)) for p in PAPER_DT}

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    values, counts = np.unique(dn, return_counts=True)
    ax1.bar(values, counts / counts.sum())
    ax1.set_xlabel("ΔN = N_quic − N_art (retransmission rounds)")
    ax1.set_ylabel("share of data lost under both")
    ax1.set_yscale("log")
    xs = np.sort(dt)
    ax2.plot(xs, np.arange(1, len(xs) + 1) / len(xs))
    ax2.set_xlabel("ΔT_wait = T_wait_quic − T_wait_art (ms)")
    ax2.set_ylabel("CDF")
    ax2.set_xlim(np.percentile(dt, 0.5), np.percentile(dt, 99.5))
    ax2.grid(alpha=0.3)
    fig.suptitle(f"ART Fig. 23 in recoup: {size} files, {len(d)} pieces lost under both")
    common.save_figure(fig, common.figure_path("art-fig23", args.quick), 120)

    header = ["", "paper (ART §7.3)", "recoup"]
    body = [
        ["ΔN = 0", "most", f"{100 * (dn == 0).mean():.1f} %"],
        ["ΔN > 0 (ART fewer rounds)", "–", f"{100 * (dn > 0).mean():.1f} %"],
        ["ΔN < 0 (ART more rounds)", "–", f"{100 * (dn < 0).mean():.1f} %"],
        ["max ΔN", f"up to {PAPER_DN_MAX}", f"{int(dn.max())}"],
        *[[f"p{p} ΔT_wait", f"{PAPER_DT[p]} ms", f"{pct[p]:.2f} ms"] for p in PAPER_DT],
        ["mean ΔT_wait", "–", f"{dt.mean():.2f} ms"],
    ]
    # Where the reduction comes from: the pieces both policies recover in the same number of
    # rounds, and the rest; and each loss rate.
    groups = [("ΔN = 0", dn == 0), ("ΔN > 0", dn > 0), ("ΔN < 0", dn < 0)]
    loss_of = dict(zip(rows["scenario"], rows["path.down.loss"]))
    d["loss"] = d["scenario"].map(loss_of)
    groups += [(f"loss {v.split()[-1]}", d["loss"] == v) for v in plan["sweep"]["path.down.loss"]]
    rtt_of = dict(zip(rows["scenario"], rows["path.rtt"]))
    d["rtt"] = d["scenario"].map(rtt_of)
    groups += [(f"RTT {v}", d["rtt"] == v) for v in plan["sweep"]["path.rtt"]]

    def row(name: str, sel: pd.Series) -> list[str]:
        x = dt[sel]
        return [
            name,
            f"{int(sel.sum())}",
            f"{100 * (dn[sel] > 0).mean():.1f} %",
            *[f"{np.percentile(x, p):.2f}" if len(x) else "–" for p in PAPER_DT],
        ]

    breakdown = common.markdown_table(
        ["pieces", "paired", "ΔN > 0", "p50 ΔT_wait ms", "p95", "p99"],
        [row(name, sel) for name, sel in groups],
    )
    lost = len(d) + only_quic + only_art
    counts_line = (
        f"{len(d)} of {lost} lost 1 KiB pieces ({100 * len(d) / lost:.0f} %) were lost on "
        f"their first transmission under both policies and are paired; {only_quic} were lost "
        f"under QUIC only and {only_art} under ART only. Median loss detection time (first "
        f"send to detection) of the paired pieces: QUIC {d['detect_ms_quic'].median():.2f} ms, "
        f"ART {d['detect_ms_art'].median():.2f} ms."
    )
    common.write_table(
        "art-fig23",
        "ART Fig. 23: reduction of retransmission rounds and recovery latency, ART vs QUIC",
        common.markdown_table(header, body) + "\n\n" + counts_line + "\n\n" + breakdown + "\n",
        args,
        per_point=f"{args.seeds} seeds x one {size} file",
    )


if __name__ == "__main__":
    main()
