//! The crate's errors. RFC 9000 §20 transport error codes are what a peer sees in
//! CONNECTION_CLOSE; [`Error`] is what the API returns.

use std::fmt;

/// A QUIC transport error code (RFC 9000 §20.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransportErrorCode(pub u64);

impl TransportErrorCode {
    pub const NO_ERROR: Self = Self(0x0);
    pub const INTERNAL_ERROR: Self = Self(0x1);
    pub const CONNECTION_REFUSED: Self = Self(0x2);
    pub const FLOW_CONTROL_ERROR: Self = Self(0x3);
    pub const STREAM_LIMIT_ERROR: Self = Self(0x4);
    pub const STREAM_STATE_ERROR: Self = Self(0x5);
    pub const FINAL_SIZE_ERROR: Self = Self(0x6);
    pub const FRAME_ENCODING_ERROR: Self = Self(0x7);
    pub const TRANSPORT_PARAMETER_ERROR: Self = Self(0x8);
    pub const CONNECTION_ID_LIMIT_ERROR: Self = Self(0x9);
    pub const PROTOCOL_VIOLATION: Self = Self(0xa);
    pub const INVALID_TOKEN: Self = Self(0xb);
    pub const APPLICATION_ERROR: Self = Self(0xc);
    pub const CRYPTO_BUFFER_EXCEEDED: Self = Self(0xd);
    pub const KEY_UPDATE_ERROR: Self = Self(0xe);
    pub const AEAD_LIMIT_REACHED: Self = Self(0xf);
    pub const NO_VIABLE_PATH: Self = Self(0x10);

    /// RFC 9001 §4.8: a TLS alert maps to CRYPTO_ERROR 0x0100 + alert.
    #[must_use]
    pub const fn crypto(alert: u8) -> Self {
        Self(0x100 + alert as u64)
    }

    /// The RFC 9000 name of the code, for logs and qlog.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self.0 {
            0x0 => "no_error",
            0x1 => "internal_error",
            0x2 => "connection_refused",
            0x3 => "flow_control_error",
            0x4 => "stream_limit_error",
            0x5 => "stream_state_error",
            0x6 => "final_size_error",
            0x7 => "frame_encoding_error",
            0x8 => "transport_parameter_error",
            0x9 => "connection_id_limit_error",
            0xa => "protocol_violation",
            0xb => "invalid_token",
            0xc => "application_error",
            0xd => "crypto_buffer_exceeded",
            0xe => "key_update_error",
            0xf => "aead_limit_reached",
            0x10 => "no_viable_path",
            0x100..=0x1ff => "crypto_error",
            _ => "unknown",
        }
    }
}

impl fmt::Debug for TransportErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(0x{:x})", self.name(), self.0)
    }
}

impl fmt::Display for TransportErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A protocol violation to be reported to the peer in CONNECTION_CLOSE (RFC 9000 §10.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportError {
    pub code: TransportErrorCode,
    /// The type of the frame that triggered the error, if any (RFC 9000 §19.19).
    pub frame_type: Option<u64>,
    pub reason: String,
}

impl TransportError {
    #[must_use]
    pub fn new(code: TransportErrorCode, reason: impl Into<String>) -> Self {
        Self {
            code,
            frame_type: None,
            reason: reason.into(),
        }
    }

    /// Attach the offending frame's type.
    #[must_use]
    pub fn with_frame(mut self, frame_type: u64) -> Self {
        self.frame_type = Some(frame_type);
        self
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if let Some(t) = self.frame_type {
            write!(f, " in frame 0x{t:x}")?;
        }
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

impl std::error::Error for TransportError {}

/// Shorthand constructors used across the crate.
macro_rules! transport_err {
    ($code:ident, $($arg:tt)*) => {
        $crate::error::TransportError::new(
            $crate::error::TransportErrorCode::$code,
            format!($($arg)*),
        )
    };
}
pub(crate) use transport_err;

/// Everything the transport can fail with: malformed input, a protocol violation, TLS, the
/// state of a connection or stream, and the FEC erasure code. The one error enum of the crate
/// ([`TransportError`] is what a peer sees in CONNECTION_CLOSE).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Bytes ended before a well-formed QUIC packet, frame or parameter did; says what was being
    /// read, so a bad datagram in a log or a fuzz report explains itself. Packets that fail this
    /// way before the connection is established are dropped; after, the connection closes.
    #[error("unexpected end of input while reading {0}")]
    UnexpectedEnd(&'static str),
    /// Bytes (or a configuration string) that are not a valid `what`.
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
    /// The peer (or we) broke the protocol; the connection closes with this code.
    #[error("transport error: {0}")]
    Transport(#[from] TransportError),
    /// A packet failed authentication or header protection could not be removed.
    #[error("packet could not be decrypted")]
    Decrypt,
    /// TLS failed (certificate, ALPN, handshake message).
    #[error("TLS: {0}")]
    Tls(String),
    /// The operation is not valid in the connection's or stream's current state.
    #[error("invalid state: {0}")]
    InvalidState(&'static str),
    /// The stream does not exist or was already closed.
    #[error("unknown stream {0}")]
    UnknownStream(u64),
    /// Flow control or stream limits allow no more right now.
    #[error("blocked by flow control or stream limit")]
    Blocked,
    /// The connection is closed.
    #[error("connection closed: {0}")]
    Closed(String),
    /// The peer announced no `max_datagram_frame_size`: it accepts no DATAGRAM frames.
    #[error("the peer does not accept DATAGRAM frames (it announced no max_datagram_frame_size, RFC 9221 §3)")]
    DatagramsUnsupported,
    /// A datagram larger than what may be sent on this connection now.
    #[error("datagram of {size} bytes exceeds {limit}: at most {max} bytes")]
    DatagramTooLarge {
        size: usize,
        max: usize,
        limit: &'static str,
    },
    /// An FEC window cannot be decoded: more source symbols are missing than repair symbols
    /// arrived.
    #[error("{missing} source symbols missing but only {repairs} repair symbols")]
    FecNotEnough { missing: usize, repairs: usize },
    /// The erasure code itself failed.
    #[error("the erasure code failed: {0}")]
    FecCodec(String),
}

impl Error {
    #[must_use]
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> Self {
        Self::Invalid {
            what,
            detail: detail.into(),
        }
    }

    /// Whether the input was malformed ([`Error::UnexpectedEnd`] or [`Error::Invalid`]).
    #[must_use]
    pub fn is_decode(&self) -> bool {
        matches!(self, Self::UnexpectedEnd(_) | Self::Invalid { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_print_with_their_rfc_names() {
        assert_eq!(
            TransportErrorCode::FLOW_CONTROL_ERROR.to_string(),
            "flow_control_error(0x3)"
        );
        assert_eq!(TransportErrorCode::crypto(0x28).0, 0x128);
        let e = transport_err!(STREAM_STATE_ERROR, "stream {} is send-only", 3).with_frame(0x08);
        assert_eq!(
            e.to_string(),
            "stream_state_error(0x5) in frame 0x8: stream 3 is send-only"
        );
    }
}
