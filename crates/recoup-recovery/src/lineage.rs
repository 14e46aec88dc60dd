//! The lineage of lost stream data and what a host owes it (DESIGN.md "The transport <-> policy
//! contract"): one implementation, driven by the transport while it sends and by `recoup analyze`
//! while it replays a sender's qlog.
//!
//! When a stream range is first declared lost it gets a [`LossId`]; every retransmission and copy
//! of it carries that id. Only the newest send of a lineage is checked for loss (AutoRec §V-B):
//! losing it starts the next round with an ARQ retransmission, losing an older copy ends nothing,
//! and only the newest send's loss is a congestion signal (ART §6.4). When every byte of the range
//! is acknowledged the lineage is closed and, if asked for, kept as a [`Recovered`] row for the
//! metrics.
//!
//! # What a host calls, and when
//!
//! A host is whatever sends the data: a QUIC connection, or a replay of a sender's trace. It keeps
//! its own sent-packet records, each stream range of a packet tagged with the [`LossId`] it
//! carries (`None` for a first transmission), and its own view of which stream bytes are
//! acknowledged. Per application-data packet:
//!
//! - **On loss** of a packet (RFC 9002 §6), for each stream range it carried:
//!   - a first transmission: for every still-unacknowledged piece of the range,
//!     [`Lineages::on_first_loss`], and hand the returned [`LostData`] to
//!     [`RecoveryPolicy::on_data_lost`](crate::RecoveryPolicy::on_data_lost). This loss is a
//!     congestion signal;
//!   - a send of lineage `id`: [`Lineages::on_send_lost`]. Its [`SendLoss`] says whether the loss
//!     is a congestion signal (the newest send was lost) and, when a new round starts, carries the
//!     [`LostData`] for `on_data_lost`.
//! - **On send**, before building each packet: first a copy the policy asked for
//!   ([`RecoveryPolicy::poll_copy`](crate::RecoveryPolicy::poll_copy)), once
//!   [`Lineages::retransmit_queued`] says its round's retransmission went out, then the queued ARQ
//!   retransmissions in order ([`Lineages::next_retransmit`]; [`Lineages::has_retransmit`] says
//!   whether one waits), then new data. Write the still-unacknowledged parts of the lineage's
//!   [`Lineages::range`] and call [`Lineages::on_sent`] with the packet number and the kind, even
//!   when nothing was left to write, so that the queue moves on. A host that does not know whether
//!   a re-send is the round's retransmission or a copy (a trace of another stack) calls
//!   [`Lineages::on_resent`] with the bytes instead; [`Lineages::overlapping`] finds the lineages
//!   a re-sent range belongs to.
//! - **On acknowledgement** of a packet, for each stream range it carried, after recording the
//!   range as acknowledged in its own stream state: [`Lineages::on_range_acked`] with the
//!   lineage the range carried and a test of whether a range is now wholly acknowledged. Hand each
//!   returned id to [`RecoveryPolicy::on_data_acked`](crate::RecoveryPolicy::on_data_acked). A
//!   packet acknowledged after it was declared lost acknowledges nothing here (its record left
//!   with the loss, as RFC 9002 Appendix A's DetectAndRemoveLostPackets removes it), so a host
//!   must not call this for it.
//!   Within one ACK, handle the acknowledged packets in ascending packet number order, before the
//!   losses the same ACK reveals: which send recovered a range, and whether losing a newest copy
//!   of data an older send delivered starts a round, depend on that order.
//! - **On reset** of a stream (RESET_STREAM): [`Lineages::remove_stream`], and `on_data_acked`
//!   for every id it returns: nothing is owed for the stream any more.
//! - For the metrics: [`Lineages::drain_recovered`] (with `keep_recovered`).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::time::Duration;

use recoup_time::Instant;

use crate::api::{DataRange, LossId, LossTrigger, LostData, SendKind};
use crate::range_set::RangeSet;

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
    /// Bytes re-sent in the current round, kept only for hosts that ask [`Lineages::on_resent`]
    /// to tell a retransmission split over packets from a copy.
    round_sent: RangeSet,
    /// Packet number of the current round's first re-send, for the same hosts.
    round_first_pn: Option<u64>,
}

/// What the loss of one send of a lineage means ([`Lineages::on_send_lost`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendLoss {
    /// The lost send was the lineage's newest: all of its round's sends are lost, which is a
    /// congestion signal (ART §6.4). Losing an older copy, or a send of a closed lineage, is not.
    pub newest: bool,
    /// The next round, when one starts (its ARQ retransmission is queued): for
    /// [`RecoveryPolicy::on_data_lost`](crate::RecoveryPolicy::on_data_lost).
    pub next_round: Option<LostData>,
}

