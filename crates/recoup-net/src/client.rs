//! `recoup get`: downloads of one or more URLs on one connection of the UDP driver, over
//! HTTP/3 ([`crate::http3`]) or hq-interop, as many at a time as the server's stream limit lets.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use recoup_time::Instant;
use recoup_transport::qlog::VantagePoint;
use recoup_transport::streams::{StreamEvent, StreamId};
use recoup_transport::{
    ClientConfig, CloseReason, Connection, ConnectionHandle, Endpoint, Event, TransportConfig,
};

use crate::bodies::{Bodies, Fetched, Files};
use crate::driver::{ConnectionHandler, Driver, Stopper};
use crate::error::Error;
use crate::hq;
use crate::http3;
use crate::qlog_dir::{hex_id, QlogDir};
use crate::stream_io;
use crate::url::Url;

/// Application close code after a complete download: no error.
const DONE_CODE: u64 = 0;
/// How long to wait before trying a migration again that the connection refused.
const MIGRATE_RETRY: Duration = Duration::from_millis(10);

/// The application protocol of a download.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/3 (RFC 9114).
    #[default]
    H3,
    /// HTTP/0.9 over QUIC, the interop runner's `hq-interop`.
    Hq,
}

impl Protocol {
    /// The ALPN token of the protocol.
    #[must_use]
    pub fn alpn(self) -> &'static [u8] {
        match self {
            Self::H3 => http3::ALPN,
            Self::Hq => hq::ALPN,
        }
    }

    /// The ALPN tokens a client offers for `protocol`; `None` offers both, HTTP/3 first, and
    /// lets the server choose.
    #[must_use]
    pub fn offer(protocol: Option<Self>) -> &'static [&'static [u8]] {
        match protocol {
            Some(Self::H3) => &[http3::ALPN],
            Some(Self::Hq) => &[hq::ALPN],
            None => &[http3::ALPN, hq::ALPN],
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "h3" => Ok(Self::H3),
            "hq-interop" => Ok(Self::Hq),
            other => Err(Error::Config(format!(
                "unknown ALPN {other:?} (h3, hq-interop)"
            ))),
        }
    }
}

/// After this long without a datagram from the server the client sends a PING: a server that
/// restarted answers with a stateless reset (RFC 9000 §10.3), reported at once instead of after
/// the idle timeout.
const SILENCE_PING: Duration = Duration::from_secs(1);

/// What `recoup get` needs.
#[derive(Debug)]
pub struct GetOptions {
    /// What to fetch: at least one URL, all on one host and port ([`Url::parse_all`]).
    pub urls: Vec<Url>,
    /// Must offer [`Protocol::offer`]`(protocol)` ([`crate::tls::client_tls`]).
    pub tls: std::sync::Arc<rustls::ClientConfig>,
    /// The protocol to speak; `None` speaks whichever the server chose of those offered.
    pub protocol: Option<Protocol>,
    /// Bytes to ask for (`a-b`, `a-` or `-n`; HTTP/3 only), of every URL: each body is that
    /// part.
    pub range: Option<String>,
    pub transport: TransportConfig,
    pub qlog: Option<QlogDir>,
    /// Batch datagrams with UDP GSO where the OS supports it.
    pub gso: bool,
    /// How long to wait for the server to complete the handshake before giving up.
    pub timeout: Duration,
    /// Move to a new local socket (a new port) this long after the start, mid-transfer, with a
    /// new connection ID (RFC 9000 §9.2, §9.5).
    pub migrate_after: Option<Duration>,
}

/// What a finished download measured.
#[derive(Debug)]
pub struct Download {
    /// Body bytes received, over all URLs.
    pub bytes: u64,
    /// From the first packet to the last byte of the last body.
    pub elapsed: Duration,
    /// What became of each URL, in the order of [`GetOptions::urls`].
    pub files: Vec<Result<Fetched, Error>>,
    /// Body bytes received when the client migrated to a new socket (`migrate_after`), if it
    /// did before the bodies were complete.
    pub migrated_at: Option<u64>,
    /// 1-RTT key updates, ours and the server's (RFC 9001 §6).
    pub key_updates: u64,
    /// recoup's FEC extension, when the server sent repair symbols: REPAIR frames received,
    /// and the packets and stream bytes restored from them, by the end of the last body.
    pub repair_frames: u64,
    pub fec_recovered_packets: u64,
    pub fec_recovered_bytes: u64,
}

