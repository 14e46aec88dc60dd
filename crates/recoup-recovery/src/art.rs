//! `art` and `art-mab` (ART §6, §8): a Redundancy Adapter chooses R, the number of replicas of a
//! lost range in a retransmission round, and a Replica Scheduler spreads them over an escape space.
//!
//! Two readings ([`ArtReading`], DESIGN.md principle 6): the paper's text as recoup read it
//! (`reading=text`, described first) and the authors' released code (`reading=code`, the
//! default, described at the end).
//!
//! Under `reading=text`, R counts by default every send of the round, the transport's ARQ
//! retransmission included (ART Fig. 9, R_1 = 3 for replicas k = 1, 2, 3; "traditional QUIC" has
//! escape space 1), so the policy asks for R - 1 copies; `level=copies` reads R as copies beyond
//! the retransmission ([`LevelCounts`]).
//!
//! *Test-and-verification adapter* (§6.1): a bitmap of the last L_queue replica outcomes (every
//! retransmission or copy packet; 1 = lost), p_r = ones / L_queue, E = R (1 - p_r); on each loss
//! the round's R steps +1 if E < 1 and -1 if E >= 2, within 1..=r_max. R is kept per round number
//! (rounds past [`TRACKED_ROUNDS`] share the last level); the bitmap is shared by all rounds.
//! `fixed=R` holds R instead (Fig. 18(b)'s "ART-fix", and "ART-norand" with `scheduler=off`).
//!
//! *Bandit adapter* (§8): R is an arm of [`Bandit`], pulled once per round.
//!
//! *Learned adapter* (§8, `art-dqn:reading=text`): a [`RedundancyLearner`] (a DQN) chooses R
//! once per round from a [`DqnState`] built here ([`LearnedState`]) and hears each round's
//! outcome.
//!
//! *Replica Scheduler* (§6.2): escape_space = min(BDP, a B_max) packets, B_max the largest loss
//! burst in the last `burst_rtts` RTTs. The copies of a round are placed at distinct random packet
//! positions among the `max(escape_space - 1, R - 1)` packets after the retransmission, counted by
//! `SendContext::packets_sent`; `poll_copy` answers when the count reaches a position. ART's own
//! scheduler is a timer (one position = one packet at the pacing rate), so a position also falls
//! due after `offset x SRTT / BDP`: in off-mode the count would otherwise stand still. Without the
//! scheduler (ablation) the copies go back to back.
//!
//! *Opportunism* (§6.4): copies may go beyond the congestion window
//! ([`Opportunism`](crate::config::Opportunism); on by default, as the paper introduces it as
//! part of ART).
//!
//! `reading=code` runs `art` and `art-mab` as the authors' released code does (quic-art, an
//! LSQUIC fork; citations are to src/liblsquic/ at 24a6b39 unless a branch is named, `send_ctl.c`
//! for lsquic_send_ctl.c), within what the policy contract lets a policy do ([`CodeArt`]):
//! - R is the number of duplicates after the retransmission, at least 1 (`need = max(R, 1)`,
//!   send_ctl.c:1135; duplicates go while the counter is below it, send_ctl.c:2739).
//! - One level table per connection, round n's level starting at 2n - 1
//!   (send_ctl.c:382-383); each lost range entering round n steps only R_n by the E rule
//!   (lsquic_art_feedback.c:57-69), with no cap in quic-art (`r_max` defaults to 64 here).
//! - p_r = ones / outcomes held, 0 while none (lsquic_art_feedback.c:78-79, 88), over the last
//!   10 (send_ctl.h:14). A range's first acknowledged retransmission or duplicate records one 0
//!   (send_ctl.c:1521-1540) and ends its recording, as quic-art then destroys the loss chain
//!   (send_ctl.c:1586, 908-973); each retransmission or duplicate declared lost before that
//!   records a 1 (send_ctl.c:1269-1277, 1303-1311, 1331-1339). The original send records
//!   nothing.
//! - A range's duplicate count is never reset (only a new packet resets it, packet_out.c:277),
//!   so round n sends max(0, R_n - duplicates already sent).
//! - Replica Scheduler by clock (packet_out.c:567-593): the retransmission is the transport's
//!   and goes at once; each duplicate is due at a uniform random time between the previous
//!   one (or the loss detection, for the first) and the detection plus min_rtt, the
//!   connection's minimum RTT read when the round starts (send_ctl.c:1131); with no time left
//!   it goes at once. No escape space or B_max. Draws come from the policy's seeded RNG, not
//!   from quic-art's `srand(time(NULL))` on every call (packet_out.c:577), which repeats one
//!   value within a wall-clock second.
//! - Pending duplicates are dropped when the range is acknowledged (send_ctl.c:927-930, 950-953)
//!   and, unlike quic-art, when the transport starts the next round (quic-art waits for a
//!   round's duplicates before it lets the newest send's loss end the round, send_ctl.c:1281,
//!   1317, 1344, which the transport does not do for a policy).
//! - `art-mab`: the bandit of [`Bandit`] with quic-art's reward and counts, one pull per lost
//!   range per round.
//! - `art-dqn` (branch `add_rl_to_art` at 1a67bf8, where `get_action` takes the place of the
//!   adapter, send_ctl.c:1186 there): the learner chooses R, the duplicates beyond the
//!   retransmission, once per lost range entering a round, from quic-art's seven-value state
//!   ([`CodeObserver`]); the round's outcome is reported when the range is first acknowledged
//!   or its newest send lost, with quic-art's reward ([`crate::dqn::reward`]). Everything else
//!   (duplicates carried over, the scheduler, opportunism) is as `art`'s.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use rand::seq::index;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendKind, SendState,
};
use crate::bandit::{Bandit, UcbCounts};
use crate::burst::BurstTracker;
use crate::config::{
    ArtConfig, ArtDqnConfig, ArtMabConfig, ArtReading, LevelCounts, SchedulerConfig,
};
use crate::dqn::{Greedy, RedundancyLearner};
use crate::qnet::DqnState;

/// Rounds with their own redundancy level; later rounds share the last one. (quic-art has 20,
/// send_ctl.h:13, and indexes past them unchecked; rounds past 16 are vanishingly rare.)
pub const TRACKED_ROUNDS: usize = 16;

/// Packet size assumed until a packet has been seen (a typical QUIC datagram).
pub(crate) const DEFAULT_PACKET: u64 = 1200;

/// Before an RTT estimate exists, one scheduler position falls due after this long.
const FALLBACK_CYCLE: Duration = Duration::from_millis(1);

/// The last L_queue replica outcomes (ART Fig. 13).
#[derive(Clone, Debug)]
pub struct OutcomeWindow {
    bits: VecDeque<bool>,
    len: usize,
    ones: usize,
}

impl OutcomeWindow {
    #[must_use]
    pub fn new(len: usize) -> Self {
        let len = len.max(1);
        Self {
            bits: VecDeque::with_capacity(len),
            len,
            ones: 0,
        }
    }

    /// Append an outcome (`true` = the replica was lost), sliding the oldest out.
    pub fn push(&mut self, lost: bool) {
        if self.bits.len() == self.len && self.bits.pop_front() == Some(true) {
            self.ones -= 1;
        }
        self.bits.push_back(lost);
        if lost {
            self.ones += 1;
        }
    }

    /// p_r = ones / L_queue (ART §6.1; a window not yet full counts its empty slots as 0).
    #[must_use]
    pub fn p_r(&self) -> f64 {
        self.ones as f64 / self.len as f64
    }

    /// p_r = ones / outcomes held, 0 while there are none (quic-art,
    /// lsquic_art_feedback.c:78-79, 88): a window not yet full counts only what it holds.
    #[must_use]
    pub fn p_r_of_fill(&self) -> f64 {
        if self.bits.is_empty() {
            0.0
        } else {
            self.ones as f64 / self.bits.len() as f64
        }
    }
}

/// One test-and-verification step (ART Fig. 14): the new R from the current R and p_r.
#[must_use]
pub fn adapt(r: u32, p_r: f64, r_max: u32) -> u32 {
    let e = f64::from(r) * (1.0 - p_r);
    if e < 1.0 {
        r.saturating_add(1).min(r_max.max(1))
    } else if e >= 2.0 {
        r.saturating_sub(1).max(1)
    } else {
        r
    }
}

#[derive(Debug)]
enum Adapter {
    Verify {
        window: OutcomeWindow,
        levels: Vec<u32>,
        r_max: u32,
        counts: LevelCounts,
        /// R held at this level (`fixed=`), the bitmap still kept for the record.
        fixed: Option<u32>,
    },
    Bandit {
        bandit: Bandit,
        /// The arm each unresolved lineage's current round was played with.
        playing: BTreeMap<LossId, u32>,
    },
    Learned {
        learner: Box<dyn RedundancyLearner>,
        state: LearnedState,
        /// The decision of each unresolved lineage's current round.
        playing: BTreeMap<LossId, Played>,
        decisions: u64,
    },
    /// `reading=code`: the adapters and the scheduler as quic-art runs them.
    Code(CodeArt),
}

/// `reading=code`'s adapters.
#[derive(Debug)]
enum CodeAdapter {
    Verify {
        window: OutcomeWindow,
        levels: Vec<u32>,
        r_max: u32,
        /// R held at this level in every round (`fixed=`).
        fixed: Option<u32>,
    },
    Bandit {
        bandit: Bandit,
    },
    /// `art-dqn`.
    Learned {
        learner: Box<dyn RedundancyLearner>,
        observer: CodeObserver,
        /// The R last chosen for each round number.
        levels: Vec<u32>,
        decisions: u64,
    },
}

/// A round of `art-dqn` waiting for its outcome.
#[derive(Clone, Copy, Debug)]
struct Played {
    decision: u64,
    r: u32,
    round: u32,
}

