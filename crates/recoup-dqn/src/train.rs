//! Training `art-dqn` in the simulator (ART §8): episodes are simulated runs in which the policy
//! explores epsilon-greedily; every resolved round becomes a transition (state, R, reward, next
//! state) in a replay buffer, and a DQN with a target network learns Q(state, R) from it.
//!
//! A run of training is a pure function of its [`TrainConfig`]: episodes are simulated runs
//! (deterministic for their seed), and every random draw (weights, exploration, replay
//! sampling) comes from generators seeded by `seed`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use candle_core::{Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::dqn::DEFAULT_GAMMA;
use recoup_recovery::qnet::{state_features, DqnState, QNet, MAX_ACTIONS};
use recoup_recovery::{Art, ArtReading, PolicySpec, SchedulerConfig};
use recoup_sim::run::run_one_with_policy;
use recoup_sim::scenario::{load_str, PolicyEntry, Scenario};
use recoup_transport::PolicyFactory;

use crate::error::Error;
use crate::explore::{Decision, EpisodeLog, Explorer};
use crate::net::{states, Mlp};

/// The built-in training scenarios (ours, after ART §8.1's setup: one path, loss from 1 to
/// 10 %): a 4 Mbit/s live stream and a 2 MB file over 60 ms RTT and 12 Mbit/s, with random
/// loss of 1, 5 and 10 % and Gilbert-Elliott bursts at 5 %. Episodes cycle through the points.
pub const DEFAULT_SCENARIOS: [&str; 2] = [
    r#"
name = "train-dqn-live"
duration = "8s"
[path]
rtt = "60ms"
rate = "12Mbps"
queue = "droptail packets=100"
[path.down]
loss = "crn bernoulli 1%"
[app]
kind = "live"
bitrate = "4Mbps"
fps = 30
[transport]
cc = "bbr"
[sweep]
"path.down.loss" = ["crn bernoulli 1%", "crn bernoulli 5%", "crn bernoulli 10%", "crn gemodel 2.632% 50% 100%"]
"#,
    r#"
name = "train-dqn-file"
duration = "30s"
[path]
rtt = "60ms"
rate = "12Mbps"
queue = "droptail packets=100"
[path.down]
loss = "crn bernoulli 1%"
[app]
kind = "file"
size = "2MB"
count = 1
[transport]
cc = "bbr"
[sweep]
"path.down.loss" = ["crn bernoulli 1%", "crn bernoulli 5%", "crn bernoulli 10%", "crn gemodel 2.632% 50% 100%"]
"#,
];

/// What a training run does; `Default` holds our defaults (EXPERIMENTS.md "ART-DQN").
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// The reading the network is for: its state, what R counts and the reward
    /// (`art-dqn:reading=`).
    pub reading: ArtReading,
    pub episodes: u32,
    pub seed: u64,
    /// ART §8's gamma in the reward ([`recoup_recovery::dqn::reward`]): quic-art's penalty
    /// factor under `reading=code`.
    pub gamma: f64,
    /// The DQN's discount of future rewards (not ART's gamma).
    pub discount: f32,
    pub hidden: [usize; 2],
    /// R = 1..=actions.
    pub actions: usize,
    pub learning_rate: f64,
    pub batch: usize,
    pub replay: usize,
    /// One gradient step per this many new transitions.
    pub train_every: usize,
    /// Gradient steps between copies of the online network into the target network.
    pub target_sync: u32,
    pub epsilon_start: f64,
    pub epsilon_end: f64,
    /// Fraction of the episodes over which epsilon falls linearly to `epsilon_end`.
    pub explore_fraction: f64,
    /// Episodes cycle through these.
    pub scenarios: Vec<Scenario>,
}

