//! The TLS session and the packet protection keys it produced, per packet number space
//! (RFC 9001 §4, §5), with the bookkeeping of 1-RTT key updates (§6).
//!
//! Invariants: Initial keys exist from the start until discarded (RFC 9001 §4.9.1), Handshake
//! keys from when TLS produces them until discarded (§4.9.2), 1-RTT keys once TLS produces them;
//! discarded keys never come back. The level TLS writes at only rises. A space whose keys are
//! missing neither sends nor receives.

use recoup_time::Instant;

use crate::cid::ConnectionId;
use crate::crypto::{initial_keys, Keys, OneRttKeys, Side};
use crate::error::Error;
use crate::loss::SpaceId;
use crate::tls::{NewKeys, TlsSession};

/// The TLS session and the keys of each packet number space.
#[derive(Debug)]
pub(super) struct KeyState {
    pub tls: TlsSession,
    initial: Option<Keys>,
    handshake: Option<Keys>,
    one_rtt: Option<OneRttKeys>,
    /// Encryption level TLS writes at.
    pub write_level: SpaceId,
    pub update: KeyUpdate,
}

/// Key update bookkeeping (RFC 9001 §6).
#[derive(Debug, Default)]
pub(super) struct KeyUpdate {
    /// Packets sent with the current key phase.
    pub sent_in_phase: u64,
    /// First packet number sent in the current phase; an update needs one of them acknowledged.
    pub first_pn_in_phase: Option<u64>,
    pub phase_acked: bool,
    /// When to drop the previous phase's receive key.
    pub drop_previous_at: Option<Instant>,
    /// The application asked for an update.
    pub requested: bool,
}

impl KeyUpdate {
    /// A new key phase started (ours or the peer's): count its packets from zero and wait for
    /// one of them to be acknowledged before the next update.
    pub fn start_phase(&mut self) {
        self.sent_in_phase = 0;
        self.first_pn_in_phase = None;
        self.phase_acked = false;
    }

    /// A 1-RTT packet `pn` was sent.
    pub fn on_sent(&mut self, pn: u64) {
        if self.first_pn_in_phase.is_none() {
            self.first_pn_in_phase = Some(pn);
        }
        self.sent_in_phase += 1;
    }

    /// A 1-RTT packet `pn` was acknowledged.
    pub fn on_acked(&mut self, pn: u64) {
        if self.first_pn_in_phase.is_some_and(|first| pn >= first) {
            self.phase_acked = true;
        }
    }
}

impl KeyState {
    /// Starts with the Initial keys derived from the client's first destination ID (RFC 9001
    /// §5.2).
    pub fn new(tls: TlsSession, original_dcid: &ConnectionId, side: Side) -> Self {
        Self {
            tls,
            initial: Some(initial_keys(original_dcid, side)),
            handshake: None,
            one_rtt: None,
            write_level: SpaceId::Initial,
            update: KeyUpdate::default(),
        }
    }

    /// Installs keys TLS produced; TLS writes at their level from now on.
    pub fn install(&mut self, keys: NewKeys) {
        match keys {
            NewKeys::Handshake(k) => {
                self.handshake = Some(k);
                self.write_level = SpaceId::Handshake;
            }
            NewKeys::OneRtt(k) => {
                self.one_rtt = Some(*k);
                self.write_level = SpaceId::Data;
            }
        }
    }

    /// RFC 9001 §5.2: after a Retry, Initial keys come from the Retry's source ID, which the
    /// client uses as its destination ID from then on.
    pub fn rederive_initial(&mut self, dcid: &ConnectionId, side: Side) {
        self.initial = Some(initial_keys(dcid, side));
    }

    pub fn has(&self, space: SpaceId) -> bool {
        match space {
            SpaceId::Initial => self.initial.is_some(),
            SpaceId::Handshake => self.handshake.is_some(),
            SpaceId::Data => self.one_rtt.is_some(),
        }
    }

    /// Drops the keys of `space` (1-RTT keys are never dropped). False if there were none.
    pub fn discard(&mut self, space: SpaceId) -> bool {
        match space {
            SpaceId::Initial => self.initial.take().is_some(),
            SpaceId::Handshake => self.handshake.take().is_some(),
            SpaceId::Data => false,
        }
    }

    /// The 1-RTT keys, once TLS produced them.
    pub fn one_rtt(&self) -> Option<&OneRttKeys> {
        self.one_rtt.as_ref()
    }

    pub fn one_rtt_mut(&mut self) -> Option<&mut OneRttKeys> {
        self.one_rtt.as_mut()
    }

    /// The Initial or Handshake keys, if installed; `None` for the 1-RTT space, whose keys
    /// (with their key phases) are `one_rtt`.
    fn long_header(&self, space: SpaceId) -> Option<&Keys> {
        match space {
            SpaceId::Initial => self.initial.as_ref(),
            SpaceId::Handshake => self.handshake.as_ref(),
            SpaceId::Data => None,
        }
    }

    /// Protects a packet of `space` in place (see [`crate::crypto::PacketProtection::seal`]);
    /// `None` if the space has no keys.
    pub fn seal(
        &self,
        space: SpaceId,
        pn: u64,
        packet: &mut Vec<u8>,
        pn_offset: usize,
        pn_len: usize,
    ) -> Option<Result<(), Error>> {
        match space {
            SpaceId::Data => self
                .one_rtt
                .as_ref()
                .map(|k| k.seal(pn, packet, pn_offset, pn_len)),
            _ => self
                .long_header(space)
                .map(|k| k.local.seal(pn, packet, pn_offset, pn_len)),
        }
    }

    /// Removes header protection of a received packet of `space`; returns the packet number
    /// length and the truncated packet number.
    pub fn unprotect_header(
        &self,
        space: SpaceId,
        packet: &mut [u8],
        pn_offset: usize,
    ) -> Result<(usize, u64), Error> {
        match space {
            SpaceId::Data => self
                .one_rtt
                .as_ref()
                .ok_or(Error::Decrypt)?
                .unprotect_header(packet, pn_offset),
            _ => self
                .long_header(space)
                .ok_or(Error::Decrypt)?
                .remote
                .unprotect_header(packet, pn_offset),
        }
    }

    /// Decrypts a received packet of `space` whose header protection was removed. Returns the
    /// payload and whether the peer started a key update with it (1-RTT only, RFC 9001 §6.2).
    pub fn open(
        &mut self,
        space: SpaceId,
        pn: u64,
        packet: &mut [u8],
        header_len: usize,
    ) -> Result<(Vec<u8>, bool), Error> {
        if space != SpaceId::Data {
            let keys = self.long_header(space).ok_or(Error::Decrypt)?;
            return Ok((keys.remote.open(pn, packet, header_len)?.to_vec(), false));
        }
        let opened = self
            .one_rtt
            .as_mut()
            .ok_or(Error::Decrypt)?
            .open(pn, packet, header_len)?;
        Ok((opened.payload.to_vec(), opened.peer_updated))
    }
}
