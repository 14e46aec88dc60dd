//! QUIC v1 frames (RFC 9000 §19): a borrowed [`Frame`] enum, decoding as an iterator over a
//! decrypted packet payload ([`Frames`]), and encoders.
//!
//! This module holds the catalogue of every frame (the enum, its type codes, encoding and sizes)
//! and the decoder's dispatch; each family of frames has its own module with its structures,
//! body decoders and rules: [`types`](FrameType) (type codes and which packet types may carry
//! them, §12.4 table 3), `ack` (ACK ranges), `data` (STREAM and CRYPTO, and how much data fits),
//! `flow` (stream and flow control), `path` (tokens, connection IDs, path probes), `close`
//! (CONNECTION_CLOSE) and `datagram` (DATAGRAM, RFC 9221).
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
//! the Length field for the packet's last frame. ACKs are written from a
//! [`RangeSet`](recoup_recovery::RangeSet) with [`encode_ack`].

mod ack;
mod close;
mod data;
mod datagram;
mod flow;
mod path;
mod repair;
mod types;

pub(crate) use ack::AckRepeats;
pub use ack::{encode_ack, AckFrame, AckRanges, EcnCounts};
pub use close::ConnectionClose;
pub use data::{
    crypto_data_fit, crypto_frame_len, encode_stream_header, stream_data_fit, stream_header_len,
    StreamFrame,
};
pub use datagram::DatagramFrame;
pub use flow::{StreamDir, MAX_STREAM_COUNT};
pub use repair::{RepairFrame, MAX_REPAIR_OVERHEAD, MAX_SYMBOL_LEN};
pub use types::{frame_allowed, frame_allowed_or_err, FrameType};

use crate::cid::{ConnectionId, StatelessResetToken};
use crate::coding::{varint_size, BufMutExt, Reader};
use crate::error::{transport_err, Error, TransportError};

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
    /// recoup's FEC extension (docs/FEC.md): one repair symbol.
    Repair(RepairFrame<'a>),
    /// Unreliable application data (RFC 9221 §4).
    Datagram(DatagramFrame<'a>),
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
            Self::Repair(_) => FrameType::REPAIR,
            Self::Datagram(d) => d.ty(),
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
            Self::Repair(r) => r.encode(buf),
            Self::Datagram(d) => d.encode(buf),
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
            | Self::Repair(_)
            | Self::Datagram(_)
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
            Self::ConnectionClose(c) => c.encode_body(buf),
        }
    }

    /// Bytes [`Frame::encode`] appends.
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        match *self {
            Self::Padding { len } => return len,
            Self::Repair(r) => return r.encoded_len(),
            Self::Datagram(d) => return d.encoded_len(),
            _ => {}
        }
        varint_size(self.ty().0)
            + match *self {
                Self::Padding { .. } | Self::Repair(_) | Self::Datagram(_) => 0,
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
                Self::ConnectionClose(c) => c.body_len(),
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
    // A frame's own protocol violation keeps its code; malformed bytes are FRAME_ENCODING_ERROR.
    parse_body(r, FrameType(ty)).map_err(|e| match e {
        Error::Transport(e) => e.with_frame(ty),
        e => transport_err!(FRAME_ENCODING_ERROR, "{e}").with_frame(ty),
    })
}

fn parse_body<'a>(r: &mut Reader<'a>, ty: FrameType) -> Result<Frame<'a>, Error> {
    Ok(match ty.0 {
        0x00 => {
            let zeros = r.peek_rest().iter().take_while(|&&b| b == 0).count();
            r.bytes(zeros, "padding")?;
            Frame::Padding { len: 1 + zeros }
        }
        0x01 => Frame::Ping,
        0x02 | 0x03 => Frame::Ack(AckFrame::parse(r, ty.0 == 0x03)?),
        0x04 | 0x05 | 0x10..=0x17 => flow::parse(r, ty)?,
        0x06 => data::parse_crypto(r)?,
        0x07 | 0x18..=0x1b => path::parse(r, ty)?,
        0x08..=0x0f => data::parse_stream(r, ty)?,
        0x1c | 0x1d => Frame::ConnectionClose(ConnectionClose::parse(r, ty.0 == 0x1d)?),
        0x1e => Frame::HandshakeDone,
        0x30 | 0x31 => datagram::parse(r, ty)?,
        0x3f5e_c0de => repair::parse(r)?,
        _ => return Err(unknown_type(ty)),
    })
}

/// §12.4: an unknown frame type is a FRAME_ENCODING_ERROR. A family's decoder answers the same
/// for a type that is not its own.
fn unknown_type(ty: FrameType) -> Error {
    transport_err!(FRAME_ENCODING_ERROR, "unknown frame type 0x{:x}", ty.0).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coding::VarInt;
    use crate::error::TransportErrorCode;
    use recoup_recovery::RangeSet;

    pub(super) fn decode_all(payload: &[u8]) -> Result<Vec<Frame<'_>>, TransportError> {
        Frames::new(payload).collect()
    }

    pub(super) fn round_trip(frame: Frame<'_>) {
        let mut buf = Vec::new();
        frame.encode(&mut buf);
        assert_eq!(buf.len(), frame.encoded_len(), "{frame:?}");
        let decoded = decode_all(&buf).unwrap();
        assert_eq!(decoded, vec![frame]);
    }

    pub(super) fn err_code(payload: &[u8]) -> (TransportErrorCode, Option<u64>) {
        let err = decode_all(payload).unwrap_err();
        (err.code, err.frame_type)
    }

    pub(super) const FEE: TransportErrorCode = TransportErrorCode::FRAME_ENCODING_ERROR;

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
}
