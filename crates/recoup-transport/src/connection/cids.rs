//! Connection IDs (RFC 9000 §5.1): the ones we issued to the peer and the ones it issued to us.

use std::collections::{BTreeMap, VecDeque};

use rand::RngCore;

use crate::cid::{ConnectionId, StatelessResetToken};
use crate::error::{transport_err, TransportError};
use crate::stateless_reset::{tokens_equal, ResetKey};

/// A connection ID we issued, as the endpoint must route it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IssuedCid {
    pub seq: u64,
    pub cid: ConnectionId,
    pub reset_token: StatelessResetToken,
}

/// What the endpoint must learn about our connection IDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CidEvent {
    /// Route packets for this ID to the connection.
    Issued(ConnectionId),
    /// Stop routing it.
    Retired(ConnectionId),
}

#[derive(Debug)]
pub(super) struct CidState {
    /// Ours, by sequence number.
    local: BTreeMap<u64, IssuedCid>,
    next_local_seq: u64,
    local_len: usize,
    /// `TransportConfig::cid_prefix`.
    local_prefix: Option<u8>,
    /// NEW_CONNECTION_ID frames to (re)send, by sequence number.
    pending_new: VecDeque<u64>,
    /// The peer's, by sequence number; the lowest is the one we use.
    remote: BTreeMap<u64, (ConnectionId, Option<StatelessResetToken>)>,
    /// RETIRE_CONNECTION_ID frames to (re)send.
    pending_retire: VecDeque<u64>,
    remote_retire_prior_to: u64,
    /// How many of the peer's IDs we accept (our active_connection_id_limit).
    remote_limit: u64,
    /// Client: the server's source ID replaced our random initial destination ID.
    server_cid_adopted: bool,
    /// Server with a static reset key: tokens derive from it (RFC 9000 §10.3.2), so that the
    /// server can reset connections it no longer has; otherwise they are random.
    reset_key: Option<ResetKey>,
    events: VecDeque<CidEvent>,
}

impl CidState {
    /// `initial_local` is the ID from our first packets (sequence 0), `initial_remote` the peer's.
    pub fn new(
        initial_local: ConnectionId,
        initial_remote: ConnectionId,
        (local_len, local_prefix): (usize, Option<u8>),
        remote_limit: u64,
    ) -> Self {
        let mut local = BTreeMap::new();
        local.insert(
            0,
            IssuedCid {
                seq: 0,
                cid: initial_local,
                reset_token: [0; 16],
            },
        );
        let mut remote = BTreeMap::new();
        remote.insert(0, (initial_remote, None));
        Self {
            local,
            next_local_seq: 1,
            local_len,
            local_prefix,
            pending_new: VecDeque::new(),
            remote,
            pending_retire: VecDeque::new(),
            remote_retire_prior_to: 0,
            remote_limit,
            server_cid_adopted: false,
            reset_key: None,
            events: VecDeque::new(),
        }
    }

    /// The peer's ID we address packets to.
    pub fn remote(&self) -> ConnectionId {
        self.remote
            .first_key_value()
            .map_or_else(ConnectionId::default, |(_, (cid, _))| *cid)
    }

    /// Moves to the peer's next connection ID and retires the one in use (RFC 9000 §9.5: a
    /// new path gets an ID not used on the old one; §5.1.2: RETIRE_CONNECTION_ID). False, and
    /// nothing changes, if the peer gave us no spare ID.
    pub fn rotate_remote(&mut self) -> bool {
        if self.remote.len() < 2 {
            return false;
        }
        if let Some((seq, _)) = self.remote.pop_first() {
            self.pending_retire.push_back(seq);
        }
        true
    }

    /// A client addresses the server by the source ID of the server's first packet from then on
    /// (RFC 9000 §7.2); later packets do not change it. (The server learns the client's ID from
    /// its first Initial, before the connection exists.)
    pub fn adopt_server_cid(&mut self, cid: ConnectionId) {
        if !self.server_cid_adopted {
            self.remote.insert(0, (cid, None));
            self.server_cid_adopted = true;
        }
    }

