//! Scenario runs end to end: the built-in default scenario, shortened.

use std::time::Duration;

use recoup_sim::metrics::fill_baseline_columns;
use recoup_sim::run::{run_flows, run_one};
use recoup_sim::scenario::Scenario;

#[test]
fn default_scenario_runs_are_complete_deterministic_and_show_recovery() {
    let mut sc = Scenario::builtin_default();
    sc.duration = Duration::from_secs(10);
    let mut rows = Vec::new();
    for p in &sc.policies {
        let row = run_one(&sc, p, 1).expect("run");
        assert_eq!(row.app_error, None, "{}: application error", p.label);
        assert!(
            row.lost_ranges > 0,
            "{}: 5 % loss but nothing lost",
            p.label
        );
        let goodput = row.goodput_mbps.unwrap_or(0.0);
        assert!(goodput > 3.0, "{}: goodput {goodput} Mbit/s", p.label);
        rows.push(row);
    }
    let again = run_one(&sc, &sc.policies[4], 1).expect("run");
    assert_eq!(
        serde_json::to_string(&again).expect("json"),
        serde_json::to_string(&rows[4]).expect("json"),
        "same scenario and seed, different metrics"
    );
    fill_baseline_columns(&mut rows, "arq");
    for r in &rows {
        eprintln!(
            "{}: lost {} multi {:?} ms, cost {:?}, freezes/100s {:?}, goodput {:?} Mbit/s",
            r.policy,
            r.lost_ranges,
            r.recovery_latency_multi_ms,
            r.redundancy_cost,
            r.freezes_per_100s,
            r.goodput_mbps
        );
    }
}

#[test]
fn one_stream_per_frame_is_not_held_back_by_the_stream_limit() {
    // RTC opens a stream per frame (600 in 10 s): more than the 128 the peer grants at once, so
    // streams must be released as they complete for frames to keep flowing.
    let text = r#"
        name = "rtc"
        duration = "10s"
        repetitions = 1
        [path]
        rtt = "60ms"
        rate = "12Mbps"
        queue = "droptail packets=100"
        loss = "bernoulli 0%"
        [app]
        kind = "rtc"
        [[policy]]
        name = "arq"
    "#;
    let sc = recoup_sim::scenario::load_str(text, "rtc.toml", None, "rtc")
        .expect("scenario")
        .remove(0);
    let row = run_one(&sc, &sc.policies[0], 1).expect("run");
    assert_eq!(row.app_error, None);
    let miss = row.deadline_miss_rate.expect("rtc measures deadlines");
    assert!(miss < 0.1, "deadline miss rate {miss} on a clean path");
}

#[test]
fn rack_tlp_from_the_scenario_file_runs_and_changes_the_run() {
    let text = |loss_detection: &str| {
        format!(
            r#"
            duration = "5s"
            [path]
            rtt = "60ms"
            rate = "12Mbps"
            queue = "droptail packets=100"
            loss = "bernoulli 5%"
            [transport]
            cc = "bbr"
            loss_detection = "{loss_detection}"
            [[policy]]
            name = "autorec"
            "#
        )
    };
    let run = |loss_detection: &str| {
        let sc = recoup_sim::scenario::load_str(&text(loss_detection), "ld.toml", None, "ld")
            .expect("valid scenario")
            .remove(0);
        assert_eq!(sc.transport.loss_detection.name(), loss_detection);
        let row = run_one(&sc, &sc.policies[0], 3).expect("run");
        assert_eq!(row.app_error, None, "{loss_detection}: application error");
        assert!(row.lost_ranges > 0, "{loss_detection}: nothing lost");
        eprintln!(
            "{loss_detection}: lost {} t_unit {:?} ms multi {:?} ms cost {:?}",
            row.lost_ranges, row.t_unit_ms, row.recovery_latency_multi_ms, row.redundancy_cost
        );
        serde_json::to_string(&row).expect("json")
    };
    // Same seed, same losses on the wire: only the sender's loss detection differs.
    assert_ne!(
        run("rfc9002"),
        run("rack-tlp"),
        "rack-tlp gave the same run as rfc9002 (seed 3)"
    );
}

#[test]
fn the_receive_window_bounds_a_transfer_to_one_window_per_round_trip() {
    // 2 MB at 100 Mbit/s and 100 ms RTT: about 0.3 s with the default 8 MB window, while a
    // 64 KiB window lets at most 64 KiB through per round trip (flow control, RFC 9000 §4),
    // so at least 2 MB / 64 KiB = 30 round trips, 3 s.
    let fct = |window: &str| {
        let text = format!(
            r#"
            name = "rwnd"
            duration = "20s"
            [path]
            rtt = "100ms"
            rate = "100Mbps"
            queue = "droptail packets=1000"
            [app]
            kind = "file"
            size = "2MB"
            [transport]
            cc = "bbr"
            {window}
            "#
        );
        let sc = recoup_sim::scenario::load_str(&text, "rwnd.toml", None, "rwnd")
            .expect("scenario")
            .remove(0);
        let row = run_one(&sc, &sc.policies[0], 1).expect("run");
        assert_eq!(row.app_error, None);
        assert_eq!(row.transfers_incomplete, Some(0), "{window}");
        row.fct_ms.expect("a completed transfer has an FCT")
    };
    let small = fct("receive_window = \"64KiB\"");
    let default = fct("");
    assert!(small >= 3000.0, "64 KiB window: FCT {small} ms");
    assert!(default < 1500.0, "default window: FCT {default} ms");
}

