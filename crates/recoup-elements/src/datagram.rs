//! The unit that moves through the simulated network.

use std::net::SocketAddr;

/// IPv4 (20) + UDP (8) header bytes: what a UDP datagram adds on the wire that `mm-link` counts.
pub const IPV4_UDP_OVERHEAD: usize = 28;
/// IPv6 (40) + UDP (8) header bytes.
pub const IPV6_UDP_OVERHEAD: usize = 48;

/// A UDP datagram in flight. Links and byte-limited queues count [`Datagram::wire_len`], the size
/// of the IP packet, because that is what `mm-link` and a qdisc see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Sender address.
    pub src: SocketAddr,
    /// Receiver address; endpoints route on it.
    pub dst: SocketAddr,
    /// UDP payload (a QUIC packet, or test data).
    pub payload: Vec<u8>,
    /// Opaque tag for tracing; the simulator never reads or changes it.
    pub id: u64,
    /// Identity of what the datagram carries, set by the sending endpoint (the transport's
    /// `Transmit::key`); `crn` loss elements decide its fate from it.
    pub key: Option<u64>,
}

impl Datagram {
    /// A datagram with `id` 0.
    #[must_use]
    pub fn new(src: SocketAddr, dst: SocketAddr, payload: Vec<u8>) -> Self {
        Self {
            src,
            dst,
            payload,
            id: 0,
            key: None,
        }
    }

    /// The same datagram tagged with `id`.
    #[must_use]
    pub fn with_id(mut self, id: u64) -> Self {
        self.id = id;
        self
    }

    /// The same datagram with content key `key`.
    #[must_use]
    pub fn with_key(mut self, key: Option<u64>) -> Self {
        self.key = key;
        self
    }

    /// Size of the IP packet carrying this datagram: payload plus IP and UDP headers.
    #[must_use]
    pub fn wire_len(&self) -> usize {
        let overhead = if self.dst.is_ipv4() {
            IPV4_UDP_OVERHEAD
        } else {
            IPV6_UDP_OVERHEAD
        };
        self.payload.len() + overhead
    }
}
