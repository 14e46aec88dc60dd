//! The sending part of a stream (RFC 9000 §3.1).
//!
//! Bytes are kept from the lowest unacknowledged offset up to what the application wrote. The
//! connection may send any unacknowledged range any number of times (retransmissions, copies);
//! acks may arrive in any order and more than once, and only ever free a contiguous prefix.

use std::ops::Range;

use bytes::Bytes;

use super::flow::SendCredit;
use super::send_buf::{Chunk, SendBuf};
use super::sourced::SourcedBytes;
use crate::error::Error;
use recoup_recovery::RangeSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fin {
    /// The application may still write.
    Open,
    /// `finish` was called; the FIN has not been sent yet.
    Queued,
    Sent,
    Acked,
}

/// RESET_STREAM we sent (§3.1 "Reset Sent").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reset {
    pub(crate) code: u64,
    pub(crate) final_size: u64,
}

/// What `write` accepted and which limits stopped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Written {
    pub(crate) accepted: usize,
    /// Stream credit was the limit: report STREAM_DATA_BLOCKED with this value.
    pub(crate) stream_blocked: Option<u64>,
    /// Connection credit was the limit.
    pub(crate) conn_limited: bool,
}

/// A contiguous piece of the stream: offset, length, and whether the FIN goes with it.
pub(crate) type Piece = (u64, usize, bool);

#[derive(Debug)]
pub(crate) struct SendStream {
    /// Bytes from the lowest unacknowledged offset (its base: everything below was
    /// acknowledged and freed) to what the application wrote.
    buf: SendBuf,
    /// Everything below this offset was sent at least once.
    sent: u64,
    /// Acknowledged ranges above `base`.
    acked: RangeSet,
    pub(crate) credit: SendCredit,
    fin: Fin,
    pub(crate) reset: Option<Reset>,
    cap: usize,
}

impl SendStream {
    pub(crate) fn new(credit: u64, cap: usize) -> Self {
        Self {
            buf: SendBuf::default(),
            sent: 0,
            acked: RangeSet::default(),
            credit: SendCredit::new(credit),
            fin: Fin::Open,
            reset: None,
            cap,
        }
    }

    /// Total bytes the application wrote (the final size once finished).
    #[must_use]
    pub(crate) fn written(&self) -> u64 {
        self.buf.end()
    }

    /// How many of the stream's first bytes the peer has acknowledged, all of them in order
    /// (RFC 9000 §3.1: the bytes the sender may forget).
    #[must_use]
    pub(crate) fn acked_prefix(&self) -> u64 {
        self.buf.base()
    }

