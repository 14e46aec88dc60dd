//! A set of disjoint `u64` ranges (stream offsets). The transport's sending half of a stream keeps
//! in one the parts above its lowest unacknowledged offset that were acknowledged, so acks may
//! arrive in any order and any number of times; a lineage keeps in one the bytes re-sent in its
//! round ([`crate::Lineages::on_resent`]), and `recoup analyze` the bytes a traced sender got
//! acknowledged.

use std::collections::BTreeMap;
use std::ops::Range;

/// Disjoint, non-adjacent half-open ranges, keyed by start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    map: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// Adds `r`, merging with every range it overlaps or touches.
    pub fn insert(&mut self, r: Range<u64>) {
        if r.is_empty() {
            return;
        }
        let (mut start, mut end) = (r.start, r.end);
        if let Some((&s, &e)) = self.map.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
                self.map.remove(&s);
            }
        }
        while let Some((&s, &e)) = self.map.range(start..).next() {
            if s > end {
                break;
            }
            end = end.max(e);
            self.map.remove(&s);
        }
        self.map.insert(start, end);
    }

    /// The lowest range.
    #[must_use]
    pub fn first(&self) -> Option<Range<u64>> {
        self.map.first_key_value().map(|(&s, &e)| s..e)
    }

    pub fn pop_first(&mut self) -> Option<Range<u64>> {
        self.map.pop_first().map(|(s, e)| s..e)
    }

    /// The parts of `r` not covered by the set, in order.
    #[must_use]
    pub fn gaps(&self, r: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut cursor = r.start;
        if let Some((_, &e)) = self.map.range(..=cursor).next_back() {
            cursor = cursor.max(e);
        }
        if cursor >= r.end {
            return out;
        }
        for (&s, &e) in self.map.range(cursor..r.end) {
            if s > cursor {
                out.push(cursor..s);
            }
            cursor = cursor.max(e);
        }
        if cursor < r.end {
            out.push(cursor..r.end);
        }
        out
    }

    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// Number of disjoint ranges held (a memory measure for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

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
    fn matches_a_bitmap_model() {
        for seed in 0..50u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut s = RangeSet::default();
            let mut model = [false; 200];
            for _ in 0..40 {
                let a = rng.gen_range(0..200u64);
                let b = rng.gen_range(a..=200u64.min(a + 30));
                s.insert(a..b);
                for m in &mut model[a as usize..b as usize] {
                    *m = true;
                }
            }
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
}
