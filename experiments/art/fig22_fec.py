"""ART Fig. 22, ART's side: FCT and redundancy cost of ART (and QUIC for reference) for one large
file at 100 Mbit/s, 20 ms RTT, 4 % loss. The paper sets ART against a 9:1 block FEC; recoup has
no FEC yet (a later issue), so that side of the figure waits for it.

    python3 experiments/art/fig22_fec.py [--quick] [--seeds N] [--jobs N]

Raw rows in experiments/results/art-fig22/, the table in experiments/figures/art-fig22.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

POLICIES = [
    {"label": "QUIC (arq)", "name": "arq"},
    {"label": "ART", "name": "art"},
]
# 9:1 block FEC sends one repair packet per nine data packets, loss or not: 1/9 of the new
# packets (ART §7.1 "a redundancy ratio of 9:1 means 9 data packets are used to create 1
# redundant packet").
FEC_9_1_COST = 1 / 9


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "10 MB, 2 seeds (a smoke run)",
        seeds=5,
        quick_seeds=2,
        jobs=1,
        count_help="seeds per policy",
    )
    figs = common.figure_dir(args.quick)
    size_mb = 10 if args.quick else 100
    plan = common.art_plan(
        "art-fig22",
        f"{size_mb}MB",
        "4%",
        POLICIES,
        args.seeds,
        "120s",
        path=common.art_path(rtt="20ms"),
    )
    out = common.RESULTS / "art-fig22"
    rows = common.run(plan, out / "scenario.toml", args)
    rows["fct_s"] = rows["fct_ms"] / 1000
    agg = common.aggregate(
        rows, ["policy"], ["fct_s", "redundancy_cost", "copies_sent", "n_max", "loss_rate"]
    ).set_index("policy")
    header = ["scheme", "FCT s", "redundancy cost %", "copies", "N_max", "loss %"]
    body = [
        [
            p["label"],
            common.pm(agg.loc[p["label"], "fct_s"], agg.loc[p["label"], "fct_s_ci"], 1, 2),
            common.pm(
                agg.loc[p["label"], "redundancy_cost"],
                agg.loc[p["label"], "redundancy_cost_ci"],
                100,
                2,
            ),
            f"{agg.loc[p['label'], 'copies_sent']:.0f}",
            f"{agg.loc[p['label'], 'n_max']:.1f}",
            f"{agg.loc[p['label'], 'loss_rate'] * 100:.2f}",
        ]
        for p in POLICIES
    ]
    body.append(
        ["FEC 9:1", "waits for the FEC issue", f"{FEC_9_1_COST * 100:.1f} (by construction)"]
        + ["–"] * 3
    )
    md = common.markdown_table(header, body)
    wall = common.wall_seconds(out)
    md += (
        f"\n{size_mb} MB file, 100 Mbit/s, 20 ms RTT, 4 % loss, {args.seeds} seeds; wall time "
        f"{wall:.0f} s with --jobs {args.jobs} on {common.machine()}.\n"
    )
    common.save_text(figs / "art-fig22.md", md)
    print(md)


if __name__ == "__main__":
    main()
