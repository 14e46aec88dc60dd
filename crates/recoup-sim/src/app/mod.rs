//! Applications on virtual time (DESIGN.md "Simulator" → Applications): transport-neutral state
//! machines that a driver connects to a QUIC connection (or to anything that carries ordered
//! byte streams).
//!
//! - [`live`]: an encoder writing frames into one long-lived stream (HTTP-FLV), and a player
//!   with start-up buffer, playback at the frame clock, freezes and rebuffering.
//! - [`transfer`]: file transfers and RPC request/response pairs, flow completion times.
//! - [`rtc`]: frames with a playback deadline, one stream per frame.
//!
//! Every byte the applications send is framed ([`frame`]): receivers verify checksums and
//! sequence numbers and report corruption as errors, never silently.
//!
//! # How a driver calls an application
//!
//! Each endpoint (server, client) runs one [`App`]. At every instant `now` the driver handles
//! the endpoint:
//! 1. it hands every stream byte the transport delivered, in stream order, to
//!    [`App::on_stream_bytes`] (an `Err` means the run is invalid: report it);
//! 2. it calls [`App::poll_write`] with how many bytes the transport takes now, and writes each
//!    answer, until `None` (poll again when the transport has room again);
//! 3. it arms a timer for [`App::next_wakeup`] (besides the transport's own) and handles the
//!    endpoint again then.
//!
//! At the end of the run it calls [`App::finish`] and reads the outcome.
//!
//! Streams are named per endpoint by [`StreamKey`]: `Local(i)` is the i-th stream this endpoint
//! opened, `Peer(i)` the i-th stream the peer opened (with QUIC bidirectional streams, a client's
//! `Local(i)` is stream id `4i`, a server's `4i + 1`). An application writes to `Local(i)`
//! streams in increasing `i`: the first write to one opens it.

pub mod frame;
pub mod live;
pub mod rtc;
pub mod source;
pub mod transfer;

use std::time::Duration;

use recoup_time::Instant;

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
    pub data: Vec<u8>,
    /// These are the stream's last bytes (`data` may be empty).
    pub fin: bool,
}

/// An application endpoint. See the module documentation for the call order.
pub trait App {
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
    let nanos = u128::from(n) * 1_000_000_000 / u128::from(per_second.max(1));
    start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Whole frames in `d` at `fps`, rounded up, at least one.
fn frames_in(d: Duration, fps: u32) -> usize {
    let n = (d.as_nanos() * u128::from(fps)).div_ceil(1_000_000_000);
    usize::try_from(n).unwrap_or(usize::MAX).max(1)
}

/// Which application a scenario runs, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum AppSpec {
    Live(live::LiveConfig),
    File(transfer::FileConfig),
    Rpc(transfer::RpcConfig),
    Rtc(rtc::RtcConfig),
}

impl AppSpec {
    /// The kind name used in scenario files.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Live(_) => "live",
            Self::File(_) => "file",
            Self::Rpc(_) => "rpc",
            Self::Rtc(_) => "rtc",
        }
    }

    /// Both endpoints of a run that starts at `start`, lasts `duration` and has scenario seed
    /// `seed` (frame-size noise draws from `element_rng(seed, "app/<kind>")`).
    #[must_use]
    pub fn build(&self, start: Instant, duration: Duration, seed: u64) -> AppPair {
        let rng = crate::rng::element_rng(seed, &format!("app/{}", self.kind()));
        match self {
            Self::Live(c) => AppPair {
                server: AppEndpoint::LiveSource(live::LiveSource::new(c, start, duration, rng)),
                client: AppEndpoint::LivePlayer(live::LivePlayer::new(c, start)),
            },
            Self::File(c) => AppPair {
                server: AppEndpoint::FileSender(transfer::FileSender::new(c, start)),
                client: AppEndpoint::FileReceiver(transfer::FileReceiver::new(c)),
            },
            Self::Rpc(c) => AppPair {
                server: AppEndpoint::RpcServer(transfer::RpcServer::new(c)),
                client: AppEndpoint::RpcClient(transfer::RpcClient::new(c, start)),
            },
            Self::Rtc(c) => AppPair {
                server: AppEndpoint::RtcSender(rtc::RtcSender::new(c, start, duration, rng)),
                client: AppEndpoint::RtcReceiver(rtc::RtcReceiver::new(c, start, duration)),
            },
        }
    }
}

/// The two endpoints of one run.
#[derive(Debug)]
pub struct AppPair {
    pub server: AppEndpoint,
    pub client: AppEndpoint,
}

/// Any built-in application endpoint (enum dispatch).
#[derive(Debug)]
pub enum AppEndpoint {
    LiveSource(live::LiveSource),
    LivePlayer(live::LivePlayer),
    FileSender(transfer::FileSender),
    FileReceiver(transfer::FileReceiver),
    RpcServer(transfer::RpcServer),
    RpcClient(transfer::RpcClient),
    RtcSender(rtc::RtcSender),
    RtcReceiver(rtc::RtcReceiver),
}

/// What the receiving side of a run measured.
#[derive(Clone, Debug, PartialEq)]
pub enum AppOutcome {
    Live(live::LiveOutcome),
    /// File and RPC.
    Transfer(transfer::TransferOutcome),
    Rtc(rtc::RtcOutcome),
}

impl AppEndpoint {
    /// The measured outcome, on the receiving endpoint (player, file receiver, RPC client, RTC
    /// receiver); `None` on the sending one.
    #[must_use]
    pub fn outcome(&self) -> Option<AppOutcome> {
        match self {
            Self::LivePlayer(p) => Some(AppOutcome::Live(p.outcome())),
            Self::FileReceiver(r) => Some(AppOutcome::Transfer(r.outcome())),
            Self::RpcClient(c) => Some(AppOutcome::Transfer(c.outcome())),
            Self::RtcReceiver(r) => Some(AppOutcome::Rtc(r.outcome())),
            _ => None,
        }
    }

    fn app(&mut self) -> &mut dyn App {
        match self {
            Self::LiveSource(a) => a,
            Self::LivePlayer(a) => a,
            Self::FileSender(a) => a,
            Self::FileReceiver(a) => a,
            Self::RpcServer(a) => a,
            Self::RpcClient(a) => a,
            Self::RtcSender(a) => a,
            Self::RtcReceiver(a) => a,
        }
    }

    fn app_ref(&self) -> &dyn App {
        match self {
            Self::LiveSource(a) => a,
            Self::LivePlayer(a) => a,
            Self::FileSender(a) => a,
            Self::FileReceiver(a) => a,
            Self::RpcServer(a) => a,
            Self::RpcClient(a) => a,
            Self::RtcSender(a) => a,
            Self::RtcReceiver(a) => a,
        }
    }
}

impl App for AppEndpoint {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        self.app().poll_write(now, max)
    }

    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        self.app().on_stream_bytes(now, stream, data, fin)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.app_ref().next_wakeup()
    }

    fn finish(&mut self, now: Instant) {
        self.app().finish(now);
    }
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
    pub fn pipe(from: &mut dyn App, to: &mut dyn App, now: Instant, arrive: Instant) -> u64 {
        let mut moved = 0;
        while let Some(w) = from.poll_write(now, 1500) {
            moved += w.data.len() as u64;
            let stream = match w.stream {
                StreamKey::Local(i) => StreamKey::Peer(i),
                StreamKey::Peer(i) => StreamKey::Local(i),
            };
            to.on_stream_bytes(arrive, stream, &w.data, w.fin)
                .expect("valid data");
        }
        moved
    }
}
