//! The multi-armed bandit of `art-mab` (ART §8, MAB-EG and MAB-UCB): arms are redundancy levels
//! R = 1..=r_max, one pull per retransmission round.
//!
//! Reward (ART's Appendix A is not in our copy of the paper, so this is ours, stated here): a round
//! whose data gets acknowledged pays eta^-(R-1), a round that is lost again pays 0. The penalty
//! factor eta > 1 makes each extra replica cost a little, so among arms that recover equally
//! often the cheapest wins; with eta = 1.01 recovery dominates cost.

use rand::Rng;

use crate::config::BanditAlgo;

#[derive(Clone, Copy, Debug, Default)]
struct Arm {
    /// Times chosen (UCB's n_i).
    pulls: u64,
    /// Rewards received and their mean.
    rewarded: u64,
    mean: f64,
}

#[derive(Clone, Debug)]
pub struct Bandit {
    algo: BanditAlgo,
    epsilon: f64,
    ucb_c: f64,
    eta: f64,
    arms: Vec<Arm>,
    total_pulls: u64,
}

impl Bandit {
    /// Arms R = 1..=`r_max` (at least one).
    #[must_use]
    pub fn new(algo: BanditAlgo, r_max: u32, epsilon: f64, ucb_c: f64, eta: f64) -> Self {
        Self {
            algo,
            epsilon,
            ucb_c,
            eta,
            arms: vec![Arm::default(); r_max.max(1) as usize],
            total_pulls: 0,
        }
    }

    fn level(index: usize) -> u32 {
        u32::try_from(index).map_or(u32::MAX, |i| i.saturating_add(1))
    }

    /// Choose R for a new round.
    pub fn select(&mut self, rng: &mut impl Rng) -> u32 {
        let index = match self.algo {
            BanditAlgo::EpsilonGreedy => {
                if rng.gen::<f64>() < self.epsilon {
                    rng.gen_range(0..self.arms.len())
                } else {
                    self.best_by(|arm| arm.mean)
                }
            }
            BanditAlgo::Ucb => match self.arms.iter().position(|a| a.pulls == 0) {
                Some(unplayed) => unplayed,
                None => {
                    // total_pulls >= 1 here, so ln is finite; precision loss is irrelevant.
                    let ln_t = (self.total_pulls as f64).ln();
                    let c = self.ucb_c;
                    self.best_by(|arm| arm.mean + (c * ln_t / arm.pulls as f64).sqrt())
                }
            },
        };
        if let Some(arm) = self.arms.get_mut(index) {
            arm.pulls = arm.pulls.saturating_add(1);
        }
        self.total_pulls = self.total_pulls.saturating_add(1);
        Self::level(index)
    }

    /// The arm with the highest score; the smallest R among ties.
    fn best_by(&self, score: impl Fn(&Arm) -> f64) -> usize {
        let mut best = 0;
        let mut best_score = f64::NEG_INFINITY;
        for (i, arm) in self.arms.iter().enumerate() {
            let s = score(arm);
            if s > best_score {
                best = i;
                best_score = s;
            }
        }
        best
    }

    /// The round played with redundancy `r` recovered the data (`true`) or was lost again.
    pub fn reward(&mut self, r: u32, recovered: bool) {
        let value = if recovered {
            self.eta
                .powi(-i32::try_from(r.saturating_sub(1)).unwrap_or(i32::MAX))
        } else {
            0.0
        };
        let Some(arm) = (r as usize)
            .checked_sub(1)
            .and_then(|i| self.arms.get_mut(i))
        else {
            return;
        };
        arm.rewarded = arm.rewarded.saturating_add(1);
        arm.mean += (value - arm.mean) / arm.rewarded as f64;
    }

    /// Mean reward of arm `r`, for tests and traces.
    #[must_use]
    pub fn mean(&self, r: u32) -> Option<f64> {
        (r as usize)
            .checked_sub(1)
            .and_then(|i| self.arms.get(i))
            .map(|a| a.mean)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// Simulated rounds: each of R replicas is lost independently with probability `p`.
    fn converge(algo: BanditAlgo, p: f64, seed: u64) -> u32 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut b = Bandit::new(algo, 10, 0.1, 2.0, 1.01);
        for _ in 0..20_000 {
            let r = b.select(&mut rng);
            let recovered = (0..r).any(|_| rng.gen::<f64>() >= p);
            b.reward(r, recovered);
        }
        (1..=10)
            .max_by(|&a, &c| {
                let (ma, mc) = (b.mean(a).unwrap_or(0.0), b.mean(c).unwrap_or(0.0));
                ma.total_cmp(&mc)
            })
            .unwrap_or(0)
    }

    #[test]
    fn reward_penalises_extra_replicas() {
        let mut b = Bandit::new(BanditAlgo::EpsilonGreedy, 3, 0.0, 2.0, 1.01);
        b.reward(1, true);
        b.reward(3, true);
        b.reward(3, false);
        assert_eq!(b.mean(1), Some(1.0));
        assert!((b.mean(3).unwrap_or(0.0) - 0.5 / (1.01 * 1.01)).abs() < 1e-12);
        // Out-of-range arms are ignored.
        b.reward(0, true);
        b.reward(4, true);
        assert_eq!(b.mean(4), None);
    }

    #[test]
    fn both_algorithms_find_the_cheapest_reliable_level() {
        // At 30 % replica loss: R = 1 pays 0.70, R = 2 pays 0.91/1.01 = 0.90, R = 3 pays
        // 0.973/1.0201 = 0.954, R = 4 pays 0.9919/1.0303 = 0.963, R = 5 pays 0.9976/1.0406 = 0.959.
        for seed in 1..=3 {
            let eg = converge(BanditAlgo::EpsilonGreedy, 0.3, seed);
            let ucb = converge(BanditAlgo::Ucb, 0.3, seed);
            assert!(
                (3..=5).contains(&eg),
                "epsilon-greedy picked {eg} (seed {seed})"
            );
            assert!((3..=5).contains(&ucb), "UCB picked {ucb} (seed {seed})");
        }
        // Without loss the single retransmission is best.
        assert_eq!(converge(BanditAlgo::Ucb, 0.0, 7), 1);
    }
}
