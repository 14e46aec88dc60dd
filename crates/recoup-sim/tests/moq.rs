//! The MoQ workload end to end: no byte of an object leaves the publisher after the object's
//! delivery deadline, counted in the server's qlog, whatever the recovery policy (one that
//! sends copies included).

use std::collections::BTreeMap;
use std::time::Duration;

use recoup_apps::moq::{MoqConfig, MoqSchedule};
use recoup_elements::element_rng;
use recoup_sim::app::AppSpec;
use recoup_sim::run::{qlog_file_name, run_one_with_outputs, RunOutputs};
use recoup_sim::scenario::{load_str, Scenario};
use recoup_time::Instant;
use recoup_transport::qlog::VantagePoint;

/// A 4 Mbit/s broadcast of two tracks through 5 % loss each way at 100 ms RTT, with a 250 ms
/// delivery deadline: retransmissions of a lost retransmission come too late, so groups are
/// reset, while most objects still arrive.
fn scenario() -> Scenario {
    let text = r#"
        name = "moq"
        duration = "8s"
        repetitions = 1
        [path]
        rtt = "100ms"
        rate = "12Mbps"
        queue = "droptail packets=100"
        loss = "bernoulli 5%"
        [app]
        kind = "moq"
        tracks = 2
        bitrate = "4Mbps"
        fps = 30
        gop = 15
        deadline = "250ms"
        [transport]
        cc = "bbr"
        [[policy]]
        name = "arq"
        [[policy]]
        name = "draft-wu"
        [[policy]]
        name = "fixed"
        params = "2"
    "#;
    load_str(text, "moq.toml", None, "moq")
        .expect("scenario")
        .remove(0)
}

/// Per server stream id: each object's end offset on it and its deadline, in stream order.
fn layout(config: &MoqConfig, duration: Duration, seed: u64) -> BTreeMap<u64, Vec<(u64, Instant)>> {
    let mut schedule = MoqSchedule::new(
        config,
        Instant::ZERO,
        duration,
        element_rng(seed, "app/moq"),
    );
    let mut streams: BTreeMap<u64, Vec<(u64, Instant)>> = BTreeMap::new();
    while let Some(o) = schedule.next_due(Instant::MAX) {
        // The server's i-th unidirectional stream (RFC 9000 §2.1: type 0x3).
        let objects = streams.entry(4 * o.stream + 3).or_default();
        let end = objects.last().map_or(0, |&(end, _)| end) + o.wire_len();
        objects.push((end, o.deadline));
    }
    streams
}

struct Sends {
    stream_frames: u64,
    after_deadline: u64,
    resets: u64,
    first_late: Option<String>,
}

fn count(qlog: &std::path::Path, layout: &BTreeMap<u64, Vec<(u64, Instant)>>) -> Sends {
    let text = std::fs::read(qlog).expect("qlog");
    let mut sends = Sends {
        stream_frames: 0,
        after_deadline: 0,
        resets: 0,
        first_late: None,
    };
    for record in text.split(|&b| b == 0x1e).filter(|r| !r.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(record).expect("JSON record");
        if v["name"] != "transport:packet_sent" {
            continue;
        }
        let ms = v["time"].as_f64().expect("time");
        let at = Instant::ZERO + Duration::from_secs_f64(ms / 1e3);
        for f in v["data"]["frames"].as_array().into_iter().flatten() {
            match f["frame_type"].as_str() {
                Some("reset_stream") => sends.resets += 1,
                Some("stream") => {
                    let id = f["stream_id"].as_u64().expect("stream_id");
                    let offset = f["offset"].as_u64().expect("offset");
                    let objects = layout.get(&id).expect("a stream the publisher opened");
                    sends.stream_frames += 1;
                    // The object holding the frame's first byte (a bare FIN: the last one).
                    let i = objects.partition_point(|&(end, _)| end <= offset);
                    let (_, deadline) = objects[i.min(objects.len() - 1)];
                    if at > deadline {
                        sends.after_deadline += 1;
                        sends.first_late.get_or_insert_with(|| {
                            format!("{f} at {ms} ms, deadline {deadline:?}")
                        });
                    }
                }
                _ => {}
            }
        }
    }
    sends
}

#[test]
fn no_object_is_sent_after_its_deadline() {
    let sc = scenario();
    let AppSpec::Moq(config) = sc.app else {
        panic!("a moq scenario")
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = 5;
    let layout = layout(&config, sc.duration, seed);
    for policy in &sc.policies {
        let row = run_one_with_outputs(
            &sc,
            policy,
            seed,
            RunOutputs {
                qlog_dir: Some(dir.path()),
                ..RunOutputs::default()
            },
        )
        .expect("run");
        assert_eq!(row.app_error, None, "{}", policy.label);
        let qlog = dir.path().join(qlog_file_name(
            &sc.name,
            &policy.label,
            seed,
            VantagePoint::Server,
        ));
        let sends = count(&qlog, &layout);
        eprintln!(
            "{}: {} stream frames, {} resets, objects late {:?} dropped {:?}, delay {:?} ms, \
             copies {}",
            policy.label,
            sends.stream_frames,
            sends.resets,
            row.objects_late,
            row.objects_dropped,
            row.object_delay_ms,
            row.copies_sent
        );
        assert!(
            sends.stream_frames > 1000,
            "{}: too little sent",
            policy.label
        );
        assert_eq!(
            sends.after_deadline, 0,
            "{}: stream data sent after its object's deadline, first {:?}",
            policy.label, sends.first_late
        );
        assert!(
            sends.resets > 0,
            "{}: no group missed its deadline",
            policy.label
        );
        assert!(
            row.objects_dropped.is_some_and(|d| d > 0),
            "{}",
            policy.label
        );
        if policy.name != "arq" {
            assert!(row.copies_sent > 0, "{}: no copies to check", policy.label);
        }
    }
}
