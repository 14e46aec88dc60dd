//! The crate's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("training scenario: {0}")]
    Scenario(recoup_sim::Error),

    #[error("training episode: {0}")]
    Run(recoup_sim::Error),

    #[error(transparent)]
    Weights(#[from] recoup_recovery::Error),

    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),

    #[error("bad training setting: {0}")]
    Config(String),
}