impl TrainConfig {
    /// The defaults with the built-in scenarios.
    pub fn with_default_scenarios() -> Result<Self, Error> {
        let mut scenarios = Vec::new();
        for text in DEFAULT_SCENARIOS {
            scenarios.extend(
                load_str(text, "train-dqn (built in)", None, "train-dqn")
                    .map_err(Error::Scenario)?,
            );
        }
        Ok(Self {
            reading: ArtReading::default(),
            episodes: 64,
            seed: 1,
            gamma: DEFAULT_GAMMA,
            discount: 0.5,
            hidden: [64, 64],
            actions: 10,
            learning_rate: 1e-3,
            batch: 64,
            replay: 20_000,
            train_every: 2,
            target_sync: 200,
            epsilon_start: 1.0,
            epsilon_end: 0.05,
            explore_fraction: 0.6,
            scenarios,
        })
    }

    fn check(&self) -> Result<(), Error> {
        let bad = |what: &str| Err(Error::Config(what.to_owned()));
        if self.episodes == 0 {
            return bad("episodes must be at least 1");
        }
        if self.scenarios.is_empty() {
            return bad("no training scenario");
        }
        if !(1..=MAX_ACTIONS).contains(&self.actions) {
            return bad("actions (r_max) must be in 1..=64");
        }
        if !(self.gamma >= 1.0 && self.gamma.is_finite()) {
            return bad("gamma must be a finite number >= 1");
        }
        if !(0.0..1.0).contains(&self.discount) {
            return bad("discount must be in [0, 1)");
        }
        if self.batch == 0 || self.replay < self.batch || self.train_every == 0 {
            return bad("batch >= 1, replay >= batch and train_every >= 1 are required");
        }
        if self.hidden.contains(&0) {
            return bad("hidden layers need at least one unit");
        }
        Ok(())
    }

    fn epsilon(&self, episode: u32) -> f64 {
        let span = (f64::from(self.episodes) * self.explore_fraction).max(1.0);
        let t = (f64::from(episode) / span).min(1.0);
        self.epsilon_start + t * (self.epsilon_end - self.epsilon_start)
    }