/// A client ready to download; [`Client::run`] does it.
#[derive(Debug)]
pub struct Client {
    driver: Driver,
    handle: ConnectionHandle,
    /// `host:port` as in the URLs, for HTTP/3's `:authority`.
    authority: String,
    paths: Vec<String>,
    range: Option<String>,
    start: Instant,
    remote: SocketAddr,
    timeout: Duration,
    migrate_after: Option<Duration>,
}

impl Client {
    /// Binds a local socket and starts the handshake with the URLs' host.
    pub fn connect(options: GetOptions) -> Result<Self, Error> {
        if options.range.is_some() && options.protocol == Some(Protocol::Hq) {
            return Err(Error::Config(
                "a byte range needs HTTP/3 (hq-interop has no headers)".into(),
            ));
        }
        let Some(url) = options.urls.first() else {
            return Err(Error::Config("no URL to fetch".into()));
        };
        if let Some(other) = options.urls.iter().find(|u| !u.same_origin(url)) {
            return Err(Error::Config(format!(
                "{other} is not on {}: one connection fetches all URLs",
                url.authority()
            )));
        }
        let (driver, handle, start, remote) = dial(
            url,
            options.transport,
            options.tls,
            options.gso,
            options.qlog.as_ref(),
        )?;
        let authority = url.authority();
        Ok(Self {
            driver,
            handle,
            authority,
            paths: options.urls.into_iter().map(|u| u.path).collect(),
            range: options.range,
            start,
            remote,
            timeout: options.timeout,
            migrate_after: options.migrate_after,
        })
    }

    #[must_use]
    pub fn stopper(&self) -> Stopper {
        self.driver.stopper()
    }

