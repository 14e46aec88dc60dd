//! The CONNECT stream of a WebTransport session once it is accepted: HTTP/3 frames (RFC 9114
//! §7.1) whose DATA payloads carry capsules (RFC 9297 §3.2), read for the session's end
//! (draft-ietf-webtrans-http3, Session Termination: CLOSE_WEBTRANSPORT_SESSION, DRAIN_WEBTRANSPORT_SESSION).
//!
//! h3-webtransport keeps the CONNECT stream to itself and never reads it, so the session reads
//! it from the mailbox ([`super::adapter::StreamTap`]) and parses it here.

use recoup_transport::coding::{BufMutExt, Reader};

/// HTTP/3 frame types (RFC 9114 §7.2).
const DATA: u64 = 0x0;
/// Frames that must not appear on a request stream: CANCEL_PUSH, SETTINGS, PUSH_PROMISE (from a
/// client), GOAWAY, MAX_PUSH_ID (RFC 9114 §7.2.3-7.2.7), and HTTP/2's reserved types (§7.2.8).
const UNEXPECTED: [u64; 9] = [0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8, 0x9, 0xd];

/// Capsule types (draft-ietf-webtrans-http3, IANA Considerations).
pub(crate) const CLOSE_WEBTRANSPORT_SESSION: u64 = 0x2843;
pub(crate) const DRAIN_WEBTRANSPORT_SESSION: u64 = 0x78ae;
/// The longest reason a CLOSE_WEBTRANSPORT_SESSION may carry (draft-ietf-webtrans-http3, Session Termination).
const MAX_REASON: usize = 1024;
/// The longest capsule buffered whole: a CLOSE is at most 4 + 1024 bytes; other capsules are
/// skipped as they arrive, whatever their length.
const MAX_BUFFERED: u64 = 4 + MAX_REASON as u64;

/// H3_FRAME_UNEXPECTED (RFC 9114 §8.1).
pub(crate) const H3_FRAME_UNEXPECTED: u64 = 0x105;
/// H3_MESSAGE_ERROR (RFC 9114 §8.1): a malformed message (§4.1.2), which a malformed capsule is
/// (RFC 9297 §3.3).
pub(crate) const H3_MESSAGE_ERROR: u64 = 0x10e;

/// What the client said on the CONNECT stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Capsule {
    /// CLOSE_WEBTRANSPORT_SESSION: the application's error code and reason.
    Close { code: u32, reason: String },
    /// DRAIN_WEBTRANSPORT_SESSION: the client asks for a graceful end.
    Drain,
}

/// Why the CONNECT stream is broken, with the HTTP/3 error code that answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub code: u64,
    pub why: String,
}

fn malformed(code: u64, why: impl Into<String>) -> Malformed {
    Malformed {
        code,
        why: why.into(),
    }
}

/// Where the parser is inside the stream's frames and capsules.
#[derive(Debug, Default)]
pub(crate) struct ConnectStream {
    /// Bytes not yet parsed as a frame header.
    frame_head: Vec<u8>,
    /// Payload bytes left in the current frame, and whether it is DATA (whose payload is
    /// capsules) or a frame skipped whole.
    frame_left: u64,
    in_data: bool,
    /// DATA payload bytes not yet parsed as a capsule.
    capsule: Vec<u8>,
    /// Bytes left to skip of a capsule of a type with no meaning here (RFC 9297 §3.2: unknown
    /// capsule types are ignored).
    skip_capsule: u64,
}

