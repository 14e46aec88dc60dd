//! `recoup serve`: files and live streams ([`crate::live`]), or what an origin answers
//! ([`crate::origin`]), over HTTP/3 ([`crate::http3`]) or hq-interop, whichever ALPN the client
//! offers, and cloud-gaming sessions ([`crate::gaming`]) on their own ALPN, on the UDP driver.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use recoup_recovery::PolicySpec;
use recoup_time::Instant;
use recoup_transport::qlog::VantagePoint;
use recoup_transport::streams::{StreamEvent, StreamId};
use recoup_transport::{
    CloseReason, Connection, ConnectionHandle, Endpoint, Event, ServerConfig, TransportConfig,
};

use crate::clock::Clock;
use crate::content::{Content, ContentKind, Sources};
use crate::driver::{ConnectionHandler, Driver, Stopper};
use crate::error::Error;
use crate::gaming;
use crate::hq::{self, RequestBuffer, Root};
use crate::http3;
use crate::live::{self, LiveParams, LiveStream};
use crate::metrics::{ConnectionMetrics, Metrics, MetricsServer};
use crate::origin::{Origin, OriginRelay};
use crate::qlog_dir::{hex_id, QlogDir};
use crate::steer::Steering;
use crate::stream_io;
use crate::tls::{self, Identity};

/// File bytes read per refill of a response buffer.
const CHUNK: usize = 64 * 1024;
/// Application close code when the server stops (no error, RFC 9000 §20.2 leaves codes to it).
const SHUTDOWN_CODE: u64 = 0;
/// The application close code of a connection whose ALPN nothing here serves.
const NO_APPLICATION: u64 = 0x1;

/// What `recoup serve` needs.
#[derive(Debug)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Directory whose files are served; `None` serves live streams only.
    pub root: Option<PathBuf>,
    /// An HTTP/1.1 origin (`http://host:port[/prefix]`) every request is relayed from, instead
    /// of `root` and the synthetic live streams.
    pub origin: Option<String>,
    /// Live stream parameters a request's query does not set.
    pub live: LiveParams,
    pub identity: Identity,
    /// Its `policy` is the file policy, every connection's until its first request.
    pub transport: TransportConfig,
    /// The policy of a connection whose first request is live content.
    pub live_policy: PolicySpec,
    /// What the origin serves (with `origin`).
    pub origin_kind: ContentKind,
    pub qlog: Option<QlogDir>,
    /// Batch datagrams with UDP GSO where the OS supports it.
    pub gso: bool,
    /// When a new client must prove its address with a Retry first (RFC 9000 §8.1.2).
    pub retry: RetryMode,
    /// Refuse new connections with CONNECTION_REFUSED while this many are open (each worker
    /// holds its share).
    pub max_connections: Option<usize>,
    /// Serve Prometheus metrics and `/healthz` here (`crate::metrics`).
    pub metrics: Option<SocketAddr>,
    /// Workers, each a thread with its own socket on `listen` (SO_REUSEPORT) when more than one.
    pub workers: usize,
    /// A MoQ relay egress: the upstream to subscribe to (`crate::moq`).
    pub moq: Option<crate::moq::MoqOptions>,
}

/// A bound server: one worker, or several on one address; [`Server::run`] serves until
/// stopped or drained.
#[derive(Debug)]
pub struct Server {
    workers: Vec<Worker>,
    stopper: Stopper,
    metrics_server: Option<MetricsServer>,
}

/// One socket, its endpoint and the server logic behind it, run by a thread of its own.
#[derive(Debug)]
struct Worker {
    driver: Driver,
    app: FileServer,
}

/// When a new client must first prove its address with a Retry (RFC 9000 §8.1.2), which costs
/// it a round trip and the server no state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryMode {
    Off,
    /// Every new client.
    Always,
    /// While at least this many handshakes are in flight (a flood of Initials that never
    /// complete), so that they cannot hold the server's memory.
    Auto {
        handshakes: usize,
    },
}

/// Most workers: a connection ID's first byte names its worker.
pub const MAX_WORKERS: usize = 256;