    /// Downloads the one URL into `out`, calling `progress` with the bytes received so far;
    /// its failure is the error.
    pub fn run(
        self,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Download, Error> {
        if self.paths.len() != 1 {
            return Err(Error::Config(format!(
                "{} URLs to write to one output: use run_all",
                self.paths.len()
            )));
        }
        let mut body = Body {
            out,
            progress,
            received: 0,
        };
        let mut download = self.run_all(&mut body)?;
        if download.files.iter().any(Result::is_err) {
            if let Some(Err(e)) = download.files.pop() {
                return Err(e);
            }
        }
        Ok(download)
    }

    /// Downloads every URL into `bodies`, concurrently on the one connection. A URL that fails
    /// fails alone (its outcome in [`Download::files`]); the error is for the connection that
    /// failed before it could ask for anything, and for an interruption.
    pub fn run_all(mut self, bodies: &mut dyn Bodies) -> Result<Download, Error> {
        let mut app = Negotiated {
            handle: self.handle,
            start: self.start,
            authority: self.authority,
            paths: self.paths,
            range: self.range,
            bodies: Some(bodies),
            chosen: None,
            error: None,
            remote: self.remote,
            timeout: self.timeout,
            deadline: self.start + self.timeout,
            heard: (0, self.start),
            established: false,
            ever_established: false,
            migrate_at: self.migrate_after.map(|d| self.start + d),
            rebind: false,
            migrated_at: None,
            key_updates: 0,
            fec: (0, 0, 0),
            fec_final: false,
        };
        let stopped = self.driver.run(&mut app, http3::NO_ERROR)?;
        if stopped {
            return Err(Error::Interrupted);
        }
        // A timeout seen by `Negotiated` explains the close the application saw after it.
        if let Some(e) = app.error {
            return Err(e);
        }
        let Some(files) = app.chosen.map(Chosen::into_files) else {
            return Err(Error::Connection(
                "the connection ended during the handshake".into(),
            ));
        };
        let (bytes, done_at) = (files.total, files.done_at);
        let mut outcomes =
            files.into_outcomes(|| Error::Connection("the connection ended early".into()));
        if !app.ever_established && outcomes.iter().all(Result::is_err) {
            // Nothing was asked: the one reason is the connection's, not any URL's.
            if let Some(Err(e)) = outcomes.pop() {
                return Err(e);
            }
        }
        let end = done_at.unwrap_or(self.start);
        Ok(Download {
            bytes,
            elapsed: end.saturating_duration_since(self.start),
            files: outcomes,
            migrated_at: app.migrated_at,
            key_updates: app.key_updates,
            repair_frames: app.fec.0,
            fec_recovered_packets: app.fec.1,
            fec_recovered_bytes: app.fec.2,
        })
    }
}

/// Binds a local socket of `url`'s address family and starts the handshake with its host,
/// with a qlog trace when `qlog` is given: the driver, the connection, when it started, and
/// the server's address.
pub(crate) fn dial(
    url: &Url,
    transport: TransportConfig,
    tls: std::sync::Arc<rustls::ClientConfig>,
    gso: bool,
    qlog: Option<&QlogDir>,
) -> Result<(Driver, ConnectionHandle, Instant, SocketAddr), Error> {
    let remote = url.resolve()?;
    let bind = any_port_for(remote);
    let config = ClientConfig {
        transport,
        tls,
        server_name: url.host.clone(),
    };
    let endpoint = Endpoint::new(None, config.transport.local_cid_len);
    let mut driver = Driver::bind(bind, endpoint, gso)?;
    let start = driver.clock().now();
    let handle = driver.endpoint_mut().connect(start, &config, remote)?;
    let unix_ms = driver.clock().unix_ms(start);
    if let Some(dir) = qlog {
        if let Some(conn) = driver.endpoint_mut().connection_mut(handle) {
            let id = hex_id(&conn.original_dcid());
            match dir.create(VantagePoint::Client, &id, start, unix_ms) {
                Ok(writer) => conn.set_qlog(writer),
                Err(e) => tracing::warn!("qlog: {e}"),
            }
        }
    }
    Ok((driver, handle, start, remote))
}

/// A local address on any port of `remote`'s family, to bind a client socket to.
pub(crate) fn any_port_for(remote: SocketAddr) -> SocketAddr {
    if remote.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    }
}

/// Why a handshake that has not completed after `timeout` failed: no answer at all, or an
/// incomplete handshake.
pub(crate) fn handshake_timeout(conn: &Connection, remote: SocketAddr, timeout: Duration) -> Error {
    let secs = timeout.as_secs_f64();
    Error::Connection(if conn.stats().packets_received == 0 {
        format!("no response from {remote} after {secs} s")
    } else {
        format!("the handshake with {remote} did not complete after {secs} s")
    })
}

/// [`Client::run`]'s one body: a writer and a progress callback.
struct Body<'a> {
    out: &'a mut dyn Write,
    progress: &'a mut dyn FnMut(u64),
    received: u64,
}

impl Bodies for Body<'_> {
    fn write(&mut self, _index: usize, data: &[u8]) -> Result<(), Error> {
        self.out
            .write_all(data)
            .map_err(|e| Error::io("writing the body", e))?;
        self.received += data.len() as u64;
        (self.progress)(self.received);
        Ok(())
    }

    fn complete(&mut self, _index: usize, _bytes: u64) -> Result<(), Error> {
        self.out
            .flush()
            .map_err(|e| Error::io("writing the body", e))
    }

    fn failed(&mut self, _index: usize, _error: &Error) {}
}

