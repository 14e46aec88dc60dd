//! Block FEC k:m (ART's baseline, ART §7 and Fig. 22: 9:1): every k source packets in a row
//! form a block, and m repair symbols are coded over it as soon as it is complete. With
//! `flush`, a partial block also gets its m repairs when the sender runs out of new data
//! (off-mode), so the tail of a transfer or of a video frame is not left unprotected until
//! later data fills the block.

use std::collections::VecDeque;

use recoup_time::Instant;
use serde::{Deserialize, Deserializer, Serialize};

use super::{FecContext, FecScheme, RepairRequest, SourcePacket, MAX_REPAIRS, MAX_WINDOW_SPAN};
use crate::api::SendState;
use crate::params::in_range;

/// `block:k=..,m=..,flush=..`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockConfig {
    /// Source packets per block.
    #[serde(deserialize_with = "source_count")]
    pub k: u16,
    /// Repair symbols per block.
    #[serde(deserialize_with = "repair_count")]
    pub m: u16,
    /// Protect a partial block when the sender goes idle.
    pub flush: bool,
}

impl Default for BlockConfig {
    /// ART Fig. 22's 9:1.
    fn default() -> Self {
        Self {
            k: 9,
            m: 1,
            flush: true,
        }
    }
}

fn source_count<'de, D: Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
    in_range(
        d,
        1..=MAX_WINDOW_SPAN as u16,
        "a source count in 1..=96 (a repair frame covers at most 96 packet numbers)",
    )
}

fn repair_count<'de, D: Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
    in_range(d, 1..=MAX_REPAIRS, "a repair count in 1..=96")
}

/// Block FEC over consecutive source packets.
#[derive(Debug)]
pub struct BlockFec {
    config: BlockConfig,
    /// The block being filled.
    open: Vec<u64>,
    /// Complete blocks whose repairs have not been asked for yet.
    ready: VecDeque<RepairRequest>,
}

impl BlockFec {
    #[must_use]
    pub fn new(config: BlockConfig) -> Self {
        Self {
            config,
            open: Vec::with_capacity(usize::from(config.k)),
            ready: VecDeque::new(),
        }
    }

    fn close_block(&mut self) {
        if self.open.is_empty() {
            return;
        }
        let window = std::mem::take(&mut self.open);
        self.ready.push_back(RepairRequest {
            window,
            repairs: self.config.m,
        });
    }
}

impl FecScheme for BlockFec {
    fn name(&self) -> &'static str {
        "block"
    }

    fn on_source_sent(&mut self, _now: Instant, packet: &SourcePacket<'_>) {
        // A block may not outgrow what one repair frame can name: close it early if packets of
        // other kinds (ACK-only, repairs) stretched it.
        if self
            .open
            .first()
            .is_some_and(|&first| packet.pn - first >= MAX_WINDOW_SPAN)
        {
            self.close_block();
        }
        self.open.push(packet.pn);
        if self.open.len() >= usize::from(self.config.k) {
            self.close_block();
        }
    }

    fn on_send_state(&mut self, _now: Instant, state: SendState) {
        if self.config.flush && state == SendState::OffMode {
            self.close_block();
        }
    }

    fn poll_repair(&mut self, _now: Instant, _ctx: &FecContext) -> Option<RepairRequest> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SendKind;
    use crate::testutil::ms as t;

    fn ctx() -> FecContext {
        FecContext {
            state: SendState::OnMode,
            rtt: None,
            cwnd: 100_000,
            bytes_in_flight: 0,
        }
    }

    fn send(b: &mut BlockFec, pn: u64) {
        b.on_source_sent(
            t(0),
            &SourcePacket {
                pn,
                sent: t(0),
                symbol_bytes: 1000,
                kind: SendKind::New,
                ranges: &[],
                fins: 0,
                deadline: None,
            },
        );
    }

    #[test]
    fn k_source_packets_make_a_block_with_m_repairs() {
        let mut b = BlockFec::new(BlockConfig {
            k: 3,
            m: 2,
            flush: false,
        });
        for pn in [1, 2, 4, 5, 6, 7] {
            send(&mut b, pn);
        }
        assert_eq!(
            b.poll_repair(t(0), &ctx()),
            Some(RepairRequest {
                window: vec![1, 2, 4],
                repairs: 2
            })
        );
        assert_eq!(b.poll_repair(t(0), &ctx()).unwrap().window, vec![5, 6, 7]);
        assert_eq!(b.poll_repair(t(0), &ctx()), None);
    }

    #[test]
    fn off_mode_flushes_a_partial_block_only_with_flush() {
        for flush in [false, true] {
            let mut b = BlockFec::new(BlockConfig { k: 9, m: 1, flush });
            send(&mut b, 10);
            send(&mut b, 11);
            b.on_send_state(t(1), SendState::OffMode);
            let got = b.poll_repair(t(1), &ctx()).map(|r| r.window);
            assert_eq!(got, flush.then(|| vec![10, 11]), "flush={flush}");
        }
    }

    #[test]
    fn a_block_never_spans_more_than_a_repair_frame_can_name() {
        let mut b = BlockFec::new(BlockConfig {
            k: 9,
            m: 1,
            flush: false,
        });
        send(&mut b, 0);
        send(&mut b, MAX_WINDOW_SPAN);
        assert_eq!(b.poll_repair(t(0), &ctx()).unwrap().window, vec![0]);
    }
}
