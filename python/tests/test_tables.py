"""Result tables as files: CSV, JSON and Parquet from Python (``Results.write``) and from the
CLI (``recoup run --format``), read back with pandas."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import recoup

ROOT = Path(__file__).resolve().parents[2]

PLAN = """
name = "tables"
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
params = "1"

[sweep]
"path.rtt" = ["100ms", "20ms"]
"""


def recoup_bin() -> str:
    """The CLI that `cargo test` or `cargo build` made (RECOUP_BIN overrides)."""
    if os.environ.get("RECOUP_BIN"):
        return os.environ["RECOUP_BIN"]
    targets = [Path(os.environ["CARGO_TARGET_DIR"])] if "CARGO_TARGET_DIR" in os.environ else []
    targets.append(ROOT / "target")
    for target in targets:
        for profile in ("debug", "release"):
            if (target / profile / "recoup").is_file():
                return str(target / profile / "recoup")
    found = shutil.which("recoup")
    assert found, "no recoup binary: cargo build -p recoup-cli, or set RECOUP_BIN"
    return found


@pytest.fixture(scope="module")
def results() -> recoup.Results:
    return recoup.run(PLAN)


def test_parquet_round_trip_keeps_values_and_dtypes(results: recoup.Results, tmp_path) -> None:
    written = results.write(tmp_path, "parquet")
    assert [p.name for p in written] == ["runs.parquet", "summary.parquet"]
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    pd.testing.assert_frame_equal(runs, results.runs)
    assert isinstance(runs["path.rtt"].dtype, pd.CategoricalDtype)
    summary = pd.read_parquet(tmp_path / "summary.parquet")
    pd.testing.assert_frame_equal(summary, results.summary)


def test_csv_and_json_are_written_too(results: recoup.Results, tmp_path) -> None:
    results.write(tmp_path, "csv")
    results.write(tmp_path, "json")
    csv = pd.read_csv(tmp_path / "runs.csv")
    js = pd.read_json(tmp_path / "runs.json")
    assert list(csv["seed"]) == list(js["seed"]) == list(results.runs["seed"])
    with pytest.raises(ValueError, match="xml"):
        results.write(tmp_path, "xml")


def test_cli_writes_parquet_that_pandas_reads(results: recoup.Results, tmp_path) -> None:
    plan = tmp_path / "tables.toml"
    plan.write_text(PLAN, encoding="utf-8")
    out = tmp_path / "out"
    done = subprocess.run(
        [recoup_bin(), "run", str(plan), "--out", str(out), "--format", "csv,parquet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "runs.csv", "runs.parquet", "scenario.toml", "summary.csv", "summary.parquet",
    ]  # fmt: skip
    runs = pd.read_parquet(out / "runs.parquet")
    csv = pd.read_csv(out / "runs.csv")
    assert list(runs.columns) == list(csv.columns)
    assert len(runs) == len(csv) == 2 * 2 * 2
    # The same runs as the Python API's, and typed: all-empty columns are numbers.
    expected = results.runs.sort_values(["scenario", "policy", "seed"]).reset_index(drop=True)
    got = runs.sort_values(["scenario", "policy", "seed"]).reset_index(drop=True)
    for column in ("seed", "lost_ranges", "recovery_latency_ms", "redundancy_cost"):
        pd.testing.assert_series_equal(got[column], expected[column], check_names=False)
    assert runs["fct_ms"].dtype == "float64" and runs["fct_ms"].isna().all()


def test_cli_names_an_unknown_format(tmp_path) -> None:
    plan = tmp_path / "tables.toml"
    plan.write_text(PLAN, encoding="utf-8")
    done = subprocess.run(
        [recoup_bin(), "run", str(plan), "--out", str(tmp_path), "--format", "xml"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "xml" in done.stderr and "parquet" in done.stderr, done.stderr


def test_population_writes_parquet_too(tmp_path) -> None:
    out = tmp_path / "fleet"
    done = subprocess.run(
        [recoup_bin(), "population", str(ROOT / "scenarios/fleet/deployment.toml")]
        + ["--streams", "2", "--out", str(out), "--format", "parquet", "--jobs", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["cdf.parquet", "fleet.parquet", "runs.parquet", "streams.parquet"]
    runs = pd.read_parquet(out / "runs.parquet")
    streams = pd.read_parquet(out / "streams.parquet")
    assert len(streams) == 2 and len(runs) == 2 * runs["policy"].nunique()
    assert runs["lost_ranges"].dtype == "int64"
