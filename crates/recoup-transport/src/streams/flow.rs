//! Flow-control accounting (RFC 9000 §4) and the stream-related control frames that carry it.

use std::collections::{BTreeMap, BTreeSet};

use super::StreamId;

/// A stream-related control frame the streams layer wants sent. The connection encodes it, and
/// later reports it acknowledged or lost with the same value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlFrame {
    /// MAX_DATA (RFC 9000 §19.9).
    MaxData(u64),
    /// MAX_STREAM_DATA (§19.10).
    MaxStreamData { id: StreamId, max: u64 },
    /// MAX_STREAMS (§19.11).
    MaxStreams { bidi: bool, max: u64 },
    /// DATA_BLOCKED (§19.12).
    DataBlocked(u64),
    /// STREAM_DATA_BLOCKED (§19.13).
    StreamDataBlocked { id: StreamId, limit: u64 },
    /// STREAMS_BLOCKED (§19.14).
    StreamsBlocked { bidi: bool, limit: u64 },
    /// RESET_STREAM (§19.4).
    ResetStream {
        id: StreamId,
        code: u64,
        final_size: u64,
    },
    /// STOP_SENDING (§19.5).
    StopSending { id: StreamId, code: u64 },
}

impl ControlFrame {
    /// The frame type (RFC 9000 §19).
    #[must_use]
    pub fn frame_type(&self) -> u64 {
        match self {
            Self::ResetStream { .. } => 0x04,
            Self::StopSending { .. } => 0x05,
            Self::MaxData(_) => 0x10,
            Self::MaxStreamData { .. } => 0x11,
            Self::MaxStreams { bidi: true, .. } => 0x12,
            Self::MaxStreams { bidi: false, .. } => 0x13,
            Self::DataBlocked(_) => 0x14,
            Self::StreamDataBlocked { .. } => 0x15,
            Self::StreamsBlocked { bidi: true, .. } => 0x16,
            Self::StreamsBlocked { bidi: false, .. } => 0x17,
        }
    }

    /// Encoded size in bytes: the type and each field as a variable-length integer (§16, §19).
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        let fields = match *self {
            Self::MaxData(v) | Self::DataBlocked(v) => varint_len(v),
            Self::MaxStreams { max: v, .. } | Self::StreamsBlocked { limit: v, .. } => {
                varint_len(v)
            }
            Self::MaxStreamData { id, max: v } | Self::StreamDataBlocked { id, limit: v } => {
                varint_len(id.0) + varint_len(v)
            }
            Self::StopSending { id, code } => varint_len(id.0) + varint_len(code),
            Self::ResetStream {
                id,
                code,
                final_size,
            } => varint_len(id.0) + varint_len(code) + varint_len(final_size),
        };
        varint_len(self.frame_type()) + fields
    }
}

