//! Cloud gaming over real sockets (LADR §2, §5): the simulator's gaming sender and viewer
//! (`recoup_apps::gaming`) on a real connection, so LADR's workload runs through `recoup link`
//! against the same code the simulator measures.
//!
//! A session is its own application protocol, ALPN [`ALPN`], since it needs what HTTP does not
//! give: one server-initiated unidirectional stream per video frame (a lost packet delays its
//! frame only) and the transport's per-packet feedback for the bitrate controller.
//!
//! 1. The client opens a bidirectional control stream and sends `GET /gaming?key=value&...`
//!    ([`GamingParams::from_request`] lists the keys) with FIN.
//! 2. The server answers on it with `epoch_unix_ms=<ms>\n` and FIN: the wall-clock time of its
//!    transport clock's zero, in which the frame headers' capture times count. On one host
//!    (loopback, network namespaces) the client turns its own arrival times into that clock
//!    and measures each frame's delay from capture to its last byte.
//! 3. Frames follow, one stream each, for the session's duration; the encoder follows the
//!    controller's target (LADR's delay-based rate, min with LBBC's when `loss_controller=lbbc`).
//! 4. [`GRACE`] after the last frame the server opens a bidirectional stream and writes its
//!    own, sender-side, frame metrics and packet counts on it as `key=value` lines, then FIN;
//!    the client then closes.
//!
//! A refused request gets `error=<why>\n` and FIN instead of the epoch line.

use std::collections::BTreeMap;
use std::time::Duration;

use recoup_apps::conn::{AppConn, Written};
use recoup_apps::gaming::{GamingConfig, GamingOutcome, GamingSender, GamingViewer};
use recoup_apps::lbbc::LbbcConfig;
use recoup_apps::stats;
use recoup_apps::{FrameError, StreamApp, StreamKey};
use recoup_elements::{element_rng, parse_duration, parse_rate};
use recoup_time::Instant;
use recoup_transport::streams::{StreamEvent, StreamId};
use recoup_transport::{Connection, ConnectionStats, Event, Side};

use crate::error::Error;
use crate::hq::{self, RequestBuffer};
use crate::stream_io;

/// The ALPN token of a cloud-gaming session (private to recoup).
pub const ALPN: &[u8] = b"recoup-gaming";
/// The request path of a session.
pub const PATH: &str = "/gaming";
/// How long after the last frame the server waits for its frames to be acknowledged before it
/// reports: frames not complete by then are over any deadline LADR counts.
pub const GRACE: Duration = Duration::from_secs(1);
/// Longest session a request may ask for.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Most control-stream bytes a client accepts (the report is a few hundred).
const MAX_CONTROL: usize = 64 * 1024;

/// What a session sends, from the request's query over [`GamingParams::default`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GamingParams {
    pub config: GamingConfig,
    pub duration: Duration,
    /// Seed of the frame-size noise; `None` draws a fresh one per session.
    pub seed: Option<u64>,
}

impl Default for GamingParams {
    /// The simulator's gaming defaults (60 fps from 10 Mbit/s, 1-30 Mbit/s, 100 ms deadline,
    /// delay-based control only) for 20 s.
    fn default() -> Self {
        Self {
            config: GamingConfig::default(),
            duration: Duration::from_secs(20),
            seed: None,
        }
    }
}

