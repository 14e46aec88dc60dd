//! `too` (TOO §2): reinject retransmitted-but-unacknowledged data when the sender enters
//! off-mode, but only on connections whose expected receiver-side waiting time is high.
//!
//! The activator (TOO §2.3, Eq. (1)) is E_waiting = (1 - r) SRTT sum_{k=0}^{n-1} (k + 1) r^k,
//! recomputed every `cycle` SRTTs from the last cycle's loss rate r (lost over decided packets)
//! and SRTT; reinjection is on while E_waiting > Theta. TOO sets no per-range limit: each entry is
//! reinjected once per off-mode period (walking the queue from the head, moving each entry to the
//! tail, §2.2), and plain ARQ still covers the newest send.

use std::time::Duration;

use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendKind, SendState,
};
use crate::config::TooConfig;
use crate::interval::IntervalStats;
use crate::reinjection::{OffModePeriod, ReinjectionQueue};

/// E_waiting, TOO Eq. (1). `r` is clamped to [0, 1].
#[must_use]
pub fn e_waiting(r: f64, srtt: Duration, n: u32) -> Duration {
    let r = if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) };
    let mut sum = 0.0;
    let mut r_k = 1.0;
    for k in 0..n {
        sum += f64::from(k + 1) * r_k;
        r_k *= r;
    }
    Duration::try_from_secs_f64((1.0 - r) * srtt.as_secs_f64() * sum).unwrap_or(Duration::MAX)
}

/// TOO's sender.
#[derive(Debug, Clone)]
pub struct Too {
    cfg: TooConfig,
    queue: ReinjectionQueue,
    stats: IntervalStats,
    srtt: Option<Duration>,
    next_cycle: Option<Instant>,
    e_waiting: Duration,
    period: OffModePeriod,
}

impl Too {
    #[must_use]
    pub fn new(cfg: TooConfig) -> Self {
        Self {
            cfg,
            queue: ReinjectionQueue::new(),
            stats: IntervalStats::default(),
            srtt: None,
            next_cycle: None,
            e_waiting: Duration::ZERO,
            period: OffModePeriod::default(),
        }
    }

    /// The activator's value from the last completed cycle.
    #[must_use]
    pub fn e_waiting(&self) -> Duration {
        self.e_waiting
    }

    /// Whether reinjection is on.
    #[must_use]
    pub fn active(&self) -> bool {
        self.e_waiting > self.cfg.theta
    }

    #[must_use]
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    fn cycle_length(&self, srtt: Duration) -> Duration {
        srtt.max(Duration::from_micros(1))
            .saturating_mul(self.cfg.cycle_srtts)
    }

    /// Starts a new cycle if this one is over. Asked at every event: the check is inline, the
    /// recomputation out of line.
    #[inline]
    fn maybe_recompute(&mut self, now: Instant) {
        if self.next_cycle.is_some_and(|due| now >= due) {
            self.recompute(now);
        }
    }

    #[cold]
    fn recompute(&mut self, now: Instant) {
        // `next_cycle` is set only with an RTT estimate.
        let Some(srtt) = self.srtt else {
            return;
        };
        self.e_waiting = e_waiting(self.stats.loss_rate(), srtt, self.cfg.n);
        self.stats.reset();
        self.next_cycle = Some(now + self.cycle_length(srtt));
    }
}

