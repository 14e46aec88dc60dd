//! `fixed(R)`: R copies of every lost range in every round, sent back to back right after the
//! round's ARQ retransmission.

use std::collections::VecDeque;

use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendState,
};

/// R copies per loss, back to back, within the congestion window.
#[derive(Debug, Clone)]
pub struct Fixed {
    copies: u32,
    /// Copies still owed, in the order the losses were detected; one entry per copy.
    owed: VecDeque<LossId>,
}

impl Fixed {
    /// A policy that sends `copies` extra copies per lost range and round.
    #[must_use]
    pub fn new(copies: u32) -> Self {
        Self {
            copies,
            owed: VecDeque::new(),
        }
    }

    /// Copies per loss.
    #[must_use]
    pub fn copies(&self) -> u32 {
        self.copies
    }
}

impl RecoveryPolicy for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn on_packet_sent(&mut self, _: Instant, _: &PacketInfo<'_>) {}
    fn on_packet_acked(&mut self, _: Instant, _: &PacketInfo<'_>) {}
    fn on_packet_lost(&mut self, _: Instant, _: &PacketInfo<'_>, _: LossTrigger) {}
    fn on_data_lost(&mut self, _: Instant, lost: &LostData) {
        self.owed
            .extend(std::iter::repeat_n(lost.id, self.copies as usize));
    }
    fn on_data_acked(&mut self, _: Instant, id: LossId) {
        self.owed.retain(|&owed| owed != id);
    }
    fn on_rtt_update(&mut self, _: Instant, _: &RttSample) {}
    fn on_send_state(&mut self, _: Instant, _: SendState) {}
    fn poll_copy(&mut self, _: Instant, _: &SendContext) -> Option<CopyRequest> {
        self.owed.pop_front().map(|id| CopyRequest {
            id,
            beyond_cwnd: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DataRange, LossTrigger};

    fn lost(id: LossId) -> LostData {
        LostData {
            id,
            range: DataRange {
                stream: 0,
                start: id * 100,
                end: id * 100 + 100,
            },
            round: 1,
            first_sent: Instant::ZERO,
            first_detected: Instant::ZERO,
            lost_sent: Instant::ZERO,
            trigger: LossTrigger::PacketThreshold,
        }
    }

    fn ctx() -> SendContext {
        SendContext {
            state: SendState::OnMode,
            packets_sent: 0,
            cwnd: 12_000,
            bytes_in_flight: 0,
            bdp_packets: None,
        }
    }

    #[test]
    fn owes_r_copies_per_loss_and_forgets_acked_data() {
        let mut p = Fixed::new(2);
        p.on_data_lost(Instant::ZERO, &lost(1));
        p.on_data_lost(Instant::ZERO, &lost(2));
        assert_eq!(p.poll_copy(Instant::ZERO, &ctx()).map(|c| c.id), Some(1));
        p.on_data_acked(Instant::ZERO, 1);
        assert_eq!(p.poll_copy(Instant::ZERO, &ctx()).map(|c| c.id), Some(2));
        assert_eq!(p.poll_copy(Instant::ZERO, &ctx()).map(|c| c.id), Some(2));
        assert_eq!(p.poll_copy(Instant::ZERO, &ctx()), None);
    }

    #[test]
    fn zero_copies_is_arq() {
        let mut p = Fixed::new(0);
        p.on_data_lost(Instant::ZERO, &lost(1));
        assert_eq!(p.poll_copy(Instant::ZERO, &ctx()), None);
    }
}
