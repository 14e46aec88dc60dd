//! ACK frames (RFC 9000 §19.3): decoding with the ranges validated, iterating the acknowledged
//! ranges, and writing an ACK from the [`RangeSet`] of received packet numbers.

use std::ops::RangeInclusive;

use super::FrameType;
use crate::coding::{varint_size, BufMutExt, Reader};
use crate::error::DecodeError;
use recoup_recovery::RangeSet;

/// ECN counts of an ACK_ECN frame (RFC 9000 §19.3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EcnCounts {
    pub ect0: u64,
    pub ect1: u64,
    pub ce: u64,
}

/// An ACK frame (RFC 9000 §19.3). Ranges were validated when the frame was decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckFrame<'a> {
    pub largest: u64,
    /// As encoded: multiply by 2^ack_delay_exponent for microseconds (see
    /// [`AckFrame::ack_delay_micros`]).
    pub ack_delay: u64,
    pub first_range: u64,
    pub ecn: Option<EcnCounts>,
    range_count: u64,
    /// The encoded Gap / ACK Range Length pairs after the first range.
    raw_ranges: &'a [u8],
}

impl<'a> AckFrame<'a> {
    /// The acknowledged packet numbers, highest range first.
    #[must_use]
    pub fn ranges(&self) -> AckRanges<'a> {
        AckRanges {
            next: self
                .largest
                .checked_sub(self.first_range)
                .map(|smallest| smallest..=self.largest),
            reader: Reader::new(self.raw_ranges),
            pairs_left: self.range_count,
        }
    }

    /// The ACK Delay in microseconds for the peer's `ack_delay_exponent` (§18.2), saturating.
    #[must_use]
    pub fn ack_delay_micros(&self, ack_delay_exponent: u8) -> u64 {
        let exp = u32::from(ack_delay_exponent.min(63));
        if self.ack_delay.leading_zeros() < exp {
            u64::MAX
        } else {
            self.ack_delay << exp
        }
    }

    pub(super) fn parse(r: &mut Reader<'a>, ecn: bool) -> Result<Self, DecodeError> {
        let largest = r.varint("ack largest acknowledged")?;
        let ack_delay = r.varint("ack delay")?;
        let range_count = r.varint("ack range count")?;
        let first_range = r.varint("ack first range")?;
        // §19.3.1: a range reaching below packet number 0 is a FRAME_ENCODING_ERROR.
        let mut smallest = largest
            .checked_sub(first_range)
            .ok_or_else(|| DecodeError::invalid("ack first range", "exceeds largest"))?;
        let start = r.position();
        let all = r.peek_rest();
        // Each pair takes at least two bytes, so a hostile count ends at the input's end.
        for _ in 0..range_count {
            let gap = r.varint("ack gap")?;
            let len = r.varint("ack range length")?;
            smallest = smallest
                .checked_sub(gap)
                .and_then(|s| s.checked_sub(2))
                .and_then(|s| s.checked_sub(len))
                .ok_or_else(|| DecodeError::invalid("ack range", "below packet number 0"))?;
        }
        let raw_ranges = &all[..r.position() - start];
        let ecn = if ecn {
            Some(EcnCounts {
                ect0: r.varint("ecn ect0 count")?,
                ect1: r.varint("ecn ect1 count")?,
                ce: r.varint("ecn ce count")?,
            })
        } else {
            None
        };
        Ok(Self {
            largest,
            ack_delay,
            first_range,
            ecn,
            range_count,
            raw_ranges,
        })
    }

    pub(super) fn encode(&self, buf: &mut Vec<u8>) {
        let ty = if self.ecn.is_some() {
            FrameType::ACK_ECN
        } else {
            FrameType::ACK
        };
        buf.put_varint(ty.0);
        buf.put_varint(self.largest);
        buf.put_varint(self.ack_delay);
        buf.put_varint(self.range_count);
        buf.put_varint(self.first_range);
        buf.put_bytes(self.raw_ranges);
        if let Some(ecn) = &self.ecn {
            put_ecn(buf, ecn);
        }
    }

    pub(super) fn encoded_len(&self) -> usize {
        1 + varint_size(self.largest)
            + varint_size(self.ack_delay)
            + varint_size(self.range_count)
            + varint_size(self.first_range)
            + self.raw_ranges.len()
            + self.ecn.as_ref().map_or(0, ecn_len)
    }
}

fn put_ecn(buf: &mut Vec<u8>, ecn: &EcnCounts) {
    buf.put_varint(ecn.ect0);
    buf.put_varint(ecn.ect1);
    buf.put_varint(ecn.ce);
}

fn ecn_len(ecn: &EcnCounts) -> usize {
    varint_size(ecn.ect0) + varint_size(ecn.ect1) + varint_size(ecn.ce)
}

/// Iterator over an [`AckFrame`]'s acknowledged ranges, highest first.
#[derive(Clone, Debug)]
pub struct AckRanges<'a> {
    next: Option<RangeInclusive<u64>>,
    reader: Reader<'a>,
    /// Gap / ACK Range Length pairs not read yet: with `next`, the ranges left, so collecting
    /// them allocates once.
    pairs_left: u64,
}

