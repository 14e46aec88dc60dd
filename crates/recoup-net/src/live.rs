//! Live streams for `recoup serve`: `GET /live/<name>?bitrate=4Mbps&fps=30&gop=30&duration=20s`
//! is answered with the simulator's live encoder ([`LiveSource`] of `recoup-apps`: GOP structure,
//! key frames larger than delta frames, frame-size noise, framed with sequence numbers, capture
//! times and checksums) run on the real clock. Frames leave when they are captured, so the gaps between
//! them are real: the sender goes idle (AutoRec's off-mode) as it would behind a live encoder.
//!
//! The stream ends with FIN after `duration`. Frames wait in a backlog while the stream's flow
//! control credit is used up, so the event loop never blocks. A client or path slower than the
//! bit rate makes the bytes waiting grow; they are logged as they double, and the stream is
//! reset when the backlog passes [`MAX_BACKLOG`].

use std::time::Duration;

use recoup_apps::live::{LiveConfig, LiveSource};
use recoup_apps::source::EncoderConfig;
use recoup_apps::StreamApp;
use recoup_elements::{element_rng, parse_duration, parse_rate};
use recoup_time::Instant;
use recoup_transport::streams::StreamId;
use recoup_transport::Connection;

use crate::error::Error;
use crate::hq::percent_decode;
use crate::metrics::Metrics;
use crate::stream_io;

/// Request paths under this prefix are live streams.
pub const LIVE_PREFIX: &str = "/live/";
/// Longest stream a request may ask for.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Highest frame rate accepted.
pub const MAX_FPS: u32 = 1000;
/// Highest bit rate accepted (1 Gbit/s).
pub const MAX_BITRATE: u64 = 1_000_000_000;
/// Unsent bytes a stream may pile up before the server gives up on a too slow client.
pub const MAX_BACKLOG: usize = 64 * 1024 * 1024;
/// Backlog below which nothing is logged, whatever the bit rate.
const MIN_BACKLOG_LOG: usize = 64 * 1024;

/// What a live stream sends; `recoup serve`'s flags set the defaults, a request's query
/// overrides them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveParams {
    pub encoder: EncoderConfig,
    pub duration: Duration,
    /// Seed of the frame-size noise; `None` draws a fresh one per stream.
    pub seed: Option<u64>,
}

impl Default for LiveParams {
    /// The simulator's default live stream (4 Mbit/s, 30 fps, GOP 30, key frames 5 times
    /// larger, ±10 % noise) for 20 s.
    fn default() -> Self {
        Self {
            encoder: LiveConfig::default().encoder,
            duration: Duration::from_secs(20),
            seed: None,
        }
    }
}

/// Whether a request path asks for a live stream.
#[must_use]
pub fn is_live(path: &str) -> bool {
    path.starts_with(LIVE_PREFIX)
}

impl LiveParams {
    /// Checks the limits; the error names the parameter.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, why: String| Err(Error::BadRequest(format!("{key}: {why}")));
        let e = &self.encoder;
        if !(1..=MAX_BITRATE).contains(&e.bitrate) {
            return bad("bitrate", format!("must be at most {MAX_BITRATE} bps"));
        }
        if !(1..=MAX_FPS).contains(&e.fps) {
            return bad("fps", format!("must be between 1 and {MAX_FPS}"));
        }
        if !(e.key_ratio.is_finite() && e.key_ratio > 0.0) {
            return bad("key_ratio", "must be > 0".into());
        }
        if !(0.0..1.0).contains(&e.size_noise) {
            return bad("size_noise", "must be in [0, 1)".into());
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return bad(
                "duration",
                format!("must be > 0 and at most {}s", MAX_DURATION.as_secs()),
            );
        }
        Ok(())
    }

    /// The stream name and parameters of a request for `/live/<name>?key=value&...`, starting
    /// from these defaults. Keys: `bitrate` (`4Mbps`), `fps`, `gop`, `duration` (`20s`),
    /// `key_ratio`, `size_noise`, `seed`. Unknown or repeated keys and bad values are errors
    /// naming the key.
    pub fn from_request(&self, path: &str) -> Result<(String, LiveParams), Error> {
        let rest = path
            .strip_prefix(LIVE_PREFIX)
            .ok_or_else(|| Error::BadRequest(format!("{path:?} is not under {LIVE_PREFIX}")))?;
        let rest = rest.split('#').next().unwrap_or_default();
        let (name, query) = rest.split_once('?').unwrap_or((rest, ""));
        let name = percent_decode(name)?;
        if name.is_empty() || name.contains('/') {
            return Err(Error::BadRequest(format!(
                "live stream name {name:?} must be one non-empty path segment"
            )));
        }
        let mut params = *self;
        crate::hq::parse_query(query, |key, value| params.set(key, value))?;
        params.validate()?;
        Ok((name, params))
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let number = |what: &str| format!("expected {what}");
        match key {
            "bitrate" => self.encoder.bitrate = parse_rate(value)?,
            "fps" => self.encoder.fps = value.parse().map_err(|_| number("a whole number"))?,
            "gop" => self.encoder.gop = value.parse().map_err(|_| number("a whole number"))?,
            "duration" => self.duration = parse_duration(value)?,
            "key_ratio" => {
                self.encoder.key_ratio = value.parse().map_err(|_| number("a number"))?
            }
            "size_noise" => {
                self.encoder.size_noise = value.parse().map_err(|_| number("a number"))?;
            }
            "seed" => self.seed = Some(value.parse().map_err(|_| number("a whole number"))?),
            _ => {
                return Err(
                    "unknown key (bitrate, fps, gop, duration, key_ratio, size_noise, seed)".into(),
                )
            }
        }
        Ok(())
    }
}

