"""ART Fig. 19: N_max and redundancy cost of QUIC, fixed-R QUIC variants, OR3 and ART for one
large file at 100 Mbit/s, 30 ms RTT, 4 % random loss.

    python3 experiments/art/fig19_nmax.py [--quick] [--seeds N] [--jobs N]

Raw rows in experiments/results/art-fig19/, the plot in experiments/figures/art-fig19.png and
the table in experiments/figures/art-fig19.md.
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from cli import RESULTS, figure_dir, markdown, run, scenario_toml  # noqa: E402

# ART counts the ARQ retransmission in R ("QUIC (R = k)" sends k replicas per round), our
# `fixed:r=` counts only the copies besides it, hence r = R - 1.
POLICIES = [
    ("QUIC (arq)", "arq", ""),
    ("QUIC (R=2)", "fixed", "r=1"),
    ("QUIC (R=3)", "fixed", "r=2"),
    ("OR3 (R=2n-1)", "or3", "variant=2n-1"),
    ("QUIC (R=2n+1)", "or3", "variant=2n+1"),
    ("ART", "art", ""),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 MB, 3 seeds (a smoke run)")
    ap.add_argument("--seeds", type=int, help="seeds per policy (default 10, quick 3)")
    ap.add_argument("--jobs", type=int, default=0, help="worker threads (default: all cores)")
    args = ap.parse_args()
    figs = figure_dir(args.quick)
    size_mb = 10 if args.quick else 100
    seeds = args.seeds or (3 if args.quick else 10)

    toml = scenario_toml(
        {"name": "art-fig19", "seed": 1, "repetitions": seeds, "duration": "60s"},
        {
            # 100 Mbit/s x 30 ms is 375 kB, about 300 packets: the queue holds one BDP.
            "path": {"rtt": "30ms", "rate": "100Mbps", "queue": "droptail packets=300"},
            "path.down": {"loss": "bernoulli 4%"},
            "app": {"kind": "file", "size": f"{size_mb}MB", "count": 1},
            "transport": {"cc": "bbr"},
        },
        POLICIES,
    )
    rows, wall = run(toml, RESULTS / "art-fig19", args.jobs)
    order = [label for label, _, _ in POLICIES]
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
            loss_rate=("loss_rate", "mean"),
            fct_s=("fct_ms", "mean"),
        )
        .reindex(order)
        .reset_index()
    )
    table["fct_s"] /= 1000
    table["redundancy_cost_%"] = table.pop("redundancy_cost") * 100
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
        f"ART Fig. 19 setting: {size_mb} MB file, 100 Mbit/s, 30 ms RTT, 4 % loss, {seeds} seeds"
    )
    fig.tight_layout()
    figs.mkdir(parents=True, exist_ok=True)
    fig.savefig(figs / "art-fig19.png", dpi=120)

    md = markdown(table)
    (figs / "art-fig19.md").write_text(md)
    print(md)
    print(f"{len(rows)} runs, wall time {wall:.1f} s")


if __name__ == "__main__":
    main()
