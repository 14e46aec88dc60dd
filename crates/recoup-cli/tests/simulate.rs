//! `recoup compare` and `recoup run` as a user runs them: the binary, its stdout and files.

use std::process::Command;

const POLICIES: [&str; 5] = ["arq", "or3", "art", "too", "autorec"];

/// DESIGN.md "Result columns": every tool reads these names.
const COLUMNS: [&str; 21] = [
    "policy",
    "seed",
    "lost_ranges",
    "t_unit_ms",
    "recovery_latency_ms",
    "recovery_latency_p95_ms",
    "recovery_latency_max_ms",
    "recovery_latency_multi_ms",
    "deterioration_rate",
    "redundancy_cost",
    "copies_sent",
    "goodput_mbps",
    "goodput_reduction",
    "loss_rate",
    "n_max",
    "k_max",
    "fct_ms",
    "freezes_per_100s",
    "frozen_ms_per_100s",
    "deadline_miss_rate",
    "bandwidth_cost",
];

fn recoup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_recoup"))
}

#[test]
fn compare_prints_every_policy_and_writes_result_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("cmp");
    let res = recoup()
        .args(["compare", "--seeds", "1", "--duration", "5s", "--out"])
        .arg(&out)
        .output()
        .expect("run recoup");
    let stdout = String::from_utf8_lossy(&res.stdout);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("policy "))
        .unwrap_or_else(|| panic!("no table header in:\n{stdout}"));
    for p in POLICIES {
        assert!(
            lines[header + 1..]
                .iter()
                .any(|l| l.split_whitespace().next() == Some(p)),
            "policy {p} missing from:\n{stdout}"
        );
    }

    let runs = std::fs::read_to_string(out.join("runs.csv")).expect("runs.csv");
    let head: Vec<&str> = runs.lines().next().expect("header").split(',').collect();
    assert_eq!(head[0], "scenario");
    for c in COLUMNS {
        assert!(head.contains(&c), "runs.csv lacks column {c}: {head:?}");
    }
    // One row per policy (one seed), plus the header.
    assert_eq!(runs.lines().count(), 1 + POLICIES.len());

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("runs.json")).expect("runs.json"))
            .expect("runs.json parses");
    let rows = json.as_array().expect("array of runs");
    assert_eq!(rows.len(), POLICIES.len());
    for c in COLUMNS.iter().chain(&["scenario"]) {
        assert!(rows[0].get(c).is_some(), "runs.json lacks {c}");
    }

    let summary = std::fs::read_to_string(out.join("summary.csv")).expect("summary.csv");
    assert!(summary.starts_with("scenario,policy,metric,n,mean,"));
    assert!(summary.contains(",autorec,recovery_latency_multi_ms,"));
    assert!(out.join("summary.json").is_file());
    for f in ["runs.csv", "runs.json", "summary.csv", "summary.json"] {
        assert!(stdout.contains(&format!("wrote {}", out.join(f).display())));
    }
}

#[test]
fn run_rejects_an_unknown_key_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "name = \"bad\"\nduration = \"5s\"\nbogus_knob = 3\n[[policy]]\nname = \"arq\"\n",
    )
    .expect("write scenario");
    let res = recoup()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .expect("run recoup");
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.starts_with("recoup: "), "stderr: {stderr}");
    assert!(stderr.contains("bogus_knob"), "stderr: {stderr}");
    assert!(stderr.contains("bad.toml:3:"), "no file:line in: {stderr}");
    assert!(!dir.path().join("out").exists(), "nothing written on error");
}

/// A two-point sweep of two policies: 8 runs of 2 s with two seeds.
const GRID: &str = r#"name = "grid"
seed = 1
repetitions = 2
duration = "2s"

[path]
rtt = "40ms"
rate = "12Mbps"
queue = "droptail packets=100"
loss = "bernoulli 5%"

[app]
kind = "live"
bitrate = "2Mbps"
fps = 30

[transport]
cc = "bbr"

[[policy]]
name = "arq"

[[policy]]
name = "autorec"
params = "alpha=30ms,beta=0.3,gamma=0.2"

[sweep]
"path.rtt" = ["20ms", "60ms"]
"#;