/// The download on whichever protocol the handshake agreed on: the application is chosen
/// once the ALPN is known, before the application sees the handshake complete.
struct Negotiated<'a> {
    handle: ConnectionHandle,
    start: Instant,
    authority: String,
    paths: Vec<String>,
    range: Option<String>,
    /// Where the bodies go, until the application that writes them is chosen.
    bodies: Option<&'a mut dyn Bodies>,
    chosen: Option<Chosen<'a>>,
    /// Why no application was chosen, or why the connection was given up.
    error: Option<Error>,
    remote: SocketAddr,
    timeout: Duration,
    /// Give up if the handshake has not completed by then.
    deadline: Instant,
    /// Datagrams received from the server so far, and when the count last grew.
    heard: (u64, Instant),
    established: bool,
    /// The handshake completed at some point (so requests could be sent).
    ever_established: bool,
    /// When to migrate, until done.
    migrate_at: Option<Instant>,
    /// Migrated: the driver moves to a new socket.
    rebind: bool,
    /// Body bytes received when the client migrated.
    migrated_at: Option<u64>,
    key_updates: u64,
    /// The connection's FEC counters (see [`Download`]), frozen when the last body ends.
    fec: (u64, u64, u64),
    fec_final: bool,
}

enum Chosen<'a> {
    Hq(HqGet<'a>),
    H3(Box<http3::get::H3Get<'a>>),
}

impl<'a> Chosen<'a> {
    fn files(&self) -> &Files<'a> {
        match self {
            Self::Hq(get) => &get.files,
            Self::H3(get) => &get.files,
        }
    }

    fn into_files(self) -> Files<'a> {
        match self {
            Self::Hq(get) => get.files,
            Self::H3(get) => get.files,
        }
    }
}

impl Negotiated<'_> {
    fn choose(&mut self, conn: &mut Connection) -> Result<(), Error> {
        let Some(alpn) = conn.alpn() else {
            return Ok(());
        };
        let Some(bodies) = self.bodies.take() else {
            return Ok(());
        };
        let files = Files::new(bodies, self.start, self.paths.len());
        if alpn == http3::ALPN {
            self.chosen = Some(Chosen::H3(Box::new(http3::get::H3Get::new(
                self.start,
                self.handle,
                &self.authority,
                &self.paths,
                self.range.as_deref(),
                files,
            )?)));
            return Ok(());
        }
        if self.range.is_some() {
            return Err(Error::Config(
                "the server chose hq-interop, which has no byte ranges".into(),
            ));
        }
        tracing::debug!("the server chose hq-interop");
        self.chosen = Some(Chosen::Hq(HqGet {
            handle: self.handle,
            paths: std::mem::take(&mut self.paths),
            files,
            next: 0,
            streams: HashMap::new(),
            connected: false,
            closed: false,
        }));
        Ok(())
    }
}

impl Negotiated<'_> {
    /// Migrates once the time has come and the connection can (RFC 9000 §9: after the handshake
    /// is confirmed, with a spare connection ID from the server).
    fn maybe_migrate(&mut self, now: Instant, conn: &mut Connection) {
        let (received, done) = self
            .chosen
            .as_ref()
            .map_or((0, false), |c| (c.files().total, c.files().all_ended()));
        if self.migrate_at.is_none_or(|t| now < t) || done || self.finished() {
            return;
        }
        // The same local IP address, a new port: congestion state carries over (§9.4).
        match conn.migrate(now, true) {
            Ok(()) => {
                self.migrate_at = None;
                self.rebind = true;
                self.migrated_at = Some(received);
            }
            Err(e) => {
                // Not yet (no confirmed handshake, or no spare ID from the server yet): try
                // again shortly rather than on every turn.
                tracing::debug!("not migrating yet: {e}");
                self.migrate_at = Some(now + MIGRATE_RETRY);
            }
        }
    }
}

impl std::fmt::Debug for Negotiated<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Negotiated")
            .field("paths", &self.paths.len())
            .finish_non_exhaustive()
    }
}

