//! Speed work must not change results: `recoup run` of fixed-seed scenarios writes a runs.csv
//! byte-equal to the one main's code wrote before the simulator optimisations of issue 16
//! (`tests/results_unchanged/*.runs.csv`). A difference means an optimisation changed what the
//! simulator computes; regenerate an expected file only for a change that is meant to alter
//! results, and say why in the commit.
//!
//! Regenerate: `recoup run tests/results_unchanged/NAME.toml --out DIR --jobs 1` and copy
//! DIR/runs.csv to `tests/results_unchanged/NAME.runs.csv`.

use std::path::Path;
use std::process::Command;

fn check(name: &str) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/results_unchanged");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let res = Command::new(env!("CARGO_BIN_EXE_recoup"))
        .arg("run")
        .arg(data.join(format!("{name}.toml")))
        .arg("--out")
        .arg(&out)
        .args(["--jobs", "1"])
        .output()
        .expect("run recoup");
    assert!(
        res.status.success(),
        "recoup run {name} failed:\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let got = std::fs::read_to_string(out.join("runs.csv")).expect("runs.csv written");
    let want = std::fs::read_to_string(data.join(format!("{name}.runs.csv")))
        .expect("expected runs.csv checked in");
    if got != want {
        let diff: Vec<String> = want
            .lines()
            .zip(got.lines())
            .enumerate()
            .filter(|(_, (w, g))| w != g)
            .map(|(i, (w, g))| format!("line {}:\n  want {w}\n  got  {g}", i + 1))
            .collect();
        panic!(
            "{name}: runs.csv differs from the expected file ({} vs {} lines):\n{}",
            got.lines().count(),
            want.lines().count(),
            diff.join("\n")
        );
    }
}

#[test]
fn default_scenario_all_policies_runs_csv_is_unchanged() {
    check("default-short");
}

#[test]
fn bulk_transfer_runs_csv_is_unchanged() {
    check("bulk-short");
}
