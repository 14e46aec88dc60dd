//! qlog output: JSON text sequences (RFC 7464, `.sqlog`), qlog 0.3 as quiche and quinn write it
//! and qvis reads it. One trace per connection, named by the connection's original destination
//! connection ID (ODCID), so that the client's and the server's traces of one connection pair.
//!
//! The transport stays sans-IO: the driver hands in any `Write` (a file, a buffer) and the writer
//! only appends records to it. Times are milliseconds relative to the connection's start;
//! `reference_time` (milliseconds since the Unix epoch) is what the driver passes in: the wall
//! clock at the start for real sockets, a fixed epoch in the simulator. Packets that carry
//! copies of lost data (DESIGN.md) are marked with `"trigger": "recoup_copy"` and a `recoup`
//! object naming the kind, so qvis shows them and `recoup analyze` can count them.
//!
//! Every event is one variant of [`Event`], serialized by serde (one definition for writing and
//! for reading back). Names are qlog 0.3's (draft-ietf-quic-qlog-quic-events-02/03, which qvis
//! reads); the current draft (quic-events-10 and later) renames them into one `quic:` namespace:
//! `connectivity:connection_started` -> `quic:connection_started`,
//! `connectivity:connection_closed` -> `quic:connection_closed`, `transport:parameters_set` ->
//! `quic:parameters_set`, `transport:packet_sent`/`_received` -> `quic:packet_sent`/`_received`,
//! `recovery:metrics_updated` -> `quic:recovery_metrics_updated`,
//! `recovery:congestion_state_updated` -> `quic:congestion_state_updated`,
//! `recovery:packet_lost` -> `quic:packet_lost`. [`Event::draft_name`] gives the new names.

use std::io::Write;

use recoup_time::Instant;
use serde::{Deserialize, Serialize};

use crate::frame::{Frame, StreamDir};

/// RFC 7464 record separator.
const RS: u8 = 0x1e;

/// Which end of the connection wrote the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VantagePoint {
    Client,
    Server,
}

impl VantagePoint {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
        }
    }
}

/// Lower-case hex of bytes (connection IDs, tokens), as qlog writes them.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Who set or closed something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    Local,
    Remote,
}

/// `header` of a packet event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketHeader {
    /// `initial`, `handshake`, `1RTT`.
    pub packet_type: String,
    pub packet_number: u64,
}

/// `raw` of a packet event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawInfo {
    pub length: u64,
}

