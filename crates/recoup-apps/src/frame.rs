//! The wire format of application frames: live video frames, RTC frames, file and RPC transfers.
//!
//! Every frame is a fixed 32-byte header followed by its payload. The header carries what a
//! receiver needs to check integrity and measure timeliness without any side channel, so the
//! simulator's players and `recoup-net`'s live server and client speak the same format.
//!
//! ```text
//! offset size field
//!      0    4 magic       b"RCPF"
//!      4    1 version     1
//!      5    1 kind        0 = P frame / data, 1 = I frame, 2 = request
//!      6    2 reserved    0
//!      8    8 sequence    u64, big-endian; 0, 1, 2 ... per byte stream (or per transfer index)
//!     16    8 capture_us  u64, big-endian; sender's clock in microseconds since its epoch
//!     24    4 payload_len u32, big-endian; at most MAX_PAYLOAD
//!     28    4 checksum    u32, big-endian; CRC-32 (IEEE 802.3, as zlib's crc32) of the payload
//! ```
//!
//! The payload content is arbitrary; [`fill_payload`] gives the deterministic pattern recoup's
//! senders use, but receivers check only the checksum.
//!
//! Frames are streamed: [`FrameSource`] produces one piece by piece, [`FrameParser`] consumes
//! an in-order byte stream of them, checksumming on the fly, and never keeps a payload.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use recoup_time::Instant;
use recoup_transport::streams::{ByteSource, SourcedBytes};

use crate::WriteData;

/// First four bytes of every frame.
pub const FRAME_MAGIC: [u8; 4] = *b"RCPF";
/// The only version defined.
pub const FRAME_VERSION: u8 = 1;
/// Header length in bytes.
pub const FRAME_HEADER_LEN: usize = 32;
/// Largest payload (1 GiB): bounds what a bad header can make a receiver wait for.
pub const MAX_PAYLOAD: u32 = 1 << 30;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A predicted video frame, or plain data (file and RPC responses).
    Delta,
    /// A key (intra) frame.
    Key,
    /// An RPC request.
    Request,
}

impl FrameKind {
    fn to_byte(self) -> u8 {
        match self {
            Self::Delta => 0,
            Self::Key => 1,
            Self::Request => 2,
        }
    }

    fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Delta),
            1 => Some(Self::Key),
            2 => Some(Self::Request),
            _ => None,
        }
    }
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    pub kind: FrameKind,
    pub sequence: u64,
    /// Capture (or write) time on the sender's clock, in microseconds.
    pub capture_us: u64,
    pub payload_len: u32,
    /// CRC-32 of the payload.
    pub checksum: u32,
}

/// Why bytes are not a valid frame (or frame stream).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("need {needed} header bytes, have {have}")]
    Truncated { needed: usize, have: usize },
    #[error("bad magic {found:02x?} (expected \"RCPF\")")]
    BadMagic { found: [u8; 4] },
    #[error("unsupported frame version {0}")]
    BadVersion(u8),
    #[error("unknown frame kind {0}")]
    BadKind(u8),
    #[error("reserved bytes are {0:#06x}, must be zero")]
    Reserved(u16),
    #[error("payload length {0} exceeds the maximum {MAX_PAYLOAD}")]
    TooLong(u32),
    #[error("frame {sequence}: checksum {computed:#010x} does not match header {expected:#010x}")]
    Checksum {
        sequence: u64,
        expected: u32,
        computed: u32,
    },
    #[error("frame sequence {found}, expected {expected}")]
    Sequence { expected: u64, found: u64 },
    #[error("stream ended inside a frame ({missing} bytes missing)")]
    EndedInFrame { missing: u64 },
    #[error("{0}")]
    Protocol(String),
}

