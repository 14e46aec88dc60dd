//! `recoup analyze`: DESIGN.md's metrics from the qlog trace of a QUIC sender.
//!
//! The trace is replayed as a host of the very lineage code the transport drives
//! ([`recoup_recovery::lineage`], DESIGN.md "The transport <-> policy contract"), and every
//! recovered range becomes a [`Recovered`] record that [`run_row`] turns into the result columns,
//! exactly as it does for a simulated run. So the lineage rules exist once, in the recovery crate,
//! and the formulas once, in [`crate::metrics`]. What stays here is what a trace, unlike the
//! transport, has to rebuild: which bytes were sent and acknowledged, and which packets are
//! outstanding.
//!
//! What the trace gives:
//! - `packet_sent` with its STREAM frames (`stream_id`, `offset`, `length`, `fin`): data sent
//!   beyond the highest offset sent so far on that stream is new; the rest re-sends data.
//! - `packet_received` with ACK frames (`acked_ranges`): a sent packet still outstanding when an
//!   ACK names it was received. As in the transport (RFC 9002), an ACK of a packet already
//!   declared lost acknowledges nothing: such a copy does not count as arrived.
//! - `packet_lost`: a packet declared lost. Losing a first transmission opens a lineage per
//!   still-unacknowledged piece of its data; losing the newest send of a lineage starts its next
//!   round (AutoRec §V-B: only the newest copy is checked for loss).
//!
//! A re-send is a retransmission when its lineage waits for one (after a loss of its newest
//! send), else a copy. recoup's own traces say so explicitly (`"recoup": {"kind": ..}`), and
//! that is used when present; for other stacks (aioquic) the lineage infers it
//! ([`Lineages::on_resent`]).
//!
//! Stacks that split a retransmission over several packets (aioquic frames lost ranges by the
//! room left in a packet) are handled: every packet carrying bytes not yet re-sent in the round
//! counts as (part of) the round's retransmission, and so does the re-send of a part whose packet
//! was lost but was not the newest (the lineage's round only ends with its newest send, as in
//! the transport, so that loss starts no round). One limit follows: K (`k_max`) counts those
//! packets.
//!
//! Formats: qlog 0.3 as JSON text sequences (RFC 7464, `.sqlog`: recoup's, and other stacks'
//! that log frames) and as one JSON document with `traces` (`.qlog`: aioquic's `QuicLogger`).
//! quinn-proto 0.11's optional qlog logs packet headers without frames; such a trace is refused
//! ([`Error::NoFrames`]), since no lineage can be rebuilt from it. Event names are matched on
//! their part after the category (`transport:packet_sent` and `quic:packet_sent` alike).
//!
//! Off-mode (AutoRec §III-B): the sender has no new data to send. From a trace it is measured as
//! a gap longer than a threshold between consecutive packets that carry new stream data;
//! retransmissions and copies inside the gap do not end it (they are what AutoRec sends in
//! off-mode). Default threshold [`DEFAULT_OFF_GAP`].

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use recoup_recovery::{DataRange, Lineages, LossId, LossTrigger, RangeSet, Recovered, SendKind};
use recoup_time::Instant;
use serde_json::Value;

use crate::metrics::{run_row, RunCounters, RunRow};
use crate::Error;

/// Default off-mode threshold: a gap of 5 ms between packets with new data. Pacing spaces
/// full-size packets by less than that at any rate above 2.4 Mbit/s, while a 30 fps encoder's
/// inter-frame idle time (AutoRec measures 23 ms per off period on average) is well above it.
pub const DEFAULT_OFF_GAP: Duration = Duration::from_millis(5);

/// Which software wrote the trace, as far as the header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// recoup-transport (JSON-SEQ, title `recoup ...`).
    Recoup,
    /// aioquic's `QuicLogger` (JSON, vantage point named `aioquic`).
    Aioquic,
    /// Another qlog 0.3 JSON text sequence.
    JsonSeq,
    /// Another qlog JSON document.
    Json,
}

impl Format {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recoup => "recoup",
            Self::Aioquic => "aioquic",
            Self::JsonSeq => "qlog-json-seq",
            Self::Json => "qlog-json",
        }
    }
}

/// Packet number spaces (RFC 9000 §12.3); 0-RTT and 1-RTT share the application space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Space {
    Initial,
    Handshake,
    App,
}

impl Space {
    fn index(self) -> usize {
        match self {
            Self::Initial => 0,
            Self::Handshake => 1,
            Self::App => 2,
        }
    }
}

#[derive(Clone, Debug)]
struct StreamFrame {
    stream: u64,
    start: u64,
    end: u64,
    fin: bool,
}

#[derive(Clone, Debug)]
enum EventKind {
    Sent {
        space: Space,
        pn: u64,
        frames: Vec<StreamFrame>,
        kind: Option<SendKind>,
    },
    /// ACK ranges (inclusive, in the order the frame lists them) of one packet number space.
    Acked {
        space: Space,
        ranges: Vec<(u64, u64)>,
    },
    Lost {
        space: Space,
        pn: u64,
    },
}