/// A frame as qlog 0.3 describes it, with every field of the QUIC frame (RFC 9000 §19) that
/// qlog names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "frame_type", rename_all = "snake_case")]
pub enum QlogFrame {
    Padding {
        length: u64,
    },
    Ping,
    Ack {
        /// Milliseconds, when known (the peer's ack_delay_exponent applied).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        ack_delay: Option<f64>,
        /// Inclusive `[first, last]` packet number ranges, highest first.
        acked_ranges: Vec<[u64; 2]>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        ect1: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        ect0: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        ce: Option<u64>,
    },
    ResetStream {
        stream_id: u64,
        error_code: u64,
        final_size: u64,
    },
    StopSending {
        stream_id: u64,
        error_code: u64,
    },
    Crypto {
        offset: u64,
        length: u64,
    },
    NewToken {
        token: String,
    },
    Stream {
        stream_id: u64,
        offset: u64,
        length: u64,
        fin: bool,
    },
    MaxData {
        maximum: u64,
    },
    MaxStreamData {
        stream_id: u64,
        maximum: u64,
    },
    MaxStreams {
        stream_type: StreamType,
        maximum: u64,
    },
    DataBlocked {
        limit: u64,
    },
    StreamDataBlocked {
        stream_id: u64,
        limit: u64,
    },
    StreamsBlocked {
        stream_type: StreamType,
        limit: u64,
    },
    NewConnectionId {
        sequence_number: u64,
        retire_prior_to: u64,
        connection_id_length: u64,
        connection_id: String,
        stateless_reset_token: String,
    },
    RetireConnectionId {
        sequence_number: u64,
    },
    PathChallenge {
        data: String,
    },
    PathResponse {
        data: String,
    },
    ConnectionClose {
        error_space: ErrorSpace,
        error_code: u64,
        reason: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        trigger_frame_type: Option<u64>,
    },
    HandshakeDone,
    /// DATAGRAM (RFC 9221), qlog's `datagram` frame: the length of its data.
    Datagram {
        length: u64,
    },
    /// recoup's FEC extension (docs/FEC.md): a repair symbol over a window of source packets.
    RecoupRepair {
        first_packet_number: u64,
        sources: u64,
        repairs: u16,
        index: u16,
        length: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamType {
    Bidirectional,
    Unidirectional,
}

impl From<StreamDir> for StreamType {
    fn from(d: StreamDir) -> Self {
        match d {
            StreamDir::Bidi => Self::Bidirectional,
            StreamDir::Uni => Self::Unidirectional,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorSpace {
    Transport,
    Application,
}

impl QlogFrame {
    /// The qlog description of `frame`; `ack_delay_exponent` converts an ACK's delay to
    /// milliseconds (None: the delay is left out, as in Initial and Handshake packets, whose
    /// exponent is fixed but irrelevant to recovery).
    #[must_use]
    pub fn of(frame: &Frame<'_>, ack_delay_exponent: Option<u8>) -> Self {
        match frame {
            Frame::Padding { len } => Self::Padding {
                length: *len as u64,
            },
            Frame::Ping => Self::Ping,
            Frame::Ack(ack) => Self::Ack {
                ack_delay: ack_delay_exponent.map(|e| ack.ack_delay_micros(e) as f64 / 1e3),
                acked_ranges: ack.ranges().map(|r| [*r.start(), *r.end()]).collect(),
                ect1: ack.ecn.map(|e| e.ect1),
                ect0: ack.ecn.map(|e| e.ect0),
                ce: ack.ecn.map(|e| e.ce),
            },
            Frame::ResetStream {
                stream_id,
                error_code,
                final_size,
            } => Self::ResetStream {
                stream_id: *stream_id,
                error_code: *error_code,
                final_size: *final_size,
            },
            Frame::StopSending {
                stream_id,
                error_code,
            } => Self::StopSending {
                stream_id: *stream_id,
                error_code: *error_code,
            },
            Frame::Crypto { offset, data } => Self::Crypto {
                offset: *offset,
                length: data.len() as u64,
            },
            Frame::NewToken { token } => Self::NewToken { token: hex(token) },
            Frame::Stream(s) => Self::Stream {
                stream_id: s.stream_id,
                offset: s.offset,
                length: s.data.len() as u64,
                fin: s.fin,
            },
            Frame::MaxData(maximum) => Self::MaxData { maximum: *maximum },
            Frame::MaxStreamData { stream_id, max } => Self::MaxStreamData {
                stream_id: *stream_id,
                maximum: *max,
            },
            Frame::MaxStreams { dir, max } => Self::MaxStreams {
                stream_type: (*dir).into(),
                maximum: *max,
            },
            Frame::DataBlocked(limit) => Self::DataBlocked { limit: *limit },
            Frame::StreamDataBlocked { stream_id, limit } => Self::StreamDataBlocked {
                stream_id: *stream_id,
                limit: *limit,
            },
            Frame::StreamsBlocked { dir, limit } => Self::StreamsBlocked {
                stream_type: (*dir).into(),
                limit: *limit,
            },
            Frame::NewConnectionId {
                seq,
                retire_prior_to,
                cid,
                reset_token,
            } => Self::NewConnectionId {
                sequence_number: *seq,
                retire_prior_to: *retire_prior_to,
                connection_id_length: cid.len() as u64,
                connection_id: hex(cid),
                stateless_reset_token: hex(reset_token),
            },
            Frame::RetireConnectionId { seq } => Self::RetireConnectionId {
                sequence_number: *seq,
            },
            Frame::PathChallenge(data) => Self::PathChallenge { data: hex(data) },
            Frame::PathResponse(data) => Self::PathResponse { data: hex(data) },
            Frame::ConnectionClose(c) => Self::ConnectionClose {
                error_space: if c.frame_type.is_some() {
                    ErrorSpace::Transport
                } else {
                    ErrorSpace::Application
                },
                error_code: c.error_code,
                reason: String::from_utf8_lossy(c.reason).into_owned(),
                trigger_frame_type: c.frame_type,
            },
            Frame::HandshakeDone => Self::HandshakeDone,
            Frame::Datagram(d) => Self::Datagram {
                length: d.data.len() as u64,
            },
            Frame::Repair(r) => Self::RecoupRepair {
                first_packet_number: r.first_pn,
                sources: r.sources() as u64,
                repairs: r.repairs,
                index: r.index,
                length: r.symbol.len() as u64,
            },
        }
    }
}

/// `transport:packet_sent` and `transport:packet_received`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PacketEvent {
    pub header: PacketHeader,
    pub raw: RawInfo,
    pub frames: Vec<QlogFrame>,
    /// `recoup_copy` for a packet carrying a copy of lost data.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub trigger: Option<String>,
    /// What kind of send a packet with stream data was, beyond qlog: `copy`, `retransmission`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub recoup: Option<SendKindInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendKindInfo {
    pub kind: String,
}

/// `connectivity:connection_started`: the path as this endpoint sees it (`dst` is the peer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionStarted {
    /// `ipv4` or `ipv6`.
    pub ip_version: String,
    pub dst_ip: String,
    pub dst_port: u16,
    pub src_cid: String,
    pub dst_cid: String,
}

/// `connectivity:connection_closed`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionClosed {
    pub owner: Owner,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub connection_code: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub application_code: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// `clean`, `error`, `idle_timeout`, `application`.
    pub trigger: String,
}

/// `transport:parameters_set`: the transport parameters one side announced (RFC 9000 §18.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParametersSet {
    pub owner: Owner,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub original_destination_connection_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub initial_source_connection_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stateless_reset_token: Option<String>,
    pub disable_active_migration: bool,
    /// Milliseconds.
    pub max_idle_timeout: u64,
    pub max_udp_payload_size: u64,
    pub ack_delay_exponent: u64,
    /// Milliseconds.
    pub max_ack_delay: u64,
    pub active_connection_id_limit: u64,
    pub initial_max_data: u64,
    pub initial_max_stream_data_bidi_local: u64,
    pub initial_max_stream_data_bidi_remote: u64,
    pub initial_max_stream_data_uni: u64,
    pub initial_max_streams_bidi: u64,
    pub initial_max_streams_uni: u64,
    /// RFC 9221 §3, when announced (0 means no DATAGRAM support and is not sent).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_datagram_frame_size: Option<u64>,
}

impl ParametersSet {
    #[must_use]
    pub fn of(owner: Owner, p: &crate::transport_params::TransportParameters) -> Self {
        Self {
            owner,
            original_destination_connection_id: p
                .original_destination_connection_id
                .map(|c| hex(&c)),
            initial_source_connection_id: p.initial_source_connection_id.map(|c| hex(&c)),
            stateless_reset_token: p.stateless_reset_token.map(|t| hex(&t)),
            disable_active_migration: p.disable_active_migration,
            max_idle_timeout: p.max_idle_timeout,
            max_udp_payload_size: p.max_udp_payload_size,
            ack_delay_exponent: p.ack_delay_exponent,
            max_ack_delay: p.max_ack_delay,
            active_connection_id_limit: p.active_connection_id_limit,
            initial_max_data: p.initial_max_data,
            initial_max_stream_data_bidi_local: p.initial_max_stream_data_bidi_local,
            initial_max_stream_data_bidi_remote: p.initial_max_stream_data_bidi_remote,
            initial_max_stream_data_uni: p.initial_max_stream_data_uni,
            initial_max_streams_bidi: p.initial_max_streams_bidi,
            initial_max_streams_uni: p.initial_max_streams_uni,
            max_datagram_frame_size: (p.max_datagram_frame_size > 0)
                .then_some(p.max_datagram_frame_size),
        }
    }
}

/// `recovery:metrics_updated` (RFC 9002 §5 and §7 state, milliseconds and bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricsUpdated {
    pub min_rtt: f64,
    pub smoothed_rtt: f64,
    pub latest_rtt: f64,
    pub rtt_variance: f64,
    pub congestion_window: u64,
    pub bytes_in_flight: u64,
    /// Bits per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pacing_rate: Option<u64>,
    /// Beyond qlog: the congestion controller's state and bandwidth estimate, as before this
    /// ACK's update (BBR's state and bandwidth filter show why its window collapses).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub recoup: Option<CcDetail>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CcDetail {
    pub cc_state: String,
    /// Bytes per second.
    pub bandwidth_estimate: Option<u64>,
    /// Bytes per second.
    pub pacing_rate: Option<u64>,
}

