//! `ladr-rrl`: LADR's reactive rate limit (LADR §3.3), the sender-side loss-recovery part that
//! fits the policy contract. It never asks for copies; it caps the pacing rate (new data and
//! retransmissions alike) at the ACK rate through [`RecoveryPolicy::rate_limit`] while a severe
//! loss event is being recovered.
//!
//! - Applicable only once a retransmitted packet (retransmission or copy) has been lost in the
//!   session; until then the congestion controller is trusted.
//! - On when n_rec, the data still to be recovered, reaches n_high = 4. n_rec counts lost ranges
//!   (lineages) not yet acknowledged; a QUIC packet normally carries one stream range, so this is
//!   LADR's packet count.
//! - Everything unsent at that moment is "governed". The policy cannot see the send buffer, so it
//!   treats the governed data as sent when the sender next becomes application-limited (off-mode):
//!   at that point everything that was buffered has gone out. Off when n_rec < n_low = 2 and the
//!   governed data is sent.
//! - The ACK rate is §3.3's own estimate, over video frames. A transport-level policy sees
//!   streams, not frames; in the video applications (rtc, gaming) every frame is one stream, so
//!   a stream is a frame here. (1) If a frame sent at least RTT_min + t_inv ago is still not
//!   fully acknowledged the network is congested: with F_c the earliest such frame, the rate is
//!   the bytes acknowledged since t_Fc + RTT_min over the time since then. (2) Otherwise it is
//!   the average ACK rate of the 6 most recently acknowledged frames, each measured between its
//!   first and last acknowledgement (bytes over the sum of those spans), so the idle time
//!   between frames does not dilute it.
//! - The rate follows the estimate for as long as the limit is on (§3.3 "we limit the pacing
//!   rate to the ACK rate"); without any estimate yet the limit is the floor.
//! - The limit never goes below two of the largest packets per SRTT, so a limit on an idle path
//!   still lets recovery proceed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendKind, SendState,
};
use crate::config::LadrConfig;

/// ACK samples and open frames kept at most.
const MAX_SAMPLES: usize = 8192;

/// Recently acknowledged frames the estimate averages when the path is not congested (§3.3).
const RECENT_FRAMES: usize = 6;

/// The ACK-rate window before an RTT estimate exists (RFC 9002 §6.2.2 kInitialRtt).
const INITIAL_RTT: Duration = Duration::from_millis(333);

/// A frame (stream) with data not yet acknowledged.
#[derive(Debug, Clone)]
struct OpenFrame {
    first_sent: Instant,
    /// Packets carrying it neither acknowledged nor lost.
    outstanding: u32,
    acked: u64,
    first_ack: Option<Instant>,
    last_ack: Option<Instant>,
}

#[derive(Debug, Clone)]
pub struct LadrRrl {
    cfg: LadrConfig,
    applicable: bool,
    enabled: bool,
    governed_unsent: bool,
    to_recover: BTreeSet<LossId>,
    frames: BTreeMap<u64, OpenFrame>,
    /// (bytes, first-to-last acknowledgement) of the last frames fully acknowledged.
    done: VecDeque<(u64, Duration)>,
    /// (acknowledged at, stream bytes) of recent acknowledgements.
    acks: VecDeque<(Instant, u64)>,
    rtt_min: Option<Duration>,
    srtt: Option<Duration>,
    largest_packet: u64,
    /// The last estimate, bytes per second.
    ack_rate: Option<u64>,
}

impl LadrRrl {
    #[must_use]
    pub fn new(cfg: LadrConfig) -> Self {
        Self {
            cfg,
            applicable: false,
            enabled: false,
            governed_unsent: false,
            to_recover: BTreeSet::new(),
            frames: BTreeMap::new(),
            done: VecDeque::new(),
            acks: VecDeque::new(),
            rtt_min: None,
            srtt: None,
            largest_packet: 1200,
            ack_rate: None,
        }
    }

    /// Whether the rate limit is in force.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// n_rec: lost ranges not yet acknowledged.
    #[must_use]
    pub fn to_recover(&self) -> usize {
        self.to_recover.len()
    }

    /// The current ACK-rate estimate, bytes per second.
    #[must_use]
    pub fn ack_rate(&self) -> Option<u64> {
        self.ack_rate
    }