impl Server {
    pub fn bind(options: ServeOptions) -> Result<Self, Error> {
        let n = options.workers;
        if !(1..=MAX_WORKERS).contains(&n) {
            return Err(Error::Config(format!(
                "--workers {n}: a server needs 1 to {MAX_WORKERS} workers"
            )));
        }
        if options.root.is_some() && options.origin.is_some() {
            return Err(Error::Config(
                "a root directory and an origin exclude each other".into(),
            ));
        }
        options
            .live
            .validate()
            .map_err(|e| Error::Config(format!("live stream defaults: {e}")))?;
        let reset_secret = stateless_reset_secret(&options.identity);
        let file_policy = options.transport.policy.clone();
        let metrics = options.metrics.map(|_| Metrics::default());
        let mut transport = options.transport;
        // A MoQ egress serves WebTransport, which needs HTTP Datagrams (RFC 9297 §2.1.1) and so
        // QUIC DATAGRAM frames (RFC 9221 §3 recommends 65535).
        if options.moq.is_some() && transport.datagrams.max_frame_size == 0 {
            transport.datagrams.max_frame_size = 65535;
        }
        let transport_datagrams = transport.datagrams.max_frame_size > 0;
        let upstream = options
            .moq
            .as_ref()
            .map(crate::moq::Upstream::start)
            .transpose()?;
        // The recovery latency histogram reads each lost range's record.
        transport.record_recovery |= metrics.is_some();
        let tls = tls::server_tls(options.identity)?;
        let retry_key = (options.retry != RetryMode::Off)
            .then(retry_key)
            .transpose()?;
        let healthy = Arc::new(AtomicBool::new(true));
        let mut workers = Vec::with_capacity(n);
        let open_connections = Arc::new(AtomicUsize::new(0));
        let mut addr = options.listen;
        for i in 0..n {
            let mut transport = transport.clone();
            // One worker keeps random connection IDs; several name the owner in the first byte.
            transport.cid_prefix = (n > 1).then(|| u8::try_from(i).unwrap_or(u8::MAX));
            let config = ServerConfig {
                tls: Arc::clone(&tls),
                transport,
            };
            let mut endpoint = Endpoint::new(Some(config.clone()), config.transport.local_cid_len);
            endpoint.set_stateless_reset_key(&reset_secret);
            if let Some(limit) = options.max_connections {
                // The workers count their connections together against the one limit.
                endpoint.set_connection_limit(limit);
                endpoint.share_connection_count(Arc::clone(&open_connections));
            }
            match (options.retry, &retry_key) {
                (RetryMode::Always, Some(key)) => endpoint.require_retry(key),
                // Each worker counts its own handshakes: its share of the threshold.
                (RetryMode::Auto { handshakes }, Some(key)) => {
                    endpoint.retry_above(key, handshakes.div_ceil(n).max(1));
                }
                _ => {}
            }
            let mut driver = if n > 1 {
                Driver::bind_shared(addr, endpoint, options.gso)?
            } else {
                Driver::bind(addr, endpoint, options.gso)?
            };
            // Port 0 picked a port for the first worker; the others join it.
            addr = driver.local_addr()?;
            if let Some(m) = &metrics {
                driver.set_metrics(m.clone());
            }
            let origin = options
                .origin
                .as_deref()
                .map(|url| Origin::new(url, driver.wakeup()))
                .transpose()?;
            let root = options.root.as_deref().map(Root::new).transpose()?;
            let clock = *driver.clock();
            let app = FileServer {
                worker: i,
                sources: Arc::new(Sources {
                    root,
                    live: options.live,
                    origin,
                    origin_kind: options.origin_kind,
                    metrics: metrics.clone(),
                    moq: upstream
                        .as_ref()
                        .map(|u| crate::moq::Egress::new(Arc::clone(u), driver.wakeup(), clock)),
                }),
                qlog: options.qlog.clone(),
                clock,
                conns: HashMap::new(),
                live_policy: options.live_policy.clone(),
                file_policy: file_policy.clone(),
                policy_chosen: HashSet::new(),
                draining: false,
                healthy: Arc::clone(&healthy),
                metrics: metrics.clone(),
                conn_metrics: ConnectionMetrics::default(),
                webtransport: transport_datagrams,
            };
            workers.push(Worker { driver, app });
        }
        let stopper = workers[0].driver.stopper();
        for w in &mut workers[1..] {
            w.driver.share_stopper(&stopper);
        }
        if n > 1 {
            let wakeups: Vec<_> = workers.iter().map(|w| w.driver.wakeup()).collect();
            let meshes = Steering::mesh(
                &wakeups,
                transport.local_cid_len,
                metrics.as_ref().map(|m| &m.datagrams_passed),
            );
            for (w, steering) in workers.iter_mut().zip(meshes) {
                w.driver.set_steering(steering);
            }
        }
        let metrics_server = match (options.metrics, &metrics) {
            (Some(addr), Some(m)) => Some(MetricsServer::start(addr, m.clone(), healthy)?),
            _ => None,
        };
        Ok(Self {
            workers,
            stopper,
            metrics_server,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.workers[0].driver.local_addr()
    }

    /// Where `/metrics` and `/healthz` are served, with `ServeOptions::metrics`.
    #[must_use]
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_server.as_ref().map(MetricsServer::local_addr)
    }

    /// Stops or drains [`Server::run`] from another thread (a signal handler): every worker.
    #[must_use]
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// How long [`Stopper::drain`] lets requests in flight finish before closing.
    pub fn set_drain_timeout(&mut self, timeout: std::time::Duration) {
        for w in &mut self.workers {
            w.driver.set_drain_timeout(timeout);
        }
    }

    /// Serves until stopped or drained, each worker on a thread of its own, then closes every
    /// connection. A worker that panics is logged and its socket closed; its clients' next
    /// datagrams reach the other workers, which answer them with a stateless reset (RFC 9000
    /// §10.3: the reset key is the same for all), and the other workers keep serving.
    pub fn run(self) -> Result<(), Error> {
        let Self {
            workers,
            metrics_server,
            ..
        } = self;
        let outcomes: Vec<Result<(), Error>> = std::thread::scope(|scope| {
            let threads: Vec<_> = workers
                .into_iter()
                .enumerate()
                .map(|(i, mut w)| {
                    std::thread::Builder::new()
                        .name(format!("worker {i}"))
                        .spawn_scoped(scope, move || {
                            w.driver.run(&mut w.app, SHUTDOWN_CODE).map(|_| ())
                        })
                        .map_err(|e| Error::io("starting a worker", e))
                })
                .collect();
            threads
                .into_iter()
                .enumerate()
                .map(|(i, t)| match t?.join() {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        tracing::error!(
                            worker = i,
                            "worker panicked: its connections are gone, the others kept serving"
                        );
                        Err(Error::Config(format!("worker {i} panicked")))
                    }
                })
                .collect()
        });
        drop(metrics_server);
        outcomes.into_iter().collect()
    }
}

