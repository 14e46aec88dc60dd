//! The one sans-IO shape shared by endpoints and network elements, whoever drives them: the
//! simulator's event loop on virtual time (`recoup-sim`) or `recoup link` on the real clock.

use std::any::Any;

use recoup_time::Instant;

use crate::datagram::Datagram;
use crate::log::EventLog;

/// What a node answers each time its driver calls it.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    /// A datagram leaving the node now. The driver forwards it and immediately calls the node
    /// again with `None` at the same `now`, until the node answers `Callback` or `None`.
    Datagram(Datagram),
    /// Nothing more to send now; call me with `None` at this instant (or earlier, if a datagram
    /// arrives first). Replaces any wake-up asked for before.
    Callback(Instant),
    /// Nothing to send and no timer: call me only when a datagram arrives. Cancels any earlier
    /// wake-up.
    None,
}

/// A participant in the event loop: a QUIC endpoint, a traffic source, or a network element.
///
/// How a driver (recoup-sim's `Simulator`, `recoup link`'s relay) calls a node:
/// - once with `input = None` at the time it is added, so an endpoint can start sending;
/// - with `Some(datagram)` when a datagram reaches it, at the instant it arrives;
/// - with `None` at the instant of its last `Callback`, unless a later answer replaced it;
/// - after an `Output::Datagram`, again with `None` at the same `now`, until it answers
///   `Callback` or `None`. Only the final answer of such a burst sets the node's wake-up.
///
/// `now` never decreases from one call to the next. A node must not answer `Callback(t)` with
/// `t <= now` forever: the loop would not advance.
pub trait Node {
    /// Take a datagram (or nothing) at `now` and say what happens next.
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output;

    /// Counters for reports and tests. Endpoints may keep the default.
    fn stats(&self) -> ElementStats {
        ElementStats::default()
    }

    /// The per-element event log, if this node keeps one and it was enabled.
    fn event_log(&self) -> Option<&EventLog> {
        None
    }

    /// The concrete node, so a driver (`Simulator::downcast`) can hand it back after a run.
    /// Implement as `Some(self)`; the default opts out.
    fn as_any(&self) -> Option<&dyn Any> {
        None
    }

    /// Mutable counterpart of [`Node::as_any`].
    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        None
    }
}

/// Counters every network element keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElementStats {
    /// Datagrams that arrived.
    pub received: u64,
    /// Bytes (wire length) that arrived.
    pub received_bytes: u64,
    /// Datagrams that left.
    pub forwarded: u64,
    /// Bytes (wire length) that left.
    pub forwarded_bytes: u64,
    /// Datagrams dropped (loss model, queue overflow or AQM).
    pub dropped: u64,
}

impl ElementStats {
    pub(crate) fn on_receive(&mut self, d: &Datagram) {
        self.received += 1;
        self.received_bytes += d.wire_len() as u64;
    }

    pub(crate) fn on_forward(&mut self, d: &Datagram) {
        self.forwarded += 1;
        self.forwarded_bytes += d.wire_len() as u64;
    }

    /// An element that forwards or drops each datagram the moment it arrives: counts `d` in,
    /// then drops it when `drop` says so, or lets it leave now.
    pub(crate) fn pass_or_drop(
        &mut self,
        d: Datagram,
        drop: impl FnOnce(&Datagram) -> bool,
    ) -> Output {
        self.on_receive(&d);
        if drop(&d) {
            self.dropped += 1;
            return Output::None;
        }
        self.on_forward(&d);
        Output::Datagram(d)
    }
}
