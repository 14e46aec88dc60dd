//! Path validation (RFC 9000 §8.2) and connection migration (§9).
//!
//! Invariants: every PATH_CHALLENGE we receive is answered once with a PATH_RESPONSE on the path
//! it came on (§8.2.2), and at most [`MAX_PENDING_RESPONSES`] answers wait, so a flood of
//! challenges cannot grow state. At most one validation of ours is under way, always of the
//! current path; it ends validated (a PATH_RESPONSE echoes any challenge we sent on it, §8.2.3)
//! or failed at its deadline (§8.2.4), and then the connection returns to the last validated
//! path if there is one (§9.3.2). Only a server follows a peer to a new address: a client talks
//! to the address it connected to (we offer no preferred address, §9.6), and moves only when
//! its application asks ([`Connection::migrate`]).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use crate::qlog::QlogFrame;
use rand::RngCore;
use recoup_time::Instant;

use super::path::Path;
use super::Connection;
use crate::cid::ConnectionId;
use crate::config::MIN_INITIAL_SIZE;
use crate::crypto::Side;
use crate::error::Error;
use crate::frame::Frame;

/// PATH_RESPONSEs waiting to be sent; further challenges are dropped until they go (RFC 9000
/// §8.2.2 lets an endpoint limit how many it answers).
const MAX_PENDING_RESPONSES: usize = 4;

/// A PATH_RESPONSE we owe.
#[derive(Clone, Copy, Debug)]
struct Response {
    data: [u8; 8],
    /// Where the challenge came from: the response goes there (RFC 9000 §8.2.2).
    remote: SocketAddr,
    /// Bytes received in the challenge's datagram, which bound a response off the current path
    /// by the anti-amplification limit (§8.2.2, §8.1).
    received: usize,
}

/// Our validation of the current path.
#[derive(Debug)]
struct Validation {
    /// Data of every PATH_CHALLENGE sent on this path; a response echoing any of them counts.
    sent: Vec<[u8; 8]>,
    /// A (fresh) PATH_CHALLENGE goes in the next packet.
    pending: bool,
    /// When to challenge again if no response came.
    retry_at: Instant,
    retry_after: Duration,
    /// When validation has failed (RFC 9000 §8.2.4).
    deadline: Instant,
    /// Reset congestion control and RTT once validated: the peer's IP address changed, not only
    /// its port (RFC 9000 §9.4).
    reset_on_success: bool,
}

#[derive(Debug, Default)]
pub(super) struct Migration {
    responses: VecDeque<Response>,
    validation: Option<Validation>,
    /// The last validated path, to return to if the new one fails validation (§9.3.2).
    fallback: Option<Path>,
    /// The destination ID of the peer's latest non-probing packet.
    peer_dcid: Option<ConnectionId>,
    /// Counters for tests and logs.
    pub stats: MigrationStats,
}

/// What happened to paths, for tests and logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MigrationStats {
    /// PATH_CHALLENGE frames received and PATH_RESPONSE frames sent for them.
    pub challenges_received: u64,
    pub responses_sent: u64,
    /// PATH_CHALLENGE frames we sent.
    pub challenges_sent: u64,
    /// Paths validated and validations that timed out.
    pub paths_validated: u64,
    pub validations_failed: u64,
    /// The peer moved to a new address (server) or we did (client).
    pub migrations: u64,
    /// Congestion control and RTT were reset for a new path (§9.4).
    pub path_resets: u64,
}

/// The frames that may appear in a probing packet (RFC 9000 §9.1).
pub(super) fn is_probing(frame: &Frame<'_>) -> bool {
    matches!(
        frame,
        Frame::PathChallenge(_)
            | Frame::PathResponse(_)
            | Frame::NewConnectionId { .. }
            | Frame::Padding { .. }
    )
}

impl Migration {
    /// Whether a frame for the current path (`remote`) waits.
    pub fn has_frames_for(&self, remote: SocketAddr) -> bool {
        self.validation.as_ref().is_some_and(|v| v.pending)
            || self.responses.iter().any(|r| r.remote == remote)
    }

    pub fn timeout(&self) -> Option<Instant> {
        self.validation.as_ref().map(|v| {
            if v.pending {
                v.deadline
            } else {
                v.retry_at.min(v.deadline)
            }
        })
    }
}

impl Connection {
    /// Counters of path validation and migration.
    #[must_use]
    pub fn migration_stats(&self) -> MigrationStats {
        self.migration.stats
    }

    /// Whether the current path to the peer is validated (RFC 9000 §8.2).
    #[must_use]
    pub fn path_validated(&self) -> bool {
        self.migration.validation.is_none() && self.path.is_validated()
    }

