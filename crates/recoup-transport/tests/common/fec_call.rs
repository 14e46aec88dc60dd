//! A video call through one FEC scheme and the transport's two FEC halves, without the rest of
//! the transport: the sender's `FecSender` (the scheme's decisions and the coding) and the
//! receiver's `FecReceiver` (keeping source symbols, collecting repairs, decoding). Used by the
//! FEC benchmark (`examples/fec_bench.rs`) and the per-scheme round-trip test (`tests/fec.rs`).
//!
//! The call is AutoRec §VII's: 60 fps, 7 packets of about 1200 bytes per delta frame and 35 per
//! key frame every 2 s (4.3 Mbit/s), 100 ms playout deadline, 30 ms RTT. Every packet (source,
//! repair, retransmission) is lost with probability `loss`, drawn from `seed`; its fate is
//! known one RTT after its send, and a lost source is retransmitted then while its frame can
//! still make the deadline.

#![allow(
    dead_code,
    reason = "the benchmark and the test each use a different part"
)]

use std::collections::VecDeque;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::api::{DataRange, PacketInfo, RttSample, SendKind, SendState, SentRange};
use recoup_recovery::fec::{FecContext, FecScheme, FecSpec};
use recoup_time::Instant;
use recoup_transport::fec::{CodedRepair, FecReceiver, FecSender};
use recoup_transport::frame::RepairFrame;

pub const FPS: u64 = 60;
pub const DELTA_PACKETS: u64 = 7;
pub const KEY_PACKETS: u64 = 35;
pub const GOP: u64 = 120;
/// Longest source symbol; shorter ones vary by packet number, as a frame's tail does.
pub const PACKET: usize = 1200;
pub const DEADLINE: Duration = Duration::from_millis(100);
pub const RTT: Duration = Duration::from_millis(30);

/// Sees every coded repair with the source symbols of its window.
pub type RepairHook<'a> = &'a mut dyn FnMut(&CodedRepair, &[Vec<u8>]);

/// What one call cost and did.
#[derive(Debug, Default)]
pub struct CallCost {
    /// Bytes of every source symbol sent (first transmissions and retransmissions).
    pub source_bytes: usize,
    pub repair_bytes: usize,
    /// Time spent in the sender's FEC half and in the receiver's.
    pub encode: Duration,
    pub decode: Duration,
    pub sources_lost: u64,
    pub restored: u64,
}

/// The bytes of packet `pn`'s source symbol.
#[must_use]
pub fn symbol(pn: u64) -> Vec<u8> {
    let len = PACKET - (pn % 64) as usize;
    (0..len).map(|j| (pn as usize * 31 + j * 7) as u8).collect()
}

/// A packet whose fate the sender learns one RTT after sending it.
struct InFlight {
    pn: u64,
    sent: Instant,
    lost: bool,
    /// The frame (stream) of a source packet; `None` for a repair.
    frame: Option<u64>,
}

struct Call {
    sender: FecSender,
    receiver: FecReceiver,
    rng: ChaCha8Rng,
    loss: f64,
    cost: CallCost,
    flight: VecDeque<InFlight>,
    next_pn: u64,
}

#[expect(
    clippy::disallowed_methods,
    reason = "the benchmark measures wall-clock time"
)]
pub fn clock() -> std::time::Instant {
    std::time::Instant::now()
}

fn frame_time(frame: u64) -> Instant {
    let interval = Duration::from_secs(1) / FPS as u32;
    Instant::ZERO + interval * u32::try_from(frame).expect("frames fit u32")
}

fn sent_range(stream: u64) -> [SentRange; 1] {
    [SentRange {
        range: DataRange {
            stream,
            start: 0,
            end: PACKET as u64,
        },
        loss: None,
    }]
}

impl Call {
    /// Sends one source packet of `frame` (`fin`: its last) through the sender's FEC half and,
    /// unless it is lost, the receiver's.
    fn send_source(&mut self, t: Instant, frame: u64, fin: bool, kind: SendKind) {
        let pn = self.next_pn;
        self.next_pn += 1;
        // The symbol is made outside the timed part: the transport writes it anyway.
        let sym = symbol(pn);
        let copy = sym.clone();
        self.cost.source_bytes += sym.len();
        let ranges = sent_range(frame);
        let start = clock();
        if kind == SendKind::New {
            self.sender
                .set_deadline(frame, frame_time(frame) + DEADLINE);
        }
        self.sender
            .on_source_sent(t, pn, kind, &ranges, u64::from(fin), sym);
        self.cost.encode += start.elapsed();
        let lost = self.rng.gen_bool(self.loss);
        self.cost.sources_lost += u64::from(lost);
        self.flight.push_back(InFlight {
            pn,
            sent: t,
            lost,
            frame: Some(frame),
        });
        if !lost {
            let start = clock();
            self.receiver.on_source(pn, copy);
            self.cost.decode += start.elapsed();
        }
    }

