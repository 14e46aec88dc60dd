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