impl FrameHeader {
    /// The 32 header bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut out = [0u8; FRAME_HEADER_LEN];
        out[0..4].copy_from_slice(&FRAME_MAGIC);
        out[4] = FRAME_VERSION;
        out[5] = self.kind.to_byte();
        out[8..16].copy_from_slice(&self.sequence.to_be_bytes());
        out[16..24].copy_from_slice(&self.capture_us.to_be_bytes());
        out[24..28].copy_from_slice(&self.payload_len.to_be_bytes());
        out[28..32].copy_from_slice(&self.checksum.to_be_bytes());
        out
    }

    /// Parse a header from the start of `bytes` (extra bytes are ignored).
    pub fn decode(bytes: &[u8]) -> Result<Self, FrameError> {
        let Some(h) = bytes.get(..FRAME_HEADER_LEN) else {
            return Err(FrameError::Truncated {
                needed: FRAME_HEADER_LEN,
                have: bytes.len(),
            });
        };
        let be_u64 = |r: std::ops::Range<usize>| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[r]);
            u64::from_be_bytes(b)
        };
        let be_u32 = |r: std::ops::Range<usize>| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&h[r]);
            u32::from_be_bytes(b)
        };
        let magic = [h[0], h[1], h[2], h[3]];
        if magic != FRAME_MAGIC {
            return Err(FrameError::BadMagic { found: magic });
        }
        if h[4] != FRAME_VERSION {
            return Err(FrameError::BadVersion(h[4]));
        }
        let kind = FrameKind::from_byte(h[5]).ok_or(FrameError::BadKind(h[5]))?;
        let reserved = u16::from_be_bytes([h[6], h[7]]);
        if reserved != 0 {
            return Err(FrameError::Reserved(reserved));
        }
        let payload_len = be_u32(24..28);
        if payload_len > MAX_PAYLOAD {
            return Err(FrameError::TooLong(payload_len));
        }
        Ok(Self {
            kind,
            sequence: be_u64(8..16),
            capture_us: be_u64(16..24),
            payload_len,
            checksum: be_u32(28..32),
        })
    }
}

/// A whole frame (header and payload) with the deterministic payload of [`fill_payload`].
/// `payload_len` is clamped to [`MAX_PAYLOAD`].
#[must_use]
pub fn encode_frame(kind: FrameKind, sequence: u64, capture: Instant, payload_len: u32) -> Vec<u8> {
    let mut source = FrameSource::new(kind, sequence, capture, payload_len);
    source.read(usize::MAX).to_vec()
}

