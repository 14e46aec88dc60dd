"""Every policy under BBRv1 and BBRv3 (draft-ietf-ccwg-bbr, `bbr3`) on AutoRec's testbed (a
4 Mbit/s live stream, 5 % loss, 60 ms RTT, 12 Mbit/s), the burst-loss RTC scenario
(scenarios/ge-burst.toml); `experiments/fleet/deployment.py --cc bbr3` runs the fleet under it.

    python3 experiments/beyond/bbr3_policies.py [--quick] [--seeds N] [--jobs N]

Raw rows in experiments/results/bbr3-policies/, the table in experiments/figures/bbr3-policies.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

FIG = "bbr3-policies"
CCS = ["bbr", "bbr3"]
POLICIES = [
    {"name": "arq"},
    {"name": "or3"},
    {"name": "art"},
    {"name": "art-mab"},
    {"name": "too"},
    {"name": "autorec", "params": "alpha=30ms,beta=0.3,gamma=0.2"},
    {"name": "crest"},
]
METRICS = [
    "recovery_latency_multi_ms",
    "deterioration_rate",
    "redundancy_cost",
    "goodput_mbps",
    "freezes_per_100s",
    "deadline_miss_rate",
    "loss_rate",
]


def cells(r: pd.Series) -> list[str]:
    return [
        common.pm(r["recovery_latency_multi_ms"], r["recovery_latency_multi_ms_ci"]),
        common.pm(r["deterioration_rate"], r["deterioration_rate_ci"], 100, 2),
        common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], 100, 2),
        common.pm(r["goodput_mbps"], r["goodput_mbps_ci"], digits=2),
        common.pm(r["freezes_per_100s"], r["freezes_per_100s_ci"], digits=2),
        common.pm(r["deadline_miss_rate"], r["deadline_miss_rate_ci"], 100, 2),
        common.pm(r["loss_rate"], r["loss_rate_ci"], 100, 2),
    ]


HEADER = [
    "cc",
    "policy",
    "multi-rtx latency ms",
    "deterioration %",
    "redundancy %",
    "goodput Mbit/s",
    "freezes / 100 s",
    "deadline miss %",
    "loss seen %",
]


def table(rows: pd.DataFrame) -> str:
    labels = list(dict.fromkeys(rows["policy"]))
    agg = common.aggregate(rows, ["transport.cc", "policy"], METRICS)
    agg = agg.rename(columns={"transport.cc": "cc"})
    return common.markdown_table(HEADER, common.rows_by(agg, "cc", CCS, labels, cells))


def main() -> None:
    args = common.autorec_args(__doc__.split("\n\n")[0])
    out = common.RESULTS / FIG
    sweep = {"transport.cc": CCS}
    testbed = common.autorec_plan(f"{FIG}-testbed", "4Mbps", POLICIES, args, sweep)
    sections = []
    rows = common.run(testbed, out / "testbed" / "scenario.toml", args)
    title = "AutoRec's testbed (5 % loss, 60 ms, 12 Mbit/s, 4 Mbit/s live)"
    sections.append(f"{title}:\n\n{table(rows)}")

    with open(common.REPO / "scenarios" / "ge-burst.toml", "rb") as f:
        burst = tomllib.load(f)
    burst.update(repetitions=args.seeds, duration=args.duration)
    burst["sweep"] = {**burst["sweep"], **sweep}
    burst["policy"] = POLICIES
    rows = common.run(burst, out / "ge-burst" / "scenario.toml", args)
    sections.append(
        "Burst loss (scenarios/ge-burst.toml: RTC under time-slotted Gilbert-Elliott loss, every "
        f"bad-state loss of the sweep pooled):\n\n{table(rows)}"
    )
    body = "\n\n".join(sections)
    common.write_table(FIG, "Every policy under BBRv1 and BBRv3", body, args)
    print(body)


if __name__ == "__main__":
    main()