/// All open lineages of one connection, and the queue of ARQ retransmissions they owe. The
/// module documentation says what a host calls and when.
#[derive(Debug, Default)]
pub struct Lineages {
    next_id: LossId,
    records: BTreeMap<LossId, Record>,
    /// Open records by where their range starts, to find those an acknowledgement touches.
    by_start: BTreeMap<(u64, u64), LossId>,
    /// The longest range a lineage ever had: one starting further than this below a range
    /// ends before it, so [`Self::overlapping`] looks only that far back.
    max_span: u64,
    retransmit: VecDeque<LossId>,
    keep_recovered: bool,
    recovered: Vec<Recovered>,
}

impl Lineages {
    /// `keep_recovered`: keep a [`Recovered`] row per closed lineage until drained.
    #[must_use]
    pub fn new(keep_recovered: bool) -> Self {
        Self {
            keep_recovered,
            ..Self::default()
        }
    }

    /// Open lineages: lost data not yet acknowledged.
    #[must_use]
    pub fn len(&self) -> usize {
        self.records.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The range of an open lineage.
    #[must_use]
    pub fn range(&self, id: LossId) -> Option<DataRange> {
        self.records.get(&id).map(|r| r.range)
    }

    /// How many times an open lineage was sent since its first loss (retransmissions and copies):
    /// the `send` of [`crate::data_send_key`] for its newest send.
    #[must_use]
    pub fn sends(&self, id: LossId) -> Option<u32> {
        self.records.get(&id).map(|r| r.sends)
    }

    /// Open lineages of `range.stream` overlapping `range`; an empty range (a bare FIN) matches a
    /// lineage that starts where it does.
    #[must_use]
    pub fn overlapping(&self, range: DataRange) -> Vec<LossId> {
        let from = range.start.saturating_sub(self.max_span);
        self.by_start
            .range((range.stream, from)..(range.stream, range.end.max(range.start + 1)))
            .filter_map(|(_, &id)| {
                let r = self.records.get(&id)?.range;
                (r.end > range.start || (r.is_empty() && r.start == range.start)).then_some(id)
            })
            .collect()
    }

    /// A still-unacknowledged piece of first-transmission data sent at `first_sent` was declared
    /// lost: open a lineage, queue its retransmission.
    pub fn on_first_loss(
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
                round_sent: RangeSet::default(),
                round_first_pn: None,
            },
        );
        self.by_start.insert((range.stream, range.start), id);
        self.max_span = self.max_span.max(range.end.saturating_sub(range.start));
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

    /// Packet `pn`, which carried lineage `id`, was declared lost. Only the newest send counts:
    /// its loss starts the next round (and queues its retransmission) unless one is already
    /// queued.
    pub fn on_send_lost(&mut self, id: LossId, pn: u64, trigger: LossTrigger) -> SendLoss {
        let Some(rec) = self.records.get_mut(&id) else {
            return SendLoss {
                newest: false,
                next_round: None,
            };
        };
        let newest_sent = match rec.newest {
            Some((newest_pn, sent)) if newest_pn == pn => sent,
            _ => {
                return SendLoss {
                    newest: false,
                    next_round: None,
                }
            }
        };
        if rec.retransmit_queued {
            return SendLoss {
                newest: true,
                next_round: None,
            };
        }
        rec.round += 1;
        rec.retransmit_queued = true;
        rec.round_sent.clear();
        rec.round_first_pn = None;
        self.retransmit.push_back(id);
        SendLoss {
            newest: true,
            next_round: Some(LostData {
                id,
                range: rec.range,
                round: rec.round,
                first_sent: rec.first_sent,
                first_detected: rec.first_detected,
                lost_sent: newest_sent,
                trigger,
            }),
        }
    }

    /// Splits open lineage `id` at stream offset `at`, strictly inside its range: `id` keeps the
    /// bytes before `at`, a new lineage with the same history takes the rest and is queued for
    /// retransmission right behind `id`. For a host whose packets shrank (path MTU discovery
    /// fell back to a smaller size) and can no longer carry the range in one packet. Returns the
    /// new lineage's id.
    ///
    /// Only a lineage that waits for its retransmission splits (`None` otherwise): the packets
    /// of its older sends carry `id` alone, so their loss never reaches the tail, which must
    /// therefore be owed a send of its own.
    pub fn split(&mut self, id: LossId, at: u64) -> Option<LossId> {
        let rec = self.records.get_mut(&id)?;
        if !rec.retransmit_queued || at <= rec.range.start || at >= rec.range.end {
            return None;
        }
        let mut tail = rec.clone();
        rec.range.end = at;
        tail.range.start = at;
        let new = self.next_id;
        self.next_id += 1;
        self.by_start.insert((tail.range.stream, at), new);
        let behind = self
            .retransmit
            .iter()
            .position(|&q| q == id)
            .map_or(self.retransmit.len(), |i| i + 1);
        self.retransmit.insert(behind, new);
        self.records.insert(new, tail);
        Some(new)
    }

