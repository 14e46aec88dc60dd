//! LADR's opportunistic FEC (LADR §3.4): WebRTC-flavoured FEC, applied to every frame, but only
//! while one of two session monitors says this session's losses suit FEC.
//!
//! Frames are streams (one stream per video frame, as in the rtc and gaming applications); a
//! frame is resolved once each of its first-transmission packets was acknowledged or lost, and
//! frames are resolved in stream order.
//! - Procedure #1: a loss event is a run of consecutive lossy frames; its lost packets go to
//!   sum_long when it lasted at least 5 frames (5 frame intervals) and to sum_short otherwise.
//!   On any packet loss FEC goes on if sum_long > k · sum_short; it goes off when no packet was
//!   lost for t_hold.
//! - Procedure #2: among resolved frames whose queuing delay (end-packet RTT − RTT_min, §2.4)
//!   exceeded t_q, if at least 5 % were lossy, FEC goes on whenever the queuing delay (of an
//!   acknowledged packet) reaches t_q, and off once it stayed below t_q for t_hold.
//!
//! While on, repair for every frame passes (§3.4 "when FEC is enabled, we simply apply it to all
//! frames"): WebRTC's hybrid NACK/FEC rule, which gives delta frames no FEC below 20 ms RTT, is
//! off, since LADR's edge RTTs are all below it. While off, the repair WebRTC sizes is dropped.

use std::collections::BTreeMap;
use std::time::Duration;

use recoup_time::Instant;

use super::config::{LadrFecConfig, WebRtcConfig};
use super::webrtc::{WebRtcFec, WebRtcVariant};
use crate::api::{PacketInfo, RttSample, SendKind, SendState};
use crate::fec::{FecContext, FecScheme, RepairRequest, SourcePacket};

/// Frames a loss event must last to be long (§3.4).
const LONG_EVENT_FRAMES: u32 = 5;
/// Procedure #2's share of lossy frames among those queued above t_q (§3.4).
const QUEUED_LOSSY_SHARE: f64 = 0.05;

#[derive(Clone, Debug, Default)]
struct GateFrame {
    outstanding: u32,
    ended: bool,
    lost: u64,
    end_rtt: Option<Duration>,
}

/// The two monitoring procedures.
#[derive(Clone, Debug)]
pub struct OpportunisticGate {
    cfg: LadrFecConfig,
    frames: BTreeMap<u64, GateFrame>,
    run_frames: u32,
    run_lost: u64,
    sum_long: u64,
    sum_short: u64,
    last_loss: Option<Instant>,
    long_on: bool,
    queued_frames: u64,
    queued_lossy: u64,
    last_high_queue: Option<Instant>,
    queue_on: bool,
    rtt_min: Option<Duration>,
}

impl OpportunisticGate {
    #[must_use]
    pub fn new(cfg: LadrFecConfig) -> Self {
        Self {
            cfg,
            frames: BTreeMap::new(),
            run_frames: 0,
            run_lost: 0,
            sum_long: 0,
            sum_short: 0,
            last_loss: None,
            long_on: false,
            queued_frames: 0,
            queued_lossy: 0,
            last_high_queue: None,
            queue_on: false,
            rtt_min: None,
        }
    }

    /// Whether FEC is on at `now`, and switches a procedure off once its hold time passed.
    pub fn enabled(&mut self, now: Instant) -> bool {
        let hold = self.cfg.t_hold;
        let held = |t: Option<Instant>| t.is_some_and(|t| now.saturating_duration_since(t) < hold);
        self.long_on &= held(self.last_loss);
        self.queue_on &= held(self.last_high_queue);
        self.long_on || self.queue_on
    }

    /// (sum_long, sum_short).
    #[must_use]
    pub fn sums(&self) -> (u64, u64) {
        (self.sum_long, self.sum_short)
    }

    fn queue_applies(&self) -> bool {
        self.queued_frames > 0
            && self.queued_lossy as f64 >= QUEUED_LOSSY_SHARE * self.queued_frames as f64
    }

    pub fn on_source(&mut self, p: &SourcePacket<'_>) {
        if p.kind != SendKind::New {
            return;
        }
        for (i, r) in p.ranges.iter().enumerate() {
            let f = self.frames.entry(r.range.stream).or_default();
            f.outstanding += 1;
            f.ended |= p.fins & (1 << i) != 0;
        }
    }

