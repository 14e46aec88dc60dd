"""Run recoup loss-recovery scenarios from Python.

A scenario or plan is a file path, TOML text, or a dict shaped like the TOML file (written out
as TOML). ``run`` runs every single run of a scenario on all cores; ``sweep`` spreads them over
local threads or a Ray cluster. Both return :class:`Results`: pandas DataFrames of the runs and
of their summary, the columns of ``recoup run``'s ``runs.csv`` and ``summary.csv`` plus one
typed column per sweep axis. ``recoup.plot.compare`` charts them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Union

from recoup._core import (
    duration_seconds,
    plan_toml,
    run_one_toml,
    run_toml,
    summarize_json,
    sweep_axes_toml,
    version,
)
from recoup._toml import dumps as to_toml

if TYPE_CHECKING:
    import pandas as pd

__version__: str = version()

__all__ = [
    "Results",
    "UNITS",
    "frame",
    "__version__",
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

# Text columns of a run row; every other column is a number (DESIGN.md's result columns).
TEXT_COLUMNS = ("scenario", "policy", "app_error")

# Units of the result columns by suffix, as the CLI's files hold them: rates and costs are
# fractions in runs.csv and in these DataFrames; the CLI's tables and plots print them as
# percent (x 100), and so does ``recoup.plot``.
_UNIT_SUFFIXES = (
    ("_ms", "ms"),
    ("_mbps", "Mbit/s"),
    ("_per_100s", "per 100 s"),
    ("_rate", "fraction"),
    ("_cost", "fraction"),
    ("_reduction", "fraction"),
    ("_fraction", "fraction"),
    ("_ratio", "fraction"),
    ("_ratio_added", "fraction"),
)


def unit_of(column: str) -> str:
    """The unit of a result column: ``ms``, ``Mbit/s``, ``per 100 s``, ``fraction`` (the CLI
    prints these as percent) or ``count``."""
    for suffix, unit in _UNIT_SUFFIXES:
        if column.endswith(suffix):
            return unit
    return "count"


class UnitTable(dict):
    """Column name -> unit, for any result column (see :func:`unit_of`)."""

    def __missing__(self, column: str) -> str:
        return unit_of(column)


UNITS = UnitTable()


class Results(NamedTuple):
    """What ``run`` and ``sweep`` return.

    ``runs``: one row per (sweep point, policy, seed), ``runs.csv``'s columns (``scenario``
    first) followed by one column per sweep axis, sorted by the axes (numerically where their
    values are numbers or durations), policy and seed. ``summary``: per sweep point, policy and
    metric, ``summary.csv``'s statistics (n, mean, std, p50, p95, p99, ci95_low, ci95_high),
    with the same axis columns. ``axes``: the sweep's axes, in the plan's order.
    """

    runs: pd.DataFrame
    summary: pd.DataFrame
    axes: list[str]

    def write(self, directory: str | os.PathLike[str], fmt: str = "csv") -> list[Path]:
        """Writes ``runs.<fmt>`` and ``summary.<fmt>`` into ``directory`` (created if
        missing): ``csv``, ``json`` or ``parquet`` (needs pyarrow); returns the paths."""
        from recoup.tables import FORMATS, write

        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; the formats are {', '.join(FORMATS)}")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        return [write(self.runs, out / f"runs.{fmt}"), write(self.summary, out / f"summary.{fmt}")]


def _looks_like_path(text: str) -> bool:
    # TOML text holding a scenario has a `key = value` line; a one-line string without `=`, or
    # one ending in `.toml`, cannot be one, so it names a file.
    return "\n" not in text and ("=" not in text or text.rstrip().endswith(".toml"))


def _is_file(text: str) -> bool:
    # Multi-line TOML text is never a file name (and may be too long for one).
    try:
        return "\n" not in text and Path(text).is_file()
    except OSError:
        return False


def load_plan(scenario: Scenario) -> tuple[str, str | None, str | None]:
    """Resolves a scenario to ``(toml_text, base_dir, name)``.

    A ``PathLike``, a string naming an existing file, or a one-line string without ``=`` (or
    ending in ``.toml``) is a path: the file is read (relative paths inside it resolve against
    its folder, and it is named by its stem), and ``FileNotFoundError`` names a path that does
    not exist. Any other string is TOML text; a dict is written as TOML (relative paths in it
    resolve against the working directory). ``TypeError`` for anything else, or a dict value
    TOML cannot hold.
    """
    if isinstance(scenario, Mapping):
        return to_toml(scenario), None, None
    if isinstance(scenario, str) and not _looks_like_path(scenario) and not _is_file(scenario):
        return scenario, None, None
    if not isinstance(scenario, (str, os.PathLike)):
        raise TypeError(
            f"scenario must be a path, TOML text or a dict, not {type(scenario).__name__}"
        )
    path = Path(scenario)
    if not path.is_file():
        raise FileNotFoundError(2, "no such scenario file", str(path))
    return path.read_text(encoding="utf-8"), str(path.resolve().parent), path.stem


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Result rows as a DataFrame with a dtype per column even when every value is missing:
    text columns (``scenario``, ``policy``, ``app_error`` and any holding strings) ``string``,
    integers ``int64`` (``Int64`` when some are missing), the rest ``float64``."""
    import pandas as pd

    df = pd.DataFrame(rows)
    for column in df.columns:
        values = [v for v in df[column] if v is not None]
        if column in TEXT_COLUMNS or any(isinstance(v, str) for v in values):
            df[column] = df[column].astype("string")
        elif values and all(isinstance(v, bool) for v in values):
            df[column] = df[column].astype("boolean" if len(values) < len(df) else "bool")
        elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            df[column] = df[column].astype("int64" if len(values) == len(df) else "Int64")
        else:
            df[column] = df[column].astype("float64")
    return df


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _numeric_key(values: list[str]) -> list[float] | None:
    """Numbers to order string axis values by: durations in seconds, else the one number that
    varies between values that are otherwise the same text (``bernoulli 5%``); None when
    neither applies."""
    try:
        return [duration_seconds(v) for v in values]
    except ValueError:
        pass
    parts = [(_NUMBER.sub("#", v), [float(n) for n in _NUMBER.findall(v)]) for v in values]
    template, first = parts[0]
    if any(t != template or len(n) != len(first) for t, n in parts):
        return None
    varying = [i for i in range(len(first)) if any(n[i] != first[i] for _, n in parts)]
    return [n[varying[0]] for _, n in parts] if len(varying) == 1 else None


