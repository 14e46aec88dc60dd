//! Network elements (DESIGN.md "Simulator"): the parts a path between two endpoints is built
//! from, each a sans-IO [`Node`] that takes a datagram or nothing and `now`, and returns a
//! datagram, a wake-up time, or nothing. They never read a clock, so the simulator
//! (`recoup-sim`) runs them on virtual time and `recoup link` (`recoup-net`) on the real one.
//!
//! Elements match the tools users know: [`Link`] with a queue ([`QueueSpec`]: infinite,
//! droptail, drophead, CoDel) serving a constant rate or an `mm-link` [`Trace`]; [`Delay`]
//! (`mm-delay`, with non-reordering jitter); [`Loss`] ([`LossSpec`]: Bernoulli / `mm-loss`,
//! netem `gemodel` and `state` with the kernel's semantics, time-slotted Gilbert-Elliott,
//! replay, `mm-onoff`); [`Corrupt`] (netem `corrupt`) and [`Blackhole`] (outages), the QUIC
//! interop runner's corruption and blackhole scenarios; [`Duplicate`] and [`Reorder`] (netem
//! `duplicate` and `delay … reorder`); [`Mtu`] (a hop that drops datagrams above a size, for path
//! MTU discovery). [`PathSpec`] parses element chains from scenario strings. Every random
//! element draws from its own stream, [`element_rng`]`(seed, name)`.

// DESIGN.md principle 1: time is injected; clippy.toml bans the clock reads, and this makes
// the ban an error even without `-D warnings`.
#![deny(clippy::disallowed_methods)]

mod blackhole;
mod corrupt;
mod crandom;
mod datagram;
mod delay;
mod duplicate;
mod error;
mod link;
mod log;
mod loss;
mod mtu;
mod node;
mod path;
mod queue;
mod reorder;
mod rng;
mod trace;
mod units;

pub use blackhole::{Blackhole, BlackholeSpec};
pub use corrupt::{Corrupt, CorruptSpec};
pub use datagram::{Datagram, IPV4_UDP_OVERHEAD, IPV6_UDP_OVERHEAD};
pub use delay::Delay;
pub use duplicate::{Duplicate, DuplicateSpec};
pub use error::Error;
pub use link::{Link, Service};
pub use log::{DropReason, EventLog, LogEvent};
pub use loss::{
    load_replay, BurstSizes, FourStateParams, GeParams, Loss, LossForecast, LossSpec,
    DEFAULT_CRN_SLOT, MAX_BURST,
};
pub use mtu::{Mtu, MtuSpec};
pub use node::{ElementStats, Node, Output};
pub use path::{ElementSpec, NamedNode, PathSpec, ServiceSpec};
pub use queue::{Limits, QueueSpec, CODEL_INTERVAL, CODEL_TARGET};
pub use reorder::{Reorder, ReorderSpec};
pub use rng::{element_rng, mix64};
pub use trace::{Trace, MAX_TRACE_FILE_BYTES, MM_PACKET_SIZE};
pub use units::{parse_duration, parse_percent, parse_rate, Prob};
