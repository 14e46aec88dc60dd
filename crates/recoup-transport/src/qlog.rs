//! qlog output: JSON text sequences (RFC 7464, `.sqlog`), qlog 0.3 as quiche and quinn write it
//! and qvis reads it. One trace per connection.
//!
//! The transport stays sans-IO: the driver hands in any `Write` (a file, a buffer) and the writer
//! only appends records to it. Times are milliseconds relative to the connection's start. Packets
//! that carry copies of lost data (DESIGN.md) are marked with `"trigger": "recoup_copy"` and a
//! `recoup` object naming the kind, so qvis shows them and `recoup analyze` can count them.

use std::io::Write;

use recoup_time::Instant;
use serde_json::{json, Value};

/// RFC 7464 record separator.
const RS: u8 = 0x1e;

/// Which end of the connection wrote the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VantagePoint {
    Client,
    Server,
}

impl VantagePoint {
    fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
        }
    }
}

/// Appends qlog events for one connection to a sink.
pub struct QlogWriter {
    out: Box<dyn Write + Send>,
    start: Instant,
    /// Set after the first write error; logging then stops rather than failing the connection.
    failed: bool,
}

impl std::fmt::Debug for QlogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QlogWriter")
            .field("start", &self.start)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl QlogWriter {
    /// Starts a trace: writes the qlog header record. `odcid` names the connection.
    pub fn new(
        out: Box<dyn Write + Send>,
        vantage: VantagePoint,
        odcid: &str,
        start: Instant,
    ) -> Self {
        let mut w = Self {
            out,
            start,
            failed: false,
        };
        let header = json!({
            "qlog_version": "0.3",
            "qlog_format": "JSON-SEQ",
            "title": format!("recoup {} {odcid}", vantage.as_str()),
            "trace": {
                "vantage_point": { "type": vantage.as_str() },
                "common_fields": { "ODCID": odcid, "time_format": "relative", "reference_time": 0.0 },
            },
        });
        w.record(&header);
        w
    }

    /// Whether a write failed (the trace is then incomplete).
    #[must_use]
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Logs event `name` (e.g. `transport:packet_sent`) with its data at `now`.
    pub fn event(&mut self, now: Instant, name: &str, data: Value) {
        let time = now.saturating_duration_since(self.start).as_secs_f64() * 1e3;
        self.record(&json!({ "time": time, "name": name, "data": data }));
    }

    fn record(&mut self, value: &Value) {
        if self.failed {
            return;
        }
        let mut buf = Vec::with_capacity(256);
        buf.push(RS);
        // Serializing a `Value` into a Vec cannot fail.
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

    #[test]
    fn writes_json_text_sequences_with_relative_times() {
        let sink = Shared::default();
        let start = Instant::from_nanos(5_000_000_000);
        let mut w = QlogWriter::new(Box::new(sink.clone()), VantagePoint::Server, "abcd", start);
        w.event(
            start + std::time::Duration::from_micros(1500),
            "transport:packet_sent",
            json!({"header": {"packet_type": "1RTT", "packet_number": 7}}),
        );
        let bytes = sink.0.lock().expect("lock").clone();
        let records: Vec<Value> = bytes
            .split(|&b| b == RS)
            .filter(|r| !r.is_empty())
            .map(|r| serde_json::from_slice(r).expect("each record is JSON"))
            .collect();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0]["qlog_format"], "JSON-SEQ");
        assert_eq!(records[0]["trace"]["vantage_point"]["type"], "server");
        assert_eq!(records[1]["time"], 1.5);
        assert_eq!(records[1]["data"]["header"]["packet_number"], 7);
    }
}
