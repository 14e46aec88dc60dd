//! `recoup sweep`: `run` with a resumable output directory. Every finished run is appended to
//! DIR/runs.jsonl as it finishes, after a header line with the plan's fingerprint; running the
//! same command again runs only what is missing, so an interrupted sweep loses at most the runs
//! in progress.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use recoup_sim::metrics::RunRow;
use recoup_sim::run::RunOutputs;
use recoup_sim::scenario::Scenario;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::simulate::{self, Error, Job, Overrides};

/// The journal's name inside the output directory.
pub const JOURNAL: &str = "runs.jsonl";
/// Format version in the journal's header; a journal of another version is a different plan.
const VERSION: u32 = 1;

/// Run a sweep plan (a scenario file with a `[sweep]` table, or without one) into a resumable
/// directory: each finished run is appended to DIR/runs.jsonl at once, and running the same
/// command again skips the runs already there (after Ctrl-C, a kill or a crash).
///
/// When every run is done, writes the files of `recoup run`: DIR/runs.{csv,json} and
/// DIR/summary.{csv,json}. A different plan (or another recoup version's journal) in DIR is
/// refused unless --force, which discards the old runs. Changing only the seeds (--seeds, or
/// the plan's `seed` and `repetitions`) keeps the runs that are still wanted.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup sweep scenarios/autorec-testbed.toml --out results/alpha
  recoup sweep scenarios/autorec-testbed.toml --out results/alpha   # after Ctrl-C: resumes
  recoup sweep scenarios/autorec-testbed.toml --out results/alpha --seeds 20   # adds seeds
  recoup plot results/alpha")]
pub struct Args {
    /// Sweep plan: a scenario file (TOML) whose `[sweep]` table lists the axes.
    pub plan: PathBuf,
    /// Directory for the journal and the result files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub jobs: usize,
    /// Seeds per policy, overriding the plan's `repetitions`.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u32>,
    /// Discard the runs of a different plan found in DIR instead of refusing to start.
    #[arg(long)]
    pub force: bool,
    /// Table formats, comma-separated: csv, json, parquet (Parquet is written by python3 with
    /// the recoup package, pandas and pyarrow).
    #[arg(long, value_name = "FORMAT", value_enum, value_delimiter = ',', default_values = ["csv", "json"])]
    pub format: Vec<super::tables::Format>,
}

/// The journal's first line.
#[derive(Serialize, Deserialize)]
struct Header {
    recoup_sweep: u32,
    fingerprint: String,
    plan: String,
}

/// One journal line after the header: a finished run with its sweep point.
#[derive(Serialize, Deserialize)]
struct Entry {
    point: usize,
    scenario: String,
    #[serde(flatten)]
    row: RunRow,
}

/// Set by the first Ctrl-C: runs not yet started are skipped.
static STOP: AtomicBool = AtomicBool::new(false);

