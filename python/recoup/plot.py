"""Charts of a sweep: one bar chart per headline metric, one bar per policy."""

from __future__ import annotations

import os
from typing import Any

METRICS = (
    ("recovery_latency_multi_ms", "recovery latency, multi (ms)"),
    ("deterioration_rate", "deterioration rate"),
    ("redundancy_cost", "redundancy cost"),
    ("freezes_per_100s", "freezes per 100 s"),
)


def compare(df: Any, path: str | os.PathLike[str]) -> None:
    """Writes a PNG to ``path``: the mean of each metric per policy, over every run in ``df``
    (a DataFrame from ``recoup.sweep``). Metrics a policy never measured show as no bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(dict.fromkeys(df["policy"]))
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.5))
    for ax, (column, title) in zip(axes, METRICS):
        means = df.groupby("policy", sort=False)[column].mean() if column in df else None
        heights = [
            0.0 if means is None or means.isna().get(p, True) else float(means[p]) for p in policies
        ]
        ax.bar(policies, heights, color="tab:blue")
        ax.set_title(title)
        ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
