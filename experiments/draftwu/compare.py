"""draft-wu (draft-wu-moq-recovery-for-video-streaming-00) beside too, autorec, crest and arq:
on the AutoRec testbed path (a 4 Mbit/s live stream, 12 Mbit/s, 5 % loss, RTT 20-200 ms), the
same path carrying a MoQ broadcast (`app.kind = "moq"`, groups reset at their 500 ms delivery
deadline), and the deployment fleet (scenarios/fleet/deployment.toml with these policies), its
streams once live and once MoQ broadcasts.

    python3 experiments/draftwu/compare.py [--quick] [--seeds N] [--duration 30s]
                                           [--streams N] [--jobs N] [--replot]
                                           [--only fleet-moq]

Raw results in experiments/results/draft-wu-{testbed,moq,fleet,fleet-moq}/, the tables in
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


# The fleet's MoQ broadcasts: (column, scale, header, digits), mean ± 95 % CI over streams.
FLEET_MOQ = [
    *[
        next(m for m in MOQ if m[0] == metric)
        for metric in ["objects_late", "objects_dropped", "deadline_miss_rate", "object_delay_ms",
                       "object_delay_p95_ms", "redundancy_cost"]
    ],
    ("bandwidth_cost", 100, "non-first bytes %", 2),
]  # fmt: skip
# What the paired differences against arq are given for.
FLEET_MOQ_PAIRED = ["deadline_miss_rate", "object_delay_ms", "object_delay_p95_ms"]
# The fleet's app as a MoQ broadcast: the file's 20 fps, a group (stream) per second, each object
# due 500 ms after capture, as on the testbed path above.
FLEET_MOQ_APP = 'kind = "moq"\ngop = 20\ndeadline = "500ms"\n'


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


def fleet_scenario(out: Path, app: str = "") -> Path:
    """The deployment fleet with this comparison's policies in place of its own, and `app`'s
    keys added to its [app] table."""
    text = deployment.SCENARIO.read_text()
    head = text[: text.index("[[policy]]")]
    head = head.replace('"../../../shared/', f'"{deployment.SCENARIO.parent}/../../../shared/')
    assert head.count("\n[app]\n") == 1, f"{deployment.SCENARIO} changed shape"
    head = head.replace("\n[app]\n", "\n[app]\n" + app)
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


def fleet_moq_table(args) -> str:
    out = common.RESULTS / "draft-wu-fleet-moq"
    if not args.replot:
        deployment.run_fleet(fleet_scenario(out, FLEET_MOQ_APP), args.streams, args.jobs, out)
    runs = pd.read_csv(out / "runs.csv")
    bad = runs["app_error"].dropna()
    if not bad.empty:
        sys.exit(f"{len(bad)} runs report an application error ({bad.iloc[0]}); see {out}")
    cols = [m for m, _, _, _ in FLEET_MOQ]
    agg = common.aggregate(runs, ["policy"], cols).set_index("policy")
    rows = [
        [label, *[common.pm(agg.loc[label, m], agg.loc[label, m + "_ci"], s, d)
                  for m, s, _, d in FLEET_MOQ]]
        for label in LABELS
    ]  # fmt: skip
    wall = float((out / "wall_seconds.txt").read_text())
    n = runs["seed"].nunique()
    table = common.markdown_table(["policy", *[h for _, _, h, _ in FLEET_MOQ]], rows)
    table += (
        f"\n{n} streams x {len(LABELS)} policies of {deployment.SCENARIO_DURATION}, each stream a "
        f"MoQ broadcast at its drawn bitrate (20 fps, a group per second, 500 ms deadline); mean "
        f"± 95 % CI over streams; {wall:.0f} s wall with --jobs {args.jobs}.\n"
    )
    # Paired over streams (every policy ran each stream on the same seed).
    arq = runs[runs["policy"] == "arq"].set_index("seed")
    diffs = []
    for label in LABELS[1:]:
        d = (
            runs[runs["policy"] == label].set_index("seed")[FLEET_MOQ_PAIRED]
            - arq[FLEET_MOQ_PAIRED]
        )
        d["policy"] = label
        diffs.append(d)
    paired = common.aggregate(pd.concat(diffs), ["policy"], FLEET_MOQ_PAIRED).set_index("policy")
    scale = {m: s for m, s, _, _ in FLEET_MOQ}
    digits = {m: dg for m, _, _, dg in FLEET_MOQ}
    heads = {m: h for m, _, h, _ in FLEET_MOQ}
    prows = [
        [label, *[common.pm(paired.loc[label, m], paired.loc[label, m + "_ci"], scale[m],
                            digits[m]) for m in FLEET_MOQ_PAIRED]]
        for label in LABELS[1:]
    ]  # fmt: skip
    table += "\nPaired differences policy − arq over the same streams (mean ± 95 % CI):\n\n"
    table += common.markdown_table(["policy", *[heads[m] for m in FLEET_MOQ_PAIRED]], prows)
    return table


def flags(p) -> None:
    p.add_argument("--streams", type=int, help="fleet streams (default 200)")
    p.add_argument(
        "--only",
        choices=["fleet-moq"],
        help="only the fleet of MoQ broadcasts, into experiments/figures/draft-wu-fleet-moq.md",
    )


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "smoke version: 2 seeds of 10 s, two RTTs, 40 fleet streams",
        seeds=5,
        quick_seeds=2,
        jobs=2,
        duration=True,
        extra=flags,
    )
    if args.streams is None:
        args.streams = 40 if args.quick else 200
    if args.only == "fleet-moq":
        md = "## draft-wu beside too, autorec, crest and arq: the deployment fleet carrying MoQ\n\n"
        md += fleet_moq_table(args)
        md += f"\nMachine: {common.machine()}.\n"
        common.save_text(common.figure_path("draft-wu-fleet-moq", args.quick, "md"), md)
        print(md)
        return
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
    md += "\n### Deployment fleet carrying MoQ broadcasts\n\n"
    md += fleet_moq_table(args)
    md += f"\nMachine: {common.machine()}.\n"
    common.save_text(common.figure_path("draft-wu", args.quick, "md"), md)
    print(md)


if __name__ == "__main__":
    main()
