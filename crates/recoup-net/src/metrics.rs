//! What `recoup serve --metrics ADDR` tells an operator: Prometheus metrics (text exposition,
//! OpenMetrics 1.0, through `prometheus-client`) at `/metrics` and a health check at
//! `/healthz` (`ok`, or 503 `draining` once a drain began), served by a thread of their own
//! (`tiny_http`).
//!
//! The server loop updates the metrics as it drives connections: transport counters go in as
//! the difference from the connection's counters at its last update, so a counter is the sum
//! over every connection served, open or closed, without a scrape ever touching a connection.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use recoup_transport::{Connection, ConnectionHandle, ConnectionStats};

use crate::error::Error;

/// Upper bounds of the recovery latency buckets, in seconds: 1 ms to about 4 s, doubling.
const LATENCY_BUCKETS: (f64, f64, u16) = (0.001, 2.0, 13);

/// The `policy` label of the recovery latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabel {
    pub policy: String,
}

/// The metrics of one server; cheap to clone (each metric is shared).
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub connections_open: Gauge,
    pub connections_accepted: Counter,
    pub connections_refused: Counter,
    pub handshakes_in_flight: Gauge,
    pub retries_sent: Counter,
    pub bytes_sent: Counter,
    pub packets_sent: Counter,
    pub packets_lost: Counter,
    pub copies_sent: Counter,
    pub pto_expirations: Counter,
    pub recovery_latency: Family<PolicyLabel, Histogram>,
    pub live_streams_open: Gauge,
    pub live_streams: Counter,
    pub live_stalls: Counter,
    pub datagrams_passed: Counter,
}

fn latency_histogram() -> Histogram {
    let (start, factor, count) = LATENCY_BUCKETS;
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        start, factor, count,
    ))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("recoup");
        let m = Self {
            registry: Arc::new(Registry::default()),
            connections_open: Gauge::default(),
            connections_accepted: Counter::default(),
            connections_refused: Counter::default(),
            handshakes_in_flight: Gauge::default(),
            retries_sent: Counter::default(),
            bytes_sent: Counter::default(),
            packets_sent: Counter::default(),
            packets_lost: Counter::default(),
            copies_sent: Counter::default(),
            pto_expirations: Counter::default(),
            recovery_latency: Family::new_with_constructor(latency_histogram),
            live_streams_open: Gauge::default(),
            live_streams: Counter::default(),
            live_stalls: Counter::default(),
            datagrams_passed: Counter::default(),
        };
        let r = &mut registry;
        r.register(
            "connections_open",
            "Connections open now",
            m.connections_open.clone(),
        );
        r.register(
            "connections_accepted",
            "Connections a client opened and the server accepted",
            m.connections_accepted.clone(),
        );
        r.register(
            "connections_refused",
            "Connection attempts refused with CONNECTION_REFUSED (--max-connections)",
            m.connections_refused.clone(),
        );
        r.register(
            "handshakes_in_flight",
            "Accepted connections whose handshake has not completed",
            m.handshakes_in_flight.clone(),
        );
        r.register(
            "retries_sent",
            "Retry packets sent to validate a client's address (RFC 9000 §8.1.2)",
            m.retries_sent.clone(),
        );
        r.register(
            "sent_bytes",
            "UDP payload bytes sent on connections",
            m.bytes_sent.clone(),
        );
        r.register("sent_packets", "QUIC packets sent", m.packets_sent.clone());
        r.register(
            "lost_packets",
            "QUIC packets declared lost (RFC 9002 §6)",
            m.packets_lost.clone(),
        );
        r.register(
            "copies_sent",
            "Packets carrying a copy of lost data that the loss-recovery policy asked for",
            m.copies_sent.clone(),
        );
        r.register(
            "pto_expirations",
            "Probe timeouts that expired (RFC 9002 §6.2)",
            m.pto_expirations.clone(),
        );
        r.register(
            "recovery_latency_seconds",
            "Per lost range: from its first loss detection to the send of the copy that arrived \
             (0 when the first retransmission arrived), by loss-recovery policy",
            m.recovery_latency.clone(),
        );
        r.register(
            "live_streams_open",
            "Live streams being sent now",
            m.live_streams_open.clone(),
        );
        r.register(
            "live_streams",
            "Live streams started",
            m.live_streams.clone(),
        );
        r.register(
            "live_stalls",
            "Live stream stalls at the sender: episodes in which a captured frame still waited \
             for the stream (flow control or congestion window) when the next was captured",
            m.live_stalls.clone(),
        );
        r.register(
            "datagrams_passed",
            "Datagrams a worker passed to the worker that owns their connection (--workers; \
             after a NAT rebinding or a migration the kernel may pick another worker)",
            m.datagrams_passed.clone(),
        );
        Self {
            registry: Arc::new(registry),
            ..m
        }
    }
}

