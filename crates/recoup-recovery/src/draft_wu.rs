//! `draft-wu`: "Enhanced QUIC Recovery for Video Streaming" (draft-wu-moq-recovery-for-video-
//! streaming-00, Wu, Li, Luo, Lou, Xu, November 2025), from its abstract: "the QUIC sender
//! performs additional recovery logic when transport runs into application limited state, which
//! is for the lost data that has been retransmitted before but has not been acknowledged yet",
//! "a supplement to the existing recovery scheme that performs immediate loss retransmissions".
//!
//! The rules, each with its source (EXPERIMENTS.md "Defaults and their sources" has the table):
//! - *Eligible data*: a lost range whose ARQ retransmission has left and that is not yet
//!   acknowledged (abstract). It joins the tail of the authors' reinjection queue when its
//!   retransmission leaves and leaves the queue on acknowledgement or when its stream is reset
//!   (TOO §2.2, AutoRec §V-B: the same queue, ordered by last send).
//! - *When*: only while the sender is application limited (off-mode); never while it has new
//!   data and window to send it (on-mode), nor while the window is full (abstract).
//! - *How many*: each queued range once per application-limited period, from the head (silent
//!   longest) to the tail, only ranges last sent before the period began (TOO §2.2: "move
//!   retransmitted packet from the head to the end of Q_rein when the proposed off-mode
//!   reinjection is performed"). No per-range cap by default (TOO sets none; the abstract none);
//!   `limit=N` caps the extra sends per retransmission round.
//! - *Window*: the extra sends wait for congestion window and pacing like any packet and count
//!   as bytes in flight (AutoRec §VII-A: "limited by the sending rate determined by the
//!   congestion control algorithm"; §VIII-B). Their loss is not a congestion signal unless they
//!   were the newest send of a round (the transport's rule, ART §6.4).
//!
//! Where it differs from its authors' earlier systems: TOO reinjects in the same way but only on
//! connections whose expected waiting time E_waiting exceeds Theta (TOO §2.3); draft-wu has no
//! activator. AutoRec bounds the reinjections per range by K_theta from its Redundancy Adapter,
//! reinjects repeatedly within one off-mode period and also in on-mode after T_thres of silence
//! (AutoRec §V); draft-wu has none of the three.

use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendKind, SendState,
};
use crate::config::DraftWuConfig;
use crate::reinjection::{OffModePeriod, ReinjectionQueue};

/// The draft's sender.
#[derive(Debug, Clone)]
pub struct DraftWu {
    /// Extra sends allowed per range and round (`u32::MAX`: no cap).
    limit: u32,
    queue: ReinjectionQueue,
    period: OffModePeriod,
}

impl DraftWu {
    #[must_use]
    pub fn new(cfg: DraftWuConfig) -> Self {
        Self {
            limit: if cfg.limit == 0 { u32::MAX } else { cfg.limit },
            queue: ReinjectionQueue::new(),
            period: OffModePeriod::default(),
        }
    }

    /// Lost ranges the policy holds state for (zero once every lineage is acknowledged).
    #[must_use]
    pub fn tracked(&self) -> usize {
        self.queue.tracked()
    }
}

