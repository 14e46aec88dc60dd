//! `autorec` (AutoRec §V): a Redundancy Adapter that picks K_theta reinjections per lost range
//! every decision interval, and a Reinjection Controller that spends them on off-mode and, after
//! T_thres of silence, opportunistically in on-mode.
//!
//! Measurements per decision interval D = `d` smoothed RTTs: the loss rate R (lost over decided
//! packets) and T_unit, the mean loss detection time. AutoRec §III-C defines it as "the time
//! elapsed for a data packet from being sent to being retransmitted", and §VIII-A stores "the
//! first transmission time of each currently unacknowledged packet so that the loss detection
//! time of the packet can be obtained when it is first retransmitted": one sample per lost range,
//! from its first send to the send of its first retransmission, taken in the interval in which
//! that retransmission leaves (`t_unit=loss`: every lost packet's send to its loss declaration,
//! recoup's earlier measure). An interval without a sample keeps the previous T_unit.
//!
//! Queue rules (AutoRec §V-B, Fig. 10): an ARQ retransmission inserts its range at the tail; a
//! reinjection moves it to the tail; it leaves on acknowledgement or when A_i reaches K_theta
//! (Fig. 11: K = 2 allows two reinjections after the retransmission).
//!
//! A_i belongs to the data, not to a round (`count=data`). §VIII-C follows one range P1 → P5 at
//! K = 2: "Upon a third trigger, AutoRec skips reinjection of P4 because the packet carrying data
//! D has been reinjected twice", and when P4 is lost QUIC retransmits it as P5, after which
//! "QUIC's existing loss-recovery mechanism ensures data D is successfully delivered to the
//! receiver through this persistent cycle of loss detection and retransmission", with no more
//! reinjections; §V-B: "nor will it be retransmitted excessively". So a retransmission of a lost
//! replica brings the data back into the queue with the count it had, and data that had K_theta
//! reinjections stays out. `count=round` restarts A_i at 0 with each ARQ round, as recoup's
//! earlier controller did.
//!
//! Off-mode (`offmode=repeat`): the controller "reinjects replicas when the current stream enters
//! off-mode" (§V-B), from the head of the queue, each resent entry to the tail, for as long as the
//! off-mode lasts; in Fig. 11 the only reason no third replica follows in the off-mode t3-t5 is
//! that "we cannot inject more replicas than the redundancy level". The policy adds no spacing of
//! its own between those reinjections: they leave as the transport's congestion window and pacer
//! allow, as in the paper, where "the actual amount of injected replicas is limited by the
//! sending rate determined by the congestion control algorithm" (§VII-A, Fig. 13). `offmode=once`
//! reinjects each entry at most once per off-mode period, and only entries last sent before the
//! period began: recoup's earlier rule, added so that one period would not spend all K
//! copies of a range back to back; the paper has no such rule.

use std::collections::BTreeMap;
use std::time::Duration;

use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendKind, SendState,
};
use crate::autorec_modes::{OffMode, ReinjectionCount, TUnitSample};
use crate::config::AutoRecConfig;
use crate::interval::IntervalStats;
use crate::redundancy::{self, Tolerances};
use crate::reinjection::{OffModePeriod, ReinjectionQueue};

/// AutoRec's sender.
#[derive(Debug, Clone)]
pub struct AutoRec {
    cfg: AutoRecConfig,
    tolerances: Tolerances,
    queue: ReinjectionQueue,
    stats: IntervalStats,
    srtt: Option<Duration>,
    next_decision: Option<Instant>,
    k_theta: u32,
    loss_rate: f64,
    t_unit: Option<Duration>,
    /// T_thres of `t_unit` and `k_theta`, kept as they change: the transport asks for the
    /// policy's deadline several times per packet, and a division of durations costs more than
    /// the rest of the answer.
    t_thres: Option<Duration>,
    /// When the head of the queue will have been silent for longer than T_thres
    /// ([`Self::opportunistic_deadline`]), kept as the queue, K_theta and T_thres change: the
    /// transport asks for the deadline and for a copy several times per packet, the queue
    /// changes only around a loss.
    opportunistic_at: Option<Instant>,
    period: OffModePeriod,
    /// First send of each lost range whose first retransmission has not left yet (T_unit).
    awaiting_retransmission: BTreeMap<LossId, Instant>,
}

