//! QUIC packet protection (RFC 9001 §5) and 1-RTT key update (RFC 9001 §6), on top of the AEAD and
//! header-protection primitives of `rustls::quic`.
//!
//! Nothing here parses QUIC headers: callers pass the offsets of the packet number and of the end
//! of the header, which the packet layer knows.

use rustls::quic::{HeaderProtectionKey, PacketKey, PacketKeySet, Secrets};

use crate::error::Error;
use crate::packet::{read_truncated_pn, SAMPLE_OFFSET_FROM_PN as SAMPLE_OFFSET};

/// RFC 9000 §17.1: packet numbers are encoded in 1 to 4 bytes.
const MAX_PN_LEN: usize = 4;
/// RFC 9000 §17.2: the Header Form bit; set for long headers.
const LONG_HEADER_FORM: u8 = 0x80;
/// RFC 9000 §17.3.1: the Key Phase bit of a short header.
const KEY_PHASE_BIT: u8 = 0x04;

/// Which end of the connection we are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    /// The other end.
    #[must_use]
    pub fn peer(self) -> Self {
        match self {
            Self::Client => Self::Server,
            Self::Server => Self::Client,
        }
    }
}

impl From<Side> for rustls::Side {
    fn from(side: Side) -> Self {
        match side {
            Side::Client => Self::Client,
            Side::Server => Self::Server,
        }
    }
}

/// Packet protection for one direction at one encryption level: a header-protection key and a
/// packet (AEAD) key.
pub struct PacketProtection {
    header: Box<dyn HeaderProtectionKey>,
    packet: Box<dyn PacketKey>,
}

impl std::fmt::Debug for PacketProtection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketProtection")
            .field("tag_len", &self.packet.tag_len())
            .finish_non_exhaustive()
    }
}

impl From<rustls::quic::DirectionalKeys> for PacketProtection {
    fn from(keys: rustls::quic::DirectionalKeys) -> Self {
        Self::new(keys.header, keys.packet)
    }
}

impl PacketProtection {
    /// Wraps keys made by rustls (from a handshake, or from `rustls::quic::Algorithm` for keys
    /// derived elsewhere).
    #[must_use]
    pub fn new(header: Box<dyn HeaderProtectionKey>, packet: Box<dyn PacketKey>) -> Self {
        Self { header, packet }
    }

    /// Length of the AEAD tag that [`Self::seal`] appends.
    #[must_use]
    pub fn tag_len(&self) -> usize {
        self.packet.tag_len()
    }

    /// Protects a packet in place.
    ///
    /// `buf` holds the unprotected header, ending with the truncated packet number at
    /// `pn_offset..pn_offset + pn_len` (and the first byte's low two bits saying `pn_len - 1`),
    /// followed by the plaintext payload. The payload is encrypted with the header as associated
    /// data, the AEAD tag appended, then header protection applied (RFC 9001 §5.3, §5.4).
    ///
    /// The caller pads the payload so that `pn_len + payload length >= 4`: the header protection
    /// sample is the 16 bytes at `pn_offset + 4` of the protected packet (RFC 9001 §5.4.2). A
    /// packet that is too short, or inconsistent offsets, are rejected with
    /// [`Error::InvalidState`] and `buf` left unchanged.
    pub fn seal(
        &self,
        pn: u64,
        buf: &mut Vec<u8>,
        pn_offset: usize,
        pn_len: usize,
    ) -> Result<(), Error> {
        self.seal_at(pn, buf, 0, pn_offset, pn_len)
    }

    /// [`Self::seal`] of the packet that occupies `buf[start..]` (the last of a datagram being
    /// built; `pn_offset` counts from `start`), so coalesced packets are protected where they
    /// lie instead of being moved out and back.
    pub fn seal_at(
        &self,
        pn: u64,
        buf: &mut Vec<u8>,
        start: usize,
        pn_offset: usize,
        pn_len: usize,
    ) -> Result<(), Error> {
        seal_packet(
            self.header.as_ref(),
            self.packet.as_ref(),
            pn,
            buf,
            start,
            (pn_offset, pn_len),
        )
    }

