//! Packet headers (RFC 9000 §17), packet number encoding (§17.1, Appendix A), coalesced packets
//! (§12.2) and Version Negotiation (§17.2.1).
//!
//! # Receiving
//! 1. [`CoalescedPackets::new`] (or [`PartialDecode::parse`] for one packet) splits a datagram
//!    into packets and reads what header protection leaves visible: type, version, CIDs, token,
//!    the Length field, [`PartialDecode::pn_offset`] and the packet's bytes.
//! 2. The crypto layer ([`crate::crypto`]) copies [`PartialDecode::packet`] into a mutable
//!    buffer and removes header protection in place: it takes the sample
//!    [`SAMPLE_OFFSET_FROM_PN`] bytes past [`PartialDecode::pn_offset`], unmasks the first byte and
//!    the packet number bytes, and reads the truncated number with [`read_truncated_pn`].
//! 3. The caller reads the now clear first byte through [`FirstByte`] (packet number length, key
//!    phase, the reserved bits that must be zero) and recovers the full packet number with
//!    [`decode_pn`]. The AEAD's associated data is `packet[..pn_offset + pn_len]`; the ciphertext
//!    (tag included) is the rest.
//!
//! Retry packets are parsed here and written, with their integrity tag, by [`crate::retry`];
//! stateless resets are neither sent nor recognised.
//!
//! # Sending
//! Pick the packet number length with [`pn_len_for`], write the header with [`Header::write`]
//! (long headers get a 2-byte Length placeholder), append frames, then
//! [`HeaderLayout::set_length`] once the payload is complete and before sealing (the header is
//! the AEAD's associated data).

use crate::cid::{ConnectionId, MAX_CID_LEN};
use crate::coding::{write_varint_with_len, BufMutExt, Reader};
use crate::error::{transport_err, Error, TransportError};

/// QUIC version 1 (RFC 9000 §15).
pub const QUIC_VERSION_1: u32 = 0x0000_0001;

/// The header-protection sample starts this many bytes past the packet number's start, as if the
/// packet number were 4 bytes long (RFC 9001 §5.4.2). A sender therefore needs
/// `pn_len + payload_len >= 4` so that, with a 16-byte tag, the sample lies inside the packet.
pub const SAMPLE_OFFSET_FROM_PN: usize = 4;

/// Bytes of the Length placeholder [`Header::write`] leaves, so Length can be at most 16383.
pub const LENGTH_PLACEHOLDER_LEN: usize = 2;

pub(crate) const LONG_FORM_BIT: u8 = 0x80;
const FIXED_BIT: u8 = 0x40;
const SPIN_BIT: u8 = 0x20;
const KEY_PHASE_BIT: u8 = 0x04;
const LONG_RESERVED_BITS: u8 = 0x0c;
const SHORT_RESERVED_BITS: u8 = 0x18;
const PN_LEN_BITS: u8 = 0x03;

/// Kinds of QUIC v1 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketType {
    Initial,
    ZeroRtt,
    Handshake,
    Retry,
    VersionNegotiation,
    /// Short header (§17.3.1).
    OneRtt,
}

impl PacketType {
    #[must_use]
    pub fn is_long(self) -> bool {
        self != Self::OneRtt
    }

    /// The two Long Packet Type bits of §17.2 table 5.
    fn long_type_bits(self) -> u8 {
        match self {
            Self::Initial => 0,
            Self::ZeroRtt => 1,
            Self::Handshake => 2,
            // Retry; Retry and Version Negotiation headers are never written.
            _ => 3,
        }
    }
}