impl ConnectStream {
    /// Parses `bytes`, the stream's next bytes; returns the capsules they complete.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Result<Vec<Capsule>, Malformed> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            if self.frame_left == 0 {
                self.frame_head.push(bytes[0]);
                bytes = &bytes[1..];
                self.parse_frame_head()?;
                continue;
            }
            let n = usize::try_from(self.frame_left)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let (payload, rest) = bytes.split_at(n);
            bytes = rest;
            self.frame_left -= n as u64;
            if self.in_data {
                self.capsules(payload, &mut out)?;
            }
        }
        Ok(out)
    }

    /// Parses the frame header once `frame_head` holds all of it.
    fn parse_frame_head(&mut self) -> Result<(), Malformed> {
        let mut r = Reader::new(&self.frame_head);
        let (Ok(kind), Ok(len)) = (r.varint("frame type"), r.varint("frame length")) else {
            return Ok(());
        };
        self.frame_head.clear();
        if UNEXPECTED.contains(&kind) {
            return Err(malformed(
                H3_FRAME_UNEXPECTED,
                format!("frame type {kind:#x} on the CONNECT stream (RFC 9114 §7.2)"),
            ));
        }
        // HEADERS here would be trailers; they and unknown types carry nothing for the
        // session and are skipped (RFC 9114 §9).
        self.in_data = kind == DATA;
        self.frame_left = len;
        Ok(())
    }

    fn capsules(&mut self, mut payload: &[u8], out: &mut Vec<Capsule>) -> Result<(), Malformed> {
        while !payload.is_empty() {
            if self.skip_capsule > 0 {
                let n = usize::try_from(self.skip_capsule)
                    .unwrap_or(usize::MAX)
                    .min(payload.len());
                self.skip_capsule -= n as u64;
                payload = &payload[n..];
                continue;
            }
            self.capsule.push(payload[0]);
            payload = &payload[1..];
            let mut r = Reader::new(&self.capsule);
            let (Ok(kind), Ok(len)) = (r.varint("capsule type"), r.varint("capsule length")) else {
                continue;
            };
            let known = matches!(
                kind,
                CLOSE_WEBTRANSPORT_SESSION | DRAIN_WEBTRANSPORT_SESSION
            );
            if !known {
                self.capsule.clear();
                self.skip_capsule = len;
                continue;
            }
            if len > MAX_BUFFERED {
                return Err(malformed(
                    H3_MESSAGE_ERROR,
                    format!(
                        "capsule {kind:#x} of {len} bytes (a CLOSE_WEBTRANSPORT_SESSION \
                         holds at most {MAX_BUFFERED}, draft-ietf-webtrans-http3, Session Termination)"
                    ),
                ));
            }
            let head = r.position();
            let want = head + usize::try_from(len).unwrap_or(usize::MAX);
            // The value: as much as this payload has, up to the capsule's end.
            let n = (want - self.capsule.len()).min(payload.len());
            self.capsule.extend_from_slice(&payload[..n]);
            payload = &payload[n..];
            if self.capsule.len() < want {
                continue;
            }
            let value = self.capsule.split_off(head);
            self.capsule.clear();
            out.push(decode(kind, &value)?);
        }
        Ok(())
    }

    /// The stream ended (FIN): an unfinished frame or capsule is malformed (RFC 9297 §3.3).
    pub(crate) fn finish(&self) -> Result<(), Malformed> {
        if !self.frame_head.is_empty() || self.frame_left > 0 {
            return Err(malformed(
                H3_FRAME_UNEXPECTED,
                "the CONNECT stream ended inside a frame (RFC 9114 §7.1)",
            ));
        }
        if !self.capsule.is_empty() || self.skip_capsule > 0 {
            return Err(malformed(
                H3_MESSAGE_ERROR,
                "the CONNECT stream ended inside a capsule (RFC 9297 §3.3)",
            ));
        }
        Ok(())
    }
}

/// A DATA frame holding a CLOSE_WEBTRANSPORT_SESSION capsule: what the server sends on the
/// CONNECT stream, before FIN, to end a session itself (draft-ietf-webtrans-http3, Session
/// Termination). The reason is cut to 1024 bytes, at a character boundary.
pub(crate) fn close_frame(code: u32, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let reason = &reason.as_bytes()[..end];
    let mut capsule = Vec::with_capacity(16 + reason.len());
    capsule.put_varint(CLOSE_WEBTRANSPORT_SESSION);
    capsule.put_varint(4 + reason.len() as u64);
    capsule.put_u32(code);
    capsule.extend_from_slice(reason);
    let mut frame = Vec::with_capacity(16 + capsule.len());
    frame.put_varint(DATA);
    frame.put_varint(capsule.len() as u64);
    frame.extend_from_slice(&capsule);
    frame
}

