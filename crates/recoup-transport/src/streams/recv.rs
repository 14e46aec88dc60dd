//! The receiving part of a stream (RFC 9000 §3.2): reassembly and stream-level checks.
//!
//! Ranges may arrive out of order, duplicated and overlapping. Only bytes not held yet are
//! stored, so each byte is delivered once, in order. Everything held lies below the credit we
//! granted, so memory is bounded by the flow-control window.

use std::collections::{BTreeMap, VecDeque};

use smallvec::SmallVec;

use super::flow::RecvWindow;
use crate::error::{transport_err, Error, TransportError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvState {
    /// Data goes to the application.
    Open,
    /// The application called `stop_sending`: arriving bytes are discarded as they become
    /// contiguous, until the peer resets or all data arrived.
    Stopped { code: u64 },
    /// The peer reset the stream (§3.2 "Reset Recvd"); buffered data was discarded.
    Reset { code: u64 },
}

#[derive(Debug)]
pub(crate) struct RecvStream {
    /// Offset of the first byte not read: everything below was read (or discarded).
    read: u64,
    /// In-order bytes not yet read, in the buffers they were stored in: a segment that becomes
    /// contiguous joins whole rather than being copied. The first is read from `front_read` on;
    /// each holds unread bytes, but for one kept empty for reuse when nothing is ready.
    ready: VecDeque<Vec<u8>>,
    /// Bytes of `ready[0]` already read.
    front_read: usize,
    /// Unread bytes in `ready`.
    ready_len: usize,
    /// Out-of-order bytes: disjoint (a segment that filled its buffer is continued by another
    /// starting where it ends), each starting above `read + ready_len`.
    segments: BTreeMap<u64, Vec<u8>>,
    /// Highest offset received (§4.5: what counts against connection credit).
    highest: u64,
    final_size: Option<u64>,
    pub(crate) window: RecvWindow,
    pub(crate) state: RecvState,
}

impl RecvStream {
    pub(crate) fn new(window: u64) -> Self {
        Self {
            read: 0,
            ready: VecDeque::new(),
            front_read: 0,
            ready_len: 0,
            segments: BTreeMap::new(),
            highest: 0,
            final_size: None,
            window: RecvWindow::new(window),
            state: RecvState::Open,
        }
    }

    /// Bytes the application no longer needs credit for: read, or discarded by a reset.
    #[must_use]
    pub(crate) fn retired(&self) -> u64 {
        match (self.state, self.final_size) {
            (RecvState::Reset { .. }, Some(f)) => f,
            _ => self.read,
        }
    }

    #[must_use]
    pub(crate) fn final_size(&self) -> Option<u64> {
        self.final_size
    }

    /// Bytes held in memory (in order and out of order).
    #[must_use]
    pub(crate) fn buffered(&self) -> usize {
        self.ready_len + self.segments.values().map(Vec::len).sum::<usize>()
    }

    /// Whether `read` would return something now: bytes, the FIN, or the reset.
    #[must_use]
    pub(crate) fn is_readable(&self) -> bool {
        match self.state {
            RecvState::Open => self.ready_len > 0 || self.final_size == Some(self.read),
            RecvState::Stopped { .. } => false,
            RecvState::Reset { .. } => true,
        }
    }

    /// Every byte up to the final size has arrived (§3.2 "Data Recvd").
    #[must_use]
    pub(crate) fn all_received(&self) -> bool {
        self.final_size == Some(self.contiguous())
    }

    /// Stopped and everything arrived: nothing more will come and nobody will read.
    #[must_use]
    pub(crate) fn stopped_and_drained(&self) -> bool {
        matches!(self.state, RecvState::Stopped { .. }) && self.final_size == Some(self.read)
    }

    /// A STREAM frame's contents. `conn_room` is the connection credit left; returns by how much
    /// the highest received offset grew (what the connection counts, §4.1).
    pub(crate) fn on_data(
        &mut self,
        offset: u64,
        data: &[u8],
        fin: bool,
        conn_room: u64,
    ) -> Result<u64, TransportError> {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| transport_err!(FLOW_CONTROL_ERROR, "stream offset overflows"))?;
        let growth = self.check_size(end, fin, conn_room)?;
        self.highest = self.highest.max(end);
        if fin {
            self.final_size = Some(end);
        }
        if !matches!(self.state, RecvState::Reset { .. }) {
            self.insert(offset, data);
            if matches!(self.state, RecvState::Stopped { .. }) {
                self.discard_ready();
            }
        }
        Ok(growth)
    }

    /// RESET_STREAM. Returns the growth of the highest offset and whether the reset took effect
    /// (it is ignored once all data has arrived, §3.2, or when repeated).
    pub(crate) fn on_reset(
        &mut self,
        code: u64,
        final_size: u64,
        conn_room: u64,
    ) -> Result<(u64, bool), TransportError> {
        if final_size < self.highest {
            return Err(transport_err!(
                FINAL_SIZE_ERROR,
                "final size {final_size} below received offset {}",
                self.highest
            ));
        }
        let growth = self.check_size(final_size, true, conn_room)?;
        self.highest = final_size;
        let applies = match self.state {
            RecvState::Reset { .. } => false,
            RecvState::Stopped { .. } => true,
            RecvState::Open => !self.all_received(),
        };
        self.final_size = Some(final_size);
        if applies {
            self.state = RecvState::Reset { code };
            self.clear_ready();
            self.segments.clear();
        }
        Ok((growth, applies))
    }

    /// The application stops reading (§3.5): what is held is discarded, later bytes too.
    pub(crate) fn stop(&mut self, code: u64) {
        if self.state == RecvState::Open {
            self.state = RecvState::Stopped { code };
            self.discard_ready();
        }
    }

    /// In-order bytes into `buf`; the flag says the final size was reached.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> Result<(usize, bool), Error> {
        let mut filled = 0;
        self.read_with(buf.len(), |piece, _| {
            buf[filled..filled + piece.len()].copy_from_slice(piece);
            filled += piece.len();
        })
    }

    /// At most `max` in-order bytes, handed to `visit` in the pieces they are held in rather
    /// than copied out, each with whether it ends at the final size (an empty piece when only
    /// the final size is left to report); returns the bytes taken and whether the final size
    /// was reached.
    pub(crate) fn read_with(
        &mut self,
        max: usize,
        mut visit: impl FnMut(&[u8], bool),
    ) -> Result<(usize, bool), Error> {
        match self.state {
            RecvState::Open => {}
            RecvState::Stopped { .. } => return Err(Error::InvalidState("stream was stopped")),
            RecvState::Reset { .. } => return Err(Error::InvalidState("stream reset by peer")),
        }
        let n = max.min(self.ready_len);
        let fin_at = |taken: usize| self.final_size == Some(self.read + taken as u64);
        if n == 0 {
            let fin = fin_at(0);
            if fin {
                visit(&[], true);
            } else if max != 0 {
                return Err(Error::Blocked);
            }
            return Ok((0, fin));
        }
        let ends_at_final = fin_at(n);
        let mut taken = 0;
        while taken < n {
            let buffers = self.ready.len();
            let Some(front) = self.ready.front_mut() else {
                break;
            };
            let unread = &front[self.front_read..];
            let take = unread.len().min(n - taken);
            taken += take;
            visit(&unread[..take], ends_at_final && taken == n);
            self.front_read += take;
            if self.front_read == front.len() {
                self.front_read = 0;
                if buffers > 1 || front.capacity() > super::KEPT_BUFFER {
                    self.ready.pop_front();
                } else {
                    // The one buffer, emptied: kept for the bytes that come next.
                    front.clear();
                }
            }
        }
        self.ready_len -= n;
        self.read += n as u64;
        Ok((n, ends_at_final))
    }

    /// §4.5 final-size rules and §4.1 stream and connection credit, checked before any change.
    fn check_size(&self, end: u64, fin: bool, conn_room: u64) -> Result<u64, TransportError> {
        if let Some(f) = self.final_size {
            if end > f || (fin && end != f) {
                return Err(transport_err!(
                    FINAL_SIZE_ERROR,
                    "data to {end} (fin {fin}) contradicts final size {f}"
                ));
            }
        }
        if fin && end < self.highest {
            return Err(transport_err!(
                FINAL_SIZE_ERROR,
                "final size {end} below received offset {}",
                self.highest
            ));
        }
        if end > self.window.max {
            return Err(transport_err!(
                FLOW_CONTROL_ERROR,
                "data to {end} beyond stream credit {}",
                self.window.max
            ));
        }
        let growth = end.saturating_sub(self.highest);
        if growth > conn_room {
            return Err(transport_err!(
                FLOW_CONTROL_ERROR,
                "{growth} new bytes beyond connection credit ({conn_room} left)"
            ));
        }
        Ok(growth)
    }

    /// Stores the parts of `[offset, offset + data.len())` not held yet.
    fn insert(&mut self, offset: u64, data: &[u8]) {
        let contiguous = self.contiguous();
        let end = offset + data.len() as u64;
        if end <= contiguous {
            return;
        }
        let mut cursor = offset.max(contiguous);
        if let Some((&s, seg)) = self.segments.range(..=cursor).next_back() {
            cursor = cursor.max(s + seg.len() as u64);
        }
        // Usually one piece (the whole frame): kept off the heap.
        let mut pieces: SmallVec<[(u64, u64); 4]> = SmallVec::new();
        while cursor < end {
            match self.segments.range(cursor..end).next() {
                Some((&s, seg)) => {
                    if s > cursor {
                        pieces.push((cursor, s));
                    }
                    cursor = s + seg.len() as u64;
                }
                None => {
                    pieces.push((cursor, end));
                    cursor = end;
                }
            }
        }
        for (a, b) in pieces {
            // In range: `offset <= a < b <= end`.
            let slice = &data[(a - offset) as usize..(b - offset) as usize];
            // Room never beyond the credit granted, which bounds what can arrive.
            let room = usize::try_from(self.window.max - a).unwrap_or(usize::MAX);
            if a == self.contiguous() {
                match self.ready.back_mut() {
                    Some(last) if last.capacity() - last.len() >= slice.len() => {
                        last.extend_from_slice(slice);
                    }
                    _ => {
                        let mut buffer =
                            Vec::with_capacity(room.min(READY_BUFFER).max(slice.len()));
                        buffer.extend_from_slice(slice);
                        self.push_ready(buffer);
                    }
                }
                self.ready_len += slice.len();
                continue;
            }
            // Packets behind a hole mostly arrive in order: they extend the segment that ends
            // where they start, and one that filled its buffer is continued by a new segment
            // twice its size (no reallocation copies what arrived so far).
            let before = self
                .segments
                .range_mut(..a)
                .next_back()
                .filter(|(&s, seg)| s + seg.len() as u64 == a)
                .map(|(_, seg)| seg);
            let capacity = match before {
                Some(seg) if seg.capacity() - seg.len() >= slice.len() => {
                    seg.extend_from_slice(slice);
                    continue;
                }
                Some(seg) => 2 * seg.capacity(),
                None => SEGMENT_RESERVE * slice.len(),
            };
            let mut segment = Vec::with_capacity(room.min(capacity).max(slice.len()));
            segment.extend_from_slice(slice);
            self.segments.insert(a, segment);
        }
        loop {
            let contiguous = self.contiguous();
            let Some(entry) = self.segments.first_entry() else {
                break;
            };
            if *entry.key() != contiguous {
                break;
            }
            let segment = entry.remove();
            self.ready_len += segment.len();
            self.push_ready(segment);
        }
    }

    /// The offset after the last in-order byte held.
    fn contiguous(&self) -> u64 {
        self.read + self.ready_len as u64
    }

    /// Appends a buffer of in-order bytes (counted by the caller); an emptied buffer kept for
    /// reuse gives way to it.
    fn push_ready(&mut self, buffer: Vec<u8>) {
        if self.ready_len == 0 {
            self.clear_ready();
        }
        self.ready.push_back(buffer);
    }

    fn clear_ready(&mut self) {
        self.ready.clear();
        self.front_read = 0;
        self.ready_len = 0;
    }

    fn discard_ready(&mut self) {
        self.read += self.ready_len as u64;
        self.clear_ready();
    }
}

