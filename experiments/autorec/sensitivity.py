"""AutoRec Figs. 14-16: sensitivity to one tolerance (alpha, beta or gamma) with the other two
relaxed, on a 12 Mbit/s live stream that keeps the testbed path's sender in on-mode.

Shared by fig14_alpha.py, fig15_beta.py and fig16_gamma.py, which put experiments/ on `sys.path`
for `common` before importing it. ARQ runs once on the same seeds as the goodput baseline (a sweep
point of AutoRec changes only AutoRec's parameters, so the ARQ runs would be identical at every
point).
"""

from __future__ import annotations

from dataclasses import dataclass

import common
import matplotlib.pyplot as plt
import pandas as pd

METRICS = [
    "recovery_latency_multi_ms",
    "recovery_latency_ms",
    "deterioration_rate",
    "redundancy_cost",
    "goodput_reduction",
    "loss_rate",
    "t_unit_ms",
]

# Paper (AutoRec §VII-A): alpha = 0 ms, beta = gamma = 100 %, the largest benefit and overhead.
PAPER_MAX = {"latency_ms": 9.5, "deterioration": 0.0, "cost": 0.476, "goodput": 0.330}

# The beta and gamma values of Figs. 15-16, as fractions.
FRACTIONS = ["0", "0.05", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.6", "0.8", "1.0"]
QUICK_FRACTIONS = ["0", "0.1", "0.3", "1.0"]


@dataclass
class Sweep:
    fig: str
    title: str
    param: str  # alpha | beta | gamma
    params: str  # the other two tolerances
    values: list[str]
    quick_values: list[str]
    unit: str  # axis label of the swept tolerance


def tolerance(value: str) -> float:
    """The swept value in the unit of the claim: ms for alpha, a fraction otherwise."""
    return float(value[:-2]) if value.endswith("ms") else float(value)


def run(s: Sweep, doc: str) -> tuple[pd.DataFrame, pd.DataFrame, object]:
    """Runs the sweep and the ARQ baseline; returns (AutoRec aggregate, ARQ aggregate, args)."""
    args = common.autorec_args(doc)
    values = s.quick_values if args.quick else s.values
    out = common.RESULTS / s.fig
    arq = common.autorec_plan("arq", "12Mbps", [{"name": "arq"}], args)
    arq = common.run(arq, out / "arq" / "plan.toml", args)
    policies = [{"name": "autorec", "params": s.params}]
    sweep = {f"policy.autorec.{s.param}": values}
    plan = common.autorec_plan(s.fig, "12Mbps", policies, args, sweep)
    df = common.run(plan, out / "runs" / "plan.toml", args)
    df = common.add_goodput_reduction(df, arq, [])
    df["x"] = df[f"policy.autorec.{s.param}"].map(tolerance)
    agg = common.aggregate(df, ["x"], METRICS).sort_values("x")
    arq_agg = common.aggregate(arq.assign(goodput_reduction=0.0, x=0), ["x"], METRICS)
    return agg, arq_agg, args


def plot(s: Sweep, agg: pd.DataFrame, arq: pd.DataFrame, args) -> None:
    pct = 1.0 if s.param == "alpha" else 100.0
    x = agg["x"] * pct
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    a.errorbar(
        x,
        agg["recovery_latency_multi_ms"],
        yerr=agg["recovery_latency_multi_ms_ci"],
        fmt="o-",
        label="recovery latency (multi-rtx data)",
    )
    a.axhline(arq["recovery_latency_multi_ms"].iloc[0], ls=":", c="gray", label="ARQ latency")
    if s.param == "alpha":
        a.plot(x, x, "--", c="k", lw=0.8, label="latency = alpha")
        a.plot(x, x + 3, ":", c="k", lw=0.8, label="alpha + 3 ms (paper's bound)")
    a.set_xlabel(s.unit)
    a.set_ylabel("recovery latency (ms)")
    a.grid(alpha=0.3)
    a2 = a.twinx()
    a2.errorbar(
        x,
        agg["deterioration_rate"] * 100,
        yerr=agg["deterioration_rate_ci"] * 100,
        fmt="s--",
        c="tab:red",
        label="deterioration rate",
    )
    a2.set_ylabel("recovery deterioration rate (%)")
    lines = a.get_legend_handles_labels()
    lines2 = a2.get_legend_handles_labels()
    a.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8)
    a.set_title("(a) benefits")
    for m, label in [("redundancy_cost", "redundancy cost"), ("goodput_reduction", "goodput red.")]:
        b.errorbar(x, agg[m] * 100, yerr=agg[m + "_ci"] * 100, fmt="o-", label=label)
    if s.param != "alpha":
        b.plot(x, x, "--", c="k", lw=0.8, label=f"{s.param} (tolerance)")
    b.set_xlabel(s.unit)
    b.set_ylabel("%")
    b.grid(alpha=0.3)
    b.legend(fontsize=8)
    b.set_title("(b) overhead")
    fig.suptitle(s.title)
    common.save_figure(fig, common.figure_path(s.fig, args.quick), dpi=110)