/// The key of Retry tokens (RFC 9000 §8.1.2), shared by the workers. It authenticates tokens
/// only this process issued; a restart forgets it, which only costs clients in the middle of a
/// handshake another Retry round.
fn retry_key() -> Result<[u8; 32], Error> {
    let mut key = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
        .map_err(|_| Error::Config("no randomness for the Retry token key".into()))?;
    Ok(key)
}

#[derive(Debug)]
struct FileServer {
    /// This worker's index (0 with one worker), in its log lines.
    worker: usize,
    sources: Arc<Sources>,
    qlog: Option<QlogDir>,
    /// The driver's clock, for qlog's wall-clock `reference_time`.
    clock: Clock,
    conns: HashMap<ConnectionHandle, Session>,
    /// The policy for connections whose first request is live content; the others keep
    /// `file_policy`, which every connection starts with.
    live_policy: PolicySpec,
    file_policy: PolicySpec,
    /// Connections whose policy follows their first request's kind already.
    policy_chosen: HashSet<ConnectionHandle>,
    /// A drain began ([`ConnectionHandler::drain`]): no new requests; each connection closes
    /// once its responses are done.
    draining: bool,
    /// What `/healthz` says: cleared by a drain, so a load balancer sends no more clients.
    healthy: Arc<AtomicBool>,
    metrics: Option<Metrics>,
    conn_metrics: ConnectionMetrics,
    /// HTTP/3 connections offer WebTransport, whose datagrams need QUIC DATAGRAM frames:
    /// on when `--datagram-frame-size` announces them (RFC 9297 §2.1.1).
    webtransport: bool,
}

