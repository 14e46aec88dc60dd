//! CONNECTION_CLOSE frames (RFC 9000 §19.19), for transport and application errors.

use crate::coding::{varint_size, BufMutExt, Reader};
use crate::error::{Error, TransportError};

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

impl<'a> ConnectionClose<'a> {
    /// The body of a transport (`application` false, type 0x1c) or application (0x1d) close.
    pub(super) fn parse(r: &mut Reader<'a>, application: bool) -> Result<Self, Error> {
        let error_code = r.varint("error code")?;
        let frame_type = if application {
            None
        } else {
            Some(r.varint("frame type")?)
        };
        Ok(Self {
            error_code,
            frame_type,
            reason: r.length_prefixed("reason phrase")?,
        })
    }

    /// Appends the body (everything after the frame type).
    pub(super) fn encode_body(&self, buf: &mut Vec<u8>) {
        buf.put_varint(self.error_code);
        if let Some(t) = self.frame_type {
            buf.put_varint(t);
        }
        buf.put_varint(self.reason.len() as u64);
        buf.put_bytes(self.reason);
    }

    /// Bytes [`ConnectionClose::encode_body`] appends.
    pub(super) fn body_len(&self) -> usize {
        varint_size(self.error_code)
            + self.frame_type.map_or(0, varint_size)
            + varint_size(self.reason.len() as u64)
            + self.reason.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::round_trip;
    use super::*;
    use crate::error::transport_err;
    use crate::frame::Frame;

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