/// `recovery:congestion_state_updated`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CongestionStateUpdated {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub old: Option<String>,
    pub new: String,
}

/// `recovery:packet_lost`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketLost {
    pub header: PacketHeader,
    /// `reordering_threshold`, `time_threshold`, `pto_expired` (RFC 9002 §6.1, §6.2).
    pub trigger: String,
}

/// `recoup:fec_recovered`: a packet restored from repair symbols (docs/FEC.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FecRecovered {
    pub packet_number: u64,
    pub stream_bytes: u64,
}

/// `recoup:datagram_dropped`: a DATAGRAM frame (RFC 9221) the transport discarded without
/// sending or delivering it. Shaped after qlog's `transport:datagram_dropped`, which is about
/// UDP datagrams (and qvis reads it so): hence recoup's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatagramDropped {
    pub raw: RawInfo,
    /// `send_queue_full` (the oldest queued datagram made room for a new one),
    /// `receive_queue_full` (the application did not read it in time), `too_large` (it no
    /// longer fits a packet, the path's datagram size having shrunk).
    pub trigger: String,
}

/// One qlog event, named as qlog 0.3 names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", content = "data")]
pub enum Event {
    #[serde(rename = "connectivity:connection_started")]
    ConnectionStarted(ConnectionStarted),
    #[serde(rename = "connectivity:connection_closed")]
    ConnectionClosed(ConnectionClosed),
    #[serde(rename = "transport:parameters_set")]
    ParametersSet(ParametersSet),
    #[serde(rename = "transport:packet_sent")]
    PacketSent(PacketEvent),
    #[serde(rename = "transport:packet_received")]
    PacketReceived(PacketEvent),
    #[serde(rename = "recovery:metrics_updated")]
    MetricsUpdated(MetricsUpdated),
    #[serde(rename = "recovery:congestion_state_updated")]
    CongestionStateUpdated(CongestionStateUpdated),
    #[serde(rename = "recovery:packet_lost")]
    PacketLost(PacketLost),
    /// recoup's FEC extension: a lost packet restored from repair symbols.
    #[serde(rename = "recoup:fec_recovered")]
    FecRecovered(FecRecovered),
    /// A DATAGRAM frame dropped from a queue (RFC 9221 §5: datagrams are not reliable).
    #[serde(rename = "recoup:datagram_dropped")]
    DatagramDropped(DatagramDropped),
}

