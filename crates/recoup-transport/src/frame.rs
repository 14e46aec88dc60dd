//! QUIC v1 frames (RFC 9000 §19): a borrowed [`Frame`] enum, decoding as an iterator over a
//! decrypted packet payload ([`Frames`]), encoders, the size helpers a packet builder needs, the
//! [`RangeSet`] of received packet numbers that ACK frames are built from, and which frames may
//! appear in which packet type (§12.4 table 3).
//!
//! # Receiving
//! ```
//! # use recoup_transport::frame::{Frames, frame_allowed_or_err};
//! # use recoup_transport::packet::PacketType;
//! # fn f(payload: &[u8]) -> Result<(), recoup_transport::TransportError> {
//! for frame in Frames::new(payload) {
//!     let frame = frame?; // FRAME_ENCODING_ERROR / PROTOCOL_VIOLATION: close the connection
//!     frame_allowed_or_err(frame.ty(), PacketType::OneRtt)?;
//!     // ... dispatch on `frame`
//! }
//! # Ok(()) }
//! ```
//! A payload with no frames at all is a PROTOCOL_VIOLATION (§12.4); the caller checks that.
//!
//! # Sending
//! [`Frame::encode`] appends any frame. For STREAM and CRYPTO, [`stream_data_fit`] and
//! [`crypto_data_fit`] say how much data fits in the space left; [`StreamFrame::encode`] can omit
//! the Length field for the packet's last frame. ACKs are written from a [`RangeSet`] with
//! [`encode_ack`].

use std::fmt;
use std::ops::{Range, RangeInclusive};

use crate::cid::{ConnectionId, StatelessResetToken, MAX_CID_LEN};
use crate::coding::{varint_size, BufMutExt, Reader, VarInt};
use crate::error::{transport_err, DecodeError, TransportError};
use crate::packet::PacketType;

/// The largest stream count MAX_STREAMS / STREAMS_BLOCKED may carry (RFC 9000 §19.11, §19.14).
pub const MAX_STREAM_COUNT: u64 = 1 << 60;

/// A frame type (RFC 9000 §19, §12.4 table 3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameType(pub u64);

impl FrameType {
    pub const PADDING: Self = Self(0x00);
    pub const PING: Self = Self(0x01);
    pub const ACK: Self = Self(0x02);
    pub const ACK_ECN: Self = Self(0x03);
    pub const RESET_STREAM: Self = Self(0x04);
    pub const STOP_SENDING: Self = Self(0x05);
    pub const CRYPTO: Self = Self(0x06);
    pub const NEW_TOKEN: Self = Self(0x07);
    /// STREAM with no flag bits; 0x08..=0x0f are all STREAM.
    pub const STREAM: Self = Self(0x08);
    pub const MAX_DATA: Self = Self(0x10);
    pub const MAX_STREAM_DATA: Self = Self(0x11);
    pub const MAX_STREAMS_BIDI: Self = Self(0x12);
    pub const MAX_STREAMS_UNI: Self = Self(0x13);
    pub const DATA_BLOCKED: Self = Self(0x14);
    pub const STREAM_DATA_BLOCKED: Self = Self(0x15);
    pub const STREAMS_BLOCKED_BIDI: Self = Self(0x16);
    pub const STREAMS_BLOCKED_UNI: Self = Self(0x17);
    pub const NEW_CONNECTION_ID: Self = Self(0x18);
    pub const RETIRE_CONNECTION_ID: Self = Self(0x19);
    pub const PATH_CHALLENGE: Self = Self(0x1a);
    pub const PATH_RESPONSE: Self = Self(0x1b);
    /// CONNECTION_CLOSE signalling a transport error.
    pub const CONNECTION_CLOSE: Self = Self(0x1c);
    /// CONNECTION_CLOSE signalling an application error.
    pub const APPLICATION_CLOSE: Self = Self(0x1d);
    pub const HANDSHAKE_DONE: Self = Self(0x1e);

    const STREAM_FIN: u64 = 0x01;
    const STREAM_LEN: u64 = 0x02;
    const STREAM_OFF: u64 = 0x04;

    /// Whether a packet containing it must be acknowledged: all frames but ACK, PADDING and
    /// CONNECTION_CLOSE (RFC 9002 §2).
    #[must_use]
    pub fn is_ack_eliciting(self) -> bool {
        !matches!(self.0, 0x00 | 0x02 | 0x03 | 0x1c | 0x1d)
    }

    /// The RFC's name for the frame type, for logs.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self.0 {
            0x00 => "PADDING",
            0x01 => "PING",
            0x02 | 0x03 => "ACK",
            0x04 => "RESET_STREAM",
            0x05 => "STOP_SENDING",
            0x06 => "CRYPTO",
            0x07 => "NEW_TOKEN",
            0x08..=0x0f => "STREAM",
            0x10 => "MAX_DATA",
            0x11 => "MAX_STREAM_DATA",
            0x12 | 0x13 => "MAX_STREAMS",
            0x14 => "DATA_BLOCKED",
            0x15 => "STREAM_DATA_BLOCKED",
            0x16 | 0x17 => "STREAMS_BLOCKED",
            0x18 => "NEW_CONNECTION_ID",
            0x19 => "RETIRE_CONNECTION_ID",
            0x1a => "PATH_CHALLENGE",
            0x1b => "PATH_RESPONSE",
            0x1c | 0x1d => "CONNECTION_CLOSE",
            0x1e => "HANDSHAKE_DONE",
            _ => "UNKNOWN",
        }
    }
}

impl fmt::Debug for FrameType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(0x{:02x})", self.name(), self.0)
    }
}

/// Whether `frame_type` may appear in a packet of `packet_type` (RFC 9000 §12.4 table 3).
/// Retry and Version Negotiation packets carry no frames. Follows the table, which allows
/// RETIRE_CONNECTION_ID in 0-RTT; §12.5 only lets a server reject it (MAY).
#[must_use]
pub fn frame_allowed(frame_type: FrameType, packet_type: PacketType) -> bool {
    // Columns of table 3: Initial, Handshake, 0-RTT, 1-RTT.
    let (i, h, z, o) = match frame_type.0 {
        0x00 | 0x01 => (true, true, true, true),
        0x02 | 0x03 | 0x06 => (true, true, false, true),
        0x07 | 0x1b | 0x1e => (false, false, false, true),
        0x04 | 0x05 | 0x08..=0x1a => (false, false, true, true),
        // "ih": only the transport CONNECTION_CLOSE may be in Initial or Handshake.
        0x1c => (true, true, true, true),
        0x1d => (false, false, true, true),
        _ => (false, false, false, false),
    };
    match packet_type {
        PacketType::Initial => i,
        PacketType::Handshake => h,
        PacketType::ZeroRtt => z,
        PacketType::OneRtt => o,
        PacketType::Retry | PacketType::VersionNegotiation => false,
    }
}