/// Word 0 of frame `sequence`'s payload: a SplitMix64 hash of the sequence number, so frames
/// start far apart.
fn payload_start(sequence: u64) -> u64 {
    let mut z = (sequence ^ 0x5243_5046_0000_0000).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Step between consecutive payload words: odd, so a frame's words repeat only after 2^64.
const PAYLOAD_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

/// Words in one period of the payload pattern, which starts over after them (1 048 568 bytes):
/// the checksum of a longer payload is then that of one period, combined with itself as often
/// as the payload repeats it (the CRC-32 of a concatenation follows from its parts' CRCs), not a
/// pass over every byte; a 200 MB transfer spent 4 % of its CPU on that pass. A payload shifted
/// by a whole number of periods would pass the checksum; the period is 8 times the prime
/// 2^17 - 1, so no power-of-two chunk and no packet-sized piece shifted by fewer than 131 071
/// of them lines up with it.
const PAYLOAD_PERIOD_WORDS: u64 = (1 << 17) - 1;

/// Bytes in one period of the payload pattern.
const PAYLOAD_PERIOD: u64 = 8 * PAYLOAD_PERIOD_WORDS;

/// Word `index` of the payload that starts with `start`.
fn payload_word(start: u64, index: u64) -> u64 {
    start.wrapping_add((index % PAYLOAD_PERIOD_WORDS).wrapping_mul(PAYLOAD_STEP))
}

/// Bytes `offset..offset + out.len()` of the payload pattern of frame `sequence`: little-endian
/// words of a Weyl sequence (one addition per word, which vectorises; a hash per word cost the
/// simulator 7 % of its instructions) started at a hash of the sequence number, so a misplaced
/// or stale payload fails the checksum of the frame it lands in, and any part can be produced
/// without the rest.
pub fn fill_payload(sequence: u64, offset: u64, out: &mut [u8]) {
    let start = payload_start(sequence);
    let mut index = offset / 8;
    // A leading partial word, then whole words, then a trailing partial word.
    let skip = (offset % 8) as usize;
    let head = out.len().min((8 - skip) % 8);
    let (first, rest) = out.split_at_mut(head);
    if !first.is_empty() {
        first.copy_from_slice(&payload_word(start, index).to_le_bytes()[skip..skip + head]);
        index += 1;
    }
    let whole = rest.len() / 8 * 8;
    let (mut body, tail) = rest.split_at_mut(whole);
    // Whole words a period's remainder at a time, one addition per word within it.
    while !body.is_empty() {
        let left_in_period = PAYLOAD_PERIOD_WORDS - index % PAYLOAD_PERIOD_WORDS;
        let n = (body.len() / 8).min(usize::try_from(left_in_period).unwrap_or(usize::MAX));
        let (words, after) = body.split_at_mut(8 * n);
        let mut word = payload_word(start, index);
        for chunk in words.chunks_exact_mut(8) {
            chunk.copy_from_slice(&word.to_le_bytes());
            word = word.wrapping_add(PAYLOAD_STEP);
        }
        index += n as u64;
        body = after;
    }
    if !tail.is_empty() {
        let n = tail.len();
        tail.copy_from_slice(&payload_word(start, index).to_le_bytes()[..n]);
    }
}

/// CRC-32 of the `len`-byte payload pattern of frame `sequence`: of at most one period of it,
/// generated in bounded chunks, and beyond that from the period's CRC combined with itself.
#[must_use]
pub fn payload_checksum(sequence: u64, len: u32) -> u32 {
    let len = u64::from(len);
    let periods = len / PAYLOAD_PERIOD;
    let rest = len % PAYLOAD_PERIOD;
    // One pass over what the payload holds of the pattern: its first `rest` bytes, then, if it
    // repeats, the whole period.
    let mut crc = Crc32::default();
    let mut prefix = None;
    let mut buf = [0u8; 4096];
    let mut offset = 0u64;
    let end = if periods > 0 { PAYLOAD_PERIOD } else { rest };
    while offset < end {
        // Chunks end at `rest`, where the CRC of the prefix is taken.
        let stop = if offset < rest { rest } else { end };
        let n = (stop - offset).min(buf.len() as u64) as usize;
        fill_payload(sequence, offset, &mut buf[..n]);
        crc.update(&buf[..n]);
        offset += n as u64;
        if offset == rest {
            prefix = Some(crc.clone());
        }
    }
    if periods == 0 {
        return crc.finish();
    }
    // The period `periods` times (by doubling: the parts are all the same bytes, so their
    // order does not matter), then the prefix.
    let mut whole = Crc32::default();
    let mut power = crc;
    let mut left = periods;
    while left > 0 {
        if left & 1 == 1 {
            whole.combine(&power);
        }
        left >>= 1;
        if left > 0 {
            let twice = power.clone();
            power.combine(&twice);
        }
    }
    if let Some(prefix) = prefix {
        whole.combine(&prefix);
    }
    whole.finish()
}

/// Payloads up to this size are generated once, for the checksum, and kept for the reads;
/// larger ones are generated for the checksum and again, a packet's worth at a time, as the
/// transport sends them ([`SourcedBytes`]), so that a large transfer never sits in memory.
const KEEP_PAYLOAD_MAX: u32 = 1 << 20;

/// Where a [`FrameSource`]'s bytes come from.
#[derive(Clone, Debug)]
enum FrameBytes {
    /// The whole frame, header and payload (at most [`KEEP_PAYLOAD_MAX`] bytes of it): a read
    /// of the whole frame hands this buffer over instead of copying it.
    Kept(Vec<u8>),
    /// Produced on demand: a read hands over a range of it, which the transport produces as
    /// it sends it.
    Generated(Arc<GeneratedFrame>),
}

/// A frame whose payload is produced again for every range asked of it: the header, and the
/// frame's sequence number for the payload pattern.
#[derive(Debug)]
struct GeneratedFrame {
    sequence: u64,
    header: [u8; FRAME_HEADER_LEN],
}

impl ByteSource for GeneratedFrame {
    fn fill(&self, offset: u64, out: &mut [u8]) {
        let mut filled = 0;
        if offset < FRAME_HEADER_LEN as u64 {
            let from = offset as usize;
            let take = (FRAME_HEADER_LEN - from).min(out.len());
            out[..take].copy_from_slice(&self.header[from..from + take]);
            filled = take;
        }
        let payload_offset = (offset + filled as u64).saturating_sub(FRAME_HEADER_LEN as u64);
        fill_payload(self.sequence, payload_offset, &mut out[filled..]);
    }
}

/// A frame produced lazily, piece by piece, so a large transfer never sits in memory whole.
#[derive(Clone, Debug)]
pub struct FrameSource {
    payload_len: u32,
    bytes: FrameBytes,
    /// Bytes of the frame (header included) already read.
    offset: u64,
}

impl FrameSource {
    /// `payload_len` is clamped to [`MAX_PAYLOAD`].
    #[must_use]
    pub fn new(kind: FrameKind, sequence: u64, capture: Instant, payload_len: u32) -> Self {
        let payload_len = payload_len.min(MAX_PAYLOAD);
        let header = |checksum| {
            FrameHeader {
                kind,
                sequence,
                capture_us: capture.as_nanos() / 1_000,
                payload_len,
                checksum,
            }
            .encode()
        };
        let bytes = if payload_len <= KEEP_PAYLOAD_MAX {
            let mut frame = vec![0u8; FRAME_HEADER_LEN + payload_len as usize];
            let (head, payload) = frame.split_at_mut(FRAME_HEADER_LEN);
            fill_payload(sequence, 0, payload);
            head.copy_from_slice(&header(crc32(payload)));
            FrameBytes::Kept(frame)
        } else {
            FrameBytes::Generated(Arc::new(GeneratedFrame {
                sequence,
                header: header(payload_checksum(sequence, payload_len)),
            }))
        };
        Self {
            payload_len,
            bytes,
            offset: 0,
        }
    }

    /// Header plus payload length.
    #[must_use]
    pub fn len(&self) -> u64 {
        FRAME_HEADER_LEN as u64 + u64::from(self.payload_len)
    }

    /// Bytes not read yet.
    #[must_use]
    pub fn remaining(&self) -> u64 {
        self.len() - self.offset
    }

    /// Whether every byte has been read.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next at most `max` bytes.
    pub fn read(&mut self, max: usize) -> WriteData {
        let n = usize::try_from(self.remaining())
            .unwrap_or(usize::MAX)
            .min(max);
        if n == 0 {
            return WriteData::Bytes(Bytes::new());
        }
        let from = self.offset;
        self.offset += n as u64;
        match &mut self.bytes {
            // `from + n <= frame.len()`: `n` is at most what remains, and a buffer handed over
            // whole leaves nothing to read.
            FrameBytes::Kept(frame) if from == 0 && n == frame.len() => {
                WriteData::from(std::mem::take(frame))
            }
            FrameBytes::Kept(frame) => {
                let from = from as usize;
                WriteData::from(frame[from..from + n].to_vec())
            }
            FrameBytes::Generated(frame) => {
                let source: Arc<dyn ByteSource> = frame.clone();
                WriteData::Sourced(SourcedBytes::new(source, from, n))
            }
        }
    }
}

/// Incremental CRC-32 (IEEE 802.3 polynomial, reflected, as zlib). Every payload byte is
/// checksummed twice (sender and receiver), so this uses `crc32fast`'s carry-less multiply
/// folding rather than a lookup table.
#[derive(Clone, Debug, Default)]
pub struct Crc32(crc32fast::Hasher);

impl Crc32 {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Continues the checksum with the bytes `next` has seen, as if this had seen them too.
    pub fn combine(&mut self, next: &Self) {
        self.0.combine(&next.0);
    }

    #[must_use]
    pub fn finish(self) -> u32 {
        self.0.finalize()
    }
}

/// CRC-32 of `bytes` (zlib's `crc32`).
#[must_use]
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::default();
    c.update(bytes);
    c.finish()
}