def table(s: Sweep, agg: pd.DataFrame, arq: pd.DataFrame, extra: str, args) -> None:
    pct = 1.0 if s.param == "alpha" else 100.0
    unit = "ms" if s.param == "alpha" else "%"
    rows = []
    for _, r in pd.concat([arq.assign(x=float("nan")), agg]).iterrows():
        rows.append(
            [
                "ARQ" if pd.isna(r["x"]) else f"{r['x'] * pct:g}",
                common.pm(r["recovery_latency_multi_ms"], r["recovery_latency_multi_ms_ci"]),
                common.pm(r["recovery_latency_ms"], r["recovery_latency_ms_ci"], 1, 2),
                common.pm(r["deterioration_rate"], r["deterioration_rate_ci"], 100, 2),
                common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], 100),
                common.pm(r["goodput_reduction"], r["goodput_reduction_ci"], 100),
                common.pm(r["t_unit_ms"], r["t_unit_ms_ci"]),
            ]
        )
    body = common.markdown_table(
        [
            f"{s.param} ({unit})",
            "recovery latency ms (multi-rtx)",
            "latency ms (all lost)",
            "deterioration %",
            "redundancy cost %",
            "goodput reduction %",
            "T_unit ms",
        ],
        rows,
    )
    common.write_table(s.fig, s.title, extra + "\n" + body, args)


def max_point_row(r: pd.Series) -> str:
    """Our numbers at the paper's maximum-redundancy point next to the paper's."""
    return common.markdown_table(
        ["", "recovery latency ms", "deterioration %", "redundancy cost %", "goodput red. %"],
        [
            [
                "paper (alpha 0, beta = gamma = 100 %)",
                PAPER_MAX["latency_ms"],
                "~0",
                PAPER_MAX["cost"] * 100,
                PAPER_MAX["goodput"] * 100,
            ],
            [
                "ours",
                common.pm(r["recovery_latency_multi_ms"], r["recovery_latency_multi_ms_ci"]),
                common.pm(r["deterioration_rate"], r["deterioration_rate_ci"], 100, 2),
                common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], 100),
                common.pm(r["goodput_reduction"], r["goodput_reduction_ci"], 100),
            ],
        ],
    )


def tolerance_figure(s: Sweep, doc: str, metric: str, name: str) -> None:
    """Figs. 15-16: a beta or gamma sweep with its claims and its largest value, 100 %."""
    agg, arq, args = run(s, doc)
    plot(s, agg, arq, args)
    extra = tolerance_claim(agg, metric, name, s.param)
    extra += f"\nLargest benefit and overhead ({s.param} = 100 %):\n\n"
    extra += max_point_row(agg.iloc[-1])
    table(s, agg, arq, extra, args)


def tolerance_claim(agg: pd.DataFrame, metric: str, name: str, param: str) -> str:
    """The paper's two claims on a beta or gamma sweep as a table: the measured overhead within
    1 percentage point of the tolerance, and the latency below 20 ms from a tolerance of 30 %."""
    rows = []
    for _, r in agg.iterrows():
        over = (r[metric] - r["x"]) * 100
        rows.append(
            [
                f"{r['x'] * 100:g}",
                common.pm(r[metric], r[metric + "_ci"], 100),
                f"{over:+.1f}",
                "yes" if over <= 1.0 else "**no**",
                common.pm(r["recovery_latency_multi_ms"], r["recovery_latency_multi_ms_ci"]),
                ("yes" if r["recovery_latency_multi_ms"] < 20 else "**no**")
                if r["x"] >= 0.3
                else "",
            ]
        )
    return (
        f"Claims: {name} ≤ {param} + 1 pp; latency < 20 ms once {param} ≥ 30 %:\n\n"
        + common.markdown_table(
            [
                f"{param} %",
                f"{name} % (ours)",
                f"minus {param} pp",
                "within 1 pp (paper)",
                "latency ms",
                "< 20 ms (paper)",
            ],
            rows,
        )
    )
