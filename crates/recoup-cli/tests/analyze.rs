//! `recoup run --qlog --losses` and `recoup analyze` as a user runs them.

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
        .arg("--losses")
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
    // --losses: one row per lost range the run counted.
    let losses =
        csv_rows(&std::fs::read_to_string(out.join("losses/qa-arq-1.csv")).expect("losses"));
    assert!(losses[0].iter().any(|h| h == "rounds"), "{:?}", losses[0]);
    assert_eq!((losses.len() - 1).to_string(), get(&runs, "lost_ranges"));
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

/// A real aioquic trace: tests/interop/aioquic_lossy_qlog.py has an unmodified aioquic server
/// send 400 kB to an aioquic client over an in-memory path dropping 8 % of the server's
/// datagrams (seeded), on a virtual clock.
#[test]
fn analyze_reads_a_lossy_aioquic_server_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop/aioquic_lossy_qlog.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let res = Command::new(python)
        .arg(&script)
        .arg(dir.path())
        .args(["--seed", "1"])
        .output()
        .expect("run python3 (aioquic is needed, as for the interop tests)");
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let dropped: u64 = stdout
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no drop count in {stdout:?}"));
    eprintln!("{stdout}");
    let out = dir.path().join("an");
    let res = recoup()
        .arg("analyze")
        .arg(dir.path().join("server.qlog"))
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run recoup");
    let table = String::from_utf8_lossy(&res.stdout);
    eprintln!("{table}");
    assert!(
        res.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("analyze.json")).expect("json"))
            .expect("valid json");
    let row = &json[0];
    assert_eq!(row["format"], "aioquic");
    assert_eq!(row["vantage"], "server");
    let lost = row["lost_ranges"].as_u64().expect("lost_ranges");
    // Every dropped datagram carried one packet with stream data; aioquic declares (nearly)
    // all of them lost, each opening at least one lost range.
    assert!(
        lost >= dropped / 2 && lost <= 3 * dropped,
        "{lost} lost ranges for {dropped} drops"
    );
    // aioquic is plain ARQ: a retransmission per lost range at least (it splits some over
    // packets, and re-sends a lost part of a split retransmission alone), and next to no
    // copies: only a probe timeout re-sending data still in flight is one.
    let rtx = row["retransmissions_sent"].as_u64().expect("rtx");
    assert!(rtx >= lost / 2, "{rtx} retransmissions for {lost} ranges");
    let copies = row["copies_sent"].as_u64().expect("copies");
    assert!(copies * 20 <= rtx, "{copies} copies inferred for plain ARQ");
    assert!(row["n_max"].as_u64().expect("n_max") >= 1);
    let t_unit = row["t_unit_ms"].as_f64().expect("t_unit");
    // Loss detection takes at least the 60 ms round trip.
    assert!((60.0..1000.0).contains(&t_unit), "T_unit {t_unit} ms");
    let loss = row["loss_rate"].as_f64().expect("loss rate");
    assert!((0.02..0.2).contains(&loss), "loss rate {loss}");

    let res = recoup()
        .arg("analyze")
        .arg(dir.path().join("client.qlog"))
        .output()
        .expect("run recoup");
    assert!(!res.status.success(), "a receiver's trace must be refused");
}