/// A new out-of-order segment reserves room for this many frames of the size of its first.
const SEGMENT_RESERVE: usize = 16;

/// Capacity of a new buffer for in-order bytes: a dozen full-size packets, so that a stream
/// read as it arrives reuses one buffer and a burst allocates once per dozen packets.
const READY_BUFFER: usize = 16 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn read_all(r: &mut RecvStream) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let mut buf = [0u8; 7];
        loop {
            match r.read(&mut buf) {
                Ok((n, fin)) => {
                    out.extend_from_slice(&buf[..n]);
                    if fin {
                        return (out, true);
                    }
                }
                Err(_) => return (out, false),
            }
        }
    }

    #[test]
    fn a_filled_hole_joins_the_bytes_ready_before_it_in_order() {
        let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let mut r = RecvStream::new(data.len() as u64);
        // Unread in-order bytes, a hole, and a segment behind it that grows frame by frame.
        r.on_data(0, &data[..300], false, u64::MAX).unwrap();
        for at in (1000..5000).step_by(500) {
            r.on_data(at as u64, &data[at..at + 500], at + 500 == 5000, u64::MAX)
                .unwrap();
        }
        r.on_data(300, &data[300..1000], false, u64::MAX).unwrap();
        assert_eq!(r.buffered(), data.len());
        assert_eq!(read_all(&mut r), (data, true));
    }

    #[test]
    fn frames_behind_a_hole_beyond_the_reserve_continue_in_doubling_segments() {
        let frame = 100;
        let frames = 200;
        let data: Vec<u8> = (0..=255u8).cycle().take(frame * frames).collect();
        // Credit well beyond the data: room is never reserved past the credit.
        let mut r = RecvStream::new(1 << 20);
        for i in 1..frames {
            let at = i * frame;
            r.on_data(at as u64, &data[at..at + frame], i + 1 == frames, u64::MAX)
                .unwrap();
        }
        // 199 frames: segments of 16, 32, 64 and 128 frames' room, no buffer regrown.
        let rooms: Vec<usize> = r.segments.values().map(|s| s.capacity() / frame).collect();
        assert_eq!(rooms, [16, 32, 64, 128]);
        assert_eq!(r.buffered(), data.len() - frame);
        r.on_data(0, &data[..frame], false, u64::MAX).unwrap();
        assert!(r.segments.is_empty());
        assert_eq!(r.buffered(), data.len());
        assert_eq!(read_all(&mut r), (data, true));
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn a_stream_read_as_it_arrives_keeps_one_buffer() {
        let mut r = RecvStream::new(1 << 20);
        let mut buf = [0u8; 1500];
        for i in 0..100u64 {
            r.on_data(i * 1200, &[i as u8; 1200], false, u64::MAX)
                .unwrap();
            assert_eq!(r.read(&mut buf).ok(), Some((1200, false)));
            assert_eq!(buf[..1200], [i as u8; 1200]);
            assert_eq!(r.ready.len(), 1, "packet {i}");
        }
        assert_eq!(r.ready_len, 0);
    }

    #[test]
    fn random_overlapping_duplicates_deliver_each_byte_once() {
        for seed in 0..200u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let len = rng.gen_range(1..2000usize);
            let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            // Every byte covered at least three times by random overlapping ranges.
            let mut chunks = Vec::new();
            for _ in 0..3 {
                let mut at = 0;
                while at < len {
                    let back = rng.gen_range(0..=at.min(50));
                    let n = rng.gen_range(1..=200usize).min(len - (at - back));
                    chunks.push((at - back, n));
                    at = (at - back + n).max(at);
                }
            }
            chunks.shuffle(&mut rng);
            let mut r = RecvStream::new(len as u64);
            let mut got = Vec::new();
            for (i, &(off, n)) in chunks.iter().enumerate() {
                let fin = off + n == len;
                let res = r.on_data(off as u64, &data[off..off + n], fin, u64::MAX);
                assert!(res.is_ok(), "seed {seed}: {res:?}");
                assert!(r.buffered() <= len, "seed {seed}: over-buffered");
                if i % 3 == 0 {
                    got.extend(read_all(&mut r).0);
                }
            }
            let (rest, fin) = read_all(&mut r);
            got.extend(rest);
            assert!(fin, "seed {seed}: fin not reached");
            assert_eq!(got, data, "seed {seed}");
            assert_eq!(r.buffered(), 0, "seed {seed}");
        }
    }

    /// `read_with` hands over in pieces what `read` copies out: the same bytes, the same
    /// counts and end flags, the end flag on the last piece only, and the same buffers left.
    #[test]
    fn read_with_hands_over_what_read_copies() {
        for seed in 0..200u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let len = rng.gen_range(0..40_000usize);
            let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let mut chunks = Vec::new();
            let mut at = 0;
            while at < len {
                let n = rng.gen_range(1..=1500usize).min(len - at);
                chunks.push((at, n));
                at += n;
            }
            // Mostly in order, some late: holes, segments and several ready buffers.
            for i in 0..chunks.len() {
                if rng.gen_bool(0.1) {
                    let j = rng.gen_range(i..chunks.len().min(i + 30));
                    chunks.swap(i, j);
                }
            }
            if chunks.is_empty() {
                chunks.push((0, 0));
            }
            let (mut copied, mut handed) =
                (RecvStream::new(len as u64), RecvStream::new(len as u64));
            let (mut got_copied, mut got_handed) = (Vec::new(), Vec::new());
            let mut buf = vec![0u8; 70_000];
            for (i, &(off, n)) in chunks.iter().enumerate() {
                let fin = off + n == len;
                for r in [&mut copied, &mut handed] {
                    let res = r.on_data(off as u64, &data[off..off + n], fin, u64::MAX);
                    assert!(res.is_ok(), "seed {seed}: {res:?}");
                }
                if i % 4 != 0 && i + 1 != chunks.len() {
                    continue;
                }
                let want = copied.read(&mut buf);
                let mut pieces = Vec::new();
                let got =
                    handed.read_with(usize::MAX, |piece, end| pieces.push((piece.to_vec(), end)));
                assert_eq!(
                    format!("{got:?}"),
                    format!("{want:?}"),
                    "seed {seed}, chunk {i}"
                );
                if let Ok((n, end)) = want {
                    got_copied.extend_from_slice(&buf[..n]);
                    let flags: Vec<bool> = pieces.iter().map(|p| p.1).collect();
                    let last = flags.len().saturating_sub(1);
                    assert!(
                        flags
                            .iter()
                            .enumerate()
                            .all(|(k, &f)| f == (end && k == last)),
                        "seed {seed}, chunk {i}: end flags {flags:?}"
                    );
                    assert!(
                        pieces.iter().all(|p| !p.0.is_empty()) || pieces.len() == 1 && end,
                        "seed {seed}, chunk {i}: an empty piece"
                    );
                    got_handed.extend(pieces.into_iter().flat_map(|p| p.0));
                }
                assert_eq!(
                    copied.ready.len(),
                    handed.ready.len(),
                    "seed {seed}, chunk {i}"
                );
            }
            assert_eq!(got_copied, data, "seed {seed}");
            assert_eq!(got_handed, data, "seed {seed}");
        }
    }

    #[test]
    fn connection_growth_counts_highest_offset_not_duplicates() {
        let mut r = RecvStream::new(100);
        assert_eq!(r.on_data(10, &[0; 10], false, 100).ok(), Some(20));
        assert_eq!(r.on_data(0, &[0; 20], false, 100).ok(), Some(0));
        assert_eq!(r.on_data(15, &[0; 10], false, 100).ok(), Some(5));
        let e = r.on_data(25, &[0; 10], false, 4).err().map(|e| e.code);
        assert_eq!(e, Some(TransportErrorCode::FLOW_CONTROL_ERROR));
        let e = r.on_data(95, &[0; 10], false, 1000).err().map(|e| e.code);
        assert_eq!(e, Some(TransportErrorCode::FLOW_CONTROL_ERROR));
        let e = r
            .on_data(u64::MAX, &[0; 10], false, 1000)
            .err()
            .map(|e| e.code);
        assert_eq!(e, Some(TransportErrorCode::FLOW_CONTROL_ERROR));
    }

    #[test]
    fn final_size_rules() {
        let final_err = Some(TransportErrorCode::FINAL_SIZE_ERROR);
        let mut r = RecvStream::new(100);
        assert!(r.on_data(0, &[1; 30], false, 100).is_ok());
        // A FIN below data already received.
        assert_eq!(
            r.on_data(0, &[1; 10], true, 100).err().map(|e| e.code),
            final_err
        );
        assert!(r.on_data(30, &[1; 10], true, 100).is_ok());
        // The same FIN again is fine; a different one or data beyond it is not.
        assert!(r.on_data(30, &[1; 10], true, 100).is_ok());
        assert_eq!(
            r.on_data(30, &[1; 11], true, 100).err().map(|e| e.code),
            final_err
        );
        assert_eq!(
            r.on_data(40, &[1; 1], false, 100).err().map(|e| e.code),
            final_err
        );
        assert_eq!(r.on_reset(0, 41, 100).err().map(|e| e.code), final_err);
        assert_eq!(r.on_reset(0, 39, 100).err().map(|e| e.code), final_err);
        // Everything arrived: a reset with the right size is ignored.
        assert_eq!(r.on_reset(0, 40, 100).ok(), Some((0, false)));
        assert_eq!(read_all(&mut r), (vec![1; 40], true));
    }

    #[test]
    fn reset_discards_and_retires_final_size() {
        let mut r = RecvStream::new(100);
        assert!(r.on_data(50, &[1; 10], false, 100).is_ok());
        assert_eq!(r.on_reset(7, 80, 100).ok(), Some((20, true)));
        assert_eq!(r.buffered(), 0);
        assert_eq!(r.retired(), 80);
        assert!(r.is_readable());
        assert!(matches!(r.read(&mut [0; 4]), Err(Error::InvalidState(_))));
        // Late data within the final size is ignored; beyond it is an error.
        assert!(r.on_data(0, &[1; 10], false, 0).is_ok());
        assert!(r.on_data(75, &[1; 10], false, 100).is_err());
        let e = RecvStream::new(10)
            .on_reset(0, 11, 100)
            .err()
            .map(|e| e.code);
        assert_eq!(e, Some(TransportErrorCode::FLOW_CONTROL_ERROR));
    }

    #[test]
    fn stopped_stream_discards_and_finishes_when_all_arrived() {
        let mut r = RecvStream::new(100);
        assert!(r.on_data(0, &[1; 10], false, 100).is_ok());
        r.stop(3);
        assert_eq!(r.buffered(), 0);
        assert_eq!(r.retired(), 10);
        assert!(r.on_data(20, &[1; 5], true, 100).is_ok());
        assert!(!r.stopped_and_drained());
        assert!(r.on_data(10, &[1; 10], false, 100).is_ok());
        assert!(r.stopped_and_drained());
        assert_eq!(r.retired(), 25);
    }

    #[test]
    fn read_reports_blocked_and_fin() {
        let mut r = RecvStream::new(100);
        assert!(matches!(r.read(&mut [0; 4]), Err(Error::Blocked)));
        assert!(r.on_data(3, b"def", false, 100).is_ok());
        assert!(!r.is_readable());
        assert!(r.on_data(0, b"abc", false, 100).is_ok());
        let mut buf = [0u8; 4];
        assert_eq!(r.read(&mut buf).ok(), Some((4, false)));
        assert_eq!(&buf, b"abcd");
        assert!(r.on_data(6, b"", true, 100).is_ok());
        assert_eq!(r.read(&mut buf).ok(), Some((2, true)));
        assert_eq!(&buf[..2], b"ef");
    }
}
