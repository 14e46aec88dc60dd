//! Real time for recoup: a UDP driver for the sans-IO transport, the HTTP/3 and `hq-interop`
//! (HTTP/0.9) applications that `recoup serve` and `recoup get` run on it (files and live
//! streams), and the
//! link emulator that `recoup link` runs (the simulator's path elements, `recoup-elements`, in
//! real time).
//!
//! This crate and the CLI are the only places that read a clock ([`clock::Clock`]).

pub mod bodies;
pub mod client;
pub mod clock;
pub mod content;
pub mod driver;
pub mod error;
pub mod gaming;
pub mod gaming_client;
pub mod hq;
pub mod http3;
pub mod link;
pub mod link_log;
pub mod live;
pub mod metrics;
pub mod moq;
pub mod origin;
pub mod qlog_dir;
pub mod range;
pub mod rebind;
pub mod server;
mod steer;
mod stream_io;
pub mod tls;
pub mod url;
pub mod viewers;

pub use bodies::{Bodies, Fetched};
pub use client::{Client, Download, GetOptions, Protocol};
pub use driver::{ConnectionHandler, Driver, Stopper, Wakeup};
pub use error::Error;
pub use gaming_client::{GameClient, GameOptions, GameReport};
pub use link::{LinkOptions, LinkReport, Relay};
pub use live::LiveParams;
pub use metrics::Metrics;
pub use origin::Origin;
pub use server::{ServeOptions, Server};
pub use viewers::{Viewers, ViewersOptions, ViewersReport};

/// A seed for connection IDs and policies from the OS's randomness (std seeds its hash maps
/// from it), since a real server must not repeat IDs across runs.
#[must_use]
pub fn os_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}
