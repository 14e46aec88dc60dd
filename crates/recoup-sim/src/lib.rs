//! recoup's deterministic network simulator (DESIGN.md "Simulator").
//!
//! Endpoints and network elements share one sans-IO shape, [`Node`]: take a datagram or nothing
//! and `now`, return a datagram, a wake-up time, or nothing. [`Simulator`] runs any number of
//! them on virtual time. Elements match the tools users know: [`Link`] with a queue
//! ([`QueueSpec`]: infinite, droptail, drophead, CoDel) serving a constant rate or an `mm-link`
//! [`Trace`]; [`Delay`] (`mm-delay`, with non-reordering jitter); [`Loss`] ([`LossSpec`]:
//! Bernoulli / `mm-loss`, netem `gemodel` and `state` with the kernel's semantics, time-slotted
//! Gilbert-Elliott, replay, `mm-onoff`). [`PathSpec`] parses element chains from scenario
//! strings. Every random element draws from its own stream, [`element_rng`]`(seed, name)`.

pub mod app;
mod datagram;
mod delay;
mod error;
mod link;
mod log;
mod loss;
pub mod metrics;
mod node;
mod path;
pub mod population;
pub mod qlog_analyze;
mod queue;
mod quic;
mod rng;
pub mod run;
pub mod scenario;
mod sim;
mod trace;
mod traffic;
mod units;

pub use datagram::{Datagram, IPV4_UDP_OVERHEAD, IPV6_UDP_OVERHEAD};
pub use delay::Delay;
pub use error::SimError;
pub use link::{Link, Service};
pub use log::{DropReason, EventLog, LogEvent};
pub use loss::{load_replay, FourStateParams, GeParams, Loss, LossSpec};
pub use node::{ElementStats, Node, Output};
pub use path::{ElementSpec, NamedNode, PathSpec, ServiceSpec};
pub use queue::{Limits, QueueSpec, CODEL_INTERVAL, CODEL_TARGET};
pub use quic::{Application, QuicNode};
pub use rng::element_rng;
pub use sim::{NodeId, SimEvent, Simulator};
pub use trace::{Trace, MAX_TRACE_FILE_BYTES, MM_PACKET_SIZE};
pub use traffic::{Arrival, CbrSource, Sink, CBR_HEADER};
pub use units::{parse_duration, parse_percent, parse_rate, Prob};
