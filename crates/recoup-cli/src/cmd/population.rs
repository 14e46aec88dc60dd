//! `recoup population`: a simulated deployment fleet (`recoup_sim::population`), on all cores or
//! on a Ray cluster through the Python package.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use recoup_sim::metrics::RunRow;
use recoup_sim::population::{self, fleet_cdf, fleet_summary, Stream, MAX_STREAMS};
use recoup_sim::run::RunOutputs;
use recoup_sim::scenario::Scenario;
use serde::Serialize;

use super::simulate::{self, Error, Job};
use super::tables;

/// Simulate a deployment fleet: N live streams whose bitrate, RTT and loss are drawn from a
/// population file's distributions, each running every policy of the file on its own seed.
///
/// Writes DIR/runs.csv (one row per stream and policy, the stream in the `scenario` column),
/// DIR/streams.csv (each stream's draws), DIR/fleet.csv (per policy and metric: mean and
/// percentiles over streams) and DIR/cdf.csv (each metric's CDF over streams, 0..100 %); with
/// `--format`, the same tables as JSON or Parquet too.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup population scenarios/fleet/deployment.toml --streams 200 --out results/fleet
  recoup population scenarios/fleet/deployment.toml --streams 10000 --out results/fleet --ray")]
pub struct Args {
    /// Population file (TOML; see recoup_sim::population).
    pub file: PathBuf,
    /// Streams to simulate, overriding the file's `streams`.
    #[arg(long, value_name = "N")]
    pub streams: Option<usize>,
    /// Directory for the result files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Worker threads (default: one per core); without --ray.
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with = "ray")]
    pub jobs: usize,
    /// Run on Ray through the Python package (`python3 -m recoup.fleet`): one task per run.
    #[arg(long)]
    pub ray: bool,
    /// Ray cluster address (default: a local Ray).
    #[arg(long, value_name = "ADDR", requires = "ray")]
    pub ray_address: Option<String>,
    /// Table formats, comma-separated: csv, json, parquet (Parquet is written by python3 with
    /// the recoup package, pandas and pyarrow).
    #[arg(long, value_name = "FORMAT", value_enum, value_delimiter = ',', default_values = ["csv"])]
    pub format: Vec<super::tables::Format>,
}

pub fn run(args: Args) -> Result<(), Error> {
    let pop = population::load(&args.file)?;
    let n = args.streams.unwrap_or(pop.streams);
    if !(1..=MAX_STREAMS).contains(&n) {
        return Err(Error::Usage(format!(
            "--streams must be 1 to {MAX_STREAMS}, got {n}"
        )));
    }
    super::tables::check_writers(&args.format)?;
    // Every stream is drawn and checked before any run.
    let streams = pop.streams(n)?;
    let scenarios: Vec<Scenario> = streams.iter().map(|s| s.scenario.clone()).collect();
    let work = simulate::all_jobs(&scenarios);
    let rows = if args.ray {
        ray_rows(&streams, &work, args.ray_address.as_deref())?
    } else {
        let bar = simulate::progress_bar(work.len() as u64);
        let rows = simulate::run_jobs(
            &scenarios,
            &work,
            args.jobs,
            RunOutputs::default(),
            &bar,
            &|_, _| Ok(()),
            None,
        )?;
        bar.finish_and_clear();
        rows
    };
    let results = simulate::assemble(&scenarios, rows)?;
    let runs: Vec<RunRow> = results.iter().flat_map(|p| p.runs.clone()).collect();
    std::fs::create_dir_all(&args.out).map_err(|source| Error::Io {
        path: args.out.clone(),
        source,
    })?;
    let groups: Vec<(&str, &[RunRow])> = results
        .iter()
        .map(|r| (r.scenario.as_str(), r.runs.as_slice()))
        .collect();
    let params: Vec<_> = streams.iter().map(|s| s.params.clone()).collect();
    let f = &args.format;
    let mut written = tables::write_groups(&args.out, "runs", &groups, f)?;
    written.extend(tables::write_rows(&args.out, "streams", &params, f)?);
    written.extend(tables::write_rows(
        &args.out,
        "fleet",
        &fleet_summary(&runs),
        f,
    )?);
    written.extend(tables::write_rows(&args.out, "cdf", &fleet_cdf(&runs), f)?);
    print_headline(&fleet_summary(&runs), n);
    simulate::print_written(&written);
    Ok(())
}