impl GamingParams {
    /// Parses `/gaming?key=value&...`. Keys: `duration`, `bitrate` (the start rate),
    /// `min_bitrate`, `max_bitrate`, `fps`, `gop`, `deadline`, `utilization`, `loss_controller`
    /// (`none` or `lbbc`), `pending_limit` (`true` or `false`), `seed`. Unknown or repeated
    /// keys and bad values are errors naming the key.
    pub fn from_request(path: &str) -> Result<Self, Error> {
        let rest = path.split('#').next().unwrap_or_default();
        let (route, query) = rest.split_once('?').unwrap_or((rest, ""));
        if route != PATH {
            return Err(Error::BadRequest(format!(
                "{route:?}: a gaming session is requested as {PATH}?key=value&..."
            )));
        }
        let mut params = Self::default();
        hq::parse_query(query, |key, value| params.set(key, value))?;
        params.validate()?;
        Ok(params)
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let whole = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| "expected a whole number".to_string())
        };
        let c = &mut self.config;
        match key {
            "duration" => self.duration = parse_duration(value)?,
            "bitrate" => c.encoder.bitrate = parse_rate(value)?,
            "min_bitrate" => c.min_bitrate = parse_rate(value)?,
            "max_bitrate" => c.max_bitrate = parse_rate(value)?,
            "fps" => c.encoder.fps = whole(value)?,
            "gop" => c.encoder.gop = whole(value)?,
            "deadline" => c.deadline = parse_duration(value)?,
            "utilization" => {
                c.utilization = value.parse().map_err(|_| "expected a number".to_string())?;
            }
            "loss_controller" => {
                c.lbbc = match value {
                    "none" => None,
                    "lbbc" => Some(LbbcConfig::default()),
                    _ => return Err("expected `none` or `lbbc`".into()),
                }
            }
            "pending_limit" => {
                c.pending_limit = value
                    .parse()
                    .map_err(|_| "expected `true` or `false`".to_string())?;
            }
            "seed" => {
                self.seed = Some(value.parse().map_err(|_| "expected a whole number")?);
            }
            _ => {
                return Err(
                    "unknown key (duration, bitrate, min_bitrate, max_bitrate, fps, gop, \
                     deadline, utilization, loss_controller, pending_limit, seed)"
                        .into(),
                )
            }
        }
        Ok(())
    }

    /// Checks the limits; the error names the key.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, why: &str| Err(Error::BadRequest(format!("{key}: {why}")));
        let c = &self.config;
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return bad("duration", "must be > 0 and at most 3600s");
        }
        if !(1..=crate::live::MAX_FPS).contains(&c.encoder.fps) {
            return bad("fps", "must be between 1 and 1000");
        }
        if c.encoder.gop == 0 {
            return bad("gop", "must be at least 1");
        }
        if c.max_bitrate > crate::live::MAX_BITRATE {
            return bad("max_bitrate", "must be at most 1 Gbit/s");
        }
        if c.deadline.is_zero() {
            return bad("deadline", "must be > 0");
        }
        c.validate()
            .map_err(|(key, why)| Error::BadRequest(format!("{key}: {why}")))
    }
}

/// Bytes for one stream the server writes and then finishes.
#[derive(Debug, Default)]
struct Outgoing {
    id: Option<StreamId>,
    buf: Vec<u8>,
    /// Finish the stream once `buf` is taken.
    fin: bool,
    finished: bool,
}

impl Outgoing {
    fn push_line(&mut self, line: &str) {
        self.buf.extend_from_slice(line.as_bytes());
        self.buf.push(b'\n');
    }

    /// Moves bytes into the stream as far as it takes them; finishes it when asked and done.
    fn flush(&mut self, conn: &mut Connection) {
        let Some(id) = self.id.filter(|_| !self.finished) else {
            return;
        };
        while !self.buf.is_empty() {
            match stream_io::write(conn, id, &self.buf) {
                Ok(0) => return,
                Ok(n) => {
                    self.buf.drain(..n);
                }
                Err(_) => {
                    // The client stopped the stream; nothing more goes on it.
                    self.buf.clear();
                    self.finished = true;
                    return;
                }
            }
        }
        if self.fin {
            conn.stream_finish(id).ok();
            self.finished = true;
        }
    }
}

/// The server's side of one session.
///
/// The control stream's reply (the epoch line, or a refusal) ends with FIN at once, and the
/// report goes on a stream of its own opened at the end: LADR's FEC gate resolves streams in
/// order as frames (`recoup_recovery::fec_schemes::ladr`), so a stream left open for the whole
/// session would hold every frame behind it unresolved and keep FEC off.
#[derive(Debug)]
pub struct ServeSession {
    /// The wall clock at the server's transport clock zero, ms since the Unix epoch.
    epoch_unix_ms: f64,
    /// Seed for a session whose request names none.
    seed: u64,
    request: Option<RequestBuffer>,
    control: Outgoing,
    sender: Option<(Box<GamingSender>, AppConn)>,
    /// When the report is due: [`GRACE`] after the last frame was written.
    report_at: Option<Instant>,
    report: Outgoing,
    /// Refused, abandoned or reported: nothing left to do but flush.
    done: bool,
}

impl ServeSession {
    #[must_use]
    pub fn new(epoch_unix_ms: f64, seed: u64) -> Self {
        Self {
            epoch_unix_ms,
            seed,
            request: None,
            control: Outgoing::default(),
            sender: None,
            report_at: None,
            report: Outgoing::default(),
            done: false,
        }
    }

    /// When the session next has something to do: the next frame, or the report.
    #[must_use]
    pub fn next_wakeup(&self) -> Option<Instant> {
        if self.done {
            return None;
        }
        let frame = self.sender.as_ref().and_then(|(s, _)| s.next_wakeup());
        frame.or(self.report_at)
    }

