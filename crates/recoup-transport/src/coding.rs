//! Wire primitives: QUIC variable-length integers (RFC 9000 §16), a bounds-checked reader over
//! received bytes, and writer helpers on `Vec<u8>`.
//!
//! Decoding never panics: every read returns [`Error::UnexpectedEnd`] naming what it was
//! reading. Encoding appends to a `Vec<u8>`; values come from our own state, so an out-of-range
//! value there is a bug and panics (see [`BufMutExt::put_varint`]).

use std::fmt;

use crate::error::Error;

/// A QUIC variable-length integer: a value in `0..=2^62-1` (RFC 9000 §16).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VarInt(u64);

impl VarInt {
    /// The largest value a varint can hold, 2^62-1.
    pub const MAX: Self = Self((1 << 62) - 1);
    pub const ZERO: Self = Self(0);

    /// `None` if `value` exceeds [`VarInt::MAX`].
    #[must_use]
    pub const fn new(value: u64) -> Option<Self> {
        if value <= Self::MAX.0 {
            Some(Self(value))
        } else {
            None
        }
    }

    #[must_use]
    pub const fn into_inner(self) -> u64 {
        self.0
    }

    /// Bytes this value takes on the wire (1, 2, 4 or 8).
    #[must_use]
    pub const fn size(self) -> usize {
        varint_size(self.0)
    }
}

/// Bytes the shortest encoding of `value` takes: 1, 2, 4 or 8 (RFC 9000 §16, table 4).
/// Values above [`VarInt::MAX`] cannot be encoded; they report 8 so size estimates stay monotone.
#[must_use]
pub const fn varint_size(value: u64) -> usize {
    if value < (1 << 6) {
        1
    } else if value < (1 << 14) {
        2
    } else if value < (1 << 30) {
        4
    } else {
        8
    }
}

impl From<u8> for VarInt {
    fn from(v: u8) -> Self {
        Self(u64::from(v))
    }
}

impl From<u16> for VarInt {
    fn from(v: u16) -> Self {
        Self(u64::from(v))
    }
}

impl From<u32> for VarInt {
    fn from(v: u32) -> Self {
        Self(u64::from(v))
    }
}

impl From<VarInt> for u64 {
    fn from(v: VarInt) -> Self {
        v.0
    }
}

impl TryFrom<u64> for VarInt {
    type Error = Error;

    fn try_from(v: u64) -> Result<Self, Error> {
        Self::new(v).ok_or_else(|| Error::invalid("varint", format!("{v} exceeds 2^62-1")))
    }
}

