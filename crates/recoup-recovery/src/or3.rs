//! `or3`: ART's OR3 baseline (ART §7.1): the redundancy level grows with the retransmission
//! round, R = 2n - 1 sends in round n (or the R = 2n + 1 variant), all back to back.
//!
//! R counts every send of the round (ART Fig. 9: "retransmits 3 replicas ... R_1 = 3"), so the
//! transport's ARQ retransmission is one of them and the policy adds R - 1 copies: 0, 2, 4, ...
//! for 2n - 1 and 2, 4, 6, ... for 2n + 1.

use std::collections::VecDeque;

use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendState,
};
use crate::config::Or3Variant;

/// Copies per round never exceed this, whatever the round: the state stays bounded even for a
/// lineage that keeps losing.
pub const MAX_COPIES_PER_ROUND: u32 = 32;

/// Round-dependent redundancy, back to back within the congestion window.
#[derive(Debug, Clone)]
pub struct Or3 {
    variant: Or3Variant,
    /// (lineage, copies still owed this round), oldest loss first.
    owed: VecDeque<(LossId, u32)>,
}

impl Or3 {
    #[must_use]
    pub fn new(variant: Or3Variant) -> Self {
        Self {
            variant,
            owed: VecDeque::new(),
        }
    }

    /// Copies (besides the retransmission) in round `round`.
    #[must_use]
    pub fn copies(&self, round: u32) -> u32 {
        (self.variant.redundancy(round) - 1).min(MAX_COPIES_PER_ROUND)
    }
}

impl RecoveryPolicy for Or3 {
    fn name(&self) -> &'static str {
        "or3"
    }
    fn on_packet_sent(&mut self, _: Instant, _: &PacketInfo<'_>) {}
    fn on_packet_acked(&mut self, _: Instant, _: &PacketInfo<'_>) {}
    fn on_packet_lost(&mut self, _: Instant, _: &PacketInfo<'_>, _: LossTrigger) {}
    fn on_data_lost(&mut self, _: Instant, lost: &LostData) {
        // Copies still owed from the previous round are obsolete: the new round replaces them.
        self.owed.retain(|&(id, _)| id != lost.id);
        let copies = self.copies(lost.round);
        if copies > 0 {
            self.owed.push_back((lost.id, copies));
        }
    }
    fn on_data_acked(&mut self, _: Instant, id: LossId) {
        self.owed.retain(|&(owed, _)| owed != id);
    }
    fn on_rtt_update(&mut self, _: Instant, _: &RttSample) {}
    fn on_send_state(&mut self, _: Instant, _: SendState) {}
    fn poll_copy(&mut self, _: Instant, _: &SendContext) -> Option<CopyRequest> {
        let (id, left) = self.owed.front_mut()?;
        let id = *id;
        *left -= 1;
        if *left == 0 {
            self.owed.pop_front();
        }
        Some(CopyRequest {
            id,
            beyond_cwnd: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx, lost_round};

    fn drain(p: &mut Or3) -> Vec<LossId> {
        std::iter::from_fn(|| p.poll_copy(Instant::ZERO, &ctx(0)).map(|c| c.id)).collect()
    }

    #[test]
    fn round_n_sends_2n_minus_1_in_total() {
        let mut p = Or3::new(Or3Variant::TwoNMinusOne);
        for (round, copies) in [(1, 0), (2, 2), (3, 4), (4, 6)] {
            p.on_data_lost(Instant::ZERO, &lost_round(9, round));
            assert_eq!(drain(&mut p).len(), copies, "round {round}");
        }
    }

    #[test]
    fn variant_2n_plus_1() {
        let mut p = Or3::new(Or3Variant::TwoNPlusOne);
        for (round, copies) in [(1, 2), (2, 4), (3, 6)] {
            p.on_data_lost(Instant::ZERO, &lost_round(9, round));
            assert_eq!(drain(&mut p), vec![9; copies], "round {round}");
        }
        p.on_data_lost(Instant::ZERO, &lost_round(9, u32::MAX));
        assert_eq!(drain(&mut p).len(), MAX_COPIES_PER_ROUND as usize);
    }

    #[test]
    fn a_new_round_replaces_owed_copies_and_acks_forget() {
        let mut p = Or3::new(Or3Variant::TwoNMinusOne);
        p.on_data_lost(Instant::ZERO, &lost_round(1, 2));
        p.on_data_lost(Instant::ZERO, &lost_round(2, 2));
        assert_eq!(p.poll_copy(Instant::ZERO, &ctx(0)).map(|c| c.id), Some(1));
        p.on_data_lost(Instant::ZERO, &lost_round(1, 3));
        assert_eq!(drain(&mut p), vec![2, 2, 1, 1, 1, 1]);
        p.on_data_lost(Instant::ZERO, &lost_round(3, 4));
        p.on_data_acked(Instant::ZERO, 3);
        assert!(p.owed.is_empty());
        assert_eq!(p.poll_copy(Instant::ZERO, &ctx(0)), None);
    }
}