pub fn run(args: Args) -> Result<(), Error> {
    let scenarios = Overrides {
        seeds: args.seeds,
        duration: None,
    }
    .load(&args.plan)?;
    super::tables::check_writers(&args.format)?;
    std::fs::create_dir_all(&args.out).map_err(|source| Error::Io {
        path: args.out.clone(),
        source,
    })?;
    let path = args.out.join(JOURNAL);
    let header = Header {
        recoup_sweep: VERSION,
        fingerprint: fingerprint(&scenarios),
        plan: args.plan.display().to_string(),
    };
    let finished = open_journal(&path, &header, &scenarios, args.force)?;

    let work = simulate::all_jobs(&scenarios);
    let todo: Vec<Job> = work
        .iter()
        .copied()
        .filter(|j| !finished.contains_key(j))
        .collect();
    let resumed = work.len() - todo.len();
    if resumed > 0 {
        println!(
            "{resumed} of {} runs already done in {}",
            work.len(),
            path.display()
        );
    }
    let journal = Mutex::new(append(&path)?);
    let record = |job: Job, row: &RunRow| -> Result<(), Error> {
        let entry = Entry {
            point: job.0,
            scenario: scenarios[job.0].name.clone(),
            row: row.clone(),
        };
        let mut line = serde_json::to_vec(&entry).map_err(|e| write_err(&path, e))?;
        line.push(b'\n');
        let mut f = journal
            .lock()
            .map_err(|_| write_err(&path, "a worker panicked"))?;
        // One write per line, synced, so a kill leaves at most a partial last line.
        f.write_all(&line)
            .and_then(|()| f.sync_data())
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })
    };
    if !todo.is_empty() {
        install_ctrlc();
    }
    let bar = simulate::progress_bar(work.len() as u64);
    bar.set_position(resumed as u64);
    bar.reset_eta();
    let done = simulate::run_jobs(
        &scenarios,
        &todo,
        args.jobs,
        RunOutputs::default(),
        &bar,
        &record,
        Some(&STOP),
    );
    bar.finish_and_clear();
    let done = done?;
    if done.len() < todo.len() {
        return Err(Error::Usage(format!(
            "interrupted with {} of {} runs done; they are kept in {}: run the same command \
             again to finish",
            resumed + done.len(),
            work.len(),
            path.display()
        )));
    }
    let rows = finished.into_iter().chain(done).collect();
    let results = simulate::assemble(&scenarios, rows)?;
    let mut written = simulate::write_outputs(&args.out, &results, &args.format)?;
    written.push(simulate::keep_scenario(&args.plan, &args.out)?);
    println!(
        "{} runs over {} scenario point(s) ({} new)",
        work.len(),
        results.len(),
        todo.len()
    );
    simulate::print_written(&written);
    Ok(())
}

/// Identifies the plan's runs: the expanded points with everything that decides a run's result.
/// A run depends on its point, policy and seed only, so the first seed and the number of seeds
/// are left out: changing them keeps the runs that are still wanted.
fn fingerprint(scenarios: &[Scenario]) -> String {
    let mut h = Sha256::new();
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for s in scenarios {
        let point = Scenario {
            seed: 0,
            repetitions: 0,
            ..s.clone()
        };
        h.update(format!("{point:?}\n").as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn write_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Write {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

fn append(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io_err(path))
}

/// Reads the runs finished so far from the journal at `path`, after checking that it belongs to
/// this plan; starts a new journal when there is none (or none with a complete header), or when
/// `force` and it belongs to another plan. A partial last line (a kill while writing) is cut off.
fn open_journal(
    path: &Path,
    header: &Header,
    scenarios: &[Scenario],
    force: bool,
) -> Result<HashMap<Job, RunRow>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_err(path)(e)),
    };
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    let mut lines = text[..complete].lines();
    let Some(first) = lines.next() else {
        return start(path, header).map(|()| HashMap::new());
    };
    let old: Header = serde_json::from_str(first).map_err(|e| {
        Error::Usage(format!(
            "{}:1: not a recoup sweep journal ({e}); use another --out directory, or --force \
             to replace it",
            path.display()
        ))
    })?;
    if old.recoup_sweep != header.recoup_sweep || old.fingerprint != header.fingerprint {
        if force {
            return start(path, header).map(|()| HashMap::new());
        }
        return Err(Error::Usage(format!(
            "{} holds runs of a different plan (from {}, fingerprint {}; this plan's is {}): \
             use another --out directory, or --force to discard those runs",
            path.display(),
            old.plan,
            short(&old.fingerprint),
            short(&header.fingerprint)
        )));
    }
    let mut finished = HashMap::new();
    for (n, line) in lines.enumerate() {
        let at = || format!("{}:{}", path.display(), n + 2);
        let entry: Entry = serde_json::from_str(line)
            .map_err(|e| Error::Usage(format!("{}: malformed run ({e})", at())))?;
        let point = scenarios
            .get(entry.point)
            .filter(|s| s.name == entry.scenario)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{}: scenario point {} ({}) is not in the plan",
                    at(),
                    entry.point,
                    entry.scenario
                ))
            })?;
        let policy = point
            .policies
            .iter()
            .position(|p| p.label == entry.row.policy)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{}: policy {} is not in the plan",
                    at(),
                    entry.row.policy
                ))
            })?;
        finished
            .entry((entry.point, policy, entry.row.seed))
            .or_insert(entry.row);
    }
    if complete < text.len() {
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        f.set_len(complete as u64)
            .and_then(|()| f.sync_data())
            .map_err(io_err(path))?;
    }
    Ok(finished)
}

