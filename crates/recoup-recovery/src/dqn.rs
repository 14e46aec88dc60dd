//! `art-dqn` (ART §8): ART whose Redundancy Adapter is a learned Q-function over R = 1..=r_max.
//! The policy ([`crate::Art`] with a [`RedundancyLearner`]) builds a [`DqnState`] per decision
//! and reports each round's outcome; the learner chooses R. At inference the learner is
//! [`Greedy`] (no exploration, so the same state always gives the same R); the trainer in
//! `recoup-dqn` plugs in its own, exploring learner.
//!
//! ART §8 names the reward's hyperparameter gamma, "the magnitude ratio between rewards and
//! penalties", and defers the rest to its Appendix A, which our copy of the paper lacks. The
//! authors' code settles it (`reading=code`, the default); `reading=text` keeps the reward we
//! had chosen before reading it, in `art-mab`'s form. See [`reward`].

use std::fmt;
use std::sync::Arc;

use crate::config::ArtReading;
use crate::qnet::{DqnState, QNet};

/// ART §8.1: the gamma at which ART-DQN's N_max matched ART (the paper's best setting); in
/// quic-art, the penalty factor 1.05 (lsquic_send_ctl.c:1316-1322 on branch `add_rl_to_art`).
pub const DEFAULT_GAMMA: f64 = 1.05;

/// Chooses the redundancy level R of each retransmission round, and hears how the round ended.
pub trait RedundancyLearner: fmt::Debug + Send {
    /// R in `1..=actions()` for the round described by `state`. `decision` numbers this
    /// connection's decisions from 0.
    fn decide(&mut self, decision: u64, state: &DqnState) -> u32;

    /// Round `round` (>= 1), chosen by `decision` with redundancy `r`, recovered its data
    /// (`true`: some send was acknowledged) or was lost again (`false`). Rounds whose data is
    /// still in flight at the end of the connection never report.
    fn outcome(&mut self, decision: u64, r: u32, round: u32, recovered: bool);

    /// Largest R this learner chooses.
    fn actions(&self) -> u32;
}

/// Reward of round `round` (>= 1), played with redundancy `r`.
///
/// `reading=code`, quic-art's (lsquic_send_ctl.c:1316-1322 on branch `add_rl_to_art`): 1/(n R)
/// when the round recovers the data, -gamma n R when it is lost again, R the duplicates beyond
/// the retransmission. Every duplicate and every round costs, and a failed round costs more the
/// more it spent.
///
/// `reading=text` (ours, from before quic-art was read; ART §8 defines gamma only as the ratio
/// of rewards to penalties): `gamma^-(R-1)` when the round recovers the data, 0 when it is lost
/// again, R counting the retransmission. Each replica beyond the first divides the reward by
/// gamma, so among levels that recover equally often the cheapest wins; a failed round earns
/// nothing whatever it cost.
#[must_use]
pub fn reward(reading: ArtReading, gamma: f64, r: u32, round: u32, recovered: bool) -> f64 {
    match reading {
        ArtReading::Code => {
            let spent = f64::from(round.max(1)) * f64::from(r.max(1));
            if recovered {
                1.0 / spent
            } else {
                -gamma * spent
            }
        }
        ArtReading::Text if recovered => {
            gamma.powi(-i32::try_from(r.saturating_sub(1)).unwrap_or(i32::MAX))
        }
        ArtReading::Text => 0.0,
    }
}

/// Inference: the network's greedy choice.
#[derive(Clone, Debug)]
pub struct Greedy {
    net: Arc<QNet>,
}

impl Greedy {
    #[must_use]
    pub fn new(net: Arc<QNet>) -> Self {
        Self { net }
    }
}

impl RedundancyLearner for Greedy {
    fn decide(&mut self, _: u64, state: &DqnState) -> u32 {
        self.net.greedy(state.as_slice())
    }

    fn outcome(&mut self, _: u64, _: u32, _: u32, _: bool) {}

    fn actions(&self) -> u32 {
        u32::try_from(self.net.actions()).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_reward_divides_by_gamma_per_extra_replica() {
        let text = |r, round, recovered| reward(ArtReading::Text, 1.05, r, round, recovered);
        assert_eq!(text(1, 1, true), 1.0);
        assert!((text(3, 1, true) - 1.0 / (1.05 * 1.05)).abs() < 1e-12);
        assert_eq!(text(3, 4, true), text(3, 1, true));
        assert_eq!(text(3, 1, false), 0.0);
        assert_eq!(text(0, 1, true), 1.0);
    }

    #[test]
    fn code_reward_is_quic_arts() {
        let code = |r, round, recovered| reward(ArtReading::Code, 1.05, r, round, recovered);
        assert_eq!(code(1, 1, true), 1.0);
        assert!((code(4, 2, true) - 0.125).abs() < 1e-12);
        assert!((code(4, 2, false) + 1.05 * 8.0).abs() < 1e-12);
        assert!((code(1, 1, false) + 1.05).abs() < 1e-12);
    }
}
