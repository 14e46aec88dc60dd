//! `art` and `art-mab` (ART §6, §8): a Redundancy Adapter chooses R, the number of replicas of a
//! lost range in a retransmission round, and a Replica Scheduler spreads them over an escape space.
//!
//! By default R counts every send of the round, the transport's ARQ retransmission included (ART
//! Fig. 9, R_1 = 3 for replicas k = 1, 2, 3; "traditional QUIC" has escape space 1), so the
//! policy asks for R - 1 copies; `level=copies` reads R as copies beyond the retransmission
//! ([`LevelCounts`]).
//!
//! *Test-and-verification adapter* (§6.1): a bitmap of the last L_queue replica outcomes (every
//! retransmission or copy packet; 1 = lost), p_r = ones / L_queue, E = R (1 - p_r); on each loss
//! the round's R steps +1 if E < 1 and -1 if E >= 2, within 1..=r_max. R is kept per round number
//! (rounds past [`TRACKED_ROUNDS`] share the last level); the bitmap is shared by all rounds.
//! `fixed=R` holds R instead (Fig. 18(b)'s "ART-fix", and "ART-norand" with `scheduler=off`).
//!
//! *Bandit adapter* (§8): R is an arm of [`Bandit`], pulled once per round.
//!
//! *Learned adapter* (§8, `art-dqn`): a [`RedundancyLearner`] (a DQN) chooses R once per round
//! from a [`DqnState`] built here ([`LearnedState`]) and hears each round's outcome.
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

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use rand::seq::index;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendKind, SendState,
};
use crate::bandit::Bandit;
use crate::burst::BurstTracker;
use crate::config::{ArtConfig, ArtDqnConfig, ArtMabConfig, LevelCounts, SchedulerConfig};
use crate::dqn::{Greedy, RedundancyLearner};
use crate::qnet::DqnState;

/// Rounds with their own redundancy level; later rounds share the last one.
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
        /// (decision number, R) of each unresolved lineage's current round.
        playing: BTreeMap<LossId, (u64, u32)>,
        decisions: u64,
    },
}

/// Replica outcomes over ART's bitmap and a longer one (ours: ART's adapter sees only the short one).
const LONG_WINDOW: usize = 100;

/// Weight of one resolved round in the round-loss average (ours: about the last 20 rounds).
const ROUND_LOSS_WEIGHT: f64 = 0.05;

/// Bursts longer than this read as this long in the state (ours).
const BURST_SCALE: u64 = 32;