/// A connection's application protocol, known once TLS agreed on an ALPN token.
#[derive(Debug)]
enum Session {
    Handshaking,
    Hq(ServerConn),
    H3(Box<http3::session::Session>, Arc<http3::serve::ServeState>),
    Gaming(Box<gaming::ServeSession>),
    /// MoQ over raw QUIC: a moq-net session on the connection itself (`crate::moq`), run as
    /// HTTP/3 is, by tasks over the h3 adapter's mailbox.
    Moq(Box<http3::session::Session>),
    /// An ALPN nothing here serves: the connection is closed with this reason once its
    /// handshake completes (a close during the handshake could not carry it, RFC 9000
    /// §10.2.3).
    Refused {
        code: u64,
        reason: String,
    },
}

#[derive(Debug, Default)]
struct ServerConn {
    requests: HashMap<StreamId, RequestBuffer>,
    responses: HashMap<StreamId, Response>,
    /// The kind of the first request resolved.
    first_kind: Option<ContentKind>,
}

/// What is being sent on one stream.
#[derive(Debug)]
enum Response {
    File(FileResponse),
    Live(Box<LiveStream>),
    Origin(OriginRelay),
    /// An explanation for a refused live request, then FIN: a player shows it instead of
    /// merely seeing the stream fail.
    Text {
        text: Vec<u8>,
        sent: usize,
    },
}

/// A file being sent on one stream.
#[derive(Debug)]
struct FileResponse {
    file: File,
    /// Bytes read and not yet taken by the stream; the stream keeps what it takes as it is,
    /// so file bytes are copied once, into packets.
    buf: Bytes,
    eof: bool,
}

impl FileServer {
    /// Gives a connection the policy of its first request's kind; `false` if that must wait
    /// (lost data in recovery: `Connection::set_policy`), to be tried on its next drive.
    fn choose_policy(&self, now: Instant, kind: ContentKind, conn: &mut Connection) -> bool {
        if kind == ContentKind::File || self.live_policy == self.file_policy {
            return true;
        }
        match conn.set_policy(now, &self.live_policy) {
            Ok(()) => {
                tracing::info!(
                    remote = %conn.remote_address(),
                    policy = %self.live_policy,
                    "live content: loss-recovery policy set"
                );
                true
            }
            Err(e) => {
                tracing::debug!(remote = %conn.remote_address(), "policy change waits: {e}");
                false
            }
        }
    }
}

/// The session of a connection whose ALPN is `alpn`, neither HTTP nor gaming: a MoQ session
/// over raw QUIC when `alpn` is a MoQ version and `--moq` is on (`moq`); otherwise the
/// connection is closed, naming the ALPN: TLS offers MoQ also without `--moq`, so a MoQ client
/// learns why (any other ALPN TLS refuses, with no_application_protocol, RFC 9001 §8.1).
fn moq_session(
    moq: Option<&crate::moq::Egress>,
    now: Instant,
    alpn: &[u8],
    remote: SocketAddr,
) -> Session {
    let shown = String::from_utf8_lossy(alpn).into_owned();
    match (crate::moq::quic::moq_alpn(alpn), moq) {
        (Some(alpn), Some(egress)) => {
            let moq = http3::session::Session::new(now, true);
            moq.spawner().spawn(crate::moq::serve_quic(
                egress.clone(),
                moq.quic(),
                alpn,
                moq.timers(),
                remote,
            ));
            Session::Moq(Box::new(moq))
        }
        (Some(_), None) => {
            tracing::warn!(%remote, alpn = %shown, "MoQ session refused: MoQ is off (recoup serve --moq URL serves it)");
            // moq-lite's UNAUTHORIZED: the client may not have MoQ here.
            Session::Refused {
                code: u64::from(moq_net::SessionError::Unauthorized.to_code()),
                reason: format!("ALPN {shown}: MoQ is off (recoup serve --moq URL serves it)"),
            }
        }
        (None, _) => {
            tracing::warn!(%remote, alpn = %shown, "connection refused: no application for its ALPN");
            Session::Refused {
                code: NO_APPLICATION,
                reason: format!("ALPN {shown}: not served"),
            }
        }
    }
}