/// What can be read from one packet before header protection is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialDecode<'a> {
    pub ty: PacketType,
    /// The first byte as received; for packets with a packet number its low bits are still
    /// masked by header protection (RFC 9001 §5.4.1: 0x0f of a long header, 0x1f of a short one).
    pub first_byte: u8,
    /// The long header's version; 0 for Version Negotiation and for short headers.
    pub version: u32,
    pub dcid: ConnectionId,
    /// Empty for short headers.
    pub scid: ConnectionId,
    /// Initial: the address validation token (often empty). Retry: the retry token. Otherwise
    /// empty.
    pub token: &'a [u8],
    /// The Length field of Initial, 0-RTT and Handshake packets: packet number plus payload
    /// (including the AEAD tag).
    pub length: Option<u64>,
    /// Offset of the packet number from the packet's first byte; `None` for Retry and Version
    /// Negotiation.
    pub pn_offset: Option<usize>,
    /// Retry only: the Retry Integrity Tag (RFC 9001 §5.8), which the client verifies
    /// ([`crate::retry::tag_is_valid`]) before it follows the Retry.
    pub retry_integrity_tag: Option<[u8; 16]>,
    /// This packet's bytes within the datagram; `packet.len()` is where the next coalesced
    /// packet starts.
    pub packet: &'a [u8],
    /// Version Negotiation only: the raw Supported Version list (see [`Self::versions`]).
    supported_versions: &'a [u8],
}

impl<'a> PartialDecode<'a> {
    /// Parse the packet at the start of `datagram`. `local_cid_len` is the length of the
    /// connection IDs this endpoint issues: short headers do not encode it (§17.3.1).
    ///
    /// Fails (the packet and the rest of the datagram are dropped) on truncation, a clear Fixed
    /// bit (§17.2, except Version Negotiation), a CID longer than 20 bytes, a version other than
    /// v1 (use [`VersionInvariants::parse`] to answer with Version Negotiation), or a Length
    /// field running past the datagram.
    pub fn parse(datagram: &'a [u8], local_cid_len: usize) -> Result<Self, Error> {
        let mut r = Reader::new(datagram);
        let first_byte = r.u8("first byte")?;
        if first_byte & LONG_FORM_BIT == 0 {
            return Self::parse_short(r, first_byte, local_cid_len, datagram);
        }
        let version = r.u32("version")?;
        let dcid = read_cid(&mut r, "destination connection id")?;
        let scid = read_cid(&mut r, "source connection id")?;
        let mut pd = Self {
            ty: PacketType::VersionNegotiation,
            first_byte,
            version,
            dcid,
            scid,
            token: &[],
            length: None,
            pn_offset: None,
            retry_integrity_tag: None,
            packet: datagram,
            supported_versions: &[],
        };
        // §17.2.1: a Version Negotiation packet is the rest of the datagram.
        if version == 0 {
            let list = r.rest();
            if list.len() % 4 != 0 {
                return Err(Error::invalid(
                    "version negotiation",
                    format!("supported version list of {} bytes", list.len()),
                ));
            }
            pd.supported_versions = list;
            return Ok(pd);
        }
        if first_byte & FIXED_BIT == 0 {
            return Err(Error::invalid("fixed bit", "zero in a long header"));
        }
        if version != QUIC_VERSION_1 {
            return Err(Error::invalid(
                "version",
                format!("unsupported version 0x{version:08x}"),
            ));
        }
        pd.ty = match (first_byte >> 4) & 0x03 {
            0 => PacketType::Initial,
            1 => PacketType::ZeroRtt,
            2 => PacketType::Handshake,
            _ => PacketType::Retry,
        };
        match pd.ty {
            PacketType::Retry => {
                // §17.2.5: the token runs to the 16-byte integrity tag at the datagram's end.
                let rest = r.rest();
                let token_len = rest
                    .len()
                    .checked_sub(16)
                    .ok_or(Error::UnexpectedEnd("retry integrity tag"))?;
                pd.token = &rest[..token_len];
                let mut tag = [0; 16];
                tag.copy_from_slice(&rest[token_len..]);
                pd.retry_integrity_tag = Some(tag);
            }
            ty => {
                if ty == PacketType::Initial {
                    pd.token = r.length_prefixed("initial token")?;
                }
                let length = r.varint("packet length")?;
                let pn_offset = r.position();
                let end = usize::try_from(length)
                    .ok()
                    .filter(|&l| l <= r.remaining())
                    .map(|l| pn_offset + l)
                    .ok_or(Error::UnexpectedEnd("packet payload"))?;
                pd.length = Some(length);
                pd.pn_offset = Some(pn_offset);
                pd.packet = &datagram[..end];
            }
        }
        Ok(pd)
    }

