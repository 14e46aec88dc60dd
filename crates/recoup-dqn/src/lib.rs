//! ART-DQN (ART §8) training: the `art-dqn` policy of `recoup-recovery` learns its Redundancy
//! Adapter, a Q-network over R = 1..=r_max, in the simulator; the result is a safetensors file
//! that `art-dqn:weights=PATH` loads. candle (CPU only) does the learning; this crate is the only
//! one that depends on it, so the transport and the simulator build without it.

mod error;
pub mod explore;
pub mod net;
pub mod train;

pub use error::Error;
pub use train::{train, EpisodeReport, TrainConfig, DEFAULT_SCENARIOS};
