//! Many live viewers from one process (`recoup viewers`): a load generator for `recoup serve`.
//!
//! Every viewer is its own QUIC connection (hq-interop) from one local socket, asking for one
//! live stream (`/live/NAME?...`, `{i}` in the URL replaced by the viewer's number) and checking
//! each frame as it arrives: checksum, sequence numbers counting up from 0, the stream ending on
//! a frame boundary with as many frames as the stream's duration holds at its frame rate. One
//! event loop serves them all, so a thousand viewers cost a thousand connections, not a thousand
//! processes.

use std::collections::HashMap;
use std::time::Duration;

use recoup_apps::frame::{FrameParser, ReceivedFrame};
use recoup_time::Instant;
use recoup_transport::streams::{StreamEvent, StreamId};
use recoup_transport::{
    ClientConfig, Connection, ConnectionHandle, Endpoint, Event, TransportConfig,
};

use crate::client::describe_close;
use crate::driver::{ConnectionHandler, Driver, Stopper};
use crate::error::Error;
use crate::hq;
use crate::live::{is_live, LiveParams};
use crate::stream_io;
use crate::url::Url;

/// Application close code of a viewer that saw its whole stream.
const DONE_CODE: u64 = 0;

/// What `recoup viewers` needs.
#[derive(Debug)]
pub struct ViewersOptions {
    /// A live stream URL; `{i}` in it becomes the viewer's number (0, 1, ...).
    pub url: String,
    pub count: usize,
    /// Must offer hq-interop ([`crate::tls::client_tls`]).
    pub tls: std::sync::Arc<rustls::ClientConfig>,
    pub transport: TransportConfig,
    pub gso: bool,
    /// A viewer whose handshake has not completed after this long has failed.
    pub timeout: Duration,
}

/// What became of the viewers.
#[derive(Debug, Default)]
pub struct ViewersReport {
    pub viewers: usize,
    /// Viewers that received their whole stream, every frame intact.
    pub complete: usize,
    /// Frames received intact, over all viewers, and the frames all streams should have had.
    pub frames: u64,
    pub frames_expected: u64,
    pub bytes: u64,
    /// Why each failed viewer failed, by viewer number.
    pub failures: Vec<(usize, String)>,
    /// From the first connection attempt to the last viewer's end.
    pub elapsed: Duration,
}

/// One viewer's stream.
#[derive(Debug)]
struct Viewer {
    index: usize,
    path: String,
    /// Frames its stream should carry (the duration at the frame rate, rounded up).
    expected: u64,
    stream: Option<StreamId>,
    parser: FrameParser,
    frames: u64,
    outcome: Option<Result<(), String>>,
}

/// Many viewers of `recoup serve`'s live streams on one socket; [`Viewers::run`] watches.
#[derive(Debug)]
pub struct Viewers {
    driver: Driver,
    app: Watch,
}

impl Viewers {
    /// Parses the URL, binds a socket and starts every viewer's handshake at once.
    pub fn connect(options: ViewersOptions) -> Result<Self, Error> {
        if options.count == 0 {
            return Err(Error::Config("at least one viewer".into()));
        }
        let first = Url::parse(&options.url.replace("{i}", "0"))?;
        let remote = first.resolve()?;
        let bind = crate::client::any_port_for(remote);
        let config = ClientConfig {
            transport: options.transport,
            tls: options.tls,
            server_name: first.host.clone(),
        };
        let endpoint = Endpoint::new(None, config.transport.local_cid_len);
        let mut driver = Driver::bind(bind, endpoint, options.gso)?;
        let start = driver.clock().now();
        let mut viewers = HashMap::new();
        for index in 0..options.count {
            let url = Url::parse(&options.url.replace("{i}", &index.to_string()))?;
            let expected = expected_frames(&url.path)?;
            let handle = driver.endpoint_mut().connect(start, &config, remote)?;
            viewers.insert(
                handle,
                Viewer {
                    index,
                    path: url.path,
                    expected,
                    stream: None,
                    parser: FrameParser::new(Some(0)),
                    frames: 0,
                    outcome: None,
                },
            );
        }
        Ok(Self {
            driver,
            app: Watch {
                viewers,
                start,
                timeout: options.timeout,
                ended: 0,
                last_end: start,
            },
        })
    }

    #[must_use]
    pub fn stopper(&self) -> Stopper {
        self.driver.stopper()
    }

    /// Runs until every viewer has ended (or a stop); the report says how each did.
    pub fn run(mut self) -> Result<ViewersReport, Error> {
        let stopped = self.driver.run(&mut self.app, hq::REFUSED_CODE)?;
        if stopped {
            return Err(Error::Interrupted);
        }
        let mut report = ViewersReport {
            viewers: self.app.viewers.len(),
            elapsed: self.app.last_end.saturating_duration_since(self.app.start),
            ..ViewersReport::default()
        };
        let mut viewers: Vec<&Viewer> = self.app.viewers.values().collect();
        viewers.sort_by_key(|v| v.index);
        for v in viewers {
            report.frames += v.frames;
            report.frames_expected += v.expected;
            report.bytes += v.parser.bytes();
            match &v.outcome {
                Some(Ok(())) => report.complete += 1,
                Some(Err(why)) => report.failures.push((v.index, why.clone())),
                None => report.failures.push((v.index, "never ended".into())),
            }
        }
        Ok(report)
    }
}