/// Runs recoup with `args`, asserting success; returns stdout.
fn ok(args: &[&std::ffi::OsStr]) -> String {
    let res = recoup().args(args).output().expect("run recoup");
    let stdout = String::from_utf8_lossy(&res.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        res.status.success(),
        "recoup {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

/// Runs recoup with `args`, asserting it fails with a message; returns stderr.
fn fails(args: &[&std::ffi::OsStr]) -> String {
    let res = recoup().args(args).output().expect("run recoup");
    let stderr = String::from_utf8_lossy(&res.stderr).into_owned();
    assert_eq!(
        res.status.code(),
        Some(1),
        "recoup {args:?}\nstderr:\n{stderr}"
    );
    assert!(stderr.starts_with("recoup: "), "stderr: {stderr}");
    stderr
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const RESULT_FILES: [&str; 4] = ["runs.csv", "runs.json", "summary.csv", "summary.json"];

/// `recoup sweep PLAN --out DIR`, asserting success; returns stdout.
fn sweep(plan: &std::path::Path, out: &std::path::Path) -> String {
    ok(&[os("sweep"), plan.as_os_str(), os("--out"), out.as_os_str()])
}

/// Asserts that directories `a` and `b` hold the same result files.
fn assert_same_results(a: &std::path::Path, b: &std::path::Path, what: &str) {
    for f in RESULT_FILES {
        assert_eq!(read(&a.join(f)), read(&b.join(f)), "{f}: {what}");
    }
}

#[test]
fn sweep_resumed_after_interruption_gives_the_rows_of_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = dir.path().join("grid.toml");
    std::fs::write(&plan, GRID).expect("write plan");
    let (by_run, swept, resumed) = (
        dir.path().join("run"),
        dir.path().join("sweep"),
        dir.path().join("resumed"),
    );
    ok(&[os("run"), plan.as_os_str(), os("--out"), by_run.as_os_str()]);
    let out = sweep(&plan, &swept);
    assert!(
        out.contains("8 runs over 2 scenario point(s) (8 new)"),
        "{out}"
    );
    assert_same_results(&swept, &by_run, "sweep vs run");

    // An interruption: the journal keeps its header, half of the runs and part of a line.
    let journal = read(&swept.join("runs.jsonl"));
    let lines: Vec<&str> = journal.lines().collect();
    assert_eq!(
        lines.len(),
        1 + 8,
        "header and one line per run:\n{journal}"
    );
    assert!(lines[0].contains("\"fingerprint\""), "{}", lines[0]);
    let mut cut = lines[..5].join("\n");
    cut.push('\n');
    cut.push_str(&lines[5][..lines[5].len() / 2]);
    std::fs::create_dir(&resumed).expect("mkdir");
    std::fs::write(resumed.join("runs.jsonl"), cut).expect("write cut journal");
    let out = sweep(&plan, &resumed);
    assert!(out.contains("4 of 8 runs already done"), "{out}");
    assert!(out.contains("(4 new)"), "{out}");
    assert_same_results(&resumed, &swept, "resumed vs whole");
    let again = read(&resumed.join("runs.jsonl"));
    assert_eq!(again.lines().count(), 1 + 8, "{again}");
    assert!(again.starts_with(&lines[..5].join("\n")));

    // Finished: a rerun runs nothing and writes the same files.
    let out = sweep(&plan, &swept);
    assert!(
        out.contains("8 of 8 runs already done") && out.contains("(0 new)"),
        "{out}"
    );
    assert_same_results(&swept, &by_run, "after a rerun");
}

#[test]
fn sweep_adds_seeds_and_refuses_another_plan_unless_forced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = dir.path().join("grid.toml");
    let quick = GRID.replace("duration = \"2s\"", "duration = \"1s\"");
    std::fs::write(&plan, &quick).expect("write plan");
    let out_dir = dir.path().join("out");
    let args = [
        os("sweep"),
        plan.as_os_str(),
        os("--out"),
        out_dir.as_os_str(),
    ];
    let out = ok(&[&args[..], &[os("--seeds"), os("1")]].concat());
    assert!(out.contains("(4 new)"), "{out}");
    let out = ok(&args);
    assert!(
        out.contains("4 of 8 runs already done") && out.contains("(4 new)"),
        "{out}"
    );

    std::fs::write(&plan, quick.replace("\"60ms\"]", "\"80ms\"]")).expect("change plan");
    let before = read(&out_dir.join("runs.jsonl"));
    let err = fails(&args);
    assert!(
        err.contains("different plan") && err.contains("--force") && err.contains("runs.jsonl"),
        "{err}"
    );
    assert_eq!(
        read(&out_dir.join("runs.jsonl")),
        before,
        "refusal changes nothing"
    );
    let out = ok(&[&args[..], &[os("--force")]].concat());
    assert!(out.contains("(8 new)"), "{out}");
    let summary = read(&out_dir.join("summary.csv"));
    assert!(summary.contains("grid[path.rtt=80ms]"), "{summary}");
    assert!(!summary.contains("grid[path.rtt=60ms]"), "{summary}");
}

#[test]
fn plot_draws_bars_and_sweep_lines_and_names_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = dir.path().join("grid.toml");
    std::fs::write(
        &plan,
        GRID.replace("duration = \"2s\"", "duration = \"1s\""),
    )
    .expect("plan");
    let swept = dir.path().join("sweep");
    ok(&[
        os("sweep"),
        plan.as_os_str(),
        os("--out"),
        swept.as_os_str(),
        os("--seeds"),
        os("1"),
    ]);
    let single = dir.path().join("single.toml");
    let without_sweep = &GRID[..GRID.find("[sweep]").expect("sweep table")];
    std::fs::write(&single, without_sweep.replace("\"2s\"", "\"1s\"")).expect("plan");
    let point = dir.path().join("point");
    ok(&[
        os("run"),
        single.as_os_str(),
        os("--out"),
        point.as_os_str(),
        os("--seeds"),
        os("2"),
    ]);
    let png = |path: &std::path::Path| {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(data.starts_with(b"\x89PNG\r\n\x1a\n") && data.len() > 5_000);
    };

    let out = ok(&[os("plot"), point.as_os_str()]);
    assert!(out.contains("plot.png"), "{out}");
    png(&point.join("plot.png"));
    let out = ok(&[os("plot"), swept.as_os_str()]);
    assert!(out.contains("plot.png"), "{out}");
    png(&swept.join("plot.png"));
    let file = dir.path().join("rtt.png");
    ok(&[
        os("plot"),
        swept.as_os_str(),
        os("--x"),
        os("path.rtt"),
        os("--metric"),
        os("goodput_mbps"),
        os("--metric"),
        os("redundancy_cost"),
        os("--out"),
        file.as_os_str(),
    ]);
    png(&file);

    let err = fails(&[os("plot"), swept.as_os_str(), os("--metric"), os("latency")]);
    assert!(
        err.contains("unknown metric \"latency\"") && err.contains("deterioration_rate"),
        "{err}"
    );
    let err = fails(&[os("plot"), swept.as_os_str(), os("--x"), os("path.rate")]);
    assert!(
        err.contains("path.rate") && err.contains("its axes: path.rtt"),
        "{err}"
    );
    let err = fails(&[os("plot"), point.as_os_str(), os("--x"), os("path.rtt")]);
    assert!(err.contains("no sweep"), "{err}");
    let missing = dir.path().join("missing");
    let err = fails(&[os("plot"), missing.as_os_str()]);
    assert!(err.contains("no such results directory"), "{err}");
    let bad = dir.path().join("bad");
    std::fs::create_dir(&bad).expect("mkdir");
    let err = fails(&[os("plot"), bad.as_os_str()]);
    assert!(err.contains("summary.csv"), "{err}");
    std::fs::write(bad.join("summary.csv"), "policy,value\narq,1\n").expect("write");
    let err = fails(&[os("plot"), bad.as_os_str()]);
    assert!(err.contains("no column scenario"), "{err}");
    std::fs::write(
        bad.join("summary.csv"),
        read(&point.join("summary.csv")).replacen(",arq,lost_ranges,2,", ",arq,lost_ranges,2,x", 1),
    )
    .expect("write");
    let err = fails(&[os("plot"), bad.as_os_str()]);
    assert!(err.contains("line 2: column mean: not a number"), "{err}");
}