impl Event {
    /// The event's name in the current draft (draft-ietf-quic-qlog-quic-events-10 and later).
    #[must_use]
    pub fn draft_name(&self) -> &'static str {
        match self {
            Self::ConnectionStarted(_) => "quic:connection_started",
            Self::ConnectionClosed(_) => "quic:connection_closed",
            Self::ParametersSet(_) => "quic:parameters_set",
            Self::PacketSent(_) => "quic:packet_sent",
            Self::PacketReceived(_) => "quic:packet_received",
            Self::MetricsUpdated(_) => "quic:recovery_metrics_updated",
            Self::CongestionStateUpdated(_) => "quic:congestion_state_updated",
            Self::PacketLost(_) => "quic:packet_lost",
            Self::FecRecovered(_) => "recoup:fec_recovered",
            Self::DatagramDropped(_) => "recoup:datagram_dropped",
        }
    }
}

/// One record of the trace after the header: milliseconds since the start, and the event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub time: f64,
    #[serde(flatten)]
    pub event: Event,
}

/// The header record (qlog 0.3, JSON-SEQ).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub qlog_version: String,
    pub qlog_format: String,
    pub title: String,
    pub trace: TraceHeader,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    pub vantage_point: VantagePointInfo,
    pub common_fields: CommonFields,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VantagePointInfo {
    #[serde(rename = "type")]
    pub kind: VantagePoint,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommonFields {
    #[serde(rename = "ODCID")]
    pub odcid: String,
    pub group_id: String,
    pub time_format: String,
    /// Milliseconds since the Unix epoch at the trace's time 0.
    pub reference_time: f64,
}

/// Appends qlog events for one connection to a sink. The header is written when the
/// connection takes the writer ([`crate::Connection::set_qlog`]), which knows the ODCID.
pub struct QlogWriter {
    out: Box<dyn Write + Send>,
    vantage: VantagePoint,
    start: Instant,
    reference_time_ms: f64,
    /// Set after the first write error; logging then stops rather than failing the connection.
    failed: bool,
    /// The congestion state last logged, to log only changes.
    cc_state: Option<&'static str>,
}

impl std::fmt::Debug for QlogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QlogWriter")
            .field("vantage", &self.vantage)
            .field("start", &self.start)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl QlogWriter {
    /// A writer for the trace of one connection seen from `vantage`. `start` is the trace's
    /// time 0 and `reference_time_ms` the same moment in milliseconds since the Unix epoch
    /// (the injected wall clock; the simulator passes a fixed epoch).
    pub fn new(
        out: Box<dyn Write + Send>,
        vantage: VantagePoint,
        start: Instant,
        reference_time_ms: f64,
    ) -> Self {
        Self {
            out,
            vantage,
            start,
            reference_time_ms,
            failed: false,
            cc_state: None,
        }
    }

    /// The trace's time 0.
    #[must_use]
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Which end writes the trace.
    #[must_use]
    pub fn vantage(&self) -> VantagePoint {
        self.vantage
    }

    /// Writes the header record; `odcid` names the connection.
    pub fn write_header(&mut self, odcid: &str) {
        let header = Header {
            qlog_version: "0.3".into(),
            qlog_format: "JSON-SEQ".into(),
            title: format!("recoup {} {odcid}", self.vantage.as_str()),
            trace: TraceHeader {
                vantage_point: VantagePointInfo { kind: self.vantage },
                common_fields: CommonFields {
                    odcid: odcid.to_owned(),
                    group_id: odcid.to_owned(),
                    time_format: "relative".into(),
                    reference_time: self.reference_time_ms,
                },
            },
        };
        self.record(&header);
    }

    /// Whether a write failed (the trace is then incomplete).
    #[must_use]
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Logs `event` at `now`.
    pub fn log(&mut self, now: Instant, event: Event) {
        let time = now.saturating_duration_since(self.start).as_secs_f64() * 1e3;
        self.record(&Record { time, event });
    }

    /// Logs `recovery:congestion_state_updated` when `state` differs from the last one logged.
    pub fn congestion_state(&mut self, now: Instant, state: &'static str) {
        if self.cc_state == Some(state) {
            return;
        }
        let old = self.cc_state.replace(state).map(str::to_owned);
        self.log(
            now,
            Event::CongestionStateUpdated(CongestionStateUpdated {
                old,
                new: state.to_owned(),
            }),
        );
    }

    fn record<T: Serialize>(&mut self, value: &T) {
        if self.failed {
            return;
        }
        let mut buf = Vec::with_capacity(256);
        buf.push(RS);
        if serde_json::to_writer(&mut buf, value).is_err() {
            self.failed = true;
            return;
        }
        buf.push(b'\n');
        if self.out.write_all(&buf).is_err() {
            self.failed = true;
        }
    }

    /// Flushes the sink (at connection close).
    pub fn flush(&mut self) {
        if !self.failed && self.out.flush().is_err() {
            self.failed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn records(sink: &Shared) -> Vec<serde_json::Value> {
        let bytes = sink.0.lock().expect("lock").clone();
        bytes
            .split(|&b| b == RS)
            .filter(|r| !r.is_empty())
            .map(|r| serde_json::from_slice(r).expect("each record is JSON"))
            .collect()
    }

    #[test]
    fn writes_json_text_sequences_with_relative_times() {
        let sink = Shared::default();
        let start = Instant::from_nanos(5_000_000_000);
        let mut w = QlogWriter::new(Box::new(sink.clone()), VantagePoint::Server, start, 1.7e12);
        w.write_header("abcd");
        let sent = Event::PacketSent(PacketEvent {
            header: PacketHeader {
                packet_type: "1RTT".into(),
                packet_number: 7,
            },
            raw: RawInfo { length: 1200 },
            frames: vec![QlogFrame::Ping],
            trigger: None,
            recoup: None,
        });
        w.log(start + std::time::Duration::from_micros(1500), sent.clone());
        let records = records(&sink);
        assert_eq!(records.len(), 2);
        assert_eq!(records[0]["qlog_format"], "JSON-SEQ");
        assert_eq!(records[0]["trace"]["vantage_point"]["type"], "server");
        assert_eq!(records[0]["trace"]["common_fields"]["ODCID"], "abcd");
        assert_eq!(
            records[0]["trace"]["common_fields"]["reference_time"],
            1.7e12
        );
        assert_eq!(records[1]["time"], 1.5);
        assert_eq!(records[1]["name"], "transport:packet_sent");
        assert_eq!(records[1]["data"]["header"]["packet_number"], 7);
        assert_eq!(records[1]["data"]["frames"][0]["frame_type"], "ping");
        // The same types read the record back.
        let back: Record = serde_json::from_value(records[1].clone()).expect("record");
        assert_eq!(back.event, sent);
        assert_eq!(back.event.draft_name(), "quic:packet_sent");
    }

    #[test]
    fn congestion_state_is_logged_on_change_only() {
        let sink = Shared::default();
        let mut w = QlogWriter::new(
            Box::new(sink.clone()),
            VantagePoint::Server,
            Instant::ZERO,
            0.0,
        );
        for state in ["startup", "startup", "drain", "drain", "probe_bw"] {
            w.congestion_state(Instant::ZERO, state);
        }
        let r = records(&sink);
        let changes: Vec<(&str, &str)> = r
            .iter()
            .map(|r| {
                (
                    r["data"]["old"].as_str().unwrap_or("-"),
                    r["data"]["new"].as_str().unwrap_or("?"),
                )
            })
            .collect();
        assert_eq!(
            changes,
            [
                ("-", "startup"),
                ("startup", "drain"),
                ("drain", "probe_bw")
            ]
        );
    }

    #[test]
    fn received_frames_keep_their_fields() {
        let mut buf = Vec::new();
        Frame::ResetStream {
            stream_id: 4,
            error_code: 9,
            final_size: 1000,
        }
        .encode(&mut buf);
        Frame::MaxStreamData {
            stream_id: 8,
            max: 65536,
        }
        .encode(&mut buf);
        Frame::PathChallenge([1, 2, 3, 4, 5, 6, 7, 8]).encode(&mut buf);
        let frames: Vec<QlogFrame> = crate::frame::Frames::new(&buf)
            .map(|f| QlogFrame::of(&f.expect("decodes"), Some(3)))
            .collect();
        assert_eq!(
            frames,
            [
                QlogFrame::ResetStream {
                    stream_id: 4,
                    error_code: 9,
                    final_size: 1000
                },
                QlogFrame::MaxStreamData {
                    stream_id: 8,
                    maximum: 65536
                },
                QlogFrame::PathChallenge {
                    data: "0102030405060708".into()
                },
            ]
        );
    }
}
