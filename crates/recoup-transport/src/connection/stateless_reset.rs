//! Detecting a peer's stateless reset (RFC 9000 §10.3.1).

use recoup_time::Instant;

use super::{CloseReason, Connection, Event, State};
use crate::stateless_reset::reset_tail;

impl Connection {
    /// Whether `datagram`, which no packet of this connection could be read from, is a
    /// stateless reset from the peer: a short-header-looking datagram ending with one of the
    /// peer's reset tokens (RFC 9000 §10.3.1).
    #[must_use]
    pub fn is_stateless_reset(&self, datagram: &[u8]) -> bool {
        reset_tail(datagram).is_some_and(|tail| self.cids.holds_reset_token(&tail))
    }

    /// RFC 9000 §10.3.1: after a stateless reset the connection enters the draining period and
    /// sends nothing more.
    pub fn on_stateless_reset(&mut self, now: Instant) {
        if matches!(self.state, State::Closed | State::Draining { .. }) {
            return;
        }
        tracing::debug!("stateless reset received");
        self.state = State::Draining {
            until: now + self.three_pto(),
        };
        self.events
            .push_back(Event::Closed(CloseReason::StatelessReset));
        self.flush_qlog();
    }
}