impl ConnectionHandler for Negotiated<'_> {
    fn accepted(&mut self, now: Instant, _handle: ConnectionHandle, conn: &mut Connection) {
        // A client endpoint accepts nothing; close anything that appears anyway.
        conn.close(now, hq::REFUSED_CODE, "not a server");
    }

    fn drive(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection) {
        if handle != self.handle {
            return;
        }
        self.established = conn.is_established();
        self.ever_established |= self.established;
        if !self.established && self.error.is_none() && now >= self.deadline {
            let error = handshake_timeout(conn, self.remote, self.timeout);
            conn.close(now, hq::REFUSED_CODE, "download failed");
            self.error = Some(error);
        }
        let received = conn.stats().datagrams_received;
        if received != self.heard.0 {
            self.heard = (received, now);
        } else if self.established && !self.finished() && now >= self.heard.1 + SILENCE_PING {
            // A restarted server answers with a stateless reset (RFC 9000 §10.3).
            conn.ping();
            self.heard.1 = now;
        }
        if self.chosen.is_none() && self.error.is_none() {
            if let Err(e) = self.choose(conn) {
                conn.close(now, hq::REFUSED_CODE, "download failed");
                self.error = Some(e);
            }
        }
        match &mut self.chosen {
            Some(Chosen::Hq(get)) => get.drive(now, handle, conn),
            Some(Chosen::H3(get)) => get.drive(now, handle, conn),
            // Still handshaking: only a failure matters.
            None => {
                while let Some(event) = conn.poll_event() {
                    if let Event::Closed(reason) = event {
                        self.error
                            .get_or_insert(Error::Connection(describe_close(&reason)));
                    }
                }
            }
        }
        self.maybe_migrate(now, conn);
        let st = conn.stats();
        self.key_updates = st.key_updates;
        if !self.fec_final {
            self.fec = (
                st.repair_frames_received,
                st.fec_recovered_packets,
                st.fec_recovered_bytes,
            );
            self.fec_final = self.chosen.as_ref().is_some_and(|c| c.files().all_ended());
        }
    }

    fn removed(&mut self, handle: ConnectionHandle) {
        match &mut self.chosen {
            Some(Chosen::Hq(get)) => get.removed(handle),
            Some(Chosen::H3(get)) => get.removed(handle),
            None => {
                if handle == self.handle {
                    self.error.get_or_insert(Error::Connection(
                        "the connection ended during the handshake".into(),
                    ));
                }
            }
        }
    }

    fn finished(&self) -> bool {
        match &self.chosen {
            Some(Chosen::Hq(get)) => get.finished(),
            Some(Chosen::H3(get)) => get.finished(),
            None => self.error.is_some(),
        }
    }

    fn next_wakeup(&self, handle: ConnectionHandle) -> Option<Instant> {
        if self.finished() {
            return None;
        }
        let own = if self.established {
            self.heard.1 + SILENCE_PING
        } else {
            self.deadline
        };
        let app = match &self.chosen {
            Some(Chosen::H3(get)) => get.next_wakeup(handle),
            _ => None,
        };
        let own = self.migrate_at.map_or(own, |t| t.min(own));
        Some(app.map_or(own, |t| t.min(own)))
    }

    fn take_rebind(&mut self) -> bool {
        std::mem::take(&mut self.rebind)
    }
}

/// The hq-interop downloads: one request per bidirectional stream (`GET /path`), answered with
/// the body and FIN, or a reset.
struct HqGet<'a> {
    handle: ConnectionHandle,
    paths: Vec<String>,
    files: Files<'a>,
    /// The index of the next URL to ask for.
    next: usize,
    /// The requests under way: their stream and URL index.
    streams: HashMap<StreamId, usize>,
    /// The handshake completed: requests may go out.
    connected: bool,
    /// The connection has been told to close (after the bodies), or is gone.
    closed: bool,
}

