//! DATAGRAM (RFC 9221 §4): unreliable application data, types 0x30 (the data runs to the end of
//! the packet) and 0x31 (a Length field precedes the data).
//!
//! ```text
//! DATAGRAM {
//!   Type (i) = 0x30..0x31,
//!   [Length (i)],
//!   Datagram Data (..),
//! }
//! ```
//! Whether the receiver accepts the frame at all, and at what size, depends on the
//! `max_datagram_frame_size` transport parameter it sent: that is the connection's check
//! (PROTOCOL_VIOLATION, §3), not the decoder's.

use super::{Frame, FrameType};
use crate::coding::{varint_size, BufMutExt, Reader};
use crate::error::Error;

/// A DATAGRAM frame's data, and whether it carries a Length field (type 0x31).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatagramFrame<'a> {
    pub data: &'a [u8],
    /// Type 0x31. Without it (0x30) the data extends to the end of the packet (§4), so such a
    /// frame must be the packet's last.
    pub with_len: bool,
}

impl DatagramFrame<'_> {
    /// The frame's type: 0x31 with a Length field, 0x30 without.
    #[must_use]
    pub fn ty(&self) -> FrameType {
        if self.with_len {
            FrameType::DATAGRAM_LEN
        } else {
            FrameType::DATAGRAM
        }
    }

    pub(super) fn encode(&self, buf: &mut Vec<u8>) {
        buf.put_varint(self.ty().0);
        if self.with_len {
            buf.put_varint(self.data.len() as u64);
        }
        buf.put_bytes(self.data);
    }

    /// Bytes the whole frame takes (type, Length, data): what §3 compares with
    /// `max_datagram_frame_size`.
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        Self::frame_len(self.data.len(), self.with_len)
    }

    /// Bytes a DATAGRAM frame with `data_len` bytes of data takes.
    #[must_use]
    pub fn frame_len(data_len: usize, with_len: bool) -> usize {
        let len_field = if with_len {
            varint_size(data_len as u64)
        } else {
            0
        };
        1 + len_field + data_len
    }
}

/// The body of a DATAGRAM frame of type `ty` (0x30 or 0x31).
pub(super) fn parse<'a>(r: &mut Reader<'a>, ty: FrameType) -> Result<Frame<'a>, Error> {
    let with_len = ty == FrameType::DATAGRAM_LEN;
    let data = if with_len {
        r.length_prefixed("datagram data")?
    } else {
        r.rest()
    };
    Ok(Frame::Datagram(DatagramFrame { data, with_len }))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decode_all, err_code, round_trip, FEE};
    use super::*;

    #[test]
    fn datagram_frames_round_trip() {
        for with_len in [true, false] {
            for data in [&b""[..], b"x", &[7; 1200]] {
                round_trip(Frame::Datagram(DatagramFrame { data, with_len }));
            }
        }
        let f = DatagramFrame {
            data: &[0; 100],
            with_len: true,
        };
        assert_eq!(f.encoded_len(), 1 + 2 + 100, "a 2-byte length for 100");
        assert_eq!(DatagramFrame::frame_len(10, false), 11);
    }

    #[test]
    fn a_datagram_without_length_takes_the_rest_of_the_packet() {
        // 0x30 swallows what follows, PING included; 0x31 leaves it.
        let frames = decode_all(&[0x30, 1, 2, 0x01]).unwrap();
        assert_eq!(
            frames,
            [Frame::Datagram(DatagramFrame {
                data: &[1, 2, 1],
                with_len: false,
            })]
        );
        let frames = decode_all(&[0x31, 2, 1, 2, 0x01]).unwrap();
        assert_eq!(
            frames,
            [
                Frame::Datagram(DatagramFrame {
                    data: &[1, 2],
                    with_len: true,
                }),
                Frame::Ping
            ]
        );
    }

    #[test]
    fn truncated_datagram_frames_are_frame_encoding_errors() {
        assert_eq!(err_code(&[0x31]), (FEE, Some(0x31)), "no length");
        assert_eq!(err_code(&[0x31, 3, 1, 2]), (FEE, Some(0x31)), "short data");
        assert_eq!(err_code(&[0x31, 0x40]), (FEE, Some(0x31)), "cut length");
        let mut huge = vec![0x31];
        huge.put_varint(crate::coding::VarInt::MAX.into_inner());
        assert_eq!(err_code(&huge), (FEE, Some(0x31)), "a length beyond memory");
    }
}