#[derive(Clone, Debug)]
struct Event {
    time: Instant,
    kind: EventKind,
}

/// A parsed trace: the events `analyze` uses, in file order.
#[derive(Clone, Debug)]
pub struct Trace {
    pub format: Format,
    /// `vantage_point.type` (`server`, `client`), if given.
    pub vantage: Option<String>,
    events: Vec<Event>,
}

/// Off-mode of the sender (AutoRec §III-B), measured as gaps between new-data packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OffMode {
    pub threshold: Duration,
    /// Gaps longer than the threshold.
    pub entries: u64,
    /// Their total length.
    pub total: Duration,
    /// From the first to the last packet with new data.
    pub span: Duration,
}

impl OffMode {
    /// Time in off-mode per second of sending, in ms (AutoRec: 464 ms/s on average).
    #[must_use]
    pub fn ms_per_s(&self) -> Option<f64> {
        let s = self.span.as_secs_f64();
        (s > 0.0).then(|| self.total.as_secs_f64() * 1e3 / s)
    }

    /// Off-mode entries per second of sending (AutoRec: 20 on average).
    #[must_use]
    pub fn entries_per_s(&self) -> Option<f64> {
        let s = self.span.as_secs_f64();
        (s > 0.0).then(|| self.entries as f64 / s)
    }
}

/// The result for one trace.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub format: Format,
    pub vantage: Option<String>,
    /// The result columns. Those a sender's trace cannot give are `None`: goodput (it is what
    /// the receiving application got) and the application columns.
    pub row: RunRow,
    pub off_mode: OffMode,
    /// The per-range records the row was computed from.
    pub recovered: Vec<Recovered>,
}

/// Reads and analyzes one qlog file. `label` fills the row's `policy` column.
pub fn analyze_file(path: &Path, label: &str, off_gap: Duration) -> Result<Analysis, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        file: path.to_owned(),
        source,
    })?;
    let trace = parse_trace(&text, path)?;
    analyze(&trace, path, label, off_gap)
}

/// Computes the metrics of a sender's trace. A client-side trace is refused
/// ([`Error::Receiver`]); `file` names the trace in errors.
pub fn analyze(
    trace: &Trace,
    file: &Path,
    label: &str,
    off_gap: Duration,
) -> Result<Analysis, Error> {
    if let Some(v) = trace.vantage.as_deref().filter(|v| *v == "client") {
        return Err(Error::Receiver {
            file: file.to_owned(),
            vantage: v.to_owned(),
        });
    }
    let mut replay = Replay::new();
    for e in &trace.events {
        replay.event(e);
    }
    if replay.app_sent > 0 && replay.stream_sent == 0 {
        return Err(Error::NoFrames {
            file: file.to_owned(),
            sent: replay.app_sent,
        });
    }
    let first = trace.events.first().map_or(Instant::ZERO, |e| e.time);
    let last = trace.events.last().map_or(Instant::ZERO, |e| e.time);
    let counters = RunCounters {
        duration: last.saturating_duration_since(first),
        ..replay.counters
    };
    let recovered: Vec<Recovered> = replay.lineages.drain_recovered().collect();
    let mut row = run_row(label, 0, &recovered, &counters, None);
    row.goodput_mbps = None;
    let off_mode = off_mode(&replay.new_data_sends, off_gap);
    Ok(Analysis {
        format: trace.format,
        vantage: trace.vantage.clone(),
        row,
        off_mode,
        recovered,
    })
}

fn off_mode(sends: &[Instant], threshold: Duration) -> OffMode {
    let mut entries = 0;
    let mut total = Duration::ZERO;
    for w in sends.windows(2) {
        let gap = w[1].saturating_duration_since(w[0]);
        if gap > threshold {
            entries += 1;
            total += gap;
        }
    }
    let span = match (sends.first(), sends.last()) {
        (Some(a), Some(b)) => b.saturating_duration_since(*a),
        _ => Duration::ZERO,
    };
    OffMode {
        threshold,
        entries,
        total,
        span,
    }
}

// ----- parsing -----

/// Parses qlog text: a JSON text sequence (records separated by 0x1E) or one JSON document.
pub fn parse_trace(text: &str, file: &Path) -> Result<Trace, Error> {
    let body = text.trim_start();
    let malformed = |at: String, detail: String| Error::Malformed {
        file: file.to_owned(),
        at,
        detail,
    };
    if body.starts_with('\u{1e}') {
        parse_json_seq(text, file)
    } else if body.starts_with('{') {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| malformed(format!("line {}", e.line()), e.to_string()))?;
        parse_json_doc(&doc, file)
    } else if body.is_empty() {
        Err(malformed("line 1".into(), "empty file".into()))
    } else {
        Err(malformed(
            "line 1".into(),
            "not qlog: expected a JSON text sequence (0x1E records) or a JSON object".into(),
        ))
    }
}