/// What quic-art keeps with a lost packet (its `packet_out` and loss chain), kept here per lost
/// range while its lineage is open.
#[derive(Debug)]
struct CodeLineage {
    /// Duplicates handed out over all rounds: quic-art's `po_retrans_packet_number`, reset only
    /// for a new packet (packet_out.c:277), so a round adds only what its level adds. Counting
    /// what went out rather than max_k R_k gives the same whenever a round's duplicates all
    /// went out (always, in quic-art); when the transport ends a round first, the next round
    /// sends the rest, so that a range's duplicates still total max_k R_k as in quic-art.
    sent: u32,
    /// Duplicates of the current round not yet handed out.
    owed: u32,
    /// The current round's loss detection plus min_rtt: its duplicates are due before this.
    deadline: Instant,
    /// A retransmission or duplicate was acknowledged: quic-art destroys the loss chain then
    /// (send_ctl.c:1586), so nothing more is recorded or rewarded for it.
    recovered: bool,
    /// `art-mab`: the arm of each round so far...
    arms: Vec<u32>,
    /// ...and the first packet number the round sent (`None` until it sends), to find the
    /// round of an acknowledged send.
    round_starts: Vec<Option<u64>>,
    /// `art-dqn`: the current round's decision, until its outcome is reported.
    played: Option<Played>,
}

impl CodeLineage {
    fn new() -> Self {
        Self {
            sent: 0,
            owed: 0,
            deadline: Instant::ZERO,
            recovered: false,
            arms: Vec::new(),
            round_starts: Vec::new(),
            played: None,
        }
    }
}

/// `art` and `art-mab` under `reading=code` (the module documentation lists the rules and their
/// sources).
#[derive(Debug)]
struct CodeArt {
    adapter: CodeAdapter,
    /// The connection's minimum RTT (zero before a sample, as in quic-art: duplicates then go
    /// at once, packet_out.c:575).
    min_rtt: Duration,
    /// The smoothed RTT (zero before a sample), for `art-dqn`'s state.
    srtt: Duration,
    lineages: BTreeMap<LossId, CodeLineage>,
}

impl CodeArt {
    fn new(adapter: CodeAdapter) -> Self {
        Self {
            adapter,
            min_rtt: Duration::ZERO,
            srtt: Duration::ZERO,
            lineages: BTreeMap::new(),
        }
    }

    /// A packet went out: `art-dqn` meters it; a retransmission or duplicate notes where its
    /// lineage's current round starts.
    fn on_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        if let CodeAdapter::Learned { observer, .. } = &mut self.adapter {
            observer.on_sent(now, packet);
        }
        if packet.kind == SendKind::New {
            return;
        }
        for r in packet.ranges {
            let Some(lineage) = r.loss.and_then(|id| self.lineages.get_mut(&id)) else {
                continue;
            };
            if let Some(start @ None) = lineage.round_starts.last_mut() {
                *start = Some(packet.pn);
            }
        }
    }

    /// A packet was acknowledged: `art-dqn` meters it. The first retransmission or duplicate of
    /// a lineage acknowledged records one 0, pays the bandit, reports `art-dqn`'s round as
    /// recovered and cancels the duplicates still pending.
    fn on_acked(&mut self, now: Instant, packet: &PacketInfo<'_>, scheduled: &mut Schedule) {
        if let CodeAdapter::Learned { observer, .. } = &mut self.adapter {
            observer.rates.on_acked(now, packet);
        }
        if packet.kind == SendKind::New {
            return;
        }
        for r in packet.ranges {
            let Some((id, lineage)) = r
                .loss
                .and_then(|id| self.lineages.get_mut(&id).map(|l| (id, l)))
            else {
                continue;
            };
            if lineage.recovered {
                continue;
            }
            lineage.recovered = true;
            lineage.owed = 0;
            scheduled.forget(id);
            match &mut self.adapter {
                CodeAdapter::Verify { window, .. } => window.push(false),
                CodeAdapter::Bandit { bandit } => {
                    // The round of the acknowledged send (multi_armed_bandit.c:128, its
                    // `po_retrans_times`), which may be earlier than the current one.
                    let round = lineage
                        .round_starts
                        .iter()
                        .rposition(|start| start.is_some_and(|pn| pn <= packet.pn));
                    if let Some(arms) = round.and_then(|n| lineage.arms.get(..=n)) {
                        bandit.recovered(arms);
                    }
                }
                CodeAdapter::Learned { learner, .. } => {
                    if let Some(p) = lineage.played.take() {
                        learner.outcome(p.decision, p.r, p.round, true);
                    }
                }
            }
        }
    }

    /// A packet was declared lost: `art-dqn` meters it; a retransmission or duplicate records a
    /// 1 for each lineage it carried that is not yet recovered.
    fn on_lost(&mut self, packet: &PacketInfo<'_>) {
        let window = match &mut self.adapter {
            CodeAdapter::Verify { window, .. } if packet.kind != SendKind::New => window,
            CodeAdapter::Learned { observer, .. } => {
                observer.rates.on_lost(packet.pn);
                return;
            }
            _ => return,
        };
        for (i, r) in packet.ranges.iter().enumerate() {
            let Some(id) = r.loss else {
                continue;
            };
            let first_in_packet = !packet.ranges[..i].iter().any(|o| o.loss == Some(id));
            let open = self.lineages.get(&id).is_some_and(|l| !l.recovered);
            if first_in_packet && open {
                window.push(true);
            }
        }
    }

    /// Round `lost.round` starts: choose its level, owe what it adds and schedule the first
    /// duplicate.
    fn on_round(
        &mut self,
        now: Instant,
        lost: &LostData,
        rng: &mut ChaCha8Rng,
        spread: bool,
        scheduled: &mut Schedule,
    ) {
        let lineage = self
            .lineages
            .entry(lost.id)
            .or_insert_with(CodeLineage::new);
        let need = match &mut self.adapter {
            CodeAdapter::Verify {
                window,
                levels,
                r_max,
                fixed,
            } => match (*fixed, levels.get_mut(round_index(lost.round))) {
                (Some(r), _) => r,
                (None, Some(level)) => {
                    *level = adapt(*level, window.p_r_of_fill(), *r_max);
                    *level
                }
                (None, None) => 1,
            },
            CodeAdapter::Bandit { bandit } => {
                let arm = bandit.select(rng);
                lineage.arms.push(arm);
                lineage.round_starts.push(None);
                arm
            }
            CodeAdapter::Learned {
                learner,
                observer,
                levels,
                decisions,
            } => {
                // The newest send was lost with the round's data: the round failed.
                if let Some(p) = lineage.played.take() {
                    learner.outcome(p.decision, p.r, p.round, false);
                }
                // Observed before this range joins the lost queue, as quic-art samples the
                // state before it moves the packet there (send_ctl.c:1390-1394 [rl]).
                let state = observer.observe(self.min_rtt, self.srtt, lost.round);
                observer.lost_queue.insert(lost.id);
                let r = learner
                    .decide(*decisions, &state)
                    .clamp(1, learner.actions().max(1));
                if let Some(level) = levels.get_mut(round_index(lost.round)) {
                    *level = r;
                }
                lineage.played = Some(Played {
                    decision: *decisions,
                    r,
                    round: lost.round,
                });
                *decisions = decisions.saturating_add(1);
                r
            }
        }
        .max(1);
        lineage.owed = need.saturating_sub(lineage.sent);
        lineage.deadline = now.saturating_add(self.min_rtt);
        if lineage.owed > 0 {
            scheduled.push(Scheduled {
                id: lost.id,
                position: u64::MAX,
                at: due_by_clock(now, lineage.deadline, rng, spread),
            });
        }
    }

    /// A duplicate of `id` was handed out at `now`: schedule the next one, if owed.
    fn on_taken(
        &mut self,
        id: LossId,
        now: Instant,
        rng: &mut ChaCha8Rng,
        spread: bool,
        scheduled: &mut Schedule,
    ) {
        let Some(lineage) = self.lineages.get_mut(&id) else {
            return;
        };
        lineage.sent = lineage.sent.saturating_add(1);
        lineage.owed = lineage.owed.saturating_sub(1);
        if lineage.owed > 0 {
            scheduled.push(Scheduled {
                id,
                position: u64::MAX,
                at: due_by_clock(now, lineage.deadline, rng, spread),
            });
        }
    }
}

impl CodeArt {
    /// Every byte of `id` is acknowledged: forget it, reporting `art-dqn`'s round as recovered
    /// if no retransmission or duplicate was acknowledged first (the original was: its loss
    /// was spurious).
    fn on_data_acked(&mut self, id: LossId) {
        let lineage = self.lineages.remove(&id);
        if let CodeAdapter::Learned {
            learner, observer, ..
        } = &mut self.adapter
        {
            observer.lost_queue.remove(&id);
            if let Some(p) = lineage.and_then(|l| l.played) {
                learner.outcome(p.decision, p.r, p.round, true);
            }
        }
    }
}

/// `reading=code`'s `art-dqn` inputs are scaled to [0, 1] by these, values beyond reading as 1:
/// quic-art feeds them raw (B/s, µs, packets; maze_env.py:27, 61 [rl]), which would swamp a
/// small network's other inputs and its training. Each scale is about the largest value of the
/// authors' testbed. Rates: 100 Mbit/s in bytes per second, the link of quic-art's
/// automation script (tools/automation_test.sh:2-6).
const RATE_SCALE: f64 = 12_500_000.0;

/// RTTs: 500 ms, above every RTT of the papers' testbeds with room for queueing.
const RTT_SCALE: f64 = 0.5;

/// Lost ranges waiting for their retransmission: ART §3.2's 99th percentile loss burst, 125
/// packets.
const LOST_QUEUE_SCALE: f64 = 125.0;

/// Packets in flight: twice the BDP of 100 Mbit/s at 60 ms RTT in 1500-byte packets (BBR's
/// window is about two BDPs).
const IN_FLIGHT_SCALE: f64 = 1000.0;

/// quic-art's DQN state, `struct rl_state` (RL_Agent.h:19-30 [rl], filled at send_ctl.c:1289-1306
/// [rl]), kept from what the policy sees.
#[derive(Debug, Default)]
struct CodeObserver {
    rates: RateMeter,
    /// Lost ranges whose round's retransmission has not gone out: quic-art's lost-queue length
    /// (`sc_lost_packet_number`, counted at send_ctl.c:1162 and 995, 1853, 1885 [rl]), by range
    /// rather than by packet.
    lost_queue: std::collections::BTreeSet<LossId>,
}