impl ConnectionHandler for FileServer {
    fn accepted(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection) {
        tracing::info!(remote = %conn.remote_address(), worker = self.worker, "connection accepted");
        if let Some(dir) = &self.qlog {
            let id = hex_id(&conn.original_dcid());
            match dir.create(VantagePoint::Server, &id, now, self.clock.unix_ms(now)) {
                Ok(writer) => conn.set_qlog(writer),
                Err(e) => tracing::warn!("qlog: {e}"),
            }
        }
        self.conns.insert(handle, Session::Handshaking);
        if let Some(m) = &self.metrics {
            self.conn_metrics.accepted(m, handle);
        }
    }

    fn drive(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection) {
        let Some(session) = self.conns.get_mut(&handle) else {
            return;
        };
        if matches!(session, Session::Handshaking) {
            match conn.alpn() {
                Some(http3::ALPN) => {
                    let remote = conn.remote_address();
                    let (h3, state) = http3::serve::session(
                        now,
                        Arc::clone(&self.sources),
                        remote,
                        self.webtransport,
                    );
                    if self.draining {
                        state.drain();
                    }
                    *session = Session::H3(Box::new(h3), state);
                }
                Some(gaming::ALPN) => {
                    let epoch = self.clock.unix_ms(Instant::ZERO);
                    let seed = crate::os_seed();
                    *session = Session::Gaming(Box::new(gaming::ServeSession::new(epoch, seed)));
                }
                Some(hq::ALPN) => *session = Session::Hq(ServerConn::default()),
                Some(alpn) => {
                    let alpn = alpn.to_vec();
                    *session =
                        moq_session(self.sources.moq.as_ref(), now, &alpn, conn.remote_address());
                }
                None => {}
            }
        }
        match session {
            Session::H3(h3, state) => {
                if let Some(reason) = h3.drive(now, conn) {
                    log_close(conn.remote_address(), &reason);
                }
                let delivered = conn.all_stream_data_acked();
                if state.draining() && state.drained() && delivered && !conn.is_closing() {
                    tracing::info!(remote = %conn.remote_address(), "drained: closing");
                    conn.close(now, http3::NO_ERROR, "draining");
                }
            }
            Session::Hq(state) => {
                drive_hq(state, now, conn, &self.sources, self.draining);
                let idle = state.requests.is_empty()
                    && state.responses.is_empty()
                    && conn.all_stream_data_acked();
                if self.draining && idle && !conn.is_closing() {
                    tracing::info!(remote = %conn.remote_address(), "drained: closing");
                    conn.close(now, SHUTDOWN_CODE, "draining");
                }
            }
            Session::Gaming(g) => {
                if let Some(reason) = g.drive(now, conn) {
                    log_close(conn.remote_address(), &reason);
                }
                if self.draining && !conn.is_closing() {
                    conn.close(now, SHUTDOWN_CODE, "draining");
                }
            }
            Session::Moq(moq) => {
                if let Some(reason) = moq.drive(now, conn) {
                    log_close(conn.remote_address(), &reason);
                }
                // A raw MoQ session has no GOAWAY of its own here: a drain closes it.
                if self.draining && !conn.is_closing() {
                    conn.close(now, SHUTDOWN_CODE, "draining");
                }
            }
            Session::Handshaking | Session::Refused { .. } => {
                if let Session::Refused { code, reason } = session {
                    if conn.is_established() && !conn.is_closing() {
                        conn.close(now, *code, reason);
                    }
                }
                while let Some(event) = conn.poll_event() {
                    if let Event::Closed(reason) = event {
                        log_close(conn.remote_address(), &reason);
                    }
                }
                if self.draining && !conn.is_closing() {
                    conn.close(now, SHUTDOWN_CODE, "draining");
                }
            }
        }
        if !self.policy_chosen.contains(&handle) {
            let first = match session {
                Session::Hq(state) => state.first_kind,
                Session::H3(_, state) => state.first.get().copied(),
                Session::Gaming(_)
                | Session::Moq(_)
                | Session::Handshaking
                | Session::Refused { .. } => None,
            };
            if let Some(kind) = first {
                if self.choose_policy(now, kind, conn) {
                    self.policy_chosen.insert(handle);
                }
            }
        }
        if let Some(m) = &self.metrics {
            self.conn_metrics.update(m, handle, conn);
        }
    }