/// One live stream being written to a QUIC stream.
#[derive(Debug)]
pub struct LiveStream {
    source: LiveSource,
    /// Encoded bytes the stream has not taken yet, from `sent` on.
    backlog: Vec<u8>,
    sent: usize,
    /// The source has produced its last bytes.
    fin: bool,
    /// Bytes waiting that are logged next (doubling), and one second of video in bytes.
    warn_at: usize,
    second: usize,
    max_waiting: usize,
    written: u64,
    /// A captured frame still waits for the stream: a stall at the sender began and has not
    /// ended (the backlog has not emptied since).
    stalled: bool,
    /// Where stalls and the stream's life are counted (`recoup serve --metrics`).
    metrics: Option<Metrics>,
    /// [`LiveStream::end`] was called.
    ended: bool,
}

impl Drop for LiveStream {
    fn drop(&mut self) {
        if let Some(m) = &self.metrics {
            m.live_streams_open.dec();
        }
    }
}

impl LiveStream {
    /// A stream whose first frame is captured at `start`; `seed` is used when the parameters
    /// name none.
    #[must_use]
    pub fn new(params: &LiveParams, start: Instant, seed: u64) -> Self {
        let config = LiveConfig {
            encoder: params.encoder,
            ..LiveConfig::default()
        };
        let rng = element_rng(params.seed.unwrap_or(seed), "app/live");
        let second = usize::try_from(params.encoder.bitrate / 8).unwrap_or(usize::MAX);
        let warn_at = second.max(MIN_BACKLOG_LOG);
        Self {
            source: LiveSource::new(&config, start, params.duration, rng),
            backlog: Vec::new(),
            sent: 0,
            fin: false,
            warn_at,
            second,
            max_waiting: 0,
            written: 0,
            stalled: false,
            metrics: None,
            ended: false,
        }
    }