/// A `python3` first on PATH: `check` is what it answers to `-c` (the check that it imports
/// what Parquet needs), `write` to `-m recoup.tables` (shell exit codes), each failing as a
/// missing pyarrow does.
fn fake_python(dir: &std::path::Path, check: u8, write: u8) -> std::ffi::OsString {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = -c ]; then code={check}; else cat >/dev/null; code={write}; fi\n\
         [ $code = 0 ] || echo \"ModuleNotFoundError: No module named 'pyarrow'\" >&2\nexit $code\n"
    );
    let python = bin.join("python3");
    std::fs::write(&python, script).expect("write python3");
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path))).expect("PATH")
}

/// `--format parquet` without its writer fails before simulating, naming what is missing, and
/// writes nothing; if the writer fails after the run anyway, the rows are on disk.
#[test]
fn parquet_without_its_writer_loses_no_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = dir.path().join("single.toml");
    let without_sweep = &GRID[..GRID.find("[sweep]").expect("sweep table")];
    std::fs::write(&single, without_sweep).expect("plan");

    // `recoup run` with a python3 whose check and write exit as given; its output directory
    // and stderr, after checking that it failed.
    let run = |name: &str, check: u8, write: u8, formats: &str| {
        let out = dir.path().join(name);
        let res = recoup()
            .env(
                "PATH",
                fake_python(&dir.path().join(name).with_extension("bin"), check, write),
            )
            .args(["run", "--format", formats, "--out"])
            .arg(&out)
            .arg(&single)
            .output()
            .expect("run recoup");
        let stderr = String::from_utf8_lossy(&res.stderr).into_owned();
        assert_eq!(res.status.code(), Some(1), "stderr: {stderr}");
        (out, stderr)
    };

    let (out, stderr) = run("refused", 1, 1, "csv,parquet");
    for needed in ["--format parquet", "pyarrow", "nothing was run"] {
        assert!(stderr.contains(needed), "{needed:?} missing from: {stderr}");
    }
    assert!(!out.exists(), "nothing written before the check");

    let (out, stderr) = run("kept", 0, 1, "parquet,csv");
    let kept = out.join("runs.parquet-rows.json");
    assert!(
        stderr.contains(&kept.display().to_string()),
        "the error names where the rows are: {stderr}"
    );
    let rows: serde_json::Value = serde_json::from_str(&read(&kept)).expect("rows as JSON");
    assert_eq!(
        rows.as_array().map(Vec::len),
        Some(4),
        "2 policies x 2 seeds"
    );
    let csv = read(&out.join("runs.csv"));
    assert_eq!(
        csv.lines().count(),
        1 + 4,
        "CSV written before Parquet:\n{csv}"
    );
}
