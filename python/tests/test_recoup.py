"""The recoup package end to end: the Rust simulator through Python, both sweep backends, plots."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import tomllib

import recoup
from recoup.plot import compare

# A small live-video scenario (the built-in default's path, 5 s instead of 60 s): 4 runs.
SMALL = """
name = "small"
seed = 1
repetitions = 2
duration = "5s"

[path]
rtt = "60ms"
rate = "12Mbps"
queue = "droptail packets=100"
loss = "bernoulli 5%"

[app]
kind = "live"
bitrate = "4Mbps"
fps = 30

[transport]
cc = "bbr"

[[policy]]
name = "arq"

[[policy]]
name = "autorec"
params = "alpha=30ms,beta=0.3,gamma=0.2"
"""

# DESIGN.md's result columns, which every tool reads by these names.
DESIGN_COLUMNS = [
    "policy", "seed", "lost_ranges", "t_unit_ms", "recovery_latency_ms",
    "recovery_latency_p95_ms", "recovery_latency_max_ms", "recovery_latency_multi_ms",
    "deterioration_rate", "redundancy_cost", "copies_sent", "goodput_mbps", "goodput_reduction",
    "loss_rate", "n_max", "k_max", "fct_ms", "freezes_per_100s", "frozen_ms_per_100s",
    "deadline_miss_rate", "bandwidth_cost",
]  # fmt: skip


@pytest.fixture(scope="module")
def small_result() -> recoup.Results:
    return recoup.run(SMALL)


def records(df: pd.DataFrame) -> list[dict]:
    """Rows as dicts with None for missing values, as the simulator returns them."""

    def plain(v: object) -> object:
        missing = v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
        return None if missing else v

    return [{k: plain(v) for k, v in row.items()} for row in df.astype(object).to_dict("records")]


def test_run_rows_have_design_columns_and_deliver(small_result: recoup.Results) -> None:
    runs = records(small_result.runs)
    assert [(r["policy"], r["seed"]) for r in runs] == [
        ("arq", 1), ("arq", 2), ("autorec", 1), ("autorec", 2),
    ]  # fmt: skip
    for row in runs:
        assert row["scenario"] == "small"
        missing = [c for c in DESIGN_COLUMNS if c not in row]
        assert not missing, f"missing columns {missing}"
        assert row["app_error"] is None, row["app_error"]
        assert row["goodput_mbps"] > 1.0, row  # the stream got through
        # 5 % Bernoulli loss over 5 s of video loses something.
        assert row["lost_ranges"] > 0
    arq = [r for r in runs if r["policy"] == "arq"]
    assert all(r["goodput_reduction"] == 0.0 for r in arq)
    autorec = [r for r in runs if r["policy"] == "autorec"]
    assert all(r["copies_sent"] > 0 for r in autorec)
    summary = small_result.summary
    latency = summary[summary["metric"] == "recovery_latency_ms"]
    assert list(zip(latency["policy"], latency["n"])) == [("arq", 2), ("autorec", 2)]
    assert (latency["ci95_low"] <= latency["mean"]).all()
    assert (latency["mean"] <= latency["ci95_high"]).all()


def test_same_seed_same_rows(small_result: recoup.Results) -> None:
    again = recoup.run(SMALL)
    pd.testing.assert_frame_equal(again.runs, small_result.runs)
    # Different seeds differ: the rows are not constant.
    first, second = records(small_result.runs)[:2]
    assert first["seed"] != second["seed"] and first != {**second, "seed": first["seed"]}


def test_single_run_matches_full_run(small_result: recoup.Results) -> None:
    one = recoup.run_one_toml(SMALL, None, 0, "autorec", 2)
    expected = records(small_result.runs)[3]
    # A single run cannot know the baseline's goodput and retran_ratio; everything else is the
    # same.
    assert one == {**expected, "goodput_reduction": None, "retran_ratio_added": None}


def test_run_reads_a_file_and_overrides(tmp_path) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(SMALL.replace('name = "small"\n', ""), encoding="utf-8")
    rows = recoup.run(path, seeds=1, duration_s=1.0).runs
    assert list(zip(rows["scenario"], rows["policy"], rows["seed"])) == [
        ("plan", "arq", 1), ("plan", "autorec", 1),
    ]  # fmt: skip
    pd.testing.assert_frame_equal(recoup.run(str(path), seeds=1, duration_s=1.0).runs, rows)


def test_bad_toml_names_the_key() -> None:
    with pytest.raises(ValueError, match="durration"):
        recoup.run(SMALL.replace('duration = "5s"', 'durration = "5s"'))
    with pytest.raises(ValueError, match="policy"):
        recoup.run(SMALL.replace('name = "autorec"', 'name = "no-such-policy"'))
    with pytest.raises(ValueError):
        recoup.run("this is = = not toml")
    with pytest.raises(ValueError, match="seeds"):
        recoup.run(SMALL, seeds=0)
    with pytest.raises(ValueError, match="duration_s"):
        recoup.run(SMALL, duration_s=-1.0)
    with pytest.raises(ValueError, match="point_index"):
        recoup.run_one_toml(SMALL, None, 5, "arq", 1)


# Listed out of order: text order (100ms < 20ms < 60ms) differs from numeric order.
SWEEP = (
    SMALL.replace('name = "small"', 'name = "grid"')
    + """
