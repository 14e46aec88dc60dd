//! The sender-side reinjection queue shared by AutoRec (§V-B, Fig. 10) and TOO (§2.2).
//!
//! It holds data that was retransmitted but is not yet acknowledged, ordered by the time of its
//! last (re)send: insert at the tail after a retransmission, move to the tail after a reinjection,
//! delete on acknowledgement. Every operation keeps that order without sorting, because the only
//! writes are "append the newest send" and "delete".
//!
//! Data deleted because its A_i reached the limit is remembered with its count until it is
//! acknowledged, so that an ARQ retransmission that brings it back can keep counting
//! ([`ReinjectionQueue::on_retransmitted_keeping_count`], AutoRec §VIII-C).

use std::collections::{BTreeMap, VecDeque};

use recoup_time::Instant;

use crate::api::{LossId, SendState};

/// One row of AutoRec's status table (Fig. 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueEntry {
    /// `Data_ID`: the lineage the transport assigned to the lost range.
    pub id: LossId,
    /// `A_i`: reinjections done since the last ARQ retransmission.
    pub reinjections: u32,
    /// `T_stmp`: time of the last retransmission or reinjection.
    pub last_sent: Instant,
    /// Position in send order; strictly increasing from head to tail. Off-mode passes use it to
    /// visit each entry once even when many sends share one `now`.
    pub seq: u64,
}

/// Retransmitted-but-unacknowledged data, oldest last send at the head.
#[derive(Clone, Debug, Default)]
pub struct ReinjectionQueue {
    entries: VecDeque<QueueEntry>,
    next_seq: u64,
    /// A_i of data deleted at the limit and not yet acknowledged.
    spent: BTreeMap<LossId, u32>,
}

impl ReinjectionQueue {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Lineages the queue holds state for: its entries and the data it deleted at the limit.
    #[must_use]
    pub fn tracked(&self) -> usize {
        self.entries.len() + self.spent.len()
    }

    /// The entry silent for longest.
    #[must_use]
    pub fn head(&self) -> Option<&QueueEntry> {
        self.entries.front()
    }

    /// Entries from head to tail.
    pub fn iter(&self) -> impl Iterator<Item = &QueueEntry> {
        self.entries.iter()
    }

    /// The sequence number the next send will get: entries with a smaller one were last sent
    /// before this moment.
    #[must_use]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// An ARQ retransmission of `id` went out: append it with `A_i = 0`, or move it to the tail
    /// and restart its count if a new round retransmitted it again.
    pub fn on_retransmitted(&mut self, id: LossId, now: Instant) {
        self.remove(id);
        self.push(id, 0, now);
    }

    /// An ARQ retransmission of `id` went out: append it (or move it to the tail) keeping the
    /// reinjections already done for this data. Data that has had `limit` of them stays out:
    /// the queue holds only data "whose number of injection times is less than K_theta"
    /// (AutoRec §VIII-A), and from then on plain ARQ alone recovers it (§VIII-C).
    pub fn on_retransmitted_keeping_count(&mut self, id: LossId, now: Instant, limit: u32) {
        let done = match self.entries.iter().position(|e| e.id == id) {
            Some(i) => self.entries.remove(i).map_or(0, |e| e.reinjections),
            None => self.spent.remove(&id).unwrap_or(0),
        };
        if done > 0 && done >= limit {
            self.spent.insert(id, done);
        } else {
            self.push(id, done, now);
        }
    }

    fn push(&mut self, id: LossId, reinjections: u32, now: Instant) {
        let seq = self.take_seq();
        self.entries.push_back(QueueEntry {
            id,
            reinjections,
            last_sent: now,
            seq,
        });
    }

    /// Reinject the head: count it, and move it to the tail unless it has now been reinjected
    /// `limit` times (AutoRec deletes it then; TOO passes `u32::MAX`).
    pub fn reinject_head(&mut self, now: Instant, limit: u32) -> Option<LossId> {
        let mut entry = self.entries.pop_front()?;
        entry.reinjections = entry.reinjections.saturating_add(1);
        entry.last_sent = now;
        entry.seq = self.take_seq();
        if entry.reinjections < limit {
            self.entries.push_back(entry);
        } else {
            self.spent.insert(entry.id, entry.reinjections);
        }
        Some(entry.id)
    }

    /// A copy of `id` actually left at `now` (it may wait for pacing after the policy chose it):
    /// its silence counts from here. Moves it to the tail, keeping its reinjection count.
    pub fn on_copy_sent(&mut self, id: LossId, now: Instant) {
        if let Some(i) = self.entries.iter().position(|e| e.id == id) {
            if let Some(mut entry) = self.entries.remove(i) {
                entry.last_sent = now;
                entry.seq = self.take_seq();
                self.entries.push_back(entry);
            }
        }
    }

