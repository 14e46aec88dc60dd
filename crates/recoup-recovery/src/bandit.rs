//! The multi-armed bandit of `art-mab` (ART §8, MAB-EG and MAB-UCB): arms are redundancy levels
//! R = 1..=r_max, one pull per retransmission round.
//!
//! Two rewards, one per reading of ART ([`crate::ArtReading`]):
//! - `reading=text` (ART's Appendix A is not in our copy of the paper, so this is ours): a round
//!   whose data gets acknowledged pays eta^-(R-1), a round that is lost again pays 0. The penalty
//!   factor eta > 1 makes each extra replica cost a little, so among arms that recover equally
//!   often the cheapest wins; with eta = 1.01 recovery dominates cost. UCB counts pulls.
//! - `reading=code`, quic-art's (branch `add_multi_armed_bandit` 237dc91,
//!   src/liblsquic/multi_armed_bandit.c:120-163): nothing until the range is recovered; then the
//!   round n of the acknowledged send pays 1/(n R_n) and each earlier round k pays
//!   -eta k R_k, most recent first ([`Bandit::recovered`]). UCB's n_i and N count these reward
//!   updates, not pulls (multi_armed_bandit.c:65-73, 135-137), so an arm never rewarded is
//!   played until its first reward arrives.

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

/// What UCB's n_i and N count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UcbCounts {
    /// Times an arm was chosen (`reading=text`).
    Pulls,
    /// Rewards an arm received (`reading=code`, as quic-art counts `use_number`).
    Rewards,
}

#[derive(Clone, Debug)]
pub struct Bandit {
    algo: BanditAlgo,
    epsilon: f64,
    ucb_c: f64,
    eta: f64,
    counts: UcbCounts,
    arms: Vec<Arm>,
    total_pulls: u64,
    total_rewarded: u64,
}

