"""ART Fig. 19: N_max and redundancy cost of QUIC, fixed-R QUIC variants, OR3 and ART (both
readings) for one large file at 100 Mbit/s, 4 % random loss, on a Mahimahi link: on the paper's
stated path (30 ms RTT, a one-BDP queue) and on the authors' script's (60 ms, unbounded queue).

    python3 experiments/art/fig19_nmax.py [--quick] [--seeds N] [--jobs N]

Raw rows in experiments/results/art-fig19/, the plot in experiments/figures/art-fig19.png and
the table in experiments/figures/art-fig19.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

# ART counts the ARQ retransmission in R ("QUIC (R = k)" sends k replicas per round), our
# `fixed:r=` counts only the copies besides it, hence r = R - 1.
POLICIES = [
    {"label": "QUIC (arq)", "name": "arq"},
    {"label": "QUIC (R=2)", "name": "fixed", "params": "r=1"},
    {"label": "QUIC (R=3)", "name": "fixed", "params": "r=2"},
    {"label": "OR3 (R=2n-1)", "name": "or3", "params": "variant=2n-1"},
    {"label": "QUIC (R=2n+1)", "name": "or3", "params": "variant=2n+1"},
    # ART as its authors' code runs it (`reading=code`, the default), and as we read the paper's
    # text (`reading=text`), where §5.2 reads both ways on whether R counts the ARQ
    # retransmission (LevelCounts in crates/recoup-recovery/src/config.rs).
    {"label": "ART", "name": "art"},
    {"label": "ART (text)", "name": "art", "params": "reading=text"},
    {"label": "ART (text, level=copies)", "name": "art", "params": "reading=text,level=copies"},
]


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "10 MB, 3 seeds (a smoke run)",
        seeds=10,
        quick_seeds=3,
        jobs=0,
        count_help="seeds per policy",
    )
    figs = common.figure_dir(args.quick)
    size_mb = 10 if args.quick else 100

    # Both paths: the paper's stated one (30 ms RTT, a one-BDP queue) and the authors' script's
    # (60 ms RTT, mm-link's unbounded queue); see common.ART_PATHS.
    parts = []
    for name, path in common.ART_PATHS.items():
        plan = common.art_plan(
            f"art-fig19-{name}", f"{size_mb}MB", "4%", POLICIES, args.seeds, "60s", path=path()
        )
        out = common.RESULTS / "art-fig19" / name
        part = common.run(plan, out / "scenario.toml", args)
        part["path"] = name
        parts.append(part)
    rows = pd.concat(parts, ignore_index=True)
    order = [p["label"] for p in POLICIES]
    # AutoRec's reading of ART's cost, every send of a round a replica: (retransmissions +
    # copies) / new packets.
    resent = rows["copies_sent"] + rows["retransmissions_sent"]
    rows["cost_with_rtx"] = resent / (rows["packets_sent"] - resent)
    g = rows.groupby(["path", "policy"])
    index = pd.MultiIndex.from_product([list(common.ART_PATHS), order], names=["path", "policy"])
    table = (
        g.agg(
            runs=("seed", "count"),
            n_max=("n_max", "mean"),
            n_max_sd=("n_max", "std"),
            k_max=("k_max", "mean"),
            copies=("copies_sent", "mean"),
            retransmissions=("retransmissions_sent", "mean"),
            redundancy_cost=("redundancy_cost", "mean"),
            cost_with_rtx=("cost_with_rtx", "mean"),
            loss_rate=("loss_rate", "mean"),
            fct_s=("fct_ms", "mean"),
        )
        .reindex(index)
        .reset_index()
    )
    table["fct_s"] /= 1000
    table["redundancy_cost_%"] = table.pop("redundancy_cost") * 100
    table["cost_with_rtx_%"] = table.pop("cost_with_rtx") * 100
    table["loss_%"] = table.pop("loss_rate") * 100

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.4
    for i, name in enumerate(common.ART_PATHS):
        t = table[table["path"] == name]
        x = [j + (i - 0.5) * width for j in range(len(order))]
        a.bar(x, t["n_max"], width, yerr=t["n_max_sd"].fillna(0), capsize=2, label=name)
        b.bar(x, t["redundancy_cost_%"], width, label=name)
    a.set_ylabel("N_max (mean over seeds)")
    b.set_ylabel("redundancy cost (copies / new packets, %)")
    for ax in (a, b):
        ax.set_xticks(list(range(len(order))), order, rotation=30, ha="right")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(title="path", fontsize=8)
    fig.suptitle(
        f"ART Fig. 19 setting: {size_mb} MB file, 100 Mbit/s, 4 % loss, {args.seeds} seeds; "
        "stated path 30 ms RTT + one-BDP queue, scripted 60 ms + unbounded"
    )
    fig.tight_layout()
    common.save_figure(fig, figs / "art-fig19.png", dpi=120)

    md = common.frame_table(table)
    common.save_text(figs / "art-fig19.md", md)
    print(md)
    wall = sum(common.wall_seconds(common.RESULTS / "art-fig19" / n) for n in common.ART_PATHS)
    print(f"{len(rows)} runs, wall time {wall:.1f} s")


if __name__ == "__main__":
    main()
