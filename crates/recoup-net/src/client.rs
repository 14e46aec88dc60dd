//! `recoup get`: one hq-interop download on the UDP driver.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use recoup_time::Instant;
use recoup_transport::qlog::VantagePoint;
use recoup_transport::streams::{StreamEvent, StreamId};
use recoup_transport::{
    ClientConfig, CloseReason, Connection, ConnectionHandle, Endpoint, Event, TransportConfig,
};

use crate::driver::{Application, Driver, Stopper};
use crate::error::Error;
use crate::hq;
use crate::qlog_dir::{hex_id, QlogDir};
use crate::stream_io;
use crate::url::Url;

/// Application close code after a complete download: no error.
const DONE_CODE: u64 = 0;

/// After this long without a datagram from the server the client sends a PING: a server that
/// restarted answers with a stateless reset (RFC 9000 §10.3), reported at once instead of after
/// the idle timeout.
const SILENCE_PING: Duration = Duration::from_secs(1);

/// What `recoup get` needs.
#[derive(Debug)]
pub struct GetOptions {
    pub url: Url,
    pub tls: std::sync::Arc<rustls::ClientConfig>,
    pub transport: TransportConfig,
    pub qlog: Option<QlogDir>,
    /// Batch datagrams with UDP GSO where the OS supports it.
    pub gso: bool,
    /// How long to wait for the server to complete the handshake before giving up.
    pub timeout: Duration,
}

/// What a finished download measured.
#[derive(Clone, Copy, Debug)]
pub struct Download {
    pub bytes: u64,
    /// From the first packet to the last byte of the body.
    pub elapsed: Duration,
}

/// A client ready to download; [`Client::run`] does it.
#[derive(Debug)]
pub struct Client {
    driver: Driver,
    handle: ConnectionHandle,
    path: String,
    start: Instant,
    remote: SocketAddr,
    timeout: Duration,
}

impl Client {
    /// Binds a local socket and starts the handshake with the URL's host.
    pub fn connect(options: GetOptions) -> Result<Self, Error> {
        let remote = options.url.resolve()?;
        let bind: SocketAddr = if remote.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        };
        let config = ClientConfig {
            transport: options.transport,
            tls: options.tls,
            server_name: options.url.host.clone(),
        };
        let endpoint = Endpoint::new(None, config.transport.local_cid_len);
        let mut driver = Driver::bind(bind, endpoint, options.gso)?;
        let start = driver.clock().now();
        let handle = driver.endpoint_mut().connect(start, &config, remote)?;
        if let Some(dir) = &options.qlog {
            if let Some(conn) = driver.endpoint_mut().connection_mut(handle) {
                let id = conn
                    .local_cids()
                    .next()
                    .map(|c| hex_id(&c))
                    .unwrap_or_default();
                match dir.create(VantagePoint::Client, &id, start) {
                    Ok(writer) => conn.set_qlog(writer),
                    Err(e) => tracing::warn!("qlog: {e}"),
                }
            }
        }
        Ok(Self {
            driver,
            handle,
            path: options.url.path,
            start,
            remote,
            timeout: options.timeout,
        })
    }

    #[must_use]
    pub fn stopper(&self) -> Stopper {
        self.driver.stopper()
    }

    /// Downloads the URL's path into `out`, calling `progress` with the bytes received so far.
    pub fn run(
        mut self,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Download, Error> {
        let mut app = HqGet {
            handle: self.handle,
            path: self.path,
            out,
            progress,
            stream: None,
            received: 0,
            done_at: None,
            error: None,
            closed: false,
            remote: self.remote,
            timeout: self.timeout,
            deadline: self.start + self.timeout,
            heard: (0, self.start),
        };
        let stopped = self.driver.run(&mut app, DONE_CODE)?;
        if stopped {
            return Err(Error::Interrupted);
        }
        if let Some(e) = app.error {
            return Err(e);
        }
        let end = app.done_at.unwrap_or(self.start);
        Ok(Download {
            bytes: app.received,
            elapsed: end.saturating_duration_since(self.start),
        })
    }
}