    fn parse_short(
        mut r: Reader<'a>,
        first_byte: u8,
        local_cid_len: usize,
        datagram: &'a [u8],
    ) -> Result<Self, Error> {
        if first_byte & FIXED_BIT == 0 {
            return Err(Error::invalid("fixed bit", "zero in a short header"));
        }
        if local_cid_len > MAX_CID_LEN {
            return Err(Error::invalid(
                "local connection id length",
                local_cid_len.to_string(),
            ));
        }
        let dcid = ConnectionId::new(r.bytes(local_cid_len, "destination connection id")?)?;
        Ok(Self {
            ty: PacketType::OneRtt,
            first_byte,
            version: 0,
            dcid,
            scid: ConnectionId::EMPTY,
            token: &[],
            length: None,
            pn_offset: Some(r.position()),
            retry_integrity_tag: None,
            packet: datagram,
            supported_versions: &[],
        })
    }

    /// Bytes this packet occupies in the datagram.
    #[must_use]
    pub fn packet_len(&self) -> usize {
        self.packet.len()
    }

    /// The short header's spin bit (§17.4), which header protection leaves clear.
    #[must_use]
    pub fn spin(&self) -> Option<bool> {
        (self.ty == PacketType::OneRtt).then_some(self.first_byte & SPIN_BIT != 0)
    }

    /// Version Negotiation only: the versions the server supports.
    pub fn versions(&self) -> impl Iterator<Item = u32> + 'a {
        self.supported_versions
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
    }
}

/// Splits a datagram into its coalesced packets (RFC 9000 §12.2), yielding each packet's
/// [`PartialDecode`]. Stops after the first error: without a valid header the boundary of the
/// next packet is unknown, so the rest of the datagram is dropped.
#[derive(Clone, Debug)]
pub struct CoalescedPackets<'a> {
    rest: &'a [u8],
    local_cid_len: usize,
}

impl<'a> CoalescedPackets<'a> {
    #[must_use]
    pub fn new(datagram: &'a [u8], local_cid_len: usize) -> Self {
        Self {
            rest: datagram,
            local_cid_len,
        }
    }

