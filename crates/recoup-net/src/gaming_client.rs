//! `recoup game`: the client of a cloud-gaming session ([`crate::gaming`]): asks for the
//! session, measures every frame's delay from its capture on the server to its last byte here,
//! and brings back the server's own, sender-side, frame metrics.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use recoup_apps::conn::AppConn;
use recoup_apps::gaming::GamingViewerOutcome;
use recoup_apps::{FrameError, StreamApp};
use recoup_time::Instant;
use recoup_transport::streams::{StreamEvent, StreamId};
use recoup_transport::{Connection, ConnectionHandle, Event, Side, TransportConfig};

use crate::client::{describe_close, dial, handshake_timeout};
use crate::driver::{ConnectionHandler, Driver, Stopper};
use crate::error::Error;
use crate::gaming::{ControlReader, GamingParams, ShiftedViewer};
use crate::hq;
use crate::qlog_dir::QlogDir;
use crate::url::Url;

/// Application close code once the session is over: no error.
const DONE_CODE: u64 = 0;

/// What `recoup game` needs.
#[derive(Debug)]
pub struct GameOptions {
    /// `https://HOST:PORT/gaming?...`; the query is the session ([`GamingParams`]).
    pub url: Url,
    /// Must offer [`crate::gaming::ALPN`] ([`crate::tls::client_tls`]).
    pub tls: std::sync::Arc<rustls::ClientConfig>,
    pub transport: TransportConfig,
    pub qlog: Option<QlogDir>,
    pub gso: bool,
    /// How long to wait for the server to complete the handshake.
    pub timeout: Duration,
}

/// What a session measured.
#[derive(Debug)]
pub struct GameReport {
    pub params: GamingParams,
    /// Frames as the client saw them: delays from capture on the server to the last byte here.
    pub client: GamingViewerOutcome,
    /// The server's `key=value` report: its frame metrics, measured from packet feedback.
    pub server: BTreeMap<String, String>,
    /// From the first packet to the end of the report.
    pub elapsed: Duration,
    /// recoup's FEC extension (LADR's opportunistic FEC): REPAIR frames received, and the
    /// packets restored from them.
    pub repair_frames: u64,
    pub fec_recovered_packets: u64,
}

/// A session ready to play; [`GameClient::run`] plays it.
#[derive(Debug)]
pub struct GameClient {
    driver: Driver,
    session: Session,
}

impl GameClient {
    /// Checks the session's parameters, binds a local socket and starts the handshake.
    pub fn connect(options: GameOptions) -> Result<Self, Error> {
        let params = GamingParams::from_request(&options.url.path)?;
        let (driver, handle, start, remote) = dial(
            &options.url,
            options.transport,
            options.tls,
            options.gso,
            options.qlog.as_ref(),
        )?;
        let client_epoch_unix_ms = driver.clock().unix_ms(Instant::ZERO);
        Ok(Self {
            driver,
            session: Session {
                handle,
                path: options.url.path,
                params,
                remote,
                start,
                timeout: options.timeout,
                client_epoch_unix_ms,
                control: None,
                reader: ControlReader::default(),
                report: None,
                report_reader: ControlReader::default(),
                viewer: ShiftedViewer::new(&params.config),
                io: AppConn::new(Side::Client, false),
                error: None,
                done_at: None,
                closed: false,
                fec: (0, 0),
            },
        })
    }

    #[must_use]
    pub fn stopper(&self) -> Stopper {
        self.driver.stopper()
    }

    /// Plays the session to its end.
    pub fn run(mut self) -> Result<GameReport, Error> {
        if self.driver.run(&mut self.session, DONE_CODE)? {
            return Err(Error::Interrupted);
        }
        let s = self.session;
        if let Some(e) = s.error {
            return Err(e);
        }
        let Some(done_at) = s.done_at else {
            return Err(Error::Connection(
                "the connection ended before the server's report".into(),
            ));
        };
        if let Some(why) = s.reader.lines.get("error") {
            return Err(Error::Refused(why.clone()));
        }
        if s.reader.epoch()?.is_none() {
            return Err(Error::Connection(
                "the server sent no clock epoch on the control stream".into(),
            ));
        }
        // Every frame error reached `fail` as it arrived, so `s.error` held it.
        Ok(GameReport {
            params: s.params,
            client: s.viewer.viewer().outcome(),
            server: s.report_reader.lines,
            elapsed: done_at.saturating_duration_since(s.start),
            repair_frames: s.fec.0,
            fec_recovered_packets: s.fec.1,
        })
    }
}

/// A frame that arrived but is not what the server sent.
fn damaged(e: &FrameError) -> Error {
    Error::Connection(format!("a frame arrived damaged: {e}"))
}

