//! The bytes a send stream holds: from its lowest unacknowledged offset to what was written.
//!
//! A chunk handed over whole ([`SendBuf::push`]) is kept as it came, not copied: a simulated
//! video frame or a server's file read reaches the packet with one copy instead of two. Small
//! pieces and slice writes gather in a ring-buffer tail, so a writer of many small messages does
//! not make a chunk of each. A chunk may also be [`SourcedBytes`], produced as it is sent.

use std::collections::VecDeque;

use bytes::{Buf, Bytes};

use super::sourced::SourcedBytes;

/// Pieces shorter than this are copied into the tail rather than kept as a chunk of their own:
/// each chunk costs an entry to search, and a copy of a few hundred bytes costs less.
const MIN_CHUNK: usize = 1024;

/// A chunk handed over whole.
#[derive(Debug)]
pub(crate) enum Chunk {
    Held(Bytes),
    Sourced(SourcedBytes),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Self::Held(b) => b.len(),
            Self::Sourced(s) => s.len(),
        }
    }

    fn advance(&mut self, n: usize) {
        match self {
            Self::Held(b) => b.advance(n),
            Self::Sourced(s) => s.advance(n),
        }
    }

    /// Appends bytes `from..to` of the chunk to `out`.
    fn append_range(&self, from: usize, to: usize, out: &mut Vec<u8>) {
        match self {
            Self::Held(b) => out.extend_from_slice(&b[from..to]),
            Self::Sourced(s) => s.append_range(from, to, out),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct SendBuf {
    /// Stream offset of the first byte held.
    base: u64,
    /// Kept chunks, each with the stream offset of its first byte, in stream order from `base`.
    chunks: VecDeque<(u64, Chunk)>,
    /// Copied bytes after the last chunk.
    tail: VecDeque<u8>,
    /// Bytes held: those of `chunks` and `tail`.
    len: usize,
}

impl SendBuf {
    /// An empty buffer whose next byte is at stream offset `base`.
    pub(crate) fn starting_at(base: u64) -> Self {
        Self {
            base,
            ..Self::default()
        }
    }

    /// Stream offset of the first byte held.
    #[must_use]
    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    /// Bytes held.
    #[must_use]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Stream offset just past the last byte held.
    #[must_use]
    pub(crate) fn end(&self) -> u64 {
        self.base + self.len as u64
    }

    /// Appends `data` without copying it unless it is small (then its bytes join the tail).
    pub(crate) fn push(&mut self, data: Chunk) {
        if data.len() < MIN_CHUNK {
            match data {
                Chunk::Held(b) => self.extend_from_slice(&b),
                Chunk::Sourced(s) => {
                    let mut bytes = Vec::with_capacity(s.len());
                    s.append_to(&mut bytes);
                    self.extend_from_slice(&bytes);
                }
            }
            return;
        }
        if !self.tail.is_empty() {
            // The tail's storage becomes the chunk (made contiguous in place, not copied out).
            let start = self.end() - self.tail.len() as u64;
            let tail = Vec::from(std::mem::take(&mut self.tail));
            self.chunks
                .push_back((start, Chunk::Held(Bytes::from(tail))));
        }
        let start = self.end();
        self.len += data.len();
        self.chunks.push_back((start, data));
    }

    /// Appends a copy of `data`.
    pub(crate) fn extend_from_slice(&mut self, data: &[u8]) {
        self.tail.extend(data);
        self.len += data.len();
    }

    /// Appends bytes `[offset, offset + len)` to `out`; they must lie within the buffer.
    pub(crate) fn copy_range(&self, offset: u64, len: usize, out: &mut Vec<u8>) {
        debug_assert!(offset >= self.base && offset + len as u64 <= self.end());
        let end = offset + len as u64;
        let mut at = offset;
        // The chunk holding `offset`: the last one starting at or before it.
        let first = self.chunks.partition_point(|&(start, _)| start <= offset);
        for (start, chunk) in self.chunks.range(first.saturating_sub(1)..) {
            if at == end {
                return;
            }
            let chunk_end = start + chunk.len() as u64;
            if chunk_end <= at {
                continue;
            }
            // Offsets within one chunk fit in usize: the chunk is in memory.
            let from = (at - start) as usize;
            let to = (end.min(chunk_end) - start) as usize;
            chunk.append_range(from, to, out);
            at = start + to as u64;
        }
        if at < end {
            let tail_start = self.end() - self.tail.len() as u64;
            let (from, to) = ((at - tail_start) as usize, (end - tail_start) as usize);
            // From the deque's two slices: at most two copies, not a byte at a time.
            let (front, back) = self.tail.as_slices();
            if from < front.len() {
                out.extend_from_slice(&front[from..to.min(front.len())]);
            }
            if to > front.len() {
                out.extend_from_slice(&back[from.saturating_sub(front.len())..to - front.len()]);
            }
        }
    }

    /// Frees every byte below stream offset `offset` (at most the end of the buffer).
    pub(crate) fn free_to(&mut self, offset: u64) {
        let offset = offset.min(self.end());
        if offset <= self.base {
            return;
        }
        let mut drop = (offset - self.base) as usize;
        self.len -= drop;
        self.base = offset;
        while drop > 0 {
            let Some((start, chunk)) = self.chunks.front_mut() else {
                self.tail.drain(..drop);
                break;
            };
            if chunk.len() <= drop {
                drop -= chunk.len();
                self.chunks.pop_front();
            } else {
                chunk.advance(drop);
                *start += drop as u64;
                drop = 0;
            }
        }
        // A long-lived idle stream keeps at most a small buffer.
        super::release_idle(&mut self.tail);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::streams::ByteSource;

    /// A source that serves a slice of bytes.
    #[derive(Debug)]
    struct Slice(Vec<u8>);

    impl ByteSource for Slice {
        fn fill(&self, offset: u64, out: &mut [u8]) {
            let from = offset as usize;
            out.copy_from_slice(&self.0[from..from + out.len()]);
        }
    }

    /// A buffer fed a mix of kept chunks, small pieces and slice writes, freed and read at
    /// every step, always reads back the stream's bytes at the offsets asked.
    #[test]
    fn ranges_read_back_whatever_mix_of_chunks_and_copies_holds_them() {
        let data: Vec<u8> = (0..=250u8).cycle().take(200_000).collect();
        let source: Arc<dyn ByteSource> = Arc::new(Slice(data.clone()));
        let mut buf = SendBuf::starting_at(0);
        let (mut written, mut kept, mut sourced) = (0usize, 0usize, 0usize);
        let mut out = Vec::new();
        for step in 0..120 {
            let n = [3, 700, 1500, 5000, 64][step % 5] + step;
            let piece = &data[written..written + n];
            let chunks = buf.chunks.len();
            match step % 3 {
                0 => buf.extend_from_slice(piece),
                1 => buf.push(Chunk::Held(Bytes::copy_from_slice(piece))),
                _ => {
                    let (from, len) = (written as u64, piece.len());
                    buf.push(Chunk::Sourced(SourcedBytes::new(source.clone(), from, len)));
                    sourced += usize::from(buf.chunks.len() > chunks);
                }
            }
            kept += usize::from(buf.chunks.len() > chunks);
            written += n;
            assert_eq!(buf.end(), written as u64, "step {step}");
            let base = buf.base();
            for (from, len) in [
                (base, buf.len()),
                (base + 1, buf.len().saturating_sub(2)),
                (buf.end() - buf.len().min(9) as u64, buf.len().min(9)),
                (base + buf.len() as u64 / 2, buf.len() / 3),
            ] {
                out.clear();
                buf.copy_range(from, len, &mut out);
                assert_eq!(out, data[from as usize..from as usize + len], "step {step}");
            }
            buf.free_to(base + buf.len() as u64 * 3 / 5);
        }
        assert!(
            kept > 20 && sourced > 10,
            "too few kept ({kept}) or sourced ({sourced}) chunks: a chunk path went untested"
        );
        buf.free_to(written as u64);
        assert_eq!((buf.len(), buf.chunks.len()), (0, 0));
    }

    /// Megabytes written a message at a time and then acknowledged leave no megabyte buffer
    /// behind on an idle stream.
    #[test]
    fn an_emptied_tail_gives_back_a_large_buffer() {
        let mut buf = SendBuf::starting_at(0);
        for _ in 0..2_000 {
            buf.extend_from_slice(&[7; 1200]);
        }
        buf.free_to(1_000 * 1200);
        assert!(buf.tail.capacity() >= 2_000 * 1200, "still in use: kept");
        buf.free_to(2_000 * 1200);
        assert_eq!((buf.len(), buf.tail.capacity()), (0, 0));
    }

    #[test]
    fn a_large_chunk_is_kept_and_a_small_one_copied() {
        let chunk = Bytes::from(vec![5u8; 4 * MIN_CHUNK]);
        let at = chunk.as_ptr();
        let mut buf = SendBuf::starting_at(10);
        buf.extend_from_slice(b"head");
        buf.push(Chunk::Held(chunk));
        assert_eq!(
            buf.chunks.len(),
            2,
            "the head's copy, then the chunk itself"
        );
        assert!(matches!(&buf.chunks[1].1, Chunk::Held(b) if b.as_ptr() == at));
        assert_eq!((buf.base(), buf.end()), (10, 14 + 4 * MIN_CHUNK as u64));
        // A small piece joins the tail instead of becoming a chunk to search.
        buf.push(Chunk::Held(Bytes::from_static(b"small")));
        assert_eq!(buf.chunks.len(), 2);
        assert_eq!(buf.tail, b"small");
        // So does a small sourced piece, produced at once.
        let tiny = SourcedBytes::new(Arc::new(Slice(b"xtiny".to_vec())), 1, 4);
        buf.push(Chunk::Sourced(tiny));
        assert_eq!(buf.chunks.len(), 2);
        assert_eq!(buf.tail, b"smalltiny");
    }
}