    /// Bytes held: written and not yet acknowledged. A kept chunk's allocation may be larger
    /// (its acknowledged front, a file read's spare capacity) until it is freed whole.
    #[must_use]
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }

    #[must_use]
    pub(crate) fn accepts_writes(&self) -> bool {
        self.fin == Fin::Open && self.reset.is_none()
    }

    /// How many bytes `write` would accept now.
    #[must_use]
    pub(crate) fn room(&self, conn_available: u64) -> usize {
        if !self.accepts_writes() {
            return 0;
        }
        let credit = self.credit.max.saturating_sub(self.written());
        let space = self.cap.saturating_sub(self.buf.len());
        usize::try_from(credit.min(conn_available)).map_or(space, |c| c.min(space))
    }

    /// Accepts (copies) as much of `data` as stream credit, connection credit
    /// (`conn_available`) and the buffer cap allow.
    pub(crate) fn write(&mut self, data: &[u8], conn_available: u64) -> Result<Written, Error> {
        let n = self.accept(data.len(), conn_available)?;
        self.buf.extend_from_slice(&data[..n]);
        Ok(self.account(n, data.len(), conn_available))
    }

    /// As [`Self::write`], but takes the accepted front of `data` without copying it; the rest
    /// stays in `data`.
    pub(crate) fn write_chunk(
        &mut self,
        data: &mut Bytes,
        conn_available: u64,
    ) -> Result<Written, Error> {
        self.write_front(data.len(), conn_available, |n| {
            Chunk::Held(data.split_to(n))
        })
    }

    /// As [`Self::write_chunk`], for bytes its source produces when they are sent.
    pub(crate) fn write_sourced(
        &mut self,
        data: &mut SourcedBytes,
        conn_available: u64,
    ) -> Result<Written, Error> {
        self.write_front(data.len(), conn_available, |n| {
            Chunk::Sourced(data.split_to(n))
        })
    }

    /// Keeps the front of a writer's `offered` bytes, as many (`n`) as the stream accepts, which
    /// `take(n)` splits off.
    fn write_front(
        &mut self,
        offered: usize,
        conn_available: u64,
        take: impl FnOnce(usize) -> Chunk,
    ) -> Result<Written, Error> {
        let n = self.accept(offered, conn_available)?;
        self.buf.push(take(n));
        Ok(self.account(n, offered, conn_available))
    }

    /// How many of `offered` bytes a write may take now.
    fn accept(&self, offered: usize, conn_available: u64) -> Result<usize, Error> {
        if self.reset.is_some() {
            return Err(Error::InvalidState("stream was reset"));
        }
        if self.fin != Fin::Open {
            return Err(Error::InvalidState("stream was finished"));
        }
        Ok(self.room(conn_available).min(offered))
    }

    /// Accounts a write of `n` bytes of `offered`.
    fn account(&mut self, n: usize, offered: usize, conn_available: u64) -> Written {
        self.credit.used = self.written();
        let short = n < offered;
        let stream_blocked = if short && self.credit.available() == 0 {
            self.credit.note_blocked()
        } else {
            None
        };
        Written {
            accepted: n,
            stream_blocked,
            conn_limited: short && conn_available == n as u64,
        }
    }

    pub(crate) fn finish(&mut self) -> Result<(), Error> {
        if self.reset.is_some() {
            return Err(Error::InvalidState("stream was reset"));
        }
        if self.fin == Fin::Open {
            self.fin = Fin::Queued;
        }
        Ok(())
    }

    /// Abandons the stream (§3.1 "Reset Sent"). Returns the bytes written but never sent, whose
    /// connection credit goes back to the pool: the final size is what was sent (§4.5).
    pub(crate) fn reset(&mut self, code: u64) -> Option<u64> {
        if self.reset.is_some() {
            return None;
        }
        let unsent = self.written() - self.sent;
        self.reset = Some(Reset {
            code,
            final_size: self.sent,
        });
        self.buf = SendBuf::starting_at(self.sent);
        self.acked.clear();
        Some(unsent)
    }

    /// Whether new bytes or a FIN wait to be sent for the first time.
    #[must_use]
    pub(crate) fn has_new(&self) -> bool {
        self.reset.is_none() && (self.sent < self.written() || self.fin == Fin::Queued)
    }

    /// The next new piece, at most `max_len` bytes.
    pub(crate) fn poll_new(&mut self, max_len: usize) -> Option<Piece> {
        if self.reset.is_some() {
            return None;
        }
        let left = self.written() - self.sent;
        let len = usize::try_from(left).map_or(max_len, |l| l.min(max_len));
        let end = self.sent + len as u64;
        let fin = self.fin == Fin::Queued && end == self.written();
        if len == 0 && !fin {
            return None;
        }
        let piece = (self.sent, len, fin);
        self.sent = end;
        if fin {
            self.fin = Fin::Sent;
        }
        Some(piece)
    }

    /// Appends bytes `[offset, offset + len)` to `out`; they must be sent and not yet freed.
    pub(crate) fn read_range(
        &self,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        if self.reset.is_some() {
            return Err(Error::InvalidState("stream was reset"));
        }
        let end = offset
            .checked_add(len as u64)
            .ok_or(Error::InvalidState("range overflows"))?;
        if offset < self.buf.base() || end > self.sent {
            return Err(Error::InvalidState("range is acknowledged or not yet sent"));
        }
        self.buf.copy_range(offset, len, out);
        Ok(())
    }

    /// Records an acknowledgement of `[offset, offset + len)` (plus the FIN if `fin`). Repeats,
    /// overlaps and ranges already freed are harmless.
    pub(crate) fn on_acked(&mut self, offset: u64, len: usize, fin: bool) {
        if self.reset.is_some() {
            return;
        }
        let end = offset.saturating_add(len as u64);
        if fin && self.fin == Fin::Sent && end == self.written() {
            self.fin = Fin::Acked;
        }
        let clipped = offset.max(self.buf.base())..end.min(self.sent);
        self.acked.insert(clipped);
        while let Some(first) = self.acked.first() {
            if first.start > self.buf.base() {
                break;
            }
            // The prefix cannot pass the buffer's end: `acked` holds only sent ranges.
            self.buf.free_to(first.end);
            self.acked.pop_first();
        }
    }

    /// All data and the FIN were acknowledged (§3.1 "Data Recvd").
    #[must_use]
    pub(crate) fn is_done(&self) -> bool {
        self.fin == Fin::Acked && self.buf.len() == 0
    }

    /// The parts of `[start, end)` that were sent and are not yet acknowledged. The FIN counts as
    /// unacknowledged until acked: it rides on the piece that ends at the final size, or is a
    /// piece of its own.
    #[must_use]
    pub(crate) fn unacked(&self, start: u64, end: u64) -> Vec<Piece> {
        if self.reset.is_some() {
            return Vec::new();
        }
        let span: Range<u64> = start.max(self.buf.base())..end.min(self.sent);
        let mut out: Vec<Piece> = if span.is_empty() {
            Vec::new()
        } else {
            self.acked
                .gaps(span)
                .into_iter()
                .map(|g| (g.start, (g.end - g.start) as usize, false))
                .collect()
        };
        let final_size = self.written();
        if self.fin == Fin::Sent && start <= final_size && end >= final_size {
            match out.last_mut() {
                Some(last) if last.0 + last.1 as u64 == final_size => last.2 = true,
                _ => out.push((final_size, 0, true)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_with(data: &[u8]) -> SendStream {
        let mut s = SendStream::new(1 << 20, 1 << 20);
        assert_eq!(
            s.write(data, u64::MAX).map(|w| w.accepted).ok(),
            Some(data.len())
        );
        s
    }

    #[test]
    fn write_respects_credit_and_cap() {
        let mut s = SendStream::new(10, 6);
        let w = s.write(b"abcdefghijkl", 100).ok();
        assert_eq!(
            w,
            Some(Written {
                accepted: 6,
                stream_blocked: None,
                conn_limited: false
            })
        );
        // Cap freed by acks; now stream credit (10) is the limit.
        assert_eq!(s.poll_new(100), Some((0, 6, false)));
        s.on_acked(0, 6, false);
        let w = s.write(b"ghijkl", 100).ok();
        assert_eq!(
            w.map(|w| (w.accepted, w.stream_blocked)),
            Some((4, Some(10)))
        );
        // Blocked again at the same limit: no second report.
        let w = s.write(b"kl", 100).ok();
        assert_eq!(w.map(|w| (w.accepted, w.stream_blocked)), Some((0, None)));
        s.credit.raise(11);
        let w = s.write(b"kl", 0).ok();
        assert_eq!(w.map(|w| (w.accepted, w.conn_limited)), Some((0, true)));
    }

    #[test]
    fn out_of_order_acks_free_only_the_prefix() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut s = stream_with(&data);
        for _ in 0..4 {
            assert!(s.poll_new(25).is_some());
        }
        s.on_acked(50, 25, false);
        s.on_acked(25, 10, false);
        assert_eq!(s.buffered(), 100);
        s.on_acked(0, 25, false);
        assert_eq!(s.buffered(), 65);
        let mut out = Vec::new();
        assert!(s.read_range(20, 5, &mut out).is_err(), "freed bytes");
        assert!(s.read_range(35, 10, &mut out).is_ok());
        assert_eq!(out, data[35..45]);
        assert!(s.read_range(95, 10, &mut out).is_err(), "not sent");
    }

    #[test]
    fn read_range_after_acks_free_the_front() {
        // Acks free the front while writes go on: every range read must still be the stream's
        // bytes at those offsets.
        let data: Vec<u8> = (0..=250u8).cycle().take(11_000).collect();
        let mut s = SendStream::new(1 << 20, 1 << 20);
        let mut written = 0;
        let mut out = Vec::new();
        for step in 0..40 {
            let n = 37 + step * 11;
            let w = s.write(&data[written..written + n], u64::MAX).ok();
            assert_eq!(w.map(|w| w.accepted), Some(n));
            written += n;
            while s.poll_new(1000).is_some() {}
            let base = s.written() - s.buffered() as u64;
            for (from, len) in [
                (base, s.buffered()),
                (base + 3, 17),
                (written as u64 - 20, 20),
            ] {
                out.clear();
                assert!(s.read_range(from, len, &mut out).is_ok(), "step {step}");
                assert_eq!(out, data[from as usize..from as usize + len], "step {step}");
            }
            s.on_acked(base, s.buffered() * 2 / 3, false);
        }
    }

    #[test]
    fn duplicate_acks_of_copies_are_harmless() {
        let data = vec![7u8; 300];
        let mut s = stream_with(&data);
        s.finish().ok();
        assert_eq!(s.poll_new(200), Some((0, 200, false)));
        assert_eq!(s.poll_new(200), Some((200, 100, true)));
        assert!(s.poll_new(200).is_none());
        // Three copies of [100, 200) acked, one of them twice; then a stale ack below base.
        for _ in 0..4 {
            s.on_acked(100, 100, false);
        }
        s.on_acked(0, 150, false);
        s.on_acked(0, 150, false);
        assert_eq!(s.buffered(), 100);
        assert!(!s.is_done());
        s.on_acked(200, 100, true);
        assert!(s.is_done());
        assert_eq!(s.buffered(), 0);
        s.on_acked(200, 100, true);
        assert!(s.is_done());
    }

    #[test]
    fn unacked_clips_to_missing_parts_and_keeps_fin() {
        let data = vec![1u8; 100];
        let mut s = stream_with(&data);
        s.finish().ok();
        assert_eq!(s.poll_new(1000), Some((0, 100, true)));
        s.on_acked(10, 20, false);
        s.on_acked(50, 10, false);
        assert_eq!(
            s.unacked(0, 100),
            vec![(0, 10, false), (30, 20, false), (60, 40, true)]
        );
        assert_eq!(s.unacked(15, 55), vec![(30, 20, false)]);
        // Data all acked, FIN not: the FIN alone remains.
        s.on_acked(0, 100, false);
        assert_eq!(s.unacked(0, 100), vec![(100, 0, true)]);
        assert!(!s.is_done());
        s.on_acked(100, 0, true);
        assert_eq!(s.unacked(0, 100), vec![]);
        assert!(s.is_done());
    }

    #[test]
    fn fin_only_piece_after_data() {
        let mut s = stream_with(b"hello");
        assert_eq!(s.poll_new(10), Some((0, 5, false)));
        assert!(!s.has_new());
        s.finish().ok();
        assert!(s.has_new());
        assert_eq!(s.poll_new(0), Some((5, 0, true)));
        s.on_acked(0, 5, false);
        assert!(!s.is_done());
        assert_eq!(s.unacked(0, 5), vec![(5, 0, true)]);
        s.on_acked(5, 0, true);
        assert!(s.is_done());
    }

    #[test]
    fn reset_drops_buffers_and_returns_unsent_credit() {
        let mut s = stream_with(&[0u8; 1000]);
        assert!(s.poll_new(400).is_some());
        assert_eq!(s.reset(9), Some(600));
        assert_eq!(
            s.reset,
            Some(Reset {
                code: 9,
                final_size: 400
            })
        );
        assert_eq!(s.buffered(), 0);
        assert!(!s.has_new());
        assert!(s.unacked(0, 400).is_empty());
        assert!(s.write(b"x", 100).is_err());
        assert_eq!(s.reset(10), None);
    }
}