    /// Tells the scheme the fates known by `t`; returns the frames of lost sources that can
    /// still make their deadline.
    fn feedback(&mut self, t: Instant) -> Vec<u64> {
        let rtt = RttSample {
            latest: RTT,
            smoothed: RTT,
            min: RTT,
            var: Duration::from_millis(1),
        };
        let mut retransmit = Vec::new();
        while self.flight.front().is_some_and(|p| p.sent + RTT <= t) {
            let Some(p) = self.flight.pop_front() else {
                break;
            };
            let ranges = sent_range(p.frame.unwrap_or(u64::MAX));
            let info = PacketInfo {
                pn: p.pn,
                sent: p.sent,
                bytes: PACKET,
                kind: SendKind::New,
                ranges: &ranges,
            };
            let repair = p.frame.is_none();
            let start = clock();
            let scheme = self.sender.scheme_mut();
            if p.lost {
                scheme.on_packet_lost(t, &info, repair);
            } else {
                scheme.on_packet_acked(t, &info, repair);
                scheme.on_rtt_update(t, &rtt);
            }
            self.cost.encode += start.elapsed();
            if let Some(f) = p.frame.filter(|_| p.lost) {
                if frame_time(f) + DEADLINE > t + RTT / 2 {
                    retransmit.push(f);
                }
            }
        }
        retransmit
    }

    /// Codes and sends every repair the scheme asks for at `t`; `hook` sees each with the
    /// source symbols of its window.
    fn send_repairs(&mut self, t: Instant, hook: &mut Option<RepairHook<'_>>) {
        let ctx = FecContext {
            state: SendState::OnMode,
            rtt: None,
            cwnd: u64::MAX,
            bytes_in_flight: 0,
        };
        let start = clock();
        if self.sender.scheme().poll_timeout().is_some_and(|d| d <= t) {
            self.sender.scheme_mut().on_timeout(t);
        }
        let mut repairs = Vec::new();
        while let Some(r) = self.sender.peek(t, &ctx) {
            repairs.push(r.clone());
            self.sender.pop();
        }
        self.cost.encode += start.elapsed();
        for r in repairs {
            let carrier = self.next_pn;
            self.next_pn += 1;
            self.cost.repair_bytes += r.symbol.len();
            let frame = RepairFrame {
                first_pn: r.first_pn,
                span: r.span,
                window: r.window,
                repairs: r.repairs,
                index: r.index,
                symbol: &r.symbol,
            };
            if let Some(h) = hook.as_mut() {
                let sources: Vec<Vec<u8>> = frame.window_pns().map(symbol).collect();
                h(&r, &sources);
            }
            let lost = self.rng.gen_bool(self.loss);
            self.flight.push_back(InFlight {
                pn: carrier,
                sent: t,
                lost,
                frame: None,
            });
            if lost {
                continue;
            }
            let start = clock();
            let restored = self
                .receiver
                .on_repair(carrier, &frame)
                .expect("a well-formed repair");
            self.cost.decode += start.elapsed();
            for s in &restored {
                let sent = symbol(s.pn);
                assert_eq!(s.symbol[..sent.len()], sent[..], "packet {} restored", s.pn);
            }
            self.cost.restored += restored.len() as u64;
            let start = clock();
            for mut s in restored {
                // Without the padding, as the transport keeps a restored packet's frames.
                s.symbol.truncate(symbol(s.pn).len());
                self.receiver.on_source(s.pn, s.symbol);
            }
            self.cost.decode += start.elapsed();
        }
    }
}

/// A call of `length` through `spec`'s scheme at random loss `loss`, drawn from `seed`.
pub fn video_call(
    spec: &FecSpec,
    loss: f64,
    seed: u64,
    length: Duration,
    mut hook: Option<RepairHook<'_>>,
) -> CallCost {
    let mut call = Call {
        sender: FecSender::new(spec.build(seed)),
        receiver: FecReceiver::default(),
        rng: ChaCha8Rng::seed_from_u64(seed),
        loss,
        cost: CallCost::default(),
        flight: VecDeque::new(),
        next_pn: 0,
    };
    let frames = length.as_millis() as u64 * FPS / 1000;
    let end = Instant::ZERO + length + DEADLINE;
    let mut next_frame = 0;
    let mut t = Instant::ZERO;
    while t < end {
        for f in call.feedback(t) {
            call.send_source(t, f, false, SendKind::Retransmission);
        }
        if next_frame < frames && frame_time(next_frame) <= t {
            let n = if next_frame % GOP == 0 {
                KEY_PACKETS
            } else {
                DELTA_PACKETS
            };
            for i in 0..n {
                call.send_source(t, next_frame, i + 1 == n, SendKind::New);
            }
            next_frame += 1;
        }
        call.send_repairs(t, &mut hook);
        t += Duration::from_millis(1);
    }
    call.cost
}