    /// Forget `id` (acknowledged, or a new round restarts its count): its entry, or its count if
    /// it was deleted at the limit. O(n), as AutoRec §VIII-A notes. Whether an entry was queued.
    pub fn remove(&mut self, id: LossId) -> bool {
        self.spent.remove(&id);
        match self.entries.iter().position(|e| e.id == id) {
            Some(i) => {
                self.entries.remove(i);
                true
            }
            None => false,
        }
    }

    /// Delete every entry that has already been reinjected and reached `limit` (after the limit
    /// was lowered). Entries not yet reinjected stay: a later, higher limit may use them.
    pub fn drop_reinjected_at_limit(&mut self, limit: u32) {
        let spent = &mut self.spent;
        self.entries.retain(|e| {
            let keep = e.reinjections == 0 || e.reinjections < limit;
            if !keep {
                spent.insert(e.id, e.reinjections);
            }
            keep
        });
    }
}

/// The sender's state toward application-limited (off-mode) periods, for the policies that
/// reinject in them (AutoRec, TOO, draft-wu): the queue position at which the current period
/// began. Entries with a smaller [`QueueEntry::seq`] were last sent before it, so reinjecting the
/// head only while it is one of them visits each entry once per period (TOO §2.2), even when
/// many sends share one `now`.
#[derive(Clone, Copy, Debug)]
pub struct OffModePeriod {
    state: SendState,
    before: Option<u64>,
}

impl Default for OffModePeriod {
    fn default() -> Self {
        Self {
            state: SendState::OnMode,
            before: None,
        }
    }
}

impl OffModePeriod {
    /// The state last entered.
    #[must_use]
    pub fn state(&self) -> SendState {
        self.state
    }

    /// The sender is now in `state`: a period begins on entering off-mode and ends on leaving
    /// it. Entering the state it is already in changes nothing.
    pub fn enter(&mut self, state: SendState, queue: &ReinjectionQueue) {
        if state == SendState::OffMode && self.state != SendState::OffMode {
            self.before = Some(queue.next_seq());
        } else if state != SendState::OffMode {
            self.before = None;
        }
        self.state = state;
    }