/// A frame fully received and verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivedFrame {
    pub header: FrameHeader,
    /// When its last byte arrived.
    pub completed: Instant,
}

/// Receives applications that send one frame per stream, frame `i` on the peer's stream `i`
/// (the video call and the cloud-gaming sender): one [`FrameParser`] per open stream, dropped
/// at its FIN.
#[derive(Debug, Default)]
pub struct OneFramePerStream {
    parsers: BTreeMap<u64, FrameParser>,
    scratch: Vec<ReceivedFrame>,
}

impl OneFramePerStream {
    /// Feed stream `i`'s next bytes; returns its frame once the frame's last byte arrived. More
    /// than one frame on a stream is a protocol error.
    pub fn push(
        &mut self,
        now: Instant,
        i: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<Option<&ReceivedFrame>, FrameError> {
        let parser = self
            .parsers
            .entry(i)
            .or_insert_with(|| FrameParser::new(Some(i)));
        self.scratch.clear();
        parser.push(now, data, &mut self.scratch)?;
        if fin {
            parser.finish()?;
            self.parsers.remove(&i);
        }
        if self.scratch.len() > 1 {
            return Err(FrameError::Protocol(format!(
                "stream {i}: more than one frame"
            )));
        }
        Ok(self.scratch.first())
    }
}

/// Parses frames out of an in-order byte stream as bytes arrive, checking each payload's
/// checksum and that sequence numbers count up from a given start. Payloads are checksummed on
/// the fly and not kept, so memory stays at one header whatever the frame sizes.
///
/// After the first error the parser is poisoned: the framing is lost, and every later call
/// returns the same error.
#[derive(Clone, Debug)]
pub struct FrameParser {
    header_buf: Vec<u8>,
    current: Option<(FrameHeader, u64, Crc32)>,
    next_sequence: Option<u64>,
    error: Option<FrameError>,
    bytes: u64,
}

impl FrameParser {
    /// `first_sequence`: the sequence number the first frame must carry; `None` accepts any
    /// first number and then requires +1 steps.
    #[must_use]
    pub fn new(first_sequence: Option<u64>) -> Self {
        Self {
            header_buf: Vec::with_capacity(FRAME_HEADER_LEN),
            current: None,
            next_sequence: first_sequence,
            error: None,
            bytes: 0,
        }
    }

