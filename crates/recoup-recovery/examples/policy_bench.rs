//! CPU cost of each policy per packet event and per copy decision, on a synthetic event stream
//! (5 % random loss, 60 ms RTT, one packet per 2.7 ms: a 4 Mbit/s stream of 1350-byte packets).
//!
//! Run: `cargo run -p recoup-recovery --release --example policy_bench [POLICY...]` (default:
//! every policy below; naming some lets a profiler see one alone).

use std::hint::black_box;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::{
    DataRange, LossTrigger, LostData, PacketInfo, PolicySpec, RecoveryPolicy, RttSample,
    SendContext, SendKind, SendState, SentRange,
};
use recoup_time::Instant;

const PACKETS: u64 = 1_000_000;
const RTT: Duration = Duration::from_millis(60);
const GAP: Duration = Duration::from_micros(2700);

#[derive(Default)]
struct Counts {
    events: u64,
    decisions: u64,
    copies: u64,
}

/// Feeds `policy` a packet stream and returns what it did; the caller times it.
fn drive(policy: &mut dyn RecoveryPolicy, seed: u64) -> Counts {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut c = Counts::default();
    let mut next_id = 0u64;
    // Packets awaiting their fate one RTT after sending: (pn, sent, range, lost).
    let mut in_flight = std::collections::VecDeque::new();
    // Lineages recovered one RTT after their loss was detected: (when, id).
    let mut recovering = std::collections::VecDeque::new();
    let mut now = Instant::ZERO;
    let rtt = RttSample {
        latest: RTT,
        smoothed: RTT,
        min: RTT,
        var: Duration::from_millis(5),
    };
    for pn in 0..PACKETS {
        now += GAP;
        let range = [SentRange {
            range: DataRange {
                stream: 3,
                start: pn * 1300,
                end: pn * 1300 + 1300,
            },
            loss: None,
        }];
        let ctx = SendContext {
            state: if pn % 12 == 11 {
                SendState::OffMode
            } else {
                SendState::OnMode
            },
            packets_sent: pn,
            cwnd: 150_000,
            bytes_in_flight: 40_000,
            bdp_packets: Some(66),
        };
        if pn % 12 >= 10 {
            policy.on_send_state(now, ctx.state);
            c.events += 1;
        }
        c.decisions += 1;
        if let Some(copy) = policy.poll_copy(now, &ctx) {
            c.copies += 1;
            black_box(copy);
        }
        let info = PacketInfo {
            pn,
            sent: now,
            bytes: 1350,
            kind: SendKind::New,
            ranges: &range,
        };
        policy.on_packet_sent(now, &info);
        c.events += 1;
        in_flight.push_back((pn, now, range, rng.gen_bool(0.05)));
        while let Some(&(old_pn, sent, r, lost)) = in_flight.front() {
            if now.saturating_duration_since(sent) < RTT {
                break;
            }
            in_flight.pop_front();
            let info = PacketInfo {
                pn: old_pn,
                sent,
                bytes: 1350,
                kind: SendKind::New,
                ranges: &r,
            };
            if lost {
                policy.on_packet_lost(now, &info, LossTrigger::PacketThreshold);
                let lost = LostData {
                    id: next_id,
                    range: r[0].range,
                    round: 1,
                    first_sent: sent,
                    first_detected: now,
                    lost_sent: sent,
                    trigger: LossTrigger::PacketThreshold,
                };
                policy.on_data_lost(now, &lost);
                // The retransmission arrives; the lineage is acknowledged one RTT later.
                recovering.push_back((now + RTT, next_id));
                next_id += 1;
                c.events += 2;
            } else {
                policy.on_packet_acked(now, &info);
                c.events += 1;
            }
        }
        while recovering.front().is_some_and(|&(t, _)| t <= now) {
            if let Some((_, id)) = recovering.pop_front() {
                policy.on_data_acked(now, id);
                c.events += 1;
            }
        }
        if pn % 10 == 0 {
            policy.on_rtt_update(now, &rtt);
            c.events += 1;
        }
        if policy.poll_timeout().is_some_and(|t| t <= now) {
            policy.on_timeout(now);
            c.events += 1;
        }
    }
    c
}

#[expect(
    clippy::disallowed_methods,
    reason = "a benchmark measures wall-clock time"
)]
fn main() {
    let named: Vec<String> = std::env::args().skip(1).collect();
    let specs = if named.is_empty() {
        [
            "arq", "fixed:1", "or3", "art", "art-mab", "autorec", "too", "ladr-rrl",
        ]
        .map(String::from)
        .to_vec()
    } else {
        named
    };
    println!("{PACKETS} packets, 5 % loss, 60 ms RTT, 4 Mbit/s; release build");
    println!("| policy | events | ns / event | ns / copy decision | copies asked |");
    println!("|---|---|---|---|---|");
    for spec in specs {
        let spec: PolicySpec = match spec.parse() {
            Ok(spec) => spec,
            Err(e) => {
                eprintln!("policy_bench: bad policy {spec:?}: {e}");
                std::process::exit(2);
            }
        };
        let mut best = Duration::MAX;
        let mut counts = Counts::default();
        for _ in 0..3 {
            let mut policy = spec.build(1);
            let start = std::time::Instant::now();
            counts = drive(&mut policy, 1);
            best = best.min(start.elapsed());
        }
        let ns = best.as_nanos() as f64;
        println!(
            "| {spec} | {} | {:.1} | {:.1} | {} |",
            counts.events,
            ns / counts.events as f64,
            ns / counts.decisions as f64,
            counts.copies
        );
    }
}
