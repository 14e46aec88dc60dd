//! `recoup._core`: the simulator behind the `recoup` Python package. Scenarios arrive as TOML
//! text, results leave as the RunRow columns (DESIGN.md) plus `scenario`, one dict per run.

use std::path::Path;
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rayon::prelude::*;
use recoup_sim::metrics::{fill_baseline_columns, summarize, RunRow};
use recoup_sim::run::{jobs, run_one};
use recoup_sim::scenario::{load_str, sweep_points, Scenario};
use serde::{Deserialize, Serialize};

/// The policy other policies' goodput is measured against (as `recoup run` does).
const BASELINE: &str = "arq";

/// A row with its sweep point's name in front.
#[derive(Serialize)]
struct Named<'a, T> {
    scenario: &'a str,
    #[serde(flatten)]
    row: &'a T,
}

/// A run row as it comes back from Python, its sweep point's name in front.
#[derive(Deserialize)]
struct NamedOwned {
    scenario: String,
    #[serde(flatten)]
    row: RunRow,
}

/// Parses `text` and applies the overrides to every sweep point.
fn load(
    text: &str,
    base_dir: Option<&str>,
    seeds: Option<u32>,
    duration_s: Option<f64>,
    name: Option<&str>,
) -> PyResult<Vec<Scenario>> {
    let name = name.unwrap_or("scenario");
    let mut scenarios = load_str(text, name, base_dir.map(Path::new), name)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    if seeds == Some(0) {
        return Err(PyValueError::new_err("seeds must be at least 1"));
    }
    let duration = duration_s
        .map(|d| match Duration::try_from_secs_f64(d) {
            Ok(d) if !d.is_zero() => Ok(d),
            _ => Err(PyValueError::new_err(format!(
                "duration_s must be a positive number of seconds, got {d}"
            ))),
        })
        .transpose()?;
    for s in &mut scenarios {
        if let Some(n) = seeds {
            s.repetitions = n;
        }
        if let Some(d) = duration {
            s.duration = d;
        }
    }
    Ok(scenarios)
}

fn run_error(scenario: &Scenario, policy: &str, seed: u64, e: &dyn std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!(
        "scenario {}, policy {policy}, seed {seed}: {e}",
        scenario.name
    ))
}

/// Turns serialisable rows into Python objects through the standard `json` module.
fn to_python<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| PyRuntimeError::new_err(format!("encoding results: {e}")))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// Runs every (sweep point, policy, seed) of the scenario on all cores, without the GIL.
/// Rows come in sweep-point order, then policies as listed, then seeds ascending;
/// `goodput_reduction` and `retran_ratio_added` are filled against `arq` when the scenario runs it.
#[pyfunction]
#[pyo3(signature = (text, base_dir=None, seeds=None, duration_s=None, name=None))]
fn run_toml<'py>(
    py: Python<'py>,
    text: &str,
    base_dir: Option<&str>,
    seeds: Option<u32>,
    duration_s: Option<f64>,
    name: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let scenarios = load(text, base_dir, seeds, duration_s, name)?;
    let points: Vec<Vec<RunRow>> = py.allow_threads(|| {
        scenarios
            .iter()
            .map(|s| {
                let mut runs = jobs(s)
                    .par_iter()
                    .map(|&(p, seed)| {
                        let policy = &s.policies[p];
                        run_one(s, policy, seed).map_err(|e| run_error(s, &policy.label, seed, &e))
                    })
                    .collect::<PyResult<Vec<RunRow>>>()?;
                if s.policies.iter().any(|p| p.label == BASELINE) {
                    fill_baseline_columns(&mut runs, BASELINE);
                }
                Ok(runs)
            })
            .collect::<PyResult<_>>()
    })?;
    let named: Vec<Named<'_, RunRow>> = scenarios
        .iter()
        .zip(&points)
        .flat_map(|(s, runs)| {
            runs.iter().map(|row| Named {
                scenario: &s.name,
                row,
            })
        })
        .collect();
    to_python(py, &named)
}

/// The single runs of the scenario, for distributing them: `(point_index, scenario, policy,
/// seed)` in the order `run_toml` returns rows.
#[pyfunction]
#[pyo3(signature = (text, base_dir=None, seeds=None, duration_s=None, name=None))]
fn plan_toml(
    text: &str,
    base_dir: Option<&str>,
    seeds: Option<u32>,
    duration_s: Option<f64>,
    name: Option<&str>,
) -> PyResult<Vec<(usize, String, String, u64)>> {
    let scenarios = load(text, base_dir, seeds, duration_s, name)?;
    Ok(scenarios
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            jobs(s)
                .into_iter()
                .map(move |(p, seed)| (i, s.name.clone(), s.policies[p].label.clone(), seed))
        })
        .collect())
}