#[derive(Debug)]
struct Session {
    handle: ConnectionHandle,
    path: String,
    params: GamingParams,
    remote: SocketAddr,
    start: Instant,
    timeout: Duration,
    client_epoch_unix_ms: f64,
    control: Option<StreamId>,
    /// The control stream's reply: the epoch, or a refusal.
    reader: ControlReader,
    /// The server's report stream, once opened, and what it said.
    report: Option<StreamId>,
    report_reader: ControlReader,
    viewer: ShiftedViewer,
    io: AppConn,
    error: Option<Error>,
    /// When the server's report was complete.
    done_at: Option<Instant>,
    closed: bool,
    /// The connection's FEC counters ([`GameReport`]), as of the last turn.
    fec: (u64, u64),
}

impl Session {
    fn fail(&mut self, now: Instant, conn: &mut Connection, error: Error) {
        conn.close(now, hq::REFUSED_CODE, "gaming session failed");
        self.error.get_or_insert(error);
    }

    fn read_control(&mut self, now: Instant, conn: &mut Connection, id: StreamId) {
        if let Err(e) = self.reader.read(conn, id) {
            self.fail(now, conn, e);
            return;
        }
        match self.reader.epoch() {
            Ok(Some(server)) if !self.viewer.has_epochs() => {
                if let Err(e) = self.viewer.set_epochs(server, self.client_epoch_unix_ms) {
                    self.fail(now, conn, damaged(&e));
                }
            }
            Ok(_) => {}
            Err(e) => self.fail(now, conn, e),
        }
        if self.reader.finished && self.reader.lines.contains_key("error") {
            // Refused: nothing follows.
            self.end(now, conn);
        }
    }

    fn read_report(&mut self, now: Instant, conn: &mut Connection, id: StreamId) {
        if let Err(e) = self.report_reader.read(conn, id) {
            self.fail(now, conn, e);
            return;
        }
        if self.report_reader.finished {
            self.end(now, conn);
        }
    }

    /// The session is over: close without error.
    fn end(&mut self, now: Instant, conn: &mut Connection) {
        if self.done_at.is_none() {
            self.done_at = Some(now);
            self.viewer.finish(now);
            conn.close(now, DONE_CODE, "session over");
        }
    }
}

impl ConnectionHandler for Session {
    fn accepted(&mut self, now: Instant, _handle: ConnectionHandle, conn: &mut Connection) {
        conn.close(now, hq::REFUSED_CODE, "not a server");
    }

    fn drive(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection) {
        if handle != self.handle {
            return;
        }
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Closed(reason) => {
                    self.closed = true;
                    if self.done_at.is_none() {
                        self.error
                            .get_or_insert(Error::Connection(describe_close(&reason)));
                    }
                }
                Event::Stream(StreamEvent::Reset { id, code }) if Some(id) == self.control => {
                    self.fail(
                        now,
                        conn,
                        Error::Connection(format!("the server reset the session (code {code:#x})")),
                    );
                }
                _ => {}
            }
        }
        let st = conn.stats();
        self.fec = (st.repair_frames_received, st.fec_recovered_packets);
        if self.closed || self.error.is_some() {
            return;
        }
        if !conn.is_established() {
            if now >= self.start + self.timeout {
                let e = handshake_timeout(conn, self.remote, self.timeout);
                self.fail(now, conn, e);
            }
            return;
        }
        if self.control.is_none() {
            if conn.alpn() != Some(crate::gaming::ALPN) {
                let e = Error::Config("the server did not agree to a gaming session".into());
                self.fail(now, conn, e);
                return;
            }
            let opened = conn.open_stream(true).and_then(|id| {
                conn.stream_write(id, &hq::request_line(&self.path))?;
                conn.stream_finish(id)?;
                Ok(id)
            });
            match opened {
                Ok(id) => self.control = Some(id),
                Err(e) => {
                    self.fail(now, conn, Error::Transport(e));
                    return;
                }
            }
        }
        while conn.accept_stream(false).is_some() {}
        // The server's one bidirectional stream is its report; frames are unidirectional.
        while let Some(id) = conn.accept_stream(true) {
            if self.report.is_none() {
                self.report = Some(id);
                conn.stream_finish(id).ok();
            } else {
                conn.stream_stop(id, hq::REFUSED_CODE).ok();
            }
        }
        for id in conn.readable_streams() {
            if Some(id) == self.control {
                self.read_control(now, conn, id);
            } else if Some(id) == self.report {
                self.read_report(now, conn, id);
            } else if self.done_at.is_none() {
                let (_, error) = self.io.read(now, conn, &mut self.viewer, id);
                if let Some(e) = error {
                    self.fail(now, conn, damaged(&e));
                }
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

    fn next_wakeup(&self, handle: ConnectionHandle) -> Option<Instant> {
        (handle == self.handle && !self.closed && self.control.is_none())
            .then_some(self.start + self.timeout)
    }
}