    fn window(&self) -> Duration {
        self.srtt
            .unwrap_or(INITIAL_RTT)
            .max(Duration::from_millis(1))
    }

    /// §3.3's estimate at `now`; `None` without enough samples.
    fn estimate(&self, now: Instant) -> Option<u64> {
        let rtt_min = self.rtt_min?;
        let threshold = rtt_min + self.cfg.t_inv;
        let congested = self
            .frames
            .values()
            .filter(|f| now.saturating_duration_since(f.first_sent) >= threshold)
            .map(|f| f.first_sent)
            .min();
        if let Some(t_fc) = congested {
            let from = t_fc + rtt_min;
            let span = now.saturating_duration_since(from).as_secs_f64();
            let bytes: u64 = self
                .acks
                .iter()
                .filter(|(at, _)| *at > from)
                .map(|a| a.1)
                .sum();
            return (span > 0.0).then(|| (bytes as f64 / span) as u64);
        }
        let (bytes, span) = self
            .done
            .iter()
            .fold((0u64, Duration::ZERO), |(b, s), &(fb, fs)| (b + fb, s + fs));
        (!span.is_zero()).then(|| (bytes as f64 / span.as_secs_f64()) as u64)
    }

    fn refresh_rate(&mut self, now: Instant) {
        // Acknowledgements before the earliest open frame's send + RTT_min can never count.
        let oldest = self.frames.values().map(|f| f.first_sent).min();
        if let (Some(t), Some(m)) = (oldest, self.rtt_min) {
            while self.acks.front().is_some_and(|a| a.0 <= t + m) {
                self.acks.pop_front();
            }
        } else if oldest.is_none() {
            self.acks.clear();
        }
        if let Some(r) = self.estimate(now) {
            self.ack_rate = Some(r);
        }
    }

    fn update(&mut self) {
        let n = self.to_recover.len();
        if !self.enabled && self.applicable && n >= self.cfg.n_high as usize {
            self.enabled = true;
            self.governed_unsent = true;
        } else if self.enabled && n < self.cfg.n_low as usize && !self.governed_unsent {
            self.enabled = false;
        }
    }
}