impl Metrics {
    /// The metrics in the text exposition format.
    pub fn encode(&self) -> Result<String, Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .map_err(|e| Error::Config(format!("encoding the metrics: {e}")))?;
        Ok(text)
    }
}

/// What the server loop keeps per connection to turn its counters into metric increments.
#[derive(Debug, Default)]
pub(crate) struct ConnectionMetrics {
    last: HashMap<ConnectionHandle, (ConnectionStats, bool)>,
}

impl ConnectionMetrics {
    /// Adds what `conn` counted since its last update, and its recovered ranges, to `m`.
    pub(crate) fn update(&mut self, m: &Metrics, handle: ConnectionHandle, conn: &mut Connection) {
        let now = conn.stats();
        let (before, was_established) = self.last.get(&handle).copied().unwrap_or_default();
        // Once done, the handshake stays done (a closed connection is no longer established).
        let established = was_established || conn.is_established();
        self.last.insert(handle, (now, established));
        let add = |c: &Counter, new: u64, old: u64| {
            c.inc_by(new.saturating_sub(old));
        };
        add(&m.bytes_sent, now.bytes_sent, before.bytes_sent);
        add(&m.packets_sent, now.packets_sent, before.packets_sent);
        add(&m.packets_lost, now.packets_lost, before.packets_lost);
        add(&m.copies_sent, now.copy_packets, before.copy_packets);
        add(
            &m.pto_expirations,
            now.pto_expirations,
            before.pto_expirations,
        );
        if established && !was_established {
            m.handshakes_in_flight.dec();
        }
        let policy = PolicyLabel {
            policy: recoup_recovery::RecoveryPolicy::name(conn.policy()).to_owned(),
        };
        let histogram = m.recovery_latency.get_or_create(&policy);
        for r in conn.drain_recovered() {
            histogram.observe(r.recovery_latency().as_secs_f64());
        }
    }

    /// A connection was accepted: its handshake is in flight.
    pub(crate) fn accepted(&mut self, m: &Metrics, handle: ConnectionHandle) {
        self.last
            .insert(handle, (ConnectionStats::default(), false));
        m.connections_accepted.inc();
        m.connections_open.inc();
        m.handshakes_in_flight.inc();
    }

    /// The endpoint dropped the connection (after a last [`ConnectionMetrics::update`]).
    pub(crate) fn removed(&mut self, m: &Metrics, handle: ConnectionHandle) {
        if let Some((_, established)) = self.last.remove(&handle) {
            m.connections_open.dec();
            if !established {
                m.handshakes_in_flight.dec();
            }
        }
    }
}

/// Serves `/metrics` and `/healthz` on `addr` from a thread of its own until dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (an address in use is an error naming it) and starts answering.
    pub fn start(
        addr: SocketAddr,
        metrics: Metrics,
        healthy: Arc<AtomicBool>,
    ) -> Result<Self, Error> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| Error::Config(format!("--metrics {addr}: cannot listen there: {e}")))?;
        let server = Arc::new(server);
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| Error::Config(format!("--metrics {addr}: not an IP address")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || answer(&server, &metrics, &healthy, &stop))
                .map_err(|e| Error::io("starting the metrics thread", e))?
        };
        Ok(Self {
            addr: bound,
            server,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address (the real port when bound to port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

fn answer(server: &tiny_http::Server, metrics: &Metrics, healthy: &AtomicBool, stop: &AtomicBool) {
    // OpenMetrics text, which Prometheus asks for first and which prometheus-client writes.
    let content_type: Option<tiny_http::Header> =
        "Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"
            .parse()
            .ok();
    for request in server.incoming_requests() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let path = request
            .url()
            .split('?')
            .next()
            .unwrap_or_default()
            .to_owned();
        let response = match path.as_str() {
            "/metrics" => match metrics.encode() {
                Ok(text) => {
                    let response = tiny_http::Response::from_string(text);
                    match &content_type {
                        Some(h) => response.with_header(h.clone()),
                        None => response,
                    }
                }
                Err(e) => tiny_http::Response::from_string(e.to_string()).with_status_code(500),
            },
            "/healthz" if healthy.load(Ordering::SeqCst) => {
                tiny_http::Response::from_string("ok\n")
            }
            "/healthz" => tiny_http::Response::from_string("draining\n").with_status_code(503),
            _ => tiny_http::Response::from_string("not found: /metrics, /healthz\n")
                .with_status_code(404),
        };
        if let Err(e) = request.respond(response) {
            tracing::debug!("metrics request: {e}");
        }
    }
}
