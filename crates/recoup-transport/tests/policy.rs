//! The loss-recovery hook in a real transfer: `fixed(R)` sends R copies per lost range and round,
//! the receiver still gets every byte once, congestion control sees fewer loss events than under
//! ARQ, `fixed(0)` is ARQ packet for packet; and the qlog trace of such a run.

mod common;

use std::time::Duration;

use common::{data, seed, Dir, NetConfig, Pair, SeedGuard, Sink};
use recoup_recovery::PolicySpec;
use recoup_time::Instant;
use recoup_transport::qlog::{QlogWriter, VantagePoint};
use recoup_transport::{ConnectionStats, CopiesBeyondCwnd, Recovered, TransportConfig};

struct Run {
    stats: ConnectionStats,
    recovered: Vec<Recovered>,
    trace: Vec<(Instant, Dir, usize, bool)>,
}

fn config(policy: &str) -> TransportConfig {
    TransportConfig {
        policy: policy.parse::<PolicySpec>().expect("policy spec"),
        record_recovery: true,
        ..TransportConfig::default()
    }
}

/// The client sends `len` bytes under `loss` with `policy`; the run continues until every lost
/// range's recovery is complete at the sender.
fn run(s: u64, policy: &str, loss: f64, len: usize) -> Run {
    run_paced(s, policy, loss, len, None)
}

/// Like [`run`]; with `app_rate`, the application writes `(bytes, every)` (a live stream that
/// leaves the congestion window room) instead of everything at once.
fn run_paced(
    s: u64,
    policy: &str,
    loss: f64,
    len: usize,
    app_rate: Option<(usize, Duration)>,
) -> Run {
    run_with(s, config(policy), loss, len, app_rate)
}

fn run_with(
    s: u64,
    config: TransportConfig,
    loss: f64,
    len: usize,
    app_rate: Option<(usize, Duration)>,
) -> Run {
    let policy = config.policy.to_string();
    let net = NetConfig {
        loss,
        ..NetConfig::default()
    };
    let mut p = Pair::new(s, net, config);
    p.handshake();
    let payload = data(len, s);
    let id = p.client_conn().open_stream(false).expect("open");
    let (mut written, mut fin) = (0, false);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut sid = None;
    let mut recovered = Vec::new();
    let start = p.now;
    let ok = p.run_until(Duration::from_secs(600), |p| {
        let now = p.now;
        let allowed = match app_rate {
            Some((bytes, every)) => {
                let ticks = ((now - start).as_nanos() / every.as_nanos()) as usize + 1;
                p.app_wakeup = Some(start + every * ticks as u32);
                (ticks * bytes).min(payload.len())
            }
            None => payload.len(),
        };
        let c = p.client_conn();
        while written < allowed {
            match c.stream_write(id, &payload[written..allowed]) {
                Ok(n) if n > 0 => written += n,
                _ => break,
            }
        }
        if written == payload.len() && !fin {
            fin = c.stream_finish(id).is_ok();
        }
        recovered.extend(c.drain_recovered());
        let lineages_open = c.open_lineages();
        let srv = p.server_conn().expect("server");
        sid = sid.or_else(|| srv.accept_stream(false));
        let mut done = false;
        if let Some(sid) = sid {
            while let Ok((n, f)) = srv.stream_read(sid, &mut buf) {
                got.extend_from_slice(&buf[..n]);
                done |= f;
                if f || n == 0 {
                    break;
                }
            }
        }
        (done || got.len() == payload.len()) && lineages_open == 0
    });
    assert!(ok, "{policy}: {} of {len} bytes", got.len());
    // Every byte once: not one missing, duplicated or changed.
    assert!(got == payload, "{policy}: received bytes differ");
    let stats = p.client_conn().stats();
    Run {
        stats,
        recovered,
        trace: p.trace,
    }
}