fn parse_json_seq(text: &str, file: &Path) -> Result<Trace, Error> {
    let mut line = 1;
    let mut header: Option<Value> = None;
    let mut format = Format::JsonSeq;
    let mut vantage = None;
    let mut clock = Clock::default();
    let mut events = Vec::new();
    for record in text.split('\u{1e}') {
        let at = format!("line {line}");
        line += record.matches('\n').count();
        if record.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(record).map_err(|e| Error::Malformed {
            file: file.to_owned(),
            at: at.clone(),
            detail: format!("not JSON: {e}"),
        })?;
        if header.is_none() {
            if value.get("qlog_version").is_none() && value.get("qlog_format").is_none() {
                return Err(Error::Malformed {
                    file: file.to_owned(),
                    at,
                    detail: "the first record is not a qlog header (no qlog_version)".into(),
                });
            }
            let trace = value.get("trace").unwrap_or(&Value::Null);
            vantage = vantage_of(trace);
            clock.delta = time_format(trace) == Some("delta");
            let title = value.get("title").and_then(Value::as_str).unwrap_or("");
            if title.starts_with("recoup ") {
                format = Format::Recoup;
            }
            header = Some(value);
            continue;
        }
        if let Some(e) = parse_event(&value, &mut clock).map_err(|detail| Error::Malformed {
            file: file.to_owned(),
            at,
            detail,
        })? {
            events.push(e);
        }
    }
    if header.is_none() {
        return Err(Error::Malformed {
            file: file.to_owned(),
            at: "line 1".into(),
            detail: "no qlog header record".into(),
        });
    }
    Ok(Trace {
        format,
        vantage,
        events,
    })
}

fn parse_json_doc(doc: &Value, file: &Path) -> Result<Trace, Error> {
    let malformed = |at: &str, detail: String| Error::Malformed {
        file: file.to_owned(),
        at: at.to_owned(),
        detail,
    };
    let traces = doc
        .get("traces")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("line 1", "a qlog JSON file needs a `traces` array".into()))?;
    let trace = match traces.as_slice() {
        [t] => t,
        other => {
            return Err(malformed(
                "line 1",
                format!(
                    "{} traces; analyze takes one connection per file",
                    other.len()
                ),
            ))
        }
    };
    let vantage = vantage_of(trace);
    let format = if trace.pointer("/vantage_point/name").and_then(Value::as_str) == Some("aioquic")
    {
        Format::Aioquic
    } else {
        Format::Json
    };
    let mut clock = Clock {
        delta: time_format(trace) == Some("delta"),
        ..Clock::default()
    };
    let list = trace
        .get("events")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("line 1", "the trace has no `events` array".into()))?;
    let mut events = Vec::new();
    for (i, value) in list.iter().enumerate() {
        if let Some(e) =
            parse_event(value, &mut clock).map_err(|d| malformed(&format!("event {}", i + 1), d))?
        {
            events.push(e);
        }
    }
    Ok(Trace {
        format,
        vantage,
        events,
    })
}

fn vantage_of(trace: &Value) -> Option<String> {
    trace
        .pointer("/vantage_point/type")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn time_format(trace: &Value) -> Option<&str> {
    trace
        .pointer("/common_fields/time_format")
        .and_then(Value::as_str)
}

/// Turns qlog times (ms; relative, absolute or delta) into instants. Absolute times (aioquic
/// writes Unix time) are taken relative to the first event so that nanoseconds stay exact in
/// an f64; relative times are kept as they are, so a recoup trace gives back the simulator's
/// instants exactly.
#[derive(Debug, Default)]
struct Clock {
    delta: bool,
    base: Option<f64>,
    last: f64,
}

impl Clock {
    fn instant(&mut self, time: f64) -> Result<Instant, String> {
        if !time.is_finite() {
            return Err(format!("time {time} is not a finite number"));
        }
        let t = if self.delta { self.last + time } else { time };
        self.last = t;
        let base = *self
            .base
            .get_or_insert(if (0.0..1e9).contains(&t) { 0.0 } else { t });
        // A clock that steps back (wall time) is held at the base rather than failing.
        let ns = ((t - base) * 1e6).round().max(0.0);
        Ok(Instant::from_nanos(ns as u64))
    }
}

fn parse_event(value: &Value, clock: &mut Clock) -> Result<Option<Event>, String> {
    let Some(name) = value.get("name").and_then(Value::as_str) else {
        return Err("event without a `name`".into());
    };
    let short = name.rsplit(':').next().unwrap_or(name);
    if !matches!(short, "packet_sent" | "packet_received" | "packet_lost") {
        return Ok(None);
    }
    let time = value
        .get("time")
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("{name} without a numeric `time`"))?;
    let time = clock.instant(time)?;
    let data = value.get("data").unwrap_or(&Value::Null);
    // aioquic's packet_lost puts `type` and `packet_number` at the top of `data`.
    let header = data.get("header").unwrap_or(data);
    let ty = header
        .get("packet_type")
        .or_else(|| header.get("type"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{name} without a packet type"))?;
    let space = match ty.to_ascii_lowercase().as_str() {
        "initial" => Space::Initial,
        "handshake" => Space::Handshake,
        "1rtt" | "0rtt" => Space::App,
        // Retry, version negotiation, stateless reset: no packet number space, no data.
        _ => return Ok(None),
    };
    let frames = match data.get("frames") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(f)) => f.as_slice(),
        Some(_) => return Err(format!("{name}: `frames` is not an array")),
    };
    let kind = match short {
        "packet_sent" => {
            let pn = packet_number(header, name)?;
            let mut stream = Vec::new();
            for f in frames {
                if f.get("frame_type").and_then(Value::as_str) == Some("stream") {
                    stream.push(stream_frame(f)?);
                }
            }
            let kind = match data.pointer("/recoup/kind").and_then(Value::as_str) {
                Some("copy") => Some(SendKind::Copy),
                Some("retransmission") => Some(SendKind::Retransmission),
                _ => None,
            };
            EventKind::Sent {
                space,
                pn,
                frames: stream,
                kind,
            }
        }
        "packet_received" => {
            let mut ranges = Vec::new();
            for f in frames {
                if f.get("frame_type").and_then(Value::as_str) == Some("ack") {
                    ranges.extend(ack_ranges(f)?);
                }
            }
            if ranges.is_empty() {
                return Ok(None);
            }
            EventKind::Acked { space, ranges }
        }
        _ => EventKind::Lost {
            space,
            pn: packet_number(header, name)?,
        },
    };
    Ok(Some(Event { time, kind }))
}