impl CodeObserver {
    fn on_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        self.rates.on_sent(now, packet);
        if packet.kind == SendKind::Retransmission {
            for r in packet.ranges {
                if let Some(id) = r.loss {
                    self.lost_queue.remove(&id);
                }
            }
        }
    }

    /// The state of a decision for `round`: send rate, ACK rate, min_rtt, srtt, lost-queue
    /// length, packets in flight and rounds already failed (`po_retrans_times` before the
    /// round starts), each scaled.
    fn observe(&self, min_rtt: Duration, srtt: Duration, round: u32) -> DqnState {
        // Precision loss to f32 is irrelevant for the network.
        let scaled = |v: f64, scale: f64| (v / scale).clamp(0.0, 1.0) as f32;
        DqnState::new(&[
            scaled(self.rates.send_rate, RATE_SCALE),
            scaled(self.rates.ack_rate, RATE_SCALE),
            scaled(min_rtt.as_secs_f64(), RTT_SCALE),
            scaled(srtt.as_secs_f64(), RTT_SCALE),
            scaled(self.lost_queue.len() as f64, LOST_QUEUE_SCALE),
            scaled(self.rates.in_flight.len() as f64, IN_FLIGHT_SCALE),
            scaled(
                f64::from(round.saturating_sub(1)),
                (TRACKED_ROUNDS - 1) as f64,
            ),
        ])
    }
}

/// The send and ACK rates of quic-art's DQN state, as its bandwidth sampler's per-packet state
/// gives them, and the packets in flight (`sc_n_in_flight_all`).
///
/// - Send rate, at each send (send_ctl.c:822-825 [rl]): the bytes sent since the send of the
///   packet last acknowledged, this one included, over the time since that send.
/// - ACK rate, at each acknowledgement (send_ctl.c:1631-1635 [rl]): the bytes acknowledged since
///   the packet was sent, over the time since the acknowledgement that preceded its send.
///
/// Either keeps its last value when its interval is empty, as quic-art does.
#[derive(Debug, Default)]
struct RateMeter {
    /// Bytes sent and acknowledged so far.
    sent: u64,
    acked: u64,
    /// The packet last acknowledged: `sent` after its send, its send time, and when it was
    /// acknowledged.
    last_acked: Option<(u64, Instant, Instant)>,
    /// Packets neither acknowledged nor declared lost, with `sent` after their send, `acked`
    /// then and the time of the acknowledgement before it.
    in_flight: BTreeMap<u64, (u64, u64, Option<Instant>)>,
    /// Bytes per second.
    send_rate: f64,
    ack_rate: f64,
}

impl RateMeter {
    fn on_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        self.sent = self.sent.saturating_add(packet.bytes as u64);
        if let Some((sent_then, sent_at, _)) = self.last_acked {
            let bytes = self.sent.saturating_sub(sent_then);
            if let Some(rate) = per_second(bytes, now.saturating_duration_since(sent_at)) {
                self.send_rate = rate;
            }
        }
        let last_ack = self.last_acked.map(|(_, _, at)| at);
        self.in_flight
            .insert(packet.pn, (self.sent, self.acked, last_ack));
    }

    fn on_acked(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        // Acknowledged after it was declared lost: no longer metered.
        let Some((sent_then, acked_then, last_ack)) = self.in_flight.remove(&packet.pn) else {
            return;
        };
        if let Some(at) = last_ack {
            let bytes = self.acked.saturating_sub(acked_then);
            if let Some(rate) = per_second(bytes, now.saturating_duration_since(at)) {
                self.ack_rate = rate;
            }
        }
        self.acked = self.acked.saturating_add(packet.bytes as u64);
        self.last_acked = Some((sent_then, packet.sent, now));
    }

    fn on_lost(&mut self, pn: u64) {
        self.in_flight.remove(&pn);
    }
}

/// `bytes` over `interval` in bytes per second; `None` for an empty interval.
fn per_second(bytes: u64, interval: Duration) -> Option<f64> {
    (!interval.is_zero()).then(|| bytes as f64 / interval.as_secs_f64())
}

/// When the next duplicate is due: uniform in [now, deadline) (quic-art draws `rand() %
/// time_left` µs, packet_out.c:578-585), at once when no time is left (packet_out.c:579-583)
/// or the scheduler is off (the back-to-back ablation).
fn due_by_clock(now: Instant, deadline: Instant, rng: &mut ChaCha8Rng, spread: bool) -> Instant {
    let left = recoup_time::saturating_nanos(deadline.saturating_duration_since(now));
    if !spread || left == 0 {
        return now;
    }
    now + Duration::from_nanos(rng.gen_range(0..left))
}

/// Replica outcomes over ART's bitmap and a longer one (ours: ART's adapter sees only the short one).
const LONG_WINDOW: usize = 100;

/// Weight of one resolved round in the round-loss average (ours: about the last 20 rounds).
const ROUND_LOSS_WEIGHT: f64 = 0.05;

/// Bursts longer than this read as this long in the state (ours).
const BURST_SCALE: u64 = 32;

/// What the learned adapter observes under `reading=text`: the inputs of [`DqnState`], in the
/// order of [`crate::qnet::TEXT_FEATURES`].
#[derive(Debug)]
struct LearnedState {
    /// `p_r`: ART's own bitmap of the last L_queue = 10 replica outcomes.
    short: OutcomeWindow,
    /// `p_r_long`: the same over the last [`LONG_WINDOW`].
    long: OutcomeWindow,
    /// `level`: the R last chosen for each round number, as a fraction of r_max.
    levels: Vec<u32>,
    /// `round_loss`: moving average of resolved rounds that were lost again.
    round_loss: f64,
}

impl LearnedState {
    fn new() -> Self {
        Self {
            short: OutcomeWindow::new(ArtConfig::default().l_queue),
            long: OutcomeWindow::new(LONG_WINDOW),
            levels: vec![1; TRACKED_ROUNDS],
            round_loss: 0.0,
        }
    }

    fn push(&mut self, lost: bool) {
        self.short.push(lost);
        self.long.push(lost);
    }

    fn resolved(&mut self, lost: bool) {
        let x = if lost { 1.0 } else { 0.0 };
        self.round_loss += ROUND_LOSS_WEIGHT * (x - self.round_loss);
    }

    /// The state of a decision for `round` with the current largest burst `b_max`.
    fn observe(&self, round: u32, b_max: u64, r_max: u32) -> DqnState {
        let index = round_index(round);
        let level = self.levels.get(index).copied().unwrap_or(1);
        // Everything lies in [0, 1]; precision loss to f32 is irrelevant for the network.
        DqnState::new(&[
            self.short.p_r() as f32,
            self.long.p_r() as f32,
            index as f32 / (TRACKED_ROUNDS - 1) as f32,
            level as f32 / r_max.max(1) as f32,
            b_max.min(BURST_SCALE) as f32 / BURST_SCALE as f32,
            self.round_loss as f32,
        ])
    }
}

#[derive(Clone, Copy, Debug)]
struct Scheduled {
    id: LossId,
    /// Due when `packets_sent` reaches this...
    position: u64,
    /// ...or at this time, whichever comes first.
    at: Instant,
}

/// Copies placed and not yet taken, with the least position and time among them kept as they
/// change: the transport asks for a copy and for the deadline several times per packet sent,
/// nothing is due at most of those asks, and the schedule changes only around a loss.
#[derive(Debug)]
struct Schedule {
    copies: Vec<Scheduled>,
    /// The least `position` of `copies`; `u64::MAX` when there are none.
    lowest_position: u64,
    /// The least `at` of `copies`.
    earliest: Option<Instant>,
}

impl Schedule {
    fn new() -> Self {
        Self {
            copies: Vec::new(),
            lowest_position: u64::MAX,
            earliest: None,
        }
    }

    fn len(&self) -> usize {
        self.copies.len()
    }

    fn push(&mut self, copy: Scheduled) {
        self.lowest_position = self.lowest_position.min(copy.position);
        self.earliest = Some(self.earliest.map_or(copy.at, |t| t.min(copy.at)));
        self.copies.push(copy);
    }

    fn bounds_again(&mut self) {
        self.lowest_position = self
            .copies
            .iter()
            .map(|s| s.position)
            .min()
            .unwrap_or(u64::MAX);
        self.earliest = self.copies.iter().map(|s| s.at).min();
    }

    /// Drops the copies of `id`.
    fn forget(&mut self, id: LossId) {
        let before = self.copies.len();
        self.copies.retain(|s| s.id != id);
        if self.copies.len() != before {
            self.bounds_again();
        }
    }

    /// Takes the due copy with the least position (then time), the first placed among equals.
    /// The check is inline, the search out of line: nothing is due at most asks.
    #[inline]
    fn take_due(&mut self, now: Instant, packets_sent: u64) -> Option<LossId> {
        if self.lowest_position > packets_sent && self.earliest.is_none_or(|t| t > now) {
            return None;
        }
        self.take_first_due(now, packets_sent)
    }

    #[inline(never)]
    fn take_first_due(&mut self, now: Instant, packets_sent: u64) -> Option<LossId> {
        let (i, _) = self
            .copies
            .iter()
            .enumerate()
            .filter(|(_, s)| s.position <= packets_sent || s.at <= now)
            .min_by_key(|(_, s)| (s.position, s.at))?;
        let copy = self.copies.remove(i);
        self.bounds_again();
        Some(copy.id)
    }
}

/// ART's sender (all three adapters).
#[derive(Debug)]
pub struct Art {
    name: &'static str,
    adapter: Adapter,
    scheduler: SchedulerConfig,
    rng: ChaCha8Rng,
    bursts: BurstTracker,
    srtt: Option<Duration>,
    largest_packet: u64,
    /// Copies decided but not yet placed: placing needs the packet count of the next poll.
    unplaced: Vec<(LossId, u32)>,
    scheduled: Schedule,
}

impl Art {
    /// `art`: the test-and-verification adapter. Under `reading=code` R always counts
    /// duplicates (`level` is not read).
    #[must_use]
    pub fn new(cfg: &ArtConfig, seed: u64) -> Self {
        let r_max = cfg.r_max.max(1);
        let adapter = match cfg.reading {
            ArtReading::Text => Adapter::Verify {
                window: OutcomeWindow::new(cfg.l_queue),
                levels: vec![cfg.fixed.unwrap_or(1); TRACKED_ROUNDS],
                r_max,
                counts: cfg.level,
                fixed: cfg.fixed,
            },
            ArtReading::Code => Adapter::Code(CodeArt::new(CodeAdapter::Verify {
                window: OutcomeWindow::new(cfg.l_queue),
                // quic-art: sc_rounds_map[n] = 2n - 1, one table per connection
                // (send_ctl.c:382-383); within r_max when one is given.
                levels: (1..=TRACKED_ROUNDS as u32)
                    .map(|n| cfg.fixed.unwrap_or((2 * n - 1).min(r_max)))
                    .collect(),
                r_max,
                fixed: cfg.fixed,
            })),
        };
        Self::with_adapter("art", adapter, cfg.scheduler, seed)
    }