/// Checks the recovery records of a `fixed(2)` run; returns how many ranges had exactly two
/// copies behind each of their retransmissions.
fn check_fixed_two(r: &Run) -> usize {
    assert!(r.recovered.len() > 50, "{} lost ranges", r.recovered.len());
    let mut exact = 0;
    for rec in &r.recovered {
        let retransmissions = rec.sends - rec.copies;
        // One ARQ retransmission per round (the last round may end, acknowledged, before its
        // retransmission goes) and at most two copies behind each.
        assert!(retransmissions >= 1, "{rec:?}");
        assert!(
            retransmissions == rec.rounds || retransmissions + 1 == rec.rounds,
            "{rec:?}"
        );
        assert!(rec.copies <= 2 * retransmissions, "{rec:?}");
        if rec.copies == 2 * retransmissions {
            exact += 1;
        }
    }
    let st = r.stats;
    assert!(st.stream_bytes_copied > 0 && st.stream_bytes_retransmitted > 0);
    assert!(st.losses_hidden_from_cc > 0, "{st:?}");
    exact
}

/// A live stream (the window has room): every lost range goes out three times per round, one
/// ARQ retransmission and two copies, right after each other.
#[test]
fn fixed_two_sends_every_lost_range_three_times() {
    let s = seed(41);
    let _g = SeedGuard(s);
    // 500 kB/s with BBR, whose window random loss does not shrink: the copies never wait.
    let stream = Some((25_000, Duration::from_millis(50)));
    let config = TransportConfig {
        cc: recoup_transport::cc::CcAlgorithm::Bbr,
        ..config("fixed:2")
    };
    let r = run_with(s, config, 0.10, 2 * 1024 * 1024, stream);
    let exact = check_fixed_two(&r);
    let n = r.recovered.len();
    // Rarely the window is full for the length of a round trip and the acknowledgement of the
    // retransmission overtakes a copy.
    assert!(
        exact * 100 >= n * 97,
        "{exact} of {n} ranges: {:?}",
        r.stats
    );
    let single_round: Vec<_> = r.recovered.iter().filter(|rec| rec.rounds == 1).collect();
    assert!(
        single_round.len() * 10 >= n * 8,
        "most recover in one round"
    );
    let three = single_round
        .iter()
        .filter(|rec| (rec.sends, rec.copies) == (3, 2))
        .count();
    assert!(
        three * 100 >= single_round.len() * 97,
        "{three} of {}",
        single_round.len()
    );
    // Copies go one range per packet, as retransmissions do here: twice as many packets.
    let st = r.stats;
    let ratio = st.copy_packets as f64 / st.retransmission_packets as f64;
    assert!(
        (1.94..=2.0).contains(&ratio),
        "copies/retransmissions {ratio}: {st:?}"
    );
}

/// A bulk transfer under 10 % loss keeps the window small; copies still follow their
/// retransmission first, and only an early acknowledgement cuts a round short.
#[test]
fn fixed_two_in_a_window_limited_transfer() {
    let s = seed(45);
    let _g = SeedGuard(s);
    let r = run(s, "fixed:2", 0.10, 1024 * 1024);
    let exact = check_fixed_two(&r);
    let n = r.recovered.len();
    assert!(
        exact * 2 >= n,
        "{exact} of {n} ranges sent three times a round"
    );
}

/// Under CUBIC at 10 % loss the window is a few packets: by default the copies wait for it and
/// the counters say so; with `copies_beyond_cwnd = always` none waits and each retransmission
/// is followed by its two copies.
#[test]
fn copies_held_by_the_window_are_counted_and_always_lets_them_go() {
    let s = seed(46);
    let _g = SeedGuard(s);
    let len = 1024 * 1024;
    let held = run(s, "fixed:2", 0.10, len).stats;
    assert!(held.copies_held_by_cwnd > 0, "{held:?}");
    assert!(held.copies_held_by_cwnd <= held.copy_packets, "{held:?}");
    assert!(held.copy_cwnd_wait > Duration::ZERO, "{held:?}");
    let free = TransportConfig {
        copies_beyond_cwnd: CopiesBeyondCwnd::Always,
        ..config("fixed:2")
    };
    let free = run_with(s, free, 0.10, len, None).stats;
    assert_eq!(
        (free.copies_held_by_cwnd, free.held_copies_dropped),
        (0, 0),
        "{free:?}"
    );
    assert_eq!(free.copy_cwnd_wait, Duration::ZERO);
    let per_rtx = |st: &ConnectionStats| st.copy_packets as f64 / st.retransmission_packets as f64;
    assert!(
        per_rtx(&free) >= 1.9 && per_rtx(&free) > per_rtx(&held),
        "copies per retransmission: always {} vs policy {}",
        per_rtx(&free),
        per_rtx(&held)
    );
}