/// What the learned adapter observes: the inputs of [`DqnState`], in the order of
/// [`crate::qnet::STATE_FEATURES`].
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
        [
            self.short.p_r() as f32,
            self.long.p_r() as f32,
            index as f32 / (TRACKED_ROUNDS - 1) as f32,
            level as f32 / r_max.max(1) as f32,
            b_max.min(BURST_SCALE) as f32 / BURST_SCALE as f32,
            self.round_loss as f32,
        ]
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
    /// `art`: the test-and-verification adapter.
    #[must_use]
    pub fn new(cfg: &ArtConfig, seed: u64) -> Self {
        let r_max = cfg.r_max.max(1);
        Self::with_adapter(
            "art",
            Adapter::Verify {
                window: OutcomeWindow::new(cfg.l_queue),
                levels: vec![cfg.fixed.unwrap_or(1); TRACKED_ROUNDS],
                r_max,
                counts: cfg.level,
                fixed: cfg.fixed,
            },
            cfg.scheduler,
            seed,
        )
    }

    /// `art-mab`: the bandit adapter.
    #[must_use]
    pub fn new_mab(cfg: &ArtMabConfig, seed: u64) -> Self {
        Self::with_adapter(
            "art-mab",
            Adapter::Bandit {
                bandit: Bandit::new(cfg.algo, cfg.r_max, cfg.epsilon, cfg.ucb_c, cfg.eta),
                playing: BTreeMap::new(),
            },
            cfg.scheduler,
            seed,
        )
    }

    /// `art-dqn` at inference: the configured network's greedy choice.
    #[must_use]
    pub fn new_dqn(cfg: &ArtDqnConfig, seed: u64) -> Self {
        Self::new_learned(Box::new(Greedy::new(cfg.net.clone())), cfg.scheduler, seed)
    }

    /// `art-dqn` with any learner (the trainer's exploring one).
    #[must_use]
    pub fn new_learned(
        learner: Box<dyn RedundancyLearner>,
        scheduler: SchedulerConfig,
        seed: u64,
    ) -> Self {
        Self::with_adapter(
            "art-dqn",
            Adapter::Learned {
                learner,
                state: LearnedState::new(),
                playing: BTreeMap::new(),
                decisions: 0,
            },
            scheduler,
            seed,
        )
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
            Adapter::Verify { levels, .. } => levels.get(round_index(round)).copied(),
            Adapter::Learned { state, .. } => state.levels.get(round_index(round)).copied(),
            Adapter::Bandit { .. } => None,
        }
    }

    /// The replica loss rate p_r (`None` for `art-mab`).
    #[must_use]
    pub fn p_r(&self) -> Option<f64> {
        match &self.adapter {
            Adapter::Verify { window, .. } => Some(window.p_r()),
            Adapter::Learned { state, .. } => Some(state.short.p_r()),
            Adapter::Bandit { .. } => None,
        }
    }

    /// `art-mab`: the mean reward of arm R (`None` for `art`).
    #[must_use]
    pub fn arm_mean(&self, r: u32) -> Option<f64> {
        match &self.adapter {
            Adapter::Verify { .. } | Adapter::Learned { .. } => None,
            Adapter::Bandit { bandit, .. } => bandit.mean(r),
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
        };
        self.unplaced.len() + self.scheduled.len() + playing
    }

    fn record_replica(&mut self, packet: &PacketInfo<'_>, lost: bool) {
        if packet.kind == SendKind::New {
            return;
        }
        match &mut self.adapter {
            Adapter::Verify { window, .. } => window.push(lost),
            Adapter::Learned { state, .. } => state.push(lost),
            Adapter::Bandit { .. } => {}
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

    fn on_packet_sent(&mut self, _: Instant, packet: &PacketInfo<'_>) {
        self.largest_packet = self.largest_packet.max(packet.bytes as u64);
    }

    fn on_packet_acked(&mut self, _: Instant, packet: &PacketInfo<'_>) {
        self.record_replica(packet, false);
    }

    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, _: LossTrigger) {
        self.bursts.on_lost(now, packet.pn);
        self.record_replica(packet, true);
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
                if let Some((decision, r)) = playing.remove(&lost.id) {
                    learner.outcome(decision, r, false);
                    state.resolved(true);
                }
                let r_max = learner.actions().max(1);
                let observed = state.observe(lost.round, b_max, r_max);
                let r = learner.decide(*decisions, &observed).clamp(1, r_max);
                if let Some(level) = state.levels.get_mut(round_index(lost.round)) {
                    *level = r;
                }
                playing.insert(lost.id, (*decisions, r));
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
                if let Some((decision, r)) = playing.remove(&id) {
                    learner.outcome(decision, r, true);
                    state.resolved(false);
                }
            }
            Adapter::Verify { .. } => {}
        }
    }

    fn on_rtt_update(&mut self, _: Instant, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
    }

    fn on_send_state(&mut self, _: Instant, _: SendState) {}

    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest> {
        if !self.unplaced.is_empty() {
            self.place(now, ctx);
        }
        let id = self.scheduled.take_due(now, ctx.packets_sent)?;
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
        let mut p = Art::new(&ArtConfig::default(), 1);
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
        let art = |params: &str| match format!("art:{params}").parse::<crate::PolicySpec>() {
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
            let mut p = Art::new(&ArtConfig::default(), seed);
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
        let mut p = Art::new(&ArtConfig::default(), 3);
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
            ..ArtConfig::default()
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
            let mut p = Art::new(&ArtConfig::default(), seed);
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
            ..ArtConfig::default()
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
                ..ArtConfig::default()
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
                ..ArtConfig::default()
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
        outcomes: Vec<(u64, u32, bool)>,
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
        fn outcome(&mut self, decision: u64, r: u32, recovered: bool) {
            if let Ok(mut rec) = self.0.lock() {
                rec.outcomes.push((decision, r, recovered));
            }
        }
        fn actions(&self) -> u32 {
            4
        }
    }

    #[test]
    fn learned_rounds_report_outcomes_and_observe_the_state() {
        let rec = std::sync::Arc::new(std::sync::Mutex::new(Recorder::default()));
        let cfg = SchedulerConfig {
            enabled: false,
            ..SchedulerConfig::default()
        };
        let mut p = Art::new_learned(Box::new(Shared(rec.clone())), cfg, 1);
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
        assert_eq!(outcomes, vec![(0, 2, false), (1, 2, true), (2, 2, true)]);
        assert_eq!(states.len(), 3);
        let first = states[0];
        assert!((first[0] - 0.7).abs() < 1e-6, "{first:?}");
        assert!((first[1] - 0.07).abs() < 1e-6, "{first:?}");
        assert_eq!(first[2], 0.0); // round 1
        assert!((first[3] - 0.25).abs() < 1e-6); // level 1 of r_max 4
        assert_eq!(first[5], 0.0); // no round resolved yet
                                   // The third decision is round 2, after one lost round.
        let third = states[2];
        assert!((third[2] - 1.0 / 15.0).abs() < 1e-6, "{third:?}");
        assert!(
            (third[5] - ROUND_LOSS_WEIGHT as f32).abs() < 1e-6,
            "{third:?}"
        );
        // Round 1's level is now 2 of 4.
        assert!((states[1][3] - 0.5).abs() < 1e-6, "{:?}", states[1]);
    }

    #[test]
    fn bandit_rounds_are_rewarded_and_forgotten() {
        let cfg = ArtMabConfig {
            algo: BanditAlgo::Ucb,
            scheduler: SchedulerConfig {
                enabled: false,
                ..SchedulerConfig::default()
            },
            ..ArtMabConfig::default()
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
