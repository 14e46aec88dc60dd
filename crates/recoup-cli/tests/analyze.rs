//! `recoup run --qlog` and `recoup analyze` as a user runs them.

use std::process::Command;

fn recoup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_recoup"))
}

const SCENARIO: &str = r#"
name = "qa"
seed = 1
repetitions = 1
duration = "3s"
[path]
rtt = "60ms"
rate = "12Mbps"
queue = "droptail packets=100"
loss = "bernoulli 5%"
[app]
kind = "live"
bitrate = "4Mbps"
fps = 30
[[policy]]
name = "arq"
"#;

fn csv_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

#[test]
fn run_writes_qlog_that_analyze_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("qa.toml");
    std::fs::write(&scenario, SCENARIO).expect("write scenario");
    let out = dir.path().join("out");
    let res = recoup()
        .arg("run")
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .arg("--qlog")
        .output()
        .expect("run recoup");
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let server = out.join("qlog/qa-arq-1-server.sqlog");
    let client = out.join("qlog/qa-arq-1-client.sqlog");
    assert!(server.is_file() && client.is_file(), "qlog files missing");

    let an = out.join("an");
    let res = recoup()
        .arg("analyze")
        .arg(&server)
        .arg("--out")
        .arg(&an)
        .output()
        .expect("run recoup");
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("qa-arq-1-server.sqlog")),
        "{stdout}"
    );
    let rows = csv_rows(&std::fs::read_to_string(an.join("analyze.csv")).expect("csv"));
    let header = &rows[0];
    for col in [
        "file",
        "format",
        "policy",
        "lost_ranges",
        "recovery_latency_multi_ms",
        "deterioration_rate",
        "redundancy_cost",
        "n_max",
        "k_max",
        "off_mode_ms_per_s",
        "off_mode_entries_per_s",
    ] {
        assert!(header.iter().any(|h| h == col), "no {col} in {header:?}");
    }
    assert_eq!(rows.len(), 2, "one row per file");
    let get = |rows: &[Vec<String>], col: &str| {
        let i = rows[0].iter().position(|h| h == col).expect("column");
        rows[1][i].clone()
    };
    assert_eq!(get(&rows, "format"), "recoup");
    // The simulator's own row for the same run.
    let runs = csv_rows(&std::fs::read_to_string(out.join("runs.csv")).expect("runs"));
    for col in [
        "lost_ranges",
        "copies_sent",
        "n_max",
        "k_max",
        "recovery_latency_ms",
    ] {
        assert_eq!(get(&rows, col), get(&runs, col), "{col}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(an.join("analyze.json")).expect("json"))
            .expect("valid json");
    assert_eq!(json[0]["format"], "recoup");

    // The receiver's trace and a broken file: errors that name the file, no panic.
    let res = recoup().arg("analyze").arg(&client).output().expect("run");
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(!res.status.success());
    assert!(
        stderr.contains("qa-arq-1-client.sqlog") && stderr.contains("sender"),
        "{stderr}"
    );
    let bad = dir.path().join("bad.qlog");
    std::fs::write(&bad, "{\"traces\": [{\"events\": [\n  {\"time\": 1,,}]}]}").expect("write");
    let res = recoup().arg("analyze").arg(&bad).output().expect("run");
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(!res.status.success());
    assert!(
        stderr.contains("bad.qlog: line 2:") && !stderr.contains("panicked"),
        "{stderr}"
    );
}
