//! Synthetic events for driving policies through the `RecoveryPolicy` trait in tests.

use std::time::Duration;

use recoup_time::Instant;

use crate::api::{
    DataRange, LossId, LossTrigger, LostData, PacketInfo, RttSample, SendContext, SendKind,
    SendState, SentRange,
};

pub fn ms(n: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(n)
}

pub fn range(id: LossId) -> DataRange {
    DataRange {
        stream: 0,
        start: id * 1000,
        end: id * 1000 + 1000,
    }
}

pub fn lost_round(id: LossId, round: u32) -> LostData {
    LostData {
        id,
        range: range(id),
        round,
        first_sent: Instant::ZERO,
        first_detected: Instant::ZERO,
        lost_sent: Instant::ZERO,
        trigger: LossTrigger::PacketThreshold,
    }
}

pub fn ctx(packets_sent: u64) -> SendContext {
    ctx_in(SendState::OnMode, packets_sent)
}

pub fn ctx_in(state: SendState, packets_sent: u64) -> SendContext {
    SendContext {
        state,
        packets_sent,
        cwnd: 120_000,
        bytes_in_flight: 0,
        bdp_packets: Some(100),
    }
}

pub fn rtt(smoothed_ms: u64) -> RttSample {
    let d = Duration::from_millis(smoothed_ms);
    RttSample {
        latest: d,
        smoothed: d,
        min: d,
        var: d / 2,
    }
}

/// Ranges for a packet carrying `loss` (a retransmission or copy) or new data.
pub fn ranges(loss: Option<LossId>) -> [SentRange; 1] {
    [SentRange {
        range: range(loss.unwrap_or(1_000_000)),
        loss,
    }]
}

pub fn packet<'a>(
    pn: u64,
    sent: Instant,
    kind: SendKind,
    ranges: &'a [SentRange],
) -> PacketInfo<'a> {
    PacketInfo {
        pn,
        sent,
        bytes: 1200,
        kind,
        ranges,
    }
}