/// [`frame_allowed`] as the PROTOCOL_VIOLATION a receiver closes with (§12.4).
pub fn frame_allowed_or_err(
    frame_type: FrameType,
    packet_type: PacketType,
) -> Result<(), TransportError> {
    if frame_allowed(frame_type, packet_type) {
        Ok(())
    } else {
        Err(transport_err!(
            PROTOCOL_VIOLATION,
            "{} frame in a {packet_type:?} packet",
            frame_type.name()
        )
        .with_frame(frame_type.0))
    }
}

/// Stream directionality, as MAX_STREAMS and STREAMS_BLOCKED distinguish it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamDir {
    Bidi,
    Uni,
}

/// ECN counts of an ACK_ECN frame (RFC 9000 §19.3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EcnCounts {
    pub ect0: u64,
    pub ect1: u64,
    pub ce: u64,
}

/// A decoded frame. Data, tokens and reasons borrow the packet payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// One or more consecutive PADDING bytes.
    Padding {
        len: usize,
    },
    Ping,
    Ack(AckFrame<'a>),
    ResetStream {
        stream_id: u64,
        error_code: u64,
        final_size: u64,
    },
    StopSending {
        stream_id: u64,
        error_code: u64,
    },
    Crypto {
        offset: u64,
        data: &'a [u8],
    },
    NewToken {
        token: &'a [u8],
    },
    Stream(StreamFrame<'a>),
    MaxData(u64),
    MaxStreamData {
        stream_id: u64,
        max: u64,
    },
    MaxStreams {
        dir: StreamDir,
        max: u64,
    },
    DataBlocked(u64),
    StreamDataBlocked {
        stream_id: u64,
        limit: u64,
    },
    StreamsBlocked {
        dir: StreamDir,
        limit: u64,
    },
    NewConnectionId {
        seq: u64,
        retire_prior_to: u64,
        cid: ConnectionId,
        reset_token: StatelessResetToken,
    },
    RetireConnectionId {
        seq: u64,
    },
    PathChallenge([u8; 8]),
    PathResponse([u8; 8]),
    ConnectionClose(ConnectionClose<'a>),
    HandshakeDone,
}

/// A STREAM frame (RFC 9000 §19.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamFrame<'a> {
    pub stream_id: u64,
    pub offset: u64,
    pub data: &'a [u8],
    pub fin: bool,
}

/// A CONNECTION_CLOSE frame (RFC 9000 §19.19).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionClose<'a> {
    pub error_code: u64,
    /// `Some` for a transport close (type 0x1c): the frame type that caused it, 0 if unknown.
    /// `None` for an application close (type 0x1d).
    pub frame_type: Option<u64>,
    /// Meant to be UTF-8, but not guaranteed by the peer.
    pub reason: &'a [u8],
}

impl<'a> From<&'a TransportError> for ConnectionClose<'a> {
    fn from(e: &'a TransportError) -> Self {
        Self {
            error_code: e.code.0,
            frame_type: Some(e.frame_type.unwrap_or(0)),
            reason: e.reason.as_bytes(),
        }
    }
}

/// An ACK frame (RFC 9000 §19.3). Ranges were validated when the frame was decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckFrame<'a> {
    pub largest: u64,
    /// As encoded: multiply by 2^ack_delay_exponent for microseconds (see
    /// [`AckFrame::ack_delay_micros`]).
    pub ack_delay: u64,
    pub first_range: u64,
    pub ecn: Option<EcnCounts>,
    range_count: u64,
    /// The encoded Gap / ACK Range Length pairs after the first range.
    raw_ranges: &'a [u8],
}

impl<'a> AckFrame<'a> {
    /// The acknowledged packet numbers, highest range first.
    #[must_use]
    pub fn ranges(&self) -> AckRanges<'a> {
        AckRanges {
            next: self
                .largest
                .checked_sub(self.first_range)
                .map(|smallest| smallest..=self.largest),
            reader: Reader::new(self.raw_ranges),
        }
    }

    /// The ACK Delay in microseconds for the peer's `ack_delay_exponent` (§18.2), saturating.
    #[must_use]
    pub fn ack_delay_micros(&self, ack_delay_exponent: u8) -> u64 {
        let exp = u32::from(ack_delay_exponent.min(63));
        if self.ack_delay.leading_zeros() < exp {
            u64::MAX
        } else {
            self.ack_delay << exp
        }
    }

    fn parse(r: &mut Reader<'a>, ecn: bool) -> Result<Self, DecodeError> {
        let largest = r.varint("ack largest acknowledged")?;
        let ack_delay = r.varint("ack delay")?;
        let range_count = r.varint("ack range count")?;
        let first_range = r.varint("ack first range")?;
        // §19.3.1: a range reaching below packet number 0 is a FRAME_ENCODING_ERROR.
        let mut smallest = largest
            .checked_sub(first_range)
            .ok_or_else(|| DecodeError::invalid("ack first range", "exceeds largest"))?;
        let start = r.position();
        let all = r.peek_rest();
        // Each pair takes at least two bytes, so a hostile count ends at the input's end.
        for _ in 0..range_count {
            let gap = r.varint("ack gap")?;
            let len = r.varint("ack range length")?;
            smallest = smallest
                .checked_sub(gap)
                .and_then(|s| s.checked_sub(2))
                .and_then(|s| s.checked_sub(len))
                .ok_or_else(|| DecodeError::invalid("ack range", "below packet number 0"))?;
        }
        let raw_ranges = &all[..r.position() - start];
        let ecn = if ecn {
            Some(EcnCounts {
                ect0: r.varint("ecn ect0 count")?,
                ect1: r.varint("ecn ect1 count")?,
                ce: r.varint("ecn ce count")?,
            })
        } else {
            None
        };
        Ok(Self {
            largest,
            ack_delay,
            first_range,
            ecn,
            range_count,
            raw_ranges,
        })
    }

    fn encode(&self, buf: &mut Vec<u8>) {
        let ty = if self.ecn.is_some() {
            FrameType::ACK_ECN
        } else {
            FrameType::ACK
        };
        buf.put_varint(ty.0);
        buf.put_varint(self.largest);
        buf.put_varint(self.ack_delay);
        buf.put_varint(self.range_count);
        buf.put_varint(self.first_range);
        buf.put_bytes(self.raw_ranges);
        if let Some(ecn) = &self.ecn {
            put_ecn(buf, ecn);
        }
    }

    fn encoded_len(&self) -> usize {
        1 + varint_size(self.largest)
            + varint_size(self.ack_delay)
            + varint_size(self.range_count)
            + varint_size(self.first_range)
            + self.raw_ranges.len()
            + self.ecn.as_ref().map_or(0, ecn_len)
    }
}