#[test]
fn copies_spare_congestion_control_loss_events() {
    let s = seed(42);
    let _g = SeedGuard(s);
    let len = 1024 * 1024;
    let arq = run(s, "arq", 0.10, len).stats;
    let fixed = run(s, "fixed:2", 0.10, len).stats;
    // Under ARQ every lost retransmission is a loss event; with two copies behind it, losing
    // the retransmission (an older send of the round) is hidden from congestion control.
    assert!(
        fixed.congestion_events < arq.congestion_events,
        "fixed:2 {} vs arq {} congestion events",
        fixed.congestion_events,
        arq.congestion_events
    );
    assert_eq!(arq.losses_hidden_from_cc, 0);
    assert_eq!(arq.copy_packets, 0);
}

#[test]
fn fixed_zero_is_arq_packet_for_packet() {
    let s = seed(43);
    let _g = SeedGuard(s);
    let len = 512 * 1024;
    let arq = run(s, "arq", 0.05, len);
    let fixed0 = run(s, "fixed:0", 0.05, len);
    assert!(arq.stats.retransmission_packets > 0);
    assert_eq!(fixed0.stats.copy_packets, 0);
    assert_eq!(arq.trace.len(), fixed0.trace.len());
    assert!(arq.trace == fixed0.trace, "fixed:0 and arq traces differ");
    assert_eq!(arq.stats, fixed0.stats);
}

/// A pair under `policy` and random `loss`, handshake done, with the client's qlog written to
/// the returned sink.
fn traced_pair(s: u64, loss: f64, policy: &str) -> (Pair, Sink) {
    let net = NetConfig {
        loss,
        ..NetConfig::default()
    };
    let mut p = Pair::new(s, net, config(policy));
    let sink = Sink::default();
    let now = p.now;
    p.client_conn().set_qlog(QlogWriter::new(
        Box::new(sink.clone()),
        VantagePoint::Client,
        now,
        0.0,
    ));
    p.handshake();
    (p, sink)
}

#[test]
fn qlog_of_a_lossy_run_with_copies() {
    let s = seed(44);
    let _g = SeedGuard(s);
    let (mut p, sink) = traced_pair(s, 0.05, "fixed:1");
    let payload = data(300_000, s);
    let id = p.client_conn().open_stream(false).expect("open");
    let written = p.client_conn().stream_write(id, &payload).expect("write");
    assert_eq!(written, payload.len());
    p.client_conn().stream_finish(id).expect("fin");
    let ok = p.run_until(Duration::from_secs(60), |p| {
        let c = p.client_conn();
        c.stream_buffered(id).0 == 0 && c.open_lineages() == 0
    });
    assert!(ok, "all acknowledged");
    let copies = p.client_conn().stats().copy_packets;
    assert!(copies > 0);

    let bytes = sink.0.lock().expect("lock").clone();
    // RFC 7464: every record starts with RS and ends with LF.
    assert_eq!(bytes.first(), Some(&0x1e));
    assert_eq!(bytes.last(), Some(&b'\n'));
    let records: Vec<serde_json::Value> = bytes
        .split(|&b| b == 0x1e)
        .skip(1)
        .map(|r| serde_json::from_slice(r).expect("each record is one JSON text"))
        .collect();
    assert_eq!(records[0]["qlog_format"], "JSON-SEQ");
    assert_eq!(records[0]["trace"]["vantage_point"]["type"], "client");
    let count = |name: &str| records.iter().filter(|r| r["name"] == name).count();
    let sent = count("transport:packet_sent");
    assert!(sent > 200, "{sent} packet_sent");
    assert!(count("transport:packet_received") > 50);
    assert!(count("recovery:packet_lost") > 0);
    assert!(count("recovery:metrics_updated") > 0);
    // The congestion controller's state rides along, so a trace shows why the window moved.
    assert!(records
        .iter()
        .filter(|r| r["name"] == "recovery:metrics_updated")
        .all(|r| r["data"]["recoup"]["cc_state"].is_string()));
    let marked = records
        .iter()
        .filter(|r| r["name"] == "transport:packet_sent" && r["data"]["recoup"]["kind"] == "copy")
        .count() as u64;
    assert_eq!(marked, copies, "every copy packet is marked");
    // Times are relative milliseconds and never go backwards.
    let times: Vec<f64> = records[1..]
        .iter()
        .map(|r| r["time"].as_f64().expect("time"))
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    assert!(times.iter().all(|&t| t >= 0.0));
    let lost = records
        .iter()
        .find(|r| r["name"] == "recovery:packet_lost")
        .expect("a loss");
    assert!(lost["data"]["header"]["packet_number"].is_u64());
}