    /// Counts this stream, while it lasts, and its stalls in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Option<&Metrics>) -> Self {
        if let Some(m) = metrics {
            m.live_streams.inc();
            m.live_streams_open.inc();
        }
        self.metrics = metrics.cloned();
        self
    }

    /// When the next frame is captured, until the last one is.
    #[must_use]
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.source.next_wakeup()
    }

    /// Frames captured so far.
    #[must_use]
    pub fn frames(&self) -> u64 {
        self.source.frames_captured()
    }

    /// Bytes the stream has taken so far.
    #[must_use]
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Most bytes seen waiting: encoded and not yet acknowledged by the client.
    #[must_use]
    pub fn max_waiting(&self) -> usize {
        self.max_waiting
    }

    /// Captures the frames due by `now`, then moves the backlog into stream `id` until flow
    /// control or the send buffer pushes back; `true` once the FIN is queued.
    pub fn pump(
        &mut self,
        conn: &mut Connection,
        id: StreamId,
        now: Instant,
    ) -> Result<bool, Error> {
        let waiting_before = self.backlog.len() - self.sent;
        if self.capture(now) > 0 && waiting_before > 0 {
            self.stall();
        }
        while self.sent < self.backlog.len() {
            let n = stream_io::write(conn, id, &self.backlog[self.sent..])?;
            if n == 0 {
                break;
            }
            self.sent += n;
            self.written += n as u64;
        }
        // Drop what the stream took once it is the larger part, so copying stays amortized.
        if self.sent * 2 >= self.backlog.len() {
            self.backlog.drain(..self.sent);
            self.sent = 0;
        }
        let backlog = self.backlog.len() - self.sent;
        if backlog == 0 {
            self.stalled = false;
        }
        if backlog > MAX_BACKLOG {
            return Err(Error::TooSlow(format!(
                "{backlog} bytes of live video waiting, more than {MAX_BACKLOG}"
            )));
        }
        // The transport holds what flow control let in until it is acknowledged: a path slower
        // than the bit rate shows there before the client's credit runs out and here after.
        self.track_waiting(id, backlog + conn.stream_buffered(id).0);
        if self.backlog.is_empty() && self.fin {
            conn.stream_finish(id)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Captures the frames due by `now` for a sink that queues them itself (an HTTP/3 response
    /// body on stream `id`): their bytes, and whether the stream ends after them. A sink blocked
    /// for long gets everything captured meanwhile at once, logged as bytes waiting when it
    /// passes a second of video; more than [`MAX_BACKLOG`] of it is an error.
    pub fn take_due(&mut self, now: Instant, id: StreamId) -> Result<(Vec<u8>, bool), Error> {
        // Two frames at once: the sink was still busy with the first when the second was
        // captured.
        if self.capture(now) > 1 {
            self.stall();
        } else {
            self.stalled = false;
        }
        let due = std::mem::take(&mut self.backlog);
        self.sent = 0;
        if due.len() > MAX_BACKLOG {
            return Err(Error::TooSlow(format!(
                "{} bytes of live video waiting, more than {MAX_BACKLOG}",
                due.len()
            )));
        }
        self.written += due.len() as u64;
        self.track_waiting(id, due.len());
        Ok((due, self.fin))
    }

    /// Ends the stream at a frame boundary (a server draining): no frame is captured from now
    /// on, the frames captured go out whole, then FIN.
    pub fn end(&mut self) {
        self.ended = true;
        self.fin = true;
    }

    /// Captures the frames due by `now`; returns how many.
    fn capture(&mut self, now: Instant) -> u64 {
        if self.ended {
            return 0;
        }
        let before = self.source.frames_captured();
        while let Some(w) = self.source.poll_write(now, usize::MAX) {
            w.data.append_to(&mut self.backlog);
            self.fin |= w.fin;
        }
        self.source.frames_captured() - before
    }

    /// A captured frame waited for the stream past the next capture: counted once per episode.
    fn stall(&mut self) {
        if !self.stalled {
            self.stalled = true;
            if let Some(m) = &self.metrics {
                m.live_stalls.inc();
            }
        }
    }

    /// Logs the bytes waiting (not yet acknowledged) each time they double past one second of
    /// video, and when they drain.
    fn track_waiting(&mut self, id: StreamId, waiting: usize) {
        self.max_waiting = self.max_waiting.max(waiting);
        let floor = self.second.max(MIN_BACKLOG_LOG);
        if waiting >= self.warn_at {
            let seconds = waiting as f64 / self.second.max(1) as f64;
            tracing::warn!(
                stream = id.0,
                waiting,
                "live stream falling behind: {seconds:.1} s of video not yet acknowledged"
            );
            self.warn_at = self.warn_at.saturating_mul(2);
        } else if waiting * 2 < self.second && self.warn_at > floor {
            tracing::info!(stream = id.0, waiting, "live stream caught up");
            self.warn_at = floor;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(path: &str) -> Result<(String, LiveParams), Error> {
        LiveParams::default().from_request(path)
    }

    fn bad(path: &str) -> String {
        match parse(path) {
            Err(Error::BadRequest(why)) => why,
            other => panic!("{path}: expected a bad request, got {other:?}"),
        }
    }

    /// A drain ends a live stream at a frame boundary: after `end`, the bytes taken are whole
    /// frames (each header's payload length accounts for every byte), FIN comes with them, and
    /// nothing more is captured.
    #[test]
    fn an_ended_stream_stops_at_a_frame_boundary() {
        let params = LiveParams::default();
        let start = Instant::ZERO;
        let mut live = LiveStream::new(&params, start, 1);
        let id = StreamId(0);
        let mut bytes = Vec::new();
        // Half a second of frames, taken in pieces as a sink would.
        for ms in (0..500).step_by(7) {
            let (due, fin) = live
                .take_due(start + Duration::from_millis(ms), id)
                .expect("due");
            assert!(!fin);
            bytes.extend(due);
        }
        live.end();
        let (due, fin) = live
            .take_due(start + Duration::from_secs(1), id)
            .expect("due");
        assert!(fin, "FIN comes with the last whole frame");
        bytes.extend(due);
        let (more, fin) = live
            .take_due(start + Duration::from_secs(2), id)
            .expect("due");
        assert!(more.is_empty() && fin, "nothing is captured after the end");
        let mut at = 0;
        let mut frames = 0;
        while at < bytes.len() {
            let header = recoup_apps::frame::FrameHeader::decode(&bytes[at..]).expect("a header");
            at += recoup_apps::frame::FRAME_HEADER_LEN + header.payload_len as usize;
            frames += 1;
        }
        assert_eq!(at, bytes.len(), "the stream ends inside a frame");
        assert_eq!(
            frames,
            live.frames(),
            "every captured frame was taken whole"
        );
    }

    #[test]
    fn query_overrides_the_defaults() {
        let (name, p) = parse("/live/cam1").expect("defaults");
        assert_eq!((name.as_str(), p), ("cam1", LiveParams::default()));
        let (name, p) = parse(
            "/live/my%20cam?bitrate=2.5Mbps&fps=25&gop=50&duration=5s&key_ratio=3&size_noise=0&seed=7&",
        )
        .expect("all keys");
        assert_eq!(name, "my cam");
        assert_eq!(p.encoder.bitrate, 2_500_000);
        assert_eq!((p.encoder.fps, p.encoder.gop), (25, 50));
        assert_eq!(p.duration, Duration::from_secs(5));
        assert_eq!((p.encoder.key_ratio, p.encoder.size_noise), (3.0, 0.0));
        assert_eq!(p.seed, Some(7));
        // Flags give other defaults; the query still wins.
        let flags = LiveParams {
            duration: Duration::from_secs(3),
            ..LiveParams::default()
        };
        let (_, p) = flags.from_request("/live/x?fps=60").expect("flags");
        assert_eq!((p.duration, p.encoder.fps), (Duration::from_secs(3), 60));
    }

    #[test]
    fn bad_queries_name_what_is_wrong() {
        assert!(bad("/live/x?bitrate=fast").starts_with("bitrate=\"fast\""));
        assert!(bad("/live/x?bitrate=4").contains("missing unit"));
        assert!(bad("/live/x?bitrate=2Gbps").starts_with("bitrate:"));
        assert!(bad("/live/x?fps=0").starts_with("fps:"));
        assert!(bad("/live/x?fps=-1").starts_with("fps=\"-1\""));
        assert!(bad("/live/x?gop=1.5").starts_with("gop="));
        assert!(bad("/live/x?duration=0s").starts_with("duration:"));
        assert!(bad("/live/x?duration=2h").contains("unknown duration unit"));
        assert!(bad("/live/x?duration=7200s").starts_with("duration:"));
        assert!(bad("/live/x?size_noise=1").starts_with("size_noise:"));
        assert!(bad("/live/x?key_ratio=nan").starts_with("key_ratio:"));
        assert!(bad("/live/x?colour=red").contains("unknown key"));
        assert!(bad("/live/x?fps=30&fps=60").contains("given twice"));
        assert!(bad("/live/x?fps").contains("no `=`"));
        assert!(bad("/live/x?fps=%zz").contains("percent escape"));
        assert!(bad("/live/?fps=30").contains("name"));
        assert!(bad("/live/a/b").contains("name"));
        assert!(bad("/video").contains("not under"));
    }

    #[test]
    fn live_paths_are_recognized() {
        assert!(is_live("/live/x"));
        assert!(!is_live("/lively.bin"));
        assert!(!is_live("/x/live/y"));
    }
}
