//! The crate's one error type.

use recoup_sim::run::RunError;
use recoup_sim::scenario::ScenarioError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("training scenario: {0}")]
    Scenario(#[from] ScenarioError),

    #[error("training episode: {0}")]
    Run(#[from] RunError),

    #[error(transparent)]
    Weights(#[from] recoup_recovery::Error),

    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),

    #[error("bad training setting: {0}")]
    Config(String),
}
