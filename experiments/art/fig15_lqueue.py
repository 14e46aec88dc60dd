"""ART Fig. 15: sensitivity of ART's redundancy cost to L_queue (the length of its replica-outcome
bitmap) at mean loss rates of 1 to 10 % whose loss "follows a Gaussian distribution"
(100 Mbit/s, 30 ms RTT).

    python3 experiments/art/fig15_lqueue.py [--quick] [--seeds N] [--jobs N]

The paper does not say how the Gaussian enters; here the loss rate of each block of 100
packets is drawn from a normal distribution with mean p and standard deviation p / 2 (clipped
at 0), and each packet of the block is lost with that rate: loss patterns written once per p
and seed to experiments/results/traces/ and replayed by the link (`replay PATH`; a replayed
pattern draws nothing, so the seeds are the patterns, one run each). One 10 MB
file per run on ART's Mahimahi path. Raw rows in experiments/results/art-fig15/, the plot in
experiments/figures/art-fig15.png and the table in experiments/figures/art-fig15.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

L_QUEUES = [1, 5, 10, 20, 50, 100]
MEANS = [1, 5, 10]
BLOCK = 100
PATTERN_PACKETS = 200_000


def gaussian_pattern(mean_pct: int, seed: int) -> Path:
    """The replayed loss pattern number `seed` for mean loss `mean_pct` %, written once."""
    path = common.RESULTS / "traces" / f"gaussian-{mean_pct}pct-{seed}.loss"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng([15, mean_pct, seed])
        p = mean_pct / 100
        rates = np.clip(rng.normal(p, p / 2, PATTERN_PACKETS // BLOCK), 0.0, 1.0)
        lost = rng.random(PATTERN_PACKETS) < np.repeat(rates, BLOCK)
        path.write_text("".join("1\n" if x else "0\n" for x in lost))
    return path


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "2 MB, 2 seeds (a smoke run)",
        seeds=5,
        quick_seeds=2,
        jobs=2,
        count_help="seeds per loss rate and L_queue",
    )
    figs = common.figure_dir(args.quick)
    size_mb = 2 if args.quick else 10
    patterns = {
        f"replay {gaussian_pattern(m, k)}": f"{m}%" for m in MEANS for k in range(args.seeds)
    }
    policies = [{"label": f"L={lq}", "name": "art", "params": f"l_queue={lq}"} for lq in L_QUEUES]
    plan = common.art_plan(
        "art-fig15",
        f"{size_mb}MB",
        next(iter(patterns)),
        policies,
        1,
        "60s",
        sweep={"path.down.loss": list(patterns)},
    )
    out = common.RESULTS / "art-fig15"
    rows = common.run(plan, out / "scenario.toml", args)
    incomplete = int(rows["transfers_incomplete"].fillna(0).sum())
    if incomplete:
        sys.exit(f"{incomplete} transfer(s) did not complete; lengthen the runs")
    rows["mean loss"] = rows["path.down.loss"].map(patterns)
    agg = common.aggregate(rows, ["mean loss", "policy"], ["redundancy_cost", "n_max", "loss_rate"])
    labels = [p["label"] for p in policies]
    body = common.rows_by(
        agg,
        "mean loss",
        [f"{m}%" for m in MEANS],
        labels,
        lambda r: [
            common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], scale=100, digits=2),
            common.pm(r["n_max"], r["n_max_ci"], digits=2),
            common.fmt(100 * r["loss_rate"], ".2f"),
        ],
    )
    header = ["mean loss", "L_queue", "redundancy cost %", "N_max", "measured loss %"]

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in MEANS:
        sel = agg[agg["mean loss"] == f"{m}%"].set_index("policy").reindex(labels)
        ax.plot(L_QUEUES, sel["redundancy_cost"] * 100, marker="o", label=f"mean loss {m} %")
    ax.set_xscale("log")
    ax.set_xticks(L_QUEUES, [str(x) for x in L_QUEUES])
    ax.set_xlabel("L_queue (replica outcomes in ART's bitmap)")
    ax.set_ylabel("redundancy cost (%)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"ART Fig. 15 setting: {size_mb} MB, 100 Mbit/s, 30 ms, Gaussian loss")
    common.save_figure(fig, figs / "art-fig15.png", dpi=120)
    common.write_table(
        "art-fig15",
        "ART Fig. 15: redundancy cost over L_queue",
        common.markdown_table(header, body) + "\n\n(mean ± 95 % CI)\n",
        args,
        per_point=f"{args.seeds} seeds x one {size_mb} MB file",
    )


if __name__ == "__main__":
    main()