    /// Bytes consumed so far.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The first error met, if any.
    #[must_use]
    pub fn error(&self) -> Option<&FrameError> {
        self.error.as_ref()
    }

    /// Whether the stream is between frames (nothing partial buffered).
    #[must_use]
    pub fn at_boundary(&self) -> bool {
        self.header_buf.is_empty() && self.current.is_none()
    }

    /// Feed the next bytes of the stream, received at `now`; completed frames are appended to
    /// `out` in order.
    pub fn push(
        &mut self,
        now: Instant,
        mut data: &[u8],
        out: &mut Vec<ReceivedFrame>,
    ) -> Result<(), FrameError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        while !data.is_empty() {
            if let Some((header, remaining, crc)) = &mut self.current {
                let take = data
                    .len()
                    .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                crc.update(&data[..take]);
                *remaining -= take as u64;
                self.bytes += take as u64;
                data = &data[take..];
                if *remaining == 0 {
                    let header = *header;
                    let computed = crc.clone().finish();
                    self.current = None;
                    if computed != header.checksum {
                        return Err(self.fail(FrameError::Checksum {
                            sequence: header.sequence,
                            expected: header.checksum,
                            computed,
                        }));
                    }
                    out.push(ReceivedFrame {
                        header,
                        completed: now,
                    });
                }
                continue;
            }
            let take = (FRAME_HEADER_LEN - self.header_buf.len()).min(data.len());
            self.header_buf.extend_from_slice(&data[..take]);
            self.bytes += take as u64;
            data = &data[take..];
            if self.header_buf.len() < FRAME_HEADER_LEN {
                break;
            }
            let header = match FrameHeader::decode(&self.header_buf) {
                Ok(h) => h,
                Err(e) => return Err(self.fail(e)),
            };
            self.header_buf.clear();
            if let Some(expected) = self.next_sequence {
                if header.sequence != expected {
                    return Err(self.fail(FrameError::Sequence {
                        expected,
                        found: header.sequence,
                    }));
                }
            }
            self.next_sequence = Some(header.sequence.wrapping_add(1));
            if header.payload_len == 0 {
                // An empty payload's CRC-32 is 0.
                if header.checksum != 0 {
                    return Err(self.fail(FrameError::Checksum {
                        sequence: header.sequence,
                        expected: header.checksum,
                        computed: 0,
                    }));
                }
                out.push(ReceivedFrame {
                    header,
                    completed: now,
                });
            } else {
                self.current = Some((header, u64::from(header.payload_len), Crc32::default()));
            }
        }
        Ok(())
    }

