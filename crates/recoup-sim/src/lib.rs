//! recoup's deterministic network simulator (DESIGN.md "Simulator").
//!
//! Endpoints and network elements share one sans-IO shape, `recoup_elements::Node`: take a
//! datagram or nothing and `now`, return a datagram, a wake-up time, or nothing. [`Simulator`]
//! runs any number of them on virtual time: QUIC endpoints ([`QuicNode`]), traffic sources
//! ([`CbrSource`], [`Sink`]) and the links, queues, delays and loss models of
//! `recoup-elements`. A run ([`run`]) builds a [`scenario`]'s paths and applications
//! (`recoup-apps`), runs every policy on them, and measures it ([`metrics`]);
//! [`qlog_analyze`] measures a real connection from its qlog with the same formulas.

// DESIGN.md principle 1: time is injected; clippy.toml bans the clock reads, and this makes
// the ban an error even without `-D warnings`.
#![deny(clippy::disallowed_methods)]

pub mod app;
mod error;
pub mod metrics;
pub mod oracle;
pub mod population;
pub mod qlog_analyze;
mod quic;
pub mod run;
pub mod scenario;
mod sim;
mod traffic;

pub use error::Error;
pub use quic::{NodeApp, QuicNode};
pub use sim::{NodeId, SimEvent, Simulator};
pub use traffic::{Arrival, CbrSource, Sink, CBR_HEADER};