    /// One turn: events, the request, frames, the report. A close is returned for the log.
    pub fn drive(
        &mut self,
        now: Instant,
        conn: &mut Connection,
    ) -> Option<recoup_transport::CloseReason> {
        let mut closed = None;
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Closed(reason) => closed = Some(reason),
                Event::Stream(StreamEvent::Reset { id, .. } | StreamEvent::Stopped { id, .. })
                    if self.control.id == Some(id) && !self.done =>
                {
                    tracing::info!(remote = %conn.remote_address(), "gaming session abandoned by the client");
                    self.sender = None;
                    self.done = true;
                }
                _ => {}
            }
        }
        while let Some(id) = conn.accept_stream(true) {
            if self.control.id.is_none() {
                self.control.id = Some(id);
                self.request = Some(RequestBuffer::default());
            } else {
                conn.stream_stop(id, hq::REFUSED_CODE).ok();
            }
        }
        while let Some(id) = conn.accept_stream(false) {
            conn.stream_stop(id, hq::REFUSED_CODE).ok();
        }
        if self.request.is_some() {
            self.read_request(now, conn);
        }
        if let Some((sender, io)) = self.sender.as_mut() {
            io.feedback(now, conn, sender.as_mut());
            match io.write(conn, now, sender.as_mut()) {
                Ok(Written::Idle) if sender.next_wakeup().is_none() => {
                    self.report_at.get_or_insert(now + GRACE);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(remote = %conn.remote_address(), "gaming session: {e}");
                    self.sender = None;
                    self.done = true;
                    conn.close(now, hq::REFUSED_CODE, "gaming session failed");
                }
            }
        }
        if self.report_at.is_some_and(|t| now >= t) && !self.done {
            self.send_report(now, conn);
        }
        self.control.flush(conn);
        self.report.flush(conn);
        closed
    }

    fn read_request(&mut self, now: Instant, conn: &mut Connection) {
        let (Some(id), Some(request)) = (self.control.id, self.request.as_mut()) else {
            return;
        };
        let Some(outcome) = request.read(conn, id) else {
            return;
        };
        let outcome = outcome.and_then(|path| GamingParams::from_request(&path));
        self.request = None;
        self.control.fin = true;
        match outcome {
            Err(e) => {
                tracing::info!(remote = %conn.remote_address(), "gaming request refused: {e}");
                self.control
                    .push_line(&format!("error={}", e.to_string().replace('\n', " ")));
                self.done = true;
            }
            Ok(params) => {
                tracing::info!(remote = %conn.remote_address(), ?params, "gaming session");
                let rng = element_rng(params.seed.unwrap_or(self.seed), "app/gaming");
                let sender = GamingSender::new(&params.config, now, params.duration, rng);
                conn.set_record_packets(true);
                self.control
                    .push_line(&format!("epoch_unix_ms={:.3}", self.epoch_unix_ms));
                self.sender = Some((Box::new(sender), AppConn::new(Side::Server, false)));
            }
        }
    }

    /// The sender's metrics, on a bidirectional stream of the server's (frames are on
    /// unidirectional ones).
    fn send_report(&mut self, now: Instant, conn: &mut Connection) {
        // This turn's feedback reached the sender in `drive` already.
        let Some((mut sender, _)) = self.sender.take() else {
            return;
        };
        self.done = true;
        sender.finish(now);
        let stats = conn.stats();
        let report = sender
            .outcome()
            .map(|o| report_lines(&o, &stats))
            .unwrap_or_default();
        match conn.open_stream(true) {
            Ok(id) => {
                tracing::info!(remote = %conn.remote_address(), "gaming session done");
                self.report = Outgoing {
                    id: Some(id),
                    buf: report.into_bytes(),
                    fin: true,
                    finished: false,
                };
            }
            Err(e) => {
                tracing::warn!(remote = %conn.remote_address(), "no stream for the gaming report: {e}");
                conn.close(now, hq::REFUSED_CODE, "no stream for the report");
            }
        }
    }
}