/// RFC 9000 §16: 1, 2, 4 or 8 bytes.
fn varint_len(v: u64) -> usize {
    match v {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Credit the peer granted us (connection or stream), and the limit for which we already
/// announced being blocked, so each limit value yields at most one *_BLOCKED frame (§4.1).
#[derive(Clone, Debug, Default)]
pub(crate) struct SendCredit {
    pub(crate) max: u64,
    pub(crate) used: u64,
    blocked_at: Option<u64>,
}

impl SendCredit {
    pub(crate) fn new(max: u64) -> Self {
        Self {
            max,
            used: 0,
            blocked_at: None,
        }
    }

    #[must_use]
    pub(crate) fn available(&self) -> u64 {
        self.max.saturating_sub(self.used)
    }

    /// Limits only grow (§4.1: a sender ignores a MAX_* that does not increase the limit).
    pub(crate) fn raise(&mut self, max: u64) -> bool {
        if max > self.max {
            self.max = max;
            true
        } else {
            false
        }
    }

    /// The limit to report in a *_BLOCKED frame, once per limit value.
    #[must_use]
    pub(crate) fn note_blocked(&mut self) -> Option<u64> {
        if self.blocked_at == Some(self.max) {
            None
        } else {
            self.blocked_at = Some(self.max);
            Some(self.max)
        }
    }

    /// Whether a *_BLOCKED frame for `limit` is still news to the peer.
    #[must_use]
    pub(crate) fn still_blocked_at(&self, limit: u64) -> bool {
        self.max == limit && self.available() == 0
    }
}

/// Credit we grant the peer: a window of `window` bytes kept ahead of what the application has
/// consumed. Advertised anew once half the window has been consumed, so a steady reader never
/// stalls the sender and updates cost one frame per half window.
#[derive(Clone, Debug)]
pub(crate) struct RecvWindow {
    window: u64,
    /// The limit advertised so far.
    pub(crate) max: u64,
}

impl RecvWindow {
    pub(crate) fn new(window: u64) -> Self {
        Self {
            window,
            max: window,
        }
    }

    /// Whether the peer has at most half a window of credit left.
    #[must_use]
    pub(crate) fn wants_update(&self, consumed: u64) -> bool {
        let target = consumed.saturating_add(self.window);
        target > self.max && self.max - consumed.min(self.max) <= self.window / 2
    }

    /// Whether any increase is possible (asked when the peer says it is blocked).
    #[must_use]
    pub(crate) fn can_grow(&self, consumed: u64) -> bool {
        consumed.saturating_add(self.window) > self.max
    }

    /// Advertises `consumed + window`; `None` if that would not raise the limit.
    pub(crate) fn update(&mut self, consumed: u64) -> Option<u64> {
        let target = consumed.saturating_add(self.window);
        (target > self.max).then(|| {
            self.max = target;
            target
        })
    }
}

/// What control frames are owed. Values are filled in when polled, so a frame always carries the
/// newest limit and a lost frame is re-sent only while its value is still current.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pending {
    pub(crate) reset_stream: BTreeSet<StreamId>,
    pub(crate) stop_sending: BTreeSet<StreamId>,
    pub(crate) max_data: bool,
    pub(crate) max_streams: [bool; 2],
    pub(crate) max_stream_data: BTreeSet<StreamId>,
    pub(crate) data_blocked: Option<u64>,
    pub(crate) streams_blocked: [Option<u64>; 2],
    pub(crate) stream_data_blocked: BTreeMap<StreamId, u64>,
}

impl Pending {
    #[must_use]
    pub(crate) fn is_empty(&self) -> bool {
        self.reset_stream.is_empty()
            && self.stop_sending.is_empty()
            && !self.max_data
            && self.max_streams == [false; 2]
            && self.max_stream_data.is_empty()
            && self.data_blocked.is_none()
            && self.streams_blocked == [None; 2]
            && self.stream_data_blocked.is_empty()
    }

    /// A stream is gone: nothing about it is owed any more.
    pub(crate) fn forget(&mut self, id: StreamId) {
        self.reset_stream.remove(&id);
        self.stop_sending.remove(&id);
        self.max_stream_data.remove(&id);
        self.stream_data_blocked.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_lengths_follow_varint_sizes() {
        assert_eq!(ControlFrame::MaxData(63).encoded_len(), 2);
        assert_eq!(ControlFrame::MaxData(64).encoded_len(), 3);
        assert_eq!(ControlFrame::MaxData(1 << 30).encoded_len(), 9);
        let f = ControlFrame::ResetStream {
            id: StreamId(4),
            code: 0x100,
            final_size: 70_000,
        };
        assert_eq!(f.encoded_len(), 1 + 1 + 2 + 4);
        assert_eq!(f.frame_type(), 0x04);
        assert_eq!(
            ControlFrame::StreamsBlocked {
                bidi: false,
                limit: 3
            }
            .frame_type(),
            0x17
        );
    }

    #[test]
    fn blocked_is_reported_once_per_limit() {
        let mut c = SendCredit::new(10);
        c.used = 10;
        assert_eq!(c.note_blocked(), Some(10));
        assert_eq!(c.note_blocked(), None);
        assert!(c.still_blocked_at(10));
        assert!(c.raise(20));
        assert!(!c.raise(15));
        assert!(!c.still_blocked_at(10));
        c.used = 20;
        assert_eq!(c.note_blocked(), Some(20));
    }

    #[test]
    fn window_updates_after_half_is_consumed() {
        let mut w = RecvWindow::new(100);
        assert!(!w.wants_update(0));
        assert!(!w.wants_update(49));
        assert!(w.wants_update(50));
        assert_eq!(w.update(50), Some(150));
        assert!(!w.wants_update(50));
        assert_eq!(w.update(50), None);
        assert!(w.can_grow(51));
        assert!(!RecvWindow::new(0).wants_update(0));
    }
}