    pub fn on_acked(&mut self, now: Instant, p: &PacketInfo<'_>) {
        if p.kind != SendKind::New {
            return;
        }
        let rtt = now.saturating_duration_since(p.sent);
        let min = self.rtt_min.map_or(rtt, |m| m.min(rtt));
        self.rtt_min = Some(min);
        for r in p.ranges {
            if let Some(f) = self.frames.get_mut(&r.range.stream) {
                f.outstanding = f.outstanding.saturating_sub(1);
                f.end_rtt = Some(rtt);
            }
        }
        // The frame this ACK resolves counts before the decision.
        self.resolve();
        if rtt.saturating_sub(min) >= self.cfg.t_q {
            self.last_high_queue = Some(now);
            self.queue_on |= self.queue_applies();
        }
    }

    pub fn on_lost(&mut self, now: Instant, p: &PacketInfo<'_>) {
        if p.kind != SendKind::New {
            return;
        }
        for r in p.ranges {
            if let Some(f) = self.frames.get_mut(&r.range.stream) {
                f.outstanding = f.outstanding.saturating_sub(1);
                f.lost += 1;
            }
        }
        self.last_loss = Some(now);
        self.resolve();
        if self.sum_long as f64 > self.cfg.k * self.sum_short as f64 {
            self.long_on = true;
        }
    }

    fn resolve(&mut self) {
        while let Some(entry) = self.frames.first_entry() {
            let f = entry.get();
            if !f.ended || f.outstanding > 0 {
                break;
            }
            let f = entry.remove();
            if f.lost > 0 {
                self.run_frames += 1;
                self.run_lost += f.lost;
            } else {
                self.end_event();
            }
            if let (Some(rtt), Some(min)) = (f.end_rtt, self.rtt_min) {
                if rtt.saturating_sub(min) > self.cfg.t_q {
                    self.queued_frames += 1;
                    self.queued_lossy += u64::from(f.lost > 0);
                }
            }
        }
    }

    fn end_event(&mut self) {
        if self.run_frames >= LONG_EVENT_FRAMES {
            self.sum_long += self.run_lost;
        } else {
            self.sum_short += self.run_lost;
        }
        self.run_frames = 0;
        self.run_lost = 0;
    }
}

/// The scheme: WebRTC FEC (today's variant) behind the gate.
#[derive(Debug)]
pub struct LadrFec {
    gate: OpportunisticGate,
    inner: WebRtcFec,
}

impl LadrFec {
    #[must_use]
    pub fn new(cfg: LadrFecConfig) -> Self {
        let inner = WebRtcConfig {
            table: cfg.table,
            low_rtt: Duration::ZERO,
            ..WebRtcConfig::default()
        };
        Self {
            gate: OpportunisticGate::new(cfg),
            inner: WebRtcFec::new(WebRtcVariant::Now, inner),
        }
    }
}

