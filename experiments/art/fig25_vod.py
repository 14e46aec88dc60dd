"""ART Fig. 25: video QoE of QUIC (arq) and ART in DASH video on demand over an LTE trace with
30 ms RTT and 10 % loss: mean bitrate, rebuffering events and rebuffering time.

    python3 experiments/art/fig25_vod.py [--quick] [--seeds N] [--jobs N]

The player (`[app] kind = "vod"`, recoup-apps' vod.rs) fetches Big Buck Bunny's 150 segments of
4 s from the DASH dataset's 20-bitrate ladder (45 kbit/s to 3.9 Mbit/s) with the basic rate-based
ABR ART uses, over one connection. The paper's Mahimahi trace is Verizon-LTE-driving; the shared
traces have Verizon-LTE-short, which this uses (both directions), looped as mm-link loops it. The
paper does not name the loss direction or the congestion controller: both BBR (the other ART
experiments' choice) and CUBIC run, as a sweep axis, and the loss sits on the data direction
or on both (ACKs and requests lost too), as a second axis. Raw rows in
experiments/results/art-fig25/, the table in experiments/figures/art-fig25.md.
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
TRACES = common.REPO.parent / "shared" / "traces" / "mahimahi"
# ART §7.5: QUIC -> ART.
PAPER = {
    "vod_bitrate_kbps": (254, 274),
    "rebuffers": (82, 73),
    "rebuffer_s": (322, 251),
}
METRICS = ["vod_bitrate_kbps", "rebuffers", "rebuffer_s", "segments_incomplete"]


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "40 segments, 2 seeds (a smoke run)",
        seeds=5,
        quick_seeds=2,
        jobs=2,
    )
    segments = 40 if args.quick else 150
    plan = {
        "name": "art-fig25",
        "seed": 1,
        "repetitions": args.seeds,
        # The 600 s presentation plus room for stalls; what is not fetched by then counts as
        # segments_incomplete and its stall up to the end as rebuffering.
        "duration": f"{segments * 4 * 2}s",
        "path": {
            "rtt": "30ms",
            "queue": "droptail packets=200",
            "down": {
                "trace": str(TRACES / "Verizon-LTE-short.down"),
                "loss": "bernoulli 10%",
            },
            "up": {"trace": str(TRACES / "Verizon-LTE-short.up")},
        },
        "app": {"kind": "vod", "segments": segments},
        "transport": {"cc": "bbr"},
        "policy": POLICIES,
        "sweep": {
            "transport.cc": ["bbr", "cubic"],
            "path.up.loss": ["bernoulli 0%", "bernoulli 10%"],
        },
    }
    out = common.RESULTS / "art-fig25"
    rows = common.run(plan, out / "scenario.toml", args)
    rows["loss on"] = rows["path.up.loss"].map(
        {"bernoulli 0%": "data", "bernoulli 10%": "both ways"}
    )
    agg = common.aggregate(rows, ["transport.cc", "loss on", "policy"], METRICS)
    header = [
        "cc",
        "loss on",
        "policy",
        "mean bitrate kbit/s",
        "rebuffering events",
        "rebuffering s",
        "segments not fetched",
    ]
    body = []
    for cc, where in [(c, w) for c in ["bbr", "cubic"] for w in ["data", "both ways"]]:
        sel = agg[(agg["transport.cc"] == cc) & (agg["loss on"] == where)].set_index("policy")
        for p in [x["label"] for x in POLICIES]:
            r = sel.loc[p]
            body.append([cc, where, p] + [common.pm(r[m], r[f"{m}_ci"]) for m in METRICS])
        q, a = sel.loc["QUIC (arq)"], sel.loc["ART"]
        body.append(
            [cc, where, "ART vs QUIC"]
            + [
                common.fmt(100 * (a[m] - q[m]) / q[m], "+.1f") + " %" if q[m] else "–"
                for m in METRICS
            ]
        )
    paper = [
        ["paper", "?", "QUIC", *[str(PAPER[m][0]) for m in METRICS[:3]], "–"],
        ["paper", "?", "ART", *[str(PAPER[m][1]) for m in METRICS[:3]], "–"],
        [
            "paper",
            "?",
            "ART vs QUIC",
            *[f"{100 * (PAPER[m][1] - PAPER[m][0]) / PAPER[m][0]:+.1f} %" for m in METRICS[:3]],
            "–",
        ],
    ]
    table = common.markdown_table(header, body + paper)
    wall = common.wall_seconds(out)
    common.save_text(
        common.figure_path("art-fig25", args.quick, "md"),
        "## ART Fig. 25: DASH video on demand, Verizon LTE trace, 30 ms, 10 % loss\n\n"
        f"{table}\n\n{args.seeds} seeds x {segments} segments of 4 s per point (mean ± 95 % "
        f"CI); wall time {wall:.0f} s with --jobs {args.jobs} on {common.machine()}.\n",
    )


if __name__ == "__main__":
    main()
