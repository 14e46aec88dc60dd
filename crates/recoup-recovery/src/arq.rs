//! `arq`: the RFC 9002 baseline. One retransmission per loss (which the transport does by
//! itself), never a copy.

use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendState,
};

/// Plain ARQ: the policy that does nothing.
#[derive(Debug, Default, Clone)]
pub struct Arq;

impl RecoveryPolicy for Arq {
    fn name(&self) -> &'static str {
        "arq"
    }
    fn on_packet_sent(&mut self, _: Instant, _: &PacketInfo<'_>) {}
    fn on_packet_acked(&mut self, _: Instant, _: &PacketInfo<'_>) {}
    fn on_packet_lost(&mut self, _: Instant, _: &PacketInfo<'_>, _: LossTrigger) {}
    fn on_data_lost(&mut self, _: Instant, _: &LostData) {}
    fn on_data_acked(&mut self, _: Instant, _: LossId) {}
    fn on_rtt_update(&mut self, _: Instant, _: &RttSample) {}
    fn on_send_state(&mut self, _: Instant, _: SendState) {}
    fn poll_copy(&mut self, _: Instant, _: &SendContext) -> Option<CopyRequest> {
        None
    }
}