    /// The bytes not yet split off.
    #[must_use]
    pub fn remaining(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for CoalescedPackets<'a> {
    type Item = Result<PartialDecode<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match PartialDecode::parse(self.rest, self.local_cid_len) {
            Ok(pd) => {
                self.rest = &self.rest[pd.packet.len()..];
                Some(Ok(pd))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// The version-independent fields of a long header (RFC 8999 §5.1), readable whatever the
/// version: what a server needs to answer an unknown version with Version Negotiation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionInvariants<'a> {
    pub version: u32,
    /// Up to 255 bytes under the invariants.
    pub dcid: &'a [u8],
    pub scid: &'a [u8],
}

impl<'a> VersionInvariants<'a> {
    /// Fails on a short header or truncation.
    pub fn parse(datagram: &'a [u8]) -> Result<Self, Error> {
        let mut r = Reader::new(datagram);
        if r.u8("first byte")? & LONG_FORM_BIT == 0 {
            return Err(Error::invalid("header form", "short header"));
        }
        let version = r.u32("version")?;
        let dcid_len = usize::from(r.u8("destination connection id")?);
        let dcid = r.bytes(dcid_len, "destination connection id")?;
        let scid_len = usize::from(r.u8("source connection id")?);
        let scid = r.bytes(scid_len, "source connection id")?;
        Ok(Self {
            version,
            dcid,
            scid,
        })
    }
}

fn read_cid(r: &mut Reader<'_>, what: &'static str) -> Result<ConnectionId, Error> {
    let len = usize::from(r.u8(what)?);
    // §17.2: a v1 long header CID over 20 bytes means the packet is dropped.
    ConnectionId::new(r.bytes(len, what)?)
}

/// Append a Version Negotiation packet (§17.2.1) answering a client's long header: `dcid` and
/// `scid` are the client's Source and Destination CIDs, i.e. swapped from what it sent.
/// `unused` fills the first byte's seven unused bits (the server should randomise them). CIDs
/// longer than 255 bytes cannot be encoded and are cut to 255.
pub fn write_version_negotiation(
    buf: &mut Vec<u8>,
    dcid: &[u8],
    scid: &[u8],
    versions: &[u32],
    unused: u8,
) {
    buf.put_u8(LONG_FORM_BIT | unused);
    buf.put_u32(0);
    for cid in [dcid, scid] {
        let cid = &cid[..cid.len().min(255)];
        buf.put_u8(cid.len() as u8);
        buf.put_bytes(cid);
    }
    for &v in versions {
        buf.put_u32(v);
    }
}

/// A header to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header<'a> {
    Initial {
        version: u32,
        dcid: ConnectionId,
        scid: ConnectionId,
        token: &'a [u8],
    },
    ZeroRtt {
        version: u32,
        dcid: ConnectionId,
        scid: ConnectionId,
    },
    Handshake {
        version: u32,
        dcid: ConnectionId,
        scid: ConnectionId,
    },
    /// Short header (§17.3.1).
    OneRtt {
        dcid: ConnectionId,
        spin: bool,
        key_phase: bool,
    },
}

/// Where [`Header::write`] put the parts the builder and the crypto layer patch later. Offsets
/// are absolute indices into the buffer written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderLayout {
    /// The packet's first byte.
    pub start: usize,
    /// The 2-byte Length placeholder (long headers).
    pub length_offset: Option<usize>,
    pub pn_offset: usize,
    pub pn_len: usize,
}

impl HeaderLayout {
    /// Bytes the payload starts at (just past the packet number).
    #[must_use]
    pub fn payload_offset(&self) -> usize {
        self.pn_offset + self.pn_len
    }

    /// Fill in the Length field once the payload is written: Length covers the packet number,
    /// the payload up to `buf.len()` and the `tag_len`-byte AEAD tag still to be appended
    /// (§17.2). Does nothing for short headers.
    ///
    /// # Panics
    /// If the length exceeds 16383, the most the 2-byte placeholder holds (build packets no
    /// larger than that), or `buf` is not the buffer the header was written to.
    pub fn set_length(&self, buf: &mut [u8], tag_len: usize) {
        if let Some(at) = self.length_offset {
            let length = (buf.len() - self.pn_offset + tag_len) as u64;
            write_varint_with_len(&mut buf[at..], length, LENGTH_PLACEHOLDER_LEN);
        }
    }
}

impl Header<'_> {
    #[must_use]
    pub fn ty(&self) -> PacketType {
        match self {
            Self::Initial { .. } => PacketType::Initial,
            Self::ZeroRtt { .. } => PacketType::ZeroRtt,
            Self::Handshake { .. } => PacketType::Handshake,
            Self::OneRtt { .. } => PacketType::OneRtt,
        }
    }

    /// Bytes [`Header::write`] appends, packet number included.
    #[must_use]
    pub fn encoded_len(&self, pn_len: usize) -> usize {
        match self {
            Self::OneRtt { dcid, .. } => 1 + dcid.len() + pn_len,
            Self::Initial {
                dcid, scid, token, ..
            } => {
                long_len(dcid, scid, pn_len)
                    + crate::coding::varint_size(token.len() as u64)
                    + token.len()
            }
            Self::ZeroRtt { dcid, scid, .. } | Self::Handshake { dcid, scid, .. } => {
                long_len(dcid, scid, pn_len)
            }
        }
    }