    fn metadata(&self) -> BTreeMap<String, String> {
        [
            ("trainer", "recoup train-dqn".to_owned()),
            ("gamma", self.gamma.to_string()),
            ("discount", self.discount.to_string()),
            ("episodes", self.episodes.to_string()),
            ("seed", self.seed.to_string()),
            ("learning_rate", self.learning_rate.to_string()),
            ("batch", self.batch.to_string()),
            (
                "scenarios",
                self.scenarios
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// What one episode did, for the progress display.
#[derive(Clone, Debug)]
pub struct EpisodeReport {
    pub episode: u32,
    pub scenario: String,
    pub epsilon: f64,
    pub decisions: usize,
    /// Mean reward of the episode's resolved rounds.
    pub mean_reward: Option<f64>,
    /// Mean R chosen.
    pub mean_r: Option<f64>,
    /// Mean training loss of the episode's gradient steps.
    pub loss: Option<f32>,
}

#[derive(Clone, Copy, Debug)]
struct Transition {
    state: DqnState,
    action: u32,
    reward: f32,
    next: DqnState,
}

/// Trains and returns the network; `on_episode` hears after each episode.
pub fn train(cfg: &TrainConfig, mut on_episode: impl FnMut(&EpisodeReport)) -> Result<QNet, Error> {
    cfg.check()?;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let inputs = state_features(cfg.reading).len();
    let online = Mlp::init(inputs, cfg.hidden, cfg.actions, &mut rng)?;
    let target = Mlp::init(inputs, cfg.hidden, cfg.actions, &mut rng)?;
    target.assign(&online)?;
    let mut opt = AdamW::new(
        online.vars(),
        ParamsAdamW {
            lr: cfg.learning_rate,
            weight_decay: 0.0,
            ..ParamsAdamW::default()
        },
    )?;
    let mut replay: VecDeque<Transition> = VecDeque::with_capacity(cfg.replay);
    let mut steps: u32 = 0;
    let mut pending_steps = 0usize;
    let policy = PolicyEntry {
        label: "art-dqn".to_owned(),
        name: "art-dqn".to_owned(),
        params: String::new(),
        spec: PolicySpec::Arq,
        oracle: false,
    };
    for episode in 0..cfg.episodes {
        let scenario = &cfg.scenarios[episode as usize % cfg.scenarios.len()];
        let epsilon = cfg.epsilon(episode);
        let acting = Arc::new(online.to_qnet(cfg.reading, BTreeMap::new())?);
        let log: EpisodeLog = Arc::new(Mutex::new(Vec::new()));
        let explore_seed = rng.gen::<u64>();
        let factory = {
            let (log, gamma, reading) = (Arc::clone(&log), cfg.gamma, cfg.reading);
            PolicyFactory::new(move |_| {
                let learner = Explorer::new(
                    Arc::clone(&acting),
                    epsilon,
                    gamma,
                    explore_seed,
                    Arc::clone(&log),
                );
                Box::new(Art::new_learned(
                    Box::new(learner),
                    reading,
                    SchedulerConfig::default(),
                    explore_seed,
                ))
            })
        };
        let sim_seed = cfg
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add(u64::from(episode));
        run_one_with_policy(scenario, &policy, sim_seed, factory).map_err(Error::Run)?;
        let decisions: Vec<Decision> =
            std::mem::take(&mut *log.lock().unwrap_or_else(PoisonError::into_inner));
        let mut new = 0usize;
        for pair in decisions.windows(2) {
            let (d, next) = (&pair[0], &pair[1]);
            let Some(reward) = d.reward else { continue };
            if replay.len() == cfg.replay {
                replay.pop_front();
            }
            replay.push_back(Transition {
                state: d.state,
                action: d.r,
                reward,
                next: next.state,
            });
            new += 1;
        }
        pending_steps += new;
        let mut losses = Vec::new();
        while pending_steps >= cfg.train_every && replay.len() >= cfg.batch {
            pending_steps -= cfg.train_every;
            losses.push(step(cfg, &online, &target, &mut opt, &replay, &mut rng)?);
            steps = steps.wrapping_add(1);
            if steps % cfg.target_sync == 0 {
                target.assign(&online)?;
            }
        }
        let rewards: Vec<f64> = decisions
            .iter()
            .filter_map(|d| d.reward.map(f64::from))
            .collect();
        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let rs: Vec<f64> = decisions.iter().map(|d| f64::from(d.r)).collect();
        on_episode(&EpisodeReport {
            episode,
            scenario: scenario.name.clone(),
            epsilon,
            decisions: decisions.len(),
            mean_reward: mean(&rewards),
            mean_r: mean(&rs),
            loss: (!losses.is_empty()).then(|| losses.iter().sum::<f32>() / losses.len() as f32),
        });
    }
    online.to_qnet(cfg.reading, cfg.metadata())
}

/// One gradient step on a minibatch: minimize (Q(s, a) - (r + discount max_a' Q_target(s', a')))^2.
fn step(
    cfg: &TrainConfig,
    online: &Mlp,
    target: &Mlp,
    opt: &mut AdamW,
    replay: &VecDeque<Transition>,
    rng: &mut ChaCha8Rng,
) -> Result<f32, Error> {
    let batch: Vec<&Transition> = (0..cfg.batch)
        .filter_map(|_| replay.get(rng.gen_range(0..replay.len())))
        .collect();
    let s: Vec<DqnState> = batch.iter().map(|t| t.state).collect();
    let next: Vec<DqnState> = batch.iter().map(|t| t.next).collect();
    let actions: Vec<u32> = batch.iter().map(|t| t.action.saturating_sub(1)).collect();
    let rewards: Vec<f32> = batch.iter().map(|t| t.reward).collect();
    let n = batch.len();
    let dev = Device::Cpu;
    let actions = Tensor::from_vec(actions, (n, 1), &dev)?;
    let q = online
        .forward(&states(&s)?)?
        .gather(&actions, 1)?
        .squeeze(1)?;
    let q_next = target.forward(&states(&next)?)?.max(1)?.detach();
    let y = (Tensor::from_vec(rewards, n, &dev)? + q_next.affine(f64::from(cfg.discount), 0.0)?)?;
    let loss = candle_nn::loss::mse(&q, &y)?;
    opt.backward_step(&loss)?;
    Ok(loss.to_scalar::<f32>()?)
}