    /// `art-mab`: the bandit adapter.
    ///
    /// Under `reading=code` the bandit's statistics live as long as the connection: quic-art
    /// loads them from a file when a connection starts and saves them when it ends (send_ctl.c:
    /// 384-403, 1914-1928 on branch `add_multi_armed_bandit`), so that learning carries over
    /// between connections and runs. Here a run must be a function of its scenario and seed
    /// alone, whatever order its connections (or the runs of a sweep, in parallel) end in, so
    /// every connection starts afresh.
    #[must_use]
    pub fn new_mab(cfg: &ArtMabConfig, seed: u64) -> Self {
        let adapter = match cfg.reading {
            ArtReading::Text => Adapter::Bandit {
                bandit: Bandit::new(
                    cfg.algo,
                    cfg.r_max,
                    cfg.epsilon,
                    cfg.ucb_c,
                    cfg.eta,
                    UcbCounts::Pulls,
                ),
                playing: BTreeMap::new(),
            },
            ArtReading::Code => Adapter::Code(CodeArt::new(CodeAdapter::Bandit {
                bandit: Bandit::new(
                    cfg.algo,
                    cfg.r_max,
                    cfg.epsilon,
                    cfg.ucb_c,
                    cfg.eta,
                    UcbCounts::Rewards,
                ),
            })),
        };
        Self::with_adapter("art-mab", adapter, cfg.scheduler, seed)
    }

    /// `art-dqn` at inference: the configured network's greedy choice.
    #[must_use]
    pub fn new_dqn(cfg: &ArtDqnConfig, seed: u64) -> Self {
        Self::new_learned(
            Box::new(Greedy::new(cfg.net.clone())),
            cfg.reading,
            cfg.scheduler,
            seed,
        )
    }

    /// `art-dqn` under `reading` with any learner (the trainer's exploring one), which must
    /// take that reading's state.
    #[must_use]
    pub fn new_learned(
        learner: Box<dyn RedundancyLearner>,
        reading: ArtReading,
        scheduler: SchedulerConfig,
        seed: u64,
    ) -> Self {
        let adapter = match reading {
            ArtReading::Text => Adapter::Learned {
                learner,
                state: LearnedState::new(),
                playing: BTreeMap::new(),
                decisions: 0,
            },
            ArtReading::Code => Adapter::Code(CodeArt::new(CodeAdapter::Learned {
                learner,
                observer: CodeObserver::default(),
                levels: vec![1; TRACKED_ROUNDS],
                decisions: 0,
            })),
        };
        Self::with_adapter("art-dqn", adapter, scheduler, seed)
    }

    fn with_adapter(
        name: &'static str,
        adapter: Adapter,
        scheduler: SchedulerConfig,
        seed: u64,
    ) -> Self {
        Self {
            name,
            adapter,
            scheduler,
            rng: ChaCha8Rng::seed_from_u64(seed),
            bursts: BurstTracker::default(),
            srtt: None,
            largest_packet: DEFAULT_PACKET,
            unplaced: Vec::new(),
            scheduled: Schedule::new(),
        }
    }

    /// The R last chosen for `round` (`None` for `art-mab`).
    #[must_use]
    pub fn redundancy(&self, round: u32) -> Option<u32> {
        match &self.adapter {
            Adapter::Verify { levels, .. }
            | Adapter::Code(CodeArt {
                adapter: CodeAdapter::Verify { levels, .. },
                ..
            }) => levels.get(round_index(round)).copied(),
            Adapter::Learned { state, .. } => state.levels.get(round_index(round)).copied(),
            Adapter::Code(CodeArt {
                adapter: CodeAdapter::Learned { levels, .. },
                ..
            }) => levels.get(round_index(round)).copied(),
            Adapter::Bandit { .. }
            | Adapter::Code(CodeArt {
                adapter: CodeAdapter::Bandit { .. },
                ..
            }) => None,
        }
    }

    /// The replica loss rate p_r (`None` for `art-mab` and `art-dqn:reading=code`).
    #[must_use]
    pub fn p_r(&self) -> Option<f64> {
        match &self.adapter {
            Adapter::Verify { window, .. } => Some(window.p_r()),
            Adapter::Learned { state, .. } => Some(state.short.p_r()),
            Adapter::Code(CodeArt {
                adapter: CodeAdapter::Verify { window, .. },
                ..
            }) => Some(window.p_r_of_fill()),
            Adapter::Bandit { .. }
            | Adapter::Code(CodeArt {
                adapter: CodeAdapter::Bandit { .. } | CodeAdapter::Learned { .. },
                ..
            }) => None,
        }
    }

    /// `art-mab`: the mean reward of arm R (`None` for `art`).
    #[must_use]
    pub fn arm_mean(&self, r: u32) -> Option<f64> {
        match &self.adapter {
            Adapter::Bandit { bandit, .. }
            | Adapter::Code(CodeArt {
                adapter: CodeAdapter::Bandit { bandit },
                ..
            }) => bandit.mean(r),
            Adapter::Verify { .. }
            | Adapter::Learned { .. }
            | Adapter::Code(CodeArt {
                adapter: CodeAdapter::Verify { .. } | CodeAdapter::Learned { .. },
                ..
            }) => None,
        }
    }

    /// Copies owed or scheduled, and lineages the bandit still waits on: all forgotten once the
    /// data is acknowledged.
    #[must_use]
    pub fn tracked(&self) -> usize {
        let playing = match &self.adapter {
            Adapter::Verify { .. } => 0,
            Adapter::Bandit { playing, .. } => playing.len(),
            Adapter::Learned { playing, .. } => playing.len(),
            Adapter::Code(code) => {
                let queued = match &code.adapter {
                    CodeAdapter::Learned { observer, .. } => observer.lost_queue.len(),
                    CodeAdapter::Verify { .. } | CodeAdapter::Bandit { .. } => 0,
                };
                code.lineages.len() + queued
            }
        };
        self.unplaced.len() + self.scheduled.len() + playing
    }

    /// `reading=text`: every retransmission's or copy's outcome goes into the window.
    fn record_replica(&mut self, packet: &PacketInfo<'_>, lost: bool) {
        if packet.kind == SendKind::New {
            return;
        }
        match &mut self.adapter {
            Adapter::Verify { window, .. } => window.push(lost),
            Adapter::Learned { state, .. } => state.push(lost),
            Adapter::Bandit { .. } | Adapter::Code(_) => {}
        }
    }

    /// B_max: the largest loss burst in the last `burst_rtts` RTTs (at least 1).
    fn b_max(&mut self, now: Instant) -> u64 {
        let window = self.srtt.map_or(Duration::MAX, |s| {
            s.saturating_mul(self.scheduler.burst_rtts)
        });
        self.bursts.max_within(now, window).max(1)
    }

    fn escape_space(&mut self, now: Instant, ctx: &SendContext) -> u64 {
        let b_max = self.b_max(now);
        let bdp = ctx
            .bdp_packets
            .unwrap_or(ctx.cwnd / self.largest_packet.max(1))
            .max(1);
        // a >= 1 and b_max is a packet count, so the product is finite and positive.
        let scaled = (self.scheduler.a * b_max as f64).ceil();
        let scaled = if scaled >= u64::MAX as f64 {
            u64::MAX
        } else {
            scaled as u64
        };
        bdp.min(scaled).max(1)
    }

    /// Places the copies decided since the last poll. Out of line: the poll that calls it
    /// comes after a loss, the many before and after it only check that nothing waits.
    #[cold]
    fn place(&mut self, now: Instant, ctx: &SendContext) {
        let space = self.escape_space(now, ctx);
        let bdp = ctx.bdp_packets.unwrap_or(space).max(1);
        let cycle = self.srtt.map_or(FALLBACK_CYCLE, |s| {
            s / u32::try_from(bdp).unwrap_or(u32::MAX)
        });
        let base = ctx.packets_sent;
        for (id, copies) in std::mem::take(&mut self.unplaced) {
            if !self.scheduler.enabled {
                for _ in 0..copies {
                    self.scheduled.push(Scheduled {
                        id,
                        position: base,
                        at: now,
                    });
                }
                continue;
            }
            let positions = space.saturating_sub(1).max(u64::from(copies));
            let positions = usize::try_from(positions).unwrap_or(usize::MAX);
            let mut offsets: Vec<usize> =
                index::sample(&mut self.rng, positions, copies as usize).into_vec();
            offsets.sort_unstable();
            for offset in offsets {
                let offset = offset as u64;
                self.scheduled.push(Scheduled {
                    id,
                    position: base.saturating_add(offset),
                    at: now + cycle.saturating_mul(u32::try_from(offset).unwrap_or(u32::MAX)),
                });
            }
        }
    }

    fn forget_copies(&mut self, id: LossId) {
        self.unplaced.retain(|&(owed, _)| owed != id);
        self.scheduled.forget(id);
    }
}

fn round_index(round: u32) -> usize {
    (round.max(1) as usize - 1).min(TRACKED_ROUNDS - 1)
}

