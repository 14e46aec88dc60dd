//! Sans-IO QUIC v1 (RFC 9000, RFC 9001, RFC 9002) with a hook for loss-recovery policies.
//!
//! No sockets, no clock reads, no threads: every entry point takes `now`.

pub mod crypto;
pub mod error;
mod lineage;
pub mod qlog;
pub mod tls;

pub use crypto::{initial_keys, Keys, OneRttKeys, Opened, PacketProtection, Side};
pub use error::{DecodeError, Error, TransportError, TransportErrorCode};
pub use tls::{client_config, self_signed, server_config, NewKeys, ServerVerification, TlsSession};
