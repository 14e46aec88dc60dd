"""Charts of results, as ``recoup plot`` draws them: one panel per headline metric, the mean
over seeds with the 95 % confidence interval as whiskers, fractions shown as percent."""

from __future__ import annotations

import os
from typing import Any

import recoup

# The CLI's headline panels (crates/recoup-cli/src/plot.rs): metric, title, y label, scale.
METRICS = (
    (
        "recovery_latency_multi_ms",
        "Recovery latency, first retransmission lost",
        "ms (mean over seeds)",
        1.0,
    ),
    ("deterioration_rate", "Recovery deterioration rate", "% of lost ranges", 100.0),
    ("redundancy_cost", "Redundancy cost", "% copies / new packets", 100.0),
    ("freezes_per_100s", "Freezes", "freezes per 100 s", 1.0),
)


def _summary(results: Any) -> tuple[Any, list[str]]:
    """The summary DataFrame and sweep axes of a :class:`recoup.Results`, or of its runs
    DataFrame (summarized again; its axes are in ``attrs["axes"]``)."""
    if isinstance(results, recoup.Results):
        return results.summary, results.axes
    summary = recoup.summarize(results)
    axes = [a for a in results.attrs.get("axes", []) if a in results.columns]
    if axes:
        first = results.drop_duplicates("scenario").set_index("scenario")
        for axis in axes:
            summary[axis] = summary["scenario"].map(first[axis]).astype(results[axis].dtype)
    return summary, axes


def compare(results: Any, path: str | os.PathLike[str], x: str | None = None) -> None:
    """Writes a PNG to ``path``: per headline metric, the mean of each policy with 95 %
    confidence whiskers, per sweep point.

    ``results`` is what ``recoup.run``/``recoup.sweep`` return (or its ``runs`` DataFrame).
    One sweep point gives one bar per policy; a sweep gives a line per policy against the axis
    ``x`` (default: the first), the other axes labelling the lines. Metrics a policy never
    measured show as no bar or point.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary, axes = _summary(results)
    if x is not None and x not in axes:
        raise ValueError(f"x={x!r} is not a sweep axis; the axes are {axes}")
    x = x or (axes[0] if axes else None)
    fig, panels = plt.subplots(1, len(METRICS), figsize=(4.5 * len(METRICS), 4.2))
    for ax, (metric, title, ylabel, scale) in zip(panels, METRICS):
        rows = summary[summary["metric"] == metric]
        if x is None:
            _bars(ax, rows, scale)
        else:
            _lines(ax, rows, x, [a for a in axes if a != x], scale)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
    handles, labels = panels[0].get_legend_handles_labels()
    if handles:
        # One legend for the figure, below the panels, so it never covers data.
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8)
        fig.tight_layout(rect=(0, 0.1, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)


def _whiskers(rows: Any, scale: float) -> tuple[list[float], list[list[float]]]:
    means = (rows["mean"] * scale).tolist()
    low = ((rows["mean"] - rows["ci95_low"]) * scale).fillna(0.0).tolist()
    high = ((rows["ci95_high"] - rows["mean"]) * scale).fillna(0.0).tolist()
    return means, [low, high]


def _bars(ax: Any, rows: Any, scale: float) -> None:
    rows = rows.dropna(subset=["mean"])
    means, err = _whiskers(rows, scale)
    ax.bar(rows["policy"].tolist(), means, yerr=err, capsize=4, color="tab:blue")
    ax.tick_params(axis="x", labelrotation=30)


def _lines(ax: Any, rows: Any, x: str, others: list[str], scale: float) -> None:
    import pandas as pd

    categorical = isinstance(rows[x].dtype, pd.CategoricalDtype)
    keys = ["policy", *others]
    for key, group in rows.groupby(keys, sort=False, observed=True):
        group = group.dropna(subset=["mean"]).sort_values(x)
        if group.empty:
            continue
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join([str(key[0])] + [f"{a}={v}" for a, v in zip(others, key[1:])])
        xs = group[x].cat.codes.tolist() if categorical else group[x].tolist()
        means, err = _whiskers(group, scale)
        ax.errorbar(xs, means, yerr=err, capsize=3, marker="o", label=label)
    if categorical:
        categories = list(rows[x].cat.categories)
        ax.set_xticks(range(len(categories)), categories, rotation=30)
    ax.set_xlabel(x)
