//! The TLS session and the packet protection keys it produced, per packet number space
//! (RFC 9001 §4, §5), with the bookkeeping of 1-RTT key updates (§6).
//!
//! Invariants: Initial keys exist from the start until discarded (RFC 9001 §4.9.1), Handshake
//! keys from when TLS produces them until discarded (§4.9.2), 1-RTT keys once TLS produces them;
//! discarded keys never come back. The level TLS writes at only rises. A space whose keys are
//! missing neither sends nor receives.

use recoup_time::Instant;

use crate::cid::ConnectionId;
use crate::config::TransportConfig;
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
    /// When a packet of the current phase was first acknowledged: the next update waits three
    /// PTOs after it (RFC 9001 §6.5).
    pub phase_acked_at: Option<Instant>,
    /// Received packets that failed authentication, under any key (RFC 9001 §6.6).
    pub failed_decryptions: u64,
    /// We started the current phase: the peer learns of it only from a packet sent in it.
    pub announce: bool,
}

impl KeyUpdate {
    /// A new key phase started (ours or the peer's): count its packets from zero and wait for
    /// one of them to be acknowledged before the next update.
    pub fn start_phase(&mut self) {
        self.sent_in_phase = 0;
        self.first_pn_in_phase = None;
        self.phase_acked = false;
        self.phase_acked_at = None;
        self.announce = false;
    }

    /// A 1-RTT packet `pn` was sent; only an ack-eliciting one can confirm the phase.
    pub fn on_sent(&mut self, pn: u64, ack_eliciting: bool) {
        if ack_eliciting && self.first_pn_in_phase.is_none() {
            self.first_pn_in_phase = Some(pn);
        }
        self.sent_in_phase += 1;
    }

    /// A 1-RTT packet `pn` was acknowledged at `now`.
    pub fn on_acked(&mut self, pn: u64, now: Instant) {
        if !self.phase_acked && self.first_pn_in_phase.is_some_and(|first| pn >= first) {
            self.phase_acked = true;
            self.phase_acked_at = Some(now);
        }
    }

    /// An update is `due` (or we just made one) and no ack-eliciting packet of the current
    /// phase went out yet: one should, so that the peer follows and acknowledges the phase (RFC
    /// 9001 §6.1, §6.2); an endpoint that sends only ACKs would otherwise never get there. One
    /// is enough; loss detection takes care of it if it is lost.
    pub fn wants_ack(&self, due: bool) -> bool {
        (due || self.announce) && self.first_pn_in_phase.is_none()
    }

    /// When a `due` update may start, once it only waits for time (RFC 9001 §6.5). `three_pto`
    /// is asked only then: this runs with every timer poll, and an update is rarely due.
    pub fn timeout(
        &self,
        due: impl FnOnce() -> bool,
        three_pto: impl FnOnce() -> std::time::Duration,
    ) -> Option<Instant> {
        let acked_at = self.phase_acked_at?;
        due().then(|| acked_at + three_pto())
    }

    /// Whether a new update may start at `now`: a packet of the current phase was acknowledged
    /// (RFC 9001 §6.1) at least `three_pto` ago, so the peer has had time to drop its previous
    /// keys and can derive the next ones (§6.5).
    pub fn may_initiate(&self, now: Instant, three_pto: std::time::Duration) -> bool {
        self.phase_acked && self.phase_acked_at.is_some_and(|t| now >= t + three_pto)
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

    /// The AEAD limits in force (RFC 9001 §6.6): packets one 1-RTT key may protect and
    /// received packets that may fail authentication, the cipher's or the configured lower
    /// ones. Before 1-RTT keys exist the handshake's AES-128-GCM holds: its integrity limit is
    /// 2^52 (§6.6), far beyond what a handshake meets.
    pub fn aead_limits(&self, config: &TransportConfig) -> (u64, u64) {
        const AES_GCM_INTEGRITY_LIMIT: u64 = 1 << 52;
        let (confidentiality, integrity) = self
            .one_rtt
            .as_ref()
            .map_or((u64::MAX, AES_GCM_INTEGRITY_LIMIT), OneRttKeys::aead_limits);
        (
            config
                .aead_confidentiality_limit
                .map_or(confidentiality, |c| c.min(confidentiality)),
            config
                .aead_integrity_limit
                .map_or(integrity, |i| i.min(integrity)),
        )
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

    /// Protects the packet of `space` at `buf[start..]` in place (see
    /// [`crate::crypto::PacketProtection::seal_at`]; `pn_offset` counts from `start`); `None` if
    /// the space has no keys.
    pub fn seal(
        &self,
        space: SpaceId,
        pn: u64,
        buf: &mut Vec<u8>,
        start: usize,
        (pn_offset, pn_len): (usize, usize),
    ) -> Option<Result<(), Error>> {
        match space {
            SpaceId::Data => self
                .one_rtt
                .as_ref()
                .map(|k| k.seal_at(pn, buf, start, pn_offset, pn_len)),
            _ => self
                .long_header(space)
                .map(|k| k.local.seal_at(pn, buf, start, pn_offset, pn_len)),
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
    pub fn open<'a>(
        &mut self,
        space: SpaceId,
        pn: u64,
        packet: &'a mut [u8],
        header_len: usize,
    ) -> Result<(&'a [u8], bool), Error> {
        if space != SpaceId::Data {
            let keys = self.long_header(space).ok_or(Error::Decrypt)?;
            return Ok((keys.remote.open(pn, packet, header_len)?, false));
        }
        let opened = self
            .one_rtt
            .as_mut()
            .ok_or(Error::Decrypt)?
            .open(pn, packet, header_len)?;
        Ok((opened.payload, opened.peer_updated))
    }
}
