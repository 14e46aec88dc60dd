//! Sans-IO QUIC v1 (RFC 9000, RFC 9001, RFC 9002) with a hook for loss-recovery policies.
//!
//! No sockets, no clock reads, no threads: every entry point takes `now`.

// The root clippy.toml disallows `Instant::now` and `SystemTime::now`; the workspace only warns on
// clippy lints, so make reading the clock here a hard error even without `-D warnings`
// (tests/no_clock.rs checks the sources as well).
#![deny(clippy::disallowed_methods)]

pub mod cc;
pub mod cid;
pub mod coding;
pub mod config;
pub mod connection;
pub mod crypto;
pub mod delivery_rate;
pub mod endpoint;
pub mod error;
pub mod fec;
pub mod frame;
// The fuzz targets' bodies, shared by cargo-fuzz and the stable replay test (docs/FUZZING.md).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod loss;
// Protects nothing: only a simulator should ever enable this.
#[cfg(feature = "seeded-tls")]
mod null_protection;
pub mod pacing;
pub mod packet;
pub mod qlog;
pub mod retry;
pub mod rtt;
// Predictable keys by design: only a simulator should ever enable this.
#[cfg(feature = "seeded-tls")]
mod seeded_tls;
pub mod stateless_reset;
pub mod streams;
pub mod tls;
pub mod transport_params;

pub use config::{
    ClientConfig, CopiesBeyondCwnd, DatagramConfig, MaxPto, PolicyFactory, ServerConfig,
    TransportConfig,
};
pub use connection::{
    CloseError, CloseReason, Connection, ConnectionStats, Event, MigrationStats, PacketRecord,
    Transmit, TransmitInfo,
};
pub use crypto::{initial_keys, Keys, OneRttKeys, Opened, PacketProtection, Side};
pub use endpoint::{ConnectionHandle, Endpoint};
pub use error::{Error, TransportError, TransportErrorCode};
pub use recoup_recovery::Recovered;
#[cfg(feature = "seeded-tls")]
pub use seeded_tls::{simulation_tls, Protection};
#[cfg(feature = "self-signed")]
pub use tls::self_signed;
pub use tls::{client_config, server_config, NewKeys, ServerVerification, TlsSession};
