//! Per-packet common random numbers (`crn …` loss specs).
//!
//! The sequential models draw one random number after another, so an extra packet (a copy one
//! policy sends and another does not) shifts the draws of every later packet. Here a packet's
//! fate is a pure function of the element's seed, the packet's key (what it carries: see
//! `recoup_recovery::data_send_key`) and, for models with a hidden state, the time slot it passes
//! in: the state chain steps once per slot of time from the epoch, never per packet. Two runs
//! that send the same data at the same slot give it the same fate, whatever else they send, and a
//! [`LossForecast`] built from the same spec and seed answers exactly what the element will do.

use std::sync::Arc;
use std::time::Duration;

use rand::RngCore;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use super::{load_replay, GeParams, LossSpec};
use crate::error::Error;
use crate::rng::mix64;
use crate::units::Prob;

/// Slot of the state chain when a `crn` spec names none: about one 1500-byte packet at 12 Mbit/s,
/// so a `gemodel`'s per-packet transition probabilities keep roughly their burst lengths.
pub const DEFAULT_CRN_SLOT: Duration = Duration::from_millis(1);

/// Hidden states kept at most (one bool per slot): an hour of 1 ms slots.
const MAX_SLOTS: usize = 3_600_000;

#[derive(Clone, Debug)]
enum Model {
    Bernoulli(Prob),
    /// `gemodel` and `slotted-gemodel`: `bad[i]` is the state of slot `i`.
    Ge {
        params: GeParams,
        bad: Vec<bool>,
        state_rng: Box<ChaCha8Rng>,
    },
    /// A replay file read as one line per slot.
    Replay(Arc<[bool]>),
}

/// The fate function of a `crn` loss element: which packet, sent at which time, is lost.
#[derive(Clone, Debug)]
pub struct LossForecast {
    key_seed: u64,
    slot_ns: u64,
    model: Model,
}

impl LossForecast {
    /// Build from a `crn` spec and the element's random stream (`element_rng(seed, name)`): the
    /// loss element and a forecast built with the same arguments agree on every packet.
    pub fn new(spec: &LossSpec, mut rng: ChaCha8Rng) -> Result<Self, Error> {
        let LossSpec::Crn { slot, model } = spec else {
            return Err(Error::spec(
                "",
                "",
                "a loss forecast needs per-packet draws: write the loss as `crn …`",
            ));
        };
        let key_seed = rng.next_u64();
        let (slot, model) = match model.as_ref() {
            LossSpec::Bernoulli(p) => (*slot, Model::Bernoulli(*p)),
            LossSpec::GilbertElliott(params) => (*slot, ge(*params, &mut rng)),
            // A slotted model keeps its own slot.
            LossSpec::SlottedGe { slot, params } => (*slot, ge(*params, &mut rng)),
            LossSpec::Replay(path) => (*slot, Model::Replay(load_replay(path)?.into())),
            other => {
                return Err(Error::spec(
                    "",
                    "",
                    format!("crn draws support bernoulli, gemodel, slotted-gemodel and replay, not {other:?}"),
                ))
            }
        };
        Ok(Self {
            key_seed,
            slot_ns: recoup_time::saturating_nanos(slot).max(1),
            model,
        })
    }

    /// Whether a packet's fate can depend on when it is sent (the model has a hidden state).
    #[must_use]
    pub fn time_dependent(&self) -> bool {
        !matches!(self.model, Model::Bernoulli(_))
    }

    /// Whether a packet with `key` passing the element at `at` is lost.
    pub fn lost(&mut self, key: u64, at: Instant) -> bool {
        // The upper half of a keyed hash, as netem compares a u32 draw with its probability.
        let rnd = (mix64(self.key_seed, key) >> 32) as u32;
        let slot = at.as_nanos() / self.slot_ns;
        match &mut self.model {
            // sch_netem.c CLG_RANDOM: `q->loss && q->loss >= rnd`.
            Model::Bernoulli(p) => p.0 != 0 && p.0 >= rnd,
            Model::Ge {
                params,
                bad,
                state_rng,
            } => {
                let i = usize::try_from(slot)
                    .unwrap_or(usize::MAX)
                    .min(MAX_SLOTS - 1);
                while bad.len() <= i {
                    // The state a slot starts in is the previous slot's after one transition
                    // (netem's order: the packet sees the state before the transition).
                    let prev = bad.last().copied().unwrap_or(false);
                    let threshold = if prev { params.r } else { params.p };
                    let flip = !bad.is_empty() && state_rng.next_u32() < threshold.0;
                    bad.push(prev ^ flip);
                }
                if bad[i] {
                    rnd > params.h.0
                } else {
                    rnd < params.k1.0
                }
            }
            Model::Replay(pattern) => {
                let len = pattern.len() as u64;
                pattern[usize::try_from(slot % len).unwrap_or(0)]
            }
        }
    }
}

fn ge(params: GeParams, rng: &mut ChaCha8Rng) -> Model {
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    Model::Ge {
        params,
        bad: Vec::new(),
        state_rng: Box::new(ChaCha8Rng::from_seed(seed)),
    }
}