    fn removed(&mut self, handle: ConnectionHandle) {
        self.conns.remove(&handle);
        self.policy_chosen.remove(&handle);
        if let Some(m) = &self.metrics {
            self.conn_metrics.removed(m, handle);
        }
        tracing::info!(open = self.conns.len(), "connection released");
    }

    fn finished(&self) -> bool {
        self.draining && self.conns.is_empty()
    }

    fn drain(&mut self, _now: Instant) {
        self.draining = true;
        self.healthy.store(false, Ordering::SeqCst);
        for session in self.conns.values_mut() {
            match session {
                Session::H3(_, state) => state.drain(),
                Session::Hq(state) => {
                    for response in state.responses.values_mut() {
                        if let Response::Live(live) = response {
                            live.end();
                        }
                    }
                }
                // Nothing in flight yet, or a session that has no end to wait for: closed when
                // driven in this turn.
                Session::Handshaking
                | Session::Gaming(_)
                | Session::Moq(_)
                | Session::Refused { .. } => {}
            }
        }
        tracing::info!(open = self.conns.len(), "draining: no new connections");
    }

    fn next_wakeup(&self, handle: ConnectionHandle) -> Option<Instant> {
        match self.conns.get(&handle)? {
            Session::Hq(c) => c
                .responses
                .values()
                .filter_map(|r| match r {
                    Response::Live(live) => live.next_wakeup(),
                    _ => None,
                })
                .min(),
            Session::H3(h3, _) => h3.next_wakeup(),
            Session::Gaming(g) => g.next_wakeup(),
            Session::Moq(moq) => moq.next_wakeup(),
            Session::Handshaking | Session::Refused { .. } => None,
        }
    }
}

/// DATAGRAM frames (RFC 9221) on an hq-interop connection go back as they came, when the server
/// announces `max_datagram_frame_size` (`--datagram-frame-size`): hq-interop gives them no
/// meaning, and an echo lets a peer check both directions against a real socket.
fn echo_datagrams(conn: &mut Connection, now: Instant) {
    while let Some(datagram) = conn.datagram_recv() {
        if let Err(e) = conn.datagram_send(now, datagram) {
            tracing::debug!(remote = %conn.remote_address(), %e, "datagram not echoed");
        }
    }
}

