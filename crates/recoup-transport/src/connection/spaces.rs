//! Per packet-number-space state: packet numbers, what to acknowledge, the CRYPTO stream.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

use recoup_time::Instant;

use crate::error::{transport_err, TransportError};
use crate::streams::recv::RecvStream;
use recoup_recovery::RangeSet;

/// Received packet numbers we keep for ACK frames. Old ranges fall off once the peer has seen an
/// ACK of them (RFC 9000 §13.2.4), or past this many.
const MAX_ACK_RANGES: usize = 64;
/// How much out-of-order CRYPTO data we buffer (RFC 9000 §7.5: at least 4096 bytes).
const CRYPTO_BUFFER: u64 = 64 * 1024;

/// One packet number space (RFC 9000 §12.3).
#[derive(Debug)]
pub(super) struct PacketSpace {
    pub next_pn: u64,
    /// Packet numbers received, for duplicate detection and ACK frames.
    pub received: RangeSet,
    pub largest_received: Option<(u64, Instant)>,
    /// Ack-eliciting packets received since we last sent an ACK.
    pub unacked_eliciting: u32,
    /// Something was received that our last ACK did not cover.
    pub ack_needed: bool,
    /// An ACK must go out now (RFC 9000 §13.2.1: Initial/Handshake, reordering, threshold).
    pub ack_immediate: bool,
    /// Latest time an ACK may be delayed to.
    pub ack_deadline: Option<Instant>,
    pub crypto_send: CryptoSend,
    pub crypto_recv: RecvStream,
    /// A probe (PTO) asked for this many ack-eliciting packets.
    pub probes: u8,
}

impl PacketSpace {
    pub fn new() -> Self {
        Self {
            next_pn: 0,
            received: RangeSet::new(MAX_ACK_RANGES),
            largest_received: None,
            unacked_eliciting: 0,
            ack_needed: false,
            ack_immediate: false,
            ack_deadline: None,
            crypto_send: CryptoSend::default(),
            crypto_recv: RecvStream::new(CRYPTO_BUFFER),
            probes: 0,
        }
    }

    /// Records a received packet; false if it is a duplicate (RFC 9000 §12.3: drop it).
    pub fn on_packet_received(
        &mut self,
        pn: u64,
        now: Instant,
        ack_eliciting: bool,
        immediate: bool,
        threshold: u32,
        max_ack_delay: Duration,
    ) {
        let out_of_order = self
            .largest_received
            .is_some_and(|(largest, _)| pn < largest || pn > largest + 1);
        self.received.insert_one(pn);
        if self
            .largest_received
            .is_none_or(|(largest, _)| pn > largest)
        {
            self.largest_received = Some((pn, now));
        }
        if !ack_eliciting {
            return;
        }
        self.ack_needed = true;
        self.unacked_eliciting += 1;
        // RFC 9000 §13.2.1-2: Initial and Handshake at once; 1-RTT after `threshold` packets or
        // max_ack_delay, at once when packets arrive out of order.
        if immediate || out_of_order || self.unacked_eliciting >= threshold {
            self.ack_immediate = true;
        } else if self.ack_deadline.is_none() {
            self.ack_deadline = Some(now + max_ack_delay);
        }
    }

    pub fn is_duplicate(&self, pn: u64) -> bool {
        self.received.contains(pn) || self.received.min().is_some_and(|min| pn < min)
    }

    /// Whether an ACK frame must be sent now (an ACK-only packet may go out for it).
    pub fn ack_due(&self, now: Instant) -> bool {
        self.ack_needed && (self.ack_immediate || self.ack_deadline.is_some_and(|d| d <= now))
    }

    pub fn on_ack_sent(&mut self) {
        self.ack_needed = false;
        self.ack_immediate = false;
        self.ack_deadline = None;
        self.unacked_eliciting = 0;
    }

    /// The peer acknowledged a packet of ours that carried an ACK up to `largest`: it need not
    /// hear about those packet numbers again (RFC 9000 §13.2.4).
    pub fn on_ack_acked(&mut self, largest: u64) {
        // Keep the largest so duplicate detection keeps working below it.
        self.received.remove_below(largest);
    }

    pub fn timeout(&self) -> Option<Instant> {
        if self.ack_needed {
            self.ack_deadline
        } else {
            None
        }
    }
}

/// Our outgoing CRYPTO stream at one encryption level. TLS messages are small and few, so all
/// bytes are kept until the space is discarded.
#[derive(Debug, Default)]
pub(super) struct CryptoSend {
    data: Vec<u8>,
    /// Bytes below this offset were sent at least once.
    sent: u64,
    /// Ranges to send again (lost, or asked for by a probe), in order, none of them acknowledged.
    retransmit: VecDeque<Range<u64>>,
    /// Ranges the peer acknowledged: a probe re-sends only the rest.
    acked: RangeSet,
}

impl CryptoSend {
    pub fn write(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
    }

    pub fn has_data(&self) -> bool {
        !self.retransmit.is_empty() || self.sent < self.data.len() as u64
    }

    /// Next range to send of at most `max` bytes: retransmissions first, then new bytes.
    pub fn next(&mut self, max: usize) -> Option<(u64, &[u8])> {
        let max = max as u64;
        if max == 0 {
            return None;
        }
        let range = if let Some(r) = self.retransmit.pop_front() {
            if r.end - r.start > max {
                self.retransmit.push_front(r.start + max..r.end);
                r.start..r.start + max
            } else {
                r
            }
        } else {
            let len = self.data.len() as u64;
            if self.sent >= len {
                return None;
            }
            let r = self.sent..len.min(self.sent + max);
            self.sent = r.end;
            r
        };
        let bytes = self.data.get(range.start as usize..range.end as usize)?;
        Some((range.start, bytes))
    }

    /// A packet carrying `range` was lost: send what of it is still unacknowledged again.
    pub fn on_lost(&mut self, range: Range<u64>) {
        self.retransmit.extend(self.acked.gaps(range));
    }

    /// A packet carrying `range` was acknowledged: it needs no retransmission, now or on a probe.
    pub fn on_acked(&mut self, range: Range<u64>) {
        self.acked.insert(range);
        let acked = &self.acked;
        self.retransmit = self
            .retransmit
            .drain(..)
            .flat_map(|r| acked.gaps(r))
            .collect();
    }

    /// A probe: send every byte sent so far and not acknowledged again (RFC 9002 §6.2.4, the
    /// handshake data the peer may be missing).
    pub fn requeue_unacked(&mut self) {
        self.retransmit = self.acked.gaps(0..self.sent).into();
    }
}

/// Receiving CRYPTO data: TLS must see it in order; too much out-of-order data is an error.
pub(super) fn on_crypto_frame(
    recv: &mut RecvStream,
    offset: u64,
    data: &[u8],
) -> Result<(), TransportError> {
    recv.on_data(offset, data, false, u64::MAX)
        .map(|_| ())
        .map_err(|e| {
            // The stream window doubles as RFC 9000 §7.5's CRYPTO buffer limit.
            if e.code == crate::error::TransportErrorCode::FLOW_CONTROL_ERROR {
                transport_err!(CRYPTO_BUFFER_EXCEEDED, "{}", e.reason)
            } else {
                e
            }
        })
}