/// The sender's frame metrics and packet counts as `key=value` lines (keys as in runs.csv where
/// both have them).
fn report_lines(o: &GamingOutcome, stats: &ConnectionStats) -> String {
    let mut lines = vec![
        ("packets_sent", stats.packets_sent.to_string()),
        ("packets_lost", stats.packets_lost.to_string()),
        ("repair_packets", stats.repair_packets_sent.to_string()),
        (
            "rate_limited_packets",
            stats.rate_limited_packets.to_string(),
        ),
        ("frames", o.frames.to_string()),
        ("frames_skipped", o.frames_skipped.to_string()),
        ("lossy_frames", o.lossy_frames.to_string()),
        ("loss_affected_frames", o.loss_affected_frames.to_string()),
        ("frames_over_deadline", o.frames_over_deadline.to_string()),
        ("lbbc_signals", o.lbbc_signals.to_string()),
    ];
    let opt = |v: Option<f64>| v.map_or_else(|| "nan".to_string(), |v| format!("{v:.3}"));
    let delays = Summary::of(&o.delays_ms);
    lines.extend([
        ("frame_delay_mean_ms", opt(delays.mean)),
        ("frame_delay_p90_ms", opt(delays.p90)),
        ("propagation_ms", opt(o.propagation_ms)),
        ("queuing_ms", opt(o.queuing_ms)),
        ("recovery_ms", opt(o.recovery_ms)),
        ("mean_bitrate_mbps", opt(o.mean_bitrate_mbps)),
    ]);
    lines.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

/// Mean, 90th percentile and maximum of a sample, as runs.csv summarises
/// (`recoup_apps::stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub mean: Option<f64>,
    pub p90: Option<f64>,
    pub max: Option<f64>,
}

impl Summary {
    #[must_use]
    pub fn of(values: &[f64]) -> Self {
        let v = stats::sorted(values.to_vec());
        Self {
            mean: stats::mean(&v),
            p90: stats::percentile(&v, 0.9),
            max: v.last().copied(),
        }
    }
}

/// The viewer behind a clock translation: the client's arrival times turned into the server's
/// clock once its epoch is known, arrivals before that held with their times.
#[derive(Debug)]
pub struct ShiftedViewer {
    viewer: GamingViewer,
    /// Server clock = client clock + this, in nanoseconds.
    offset_ns: Option<i128>,
    held: Vec<(Instant, StreamKey, Vec<u8>, bool)>,
}

impl ShiftedViewer {
    #[must_use]
    pub fn new(config: &GamingConfig) -> Self {
        Self {
            viewer: GamingViewer::new(config),
            offset_ns: None,
            held: Vec::new(),
        }
    }