    /// Removes header protection in place (RFC 9001 §5.4.1) and returns the packet number length
    /// and the truncated packet number. The packet number field starts at `pn_offset`.
    ///
    /// Fails with [`Error::UnexpectedEnd`] (nothing changed) if the packet is too short to hold the
    /// sample; such a packet is dropped (RFC 9001 §5.4.2).
    pub fn unprotect_header(
        &self,
        packet: &mut [u8],
        pn_offset: usize,
    ) -> Result<(usize, u64), Error> {
        unprotect_header(self.header.as_ref(), packet, pn_offset)
    }

    /// Decrypts the payload `packet[header_len..]` in place, with `packet[..header_len]` (header
    /// protection already removed) as associated data, and returns the plaintext. `pn` is the full
    /// packet number reconstructed by the caller (RFC 9000 §A.3).
    ///
    /// Fails with [`Error::Decrypt`] if the packet does not authenticate; the payload bytes are
    /// then unspecified.
    pub fn open<'a>(
        &self,
        pn: u64,
        packet: &'a mut [u8],
        header_len: usize,
    ) -> Result<&'a [u8], Error> {
        open_packet(self.packet.as_ref(), pn, packet, header_len)
    }
}

/// Keys for both directions at the Initial or Handshake level.
#[derive(Debug)]
pub struct Keys {
    /// Protects the packets we send.
    pub local: PacketProtection,
    /// Removes protection from the packets we receive.
    pub remote: PacketProtection,
}

impl From<rustls::quic::Keys> for Keys {
    fn from(keys: rustls::quic::Keys) -> Self {
        Self {
            local: keys.local.into(),
            remote: keys.remote.into(),
        }
    }
}

/// The Initial keys of QUIC version 1, derived from the Destination Connection ID of the client's
/// first Initial packet (RFC 9001 §5.2).
#[must_use]
pub fn initial_keys(client_dcid: &[u8], side: Side) -> Keys {
    initial_suite()
        .keys(client_dcid, side.into(), rustls::quic::Version::V1)
        .into()
}

/// RFC 9001 §5.2: Initial packets use AEAD_AES_128_GCM with SHA-256.
fn initial_suite() -> rustls::quic::Suite {
    match rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256 {
        rustls::SupportedCipherSuite::Tls13(suite) => suite.quic_suite(),
        _ => None,
    }
    .expect("ring's TLS13_AES_128_GCM_SHA256 is a TLS 1.3 suite with QUIC support")
}

/// Result of opening a 1-RTT packet with [`OneRttKeys::open`].
#[derive(Debug)]
pub struct Opened<'a> {
    /// The decrypted payload.
    pub payload: &'a [u8],
    /// This packet carried the peer's new key phase and authenticated with the next keys: the
    /// peer initiated a key update, and we have switched our send keys too (RFC 9001 §6.2).
    /// The connection arms a timer of about 3 PTO to call [`OneRttKeys::drop_previous_remote`].
    pub peer_updated: bool,
}

/// The previous receive key, kept for packets reordered across a key update (RFC 9001 §6.5).
struct PreviousRemote {
    key: Box<dyn PacketKey>,
    /// Lowest packet number that authenticated in the current phase. Packets of the other phase
    /// below it are old; at or above it they would be a new update. `None` while we initiated an
    /// update that the peer has not yet answered: every packet of the other phase is old.
    first_current_pn: Option<u64>,
}

