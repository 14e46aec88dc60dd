//! Data-carrying frames: STREAM (RFC 9000 §19.8) and CRYPTO (§19.6), and how much data fits in
//! the room a packet has left.

use super::{Frame, FrameType};
use crate::coding::{varint_size, BufMutExt, Reader, VarInt};
use crate::error::{transport_err, Error, TransportError};

/// A STREAM frame (RFC 9000 §19.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamFrame<'a> {
    pub stream_id: u64,
    pub offset: u64,
    pub data: &'a [u8],
    pub fin: bool,
}

impl StreamFrame<'_> {
    /// Append the frame; `with_len` false omits the Length field, so the data runs to the end
    /// of the packet (only for the packet's last frame).
    pub fn encode(&self, buf: &mut Vec<u8>, with_len: bool) {
        encode_stream_header(
            buf,
            self.stream_id,
            self.offset,
            self.fin,
            with_len.then_some(self.data.len()),
        );
        buf.put_bytes(self.data);
    }

    /// Bytes [`StreamFrame::encode`] appends.
    #[must_use]
    pub fn encoded_len(&self, with_len: bool) -> usize {
        stream_header_len(self.stream_id, self.offset, self.data.len(), with_len) + self.data.len()
    }
}

/// A STREAM frame's header (RFC 9000 §19.8): everything but the data, which the caller appends
/// (the sender copies it from the stream's buffer straight into the packet). With `data_len`
/// the frame carries a Length field; without, its data runs to the end of the packet.
pub fn encode_stream_header(
    buf: &mut Vec<u8>,
    stream_id: u64,
    offset: u64,
    fin: bool,
    data_len: Option<usize>,
) {
    let mut ty = FrameType::STREAM.0;
    if offset != 0 {
        ty |= FrameType::STREAM_OFF;
    }
    if data_len.is_some() {
        ty |= FrameType::STREAM_LEN;
    }
    if fin {
        ty |= FrameType::STREAM_FIN;
    }
    buf.put_varint(ty);
    buf.put_varint(stream_id);
    if offset != 0 {
        buf.put_varint(offset);
    }
    if let Some(len) = data_len {
        buf.put_varint(len as u64);
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

/// The body of a CRYPTO frame (type 0x06).
pub(super) fn parse_crypto<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, Error> {
    let offset = r.varint("crypto offset")?;
    let data = r.length_prefixed("crypto data")?;
    check_end(offset, data.len())?;
    Ok(Frame::Crypto { offset, data })
}

/// The body of a STREAM frame; the type's low bits say which fields are present.
pub(super) fn parse_stream<'a>(r: &mut Reader<'a>, ty: FrameType) -> Result<Frame<'a>, Error> {
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
    Ok(Frame::Stream(StreamFrame {
        stream_id,
        offset,
        data,
        fin: ty.0 & FrameType::STREAM_FIN != 0,
    }))
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
    use super::super::tests::decode_all;
    use super::*;

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
}
