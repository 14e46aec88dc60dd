//! Applications (DESIGN.md "Simulator" → Applications): transport-neutral state machines that a
//! driver connects to a QUIC connection (or to anything that carries ordered byte streams). They
//! take `now` and never read a clock, so the simulator runs them on virtual time and `recoup
//! serve` runs the live encoder on the real clock; this crate is their one home, outside both.
//!
//! - [`live`]: an encoder writing frames into one long-lived stream (HTTP-FLV), and a player
//!   with start-up buffer, playback at the frame clock, freezes and rebuffering.
//! - [`transfer`]: file transfers and RPC request/response pairs, flow completion times.
//! - [`rtc`]: frames with a playback deadline, one stream per frame.
//! - [`vod`]: video on demand with adaptive bitrate: segments of a bitrate ladder, the basic
//!   rate-based ABR, a playback buffer with rebuffering.
//! - [`moq`]: Media over QUIC: tracks of groups of objects, each group on its own stream,
//!   reset when an object of it misses its delivery deadline.
//! - [`gaming`]: cloud gaming, frames at a bitrate that follows a bitrate controller ([`lbbc`]),
//!   with LADR's frame metrics from per-packet feedback ([`StreamApp::on_feedback`]).
//!
//! Every byte the applications send is framed ([`frame`]): receivers verify checksums and
//! sequence numbers and report corruption as errors, never silently.
//!
//! # How a driver calls an application
//!
//! Each endpoint (server, client) runs one [`StreamApp`]. At every instant `now` the driver
//! handles the endpoint:
//! 1. it hands every stream byte the transport delivered, in stream order, to
//!    [`StreamApp::on_stream_bytes`] (an `Err` means the run is invalid: report it);
//! 2. it calls [`StreamApp::poll_write`] with how many bytes the transport takes now, and writes
//!    each answer, until `None` (poll again when the transport has room again);
//! 3. it arms a timer for [`StreamApp::next_wakeup`] (besides the transport's own) and handles the
//!    endpoint again then.
//!
//! At the end of the run it calls [`StreamApp::finish`] and reads the outcome.
//!
//! Streams are named per endpoint by [`StreamKey`]: `Local(i)` is the i-th stream this endpoint
//! opened, `Peer(i)` the i-th stream the peer opened (with QUIC bidirectional streams, a client's
//! `Local(i)` is stream id `4i`, a server's `4i + 1`). An application writes to `Local(i)`
//! streams in increasing `i`: the first write to one opens it.

// DESIGN.md principle 1: time is injected; clippy.toml bans the clock reads, and this makes
// the ban an error even without `-D warnings`.
#![deny(clippy::disallowed_methods)]

pub mod conn;
pub mod frame;
pub mod gaming;
pub mod lbbc;
pub mod live;
pub mod moq;
pub mod rtc;
pub mod source;
pub mod stats;
pub mod transfer;
pub mod vod;

use std::time::Duration;

use bytes::Bytes;
use recoup_time::Instant;
use recoup_transport::streams::SourcedBytes;

pub use frame::FrameError;

/// A stream as one endpoint sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StreamKey {
    /// The i-th stream this endpoint opened (0-based).
    Local(u64),
    /// The i-th stream the peer opened (0-based).
    Peer(u64),
}

/// Bytes to append to a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub stream: StreamKey,
    pub data: WriteData,
    /// These are the stream's last bytes (`data` may be empty).
    pub fin: bool,
}

/// The bytes of a [`Write`]: in memory, or (a large generated payload) produced by a source
/// each time the transport sends them, so they never sit in memory.
#[derive(Clone, Debug)]
pub enum WriteData {
    Bytes(Bytes),
    Sourced(SourcedBytes),
}

impl WriteData {
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::Bytes(b) => b.len(),
            Self::Sourced(s) => s.len(),
        }
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the bytes to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        match self {
            Self::Bytes(b) => out.extend_from_slice(b),
            Self::Sourced(s) => s.append_to(out),
        }
    }

    /// The bytes in memory.
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.append_to(&mut out);
        out
    }
}

impl From<Vec<u8>> for WriteData {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Bytes(Bytes::from(bytes))
    }
}

/// Equal when the bytes are, however they are held.
impl PartialEq for WriteData {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Bytes(a), Self::Bytes(b)) => a == b,
            _ => self.len() == other.len() && self.to_vec() == other.to_vec(),
        }
    }
}

impl Eq for WriteData {}

/// What the transport reports of one packet carrying this endpoint's streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PacketFeedback {
    /// Sent at `at`; `resend`: it re-sent lost data; stream bytes it carried per stream.
    Sent {
        pn: u64,
        at: Instant,
        bytes: usize,
        resend: bool,
        streams: Vec<(StreamKey, u64)>,
    },
    Acked {
        pn: u64,
        at: Instant,
    },
    Lost {
        pn: u64,
        at: Instant,
    },
}

/// The transport's rates at the moment of a feedback call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathFeedback {
    /// What pacing sends at now, bytes per second (congestion control and the recovery
    /// policy's limit).
    pub pacing_rate: Option<u64>,
    /// The delay-based congestion controller's rate, bits per second (its window over the
    /// smoothed RTT).
    pub delay_rate: Option<u64>,
}