/// 1-RTT packet protection with key update (RFC 9001 §6).
///
/// Header protection keys never change; packet keys for both directions move together from one
/// key phase to the next. Call sequence for the connection:
///
/// - Send: write the short header with the packet number, call [`Self::seal`]; it sets the Key
///   Phase bit itself. Call [`Self::initiate_update`] only once the handshake is confirmed and a
///   packet sent in the current phase has been acknowledged (RFC 9001 §6.1). The connection does
///   so when asked, after `TransportConfig::key_update_interval` packets, and before the AEAD's
///   confidentiality limit ([`Self::aead_limits`], RFC 9001 §6.6).
/// - Receive: [`Self::unprotect_header`], reconstruct the full packet number, then
///   [`Self::open`]. `open` picks the key from the Key Phase bit and the packet number: the
///   current key, the previous key for reordered packets of the old phase, or the next key, in
///   which case the update is committed only if the packet authenticates
///   ([`Opened::peer_updated`]). A packet that fails is dropped; the connection counts the
///   failures against the AEAD's integrity limit and closes with AEAD_LIMIT_REACHED past it
///   (RFC 9001 §6.6).
/// - After [`Self::initiate_update`] or a packet with `peer_updated`, arm a timer of about
///   3 PTO and then call [`Self::drop_previous_remote`] (RFC 9001 §6.5).
pub struct OneRttKeys {
    local_header: Box<dyn HeaderProtectionKey>,
    remote_header: Box<dyn HeaderProtectionKey>,
    local: Box<dyn PacketKey>,
    remote: Box<dyn PacketKey>,
    next: PacketKeySet,
    previous_remote: Option<PreviousRemote>,
    secrets: Secrets,
    key_phase: bool,
    /// [`Self::aead_limits`], taken from the keys once: they belong to the cipher suite, which
    /// key updates keep, and the sender asks before every packet (a call through the key's
    /// vtable into rustls each time was 5 % of a busy server's CPU).
    limits: (u64, u64),
}

impl std::fmt::Debug for OneRttKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneRttKeys")
            .field("key_phase", &self.key_phase)
            .field("has_previous_remote", &self.previous_remote.is_some())
            .finish_non_exhaustive()
    }
}

impl OneRttKeys {
    /// Builds the keys of key phase 0 from what `rustls::quic::KeyChange::OneRtt` yields: the
    /// phase 0 keys and the secrets already advanced to phase 1.
    pub(crate) fn new(keys: rustls::quic::Keys, mut next_secrets: Secrets) -> Self {
        let next = next_secrets.next_packet_keys();
        let limits = (
            keys.local.packet.confidentiality_limit(),
            keys.remote.packet.integrity_limit(),
        );
        Self {
            local_header: keys.local.header,
            remote_header: keys.remote.header,
            local: keys.local.packet,
            remote: keys.remote.packet,
            next,
            previous_remote: None,
            secrets: next_secrets,
            key_phase: false,
            limits,
        }
    }

    /// The current key phase (RFC 9001 §6): the Key Phase bit of packets we send.
    #[must_use]
    pub fn key_phase(&self) -> bool {
        self.key_phase
    }

    /// Length of the AEAD tag that [`Self::seal`] appends.
    #[must_use]
    pub fn tag_len(&self) -> usize {
        self.local.tag_len()
    }

    /// The AEAD's confidentiality limit (packets one key may protect) and integrity limit
    /// (packets that may fail authentication in a connection), RFC 9001 §6.6: 2^23 and 2^52
    /// for AES-GCM, none (`u64::MAX`) and 2^36 for ChaCha20-Poly1305.
    #[must_use]
    pub fn aead_limits(&self) -> (u64, u64) {
        self.limits
    }

    /// Whether the previous receive key is still kept.
    #[must_use]
    pub fn has_previous_remote(&self) -> bool {
        self.previous_remote.is_some()
    }

    /// Protects a short-header packet in place with the current key, after setting the Key
    /// Phase bit of `buf[0]` to [`Self::key_phase`]. Same layout and padding rule as
    /// [`PacketProtection::seal`]; a long header is rejected with [`Error::InvalidState`].
    pub fn seal(
        &self,
        pn: u64,
        buf: &mut Vec<u8>,
        pn_offset: usize,
        pn_len: usize,
    ) -> Result<(), Error> {
        self.seal_at(pn, buf, 0, pn_offset, pn_len)
    }

