"""ART Fig. 22: FCT and redundancy cost of ART, a 9:1 block FEC (dual-side: recoup's FEC
extension, ARQ underneath) and QUIC for reference, for one large file at 100 Mbit/s, 20 ms RTT,
4 % loss. The redundancy cost is (copies + repair packets) / new packets.

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
    # ART §7.1: "a redundancy ratio of 9:1 means 9 data packets are used to create 1 redundant
    # packet".
    {"label": "FEC 9:1", "fec": "block:k=9,m=1"},
]


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
    rows = common.run_schemes(plan, POLICIES, out, args)
    rows["fct_s"] = rows["fct_ms"] / 1000
    # redundancy_cost counts ART's copies and the FEC's repairs per new packet alike; the count
    # column shows whichever the scheme sent.
    rows["copies_sent"] = rows["copies_sent"] + rows["repair_packets"].fillna(0)
    agg = common.aggregate(
        rows, ["policy"], ["fct_s", "redundancy_cost", "copies_sent", "n_max", "loss_rate"]
    ).set_index("policy")
    header = ["scheme", "FCT s", "redundancy cost %", "copies or repairs", "N_max", "loss %"]
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