fn decode(kind: u64, value: &[u8]) -> Result<Capsule, Malformed> {
    if kind == DRAIN_WEBTRANSPORT_SESSION {
        // draft-ietf-webtrans-http3, Session Termination: it has no value.
        if !value.is_empty() {
            return Err(malformed(
                H3_MESSAGE_ERROR,
                "DRAIN_WEBTRANSPORT_SESSION with a value (draft-ietf-webtrans-http3, Session Termination)",
            ));
        }
        return Ok(Capsule::Drain);
    }
    let mut r = Reader::new(value);
    let code = r.u32("error code").map_err(|_| {
        malformed(
            H3_MESSAGE_ERROR,
            format!(
                "CLOSE_WEBTRANSPORT_SESSION of {} bytes has no 32-bit error code \
                 (draft-ietf-webtrans-http3, Session Termination)",
                value.len()
            ),
        )
    })?;
    let reason = std::str::from_utf8(r.rest()).map_err(|_| {
        malformed(
            H3_MESSAGE_ERROR,
            "CLOSE_WEBTRANSPORT_SESSION reason is not UTF-8 (draft-ietf-webtrans-http3, Session Termination)",
        )
    })?;
    Ok(Capsule::Close {
        code,
        reason: reason.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_varint(kind);
        out.put_varint(payload.len() as u64);
        out.extend_from_slice(payload);
        out
    }

    fn capsule(kind: u64, value: &[u8]) -> Vec<u8> {
        frame(kind, value)
    }

    fn close(code: u32, reason: &str) -> Vec<u8> {
        let mut value = code.to_be_bytes().to_vec();
        value.extend_from_slice(reason.as_bytes());
        capsule(CLOSE_WEBTRANSPORT_SESSION, &value)
    }

    #[test]
    fn a_close_split_across_data_frames_and_fed_byte_by_byte_is_read_whole() {
        let mut payload = capsule(0x29, b"an unknown capsule, skipped");
        payload.extend(close(7, "done"));
        let (a, b) = payload.split_at(payload.len() - 3);
        // A reserved frame type between the two DATA frames is skipped (RFC 9114 §7.2.8).
        let mut stream = frame(DATA, a);
        stream.extend(frame(0x21, b"grease"));
        stream.extend(frame(DATA, b));
        let mut parser = ConnectStream::default();
        let mut got = Vec::new();
        for byte in &stream {
            got.extend(
                parser
                    .feed(std::slice::from_ref(byte))
                    .expect("well formed"),
            );
        }
        assert_eq!(
            got,
            [Capsule::Close {
                code: 7,
                reason: "done".into()
            }]
        );
        assert_eq!(parser.finish(), Ok(()));
        let mut whole = ConnectStream::default();
        assert_eq!(whole.feed(&stream).expect("well formed"), got);
    }

    #[test]
    fn the_servers_close_is_read_back() {
        let got = ConnectStream::default().feed(&close_frame(0, "draining"));
        let close = Capsule::Close {
            code: 0,
            reason: "draining".into(),
        };
        assert_eq!(got, Ok(vec![close]));
        // A reason over 1024 bytes is cut, not sent malformed.
        let long = "é".repeat(600);
        let got = ConnectStream::default().feed(&close_frame(1, &long));
        let Ok(got) = got else { panic!("{got:?}") };
        assert!(matches!(&got[..], [Capsule::Close { reason, .. }] if reason.len() == 1024));
    }

    #[test]
    fn a_drain_is_read() {
        let stream = frame(DATA, &capsule(DRAIN_WEBTRANSPORT_SESSION, b""));
        let got = ConnectStream::default().feed(&stream);
        assert_eq!(got, Ok(vec![Capsule::Drain]));
    }

    #[test]
    fn malformed_capsules_and_frames_are_refused_with_their_http3_error() {
        let cases: [(Vec<u8>, u64); 5] = [
            // A CLOSE too short for its 32-bit error code.
            (
                frame(DATA, &capsule(CLOSE_WEBTRANSPORT_SESSION, &[0, 1])),
                H3_MESSAGE_ERROR,
            ),
            // A reason longer than 1024 bytes.
            (frame(DATA, &close(1, &"x".repeat(1025))), H3_MESSAGE_ERROR),
            // A reason that is not UTF-8.
            (
                frame(
                    DATA,
                    &capsule(CLOSE_WEBTRANSPORT_SESSION, &[0, 0, 0, 1, 0xff]),
                ),
                H3_MESSAGE_ERROR,
            ),
            // A DRAIN with a value.
            (
                frame(DATA, &capsule(DRAIN_WEBTRANSPORT_SESSION, b"x")),
                H3_MESSAGE_ERROR,
            ),
            // SETTINGS on a request stream (RFC 9114 §7.2.4).
            (frame(0x4, b""), H3_FRAME_UNEXPECTED),
        ];
        for (stream, code) in cases {
            let got = ConnectStream::default().feed(&stream);
            assert_eq!(got.map_err(|e| e.code), Err(code), "{stream:02x?}");
        }
    }

    #[test]
    fn a_stream_ending_inside_a_frame_or_a_capsule_is_malformed() {
        let whole = frame(DATA, &close(7, "done"));
        // Inside the DATA frame.
        let mut parser = ConnectStream::default();
        assert_eq!(parser.feed(&whole[..whole.len() - 1]), Ok(vec![]));
        assert_eq!(
            parser.finish().map_err(|e| e.code),
            Err(H3_FRAME_UNEXPECTED)
        );
        // A DATA frame that ends inside a capsule, then FIN.
        let cut = close(7, "done");
        let mut parser = ConnectStream::default();
        assert_eq!(parser.feed(&frame(DATA, &cut[..4])), Ok(vec![]));
        assert_eq!(parser.finish().map_err(|e| e.code), Err(H3_MESSAGE_ERROR));
    }
}
