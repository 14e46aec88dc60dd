//! Stream control and flow control frames: RESET_STREAM, STOP_SENDING (RFC 9000 §19.4-5),
//! MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS (§19.9-11) and the BLOCKED frames (§19.12-14).

use super::{unknown_type, Frame, FrameType};
use crate::coding::Reader;
use crate::error::{transport_err, Error, TransportError};

/// The largest stream count MAX_STREAMS / STREAMS_BLOCKED may carry (RFC 9000 §19.11, §19.14).
pub const MAX_STREAM_COUNT: u64 = 1 << 60;

/// Stream directionality, as MAX_STREAMS and STREAMS_BLOCKED distinguish it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamDir {
    Bidi,
    Uni,
}

/// The body of a frame of this family (`ty` one of 0x04, 0x05, 0x10..=0x17).
pub(super) fn parse<'a>(r: &mut Reader<'a>, ty: FrameType) -> Result<Frame<'a>, Error> {
    Ok(match ty.0 {
        0x04 => Frame::ResetStream {
            stream_id: r.varint("stream id")?,
            error_code: r.varint("application error code")?,
            final_size: r.varint("final size")?,
        },
        0x05 => Frame::StopSending {
            stream_id: r.varint("stream id")?,
            error_code: r.varint("application error code")?,
        },
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
        _ => return Err(unknown_type(ty)),
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