/// One turn of an hq-interop connection.
/// One turn of an hq-interop connection; `draining` refuses new requests (hq-interop has no
/// GOAWAY).
fn drive_hq(
    state: &mut ServerConn,
    now: Instant,
    conn: &mut Connection,
    sources: &Sources,
    draining: bool,
) {
    while let Some(event) = conn.poll_event() {
        match event {
            Event::Connected => {
                tracing::debug!(remote = %conn.remote_address(), "handshake done")
            }
            Event::Closed(reason) => {
                log_close(conn.remote_address(), &reason);
                tracing::debug!(remote = %conn.remote_address(), stats = ?conn.stats(), "connection stats");
            }
            Event::Stream(StreamEvent::Reset { id, code })
            | Event::Stream(StreamEvent::Stopped { id, code }) => {
                tracing::debug!(stream = id.0, code, "stream abandoned by the peer");
                state.requests.remove(&id);
                state.responses.remove(&id);
            }
            Event::Stream(StreamEvent::Finished(_)) => {}
            Event::DatagramReceived => echo_datagrams(conn, now),
        }
    }
    while let Some(id) = conn.accept_stream(true) {
        if draining {
            conn.stream_reset(now, id, hq::REFUSED_CODE).ok();
            conn.stream_stop(id, hq::REFUSED_CODE).ok();
            continue;
        }
        state.requests.insert(id, RequestBuffer::default());
    }
    // hq-interop has no unidirectional streams; refuse any the peer opens.
    while let Some(id) = conn.accept_stream(false) {
        conn.stream_stop(id, hq::REFUSED_CODE).ok();
    }
    for id in conn.readable_streams() {
        state.read_request(conn, now, sources, id);
    }
    state.write_responses(conn, now);
}

impl ServerConn {
    fn read_request(
        &mut self,
        conn: &mut Connection,
        now: Instant,
        sources: &Sources,
        id: StreamId,
    ) {
        let mut buf = [0u8; 4096];
        let Some(request) = self.requests.get_mut(&id) else {
            // Bytes after a complete request mean nothing in HTTP/0.9; drain them.
            while let Ok((n, fin)) = stream_io::read(conn, id, &mut buf) {
                if n == 0 || fin {
                    break;
                }
            }
            return;
        };
        let Some(outcome) = request.read(conn, id) else {
            return;
        };
        self.requests.remove(&id);
        let remote = conn.remote_address();
        let first_kind = &mut self.first_kind;
        let response = outcome.and_then(|path| match sources.resolve(&path).inspect(|c| {
            first_kind.get_or_insert(c.kind(sources.origin_kind));
        }) {
            Ok(Content::File { file, .. }) => {
                tracing::info!(%remote, stream = id.0, %path, "GET");
                Ok(Response::File(FileResponse {
                    file,
                    buf: Bytes::new(),
                    eof: false,
                }))
            }
            Ok(Content::Live { name, params }) => {
                let live = live_response(&name, &params, now, remote, id);
                Ok(Response::Live(Box::new(live.with_metrics(sources.metrics.as_ref()))))
            }
            Ok(Content::Origin(fetch)) => {
                tracing::info!(%remote, stream = id.0, %path, origin = fetch.url(), "GET relayed");
                Ok(Response::Origin(OriginRelay::new(fetch)))
            }
            // A refused live request is explained in the stream, for a player to show.
            Err(e) if live::is_live(&path) => {
                tracing::info!(%remote, stream = id.0, %path, "live request refused: {e}");
                Ok(Response::Text {
                    text: format!("error: {e}\n").into_bytes(),
                    sent: 0,
                })
            }
            Err(e) => Err(e),
        });
        match response {
            Ok(response) => {
                self.responses.insert(id, response);
            }
            Err(e) => {
                tracing::info!(%remote, stream = id.0, "request refused: {e}");
                let code = hq::refusal_code(&e);
                conn.stream_reset(now, id, code).ok();
                conn.stream_stop(id, code).ok();
            }
        }
    }

    fn write_responses(&mut self, conn: &mut Connection, now: Instant) {
        let remote = conn.remote_address();
        self.responses
            .retain(|&id, response| match response.pump(conn, id, now) {
                Ok(false) => true,
                Ok(true) => {
                    match response {
                        Response::Live(live) => tracing::info!(
                            %remote,
                            stream = id.0,
                            frames = live.frames(),
                            bytes = live.written(),
                            max_waiting = live.max_waiting(),
                            "live stream finished"
                        ),
                        Response::Origin(relay) => tracing::info!(
                            %remote,
                            stream = id.0,
                            origin = relay.url(),
                            bytes = relay.written(),
                            "relayed response finished"
                        ),
                        Response::File(_) | Response::Text { .. } => {}
                    }
                    false
                }
                Err(e) => {
                    tracing::warn!(%remote, stream = id.0, "response failed: {e}");
                    conn.stream_reset(now, id, hq::REFUSED_CODE).ok();
                    false
                }
            });
    }
}

