//! `recoup run --losses`: the loss records a run writes are the lost ranges its row counts, with
//! the rounds, sends and latencies the row's maxima and means come from, and writing them does
//! not change the run.

use recoup_sim::metrics::{LossRecord, RunRow};
use recoup_sim::run::{losses_file_name, run_one, run_one_with_outputs, RunOutputs};
use recoup_sim::scenario::load_str;

#[test]
fn loss_records_are_the_rows_lost_ranges_and_leave_the_run_unchanged() {
    let text = r#"
        name = "losses 8%"
        duration = "6s"
        repetitions = 1
        [path]
        rtt = "60ms"
        rate = "12Mbps"
        queue = "droptail packets=100"
        loss = "bernoulli 8%"
        [app]
        kind = "file"
        size = "2MB"
        [transport]
        cc = "bbr"
        [[policy]]
        name = "arq"
        [[policy]]
        name = "art"
    "#;
    let scenario = load_str(text, "losses.toml", None, "losses")
        .expect("scenario")
        .remove(0);
    let dir = tempfile::tempdir().expect("tempdir");
    for policy in &scenario.policies {
        let seed = 3;
        let outputs = RunOutputs {
            losses_dir: Some(dir.path()),
            ..RunOutputs::default()
        };
        let row = run_one_with_outputs(&scenario, policy, seed, outputs).expect("run");
        let plain = run_one(&scenario, policy, seed).expect("run");
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            serde_json::to_string(&plain).unwrap(),
            "{}: writing loss records changed the run",
            policy.label
        );

        let name = losses_file_name(&scenario.name, &policy.label, seed);
        assert_eq!(name, format!("losses_8_-{}-3.csv", policy.label));
        let mut reader = csv::Reader::from_path(dir.path().join(&name)).expect("loss records");
        let records: Vec<LossRecord> = reader
            .deserialize()
            .collect::<Result<_, _>>()
            .expect("parse");
        check(&row, &records, &policy.label);
    }
}

fn check(row: &RunRow, records: &[LossRecord], policy: &str) {
    assert!(
        records.len() > 20,
        "{policy}: only {} lost ranges",
        records.len()
    );
    assert_eq!(records.len() as u64, row.lost_ranges, "{policy}");
    let n_max = records.iter().map(|r| r.rounds).max().unwrap_or(0);
    let k_max = records.iter().map(|r| r.sends).max().unwrap_or(0);
    assert_eq!((n_max, k_max), (row.n_max, row.k_max), "{policy}");
    let mean = records.iter().map(|r| r.recovery_latency_ms).sum::<f64>() / records.len() as f64;
    let want = row.recovery_latency_ms.expect("mean recovery latency");
    assert!((mean - want).abs() < 1e-6, "{policy}: {mean} != {want}");
    for r in records {
        assert!(r.start < r.end, "{policy}: {r:?}");
        assert!(
            r.first_sent_ms <= r.first_detected_ms
                && r.first_sent_ms <= r.recovered_by_sent_ms
                && r.recovered_by_sent_ms <= r.completed_ms,
            "{policy}: times out of order: {r:?}"
        );
        assert!(r.rounds >= 1 && r.sends >= r.rounds, "{policy}: {r:?}");
    }
}
