//! REPAIR: recoup's private frame carrying one repair symbol of the FEC extension (docs/FEC.md).
//! Only sent to a peer that announced the `recoup_fec` transport parameter; to any other
//! endpoint it is an unknown frame type (RFC 9000 §12.4).
//!
//! ```text
//! REPAIR {
//!   Type (i) = 0x3f5ec0de,
//!   First Packet Number (i),      the window's first source packet
//!   Span (i),                     1..=96 packet numbers from the first
//!   Window (ceil(Span / 8) bytes),bit i (LSB first) set: packet first + i is a source symbol;
//!                                 bits 0 and Span-1 set, none beyond Span
//!   Repair Count (i),             m, 1..=96 repair symbols over this window
//!   Repair Index (i),             0..m
//!   Symbol Length (i),            even, 2..=65534
//!   Symbol (..),
//! }
//! ```
//! Everything here can be checked from the frame alone and fails as FRAME_ENCODING_ERROR; what
//! needs the connection (the window lies before the carrying packet, the symbol is at least as
//! long as every source symbol it covers) is checked by the receiver as PROTOCOL_VIOLATION.

use recoup_recovery::fec::{MAX_REPAIRS, MAX_WINDOW_SPAN};

use super::{Frame, FrameType};
use crate::coding::{varint_size, BufMutExt, Reader};
use crate::error::{transport_err, Error};

/// Longest repair symbol: a symbol is at most one packet's STREAM frames.
pub const MAX_SYMBOL_LEN: usize = 65_534;

/// A REPAIR frame: repair symbol `index` of `repairs` over the source packets in `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairFrame<'a> {
    pub first_pn: u64,
    /// Packet numbers `first_pn .. first_pn + span` hold the window.
    pub span: u64,
    /// Bit i set: packet `first_pn + i` is in the window.
    pub window: u128,
    pub repairs: u16,
    pub index: u16,
    pub symbol: &'a [u8],
}

impl RepairFrame<'_> {
    /// The window's packet numbers, ascending.
    pub fn window_pns(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.span)
            .filter(|i| self.window >> i & 1 == 1)
            .map(|i| self.first_pn + i)
    }

    /// Number of source packets in the window.
    #[must_use]
    pub fn sources(&self) -> usize {
        self.window.count_ones() as usize
    }

    fn bitmap_len(span: u64) -> usize {
        span.div_ceil(8) as usize
    }

    pub(super) fn encode(&self, buf: &mut Vec<u8>) {
        buf.put_varint(FrameType::REPAIR.0);
        buf.put_varint(self.first_pn);
        buf.put_varint(self.span);
        buf.put_bytes(&self.window.to_le_bytes()[..Self::bitmap_len(self.span)]);
        buf.put_varint(u64::from(self.repairs));
        buf.put_varint(u64::from(self.index));
        buf.put_varint(self.symbol.len() as u64);
        buf.put_bytes(self.symbol);
    }

    pub(super) fn encoded_len(&self) -> usize {
        varint_size(FrameType::REPAIR.0) + self.header_len_after_type() + self.symbol.len()
    }

    fn header_len_after_type(&self) -> usize {
        varint_size(self.first_pn)
            + varint_size(self.span)
            + Self::bitmap_len(self.span)
            + varint_size(u64::from(self.repairs))
            + varint_size(u64::from(self.index))
            + varint_size(self.symbol.len() as u64)
    }
}

/// Bytes a REPAIR frame takes beyond its symbol, at most: what a sender keeps free in every
/// source packet so that a repair symbol as long as its longest source symbol fits a packet.
pub const MAX_REPAIR_OVERHEAD: usize =
    4 + 8 + 1 + (MAX_WINDOW_SPAN as usize).div_ceil(8) + 2 + 2 + 4;