impl RecoveryPolicy for DraftWu {
    fn name(&self) -> &'static str {
        "draft-wu"
    }

    fn on_packet_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        if packet.kind == SendKind::Retransmission {
            for id in packet.ranges.iter().filter_map(|r| r.loss) {
                self.queue.on_retransmitted(id, now);
            }
        }
    }

    fn on_packet_acked(&mut self, _: Instant, _: &PacketInfo<'_>) {}

    fn on_packet_lost(&mut self, _: Instant, _: &PacketInfo<'_>, _: LossTrigger) {}

    fn on_data_lost(&mut self, _: Instant, _: &LostData) {}

    fn on_data_acked(&mut self, _: Instant, id: LossId) {
        self.queue.remove(id);
    }

    fn on_rtt_update(&mut self, _: Instant, _: &RttSample) {}

    fn on_send_state(&mut self, _: Instant, state: SendState) {
        self.period.enter(state, &self.queue);
    }

    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest> {
        self.period.enter(ctx.state, &self.queue);
        if !self.period.head_due(&self.queue) {
            return None;
        }
        self.queue
            .reinject_head(now, self.limit)
            .map(|id| CopyRequest {
                id,
                beyond_cwnd: false,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx_in, lost_round, ms, packet, ranges};

    fn retransmit(p: &mut DraftWu, id: LossId, at: Instant) {
        p.on_data_lost(at, &lost_round(id, 1));
        let r = ranges(Some(id));
        p.on_packet_sent(at, &packet(100 + id, at, SendKind::Retransmission, &r));
    }

    fn drain(p: &mut DraftWu, at: Instant, state: SendState) -> Vec<LossId> {
        std::iter::from_fn(|| p.poll_copy(at, &ctx_in(state, 0)).map(|c| c.id)).collect()
    }

    #[test]
    fn resends_retransmitted_data_once_per_application_limited_period() {
        let mut p = DraftWu::new(DraftWuConfig::default());
        retransmit(&mut p, 1, ms(10));
        retransmit(&mut p, 2, ms(11));
        p.on_send_state(ms(12), SendState::OffMode);
        assert_eq!(drain(&mut p, ms(12), SendState::OffMode), vec![1, 2]);
        // Within the same period nothing is resent again.
        assert_eq!(
            drain(&mut p, ms(13), SendState::OffMode),
            Vec::<LossId>::new()
        );
        // A new period resends both again: no cap by default.
        p.on_send_state(ms(14), SendState::OnMode);
        p.on_send_state(ms(20), SendState::OffMode);
        assert_eq!(drain(&mut p, ms(20), SendState::OffMode), vec![1, 2]);
    }

    #[test]
    fn a_range_whose_retransmission_was_lost_too_is_resent_when_application_limited() {
        let mut p = DraftWu::new(DraftWuConfig::default());
        retransmit(&mut p, 3, ms(10));
        // The retransmission is lost: round 2 opens and its ARQ retransmission leaves.
        p.on_data_lost(ms(40), &lost_round(3, 2));
        let r = ranges(Some(3));
        p.on_packet_sent(ms(40), &packet(200, ms(40), SendKind::Retransmission, &r));
        assert_eq!(
            drain(&mut p, ms(41), SendState::CwndLimited),
            Vec::<LossId>::new()
        );
        assert_eq!(drain(&mut p, ms(42), SendState::OffMode), vec![3]);
    }

    #[test]
    fn nothing_while_cwnd_limited_or_sending_new_data() {
        let mut p = DraftWu::new(DraftWuConfig::default());
        retransmit(&mut p, 1, ms(10));
        for state in [SendState::CwndLimited, SendState::OnMode] {
            p.on_send_state(ms(12), state);
            assert_eq!(drain(&mut p, ms(12), state), Vec::<LossId>::new());
        }
        // The transport's context alone (no on_send_state call) is enough.
        assert_eq!(
            drain(&mut p, ms(13), SendState::OffMode),
            vec![1],
            "off-mode entered through the context"
        );
    }

    #[test]
    fn only_data_retransmitted_before() {
        let mut p = DraftWu::new(DraftWuConfig::default());
        // Lost but its retransmission has not left: not eligible.
        p.on_data_lost(ms(10), &lost_round(5, 1));
        p.on_send_state(ms(11), SendState::OffMode);
        assert_eq!(
            drain(&mut p, ms(11), SendState::OffMode),
            Vec::<LossId>::new()
        );
        // A range retransmitted during the period waits for the next period.
        retransmit(&mut p, 5, ms(12));
        assert_eq!(
            drain(&mut p, ms(12), SendState::OffMode),
            Vec::<LossId>::new()
        );
        p.on_send_state(ms(13), SendState::OnMode);
        assert_eq!(drain(&mut p, ms(14), SendState::OffMode), vec![5]);
    }

    #[test]
    fn no_resend_of_acknowledged_data() {
        let mut p = DraftWu::new(DraftWuConfig::default());
        retransmit(&mut p, 1, ms(10));
        retransmit(&mut p, 2, ms(10));
        p.on_data_acked(ms(11), 1);
        assert_eq!(drain(&mut p, ms(12), SendState::OffMode), vec![2]);
        p.on_data_acked(ms(13), 2);
        assert_eq!(p.tracked(), 0);
        p.on_send_state(ms(14), SendState::OnMode);
        assert_eq!(
            drain(&mut p, ms(15), SendState::OffMode),
            Vec::<LossId>::new()
        );
    }

    #[test]
    fn limit_caps_extra_sends_per_round() {
        let mut p = DraftWu::new(DraftWuConfig { limit: 1 });
        retransmit(&mut p, 1, ms(10));
        assert_eq!(drain(&mut p, ms(11), SendState::OffMode), vec![1]);
        p.on_send_state(ms(12), SendState::OnMode);
        assert_eq!(
            drain(&mut p, ms(13), SendState::OffMode),
            Vec::<LossId>::new()
        );
        // The next round (its retransmission after the resend was lost) may again.
        p.on_send_state(ms(14), SendState::OnMode);
        retransmit(&mut p, 1, ms(15));
        assert_eq!(drain(&mut p, ms(16), SendState::OffMode), vec![1]);
        p.on_data_acked(ms(17), 1);
        assert_eq!(p.tracked(), 0);
    }

    #[test]
    fn copies_wait_for_the_window() {
        let mut p = DraftWu::new(DraftWuConfig::default());
        retransmit(&mut p, 1, ms(10));
        let c = p.poll_copy(ms(11), &ctx_in(SendState::OffMode, 0));
        assert_eq!(
            c,
            Some(CopyRequest {
                id: 1,
                beyond_cwnd: false
            })
        );
    }
}