fn put_ecn(buf: &mut Vec<u8>, ecn: &EcnCounts) {
    buf.put_varint(ecn.ect0);
    buf.put_varint(ecn.ect1);
    buf.put_varint(ecn.ce);
}

fn ecn_len(ecn: &EcnCounts) -> usize {
    varint_size(ecn.ect0) + varint_size(ecn.ect1) + varint_size(ecn.ce)
}

/// Iterator over an [`AckFrame`]'s acknowledged ranges, highest first.
#[derive(Clone, Debug)]
pub struct AckRanges<'a> {
    next: Option<RangeInclusive<u64>>,
    reader: Reader<'a>,
}

impl Iterator for AckRanges<'_> {
    type Item = RangeInclusive<u64>;

    fn next(&mut self) -> Option<Self::Item> {
        let current = self.next.take()?;
        if !self.reader.is_empty() {
            // Validated at decode; a failure here just ends the iteration.
            let gap = self.reader.varint("ack gap").ok()?;
            let len = self.reader.varint("ack range length").ok()?;
            let largest = current.start().checked_sub(gap)?.checked_sub(2)?;
            self.next = Some(largest.checked_sub(len)?..=largest);
        }
        Some(current)
    }
}

/// Append an ACK (or ACK_ECN if `ecn` is given) frame acknowledging the highest `max_ranges`
/// ranges of `ranges` (at least one). `ack_delay` is already scaled down by our
/// ack_delay_exponent. Writes nothing and returns false if `ranges` is empty.
pub fn encode_ack(
    buf: &mut Vec<u8>,
    ranges: &RangeSet,
    ack_delay: u64,
    ecn: Option<&EcnCounts>,
    max_ranges: usize,
) -> bool {
    let mut iter = ranges.iter_desc().take(max_ranges.max(1));
    let Some(first) = iter.next() else {
        return false;
    };
    let count = ranges.len().min(max_ranges.max(1)) - 1;
    let ty = if ecn.is_some() {
        FrameType::ACK_ECN
    } else {
        FrameType::ACK
    };
    buf.put_varint(ty.0);
    buf.put_varint(first.end - 1);
    buf.put_varint(ack_delay);
    buf.put_varint(count as u64);
    buf.put_varint(first.end - 1 - first.start);
    let mut prev_smallest = first.start;
    for r in iter {
        // §19.3.1: Gap counts the missing packets minus one.
        buf.put_varint(prev_smallest - r.end - 1);
        buf.put_varint(r.end - 1 - r.start);
        prev_smallest = r.start;
    }
    if let Some(ecn) = ecn {
        put_ecn(buf, ecn);
    }
    true
}

/// A set of `u64` values kept as disjoint, non-adjacent half-open ranges, e.g. the packet
/// numbers received in one packet number space. Keeps at most `max_ranges` ranges: inserting
/// beyond that forgets the lowest ones, so a value below [`RangeSet::min`] may have been seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeSet {
    /// Ascending.
    ranges: Vec<Range<u64>>,
    max_ranges: usize,
}

impl RangeSet {
    /// An empty set keeping at most `max_ranges` (at least 1) ranges.
    #[must_use]
    pub fn new(max_ranges: usize) -> Self {
        Self {
            ranges: Vec::new(),
            max_ranges: max_ranges.max(1),
        }
    }

    /// Insert one value; true if it was not in the set.
    pub fn insert_one(&mut self, value: u64) -> bool {
        match value.checked_add(1) {
            Some(end) => self.insert(value..end),
            None => false,
        }
    }

    /// Insert a range; true if any value in it was not in the set.
    pub fn insert(&mut self, range: Range<u64>) -> bool {
        if range.is_empty() {
            return false;
        }
        // Ranges touching `range` (overlapping or adjacent) are merged with it.
        let lo = self.ranges.partition_point(|r| r.end < range.start);
        let hi = self.ranges.partition_point(|r| r.start <= range.end);
        if lo == hi {
            self.ranges.insert(lo, range);
        } else {
            let first = &self.ranges[lo];
            if hi - lo == 1 && first.start <= range.start && range.end <= first.end {
                return false;
            }
            let merged = first.start.min(range.start)..self.ranges[hi - 1].end.max(range.end);
            self.ranges.drain(lo + 1..hi);
            self.ranges[lo] = merged;
        }
        if self.ranges.len() > self.max_ranges {
            let excess = self.ranges.len() - self.max_ranges;
            self.ranges.drain(..excess);
        }
        true
    }

    #[must_use]
    pub fn contains(&self, value: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.end <= value);
        self.ranges.get(i).is_some_and(|r| r.start <= value)
    }

    /// Forget every value below `value` (e.g. packet numbers whose ACKs were acknowledged).
    pub fn remove_below(&mut self, value: u64) {
        let i = self.ranges.partition_point(|r| r.end <= value);
        self.ranges.drain(..i);
        if let Some(first) = self.ranges.first_mut() {
            first.start = first.start.max(value);
        }
    }

    /// Ranges, highest first.
    pub fn iter_desc(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.ranges.iter().rev().cloned()
    }

    /// Ranges, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.ranges.iter().cloned()
    }

    /// Number of ranges.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    #[must_use]
    pub fn min(&self) -> Option<u64> {
        self.ranges.first().map(|r| r.start)
    }

    #[must_use]
    pub fn max(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.end - 1)
    }
}

impl StreamFrame<'_> {
    /// Append the frame; `with_len` false omits the Length field, so the data runs to the end
    /// of the packet (only for the packet's last frame).
    pub fn encode(&self, buf: &mut Vec<u8>, with_len: bool) {
        let mut ty = FrameType::STREAM.0;
        if self.offset != 0 {
            ty |= FrameType::STREAM_OFF;
        }
        if with_len {
            ty |= FrameType::STREAM_LEN;
        }
        if self.fin {
            ty |= FrameType::STREAM_FIN;
        }
        buf.put_varint(ty);
        buf.put_varint(self.stream_id);
        if self.offset != 0 {
            buf.put_varint(self.offset);
        }
        if with_len {
            buf.put_varint(self.data.len() as u64);
        }
        buf.put_bytes(self.data);
    }

    /// Bytes [`StreamFrame::encode`] appends.
    #[must_use]
    pub fn encoded_len(&self, with_len: bool) -> usize {
        stream_header_len(self.stream_id, self.offset, self.data.len(), with_len) + self.data.len()
    }
}

