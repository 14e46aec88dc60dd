//! What `run`, `sweep` and `compare` share: expanding seeds, running every (sweep point, policy, seed) on
//! all cores, and writing the per-run and summary tables as CSV and JSON.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use recoup_sim::metrics::{fill_baseline_columns, summarize, write_csv, RunRow, SummaryRow};
use recoup_sim::run::{jobs, run_one_with_outputs, RunOutputs};
use recoup_sim::scenario::Scenario;
use serde::Serialize;

use super::tables::{write_groups, Format};

/// Why a simulation or analysis command failed (the CLI's one error type; the commands on real
/// sockets return `recoup_net::Error`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A scenario or population file, or a qlog trace, is wrong.
    #[error(transparent)]
    Sim(#[from] recoup_sim::Error),
    #[error("{0}")]
    Usage(String),
    #[error("scenario {scenario}, policy {policy}, seed {seed}: {source}")]
    Run {
        scenario: String,
        policy: String,
        seed: u64,
        source: Box<recoup_sim::Error>,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {detail}")]
    Write { path: PathBuf, detail: String },
    #[error("train-dqn: {0}")]
    Train(#[from] recoup_dqn::Error),
}

/// Overrides from the command line, applied to every sweep point.
#[derive(Clone, Copy, Debug, Default)]
pub struct Overrides {
    pub seeds: Option<u32>,
    pub duration: Option<Duration>,
}

impl Overrides {
    /// Loads the scenario file at `path` (one scenario per sweep point) with the overrides
    /// applied.
    pub fn load(&self, path: &Path) -> Result<Vec<Scenario>, Error> {
        let mut scenarios = recoup_sim::scenario::load(path)?;
        self.apply(&mut scenarios)?;
        Ok(scenarios)
    }

    pub fn apply(&self, scenarios: &mut [Scenario]) -> Result<(), Error> {
        if self.seeds == Some(0) {
            return Err(Error::Usage("--seeds must be at least 1".into()));
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err(Error::Usage("--duration must be positive".into()));
        }
        for s in scenarios {
            if let Some(n) = self.seeds {
                s.repetitions = n;
            }
            if let Some(d) = self.duration {
                s.duration = d;
            }
        }
        Ok(())
    }
}

/// Parses a `--duration` value such as `60s` or `500ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    recoup_elements::parse_duration(s)
}

/// The runs of one sweep point, in job order (policies as listed, seeds ascending).
#[derive(Debug)]
pub struct PointResult {
    pub scenario: String,
    pub runs: Vec<RunRow>,
    pub summary: Vec<SummaryRow>,
}

/// One run: sweep point index, policy index (into the point's policies), seed.
pub type Job = (usize, usize, u64);

/// Every run of `scenarios`, in result order: points as expanded, then policies as listed,
/// seeds ascending.
#[must_use]
pub fn all_jobs(scenarios: &[Scenario]) -> Vec<Job> {
    scenarios
        .iter()
        .enumerate()
        .flat_map(|(i, s)| jobs(s).into_iter().map(move |(p, seed)| (i, p, seed)))
        .collect()
}

/// Runs every (point, policy, seed) on `threads` worker threads (0: one per core), writing
/// what `outputs` asks for (qlog traces, loss records) per run.
pub fn run_all(
    scenarios: &[Scenario],
    threads: usize,
    outputs: RunOutputs<'_>,
) -> Result<Vec<PointResult>, Error> {
    let work = all_jobs(scenarios);
    let bar = progress_bar(work.len() as u64);
    let rows = run_jobs(
        scenarios,
        &work,
        threads,
        outputs,
        &bar,
        &|_, _| Ok(()),
        None,
    );
    bar.finish_and_clear();
    assemble(scenarios, rows?)
}

/// Runs `work` on `threads` worker threads (0: one per core), advancing `bar` and handing each
/// finished run to `done` as soon as it finishes. Once `stop` is set, runs not yet started are
/// left out of the result. Each run writes what `outputs` asks for.
pub fn run_jobs(
    scenarios: &[Scenario],
    work: &[Job],
    threads: usize,
    outputs: RunOutputs<'_>,
    bar: &ProgressBar,
    done: &(dyn Fn(Job, &RunRow) -> Result<(), Error> + Sync),
    stop: Option<&AtomicBool>,
) -> Result<Vec<(Job, RunRow)>, Error> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Usage(format!("cannot start worker threads: {e}")))?;
    let rows: Vec<Option<(Job, RunRow)>> = pool.install(|| {
        work.par_iter()
            .map(|&job| {
                if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                    return Ok(None);
                }
                let (i, p, seed) = job;
                let scenario = &scenarios[i];
                let policy = &scenario.policies[p];
                let row =
                    run_one_with_outputs(scenario, policy, seed, outputs).map_err(|source| {
                        Error::Run {
                            scenario: scenario.name.clone(),
                            policy: policy.label.clone(),
                            seed,
                            source: Box::new(source),
                        }
                    })?;
                done(job, &row)?;
                bar.inc(1);
                Ok(Some((job, row)))
            })
            .collect::<Result<_, Error>>()
    })?;
    Ok(rows.into_iter().flatten().collect())
}

