//! One connection's HTTP/3 tasks and the mailbox they share with the transport.

use std::sync::Arc;

use recoup_time::Instant;
use recoup_transport::{CloseReason, Connection};

use super::adapter::{self, QuicConn, Shared};
use super::tasks::{Spawner, Tasks, Timers};

/// Rounds of "run the woken tasks, move their output to the transport" per drive; a task still
/// woken after them runs on the next turn, which [`Session::next_wakeup`] asks for at once.
const ROUNDS: usize = 16;

/// The HTTP/3 side of one connection.
#[derive(Debug)]
pub(crate) struct Session {
    mailbox: Shared,
    tasks: Tasks,
    timers: Arc<Timers>,
    /// Tasks were still woken when the last drive ended.
    busy: bool,
}

impl Session {
    /// A session; `http_datagrams` when the connection offers HTTP Datagrams (RFC 9297).
    pub(crate) fn new(now: Instant, http_datagrams: bool) -> Self {
        let mailbox = if http_datagrams {
            adapter::Mailbox::with_http_datagrams()
        } else {
            adapter::Mailbox::default()
        };
        Self {
            mailbox: Arc::new(std::sync::Mutex::new(mailbox)),
            tasks: Tasks::default(),
            timers: Timers::new(now),
            busy: true,
        }
    }

    /// The transport connection as h3 sees it.
    pub(crate) fn quic(&self) -> QuicConn {
        QuicConn::new(Arc::clone(&self.mailbox))
    }

    pub(crate) fn spawner(&self) -> Spawner {
        self.tasks.spawner()
    }

    pub(crate) fn timers(&self) -> Arc<Timers> {
        Arc::clone(&self.timers)
    }

    /// Moves the transport's news to the tasks, runs them, and moves their output back; returns
    /// the close reason when the connection ended in this call.
    pub(crate) fn drive(&mut self, now: Instant, conn: &mut Connection) -> Option<CloseReason> {
        self.timers.advance(now);
        let mut ended = None;
        self.busy = true;
        for round in 0..ROUNDS {
            // Pulled again after every round: tasks that consumed received bytes make room for
            // more, and bytes left in the transport would hold back the peer's flow control.
            if let Some(reason) = adapter::lock(&self.mailbox).pull(now, conn) {
                ended = Some(reason);
            }
            if round > 0 && !self.tasks.any_woken() {
                self.busy = false;
                break;
            }
            self.tasks.run_woken();
            adapter::lock(&self.mailbox).push(now, conn);
        }
        ended
    }

    /// When the tasks next need a drive of their own: now if they were cut short, else the
    /// earliest sleep.
    pub(crate) fn next_wakeup(&self) -> Option<Instant> {
        if self.busy {
            return Some(self.timers.now());
        }
        recoup_time::earliest(
            self.timers.next_wakeup(),
            adapter::lock(&self.mailbox).next_deadline(),
        )
    }
}
