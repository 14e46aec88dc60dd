//! The network path: the peer's address, the datagram size, and the anti-amplification limit
//! before the peer's address is validated (RFC 9000 §8.1).
//!
//! Invariants: a path has one peer address for its whole life; when the peer moves (RFC 9000 §9)
//! the connection builds a new `Path` (see `migration`). Until a server's path is validated it
//! sends at most three times the bytes it received on it (§8.1, and §9.3 for a new path); once
//! validated the limit is gone for good for that path. A client's handshake path never has one.
//! The datagram size is at most ours and, once known, the peer's max_udp_payload_size, and at
//! least 1200 bytes.

use std::net::SocketAddr;

use crate::crypto::Side;

#[derive(Clone, Debug)]
pub(super) struct Path {
    pub remote: SocketAddr,
    /// Bytes received and sent while the peer's address is not validated (RFC 9000 §8.1).
    anti_amplification: Option<(u64, u64)>,
    pub max_datagram_size: usize,
}

impl Path {
    pub fn new(side: Side, remote: SocketAddr, max_datagram_size: usize) -> Self {
        Self {
            remote,
            anti_amplification: (side == Side::Server).then_some((0, 0)),
            max_datagram_size,
        }
    }

    /// A path to a peer address seen on one datagram of `received` bytes, not yet validated: it
    /// is bound by the anti-amplification limit until then (RFC 9000 §9.3).
    pub fn unvalidated(remote: SocketAddr, max_datagram_size: usize, received: usize) -> Self {
        Self {
            remote,
            anti_amplification: Some((received as u64, 0)),
            max_datagram_size,
        }
    }

    pub fn is_validated(&self) -> bool {
        self.anti_amplification.is_none()
    }

    pub fn on_datagram_received(&mut self, bytes: usize) {
        if let Some((received, _)) = self.anti_amplification.as_mut() {
            *received += bytes as u64;
        }
    }

    pub fn on_datagram_sent(&mut self, bytes: usize) {
        if let Some((_, sent)) = self.anti_amplification.as_mut() {
            *sent += bytes as u64;
        }
    }

    /// Bytes the anti-amplification limit lets us send now; `None` once the address is
    /// validated.
    pub fn amplification_budget(&self) -> Option<usize> {
        self.anti_amplification
            .map(|(received, sent)| (received * 3).saturating_sub(sent) as usize)
    }

    /// The peer proved it owns its address.
    pub fn validate(&mut self) {
        self.anti_amplification = None;
    }
}