/// Groups finished runs by sweep point in result order and summarizes each point. `rows` must
/// hold every job of `scenarios` (any order; extra jobs are ignored).
pub fn assemble(
    scenarios: &[Scenario],
    rows: Vec<(Job, RunRow)>,
) -> Result<Vec<PointResult>, Error> {
    let mut by_job: HashMap<Job, RunRow> = rows.into_iter().collect();
    let mut out: Vec<PointResult> = scenarios
        .iter()
        .map(|s| PointResult {
            scenario: s.name.clone(),
            runs: Vec::new(),
            summary: Vec::new(),
        })
        .collect();
    for job in all_jobs(scenarios) {
        let row = by_job.remove(&job).ok_or_else(|| {
            let s = &scenarios[job.0];
            Error::Usage(format!(
                "internal: no result for scenario {}, policy {}, seed {}",
                s.name, s.policies[job.1].label, job.2
            ))
        })?;
        out[job.0].runs.push(row);
    }
    for (point, s) in out.iter_mut().zip(scenarios) {
        if s.policies.iter().any(|p| p.label == "arq") {
            fill_baseline_columns(&mut point.runs, "arq");
        }
        point.summary = summarize(&point.runs);
    }
    Ok(out)
}

/// A bar of finished runs on a terminal, hidden otherwise.
#[must_use]
pub fn progress_bar(len: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:40} {pos}/{len} runs, {elapsed} elapsed, ETA {eta} {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// A row with the sweep point's name in front.
#[derive(Serialize)]
struct Named<'a, T> {
    scenario: &'a str,
    #[serde(flatten)]
    row: &'a T,
}

/// Writes `runs.<ext>` and `summary.<ext>` into `dir` in each format; returns the paths
/// written.
pub fn write_outputs(
    dir: &Path,
    results: &[PointResult],
    formats: &[Format],
) -> Result<Vec<PathBuf>, Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_owned(),
        source,
    })?;
    let runs: Vec<(&str, &[RunRow])> = results
        .iter()
        .map(|r| (r.scenario.as_str(), r.runs.as_slice()))
        .collect();
    let summary: Vec<(&str, &[SummaryRow])> = results
        .iter()
        .map(|r| (r.scenario.as_str(), r.summary.as_slice()))
        .collect();
    let mut written = write_groups(dir, "runs", &runs, formats)?;
    written.extend(write_groups(dir, "summary", &summary, formats)?);
    Ok(written)
}

/// Copies the scenario file into `dir/scenario.toml`, so the results carry what made them
/// (`recoup report` shows it).
pub fn keep_scenario(scenario: &Path, dir: &Path) -> Result<PathBuf, Error> {
    let to = dir.join("scenario.toml");
    let same = |a: &Path, b: &Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b);
    if same(scenario, &to) {
        return Ok(to);
    }
    std::fs::copy(scenario, &to).map_err(|source| Error::Io {
        path: to.clone(),
        source,
    })?;
    Ok(to)
}

fn create(path: &Path) -> Result<BufWriter<File>, Error> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })
}

fn write_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Write {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

/// CSV with a `scenario` column first. The csv crate cannot flatten, so each group is written
/// by the metrics writer and its records are copied with the name prepended.
pub fn write_table_csv<T: Serialize>(
    path: &Path,
    groups: &[(&str, &[T])],
) -> Result<PathBuf, Error> {
    let mut out = csv::Writer::from_writer(create(path)?);
    let mut header_written = false;
    for (name, rows) in groups {
        let mut buf = Vec::new();
        write_csv(rows, &mut buf).map_err(|e| write_err(path, e))?;
        let mut reader = csv::Reader::from_reader(buf.as_slice());
        if !header_written {
            let header = reader.headers().map_err(|e| write_err(path, e))?;
            if !header.is_empty() {
                let mut h = csv::StringRecord::from(vec!["scenario"]);
                h.extend(header.iter());
                out.write_record(&h).map_err(|e| write_err(path, e))?;
                header_written = true;
            }
        }
        for record in reader.records() {
            let record = record.map_err(|e| write_err(path, e))?;
            let mut r = csv::StringRecord::from(vec![*name]);
            r.extend(record.iter());
            out.write_record(&r).map_err(|e| write_err(path, e))?;
        }
    }
    out.flush().map_err(|e| write_err(path, e))?;
    Ok(path.to_owned())
}

pub fn write_table_json<T: Serialize>(
    path: &Path,
    groups: &[(&str, &[T])],
) -> Result<PathBuf, Error> {
    let rows: Vec<Named<'_, T>> = groups
        .iter()
        .flat_map(|(name, rows)| {
            rows.iter().map(move |row| Named {
                scenario: name,
                row,
            })
        })
        .collect();
    let mut w = create(path)?;
    serde_json::to_writer_pretty(&mut w, &rows).map_err(|e| write_err(path, e))?;
    w.write_all(b"\n")
        .and_then(|()| w.flush())
        .map_err(|e| write_err(path, e))?;
    Ok(path.to_owned())
}

/// Prints where the files went.
pub fn print_written(paths: &[PathBuf]) {
    for p in paths {
        println!("wrote {}", p.display());
    }
}