    /// Next queued ARQ retransmission whose lineage is still open.
    pub fn next_retransmit(&mut self) -> Option<(LossId, DataRange)> {
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
    #[must_use]
    pub fn retransmit_queued(&self, id: LossId) -> bool {
        self.records.get(&id).is_some_and(|r| r.retransmit_queued)
    }

    /// Whether an ARQ retransmission is waiting.
    pub fn has_retransmit(&mut self) -> bool {
        self.next_retransmit().is_some()
    }

    /// A retransmission or copy of lineage `id` went out in packet `pn`.
    pub fn on_sent(&mut self, id: LossId, pn: u64, now: Instant, kind: SendKind) {
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

    /// Packet `pn` re-sent `bytes` of lineage `id`, as a `kind` the host may not know. Unknown, it
    /// is (part of) the round's retransmission while the lineage waits for one or the packet
    /// carries bytes of it not yet re-sent in this round (a stack may split a retransmission over
    /// packets), and a copy otherwise. Records the send like [`Lineages::on_sent`]; returns the
    /// kind, or `None` if the lineage is not open.
    pub fn on_resent(
        &mut self,
        id: LossId,
        pn: u64,
        now: Instant,
        bytes: &[Range<u64>],
        kind: Option<SendKind>,
    ) -> Option<SendKind> {
        let rec = self.records.get_mut(&id)?;
        let kind = kind.unwrap_or_else(|| {
            let fresh = bytes
                .iter()
                .any(|b| !rec.round_sent.gaps(b.clone()).is_empty());
            if rec.retransmit_queued || fresh {
                SendKind::Retransmission
            } else {
                SendKind::Copy
            }
        });
        for b in bytes {
            rec.round_sent.insert(b.clone());
        }
        rec.round_first_pn.get_or_insert(pn);
        self.on_sent(id, pn, now, kind);
        Some(kind)
    }

    /// Packet `pn` re-sent `bytes` of lineage `id` in its current round and was declared lost,
    /// but it was not the lineage's newest send ([`Lineages::on_send_lost`] said so). For hosts
    /// that infer kinds with [`Lineages::on_resent`]: those bytes are owed again, so their next
    /// re-send is still part of the round's retransmission (a stack that splits a
    /// retransmission over packets re-sends a lost part alone), not a copy.
    pub fn on_part_lost(&mut self, id: LossId, pn: u64, bytes: Range<u64>) {
        let Some(rec) = self.records.get_mut(&id) else {
            return;
        };
        if rec.round_first_pn.is_some_and(|first| pn >= first) {
            rec.round_sent.remove(bytes);
        }
    }

    /// Stream bytes `range` of packet `pn`, sent at `sent`, were acknowledged; the packet carried
    /// them as a send of the lineages in `carried` (none for a first transmission). Closes every
    /// open lineage of that stream overlapping `range` for which `fully_acked` says all its bytes
    /// are now acknowledged; returns their ids.
    pub fn on_range_acked(
        &mut self,
        range: DataRange,
        carried: impl IntoIterator<Item = LossId>,
        pn: u64,
        sent: Instant,
        now: Instant,
        mut fully_acked: impl FnMut(&DataRange) -> bool,
    ) -> Vec<LossId> {
        for id in carried {
            if let Some(rec) = self.records.get_mut(&id) {
                if rec.first_retransmit.is_some_and(|(p, _)| p == pn) {
                    rec.first_retransmit_arrived = true;
                }
                rec.earliest_acked_sent =
                    Some(rec.earliest_acked_sent.map_or(sent, |t| t.min(sent)));
            }
        }
        let mut closed = Vec::new();
        for id in self.overlapping(range) {
            let Some(rec) = self.records.get(&id) else {
                continue;
            };
            if fully_acked(&rec.range) {
                self.close(id, sent, now);
                closed.push(id);
            }
        }
        closed
    }

    /// Forget every lineage of `stream` (it was reset): nothing is owed for it any more.
    pub fn remove_stream(&mut self, stream: u64) -> Vec<LossId> {
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

    fn close(&mut self, id: LossId, acked_sent: Instant, now: Instant) {
        let Some(rec) = self.records.remove(&id) else {
            return;
        };
        self.by_start.remove(&(rec.range.stream, rec.range.start));
        if !self.keep_recovered {
            return;
        }
        self.recovered.push(Recovered {
            id,
            range: rec.range,
            first_sent: rec.first_sent,
            first_detected: rec.first_detected,
            first_retransmit_sent: rec.first_retransmit.map(|(_, t)| t),
            recovered_by_sent: rec
                .earliest_acked_sent
                .map_or(acked_sent, |t| t.min(acked_sent)),
            completed: now,
            rounds: rec.round,
            sends: rec.sends,
            copies: rec.copies,
            first_retransmit_arrived: rec.first_retransmit_arrived,
        });
    }

    /// Closed lineages since the last call (only when keeping them was asked for).
    pub fn drain_recovered(&mut self) -> std::vec::Drain<'_, Recovered> {
        self.recovered.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// The bytes a re-send carries, for [`Lineages::on_resent`].
    fn bytes(start: u64, end: u64) -> Vec<Range<u64>> {
        let piece = start..end;
        vec![piece]
    }

    fn range(start: u64, end: u64) -> DataRange {
        DataRange {
            stream: 0,
            start,
            end,
        }
    }

    #[test]
    fn a_split_lineage_owes_both_halves_in_order_and_closes_each_on_its_own() {
        let mut l = Lineages::new(true);
        let a = l
            .on_first_loss(range(0, 1000), ms(0), ms(10), LossTrigger::PacketThreshold)
            .id;
        let b = l
            .on_first_loss(
                range(1000, 2000),
                ms(0),
                ms(10),
                LossTrigger::PacketThreshold,
            )
            .id;
        assert_eq!(l.split(a, 0), None, "not strictly inside");
        assert_eq!(l.split(a, 1000), None, "not strictly inside");
        let tail = l.split(a, 600).expect("split");
        assert_eq!(l.range(a), Some(range(0, 600)));
        assert_eq!(l.range(tail), Some(range(600, 1000)));
        // The tail is owed right after its head, before the next lineage.
        let mut order = Vec::new();
        while let Some((id, _)) = l.next_retransmit() {
            order.push(id);
            l.on_sent(id, 10 + id, ms(20), SendKind::Retransmission);
        }
        assert_eq!(order, vec![a, tail, b]);
        // Sent and waiting for nothing: its older sends would speak for it alone.
        assert_eq!(l.split(b, 1500), None, "no retransmission owed");
        assert_eq!(l.overlapping(range(500, 700)), vec![a, tail]);
        let closed = l.on_range_acked(range(600, 1000), [tail], 10 + tail, ms(20), ms(30), |_| {
            true
        });
        assert_eq!(closed, vec![tail]);
        assert_eq!(l.len(), 2);
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
        assert_eq!(
            l.on_send_lost(lost.id, 10, LossTrigger::PacketThreshold),
            SendLoss {
                newest: false,
                next_round: None
            }
        );
        // The copy (newest) is lost: round 2 starts with a queued retransmission.
        let loss = l.on_send_lost(lost.id, 11, LossTrigger::TimeThreshold);
        assert!(loss.newest);
        let round2 = loss.next_round.expect("round 2");
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
        let closed = l.on_range_acked(range(0, 100), Some(lost.id), 11, ms(90), ms(130), |_| true);
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
        let _ = l.on_range_acked(range(0, 100), Some(lost.id), 10, ms(75), ms(140), |_| true);
        let rec: Vec<_> = l.drain_recovered().collect();
        assert_eq!(rec[0].recovery_latency(), Duration::ZERO);
    }

    #[test]
    fn partial_acks_keep_the_lineage_open_and_resets_drop_it() {
        let mut l = Lineages::new(false);
        let a = l.on_first_loss(range(0, 100), ms(0), ms(70), LossTrigger::PacketThreshold);
        let b = l.on_first_loss(range(100, 200), ms(0), ms(70), LossTrigger::PacketThreshold);
        let closed = l.on_range_acked(range(50, 150), None, 0, ms(1), ms(80), |_| false);
        assert!(closed.is_empty());
        assert_eq!(l.len(), 2);
        let closed = l.on_range_acked(range(150, 200), None, 0, ms(1), ms(80), |r| r.start == 100);
        assert_eq!(closed, vec![b.id]);
        assert_eq!(l.remove_stream(0), vec![a.id]);
        assert_eq!(l.len(), 0);
        assert_eq!(l.next_retransmit(), None);
        assert_eq!(l.drain_recovered().count(), 0);
    }

    #[test]
    fn an_unknown_resend_is_a_retransmission_until_the_round_has_all_its_bytes() {
        let mut l = Lineages::new(true);
        let lost = l.on_first_loss(range(0, 2000), ms(0), ms(50), LossTrigger::PacketThreshold);
        // A retransmission split over two packets: both parts are the round's retransmission.
        let first = l.on_resent(lost.id, 2, ms(51), &bytes(0, 1000), None);
        let second = l.on_resent(lost.id, 3, ms(51), &bytes(1000, 2000), None);
        assert_eq!(first, Some(SendKind::Retransmission));
        assert_eq!(second, Some(SendKind::Retransmission));
        // Every byte went out in this round: sending them again is a copy.
        assert_eq!(
            l.on_resent(lost.id, 4, ms(52), &bytes(0, 2000), None),
            Some(SendKind::Copy)
        );
        // The host's word overrides the inference.
        assert_eq!(
            l.on_resent(
                lost.id,
                5,
                ms(53),
                &bytes(0, 2000),
                Some(SendKind::Retransmission)
            ),
            Some(SendKind::Retransmission)
        );
        // Losing the newest send starts round 2, whose first re-send is its retransmission.
        let loss = l.on_send_lost(lost.id, 5, LossTrigger::TimeThreshold);
        assert_eq!(loss.next_round.map(|d| d.round), Some(2));
        assert_eq!(
            l.on_resent(lost.id, 6, ms(120), &bytes(0, 2000), None),
            Some(SendKind::Retransmission)
        );
        assert_eq!(l.on_resent(99, 7, ms(121), &bytes(0, 2000), None), None);
        let _ = l.on_range_acked(range(0, 2000), Some(lost.id), 6, ms(120), ms(180), |_| true);
        let rec: Vec<_> = l.drain_recovered().collect();
        // Sends 2..=6: two parts of the first retransmission, a copy, an explicit
        // retransmission, and round 2's.
        assert_eq!((rec[0].sends, rec[0].copies, rec[0].rounds), (5, 1, 2));
    }

    #[test]
    fn losing_the_newest_send_while_its_retransmission_waits_signals_but_opens_no_round() {
        let mut l = Lineages::new(false);
        let lost = l.on_first_loss(range(0, 100), ms(0), ms(70), LossTrigger::PacketThreshold);
        // A copy went out before the round's retransmission (a host that does not wait).
        l.on_sent(lost.id, 10, ms(71), SendKind::Copy);
        let loss = l.on_send_lost(lost.id, 10, LossTrigger::Pto);
        assert_eq!(
            loss,
            SendLoss {
                newest: true,
                next_round: None
            }
        );
        assert!(l.retransmit_queued(lost.id));
        // A lineage that is no longer open: no signal.
        assert_eq!(l.remove_stream(0), vec![lost.id]);
        assert!(!l.on_send_lost(lost.id, 10, LossTrigger::Pto).newest);
    }

    #[test]
    fn a_bare_fin_overlaps_the_lineage_that_starts_where_it_does() {
        let mut l = Lineages::new(false);
        let fin = l.on_first_loss(range(300, 300), ms(0), ms(70), LossTrigger::PacketThreshold);
        let bytes = l.on_first_loss(range(100, 300), ms(0), ms(70), LossTrigger::PacketThreshold);
        assert_eq!(l.overlapping(range(300, 300)), vec![fin.id]);
        assert_eq!(l.overlapping(range(250, 300)), vec![bytes.id]);
        assert_eq!(l.overlapping(range(0, 100)), Vec::<LossId>::new());
        let other_stream = DataRange {
            stream: 4,
            start: 100,
            end: 300,
        };
        assert_eq!(l.overlapping(other_stream), Vec::<LossId>::new());
        assert!(!l.is_empty());
    }

    #[test]
    fn overlapping_finds_a_long_lineage_that_starts_far_below_the_range() {
        let mut l = Lineages::new(false);
        let long = l.on_first_loss(range(1_000, 9_000), ms(0), ms(70), LossTrigger::Pto);
        let short = l.on_first_loss(range(9_000, 9_100), ms(0), ms(70), LossTrigger::Pto);
        // Scanning only the longest lineage's length below the range still finds the long one.
        assert_eq!(l.overlapping(range(8_990, 9_010)), vec![long.id, short.id]);
        assert_eq!(l.overlapping(range(9_050, 9_060)), vec![short.id]);
        assert_eq!(l.overlapping(range(9_100, 9_200)), Vec::<LossId>::new());
        assert_eq!(l.overlapping(range(0, 1_000)), Vec::<LossId>::new());
    }
}