impl FecScheme for LadrFec {
    fn name(&self) -> &'static str {
        "ladr"
    }

    fn on_source_sent(&mut self, now: Instant, packet: &SourcePacket<'_>) {
        self.gate.on_source(packet);
        self.inner.on_source_sent(now, packet);
    }

    fn on_packet_acked(&mut self, now: Instant, packet: &PacketInfo<'_>, repair: bool) {
        if !repair {
            self.gate.on_acked(now, packet);
        }
        self.inner.on_packet_acked(now, packet, repair);
    }

    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, repair: bool) {
        if !repair {
            self.gate.on_lost(now, packet);
        }
        self.inner.on_packet_lost(now, packet, repair);
    }

    fn on_rtt_update(&mut self, now: Instant, rtt: &RttSample) {
        self.inner.on_rtt_update(now, rtt);
    }

    fn on_send_state(&mut self, now: Instant, state: SendState) {
        self.inner.on_send_state(now, state);
    }

    fn poll_repair(&mut self, now: Instant, ctx: &FecContext) -> Option<RepairRequest> {
        let on = self.gate.enabled(now);
        while let Some(r) = self.inner.poll_repair(now, ctx) {
            if on {
                return Some(r);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DataRange, SentRange};

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
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

    /// Frame `i` (one packet, pn = i) sent at 17·i ms; lost or acknowledged `rtt_ms` later.
    fn frame(g: &mut OpportunisticGate, i: u64, lost: bool, rtt_ms: u64) -> Instant {
        let r = range(i);
        let sent = ms(17 * i);
        g.on_source(&SourcePacket {
            pn: i,
            sent,
            symbol_bytes: 1000,
            kind: SendKind::New,
            ranges: &r,
            fins: 1,
            deadline: None,
        });
        let info = PacketInfo {
            pn: i,
            sent,
            bytes: 1040,
            kind: SendKind::New,
            ranges: &r,
        };
        let at = sent + Duration::from_millis(rtt_ms);
        if lost {
            g.on_lost(at, &info);
        } else {
            g.on_acked(at, &info);
        }
        at
    }

    #[test]
    fn procedure_1_long_events_outweigh_short_ones_then_hold_400ms() {
        let mut g = OpportunisticGate::new(LadrFecConfig::default());
        frame(&mut g, 0, false, 10);
        // A short event: 2 lossy frames (2 lost packets) → sum_short = 2.
        frame(&mut g, 1, true, 10);
        frame(&mut g, 2, true, 10);
        let t = frame(&mut g, 3, false, 10);
        assert_eq!(g.sums(), (0, 2));
        assert!(!g.enabled(t));
        // A long event: 5 lossy frames; it ends with a clean frame → sum_long = 5 > 1 · 2.
        for i in 4..9 {
            frame(&mut g, i, true, 10);
        }
        let t = frame(&mut g, 9, false, 10);
        assert_eq!(g.sums(), (5, 2));
        assert!(!g.enabled(t), "on only when a loss is detected");
        let loss_at = frame(&mut g, 10, true, 10);
        assert!(g.enabled(loss_at));
        // On for t_hold = 400 ms after the last loss, off from then on.
        assert!(g.enabled(loss_at + Duration::from_millis(399)));
        assert!(!g.enabled(loss_at + Duration::from_millis(400)));
    }

    #[test]
    fn procedure_1_stays_off_when_long_equals_k_times_short() {
        let mut g = OpportunisticGate::new(LadrFecConfig::default());
        // Five short events of one lost packet, then a long event of 5: 5 > 1 · 5 is false.
        for e in 0..5 {
            frame(&mut g, 2 * e, true, 10);
            frame(&mut g, 2 * e + 1, false, 10);
        }
        for i in 10..15 {
            let t = frame(&mut g, i, true, 10);
            assert!(!g.enabled(t), "sum_long = 0 is not above sum_short");
        }
        frame(&mut g, 15, false, 10);
        assert_eq!(g.sums(), (5, 5));
        let t = frame(&mut g, 16, true, 10);
        assert!(!g.enabled(t));
    }

    #[test]
    fn procedure_2_queuing_above_t_q_with_lossy_queued_frames() {
        let mut g = OpportunisticGate::new(LadrFecConfig::default());
        frame(&mut g, 0, false, 10);
        // A queued frame (RTT 70 ms: 60 ms above RTT_min > t_q) that is not lossy: 0 % lossy,
        // so high queuing does not turn FEC on.
        let t = frame(&mut g, 1, false, 70);
        assert!(!g.enabled(t));
        // A lossy frame whose end packet queued 60 ms: two packets, one lost.
        let r = range(2);
        let sent = ms(34);
        let src = |pn| SourcePacket {
            pn,
            sent,
            symbol_bytes: 1000,
            kind: SendKind::New,
            ranges: &r,
            fins: u64::from(pn == 21),
            deadline: None,
        };
        g.on_source(&src(20));
        g.on_source(&src(21));
        let info = |pn| PacketInfo {
            pn,
            sent,
            bytes: 1040,
            kind: SendKind::New,
            ranges: &r,
        };
        g.on_lost(ms(100), &info(20));
        g.on_acked(ms(104), &info(21));
        // 1 of 2 queued frames lossy (50 % ≥ 5 %), and that ACK queued 60 ms ≥ t_q: on.
        assert!(g.enabled(ms(104)));
        // A packet queued 49 ms (< t_q) neither renews nor ends it; 400 ms after the last
        // high-queue ACK it goes off.
        let t = frame(&mut g, 3, false, 59);
        assert!(g.enabled(t));
        assert!(g.enabled(ms(503)));
        assert!(!g.enabled(ms(504)));
        // Queuing reaching exactly t_q = 50 ms switches it on again.
        let t = frame(&mut g, 40, false, 60);
        assert!(g.enabled(t));
    }
}
