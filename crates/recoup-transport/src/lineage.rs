//! Lineage of lost stream data (DESIGN.md "The transport <-> policy contract").
//!
//! When a stream range is first declared lost it gets a [`LossId`]; every retransmission and copy
//! of it carries that id. Only the newest send of a lineage is checked for loss (AutoRec §V-B):
//! losing it starts the next round with an ARQ retransmission, losing an older copy ends nothing.
//! When every byte of the range is acknowledged the record is closed and, if asked for, kept as a
//! [`Recovered`] row for the metrics.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use recoup_recovery::{DataRange, LossId, LossTrigger, LostData, SendKind};
use recoup_time::Instant;

/// How one lost range was recovered: the raw material of DESIGN.md "Metrics".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovered {
    pub id: LossId,
    pub range: DataRange,
    pub first_sent: Instant,
    pub first_detected: Instant,
    /// Send time of the first ARQ retransmission, if one went out.
    pub first_retransmit_sent: Option<Instant>,
    /// Send time of the earliest send of this data that the receiver acknowledged.
    pub recovered_by_sent: Instant,
    /// When the acknowledgement that completed the range arrived.
    pub completed: Instant,
    /// Retransmission rounds N (ART §5.1): a round ends when its newest send is lost.
    pub rounds: u32,
    /// Retransmissions and copies sent (K).
    pub sends: u32,
    pub copies: u32,
    /// Whether the first retransmission reached the receiver.
    pub first_retransmit_arrived: bool,
}

impl Recovered {
    /// Recovery latency (AutoRec §III-C): first loss detection to the send time of the earliest
    /// send the receiver got; zero when the first retransmission arrived.
    #[must_use]
    pub fn recovery_latency(&self) -> Duration {
        if self.first_retransmit_arrived {
            Duration::ZERO
        } else {
            self.recovered_by_sent
                .saturating_duration_since(self.first_detected)
        }
    }

    /// Loss detection time T_unit: first send to first retransmission.
    #[must_use]
    pub fn loss_detection_time(&self) -> Option<Duration> {
        self.first_retransmit_sent
            .map(|t| t.saturating_duration_since(self.first_sent))
    }
}

#[derive(Clone, Debug)]
struct Record {
    range: DataRange,
    first_sent: Instant,
    first_detected: Instant,
    round: u32,
    /// Packet number and send time of the newest send, the only one checked for loss.
    newest: Option<(u64, Instant)>,
    first_retransmit: Option<(u64, Instant)>,
    first_retransmit_arrived: bool,
    earliest_acked_sent: Option<Instant>,
    sends: u32,
    copies: u32,
    /// An ARQ retransmission is queued and not yet sent.
    retransmit_queued: bool,
}

/// All open lineages of one connection, and the queue of ARQ retransmissions they owe.
#[derive(Debug, Default)]
pub(crate) struct Lineages {
    next_id: LossId,
    records: BTreeMap<LossId, Record>,
    /// Open records by where their range starts, to find those an acknowledgement touches.
    by_start: BTreeMap<(u64, u64), LossId>,
    retransmit: VecDeque<LossId>,
    keep_recovered: bool,
    recovered: Vec<Recovered>,
}

