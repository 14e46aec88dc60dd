//! The packets of a space that were sent and are neither acknowledged nor declared lost
//! (RFC 9002 Appendix A.1 `sent_packets`), by packet number.
//!
//! Packet numbers of a space only grow (RFC 9000 §12.3) and a packet leaves within a few round
//! trips, so the packets in flight are a window of consecutive numbers: a deque of slots indexed
//! by `pn - base` finds, adds and removes a packet in O(1) without moving the others. A B-tree
//! keyed by packet number did the same work in about 1 500 instructions per packet, most of them
//! moving the large records within its nodes.

use std::collections::VecDeque;
use std::ops::{Bound, Range, RangeBounds};

use super::SentPacket;

#[derive(Debug)]
pub(super) struct SentPackets<T> {
    /// Packet number of `slots[0]`; the front slot is always occupied when any is.
    base: u64,
    /// `None`: acknowledged or declared lost, or a number never sent. Empty exactly when no
    /// packet is tracked.
    slots: VecDeque<Option<SentPacket<T>>>,
}

impl<T> Default for SentPackets<T> {
    fn default() -> Self {
        Self {
            base: 0,
            slots: VecDeque::new(),
        }
    }
}

impl<T> SentPackets<T> {
    /// Adds a packet whose number is above every packet added before (the caller checks).
    pub(super) fn push(&mut self, packet: SentPacket<T>) {
        if self.slots.is_empty() {
            self.base = packet.pn;
        }
        let end = self.base + self.slots.len() as u64;
        debug_assert!(packet.pn >= end, "packet numbers must grow");
        for _ in end..packet.pn {
            self.slots.push_back(None);
        }
        self.slots.push_back(Some(packet));
    }

    pub(super) fn remove(&mut self, pn: u64) -> Option<SentPacket<T>> {
        let index = usize::try_from(pn.checked_sub(self.base)?).ok()?;
        let packet = self.slots.get_mut(index)?.take()?;
        // Keep the front occupied: drop the slots freed below the oldest packet left (all of
        // them when it was the last).
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
        Some(packet)
    }

    /// The packet numbers of `range` that the window covers: beyond them nothing is tracked.
    /// Empty when the range is inverted or lies outside.
    pub(super) fn window(&self, range: impl RangeBounds<u64>) -> Range<u64> {
        let end = self.base + self.slots.len() as u64;
        let from = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        }
        .clamp(self.base, end);
        let to = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => end,
        }
        .clamp(from, end);
        from..to
    }

    /// The packets whose numbers lie in `range`, ascending.
    pub(super) fn range(
        &self,
        range: impl RangeBounds<u64>,
    ) -> impl Iterator<Item = &SentPacket<T>> {
        let pns = self.window(range);
        // Both bounds lie within the deque, whose length is a `usize`.
        let index = |pn: u64| usize::try_from(pn - self.base).unwrap_or(usize::MAX);
        self.slots
            .range(index(pns.start)..index(pns.end))
            .filter_map(Option::as_ref)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &SentPacket<T>> {
        self.slots.iter().filter_map(Option::as_ref)
    }

    pub(super) fn into_values(self) -> impl Iterator<Item = SentPacket<T>> {
        self.slots.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::{Rng, SeedableRng};
    use recoup_time::Instant;

    use super::*;

    fn packet(pn: u64) -> SentPacket<u64> {
        SentPacket::new(pn, Instant::ZERO, 1200, true, true, pn)
    }

    fn pns<'a>(it: impl Iterator<Item = &'a SentPacket<u64>>) -> Vec<u64> {
        it.map(|p| p.pn).collect()
    }

    /// Random sends with gaps, removals in any order and range queries agree with a B-tree.
    #[test]
    fn behaves_as_an_ordered_map() {
        let seed = std::env::var("RECOUP_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(7u64);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut sent = SentPackets::default();
        let mut model = BTreeMap::new();
        let mut next = 0u64;
        for step in 0..20_000 {
            match rng.gen_range(0..10) {
                0..=4 => {
                    next += rng.gen_range(1..3);
                    sent.push(packet(next));
                    model.insert(next, ());
                }
                5..=7 => {
                    let pn = rng.gen_range(next.saturating_sub(60)..=next + 1);
                    let got = sent.remove(pn).map(|p| p.pn);
                    let want = model.remove(&pn).map(|()| pn);
                    assert_eq!(got, want, "seed {seed} step {step}: remove {pn}");
                }
                _ => {
                    let lo = rng.gen_range(next.saturating_sub(80)..=next + 2);
                    let hi = rng.gen_range(lo..=next + 3);
                    assert_eq!(
                        pns(sent.range(lo..=hi)),
                        model.range(lo..=hi).map(|(&pn, ())| pn).collect::<Vec<_>>(),
                        "seed {seed} step {step}: range {lo}..={hi}"
                    );
                    assert_eq!(
                        pns(sent.range(..hi)),
                        model.range(..hi).map(|(&pn, ())| pn).collect::<Vec<_>>(),
                        "seed {seed} step {step}: range ..{hi}"
                    );
                }
            }
            // The front slot is the oldest packet's.
            let front = sent.slots.front().map(|p| p.as_ref().map(|p| p.pn));
            assert_eq!(
                front,
                model.keys().next().map(|&pn| Some(pn)),
                "seed {seed} step {step}"
            );
            assert!(
                sent.slots.len() as u64 <= next + 1 - sent.base,
                "seed {seed} step {step}"
            );
        }
        assert_eq!(
            pns(sent.values()),
            model.keys().copied().collect::<Vec<_>>(),
            "seed {seed}"
        );
    }

    #[test]
    fn emptied_window_starts_again_at_the_next_number() {
        let mut sent = SentPackets::default();
        sent.push(packet(5));
        sent.push(packet(9));
        assert_eq!(sent.remove(9).map(|p| p.pn), Some(9));
        assert_eq!(sent.remove(5).map(|p| p.pn), Some(5));
        assert!(sent.slots.is_empty());
        sent.push(packet(1_000_000));
        assert_eq!(sent.slots.len(), 1, "no slots for the numbers in between");
        assert_eq!(pns(sent.range(..)), vec![1_000_000]);
        assert!(sent.remove(4).is_none());
        assert_eq!(
            pns(sent.into_values().collect::<Vec<_>>().iter()),
            vec![1_000_000]
        );
    }
}