/// Bytes of a STREAM frame's header (everything but the data) for these values.
#[must_use]
pub fn stream_header_len(stream_id: u64, offset: u64, data_len: usize, with_len: bool) -> usize {
    1 + varint_size(stream_id)
        + if offset != 0 { varint_size(offset) } else { 0 }
        + if with_len {
            varint_size(data_len as u64)
        } else {
            0
        }
}

/// How many data bytes a STREAM frame for `stream_id` at `offset` can carry in `space` bytes,
/// Length field included if `with_len`. `None` if not even the header fits; `Some(0)` means
/// only an empty frame (e.g. a bare FIN) fits.
#[must_use]
pub fn stream_data_fit(stream_id: u64, offset: u64, space: usize, with_len: bool) -> Option<usize> {
    let fixed = stream_header_len(stream_id, offset, 0, false);
    let avail = space.checked_sub(fixed)?;
    if with_len {
        data_fit_with_len(avail)
    } else {
        Some(avail)
    }
}

/// How many data bytes a CRYPTO frame at `offset` can carry in `space` bytes (`None` if not
/// even the header fits).
#[must_use]
pub fn crypto_data_fit(offset: u64, space: usize) -> Option<usize> {
    let avail = space.checked_sub(1 + varint_size(offset))?;
    data_fit_with_len(avail)
}

/// The largest `n` with `varint_size(n) + n <= avail`.
fn data_fit_with_len(avail: usize) -> Option<usize> {
    // For each Length field size, the most data it can describe in the space left.
    [
        (1usize, 63usize),
        (2, 16_383),
        (4, (1 << 30) - 1),
        (8, usize::MAX),
    ]
    .into_iter()
    .filter_map(|(len_size, max)| Some(avail.checked_sub(len_size)?.min(max)))
    .max()
}

/// Bytes of a CRYPTO frame carrying `data_len` bytes at `offset`.
#[must_use]
pub fn crypto_frame_len(offset: u64, data_len: usize) -> usize {
    1 + varint_size(offset) + varint_size(data_len as u64) + data_len
}

impl Frame<'_> {
    /// The frame's type as it will be encoded (STREAM with OFF and LEN bits as
    /// [`Frame::encode`] writes them).
    #[must_use]
    pub fn ty(&self) -> FrameType {
        match self {
            Self::Padding { .. } => FrameType::PADDING,
            Self::Ping => FrameType::PING,
            Self::Ack(a) => {
                if a.ecn.is_some() {
                    FrameType::ACK_ECN
                } else {
                    FrameType::ACK
                }
            }
            Self::ResetStream { .. } => FrameType::RESET_STREAM,
            Self::StopSending { .. } => FrameType::STOP_SENDING,
            Self::Crypto { .. } => FrameType::CRYPTO,
            Self::NewToken { .. } => FrameType::NEW_TOKEN,
            Self::Stream(s) => {
                let mut ty = FrameType::STREAM.0 | FrameType::STREAM_LEN;
                if s.offset != 0 {
                    ty |= FrameType::STREAM_OFF;
                }
                if s.fin {
                    ty |= FrameType::STREAM_FIN;
                }
                FrameType(ty)
            }
            Self::MaxData(_) => FrameType::MAX_DATA,
            Self::MaxStreamData { .. } => FrameType::MAX_STREAM_DATA,
            Self::MaxStreams {
                dir: StreamDir::Bidi,
                ..
            } => FrameType::MAX_STREAMS_BIDI,
            Self::MaxStreams {
                dir: StreamDir::Uni,
                ..
            } => FrameType::MAX_STREAMS_UNI,
            Self::DataBlocked(_) => FrameType::DATA_BLOCKED,
            Self::StreamDataBlocked { .. } => FrameType::STREAM_DATA_BLOCKED,
            Self::StreamsBlocked {
                dir: StreamDir::Bidi,
                ..
            } => FrameType::STREAMS_BLOCKED_BIDI,
            Self::StreamsBlocked {
                dir: StreamDir::Uni,
                ..
            } => FrameType::STREAMS_BLOCKED_UNI,
            Self::NewConnectionId { .. } => FrameType::NEW_CONNECTION_ID,
            Self::RetireConnectionId { .. } => FrameType::RETIRE_CONNECTION_ID,
            Self::PathChallenge(_) => FrameType::PATH_CHALLENGE,
            Self::PathResponse(_) => FrameType::PATH_RESPONSE,
            Self::ConnectionClose(c) => {
                if c.frame_type.is_some() {
                    FrameType::CONNECTION_CLOSE
                } else {
                    FrameType::APPLICATION_CLOSE
                }
            }
            Self::HandshakeDone => FrameType::HANDSHAKE_DONE,
        }
    }

    /// Append the frame. STREAM frames are written with their Length field (use
    /// [`StreamFrame::encode`] to omit it); `Padding { len }` writes `len` zero bytes.
    ///
    /// # Panics
    /// If a value exceeds 2^62-1 or a NEW_CONNECTION_ID carries an empty CID: values we send come
    /// from our own state, so either is a bug.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let ty = self.ty();
        match self {
            Self::Padding { len } => buf.resize(buf.len() + len, 0),
            Self::Ack(ack) => ack.encode(buf),
            Self::Stream(s) => s.encode(buf, true),
            _ => {
                buf.put_varint(ty.0);
                self.encode_body(buf);
            }
        }
    }

    fn encode_body(&self, buf: &mut Vec<u8>) {
        match *self {
            Self::Padding { .. }
            | Self::Ack(_)
            | Self::Stream(_)
            | Self::Ping
            | Self::HandshakeDone => {}
            Self::ResetStream {
                stream_id,
                error_code,
                final_size,
            } => {
                buf.put_varint(stream_id);
                buf.put_varint(error_code);
                buf.put_varint(final_size);
            }
            Self::StopSending {
                stream_id,
                error_code,
            } => {
                buf.put_varint(stream_id);
                buf.put_varint(error_code);
            }
            Self::Crypto { offset, data } => {
                buf.put_varint(offset);
                buf.put_varint(data.len() as u64);
                buf.put_bytes(data);
            }
            Self::NewToken { token } => {
                buf.put_varint(token.len() as u64);
                buf.put_bytes(token);
            }
            Self::MaxData(v) | Self::DataBlocked(v) => buf.put_varint(v),
            Self::MaxStreams { max: v, .. } | Self::StreamsBlocked { limit: v, .. } => {
                buf.put_varint(v);
            }
            Self::MaxStreamData { stream_id, max: v }
            | Self::StreamDataBlocked {
                stream_id,
                limit: v,
            } => {
                buf.put_varint(stream_id);
                buf.put_varint(v);
            }
            Self::NewConnectionId {
                seq,
                retire_prior_to,
                cid,
                reset_token,
            } => {
                assert!(!cid.is_empty(), "NEW_CONNECTION_ID with an empty CID");
                buf.put_varint(seq);
                buf.put_varint(retire_prior_to);
                buf.put_u8(cid.len() as u8);
                buf.put_bytes(&cid);
                buf.put_bytes(&reset_token);
            }
            Self::RetireConnectionId { seq } => buf.put_varint(seq),
            Self::PathChallenge(data) | Self::PathResponse(data) => buf.put_bytes(&data),
            Self::ConnectionClose(c) => {
                buf.put_varint(c.error_code);
                if let Some(t) = c.frame_type {
                    buf.put_varint(t);
                }
                buf.put_varint(c.reason.len() as u64);
                buf.put_bytes(c.reason);
            }
        }
    }

    /// Bytes [`Frame::encode`] appends.
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        if let Self::Padding { len } = *self {
            return len;
        }
        varint_size(self.ty().0)
            + match *self {
                Self::Padding { .. } => 0,
                Self::Ack(ack) => ack.encoded_len() - 1,
                Self::Stream(s) => s.encoded_len(true) - 1,
                Self::Ping | Self::HandshakeDone => 0,
                Self::ResetStream {
                    stream_id,
                    error_code,
                    final_size,
                } => varint_size(stream_id) + varint_size(error_code) + varint_size(final_size),
                Self::StopSending {
                    stream_id,
                    error_code,
                } => varint_size(stream_id) + varint_size(error_code),
                Self::Crypto { offset, data } => crypto_frame_len(offset, data.len()) - 1,
                Self::NewToken { token } => varint_size(token.len() as u64) + token.len(),
                Self::MaxData(v)
                | Self::DataBlocked(v)
                | Self::MaxStreams { max: v, .. }
                | Self::StreamsBlocked { limit: v, .. }
                | Self::RetireConnectionId { seq: v } => varint_size(v),
                Self::MaxStreamData { stream_id, max: v }
                | Self::StreamDataBlocked {
                    stream_id,
                    limit: v,
                } => varint_size(stream_id) + varint_size(v),
                Self::NewConnectionId {
                    seq,
                    retire_prior_to,
                    cid,
                    ..
                } => varint_size(seq) + varint_size(retire_prior_to) + 1 + cid.len() + 16,
                Self::PathChallenge(_) | Self::PathResponse(_) => 8,
                Self::ConnectionClose(c) => {
                    varint_size(c.error_code)
                        + c.frame_type.map_or(0, varint_size)
                        + varint_size(c.reason.len() as u64)
                        + c.reason.len()
                }
            }
    }
}