impl AutoRec {
    #[must_use]
    pub fn new(cfg: AutoRecConfig) -> Self {
        Self {
            tolerances: Tolerances {
                alpha: cfg.alpha.as_secs_f64(),
                beta: cfg.beta,
                gamma: cfg.gamma,
            },
            cfg,
            queue: ReinjectionQueue::new(),
            stats: IntervalStats::default(),
            srtt: None,
            next_decision: None,
            k_theta: cfg.fixed_k.unwrap_or(0),
            loss_rate: 0.0,
            t_unit: None,
            t_thres: None,
            opportunistic_at: None,
            period: OffModePeriod::default(),
            awaiting_retransmission: BTreeMap::new(),
        }
    }

    /// The redundancy level in force.
    #[must_use]
    pub fn k_theta(&self) -> u32 {
        self.k_theta
    }

    /// Loss rate R measured over the last decision interval.
    #[must_use]
    pub fn loss_rate(&self) -> f64 {
        self.loss_rate
    }

    /// Mean loss detection time, once a loss has been seen.
    #[must_use]
    pub fn t_unit(&self) -> Option<Duration> {
        self.t_unit
    }

    /// Silence after which an entry is reinjected even in on-mode, Eq. (5).
    #[must_use]
    pub fn t_thres(&self) -> Option<Duration> {
        self.t_thres
    }

    /// Entries in the reinjection queue.
    #[must_use]
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Lost ranges the policy holds any state for (zero once every lineage is acknowledged).
    #[must_use]
    pub fn tracked(&self) -> usize {
        self.queue.tracked() + self.awaiting_retransmission.len()
    }

    /// Decides if the decision interval is over. Asked at every event: the check is inline, the
    /// decision out of line.
    #[inline]
    fn maybe_decide(&mut self, now: Instant) {
        if self.next_decision.is_some_and(|due| now >= due) {
            self.decide(now);
        }
    }

    #[cold]
    fn decide(&mut self, now: Instant) {
        // `next_decision` is set only with an RTT estimate.
        let Some(srtt) = self.srtt else {
            return;
        };
        self.loss_rate = self.stats.loss_rate();
        if let Some(t) = self.stats.mean_detection() {
            self.t_unit = Some(t);
        }
        self.k_theta = match self.cfg.fixed_k {
            Some(k) => k,
            None => redundancy::k_theta(
                self.loss_rate,
                self.t_unit.unwrap_or_default().as_secs_f64(),
                &self.tolerances,
                self.cfg.k_max,
            ),
        };
        self.t_thres = self.t_unit.map(|t| redundancy::t_thres(t, self.k_theta));
        self.queue.drop_reinjected_at_limit(self.k_theta);
        self.refresh_opportunistic();
        self.stats.reset();
        self.next_decision = Some(now + decision_interval(srtt, self.cfg.d_rtts));
    }

    /// When the head of the queue will have been silent for longer than T_thres. AutoRec §V-B
    /// reinjects it then "regardless of whether the off-mode is entered or not", so the
    /// transport must wake for it even if no acknowledgement or send comes in the meantime
    /// (between the frames of an application-limited stream, none may come for tens of ms).
    /// Strictly more silence than T_thres: due at `last_sent + T_thres + 1 ns`.
    fn opportunistic_deadline(&self) -> Option<Instant> {
        if !self.cfg.opportunistic || self.k_theta == 0 {
            return None;
        }
        let head = self.queue.head()?;
        Some(head.last_sent + self.t_thres()? + Duration::from_nanos(1))
    }

    /// Recomputes `opportunistic_at`; called after every change of the queue, K_theta or
    /// T_thres.
    fn refresh_opportunistic(&mut self) {
        self.opportunistic_at = self.opportunistic_deadline();
    }
}

fn decision_interval(srtt: Duration, rtts: u32) -> Duration {
    // A zero RTT estimate would make every event a decision; a microsecond floor avoids that.
    srtt.max(Duration::from_micros(1)).saturating_mul(rtts)
}