impl RecoveryPolicy for Too {
    fn name(&self) -> &'static str {
        "too"
    }

    fn on_packet_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        self.maybe_recompute(now);
        if packet.kind == SendKind::Retransmission {
            for id in packet.ranges.iter().filter_map(|r| r.loss) {
                self.queue.on_retransmitted(id, now);
            }
        }
    }

    fn on_packet_acked(&mut self, now: Instant, _: &PacketInfo<'_>) {
        self.stats.on_acked();
        self.maybe_recompute(now);
    }

    fn on_packet_lost(&mut self, now: Instant, _: &PacketInfo<'_>, _: LossTrigger) {
        self.stats.on_lost();
        self.maybe_recompute(now);
    }

    fn on_data_lost(&mut self, now: Instant, _: &LostData) {
        self.maybe_recompute(now);
    }

    fn on_data_acked(&mut self, _: Instant, id: LossId) {
        self.queue.remove(id);
    }

    fn on_rtt_update(&mut self, now: Instant, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
        if self.next_cycle.is_none() {
            self.next_cycle = Some(now + self.cycle_length(rtt.smoothed));
        }
        self.maybe_recompute(now);
    }

    fn on_send_state(&mut self, _: Instant, state: SendState) {
        self.period.enter(state, &self.queue);
    }

    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest> {
        self.maybe_recompute(now);
        self.period.enter(ctx.state, &self.queue);
        if !self.active() || !self.period.head_due(&self.queue) {
            return None;
        }
        self.queue
            .reinject_head(now, u32::MAX)
            .map(|id| CopyRequest {
                id,
                beyond_cwnd: false,
            })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_cycle
    }

    fn on_timeout(&mut self, now: Instant) {
        self.maybe_recompute(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx_in, lost_round, ms, packet, ranges, rtt};

    #[test]
    fn activator_by_hand() {
        // r = 10 %, SRTT = 100 ms, n = 4: 0.9 x 100 ms x (1 + 0.2 + 0.03 + 0.004) = 111.06 ms.
        let e = e_waiting(0.1, Duration::from_millis(100), 4);
        assert!((e.as_secs_f64() - 0.111_06).abs() < 1e-9, "{e:?}");
        // r = 0: exactly one SRTT.
        assert_eq!(
            e_waiting(0.0, Duration::from_millis(40), 4),
            Duration::from_millis(40)
        );
        // r = 50 %, SRTT = 60 ms, n = 2: 0.5 x 60 ms x (1 + 1) = 60 ms.
        let e = e_waiting(0.5, Duration::from_millis(60), 2);
        assert!((e.as_secs_f64() - 0.060).abs() < 1e-9, "{e:?}");
        // r = 20 %, SRTT = 30 ms, n = 1: 0.8 x 30 ms = 24 ms.
        let e = e_waiting(0.2, Duration::from_millis(30), 1);
        assert!((e.as_secs_f64() - 0.024).abs() < 1e-9, "{e:?}");
        assert_eq!(e_waiting(1.0, Duration::from_millis(30), 4), Duration::ZERO);
        assert_eq!(
            e_waiting(f64::NAN, Duration::from_millis(30), 1),
            Duration::from_millis(30)
        );
    }

    /// One activator cycle (2 x SRTT) with `lost` of 10 packets lost.
    fn cycled(srtt_ms: u64, lost: u64) -> Too {
        let mut p = Too::new(TooConfig::default());
        p.on_rtt_update(ms(0), &rtt(srtt_ms));
        let new = ranges(None);
        for pn in 0..10 {
            let info = packet(pn, ms(0), SendKind::New, &new);
            p.on_packet_sent(ms(0), &info);
            if pn < lost {
                p.on_packet_lost(ms(1), &info, LossTrigger::PacketThreshold);
            } else {
                p.on_packet_acked(ms(1), &info);
            }
        }
        p.on_timeout(ms(2 * srtt_ms));
        p
    }

    fn retransmit(p: &mut Too, id: LossId, at: Instant) {
        p.on_data_lost(at, &lost_round(id, 1));
        let r = ranges(Some(id));
        p.on_packet_sent(at, &packet(100 + id, at, SendKind::Retransmission, &r));
    }

    #[test]
    fn reinjects_the_queue_on_off_mode_entry_when_active() {
        // SRTT 100 ms, r = 10 %: E_waiting = 111 ms > 50 ms.
        let mut p = cycled(100, 1);
        assert!(p.active());
        retransmit(&mut p, 1, ms(200));
        retransmit(&mut p, 2, ms(201));
        assert_eq!(p.poll_copy(ms(202), &ctx_in(SendState::OnMode, 0)), None);
        p.on_send_state(ms(203), SendState::OffMode);
        let ids: Vec<_> = std::iter::from_fn(|| {
            p.poll_copy(ms(203), &ctx_in(SendState::OffMode, 0))
                .map(|c| c.id)
        })
        .collect();
        assert_eq!(ids, vec![1, 2]);
        p.on_data_acked(ms(250), 1);
        p.on_data_acked(ms(250), 2);
        assert_eq!(p.queue_len(), 0);
    }

    #[test]
    fn inactive_below_theta() {
        // SRTT 20 ms, r = 10 %: E_waiting = 22 ms <= 50 ms.
        let mut p = cycled(20, 1);
        assert!(!p.active());
        retransmit(&mut p, 1, ms(40));
        p.on_send_state(ms(41), SendState::OffMode);
        assert_eq!(p.poll_copy(ms(41), &ctx_in(SendState::OffMode, 0)), None);
    }
}
