//! Sans-IO QUIC v1 (RFC 9000, RFC 9001, RFC 9002) with a hook for loss-recovery policies.
//!
//! No sockets, no clock reads, no threads: every entry point takes `now`.

pub mod cid;
pub mod coding;
pub mod error;
pub mod frame;
pub mod packet;
pub mod transport_params;

pub use error::{DecodeError, Error, TransportError, TransportErrorCode};
