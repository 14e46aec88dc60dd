//! Sans-IO QUIC v1 (RFC 9000, RFC 9001, RFC 9002) with a hook for loss-recovery policies.
//!
//! No sockets, no clock reads, no threads: every entry point takes `now`.

pub mod cc;
pub mod delivery_rate;
pub mod error;
pub mod loss;
pub mod pacing;
pub mod rtt;

pub use error::{DecodeError, Error, TransportError, TransportErrorCode};
