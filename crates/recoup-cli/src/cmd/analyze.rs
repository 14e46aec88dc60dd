//! `recoup analyze`: DESIGN.md's recovery metrics from qlog traces of a QUIC sender (recoup's own,
//! aioquic's, or any qlog 0.3 trace with STREAM frames, ACK frames and `packet_lost`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use recoup_sim::metrics::write_csv;
use recoup_sim::qlog_analyze::{analyze_file, Analysis, DEFAULT_OFF_GAP};
use serde::Serialize;

use super::simulate::Error;

/// Compute recovery metrics from the qlog traces of a sender (e.g. a server's `.sqlog`/`.qlog`).
///
/// Rebuilds each lost stream range's lineage from packet_sent (STREAM frames), ACK frames and
/// packet_lost events, then reports the result columns of DESIGN.md (recovery latency, T_unit,
/// deterioration rate, redundancy cost, N_max, K_max, loss rate ...) plus off-mode time and
/// entries per second. Prints a table; with --out also writes DIR/analyze.csv and
/// DIR/analyze.json, one row per file. Receiver (client-side) traces are refused.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup run scenarios/default.toml --out results/a --seeds 1 --qlog
  recoup analyze results/a/qlog/*-server.sqlog --out results/a/analyze
  recoup analyze /tmp/aioquic-logs/*.qlog")]
pub struct Args {
    /// qlog files of the sending side (JSON-SEQ `.sqlog` or JSON `.qlog`).
    #[arg(required = true, value_name = "QLOG")]
    pub files: Vec<PathBuf>,
    /// Directory for analyze.csv and analyze.json (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A gap longer than this between packets with new data counts as off-mode
    /// [default: 5ms, recoup_sim::qlog_analyze::DEFAULT_OFF_GAP].
    #[arg(long, value_name = "DURATION", value_parser = super::simulate::parse_duration)]
    pub off_gap: Option<Duration>,
}

/// One output row: the file, what wrote it, the result columns, the off-mode measurement.
#[derive(Serialize)]
struct Row<'a> {
    file: String,
    format: &'static str,
    vantage: Option<&'a str>,
    #[serde(flatten)]
    metrics: &'a recoup_sim::metrics::RunRow,
    off_mode_ms_per_s: Option<f64>,
    off_mode_entries_per_s: Option<f64>,
    off_mode_gap_ms: f64,
    trace_s: f64,
}

fn row<'a>(path: &Path, a: &'a Analysis) -> Row<'a> {
    Row {
        file: path.display().to_string(),
        format: a.format.as_str(),
        vantage: a.vantage.as_deref(),
        metrics: &a.row,
        off_mode_ms_per_s: a.off_mode.ms_per_s(),
        off_mode_entries_per_s: a.off_mode.entries_per_s(),
        off_mode_gap_ms: a.off_mode.threshold.as_secs_f64() * 1e3,
        trace_s: a.off_mode.span.as_secs_f64(),
    }
}

pub fn run(args: Args) -> Result<(), Error> {
    let off_gap = args.off_gap.unwrap_or(DEFAULT_OFF_GAP);
    if off_gap.is_zero() {
        return Err(Error::Write {
            path: PathBuf::from("--off-gap"),
            detail: "must be positive".into(),
        });
    }
    let mut results = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let label = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        results.push((path.clone(), analyze_file(path, &label, off_gap)?));
    }
    print_table(&results);
    if let Some(dir) = &args.out {
        for p in write_outputs(dir, &results)? {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

fn print_table(results: &[(PathBuf, Analysis)]) {
    println!(
        "{:<40} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>6} {:>6} {:>8} {:>7}",
        "file",
        "format",
        "lost",
        "t_unit",
        "lat_mean",
        "lat_p95",
        "lat_max",
        "lat_multi",
        "deter",
        "red",
        "copies",
        "n_max",
        "k_max",
        "off_ms/s",
        "off/s"
    );
    for (path, a) in results {
        let r = &a.row;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        println!(
            "{:<40} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>6} {:>6} {:>8} {:>7}",
            name,
            a.format.as_str(),
            r.lost_ranges,
            fmt(r.t_unit_ms),
            fmt(r.recovery_latency_ms),
            fmt(r.recovery_latency_p95_ms),
            fmt(r.recovery_latency_max_ms),
            fmt(r.recovery_latency_multi_ms),
            fmt(r.deterioration_rate),
            fmt(r.redundancy_cost),
            r.copies_sent,
            r.n_max,
            r.k_max,
            fmt(a.off_mode.ms_per_s()),
            fmt(a.off_mode.entries_per_s()),
        );
    }
    println!("times in ms; loss rate, deterioration and redundancy (red) are fractions");
}

fn write_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Write {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

fn create(path: &Path) -> Result<BufWriter<File>, Error> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| write_err(path, e))
}

/// Writes `analyze.csv` and `analyze.json` into `dir`.
fn write_outputs(dir: &Path, results: &[(PathBuf, Analysis)]) -> Result<Vec<PathBuf>, Error> {
    std::fs::create_dir_all(dir).map_err(|e| write_err(dir, e))?;
    let rows: Vec<Row<'_>> = results.iter().map(|(p, a)| row(p, a)).collect();
    let csv_path = dir.join("analyze.csv");
    // The csv crate cannot flatten: write the metric columns, then splice in the others.
    let metrics: Vec<&recoup_sim::metrics::RunRow> = rows.iter().map(|r| r.metrics).collect();
    let mut buf = Vec::new();
    write_csv(&metrics, &mut buf).map_err(|e| write_err(&csv_path, e))?;
    let mut reader = csv::Reader::from_reader(buf.as_slice());
    let mut out = csv::Writer::from_writer(create(&csv_path)?);
    let header = reader.headers().map_err(|e| write_err(&csv_path, e))?;
    let mut h = csv::StringRecord::from(vec!["file", "format", "vantage"]);
    h.extend(header.iter());
    h.extend([
        "off_mode_ms_per_s",
        "off_mode_entries_per_s",
        "off_mode_gap_ms",
        "trace_s",
    ]);
    out.write_record(&h).map_err(|e| write_err(&csv_path, e))?;
    let cell = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for (record, r) in reader.records().zip(&rows) {
        let record = record.map_err(|e| write_err(&csv_path, e))?;
        let mut line =
            csv::StringRecord::from(vec![r.file.as_str(), r.format, r.vantage.unwrap_or("")]);
        line.extend(record.iter());
        line.extend([
            cell(r.off_mode_ms_per_s),
            cell(r.off_mode_entries_per_s),
            r.off_mode_gap_ms.to_string(),
            r.trace_s.to_string(),
        ]);
        out.write_record(&line)
            .map_err(|e| write_err(&csv_path, e))?;
    }
    out.flush().map_err(|e| write_err(&csv_path, e))?;
    let json_path = dir.join("analyze.json");
    let mut w = create(&json_path)?;
    serde_json::to_writer_pretty(&mut w, &rows).map_err(|e| write_err(&json_path, e))?;
    w.write_all(b"\n")
        .and_then(|()| w.flush())
        .map_err(|e| write_err(&json_path, e))?;
    Ok(vec![csv_path, json_path])
}