/// One side of an application (a live source, a player, a file sender ...), in terms of the bytes
/// of its streams only, so the simulator and the real-socket driver run the same code. See the
/// module documentation for the call order.
pub trait StreamApp {
    /// Packet feedback since the last call and the path's rates, for an application that adapts
    /// its sending (a drivers calls it before [`StreamApp::poll_write`] when it has feedback). By
    /// default ignored.
    fn on_feedback(&mut self, _now: Instant, _packets: &[PacketFeedback], _path: PathFeedback) {}

    /// Whether [`StreamApp::on_feedback`] does anything: drivers ask before every write, and an
    /// application that ignores it spares them working out the path's rates. By default not.
    fn wants_feedback(&self) -> bool {
        false
    }

    /// The next bytes to write, at most `max` of them; `None` when there is nothing to write
    /// now. `max == 0` always gives `None`. By default nothing: a receiver only reads.
    fn poll_write(&mut self, _now: Instant, _max: usize) -> Option<Write> {
        None
    }

    /// Bytes of `stream` arrived, continuing where the last call for that stream stopped;
    /// `fin`: the stream ends after `data`. An error means the data is not what was sent. By
    /// default every stream is an error: a sender expects none.
    fn on_stream_bytes(
        &mut self,
        _now: Instant,
        stream: StreamKey,
        _data: &[u8],
        _fin: bool,
    ) -> Result<(), FrameError> {
        Err(unexpected(stream))
    }

    /// A stream this side gives up on now: the driver resets it (RESET_STREAM, RFC 9000 §3.1),
    /// after which the transport sends none of its data again, and the application writes no
    /// more to it. `acked(stream)` is how many of the stream's first bytes the peer has
    /// acknowledged in order (`u64::MAX` once all of them and the end are, 0 before the stream
    /// exists). Asked before every write, until `None`. By default none: a MoQ publisher
    /// ([`moq`]) resets a group whose delivery deadline passed.
    fn poll_reset(
        &mut self,
        _now: Instant,
        _acked: &dyn Fn(StreamKey) -> u64,
    ) -> Option<StreamKey> {
        None
    }

    /// When the data of a stream this side writes is due at the peer (a video frame's playout
    /// deadline), for dual-side FEC schemes that size repair by the time left. By default none.
    fn stream_deadline(&self, _stream: StreamKey) -> Option<Instant> {
        None
    }

    /// When the application next has something to do on its own (the frame clock, a think
    /// time), if ever.
    fn next_wakeup(&self) -> Option<Instant>;

    /// The run ends at `now`: close open accounting (a freeze in progress, frames past their
    /// deadline).
    fn finish(&mut self, now: Instant);
}

/// Receivers remember the first error (the outcome reports it) and still return every one.
fn keep_first_error(
    slot: &mut Option<FrameError>,
    r: Result<(), FrameError>,
) -> Result<(), FrameError> {
    if let Err(e) = &r {
        slot.get_or_insert_with(|| e.clone());
    }
    r
}

/// `n` events of a clock at `per_second` starting at `start`, exactly (no accumulated rounding).
fn clock_tick(start: Instant, per_second: u32, n: u64) -> Instant {
    let nanos = recoup_time::mul_div(n, 1_000_000_000, u64::from(per_second.max(1)));
    start + Duration::from_nanos(nanos)
}

/// Whole frames in `d` at `fps`, rounded up, at least one.
fn frames_in(d: Duration, fps: u32) -> usize {
    let n = (d.as_nanos() * u128::from(fps)).div_ceil(1_000_000_000);
    usize::try_from(n).unwrap_or(usize::MAX).max(1)
}

/// Writes the frames queued in `active`, front first, one stream each; the last bytes of each
/// carry FIN.
fn write_front(
    active: &mut std::collections::VecDeque<(StreamKey, frame::FrameSource)>,
    max: usize,
) -> Option<Write> {
    if max == 0 {
        return None;
    }
    let (stream, source) = active.front_mut()?;
    let stream = *stream;
    let data = source.read(max);
    let fin = source.is_empty();
    if fin {
        active.pop_front();
    }
    Some(Write { stream, data, fin })
}

/// Rejects data on a stream an endpoint never expects any on.
fn unexpected(stream: StreamKey) -> FrameError {
    FrameError::Protocol(format!("unexpected data on stream {stream:?}"))
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    pub fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// Moves every write of `from` at `now` into `to`, delivered at `arrive` (an ideal pipe);
    /// returns the bytes moved.
    pub fn pipe(
        from: &mut dyn StreamApp,
        to: &mut dyn StreamApp,
        now: Instant,
        arrive: Instant,
    ) -> u64 {
        let mut moved = 0;
        while let Some(w) = from.poll_write(now, 1500) {
            moved += w.data.len() as u64;
            let stream = match w.stream {
                StreamKey::Local(i) => StreamKey::Peer(i),
                StreamKey::Peer(i) => StreamKey::Local(i),
            };
            to.on_stream_bytes(arrive, stream, &w.data.to_vec(), w.fin)
                .expect("valid data");
        }
        moved
    }
}