/// Decodes the frames of a decrypted packet payload in order. After the first error it yields
/// nothing more: the connection is closing with that error.
#[derive(Clone, Debug)]
pub struct Frames<'a> {
    reader: Reader<'a>,
    failed: bool,
}

impl<'a> Frames<'a> {
    #[must_use]
    pub fn new(payload: &'a [u8]) -> Self {
        Self {
            reader: Reader::new(payload),
            failed: false,
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, TransportError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.reader.is_empty() {
            return None;
        }
        let result = parse_frame(&mut self.reader);
        self.failed = result.is_err();
        Some(result)
    }
}

fn parse_frame<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    let (ty, ty_len) = r
        .varint_with_len("frame type")
        .map_err(|e| transport_err!(FRAME_ENCODING_ERROR, "{e}"))?;
    // §12.4: the frame type must use its shortest encoding (MAY close; we do).
    if ty_len != varint_size(ty) {
        return Err(transport_err!(
            PROTOCOL_VIOLATION,
            "frame type 0x{ty:x} encoded in {ty_len} bytes"
        )
        .with_frame(ty));
    }
    parse_body(r, FrameType(ty)).map_err(|e| match e {
        FrameError::Decode(e) => transport_err!(FRAME_ENCODING_ERROR, "{e}").with_frame(ty),
        FrameError::Transport(e) => e.with_frame(ty),
    })
}

enum FrameError {
    Decode(DecodeError),
    Transport(TransportError),
}

impl From<DecodeError> for FrameError {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

impl From<TransportError> for FrameError {
    fn from(e: TransportError) -> Self {
        Self::Transport(e)
    }
}

fn parse_body<'a>(r: &mut Reader<'a>, ty: FrameType) -> Result<Frame<'a>, FrameError> {
    Ok(match ty.0 {
        0x00 => {
            let zeros = r.peek_rest().iter().take_while(|&&b| b == 0).count();
            r.bytes(zeros, "padding")?;
            Frame::Padding { len: 1 + zeros }
        }
        0x01 => Frame::Ping,
        0x02 | 0x03 => Frame::Ack(AckFrame::parse(r, ty.0 == 0x03)?),
        0x04 => Frame::ResetStream {
            stream_id: r.varint("stream id")?,
            error_code: r.varint("application error code")?,
            final_size: r.varint("final size")?,
        },
        0x05 => Frame::StopSending {
            stream_id: r.varint("stream id")?,
            error_code: r.varint("application error code")?,
        },
        0x06 => {
            let offset = r.varint("crypto offset")?;
            let data = r.length_prefixed("crypto data")?;
            check_end(offset, data.len())?;
            Frame::Crypto { offset, data }
        }
        0x07 => {
            let token = r.length_prefixed("token")?;
            // §19.7: an empty token is a FRAME_ENCODING_ERROR.
            if token.is_empty() {
                return Err(transport_err!(FRAME_ENCODING_ERROR, "empty NEW_TOKEN").into());
            }
            Frame::NewToken { token }
        }
        0x08..=0x0f => {
            let stream_id = r.varint("stream id")?;
            let offset = if ty.0 & FrameType::STREAM_OFF != 0 {
                r.varint("stream offset")?
            } else {
                0
            };
            let data = if ty.0 & FrameType::STREAM_LEN != 0 {
                r.length_prefixed("stream data")?
            } else {
                r.rest()
            };
            check_end(offset, data.len())?;
            Frame::Stream(StreamFrame {
                stream_id,
                offset,
                data,
                fin: ty.0 & FrameType::STREAM_FIN != 0,
            })
        }
        0x10 => Frame::MaxData(r.varint("maximum data")?),
        0x11 => Frame::MaxStreamData {
            stream_id: r.varint("stream id")?,
            max: r.varint("maximum stream data")?,
        },
        0x12 | 0x13 => Frame::MaxStreams {
            dir: stream_dir(ty),
            max: stream_count(r.varint("maximum streams")?)?,
        },
        0x14 => Frame::DataBlocked(r.varint("data limit")?),
        0x15 => Frame::StreamDataBlocked {
            stream_id: r.varint("stream id")?,
            limit: r.varint("stream data limit")?,
        },
        0x16 | 0x17 => Frame::StreamsBlocked {
            dir: stream_dir(ty),
            limit: stream_count(r.varint("stream limit")?)?,
        },
        0x18 => {
            let seq = r.varint("sequence number")?;
            let retire_prior_to = r.varint("retire prior to")?;
            // §19.15: both checks are FRAME_ENCODING_ERROR.
            if retire_prior_to > seq {
                return Err(transport_err!(
                    FRAME_ENCODING_ERROR,
                    "retire prior to {retire_prior_to} > sequence number {seq}"
                )
                .into());
            }
            let len = usize::from(r.u8("connection id length")?);
            if len == 0 || len > MAX_CID_LEN {
                return Err(
                    transport_err!(FRAME_ENCODING_ERROR, "connection id length {len}").into(),
                );
            }
            let cid = ConnectionId::new(r.bytes(len, "connection id")?)?;
            Frame::NewConnectionId {
                seq,
                retire_prior_to,
                cid,
                reset_token: r.array("stateless reset token")?,
            }
        }
        0x19 => Frame::RetireConnectionId {
            seq: r.varint("sequence number")?,
        },
        0x1a => Frame::PathChallenge(r.array("path challenge data")?),
        0x1b => Frame::PathResponse(r.array("path response data")?),
        0x1c | 0x1d => {
            let error_code = r.varint("error code")?;
            let frame_type = if ty.0 == 0x1c {
                Some(r.varint("frame type")?)
            } else {
                None
            };
            Frame::ConnectionClose(ConnectionClose {
                error_code,
                frame_type,
                reason: r.length_prefixed("reason phrase")?,
            })
        }
        0x1e => Frame::HandshakeDone,
        // §12.4: an unknown frame type is a FRAME_ENCODING_ERROR.
        t => return Err(transport_err!(FRAME_ENCODING_ERROR, "unknown frame type 0x{t:x}").into()),
    })
}