impl fmt::Debug for VarInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for VarInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A cursor over received bytes. Every read is bounds-checked and names what it was reading in
/// the error, so a malformed datagram explains itself in logs and fuzz reports.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[must_use]
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far (the offset of the next read within the original slice).
    #[must_use]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left to read.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread bytes, without consuming them.
    #[must_use]
    pub fn peek_rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Consume and return all unread bytes.
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = &self.buf[self.pos..];
        self.pos = self.buf.len();
        rest
    }

    /// Consume exactly `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Error> {
        if n > self.remaining() {
            return Err(Error::UnexpectedEnd(what));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Consume exactly `N` bytes into an array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Error> {
        let mut out = [0; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, Error> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, Error> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, Error> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    /// A variable-length integer (RFC 9000 §16). Non-minimal encodings are accepted, as §16
    /// requires for everything except frame types.
    #[inline]
    pub fn varint(&mut self, what: &'static str) -> Result<u64, Error> {
        Ok(self.varint_with_len(what)?.0)
    }

    /// A varint and how many bytes it took on the wire (frame types must be minimal, §12.4).
    #[inline]
    pub fn varint_with_len(&mut self, what: &'static str) -> Result<(u64, usize), Error> {
        self.try_varint().ok_or(Error::UnexpectedEnd(what))
    }

    /// A varint and its length, or `None` (nothing consumed) where the input ends inside it.
    /// Inlined and free of the error type: every ACK range and frame header takes this path
    /// (an ACK frame's ranges are validated at decode, then those that changed read again).
    #[inline]
    pub(crate) fn try_varint(&mut self) -> Option<(u64, usize)> {
        let rest = self.buf.get(self.pos..)?;
        let first = *rest.first()?;
        let high = first & 0x3f;
        // One arm per length, each reading a fixed-size array: no loop over a variable length.
        let (value, len) = match first >> 6 {
            0 => (u64::from(high), 1),
            1 => {
                let [_, b] = *rest.first_chunk()?;
                (u64::from(u16::from_be_bytes([high, b])), 2)
            }
            2 => {
                let [_, b1, b2, b3] = *rest.first_chunk()?;
                (u64::from(u32::from_be_bytes([high, b1, b2, b3])), 4)
            }
            _ => {
                let [_, b1, b2, b3, b4, b5, b6, b7] = *rest.first_chunk()?;
                (u64::from_be_bytes([high, b1, b2, b3, b4, b5, b6, b7]), 8)
            }
        };
        self.pos += len;
        Some((value, len))
    }

    /// A varint used as a byte count for data that follows in this same input. Rejecting counts
    /// beyond what is left before converting keeps a hostile 2^62 length from reaching `usize`
    /// arithmetic or an allocation.
    pub fn length(&mut self, what: &'static str) -> Result<usize, Error> {
        let n = self.varint(what)?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or(Error::UnexpectedEnd(what))
    }

    /// A varint length followed by that many bytes.
    pub fn length_prefixed(&mut self, what: &'static str) -> Result<&'a [u8], Error> {
        let n = self.length(what)?;
        self.bytes(n, what)
    }
}

/// Writer helpers for building packets in a `Vec<u8>`.
pub trait BufMutExt {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    /// Append `v` as a minimal varint.
    ///
    /// # Panics
    /// If `v` exceeds [`VarInt::MAX`]: values we send come from our own state, and one that large
    /// is a bug upstream, not something to truncate silently.
    fn put_varint(&mut self, v: u64);
    /// Append `v` as a varint of exactly `len` bytes (1, 2, 4 or 8), e.g. a fixed-width
    /// placeholder to patch later.
    ///
    /// # Panics
    /// If `len` is not 1, 2, 4 or 8 or `v` does not fit in it.
    fn put_varint_with_len(&mut self, v: u64, len: usize);
    fn put_bytes(&mut self, b: &[u8]);
}

impl BufMutExt for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }

    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    fn put_varint(&mut self, v: u64) {
        // Fixed-size appends per length (RFC 9000 §16: the two high bits give it): no zero fill
        // and no copy of a variable length, as `put_varint_with_len` needs.
        match v {
            0..0x40 => self.push(v as u8),
            0x40..0x4000 => self.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
            0x4000..0x4000_0000 => {
                self.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes());
            }
            _ => {
                assert!(v <= VarInt::MAX.0, "varint {v} exceeds 2^62-1");
                self.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
            }
        }
    }

    fn put_varint_with_len(&mut self, v: u64, len: usize) {
        let start = self.len();
        self.resize(start + len, 0);
        write_varint_with_len(&mut self[start..], v, len);
    }

    fn put_bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// Overwrite `out[..len]` with `v` as a `len`-byte varint, to patch a placeholder in place.
///
/// # Panics
/// If `len` is not 1, 2, 4 or 8, `out` is shorter than `len`, or `v` does not fit in `len` bytes.
pub fn write_varint_with_len(out: &mut [u8], v: u64, len: usize) {
    let tag: u8 = match len {
        1 => 0b00,
        2 => 0b01,
        4 => 0b10,
        8 => 0b11,
        _ => panic!("varint length {len} is not 1, 2, 4 or 8"),
    };
    assert!(
        len == 8 && v <= VarInt::MAX.0 || v < 1 << (8 * len - 2),
        "varint {v} does not fit in {len} bytes"
    );
    let be = v.to_be_bytes();
    out[..len].copy_from_slice(&be[8 - len..]);
    out[0] |= tag << 6;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Result<(u64, usize), Error> {
        Reader::new(bytes).varint_with_len("test")
    }

    #[test]
    fn rfc9000_appendix_a1_examples() {
        // RFC 9000 §A.1 sample encodings.
        let cases: [(&str, u64); 4] = [
            ("c2197c5eff14e88c", 151_288_809_941_952_652),
            ("9d7f3e7d", 494_878_333),
            ("7bbd", 15_293),
            ("25", 37),
        ];
        for (hex, value) in cases {
            let bytes = hex::decode(hex).unwrap();
            assert_eq!(decode(&bytes).unwrap(), (value, bytes.len()));
            let mut out = Vec::new();
            out.put_varint(value);
            assert_eq!(out, bytes, "encoding {value}");
            assert_eq!(varint_size(value), bytes.len());
        }
        // The two-byte encoding of 37 decodes too: non-minimal is legal (§16).
        assert_eq!(decode(&[0x40, 0x25]).unwrap(), (37, 2));
    }

    #[test]
    fn size_boundaries() {
        for (v, n) in [
            (0, 1),
            (63, 1),
            (64, 2),
            (16_383, 2),
            (16_384, 4),
            ((1 << 30) - 1, 4),
            (1 << 30, 8),
            (VarInt::MAX.0, 8),
        ] {
            assert_eq!(varint_size(v), n, "{v}");
            let mut out = Vec::new();
            out.put_varint(v);
            assert_eq!(decode(&out).unwrap(), (v, n));
            let mut fixed = Vec::new();
            fixed.put_varint_with_len(v, n);
            assert_eq!(out, fixed, "{v}");
        }
        assert!(VarInt::new(1 << 62).is_none());
        assert_eq!(VarInt::new(5).map(VarInt::size), Some(1));
        assert!(VarInt::try_from(u64::MAX).is_err());
    }

    #[test]
    #[should_panic(expected = "exceeds 2^62-1")]
    fn encoding_too_large_value_panics() {
        Vec::new().put_varint(1 << 62);
    }

    #[test]
    fn fixed_width_placeholder_patches_in_place() {
        let mut out = vec![0xaa];
        out.put_varint_with_len(0, 2);
        write_varint_with_len(&mut out[1..], 1200, 2);
        assert_eq!(decode(&out[1..]).unwrap(), (1200, 2));
        assert_eq!(out[0], 0xaa);
    }

    #[test]
    fn truncated_reads_name_what_they_read() {
        assert_eq!(decode(&[0xc2, 0x19]), Err(Error::UnexpectedEnd("test")));
        assert_eq!(decode(&[]), Err(Error::UnexpectedEnd("test")));
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16("a").unwrap(), 0x0102);
        assert_eq!(r.u16("b"), Err(Error::UnexpectedEnd("b")));
        assert_eq!(r.remaining(), 1, "a failed read consumes nothing");
        assert_eq!(r.u8("c").unwrap(), 3);
        assert!(r.is_empty());
        assert_eq!(r.u32("d"), Err(Error::UnexpectedEnd("d")));
    }

    #[test]
    fn length_prefix_cannot_exceed_input() {
        // Declares 2^62-1 bytes with only one present.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00]);
        assert_eq!(
            r.length_prefixed("token"),
            Err(Error::UnexpectedEnd("token"))
        );
        let mut r = Reader::new(&[0x02, 0xaa, 0xbb, 0xcc]);
        assert_eq!(r.length_prefixed("token").unwrap(), &[0xaa, 0xbb]);
        assert_eq!(r.position(), 3);
        assert_eq!(r.rest(), &[0xcc]);
    }
}