    /// [`Self::seal`] of the packet that occupies `buf[start..]`; see
    /// [`PacketProtection::seal_at`].
    pub fn seal_at(
        &self,
        pn: u64,
        buf: &mut Vec<u8>,
        start: usize,
        pn_offset: usize,
        pn_len: usize,
    ) -> Result<(), Error> {
        let Some(first) = buf.get_mut(start) else {
            return Err(Error::InvalidState("empty packet"));
        };
        if *first & LONG_HEADER_FORM != 0 {
            return Err(Error::InvalidState(
                "1-RTT keys protect short-header packets only",
            ));
        }
        if self.key_phase {
            *first |= KEY_PHASE_BIT;
        } else {
            *first &= !KEY_PHASE_BIT;
        }
        seal_packet(
            self.local_header.as_ref(),
            self.local.as_ref(),
            pn,
            buf,
            start,
            (pn_offset, pn_len),
        )
    }

    /// Removes header protection in place; see [`PacketProtection::unprotect_header`]. After it
    /// the Key Phase bit of `packet[0]` is readable.
    pub fn unprotect_header(
        &self,
        packet: &mut [u8],
        pn_offset: usize,
    ) -> Result<(usize, u64), Error> {
        unprotect_header(self.remote_header.as_ref(), packet, pn_offset)
    }

    /// Decrypts a short-header packet whose header protection was removed, choosing the key by
    /// its Key Phase bit (RFC 9001 §6.3, §6.5); see the type's documentation. Fails with
    /// [`Error::Decrypt`] if the packet does not authenticate, in which case no key changes.
    pub fn open<'a>(
        &mut self,
        pn: u64,
        packet: &'a mut [u8],
        header_len: usize,
    ) -> Result<Opened<'a>, Error> {
        let Some(&first) = packet.first() else {
            return Err(Error::Decrypt);
        };
        let phase = first & KEY_PHASE_BIT != 0;
        if phase == self.key_phase {
            let payload = open_packet(self.remote.as_ref(), pn, packet, header_len)?;
            if let Some(prev) = &mut self.previous_remote {
                prev.first_current_pn = Some(prev.first_current_pn.map_or(pn, |p| p.min(pn)));
            }
            return Ok(Opened {
                payload,
                peer_updated: false,
            });
        }
        if let Some(prev) = &self.previous_remote {
            if prev.first_current_pn.is_none_or(|first_pn| pn < first_pn) {
                let payload = open_packet(prev.key.as_ref(), pn, packet, header_len)?;
                return Ok(Opened {
                    payload,
                    peer_updated: false,
                });
            }
        }
        // RFC 9001 §6.3: a new key phase; the update holds only if the packet authenticates.
        let payload = open_packet(self.next.remote.as_ref(), pn, packet, header_len)?;
        self.advance(Some(pn));
        Ok(Opened {
            payload,
            peer_updated: true,
        })
    }

    /// Starts a key update (RFC 9001 §6.1): packets sent from now on use the next key phase. The
    /// caller checks the preconditions (handshake confirmed, a packet of the current phase
    /// acknowledged).
    pub fn initiate_update(&mut self) {
        self.advance(None);
    }

    /// Forgets the previous receive key (RFC 9001 §6.5: about 3 PTO after an update). Packets of
    /// the old phase then fail to open.
    pub fn drop_previous_remote(&mut self) {
        self.previous_remote = None;
    }

    /// Moves both directions to the next key phase and derives the keys of the one after.
    fn advance(&mut self, first_current_pn: Option<u64>) {
        let next = self.secrets.next_packet_keys();
        let PacketKeySet { local, remote } = std::mem::replace(&mut self.next, next);
        self.local = local;
        let old_remote = std::mem::replace(&mut self.remote, remote);
        self.previous_remote = Some(PreviousRemote {
            key: old_remote,
            first_current_pn,
        });
        self.key_phase = !self.key_phase;
    }
}

