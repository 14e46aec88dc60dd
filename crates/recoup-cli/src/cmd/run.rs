//! `recoup run`: every sweep point, policy and seed of a scenario file, on all cores.

use std::path::PathBuf;
use std::time::Duration;

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
    /// DIR/qlog/<scenario>-<policy>-<seed>-{server,client}.sqlog (simulated time).
    #[arg(long)]
    pub qlog: bool,
}

pub fn run(args: Args) -> Result<(), Error> {
    let scenarios = Overrides {
        seeds: args.seeds,
        duration: args.duration,
    }
    .load(&args.scenario)?;
    let qlog_dir = args.qlog.then(|| args.out.join("qlog"));
    let results = simulate::run_all(&scenarios, args.jobs, qlog_dir.as_deref())?;
    let written = simulate::write_outputs(&args.out, &results)?;
    let runs: usize = results.iter().map(|r| r.runs.len()).sum();
    println!("{runs} runs over {} scenario point(s)", results.len());
    simulate::print_written(&written);
    Ok(())
}