impl RecoveryPolicy for AutoRec {
    fn name(&self) -> &'static str {
        "autorec"
    }

    fn on_packet_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        self.maybe_decide(now);
        match packet.kind {
            SendKind::Retransmission => {
                for id in packet.ranges.iter().filter_map(|r| r.loss) {
                    if let Some(first_sent) = self.awaiting_retransmission.remove(&id) {
                        self.stats
                            .on_detection(now.saturating_duration_since(first_sent));
                    }
                    match self.cfg.count {
                        ReinjectionCount::PerData => {
                            self.queue
                                .on_retransmitted_keeping_count(id, now, self.k_theta);
                        }
                        ReinjectionCount::PerRound => self.queue.on_retransmitted(id, now),
                    }
                }
                self.refresh_opportunistic();
            }
            // T_stmp is the last (re)send time (AutoRec §V-B): when the copy left, not when it
            // was chosen.
            SendKind::Copy => {
                for id in packet.ranges.iter().filter_map(|r| r.loss) {
                    self.queue.on_copy_sent(id, now);
                }
                self.refresh_opportunistic();
            }
            SendKind::New => {}
        }
    }

    fn on_packet_acked(&mut self, now: Instant, _: &PacketInfo<'_>) {
        self.stats.on_acked();
        self.maybe_decide(now);
    }

    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, _: LossTrigger) {
        self.stats.on_lost();
        if self.cfg.t_unit == TUnitSample::LossDeclaration {
            self.stats
                .on_detection(now.saturating_duration_since(packet.sent));
        }
        self.maybe_decide(now);
    }

    fn on_data_lost(&mut self, now: Instant, lost: &LostData) {
        if self.cfg.t_unit == TUnitSample::FirstRetransmission && lost.round == 1 {
            self.awaiting_retransmission
                .insert(lost.id, lost.first_sent);
        }
        self.maybe_decide(now);
    }

    fn on_data_acked(&mut self, _: Instant, id: LossId) {
        if self.queue.remove(id) {
            self.refresh_opportunistic();
        }
        self.awaiting_retransmission.remove(&id);
    }

    fn on_rtt_update(&mut self, now: Instant, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
        if self.next_decision.is_none() {
            self.next_decision = Some(now + decision_interval(rtt.smoothed, self.cfg.d_rtts));
        }
        self.maybe_decide(now);
    }

    fn on_send_state(&mut self, _: Instant, state: SendState) {
        self.period.enter(state, &self.queue);
    }

    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest> {
        self.maybe_decide(now);
        self.period.enter(ctx.state, &self.queue);
        if self.k_theta == 0 || self.queue.is_empty() {
            return None;
        }
        let off_mode = ctx.state == SendState::OffMode
            && match self.cfg.offmode {
                OffMode::Repeat => true,
                OffMode::Once => self.period.head_due(&self.queue),
            };
        let silent_too_long = self.opportunistic_at.is_some_and(|due| now >= due);
        if !(off_mode || silent_too_long) {
            return None;
        }
        let id = self.queue.reinject_head(now, self.k_theta)?;
        self.refresh_opportunistic();
        Some(CopyRequest {
            id,
            beyond_cwnd: false,
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.next_decision, self.opportunistic_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn on_timeout(&mut self, now: Instant) {
        self.maybe_decide(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx_in, lost_round, ms, packet, ranges, rtt};

    /// Lineages of the warm-up interval, out of the way of the tests' own.
    const WARM_UP_IDS: LossId = 10_000;

    /// Drive one decision interval (D = 5 x 20 ms = 100 ms) with `lost` of 100 packets lost,
    /// each declared lost and retransmitted 60 ms after its send; the retransmissions are
    /// acknowledged at once, so the queue starts empty.
    fn warmed_up(cfg: AutoRecConfig, lost: u64) -> AutoRec {
        let mut p = AutoRec::new(cfg);
        p.on_rtt_update(ms(0), &rtt(20));
        let new = ranges(None);
        for pn in 0..100 {
            let info = packet(pn, ms(0), SendKind::New, &new);
            p.on_packet_sent(ms(0), &info);
            if pn < lost {
                p.on_packet_lost(ms(60), &info, LossTrigger::TimeThreshold);
                let id = WARM_UP_IDS + pn;
                p.on_data_lost(ms(60), &lost_round(id, 1));
                let r = ranges(Some(id));
                p.on_packet_sent(
                    ms(60),
                    &packet(1000 + pn, ms(60), SendKind::Retransmission, &r),
                );
                p.on_data_acked(ms(60), id);
            } else {
                p.on_packet_acked(ms(60), &info);
            }
        }
        p.on_timeout(ms(100));
        assert_eq!(p.tracked(), 0);
        p
    }

    fn once() -> AutoRecConfig {
        AutoRecConfig {
            offmode: OffMode::Once,
            ..AutoRecConfig::testbed()
        }
    }

    /// The ARQ round `round` of `id` starts at `at`: its retransmission goes out.
    fn next_round(p: &mut AutoRec, id: LossId, round: u32, pn: u64, at: Instant) {
        p.on_data_lost(at, &lost_round(id, round));
        let r = ranges(Some(id));
        p.on_packet_sent(at, &packet(pn, at, SendKind::Retransmission, &r));
    }

    fn retransmit(p: &mut AutoRec, id: LossId, pn: u64, at: Instant) {
        next_round(p, id, 1, pn, at);
    }

    fn poll(p: &mut AutoRec, at: Instant, state: SendState) -> Option<LossId> {
        p.poll_copy(at, &ctx_in(state, 0)).map(|c| c.id)
    }

    #[test]
    fn decision_interval_sets_k_theta_from_measurements() {
        // R = 5 %, T_unit = 60 ms: K_theta = 2 (see redundancy::tests::k_theta_by_hand).
        let p = warmed_up(AutoRecConfig::testbed(), 5);
        assert!((p.loss_rate() - 0.05).abs() < 1e-12);
        assert_eq!(p.t_unit(), Some(Duration::from_millis(60)));
        assert_eq!(p.k_theta(), 2);
        assert_eq!(p.t_thres(), Some(Duration::from_millis(20)));
        assert_eq!(p.poll_timeout(), Some(ms(200)));
    }

    #[test]
    fn no_loss_means_k_zero_and_no_copies() {
        let mut p = warmed_up(AutoRecConfig::testbed(), 0);
        assert_eq!(p.k_theta(), 0);
        retransmit(&mut p, 1, 200, ms(100));
        p.on_send_state(ms(101), SendState::OffMode);
        assert_eq!(poll(&mut p, ms(101), SendState::OffMode), None);
        assert_eq!(poll(&mut p, ms(1000), SendState::OffMode), None);
    }

    #[test]
    fn off_mode_repeats_from_the_head_until_k_theta_within_one_period() {
        let mut p = warmed_up(AutoRecConfig::testbed(), 5);
        retransmit(&mut p, 1, 200, ms(100));
        retransmit(&mut p, 2, 201, ms(101));
        assert_eq!(poll(&mut p, ms(105), SendState::OnMode), None);
        p.on_send_state(ms(106), SendState::OffMode);
        // One long off-mode: head, to the tail, head again, until each has K = 2.
        let got: Vec<_> = (0..6)
            .map(|i| poll(&mut p, ms(106 + i), SendState::OffMode))
            .collect();
        assert_eq!(got, [Some(1), Some(2), Some(1), Some(2), None, None]);
        assert_eq!(p.queue_len(), 0);
        // Never beyond K_theta, in off-mode or after any silence.
        assert_eq!(poll(&mut p, ms(150), SendState::OffMode), None);
        assert_eq!(poll(&mut p, ms(190), SendState::OnMode), None);
    }

    #[test]
    fn an_acknowledged_entry_is_reinjected_no_more() {
        let mut p = warmed_up(AutoRecConfig::testbed(), 5);
        retransmit(&mut p, 1, 200, ms(100));
        retransmit(&mut p, 2, 201, ms(101));
        p.on_send_state(ms(102), SendState::OffMode);
        assert_eq!(poll(&mut p, ms(102), SendState::OffMode), Some(1));
        p.on_data_acked(ms(103), 1);
        assert_eq!(poll(&mut p, ms(103), SendState::OffMode), Some(2));
        assert_eq!(poll(&mut p, ms(104), SendState::OffMode), Some(2));
        assert_eq!(poll(&mut p, ms(105), SendState::OffMode), None);
        assert_eq!(
            p.tracked(),
            1,
            "2 is remembered with A_i = 2 until acknowledged"
        );
        p.on_data_acked(ms(106), 2);
        assert_eq!(p.tracked(), 0);
    }

    #[test]
    fn a_retransmitted_replica_keeps_its_count() {
        let mut p = warmed_up(AutoRecConfig::testbed(), 5);
        retransmit(&mut p, 2, 200, ms(100));
        assert_eq!(poll(&mut p, ms(101), SendState::OffMode), Some(2));
        assert_eq!(poll(&mut p, ms(101), SendState::OffMode), Some(2));
        assert_eq!(poll(&mut p, ms(101), SendState::OffMode), None);
        // 2's last replica is lost: ARQ's round 2 brings it back with A_i = 2 = K, so it stays
        // out (AutoRec §VIII-C: P5 is left to ARQ).
        next_round(&mut p, 2, 2, 201, ms(150));
        assert_eq!(poll(&mut p, ms(151), SendState::OffMode), None);
        assert_eq!((p.queue_len(), p.tracked()), (0, 1));
        // After one reinjection, round 2 leaves one more.
        retransmit(&mut p, 1, 202, ms(152));
        assert_eq!(poll(&mut p, ms(153), SendState::OffMode), Some(1));
        assert_eq!(poll(&mut p, ms(154), SendState::OnMode), None);
        next_round(&mut p, 1, 2, 203, ms(160));
        assert_eq!(poll(&mut p, ms(161), SendState::OffMode), Some(1));
        assert_eq!(poll(&mut p, ms(161), SendState::OffMode), None);
        p.on_data_acked(ms(170), 1);
        p.on_data_acked(ms(170), 2);
        assert_eq!(p.tracked(), 0);
    }

    #[test]
    fn count_round_restarts_a_i_with_each_arq_round() {
        let cfg = AutoRecConfig {
            count: ReinjectionCount::PerRound,
            ..AutoRecConfig::testbed()
        };
        let mut p = warmed_up(cfg, 5);
        retransmit(&mut p, 1, 200, ms(100));
        assert_eq!(poll(&mut p, ms(101), SendState::OffMode), Some(1));
        assert_eq!(poll(&mut p, ms(101), SendState::OffMode), Some(1));
        assert_eq!(poll(&mut p, ms(101), SendState::OffMode), None);
        next_round(&mut p, 1, 2, 201, ms(150));
        assert_eq!(poll(&mut p, ms(151), SendState::OffMode), Some(1));
        assert_eq!(poll(&mut p, ms(151), SendState::OffMode), Some(1));
        assert_eq!(poll(&mut p, ms(151), SendState::OffMode), None);
    }

    #[test]
    fn t_unit_runs_from_first_send_to_first_retransmission() {
        let mut p = AutoRec::new(AutoRecConfig::testbed());
        p.on_rtt_update(ms(0), &rtt(20));
        let new = ranges(None);
        for pn in 0..20 {
            let info = packet(pn, ms(0), SendKind::New, &new);
            p.on_packet_sent(ms(0), &info);
            if pn == 0 {
                p.on_packet_lost(ms(60), &info, LossTrigger::PacketThreshold);
            } else {
                p.on_packet_acked(ms(60), &info);
            }
        }
        // Declared lost at 60 ms, first sent at 0; the retransmission waits until 70 ms.
        p.on_data_lost(ms(60), &lost_round(1, 1));
        let r = ranges(Some(1));
        p.on_packet_sent(ms(70), &packet(20, ms(70), SendKind::Retransmission, &r));
        // A lost retransmission or copy gives no sample, nor does the next round.
        let resent = packet(20, ms(70), SendKind::Retransmission, &r);
        p.on_packet_lost(ms(95), &resent, LossTrigger::TimeThreshold);
        p.on_data_lost(ms(95), &lost_round(1, 2));
        p.on_packet_sent(ms(96), &packet(21, ms(96), SendKind::Retransmission, &r));
        p.on_timeout(ms(100));
        assert_eq!(p.t_unit(), Some(Duration::from_millis(70)));

        // recoup's earlier measure: each lost packet's send to its loss declaration.
        let cfg = AutoRecConfig {
            t_unit: TUnitSample::LossDeclaration,
            ..AutoRecConfig::testbed()
        };
        let mut p = AutoRec::new(cfg);
        p.on_rtt_update(ms(0), &rtt(20));
        let first = packet(0, ms(0), SendKind::New, &new);
        p.on_packet_sent(ms(0), &first);
        p.on_packet_lost(ms(60), &first, LossTrigger::PacketThreshold);
        p.on_packet_sent(ms(70), &packet(1, ms(70), SendKind::Retransmission, &r));
        p.on_packet_lost(
            ms(95),
            &packet(1, ms(70), SendKind::Retransmission, &r),
            LossTrigger::TimeThreshold,
        );
        p.on_timeout(ms(100));
        // (60 + 25) / 2 ms.
        assert_eq!(p.t_unit(), Some(Duration::from_micros(42_500)));
    }

    #[test]
    fn offmode_once_reinjects_from_the_head_once_per_period() {
        let mut p = warmed_up(once(), 5);
        retransmit(&mut p, 1, 200, ms(100));
        retransmit(&mut p, 2, 201, ms(101));
        // On-mode, not yet silent for T_thres = 20 ms: nothing.
        assert_eq!(poll(&mut p, ms(105), SendState::OnMode), None);
        p.on_send_state(ms(106), SendState::OffMode);
        assert_eq!(poll(&mut p, ms(106), SendState::OffMode), Some(1));
        assert_eq!(poll(&mut p, ms(106), SendState::OffMode), Some(2));
        // Both were sent in this period: no back-to-back repeat.
        assert_eq!(poll(&mut p, ms(106), SendState::OffMode), None);
        // A new off-mode period reinjects again; the second reinjection reaches K = 2.
        p.on_send_state(ms(107), SendState::OnMode);
        p.on_send_state(ms(108), SendState::OffMode);
        assert_eq!(poll(&mut p, ms(108), SendState::OffMode), Some(1));
        assert_eq!(poll(&mut p, ms(108), SendState::OffMode), Some(2));
        assert_eq!(p.queue_len(), 0);
        assert_eq!(poll(&mut p, ms(500), SendState::OffMode), None);
    }

    #[test]
    fn off_mode_seen_through_the_send_context() {
        for cfg in [AutoRecConfig::testbed(), once()] {
            let mut p = warmed_up(cfg, 5);
            retransmit(&mut p, 1, 200, ms(100));
            // No on_send_state call: the context alone reports off-mode.
            assert_eq!(poll(&mut p, ms(101), SendState::OffMode), Some(1));
            // Once: only entries sent before the period began.
            let again = (cfg.offmode == OffMode::Repeat).then_some(1);
            assert_eq!(poll(&mut p, ms(101), SendState::OffMode), again);
        }
    }

    #[test]
    fn opportunistic_only_after_t_thres() {
        let mut p = warmed_up(AutoRecConfig::testbed(), 5);
        retransmit(&mut p, 1, 200, ms(100));
        // T_thres = 20 ms: silent for exactly 20 ms is not "longer than".
        assert_eq!(poll(&mut p, ms(110), SendState::OnMode), None);
        assert_eq!(poll(&mut p, ms(120), SendState::OnMode), None);
        assert_eq!(poll(&mut p, ms(121), SendState::CwndLimited), Some(1));
        // Moved to the tail with T_stmp = 121 ms: silent again only after 141 ms.
        assert_eq!(poll(&mut p, ms(141), SendState::OnMode), None);
        assert_eq!(poll(&mut p, ms(142), SendState::OnMode), Some(1));
        // K = 2 reached: deleted.
        assert_eq!(p.queue_len(), 0);
    }

    #[test]
    fn the_timer_wakes_for_the_opportunistic_deadline() {
        let mut p = warmed_up(AutoRecConfig::testbed(), 5);
        assert_eq!(
            p.poll_timeout(),
            Some(ms(200)),
            "empty queue: the decision only"
        );
        retransmit(&mut p, 1, 200, ms(100));
        // T_thres = 20 ms after the retransmission, before the decision at 200 ms.
        let due = ms(120) + Duration::from_nanos(1);
        assert_eq!(p.poll_timeout(), Some(due));
        p.on_timeout(due);
        assert_eq!(poll(&mut p, due, SendState::OnMode), Some(1));
        // The copy leaves later (pacing): its silence counts from then.
        let r = ranges(Some(1));
        p.on_packet_sent(ms(125), &packet(201, ms(125), SendKind::Copy, &r));
        assert_eq!(p.poll_timeout(), Some(ms(145) + Duration::from_nanos(1)));

        let off = AutoRecConfig {
            opportunistic: false,
            ..AutoRecConfig::testbed()
        };
        let mut p = warmed_up(off, 5);
        retransmit(&mut p, 1, 200, ms(100));
        assert_eq!(
            p.poll_timeout(),
            Some(ms(200)),
            "ablation: no opportunistic timer"
        );
        let mut p = warmed_up(AutoRecConfig::testbed(), 0);
        retransmit(&mut p, 1, 200, ms(100));
        assert_eq!(
            p.poll_timeout(),
            Some(ms(200)),
            "K = 0: no copies, no timer"
        );
    }

    #[test]
    fn ablation_without_opportunistic_reinjection() {
        let cfg = AutoRecConfig {
            opportunistic: false,
            ..AutoRecConfig::testbed()
        };
        let mut p = warmed_up(cfg, 5);
        retransmit(&mut p, 1, 200, ms(100));
        assert_eq!(poll(&mut p, ms(190), SendState::OnMode), None);
        assert_eq!(poll(&mut p, ms(191), SendState::OffMode), Some(1));
    }

    #[test]
    fn fixed_k_ignores_the_adapter() {
        let cfg = AutoRecConfig {
            fixed_k: Some(3),
            ..AutoRecConfig::testbed()
        };
        let mut p = warmed_up(cfg, 0);
        assert_eq!(p.k_theta(), 3);
        retransmit(&mut p, 1, 200, ms(100));
        for period in 0..3 {
            let at = ms(110 + 2 * period);
            p.on_send_state(at, SendState::OffMode);
            assert_eq!(
                poll(&mut p, at, SendState::OffMode),
                Some(1),
                "period {period}"
            );
            p.on_send_state(at, SendState::OnMode);
        }
        assert_eq!(p.queue_len(), 0);

        let zero = AutoRecConfig {
            fixed_k: Some(0),
            ..AutoRecConfig::testbed()
        };
        let mut p = warmed_up(zero, 50);
        retransmit(&mut p, 1, 200, ms(100));
        assert_eq!(poll(&mut p, ms(101), SendState::OffMode), None);
        assert_eq!(poll(&mut p, ms(900), SendState::OnMode), None);
    }

    #[test]
    fn acknowledgements_empty_the_queue() {
        let mut p = warmed_up(AutoRecConfig::testbed(), 5);
        retransmit(&mut p, 1, 200, ms(100));
        retransmit(&mut p, 2, 201, ms(100));
        assert_eq!(poll(&mut p, ms(121), SendState::OnMode), Some(1));
        // Round 2 of lineage 1: back in the queue with A_i = 1 < K.
        p.on_data_lost(ms(130), &lost_round(1, 2));
        let r = ranges(Some(1));
        p.on_packet_sent(ms(130), &packet(300, ms(130), SendKind::Retransmission, &r));
        assert_eq!(p.queue_len(), 2);
        p.on_data_acked(ms(140), 1);
        p.on_data_acked(ms(140), 2);
        assert_eq!(p.queue_len(), 0);
        assert_eq!(p.tracked(), 0);
        assert_eq!(poll(&mut p, ms(400), SendState::OffMode), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 1000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0xa070_0001),
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// The kept opportunistic deadline is the one computed from the queue, K_theta and
        /// T_thres after every call, through random losses, retransmissions, copies,
        /// acknowledgements, decisions and both off-mode rules.
        #[test]
        fn kept_deadline_is_the_computed_one(
            repeat in proptest::bool::ANY,
            events in proptest::collection::vec((0u8..8, 0u64..4, 0u64..12), 0..300),
        ) {
            let cfg = if repeat { AutoRecConfig::testbed() } else { once() };
            let mut p = warmed_up(cfg, 5);
            let (mut now, mut pn) = (ms(100), 1000u64);
            for (i, &(kind, step, x)) in events.iter().enumerate() {
                now += Duration::from_millis(step * 7);
                let again = ranges(Some(x));
                let state = match x % 3 {
                    0 => SendState::OffMode,
                    1 => SendState::OnMode,
                    _ => SendState::CwndLimited,
                };
                match kind {
                    0 | 1 => next_round(&mut p, x, 1 + (x % 2) as u32, pn, now),
                    2 => p.on_packet_sent(now, &packet(pn, now, SendKind::Copy, &again)),
                    3 => p.on_data_acked(now, x),
                    4 => p.on_rtt_update(now, &rtt(10 + 20 * (x % 4))),
                    5 => p.on_timeout(now),
                    6 => p.on_send_state(now, state),
                    _ => {
                        let _ = poll(&mut p, now, state);
                    }
                }
                pn += 1;
                proptest::prop_assert_eq!(
                    p.opportunistic_at, p.opportunistic_deadline(), "event {}", i
                );
            }
        }
    }
}