impl Iterator for AckRanges<'_> {
    type Item = RangeInclusive<u64>;

    fn next(&mut self) -> Option<Self::Item> {
        let current = self.next.take()?;
        if !self.reader.is_empty() {
            // Validated at decode; a failure here just ends the iteration.
            let (gap, _) = self.reader.try_varint()?;
            let (len, _) = self.reader.try_varint()?;
            self.pairs_left = self.pairs_left.saturating_sub(1);
            let largest = current.start().checked_sub(gap)?.checked_sub(2)?;
            self.next = Some(largest.checked_sub(len)?..=largest);
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // The ranges were validated when the frame was decoded: exactly this many follow.
        let left = usize::try_from(self.pairs_left)
            .unwrap_or(usize::MAX)
            .saturating_add(usize::from(self.next.is_some()));
        (left, Some(left))
    }
}

/// Append an ACK (or ACK_ECN if `ecn` is given) frame acknowledging the highest `max_ranges`
/// ranges of `ranges` (at least one). `ack_delay` is already scaled down by our
/// ack_delay_exponent. Writes nothing and returns false if `ranges` is empty.
pub fn encode_ack(
    buf: &mut Vec<u8>,
    ranges: &RangeSet,
    ack_delay: u64,
    ecn: Option<&EcnCounts>,
    max_ranges: usize,
) -> bool {
    let mut iter = ranges.iter_desc().take(max_ranges.max(1));
    let Some(first) = iter.next() else {
        return false;
    };
    let count = ranges.len().min(max_ranges.max(1)) - 1;
    let ty = if ecn.is_some() {
        FrameType::ACK_ECN
    } else {
        FrameType::ACK
    };
    buf.put_varint(ty.0);
    buf.put_varint(first.end - 1);
    buf.put_varint(ack_delay);
    buf.put_varint(count as u64);
    buf.put_varint(first.end - 1 - first.start);
    let mut prev_smallest = first.start;
    for r in iter {
        // §19.3.1: Gap counts the missing packets minus one.
        buf.put_varint(prev_smallest - r.end - 1);
        buf.put_varint(r.end - 1 - r.start);
        prev_smallest = r.start;
    }
    if let Some(ecn) = ecn {
        put_ecn(buf, ecn);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decode_all, err_code, FEE};
    use super::*;
    use crate::frame::Frame;

    #[test]
    fn ack_ranges_descend_and_underflow_is_rejected() {
        let mut set = RangeSet::new(10);
        for pn in [0, 1, 2, 5, 6, 9] {
            set.insert_one(pn);
        }
        let mut buf = Vec::new();
        assert!(encode_ack(&mut buf, &set, 0, None, 10));
        let frames = decode_all(&buf).unwrap();
        let Frame::Ack(ack) = frames[0] else { panic!() };
        assert_eq!(ack.largest, 9);
        assert_eq!(ack.ranges().collect::<Vec<_>>(), vec![9..=9, 5..=6, 0..=2]);
        let mut ranges = ack.ranges();
        assert_eq!(ranges.size_hint(), (3, Some(3)));
        ranges.next();
        assert_eq!(ranges.size_hint(), (2, Some(2)));
        assert_eq!(ranges.by_ref().count(), 2);
        assert_eq!(ranges.size_hint(), (0, Some(0)));
        // Capped to two ranges.
        let mut buf = Vec::new();
        encode_ack(&mut buf, &set, 0, None, 2);
        let frames = decode_all(&buf).unwrap();
        let Frame::Ack(ack) = frames[0] else { panic!() };
        assert_eq!(ack.ranges().collect::<Vec<_>>(), vec![9..=9, 5..=6]);
        assert!(!encode_ack(&mut Vec::new(), &RangeSet::new(1), 0, None, 4));

        // First range larger than largest.
        assert_eq!(err_code(&[0x02, 5, 0, 0, 6]), (FEE, Some(2)));
        // Gap below zero: largest 5, first range 0 (5..=5), gap 4 → 5-4-2 < 0.
        assert_eq!(err_code(&[0x02, 5, 0, 1, 0, 4, 0]), (FEE, Some(2)));
        // Length below zero: gap 0 → largest 3, length 4.
        assert_eq!(err_code(&[0x02, 5, 0, 1, 0, 0, 4]), (FEE, Some(2)));
        // The tightest valid one: 5..=5 then gap 0, length 3 → 0..=3.
        let ok = decode_all(&[0x02, 5, 0, 1, 0, 0, 3]).unwrap();
        let Frame::Ack(ack) = ok[0] else { panic!() };
        assert_eq!(ack.ranges().collect::<Vec<_>>(), vec![5..=5, 0..=3]);
        // Missing ECN counts on ACK_ECN, and a hostile range count.
        assert_eq!(err_code(&[0x03, 5, 0, 0, 0, 1, 1]), (FEE, Some(3)));
        assert_eq!(
            err_code(&[0x02, 5, 0, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0]),
            (FEE, Some(2))
        );
    }

    #[test]
    fn ack_delay_scales_and_saturates() {
        let frames = decode_all(&[0x02, 0, 0x0a, 0, 0]).unwrap();
        let Frame::Ack(ack) = frames[0] else { panic!() };
        assert_eq!(ack.ack_delay_micros(3), 80);
        let frames = decode_all(&[
            0x02, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0,
        ])
        .unwrap();
        let Frame::Ack(ack) = frames[0] else { panic!() };
        assert_eq!(ack.ack_delay_micros(20), u64::MAX);
    }
}
