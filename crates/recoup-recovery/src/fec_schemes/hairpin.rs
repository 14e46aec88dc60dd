//! Hairpin (Meng et al., NSDI 2024): FEC over retransmissions, sized by the deadline left.
//!
//! Hairpin treats a frame as rounds of transmission: the first round sends the frame's packets,
//! each later round re-sends what is still missing, and every round may add Reed-Solomon repair
//! packets so that any `n` of the `n + m` packets sent recover the `n` missing ones. How many
//! rounds remain before the frame's deadline depends on the RTT, so a round with many rounds left
//! sends little redundancy and the last round before the deadline sends much. The number of repair
//! packets per round minimizes the expected deadline miss plus λ times the expected bandwidth
//! (packets sent per media packet of the frame), over every policy for the rounds left
//! (dynamic programming). λ is the paper's trade-off weight: 1e-4 by default, 1e-1 for the
//! low-cost and 1e-7 for the high-cost setting (AutoRec §VII, Hairpin_LC / Hairpin_HC).
//!
//! Losses are independent with the measured rate. The rounds left are counted as the authors'
//! simulator counts them (`hkust-spark/ns3-sparkrtc`, [`RoundCount::Feedback`]): with
//! `rtt' = srtt + rttvar`, `floor((left - rtt') / rtt')`, at least the round being sent. What
//! is ours (the paper's text was not in our sources): the bandwidth term in packets per media
//! packet and the exact dynamic program in place of their precomputed table. The other readings
//! ([`HairpinConfig`]'s `rounds`, `max_rounds`, `cost`, `loss`) are there for the ablation of
//! EXPERIMENTS.md (Fig. 19), which found the round count to decide the misses.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use recoup_time::Instant;

pub use super::config::{CostTerm, LossEstimate, RoundCount};

use super::config::HairpinConfig;
use super::frames::{repair_windows, FrameCollector, LossFilter};
use crate::api::{PacketInfo, RttSample, SendKind};
use crate::fec::{FecContext, FecScheme, RepairRequest, SourcePacket};

/// Hairpin's trade-off weights as AutoRec §VII names them.
pub const LAMBDA_DEFAULT: f64 = 1e-4;
pub const LAMBDA_LOW_COST: f64 = 1e-1;
pub const LAMBDA_HIGH_COST: f64 = 1e-7;

/// Most rounds a plan looks ahead: far past where the miss probability stops moving at the loss
/// rates of interest (the reference simulator's table stops at 15).
pub const MAX_ROUNDS: u32 = 16;

/// Rounds left before the deadline, the round being sent included, counted as `model` says;
/// 0 when this round's packets can no longer arrive (`deadline_left < rtt/2`). `rttvar` is the
/// RTT's mean deviation (RFC 9002 §5.3), which [`RoundCount::Feedback`] adds to the RTT.
#[must_use]
pub fn rounds_left(
    deadline_left: Duration,
    rtt: Duration,
    rttvar: Duration,
    model: RoundCount,
) -> u32 {
    let half = rtt / 2;
    if deadline_left < half {
        return 0;
    }
    let (spare, step) = match model {
        RoundCount::Arrival => (deadline_left - half, rtt),
        // Every round takes a pessimistic RTT, and one more is kept in reserve.
        RoundCount::Feedback => {
            let step = rtt + rttvar;
            (deadline_left.saturating_sub(step), step)
        }
    };
    if step.is_zero() {
        return MAX_ROUNDS;
    }
    let extra = spare.as_nanos() / step.as_nanos();
    let later = u32::try_from(extra).unwrap_or(MAX_ROUNDS);
    match model {
        RoundCount::Arrival => later.saturating_add(1),
        RoundCount::Feedback => later.max(1),
    }
    .min(MAX_ROUNDS)
}

/// The decision for one round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundPlan {
    /// Repair packets to add to the `missing` packets of this round.
    pub repair: usize,
    /// Expected deadline miss probability of the frame under the plan.
    pub miss: f64,
    /// Expected packets sent from this round on, per media packet of the frame.
    pub bandwidth: f64,
}