#[test]
fn a_finished_file_transfer_measures_goodput_over_its_completion_time() {
    // 2 MB at 10 Mbit/s completes in about 1.7 s of a 10 s run: goodput near the link rate,
    // not 2 MB / 10 s = 1.6 Mbit/s.
    let text = r#"
        name = "file"
        duration = "10s"
        [path]
        rtt = "20ms"
        rate = "10Mbps"
        queue = "droptail packets=100"
        [app]
        kind = "file"
        size = "2MB"
        [[policy]]
        name = "arq"
    "#;
    let sc = recoup_sim::scenario::load_str(text, "file.toml", None, "file")
        .expect("scenario")
        .remove(0);
    let row = run_one(&sc, &sc.policies[0], 1).expect("run");
    assert_eq!(row.app_error, None);
    assert_eq!(row.transfers_incomplete, Some(0));
    let goodput = row.goodput_mbps.expect("goodput");
    let fct_s = row.fct_ms.expect("fct") / 1e3;
    assert!(
        goodput > 7.0 && goodput < 10.0,
        "goodput {goodput} Mbit/s, fct {fct_s} s"
    );
}

#[test]
fn fec_from_the_scenario_file_restores_lost_packets_and_costs_redundancy() {
    let text = |fec: &str| {
        format!(
            r#"
            duration = "5s"
            [path]
            rtt = "60ms"
            rate = "12Mbps"
            queue = "droptail packets=100"
            loss = "bernoulli 5%"
            [transport]
            cc = "bbr"
            {fec}
            [[policy]]
            name = "arq"
            "#
        )
    };
    let run = |fec: &str| {
        let sc = recoup_sim::scenario::load_str(&text(fec), "fec.toml", None, "fec")
            .expect("valid scenario")
            .remove(0);
        let row = run_one(&sc, &sc.policies[0], 2).expect("run");
        assert_eq!(row.app_error, None, "{fec}: application error");
        row
    };
    let plain = run("");
    let fec = run(r#"fec = "block:k=4,m=1""#);
    eprintln!(
        "arq: cost {:?}; block 4:1: cost {:?}, repairs {:?}, restored {:?} packets / {:?} bytes",
        plain.redundancy_cost,
        fec.redundancy_cost,
        fec.repair_packets,
        fec.fec_recovered_packets,
        fec.fec_recovered_bytes
    );
    assert_eq!(
        (plain.repair_packets, plain.fec_recovered_packets),
        (None, None)
    );
    assert!(fec.fec_recovered_packets.unwrap_or(0) > 0, "{fec:?}");
    // One repair per four source packets, and the live stream's idle gaps flush partial blocks.
    let cost = fec.redundancy_cost.unwrap_or(0.0);
    assert!(cost >= 0.25, "block 4:1 redundancy {cost}");
    let e =
        recoup_sim::scenario::load_str(&text(r#"fec = "block:k=200""#), "fec.toml", None, "fec")
            .expect_err("k beyond a repair frame's window");
    let e = e.to_string();
    assert!(
        e.contains("fec") && e.contains("200") && e.contains("1..=96"),
        "{e}"
    );
}

#[test]
fn every_fec_baseline_protects_a_call_byte_exact() {
    // A 5 s call at 10 % loss with each baseline: the receiver's frames check out (no
    // application error), repairs go out and some lost packets come back from them.
    for fec in ["webrtc14", "webrtc-now", "hairpin:lambda=1e-7", "tambur"] {
        let text = format!(
            r#"
            duration = "5s"
            [path]
            rtt = "30ms"
            rate = "12Mbps"
            queue = "droptail packets=100"
            [path.down]
            loss = "bernoulli 10%"
            [app]
            kind = "rtc"
            [transport]
            cc = "none"
            fec = "{fec}"
            [[policy]]
            name = "arq"
            "#
        );
        let sc = recoup_sim::scenario::load_str(&text, "fec.toml", None, "fec")
            .unwrap_or_else(|e| panic!("{fec}: {e}"))
            .remove(0);
        let row = run_one(&sc, &sc.policies[0], 2).expect("run");
        assert_eq!(row.app_error, None, "{fec}: application error");
        assert!(row.repair_packets.unwrap_or(0) > 0, "{fec}: no repair sent");
        assert!(
            row.fec_recovered_packets.unwrap_or(0) > 0,
            "{fec}: nothing restored from repairs"
        );
        eprintln!(
            "{fec}: repairs {:?} restored {:?} miss {:?} cost {:?}",
            row.repair_packets,
            row.fec_recovered_packets,
            row.deadline_miss_rate,
            row.bandwidth_cost
        );
    }
}

#[test]
fn flows_sharing_a_path_share_its_link_and_each_delivers_everything() {
    // 2 MB at 10 Mbit/s takes about 1.7 s alone; three such transfers through the same link
    // need about three times the link time, so together they cannot all finish that fast.
    let text = r#"
        name = "flows"
        duration = "15s"
        [path]
        rtt = "20ms"
        rate = "10Mbps"
        queue = "droptail packets=100"
        loss = "bernoulli 1%"
        [app]
        kind = "file"
        size = "2MB"
        [transport]
        cc = "bbr"
        [[policy]]
        name = "arq"
    "#;
    let sc = recoup_sim::scenario::load_str(text, "flows.toml", None, "flows")
        .expect("scenario")
        .remove(0);
    let alone = run_one(&sc, &sc.policies[0], 1).expect("run");
    let rows = run_flows(&sc, &sc.policies[0], 1, 3).expect("run");
    assert_eq!(rows.len(), 3);
    let one = serde_json::to_string(&run_flows(&sc, &sc.policies[0], 1, 1).expect("run")[0]);
    assert_eq!(
        one.expect("json"),
        serde_json::to_string(&alone).expect("json"),
        "one flow is run_one's run"
    );
    for r in &rows {
        assert_eq!(r.app_error, None);
        assert_eq!(r.transfers_incomplete, Some(0), "a flow did not finish");
        assert!(
            r.lost_ranges > 0,
            "1 % loss on the shared path, nothing lost"
        );
    }
    let fct_alone = alone.fct_ms.expect("fct");
    let slowest = rows
        .iter()
        .map(|r| r.fct_ms.expect("fct"))
        .fold(0.0, f64::max);
    assert!(
        slowest > 2.5 * fct_alone,
        "3 flows on one link: slowest FCT {slowest} ms, one flow alone {fct_alone} ms"
    );
    // Megabits delivered by all flows over the time the last one took: at most the link rate.
    let megabits: f64 = rows
        .iter()
        .map(|r| r.goodput_mbps.expect("goodput") * r.fct_ms.expect("fct") / 1e3)
        .sum();
    let rate = megabits / (slowest / 1e3);
    assert!(
        rate <= 10.0,
        "flows together above the link rate: {rate} Mbit/s"
    );
}

#[test]
fn a_run_needs_at_least_one_flow() {
    let sc = Scenario::builtin_default();
    let err = run_flows(&sc, &sc.policies[0], 1, 0).expect_err("zero flows");
    assert!(err.to_string().contains("not 0"), "{err}");
}

#[test]
fn a_vod_session_fetches_every_segment_and_its_bitrate_follows_the_link() {
    // Big Buck Bunny's ladder, 20 segments of 4 s, over 1 Mbit/s and over 20 Mbit/s: the fast
    // link plays near the top of the ladder, the slow one below 1 Mbit/s (the basic ABR keeps
    // 20 % headroom), and neither stalls once started with a 60 s buffer's worth of slack.
    let run = |rate: &str| {
        let text = format!(
            r#"
            name = "vod"
            duration = "200s"
            [path]
            rtt = "30ms"
            rate = "{rate}"
            queue = "droptail packets=100"
            [app]
            kind = "vod"
            segments = 20
            [[policy]]
            name = "arq"
        "#
        );
        let sc = recoup_sim::scenario::load_str(&text, "vod.toml", None, "vod")
            .expect("scenario")
            .remove(0);
        run_one(&sc, &sc.policies[0], 1).expect("run")
    };
    let slow = run("1Mbps");
    let fast = run("20Mbps");
    for row in [&slow, &fast] {
        assert_eq!(row.app_error, None);
        assert_eq!(row.segments_incomplete, Some(0));
        assert_eq!(row.rebuffers, Some(0));
        assert!(row.startup_delay_ms.is_some());
    }
    let (s, f) = (
        slow.vod_bitrate_kbps.expect("bitrate"),
        fast.vod_bitrate_kbps.expect("bitrate"),
    );
    assert!(s < 1000.0, "slow link: mean bitrate {s} kbit/s");
    assert!(f > 2000.0, "fast link: mean bitrate {f} kbit/s");
    assert!(fast.bitrate_switches.expect("switches") >= 1);
}

#[test]
fn a_vod_ladder_out_of_order_is_refused_naming_the_key() {
    let text = r#"
        name = "vod"
        [path]
        rtt = "30ms"
        rate = "10Mbps"
        [app]
        kind = "vod"
        ladder = ["1Mbps", "500kbps"]
        [[policy]]
        name = "arq"
    "#;
    let e = recoup_sim::scenario::load_str(text, "vod.toml", None, "vod")
        .expect_err("a ladder out of order")
        .to_string();
    assert!(
        e.contains("app.ladder") && e.contains("strictly ascending"),
        "{e}"
    );
}