pub(super) fn parse<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, Error> {
    let first_pn = r.varint("repair first packet number")?;
    let span = r.varint("repair span")?;
    if span == 0 || span > MAX_WINDOW_SPAN {
        return Err(transport_err!(
            FRAME_ENCODING_ERROR,
            "REPAIR span {span} outside 1..={MAX_WINDOW_SPAN}"
        )
        .into());
    }
    let bitmap = r.bytes(RepairFrame::bitmap_len(span), "repair window")?;
    let mut bytes = [0u8; 16];
    bytes[..bitmap.len()].copy_from_slice(bitmap);
    let window = u128::from_le_bytes(bytes);
    if window & 1 == 0 || window >> (span - 1) != 1 {
        return Err(transport_err!(
            FRAME_ENCODING_ERROR,
            "REPAIR window must start and end its span of {span} (bitmap {window:#x})"
        )
        .into());
    }
    let count = |v: u64, what: &str| -> Result<u16, Error> {
        match u16::try_from(v) {
            Ok(v) if (1..=MAX_REPAIRS).contains(&v) => Ok(v),
            _ => Err(transport_err!(
                FRAME_ENCODING_ERROR,
                "REPAIR {what} {v} outside 1..={MAX_REPAIRS}"
            )
            .into()),
        }
    };
    let repairs = count(r.varint("repair count")?, "repair count")?;
    let index = r.varint("repair index")?;
    if index >= u64::from(repairs) {
        return Err(transport_err!(
            FRAME_ENCODING_ERROR,
            "REPAIR symbol index {index} with only {repairs} repair symbols"
        )
        .into());
    }
    let len = r.varint("repair symbol length")?;
    if len == 0 || len % 2 == 1 || len > MAX_SYMBOL_LEN as u64 {
        return Err(transport_err!(
            FRAME_ENCODING_ERROR,
            "REPAIR symbol length {len}: must be even, 2..={MAX_SYMBOL_LEN}"
        )
        .into());
    }
    let symbol = r.bytes(len as usize, "repair symbol")?;
    Ok(Frame::Repair(RepairFrame {
        first_pn,
        span,
        window,
        repairs,
        index: index as u16,
        symbol,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decode_all, err_code, round_trip, FEE};
    use super::*;

    fn frame(symbol: &[u8]) -> RepairFrame<'_> {
        RepairFrame {
            first_pn: 1000,
            span: 11,
            window: 0b101_1111_1111,
            repairs: 2,
            index: 1,
            symbol,
        }
    }

    fn encoded(f: RepairFrame<'_>) -> Vec<u8> {
        let mut buf = Vec::new();
        Frame::Repair(f).encode(&mut buf);
        buf
    }

    #[test]
    fn repair_frames_round_trip() {
        round_trip(Frame::Repair(frame(&[7; 1200])));
        let f = frame(&[1, 2]);
        assert_eq!(f.sources(), 10);
        assert_eq!(
            f.window_pns().collect::<Vec<_>>(),
            [1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1010]
        );
        round_trip(Frame::Repair(RepairFrame {
            first_pn: 0,
            span: MAX_WINDOW_SPAN,
            window: (1 << MAX_WINDOW_SPAN) - 1,
            repairs: MAX_REPAIRS,
            index: MAX_REPAIRS - 1,
            symbol: &[0; MAX_SYMBOL_LEN],
        }));
        assert!(
            encoded(frame(&[0; 1200])).len() - 1200 <= MAX_REPAIR_OVERHEAD,
            "the overhead bound holds"
        );
    }

    #[test]
    fn malformed_repair_frames_are_frame_encoding_errors() {
        let ty = FrameType::REPAIR.0;
        let good = encoded(frame(&[1, 2, 3, 4]));
        assert!(decode_all(&good).is_ok());
        // Header: 4-byte type, 2-byte first pn, span, 2 bitmap bytes, m, index, length.
        let bad = |at: usize, byte: u8| {
            let mut b = good.clone();
            b[at] = byte;
            err_code(&b)
        };
        assert_eq!(bad(6, 0), (FEE, Some(ty)), "span 0");
        assert_eq!(bad(6, 97), (FEE, Some(ty)), "span 97");
        assert_eq!(bad(7, 0xfe), (FEE, Some(ty)), "first packet not in window");
        assert_eq!(bad(8, 0x01), (FEE, Some(ty)), "last packet not in window");
        assert_eq!(bad(8, 0x0c), (FEE, Some(ty)), "bits beyond the span");
        assert_eq!(bad(9, 0), (FEE, Some(ty)), "no repair symbols");
        assert_eq!(bad(9, 97), (FEE, Some(ty)), "too many repair symbols");
        assert_eq!(bad(10, 2), (FEE, Some(ty)), "index beyond the count");
        assert_eq!(bad(11, 3), (FEE, Some(ty)), "odd symbol length");
        assert_eq!(bad(11, 0), (FEE, Some(ty)), "empty symbol");
        assert_eq!(bad(11, 6), (FEE, Some(ty)), "symbol longer than the frame");
        for cut in 4..good.len() {
            assert_eq!(
                err_code(&good[..cut]),
                (FEE, Some(ty)),
                "truncated at {cut}"
            );
        }
    }
}
