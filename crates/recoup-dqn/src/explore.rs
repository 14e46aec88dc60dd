//! The learner `art-dqn` runs with during training: epsilon-greedy over the acting network's
//! Q-values, logging every decision and its outcome for the replay buffer.

use std::sync::{Arc, Mutex, PoisonError};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::dqn::{reward, RedundancyLearner};
use recoup_recovery::qnet::{DqnState, QNet};
use recoup_recovery::ArtReading;

/// One decision of an episode: the state, the R chosen and, once the round resolved, its reward.
#[derive(Clone, Debug)]
pub struct Decision {
    pub state: DqnState,
    pub r: u32,
    pub reward: Option<f32>,
}

/// The decisions of the episodes' connections, shared with the trainer.
pub type EpisodeLog = Arc<Mutex<Vec<Decision>>>;

#[derive(Debug)]
pub struct Explorer {
    net: Arc<QNet>,
    /// The reading whose reward the rounds earn (the network's).
    reading: ArtReading,
    epsilon: f64,
    gamma: f64,
    rng: ChaCha8Rng,
    log: EpisodeLog,
    /// Index in `log` of this connection's decision 0.
    base: usize,
}

impl Explorer {
    #[must_use]
    pub fn new(net: Arc<QNet>, epsilon: f64, gamma: f64, seed: u64, log: EpisodeLog) -> Self {
        let base = log.lock().unwrap_or_else(PoisonError::into_inner).len();
        Self {
            reading: net.reading(),
            net,
            epsilon,
            gamma,
            rng: ChaCha8Rng::seed_from_u64(seed),
            log,
            base,
        }
    }
}

impl RedundancyLearner for Explorer {
    fn decide(&mut self, _: u64, state: &DqnState) -> u32 {
        let r = if self.rng.gen::<f64>() < self.epsilon {
            self.rng.gen_range(1..=self.actions())
        } else {
            self.net.greedy(state.as_slice())
        };
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Decision {
                state: *state,
                r,
                reward: None,
            });
        r
    }

    fn outcome(&mut self, decision: u64, r: u32, round: u32, recovered: bool) {
        let Ok(i) = usize::try_from(decision) else {
            return;
        };
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(d) = log.get_mut(self.base.saturating_add(i)) {
            // f32 is the network's precision.
            d.reward = Some(reward(self.reading, self.gamma, r, round, recovered) as f32);
        }
    }

    fn actions(&self) -> u32 {
        u32::try_from(self.net.actions()).unwrap_or(u32::MAX)
    }
}
