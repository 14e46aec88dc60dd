//! The three baselines driven through [`FecScheme`] as the transport drives them: frames of
//! first transmissions closed by a FIN, acknowledgements and losses, retransmission rounds.

use recoup_time::Instant;

use super::{HairpinConfig, HairpinFec, TamburConfig, TamburFec, WebRtcFec, WebRtcVariant};
use crate::api::{DataRange, PacketInfo, SendKind, SendState, SentRange};
use crate::fec::{FecContext, FecScheme, FecSpec, RepairRequest, SourcePacket};
use crate::testutil::{ms, rtt};

fn ctx() -> FecContext {
    FecContext {
        state: SendState::OnMode,
        rtt: None,
        cwnd: 1 << 20,
        bytes_in_flight: 0,
    }
}

fn range(stream: u64) -> [SentRange; 1] {
    [SentRange {
        range: DataRange {
            stream,
            start: 0,
            end: 1000,
        },
        loss: None,
    }]
}

/// Sends frame `stream` as `n` first transmissions from `first_pn`, deadline `deadline`.
fn send_frame(
    s: &mut dyn FecScheme,
    now: Instant,
    stream: u64,
    first_pn: u64,
    n: u64,
    deadline: Instant,
) {
    let r = range(stream);
    for pn in first_pn..first_pn + n {
        s.on_source_sent(
            now,
            &SourcePacket {
                pn,
                sent: now,
                symbol_bytes: 1200,
                kind: SendKind::New,
                ranges: &r,
                fins: u64::from(pn + 1 == first_pn + n),
                deadline: Some(deadline),
            },
        );
    }
}

fn settle(
    s: &mut dyn FecScheme,
    now: Instant,
    pns: impl Iterator<Item = u64>,
    lost: impl Fn(u64) -> bool,
) {
    let r = range(0);
    for pn in pns {
        let p = PacketInfo {
            pn,
            sent: now,
            bytes: 1200,
            kind: SendKind::New,
            ranges: &r,
        };
        if lost(pn) {
            s.on_packet_lost(now, &p, false);
        } else {
            s.on_packet_acked(now, &p, false);
        }
    }
}

fn drain(s: &mut dyn FecScheme, now: Instant) -> Vec<RepairRequest> {
    std::iter::from_fn(|| s.poll_repair(now, &ctx())).collect()
}

#[test]
fn webrtc_protects_frames_by_loss_and_rtt() {
    let spec: FecSpec = "webrtc-now"
        .parse()
        .expect("table found from the crate folder");
    let FecSpec::WebRtc(_, config) = spec else {
        panic!("{spec:?}")
    };
    let mut s = WebRtcFec::new(WebRtcVariant::Now, config);
    s.on_rtt_update(ms(0), &rtt(60));
    // No loss seen: no repair for a delta frame (the first, a key frame, neither).
    send_frame(&mut s, ms(0), 0, 0, 30, ms(100));
    send_frame(&mut s, ms(16), 1, 30, 6, ms(116));
    assert!(drain(&mut s, ms(16)).is_empty());
    // 10 % loss: each delta frame of 6 packets gets at least 20 % protection (2 repairs by
    // WebRTC's rounding: (6·51 + 128) >> 8 = 1, or more from the table).
    settle(&mut s, ms(20), 0..100, |pn| pn % 10 == 0);
    send_frame(&mut s, ms(33), 2, 36, 6, ms(133));
    let r = drain(&mut s, ms(33));
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].window, (36..42).collect::<Vec<_>>());
    assert!(r[0].repairs >= 1);
    // Below 20 ms RTT NACK alone: no repair for delta frames.
    s.on_rtt_update(ms(40), &rtt(10));
    send_frame(&mut s, ms(50), 3, 42, 6, ms(150));
    assert!(drain(&mut s, ms(50)).is_empty());
}

#[test]
fn hairpin_adds_repair_to_retransmissions_as_the_deadline_nears() {
    let mut s = HairpinFec::new(HairpinConfig::default());
    s.on_rtt_update(ms(0), &rtt(20));
    settle(&mut s, ms(0), 0..100, |pn| pn % 10 == 0);
    // A frame at t=0 with a 100 ms deadline, rtt' = 20 + 10 ms: floor(70 / 30) = two rounds
    // left, little or no repair now.
    send_frame(&mut s, ms(0), 7, 100, 10, ms(100));
    let first: u16 = drain(&mut s, ms(0)).iter().map(|r| r.repairs).sum();
    // Two of its packets retransmitted at 70 ms: one round left, so the repair is larger.
    let r = range(7);
    for pn in [200, 201] {
        s.on_source_sent(
            ms(70),
            &SourcePacket {
                pn,
                sent: ms(70),
                symbol_bytes: 1200,
                kind: SendKind::Retransmission,
                ranges: &r,
                fins: 0,
                deadline: Some(ms(100)),
            },
        );
    }
    let late = drain(&mut s, ms(70));
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].window, vec![200, 201]);
    let per_packet_late = f64::from(late[0].repairs) / 2.0;
    let per_packet_first = f64::from(first) / 10.0;
    assert!(per_packet_late > per_packet_first, "{late:?} vs {first}");
    // After the deadline nothing is worth sending.
    s.on_source_sent(
        ms(120),
        &SourcePacket {
            pn: 300,
            sent: ms(120),
            symbol_bytes: 1200,
            kind: SendKind::Retransmission,
            ranges: &r,
            fins: 0,
            deadline: Some(ms(100)),
        },
    );
    assert!(drain(&mut s, ms(120)).is_empty());
}

#[test]
fn tambur_parity_spans_tau_frames_and_follows_losses() {
    let mut s = TamburFec::new(TamburConfig::default());
    let mut pn = 0;
    let mut windows = Vec::new();
    for f in 0..5 {
        send_frame(&mut s, ms(16 * f), f, pn, 8, ms(16 * f + 100));
        pn += 8;
        windows.extend(drain(&mut s, ms(16 * f)));
    }
    // One parity per frame without loss; the fifth frame's covers it and the three before.
    assert!(windows.iter().all(|r| r.repairs == 1));
    assert_eq!(windows[4].window, (8..40).collect::<Vec<_>>());
    // Frame 0 lost half its packets: the next frame's parity grows to 25 % of 8 = 2 (the cap).
    settle(&mut s, ms(100), 0..8, |pn| pn < 4);
    send_frame(&mut s, ms(100), 5, pn, 8, ms(200));
    let r = drain(&mut s, ms(100));
    assert_eq!(r[0].repairs, 2);
}