/// One run: policy `policy_label` of sweep point `point_index` with `seed`, without the GIL.
/// `goodput_reduction` and `retran_ratio_added` stay None: they need the baseline's run of the
/// same seed.
#[pyfunction]
#[pyo3(signature = (text, base_dir, point_index, policy_label, seed, duration_s=None, name=None))]
#[expect(
    clippy::too_many_arguments,
    reason = "mirrors the Python keyword arguments"
)]
fn run_one_toml<'py>(
    py: Python<'py>,
    text: &str,
    base_dir: Option<&str>,
    point_index: usize,
    policy_label: &str,
    seed: u64,
    duration_s: Option<f64>,
    name: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let scenarios = load(text, base_dir, None, duration_s, name)?;
    let Some(s) = scenarios.get(point_index) else {
        return Err(PyValueError::new_err(format!(
            "point_index {point_index} out of range: the scenario has {} sweep points",
            scenarios.len()
        )));
    };
    let Some(policy) = s.policies.iter().find(|p| p.label == policy_label) else {
        return Err(PyValueError::new_err(format!(
            "policy {policy_label:?} is not in scenario {}",
            s.name
        )));
    };
    let row = py
        .allow_threads(|| run_one(s, policy, seed))
        .map_err(|e| run_error(s, policy_label, seed, &e))?;
    to_python(
        py,
        &Named {
            scenario: &s.name,
            row: &row,
        },
    )
}

/// Each sweep point's name and axes, `(name, [(axis, value), ...])`, in the order `run_toml`
/// returns points; values keep their TOML type (numbers stay numbers).
#[pyfunction]
#[pyo3(signature = (text, base_dir=None, name=None))]
fn sweep_axes_toml<'py>(
    py: Python<'py>,
    text: &str,
    base_dir: Option<&str>,
    name: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let scenarios = load(text, base_dir, None, None, name)?;
    let points = sweep_points(text, name.unwrap_or("scenario"))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let named: Vec<(&str, Vec<(String, toml::Value)>)> = scenarios
        .iter()
        .map(|s| s.name.as_str())
        .zip(points)
        .collect();
    to_python(py, &named)
}

/// The statistics of `recoup run`'s summary.csv over run rows given as a JSON list (each with
/// its `scenario`): per sweep point (in order of first appearance), policy and metric, the
/// number of values, mean, std, p50/p95/p99 and the 95 % confidence interval.
#[pyfunction]
fn summarize_json<'py>(py: Python<'py>, rows_json: &str) -> PyResult<Bound<'py, PyAny>> {
    let rows: Vec<NamedOwned> = serde_json::from_str(rows_json)
        .map_err(|e| PyValueError::new_err(format!("run rows: {e}")))?;
    let mut points: Vec<(String, Vec<RunRow>)> = Vec::new();
    for r in rows {
        match points.iter_mut().find(|(name, _)| *name == r.scenario) {
            Some((_, runs)) => runs.push(r.row),
            None => points.push((r.scenario, vec![r.row])),
        }
    }
    let summary: Vec<Vec<_>> = points.iter().map(|(_, runs)| summarize(runs)).collect();
    let named: Vec<Named<'_, _>> = points
        .iter()
        .zip(&summary)
        .flat_map(|((name, _), rows)| {
            rows.iter().map(move |row| Named {
                scenario: name,
                row,
            })
        })
        .collect();
    to_python(py, &named)
}

/// Seconds in a duration such as `60ms` or `1.5s`, as scenario files write them.
#[pyfunction]
fn duration_seconds(text: &str) -> PyResult<f64> {
    recoup_elements::parse_duration(text)
        .map(|d| d.as_secs_f64())
        .map_err(PyValueError::new_err)
}

/// The package version (the workspace's).
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sweep_axes_toml, m)?)?;
    m.add_function(wrap_pyfunction!(summarize_json, m)?)?;
    m.add_function(wrap_pyfunction!(duration_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(run_toml, m)?)?;
    m.add_function(wrap_pyfunction!(plan_toml, m)?)?;
    m.add_function(wrap_pyfunction!(run_one_toml, m)?)?;
    Ok(())
}
