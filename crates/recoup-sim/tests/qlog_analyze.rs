//! `recoup analyze` against the simulator: the metrics rebuilt from a run's server qlog equal
//! those the simulator computed from the transport's own lineage records.

use recoup_sim::metrics::RunRow;
use recoup_sim::qlog_analyze::{analyze_file, Format, DEFAULT_OFF_GAP};
use recoup_sim::run::{qlog_file_name, run_one, run_one_with_outputs, RunOutputs};
use recoup_sim::scenario::{load_str, Scenario};
use recoup_sim::Error;
use recoup_transport::qlog::VantagePoint;

/// A short live stream over a lossy path: enough lost ranges, retransmission losses and (for
/// autorec) copies to exercise every column.
fn scenario() -> Scenario {
    let text = r#"
        name = "qlog"
        duration = "6s"
        repetitions = 1
        [path]
        rtt = "60ms"
        rate = "12Mbps"
        queue = "droptail packets=100"
        loss = "bernoulli 8%"
        [app]
        kind = "live"
        bitrate = "4Mbps"
        fps = 30
        [transport]
        cc = "bbr"
        [[policy]]
        name = "arq"
        [[policy]]
        name = "autorec"
        params = "alpha=30ms,beta=0.3,gamma=0.2"
    "#;
    load_str(text, "qlog.toml", None, "qlog")
        .expect("scenario")
        .remove(0)
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        // Sums over ranges in another order differ in the last bits only.
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
        _ => false,
    }
}

/// The columns a sender's trace determines (goodput and the application columns need the
/// receiving application).
const FROM_TRACE: &[&str] = &[
    "lost_ranges",
    "t_unit_ms",
    "recovery_latency_ms",
    "recovery_latency_p95_ms",
    "recovery_latency_max_ms",
    "recovery_latency_multi_ms",
    "deterioration_rate",
    "redundancy_cost",
    "copies_sent",
    "loss_rate",
    "n_max",
    "k_max",
    "bandwidth_cost",
    "lost_ranges_multi",
    "recovery_latency_multi_p95_ms",
    "recovery_latency_multi_max_ms",
    "packets_sent",
    "retransmissions_sent",
];

fn metric(row: &RunRow, name: &str) -> Option<f64> {
    row.metrics()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .1
}

#[test]
fn analyze_of_the_server_qlog_equals_the_simulator_metrics() {
    let sc = scenario();
    let dir = tempfile::tempdir().expect("tempdir");
    for policy in &sc.policies {
        let seed = 3;
        let sim = run_one_with_outputs(
            &sc,
            policy,
            seed,
            RunOutputs {
                qlog_dir: Some(dir.path()),
                ..RunOutputs::default()
            },
        )
        .expect("run");
        assert_eq!(sim.app_error, None);
        let plain = run_one(&sc, policy, seed).expect("run");
        assert_eq!(
            serde_json::to_string(&sim).expect("json"),
            serde_json::to_string(&plain).expect("json"),
            "{}: writing qlog changed the run",
            policy.label
        );
        let server = dir.path().join(qlog_file_name(
            &sc.name,
            &policy.label,
            seed,
            VantagePoint::Server,
        ));
        let a = analyze_file(&server, &policy.label, DEFAULT_OFF_GAP).expect("analyze");
        assert_eq!(a.format, Format::Recoup);
        assert_eq!(a.vantage.as_deref(), Some("server"));
        eprintln!(
            "{}: lost {} multi {} copies {} k_max {} n_max {}; off-mode {:?} ms/s, {:?}/s",
            policy.label,
            sim.lost_ranges,
            sim.lost_ranges_multi,
            sim.copies_sent,
            sim.k_max,
            sim.n_max,
            a.off_mode.ms_per_s(),
            a.off_mode.entries_per_s()
        );
        assert!(sim.lost_ranges > 20, "too little loss to compare");
        assert!(sim.lost_ranges_multi > 0, "no retransmission was lost");
        if policy.name == "autorec" {
            assert!(sim.copies_sent > 0, "autorec sent no copies");
        }
        let differ: Vec<String> = FROM_TRACE
            .iter()
            .map(|&name| (name, metric(&sim, name), metric(&a.row, name)))
            .filter(|(_, s, q)| !close(*s, *q))
            .map(|(name, s, q)| format!("{name}: simulator {s:?}, analyze {q:?}"))
            .collect();
        assert!(differ.is_empty(), "{}: {differ:#?}", policy.label);
        assert_eq!(a.row.goodput_mbps, None);
        // A live stream at 4 Mbit/s and 30 fps idles between frames.
        assert!(a.off_mode.entries_per_s().is_some_and(|n| n > 10.0));
        let client = dir.path().join(qlog_file_name(
            &sc.name,
            &policy.label,
            seed,
            VantagePoint::Client,
        ));
        match analyze_file(&client, &policy.label, DEFAULT_OFF_GAP) {
            Err(Error::Receiver { vantage, .. }) => assert_eq!(vantage, "client"),
            other => panic!("client trace: {other:?}"),
        }
    }
}
