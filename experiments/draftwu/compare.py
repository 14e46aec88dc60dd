"""draft-wu (draft-wu-moq-recovery-for-video-streaming-00) beside too, autorec, crest and arq:
on the AutoRec testbed path (a 4 Mbit/s live stream, 12 Mbit/s, 5 % loss, RTT 20-200 ms), the
same path carrying a MoQ broadcast (`app.kind = "moq"`, groups reset at their 500 ms delivery
deadline), and the deployment fleet (scenarios/fleet/deployment.toml with these policies).

    python3 experiments/draftwu/compare.py [--quick] [--seeds N] [--duration 30s]
                                           [--streams N] [--jobs N] [--replot]

Raw results in experiments/results/draft-wu-{testbed,moq,fleet}/, the tables in
experiments/figures/draft-wu.md (--quick: experiments/figures/draft-wu-quick.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
import common  # noqa: E402
import deployment  # noqa: E402

AUTOREC_TESTBED = "alpha=30ms,beta=0.3,gamma=0.2"
AUTOREC_DEPLOYMENT = "alpha=200ms,beta=0.5,gamma=0.5"
LABELS = ["arq", "draft-wu", "too", "autorec", "crest"]


def testbed_policies(autorec: str) -> list[dict[str, str]]:
    return [
        {"name": "arq"},
        {"name": "draft-wu"},
        {"name": "too"},
        {"name": "autorec", "params": autorec},
        {"name": "crest"},
    ]


# (column, scale, header, digits)
LIVE = [
    ("recovery_latency_multi_ms", 1, "latency 2+ rtx ms", 1),
    ("recovery_latency_ms", 1, "latency ms", 1),
    ("deterioration_rate", 100, "deterioration %", 2),
    ("redundancy_cost", 100, "redundancy cost %", 2),
    ("goodput_reduction", 100, "goodput red. %", 2),
    ("freezes_per_100s", 1, "freezes /100 s", 2),
]
MOQ = [
    ("object_delay_ms", 1, "object delay ms", 1),
    ("object_delay_p95_ms", 1, "object delay p95 ms", 1),
    ("deadline_miss_rate", 100, "objects missed %", 2),
    ("objects_late", 1, "late", 1),
    ("objects_dropped", 1, "dropped", 1),
    ("redundancy_cost", 100, "redundancy cost %", 2),
    ("recovery_latency_multi_ms", 1, "latency 2+ rtx ms", 1),
]
FLEET = [
    ("recovery_latency_multi_ms", 1, "mean", "latency 2+ rtx, mean ms"),
    ("recovery_latency_multi_ms", 1, "p95", "latency 2+ rtx, p95 ms"),
    ("deterioration_rate", 100, "mean", "deterioration, mean %"),
    ("redundancy_cost", 100, "mean", "redundancy cost, mean %"),
    ("goodput_reduction", 100, "mean", "goodput red., mean %"),
    ("irt_ms", 1, "mean", "IRT, mean ms"),
    ("freezes_per_100s", 1, "mean", "freezes /100 s, mean"),
    ("frozen_ms_per_100s", 1, "mean", "frozen ms /100 s, mean"),
]


def sweep_table(name: str, plan: dict, args, metrics) -> str:
    df = common.run(plan, common.RESULTS / name / "plan.toml", args)
    cols = [m for m, _, _, _ in metrics]
    agg = common.aggregate(df, ["path.rtt", "policy"], cols)
    rtts = list(dict.fromkeys(df["path.rtt"]))

    def cells(r: pd.Series) -> list[str]:
        return [common.pm(r[m], r[m + "_ci"], s, d) for m, s, _, d in metrics]

    rows = common.rows_by(agg, "path.rtt", rtts, LABELS, cells)
    wall = common.wall_seconds(common.RESULTS / name)
    table = common.markdown_table(["RTT", "policy", *[h for _, _, h, _ in metrics]], rows)
    return table + (
        f"\n{args.seeds} seeds x {args.duration} per point, mean ± 95 % CI over seeds; "
        f"{len(df)} runs, {wall:.0f} s wall with --jobs {args.jobs}.\n"
    )


def fleet_scenario(out: Path) -> Path:
    """The deployment fleet with this comparison's policies in place of its own."""
    text = deployment.SCENARIO.read_text()
    head = text[: text.index("[[policy]]")]
    head = head.replace('"../../../shared/', f'"{deployment.SCENARIO.parent}/../../../shared/')
    policies = testbed_policies(AUTOREC_DEPLOYMENT)
    body = "".join(
        f'[[policy]]\nname = "{p["name"]}"\n'
        + (f'params = "{p["params"]}"\n' if "params" in p else "")
        + "\n"
        for p in policies
    )
    path = out.with_suffix(".toml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + body)
    return path


def fleet_table(args) -> str:
    out = common.RESULTS / "draft-wu-fleet"
    if not args.replot:
        deployment.run_fleet(fleet_scenario(out), args.streams, args.jobs, out)
    fleet = pd.read_csv(out / "fleet.csv")
    runs = pd.read_csv(out / "runs.csv")
    bad = runs["app_error"].dropna()
    if not bad.empty:
        sys.exit(f"{len(bad)} runs report an application error ({bad.iloc[0]}); see {out}")
    rows = [
        [label, *[deployment.stat(fleet, p, m, st) * s for m, s, st, _ in FLEET]]
        for label, p in zip(LABELS, LABELS)
    ]
    wall = float((out / "wall_seconds.txt").read_text())
    n = runs["seed"].nunique()
    table = common.markdown_table(["policy", *[h for *_, h in FLEET]], rows, ".2f")
    return table + (
        f"\n{n} streams x {len(LABELS)} policies of {deployment.SCENARIO_DURATION} (autorec with "
        f"the deployment tolerances {AUTOREC_DEPLOYMENT}); means and percentiles over streams; "
        f"{wall:.0f} s wall with --jobs {args.jobs}.\n"
    )


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "smoke version: 2 seeds of 10 s, two RTTs, 40 fleet streams",
        seeds=5,
        quick_seeds=2,
        jobs=2,
        duration=True,
        extra=lambda p: p.add_argument("--streams", type=int, help="fleet streams (default 200)"),
    )
    if args.streams is None:
        args.streams = 40 if args.quick else 200
    rtts = ["60ms", "200ms"] if args.quick else ["20ms", "60ms", "100ms", "200ms"]
    live = common.autorec_plan(
        "draft-wu-testbed", "4Mbps", testbed_policies(AUTOREC_TESTBED), args, {"path.rtt": rtts}
    )
    moq = common.autorec_plan(
        "draft-wu-moq", "4Mbps", testbed_policies(AUTOREC_TESTBED), args, {"path.rtt": rtts}
    )
    moq["app"] = {"kind": "moq", "bitrate": "4Mbps", "fps": 30, "gop": 30, "deadline": "500ms"}
    md = "## draft-wu beside too, autorec, crest and arq\n\n"
    md += "### AutoRec testbed: 4 Mbit/s live stream, 12 Mbit/s, 5 % loss each way, BBR\n\n"
    md += sweep_table("draft-wu-testbed", live, args, LIVE)
    md += (
        "\n### The same path carrying a MoQ broadcast: one 4 Mbit/s track, 30 fps, one group "
        "(stream) per 30-frame GOP, 500 ms delivery deadline\n\n"
    )
    md += sweep_table("draft-wu-moq", moq, args, MOQ)
    md += "\n### Deployment fleet (scenarios/fleet/deployment.toml)\n\n"
    md += fleet_table(args)
    md += f"\nMachine: {common.machine()}.\n"
    common.save_text(common.figure_path("draft-wu", args.quick, "md"), md)
    print(md)


if __name__ == "__main__":
    main()