[sweep]
"path.rtt" = ["60ms", "100ms", "20ms"]
"""
)


@pytest.fixture(scope="module")
def local_sweep() -> recoup.Results:
    return recoup.sweep(SWEEP, backend="local", processes=2, duration_s=2.0)


def test_local_sweep_matches_run(local_sweep: recoup.Results) -> None:
    runs = local_sweep.runs
    assert len(runs) == 3 * 2 * 2
    assert local_sweep.axes == ["path.rtt"]
    # Sorted by the axis numerically, then policy and seed.
    assert list(runs["path.rtt"].astype(str)[::4]) == ["20ms", "60ms", "100ms"]
    keys = list(zip(runs["path.rtt"].cat.codes, runs["policy"], runs["seed"]))
    assert keys == sorted(keys)
    assert runs["app_error"].isna().all()
    direct = recoup.run(SWEEP, duration_s=2.0)
    pd.testing.assert_frame_equal(direct.runs, runs)
    pd.testing.assert_frame_equal(direct.summary, local_sweep.summary)


def test_ray_sweep_equals_local(local_sweep: recoup.Results, monkeypatch) -> None:
    import ray  # installed by scripts/test.sh: a missing ray fails here rather than skipping

    # The machine reaches only package registries: no usage report home.
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    try:
        remote = recoup.sweep(SWEEP, backend="ray", duration_s=2.0)
    finally:
        ray.shutdown()
    pd.testing.assert_frame_equal(remote.runs, local_sweep.runs)
    pd.testing.assert_frame_equal(remote.summary, local_sweep.summary)


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="backend"):
        recoup.sweep(SMALL, backend="spark")


def test_compare_writes_png(local_sweep: recoup.Results, tmp_path) -> None:
    out = tmp_path / "compare.png"
    compare(local_sweep, out)
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5_000


def test_run_accepts_a_dict(small_result: recoup.Results) -> None:
    from recoup._toml import dumps

    assert tomllib.loads(dumps(tomllib.loads(SMALL))) == tomllib.loads(SMALL)
    pd.testing.assert_frame_equal(recoup.run(tomllib.loads(SMALL)).runs, small_result.runs)


def test_sweep_accepts_a_dict(local_sweep: recoup.Results) -> None:
    plan = tomllib.loads(SWEEP)
    assert set(plan["sweep"]) == {"path.rtt"}
    again = recoup.sweep(plan, backend="local", processes=2, duration_s=2.0)
    pd.testing.assert_frame_equal(again.runs, local_sweep.runs)


def test_bad_dicts_are_errors() -> None:
    with pytest.raises(ValueError, match="durration"):
        recoup.run({**tomllib.loads(SMALL), "durration": "5s"})
    with pytest.raises(TypeError, match="no null"):
        recoup.run({**tomllib.loads(SMALL), "seed": None})
    with pytest.raises(TypeError, match="dict"):
        recoup.run(42)  # type: ignore[arg-type]


def test_fleet_ray_jobs_equal_single_runs(small_result: recoup.Results, monkeypatch) -> None:
    # `recoup population --ray` hands its runs to `python -m recoup.fleet`: each job one stream's
    # scenario text, a policy and a seed; the rows come back in job order.
    import ray  # installed by scripts/test.sh: a missing ray fails here rather than skipping

    from recoup.fleet import run_jobs

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    runs = records(small_result.runs)
    jobs = [
        {"toml": SMALL, "name": "small", "policy": r["policy"], "seed": r["seed"]} for r in runs
    ]
    try:
        rows = run_jobs(jobs, None)
    finally:
        ray.shutdown()
    # Single runs leave the columns measured against arq empty.
    against_arq = ("goodput_reduction", "retran_ratio_added")
    assert len(rows) == len(runs)
    for got, want in zip(rows, runs):
        assert {k: v for k, v in got.items() if k not in against_arq} == {
            k: v for k, v in want.items() if k not in against_arq
        }