    /// A client that follows a Retry addresses the server by the Retry's source ID until the
    /// server's first Initial brings the ID to keep (RFC 9000 §7.2, §17.2.5.2).
    pub fn follow_retry(&mut self, cid: ConnectionId) {
        self.remote.insert(0, (cid, None));
    }

    /// Derive our reset tokens from `key` from now on, the sequence-0 ID's too.
    pub fn set_reset_key(&mut self, key: ResetKey) {
        for issued in self.local.values_mut() {
            issued.reset_token = key.token(&issued.cid);
        }
        self.reset_key = Some(key);
    }

    /// Client: the server's stateless_reset_token parameter belongs to its sequence-0 ID
    /// (RFC 9000 §18.2).
    pub fn set_remote_reset_token(&mut self, token: StatelessResetToken) {
        if let Some((_, t)) = self.remote.get_mut(&0) {
            *t = Some(token);
        }
    }

    /// RFC 9000 §10.3.1: whether `tail` (a datagram's last 16 bytes) is the reset token of one
    /// of the peer's IDs we hold.
    pub fn holds_reset_token(&self, tail: &StatelessResetToken) -> bool {
        // Every token is compared, none skipped on a match, so the time taken says nothing.
        self.remote
            .values()
            .filter_map(|(_, t)| t.as_ref())
            .fold(false, |hit, t| tokens_equal(tail, t) | hit)
    }

    /// Our sequence-0 ID (the source ID of our long headers).
    pub fn initial_local(&self) -> ConnectionId {
        self.local
            .get(&0)
            .or_else(|| self.local.values().next())
            .map_or_else(ConnectionId::default, |c| c.cid)
    }

    pub fn local_ids(&self) -> impl Iterator<Item = &IssuedCid> {
        self.local.values()
    }

    /// Issue IDs until the peer holds `limit` of ours (its active_connection_id_limit).
    pub fn issue_up_to(&mut self, limit: u64, rng: &mut impl RngCore) {
        if self.local_len == 0 {
            // A zero-length ID cannot be changed (RFC 9000 §5.1.1).
            return;
        }
        while (self.local.len() as u64) < limit.min(8) {
            let seq = self.next_local_seq;
            self.next_local_seq += 1;
            let mut reset_token = [0u8; 16];
            rng.fill_bytes(&mut reset_token);
            let cid = ConnectionId::random_with_prefix(rng, self.local_len, self.local_prefix);
            if let Some(key) = &self.reset_key {
                reset_token = key.token(&cid);
            }
            self.local.insert(
                seq,
                IssuedCid {
                    seq,
                    cid,
                    reset_token,
                },
            );
            self.pending_new.push_back(seq);
            self.events.push_back(CidEvent::Issued(cid));
        }
    }

    pub fn poll_new(&mut self) -> Option<IssuedCid> {
        while let Some(seq) = self.pending_new.pop_front() {
            if let Some(c) = self.local.get(&seq) {
                return Some(*c);
            }
        }
        None
    }

    pub fn on_new_lost(&mut self, seq: u64) {
        if self.local.contains_key(&seq) {
            self.pending_new.push_back(seq);
        }
    }

    pub fn poll_retire(&mut self) -> Option<u64> {
        self.pending_retire.pop_front()
    }

    pub fn on_retire_lost(&mut self, seq: u64) {
        self.pending_retire.push_back(seq);
    }

    pub fn has_frames(&self) -> bool {
        !self.pending_new.is_empty() || !self.pending_retire.is_empty()
    }

