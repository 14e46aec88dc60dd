//! recoup's FEC extension: forward erasure correction between two recoup endpoints, negotiated
//! so that an unmodified peer never sees it (DESIGN.md principle 5; docs/FEC.md has the whole
//! design, this is its summary).
//!
//! # Negotiation
//! An endpoint that decodes repair symbols sends the transport parameter `recoup_fec`
//! (0x3f5ec0df, empty value; a private codepoint, not of the `31 * N + 27` greasing form). An
//! endpoint with a FEC scheme sends REPAIR frames only if the peer's parameters carry it; toward
//! any other peer it logs one warning and recovers by plain ARQ. The check is in the
//! transport ([`crate::Connection`]), not left to callers.
//!
//! # Source symbols
//! A source symbol is what a 1-RTT packet carried in STREAM frames, written as STREAM frames
//! with explicit lengths ([`source_symbol`]), and it is identified by the packet's number.
//! Packet numbers are already unique, authenticated and never reused in the space (RFC 9000
//! §12.3), so identification costs no byte in the source packets, unlike a source-symbol ID
//! frame in every packet as draft-michel-quic-fec and draft-zheng-quic-fec-extension carry;
//! retransmissions and copies get new numbers and are symbols of their own. A REPAIR frame
//! names its window as a first packet number and a bitmap over at most 96 packet numbers,
//! skipping packets without stream data (ACK-only, repair packets).
//!
//! # Repair symbols
//! The scheme ([`recoup_recovery::FecScheme`]) names a window and a repair count m; symbols are
//! zero-padded to the window's longest (rounded to even) and coded by XOR (m = 1) or
//! Reed-Solomon (m > 1, `reed-solomon-simd`). Each repair symbol goes in its own REPAIR frame,
//! before new data, under the congestion window like any ack-eliciting packet. A sender keeps
//! [`crate::frame::MAX_REPAIR_OVERHEAD`] bytes free in every source packet so that a repair as
//! long as its longest source fits one packet.
//!
//! # Receiving
//! The receiver keeps the source symbol of every packet with stream data for a few hundred
//! packet numbers and the repair symbols of open windows. Once a window has as many repairs as
//! missing sources, it decodes and feeds the restored STREAM frames to the streams through the
//! same path as frames that arrived (flow control, reassembly, duplicates by offset).
//! Restored packets are *not* acknowledged: an ACK says a packet arrived (RFC 9000 §13.2), and
//! this one did not. The sender's loss detection therefore declares it lost as usual, congestion
//! control hears of the loss (the network did drop it), and plain ARQ retransmits its data,
//! which the receiver discards as a duplicate; FEC buys latency (the data is there a round trip
//! earlier), not the retransmission. The receiver counts restored packets and stream bytes.

mod code;
mod receiver;
mod sender;

pub use code::{decode, encode, symbol_len};
pub use receiver::{FecReceiver, Restored};
pub use sender::{CodedRepair, FecSender};

use crate::frame::StreamFrame;

/// The transport parameter announcing that an endpoint decodes REPAIR frames.
pub const TRANSPORT_PARAMETER_ID: u64 = 0x3f5e_c0df;

/// Appends a STREAM frame to a source symbol in the one form both sides write (explicit
/// length, offset only when nonzero), so the sender's and the receiver's symbols of one packet
/// are byte for byte equal.
pub fn source_symbol(symbol: &mut Vec<u8>, frame: &StreamFrame<'_>) {
    frame.encode(symbol, true);
}
