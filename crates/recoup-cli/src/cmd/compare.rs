//! `recoup compare`: the policies side by side on one scenario (by default AutoRec's testbed),
//! as a table on stdout, the result files of `run`, and a plot.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use recoup_sim::metrics::SummaryRow;
use recoup_sim::run::RunOutputs;
use recoup_sim::scenario::Scenario;

use super::simulate::{self, Error, Overrides, PointResult};

/// Compare loss-recovery policies on one scenario: a table of the headline metrics per policy
/// (means over seeds, ± half-width of the 95 % confidence interval), the result files of
/// `recoup run`, and DIR/compare.png.
///
/// Without SCENARIO, runs the built-in default: AutoRec's testbed (5 % loss, 60 ms RTT,
/// 12 Mbit/s, a 4 Mbit/s live stream, BBR) with arq, or3, art, too and autorec, 10 seeds of 60 s.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup compare
  recoup compare --seeds 3 --duration 20s --out /tmp/quick
  recoup compare scenarios/bursty.toml --out results/bursty")]
pub struct Args {
    /// Scenario file (TOML); default: the built-in AutoRec testbed.
    pub scenario: Option<PathBuf>,
    /// Directory for the result files (created if missing).
    #[arg(long, value_name = "DIR", default_value = "recoup-compare")]
    pub out: PathBuf,
    /// Seeds per policy, overriding the scenario's `repetitions`.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u32>,
    /// Length of each run, overriding the scenario's `duration` (e.g. 60s, 500ms).
    #[arg(long, value_name = "TIME", value_parser = simulate::parse_duration)]
    pub duration: Option<Duration>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub jobs: usize,
}

pub fn run(args: Args) -> Result<(), Error> {
    let mut scenarios = match &args.scenario {
        Some(path) => recoup_sim::scenario::load(path)?,
        None => vec![Scenario::builtin_default()],
    };
    Overrides {
        seeds: args.seeds,
        duration: args.duration,
    }
    .apply(&mut scenarios)?;
    let results = simulate::run_all(&scenarios, args.jobs, RunOutputs::default())?;
    for (point, scenario) in results.iter().zip(&scenarios) {
        println!(
            "{} ({} seeds x {:?} per policy)",
            point.scenario, scenario.repetitions, scenario.duration
        );
        print!("{}", table(point));
        println!();
    }
    let mut written = simulate::write_outputs(
        &args.out,
        &results,
        &[super::tables::Format::Csv, super::tables::Format::Json],
    )?;
    let png = args.out.join("compare.png");
    match crate::plot::compare_png(&png, &results) {
        Ok(()) => written.push(png),
        Err(e) => eprintln!("recoup: no plot: {e}"),
    }
    simulate::print_written(&written);
    Ok(())
}

/// The table's columns: heading, metric, scale to display units, unit suffix, with CI.
const COLUMNS: [(&str, &str, f64, bool); 6] = [
    (
        "multi-rtx latency ms",
        "recovery_latency_multi_ms",
        1.0,
        true,
    ),
    ("multi p95 ms", "recovery_latency_multi_p95_ms", 1.0, false),
    ("deterioration %", "deterioration_rate", 100.0, true),
    ("redundancy %", "redundancy_cost", 100.0, true),
    ("goodput red. %", "goodput_reduction", 100.0, true),
    ("freezes/100s", "freezes_per_100s", 1.0, true),
];

fn find<'a>(summary: &'a [SummaryRow], policy: &str, metric: &str) -> Option<&'a SummaryRow> {
    summary
        .iter()
        .find(|s| s.policy == policy && s.metric == metric)
}

/// One cell: the mean, with ± the 95 % CI half-width when there are two or more values.
fn cell(row: Option<&SummaryRow>, scale: f64, ci: bool) -> String {
    let Some(mean) = row.and_then(|r| r.mean) else {
        return "-".into();
    };
    let half = row
        .and_then(|r| r.ci95_high)
        .filter(|_| ci)
        .map(|h| (h - mean) * scale);
    match half {
        Some(h) => format!("{:.1} ± {:.1}", mean * scale, h),
        None => format!("{:.1}", mean * scale),
    }
}

/// The per-policy table of one sweep point, aligned for a terminal.
#[must_use]
pub fn table(point: &PointResult) -> String {
    let mut policies: Vec<&str> = Vec::new();
    for r in &point.runs {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let mut grid: Vec<Vec<String>> = vec![std::iter::once("policy")
        .chain(COLUMNS.iter().map(|c| c.0))
        .map(str::to_owned)
        .collect()];
    for p in &policies {
        let mut line = vec![(*p).to_owned()];
        for (_, metric, scale, ci) in COLUMNS {
            line.push(cell(find(&point.summary, p, metric), scale, ci));
        }
        grid.push(line);
    }
    let widths: Vec<usize> = (0..grid[0].len())
        .map(|c| grid.iter().map(|l| l[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for line in &grid {
        for (c, text) in line.iter().enumerate() {
            let pad = widths[c] - text.chars().count();
            if c == 0 {
                let _ = write!(out, "{text}{}", " ".repeat(pad));
            } else {
                let _ = write!(out, "  {}{text}", " ".repeat(pad));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(policy: &str, metric: &str, mean: f64, ci: Option<f64>) -> SummaryRow {
        SummaryRow {
            policy: policy.into(),
            metric: metric.into(),
            n: 2,
            mean: Some(mean),
            std: None,
            p50: None,
            p95: None,
            p99: None,
            ci95_low: ci.map(|h| mean - h),
            ci95_high: ci.map(|h| mean + h),
        }
    }

    #[test]
    fn cell_scales_and_shows_ci() {
        let r = summary("arq", "deterioration_rate", 0.25, Some(0.05));
        assert_eq!(cell(Some(&r), 100.0, true), "25.0 ± 5.0");
        assert_eq!(cell(Some(&r), 100.0, false), "25.0");
        assert_eq!(cell(None, 1.0, true), "-");
        let one = summary("arq", "x", 3.0, None);
        assert_eq!(cell(Some(&one), 1.0, true), "3.0");
    }
}