    /// The client moved to a new local address (a new socket; the driver sends from it from now
    /// on): use a connection ID the peer has not seen on the old path and retire the old one
    /// (RFC 9000 §9.5), and validate the new path (§9.2). `port_only`: the local IP address is
    /// the same, so congestion control and RTT carry over (§9.4).
    pub fn migrate(&mut self, now: Instant, port_only: bool) -> Result<(), Error> {
        if self.side != Side::Client {
            return Err(Error::InvalidState("only a client migrates"));
        }
        // RFC 9000 §9: not before the handshake is confirmed, and not if the peer said no.
        if !self.handshake.confirmed {
            return Err(Error::InvalidState(
                "migration before the handshake is confirmed",
            ));
        }
        if self
            .handshake
            .peer_params
            .as_ref()
            .is_some_and(|p| p.disable_active_migration)
        {
            return Err(Error::InvalidState(
                "the peer sent disable_active_migration",
            ));
        }
        // RFC 9000 §9.5: a new path needs a connection ID not used on the old one.
        if !self.cids.rotate_remote() {
            return Err(Error::InvalidState(
                "no spare connection ID from the peer to migrate with",
            ));
        }
        self.migration.stats.migrations += 1;
        self.start_validation(now, !port_only);
        Ok(())
    }

    /// A PATH_CHALLENGE arrived from `remote` in a datagram of `received` bytes.
    pub(super) fn on_path_challenge(&mut self, data: [u8; 8], remote: SocketAddr, received: usize) {
        self.migration.stats.challenges_received += 1;
        if self.migration.responses.len() < MAX_PENDING_RESPONSES {
            self.migration.responses.push_back(Response {
                data,
                remote,
                received,
            });
        }
    }

    /// A PATH_RESPONSE arrived (on any path, RFC 9000 §8.2.3).
    pub(super) fn on_path_response(&mut self, now: Instant, data: [u8; 8]) {
        let Some(v) = &self.migration.validation else {
            return;
        };
        // §8.2.3: a response that echoes none of our challenges is ignored.
        if !v.sent.contains(&data) {
            return;
        }
        let reset = v.reset_on_success;
        self.migration.validation = None;
        self.migration.fallback = None;
        self.migration.stats.paths_validated += 1;
        self.path.validate();
        self.recovery.loss.set_amplification_blocked(false, now);
        if reset {
            // §9.4: on confirming the peer owns its new address, start congestion control and
            // the RTT estimate afresh unless only the port changed.
            self.recovery.reset_for_new_path(now, &self.config);
            self.restart_pmtud(false);
            self.migration.stats.path_resets += 1;
        }
        tracing::debug!(side = ?self.side, remote = %self.path.remote, "path validated");
    }

    /// Records the destination ID of a non-probing 1-RTT packet.
    pub(super) fn note_peer_dcid(&mut self, dcid: ConnectionId) {
        self.migration.peer_dcid = Some(dcid);
    }

    /// A server received the peer's non-probing packet with the highest packet number yet from
    /// `remote`, which is not the current path's address (RFC 9000 §9.3): the peer moved.
    pub(super) fn on_peer_address_change(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        received: usize,
        dcid: ConnectionId,
    ) {
        self.migration.stats.migrations += 1;
        tracing::debug!(from = %self.path.remote, to = %remote, "peer address changed");
        // §9.5: a peer that moved to a new connection ID did so to be unlinkable; answer with a
        // new one of its IDs as well.
        if self.migration.peer_dcid.is_some_and(|d| d != dcid) {
            self.cids.rotate_remote();
        }
        self.migration.peer_dcid = Some(dcid);
        if self
            .migration
            .fallback
            .as_ref()
            .is_some_and(|f| f.remote == remote)
        {
            // Back to the last validated address (a reordered packet, or the NAT changed its
            // mind): it needs no new validation (§9.3 lets an endpoint skip validating an
            // address it saw recently).
            if let Some(old) = self.migration.fallback.take() {
                self.path = old;
            }
            self.migration.validation = None;
            self.recovery.loss.set_amplification_blocked(false, now);
            return;
        }
        let reset = remote.ip() != self.path.remote.ip();
        let new = Path::unvalidated(remote, self.path.max_datagram_size, received);
        let old = std::mem::replace(&mut self.path, new);
        if old.is_validated() {
            self.migration.fallback = Some(old);
        }
        self.start_validation(now, reset);
    }