impl Lineages {
    /// `keep_recovered`: keep a [`Recovered`] row per closed lineage until drained.
    pub(crate) fn new(keep_recovered: bool) -> Self {
        Self {
            keep_recovered,
            ..Self::default()
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// The range of an open lineage.
    pub(crate) fn range(&self, id: LossId) -> Option<DataRange> {
        self.records.get(&id).map(|r| r.range)
    }

    /// First-transmission data was declared lost: open a lineage, queue its retransmission.
    pub(crate) fn on_first_loss(
        &mut self,
        range: DataRange,
        first_sent: Instant,
        now: Instant,
        trigger: LossTrigger,
    ) -> LostData {
        let id = self.next_id;
        self.next_id += 1;
        self.records.insert(
            id,
            Record {
                range,
                first_sent,
                first_detected: now,
                round: 1,
                newest: None,
                first_retransmit: None,
                first_retransmit_arrived: false,
                earliest_acked_sent: None,
                sends: 0,
                copies: 0,
                retransmit_queued: true,
            },
        );
        self.by_start.insert((range.stream, range.start), id);
        self.retransmit.push_back(id);
        LostData {
            id,
            range,
            round: 1,
            first_sent,
            first_detected: now,
            lost_sent: first_sent,
            trigger,
        }
    }

    /// A packet carrying lineage `id` was declared lost. Returns the next round if that packet was
    /// the newest send (and queues its retransmission); an older copy's loss ends nothing.
    pub(crate) fn on_send_lost(
        &mut self,
        id: LossId,
        pn: u64,
        trigger: LossTrigger,
    ) -> Option<LostData> {
        let rec = self.records.get_mut(&id)?;
        let (newest_pn, newest_sent) = rec.newest?;
        if newest_pn != pn || rec.retransmit_queued {
            return None;
        }
        rec.round += 1;
        rec.retransmit_queued = true;
        self.retransmit.push_back(id);
        Some(LostData {
            id,
            range: rec.range,
            round: rec.round,
            first_sent: rec.first_sent,
            first_detected: rec.first_detected,
            lost_sent: newest_sent,
            trigger,
        })
    }

    /// Whether losing packet `pn`, which carried lineage `id`, ends a round (for congestion
    /// control, which sees a loss only when a round's sends are all lost: ART §6.4).
    pub(crate) fn is_newest(&self, id: LossId, pn: u64) -> bool {
        self.records
            .get(&id)
            .and_then(|r| r.newest)
            .is_some_and(|(newest, _)| newest == pn)
    }

    /// Next queued ARQ retransmission whose lineage is still open.
    pub(crate) fn next_retransmit(&mut self) -> Option<(LossId, DataRange)> {
        while let Some(&id) = self.retransmit.front() {
            match self.records.get(&id) {
                Some(rec) if rec.retransmit_queued => return Some((id, rec.range)),
                _ => {
                    self.retransmit.pop_front();
                }
            }
        }
        None
    }

    /// Whether lineage `id` waits for its round's ARQ retransmission.
    pub(crate) fn retransmit_queued(&self, id: LossId) -> bool {
        self.records.get(&id).is_some_and(|r| r.retransmit_queued)
    }

    /// Whether an ARQ retransmission is waiting.
    pub(crate) fn has_retransmit(&mut self) -> bool {
        self.next_retransmit().is_some()
    }

    /// A retransmission or copy of lineage `id` went out in packet `pn`.
    pub(crate) fn on_sent(&mut self, id: LossId, pn: u64, now: Instant, kind: SendKind) {
        let Some(rec) = self.records.get_mut(&id) else {
            return;
        };
        rec.newest = Some((pn, now));
        rec.sends += 1;
        match kind {
            SendKind::Retransmission => {
                if rec.retransmit_queued {
                    rec.retransmit_queued = false;
                    if self.retransmit.front() == Some(&id) {
                        self.retransmit.pop_front();
                    }
                }
                if rec.first_retransmit.is_none() {
                    rec.first_retransmit = Some((pn, now));
                }
            }
            SendKind::Copy => rec.copies += 1,
            SendKind::New => {}
        }
    }

    /// A packet sent at `sent` that carried (part of) lineage `id` was acknowledged.
    pub(crate) fn on_send_acked(&mut self, id: LossId, pn: u64, sent: Instant) {
        if let Some(rec) = self.records.get_mut(&id) {
            if rec.first_retransmit.is_some_and(|(p, _)| p == pn) {
                rec.first_retransmit_arrived = true;
            }
            rec.earliest_acked_sent = Some(rec.earliest_acked_sent.map_or(sent, |t| t.min(sent)));
        }
    }

    /// Bytes of `range` were acknowledged by a packet sent at `sent`. Closes every open lineage in
    /// that stream overlapping it for which `fully_acked` says all its bytes are now acknowledged;
    /// returns their ids.
    pub(crate) fn on_range_acked(
        &mut self,
        range: DataRange,
        sent: Instant,
        now: Instant,
        mut fully_acked: impl FnMut(&DataRange) -> bool,
    ) -> Vec<LossId> {
        let candidates: Vec<LossId> = self
            .by_start
            .range((range.stream, 0)..(range.stream, range.end.max(range.start + 1)))
            .filter_map(|(_, &id)| {
                let r = self.records.get(&id)?.range;
                (r.end > range.start || (r.is_empty() && r.start == range.start)).then_some(id)
            })
            .collect();
        let mut closed = Vec::new();
        for id in candidates {
            let Some(rec) = self.records.get(&id) else {
                continue;
            };
            if fully_acked(&rec.range) {
                self.close(id, Some(sent), now);
                closed.push(id);
            }
        }
        closed
    }

    /// Forget every lineage of `stream` (it was reset): nothing is owed for it any more.
    pub(crate) fn remove_stream(&mut self, stream: u64) -> Vec<LossId> {
        let ids: Vec<LossId> = self
            .by_start
            .range((stream, 0)..=(stream, u64::MAX))
            .map(|(_, &id)| id)
            .collect();
        for &id in &ids {
            if let Some(rec) = self.records.remove(&id) {
                self.by_start.remove(&(rec.range.stream, rec.range.start));
            }
        }
        ids
    }

    fn close(&mut self, id: LossId, acked_sent: Option<Instant>, now: Instant) {
        let Some(rec) = self.records.remove(&id) else {
            return;
        };
        self.by_start.remove(&(rec.range.stream, rec.range.start));
        if !self.keep_recovered {
            return;
        }
        let recovered_by_sent = match (rec.earliest_acked_sent, acked_sent) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => now,
        };
        self.recovered.push(Recovered {
            id,
            range: rec.range,
            first_sent: rec.first_sent,
            first_detected: rec.first_detected,
            first_retransmit_sent: rec.first_retransmit.map(|(_, t)| t),
            recovered_by_sent,
            completed: now,
            rounds: rec.round,
            sends: rec.sends,
            copies: rec.copies,
            first_retransmit_arrived: rec.first_retransmit_arrived,
        });
    }

    /// Closed lineages since the last call (only when keeping them was asked for).
    pub(crate) fn drain_recovered(&mut self) -> std::vec::Drain<'_, Recovered> {
        self.recovered.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    fn range(start: u64, end: u64) -> DataRange {
        DataRange {
            stream: 0,
            start,
            end,
        }
    }

    #[test]
    fn only_the_newest_send_opens_a_new_round() {
        let mut l = Lineages::new(true);
        let lost = l.on_first_loss(range(0, 100), ms(0), ms(70), LossTrigger::PacketThreshold);
        assert_eq!(lost.round, 1);
        assert_eq!(l.next_retransmit(), Some((lost.id, range(0, 100))));
        l.on_sent(lost.id, 10, ms(71), SendKind::Retransmission);
        assert_eq!(l.next_retransmit(), None);
        l.on_sent(lost.id, 11, ms(72), SendKind::Copy);
        // The retransmission (older) is lost: nothing happens, the copy is still out.
        assert!(!l.is_newest(lost.id, 10));
        assert_eq!(
            l.on_send_lost(lost.id, 10, LossTrigger::PacketThreshold),
            None
        );
        // The copy (newest) is lost: round 2 starts with a queued retransmission.
        let round2 = l
            .on_send_lost(lost.id, 11, LossTrigger::TimeThreshold)
            .expect("round 2");
        assert_eq!(round2.round, 2);
        assert_eq!(round2.lost_sent, ms(72));
        assert_eq!(l.next_retransmit(), Some((lost.id, range(0, 100))));
    }

    #[test]
    fn acknowledgement_closes_the_lineage_and_measures_recovery() {
        let mut l = Lineages::new(true);
        let lost = l.on_first_loss(range(0, 100), ms(0), ms(70), LossTrigger::PacketThreshold);
        l.on_sent(lost.id, 10, ms(70), SendKind::Retransmission);
        l.on_sent(lost.id, 11, ms(90), SendKind::Copy);
        let _ = l.on_send_lost(lost.id, 10, LossTrigger::PacketThreshold);
        l.on_send_acked(lost.id, 11, ms(90));
        let closed = l.on_range_acked(range(0, 100), ms(90), ms(130), |_| true);
        assert_eq!(closed, vec![lost.id]);
        assert_eq!(l.len(), 0);
        let rec: Vec<_> = l.drain_recovered().collect();
        assert_eq!(rec.len(), 1);
        assert!(!rec[0].first_retransmit_arrived);
        assert_eq!(rec[0].recovery_latency(), Duration::from_millis(20));
        assert_eq!(
            rec[0].loss_detection_time(),
            Some(Duration::from_millis(70))
        );
        assert_eq!((rec[0].sends, rec[0].copies, rec[0].rounds), (2, 1, 1));
    }

    #[test]
    fn first_retransmission_arriving_means_zero_latency() {
        let mut l = Lineages::new(true);
        let lost = l.on_first_loss(range(0, 100), ms(0), ms(70), LossTrigger::PacketThreshold);
        l.on_sent(lost.id, 10, ms(75), SendKind::Retransmission);
        l.on_send_acked(lost.id, 10, ms(75));
        let _ = l.on_range_acked(range(0, 100), ms(75), ms(140), |_| true);
        let rec: Vec<_> = l.drain_recovered().collect();
        assert_eq!(rec[0].recovery_latency(), Duration::ZERO);
    }

    #[test]
    fn partial_acks_keep_the_lineage_open_and_resets_drop_it() {
        let mut l = Lineages::new(false);
        let a = l.on_first_loss(range(0, 100), ms(0), ms(70), LossTrigger::PacketThreshold);
        let b = l.on_first_loss(range(100, 200), ms(0), ms(70), LossTrigger::PacketThreshold);
        let closed = l.on_range_acked(range(50, 150), ms(1), ms(80), |_| false);
        assert!(closed.is_empty());
        assert_eq!(l.len(), 2);
        let closed = l.on_range_acked(range(150, 200), ms(1), ms(80), |r| r.start == 100);
        assert_eq!(closed, vec![b.id]);
        assert_eq!(l.remove_stream(0), vec![a.id]);
        assert_eq!(l.len(), 0);
        assert_eq!(l.next_retransmit(), None);
        assert_eq!(l.drain_recovered().count(), 0);
    }
}
