"""ART Fig. 19: N_max and redundancy cost of QUIC, fixed-R QUIC variants, OR3 and ART for one
large file at 100 Mbit/s, 30 ms RTT, 4 % random loss, on a Mahimahi link with a one-BDP queue.

    python3 experiments/art/fig19_nmax.py [--quick] [--seeds N] [--jobs N]

Raw rows in experiments/results/art-fig19/, the plot in experiments/figures/art-fig19.png and
the table in experiments/figures/art-fig19.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt

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
    {"label": "ART", "name": "art"},
    # ART §5.2 reads both ways on whether R counts the ARQ retransmission (LevelCounts in
    # crates/recoup-recovery/src/config.rs); the default counts it.
    {"label": "ART (level=copies)", "name": "art", "params": "level=copies"},
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

    plan = common.art_plan("art-fig19", f"{size_mb}MB", "4%", POLICIES, args.seeds, "60s")
    out = common.RESULTS / "art-fig19"
    rows = common.run(plan, out / "scenario.toml", args)
    order = [p["label"] for p in POLICIES]
    # AutoRec's reading of ART's cost, every send of a round a replica: (retransmissions +
    # copies) / new packets.
    resent = rows["copies_sent"] + rows["retransmissions_sent"]
    rows["cost_with_rtx"] = resent / (rows["packets_sent"] - resent)
    g = rows.groupby("policy")
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
        .reindex(order)
        .reset_index()
    )
    table["fct_s"] /= 1000
    table["redundancy_cost_%"] = table.pop("redundancy_cost") * 100
    table["cost_with_rtx_%"] = table.pop("cost_with_rtx") * 100
    table["loss_%"] = table.pop("loss_rate") * 100

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    x = range(len(order))
    a.bar(x, table["n_max"], yerr=table["n_max_sd"].fillna(0), color="tab:blue", capsize=3)
    a.set_ylabel("N_max (mean over seeds)")
    b.bar(x, table["copies"], color="tab:orange")
    b.set_ylabel("redundancy cost (copies beyond ARQ)")
    for ax in (a, b):
        ax.set_xticks(list(x), order, rotation=30, ha="right")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(
        f"ART Fig. 19 setting: {size_mb} MB file, 100 Mbit/s, 30 ms RTT, 4 % loss, "
        f"{args.seeds} seeds"
    )
    common.save_figure(fig, figs / "art-fig19.png", dpi=120)

    md = common.frame_table(table)
    common.save_text(figs / "art-fig19.md", md)
    print(md)
    print(f"{len(rows)} runs, wall time {common.wall_seconds(out):.1f} s")


if __name__ == "__main__":
    main()