/// The papers' headline numbers per policy: fleet means (and p95 over streams).
fn print_headline(summary: &[population::FleetRow], streams: usize) {
    const METRICS: [(&str, &str, f64); 6] = [
        (
            "recovery latency (multi) ms",
            "recovery_latency_multi_ms",
            1.0,
        ),
        ("deterioration %", "deterioration_rate", 100.0),
        ("redundancy %", "redundancy_cost", 100.0),
        ("goodput reduction %", "goodput_reduction", 100.0),
        ("retran_ratio %", "retran_ratio", 100.0),
        ("freezes /100 s", "freezes_per_100s", 1.0),
    ];
    println!("{streams} streams; mean over streams (p95 over streams)");
    let mut policies: Vec<&str> = Vec::new();
    for r in summary {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    for policy in policies {
        let cells: Vec<String> = METRICS
            .iter()
            .map(|(label, metric, scale)| {
                let row = summary
                    .iter()
                    .find(|r| r.policy == policy && r.metric == *metric);
                let f = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.2}", v * scale));
                match row {
                    Some(r) => format!("{label} {} ({})", f(r.mean), f(r.p95)),
                    None => format!("{label} -"),
                }
            })
            .collect();
        println!("  {policy}: {}", cells.join(", "));
    }
}

/// One run for the Python side: the stream's scenario text, the policy and the seed.
#[derive(Serialize)]
struct RayJob<'a> {
    toml: &'a str,
    name: &'a str,
    policy: &'a str,
    seed: u64,
}

#[derive(Serialize)]
struct RayRequest<'a> {
    address: Option<&'a str>,
    jobs: Vec<RayJob<'a>>,
}

/// Runs `work` as Ray tasks through `python3 -m recoup.fleet` (the Python package's Ray sweep
/// backend), which reads the jobs as JSON on stdin and prints one row per job, in order.
fn ray_rows(
    streams: &[Stream],
    work: &[Job],
    address: Option<&str>,
) -> Result<Vec<(Job, RunRow)>, Error> {
    let request = RayRequest {
        address,
        jobs: work
            .iter()
            .map(|&(i, p, seed)| RayJob {
                toml: &streams[i].toml,
                name: &streams[i].scenario.name,
                policy: &streams[i].scenario.policies[p].label,
                seed,
            })
            .collect(),
    };
    let input = serde_json::to_vec(&request).map_err(|e| Error::Usage(e.to_string()))?;
    let python_err = |e: std::io::Error| {
        Error::Usage(format!(
            "--ray needs python3 with the recoup package and ray installed: {e}"
        ))
    };
    let mut child = Command::new("python3")
        .args(["-m", "recoup.fleet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(python_err)?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| Error::Usage("no stdin".into()))?;
    // Written from its own thread: the child may fill its stdout before it reads all input.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().map_err(python_err)?;
    writer
        .join()
        .map_err(|_| Error::Usage("writing the Ray jobs panicked".into()))?
        .map_err(python_err)?;
    if !output.status.success() {
        return Err(Error::Usage(format!(
            "python3 -m recoup.fleet failed ({})",
            output.status
        )));
    }
    let rows: Vec<RunRow> = serde_json::from_slice(&output.stdout)
        .map_err(|e| Error::Usage(format!("python3 -m recoup.fleet: bad output: {e}")))?;
    if rows.len() != work.len() {
        return Err(Error::Usage(format!(
            "python3 -m recoup.fleet returned {} rows for {} runs",
            rows.len(),
            work.len()
        )));
    }
    Ok(work.iter().copied().zip(rows).collect())
}