    /// Whether the queue's head is due for its once-per-period reinjection: the sender is in
    /// off-mode and the head was last sent before the period began.
    #[must_use]
    pub fn head_due(&self, queue: &ReinjectionQueue) -> bool {
        self.before
            .is_some_and(|before| queue.head().is_some_and(|head| head.seq < before))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    fn ordered(q: &ReinjectionQueue) -> bool {
        let v: Vec<_> = q.iter().collect();
        v.windows(2)
            .all(|w| w[0].last_sent <= w[1].last_sent && w[0].seq < w[1].seq)
    }

    #[test]
    fn a_copy_sent_late_restarts_its_silence_and_keeps_its_count() {
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        let mut q = ReinjectionQueue::new();
        q.on_retransmitted(1, t(0));
        q.on_retransmitted(2, t(1));
        assert_eq!(q.reinject_head(t(5), 3), Some(1));
        q.on_copy_sent(1, t(9));
        let tail = q.iter().last().copied().expect("entry");
        assert_eq!((tail.id, tail.reinjections, tail.last_sent), (1, 1, t(9)));
        assert!(ordered(&q));
        q.on_copy_sent(7, t(10));
        assert_eq!(q.len(), 2, "unknown ids are ignored");
    }

    #[test]
    fn insert_move_and_delete_by_the_paper() {
        let mut q = ReinjectionQueue::new();
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        q.on_retransmitted(1, t(1));
        q.on_retransmitted(2, t(2));
        assert_eq!(q.head().map(|e| e.id), Some(1));
        // Reinjecting the head moves it behind 2.
        assert_eq!(q.reinject_head(t(3), 2), Some(1));
        assert_eq!(q.iter().map(|e| e.id).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(
            q.iter().last().map(|e| (e.reinjections, e.last_sent)),
            Some((1, t(3)))
        );
        // The second reinjection reaches the limit of 2 and deletes it.
        assert_eq!(q.reinject_head(t(4), 2), Some(2));
        assert_eq!(q.reinject_head(t(5), 2), Some(1));
        assert_eq!(q.iter().map(|e| e.id).collect::<Vec<_>>(), vec![2]);
        assert!(q.remove(2));
        assert!(!q.remove(2));
        assert!(q.is_empty());
    }

    #[test]
    fn a_new_round_restarts_the_count_at_the_tail() {
        let mut q = ReinjectionQueue::new();
        q.on_retransmitted(7, Instant::from_nanos(1));
        q.on_retransmitted(8, Instant::from_nanos(2));
        q.reinject_head(Instant::from_nanos(3), 5);
        q.on_retransmitted(7, Instant::from_nanos(4));
        let tail = q.iter().last().copied();
        assert_eq!(tail.map(|e| (e.id, e.reinjections)), Some((7, 0)));
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn keeping_the_count_across_rounds() {
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        let mut q = ReinjectionQueue::new();
        q.on_retransmitted_keeping_count(1, t(0), 2);
        q.on_retransmitted_keeping_count(2, t(1), 2);
        assert_eq!(q.reinject_head(t(2), 2), Some(1));
        // 1 comes back from a new round with its one reinjection, at the tail.
        q.on_retransmitted_keeping_count(1, t(3), 2);
        let tail = q.iter().last().copied().expect("entry");
        assert_eq!((tail.id, tail.reinjections, tail.last_sent), (1, 1, t(3)));
        // 2 reaches the limit and is deleted, but its count is kept until acknowledged.
        assert_eq!(q.reinject_head(t(4), 2), Some(2));
        assert_eq!(q.reinject_head(t(5), 2), Some(1));
        assert_eq!(q.reinject_head(t(6), 2), Some(2));
        assert!(q.is_empty());
        assert_eq!(q.tracked(), 2);
        q.on_retransmitted_keeping_count(2, t(7), 2);
        assert!(q.is_empty(), "A_i = limit: left to ARQ");
        // A higher limit lets it back with its count.
        q.on_retransmitted_keeping_count(2, t(8), 3);
        assert_eq!(q.head().map(|e| (e.id, e.reinjections)), Some((2, 2)));
        assert!(ordered(&q));
        assert!(q.remove(2));
        assert!(!q.remove(1), "1 was no longer queued");
        assert_eq!(q.tracked(), 0, "acknowledgements forget the kept counts");
    }

    #[test]
    fn lowering_the_limit_drops_only_reinjected_entries() {
        let mut q = ReinjectionQueue::new();
        q.on_retransmitted(1, Instant::from_nanos(1));
        q.on_retransmitted(2, Instant::from_nanos(2));
        q.reinject_head(Instant::from_nanos(3), 5);
        q.drop_reinjected_at_limit(1);
        assert_eq!(q.iter().map(|e| e.id).collect::<Vec<_>>(), vec![2]);
        q.drop_reinjected_at_limit(0);
        assert_eq!(q.len(), 1);
        assert_eq!(q.tracked(), 2, "1's count is kept");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Retransmit(u64),
        RetransmitKeeping(u64, u32),
        Reinject(u32),
        Ack(u64),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..8).prop_map(Op::Retransmit),
            (0u64..8, 1u32..4).prop_map(|(id, limit)| Op::RetransmitKeeping(id, limit)),
            (1u32..4).prop_map(Op::Reinject),
            (0u64..8).prop_map(Op::Ack),
            (0u64..3).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed_0001),
            ..ProptestConfig::default()
        })]
        #[test]
        fn stays_ordered_by_last_send(ops in proptest::collection::vec(op(), 0..64)) {
            let mut q = ReinjectionQueue::new();
            let mut now = Instant::ZERO;
            for op in ops {
                match op {
                    Op::Retransmit(id) => q.on_retransmitted(id, now),
                    Op::RetransmitKeeping(id, limit) => {
                        q.on_retransmitted_keeping_count(id, now, limit);
                        let queued = q.iter().find(|e| e.id == id).map(|e| e.reinjections);
                        prop_assert!(queued.is_none_or(|a| a < limit || a == 0));
                    }
                    Op::Reinject(limit) => {
                        let head = q.head().copied();
                        let got = q.reinject_head(now, limit);
                        prop_assert_eq!(got, head.map(|e| e.id));
                        if let Some(e) = head {
                            let present = q.iter().any(|x| x.id == e.id);
                            prop_assert_eq!(present, e.reinjections + 1 < limit);
                        }
                    }
                    Op::Ack(id) => {
                        let before = q.tracked();
                        let queued = q.remove(id);
                        prop_assert!(q.iter().all(|e| e.id != id));
                        prop_assert!(q.tracked() + usize::from(queued) <= before);
                    }
                    Op::Advance(ms) => now += Duration::from_millis(ms),
                }
                prop_assert!(ordered(&q));
                // One entry per lineage.
                let mut ids: Vec<_> = q.iter().map(|e| e.id).collect();
                ids.sort_unstable();
                ids.dedup();
                prop_assert_eq!(ids.len(), q.len());
            }
        }
    }
}
