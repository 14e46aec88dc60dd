//! Minimal traffic nodes for tests and benchmarks: a constant-bit-rate source and a sink that
//! measures delay. (Applications proper live elsewhere.)

use std::net::SocketAddr;
use std::time::Duration;

use recoup_elements::{Datagram, Node, Output};
use recoup_time::Instant;

/// Bytes of each CBR payload used for the sequence number and the send time.
pub const CBR_HEADER: usize = 16;

/// Sends a datagram of `payload_len` bytes every `interval` from `start` until before `stop`.
/// The payload starts with the sequence number and the send time (both u64 little-endian);
/// the datagram id is the sequence number.
#[derive(Debug)]
pub struct CbrSource {
    src: SocketAddr,
    dst: SocketAddr,
    payload_len: usize,
    interval: Duration,
    next: Instant,
    stop: Instant,
    sent: u64,
}

impl CbrSource {
    /// A source; `payload_len` is raised to at least [`CBR_HEADER`].
    #[must_use]
    pub fn new(
        src: SocketAddr,
        dst: SocketAddr,
        payload_len: usize,
        interval: Duration,
        start: Instant,
        stop: Instant,
    ) -> Self {
        Self {
            src,
            dst,
            payload_len: payload_len.max(CBR_HEADER),
            interval,
            next: start,
            stop,
            sent: 0,
        }
    }

    /// Datagrams sent so far.
    #[must_use]
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

impl Node for CbrSource {
    fn process(&mut self, _input: Option<Datagram>, now: Instant) -> Output {
        if self.next >= self.stop {
            return Output::None;
        }
        if self.next > now {
            return Output::Callback(self.next);
        }
        let mut payload = vec![0u8; self.payload_len];
        payload[..8].copy_from_slice(&self.sent.to_le_bytes());
        payload[8..16].copy_from_slice(&self.next.as_nanos().to_le_bytes());
        let d = Datagram::new(self.src, self.dst, payload).with_id(self.sent);
        self.sent += 1;
        self.next += self.interval;
        Output::Datagram(d)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

/// One datagram as the sink saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Sequence number from the payload.
    pub seq: u64,
    /// Send time from the payload.
    pub sent: Instant,
    /// Arrival time.
    pub received: Instant,
    /// Wire length.
    pub wire_len: usize,
}

/// Records every datagram that reaches it; payloads too short to carry a CBR header are
/// counted as malformed.
#[derive(Debug, Default)]
pub struct Sink {
    arrivals: Vec<Arrival>,
    malformed: u64,
}

impl Sink {
    /// An empty sink.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything received, in arrival order.
    #[must_use]
    pub fn arrivals(&self) -> &[Arrival] {
        &self.arrivals
    }

    /// Datagrams without a readable header.
    #[must_use]
    pub fn malformed(&self) -> u64 {
        self.malformed
    }
}

impl Node for Sink {
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
        if let Some(d) = input {
            let field = |r: std::ops::Range<usize>| {
                d.payload
                    .get(r)
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map(u64::from_le_bytes)
            };
            match (field(0..8), field(8..16)) {
                (Some(seq), Some(sent)) => self.arrivals.push(Arrival {
                    seq,
                    sent: Instant::from_nanos(sent),
                    received: now,
                    wire_len: d.wire_len(),
                }),
                _ => self.malformed += 1,
            }
        }
        Output::None
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}
