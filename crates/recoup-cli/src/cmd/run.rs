//! `recoup run`: every sweep point, policy and seed of a scenario file, on all cores.

use std::path::PathBuf;
use std::time::Duration;

use recoup_sim::run::RunOutputs;

use super::simulate::{self, Error, Overrides};

/// Run a scenario file in the simulator: every sweep point x policy x seed, in parallel.
///
/// Writes DIR/runs.csv and DIR/runs.json (one row per run, with the sweep point in the
/// `scenario` column) and DIR/summary.csv and DIR/summary.json (per point, policy and metric:
/// n, mean, std, percentiles, 95 % confidence interval).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup run scenarios/autorec.toml --out results/autorec
  recoup run sweep.toml --out results/sweep --seeds 3 --jobs 2
  recoup run scenarios/default.toml --out results/a --seeds 1 --qlog
  recoup run scenarios/default.toml --out results/a --seeds 2 --losses
  recoup run scenarios/default.toml --out results/quick --seeds 2 --duration 10s")]
pub struct Args {
    /// Scenario file (TOML, DESIGN.md \"Scenario file\").
    pub scenario: PathBuf,
    /// Directory for the result files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub jobs: usize,
    /// Seeds per policy, overriding the file's `repetitions`.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u32>,
    /// Length of each run, overriding the file's `duration` (e.g. 60s, 500ms).
    #[arg(long, value_name = "TIME", value_parser = simulate::parse_duration)]
    pub duration: Option<Duration>,
    /// Also write a qlog trace per run and side:
    /// `DIR/qlog/<scenario>-<policy>-<seed>-{server,client}.sqlog` (simulated time).
    #[arg(long)]
    pub qlog: bool,
    /// Also write every lost data range of each run's sender, one CSV row each (stream range,
    /// send and detection times, retransmission rounds N, sends, copies):
    /// `DIR/losses/<scenario>-<policy>-<seed>.csv`.
    #[arg(long)]
    pub losses: bool,
    /// Table formats, comma-separated: csv, json, parquet (Parquet is written by python3 with
    /// the recoup package, pandas and pyarrow).
    #[arg(long, value_name = "FORMAT", value_enum, value_delimiter = ',', default_values = ["csv", "json"])]
    pub format: Vec<super::tables::Format>,
}

pub fn run(args: Args) -> Result<(), Error> {
    let scenarios = Overrides {
        seeds: args.seeds,
        duration: args.duration,
    }
    .load(&args.scenario)?;
    super::tables::check_writers(&args.format)?;
    let qlog_dir = args.qlog.then(|| args.out.join("qlog"));
    let losses_dir = args.losses.then(|| args.out.join("losses"));
    let outputs = RunOutputs {
        qlog_dir: qlog_dir.as_deref(),
        losses_dir: losses_dir.as_deref(),
    };
    let results = simulate::run_all(&scenarios, args.jobs, outputs)?;
    let mut written = simulate::write_outputs(&args.out, &results, &args.format)?;
    written.push(simulate::keep_scenario(&args.scenario, &args.out)?);
    let runs: usize = results.iter().map(|r| r.runs.len()).sum();
    println!("{runs} runs over {} scenario point(s)", results.len());
    simulate::print_written(&written);
    Ok(())
}