/// How many repair packets to send with `missing` packets (of a frame of `frame_packets`) when
/// `rounds` rounds remain, at loss rate `loss` and weight `lambda`, the bandwidth charged as
/// `cost` says; `first` marks the frame's first round, whose `missing` packets are the media
/// packets themselves rather than redundancy. At most `max_repair(missing)` = 2·missing + 2
/// repair packets are considered per round (a search bound: past it the miss probability is
/// below 1e-7 for loss ≤ 50 %).
///
/// With [`CostTerm::Share`] the objective is not a sum over rounds; each round's choice is
/// scored with the share of the packets it and the later rounds (as planned) add, which ignores
/// what earlier rounds already sent (an approximation for the ablation).
#[must_use]
pub fn plan_round(
    missing: usize,
    frame_packets: usize,
    rounds: u32,
    loss: f64,
    lambda: f64,
    cost: CostTerm,
    first: bool,
) -> RoundPlan {
    if missing == 0 {
        return RoundPlan {
            repair: 0,
            miss: 0.0,
            bandwidth: 0.0,
        };
    }
    if rounds == 0 {
        return RoundPlan {
            repair: 0,
            miss: 1.0,
            bandwidth: 0.0,
        };
    }
    let p = loss.clamp(0.0, 1.0);
    let scale = 1.0 / frame_packets.max(missing).max(1) as f64;
    // Bandwidth as the objective charges it; `media` is what of `bw` is not redundancy.
    let charge = |bw: f64, media: f64| match cost {
        CostTerm::Packets => bw,
        CostTerm::Share => {
            let extra = (bw - media).max(0.0);
            extra / (1.0 + extra)
        }
    };
    // value[n] = (miss, bandwidth) with r-1 rounds left; computed bottom-up to `rounds`.
    let depth = rounds.min(MAX_ROUNDS);
    let mut next: Vec<(f64, f64)> = (0..=missing)
        .map(|n| if n == 0 { (0.0, 0.0) } else { (1.0, 0.0) })
        .collect();
    let mut plan = RoundPlan {
        repair: 0,
        miss: 1.0,
        bandwidth: 0.0,
    };
    for r in 1..=depth {
        let mut cur = vec![(0.0, 0.0); missing + 1];
        for n in 1..=missing {
            let mut best: Option<(f64, usize, f64, f64)> = None;
            for m in 0..=max_repair(n) {
                let sent = n + m;
                let pmf = binomial_pmf(sent, 1.0 - p);
                let (mut miss, mut bw) = (0.0, sent as f64 * scale);
                for (k, pk) in pmf.iter().enumerate().take(n) {
                    miss += pk * next[n - k].0;
                    bw += pk * next[n - k].1;
                }
                let media = if first && r == depth {
                    n as f64 * scale
                } else {
                    0.0
                };
                let j = miss + lambda * charge(bw, media);
                if best.is_none_or(|b| j < b.0 - 1e-15) {
                    best = Some((j, m, miss, bw));
                }
            }
            let (_, m, miss, bw) = best.unwrap_or((1.0, 0, 1.0, 0.0));
            cur[n] = (miss, bw);
            if r == depth && n == missing {
                plan = RoundPlan {
                    repair: m,
                    miss,
                    bandwidth: bw,
                };
            }
        }
        next = cur;
    }
    plan
}

fn max_repair(n: usize) -> usize {
    2 * n + 2
}

/// P(k of `n` arrive), k = 0..=n, each arriving with probability `q`.
fn binomial_pmf(n: usize, q: f64) -> Vec<f64> {
    let mut pmf = vec![0.0; n + 1];
    pmf[0] = 1.0;
    // Build up one trial at a time: stable for any q, no factorials.
    for i in 1..=n {
        for k in (1..=i).rev() {
            pmf[k] = pmf[k] * (1.0 - q) + pmf[k - 1] * q;
        }
        pmf[0] *= 1.0 - q;
    }
    pmf
}

/// Rounds assumed when a stream has no deadline (a transfer, not a frame): enough that the
/// first rounds carry little redundancy.
const ROUNDS_WITHOUT_DEADLINE: u32 = MAX_ROUNDS;
/// Streams without a deadline whose sizes are remembered (oldest forgotten first).
const MAX_UNDATED_STREAMS: usize = 1024;

/// The Hairpin scheme: repair symbols over each round of a frame (its first transmissions, then
/// each batch of retransmissions), as many as [`plan_round`] picks for the rounds left.
#[derive(Debug)]
pub struct HairpinFec {
    config: HairpinConfig,
    frames: FrameCollector,
    loss: LossFilter,
    /// Smoothed RTT and its mean deviation.
    rtt: Option<(Duration, Duration)>,
    /// Per stream (frame): first-transmission packets and deadline.
    sizes: BTreeMap<u64, (usize, Option<Instant>)>,
    /// Retransmissions and copies sent since the last poll, per stream.
    pending: BTreeMap<u64, (Vec<u64>, Option<Instant>)>,
    ready: VecDeque<RepairRequest>,
}

impl HairpinFec {
    #[must_use]
    pub fn new(config: HairpinConfig) -> Self {
        Self {
            config,
            frames: FrameCollector::default(),
            loss: LossFilter::default(),
            rtt: None,
            sizes: BTreeMap::new(),
            pending: BTreeMap::new(),
            ready: VecDeque::new(),
        }
    }