/// The stateless reset key (RFC 9000 §10.3.2), derived from the TLS private key: a server
/// restarted with the same `--cert`/`--key` resets the connections of its previous run when
/// their clients next send (§10.3); a self-signed run has a fresh key, so only its own.
fn stateless_reset_secret(identity: &tls::Identity) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"recoup stateless reset key");
    ctx.update(identity.key.secret_der());
    let mut secret = [0u8; 32];
    secret.copy_from_slice(ctx.finish().as_ref());
    secret
}

/// The live stream a request resolved to.
fn live_response(
    name: &str,
    p: &LiveParams,
    now: Instant,
    remote: SocketAddr,
    id: StreamId,
) -> LiveStream {
    tracing::info!(
        %remote,
        stream = id.0,
        %name,
        bitrate = p.encoder.bitrate,
        fps = p.encoder.fps,
        gop = p.encoder.gop,
        duration_ms = p.duration.as_millis(),
        "GET live stream"
    );
    LiveStream::new(p, now, crate::os_seed())
}

impl Response {
    /// Moves bytes into the stream until it pushes back; `true` once the FIN is queued.
    fn pump(&mut self, conn: &mut Connection, id: StreamId, now: Instant) -> Result<bool, Error> {
        match self {
            Self::File(f) => f.pump(conn, id),
            Self::Live(live) => live.pump(conn, id, now),
            Self::Origin(relay) => relay.pump(conn, id),
            Self::Text { text, sent } => {
                while *sent < text.len() {
                    let n = stream_io::write(conn, id, &text[*sent..])?;
                    if n == 0 {
                        return Ok(false);
                    }
                    *sent += n;
                }
                conn.stream_finish(id)?;
                Ok(true)
            }
        }
    }
}

impl FileResponse {
    /// Moves file bytes into the stream until it pushes back; `true` once the FIN is queued.
    fn pump(&mut self, conn: &mut Connection, id: StreamId) -> Result<bool, Error> {
        loop {
            if self.buf.is_empty() {
                if self.eof {
                    conn.stream_finish(id)?;
                    return Ok(true);
                }
                // A fresh buffer each time (the last one may still be held by the stream),
                // filled without being zeroed first.
                let mut chunk = Vec::with_capacity(CHUNK);
                let n = (&mut self.file)
                    .take(CHUNK as u64)
                    .read_to_end(&mut chunk)
                    .map_err(|e| Error::io("reading the served file", e))?;
                self.eof = n == 0;
                self.buf = Bytes::from(chunk);
                continue;
            }
            if stream_io::write_chunk(conn, id, &mut self.buf)? == 0 {
                return Ok(false);
            }
        }
    }
}

fn log_close(remote: SocketAddr, reason: &CloseReason) {
    match reason {
        CloseReason::Local(e) | CloseReason::Remote(e) if e.application && e.code == 0 => {
            tracing::info!(%remote, "connection closed");
        }
        other => tracing::warn!(%remote, "connection closed: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(session: &Session) -> (u64, &str) {
        match session {
            Session::Refused { code, reason } => (*code, reason),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_moq_connection_without_moq_and_an_unserved_alpn_are_refused_naming_the_alpn() {
        let remote: SocketAddr = "127.0.0.1:4433".parse().expect("address");
        let off = moq_session(None, Instant::ZERO, b"moq-lite-06", remote);
        let (code, reason) = refusal(&off);
        // moq-lite's UNAUTHORIZED, which a MoQ client reports as such.
        assert_eq!(code, 0x2);
        assert!(
            reason.contains("moq-lite-06") && reason.contains("MoQ is off"),
            "{reason}"
        );
        let unknown = moq_session(None, Instant::ZERO, b"spdy/3", remote);
        let (code, reason) = refusal(&unknown);
        assert_eq!(code, NO_APPLICATION);
        assert!(reason.contains("spdy/3"), "{reason}");
    }
}
