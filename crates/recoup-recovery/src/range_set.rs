//! A set of `u64` values kept as disjoint, non-adjacent half-open ranges: recoup's one range set.
//! A packet number space keeps the packet numbers it received in one (ACK frames are written from
//! it, RFC 9000 §13.2.3); a stream's sending half keeps the byte ranges acknowledged above its
//! lowest unacknowledged offset in another, so acknowledgements may arrive in any order and any
//! number of times; the lineage of lost data and `recoup analyze`'s replay of a qlog use it too.
//!
//! Invariants: the ranges are non-empty, ascending, and neither overlap nor touch (touching ranges
//! are merged on insert); there are at most `max_ranges` of them.

use std::ops::Range;

/// Disjoint, non-adjacent half-open ranges, lowest first. A set made with [`RangeSet::new`]
/// keeps at most `max_ranges` ranges: inserting beyond that forgets the lowest ones, so a value
/// below [`RangeSet::min`] may have been seen. [`RangeSet::default`] has no such limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeSet {
    /// Ascending. A vector: the sets stay small (at most 64 ranges of packet numbers; for a
    /// stream, one range per hole in what was acknowledged, so bounded by the data in flight),
    /// values mostly arrive at the top (ascending packet numbers, acknowledgements near the
    /// newest data), and lookups are binary searches.
    ranges: Vec<Range<u64>>,
    max_ranges: usize,
}

impl Default for RangeSet {
    /// An empty set without a limit on the number of ranges.
    fn default() -> Self {
        Self {
            ranges: Vec::new(),
            max_ranges: usize::MAX,
        }
    }
}

impl RangeSet {
    /// An empty set keeping at most `max_ranges` (at least 1) ranges.
    #[must_use]
    pub fn new(max_ranges: usize) -> Self {
        Self {
            ranges: Vec::new(),
            max_ranges: max_ranges.max(1),
        }
    }

    /// Insert one value; true if it was not in the set.
    pub fn insert_one(&mut self, value: u64) -> bool {
        match value.checked_add(1) {
            Some(end) => self.insert(value..end),
            None => false,
        }
    }

    /// Insert a range, merging it with every range it overlaps or touches; true if any value in
    /// it was not in the set.
    pub fn insert(&mut self, range: Range<u64>) -> bool {
        if range.is_empty() {
            return false;
        }
        // Most inserts land at or above the highest range (ascending packet numbers,
        // acknowledgements of the newest data): settled there without the two searches.
        if let Some(last) = self.ranges.last_mut() {
            if last.end < range.start {
                self.ranges.push(range);
                self.forget_excess();
                return true;
            }
            if last.start <= range.start {
                if range.end <= last.end {
                    return false;
                }
                last.end = range.end;
                return true;
            }
        }
        let lo = self.ranges.partition_point(|r| r.end < range.start);
        let hi = self.ranges.partition_point(|r| r.start <= range.end);
        if lo == hi {
            self.ranges.insert(lo, range);
        } else {
            let first = &self.ranges[lo];
            if hi - lo == 1 && first.start <= range.start && range.end <= first.end {
                return false;
            }
            let merged = first.start.min(range.start)..self.ranges[hi - 1].end.max(range.end);
            self.ranges.drain(lo + 1..hi);
            self.ranges[lo] = merged;
        }
        self.forget_excess();
        true
    }

    /// Drops the lowest ranges beyond `max_ranges`.
    fn forget_excess(&mut self) {
        if self.ranges.len() > self.max_ranges {
            let excess = self.ranges.len() - self.max_ranges;
            self.ranges.drain(..excess);
        }
    }

    #[must_use]
    pub fn contains(&self, value: u64) -> bool {
        if let Some(last) = self.ranges.last() {
            if value >= last.start {
                return value < last.end;
            }
        }
        let i = self.ranges.partition_point(|r| r.end <= value);
        self.ranges.get(i).is_some_and(|r| r.start <= value)
    }

    /// Forget every value below `value` (e.g. packet numbers whose ACKs were acknowledged).
    pub fn remove_below(&mut self, value: u64) {
        let i = self.ranges.partition_point(|r| r.end <= value);
        self.ranges.drain(..i);
        if let Some(first) = self.ranges.first_mut() {
            first.start = first.start.max(value);
        }
    }

    /// Removes every value in `r`, splitting a range that covers it on both sides.
    pub fn remove(&mut self, r: Range<u64>) {
        if r.is_empty() {
            return;
        }
        let lo = self.ranges.partition_point(|x| x.end <= r.start);
        let hi = self.ranges.partition_point(|x| x.start < r.end);
        if lo >= hi {
            return;
        }
        let head = (self.ranges[lo].start < r.start).then(|| self.ranges[lo].start..r.start);
        let tail = (self.ranges[hi - 1].end > r.end).then(|| r.end..self.ranges[hi - 1].end);
        self.ranges.splice(lo..hi, head.into_iter().chain(tail));
    }

