"""Why recoup's ART differs from the paper's: ART's redundancy and N_max in ART Fig. 19's setting
(one file, 100 Mbit/s, 30 ms RTT, 4 % loss, Mahimahi link, one-BDP droptail queue), changing one
suspect at a time: the two readings (the authors' code's, the default, and the paper's text's),
the adapter's defaults under each (what R counts, L_queue, opportunism), the link, the buffer,
the loss pattern and the receive buffer.

    python3 experiments/art/why_art.py [--quick] [--seeds N] [--jobs N]

Raw rows in experiments/results/art-why/<condition>/, the table in
experiments/figures/art-why.md and the plot in experiments/figures/art-why.png.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

BASELINES = [
    {"label": "QUIC (arq)", "name": "arq"},
    {"label": "OR3", "name": "or3"},
]
# ART under both readings (`art` runs its authors' code's by default; `reading=text` keeps our
# reading of the paper's text), then the adapter's suspects on the Fig. 19 network.
ART_READINGS = [
    {"label": "ART (authors' code)", "name": "art"},
    {"label": "ART (text)", "name": "art", "params": "reading=text"},
]
ART_VARIANTS = [
    *ART_READINGS,
    {"label": "ART (authors' code) opportunism=off", "name": "art", "params": "opportunism=off"},
    {"label": "ART (authors' code) l_queue=100", "name": "art", "params": "l_queue=100"},
    {
        "label": "ART (text) opportunism=off",
        "name": "art",
        "params": "reading=text,opportunism=off",
    },
    {"label": "ART (text) l_queue=100", "name": "art", "params": "reading=text,l_queue=100"},
    {"label": "ART (text) level=copies", "name": "art", "params": "reading=text,level=copies"},
    {
        "label": "ART (text) level=copies,l_queue=100",
        "name": "art",
        "params": "reading=text,level=copies,l_queue=100",
    },
    {"label": "QUIC (R=2)", "name": "fixed", "params": "r=1"},
]
# Mean loss 4 % in bursts of 3 packets on average: netem's gemodel p r with 1-h = 100 % loss in
# the bad state, mean p / (p + r).
GE_4PCT = "gemodel 1.3889% 33.333%"
# The network's suspects: (key, description, path, loss, transport).
NETWORKS = [
    ("fig19", "Fig. 19 network (Mahimahi link, queue 1 BDP, Bernoulli 4 %)", None, "4%", None),
    ("rate-link", "constant-rate link instead of mm-link", common.ART_RATE_PATH, "4%", None),
    (
        "queue-30",
        "limited buffer: droptail 30 packets",
        common.art_path(queue="droptail packets=30"),
        "4%",
        None,
    ),
    ("ge-burst", "bursty loss: Gilbert-Elliott, mean 4 %, bursts of 3", None, GE_4PCT, None),
    ("rwnd-1mb", "receive buffer 1 MB", None, "4%", {"receive_window": "1MB"}),
]


# AutoRec Fig. 18 (paper 000 §VII-A): ART on a 4 Mbit/s live stream, 12 Mbit/s, 5 % loss both
# ways, where the paper measures ART's redundancy cost at 5.73 % (20 ms) and 5.93-6.37 % (60-200
# ms).
FIG18_RTTS = ["20ms", "60ms", "200ms"]
FIG18_PAPER = {"20ms": "5.73", "60ms": "5.93-6.37", "200ms": "5.93-6.37"}
FIG18_POLICIES = [
    *ART_READINGS,
    {"label": "ART (text) level=copies", "name": "art", "params": "reading=text,level=copies"},
]


def autorec_fig18_part(args: argparse.Namespace, results: Path) -> str:
    """ART's cost on AutoRec Fig. 18's path under the authors' code's reading and the text's (both
    readings of R), and both readings of the cost; a markdown table."""
    live = argparse.Namespace(seeds=args.seeds, duration="10s" if args.quick else "60s")
    plan = common.autorec_plan(
        "art-why-fig18", "4Mbps", FIG18_POLICIES, live, sweep={"path.rtt": FIG18_RTTS}
    )
    rows = common.run(plan, results / "autorec-fig18" / "scenario.toml", args)
    resent = rows["copies_sent"] + rows["retransmissions_sent"]
    rows["cost_with_rtx"] = resent / (rows["packets_sent"] - resent)
    rows["copies_per_round"] = rows["copies_sent"] / rows["retransmissions_sent"]
    agg = common.aggregate(
        rows,
        ["path.rtt", "policy"],
        ["loss_rate", "copies_per_round", "redundancy_cost", "cost_with_rtx"],
    )
    header = [
        "RTT",
        "policy",
        "loss %",
        "copies per round",
        "cost (copies / new) %",
        "cost with ARQ rtx %",
        "paper (AutoRec Fig. 18) %",
    ]
    body = [
        [
            r["path.rtt"],
            r["policy"],
            f"{r['loss_rate'] * 100:.2f}",
            f"{r['copies_per_round']:.2f}",
            common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], 100, 2),
            common.pm(r["cost_with_rtx"], r["cost_with_rtx_ci"], 100, 2),
            FIG18_PAPER[r["path.rtt"]],
        ]
        for _, r in agg.iterrows()
    ]
    return (
        f"AutoRec Fig. 18 setting (4 Mbit/s live stream, 12 Mbit/s, 5 % loss both ways), "
        f"{args.seeds} seeds of {live.duration}:\n\n" + common.markdown_table(header, body)
    )


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "10 MB, 2 seeds (a smoke run)",
        seeds=3,
        quick_seeds=2,
        jobs=1,
        count_help="seeds per condition and policy",
    )
    figs = common.figure_dir(args.quick)
    size = "10MB" if args.quick else "100MB"
    results = common.RESULTS / "art-why"
    frames = []
    for key, what, path, loss, transport in NETWORKS:
        policies = BASELINES + (ART_VARIANTS if key == "fig19" else ART_READINGS)
        plan = common.art_plan(
            f"art-why-{key}",
            size,
            loss,
            policies,
            args.seeds,
            "60s",
            path=path,
            transport=transport,
        )
        rows = common.run(plan, results / key / "scenario.toml", args)
        rows["network"] = what
        frames.append(rows)
    rows = pd.concat(frames, ignore_index=True)
    rows["copies_per_round"] = rows["copies_sent"] / rows["retransmissions_sent"]
    rows["cost_with_rtx"] = (rows["copies_sent"] + rows["retransmissions_sent"]) / (
        rows["packets_sent"] - rows["copies_sent"] - rows["retransmissions_sent"]
    )
    rows["multi_share"] = rows["lost_ranges_multi"] / rows["lost_ranges"]
    rows["fct_s"] = rows["fct_ms"] / 1000
    metrics = [
        "loss_rate",
        "copies_per_round",
        "redundancy_cost",
        "cost_with_rtx",
        "multi_share",
        "n_max",
        "fct_s",
    ]
    agg = common.aggregate(rows, ["network", "policy"], metrics)
    header = [
        "network",
        "policy",
        "loss %",
        "copies per round",
        "cost (copies / new) %",
        "cost with ARQ rtx %",
        "first rtx lost %",
        "N_max",
        "FCT s",
    ]
    body = [
        [
            r["network"],
            r["policy"],
            f"{r['loss_rate'] * 100:.2f}",
            f"{r['copies_per_round']:.2f}",
            common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], 100, 2),
            f"{r['cost_with_rtx'] * 100:.2f}",
            f"{r['multi_share'] * 100:.2f}",
            common.pm(r["n_max"], r["n_max_ci"]),
            f"{r['fct_s']:.2f}",
        ]
        for _, r in agg.iterrows()
    ]
    md = common.markdown_table(header, body)
    wall = common.wall_seconds(results)
    md += (
        f"\n{size} file per run, {args.seeds} seeds per row; wall time {wall:.0f} s with "
        f"--jobs {args.jobs} on {common.machine()}.\n"
    )
    md += "\n" + autorec_fig18_part(args, results)
    common.save_text(figs / "art-why.md", md)
    print(md)

    fig19 = agg[agg["network"] == NETWORKS[0][1]].set_index("policy")
    order = [p["label"] for p in BASELINES + ART_VARIANTS]
    fig19 = fig19.reindex(order)
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    x = range(len(order))
    a.bar(
        x,
        fig19["redundancy_cost"] * 100,
        yerr=fig19["redundancy_cost_ci"].fillna(0) * 100,
        color="tab:orange",
        capsize=3,
    )
    a.set_ylabel("redundancy cost, copies / new packets (%)")
    b.bar(x, fig19["n_max"], yerr=fig19["n_max_ci"].fillna(0), color="tab:blue", capsize=3)
    b.set_ylabel("N_max (mean over seeds)")
    for ax in (a, b):
        ax.set_xticks(list(x), order, rotation=30, ha="right")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"ART's suspects on the Fig. 19 network ({size}, {args.seeds} seeds)")
    common.save_figure(fig, figs / "art-why.png", dpi=120)


if __name__ == "__main__":
    main()