    fn plan(
        &mut self,
        now: Instant,
        packets: &[u64],
        frame: usize,
        deadline: Option<Instant>,
        first: bool,
    ) {
        let c = self.config;
        let rounds = match (deadline, self.rtt) {
            (None, _) => ROUNDS_WITHOUT_DEADLINE,
            (Some(d), Some((rtt, var))) => rounds_left(d - now, rtt, var, c.rounds),
            // No RTT sample yet: this round may be the only one.
            (Some(d), None) => u32::from(d > now),
        };
        if rounds == 0 {
            return;
        }
        let loss = match c.loss {
            LossEstimate::Mean => self.loss.mean(),
            LossEstimate::Max => self.loss.loss(),
        };
        let plan = plan_round(
            packets.len(),
            frame,
            rounds.min(c.max_rounds),
            loss,
            c.lambda,
            c.cost,
            first,
        );
        self.ready.extend(repair_windows(packets, plan.repair));
    }

    fn forget_old(&mut self, now: Instant) {
        self.sizes.retain(|_, (_, d)| d.is_none_or(|d| d >= now));
        let undated = self.sizes.values().filter(|(_, d)| d.is_none()).count();
        if undated > MAX_UNDATED_STREAMS {
            let old: Vec<u64> = self
                .sizes
                .iter()
                .filter(|(_, (_, d))| d.is_none())
                .take(undated - MAX_UNDATED_STREAMS)
                .map(|(s, _)| *s)
                .collect();
            for s in old {
                self.sizes.remove(&s);
            }
        }
    }
}

