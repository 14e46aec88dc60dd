"""Run recoup loss-recovery scenarios from Python.

A scenario or plan is a file path, TOML text, or a dict shaped like the TOML file (written out
as TOML). ``run`` runs one scenario and returns its rows; ``sweep`` spreads the single runs of a
plan over local threads or a Ray cluster and returns a pandas DataFrame; ``recoup.plot.compare``
charts one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Union

from recoup._core import plan_toml, run_one_toml, run_toml
from recoup._toml import dumps as to_toml

__all__ = [
    "run",
    "sweep",
    "load_plan",
    "summarize",
    "to_toml",
    "run_toml",
    "run_one_toml",
    "plan_toml",
]

Scenario = Union[str, "os.PathLike[str]", Mapping[str, Any]]

# The policy other policies' goodput is measured against, as in ``recoup run``.
BASELINE = "arq"
# Columns every summary averages per (scenario, policy).
SUMMARY_COLUMNS = (
    "recovery_latency_ms",
    "recovery_latency_multi_ms",
    "deterioration_rate",
    "redundancy_cost",
    "goodput_mbps",
    "goodput_reduction",
    "freezes_per_100s",
)


def load_plan(scenario: Scenario) -> tuple[str, str | None, str | None]:
    """Resolves a scenario to ``(toml_text, base_dir, name)``.

    A ``PathLike`` or a string naming an existing file is read (relative paths inside it resolve
    against its folder, and it is named by its stem); any other string is TOML text; a dict is
    written as TOML (relative paths in it resolve against the working directory). ``TypeError``
    for anything else, or a dict value TOML cannot hold.
    """
    if isinstance(scenario, Mapping):
        return to_toml(scenario), None, None
    if isinstance(scenario, os.PathLike) or (
        isinstance(scenario, str) and "\n" not in scenario and Path(scenario).is_file()
    ):
        path = Path(scenario)
        return path.read_text(encoding="utf-8"), str(path.resolve().parent), path.stem
    if isinstance(scenario, str):
        return scenario, None, None
    raise TypeError(f"scenario must be a path, TOML text or a dict, not {type(scenario).__name__}")


def _mean(values: Iterable[Any]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (scenario, policy): the number of runs and the mean of each summary column."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["scenario"], row["policy"]), []).append(row)
    return [
        {
            "scenario": scenario,
            "policy": policy,
            "runs": len(group),
            **{col: _mean(r.get(col) for r in group) for col in SUMMARY_COLUMNS},
        }
        for (scenario, policy), group in groups.items()
    ]


def run(
    scenario: Scenario, *, seeds: int | None = None, duration_s: float | None = None
) -> dict[str, Any]:
    """Runs every (sweep point, policy, seed) of a scenario on all cores.

    Returns ``{"runs": [row, ...], "summary": [row, ...]}``; a run row has the result columns
    of DESIGN.md plus ``scenario``. Raises ``ValueError`` for a bad scenario.
    """
    text, base_dir, name = load_plan(scenario)
    rows = run_toml(text, base_dir, seeds, duration_s, name)
    return {"runs": rows, "summary": summarize(rows)}


def _fill_baseline_columns(rows: list[dict[str, Any]]) -> None:
    # Mirrors recoup_sim::metrics::fill_baseline_columns, which a single run cannot apply: the
    # baseline's run of the same seed may be elsewhere.
    base = {(r["scenario"], r["seed"]): r for r in rows if r["policy"] == BASELINE}
    baselined = {r["scenario"] for r in rows if r["policy"] == BASELINE}
    for r in rows:
        if r["scenario"] not in baselined:
            continue
        b = base.get((r["scenario"], r["seed"]), {})
        g, bg = r["goodput_mbps"], b.get("goodput_mbps")
        ok = g is not None and bg is not None and bg > 0
        r["goodput_reduction"] = 1.0 - g / bg if ok else None
        q, bq = r["retran_ratio"], b.get("retran_ratio")
        r["retran_ratio_added"] = q - bq if q is not None and bq is not None else None


def _sort_key(row: dict[str, Any]) -> tuple[str, str, int]:
    return (row["scenario"], row["policy"], row["seed"])


def sweep(
    plan: Scenario,
    backend: str = "local",
    address: str | None = None,
    processes: int | None = None,
    *,
    seeds: int | None = None,
    duration_s: float | None = None,
):
    """Runs every single run of ``plan`` and returns them as a pandas DataFrame, sorted by
    scenario, policy and seed.

    ``backend="local"`` runs them on ``processes`` threads (the simulator releases the GIL);
    ``backend="ray"`` sends one Ray task per run to the cluster at ``address`` (a local one when
    None). Both give the same rows.
    """
    import pandas as pd

    text, base_dir, name = load_plan(plan)
    work = plan_toml(text, base_dir, seeds, duration_s, name)
    args = [(text, base_dir, i, policy, seed, duration_s, name) for i, _, policy, seed in work]
    if backend == "local":
        with ThreadPoolExecutor(max_workers=processes or os.cpu_count() or 1) as pool:
            rows = list(pool.map(lambda a: run_one_toml(*a), args))
    elif backend == "ray":
        rows = _sweep_ray(args, address)
    else:
        raise ValueError(f"backend must be 'local' or 'ray', not {backend!r}")
    _fill_baseline_columns(rows)
    rows.sort(key=_sort_key)
    return pd.DataFrame(rows)


def _sweep_ray(args: list[tuple[Any, ...]], address: str | None) -> list[dict[str, Any]]:
    import ray

    ray.init(address=address or None, ignore_reinit_error=True)
    task = ray.remote(_ray_run_one)
    return list(ray.get([task.remote(*a) for a in args]))


def _ray_run_one(*args: Any) -> dict[str, Any]:
    # A module-level function so Ray workers import it from the installed package.
    return run_one_toml(*args)
