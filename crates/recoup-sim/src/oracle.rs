//! The oracle policy: a lower bound on what any sender-side policy can do.
//!
//! It sees the future loss decisions of the downstream loss element — and nothing else the
//! transport would not have: every other input is an ordinary [`RecoveryPolicy`] event. When a
//! round's retransmission (or a copy) goes out, it asks the element's fate function whether that
//! packet will arrive; if not, it asks for one more copy, and for the next only once that one is
//! known to be lost too, so each lost range gets the fewest copies that make the round succeed.
//! Copies go at the earliest poll at which they arrive: at once under draws that do not depend on
//! time (Bernoulli), or, when the state is bad now (Gilbert-Elliott), at the first later poll
//! that finds it good, waiting at most a quarter of the smoothed RTT before sending anyway.
//! Copies obey the same constraints as every policy's: they wait for the congestion window, and a
//! round gets at most [`MAX_COPIES_PER_ROUND`] (the K ≤ 10 bound of AutoRec §V and ART-MAB).
//!
//! The fate function must be the loss element's own (`crn …` draws, [`LossForecast`]): with
//! sequential draws the oracle's extra copies would shift the fate of every later packet. The
//! simulator builds it from the scenario's loss spec and seed; `PolicySpec` cannot name it, so
//! real sockets never construct it.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use recoup_elements::LossForecast;
use recoup_recovery::{
    data_send_key, CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy,
    RttSample, SendContext, SendKind, SendState,
};
use recoup_time::Instant;

/// Most copies the oracle sends in one round.
pub const MAX_COPIES_PER_ROUND: u32 = 10;

/// How often a waiting copy looks again whether the state turned good.
const RECHECK: Duration = Duration::from_millis(1);

/// The loss decisions the oracle may read: whether a packet with a key, sent at a time, is lost.
pub trait Fate: std::fmt::Debug + Send {
    fn lost(&mut self, key: u64, at: Instant) -> bool;
    /// Whether the answer for a key can change with the send time.
    fn time_dependent(&self) -> bool;
}

impl Fate for LossForecast {
    fn lost(&mut self, key: u64, at: Instant) -> bool {
        LossForecast::lost(self, key, at)
    }
    fn time_dependent(&self) -> bool {
        LossForecast::time_dependent(self)
    }
}

/// What the oracle knows and has decided about one lost range (one `LossId`).
#[derive(Debug)]
struct LossPlan {
    stream: u64,
    start: u64,
    /// Sends since the first loss, as the transport counts them (`Lineages::sends`).
    sends: u32,
    copies_this_round: u32,
    /// The newest send is known to be lost and this round may still add a copy.
    wants_copy: bool,
    /// A copy was asked for and has not gone out yet.
    requested: bool,
    /// Until when a copy that would be lost now may wait for a better slot.
    wait_until: Instant,
}

/// The oracle policy; `F` is the loss element's fate function.
#[derive(Debug)]
pub struct Oracle<F = LossForecast> {
    fate: F,
    plans: HashMap<LossId, LossPlan>,
    /// Losses that want a copy, oldest first.
    queue: VecDeque<LossId>,
    srtt: Duration,
    wake: Option<Instant>,
}

impl<F: Fate> Oracle<F> {
    #[must_use]
    pub fn new(fate: F) -> Self {
        Self {
            fate,
            plans: HashMap::new(),
            queue: VecDeque::new(),
            srtt: Duration::from_millis(333),
            wake: None,
        }
    }

    /// Losses still tracked (for the no-state-after-ack check).
    #[must_use]
    pub fn tracked(&self) -> usize {
        self.plans.len()
    }
}

