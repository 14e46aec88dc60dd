//! Speed work must not change results: `recoup run` of fixed-seed scenarios writes a runs.csv
//! byte-equal to the one main's code wrote before the simulator's speed work
//! (`tests/results_unchanged/*.runs.csv`). A difference means an optimisation changed what the
//! simulator computes; regenerate an expected file only for a change that is meant to alter
//! results, and say why in the commit.
//!
//! Regenerate: `recoup run tests/results_unchanged/NAME.toml --out DIR --jobs 1` and copy
//! DIR/runs.csv to `tests/results_unchanged/NAME.runs.csv`.
//!
//! The simulator protects packets with a keyed checksum (`[transport] protection = "null"`, the
//! default) rather than AES-GCM; that is acceptable only if every result column is the same
//! with real protection on the same seeds, so each scenario also runs with `protection = "aead"`
//! against the same file (the expected files were written with AES-GCM).

use std::path::Path;
use std::process::Command;

/// Runs scenario `name`, with `[transport] protection` set to `protection` if given, and
/// compares its runs.csv with the expected file.
fn check(name: &str, protection: Option<&str>) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/results_unchanged");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let mut scenario = data.join(format!("{name}.toml"));
    if let Some(protection) = protection {
        let text = std::fs::read_to_string(&scenario).expect("scenario readable");
        assert!(
            text.contains("\n[transport]\n"),
            "{name} has a [transport] table"
        );
        let text = text.replace(
            "\n[transport]\n",
            &format!("\n[transport]\nprotection = \"{protection}\"\n"),
        );
        scenario = dir.path().join(format!("{name}.toml"));
        std::fs::write(&scenario, text).expect("scenario written");
    }
    let res = Command::new(env!("CARGO_BIN_EXE_recoup"))
        .arg("run")
        .arg(&scenario)
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
            "{name} (protection {protection:?}): runs.csv differs from the expected file ({} vs {} lines):\n{}",
            got.lines().count(),
            want.lines().count(),
            diff.join("\n")
        );
    }
}

#[test]
fn default_scenario_all_policies_runs_csv_is_unchanged() {
    check("default-short", None);
}

#[test]
fn bulk_transfer_runs_csv_is_unchanged() {
    check("bulk-short", None);
}

#[test]
fn gaming_with_fec_and_copies_runs_csv_is_unchanged() {
    check("gaming-short", None);
}

#[test]
fn every_result_column_is_the_same_with_real_packet_protection() {
    for name in ["default-short", "bulk-short", "gaming-short"] {
        check(name, Some("aead"));
    }
}
