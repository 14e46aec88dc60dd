//! Frame types (RFC 9000 §19) and which packet types may carry them (§12.4 table 3).

use std::fmt;

use crate::error::{transport_err, TransportError};
use crate::packet::PacketType;

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
    /// DATAGRAM whose data runs to the end of the packet (RFC 9221 §4).
    pub const DATAGRAM: Self = Self(0x30);
    /// DATAGRAM with a Length field (RFC 9221 §4).
    pub const DATAGRAM_LEN: Self = Self(0x31);
    /// recoup's FEC repair symbol (docs/FEC.md), a type no registry assigns, sent only to a
    /// peer that announced the `recoup_fec` transport parameter.
    pub const REPAIR: Self = Self(0x3f5e_c0de);

    pub(super) const STREAM_FIN: u64 = 0x01;
    pub(super) const STREAM_LEN: u64 = 0x02;
    pub(super) const STREAM_OFF: u64 = 0x04;

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
            0x30 | 0x31 => "DATAGRAM",
            0x3f5e_c0de => "RECOUP_REPAIR",
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
        0x07 | 0x1b | 0x1e | 0x3f5e_c0de => (false, false, false, true),
        0x04 | 0x05 | 0x08..=0x1a => (false, false, true, true),
        // RFC 9221 §4: DATAGRAM only in 0-RTT and 1-RTT packets.
        0x30 | 0x31 => (false, false, true, true),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;

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
        assert_eq!(allowed(FrameType::DATAGRAM), [false, false, true, true]);
        assert_eq!(allowed(FrameType::DATAGRAM_LEN), [false, false, true, true]);
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
        // RFC 9221 §5.2: DATAGRAM frames are ack-eliciting.
        assert!(FrameType::DATAGRAM.is_ack_eliciting());
        assert!(FrameType::DATAGRAM_LEN.is_ack_eliciting());
        assert_eq!(format!("{:?}", FrameType(0x0b)), "STREAM(0x0b)");
    }
}
