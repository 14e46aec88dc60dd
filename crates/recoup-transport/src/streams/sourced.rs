//! Stream bytes that a source produces when they are sent, instead of bytes held in memory from
//! the write on.
//!
//! A send stream keeps what was written until it is acknowledged, and a bulk writer keeps its
//! send buffer full, so a byte is written megabytes before it is sent: by then it has left the
//! CPU's caches, and copying it into its packet is a copy from memory. A writer whose bytes are
//! a function of their offset (a simulated file's generated payload) hands the stream a
//! [`SourcedBytes`] instead: the stream asks the source for each range as it builds a packet
//! (and again for a retransmission or copy), straight into the packet.

use std::fmt;
use std::sync::Arc;

/// Bytes that can be produced again at any time, a range at a time.
pub trait ByteSource: fmt::Debug + Send + Sync {
    /// Writes the source's bytes `offset..offset + out.len()` into `out`. The same range must
    /// always give the same bytes: a stream asks again for every retransmission.
    fn fill(&self, offset: u64, out: &mut [u8]);
}

/// `len` bytes of a [`ByteSource`] from `offset` on, for
/// [`Connection::stream_write_sourced`](crate::Connection::stream_write_sourced).
#[derive(Clone, Debug)]
pub struct SourcedBytes {
    source: Arc<dyn ByteSource>,
    offset: u64,
    len: usize,
}

impl SourcedBytes {
    #[must_use]
    pub fn new(source: Arc<dyn ByteSource>, offset: u64, len: usize) -> Self {
        Self {
            source,
            offset,
            len,
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Splits off the first `n` bytes (at most all of them), which are returned; `self` keeps
    /// the rest.
    pub fn split_to(&mut self, n: usize) -> Self {
        let n = n.min(self.len);
        let front = Self {
            source: Arc::clone(&self.source),
            offset: self.offset,
            len: n,
        };
        self.advance(n);
        front
    }

    /// Drops the first `n` bytes (at most all of them).
    pub fn advance(&mut self, n: usize) {
        let n = n.min(self.len);
        self.offset += n as u64;
        self.len -= n;
    }

    /// Appends bytes `from..to` of these (relative to their start) to `out`.
    pub fn append_range(&self, from: usize, to: usize, out: &mut Vec<u8>) {
        debug_assert!(from <= to && to <= self.len);
        let start = out.len();
        // Zeroing a packet's worth of bytes that are in cache costs little next to producing
        // them, and keeps this free of uninitialised memory.
        out.resize(start + (to - from), 0);
        self.source
            .fill(self.offset + from as u64, &mut out[start..]);
    }

    /// Appends all the bytes to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        self.append_range(0, self.len, out);
    }
}