/// Replaces whatever is at `path` with a journal holding only `header`.
fn start(path: &Path, header: &Header) -> Result<(), Error> {
    let mut line = serde_json::to_vec(header).map_err(|e| write_err(path, e))?;
    line.push(b'\n');
    let mut f = File::create(path).map_err(io_err(path))?;
    f.write_all(&line)
        .and_then(|()| f.sync_data())
        .map_err(io_err(path))
}

fn short(fingerprint: &str) -> &str {
    fingerprint.get(..12).unwrap_or(fingerprint)
}

/// The first Ctrl-C lets the runs in progress finish and be recorded; a second one quits at once.
fn install_ctrlc() {
    let set = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::Relaxed) {
            std::process::exit(130);
        }
        eprintln!("\nrecoup: stopping after the runs in progress (Ctrl-C again to quit now)");
    });
    if let Err(e) = set {
        tracing::warn!("no Ctrl-C handler ({e}): an interrupted sweep loses its runs in progress");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Vec<Scenario> {
        let src = format!(
            "duration = \"1s\"\nrepetitions = 2\n[path]\nrtt = \"20ms\"\nrate = \"10Mbps\"\n\
             [app]\nkind = \"live\"\n[[policy]]\nname = \"arq\"\n{extra}"
        );
        recoup_sim::scenario::load_str(&src, "p.toml", None, "p").expect("plan")
    }

    #[test]
    fn fingerprint_ignores_seeds_only() {
        let base = fingerprint(&plan(""));
        let mut more = plan("");
        more[0].repetitions = 7;
        more[0].seed = 3;
        assert_eq!(fingerprint(&more), base);
        assert_ne!(fingerprint(&plan("[transport]\ncc = \"newreno\"\n")), base);
        assert_ne!(
            fingerprint(&plan("[sweep]\n\"path.rtt\" = [\"20ms\", \"40ms\"]\n")),
            base
        );
        assert_eq!(base.len(), 64);
    }

    #[test]
    fn journal_keeps_whole_lines_and_cuts_a_partial_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(JOURNAL);
        let scenarios = plan("");
        let header = Header {
            recoup_sweep: VERSION,
            fingerprint: fingerprint(&scenarios),
            plan: "p.toml".into(),
        };
        assert!(open_journal(&path, &header, &scenarios, false)
            .expect("new")
            .is_empty());
        let row =
            recoup_sim::run::run_one(&scenarios[0], &scenarios[0].policies[0], 2).expect("one run");
        let entry = Entry {
            point: 0,
            scenario: scenarios[0].name.clone(),
            row: row.clone(),
        };
        let line = serde_json::to_string(&entry).expect("json");
        let mut f = append(&path).expect("append");
        writeln!(f, "{line}").expect("write");
        write!(f, "{}", &line[..line.len() / 2]).expect("write");
        drop(f);
        let done = open_journal(&path, &header, &scenarios, false).expect("reopen");
        assert_eq!(done.len(), 1);
        assert_eq!(done[&(0, 0, 2)], row, "read back bit for bit");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.ends_with(&format!("{line}\n")), "partial line cut off");

        let other = Header {
            fingerprint: "0".repeat(64),
            ..header
        };
        let e = open_journal(&path, &other, &scenarios, false)
            .expect_err("other plan")
            .to_string();
        assert!(e.contains("different plan") && e.contains("--force"), "{e}");
        assert!(open_journal(&path, &other, &scenarios, true)
            .expect("forced")
            .is_empty());
    }
}
