"""ART Fig. 12: redundancy cost and N_max under fixed redundancy levels R = 0, 3, 5, 8 at 2, 5, 8
and 10 % random loss (100 Mbit/s, 100 ms RTT): the figure that motivates ART's adaptive R.

    python3 experiments/art/fig12_fixed_r.py [--quick] [--seeds N] [--jobs N]

R = 0 is plain QUIC; R > 0 is read as R copies of each lost packet besides its retransmission in
every round (`fixed:r=R`): with R counting the retransmission, as ART's other figures do, R = 0
would not exist. One 10 MB file per run (the paper gives no size) on ART's Mahimahi path with a
one-BDP queue. Raw rows in experiments/results/art-fig12/, the plot in
experiments/figures/art-fig12.png and the table in experiments/figures/art-fig12.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

LEVELS = [0, 3, 5, 8]
LOSSES = ["2%", "5%", "8%", "10%"]
POLICIES = [
    {"label": "R=0", "name": "arq"},
    *[{"label": f"R={r}", "name": "fixed", "params": f"r={r}"} for r in LEVELS[1:]],
]
# 100 Mbit/s x 100 ms = 1.25 MB, about 1000 of our packets.
QUEUE = "droptail packets=1000"


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "2 MB, 2 seeds (a smoke run)",
        seeds=5,
        quick_seeds=2,
        jobs=2,
        count_help="seeds per loss rate and level",
    )
    figs = common.figure_dir(args.quick)
    size_mb = 2 if args.quick else 10
    plan = common.art_plan(
        "art-fig12",
        f"{size_mb}MB",
        "2%",
        POLICIES,
        args.seeds,
        "120s",
        path=common.art_path(rtt="100ms", queue=QUEUE),
        sweep={"path.down.loss": [f"bernoulli {p}" for p in LOSSES]},
    )
    out = common.RESULTS / "art-fig12"
    rows = common.run(plan, out / "scenario.toml", args)
    incomplete = int(rows["transfers_incomplete"].fillna(0).sum())
    if incomplete:
        sys.exit(f"{incomplete} transfer(s) did not complete; lengthen the runs")
    rows["loss"] = rows["path.down.loss"].str.removeprefix("bernoulli ")
    agg = common.aggregate(rows, ["loss", "policy"], ["redundancy_cost", "n_max"])

    body = common.rows_by(
        agg,
        "loss",
        LOSSES,
        [p["label"] for p in POLICIES],
        lambda r: [
            common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], scale=100),
            common.pm(r["n_max"], r["n_max_ci"], digits=2),
        ],
    )
    header = ["loss", "level", "redundancy cost % (copies / new)", "N_max"]
    table = common.markdown_table(header, body)

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for loss in LOSSES:
        sel = agg[agg["loss"] == loss].set_index("policy").reindex([p["label"] for p in POLICIES])
        a.plot(LEVELS, sel["redundancy_cost"] * 100, marker="o", label=f"p = {loss}")
        b.plot(LEVELS, sel["n_max"], marker="o", label=f"p = {loss}")
    a.set_ylabel("redundancy cost (%)")
    b.set_ylabel("N_max (mean over seeds)")
    for ax in (a, b):
        ax.set_xlabel("redundancy level R (copies per round)")
        ax.set_xticks(LEVELS)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"ART Fig. 12 setting: {size_mb} MB file, 100 Mbit/s, 100 ms RTT")
    common.save_figure(fig, figs / "art-fig12.png", dpi=120)
    wall = common.wall_seconds(out)
    common.save_text(
        figs / "art-fig12.md",
        f"{table}\n\n{args.seeds} seeds per point (mean ± 95 % CI); wall time {wall:.0f} s with "
        f"--jobs {args.jobs} on {common.machine()}.\n",
    )


if __name__ == "__main__":
    main()