impl HqGet<'_> {
    /// Asks for the next URLs while the server's stream limit has room (RFC 9000 §4.6: a
    /// stream beyond MAX_STREAMS waits for more credit, announced with STREAMS_BLOCKED).
    fn request_more(&mut self, conn: &mut Connection) {
        while self.next < self.paths.len() {
            let index = self.next;
            let id = match conn.open_stream(true) {
                Ok(id) => id,
                Err(recoup_transport::Error::Blocked) => return,
                Err(e) => {
                    let why = format!("opening a request stream: {e}");
                    self.files.fail_rest(|| Error::Connection(why.clone()));
                    return;
                }
            };
            self.next += 1;
            let line = hq::request_line(&self.paths[index]);
            let sent = stream_io::write(conn, id, &line).and_then(|n| {
                if n < line.len() {
                    return Err(recoup_transport::Error::Blocked);
                }
                conn.stream_finish(id)
            });
            match sent {
                Ok(()) => {
                    self.streams.insert(id, index);
                }
                Err(recoup_transport::Error::Blocked) => self.files.fail(
                    index,
                    Error::Connection("the server's flow control refused the request line".into()),
                ),
                Err(e) => self.files.fail(index, e.into()),
            }
        }
    }

    /// Reads what arrived on the request streams.
    fn read_bodies(&mut self, now: Instant, conn: &mut Connection) {
        let mut buf = [0u8; 64 * 1024];
        for id in conn.readable_streams() {
            let Some(&index) = self.streams.get(&id) else {
                continue;
            };
            loop {
                let (n, fin) = match stream_io::read(conn, id, &mut buf) {
                    Ok(read) => read,
                    Err(e) => {
                        self.streams.remove(&id);
                        self.files.fail(index, e.into());
                        break;
                    }
                };
                if !self.files.write(index, &buf[..n]) {
                    // The body cannot be kept: the server need not send the rest.
                    self.streams.remove(&id);
                    conn.stream_stop(id, hq::REFUSED_CODE).ok();
                    break;
                }
                if fin {
                    self.streams.remove(&id);
                    self.files.complete(now, index);
                    break;
                }
                if n == 0 {
                    break;
                }
            }
        }
    }
}

impl std::fmt::Debug for HqGet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HqGet")
            .field("urls", &self.paths.len())
            .field("open", &self.streams.len())
            .field("received", &self.files.total)
            .finish_non_exhaustive()
    }
}

impl ConnectionHandler for HqGet<'_> {
    fn accepted(&mut self, now: Instant, _handle: ConnectionHandle, conn: &mut Connection) {
        // A client endpoint accepts nothing; close anything that appears anyway.
        conn.close(now, hq::REFUSED_CODE, "not a server");
    }

    fn drive(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection) {
        if handle != self.handle {
            return;
        }
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Connected => {
                    tracing::debug!("handshake done");
                    self.connected = true;
                }
                Event::Closed(reason) => {
                    self.closed = true;
                    let why = describe_close(&reason);
                    self.files.fail_rest(|| Error::Connection(why.clone()));
                }
                Event::Stream(StreamEvent::Reset { id, code }) => {
                    let Some(index) = self.streams.remove(&id) else {
                        continue;
                    };
                    let error = if code == hq::NOT_FOUND_CODE {
                        Error::NotFound(self.paths[index].clone())
                    } else {
                        Error::Refused(format!("the server reset the stream (code {code:#x})"))
                    };
                    self.files.fail(index, error);
                }
                Event::Stream(_) | Event::DatagramReceived => {}
            }
        }
        if self.closed {
            return;
        }
        if self.connected {
            self.request_more(conn);
        }
        self.read_bodies(now, conn);
        if self.files.all_ended() {
            if self.files.failures() == 0 {
                conn.close(now, DONE_CODE, "done");
            } else {
                conn.close(now, hq::REFUSED_CODE, "download failed");
            }
            self.closed = true;
        }
    }

    fn removed(&mut self, handle: ConnectionHandle) {
        if handle == self.handle {
            self.closed = true;
        }
    }

    fn finished(&self) -> bool {
        self.closed
    }
}

pub(crate) fn describe_close(reason: &CloseReason) -> String {
    match reason {
        CloseReason::IdleTimeout => "timed out (no answer from the server)".into(),
        CloseReason::StatelessReset => {
            "the server reset the connection (a stateless reset: it no longer has this \
             connection, having restarted or lost its state)"
                .into()
        }
        CloseReason::Local(e) => format!("closed locally: code {:#x} {}", e.code, e.reason),
        CloseReason::Remote(e) => format!("closed by the server: code {:#x} {}", e.code, e.reason),
    }
}