fn stream_dir(ty: FrameType) -> StreamDir {
    if ty.0 & 1 == 0 {
        StreamDir::Bidi
    } else {
        StreamDir::Uni
    }
}

/// §19.11, §19.14: stream counts above 2^60 are a FRAME_ENCODING_ERROR.
fn stream_count(count: u64) -> Result<u64, TransportError> {
    if count > MAX_STREAM_COUNT {
        Err(transport_err!(
            FRAME_ENCODING_ERROR,
            "stream count {count} exceeds 2^60"
        ))
    } else {
        Ok(count)
    }
}

/// §19.6, §19.8: data may not end beyond 2^62-1.
fn check_end(offset: u64, len: usize) -> Result<(), TransportError> {
    let end = offset.checked_add(len as u64);
    if end.is_some_and(|e| e <= VarInt::MAX.into_inner()) {
        Ok(())
    } else {
        Err(transport_err!(
            FRAME_ENCODING_ERROR,
            "data at offset {offset} of length {len} ends beyond 2^62-1"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;

    fn decode_all(payload: &[u8]) -> Result<Vec<Frame<'_>>, TransportError> {
        Frames::new(payload).collect()
    }

    fn round_trip(frame: Frame<'_>) {
        let mut buf = Vec::new();
        frame.encode(&mut buf);
        assert_eq!(buf.len(), frame.encoded_len(), "{frame:?}");
        let decoded = decode_all(&buf).unwrap();
        assert_eq!(decoded, vec![frame]);
    }

    fn err_code(payload: &[u8]) -> (TransportErrorCode, Option<u64>) {
        let err = decode_all(payload).unwrap_err();
        (err.code, err.frame_type)
    }

    const FEE: TransportErrorCode = TransportErrorCode::FRAME_ENCODING_ERROR;

    #[test]
    fn every_frame_type_round_trips() {
        let cid = ConnectionId::new(&[1, 2, 3, 4]).unwrap();
        let mut ranges = RangeSet::new(16);
        ranges.insert(0..3);
        ranges.insert(10..20);
        ranges.insert(100..101);
        let mut ack = Vec::new();
        encode_ack(
            &mut ack,
            &ranges,
            7,
            Some(&EcnCounts {
                ect0: 1,
                ect1: 2,
                ce: 3,
            }),
            16,
        );
        let Ok([Frame::Ack(ack_ecn)]) = <[Frame<'_>; 1]>::try_from(decode_all(&ack).unwrap())
        else {
            panic!("expected one ACK");
        };
        let frames = [
            Frame::Padding { len: 5 },
            Frame::Ping,
            Frame::Ack(ack_ecn),
            Frame::ResetStream {
                stream_id: 4,
                error_code: 77,
                final_size: 1 << 40,
            },
            Frame::StopSending {
                stream_id: 8,
                error_code: 0,
            },
            Frame::Crypto {
                offset: 1000,
                data: b"client hello",
            },
            Frame::NewToken { token: b"tok" },
            Frame::Stream(StreamFrame {
                stream_id: 0,
                offset: 0,
                data: b"",
                fin: false,
            }),
            Frame::Stream(StreamFrame {
                stream_id: 3,
                offset: 70_000,
                data: b"data",
                fin: true,
            }),
            Frame::MaxData(1 << 30),
            Frame::MaxStreamData {
                stream_id: 1,
                max: 5,
            },
            Frame::MaxStreams {
                dir: StreamDir::Bidi,
                max: MAX_STREAM_COUNT,
            },
            Frame::MaxStreams {
                dir: StreamDir::Uni,
                max: 3,
            },
            Frame::DataBlocked(9),
            Frame::StreamDataBlocked {
                stream_id: 2,
                limit: 9,
            },
            Frame::StreamsBlocked {
                dir: StreamDir::Bidi,
                limit: 100,
            },
            Frame::StreamsBlocked {
                dir: StreamDir::Uni,
                limit: 0,
            },
            Frame::NewConnectionId {
                seq: 3,
                retire_prior_to: 3,
                cid,
                reset_token: [9; 16],
            },
            Frame::RetireConnectionId { seq: 2 },
            Frame::PathChallenge([1; 8]),
            Frame::PathResponse([2; 8]),
            Frame::ConnectionClose(ConnectionClose {
                error_code: 0xa,
                frame_type: Some(0x08),
                reason: b"bad",
            }),
            Frame::ConnectionClose(ConnectionClose {
                error_code: 42,
                frame_type: None,
                reason: b"",
            }),
            Frame::HandshakeDone,
        ];
        for f in frames {
            round_trip(f);
        }
        // And all of them in one payload (PADDING last, since it absorbs following zeros).
        let mut payload = Vec::new();
        for f in frames.iter().skip(1) {
            f.encode(&mut payload);
        }
        frames[0].encode(&mut payload);
        let decoded = decode_all(&payload).unwrap();
        assert_eq!(decoded.len(), frames.len());
        assert_eq!(decoded[..frames.len() - 1], frames[1..]);
    }

    #[test]
    fn all_eight_stream_type_variants_decode() {
        for ty in 0x08u8..=0x0f {
            let mut buf = vec![ty, 0x04];
            if ty & 0x04 != 0 {
                buf.push(0x10);
            }
            if ty & 0x02 != 0 {
                buf.push(2);
            }
            buf.extend_from_slice(b"hi");
            let frames = decode_all(&buf).unwrap();
            let [Frame::Stream(s)] = frames[..] else {
                panic!("0x{ty:x}: {frames:?}");
            };
            assert_eq!(s.stream_id, 4);
            assert_eq!(s.offset, if ty & 0x04 != 0 { 0x10 } else { 0 });
            assert_eq!(s.data, b"hi");
            assert_eq!(s.fin, ty & 0x01 != 0);
            // Without LEN the data runs to the end; with LEN the frame can be followed.
            if ty & 0x02 != 0 {
                buf.push(0x01);
                assert_eq!(decode_all(&buf).unwrap().len(), 2);
            }
        }
        let s = StreamFrame {
            stream_id: 4,
            offset: 9,
            data: b"xyz",
            fin: true,
        };
        let mut buf = Vec::new();
        s.encode(&mut buf, false);
        assert_eq!(buf.len(), s.encoded_len(false));
        assert_eq!(decode_all(&buf).unwrap(), vec![Frame::Stream(s)]);
    }

    #[test]
    fn consecutive_padding_is_one_frame() {
        let frames = decode_all(&[0, 0, 0, 1, 0]).unwrap();
        assert_eq!(
            frames,
            vec![
                Frame::Padding { len: 3 },
                Frame::Ping,
                Frame::Padding { len: 1 }
            ]
        );
    }

    #[test]
    fn ack_ranges_descend_and_underflow_is_rejected() {
        let mut set = RangeSet::new(10);
        for pn in [0, 1, 2, 5, 6, 9] {
            set.insert_one(pn);
        }
        let mut buf = Vec::new();
        assert!(encode_ack(&mut buf, &set, 0, None, 10));
        let frames = decode_all(&buf).unwrap();
        let Frame::Ack(ack) = frames[0] else { panic!() };
        assert_eq!(ack.largest, 9);
        assert_eq!(ack.ranges().collect::<Vec<_>>(), vec![9..=9, 5..=6, 0..=2]);
        // Capped to two ranges.
        let mut buf = Vec::new();
        encode_ack(&mut buf, &set, 0, None, 2);
        let frames = decode_all(&buf).unwrap();
        let Frame::Ack(ack) = frames[0] else { panic!() };
        assert_eq!(ack.ranges().collect::<Vec<_>>(), vec![9..=9, 5..=6]);
        assert!(!encode_ack(&mut Vec::new(), &RangeSet::new(1), 0, None, 4));

        // First range larger than largest.
        assert_eq!(err_code(&[0x02, 5, 0, 0, 6]), (FEE, Some(2)));
        // Gap below zero: largest 5, first range 0 (5..=5), gap 4 → 5-4-2 < 0.
        assert_eq!(err_code(&[0x02, 5, 0, 1, 0, 4, 0]), (FEE, Some(2)));
        // Length below zero: gap 0 → largest 3, length 4.
        assert_eq!(err_code(&[0x02, 5, 0, 1, 0, 0, 4]), (FEE, Some(2)));
        // The tightest valid one: 5..=5 then gap 0, length 3 → 0..=3.
        let ok = decode_all(&[0x02, 5, 0, 1, 0, 0, 3]).unwrap();
        let Frame::Ack(ack) = ok[0] else { panic!() };
        assert_eq!(ack.ranges().collect::<Vec<_>>(), vec![5..=5, 0..=3]);
        // Missing ECN counts on ACK_ECN, and a hostile range count.
        assert_eq!(err_code(&[0x03, 5, 0, 0, 0, 1, 1]), (FEE, Some(3)));
        assert_eq!(
            err_code(&[0x02, 5, 0, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0]),
            (FEE, Some(2))
        );
    }

    #[test]
    fn ack_delay_scales_and_saturates() {
        let frames = decode_all(&[0x02, 0, 0x0a, 0, 0]).unwrap();
        let Frame::Ack(ack) = frames[0] else { panic!() };
        assert_eq!(ack.ack_delay_micros(3), 80);
        let frames = decode_all(&[
            0x02, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0,
        ])
        .unwrap();
        let Frame::Ack(ack) = frames[0] else { panic!() };
        assert_eq!(ack.ack_delay_micros(20), u64::MAX);
    }

    #[test]
    fn validation_errors_carry_code_and_frame_type() {
        // Unknown frame type.
        assert_eq!(err_code(&[0x1f]), (FEE, Some(0x1f)));
        assert_eq!(err_code(&[0x40, 0x40]), (FEE, Some(0x40)));
        // Non-minimal frame type encoding.
        assert_eq!(
            err_code(&[0x40, 0x01]),
            (TransportErrorCode::PROTOCOL_VIOLATION, Some(0x01))
        );
        // STREAM ending beyond 2^62-1.
        let mut buf = vec![0x0e, 0x00];
        buf.put_varint(VarInt::MAX.into_inner());
        buf.extend_from_slice(&[1, 0xaa]);
        assert_eq!(err_code(&buf), (FEE, Some(0x0e)));
        // ...but ending exactly at 2^62-1 is fine.
        let mut buf = vec![0x0e, 0x00];
        buf.put_varint(VarInt::MAX.into_inner() - 1);
        buf.extend_from_slice(&[1, 0xaa]);
        assert!(decode_all(&buf).is_ok());
        // CRYPTO beyond 2^62-1.
        let mut buf = vec![0x06];
        buf.put_varint(VarInt::MAX.into_inner());
        buf.extend_from_slice(&[1, 0xaa]);
        assert_eq!(err_code(&buf), (FEE, Some(0x06)));
        // MAX_STREAMS / STREAMS_BLOCKED over 2^60.
        for ty in [0x12u8, 0x13, 0x16, 0x17] {
            let mut buf = vec![ty];
            buf.put_varint(MAX_STREAM_COUNT + 1);
            assert_eq!(err_code(&buf), (FEE, Some(u64::from(ty))));
        }
        // NEW_CONNECTION_ID: length 0, length 21, retire_prior_to > seq.
        let ncid = |seq: u8, rpt: u8, len: u8| {
            let mut b = vec![0x18, seq, rpt, len];
            b.extend(std::iter::repeat_n(7, usize::from(len) + 16));
            b
        };
        assert!(decode_all(&ncid(1, 1, 20)).is_ok());
        assert_eq!(err_code(&ncid(1, 0, 0)), (FEE, Some(0x18)));
        assert_eq!(err_code(&ncid(1, 0, 21)), (FEE, Some(0x18)));
        assert_eq!(err_code(&ncid(1, 2, 8)), (FEE, Some(0x18)));
        // Empty NEW_TOKEN.
        assert_eq!(err_code(&[0x07, 0x00]), (FEE, Some(0x07)));
        // Truncations.
        assert_eq!(err_code(&[0x1a, 1, 2, 3]), (FEE, Some(0x1a)));
        assert_eq!(err_code(&[0x1c, 1, 2, 5, b'a']), (FEE, Some(0x1c)));
        assert_eq!(err_code(&[0x04, 1, 2]), (FEE, Some(0x04)));
        assert_eq!(err_code(&[0x0a, 1, 5, 1, 2]), (FEE, Some(0x0a)));
        // The iterator stops after an error.
        let mut it = Frames::new(&[0x1f, 0x01]);
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }

    #[test]
    fn frame_allowed_follows_table_3() {
        use PacketType::*;
        let allowed =
            |t: FrameType| [Initial, Handshake, ZeroRtt, OneRtt].map(|p| frame_allowed(t, p));
        assert_eq!(allowed(FrameType::PADDING), [true; 4]);
        assert_eq!(allowed(FrameType::PING), [true; 4]);
        assert_eq!(allowed(FrameType::ACK), [true, true, false, true]);
        assert_eq!(allowed(FrameType::ACK_ECN), [true, true, false, true]);
        assert_eq!(allowed(FrameType::CRYPTO), [true, true, false, true]);
        assert_eq!(allowed(FrameType::NEW_TOKEN), [false, false, false, true]);
        assert_eq!(allowed(FrameType(0x0f)), [false, false, true, true]);
        assert_eq!(allowed(FrameType::RESET_STREAM), [false, false, true, true]);
        assert_eq!(
            allowed(FrameType::PATH_CHALLENGE),
            [false, false, true, true]
        );
        assert_eq!(
            allowed(FrameType::PATH_RESPONSE),
            [false, false, false, true]
        );
        assert_eq!(allowed(FrameType::CONNECTION_CLOSE), [true; 4]);
        assert_eq!(
            allowed(FrameType::APPLICATION_CLOSE),
            [false, false, true, true]
        );
        assert_eq!(
            allowed(FrameType::HANDSHAKE_DONE),
            [false, false, false, true]
        );
        assert_eq!(allowed(FrameType(0x1f)), [false; 4]);
        assert!(!frame_allowed(FrameType::PING, Retry));
        let err = frame_allowed_or_err(FrameType::STREAM, Initial).unwrap_err();
        assert_eq!(err.code, TransportErrorCode::PROTOCOL_VIOLATION);
        assert_eq!(err.frame_type, Some(0x08));
        assert!(frame_allowed_or_err(FrameType::STREAM, OneRtt).is_ok());
    }

    #[test]
    fn frame_type_properties() {
        assert!(!FrameType::ACK.is_ack_eliciting());
        assert!(!FrameType::PADDING.is_ack_eliciting());
        assert!(!FrameType::APPLICATION_CLOSE.is_ack_eliciting());
        assert!(FrameType::PING.is_ack_eliciting());
        assert_eq!(format!("{:?}", FrameType(0x0b)), "STREAM(0x0b)");
    }

    #[test]
    fn data_fit_is_exact() {
        for space in 0..20_000usize {
            for (id, off) in [(0u64, 0u64), (4, 100), (1 << 20, 1 << 40)] {
                match stream_data_fit(id, off, space, true) {
                    Some(n) => {
                        assert!(stream_header_len(id, off, n, true) + n <= space);
                        // One more byte would not fit.
                        assert!(stream_header_len(id, off, n + 1, true) + n + 1 > space);
                    }
                    None => assert!(stream_header_len(id, off, 0, true) > space),
                }
                if let Some(n) = stream_data_fit(id, off, space, false) {
                    assert_eq!(stream_header_len(id, off, n, false) + n, space);
                }
            }
            if let Some(n) = crypto_data_fit(77, space) {
                assert!(crypto_frame_len(77, n) <= space);
                assert!(crypto_frame_len(77, n + 1) > space);
            } else {
                assert!(crypto_frame_len(77, 0) > space);
            }
        }
    }

    #[test]
    fn range_set_merges_caps_and_removes() {
        let mut s = RangeSet::new(3);
        assert!(s.insert_one(5));
        assert!(!s.insert_one(5));
        assert!(s.insert_one(7));
        assert!(s.insert_one(6), "fills the hole and merges");
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![5..8]);
        assert!(s.insert(8..10), "adjacent merges");
        assert!(s.insert(20..22));
        assert!(s.insert(0..2));
        assert_eq!(s.iter_desc().collect::<Vec<_>>(), vec![20..22, 5..10, 0..2]);
        assert!(!s.insert(6..9));
        assert!(s.insert(1..6), "bridges two ranges");
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..10, 20..22]);
        assert!(s.contains(0) && s.contains(9) && s.contains(21));
        assert!(!s.contains(10) && !s.contains(22));
        assert!(s.insert_one(30));
        assert!(s.insert_one(40), "evicts the lowest range");
        assert_eq!(s.len(), 3);
        assert_eq!((s.min(), s.max()), (Some(20), Some(40)));
        s.remove_below(21);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![21..22, 30..31, 40..41]);
        s.remove_below(41);
        assert!(s.is_empty());
        assert!(!s.insert_one(u64::MAX));
        assert!(!s.insert(5..5));
    }

    #[test]
    fn connection_close_from_transport_error() {
        let e = transport_err!(FLOW_CONTROL_ERROR, "too much").with_frame(0x08);
        let c = ConnectionClose::from(&e);
        assert_eq!(
            (c.error_code, c.frame_type, c.reason),
            (3, Some(8), &b"too much"[..])
        );
        round_trip(Frame::ConnectionClose(c));
    }
}