    /// The stream ended (FIN): an error if it ended inside a frame.
    pub fn finish(&mut self) -> Result<(), FrameError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let missing = match (&self.current, self.header_buf.len()) {
            (Some((_, remaining, _)), _) => *remaining,
            (None, 0) => return Ok(()),
            (None, n) => (FRAME_HEADER_LEN - n) as u64,
        };
        Err(self.fail(FrameError::EndedInFrame { missing }))
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.error = Some(e.clone());
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    #[test]
    fn crc32_matches_zlib() {
        // zlib.crc32(b"123456789") == 0xcbf43926 (the CRC-32 check value).
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// The byte-at-a-time definitions the word-at-a-time code must match.
    fn reference_payload(sequence: u64, offset: u64, len: usize) -> Vec<u8> {
        (offset..offset + len as u64)
            .map(|pos| {
                let word = (pos / 8) % ((1 << 17) - 1);
                let value =
                    payload_start(sequence).wrapping_add(word.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                value.to_le_bytes()[(pos % 8) as usize]
            })
            .collect()
    }

    fn reference_crc32(bytes: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        c ^ 0xffff_ffff
    }

    #[test]
    fn word_wise_payload_and_crc_match_the_bytewise_definitions() {
        for sequence in [0u64, 1, 77, u64::MAX] {
            for offset in 0..17u64 {
                for len in [0usize, 1, 3, 7, 8, 9, 15, 16, 17, 100] {
                    let mut out = vec![0u8; len];
                    fill_payload(sequence, offset, &mut out);
                    let want = reference_payload(sequence, offset, len);
                    assert_eq!(out, want, "seq {sequence} offset {offset} len {len}");
                    assert_eq!(crc32(&out), reference_crc32(&want));
                }
            }
            for len in [0u32, 1, 7, 8, 9, 1000, 4097] {
                let payload = reference_payload(sequence, 0, len as usize);
                assert_eq!(
                    payload_checksum(sequence, len),
                    reference_crc32(&payload),
                    "seq {sequence} len {len}"
                );
            }
        }
        // Around the end of the pattern's period, where it starts over.
        for offset in PAYLOAD_PERIOD - 17..PAYLOAD_PERIOD + 3 {
            for len in [1usize, 7, 8, 9, 17, 40] {
                let mut out = vec![0u8; len];
                fill_payload(3, offset, &mut out);
                assert_eq!(
                    out,
                    reference_payload(3, offset, len),
                    "offset {offset} len {len}"
                );
            }
        }
        // Beyond one period the checksum combines the period's with itself: it must still be
        // the CRC of every byte, for a remainder of none, some and all but one byte.
        let period = PAYLOAD_PERIOD as usize;
        for len in [
            period - 1,
            period,
            period + 1,
            2 * period + 4099,
            3 * period,
        ] {
            let payload = reference_payload(11, 0, len);
            let len = u32::try_from(len).expect("small");
            assert_eq!(payload_checksum(11, len), crc32(&payload), "len {len}");
        }
        // Split updates agree with one update, whatever the split.
        let bytes = reference_payload(5, 0, 40);
        for cut in 0..bytes.len() {
            let mut c = Crc32::default();
            c.update(&bytes[..cut]);
            c.update(&bytes[cut..]);
            assert_eq!(c.finish(), crc32(&bytes), "cut {cut}");
        }
    }

    #[test]
    fn payloads_of_different_frames_differ_everywhere() {
        // A payload landing in another frame (or at another offset of its own) must fail the
        // checksum: no two frames, or two offsets, share a word.
        let words = |sequence: u64| {
            let mut out = vec![0u8; 8 * 64];
            fill_payload(sequence, 0, &mut out);
            out.chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
                .collect::<Vec<_>>()
        };
        let mut seen = std::collections::HashSet::new();
        for sequence in 0..200u64 {
            for w in words(sequence) {
                assert!(seen.insert(w), "frame {sequence} repeats word {w:#x}");
            }
        }
        let sums: std::collections::HashSet<u32> =
            (0..1000u64).map(|s| payload_checksum(s, 1200)).collect();
        assert_eq!(sums.len(), 1000);
    }

    #[test]
    fn header_round_trips_and_rejects_bad_input() {
        let h = FrameHeader {
            kind: FrameKind::Key,
            sequence: 7,
            capture_us: 1_234_567,
            payload_len: 1000,
            checksum: 0xdead_beef,
        };
        let bytes = h.encode();
        assert_eq!(&bytes[..4], b"RCPF");
        assert_eq!(FrameHeader::decode(&bytes), Ok(h));
        assert_eq!(
            FrameHeader::decode(&bytes[..31]),
            Err(FrameError::Truncated {
                needed: 32,
                have: 31
            })
        );
        let mut bad = bytes;
        bad[0] = b'X';
        assert!(matches!(
            FrameHeader::decode(&bad),
            Err(FrameError::BadMagic { .. })
        ));
        let mut bad = bytes;
        bad[4] = 2;
        assert_eq!(FrameHeader::decode(&bad), Err(FrameError::BadVersion(2)));
        let mut bad = bytes;
        bad[5] = 9;
        assert_eq!(FrameHeader::decode(&bad), Err(FrameError::BadKind(9)));
        let mut bad = bytes;
        bad[7] = 1;
        assert_eq!(FrameHeader::decode(&bad), Err(FrameError::Reserved(1)));
        let mut bad = bytes;
        bad[24..28].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            FrameHeader::decode(&bad),
            Err(FrameError::TooLong(u32::MAX))
        );
    }

    #[test]
    fn parser_reassembles_frames_split_anywhere() {
        let mut stream = Vec::new();
        for seq in 0..5u64 {
            stream.extend(encode_frame(
                FrameKind::Delta,
                seq,
                ms(seq * 33),
                (seq * 100) as u32,
            ));
        }
        for chunk in [1usize, 7, 31, 32, 33, 1000] {
            let mut p = FrameParser::new(Some(0));
            let mut out = Vec::new();
            for (i, piece) in stream.chunks(chunk).enumerate() {
                p.push(ms(i as u64), piece, &mut out).expect("valid stream");
            }
            p.finish().expect("ends on a boundary");
            let seqs: Vec<u64> = out.iter().map(|f| f.header.sequence).collect();
            assert_eq!(seqs, [0, 1, 2, 3, 4], "chunk {chunk}");
            assert_eq!(out[3].header.capture_us, 99_000);
            assert_eq!(p.bytes(), stream.len() as u64);
        }
    }

    #[test]
    fn kept_and_regenerated_payloads_read_the_same() {
        // Above the size kept in memory, the payload is generated again for each read.
        for len in [KEEP_PAYLOAD_MAX, KEEP_PAYLOAD_MAX + 3] {
            let mut source = FrameSource::new(FrameKind::Key, 9, ms(0), len);
            let mut p = FrameParser::new(Some(9));
            let mut out = Vec::new();
            let mut bytes = Vec::new();
            // Reads of uneven sizes, the first ones inside the header and across its end.
            for max in [7, 13, 1000, 4093].into_iter().cycle() {
                if source.is_empty() {
                    break;
                }
                let piece = source.read(max);
                assert_eq!(
                    matches!(piece, WriteData::Sourced(_)),
                    len > KEEP_PAYLOAD_MAX,
                    "len {len}: only a payload not kept is produced as it is sent"
                );
                let piece = piece.to_vec();
                bytes.extend_from_slice(&piece);
                p.push(ms(1), &piece, &mut out).expect("checksum matches");
            }
            assert_eq!(out.len(), 1, "len {len}");
            assert_eq!(
                bytes[FRAME_HEADER_LEN..],
                reference_payload(9, 0, len as usize)
            );
            assert!(source.read(1000).is_empty(), "nothing after the end");
            // Read whole at once (the kept buffer is handed over), then nothing more.
            let mut whole = FrameSource::new(FrameKind::Key, 9, ms(0), len);
            assert_eq!(whole.read(usize::MAX).to_vec(), bytes, "len {len}");
            assert!(whole.is_empty() && whole.read(usize::MAX).is_empty());
        }
    }

    #[test]
    fn parser_reports_corruption_gaps_and_truncation() {
        let mut stream = encode_frame(FrameKind::Key, 0, ms(0), 500);
        stream[100] ^= 1;
        let mut p = FrameParser::new(Some(0));
        let mut out = Vec::new();
        let e = p.push(ms(1), &stream, &mut out).expect_err("flipped bit");
        assert!(matches!(e, FrameError::Checksum { sequence: 0, .. }), "{e}");
        assert!(out.is_empty());
        // Poisoned: the same error again, even for valid bytes.
        assert_eq!(
            p.push(
                ms(2),
                &encode_frame(FrameKind::Delta, 1, ms(0), 1),
                &mut out
            ),
            Err(e)
        );

        let mut p = FrameParser::new(Some(0));
        let mut skipped = encode_frame(FrameKind::Key, 0, ms(0), 10);
        skipped.extend(encode_frame(FrameKind::Delta, 2, ms(0), 10));
        assert_eq!(
            p.push(ms(1), &skipped, &mut out),
            Err(FrameError::Sequence {
                expected: 1,
                found: 2
            })
        );

        let mut p = FrameParser::new(None);
        let whole = encode_frame(FrameKind::Key, 5, ms(0), 10);
        p.push(ms(1), &whole[..20], &mut out)
            .expect("partial header");
        assert_eq!(p.finish(), Err(FrameError::EndedInFrame { missing: 12 }));
        let mut p = FrameParser::new(None);
        p.push(ms(1), &whole[..35], &mut out)
            .expect("partial payload");
        assert_eq!(p.finish(), Err(FrameError::EndedInFrame { missing: 7 }));
    }
}