def _axis_columns(
    text: str, base_dir: str | None, name: str | None
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The sweep's axes and, per sweep point name, the value of each axis."""
    points = sweep_axes_toml(text, base_dir, name)
    axes = [axis for axis, _ in points[0][1]] if points else []
    return axes, {point: dict(values) for point, values in points}


def _add_axes(df: pd.DataFrame, axes: list[str], by_point: dict[str, dict[str, Any]]) -> None:
    """Appends one column per axis: numbers as numbers, strings as an ordered categorical
    whose order is numeric when the values carry a number (durations, `bernoulli 5%`), else
    the plan's order."""
    import pandas as pd

    for axis in axes:
        plan_order = list(dict.fromkeys(p[axis] for p in by_point.values()))
        values = [by_point[s][axis] for s in df["scenario"]] if len(df) else []
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in plan_order):
            floats = any(isinstance(v, float) for v in plan_order)
            df[axis] = pd.Series(values, index=df.index, dtype="float64" if floats else "int64")
            continue
        texts = [v if isinstance(v, str) else json.dumps(v) for v in plan_order]
        key = _numeric_key(texts)
        order = [t for _, t in sorted(zip(key, texts))] if key is not None else texts
        mapped = [v if isinstance(v, str) else json.dumps(v) for v in values]
        df[axis] = pd.Categorical(mapped, categories=order, ordered=True)


def _sorted(df: pd.DataFrame, axes: list[str], then: list[str]) -> pd.DataFrame:
    if len(df) == 0:
        return df
    return df.sort_values(axes + then, kind="stable").reset_index(drop=True)


def _results(
    rows: list[dict[str, Any]], text: str, base_dir: str | None, name: str | None
) -> Results:
    axes, by_point = _axis_columns(text, base_dir, name)
    runs = frame(rows)
    summary = summarize(rows)
    for table in (runs, summary):
        _add_axes(table, axes, by_point)
        table.attrs["units"] = {c: UNITS[c] for c in table.columns if c not in TEXT_COLUMNS}
        table.attrs["axes"] = axes
    return Results(
        _sorted(runs, axes, ["policy", "seed"]),
        _sorted(summary, axes, []),
        axes,
    )


def summarize(rows: list[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """``summary.csv`` of run rows (dicts with ``scenario``, or a runs DataFrame): per sweep
    point, policy and metric, n, mean, std, p50/p95/p99 and the 95 % confidence interval,
    computed by the same code as ``recoup run``'s."""
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        text = rows.to_json(orient="records")
    else:
        text = json.dumps(rows)
    summary = pd.DataFrame(
        summarize_json(text),
        columns=["scenario", "policy", "metric", "n", "mean", "std"]
        + ["p50", "p95", "p99", "ci95_low", "ci95_high"],
    )
    types = {"scenario": "string", "policy": "string", "metric": "string", "n": "int64"}
    return summary.astype({c: types.get(c, "float64") for c in summary.columns})


def run(
    scenario: Scenario, *, seeds: int | None = None, duration_s: float | None = None
) -> Results:
    """Runs every (sweep point, policy, seed) of a scenario on all cores.

    Returns :class:`Results`. ``FileNotFoundError`` for a scenario path that does not exist,
    ``ValueError`` for a bad scenario.
    """
    text, base_dir, name = load_plan(scenario)
    rows = run_toml(text, base_dir, seeds, duration_s, name)
    return _results(rows, text, base_dir, name)


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


def sweep(
    plan: Scenario,
    backend: str = "local",
    address: str | None = None,
    processes: int | None = None,
    *,
    seeds: int | None = None,
    duration_s: float | None = None,
) -> Results:
    """Runs every single run of ``plan`` and returns :class:`Results`, the same as ``run``.

    ``backend="local"`` runs them on ``processes`` threads (the simulator releases the GIL);
    ``backend="ray"`` sends one Ray task per run to the cluster at ``address`` (a local one when
    None). Both give the same rows.
    """
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
    return _results(rows, text, base_dir, name)


def _sweep_ray(args: list[tuple[Any, ...]], address: str | None) -> list[dict[str, Any]]:
    import ray

    ray.init(address=address or None, ignore_reinit_error=True)
    task = ray.remote(_ray_run_one)
    return list(ray.get([task.remote(*a) for a in args]))


def _ray_run_one(*args: Any) -> dict[str, Any]:
    # A module-level function so Ray workers import it from the installed package.
    return run_one_toml(*args)