/// Every policy drives a lossy transfer to a byte-exact end with all its lost ranges closed.
#[test]
fn every_policy_completes_a_lossy_transfer() {
    let s = seed(46);
    let _g = SeedGuard(s);
    for policy in [
        "arq", "fixed:1", "or3", "art", "art-mab", "autorec", "too", "draft-wu", "ladr-rrl",
    ] {
        let r = run(s, policy, 0.05, 300 * 1024);
        assert!(r.stats.packets_lost > 0, "{policy}");
        assert!(!r.recovered.is_empty(), "{policy}");
        assert!(r.stats.retransmission_packets > 0, "{policy}");
        if policy == "fixed:1" {
            assert!(r.stats.copy_packets > 0, "{policy}: {:?}", r.stats);
        }
    }
}

/// `max_pacing_rate` caps the pacing rate on top of the congestion controller's: 200 kB at a
/// 50 kB/s cap take about 4 s (less the initial burst), far longer than uncapped.
#[test]
fn max_pacing_rate_caps_the_sending_rate() {
    let s = seed(7);
    let _guard = SeedGuard(s);
    let span = |cap: Option<u64>| {
        let config = TransportConfig {
            cc: recoup_transport::cc::CcAlgorithm::Copa,
            max_pacing_rate: cap,
            ..config("arq")
        };
        let r = run_with(s, config, 0.0, 200_000, None);
        let first = r.trace.first().expect("packets").0;
        let last = r.trace.last().expect("packets").0;
        last.saturating_duration_since(first)
    };
    let capped = span(Some(50_000));
    let free = span(None);
    assert!(capped >= Duration::from_secs(3), "capped: {capped:?}");
    assert!(free * 4 < capped, "uncapped {free:?}, capped {capped:?}");
}

/// The counters of packets sent under a policy's rate limit: never for ARQ; for `ladr-rrl` on a
/// path lossy enough to lose retransmissions, some, and binding ones among them.
#[test]
fn packets_under_the_rate_limit_are_counted() {
    let s = seed(11);
    let _guard = SeedGuard(s);
    let arq = run(s, "arq", 0.3, 1_000_000).stats;
    assert_eq!(
        (arq.rate_limited_packets, arq.rate_limit_binding_packets),
        (0, 0)
    );
    let rrl = run(s, "ladr-rrl", 0.3, 1_000_000).stats;
    assert!(rrl.rate_limited_packets > 0, "{rrl:?}");
    assert!(rrl.rate_limit_binding_packets <= rrl.rate_limited_packets);
}