impl RecoveryPolicy for LadrRrl {
    fn name(&self) -> &'static str {
        "ladr-rrl"
    }

    fn on_packet_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        self.largest_packet = self.largest_packet.max(packet.bytes as u64);
        for r in packet.ranges {
            if !self.frames.contains_key(&r.range.stream) && self.frames.len() == MAX_SAMPLES {
                self.frames.pop_first();
            }
            let f = self.frames.entry(r.range.stream).or_insert(OpenFrame {
                first_sent: now,
                outstanding: 0,
                acked: 0,
                first_ack: None,
                last_ack: None,
            });
            f.outstanding += 1;
        }
    }

    fn on_packet_acked(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        for r in packet.ranges {
            if self.acks.len() == MAX_SAMPLES {
                self.acks.pop_front();
            }
            self.acks.push_back((now, r.range.len()));
            let Some(f) = self.frames.get_mut(&r.range.stream) else {
                continue;
            };
            f.outstanding = f.outstanding.saturating_sub(1);
            f.acked += r.range.len();
            f.first_ack.get_or_insert(now);
            f.last_ack = Some(now);
            if f.outstanding == 0 {
                let span = match (f.first_ack, f.last_ack) {
                    (Some(a), Some(b)) => b.saturating_duration_since(a),
                    _ => Duration::ZERO,
                };
                let acked = f.acked;
                self.frames.remove(&r.range.stream);
                // A frame acknowledged all at once spans no time and says nothing of the rate.
                if !span.is_zero() {
                    if self.done.len() == RECENT_FRAMES {
                        self.done.pop_front();
                    }
                    self.done.push_back((acked, span));
                }
            }
        }
        self.refresh_rate(now);
    }

    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, _: LossTrigger) {
        if packet.kind != SendKind::New {
            self.applicable = true;
        }
        // The frame stays open: its lost data goes out again in a retransmission.
        for r in packet.ranges {
            if let Some(f) = self.frames.get_mut(&r.range.stream) {
                f.outstanding = f.outstanding.saturating_sub(1);
            }
        }
        self.refresh_rate(now);
        self.update();
    }

    fn on_data_lost(&mut self, _: Instant, lost: &LostData) {
        self.to_recover.insert(lost.id);
        self.update();
    }

    fn on_data_acked(&mut self, _: Instant, id: LossId) {
        self.to_recover.remove(&id);
        self.update();
    }

    fn on_rtt_update(&mut self, now: Instant, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
        self.rtt_min = Some(rtt.min);
        self.refresh_rate(now);
    }

    fn on_send_state(&mut self, _: Instant, state: SendState) {
        if state == SendState::OffMode {
            self.governed_unsent = false;
            self.update();
        }
    }

    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest> {
        if ctx.state == SendState::OffMode && self.governed_unsent {
            self.governed_unsent = false;
            self.update();
        }
        if self.enabled {
            self.refresh_rate(now);
        }
        None
    }

    fn rate_limit(&self) -> Option<u64> {
        if !self.enabled {
            return None;
        }
        let floor = (2 * self.largest_packet) as f64 / self.window().as_secs_f64();
        Some(self.ack_rate.unwrap_or(0).max(floor as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DataRange, SentRange};
    use crate::testutil::{ctx, ctx_in, lost_round, ms, packet, ranges};

    fn lose_retransmission(p: &mut LadrRrl) {
        let r = ranges(Some(77));
        let info = packet(1, ms(0), SendKind::Retransmission, &r);
        p.on_packet_lost(ms(1), &info, LossTrigger::PacketThreshold);
    }

    fn frame_range(stream: u64, start: u64) -> [SentRange; 1] {
        [SentRange {
            range: DataRange {
                stream,
                start,
                end: start + 1000,
            },
            loss: None,
        }]
    }

    /// RTT_min `min_ms`; SRTT ten times that, so the floor (2 packets per SRTT, 24 kB/s at
    /// 100 ms) stays below the rates the tests measure.
    fn rtt_min(p: &mut LadrRrl, now: Instant, min_ms: u64) {
        let d = Duration::from_millis(min_ms);
        p.on_rtt_update(
            now,
            &RttSample {
                latest: d,
                smoothed: d * 10,
                min: d,
                var: d / 2,
            },
        );
    }

    /// Frame `stream`: 5 packets of 1000 bytes sent at `sent_ms`, acknowledged 1 ms apart from
    /// `ack_ms`.
    fn acked_frame(p: &mut LadrRrl, stream: u64, sent_ms: u64, ack_ms: u64) {
        let rs: Vec<[SentRange; 1]> = (0..5).map(|i| frame_range(stream, i * 1000)).collect();
        for (i, r) in rs.iter().enumerate() {
            p.on_packet_sent(
                ms(sent_ms),
                &packet(stream * 10 + i as u64, ms(sent_ms), SendKind::New, r),
            );
        }
        for (i, r) in rs.iter().enumerate() {
            let at = ms(ack_ms + i as u64);
            p.on_packet_acked(
                at,
                &packet(stream * 10 + i as u64, ms(sent_ms), SendKind::New, r),
            );
        }
    }

    #[test]
    fn stays_off_until_a_retransmission_is_lost() {
        let mut p = LadrRrl::new(LadrConfig::default());
        for id in 0..10 {
            p.on_data_lost(ms(0), &lost_round(id, 1));
        }
        assert!(!p.enabled());
        assert_eq!(p.rate_limit(), None);
        lose_retransmission(&mut p);
        assert!(p.enabled());
    }

    #[test]
    fn hysteresis_between_n_high_and_n_low_and_governed_data() {
        let mut p = LadrRrl::new(LadrConfig::default());
        lose_retransmission(&mut p);
        for id in 0..3 {
            p.on_data_lost(ms(0), &lost_round(id, 1));
        }
        assert!(!p.enabled(), "3 < n_high");
        p.on_data_lost(ms(0), &lost_round(3, 1));
        assert!(p.enabled(), "4 >= n_high");
        p.on_data_acked(ms(5), 0);
        p.on_data_acked(ms(5), 1);
        p.on_data_acked(ms(5), 2);
        assert!(
            p.enabled(),
            "n_rec = 1 < n_low but the governed data is not sent yet"
        );
        assert_eq!(p.poll_copy(ms(6), &ctx(0)), None);
        assert!(p.enabled());
        p.on_send_state(ms(7), SendState::OffMode);
        assert!(!p.enabled(), "governed data sent and n_rec < n_low");

        p.on_data_acked(ms(7), 3);
        // Governed data sent first, then recovery drains below n_low.
        for id in 10..14 {
            p.on_data_lost(ms(8), &lost_round(id, 1));
        }
        assert!(p.enabled());
        assert_eq!(p.poll_copy(ms(9), &ctx_in(SendState::OffMode, 0)), None);
        assert!(p.enabled(), "n_rec = 4");
        p.on_data_acked(ms(10), 10);
        p.on_data_acked(ms(10), 11);
        assert!(p.enabled(), "n_rec = 2 is not below n_low");
        p.on_data_acked(ms(10), 12);
        assert!(!p.enabled());
        p.on_data_acked(ms(10), 13);
        assert_eq!(p.to_recover(), 0);
    }

    #[test]
    fn uncongested_rate_is_the_average_of_the_last_six_frames() {
        let mut p = LadrRrl::new(LadrConfig::default());
        rtt_min(&mut p, ms(0), 10);
        // Eight frames, each 5 kB acknowledged over 4 ms (1.25 MB/s inside the frame), 17 ms
        // apart: the idle time between frames does not count.
        for i in 0..8 {
            acked_frame(&mut p, i, 17 * i, 17 * i + 10);
        }
        assert_eq!(p.ack_rate(), Some(1_250_000));
        // The two oldest drop out: six frames acknowledged over 2 ms each → 2.5 MB/s.
        for i in 8..14 {
            let rs: Vec<[SentRange; 1]> = (0..5).map(|k| frame_range(i, k * 1000)).collect();
            for (k, r) in rs.iter().enumerate() {
                p.on_packet_sent(
                    ms(17 * i),
                    &packet(i * 10 + k as u64, ms(17 * i), SendKind::New, r),
                );
            }
            for (k, r) in rs.iter().enumerate() {
                // Acknowledged at +10, +10.5, ..., +12 ms.
                let at = ms(17 * i + 10) + Duration::from_micros(500 * k as u64);
                p.on_packet_acked(at, &packet(i * 10 + k as u64, ms(17 * i), SendKind::New, r));
            }
        }
        assert_eq!(p.ack_rate(), Some(2_500_000));
    }

    #[test]
    fn congested_rate_counts_acks_since_the_late_frame_was_due() {
        let mut p = LadrRrl::new(LadrConfig::default());
        rtt_min(&mut p, ms(0), 10);
        for i in 0..6 {
            acked_frame(&mut p, i, 17 * i, 17 * i + 10);
        }
        assert_eq!(p.ack_rate(), Some(1_250_000));
        // Frame 6 sent at 200 ms is never acknowledged: from 226.67 ms (RTT_min + t_inv later)
        // the path is congested and F_c = frame 6. Frame 7 (sent 210 ms) gets 3 kB
        // acknowledged at 215..217 ms, after t_Fc + RTT_min = 210 ms, so they count.
        let r6 = frame_range(6, 0);
        p.on_packet_sent(ms(200), &packet(60, ms(200), SendKind::New, &r6));
        let rs: Vec<[SentRange; 1]> = (0..4).map(|k| frame_range(7, k * 1000)).collect();
        for (k, r) in rs.iter().enumerate() {
            p.on_packet_sent(ms(210), &packet(70 + k as u64, ms(210), SendKind::New, r));
        }
        for (k, r) in rs.iter().take(3).enumerate() {
            p.on_packet_acked(
                ms(215 + k as u64),
                &packet(70 + k as u64, ms(210), SendKind::New, r),
            );
        }
        // Before 226.67 ms frame 6 is not yet late: the six-frame average stands.
        assert_eq!(p.ack_rate(), Some(1_250_000));
        // At 240 ms: 3000 bytes since 210 ms over 30 ms = 100 kB/s.
        lose_retransmission(&mut p);
        for id in 0..4 {
            p.on_data_lost(ms(240), &lost_round(id, 1));
        }
        assert!(p.enabled());
        p.poll_copy(ms(240), &ctx(0));
        assert_eq!(p.ack_rate(), Some(100_000));
        assert_eq!(p.rate_limit(), Some(100_000));
        // The limit follows the estimate while it is on: at 250 ms, 3000 / 40 ms.
        p.poll_copy(ms(250), &ctx(0));
        assert_eq!(p.rate_limit(), Some(75_000));
    }
}