    /// The server's clock epoch and ours, both in ms since the Unix epoch: from now on arrival
    /// times are counted on the server's clock; held arrivals are handed over.
    pub fn set_epochs(
        &mut self,
        server_unix_ms: f64,
        client_unix_ms: f64,
    ) -> Result<(), FrameError> {
        self.offset_ns = Some(((client_unix_ms - server_unix_ms) * 1e6).round() as i128);
        let mut first = Ok(());
        for (at, key, data, fin) in std::mem::take(&mut self.held) {
            let r = self.deliver(at, key, &data, fin);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    fn deliver(
        &mut self,
        at: Instant,
        key: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let offset = self.offset_ns.unwrap_or_default();
        let shifted = (i128::from(at.as_nanos()) + offset).clamp(0, i128::from(u64::MAX)) as u64;
        self.viewer
            .on_stream_bytes(Instant::from_nanos(shifted), key, data, fin)
    }

    /// Whether [`ShiftedViewer::set_epochs`] was called.
    #[must_use]
    pub fn has_epochs(&self) -> bool {
        self.offset_ns.is_some()
    }

    #[must_use]
    pub fn viewer(&self) -> &GamingViewer {
        &self.viewer
    }
}

impl StreamApp for ShiftedViewer {
    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        if self.offset_ns.is_none() {
            self.held.push((now, stream, data.to_vec(), fin));
            return Ok(());
        }
        self.deliver(now, stream, data, fin)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn finish(&mut self, now: Instant) {
        self.viewer.finish(now);
    }
}

/// The control stream as the client reads it: the epoch line, then the report or a refusal.
#[derive(Debug, Default)]
pub struct ControlReader {
    buf: Vec<u8>,
    /// Lines parsed so far.
    pub lines: BTreeMap<String, String>,
    pub finished: bool,
}

impl ControlReader {
    /// Appends control bytes; complete lines become `key=value` entries.
    pub fn push(&mut self, data: &[u8], fin: bool) -> Result<(), Error> {
        if self.buf.len() + data.len() > MAX_CONTROL {
            return Err(Error::Connection(format!(
                "the server's control stream passed {MAX_CONTROL} bytes"
            )));
        }
        self.buf.extend_from_slice(data);
        while let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..end]).trim().to_string();
            let (k, v) = line.split_once('=').ok_or_else(|| {
                Error::Connection(format!("the server sent {line:?}, not key=value"))
            })?;
            self.lines.insert(k.to_string(), v.to_string());
        }
        self.finished |= fin;
        Ok(())
    }

    /// Reads what stream `id` has into the lines, up to its end.
    pub fn read(&mut self, conn: &mut Connection, id: StreamId) -> Result<(), Error> {
        let mut buf = [0u8; 4096];
        while let Ok((n, fin)) = conn.stream_read(id, &mut buf) {
            self.push(&buf[..n], fin)?;
            if fin || n == 0 {
                break;
            }
        }
        Ok(())
    }

    /// The server's clock epoch, once sent.
    pub fn epoch(&self) -> Result<Option<f64>, Error> {
        self.lines
            .get("epoch_unix_ms")
            .map(|v| {
                v.parse().map_err(|_| {
                    Error::Connection(format!("the server's epoch_unix_ms {v:?} is not a number"))
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(path: &str) -> String {
        match GamingParams::from_request(path) {
            Err(Error::BadRequest(why)) => why,
            other => panic!("{path}: expected a bad request, got {other:?}"),
        }
    }

    #[test]
    fn query_sets_the_session() {
        assert_eq!(
            GamingParams::from_request("/gaming").expect("defaults"),
            GamingParams::default()
        );
        let p = GamingParams::from_request(
            "/gaming?duration=5s&bitrate=4Mbps&min_bitrate=2Mbps&max_bitrate=8Mbps&fps=30&gop=60\
             &deadline=150ms&utilization=0.8&loss_controller=lbbc&pending_limit=true&seed=3",
        )
        .expect("all keys");
        assert_eq!(p.duration, Duration::from_secs(5));
        let c = p.config;
        assert_eq!(
            (c.encoder.bitrate, c.min_bitrate, c.max_bitrate),
            (4_000_000, 2_000_000, 8_000_000)
        );
        assert_eq!((c.encoder.fps, c.encoder.gop), (30, 60));
        assert_eq!(
            (c.deadline, c.utilization),
            (Duration::from_millis(150), 0.8)
        );
        assert_eq!(c.lbbc, Some(LbbcConfig::default()));
        assert!(c.pending_limit);
        assert_eq!(p.seed, Some(3));
    }

    #[test]
    fn bad_queries_name_the_key() {
        assert!(bad("/live/x").contains("/gaming?"));
        assert!(bad("/gaming?colour=red").contains("unknown key"));
        assert!(bad("/gaming?fps=0").starts_with("fps:"));
        assert!(bad("/gaming?fps=sixty").starts_with("fps=\"sixty\""));
        assert!(bad("/gaming?bitrate=50Mbps").starts_with("bitrate:"));
        assert!(bad("/gaming?min_bitrate=40Mbps").starts_with("min_bitrate:"));
        assert!(bad("/gaming?duration=0s").starts_with("duration:"));
        assert!(bad("/gaming?utilization=1.5").starts_with("utilization:"));
        assert!(bad("/gaming?loss_controller=pudica").starts_with("loss_controller="));
        assert!(bad("/gaming?pending_limit=yes").starts_with("pending_limit="));
        assert!(bad("/gaming?fps=30&fps=60").contains("given twice"));
        assert!(bad("/gaming?fps").contains("no `=`"));
    }

    #[test]
    fn control_lines_parse_and_bad_ones_are_named() {
        let mut c = ControlReader::default();
        c.push(b"epoch_unix_ms=17000", false).expect("partial");
        assert_eq!(c.epoch().expect("none yet"), None);
        c.push(b"00.5\nframes=3\n", true).expect("lines");
        assert_eq!(c.epoch().expect("epoch"), Some(1_700_000.5));
        assert_eq!(c.lines.get("frames").map(String::as_str), Some("3"));
        assert!(c.finished);
        let mut c = ControlReader::default();
        let e = c.push(b"garbage\n", false).expect_err("not key=value");
        assert!(e.to_string().contains("garbage"), "{e}");
    }

    #[test]
    fn summary_has_mean_p90_and_max() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = Summary::of(&v);
        // numpy's default interpolation, as runs.csv's p90 columns.
        assert_eq!(s.mean, Some(5.5));
        assert!(s.p90.is_some_and(|p| (p - 9.1).abs() < 1e-9), "{s:?}");
        assert_eq!(s.max, Some(10.0));
        assert_eq!(Summary::of(&[]), Summary::default());
    }
}