impl RecoveryPolicy for Art {
    fn name(&self) -> &'static str {
        self.name
    }

    fn on_packet_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        self.largest_packet = self.largest_packet.max(packet.bytes as u64);
        if let Adapter::Code(code) = &mut self.adapter {
            code.on_sent(now, packet);
        }
    }

    fn on_packet_acked(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        match &mut self.adapter {
            Adapter::Code(code) => code.on_acked(now, packet, &mut self.scheduled),
            _ => self.record_replica(packet, false),
        }
    }

    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, _: LossTrigger) {
        match &mut self.adapter {
            Adapter::Code(code) => code.on_lost(packet),
            _ => {
                self.bursts.on_lost(now, packet.pn);
                self.record_replica(packet, true);
            }
        }
    }

    fn on_data_lost(&mut self, now: Instant, lost: &LostData) {
        // Copies still waiting from the previous round are obsolete.
        self.forget_copies(lost.id);
        // Only the learned adapter observes B_max at decision time.
        let b_max = if matches!(self.adapter, Adapter::Learned { .. }) {
            self.b_max(now)
        } else {
            1
        };
        let copies = match &mut self.adapter {
            Adapter::Code(code) => {
                // Scheduled by clock at once: nothing to place at the next poll.
                let spread = self.scheduler.enabled;
                code.on_round(now, lost, &mut self.rng, spread, &mut self.scheduled);
                return;
            }
            Adapter::Verify {
                window,
                levels,
                r_max,
                counts,
                fixed,
            } => {
                let p_r = window.p_r();
                let r = match (*fixed, levels.get_mut(round_index(lost.round))) {
                    (Some(r), _) => r,
                    (None, Some(level)) => {
                        *level = adapt(*level, p_r, *r_max);
                        *level
                    }
                    (None, None) => 1,
                };
                match counts {
                    LevelCounts::Sends => r - 1,
                    LevelCounts::Copies => r,
                }
            }
            Adapter::Bandit { bandit, playing } => {
                if let Some(previous) = playing.remove(&lost.id) {
                    bandit.reward(previous, false);
                }
                let r = bandit.select(&mut self.rng);
                playing.insert(lost.id, r);
                r - 1
            }
            Adapter::Learned {
                learner,
                state,
                playing,
                decisions,
            } => {
                if let Some(p) = playing.remove(&lost.id) {
                    learner.outcome(p.decision, p.r, p.round, false);
                    state.resolved(true);
                }
                let r_max = learner.actions().max(1);
                let observed = state.observe(lost.round, b_max, r_max);
                let r = learner.decide(*decisions, &observed).clamp(1, r_max);
                if let Some(level) = state.levels.get_mut(round_index(lost.round)) {
                    *level = r;
                }
                playing.insert(
                    lost.id,
                    Played {
                        decision: *decisions,
                        r,
                        round: lost.round,
                    },
                );
                *decisions = decisions.saturating_add(1);
                r - 1
            }
        };
        if copies > 0 {
            self.unplaced.push((lost.id, copies));
        }
    }

    fn on_data_acked(&mut self, _: Instant, id: LossId) {
        self.forget_copies(id);
        match &mut self.adapter {
            Adapter::Bandit { bandit, playing } => {
                if let Some(r) = playing.remove(&id) {
                    bandit.reward(r, true);
                }
            }
            Adapter::Learned {
                learner,
                state,
                playing,
                ..
            } => {
                if let Some(p) = playing.remove(&id) {
                    learner.outcome(p.decision, p.r, p.round, true);
                    state.resolved(false);
                }
            }
            Adapter::Code(code) => code.on_data_acked(id),
            Adapter::Verify { .. } => {}
        }
    }

    fn on_rtt_update(&mut self, _: Instant, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
        if let Adapter::Code(code) = &mut self.adapter {
            code.min_rtt = rtt.min;
            code.srtt = rtt.smoothed;
        }
    }

    fn on_send_state(&mut self, _: Instant, _: SendState) {}

    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest> {
        if !self.unplaced.is_empty() {
            self.place(now, ctx);
        }
        let id = self.scheduled.take_due(now, ctx.packets_sent)?;
        if let Adapter::Code(code) = &mut self.adapter {
            let spread = self.scheduler.enabled;
            code.on_taken(id, now, &mut self.rng, spread, &mut self.scheduled);
        }
        let beyond_cwnd = self.scheduler.opportunism.allows(ctx, self.largest_packet);
        Some(CopyRequest { id, beyond_cwnd })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.scheduled.earliest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SentRange;
    use crate::config::BanditAlgo;
    use crate::config::Opportunism;
    use crate::testutil::{ctx, lost_round, ms, packet, ranges, rtt};

    /// `art` as the paper's text reads it: the tests of the escape space, the levels starting at
    /// 1 and the bitmap over L_queue slots.
    fn text() -> ArtConfig {
        ArtConfig::for_reading(ArtReading::Text)
    }

    #[test]
    fn adapter_moves() {
        // E = R (1 - p_r).
        assert_eq!(adapt(1, 0.5, 10), 2); // E = 0.5 < 1: up
        assert_eq!(adapt(2, 0.5, 10), 2); // E = 1: stay
        assert_eq!(adapt(3, 0.5, 10), 3); // E = 1.5: stay
        assert_eq!(adapt(4, 0.5, 10), 3); // E = 2 >= 2: down
        assert_eq!(adapt(3, 0.0, 10), 2); // E = 3: down
        assert_eq!(adapt(1, 0.0, 10), 1); // E = 1: stay
        assert_eq!(adapt(10, 0.95, 10), 10); // capped at r_max
        assert_eq!(adapt(1, 1.0, 1), 1);
    }

    #[test]
    fn bitmap_slides_over_the_last_l_queue_outcomes() {
        let mut w = OutcomeWindow::new(10);
        for _ in 0..3 {
            w.push(true);
        }
        // Not full: empty slots count as 0.
        assert!((w.p_r() - 0.3).abs() < 1e-12);
        for _ in 0..7 {
            w.push(false);
        }
        assert!((w.p_r() - 0.3).abs() < 1e-12);
        // The three 1s slide out one by one.
        w.push(false);
        assert!((w.p_r() - 0.2).abs() < 1e-12);
        w.push(false);
        w.push(false);
        assert_eq!(w.p_r(), 0.0);
        w.push(true);
        assert!((w.p_r() - 0.1).abs() < 1e-12);
    }

    fn replica_outcomes(p: &mut Art, lost: usize, acked: usize) {
        let r: [SentRange; 1] = ranges(Some(999));
        for i in 0..(lost + acked) {
            // Every other packet number, so replica losses do not form a burst.
            let info = packet(10_000 + 2 * i as u64, ms(0), SendKind::Copy, &r);
            p.on_packet_sent(ms(0), &info);
            if i < lost {
                p.on_packet_lost(ms(1), &info, LossTrigger::PacketThreshold);
            } else {
                p.on_packet_acked(ms(1), &info);
            }
        }
    }

    /// Poll once per packet from `base` until `horizon` packets; record where copies went.
    fn positions(p: &mut Art, base: u64, horizon: u64, now: Instant) -> Vec<u64> {
        let mut at = Vec::new();
        for sent in base..base + horizon {
            if p.poll_copy(now, &ctx(sent)).is_some() {
                at.push(sent);
            }
        }
        at
    }

    #[test]
    fn redundancy_level_follows_replica_losses_per_round() {
        let mut p = Art::new(&text(), 1);
        // Fresh: R = 1, no copies at all.
        p.on_data_lost(ms(0), &lost_round(1, 1));
        assert_eq!(p.poll_copy(ms(0), &ctx(0)), None);
        assert_eq!(p.redundancy(1), Some(1));
        // p_r = 0.7: E = 0.3 R, so R climbs 2, 3, 4 and stays (E(4) = 1.2).
        replica_outcomes(&mut p, 7, 3);
        for (id, want) in [(2, 2), (3, 3), (4, 4), (5, 4)] {
            p.on_data_lost(ms(2), &lost_round(id, 1));
            assert_eq!(p.redundancy(1), Some(want));
        }
        // Round 2 has its own level, still at 1 before its first step.
        assert_eq!(p.redundancy(2), Some(1));
        p.on_data_lost(ms(2), &lost_round(5, 2));
        assert_eq!(p.redundancy(2), Some(2));
        assert_eq!(p.redundancy(1), Some(4));
    }

    #[test]
    fn a_fixed_level_ignores_the_replica_outcomes() {
        let art = |params: &str| match format!("art:reading=text,{params}")
            .parse::<crate::PolicySpec>()
        {
            Ok(crate::PolicySpec::Art(cfg)) => Ok(cfg),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        let cfg = art("fixed=3").expect("fixed=3");
        assert_eq!(cfg.fixed, Some(3));
        let mut p = Art::new(&cfg, 1);
        assert_eq!(p.redundancy(1), Some(3));
        // Outcomes that would move an adaptive R (p_r = 0.7: up; then none lost: down).
        replica_outcomes(&mut p, 7, 3);
        p.on_data_lost(ms(2), &lost_round(1, 1));
        replica_outcomes(&mut p, 0, 10);
        p.on_data_lost(ms(3), &lost_round(2, 1));
        p.on_data_lost(ms(3), &lost_round(3, 2));
        for round in [1, 2, 3] {
            assert_eq!(p.redundancy(round), Some(3), "round {round}");
        }
        // R counts the retransmission by default: two copies of lineage 3, back to back once the
        // scheduler is off.
        let cfg = art("fixed=3,scheduler=off").expect("params");
        let mut p = Art::new(&cfg, 1);
        p.on_data_lost(ms(0), &lost_round(1, 1));
        assert_eq!(positions(&mut p, 0, 10, ms(0)), vec![0, 1]);
        assert!(art("fixed=0").is_err());
    }

    #[test]
    fn copies_spread_within_the_escape_space() {
        let mut spread_seen = false;
        for seed in 0..50 {
            let mut p = Art::new(&text(), seed);
            p.on_rtt_update(ms(0), &rtt(50));
            // A burst of 6 consecutive losses: B_max = 6, BDP = 100, escape space = 6.
            let new = ranges(None);
            for pn in 100..106 {
                p.on_packet_lost(
                    ms(10),
                    &packet(pn, ms(0), SendKind::New, &new),
                    LossTrigger::PacketThreshold,
                );
            }
            replica_outcomes(&mut p, 7, 3);
            for id in 1..=3 {
                p.on_data_lost(ms(10), &lost_round(id, 1));
                p.on_data_acked(ms(10), id);
            }
            // R = 4: three copies at distinct positions among the 5 packets after the
            // retransmission; nothing falls due by time at 10 ms.
            p.on_data_lost(ms(10), &lost_round(4, 1));
            assert_eq!(p.redundancy(1), Some(4));
            let at = positions(&mut p, 500, 50, ms(10));
            assert_eq!(at.len(), 3, "seed {seed}: {at:?}");
            assert!(
                at.iter().all(|&x| (500..505).contains(&x)),
                "seed {seed}: {at:?}"
            );
            spread_seen |= at != [500, 501, 502];
            assert_eq!(p.tracked(), 0);
        }
        assert!(spread_seen, "50 seeds never spread the copies");
    }

    #[test]
    fn escape_space_is_capped_by_the_bdp() {
        let mut p = Art::new(&text(), 3);
        p.on_rtt_update(ms(0), &rtt(50));
        let new = ranges(None);
        for pn in 0..40 {
            p.on_packet_lost(
                ms(10),
                &packet(pn, ms(0), SendKind::New, &new),
                LossTrigger::Pto,
            );
        }
        replica_outcomes(&mut p, 7, 3);
        for id in 1..=4 {
            p.on_data_lost(ms(10), &lost_round(id, 1));
            if id < 4 {
                p.on_data_acked(ms(10), id);
            }
        }
        let mut c = ctx(0);
        c.bdp_packets = Some(8);
        let mut at = Vec::new();
        for sent in 0..40 {
            c.packets_sent = sent;
            if p.poll_copy(ms(10), &c).is_some() {
                at.push(sent);
            }
        }
        assert_eq!(at.len(), 3);
        assert!(at.iter().all(|&x| x < 7), "{at:?}");
    }

    #[test]
    fn ablation_sends_back_to_back() {
        let cfg = ArtConfig {
            scheduler: SchedulerConfig {
                enabled: false,
                ..SchedulerConfig::default()
            },
            ..text()
        };
        let mut p = Art::new(&cfg, 1);
        replica_outcomes(&mut p, 7, 3);
        for id in 1..=3 {
            p.on_data_lost(ms(0), &lost_round(id, 1));
        }
        // R = 2, 3, 4: 1 + 2 + 3 copies, all due at once.
        let ids: Vec<_> =
            std::iter::from_fn(|| p.poll_copy(ms(0), &ctx(7)).map(|c| c.id)).collect();
        assert_eq!(ids, vec![1, 2, 2, 3, 3, 3]);
        assert_eq!(p.tracked(), 0);
    }

    #[test]
    fn off_mode_copies_fall_due_by_time() {
        for seed in 0..20 {
            let mut p = Art::new(&text(), seed);
            p.on_rtt_update(ms(0), &rtt(100));
            let new = ranges(None);
            for pn in 0..10 {
                let info = packet(pn, ms(0), SendKind::New, &new);
                p.on_packet_lost(ms(0), &info, LossTrigger::Pto);
            }
            replica_outcomes(&mut p, 7, 3);
            p.on_data_lost(ms(0), &lost_round(1, 1));
            // R = 2: one copy at one of 9 positions; one position = 100 ms / 100 packets = 1 ms.
            if p.poll_copy(ms(0), &ctx(0)).is_some() {
                continue; // position 0: nothing to wait for with this seed
            }
            let Some(due) = p.poll_timeout() else {
                panic!("seed {seed}: a placed copy must ask for a timer")
            };
            assert!(due > ms(0) && due <= ms(8), "{due:?}");
            // The packet count never moves (off-mode), but time does.
            let just_before = Instant::from_nanos(due.as_nanos() - 1);
            assert_eq!(p.poll_copy(just_before, &ctx(0)), None);
            assert_eq!(p.poll_copy(due, &ctx(0)).map(|c| c.id), Some(1));
            assert_eq!(p.poll_timeout(), None);
            assert_eq!(p.tracked(), 0);
            return;
        }
        panic!("20 seeds all placed the copy at position 0");
    }

    #[test]
    fn opportunism_stays_within_its_budget() {
        let cfg = ArtConfig {
            scheduler: SchedulerConfig {
                enabled: false,
                opportunism: Opportunism::Budget(2),
                ..SchedulerConfig::default()
            },
            ..text()
        };
        let mut p = Art::new(&cfg, 1);
        replica_outcomes(&mut p, 7, 3);
        p.on_data_lost(ms(0), &lost_round(1, 1));
        p.on_data_lost(ms(0), &lost_round(2, 1));
        let mut c = ctx(0);
        c.cwnd = 12_000;
        c.bytes_in_flight = 12_000 + 2400 - 1;
        assert_eq!(p.poll_copy(ms(0), &c).map(|x| x.beyond_cwnd), Some(true));
        c.bytes_in_flight = 12_000 + 2400;
        assert_eq!(p.poll_copy(ms(0), &c).map(|x| x.beyond_cwnd), Some(false));
    }

    #[test]
    fn level_counts_the_retransmission_or_not() {
        let copies_for = |level| {
            let cfg = ArtConfig {
                level,
                scheduler: SchedulerConfig {
                    enabled: false,
                    ..SchedulerConfig::default()
                },
                ..text()
            };
            let mut p = Art::new(&cfg, 1);
            // p_r = 0.7: R steps 1 -> 2 -> 3 over two losses.
            replica_outcomes(&mut p, 7, 3);
            p.on_data_lost(ms(0), &lost_round(1, 1));
            p.on_data_lost(ms(0), &lost_round(2, 1));
            assert_eq!(p.redundancy(1), Some(3));
            std::iter::from_fn(|| p.poll_copy(ms(0), &ctx(0)).map(|c| c.id)).collect::<Vec<_>>()
        };
        // R = 2 then 3 sends: 1 + 2 copies besides the retransmissions.
        assert_eq!(copies_for(LevelCounts::Sends), vec![1, 2, 2]);
        // R = 2 then 3 copies.
        assert_eq!(copies_for(LevelCounts::Copies), vec![1, 1, 2, 2, 2]);
    }

    #[test]
    fn opportunism_on_ignores_the_window_and_off_respects_it() {
        for (opportunism, beyond) in [(Opportunism::On, true), (Opportunism::Off, false)] {
            let cfg = ArtConfig {
                scheduler: SchedulerConfig {
                    enabled: false,
                    opportunism,
                    ..SchedulerConfig::default()
                },
                ..text()
            };
            let mut p = Art::new(&cfg, 1);
            replica_outcomes(&mut p, 7, 3);
            p.on_data_lost(ms(0), &lost_round(1, 1));
            let mut c = ctx(0);
            c.cwnd = 12_000;
            c.bytes_in_flight = 1_000_000;
            assert_eq!(
                p.poll_copy(ms(0), &c).map(|x| x.beyond_cwnd),
                Some(beyond),
                "{opportunism}"
            );
        }
        assert_eq!(SchedulerConfig::default().opportunism, Opportunism::On);
    }

    /// Chooses R = 2 always and records what it saw and heard.
    #[derive(Debug, Default)]
    struct Recorder {
        states: Vec<DqnState>,
        outcomes: Vec<(u64, u32, u32, bool)>,
    }

    #[derive(Debug)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Recorder>>);

    impl RedundancyLearner for Shared {
        fn decide(&mut self, _: u64, state: &DqnState) -> u32 {
            if let Ok(mut r) = self.0.lock() {
                r.states.push(*state);
            }
            2
        }
        fn outcome(&mut self, decision: u64, r: u32, round: u32, recovered: bool) {
            if let Ok(mut rec) = self.0.lock() {
                rec.outcomes.push((decision, r, round, recovered));
            }
        }
        fn actions(&self) -> u32 {
            4
        }
    }

    /// `art-dqn` under `reading` with a [`Recorder`], the scheduler off.
    fn recorded(reading: ArtReading) -> (Art, std::sync::Arc<std::sync::Mutex<Recorder>>) {
        let rec = std::sync::Arc::new(std::sync::Mutex::new(Recorder::default()));
        let cfg = SchedulerConfig {
            enabled: false,
            ..SchedulerConfig::default()
        };
        let p = Art::new_learned(Box::new(Shared(rec.clone())), reading, cfg, 1);
        (p, rec)
    }

    #[test]
    fn learned_rounds_report_outcomes_and_observe_the_state() {
        let (mut p, rec) = recorded(ArtReading::Text);
        assert_eq!(p.name(), "art-dqn");
        // 7 of 10 replicas lost: p_r = 0.7 in both windows (0.07 in the long one of 100).
        replica_outcomes(&mut p, 7, 3);
        p.on_data_lost(ms(0), &lost_round(1, 1));
        p.on_data_lost(ms(0), &lost_round(2, 1));
        // Lineage 1 is lost again (round 2), lineage 2 recovers.
        p.on_data_lost(ms(1), &lost_round(1, 2));
        p.on_data_acked(ms(2), 2);
        p.on_data_acked(ms(2), 1);
        // R = 2: one copy per round, three rounds, the first one's copy dropped by round 2.
        let ids: Vec<_> =
            std::iter::from_fn(|| p.poll_copy(ms(0), &ctx(0)).map(|c| c.id)).collect();
        assert!(ids.is_empty(), "acknowledged data keeps no copies: {ids:?}");
        assert_eq!(p.tracked(), 0);
        let rec = rec.lock().map(|r| (r.states.clone(), r.outcomes.clone()));
        let Ok((states, outcomes)) = rec else {
            panic!("poisoned")
        };
        assert_eq!(
            outcomes,
            vec![(0, 2, 1, false), (1, 2, 1, true), (2, 2, 2, true)]
        );
        assert_eq!(states.len(), 3);
        let first = states[0].as_slice();
        assert!((first[0] - 0.7).abs() < 1e-6, "{first:?}");
        assert!((first[1] - 0.07).abs() < 1e-6, "{first:?}");
        assert_eq!(first[2], 0.0); // round 1
        assert!((first[3] - 0.25).abs() < 1e-6); // level 1 of r_max 4
        assert_eq!(first[5], 0.0); // no round resolved yet
                                   // The third decision is round 2, after one lost round.
        let third = states[2].as_slice();
        assert!((third[2] - 1.0 / 15.0).abs() < 1e-6, "{third:?}");
        assert!(
            (third[5] - ROUND_LOSS_WEIGHT as f32).abs() < 1e-6,
            "{third:?}"
        );
        // Round 1's level is now 2 of 4.
        assert!(
            (states[1].as_slice()[3] - 0.5).abs() < 1e-6,
            "{:?}",
            states[1]
        );
    }

    #[test]
    fn learned_code_rounds_observe_quic_arts_state_and_report_outcomes() {
        let (mut p, rec) = recorded(ArtReading::Code);
        p.on_rtt_update(
            ms(0),
            &RttSample {
                latest: Duration::from_millis(50),
                smoothed: Duration::from_millis(50),
                min: Duration::from_millis(40),
                var: Duration::from_millis(10),
            },
        );
        let new = ranges(None);
        let data: Vec<PacketInfo<'_>> = (0..11)
            .map(|pn| packet(pn, ms(if pn < 10 { pn } else { 50 }), SendKind::New, &new))
            .collect();
        for d in &data[..10] {
            p.on_packet_sent(d.sent, d);
        }
        // The first acknowledgement starts the rates.
        p.on_packet_acked(ms(40), &data[0]);
        // Sent 50 ms after the acknowledged packet 0, with 10 packets of 1200 bytes since it:
        // 240 kB/s.
        p.on_packet_sent(ms(50), &data[10]);
        for d in &data[1..=5] {
            p.on_packet_acked(ms(60), d);
        }
        // Packet 10 went out after the acknowledgement at 40 ms; 5 packets acknowledged since
        // its send, over the 50 ms since that acknowledgement: 120 kB/s.
        p.on_packet_acked(ms(90), &data[10]);
        p.on_packet_lost(ms(90), &data[6], LossTrigger::PacketThreshold);
        p.on_packet_lost(ms(90), &data[7], LossTrigger::PacketThreshold);
        // In flight: packets 8 and 9.
        p.on_data_lost(ms(90), &lost_round(1, 1));
        p.on_data_lost(ms(90), &lost_round(2, 1));
        assert_eq!(p.redundancy(1), Some(2));
        assert_eq!(p.p_r(), None);
        let retx1 = ranges(Some(1));
        let retx = packet(11, ms(91), SendKind::Retransmission, &retx1);
        p.on_packet_sent(ms(91), &retx);
        p.on_packet_lost(ms(100), &retx, LossTrigger::PacketThreshold);
        p.on_data_lost(ms(100), &lost_round(1, 2));
        let retx2 = ranges(Some(2));
        let retx = packet(12, ms(101), SendKind::Retransmission, &retx2);
        p.on_packet_sent(ms(101), &retx);
        p.on_packet_acked(ms(120), &retx);
        p.on_data_acked(ms(120), 2);
        // Range 1 is recovered by its original (a spurious loss): its round 2 recovered too.
        p.on_data_acked(ms(130), 1);
        assert_eq!(p.tracked(), 0);
        let rec = rec.lock().map(|r| (r.states.clone(), r.outcomes.clone()));
        let Ok((states, outcomes)) = rec else {
            panic!("poisoned")
        };
        assert_eq!(
            outcomes,
            vec![(0, 2, 1, false), (1, 2, 1, true), (2, 2, 2, true)]
        );
        let close = |got: &DqnState, want: [f64; 7]| {
            let got = got.as_slice();
            assert_eq!(got.len(), 7);
            for (g, w) in got.iter().zip(want) {
                assert!((f64::from(*g) - w).abs() < 1e-6, "{got:?} against {want:?}");
            }
        };
        let (send, ack) = (240_000.0 / RATE_SCALE, 120_000.0 / RATE_SCALE);
        let (min_rtt, srtt) = (0.04 / RTT_SCALE, 0.05 / RTT_SCALE);
        let in_flight = 2.0 / IN_FLIGHT_SCALE;
        close(&states[0], [send, ack, min_rtt, srtt, 0.0, in_flight, 0.0]);
        // Range 1 waits for its retransmission.
        let queued = 1.0 / LOST_QUEUE_SCALE;
        close(
            &states[1],
            [send, ack, min_rtt, srtt, queued, in_flight, 0.0],
        );
        // Range 1's second round: one round failed; range 2 still waits; the retransmission
        // sent 41 ms after packet 10 carried 1200 bytes.
        let send = 1200.0 / 0.041 / RATE_SCALE;
        let failed = 1.0 / (TRACKED_ROUNDS - 1) as f64;
        close(
            &states[2],
            [send, ack, min_rtt, srtt, queued, in_flight, failed],
        );
    }

    #[test]
    fn bandit_rounds_are_rewarded_and_forgotten() {
        let cfg = ArtMabConfig {
            algo: BanditAlgo::Ucb,
            scheduler: SchedulerConfig {
                enabled: false,
                ..SchedulerConfig::default()
            },
            ..ArtMabConfig::for_reading(ArtReading::Text)
        };
        let mut p = Art::new_mab(&cfg, 5);
        assert_eq!(p.name(), "art-mab");
        // UCB plays every arm once first: R = 1, 2, 3 -> 0, 1, 2 copies.
        for id in 1..=3 {
            p.on_data_lost(ms(0), &lost_round(id, 1));
        }
        let copies: Vec<_> =
            std::iter::from_fn(|| p.poll_copy(ms(0), &ctx(0)).map(|c| c.id)).collect();
        assert_eq!(copies, vec![2, 3, 3]);
        // Lineage 1 loses its round: rewarded 0, and a new arm (R = 4) is played.
        p.on_data_lost(ms(1), &lost_round(1, 2));
        // Owed: lineage 1's three copies (one entry); the bandit waits on 3 lineages.
        assert_eq!(p.tracked(), 1 + 3);
        for id in 1..=3 {
            p.on_data_acked(ms(2), id);
        }
        assert_eq!(p.tracked(), 0);
        let mean = |r| p.arm_mean(r).unwrap_or(f64::NAN);
        assert_eq!(mean(1), 0.0);
        assert!((mean(2) - 1.0 / 1.01).abs() < 1e-12);
        assert!((mean(4) - 1.0 / 1.01f64.powi(3)).abs() < 1e-12);
    }

    // ---- reading=code (quic-art) ----

    fn code_off() -> ArtConfig {
        ArtConfig {
            scheduler: SchedulerConfig {
                enabled: false,
                ..SchedulerConfig::default()
            },
            ..ArtConfig::default()
        }
    }

    fn all_copies(p: &mut Art, now: Instant) -> Vec<LossId> {
        std::iter::from_fn(|| p.poll_copy(now, &ctx(0)).map(|c| c.id)).collect()
    }

    /// A retransmission or copy of one lineage.
    struct Resent {
        pn: u64,
        kind: SendKind,
        ranges: [SentRange; 1],
    }

    impl Resent {
        fn info(&self) -> PacketInfo<'_> {
            packet(self.pn, ms(0), self.kind, &self.ranges)
        }
    }

    /// Sends packet `pn`, a retransmission or copy of lineage `id`.
    fn resend(p: &mut Art, pn: u64, id: LossId, kind: SendKind) -> Resent {
        let sent = Resent {
            pn,
            kind,
            ranges: ranges(Some(id)),
        };
        p.on_packet_sent(ms(0), &sent.info());
        sent
    }

    #[test]
    fn code_levels_start_at_2n_minus_1_and_step_only_their_round() {
        let p = Art::new(&ArtConfig::default(), 1);
        for n in 1..=16 {
            assert_eq!(p.redundancy(n), Some(2 * n - 1), "round {n}");
        }
        // Later rounds share the last level.
        assert_eq!(p.redundancy(40), Some(31));
        let capped = Art::new(
            &ArtConfig {
                r_max: 6,
                ..ArtConfig::default()
            },
            1,
        );
        assert_eq!(capped.redundancy(4), Some(6));

        let mut p = Art::new(&code_off(), 1);
        // No outcome yet: p_r = 0, so E = R and round 2 steps 3 -> 2, then 2 -> 1.
        p.on_data_lost(ms(0), &lost_round(1, 2));
        assert_eq!(p.redundancy(2), Some(2));
        p.on_data_lost(ms(0), &lost_round(2, 2));
        assert_eq!(p.redundancy(2), Some(1));
        // At R = 1, E = 1 holds it: the level never falls below one duplicate.
        p.on_data_lost(ms(0), &lost_round(3, 2));
        assert_eq!(p.redundancy(2), Some(1));
        assert_eq!((p.redundancy(1), p.redundancy(3)), (Some(1), Some(5)));
        // Round 1 sends its level's duplicate: R = 1 still means one copy.
        p.on_data_lost(ms(0), &lost_round(4, 1));
        assert_eq!(p.redundancy(1), Some(1));
        let copies = all_copies(&mut p, ms(0));
        assert_eq!(
            copies.iter().filter(|&&id| id == 4).count(),
            1,
            "{copies:?}"
        );
        // Every retransmission lost: p_r = 1, and each loss entering round 3 adds one.
        let lost = resend(&mut p, 100, 4, SendKind::Retransmission);
        p.on_packet_lost(ms(1), &lost.info(), LossTrigger::PacketThreshold);
        assert_eq!(p.p_r(), Some(1.0));
        p.on_data_lost(ms(1), &lost_round(5, 3));
        p.on_data_lost(ms(1), &lost_round(6, 3));
        assert_eq!(p.redundancy(3), Some(7));
    }

    #[test]
    fn code_duplicates_carry_over_between_rounds() {
        let mut p = Art::new(&code_off(), 1);
        let mut sent = Vec::new();
        // With p_r = 0: R_1 = 1, R_2 = 3 -> 2, R_3 = 5 -> 4: 1, then 2 - 1, then 4 - 2.
        for round in 1..=3 {
            p.on_data_lost(ms(0), &lost_round(1, round));
            sent.push(all_copies(&mut p, ms(0)).len());
        }
        assert_eq!(sent, [1, 1, 2]);
        assert_eq!(p.redundancy(2), Some(2));
        // A second range: R_1 = 1 again, R_2 = 2 -> 1, which adds nothing to the one sent.
        p.on_data_lost(ms(0), &lost_round(2, 1));
        assert_eq!(all_copies(&mut p, ms(0)), [2]);
        p.on_data_lost(ms(0), &lost_round(2, 2));
        assert_eq!(p.redundancy(2), Some(1));
        assert_eq!(all_copies(&mut p, ms(0)), Vec::<LossId>::new());
        // A level held by `fixed=` is sent once, in the first round.
        let mut p = Art::new(
            &ArtConfig {
                fixed: Some(3),
                ..code_off()
            },
            1,
        );
        p.on_data_lost(ms(0), &lost_round(1, 1));
        assert_eq!(all_copies(&mut p, ms(0)), [1, 1, 1]);
        p.on_data_lost(ms(0), &lost_round(1, 2));
        assert_eq!(all_copies(&mut p, ms(0)), Vec::<LossId>::new());
        p.on_data_acked(ms(0), 1);
        assert_eq!(p.tracked(), 0);
    }

    #[test]
    fn code_round_cut_short_leaves_its_duplicates_to_the_next() {
        let mut p = Art::new(
            &ArtConfig {
                fixed: Some(3),
                ..ArtConfig::default()
            },
            2,
        );
        p.on_rtt_update(ms(0), &rtt(40));
        p.on_data_lost(ms(0), &lost_round(1, 1));
        let Some(first) = p.poll_timeout() else {
            panic!("a duplicate is owed")
        };
        assert_eq!(p.poll_copy(first, &ctx(0)).map(|c| c.id), Some(1));
        // The transport ends the round before the other two went out: they are owed still.
        p.on_data_lost(first, &lost_round(1, 2));
        assert_eq!(all_copies(&mut p, ms(1000)), [1, 1]);
        assert_eq!(p.poll_timeout(), None);
    }

    #[test]
    fn code_p_r_is_over_the_outcomes_held_as_quic_art_records_them() {
        let mut w = OutcomeWindow::new(10);
        assert_eq!(w.p_r_of_fill(), 0.0);
        for lost in [true, true, true, false] {
            w.push(lost);
        }
        assert!((w.p_r_of_fill() - 0.75).abs() < 1e-12);
        assert!((w.p_r() - 0.3).abs() < 1e-12);
        for _ in 0..10 {
            w.push(false);
        }
        assert_eq!(w.p_r_of_fill(), 0.0);

        let mut p = Art::new(&code_off(), 1);
        assert_eq!(p.p_r(), Some(0.0));
        let new = ranges(None);
        let original = packet(1, ms(0), SendKind::New, &new);
        p.on_packet_sent(ms(0), &original);
        p.on_packet_lost(ms(1), &original, LossTrigger::PacketThreshold);
        // The original's loss is no replica outcome.
        assert_eq!(p.p_r(), Some(0.0));
        p.on_data_lost(ms(1), &lost_round(7, 1));
        let retx = resend(&mut p, 2, 7, SendKind::Retransmission);
        let copy = resend(&mut p, 3, 7, SendKind::Copy);
        let late = resend(&mut p, 4, 7, SendKind::Copy);
        p.on_packet_lost(ms(2), &retx.info(), LossTrigger::PacketThreshold);
        assert_eq!(p.p_r(), Some(1.0));
        // The first acknowledged send records the range's one 0...
        p.on_packet_acked(ms(3), &copy.info());
        assert_eq!(p.p_r(), Some(0.5));
        // ...and ends its recording: nothing for its other sends, acknowledged or lost.
        p.on_packet_lost(ms(3), &late.info(), LossTrigger::TimeThreshold);
        p.on_packet_acked(ms(3), &retx.info());
        assert_eq!(p.p_r(), Some(0.5));
        p.on_data_acked(ms(3), 7);
        assert_eq!(p.tracked(), 0);
        // Sends of a range the policy no longer tracks record nothing.
        p.on_packet_lost(ms(4), &late.info(), LossTrigger::TimeThreshold);
        assert_eq!(p.p_r(), Some(0.5));
    }

    #[test]
    fn code_acknowledgement_cancels_pending_duplicates() {
        let mut p = Art::new(
            &ArtConfig {
                fixed: Some(4),
                ..ArtConfig::default()
            },
            1,
        );
        p.on_rtt_update(ms(0), &rtt(40));
        p.on_data_lost(ms(0), &lost_round(1, 1));
        assert!(p.poll_timeout().is_some());
        let retx = resend(&mut p, 1, 1, SendKind::Retransmission);
        p.on_packet_acked(ms(5), &retx.info());
        assert_eq!(p.poll_timeout(), None);
        assert_eq!(all_copies(&mut p, ms(1000)), Vec::<LossId>::new());
    }

    /// The times at which `seed`'s policy hands out the 6 duplicates of a range lost at 100 ms
    /// with min_rtt = 40 ms, asked for exactly when each falls due.
    fn duplicate_times(seed: u64) -> Vec<Instant> {
        let cfg = ArtConfig {
            fixed: Some(6),
            ..ArtConfig::default()
        };
        let mut p = Art::new(&cfg, seed);
        p.on_rtt_update(ms(0), &rtt(40));
        p.on_data_lost(ms(100), &lost_round(1, 1));
        let mut times = Vec::new();
        while let Some(due) = p.poll_timeout() {
            let just_before = Instant::from_nanos(due.as_nanos() - 1);
            if due > ms(100) {
                assert_eq!(p.poll_copy(just_before, &ctx(0)), None);
            }
            assert_eq!(p.poll_copy(due, &ctx(0)).map(|c| c.id), Some(1));
            times.push(due);
        }
        times
    }

    #[test]
    fn code_scheduler_spreads_duplicates_within_min_rtt_one_after_another() {
        let mut firsts = Duration::ZERO;
        let mut lasts = Duration::ZERO;
        let mut distinct = std::collections::BTreeSet::new();
        for seed in 0..40 {
            let times = duplicate_times(seed);
            assert_eq!(times.len(), 6, "seed {seed}");
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
            assert!(
                times.iter().all(|&t| t >= ms(100) && t < ms(140)),
                "seed {seed}: {times:?}"
            );
            assert_eq!(times, duplicate_times(seed), "seed {seed} repeats");
            firsts += times[0] - ms(100);
            lasts += times[5] - ms(100);
            distinct.insert(times);
        }
        assert!(distinct.len() > 30, "the seed drives the draws");
        // Each draw is within what remains after the previous one: the first averages about
        // half of min_rtt, the sixth about 1 - 2^-6 of it.
        let (first, last) = (firsts / 40, lasts / 40);
        assert!(first > Duration::from_millis(12) && first < Duration::from_millis(28));
        assert!(last > Duration::from_millis(34), "{last:?}");

        // Asked for only after the window: the rest go at once.
        let cfg = ArtConfig {
            fixed: Some(3),
            ..ArtConfig::default()
        };
        let mut p = Art::new(&cfg, 1);
        p.on_rtt_update(ms(0), &rtt(40));
        p.on_data_lost(ms(100), &lost_round(1, 1));
        assert_eq!(all_copies(&mut p, ms(200)), [1, 1, 1]);
        // Before any RTT sample min_rtt is 0: no time to spread over.
        let mut p = Art::new(&cfg, 1);
        p.on_data_lost(ms(100), &lost_round(1, 1));
        assert_eq!(p.poll_timeout(), Some(ms(100)));
        assert_eq!(all_copies(&mut p, ms(100)), [1, 1, 1]);
    }

    #[test]
    fn code_bandit_pays_at_recovery_by_round() {
        let cfg = ArtMabConfig {
            scheduler: SchedulerConfig {
                enabled: false,
                ..SchedulerConfig::default()
            },
            ..ArtMabConfig::default()
        };
        assert_eq!(cfg.algo, BanditAlgo::Ucb);
        let mut p = Art::new_mab(&cfg, 5);
        // No reward yet: UCB plays the first arm, one duplicate, for every pull.
        p.on_data_lost(ms(0), &lost_round(1, 1));
        p.on_data_lost(ms(0), &lost_round(2, 1));
        let retx1 = resend(&mut p, 1, 1, SendKind::Retransmission);
        resend(&mut p, 2, 2, SendKind::Retransmission);
        assert_eq!(all_copies(&mut p, ms(0)), [1, 2]);
        let copy1 = resend(&mut p, 3, 1, SendKind::Copy);
        let copy2 = resend(&mut p, 4, 2, SendKind::Copy);
        // Range 1 loses round 1 (no reward for that yet) and is recovered in round 2.
        p.on_packet_lost(ms(1), &copy1.info(), LossTrigger::PacketThreshold);
        p.on_packet_lost(ms(1), &retx1.info(), LossTrigger::PacketThreshold);
        p.on_data_lost(ms(1), &lost_round(1, 2));
        assert_eq!(p.arm_mean(1), Some(0.0));
        // Arm 1 again, whose one duplicate was sent in round 1 already.
        assert_eq!(all_copies(&mut p, ms(1)), Vec::<LossId>::new());
        let retx1 = resend(&mut p, 5, 1, SendKind::Retransmission);
        p.on_packet_acked(ms(2), &retx1.info());
        p.on_data_acked(ms(2), 1);
        // Round 2 pays 1/(2 x 1), then round 1 -1.01 x 1 x 1.
        let mean = |p: &Art, r| p.arm_mean(r).unwrap_or(f64::NAN);
        assert!((mean(&p, 1) - (0.5 - 1.01) / 2.0).abs() < 1e-12);
        // Range 2 is recovered by its round-1 duplicate: 1/(1 x 1).
        p.on_packet_acked(ms(2), &copy2.info());
        p.on_data_acked(ms(2), 2);
        assert!((mean(&p, 1) - (0.5 - 1.01 + 1.0) / 3.0).abs() < 1e-12);
        // Arm 2 has no reward: it is played next.
        p.on_data_lost(ms(3), &lost_round(3, 1));
        resend(&mut p, 6, 3, SendKind::Retransmission);
        assert_eq!(all_copies(&mut p, ms(3)), [3, 3]);
        let copy3 = resend(&mut p, 7, 3, SendKind::Copy);
        resend(&mut p, 8, 3, SendKind::Copy);
        // Round 2 (arm 2 again: still unrewarded) starts; round 1's duplicate recovers it.
        p.on_data_lost(ms(4), &lost_round(3, 2));
        resend(&mut p, 9, 3, SendKind::Retransmission);
        p.on_packet_acked(ms(5), &copy3.info());
        assert!((mean(&p, 2) - 0.5).abs() < 1e-12);
        p.on_data_acked(ms(5), 3);
        assert_eq!(p.tracked(), 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 1000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0xa127_0001),
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// The schedule with its kept bounds answers as a scan of every placed copy does: the
        /// same copy taken (least position, then time, first placed among equals), the same
        /// deadline, through random placements, forgotten lineages and polls.
        #[test]
        fn schedule_is_a_scan(
            ops in proptest::collection::vec((0u8..4, 0u64..6, 0u64..40, 0u64..40), 0..300),
        ) {
            let mut schedule = Schedule::new();
            let mut model: Vec<Scheduled> = Vec::new();
            for (i, &(op, id, position, at)) in ops.iter().enumerate() {
                match op {
                    0 | 1 => {
                        let copy = Scheduled { id, position, at: ms(at) };
                        schedule.push(copy);
                        model.push(copy);
                    }
                    2 => {
                        schedule.forget(id);
                        model.retain(|s| s.id != id);
                    }
                    _ => {
                        let (now, sent) = (ms(at), position);
                        let expected = model
                            .iter()
                            .enumerate()
                            .filter(|(_, s)| s.position <= sent || s.at <= now)
                            .min_by_key(|(_, s)| (s.position, s.at))
                            .map(|(j, _)| j);
                        let expected = expected.map(|j| model.remove(j).id);
                        proptest::prop_assert_eq!(schedule.take_due(now, sent), expected, "op {}", i);
                    }
                }
                proptest::prop_assert_eq!(
                    schedule.earliest, model.iter().map(|s| s.at).min(), "op {}", i
                );
                proptest::prop_assert_eq!(schedule.len(), model.len());
            }
        }
    }
}