    /// NEW_CONNECTION_ID from the peer (RFC 9000 §19.15, §5.1.2).
    pub fn on_new_connection_id(
        &mut self,
        seq: u64,
        retire_prior_to: u64,
        cid: ConnectionId,
        reset_token: StatelessResetToken,
    ) -> Result<(), TransportError> {
        if self.remote().is_empty() {
            return Err(transport_err!(
                PROTOCOL_VIOLATION,
                "NEW_CONNECTION_ID while using a zero-length connection ID"
            ));
        }
        if let Some((known, _)) = self.remote.get(&seq) {
            if *known != cid {
                return Err(transport_err!(
                    PROTOCOL_VIOLATION,
                    "sequence {seq} reused for another connection ID"
                ));
            }
            return Ok(());
        }
        if seq < self.remote_retire_prior_to {
            // Already retired: retire this one straight away (RFC 9000 §19.15).
            self.pending_retire.push_back(seq);
            return Ok(());
        }
        self.remote.insert(seq, (cid, Some(reset_token)));
        if retire_prior_to > self.remote_retire_prior_to {
            self.remote_retire_prior_to = retire_prior_to;
            let retired: Vec<u64> = self
                .remote
                .range(..retire_prior_to)
                .map(|(&s, _)| s)
                .collect();
            for s in retired {
                self.remote.remove(&s);
                self.pending_retire.push_back(s);
            }
        }
        if self.remote.len() as u64 > self.remote_limit {
            return Err(transport_err!(
                CONNECTION_ID_LIMIT_ERROR,
                "peer issued {} connection IDs, limit {}",
                self.remote.len(),
                self.remote_limit
            ));
        }
        Ok(())
    }

    /// RETIRE_CONNECTION_ID from the peer (RFC 9000 §19.16). `packet_dcid` is the ID the frame's
    /// packet was sent to, which must not be the one retired.
    pub fn on_retire_connection_id(
        &mut self,
        seq: u64,
        packet_dcid: &ConnectionId,
        rng: &mut impl RngCore,
        peer_limit: u64,
    ) -> Result<(), TransportError> {
        if seq >= self.next_local_seq {
            return Err(transport_err!(
                PROTOCOL_VIOLATION,
                "retiring connection ID {seq} that was never issued"
            ));
        }
        if let Some(c) = self.local.get(&seq) {
            if c.cid == *packet_dcid {
                return Err(transport_err!(
                    PROTOCOL_VIOLATION,
                    "retiring the connection ID the packet was sent to"
                ));
            }
            let cid = c.cid;
            self.local.remove(&seq);
            self.events.push_back(CidEvent::Retired(cid));
            self.issue_up_to(peer_limit, rng);
        }
        Ok(())
    }

    pub fn poll_event(&mut self) -> Option<CidEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn cid(b: u8) -> ConnectionId {
        ConnectionId::new(&[b; 8]).expect("8 bytes")
    }

    #[test]
    fn issues_up_to_the_peer_limit_and_replaces_retired_ids() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut s = CidState::new(cid(1), cid(2), (8, None), 4);
        s.issue_up_to(3, &mut rng);
        assert_eq!(s.local_ids().count(), 3);
        let issued: Vec<_> = std::iter::from_fn(|| s.poll_new()).collect();
        assert_eq!(issued.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![1, 2]);
        s.on_retire_connection_id(1, &cid(1), &mut rng, 3)
            .expect("retire 1");
        assert_eq!(s.local_ids().count(), 3, "a replacement is issued");
        assert!(s.local_ids().all(|c| c.seq != 1));
        let err = s
            .on_retire_connection_id(9, &cid(1), &mut rng, 3)
            .expect_err("never issued");
        assert_eq!(
            err.code,
            crate::error::TransportErrorCode::PROTOCOL_VIOLATION
        );
        let err = s
            .on_retire_connection_id(0, &cid(1), &mut rng, 3)
            .expect_err("the packet's own id");
        assert_eq!(
            err.code,
            crate::error::TransportErrorCode::PROTOCOL_VIOLATION
        );
    }

    #[test]
    fn peer_ids_respect_retire_prior_to_and_our_limit() {
        let mut s = CidState::new(cid(1), cid(2), (8, None), 2);
        s.on_new_connection_id(1, 0, cid(3), [0; 16])
            .expect("first");
        let err = s
            .on_new_connection_id(2, 0, cid(4), [0; 16])
            .expect_err("over the limit");
        assert_eq!(
            err.code,
            crate::error::TransportErrorCode::CONNECTION_ID_LIMIT_ERROR
        );
        let mut s = CidState::new(cid(1), cid(2), (8, None), 2);
        s.on_new_connection_id(1, 1, cid(3), [0; 16])
            .expect("retires 0");
        assert_eq!(s.remote(), cid(3));
        assert_eq!(s.poll_retire(), Some(0));
    }
}