impl<F: Fate> RecoveryPolicy for Oracle<F> {
    fn name(&self) -> &'static str {
        "oracle"
    }

    fn on_packet_sent(&mut self, _now: Instant, packet: &PacketInfo<'_>) {
        let mut ids: Vec<LossId> = packet.ranges.iter().filter_map(|r| r.loss).collect();
        ids.dedup();
        for id in &ids {
            if let Some(l) = self.plans.get_mut(id) {
                l.sends += 1;
                if packet.kind == SendKind::Copy {
                    l.copies_this_round += 1;
                    l.requested = false;
                }
            }
        }
        if packet.kind == SendKind::New {
            return;
        }
        // The packet's key is its first range's (what the transport keys the datagram by).
        let Some(first) = packet.ranges.first() else {
            return;
        };
        let Some(key) = first
            .loss
            .and_then(|id| self.plans.get(&id))
            .map(|l| data_send_key(l.stream, l.start, l.sends))
        else {
            return;
        };
        let lost = self.fate.lost(key, packet.sent);
        for id in ids {
            let Some(l) = self.plans.get_mut(&id) else {
                continue;
            };
            l.wants_copy = lost && l.copies_this_round < MAX_COPIES_PER_ROUND;
            if packet.kind == SendKind::Retransmission {
                l.wait_until = packet.sent + self.srtt / 4;
            }
            if l.wants_copy && !self.queue.contains(&id) {
                self.queue.push_back(id);
            }
        }
    }

    fn on_packet_acked(&mut self, _now: Instant, _packet: &PacketInfo<'_>) {}

    fn on_packet_lost(&mut self, _now: Instant, _packet: &PacketInfo<'_>, _t: LossTrigger) {}

    fn on_data_lost(&mut self, now: Instant, lost: &LostData) {
        let l = self.plans.entry(lost.id).or_insert(LossPlan {
            stream: lost.range.stream,
            start: lost.range.start,
            sends: 0,
            copies_this_round: 0,
            wants_copy: false,
            requested: false,
            wait_until: now,
        });
        // A new round: its retransmission is queued; copies are decided once it is sent.
        l.copies_this_round = 0;
        l.wants_copy = false;
        l.requested = false;
    }

    fn on_data_acked(&mut self, _now: Instant, id: LossId) {
        self.plans.remove(&id);
        self.queue.retain(|&q| q != id);
    }

    fn on_rtt_update(&mut self, _now: Instant, rtt: &RttSample) {
        self.srtt = rtt.smoothed;
    }

    fn on_send_state(&mut self, _now: Instant, _state: SendState) {}

    fn poll_copy(&mut self, now: Instant, _ctx: &SendContext) -> Option<CopyRequest> {
        let time_dependent = self.fate.time_dependent();
        let mut i = 0;
        while i < self.queue.len() {
            let id = self.queue[i];
            let Some(l) = self.plans.get(&id) else {
                self.queue.remove(i);
                continue;
            };
            if !l.wants_copy {
                self.queue.remove(i);
                continue;
            }
            if l.requested {
                // Asked for already; the transport holds it until it can send it.
                i += 1;
                continue;
            }
            let key = data_send_key(l.stream, l.start, l.sends + 1);
            let doomed = self.fate.lost(key, now);
            if doomed && time_dependent && now < l.wait_until {
                let at = (now + RECHECK).min(l.wait_until);
                self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
                i += 1;
                continue;
            }
            // Arrives, or nothing better comes in time: a doomed copy is still the cheapest way
            // to reach a send that arrives.
            if let Some(l) = self.plans.get_mut(&id) {
                l.requested = true;
            }
            return Some(CopyRequest {
                id,
                beyond_cwnd: false,
            });
        }
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.wake
    }

    fn on_timeout(&mut self, now: Instant) {
        if self.wake.is_some_and(|w| w <= now) {
            self.wake = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use recoup_recovery::{DataRange, SendState, SentRange};

    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(n)
    }

    /// Loses exactly the keys in `lost`; records every key asked about.
    #[derive(Debug, Default)]
    struct Scripted {
        lost: HashSet<u64>,
        asked: Vec<u64>,
        by_time: bool,
    }

    impl Fate for Scripted {
        fn lost(&mut self, key: u64, _at: Instant) -> bool {
            self.asked.push(key);
            self.lost.contains(&key)
        }
        fn time_dependent(&self) -> bool {
            self.by_time
        }
    }

    const RANGE: DataRange = DataRange {
        stream: 3,
        start: 12_000,
        end: 13_200,
    };

    fn lost(id: LossId, round: u32) -> LostData {
        LostData {
            id,
            range: RANGE,
            round,
            first_sent: ms(0),
            first_detected: ms(80),
            lost_sent: ms(0),
            trigger: LossTrigger::PacketThreshold,
        }
    }

    fn ctx() -> SendContext {
        SendContext {
            state: SendState::OnMode,
            packets_sent: 10,
            cwnd: 100_000,
            bytes_in_flight: 0,
            bdp_packets: Some(50),
        }
    }

    /// Send the round's retransmission, then every copy asked for; returns the copies sent.
    fn run_round(o: &mut Oracle<Scripted>, id: LossId, now: Instant) -> u32 {
        let r = [SentRange {
            range: RANGE,
            loss: Some(id),
        }];
        let info = |kind| PacketInfo {
            pn: 1,
            sent: now,
            bytes: 1200,
            kind,
            ranges: &r,
        };
        o.on_packet_sent(now, &info(SendKind::Retransmission));
        let mut copies = 0;
        while let Some(c) = o.poll_copy(now, &ctx()) {
            assert_eq!(c.id, id);
            assert!(
                !c.beyond_cwnd,
                "the oracle waits for the window like the others"
            );
            o.on_packet_sent(now, &info(SendKind::Copy));
            copies += 1;
            assert!(copies <= MAX_COPIES_PER_ROUND, "runaway copies");
        }
        copies
    }

    fn key(send: u32) -> u64 {
        data_send_key(RANGE.stream, RANGE.start, send)
    }

    #[test]
    fn copies_exactly_until_a_send_arrives() {
        for doomed in 0..4u32 {
            // Sends 1..=doomed are lost: the retransmission and doomed - 1 copies.
            let fate = Scripted {
                lost: (1..=doomed).map(key).collect(),
                ..Scripted::default()
            };
            let mut o = Oracle::new(fate);
            o.on_data_lost(ms(80), &lost(7, 1));
            assert_eq!(run_round(&mut o, 7, ms(81)), doomed, "doomed {doomed}");
            o.on_data_acked(ms(150), 7);
            assert_eq!(o.tracked(), 0);
            assert_eq!(o.poll_copy(ms(151), &ctx()), None);
        }
    }

    #[test]
    fn asks_only_about_its_own_sends() {
        // What the oracle may read besides the transport's events: the fate of the packets it
        // sends or would send next, nothing else.
        let fate = Scripted {
            lost: [key(1), key(2)].into(),
            ..Scripted::default()
        };
        let mut o = Oracle::new(fate);
        o.on_data_lost(ms(80), &lost(7, 1));
        let copies = run_round(&mut o, 7, ms(81));
        assert_eq!(copies, 2);
        let allowed: HashSet<u64> = (1..=copies + 1).map(key).collect();
        assert!(
            o.fate.asked.iter().all(|k| allowed.contains(k)),
            "{:?}",
            o.fate.asked
        );
    }

    #[test]
    fn the_copy_cap_holds_under_total_loss() {
        let fate = Scripted {
            lost: (1..=100).map(key).collect(),
            ..Scripted::default()
        };
        let mut o = Oracle::new(fate);
        o.on_data_lost(ms(80), &lost(7, 1));
        assert_eq!(run_round(&mut o, 7, ms(81)), MAX_COPIES_PER_ROUND);
        // The next round (ARQ underneath) gets a fresh budget.
        o.on_data_lost(ms(300), &lost(7, 2));
        assert_eq!(run_round(&mut o, 7, ms(301)), MAX_COPIES_PER_ROUND);
    }

    #[test]
    fn waits_for_a_better_slot_when_fates_depend_on_time() {
        let fate = Scripted {
            lost: [key(1), key(2)].into(),
            by_time: true,
            ..Scripted::default()
        };
        let mut o = Oracle::new(fate);
        o.on_rtt_update(
            ms(0),
            &RttSample {
                latest: Duration::from_millis(40),
                smoothed: Duration::from_millis(40),
                min: Duration::from_millis(40),
                var: Duration::from_millis(5),
            },
        );
        o.on_data_lost(ms(80), &lost(7, 1));
        // The scripted fate does not change with time, so after waiting srtt / 4 = 10 ms the
        // oracle sends the doomed copy anyway, then the one that arrives.
        let r = [SentRange {
            range: RANGE,
            loss: Some(7),
        }];
        let retx = PacketInfo {
            pn: 1,
            sent: ms(81),
            bytes: 1200,
            kind: SendKind::Retransmission,
            ranges: &r,
        };
        o.on_packet_sent(ms(81), &retx);
        assert_eq!(o.poll_copy(ms(81), &ctx()), None);
        assert_eq!(o.poll_timeout(), Some(ms(82)));
        assert!(o.poll_copy(ms(91), &ctx()).is_some());
    }
}