/// `Connection::set_policy` mid-transfer: refused while lost data is in recovery, accepted
/// otherwise; the new policy takes over the packets in flight (no contract violation, every byte
/// once) and its copies go out.
#[test]
fn a_policy_set_mid_transfer_takes_over_only_between_recoveries() {
    let s = seed(21);
    let _guard = SeedGuard(s);
    let net = NetConfig {
        loss: 0.05,
        ..NetConfig::default()
    };
    let mut p = Pair::new(s, net, config("arq"));
    p.handshake();
    let payload = data(2 << 20, s);
    let id = p.client_conn().open_stream(false).expect("open");
    let (mut written, mut fin, mut sid) = (0, false, None);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let fixed: PolicySpec = "fixed:1".parse().expect("spec");
    let (mut refused, mut switched_at) = (0, None);
    let ok = p.run_until(Duration::from_secs(600), |p| {
        let now = p.now;
        let c = p.client_conn();
        common::pump(c, id, &payload, &mut written, &mut fin);
        if switched_at.is_none() && c.stats().new_packets > 200 {
            let open = c.open_lineages();
            match c.set_policy(now, &fixed) {
                Ok(()) => {
                    assert_eq!(open, 0, "accepted with {open} lineages open");
                    switched_at = Some(c.stats().copy_packets);
                }
                Err(e) => {
                    assert!(open > 0, "refused with no lineage open: {e}");
                    refused += 1;
                }
            }
        }
        let srv = p.server_conn().expect("server");
        sid = sid.or_else(|| srv.accept_stream(false));
        if let Some(sid) = sid {
            while let Ok((n, f)) = srv.stream_read(sid, &mut buf) {
                got.extend_from_slice(&buf[..n]);
                if f || n == 0 {
                    break;
                }
            }
        }
        got.len() == payload.len()
    });
    assert!(ok, "{} of {} bytes", got.len(), payload.len());
    assert!(got == payload, "received bytes differ");
    let copies_before = switched_at.expect("the policy was set");
    assert_eq!(copies_before, 0, "arq sends no copies");
    let c = p.client_conn();
    assert_eq!(recoup_recovery::RecoveryPolicy::name(c.policy()), "fixed");
    assert!(c.stats().copy_packets > 0, "{:?}", c.stats());
    assert!(refused > 0, "the test never met an open recovery");
}

/// A reset stream's lost data is neither retransmitted nor copied once the reset is made, even
/// with a policy that copies every lost range (RFC 9000 §3.1: after RESET_STREAM the sender
/// stops retransmitting the stream's data). The qlog written after the reset holds no STREAM
/// frame of it, while the other stream keeps its copies.
#[test]
fn a_reset_stream_gets_no_retransmission_or_copy() {
    let s = seed(45);
    let _g = SeedGuard(s);
    let (mut p, sink) = traced_pair(s, 0.1, "fixed:2");
    let payload = data(400_000, s);
    let c = p.client_conn();
    let (a, b) = (
        c.open_stream(false).expect("open"),
        c.open_stream(false).expect("open"),
    );
    for id in [a, b] {
        assert_eq!(c.stream_write(id, &payload).expect("write"), payload.len());
        c.stream_finish(id).expect("fin");
    }
    assert_eq!(c.stream_acked_prefix(a), Some(0));
    // Until stream a has lost data under recovery and some of it acknowledged.
    let ok = p.run_until(Duration::from_secs(60), |p| {
        let c = p.client_conn();
        c.stats().copy_packets > 10 && c.open_lineages() > 0
    });
    assert!(ok, "no loss under recovery");
    let c = p.client_conn();
    let acked = c.stream_acked_prefix(a).expect("stream a still sending");
    assert!(acked < payload.len() as u64, "{acked}");
    let now = p.now;
    let c = p.client_conn();
    c.stream_reset(now, a, 7).expect("reset");
    assert_eq!(c.stream_acked_prefix(a), None);
    let copies_before = c.stats().copy_packets;
    let split = sink.0.lock().expect("lock").len();
    let ok = p.run_until(Duration::from_secs(60), |p| {
        p.client_conn().stream_buffered(b).0 == 0
    });
    assert!(ok, "stream b acknowledged");
    assert!(
        p.client_conn().stats().copy_packets > copies_before,
        "no copies after the reset: nothing was tested"
    );
    let bytes = sink.0.lock().expect("lock")[split..].to_vec();
    let frames: Vec<serde_json::Value> = bytes
        .split(|&b| b == 0x1e)
        .filter(|r| !r.is_empty())
        .map(|r| serde_json::from_slice::<serde_json::Value>(r).expect("JSON"))
        .filter(|r| r["name"] == "transport:packet_sent")
        .flat_map(|r| r["data"]["frames"].as_array().cloned().unwrap_or_default())
        .collect();
    let of = |kind: &str, id: u64| {
        frames
            .iter()
            .filter(|f| f["frame_type"] == kind && f["stream_id"] == id)
            .count()
    };
    assert!(of("stream", b.0) > 0);
    assert!(of("reset_stream", a.0) > 0);
    assert_eq!(
        of("stream", a.0),
        0,
        "stream data of the reset stream sent after the reset"
    );
    assert_eq!(
        p.client_conn().open_lineages(),
        0,
        "the reset stream's lineages stay open"
    );
}