    /// Append the header and the packet number truncated to `pn_len` bytes (choose it with
    /// [`pn_len_for`]). Long headers get a zeroed 2-byte Length to fill with
    /// [`HeaderLayout::set_length`]. Reserved bits are written as zero.
    ///
    /// # Panics
    /// If `pn_len` is not 1 to 4.
    pub fn write(&self, buf: &mut Vec<u8>, pn: u64, pn_len: usize) -> HeaderLayout {
        assert!((1..=4).contains(&pn_len), "packet number length {pn_len}");
        let start = buf.len();
        let pn_bits = (pn_len - 1) as u8;
        let mut length_offset = None;
        match *self {
            Self::OneRtt {
                dcid,
                spin,
                key_phase,
            } => {
                let mut b = FIXED_BIT | pn_bits;
                if spin {
                    b |= SPIN_BIT;
                }
                if key_phase {
                    b |= KEY_PHASE_BIT;
                }
                buf.put_u8(b);
                buf.put_bytes(&dcid);
            }
            Self::Initial {
                version,
                dcid,
                scid,
                ..
            }
            | Self::ZeroRtt {
                version,
                dcid,
                scid,
            }
            | Self::Handshake {
                version,
                dcid,
                scid,
            } => {
                buf.put_u8(LONG_FORM_BIT | FIXED_BIT | (self.ty().long_type_bits() << 4) | pn_bits);
                buf.put_u32(version);
                for cid in [dcid, scid] {
                    buf.put_u8(cid.len() as u8);
                    buf.put_bytes(&cid);
                }
                if let Self::Initial { token, .. } = self {
                    buf.put_varint(token.len() as u64);
                    buf.put_bytes(token);
                }
                length_offset = Some(buf.len());
                buf.put_varint_with_len(0, LENGTH_PLACEHOLDER_LEN);
            }
        }
        let pn_offset = buf.len();
        buf.put_bytes(&pn.to_be_bytes()[8 - pn_len..]);
        HeaderLayout {
            start,
            length_offset,
            pn_offset,
            pn_len,
        }
    }
}

fn long_len(dcid: &ConnectionId, scid: &ConnectionId, pn_len: usize) -> usize {
    1 + 4 + 1 + dcid.len() + 1 + scid.len() + LENGTH_PLACEHOLDER_LEN + pn_len
}

/// The first byte once header protection is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstByte(pub u8);

impl FirstByte {
    #[must_use]
    pub fn is_long(self) -> bool {
        self.0 & LONG_FORM_BIT != 0
    }

    /// Packet Number Length bits plus one (§17.2, §17.3.1).
    #[must_use]
    pub fn pn_len(self) -> usize {
        usize::from(self.0 & PN_LEN_BITS) + 1
    }

    /// The short header's Key Phase bit (§17.4); false for long headers.
    #[must_use]
    pub fn key_phase(self) -> bool {
        !self.is_long() && self.0 & KEY_PHASE_BIT != 0
    }

    /// The short header's spin bit (§17.4); false for long headers.
    #[must_use]
    pub fn spin(self) -> bool {
        !self.is_long() && self.0 & SPIN_BIT != 0
    }

    /// Reserved bits must be zero after header protection is removed; otherwise the connection
    /// closes with PROTOCOL_VIOLATION (§17.2, §17.3.1). Check only once the packet has been
    /// authenticated, so an attacker cannot close the connection with a forged packet.
    pub fn check_reserved_bits(self) -> Result<(), TransportError> {
        let reserved = if self.is_long() {
            LONG_RESERVED_BITS
        } else {
            SHORT_RESERVED_BITS
        };
        if self.0 & reserved == 0 {
            Ok(())
        } else {
            Err(transport_err!(
                PROTOCOL_VIOLATION,
                "reserved header bits set: first byte 0x{:02x}",
                self.0
            ))
        }
    }
}

/// The truncated packet number at `pn_offset` (after header protection removal).
pub fn read_truncated_pn(packet: &[u8], pn_offset: usize, pn_len: usize) -> Result<u64, Error> {
    let bytes = packet
        .get(pn_offset..)
        .and_then(|b| b.get(..pn_len))
        .filter(|b| b.len() <= 4)
        .ok_or(Error::UnexpectedEnd("packet number"))?;
    Ok(bytes.iter().fold(0, |acc, &b| (acc << 8) | u64::from(b)))
}

