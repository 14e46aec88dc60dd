//! Single byte ranges of a `Range` request header (RFC 9110 §14.1.2, §14.2).

use std::ops::Range;

/// What a `Range` header asks of a representation of a known length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ByteRange {
    /// The whole representation: no header, or one a server may ignore (bad syntax, other
    /// units, several ranges; RFC 9110 §14.2 lets a server ignore it).
    Full,
    /// These bytes (end exclusive): answered with 206 and `Content-Range`.
    Part(Range<u64>),
    /// No byte of the representation is in the range: 416 (RFC 9110 §15.5.17).
    Unsatisfiable,
}

impl ByteRange {
    /// Interprets `header` (`bytes=a-b`, `bytes=a-` or `bytes=-n`) for a body of `len` bytes.
    #[must_use]
    pub fn parse(header: &str, len: u64) -> Self {
        let Some(spec) = header.trim().strip_prefix("bytes=") else {
            return Self::Full;
        };
        if spec.contains(',') {
            return Self::Full;
        }
        let Some((first, last)) = spec.trim().split_once('-') else {
            return Self::Full;
        };
        let number = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        match (first, last) {
            ("", suffix) => match number(suffix) {
                None => Self::Full,
                // §14.1.3: a suffix range of 0 bytes, or any of an empty body, is unsatisfiable.
                Some(0) => Self::Unsatisfiable,
                Some(_) if len == 0 => Self::Unsatisfiable,
                Some(n) => Self::Part(len.saturating_sub(n)..len),
            },
            (first, last) => {
                let Some(start) = number(first) else {
                    return Self::Full;
                };
                let end = if last.is_empty() {
                    len
                } else {
                    match number(last) {
                        // §14.1.1: a last position below the first makes the range invalid.
                        Some(l) if l >= start => l.saturating_add(1).min(len),
                        _ => return Self::Full,
                    }
                };
                if start >= len {
                    Self::Unsatisfiable
                } else {
                    Self::Part(start..end)
                }
            }
        }
    }
}

/// The `Content-Range` value of a 206 answer.
#[must_use]
pub fn content_range(part: &Range<u64>, len: u64) -> String {
    format!("bytes {}-{}/{len}", part.start, part.end.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_of_a_100_byte_body() {
        let p = |h| ByteRange::parse(h, 100);
        assert_eq!(p("bytes=0-9"), ByteRange::Part(0..10));
        assert_eq!(p("bytes=90-"), ByteRange::Part(90..100));
        assert_eq!(p("bytes=90-500"), ByteRange::Part(90..100));
        assert_eq!(p("bytes=-10"), ByteRange::Part(90..100));
        assert_eq!(p("bytes=-500"), ByteRange::Part(0..100));
        assert_eq!(p("bytes=99-99"), ByteRange::Part(99..100));
        assert_eq!(p("bytes=100-"), ByteRange::Unsatisfiable);
        assert_eq!(p("bytes=100-200"), ByteRange::Unsatisfiable);
        assert_eq!(p("bytes=-0"), ByteRange::Unsatisfiable);
        for ignored in [
            "items=0-1",
            "bytes=5-1",
            "bytes=a-b",
            "bytes=0-1,5-6",
            "bytes=",
            "bytes=-",
        ] {
            assert_eq!(p(ignored), ByteRange::Full, "{ignored}");
        }
        assert_eq!(ByteRange::parse("bytes=-5", 0), ByteRange::Unsatisfiable);
        assert_eq!(content_range(&(90..100), 100), "bytes 90-99/100");
    }
}
