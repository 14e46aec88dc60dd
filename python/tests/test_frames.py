"""Results as pandas DataFrames: dtypes, sweep axes as typed columns sorted numerically, the
summary's statistics, units, paths that do not exist, the version, and the plots."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pandas as pd
import pytest
import tomllib

import recoup
from recoup.plot import compare

# One second of a live stream per run: these tests check shapes and types, not results.
BASE = """
name = "tiny"
seed = 1
repetitions = 2
duration = "1s"

[path]
rtt = "60ms"
rate = "12Mbps"
loss = "bernoulli 5%"

[app]
kind = "live"
bitrate = "2Mbps"

[[policy]]
name = "arq"

[[policy]]
name = "fixed"
params = "2"
label = "fixed2"
"""

GRID = (
    BASE
    + """
[sweep]
"app.fps" = [30, 8, 15]
"path.loss" = ["bernoulli 10%", "bernoulli 2%"]
"""
)


@pytest.fixture(scope="module")
def grid() -> recoup.Results:
    return recoup.run(GRID)


def test_every_column_has_a_real_dtype(grid: recoup.Results) -> None:
    runs = grid.runs
    assert not [c for c in runs.columns if runs[c].dtype == object], runs.dtypes
    assert pd.api.types.is_string_dtype(runs["policy"])
    assert pd.api.types.is_string_dtype(runs["app_error"]) and runs["app_error"].isna().all()
    # A live stream has no flow completion time: an all-empty column is still a number column.
    assert runs["fct_ms"].isna().all() and runs["fct_ms"].dtype == "float64"
    assert runs["seed"].dtype == "int64" and runs["lost_ranges"].dtype == "int64"
    assert runs["recovery_latency_ms"].dtype == "float64"
    summary = grid.summary
    assert not [c for c in summary.columns if summary[c].dtype == object], summary.dtypes


def test_sweep_axes_are_typed_columns_sorted_numerically(grid: recoup.Results) -> None:
    runs = grid.runs
    assert grid.axes == ["app.fps", "path.loss"]
    assert runs["app.fps"].dtype == "int64"
    loss = runs["path.loss"].dtype
    assert isinstance(loss, pd.CategoricalDtype) and loss.ordered
    # 2 % before 10 %, though the plan lists 10 % first and "bernoulli 10%" < "bernoulli 2%".
    assert list(loss.categories) == ["bernoulli 2%", "bernoulli 10%"]
    points = list(dict.fromkeys(zip(runs["app.fps"], runs["path.loss"].astype(str))))
    assert points == [
        (8, "bernoulli 2%"), (8, "bernoulli 10%"), (15, "bernoulli 2%"),
        (15, "bernoulli 10%"), (30, "bernoulli 2%"), (30, "bernoulli 10%"),
    ]  # fmt: skip
    # Each row's axis values are those its scenario name carries.
    for name, fps, loss_value in zip(runs["scenario"], runs["app.fps"], runs["path.loss"]):
        assert f"app.fps={fps}" in name and f"path.loss={loss_value}" in name
    # The summary carries the same axis columns, one row per point, policy and metric.
    summary = grid.summary
    assert summary["app.fps"].dtype == "int64"
    per_point = summary.groupby(["app.fps", "path.loss", "policy"], observed=True).size()
    assert len(per_point) == 6 * 2 and per_point.nunique() == 1


def test_summary_is_the_clis_statistics(grid: recoup.Results) -> None:
    runs, summary = grid.runs, grid.summary
    assert list(summary.columns[:11]) == [
        "scenario", "policy", "metric", "n", "mean", "std", "p50", "p95", "p99",
        "ci95_low", "ci95_high",
    ]  # fmt: skip
    row = summary[(summary["metric"] == "lost_ranges") & (summary["policy"] == "arq")].iloc[0]
    values = runs[(runs["scenario"] == row["scenario"]) & (runs["policy"] == "arq")]
    assert row["n"] == len(values) == 2
    assert row["mean"] == pytest.approx(values["lost_ranges"].mean())
    assert row["std"] == pytest.approx(values["lost_ranges"].std())
    # The same function summarizes a runs DataFrame again.
    again = recoup.summarize(runs)
    cols = list(again.columns)
    pd.testing.assert_frame_equal(again, summary[cols].reset_index(drop=True), check_like=True)


def test_units_are_labelled(grid: recoup.Results) -> None:
    units = grid.runs.attrs["units"]
    assert units["deterioration_rate"] == "fraction"
    assert units["redundancy_cost"] == "fraction"
    assert units["recovery_latency_ms"] == "ms"
    assert units["goodput_mbps"] == "Mbit/s"
    assert units["freezes_per_100s"] == "per 100 s"
    assert recoup.UNITS["lost_ranges"] == "count"


def test_duration_axes_sort_by_time() -> None:
    plan = BASE + '\n[sweep]\n"path.rtt" = ["1s", "100ms", "250ms"]\n'
    res = recoup.run(plan, seeds=1, duration_s=0.5)
    assert list(res.runs["path.rtt"].cat.categories) == ["100ms", "250ms", "1s"]
    assert list(res.runs["path.rtt"].astype(str)[::2]) == ["100ms", "250ms", "1s"]


def test_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-file.toml"):
        recoup.run("no-such-file.toml")
    with pytest.raises(FileNotFoundError, match="missing"):
        recoup.run(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        recoup.sweep(str(tmp_path / "a=b.toml"))
    # TOML text is still TOML text, one line or many.
    # (one line: the scenario error, not FileNotFoundError, shows it was read as TOML).
    with pytest.raises(ValueError, match="rate"):
        recoup.run('duration = "0.2s"')
    assert len(recoup.run(BASE, seeds=1, duration_s=0.2).runs) == 2
    # A file whose name looks like TOML is still read as a file when it exists.
    odd = tmp_path / "x=1"
    odd.write_text(BASE, encoding="utf-8")
    assert set(recoup.run(odd, seeds=1, duration_s=0.2).runs["scenario"]) == {"tiny"}


def test_version_is_the_packages() -> None:
    pyproject = tomllib.loads(
        (Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    )
    assert recoup.__version__ == pyproject["project"]["version"]
    assert recoup.__version__ == importlib.metadata.version("recoup")


def test_type_stubs_ship() -> None:
    package = Path(recoup.__file__).parent
    assert (package / "py.typed").is_file()
    stub = (package / "_core.pyi").read_text(encoding="utf-8")
    for name in ("run_toml", "summarize_json", "sweep_axes_toml", "duration_seconds"):
        assert f"def {name}(" in stub, name
        assert hasattr(recoup._core, name), name


def test_compare_per_sweep_point(grid: recoup.Results, tmp_path: Path) -> None:
    for x in ("app.fps", "path.loss", None):
        out = tmp_path / f"{x}.png"
        compare(grid, out, x=x)
        assert out.read_bytes().startswith(b"\x89PNG")
    # The runs DataFrame alone is enough: it is summarized again.
    compare(grid.runs, tmp_path / "runs.png")
    with pytest.raises(ValueError, match="not a sweep axis"):
        compare(grid, tmp_path / "bad.png", x="path.rtt")


def test_compare_draws_whiskers_per_point(grid: recoup.Results, monkeypatch) -> None:
    import matplotlib.axes

    calls: list[tuple[list, list]] = []
    real = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, *args, **kwargs):
        calls.append((list(x), list(y), kwargs.get("yerr")))
        return real(self, x, y, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    compare(grid, "/dev/null", x="app.fps")
    # Per panel, a line per (policy, loss) that measured the metric somewhere, over the fps
    # values where it did, in numeric order.
    from recoup.plot import METRICS

    summary = grid.summary
    expected = 0
    for metric, *_ in METRICS:
        rows = summary[(summary["metric"] == metric) & summary["mean"].notna()]
        expected += len(rows.groupby(["policy", "path.loss"], observed=True))
    assert len(calls) == expected > 4
    assert all(x == sorted(x) and set(x) <= {8, 15, 30} for x, _, _ in calls)
    assert any(x == [8, 15, 30] for x, _, _ in calls)
    # Whiskers are the 95 % confidence interval (2 seeds: a real interval somewhere).
    assert any(max(err[1]) > 0 for _, _, err in calls)