/// How many bytes (1 to 4) to encode `full_pn` in, given the largest packet number the peer has
/// acknowledged in this space (RFC 9000 §17.1, Appendix A.2): enough for the receiver to
/// recover it while twice the unacknowledged range fits.
#[must_use]
pub fn pn_len_for(full_pn: u64, largest_acked: Option<u64>) -> usize {
    let num_unacked = match largest_acked {
        Some(acked) => full_pn.saturating_sub(acked),
        None => full_pn.saturating_add(1),
    };
    let min_bits = (64 - num_unacked.leading_zeros()) as usize + 1;
    min_bits.div_ceil(8).clamp(1, 4)
}

/// Recover a full packet number from its `pn_len`-byte truncation, given the largest packet
/// number received so far in this space (RFC 9000 Appendix A.3). A result above 2^62-1 cannot
/// be a real packet number (§12.3): drop the packet.
#[must_use]
pub fn decode_pn(truncated: u64, pn_len: usize, largest_pn: Option<u64>) -> u64 {
    let pn_nbits = 8 * pn_len.clamp(1, 4) as u32;
    let expected = largest_pn.map_or(0, |l| l.saturating_add(1));
    let win = 1u64 << pn_nbits;
    let hwin = win / 2;
    let mask = win - 1;
    let candidate = (expected & !mask) | (truncated & mask);
    // Signed arithmetic in the RFC; the checked forms keep it in u64.
    if expected
        .checked_sub(hwin)
        .is_some_and(|low| candidate <= low)
        && candidate < (1u64 << 62) - win
    {
        candidate + win
    } else if candidate > expected.saturating_add(hwin) && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;

    fn cid(b: &[u8]) -> ConnectionId {
        ConnectionId::new(b).unwrap()
    }

    #[test]
    fn rfc9000_a2_pn_encoding_examples() {
        // A.2: 0xac5c02 with 0xabe8b3 acked takes 2 bytes; 0xace8fe takes 3.
        assert_eq!(pn_len_for(0xac5c02, Some(0xabe8b3)), 2);
        assert_eq!(pn_len_for(0xace8fe, Some(0xabe8b3)), 3);
        assert_eq!(pn_len_for(0, None), 1);
        assert_eq!(pn_len_for(127, None), 2, "128 unacked needs a 9-bit window");
        assert_eq!(pn_len_for(126, None), 1);
        assert_eq!(pn_len_for(1 << 40, Some(0)), 4, "capped at 4 bytes");
    }

    #[test]
    fn rfc9000_a3_pn_decoding_example() {
        // A.3: largest 0xa82f30ea, truncated 0x9b32 in 16 bits → 0xa82f9b32.
        assert_eq!(decode_pn(0x9b32, 2, Some(0xa82f30ea)), 0xa82f9b32);
    }

    #[test]
    fn pn_decoding_wraps_both_ways_and_stays_in_range() {
        assert_eq!(decode_pn(0x00, 1, Some(0xff)), 0x100);
        assert_eq!(decode_pn(0xff, 1, Some(0x100)), 0xff);
        assert_eq!(decode_pn(5, 1, None), 5);
        assert_eq!(decode_pn(0xff, 1, None), 0xff);
        // Near 2^62 the candidate is not pushed up past the largest packet number; a truncation
        // that can only mean 2^62 or more decodes to a number the caller must drop.
        let top = (1u64 << 62) - 1;
        assert_eq!(decode_pn(0xff, 1, Some(top - 1)), top);
        assert_eq!(decode_pn(0x00, 1, Some(top)), 1 << 62);
        assert_eq!(decode_pn(0xffff_ffff, 4, Some(u64::MAX)), u64::MAX);
        // Round trip: the encoder's choice always decodes back.
        let mut seed = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let largest = seed >> 40;
            let full = largest + 1 + (seed >> 50);
            let len = pn_len_for(full, Some(largest));
            let truncated = full & ((1u64 << (8 * len)) - 1);
            assert_eq!(
                decode_pn(truncated, len, Some(largest)),
                full,
                "seed {seed}"
            );
        }
    }

    fn write_packet(header: Header<'_>, pn: u64, payload: &[u8], tag_len: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        let pn_len = pn_len_for(pn, None);
        let layout = header.write(&mut buf, pn, pn_len);
        assert_eq!(buf.len(), header.encoded_len(pn_len));
        buf.extend_from_slice(payload);
        layout.set_length(&mut buf, tag_len);
        buf.resize(buf.len() + tag_len, 0xee);
        buf
    }

    #[test]
    fn long_headers_round_trip_and_split_coalesced() {
        let dcid = cid(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let scid = cid(&[9, 9]);
        let initial = write_packet(
            Header::Initial {
                version: QUIC_VERSION_1,
                dcid,
                scid,
                token: b"tok",
            },
            0,
            &[0; 30],
            16,
        );
        let handshake = write_packet(
            Header::Handshake {
                version: QUIC_VERSION_1,
                dcid,
                scid,
            },
            300,
            &[1; 20],
            16,
        );
        let short = write_packet(
            Header::OneRtt {
                dcid,
                spin: true,
                key_phase: true,
            },
            7,
            &[2; 25],
            16,
        );
        let datagram = [initial.clone(), handshake.clone(), short.clone()].concat();
        let parts: Vec<_> = CoalescedPackets::new(&datagram, 8)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(parts.len(), 3);

        let p = &parts[0];
        assert_eq!(p.ty, PacketType::Initial);
        assert_eq!(
            (p.version, p.dcid, p.scid, p.token),
            (1, dcid, scid, &b"tok"[..])
        );
        assert_eq!(p.packet, &initial[..]);
        let pn_offset = p.pn_offset.unwrap();
        assert_eq!(p.length, Some((initial.len() - pn_offset) as u64));
        let fb = FirstByte(p.first_byte);
        assert_eq!(fb.pn_len(), 1);
        assert!(fb.check_reserved_bits().is_ok());
        assert_eq!(read_truncated_pn(p.packet, pn_offset, 1).unwrap(), 0);

        let p = &parts[1];
        assert_eq!(p.ty, PacketType::Handshake);
        assert_eq!(p.packet_len(), handshake.len());
        assert_eq!(FirstByte(p.first_byte).pn_len(), 2);
        assert_eq!(
            read_truncated_pn(p.packet, p.pn_offset.unwrap(), 2).unwrap(),
            300
        );

        let p = &parts[2];
        assert_eq!(p.ty, PacketType::OneRtt);
        assert_eq!(p.dcid, dcid);
        assert_eq!(p.spin(), Some(true));
        assert_eq!(p.pn_offset, Some(9));
        assert_eq!(p.packet, &short[..]);
        let fb = FirstByte(p.first_byte);
        assert!(fb.key_phase() && fb.spin() && !fb.is_long());
    }

    #[test]
    fn zero_rtt_header_round_trips() {
        let h = Header::ZeroRtt {
            version: QUIC_VERSION_1,
            dcid: cid(&[4; 20]),
            scid: ConnectionId::EMPTY,
        };
        let bytes = write_packet(h, 1 << 20, &[3; 40], 16);
        let p = PartialDecode::parse(&bytes, 0).unwrap();
        assert_eq!(p.ty, PacketType::ZeroRtt);
        assert_eq!(p.dcid.len(), 20);
        assert!(p.scid.is_empty());
        assert_eq!(FirstByte(p.first_byte).pn_len(), 3);
    }

    #[test]
    fn malformed_headers_are_rejected() {
        let h = Header::Handshake {
            version: QUIC_VERSION_1,
            dcid: cid(&[1; 4]),
            scid: cid(&[2; 4]),
        };
        let good = write_packet(h, 0, &[0; 20], 16);
        // Truncated: the Length runs past the datagram.
        assert!(PartialDecode::parse(&good[..good.len() - 1], 0).is_err());
        // Every prefix fails cleanly.
        for n in 0..good.len() {
            assert!(PartialDecode::parse(&good[..n], 0).is_err(), "prefix {n}");
        }
        // Fixed bit clear.
        let mut bad = good.clone();
        bad[0] &= !FIXED_BIT;
        assert_eq!(
            PartialDecode::parse(&bad, 0),
            Err(Error::invalid("fixed bit", "zero in a long header"))
        );
        // CID length 21.
        let mut bad = good.clone();
        bad[5] = 21;
        assert!(PartialDecode::parse(&bad, 0).is_err());
        // Unknown version: not parsed, but the invariants are readable.
        let mut bad = good.clone();
        bad[1..5].copy_from_slice(&0x1a2a_3a4au32.to_be_bytes());
        assert!(PartialDecode::parse(&bad, 0).is_err());
        let inv = VersionInvariants::parse(&bad).unwrap();
        assert_eq!(
            (inv.version, inv.dcid, inv.scid),
            (0x1a2a_3a4a, &[1u8; 4][..], &[2u8; 4][..])
        );
        // Short header with the fixed bit clear, and with an impossible local CID length.
        assert!(PartialDecode::parse(&[0x01, 0, 0, 0], 0).is_err());
        assert!(PartialDecode::parse(&[0x41; 40], 21).is_err());
        assert!(VersionInvariants::parse(&[0x41; 40]).is_err());
    }

    #[test]
    fn reserved_bits_are_a_protocol_violation() {
        let err = FirstByte(0xc0 | 0x04).check_reserved_bits().unwrap_err();
        assert_eq!(err.code, TransportErrorCode::PROTOCOL_VIOLATION);
        assert!(FirstByte(0x40 | 0x08).check_reserved_bits().is_err());
        assert!(FirstByte(0x40 | 0x10).check_reserved_bits().is_err());
        assert!(FirstByte(0x40 | 0x27).check_reserved_bits().is_ok());
        assert!(FirstByte(0xc3).check_reserved_bits().is_ok());
    }

    #[test]
    fn version_negotiation_round_trips() {
        let mut buf = Vec::new();
        write_version_negotiation(&mut buf, &[1, 2], &[3; 20], &[1, 0x0a0a_0a0a], 0x3f);
        // VN ignores the fixed bit: clear it to show.
        assert_eq!(buf[0], 0xbf);
        let p = PartialDecode::parse(&buf, 0).unwrap();
        assert_eq!(p.ty, PacketType::VersionNegotiation);
        assert_eq!(
            (p.version, &*p.dcid, &*p.scid),
            (0, &[1u8, 2][..], &[3u8; 20][..])
        );
        assert_eq!(p.versions().collect::<Vec<_>>(), vec![1, 0x0a0a_0a0a]);
        assert_eq!(p.pn_offset, None);
        // A list that is not whole versions is malformed.
        buf.push(0);
        assert!(PartialDecode::parse(&buf, 0).is_err());
    }

    #[test]
    fn retry_parses_token_and_tag() {
        // §17.2.5: long header of type Retry (0xf0), version 1, an 8-byte DCID, a 4-byte SCID,
        // the token, then the 16-byte integrity tag.
        let mut buf = vec![0xf0, 0, 0, 0, 1, 8];
        buf.extend_from_slice(&[5; 8]);
        buf.push(4);
        buf.extend_from_slice(&[6; 4]);
        buf.extend_from_slice(b"retry token");
        buf.extend_from_slice(&[0xab; 16]);
        let p = PartialDecode::parse(&buf, 0).unwrap();
        assert_eq!(p.ty, PacketType::Retry);
        assert_eq!(p.token, b"retry token");
        assert_eq!(p.retry_integrity_tag, Some([0xab; 16]));
        assert_eq!(p.packet_len(), buf.len());
        // Header (19 bytes) plus 15: too short for the tag.
        assert!(PartialDecode::parse(&buf[..19 + 15], 0).is_err());
    }

    #[test]
    fn truncated_pn_reads_are_bounds_checked() {
        assert_eq!(read_truncated_pn(&[0, 0x12, 0x34], 1, 2).unwrap(), 0x1234);
        assert!(read_truncated_pn(&[0, 0x12], 1, 2).is_err());
        assert!(read_truncated_pn(&[0; 10], 0, 5).is_err());
        assert!(read_truncated_pn(&[0; 10], 99, 1).is_err());
    }
}
