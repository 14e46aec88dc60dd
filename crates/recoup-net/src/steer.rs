//! Datagrams between the workers of one server. Each worker has its own socket on the shared
//! address (SO_REUSEPORT), and the kernel picks the socket by a hash of the 4-tuple: after a NAT
//! rebinding or a migration (RFC 9000 §9) a connection's datagrams may reach another worker.
//! Every connection ID a worker issues starts with its index (`TransportConfig::cid_prefix`),
//! so the worker that gets a short-header packet (the only kind a connection sends once its
//! handshake is confirmed, and so the only kind a migration moves) reads the owner from the
//! destination connection ID's first byte and passes the datagram on.
//!
//! Long-header packets are passed on the same way: once the client has heard from the server,
//! its Initial and Handshake packets carry the server's connection ID. The 4-tuple alone does
//! not keep a handshake on one worker: a client that sent its first Initial while the server
//! was still binding its workers' sockets had its later datagrams hashed over more sockets
//! than its first. A client's first Initial carries a destination ID of its own choosing; one
//! whose first byte happens to name a worker goes to that worker, which then owns the
//! connection, and its retransmissions follow it there.

use std::net::SocketAddr;
use std::sync::mpsc::{channel, Receiver, Sender};

use prometheus_client::metrics::counter::Counter;

use crate::driver::Wakeup;

/// A datagram passed from one worker to another: its sender and bytes.
pub(crate) type Passed = (SocketAddr, Vec<u8>);

/// One worker's ends of the mesh between workers.
#[derive(Debug)]
pub(crate) struct Steering {
    me: usize,
    local_cid_len: usize,
    /// Every worker's inbox and wake-up, by index (this worker's own included, unused).
    peers: Vec<(Sender<Passed>, Wakeup)>,
    inbox: Receiver<Passed>,
    /// Counts the datagrams passed on (`recoup serve --metrics`).
    passed: Option<Counter>,
}

impl Steering {
    /// The ends for `wakeups.len()` workers whose connection IDs are `local_cid_len` bytes.
    pub(crate) fn mesh(
        wakeups: &[Wakeup],
        local_cid_len: usize,
        passed: Option<&Counter>,
    ) -> Vec<Self> {
        let (senders, inboxes): (Vec<_>, Vec<_>) = wakeups.iter().map(|_| channel()).unzip();
        let peers: Vec<(Sender<Passed>, Wakeup)> =
            senders.into_iter().zip(wakeups.iter().cloned()).collect();
        inboxes
            .into_iter()
            .enumerate()
            .map(|(me, inbox)| Self {
                me,
                local_cid_len,
                peers: peers.clone(),
                inbox,
                passed: passed.cloned(),
            })
            .collect()
    }

    /// The worker a datagram's connection belongs to when that is another one: a packet whose
    /// destination ID, as long as this server's, starts with another worker's index.
    fn owner(&self, datagram: &[u8]) -> Option<usize> {
        let first = *datagram.first()?;
        if self.local_cid_len == 0 {
            return None;
        }
        let owner = if first & 0x80 == 0 {
            // RFC 9000 §17.3: the short header has the form bit (0x80) clear; the destination
            // ID follows the first byte.
            *datagram.get(1)?
        } else {
            // RFC 9000 §17.2: a long header's version (4 bytes) follows the first byte, then the
            // destination ID's length and the ID.
            let len = usize::from(*datagram.get(5)?);
            if len != self.local_cid_len {
                return None;
            }
            *datagram.get(6)?
        };
        let owner = usize::from(owner);
        (owner != self.me && owner < self.peers.len()).then_some(owner)
    }

    /// Passes `datagram` to the worker that owns its connection; `false` if it is this
    /// worker's, or names no worker, or its worker is gone (then this worker answers it as an
    /// unknown connection's: a stateless reset, RFC 9000 §10.3).
    pub(crate) fn pass_on(&self, from: SocketAddr, datagram: &[u8]) -> bool {
        let Some(owner) = self.owner(datagram) else {
            return false;
        };
        let (inbox, wakeup) = &self.peers[owner];
        if inbox.send((from, datagram.to_vec())).is_err() {
            return false;
        }
        wakeup.nudge();
        if let Some(c) = &self.passed {
            c.inc();
        }
        true
    }

    /// The datagrams other workers passed here since the last call.
    pub(crate) fn take(&self) -> impl Iterator<Item = Passed> + '_ {
        self.inbox.try_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` workers' ends, and the poll their wake-ups wake (kept alive with them).
    fn mesh(n: usize) -> (mio::Poll, Vec<Steering>) {
        let poll = mio::Poll::new().expect("poll");
        let wakeup = Wakeup::new(poll.registry(), mio::Token(0)).expect("waker");
        let ends = Steering::mesh(&vec![wakeup; n], 8, None);
        (poll, ends)
    }

    /// Only a packet whose destination ID names another existing worker moves.
    #[test]
    fn a_short_header_naming_another_worker_is_passed_on() {
        let (_poll, workers) = mesh(3);
        let from: SocketAddr = "127.0.0.1:9".parse().expect("addr");
        let short = |owner: u8| [0x40, owner, 1, 2, 3, 4, 5, 6, 7, 9, 9];
        assert_eq!(workers[0].owner(&short(2)), Some(2));
        assert_eq!(workers[0].owner(&short(0)), None, "its own");
        assert_eq!(workers[0].owner(&short(3)), None, "no worker 3");
        // A Handshake packet (RFC 9000 §17.2.4) to worker 1's 8-byte connection ID moves too;
        // one whose destination ID is not this server's length stays.
        let long = |owner: u8, len: u8| [0xe0, 0, 0, 0, 1, len, owner, 1, 2, 3, 4, 5, 6, 7, 0];
        assert_eq!(workers[0].owner(&long(1, 8)), Some(1));
        assert_eq!(workers[1].owner(&long(1, 8)), None, "its own");
        assert_eq!(workers[0].owner(&long(1, 5)), None, "not one of our IDs");
        assert_eq!(workers[0].owner(&long(7, 8)), None, "no worker 7");
        assert_eq!(workers[0].owner(&[0x40]), None, "too short");
        assert_eq!(workers[0].owner(&[0xc0, 0, 0, 0, 1]), None, "too short");
        assert!(workers[0].pass_on(from, &short(1)));
        let got: Vec<Passed> = workers[1].take().collect();
        assert_eq!(got, vec![(from, short(1).to_vec())]);
        assert_eq!(workers[2].take().count(), 0);
    }
}
