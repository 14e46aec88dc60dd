//! Optional per-element event log, for plots and debugging.

use recoup_time::Instant;

/// Why an element dropped a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// A loss model (Bernoulli, Gilbert-Elliott, 4-state, replay, on-off) chose this packet.
    Loss,
    /// A droptail/drophead queue was full.
    QueueFull,
    /// CoDel dropped it at dequeue (RFC 8289).
    Aqm,
}

/// One logged event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogEvent {
    /// A datagram (id, wire length) was dropped.
    Drop {
        /// When.
        time: Instant,
        /// Datagram tag.
        id: u64,
        /// Wire length in bytes.
        bytes: usize,
        /// Why.
        reason: DropReason,
    },
    /// Queue occupancy after an enqueue or dequeue.
    Queue {
        /// When.
        time: Instant,
        /// Packets waiting (excluding one in transmission).
        packets: usize,
        /// Bytes waiting.
        bytes: u64,
    },
}

/// A bounded list of events: once `capacity` events are stored, later ones are counted but not
/// kept, so a long run cannot exhaust memory.
#[derive(Clone, Debug, Default)]
pub struct EventLog {
    events: Vec<LogEvent>,
    capacity: usize,
    overflow: u64,
}

impl EventLog {
    /// A log keeping at most `capacity` events.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            events: Vec::new(),
            capacity,
            overflow: 0,
        }
    }

    pub(crate) fn push(&mut self, e: LogEvent) {
        if self.events.len() < self.capacity {
            self.events.push(e);
        } else {
            self.overflow += 1;
        }
    }

    /// The stored events, in time order.
    #[must_use]
    pub fn events(&self) -> &[LogEvent] {
        &self.events
    }

    /// How many events did not fit.
    #[must_use]
    pub fn overflow(&self) -> u64 {
        self.overflow
    }
}