/// Frames a live stream request should deliver, from its query and `recoup serve`'s defaults
/// for what the query leaves out.
fn expected_frames(path: &str) -> Result<u64, Error> {
    if !is_live(path) {
        return Err(Error::Config(format!(
            "{path} is not a live stream (/live/NAME?...)"
        )));
    }
    let (_, params) = LiveParams::default().from_request(path)?;
    let n = (params.duration.as_nanos() * u128::from(params.encoder.fps)).div_ceil(1_000_000_000);
    Ok(u64::try_from(n).unwrap_or(u64::MAX).max(1))
}

/// The driver's application: every viewer's connection.
#[derive(Debug)]
struct Watch {
    viewers: HashMap<ConnectionHandle, Viewer>,
    start: Instant,
    timeout: Duration,
    ended: usize,
    last_end: Instant,
}

impl Watch {
    fn end(&mut self, now: Instant, handle: ConnectionHandle, outcome: Result<(), String>) {
        let Some(v) = self.viewers.get_mut(&handle) else {
            return;
        };
        if v.outcome.is_none() {
            if let Err(why) = &outcome {
                tracing::warn!(viewer = v.index, "{why}");
            }
            v.outcome = Some(outcome);
            self.ended += 1;
            self.last_end = now;
        }
    }
}

impl Viewer {
    /// Reads what arrived; `Some` once the stream ended, well or not.
    fn read(&mut self, now: Instant, conn: &mut Connection) -> Option<Result<(), String>> {
        let id = self.stream?;
        let mut buf = [0u8; 64 * 1024];
        let mut frames: Vec<ReceivedFrame> = Vec::new();
        loop {
            let (n, fin) = match stream_io::read(conn, id, &mut buf) {
                Ok(read) => read,
                Err(e) => return Some(Err(format!("reading the stream: {e}"))),
            };
            frames.clear();
            if let Err(e) = self.parser.push(now, &buf[..n], &mut frames) {
                return Some(Err(format!("frame {}: {e}", self.frames)));
            }
            self.frames += frames.len() as u64;
            if fin {
                if let Err(e) = self.parser.finish() {
                    return Some(Err(e.to_string()));
                }
                if self.frames != self.expected {
                    return Some(Err(format!(
                        "{} of {} frames before the end of the stream",
                        self.frames, self.expected
                    )));
                }
                return Some(Ok(()));
            }
            if n == 0 {
                return None;
            }
        }
    }

    /// Asks for the stream once the handshake is done.
    fn request(&mut self, conn: &mut Connection) -> Result<(), String> {
        let id = conn
            .open_stream(true)
            .map_err(|e| format!("opening the request stream: {e}"))?;
        let line = hq::request_line(&self.path);
        let n = stream_io::write(conn, id, &line).map_err(|e| e.to_string())?;
        if n < line.len() {
            return Err("the server's flow control refused the request line".into());
        }
        conn.stream_finish(id).map_err(|e| e.to_string())?;
        self.stream = Some(id);
        Ok(())
    }
}

impl ConnectionHandler for Watch {
    fn accepted(&mut self, now: Instant, _handle: ConnectionHandle, conn: &mut Connection) {
        conn.close(now, hq::REFUSED_CODE, "not a server");
    }

    fn drive(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection) {
        let Some(v) = self.viewers.get_mut(&handle) else {
            return;
        };
        if v.outcome.is_some() {
            while conn.poll_event().is_some() {}
            return;
        }
        let mut ended = None;
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Connected => {
                    if let Err(why) = v.request(conn) {
                        ended = Some(Err(why));
                    }
                }
                Event::Closed(reason) => ended = Some(Err(describe_close(&reason))),
                Event::Stream(StreamEvent::Reset { id, code }) if Some(id) == v.stream => {
                    ended = Some(Err(format!("the server reset the stream (code {code:#x})")));
                }
                Event::Stream(_) | Event::DatagramReceived => {}
            }
        }
        if ended.is_none() {
            if v.stream.is_none() && now.saturating_duration_since(self.start) > self.timeout {
                ended = Some(Err(crate::client::handshake_timeout(
                    conn,
                    conn.remote_address(),
                    self.timeout,
                )
                .to_string()));
            } else {
                ended = v.read(now, conn);
            }
        }
        if let Some(outcome) = ended {
            let code = if outcome.is_ok() {
                DONE_CODE
            } else {
                hq::REFUSED_CODE
            };
            conn.close(now, code, "viewer done");
            self.end(now, handle, outcome);
        }
    }

    fn removed(&mut self, handle: ConnectionHandle) {
        let now = self.last_end;
        self.end(now, handle, Err("the connection ended early".into()));
    }

    fn finished(&self) -> bool {
        self.ended == self.viewers.len()
    }

    fn next_wakeup(&self, handle: ConnectionHandle) -> Option<Instant> {
        // The handshake deadline of a viewer still connecting.
        let v = self.viewers.get(&handle)?;
        (v.stream.is_none() && v.outcome.is_none()).then_some(self.start + self.timeout)
    }
}