impl FecScheme for HairpinFec {
    fn name(&self) -> &'static str {
        "hairpin"
    }

    fn on_source_sent(&mut self, now: Instant, packet: &SourcePacket<'_>) {
        let Some(stream) = packet.ranges.first().map(|r| r.range.stream) else {
            return;
        };
        if packet.kind == SendKind::New {
            let e = self.sizes.entry(stream).or_insert((0, packet.deadline));
            e.0 += 1;
            if let Some(frame) = self.frames.on_source(packet) {
                let n = frame.packets.len();
                self.plan(now, &frame.packets, n, frame.deadline, true);
            }
        } else {
            let e = self
                .pending
                .entry(stream)
                .or_insert_with(|| (Vec::new(), packet.deadline));
            e.0.push(packet.pn);
        }
    }

    fn on_packet_acked(&mut self, now: Instant, _packet: &PacketInfo<'_>, _repair: bool) {
        self.loss.record(now, false);
    }

    fn on_packet_lost(&mut self, now: Instant, _packet: &PacketInfo<'_>, _repair: bool) {
        self.loss.record(now, true);
    }

    fn on_rtt_update(&mut self, _now: Instant, rtt: &RttSample) {
        self.rtt = Some((rtt.smoothed, rtt.var));
    }

    fn poll_repair(&mut self, now: Instant, _ctx: &FecContext) -> Option<RepairRequest> {
        // The transport sends retransmissions before asking: what is pending is this round.
        for (stream, (pns, deadline)) in std::mem::take(&mut self.pending) {
            let (frame, known) = self
                .sizes
                .get(&stream)
                .copied()
                .unwrap_or((pns.len(), deadline));
            self.plan(now, &pns, frame.max(pns.len()), known.or(deadline), false);
        }
        self.forget_old(now);
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn rounds_follow_the_deadline() {
        let arrival = |left, rtt| rounds_left(ms(left), ms(rtt), ms(0), RoundCount::Arrival);
        // 100 ms deadline, 30 ms RTT: arrivals at 15, 45, 75 ms fit, 105 does not.
        assert_eq!(arrival(100, 30), 3);
        assert_eq!(arrival(14, 30), 0);
        assert_eq!(arrival(15, 30), 1);
        assert_eq!(arrival(45, 30), 2);
        // Feedback: rtt' = 30 + 3 ms, floor((100 - 33) / 33) = 2 rounds in all.
        let feedback =
            |left, rtt, var| rounds_left(ms(left), ms(rtt), ms(var), RoundCount::Feedback);
        assert_eq!(feedback(100, 30, 3), 2);
        assert_eq!(feedback(99, 30, 3), 2);
        assert_eq!(feedback(98, 30, 3), 1);
        // Less than one RTT left: this round is the last one, while it can still arrive.
        assert_eq!(feedback(20, 30, 3), 1);
        assert_eq!(feedback(14, 30, 3), 0);
        // A zero RTT and far deadlines are capped.
        assert_eq!(
            rounds_left(ms(10), ms(0), ms(0), RoundCount::Arrival),
            MAX_ROUNDS
        );
        assert_eq!(feedback(10_000, 30, 0), MAX_ROUNDS);
    }

    #[test]
    fn binomial_sums_to_one() {
        let pmf = binomial_pmf(10, 0.9);
        assert!((pmf.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((pmf[10] - 0.9f64.powi(10)).abs() < 1e-12);
    }

    #[test]
    fn last_round_hand_computed() {
        // One packet, one round left, 10 % loss. m repair packets: miss = 0.1^(m+1),
        // bandwidth = m+1 per packet. lambda = 1e-4: J(0) = 0.1 + 1e-4, J(1) = 0.01 + 2e-4,
        // J(2) = 0.001 + 3e-4, J(3) = 1e-4 + 4e-4, J(4) = 1e-5 + 5e-4: the minimum is m = 3.
        let p = plan_round(1, 1, 1, 0.1, LAMBDA_DEFAULT, CostTerm::Packets, true);
        assert_eq!(p.repair, 3);
        assert!((p.miss - 1e-4).abs() < 1e-12);
        assert!((p.bandwidth - 4.0).abs() < 1e-12);
        // lambda = 0.1: J(0) = 0.2, J(1) = 0.21: no repair.
        assert_eq!(
            plan_round(1, 1, 1, 0.1, LAMBDA_LOW_COST, CostTerm::Packets, true).repair,
            0
        );
    }

    #[test]
    fn share_charges_the_redundant_share() {
        // One packet, one round, 10 % loss, lambda = 0.1, charged as the share m / (1 + m):
        // J(0) = 0.1, J(1) = 0.01 + 0.05 = 0.06, J(2) = 0.001 + 0.0667: one repair, where
        // packets per media packet (J(0) = 0.2, J(1) = 0.21) sends none.
        let share = plan_round(1, 1, 1, 0.1, LAMBDA_LOW_COST, CostTerm::Share, true);
        assert_eq!(share.repair, 1);
        assert!((share.miss - 0.01).abs() < 1e-12);
        // In a retransmission round every packet is redundancy, share (1 + m) / (2 + m), whose
        // step shrinks as m grows: J(0) = 0.1 + 0.05, J(1) = 0.01 + 0.0667 = 0.0767,
        // J(2) = 0.001 + 0.075 = 0.076, J(3) = 0.0001 + 0.08: two repairs.
        let later = plan_round(1, 1, 1, 0.1, LAMBDA_LOW_COST, CostTerm::Share, false);
        assert_eq!(later.repair, 2);
    }

    #[test]
    fn the_retransmission_round_is_the_last_by_feedback_not_by_arrival() {
        // Fig. 19's call: srtt 34 ms, rttvar 2 ms, a retransmission 40 ms into a 100 ms
        // deadline. Arrival counts two rounds (arrivals at 57 and 91 ms), so it keeps repair
        // back for a round that loss detection (1-1.6 srtt) makes too late; feedback counts
        // this one only and protects it fully.
        let left = ms(60);
        let arrival = rounds_left(left, ms(34), ms(2), RoundCount::Arrival);
        let feedback = rounds_left(left, ms(34), ms(2), RoundCount::Feedback);
        assert_eq!((arrival, feedback), (2, 1));
        let plan = |rounds| plan_round(2, 7, rounds, 0.1, LAMBDA_DEFAULT, CostTerm::Packets, false);
        assert!(plan(feedback).repair > plan(arrival).repair);
        assert!(plan(feedback).miss < 1e-3, "{:?}", plan(feedback));
    }

    #[test]
    fn more_rounds_left_less_redundancy_now() {
        for lambda in [LAMBDA_LOW_COST, LAMBDA_DEFAULT, LAMBDA_HIGH_COST] {
            let mut last = usize::MAX;
            for rounds in 1..=4 {
                let p = plan_round(10, 10, rounds, 0.05, lambda, CostTerm::Packets, true);
                assert!(p.repair <= last, "lambda {lambda} rounds {rounds}: {p:?}");
                last = p.repair;
            }
        }
        // The settings order cost and miss: HC sends most, misses least.
        let lc = plan_round(10, 10, 2, 0.05, LAMBDA_LOW_COST, CostTerm::Packets, true);
        let d = plan_round(10, 10, 2, 0.05, LAMBDA_DEFAULT, CostTerm::Packets, true);
        let hc = plan_round(10, 10, 2, 0.05, LAMBDA_HIGH_COST, CostTerm::Packets, true);
        assert!(lc.bandwidth <= d.bandwidth && d.bandwidth <= hc.bandwidth);
        assert!(lc.miss >= d.miss && d.miss >= hc.miss);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(
            plan_round(0, 10, 3, 0.1, LAMBDA_DEFAULT, CostTerm::Packets, true).repair,
            0
        );
        let none = plan_round(5, 10, 0, 0.1, LAMBDA_DEFAULT, CostTerm::Packets, true);
        assert_eq!((none.repair, none.miss), (0, 1.0));
        // No loss: nothing to add.
        assert_eq!(
            plan_round(5, 10, 3, 0.0, LAMBDA_HIGH_COST, CostTerm::Packets, true).repair,
            0
        );
    }
}
