//! ACK frames (RFC 9000 §19.3): decoding with the ranges validated, iterating the acknowledged
//! ranges, and writing an ACK from the [`RangeSet`] of received packet numbers.

use std::ops::RangeInclusive;

use smallvec::SmallVec;

use super::FrameType;
use crate::coding::{varint_size, BufMutExt, Reader};
use crate::error::Error;
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

    pub(super) fn parse(r: &mut Reader<'a>, ecn: bool) -> Result<Self, Error> {
        let largest = r.varint("ack largest acknowledged")?;
        let ack_delay = r.varint("ack delay")?;
        let range_count = r.varint("ack range count")?;
        let first_range = r.varint("ack first range")?;
        // §19.3.1: a range reaching below packet number 0 is a FRAME_ENCODING_ERROR.
        let mut smallest = largest
            .checked_sub(first_range)
            .ok_or_else(|| Error::invalid("ack first range", "exceeds largest"))?;
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
                .ok_or_else(|| Error::invalid("ack range", "below packet number 0"))?;
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

/// The ranges an ACK frame adds to the one before it. A receiver that only sends ACKs never has
/// them acknowledged and repeats up to 32 ranges in each (RFC 9000 §13.2.4); below the ranges
/// that changed, a frame's ranges are the previous frame's, whose packets were taken out when
/// that frame was processed (packet numbers are never reused, §12.3), so reading them again
/// changes nothing. Keep one per packet number space and pass it every ACK frame that is
/// processed, in the order processed. Exact only while an ACK frame that is rejected closes
/// the connection and a space's packet numbers never restart (RFC 9000 §12.3, §17.2.5.3).
#[derive(Debug, Default)]
pub(crate) struct AckRepeats {
    /// The last frame's encoded Gap / ACK Range Length pairs.
    raw: Vec<u8>,
    /// For each pair boundary of `raw` (and its end), the smallest number acknowledged above
    /// it and its offset; the smallest strictly falls.
    boundaries: Vec<(u64, usize)>,
    /// The boundaries of the frame being read; swapped with `boundaries` at the end, so neither
    /// allocates again.
    next: Vec<(u64, usize)>,
}

impl AckRepeats {
    /// The ranges of `ack`, highest first, up to where the rest of the frame repeats ranges of
    /// the previous frame passed here: from a point with the same smallest number acknowledged,
    /// the same encoded pairs. Remembers `ack` for the next call.
    pub(crate) fn new_ranges(&mut self, ack: &AckFrame<'_>) -> SmallVec<[RangeInclusive<u64>; 32]> {
        let mut ranges = SmallVec::new();
        let mut boundaries = std::mem::take(&mut self.next);
        boundaries.clear();
        // Validated at decode: the first range does not reach below zero.
        let Some(mut smallest) = ack.largest.checked_sub(ack.first_range) else {
            return ranges;
        };
        ranges.push(smallest..=ack.largest);
        let raw = ack.raw_ranges;
        let mut reader = Reader::new(raw);
        let mut previous = 0;
        // A comparison that fails can run to the end of a long frame: a peer sending frames
        // of hundreds of ranges that differ only at the end would make every boundary cost
        // that much. An honest frame matches at the first or second try.
        let mut tries = MAX_REPEAT_TRIES;
        loop {
            let at = reader.position();
            boundaries.push((smallest, at));
            if at == raw.len() {
                break;
            }
            while self
                .boundaries
                .get(previous)
                .is_some_and(|&(s, _)| s > smallest)
            {
                previous += 1;
            }
            let anchor = self.boundaries.get(previous);
            if let Some(&(_, from)) = anchor.filter(|&&(s, _)| s == smallest && tries > 0) {
                tries -= 1;
                if self.raw[from..].starts_with(&raw[at..]) {
                    // The rest is the previous frame's from `from`: so are its boundaries.
                    boundaries.pop();
                    boundaries.extend(
                        self.boundaries[previous..]
                            .iter()
                            .map(|&(s, o)| (s, o - from + at))
                            .take_while(|&(_, o)| o <= raw.len()),
                    );
                    break;
                }
            }
            let Some(((gap, _), (len, _))) = reader.try_varint().zip(reader.try_varint()) else {
                break;
            };
            let Some(largest) = smallest.checked_sub(gap).and_then(|s| s.checked_sub(2)) else {
                break;
            };
            let Some(start) = largest.checked_sub(len) else {
                break;
            };
            ranges.push(start..=largest);
            smallest = start;
        }
        self.raw.clear();
        self.raw.extend_from_slice(raw);
        self.next = std::mem::replace(&mut self.boundaries, boundaries);
        ranges
    }
}

/// How many times [`AckRepeats::new_ranges`] compares a frame's rest with the previous frame's.
const MAX_REPEAT_TRIES: u32 = 4;

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

    #[test]
    fn a_range_added_on_top_is_all_that_is_read_again() {
        let mut set = RangeSet::new(64);
        for pn in (0..200).filter(|pn| pn % 10 != 3) {
            set.insert_one(pn);
        }
        let frame = |set: &RangeSet| {
            let mut buf = Vec::new();
            assert!(encode_ack(&mut buf, set, 0, None, 32));
            buf
        };
        let first = frame(&set);
        let mut repeats = AckRepeats::default();
        let Frame::Ack(ack) = decode_all(&first).unwrap()[0] else {
            panic!()
        };
        assert_eq!(
            repeats.new_ranges(&ack).len(),
            21,
            "the first frame is read whole"
        );
        // Two more packets after a gap: a new top range, the rest repeated.
        set.insert_one(205);
        set.insert_one(206);
        let second = frame(&set);
        let Frame::Ack(ack) = decode_all(&second).unwrap()[0] else {
            panic!()
        };
        assert_eq!(ack.ranges().count(), 22);
        assert_eq!(&repeats.new_ranges(&ack)[..], &[205..=206, 194..=199]);
        // A late packet fills the gap at 3: the two lowest ranges merge, the rest repeats.
        set.insert_one(3);
        let third = frame(&set);
        let Frame::Ack(ack) = decode_all(&third).unwrap()[0] else {
            panic!()
        };
        let full: Vec<_> = ack.ranges().collect();
        assert_eq!(full.last(), Some(&(0..=12)));
        assert_eq!(&repeats.new_ranges(&ack)[..], &full[..]);
    }

    /// One step of a receiver: packets arriving (`skip` numbers lost before each), a late
    /// packet filling an old gap, the oldest ranges forgotten (an ACK of its ACK), then an ACK
    /// frame written with at most `max_ranges` ranges and put on the return path.
    #[derive(Clone, Debug)]
    struct Step {
        arrivals: Vec<u64>,
        late: Option<u64>,
        forget_below: Option<u64>,
        max_ranges: usize,
        /// Which frame on the return path is delivered next (reordering), if any (loss).
        deliver: Option<usize>,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        (
            proptest::collection::vec(prop_oneof![9 => 0u64..4, 1 => 64u64..20_000], 1..6),
            proptest::option::weighted(0.2, 0u64..200),
            proptest::option::weighted(0.05, 0u64..200),
            prop_oneof![Just(32usize), Just(8), Just(2), Just(1)],
            proptest::option::weighted(0.9, 0usize..3),
        )
            .prop_map(|(arrivals, late, forget_below, max_ranges, deliver)| Step {
                arrivals,
                late,
                forget_below,
                max_ranges,
                deliver,
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 300,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0xacc5_0001),
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever the receiver does and however its ACKs are lost and reordered, the ranges
        /// not returned are exactly the tail of the frame, and each is a range of the frame
        /// processed before it.
        #[test]
        fn only_ranges_of_the_previous_frame_are_skipped(
            steps in proptest::collection::vec(step(), 1..120)
        ) {
            let mut received = RangeSet::new(64);
            let mut next = 0u64;
            let mut path: Vec<Vec<u8>> = Vec::new();
            let mut repeats = AckRepeats::default();
            let mut previous: Vec<RangeInclusive<u64>> = Vec::new();
            for st in steps {
                for skip in st.arrivals {
                    next += skip;
                    received.insert_one(next);
                    next += 1;
                }
                if let Some(late) = st.late.filter(|&l| l < next) {
                    received.insert_one(next - 1 - late);
                }
                if let Some(below) = st.forget_below.filter(|&b| b < next) {
                    received.remove_below(next - 1 - below);
                }
                let mut buf = Vec::new();
                if encode_ack(&mut buf, &received, 0, None, st.max_ranges) {
                    path.push(buf);
                }
                let Some(i) = st.deliver.filter(|&i| i < path.len()) else {
                    continue;
                };
                let buf = path.remove(i);
                let frames = decode_all(&buf).unwrap();
                let Frame::Ack(ack) = frames[0] else { panic!() };
                let full: Vec<_> = ack.ranges().collect();
                let new = repeats.new_ranges(&ack);
                proptest::prop_assert_eq!(&new[..], &full[..new.len()]);
                for r in &full[new.len()..] {
                    proptest::prop_assert!(
                        previous.contains(r),
                        "{:?} skipped, not in {:?}",
                        r,
                        previous
                    );
                }
                previous = full;
            }
        }
    }
}
