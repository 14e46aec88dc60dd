"""Policies side by side over one path parameter (AutoRec Figs. 17 and 18): a 4 Mbit/s live stream
on the testbed path, ARQ in every sweep point as the goodput baseline.

Shared by fig17_opportunistic.py and fig18_art.py, which put experiments/ on `sys.path` for
`common` before importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import common
import matplotlib.pyplot as plt

# The AutoRec tolerances of Figs. 17-18.
AUTOREC_PARAMS = "alpha=30ms,beta=0.3,gamma=0.2"
# The same with at most one reinjection per queue entry per off-mode period (recoup's rule
# before it followed AutoRec §V-B), beside the paper's rule.
AUTOREC_ONCE = {
    "name": "autorec",
    "label": "autorec-once",
    "params": AUTOREC_PARAMS + ",offmode=once",
}
# A paper number the text gives as about zero.
NA = "~0"

METRICS = [
    "recovery_latency_multi_ms",
    "deterioration_rate",
    "redundancy_cost",
    "goodput_reduction",
    "goodput_mbps",
    "loss_rate",
    "t_unit_ms",
    "freezes_per_100s",
]

# (metric, scale, label) of the four panels and table columns.
PANELS = [
    ("recovery_latency_multi_ms", 1.0, "recovery latency, multi-rtx data (ms)"),
    ("deterioration_rate", 100.0, "recovery deterioration rate (%)"),
    ("redundancy_cost", 100.0, "redundancy cost (%)"),
    ("goodput_reduction", 100.0, "goodput reduction (%)"),
]


@dataclass
class Compare:
    fig: str
    title: str
    axis: str  # scenario key swept, e.g. path.rate
    values: list[str]
    quick_values: list[str]
    xlabel: str
    policies: list[dict[str, str]]
    # paper[(label, x)] = [latency ms, deterioration %, cost %, goodput red. %] as text
    paper: dict[tuple[str, float], list[str]] = field(default_factory=dict)


def x_value(v: str) -> float:
    return float(v.rstrip("Mbpsm"))


def run(c: Compare, doc: str) -> None:
    args = common.autorec_args(doc)
    policies = [{"name": "arq"}, *c.policies]
    sweep = {c.axis: c.quick_values if args.quick else c.values}
    plan = common.autorec_plan(c.fig, "4Mbps", policies, args, sweep)
    df = common.run(plan, common.RESULTS / c.fig / "runs" / "plan.toml", args)
    df["x"] = df[c.axis].map(x_value)
    agg = common.aggregate(df, ["policy", "x"], METRICS).sort_values(["policy", "x"])
    labels = ["arq"] + [p.get("label", p["name"]) for p in c.policies]

    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    for ax, (m, scale, label) in zip(axes.flat, PANELS):
        for pol in labels:
            a = agg[agg["policy"] == pol]
            ax.errorbar(a["x"], a[m] * scale, yerr=a[m + "_ci"] * scale, fmt="o-", label=pol)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel(c.xlabel)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(c.title)
    common.save_figure(fig, common.figure_path(c.fig, args.quick), dpi=110)

    rows = []
    for _, r in agg.iterrows():
        ours = [
            common.pm(r[m], r[m + "_ci"], scale, 1 if scale == 1 else 2) for m, scale, _ in PANELS
        ]
        paper = c.paper.get((r["policy"], r["x"]), [""] * 4)
        rows.append(
            [
                r["policy"],
                f"{r['x']:g}",
                *[f"{o} ({p})" if p else o for o, p in zip(ours, paper)],
                common.pm(r["goodput_mbps"], r["goodput_mbps_ci"], 1, 2),
                common.pm(r["t_unit_ms"], r["t_unit_ms_ci"]),
            ]
        )
    body = (
        "Ours: mean ± 95 % CI over seeds; the paper's number in parentheses where its text "
        "gives one.\n\n"
    )
    body += common.markdown_table(
        [
            "policy",
            c.xlabel,
            "latency ms",
            "deterioration %",
            "redundancy cost %",
            "goodput red. %",
            "goodput Mbit/s",
            "T_unit ms",
        ],
        rows,
    )
    common.write_table(c.fig, c.title, body, args)