fn packet_number(header: &Value, name: &str) -> Result<u64, String> {
    header
        .get("packet_number")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("{name} without a non-negative integer packet_number"))
}

fn field_u64(f: &Value, key: &str, default: Option<u64>) -> Result<u64, String> {
    match f.get(key) {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| format!("stream frame: `{key}` is not a non-negative integer")),
        None => default.ok_or_else(|| format!("stream frame without `{key}`")),
    }
}

fn stream_frame(f: &Value) -> Result<StreamFrame, String> {
    let stream = field_u64(f, "stream_id", None)?;
    let start = field_u64(f, "offset", Some(0))?;
    let len = field_u64(f, "length", None)?;
    let end = start
        .checked_add(len)
        .ok_or("stream frame: offset + length overflows")?;
    Ok(StreamFrame {
        stream,
        start,
        end,
        fin: f.get("fin").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn ack_ranges(f: &Value) -> Result<Vec<(u64, u64)>, String> {
    let Some(list) = f.get("acked_ranges").and_then(Value::as_array) else {
        return Err("ack frame without an `acked_ranges` array".into());
    };
    list.iter()
        .map(|r| {
            let nums: Option<Vec<u64>> = r
                .as_array()
                .map(|a| a.iter().map(Value::as_u64).collect())
                .and_then(|v: Option<Vec<u64>>| v);
            match nums.as_deref() {
                Some([n]) => Ok((*n, *n)),
                Some([lo, hi]) if lo <= hi => Ok((*lo, *hi)),
                _ => Err(format!("ack frame: bad range {r}")),
            }
        })
        .collect()
}

// ----- replay -----

/// What the sender knows of one stream's sending half.
#[derive(Debug, Default)]
struct SendStream {
    /// Highest offset sent so far: bytes below it are re-sends.
    sent: u64,
    acked: RangeSet,
    /// Final size, once a FIN was sent, and whether a FIN was acknowledged.
    final_size: Option<u64>,
    fin_acked: bool,
}

impl SendStream {
    /// Unacknowledged pieces of `[start, end)`, as the transport's `unacked` reports them: the
    /// byte gaps, and a FIN that is sent but not acknowledged as a piece ending at the final size
    /// (empty when its bytes are acknowledged).
    fn unacked(&self, start: u64, end: u64) -> Vec<Range<u64>> {
        let mut out = self.acked.gaps(start..end.min(self.sent));
        if let Some(fs) = self.final_size.filter(|_| !self.fin_acked) {
            if start <= fs && end >= fs && out.last().is_none_or(|r| r.end != fs) {
                out.push(fs..fs);
            }
        }
        out
    }
}

/// One part of a sent STREAM frame: a first transmission, or a re-send with the lineages it
/// carries (none when the data was re-sent before any loss of it was declared).
#[derive(Clone, Debug)]
struct SentPart {
    range: DataRange,
    fin: bool,
    first: bool,
    lineages: Vec<LossId>,
}

#[derive(Clone, Debug)]
struct SentPacket {
    time: Instant,
    parts: Vec<SentPart>,
}

/// The sender rebuilt from the trace: its streams and outstanding packets, and the lineages of
/// its lost data, kept by the recovery crate's [`Lineages`] as the transport keeps them.
#[derive(Debug, Default)]
struct Replay {
    streams: HashMap<u64, SendStream>,
    /// Outstanding packets per space (Initial, Handshake, application): neither acknowledged
    /// nor declared lost.
    sent: [BTreeMap<u64, SentPacket>; 3],
    lineages: Lineages,
    counters: RunCounters,
    new_data_sends: Vec<Instant>,
    /// Application-space packets sent, and those with STREAM frames.
    app_sent: u64,
    stream_sent: u64,
}

impl Replay {
    fn new() -> Self {
        Self {
            lineages: Lineages::new(true),
            ..Self::default()
        }
    }

    fn event(&mut self, e: &Event) {
        match &e.kind {
            EventKind::Sent {
                space,
                pn,
                frames,
                kind,
            } => self.on_sent(e.time, *space, *pn, frames, *kind),
            EventKind::Acked { space, ranges } => {
                // Every newly acknowledged packet, then in ascending packet number order, as the
                // transport handles them: the order decides which send a range is recovered by.
                let sent = &mut self.sent[space.index()];
                let mut acked: Vec<(u64, SentPacket)> = Vec::new();
                for &(lo, hi) in ranges {
                    let pns: Vec<u64> = sent.range(lo..=hi).map(|(&pn, _)| pn).collect();
                    acked.extend(
                        pns.into_iter()
                            .filter_map(|pn| Some((pn, sent.remove(&pn)?))),
                    );
                }
                acked.sort_unstable_by_key(|(pn, _)| *pn);
                for (pn, p) in &acked {
                    self.on_acked(e.time, *pn, p);
                }
            }
            EventKind::Lost { space, pn } => {
                self.counters.packets_lost += 1;
                if let Some(p) = self.sent[space.index()].remove(pn) {
                    self.on_lost(e.time, *pn, &p);
                }
            }
        }
    }

    fn on_sent(
        &mut self,
        now: Instant,
        space: Space,
        pn: u64,
        frames: &[StreamFrame],
        explicit: Option<SendKind>,
    ) {
        if space == Space::App {
            self.app_sent += 1;
            self.stream_sent += u64::from(!frames.is_empty());
        }
        if space != Space::App || frames.is_empty() {
            self.sent[space.index()].insert(
                pn,
                SentPacket {
                    time: now,
                    parts: Vec::new(),
                },
            );
            return;
        }
        let mut parts = Vec::new();
        let mut new_bytes = 0u64;
        let mut has_new = false;
        let mut resent: Vec<DataRange> = Vec::new();
        for f in frames {
            let s = self.streams.entry(f.stream).or_default();
            let split = f.start.max(s.sent.min(f.end));
            let fin_is_new = f.fin && s.final_size.is_none();
            if split < f.end || (f.start == f.end && fin_is_new && f.start >= s.sent) {
                // New data (or a FIN on its own, sent for the first time).
                has_new = true;
                new_bytes += f.end - split;
                parts.push(SentPart {
                    range: DataRange {
                        stream: f.stream,
                        start: split,
                        end: f.end,
                    },
                    fin: f.fin,
                    first: true,
                    lineages: Vec::new(),
                });
            }
            if f.start < split || (f.start == f.end && !has_new_fin(f, fin_is_new, s.sent)) {
                resent.push(DataRange {
                    stream: f.stream,
                    start: f.start,
                    end: split,
                });
            }
            s.sent = s.sent.max(f.end);
            if f.fin {
                s.final_size.get_or_insert(f.end);
            }
        }
        // Re-sent parts: each belongs to the lineages it overlaps, sent once per packet, with
        // the bytes of each lineage this packet carries.
        let mut sent_lineages: Vec<(LossId, Vec<Range<u64>>)> = Vec::new();
        let mut resent_bytes = 0u64;
        for range in resent {
            let ids = self.lineages.overlapping(range);
            resent_bytes += range.len();
            let fin = frames
                .iter()
                .any(|f| f.stream == range.stream && f.fin && f.end == range.end);
            for id in &ids {
                let Some(r) = self.lineages.range(*id) else {
                    continue;
                };
                let piece = range.start.max(r.start)..range.end.min(r.end);
                match sent_lineages.iter_mut().find(|(i, _)| i == id) {
                    Some((_, pieces)) => pieces.push(piece),
                    None => sent_lineages.push((*id, vec![piece])),
                }
            }
            parts.push(SentPart {
                range,
                fin,
                first: false,
                lineages: ids,
            });
        }
        // recoup says what each re-send is; for other stacks the lineage infers it.
        let mut any_retransmission = false;
        for (id, pieces) in &sent_lineages {
            let kind = self.lineages.on_resent(*id, pn, now, pieces, explicit);
            any_retransmission |= kind == Some(SendKind::Retransmission);
        }
        // The packet's kind: new data makes it new (a recoup packet never mixes kinds).
        let kind = if has_new {
            SendKind::New
        } else if let Some(k) = explicit {
            k
        } else if any_retransmission {
            SendKind::Retransmission
        } else {
            SendKind::Copy
        };
        match kind {
            SendKind::New => {
                self.counters.packets_new += 1;
                self.counters.bytes_new += new_bytes;
                self.new_data_sends.push(now);
            }
            SendKind::Retransmission => {
                self.counters.packets_retransmitted += 1;
                self.counters.bytes_retransmitted += resent_bytes;
            }
            SendKind::Copy => {
                self.counters.packets_copies += 1;
                self.counters.bytes_copies += resent_bytes;
            }
        }
        self.sent[space.index()].insert(pn, SentPacket { time: now, parts });
    }

    fn on_acked(&mut self, now: Instant, pn: u64, p: &SentPacket) {
        for part in &p.parts {
            let r = part.range;
            let s = self.streams.entry(r.stream).or_default();
            s.acked.insert(r.start..r.end);
            if part.fin {
                s.fin_acked = true;
            }
            let streams = &self.streams;
            // Closed lineages need nothing more here: their records are drained at the end.
            let _closed = self.lineages.on_range_acked(
                r,
                part.lineages.iter().copied(),
                pn,
                p.time,
                now,
                |l| {
                    streams
                        .get(&l.stream)
                        .is_none_or(|s| s.unacked(l.start, l.end).is_empty())
                },
            );
        }
    }

    fn on_lost(&mut self, now: Instant, pn: u64, p: &SentPacket) {
        // The trace may not say what triggered the loss (aioquic does not); no metric reads it.
        let trigger = LossTrigger::PacketThreshold;
        for part in &p.parts {
            let r = part.range;
            if part.first {
                // A first transmission: every still-unacknowledged piece opens a lineage.
                let pieces = self
                    .streams
                    .get(&r.stream)
                    .map(|s| s.unacked(r.start, r.end))
                    .unwrap_or_default();
                for piece in pieces {
                    let range = DataRange {
                        stream: r.stream,
                        start: piece.start,
                        end: piece.end,
                    };
                    let _ = self.lineages.on_first_loss(range, p.time, now, trigger);
                }
            }
            for &id in &part.lineages {
                if !self.lineages.on_send_lost(id, pn, trigger).newest {
                    // A lost part of a split retransmission: its bytes are owed again.
                    if let Some(l) = self.lineages.range(id) {
                        let piece = r.start.max(l.start)..r.end.min(l.end);
                        self.lineages.on_part_lost(id, pn, piece);
                    }
                }
            }
        }
    }
}

/// Whether an empty STREAM frame is a FIN sent for the first time (new data, not a re-send).
fn has_new_fin(f: &StreamFrame, fin_is_new: bool, sent: u64) -> bool {
    f.start == f.end && fin_is_new && f.start >= sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// aioquic writes Unix times in ms.
    const T0: f64 = 1_763_900_000_000.0;

    fn sent(t: f64, pn: u64, stream: Option<(u64, u64)>) -> Value {
        let mut frames = vec![json!({"frame_type": "padding"})];
        if let Some((offset, length)) = stream {
            frames.push(
                json!({"fin": false, "frame_type": "stream", "length": length,
                               "offset": offset, "stream_id": 0}),
            );
        }
        json!({"data": {"frames": frames,
                        "header": {"packet_number": pn, "packet_type": "1RTT", "dcid": "", "scid": ""},
                        "raw": {"length": 1200}},
               "name": "transport:packet_sent", "time": T0 + t})
    }

    fn acked(t: f64, ranges: Value) -> Value {
        json!({"data": {"frames": [{"ack_delay": 0.0, "acked_ranges": ranges, "frame_type": "ack"}],
                        "header": {"packet_number": 0, "packet_type": "1RTT"}},
               "name": "transport:packet_received", "time": T0 + t})
    }

    /// aioquic's packet_lost: `type` and `packet_number` directly in `data`.
    fn lost(t: f64, pn: u64) -> Value {
        json!({"data": {"type": "1RTT", "packet_number": pn},
               "name": "recovery:packet_lost", "time": T0 + t})
    }

    fn aioquic_doc(vantage: &str, events: Vec<Value>) -> String {
        json!({"qlog_format": "JSON", "qlog_version": "0.3",
               "traces": [{"common_fields": {"ODCID": "ab"}, "events": events,
                           "vantage_point": {"name": "aioquic", "type": vantage}}]})
        .to_string()
    }

    /// Two ranges lost at 60 ms: range A's retransmission (61 ms) arrives; range B's is lost,
    /// its round-2 retransmission (126 ms) is lost too, and a copy sent at 127 ms arrives.
    fn fixture() -> Vec<Value> {
        let k = 1000;
        vec![
            json!({"data": {"frames": [{"frame_type": "crypto", "offset": 0, "length": 90}],
                            "header": {"packet_number": 0, "packet_type": "initial"}},
                   "name": "transport:packet_sent", "time": T0}),
            sent(0.0, 0, Some((0, k))),
            sent(0.0, 1, Some((k, k))),
            sent(1.0, 2, Some((2 * k, k))),
            sent(2.0, 3, Some((3 * k, k))),
            json!({"data": {"latest_rtt": 60.0}, "name": "recovery:metrics_updated",
                   "time": T0 + 60.0}),
            acked(60.0, json!([[2, 3]])),
            lost(60.0, 0),
            lost(60.0, 1),
            sent(61.0, 4, Some((0, k))),
            sent(61.0, 5, Some((k, k))),
            sent(62.0, 6, Some((4 * k, k))),
            acked(121.0, json!([[4, 4], [6, 6]])),
            lost(125.0, 5),
            sent(126.0, 7, Some((k, k))),
            sent(127.0, 8, Some((k, k))),
            sent(127.5, 9, None),
            acked(190.0, json!([[8, 9]])),
            // A late loss of the round-2 retransmission: the range is already recovered.
            lost(200.0, 7),
        ]
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn hand_built_aioquic_trace_gives_hand_computed_metrics() {
        let file = Path::new("fixture.qlog");
        let trace = parse_trace(&aioquic_doc("server", fixture()), file).expect("parse");
        assert_eq!(trace.format, Format::Aioquic);
        let a = analyze(&trace, file, "aioquic", DEFAULT_OFF_GAP).expect("analyze");
        let r = &a.row;
        assert_eq!(r.lost_ranges, 2);
        // T_unit: 61 ms for both ranges (sent at 0, first retransmission at 61).
        assert!(close(r.t_unit_ms, 61.0));
        // Latency: A 0 (first retransmission arrived), B 127 - 60 = 67 ms.
        assert!(close(r.recovery_latency_ms, 33.5));
        assert!(close(r.recovery_latency_p95_ms, 0.95 * 67.0));
        assert!(close(r.recovery_latency_max_ms, 67.0));
        assert!(close(r.recovery_latency_multi_ms, 67.0));
        assert_eq!(r.lost_ranges_multi, 1);
        // B: 67 ms >= T_unit 61 ms.
        assert!(close(r.deterioration_rate, 0.5));
        // New packets 0, 1, 2, 3, 6; retransmissions 4, 5, 7; the copy 8 (B's round 2 had its
        // retransmission already). Packet 9 carries no stream data.
        assert_eq!(r.copies_sent, 1);
        assert!(close(r.redundancy_cost, 0.2));
        assert_eq!(r.retransmissions_sent, 3);
        assert_eq!(r.packets_sent, 9);
        assert!(close(r.loss_rate, 4.0 / 9.0));
        assert!(close(r.bandwidth_cost, 4000.0 / 9000.0));
        // B: rounds 1 and 2; sends 5, 7, 8.
        assert_eq!((r.n_max, r.k_max), (2, 3));
        assert_eq!(r.goodput_mbps, None);
        // New data at 0, 0, 1, 2 and 62 ms: one 60 ms gap over 62 ms.
        assert_eq!(a.off_mode.entries, 1);
        assert!(close(a.off_mode.ms_per_s(), 60.0 / 0.062));
        assert!(close(a.off_mode.entries_per_s(), 1.0 / 0.062));
    }

    #[test]
    fn a_late_ack_of_a_lost_packet_is_no_arrival() {
        // The first retransmission (pn 2) is declared lost, then acknowledged late: as in the
        // transport, that acknowledges nothing; the round-2 retransmission recovers the range.
        let events = vec![
            sent(0.0, 0, Some((0, 100))),
            sent(1.0, 1, Some((100, 100))),
            lost(50.0, 0),
            sent(51.0, 2, Some((0, 100))),
            lost(120.0, 2),
            acked(121.0, json!([[1, 2]])),
            sent(122.0, 3, Some((0, 100))),
            acked(190.0, json!([[3, 3]])),
        ];
        let file = Path::new("late.qlog");
        let trace = parse_trace(&aioquic_doc("server", events), file).expect("parse");
        let a = analyze(&trace, file, "x", DEFAULT_OFF_GAP).expect("analyze");
        assert_eq!(a.row.lost_ranges, 1);
        assert!(close(a.row.recovery_latency_ms, 72.0));
        assert_eq!((a.row.n_max, a.row.k_max, a.row.copies_sent), (2, 2, 0));
    }

    #[test]
    fn a_retransmission_split_over_packets_is_no_copy() {
        // aioquic may re-send a lost 2000-byte frame as two frames in two packets: both are
        // the round's retransmission. Re-sending it again before a loss is a copy.
        let events = vec![
            sent(0.0, 0, Some((0, 2000))),
            sent(1.0, 1, Some((2000, 100))),
            lost(50.0, 0),
            sent(51.0, 2, Some((0, 1000))),
            sent(51.0, 3, Some((1000, 1000))),
            sent(52.0, 4, Some((0, 2000))),
            acked(120.0, json!([[1, 4]])),
        ];
        let file = Path::new("split.qlog");
        let trace = parse_trace(&aioquic_doc("server", events), file).expect("parse");
        let a = analyze(&trace, file, "x", DEFAULT_OFF_GAP).expect("analyze");
        let r = &a.row;
        assert_eq!(
            (r.lost_ranges, r.retransmissions_sent, r.copies_sent),
            (1, 2, 1)
        );
        assert_eq!((r.n_max, r.k_max), (1, 3));
        assert!(close(r.recovery_latency_ms, 0.0));
    }

    #[test]
    fn a_lost_part_of_a_split_retransmission_is_resent_as_retransmission() {
        // The first part (packet 2) of a split retransmission is lost, the newest part (3)
        // arrives: re-sending the first part is still the round's retransmission, no copy.
        let events = vec![
            sent(0.0, 0, Some((0, 2000))),
            sent(1.0, 1, Some((2000, 100))),
            lost(50.0, 0),
            sent(51.0, 2, Some((0, 1000))),
            sent(51.0, 3, Some((1000, 1000))),
            acked(120.0, json!([[1, 1], [3, 3]])),
            lost(121.0, 2),
            sent(122.0, 4, Some((0, 1000))),
            acked(190.0, json!([[4, 4]])),
        ];
        let file = Path::new("split-lost.qlog");
        let trace = parse_trace(&aioquic_doc("server", events), file).expect("parse");
        let a = analyze(&trace, file, "x", DEFAULT_OFF_GAP).expect("analyze");
        let r = &a.row;
        assert_eq!(
            (r.lost_ranges, r.retransmissions_sent, r.copies_sent),
            (1, 3, 0)
        );
    }

    #[test]
    fn client_traces_are_refused() {
        let file = Path::new("client.qlog");
        let trace = parse_trace(&aioquic_doc("client", fixture()), file).expect("parse");
        let err = analyze(&trace, file, "x", DEFAULT_OFF_GAP).expect_err("receiver");
        let text = err.to_string();
        assert!(
            text.contains("client.qlog") && text.contains("sender"),
            "{text}"
        );
    }

    #[test]
    fn a_trace_without_frames_is_refused() {
        // quinn 0.11 logs packet_sent with its header only.
        let events: Vec<Value> = (0..5)
            .map(|pn| {
                json!({"name": "transport:packet_sent", "time": f64::from(pn),
                       "data": {"header": {"packet_type": "1RTT", "packet_number": pn}}})
            })
            .collect();
        let file = Path::new("quinn.sqlog");
        let trace = parse_trace(&aioquic_doc("server", events), file).expect("parse");
        let e = analyze(&trace, file, "x", DEFAULT_OFF_GAP)
            .expect_err("no frames")
            .to_string();
        assert!(e.contains("quinn.sqlog") && e.contains("STREAM"), "{e}");
    }

    fn error_of(text: &str) -> String {
        parse_trace(text, Path::new("bad.sqlog"))
            .expect_err("malformed")
            .to_string()
    }

    #[test]
    fn malformed_input_names_file_and_place() {
        let header = r#"{"qlog_version":"0.3","qlog_format":"JSON-SEQ","title":"recoup server x","trace":{"vantage_point":{"type":"server"}}}"#;
        let ok = r#"{"time":1.0,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":0},"frames":[]}}"#;
        let text = format!("\u{1e}{header}\n\u{1e}{ok}\n\u{1e}{{\"time\": 2.0, \"name\"\n");
        let e = error_of(&text);
        assert!(e.starts_with("bad.sqlog: line 3: not JSON"), "{e}");
        let no_pn = r#"{"time":1.0,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT"}}}"#;
        let e = error_of(&format!("\u{1e}{header}\n\u{1e}{ok}\n\u{1e}{no_pn}\n"));
        assert!(e.contains("line 3") && e.contains("packet_number"), "{e}");
        let bad_frame = r#"{"time":1.0,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":1},"frames":[{"frame_type":"stream","stream_id":0,"offset":-5,"length":3}]}}"#;
        let e = error_of(&format!("\u{1e}{header}\n\u{1e}{bad_frame}\n"));
        assert!(e.contains("line 2") && e.contains("offset"), "{e}");
        let e = error_of(&format!("\u{1e}{ok}\n"));
        assert!(e.contains("line 1") && e.contains("header"), "{e}");
        let e = error_of("");
        assert!(e.contains("empty"), "{e}");
        let e = error_of("packet_sent 1 2 3\n");
        assert!(e.contains("not qlog"), "{e}");
        let e = error_of("{\"traces\": [}");
        assert!(e.starts_with("bad.sqlog: line 1:"), "{e}");
        let e = error_of(r#"{"traces": [{"events": []}, {"events": []}]}"#);
        assert!(e.contains("2 traces"), "{e}");
        let e = error_of(&aioquic_doc(
            "server",
            vec![json!({"name": "transport:packet_sent", "time": "soon", "data": {}})],
        ));
        assert!(e.contains("event 1") && e.contains("time"), "{e}");
        let e = error_of(&aioquic_doc("server", vec![acked(1.0, json!([[5, 2]]))]));
        assert!(e.contains("bad range"), "{e}");
    }
}