    /// Starts validating the current path (RFC 9000 §8.2.1).
    fn start_validation(&mut self, now: Instant, reset_on_success: bool) {
        let pto = self.recovery.loss.pto_period();
        // §8.2.4: three times the larger of the current PTO and the PTO for a new path (from
        // kInitialRtt, RFC 9002 §6.2.2: smoothed = initial, rttvar = initial / 2).
        let new_path_pto = self.config.initial_rtt * 3 + self.config.max_ack_delay;
        let deadline = now + pto.max(new_path_pto) * 3;
        self.migration.validation = Some(Validation {
            sent: Vec::new(),
            pending: true,
            retry_at: now + pto,
            retry_after: pto,
            deadline,
            reset_on_success,
        });
    }

    /// Validation timers: challenge again after a PTO without a response, and give up at the
    /// deadline.
    pub(super) fn on_migration_timeout(&mut self, now: Instant) {
        let Some(v) = self.migration.validation.as_mut() else {
            return;
        };
        if now >= v.deadline {
            self.migration.validation = None;
            self.migration.stats.validations_failed += 1;
            // §9.3.2: validation of the new address failed; go back to the last validated one.
            if let Some(old) = self.migration.fallback.take() {
                tracing::debug!(failed = %self.path.remote, back_to = %old.remote,
                    "path validation failed");
                self.path = old;
                self.recovery.loss.set_amplification_blocked(false, now);
            }
            return;
        }
        if !v.pending && now >= v.retry_at {
            // §8.2.1: a new challenge, no more often than an Initial would be probed (PTO,
            // doubling).
            v.pending = true;
            v.retry_after *= 2;
            v.retry_at = now + v.retry_after;
        }
    }

    /// Writes PATH_RESPONSEs owed on the current path and our pending PATH_CHALLENGE into a
    /// 1-RTT packet; returns whether the datagram must be padded to 1200 bytes (RFC 9000 §8.2.1,
    /// §8.2.2: datagrams with these frames are expanded, within the anti-amplification limit).
    pub(super) fn write_path_frames(
        &mut self,
        buf: &mut Vec<u8>,
        end: usize,
        qlog: Option<&mut Vec<QlogFrame>>,
    ) -> bool {
        let mut wrote = Vec::new();
        self.write_path_responses(buf, end, &mut wrote);
        if buf.len() + 9 <= end {
            if let Some(v) = self.migration.validation.as_mut().filter(|v| v.pending) {
                let mut data = [0u8; 8];
                self.rng.fill_bytes(&mut data);
                Frame::PathChallenge(data).encode(buf);
                v.sent.push(data);
                v.pending = false;
                self.migration.stats.challenges_sent += 1;
                wrote.push(QlogFrame::of(&Frame::PathChallenge(data), None));
            }
        }
        if let Some(q) = qlog {
            q.extend(wrote.iter().cloned());
        }
        !wrote.is_empty()
    }

    /// Writes the PATH_RESPONSEs owed on the current path that fit before `end`, noting each in
    /// `wrote`. A closing connection sends them too, beside its CONNECTION_CLOSE: §8.2.2 asks
    /// every challenge to be answered, and one read in the same turn as the application's
    /// close would otherwise go unanswered.
    pub(super) fn write_path_responses(
        &mut self,
        buf: &mut Vec<u8>,
        end: usize,
        wrote: &mut Vec<QlogFrame>,
    ) {
        let remote = self.path.remote;
        while buf.len() + 9 <= end {
            let Some(i) = self
                .migration
                .responses
                .iter()
                .position(|r| r.remote == remote)
            else {
                break;
            };
            let Some(r) = self.migration.responses.remove(i) else {
                break;
            };
            Frame::PathResponse(r.data).encode(buf);
            self.migration.stats.responses_sent += 1;
            wrote.push(QlogFrame::of(&Frame::PathResponse(r.data), None));
        }
    }

    /// A PATH_RESPONSE owed to an address other than the current path's, if any: the packet is
    /// built alone and goes there (RFC 9000 §8.2.2: on the path the challenge came on).
    pub(super) fn poll_off_path_response(&mut self) -> Option<(SocketAddr, [u8; 8], usize)> {
        let remote = self.path.remote;
        let i = self
            .migration
            .responses
            .iter()
            .position(|r| r.remote != remote)?;
        let r = self.migration.responses.remove(i)?;
        self.migration.stats.responses_sent += 1;
        // §8.2.2 with §8.1: at most three times what that address sent us, at least the frame.
        let size = (r.received * 3).min(MIN_INITIAL_SIZE);
        Some((r.remote, r.data, size))
    }
}