/// Seals the packet at `buf[start..]`; `pn_offset` counts from `start`.
fn seal_packet(
    header_key: &dyn HeaderProtectionKey,
    packet_key: &dyn PacketKey,
    pn: u64,
    buf: &mut Vec<u8>,
    start: usize,
    (pn_offset, pn_len): (usize, usize),
) -> Result<(), Error> {
    let Some(&first) = buf.get(start) else {
        return Err(Error::InvalidState("empty packet"));
    };
    if !(1..=MAX_PN_LEN).contains(&pn_len) || usize::from(first & 0x03) + 1 != pn_len {
        return Err(Error::InvalidState(
            "packet number length disagrees with the first byte",
        ));
    }
    let header_len = pn_offset + pn_len;
    // `buf.get(start)` succeeded: the packet is not empty.
    let packet_len = buf.len() - start;
    if pn_offset == 0 || header_len > packet_len {
        return Err(Error::InvalidState("packet number lies outside the packet"));
    }
    let sample_end = pn_offset + SAMPLE_OFFSET + header_key.sample_len();
    if packet_len + packet_key.tag_len() < sample_end {
        // RFC 9001 §5.4.2: the sender pads so that a sample is available.
        return Err(Error::InvalidState(
            "packet too short for a header protection sample",
        ));
    }
    let (header, payload) = buf[start..].split_at_mut(header_len);
    let tag = packet_key
        .encrypt_in_place(pn, header, payload)
        .map_err(|_| Error::InvalidState("payload too long for the AEAD"))?;
    buf.extend_from_slice(tag.as_ref());

    let (first, rest) = buf[start..]
        .split_first_mut()
        .ok_or(Error::InvalidState("empty packet"))?;
    // `rest` starts at packet index 1.
    let (pn_area, sample_area) = rest.split_at_mut(pn_offset - 1 + SAMPLE_OFFSET);
    header_key
        .encrypt_in_place(
            &sample_area[..header_key.sample_len()],
            first,
            &mut pn_area[pn_offset - 1..pn_offset - 1 + pn_len],
        )
        .map_err(|_| Error::InvalidState("header protection failed"))
}

fn unprotect_header(
    header_key: &dyn HeaderProtectionKey,
    packet: &mut [u8],
    pn_offset: usize,
) -> Result<(usize, u64), Error> {
    let sample_len = header_key.sample_len();
    let sample_end = pn_offset
        .checked_add(SAMPLE_OFFSET + sample_len)
        .ok_or(Error::UnexpectedEnd("header protection sample"))?;
    if pn_offset == 0 || packet.len() < sample_end {
        return Err(Error::UnexpectedEnd("header protection sample"));
    }
    let (first, rest) = packet
        .split_first_mut()
        .ok_or(Error::UnexpectedEnd("header protection sample"))?;
    let (pn_area, sample_area) = rest.split_at_mut(pn_offset - 1 + SAMPLE_OFFSET);
    let pn_field = &mut pn_area[pn_offset - 1..];
    // The mask covers all 4 candidate bytes; rustls unmasks only the `pn_len` it reads from the
    // unmasked first byte.
    header_key
        .decrypt_in_place(&sample_area[..sample_len], first, pn_field)
        .map_err(|_| Error::Decrypt)?;
    let pn_len = usize::from(*first & 0x03) + 1;
    Ok((pn_len, read_truncated_pn(pn_field, 0, pn_len)?))
}

