//! Result tables in the formats chosen with `--format`: CSV and JSON written here, Parquet
//! through the Python package (`python3 -m recoup.tables`, pandas and pyarrow). Rust's
//! arrow/parquet crates would add 49 crates and about 190 CPU-seconds to a release build
//! (measured: BENCHMARKS.md, "Parquet"), while users who read Parquet already have pandas and
//! pyarrow.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use super::simulate::{write_table_csv, write_table_json, Error};

/// A table file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Json,
    Parquet,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Json => "json",
            Self::Parquet => "parquet",
        }
    }
}

/// What `--format parquet` needs, named in its errors.
const PARQUET_NEEDS: &str = "--format parquet needs python3 with the recoup package, pandas and \
                             pyarrow (pip install ./python pandas pyarrow)";

/// Checks that every format in `formats` can be written, before a run whose results would
/// otherwise be lost to a missing writer: for Parquet, python3 must import what
/// `python3 -m recoup.tables` uses.
pub fn check_writers(formats: &[Format]) -> Result<(), Error> {
    if !formats.contains(&Format::Parquet) {
        return Ok(());
    }
    let fail = |detail: String| {
        Error::Usage(format!(
            "{PARQUET_NEEDS}: {detail}; nothing was run (or leave parquet out of --format)"
        ))
    };
    let output = Command::new("python3")
        .args(["-c", "import recoup.tables, pandas, pyarrow"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail(format!("python3: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The last line names the missing module ("No module named 'pyarrow'").
    let last = stderr.trim().lines().last().unwrap_or("no message");
    Err(fail(format!(
        "python3 exited with {}: {last}",
        output.status
    )))
}

/// `formats` in the order they are written: Parquet, the one that can fail for a reason other
/// than the disk, last, so the text tables are on disk whatever it does.
fn write_order(formats: &[Format]) -> Vec<Format> {
    let mut order = formats.to_vec();
    order.sort_by_key(|f| *f == Format::Parquet);
    order.dedup();
    order
}

/// A row with its sweep point's (or stream's) name in front.
#[derive(Serialize)]
struct Named<'a, T> {
    scenario: &'a str,
    #[serde(flatten)]
    row: &'a T,
}

/// Writes `DIR/<stem>.<ext>` in every format, the rows of each group after a `scenario` column
/// naming it; returns the paths written.
pub fn write_groups<T: Serialize>(
    dir: &Path,
    stem: &str,
    groups: &[(&str, &[T])],
    formats: &[Format],
) -> Result<Vec<PathBuf>, Error> {
    write_order(formats)
        .into_iter()
        .map(|f| {
            let path = dir.join(format!("{stem}.{}", f.extension()));
            match f {
                Format::Csv => write_table_csv(&path, groups),
                Format::Json => write_table_json(&path, groups),
                Format::Parquet => {
                    let rows: Vec<Named<'_, T>> = groups
                        .iter()
                        .flat_map(|(name, rows)| {
                            rows.iter().map(move |row| Named {
                                scenario: name,
                                row,
                            })
                        })
                        .collect();
                    write_parquet(&path, &rows)
                }
            }
        })
        .collect()
}

/// Writes `DIR/<stem>.<ext>` of plain rows in every format; returns the paths written.
pub fn write_rows<T: Serialize>(
    dir: &Path,
    stem: &str,
    rows: &[T],
    formats: &[Format],
) -> Result<Vec<PathBuf>, Error> {
    write_order(formats)
        .into_iter()
        .map(|f| {
            let path = dir.join(format!("{stem}.{}", f.extension()));
            match f {
                Format::Csv => {
                    let file = std::fs::File::create(&path).map_err(|source| Error::Io {
                        path: path.clone(),
                        source,
                    })?;
                    recoup_sim::metrics::write_csv(rows, std::io::BufWriter::new(file)).map_err(
                        |e| Error::Write {
                            path: path.clone(),
                            detail: e.to_string(),
                        },
                    )?;
                    Ok(path)
                }
                Format::Json => {
                    let text = serde_json::to_vec_pretty(rows).map_err(|e| Error::Write {
                        path: path.clone(),
                        detail: e.to_string(),
                    })?;
                    std::fs::write(&path, [text.as_slice(), b"\n"].concat()).map_err(|source| {
                        Error::Io {
                            path: path.clone(),
                            source,
                        }
                    })?;
                    Ok(path)
                }
                Format::Parquet => write_parquet(&path, rows),
            }
        })
        .collect()
}

/// Hands `rows` as JSON to `python3 -m recoup.tables PATH`, which writes Parquet. If that
/// fails after all ([`check_writers`] passed before the run), the rows are kept as JSON beside
/// PATH and the error says where.
fn write_parquet<T: Serialize>(path: &Path, rows: &[T]) -> Result<PathBuf, Error> {
    let input = serde_json::to_vec(rows).map_err(|e| Error::Write {
        path: path.to_owned(),
        detail: e.to_string(),
    })?;
    let kept = path.with_extension("parquet-rows.json");
    let fail = |detail: String| {
        let saved = match std::fs::write(&kept, &input) {
            Ok(()) => format!("the rows are kept in {}", kept.display()),
            Err(e) => format!("keeping the rows in {} failed too: {e}", kept.display()),
        };
        Error::Write {
            path: path.to_owned(),
            detail: format!("{PARQUET_NEEDS}: {detail}; {saved}"),
        }
    };
    let mut child = Command::new("python3")
        .args(["-m", "recoup.tables"])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    let mut stdin = child.stdin.take().ok_or_else(|| fail("no stdin".into()))?;
    // Written from its own thread: the child may fill its stderr before it reads all input.
    let (written, output) = std::thread::scope(|scope| {
        let rows = &input;
        // Moved in, so that the pipe closes when the rows are written and the child sees EOF.
        let writer = scope.spawn(move || stdin.write_all(rows));
        let output = child.wait_with_output();
        (writer.join(), output)
    });
    let output = output.map_err(|e| fail(e.to_string()))?;
    let written = written.map_err(|_| fail("writing the rows panicked".into()))?;
    if !output.status.success() {
        return Err(fail(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    written.map_err(|e| fail(e.to_string()))?;
    Ok(path.to_owned())
}