    /// The lowest range.
    #[must_use]
    pub fn first(&self) -> Option<Range<u64>> {
        self.ranges.first().cloned()
    }

    /// Removes and returns the lowest range.
    pub fn pop_first(&mut self) -> Option<Range<u64>> {
        (!self.ranges.is_empty()).then(|| self.ranges.remove(0))
    }

    /// The parts of `r` not covered by the set, in order (none if `r` is empty).
    #[must_use]
    pub fn gaps(&self, r: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut cursor = r.start;
        let first = self.ranges.partition_point(|x| x.end <= cursor);
        for x in &self.ranges[first..] {
            if x.start >= r.end {
                break;
            }
            if x.start > cursor {
                out.push(cursor..x.start);
            }
            cursor = cursor.max(x.end);
        }
        if cursor < r.end {
            out.push(cursor..r.end);
        }
        out
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// Ranges, highest first.
    pub fn iter_desc(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.ranges.iter().rev().cloned()
    }

    /// Ranges, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.ranges.iter().cloned()
    }

    /// Number of ranges.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    #[must_use]
    pub fn min(&self) -> Option<u64> {
        self.ranges.first().map(|r| r.start)
    }

    #[must_use]
    pub fn max(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.end - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn range_set_merges_caps_and_removes() {
        let mut s = RangeSet::new(3);
        assert!(s.insert_one(5));
        assert!(!s.insert_one(5));
        assert!(s.insert_one(7));
        assert!(s.insert_one(6), "fills the hole and merges");
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![5..8]);
        assert!(s.insert(8..10), "adjacent merges");
        assert!(s.insert(20..22));
        assert!(s.insert(0..2));
        assert_eq!(s.iter_desc().collect::<Vec<_>>(), vec![20..22, 5..10, 0..2]);
        assert!(!s.insert(6..9));
        assert!(s.insert(1..6), "bridges two ranges");
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..10, 20..22]);
        assert!(s.contains(0) && s.contains(9) && s.contains(21));
        assert!(!s.contains(10) && !s.contains(22));
        assert!(s.insert_one(30));
        assert!(s.insert_one(40), "evicts the lowest range");
        assert_eq!(s.len(), 3);
        assert_eq!((s.min(), s.max()), (Some(20), Some(40)));
        s.remove_below(21);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![21..22, 30..31, 40..41]);
        s.remove_below(41);
        assert!(s.is_empty());
        assert!(!s.insert_one(u64::MAX));
        assert!(!s.insert(5..5));
        let mut s = RangeSet::default();
        s.insert(0..10);
        s.insert(20..30);
        s.remove(5..25);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..5, 25..30]);
        s.remove(2..3);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..2, 3..5, 25..30]);
        s.remove(0..30);
        assert!(s.is_empty());
    }

    #[test]
    fn merges_overlapping_and_adjacent() {
        let mut s = RangeSet::default();
        s.insert(10..20);
        s.insert(30..40);
        s.insert(20..25);
        assert_eq!(s.len(), 2);
        s.insert(24..31);
        assert_eq!(s.len(), 1);
        assert_eq!(s.first(), Some(10..40));
        s.insert(0..5);
        assert_eq!(s.gaps(0..50), vec![5..10, 40..50]);
        assert_eq!(s.gaps(12..38), Vec::<Range<u64>>::new());
        assert_eq!(s.gaps(3..12), vec![5..10]);
        let (hi, lo) = (12, 11);
        assert_eq!(s.gaps(hi..lo), Vec::<Range<u64>>::new());
        assert_eq!(s.gaps(45..45), Vec::<Range<u64>>::new());
    }

    /// `recoup analyze`'s case from when it kept a range set of its own.
    #[test]
    fn gaps_after_merging_inserts() {
        let mut s = RangeSet::default();
        s.insert(10..20);
        s.insert(30..40);
        s.insert(18..31);
        s.insert(50..60);
        assert_eq!(s.gaps(0..70), vec![0..10, 40..50, 60..70]);
        assert_eq!(s.gaps(12..35), vec![]);
        assert_eq!(s.gaps(45..55), vec![45..50]);
        assert_eq!(s.gaps(5..5), vec![]);
    }

    #[test]
    fn inserts_and_removes_match_a_bitmap_model() {
        for seed in 0..50u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut s = RangeSet::default();
            let mut model = [false; 200];
            for _ in 0..40 {
                let a = rng.gen_range(0..200u64);
                let b = rng.gen_range(a..=200u64.min(a + 30));
                // One operation in four removes.
                let insert = rng.gen_range(0..4) != 0;
                if insert {
                    s.insert(a..b);
                } else {
                    s.remove(a..b);
                }
                for m in &mut model[a as usize..b as usize] {
                    *m = insert;
                }
            }
            let ranges: Vec<_> = s.iter().collect();
            assert!(
                ranges.iter().all(|r| !r.is_empty())
                    && ranges.windows(2).all(|w| w[0].end < w[1].start),
                "seed {seed}: not disjoint and non-adjacent: {ranges:?}"
            );
            let gaps = s.gaps(0..200);
            let mut covered = [true; 200];
            for g in gaps {
                for c in &mut covered[g.start as usize..g.end as usize] {
                    *c = false;
                }
            }
            assert_eq!(covered, model, "seed {seed}");
        }
    }

    /// Inserts as a packet number space and a stream's acknowledgements make them, mostly at
    /// the top with gaps and some late or repeated values, with and without a limit on the
    /// number of ranges: the same answers and ranges as a plain list of values merged anew.
    #[test]
    fn mostly_ascending_inserts_match_a_model() {
        for seed in 0..200u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let cap = if seed % 2 == 0 {
                usize::MAX
            } else {
                1 + seed as usize % 8
            };
            let mut s = if cap == usize::MAX {
                RangeSet::default()
            } else {
                RangeSet::new(cap)
            };
            let mut model: Vec<Range<u64>> = Vec::new();
            let mut top = 0u64;
            for _ in 0..300 {
                let start = match rng.gen_range(0..10) {
                    0..=5 => top + rng.gen_range(0..3),
                    6 | 7 => top.saturating_sub(rng.gen_range(0..4)),
                    _ => rng.gen_range(0..=top),
                };
                let end = start + rng.gen_range(0..4);
                top = top.max(end);
                let new = (start..end).any(|v| !model.iter().any(|r| r.contains(&v)));
                // The model: every value as a unit range, merged and capped from scratch.
                let mut values: Vec<u64> = model.iter().flat_map(Clone::clone).collect();
                values.extend(start..end);
                values.sort_unstable();
                values.dedup();
                model.clear();
                for v in values {
                    match model.last_mut() {
                        Some(r) if r.end == v => r.end = v + 1,
                        _ => model.push(v..v + 1),
                    }
                }
                let excess = model.len().saturating_sub(cap);
                model.drain(..excess);
                assert_eq!(
                    s.insert(start..end),
                    new,
                    "seed {seed}: insert {start}..{end}"
                );
                assert_eq!(s.iter().collect::<Vec<_>>(), model, "seed {seed}");
                let probe = rng.gen_range(0..=top + 1);
                let inside = model.iter().any(|r| r.contains(&probe));
                assert_eq!(s.contains(probe), inside, "seed {seed}: contains {probe}");
            }
        }
    }

    /// The operations both users rely on (insert, contains, remove_below, pop_first) against a
    /// bitmap, with the ranges checked to stay ascending, disjoint and non-adjacent.
    #[test]
    fn contains_and_removals_match_a_bitmap_model() {
        for seed in 0..50u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut s = RangeSet::default();
            let mut model = [false; 200];
            for _ in 0..60 {
                match rng.gen_range(0..10) {
                    0 => {
                        let v = rng.gen_range(0..200u64);
                        s.remove_below(v);
                        model[..v as usize].fill(false);
                    }
                    1 => {
                        if let Some(r) = s.pop_first() {
                            model[r.start as usize..r.end as usize].fill(false);
                        }
                    }
                    _ => {
                        let a = rng.gen_range(0..200u64);
                        let b = rng.gen_range(a..=200u64.min(a + 30));
                        let new = model[a as usize..b as usize].iter().any(|m| !m);
                        assert_eq!(s.insert(a..b), new, "seed {seed}: insert {a}..{b}");
                        model[a as usize..b as usize].fill(true);
                    }
                }
                let ranges: Vec<_> = s.iter().collect();
                for w in ranges.windows(2) {
                    assert!(w[0].end < w[1].start, "seed {seed}: {ranges:?}");
                }
                assert!(ranges.iter().all(|r| r.start < r.end), "seed {seed}");
                for (v, &m) in model.iter().enumerate() {
                    assert_eq!(s.contains(v as u64), m, "seed {seed}: value {v}");
                }
                assert_eq!(s.first(), ranges.first().cloned());
                assert_eq!(s.min(), model.iter().position(|&m| m).map(|v| v as u64));
            }
        }
    }
}