fn open_packet<'a>(
    packet_key: &dyn PacketKey,
    pn: u64,
    packet: &'a mut [u8],
    header_len: usize,
) -> Result<&'a [u8], Error> {
    if header_len > packet.len() || packet.len() - header_len < packet_key.tag_len() {
        return Err(Error::Decrypt);
    }
    let (header, payload) = packet.split_at_mut(header_len);
    packet_key
        .decrypt_in_place(pn, header, payload)
        .map_err(|_| Error::Decrypt)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DCID: [u8; 8] = [0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08];

    /// A long-header-like packet: 1 type byte, 17 bytes of header, a 2-byte packet number.
    fn packet(payload_len: usize) -> (Vec<u8>, usize, usize) {
        let mut buf = vec![0xc1];
        buf.extend_from_slice(&[0x5a; 17]);
        let pn_offset = buf.len();
        buf.extend_from_slice(&[0x00, 0x07]);
        buf.extend((0..payload_len).map(|i| i as u8));
        (buf, pn_offset, 2)
    }

    #[test]
    fn initial_keys_round_trip_between_sides() {
        let client = initial_keys(&DCID, Side::Client);
        let server = initial_keys(&DCID, Side::Server);
        let (mut buf, pn_offset, pn_len) = packet(40);
        let plain = buf.clone();
        client.local.seal(7, &mut buf, pn_offset, pn_len).unwrap();
        assert_eq!(buf.len(), plain.len() + client.local.tag_len());
        assert_ne!(buf[..plain.len()], plain[..]);
        let (len, truncated) = server.remote.unprotect_header(&mut buf, pn_offset).unwrap();
        assert_eq!((len, truncated), (2, 7));
        let header_len = pn_offset + len;
        assert_eq!(buf[..header_len], plain[..header_len]);
        let opened = server.remote.open(7, &mut buf, header_len).unwrap();
        assert_eq!(opened, &plain[header_len..]);
        // The client cannot open its own packets with its receive keys.
        let (mut again, _, _) = packet(40);
        client.local.seal(7, &mut again, pn_offset, pn_len).unwrap();
        client.remote.unprotect_header(&mut again, pn_offset).ok();
        assert!(client.remote.open(7, &mut again, header_len).is_err());
    }

    #[test]
    fn seal_rejects_inconsistent_or_short_input() {
        let keys = initial_keys(&DCID, Side::Client);
        // Payload of 1 byte with a 2-byte packet number: no room for a sample.
        let (mut buf, pn_offset, pn_len) = packet(1);
        let before = buf.clone();
        assert!(keys.local.seal(1, &mut buf, pn_offset, pn_len).is_err());
        assert_eq!(buf, before);
        // Two bytes of payload make 4 bytes with the packet number: just enough.
        let (mut buf, pn_offset, pn_len) = packet(2);
        keys.local.seal(1, &mut buf, pn_offset, pn_len).unwrap();
        // Packet number length that disagrees with the first byte, or lies outside the buffer.
        let (mut buf, pn_offset, _) = packet(40);
        assert!(keys.local.seal(1, &mut buf, pn_offset, 3).is_err());
        assert!(keys.local.seal(1, &mut buf, 0, 2).is_err());
        assert!(keys.local.seal(1, &mut buf, 100, 2).is_err());
        assert!(keys.local.seal(1, &mut Vec::new(), 0, 1).is_err());
    }

    #[test]
    fn truncated_and_corrupted_packets_fail_cleanly() {
        let client = initial_keys(&DCID, Side::Client);
        let server = initial_keys(&DCID, Side::Server);
        let (mut sealed, pn_offset, pn_len) = packet(30);
        client
            .local
            .seal(9, &mut sealed, pn_offset, pn_len)
            .unwrap();
        let header_len = pn_offset + pn_len;

        // Every truncation: header protection needs pn_offset + 20 bytes, opening needs the tag.
        for cut in 0..sealed.len() {
            let mut short = sealed[..cut].to_vec();
            match server.remote.unprotect_header(&mut short, pn_offset) {
                Ok(_) => assert!(cut >= pn_offset + 20),
                Err(e) => {
                    assert!(cut < pn_offset + 20);
                    assert!(e.is_decode(), "{e}");
                }
            }
            assert!(server.remote.open(9, &mut short, header_len).is_err());
        }
        assert!(server.remote.unprotect_header(&mut [], 0).is_err());
        assert!(server
            .remote
            .unprotect_header(&mut sealed.clone(), usize::MAX)
            .is_err());
        assert!(server
            .remote
            .open(9, &mut sealed.clone(), usize::MAX)
            .is_err());

        // Flipping any single bit of the protected packet makes it fail to open.
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x10;
            let Ok((len, _)) = server.remote.unprotect_header(&mut bad, pn_offset) else {
                continue;
            };
            assert!(
                server.remote.open(9, &mut bad, pn_offset + len).is_err(),
                "bit flip at {i} went unnoticed"
            );
        }
        // A wrong packet number (nonce) fails too.
        let mut good = sealed.clone();
        server
            .remote
            .unprotect_header(&mut good, pn_offset)
            .unwrap();
        assert!(matches!(
            server.remote.open(10, &mut good, header_len),
            Err(Error::Decrypt)
        ));
    }

    #[test]
    fn side_converts_and_flips() {
        assert_eq!(Side::Server.peer(), Side::Client);
        assert_eq!(rustls::Side::from(Side::Server), rustls::Side::Server);
    }
}