struct HqGet<'a> {
    handle: ConnectionHandle,
    path: String,
    out: &'a mut dyn Write,
    progress: &'a mut dyn FnMut(u64),
    stream: Option<StreamId>,
    received: u64,
    done_at: Option<Instant>,
    error: Option<Error>,
    /// The connection has been told to close (after the body or an error), or is gone.
    closed: bool,
    remote: SocketAddr,
    timeout: Duration,
    /// Give up if the handshake has not completed by then.
    deadline: Instant,
    /// Datagrams received from the server so far, and when the count last grew.
    heard: (u64, Instant),
}

impl HqGet<'_> {
    fn fail(&mut self, now: Instant, conn: &mut Connection, error: Error) {
        if self.error.is_none() {
            self.error = Some(error);
        }
        conn.close(now, hq::REFUSED_CODE, "download failed");
        self.closed = true;
    }

    fn request(&mut self, conn: &mut Connection) -> Result<(), Error> {
        let id = conn.open_stream(true)?;
        let line = hq::request_line(&self.path);
        let n = stream_io::write(conn, id, &line)?;
        if n < line.len() {
            return Err(Error::Connection(
                "the server's flow control refused the request line".into(),
            ));
        }
        conn.stream_finish(id)?;
        self.stream = Some(id);
        Ok(())
    }

    fn read_body(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        id: StreamId,
    ) -> Result<(), Error> {
        let mut buf = [0u8; 64 * 1024];
        loop {
            let (n, fin) = stream_io::read(conn, id, &mut buf)?;
            if n > 0 {
                self.out
                    .write_all(&buf[..n])
                    .map_err(|e| Error::io("writing the body", e))?;
                self.received += n as u64;
                (self.progress)(self.received);
            }
            if fin {
                self.out
                    .flush()
                    .map_err(|e| Error::io("writing the body", e))?;
                self.done_at = Some(now);
                conn.close(now, DONE_CODE, "done");
                self.closed = true;
                return Ok(());
            }
            if n == 0 {
                return Ok(());
            }
        }
    }
}

impl std::fmt::Debug for HqGet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HqGet")
            .field("path", &self.path)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

impl Application for HqGet<'_> {
    fn accepted(&mut self, now: Instant, _handle: ConnectionHandle, conn: &mut Connection) {
        // A client endpoint accepts nothing; close anything that appears anyway.
        conn.close(now, hq::REFUSED_CODE, "not a server");
    }

    fn drive(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection) {
        if handle != self.handle {
            return;
        }
        if !conn.is_established() && !self.closed && now >= self.deadline {
            let secs = self.timeout.as_secs_f64();
            let why = if conn.stats().packets_received == 0 {
                format!("no response from {} after {secs} s", self.remote)
            } else {
                format!(
                    "the handshake with {} did not complete after {secs} s",
                    self.remote
                )
            };
            self.fail(now, conn, Error::Connection(why));
            return;
        }
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Connected => {
                    tracing::debug!("handshake done");
                    if let Err(e) = self.request(conn) {
                        self.fail(now, conn, e);
                    }
                }
                Event::Closed(reason) => {
                    self.closed = true;
                    if self.done_at.is_none() && self.error.is_none() {
                        self.error = Some(Error::Connection(describe_close(&reason)));
                    }
                }
                Event::Stream(StreamEvent::Reset { id, code }) if Some(id) == self.stream => {
                    let error = if code == hq::NOT_FOUND_CODE {
                        Error::NotFound(self.path.clone())
                    } else {
                        Error::Refused(format!("the server reset the stream (code {code:#x})"))
                    };
                    self.fail(now, conn, error);
                }
                Event::Stream(_) => {}
            }
        }
        let received = conn.stats().datagrams_received;
        if received != self.heard.0 {
            self.heard = (received, now);
        } else if self.stream.is_some() && !self.closed && now >= self.heard.1 + SILENCE_PING {
            conn.ping();
            self.heard.1 = now;
        }
        if let (Some(id), None, false) = (self.stream, self.done_at, self.closed) {
            if let Err(e) = self.read_body(now, conn, id) {
                self.fail(now, conn, e);
            }
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

    fn next_wakeup(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        Some(match self.stream {
            None => self.deadline,
            Some(_) => self.heard.1 + SILENCE_PING,
        })
    }
}

fn describe_close(reason: &CloseReason) -> String {
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
