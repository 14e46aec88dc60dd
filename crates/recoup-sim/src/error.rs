//! The crate's one error type: what can go wrong loading a scenario or population file, making
//! a run, or analyzing a qlog trace.

use std::path::PathBuf;

use crate::run::MAX_FLOWS;

/// Everything the simulator's API can fail with. Messages name the file and the offending key
/// or event.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // ---- scenario and population files ----
    /// A file (scenario, population, trace) could not be read.
    #[error("{file}: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// Malformed TOML, an unknown key or a bad value, located in the file.
    #[error("{file}:{line}:{column}: {message}\n  | {text}")]
    Parse {
        file: String,
        line: usize,
        column: usize,
        message: String,
        /// The offending line.
        text: String,
    },
    /// A value is wrong in combination with others, or in a sweep point; `key` names it.
    #[error("{file}: `{key}`: {detail}")]
    Invalid {
        file: String,
        key: String,
        detail: String,
    },

    // ---- making a run ----
    #[error("building the path: {0}")]
    Path(#[from] recoup_elements::Error),
    #[error("transport: {0}")]
    Transport(#[from] recoup_transport::Error),
    #[error("a run has 1 to {MAX_FLOWS} flows, not {0}")]
    Flows(usize),
    #[error("policy `oracle` forecasts the losses of one flow: it cannot share a path")]
    OracleOneFlow,
    #[error(
        "policy `oracle` needs the down path's loss drawn per packet: write its loss as \
         `crn …` (e.g. `crn bernoulli 5%`) for every policy of the comparison"
    )]
    OracleNeedsCrn,
    #[error("qlog {path}: {source}")]
    Qlog {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("loss records {path}: {detail}")]
    Losses { path: PathBuf, detail: String },

    // ---- analyzing a qlog trace ----
    /// `at` is `line N` (JSON text sequences, and JSON syntax errors) or `event N` (an event of
    /// a JSON document, counted from 1).
    #[error("{}: {at}: {detail}", file.display())]
    Malformed {
        file: PathBuf,
        at: String,
        detail: String,
    },
    #[error(
        "{}: this is the {vantage}'s trace, the receiving side; analyze needs the sender's qlog \
         (the server's for a download)",
        file.display()
    )]
    Receiver { file: PathBuf, vantage: String },
    #[error(
        "{}: {sent} 1-RTT packets sent but none lists a STREAM frame: this trace does not log \
         frames (quinn 0.11's qlog does not), so lost data cannot be followed",
        file.display()
    )]
    NoFrames { file: PathBuf, sent: u64 },
}