impl Bandit {
    /// Arms R = 1..=`r_max` (at least one).
    #[must_use]
    pub fn new(
        algo: BanditAlgo,
        r_max: u32,
        epsilon: f64,
        ucb_c: f64,
        eta: f64,
        counts: UcbCounts,
    ) -> Self {
        Self {
            algo,
            epsilon,
            ucb_c,
            eta,
            counts,
            arms: vec![Arm::default(); r_max.max(1) as usize],
            total_pulls: 0,
            total_rewarded: 0,
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
            BanditAlgo::Ucb => {
                let (count, total): (fn(&Arm) -> u64, u64) = match self.counts {
                    UcbCounts::Pulls => (|a| a.pulls, self.total_pulls),
                    UcbCounts::Rewards => (|a| a.rewarded, self.total_rewarded),
                };
                match self.arms.iter().position(|a| count(a) == 0) {
                    Some(unplayed) => unplayed,
                    None => {
                        // total >= 1 here, so ln is finite; precision loss is irrelevant.
                        let ln_t = (total as f64).ln();
                        let c = self.ucb_c;
                        self.best_by(|arm| arm.mean + (c * ln_t / count(arm) as f64).sqrt())
                    }
                }
            }
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

    /// `reading=text`: the round played with redundancy `r` recovered the data (`true`) or was
    /// lost again.
    pub fn reward(&mut self, r: u32, recovered: bool) {
        let value = if recovered {
            self.eta
                .powi(-i32::try_from(r.saturating_sub(1)).unwrap_or(i32::MAX))
        } else {
            0.0
        };
        self.update(r, value);
    }

    /// `reading=code`: a range is recovered by a send of round n, `arms` holding the arm of
    /// each round 1..=n. Round n's arm gets 1/(n R_n), then each earlier round k, from n - 1
    /// down, -eta k R_k (multi_armed_bandit.c:128-161 on branch `add_multi_armed_bandit`).
    pub fn recovered(&mut self, arms: &[u32]) {
        let Some((&r_n, earlier)) = arms.split_last() else {
            return;
        };
        // Rounds and levels are small integers: exact as f64.
        let n = arms.len() as f64;
        self.update(r_n, 1.0 / (n * f64::from(r_n)));
        for (k, &r_k) in earlier.iter().enumerate().rev() {
            let k = (k + 1) as f64;
            self.update(r_k, -self.eta * k * f64::from(r_k));
        }
    }

    /// One more reward `value` for arm `r`, into its running mean.
    fn update(&mut self, r: u32, value: f64) {
        let Some(arm) = (r as usize)
            .checked_sub(1)
            .and_then(|i| self.arms.get_mut(i))
        else {
            return;
        };
        arm.rewarded = arm.rewarded.saturating_add(1);
        arm.mean += (value - arm.mean) / arm.rewarded as f64;
        self.total_rewarded = self.total_rewarded.saturating_add(1);
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
        let mut b = Bandit::new(algo, 10, 0.1, 2.0, 1.01, UcbCounts::Pulls);
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
        let mut b = Bandit::new(
            BanditAlgo::EpsilonGreedy,
            3,
            0.0,
            2.0,
            1.01,
            UcbCounts::Pulls,
        );
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
    fn code_reward_pays_the_recovering_round_and_penalises_the_earlier_ones() {
        let mut b = Bandit::new(BanditAlgo::Ucb, 10, 0.1, 0.5, 1.01, UcbCounts::Rewards);
        // Rounds 1, 2, 3 played with 3, 1 and 2 duplicates; a send of round 3 recovers.
        b.recovered(&[3, 1, 2]);
        let mean = |b: &Bandit, r| b.mean(r).unwrap_or(f64::NAN);
        assert!((mean(&b, 2) - 1.0 / 6.0).abs() < 1e-12);
        assert!((mean(&b, 1) + 1.01 * 2.0).abs() < 1e-12);
        assert!((mean(&b, 3) + 1.01 * 3.0).abs() < 1e-12);
        assert_eq!(b.total_rewarded, 3);
        // Recovered in its first round: 1 / R, nothing else.
        b.recovered(&[4]);
        assert!((mean(&b, 4) - 0.25).abs() < 1e-12);
        // Rounds may repeat an arm: each is one update of its mean.
        b.recovered(&[4, 4]);
        assert!((mean(&b, 4) - (0.25 + 1.0 / 8.0 - 1.01 * 4.0) / 3.0).abs() < 1e-12);
        b.recovered(&[]);
        assert_eq!(b.total_rewarded, 6);
    }

    #[test]
    fn code_ucb_counts_rewards_and_weighs_the_bonus_by_half() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Pulls without rewards: the first unrewarded arm stays first.
        let mut b = Bandit::new(BanditAlgo::Ucb, 2, 0.1, 0.5, 1.01, UcbCounts::Rewards);
        assert_eq!([b.select(&mut rng), b.select(&mut rng)], [1, 1]);
        let mut b = Bandit::new(BanditAlgo::Ucb, 2, 0.1, 0.5, 1.01, UcbCounts::Pulls);
        assert_eq!([b.select(&mut rng), b.select(&mut rng)], [1, 2]);
        // Arm 1: mean 0 over 1 reward; arm 2: mean 0.9 over 9. N = 10.
        let arms = |c: f64| {
            let mut b = Bandit::new(BanditAlgo::Ucb, 2, 0.1, c, 1.01, UcbCounts::Rewards);
            b.update(1, 0.0);
            for _ in 0..9 {
                b.update(2, 0.9);
            }
            b
        };
        // quic-art's bonus 0.5 sqrt(2 ln N / n): arm 1 scores 1.073, arm 2 0.9 + 0.358.
        let bonus = |n: f64| 0.5 * (2.0 * 10f64.ln() / n).sqrt();
        assert!(bonus(1.0) < 0.9 + bonus(9.0));
        assert!(((0.5 * 10f64.ln() / 9.0).sqrt() - bonus(9.0)).abs() < 1e-12);
        assert_eq!(arms(0.5).select(&mut rng), 2);
        // The text reading's c = 2 would explore arm 1.
        assert_eq!(arms(2.0).select(&mut rng), 1);
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
