//! The crate's one error type: what can go wrong turning a policy (or FEC scheme) string into
//! one, or reading the data a scheme needs.

/// A policy specification that cannot be parsed. Every message lists what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("empty policy specification; accepted policies: {accepted}")]
    Empty { accepted: &'static str },

    #[error("unknown policy `{name}`; accepted policies: {accepted}")]
    UnknownPolicy {
        name: String,
        accepted: &'static str,
    },

    #[error("unknown FEC scheme `{name}`; accepted schemes: {accepted}")]
    UnknownFecScheme {
        name: String,
        accepted: &'static str,
    },

    #[error("unknown parameter `{key}` for policy `{policy}`; accepted parameters: {accepted}")]
    UnknownParameter {
        policy: &'static str,
        key: String,
        accepted: String,
    },

    #[error("bad value `{value}` for `{policy}` parameter `{key}`: expected {expected}")]
    BadValue {
        policy: &'static str,
        key: String,
        value: String,
        expected: String,
    },

    #[error("parameter `{key}` given twice for policy `{policy}`")]
    Duplicate { policy: &'static str, key: String },

    #[error(
        "malformed parameter `{item}` for policy `{policy}`: expected `key=value` \
         (accepted parameters: {accepted})"
    )]
    Malformed {
        policy: &'static str,
        item: String,
        accepted: String,
    },

    #[error("WebRTC FEC rate table {path}: {detail}")]
    RateTable { path: String, detail: String },

    #[error(
        "policy `{name}` reads the simulator's future loss draws and runs only in simulation \
         (`recoup run`/`sweep` with a `crn …` loss), not on real sockets"
    )]
    SimulationOnly { name: &'static str },

    #[error("art-dqn weights file {path}: {detail}")]
    Weights { path: String, detail: String },

    #[error("inconsistent parameters for policy `{policy}`: {detail}")]
    Inconsistent {
        policy: &'static str,
        detail: String,
    },
}
