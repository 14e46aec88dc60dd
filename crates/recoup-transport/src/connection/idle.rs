//! The idle timeout (RFC 9000 §10.1).
//!
//! Invariants: the timeout is the smaller of ours and the peer's, zero meaning none; the
//! deadline moves on every packet received and on the first ack-eliciting packet sent after one
//! was received, and never comes sooner than three PTOs after it moved.

use std::time::Duration;

use recoup_time::Instant;

#[derive(Debug)]
pub(super) struct IdleTimer {
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    /// An ack-eliciting packet was sent since the last packet was received.
    eliciting_since_receive: bool,
}

impl IdleTimer {
    /// Our own timeout, zero meaning none, running from `now`.
    pub fn new(timeout: Duration, now: Instant) -> Self {
        let timeout = (!timeout.is_zero()).then_some(timeout);
        Self {
            timeout,
            deadline: timeout.map(|t| now + t),
            eliciting_since_receive: false,
        }
    }

    /// The peer's max_idle_timeout arrived: the effective timeout is the smaller of the two.
    pub fn negotiate(&mut self, peer: Duration) {
        self.timeout = match (self.timeout, peer.is_zero()) {
            (Some(ours), false) => Some(ours.min(peer)),
            (None, false) => Some(peer),
            (ours, true) => ours,
        };
    }

    /// The effective timeout: ours, or the smaller of both ends' once negotiated.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// A packet was received and processed.
    pub fn on_packet_received(&mut self, now: Instant, three_pto: Duration) {
        self.restart(now, three_pto);
        self.eliciting_since_receive = false;
    }

    /// An ack-eliciting packet was sent. `three_pto` is asked only for the first since a
    /// receipt, the one that restarts the timer.
    pub fn on_eliciting_sent(&mut self, now: Instant, three_pto: impl FnOnce() -> Duration) {
        if !self.eliciting_since_receive {
            self.restart(now, three_pto());
        }
        self.eliciting_since_receive = true;
    }

    fn restart(&mut self, now: Instant, three_pto: Duration) {
        if let Some(t) = self.timeout {
            // At least three PTOs so probes can run.
            self.deadline = Some(now + t.max(three_pto));
        }
    }
}
