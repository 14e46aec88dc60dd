//! One QUIC connection and its HTTP/3 requests: responses that did not fit the stream's send
//! capacity wait here and go on when quiche reports the stream writable.
//!
//! Pacing: quiche paces by default and stamps each packet with the time it should leave
//! (`SendInfo::at`). This server honours it: a packet stamped for later is held and sent when
//! its time comes (the event loop wakes for it), and no further packet of that connection is
//! made meanwhile. The wake-up is a socket receive timeout, so a paced packet leaves some tens
//! of microseconds late at worst.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::path::Path;
use std::time::Instant;

use quiche::h3::{self, NameValue};

use crate::files::{self, Response};

/// The largest UDP payload sent and received (quiche's own example servers use the same).
pub const MAX_DATAGRAM: usize = 1350;
/// HTTP/3 error codes (RFC 9114 §8.1).
const H3_NO_ERROR: u64 = 0x100;
const H3_INTERNAL_ERROR: u64 = 0x102;

/// A response under way: its header block until the stream took it, then its body.
struct Pending {
    headers: Option<Vec<h3::Header>>,
    response: Response,
}

pub struct Client {
    pub conn: quiche::Connection,
    /// The connection IDs this connection is found by (its own and the client's first one).
    pub ids: Vec<Vec<u8>>,
    h3: Option<h3::Connection>,
    pending: HashMap<u64, Pending>,
    out: Box<[u8; MAX_DATAGRAM]>,
    /// A packet made but held for pacing: its length in `out` and where and when it goes.
    held: Option<(usize, quiche::SendInfo)>,
}

impl Client {
    pub fn new(conn: quiche::Connection, ids: Vec<Vec<u8>>) -> Self {
        Self {
            conn,
            ids,
            h3: None,
            pending: HashMap::new(),
            out: Box::new([0; MAX_DATAGRAM]),
            held: None,
        }
    }

    /// Feeds one datagram to the connection, then answers the requests it completed and goes
    /// on with responses whose streams became writable.
    pub fn receive(
        &mut self,
        datagram: &mut [u8],
        info: quiche::RecvInfo,
        h3_config: &h3::Config,
        root: &Path,
    ) {
        if let Err(e) = self.conn.recv(datagram, info) {
            if e != quiche::Error::Done {
                eprintln!("{}: dropped a datagram: {e}", self.conn.trace_id());
            }
            return;
        }
        if self.h3.is_none() && self.conn.is_established() {
            match h3::Connection::with_transport(&mut self.conn, h3_config) {
                Ok(h3) => self.h3 = Some(h3),
                Err(e) => {
                    eprintln!("{}: HTTP/3 setup failed: {e}", self.conn.trace_id());
                    let _ = self
                        .conn
                        .close(true, H3_INTERNAL_ERROR, b"HTTP/3 setup failed");
                    return;
                }
            }
        }
        self.poll_requests(root);
        self.continue_writable();
    }

    /// When the next timer or held packet is due.
    pub fn deadline(&self) -> Option<Instant> {
        let held = self.held.as_ref().map(|(_, info)| info.at);
        match (self.conn.timeout_instant(), held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs quiche's timers that are due (loss detection, PTO, idle timeout).
    pub fn on_timeout(&mut self, now: Instant) {
        if self.conn.timeout_instant().is_some_and(|t| t <= now) {
            self.conn.on_timeout();
        }
    }

    /// Sends what the connection has to send; stops at a packet stamped for later than `now`
    /// (see the module's note on pacing) unless `paced` is false.
    pub fn flush(&mut self, socket: &UdpSocket, now: Instant, paced: bool) {
        loop {
            let (len, info) = match self.held.take() {
                Some(held) => held,
                None => match self.conn.send(&mut self.out[..]) {
                    Ok(sent) => sent,
                    Err(quiche::Error::Done) => return,
                    Err(e) => {
                        eprintln!("{}: making a packet failed: {e}", self.conn.trace_id());
                        let _ = self.conn.close(false, 0x1, b"send failed");
                        return;
                    }
                },
            };
            if paced && info.at > now {
                self.held = Some((len, info));
                return;
            }
            if let Err(e) = socket.send_to(&self.out[..len], info.to) {
                eprintln!("{}: send to {} failed: {e}", self.conn.trace_id(), info.to);
            }
        }
    }

    /// Closes the connection (the server is stopping).
    pub fn close(&mut self) {
        let _ = self.conn.close(true, H3_NO_ERROR, b"");
    }

    fn poll_requests(&mut self, root: &Path) {
        let Some(h3) = self.h3.as_mut() else { return };
        loop {
            match h3.poll(&mut self.conn) {
                Ok((stream, h3::Event::Headers { list, .. })) => {
                    let mut pending = request(root, &list);
                    match send(&mut self.conn, h3, stream, &mut pending) {
                        Ok(true) => {}
                        Ok(false) => {
                            self.pending.insert(stream, pending);
                        }
                        Err(e) => reset(&mut self.conn, stream, &e),
                    }
                }
                // A GET has no body; one that comes anyway is read and dropped.
                Ok((stream, h3::Event::Data)) => {
                    let mut sink = [0; 4096];
                    while h3.recv_body(&mut self.conn, stream, &mut sink).is_ok() {}
                }
                Ok((stream, h3::Event::Reset(_))) => {
                    self.pending.remove(&stream);
                }
                Ok((_, h3::Event::Finished | h3::Event::PriorityUpdate | h3::Event::GoAway)) => {}
                Err(h3::Error::Done) => return,
                Err(e) => {
                    eprintln!("{}: HTTP/3 error: {e}", self.conn.trace_id());
                    return;
                }
            }
        }
    }

    fn continue_writable(&mut self) {
        let Some(h3) = self.h3.as_mut() else { return };
        for stream in self.conn.writable() {
            let Some(pending) = self.pending.get_mut(&stream) else {
                continue;
            };
            match send(&mut self.conn, h3, stream, pending) {
                Ok(false) => {}
                Ok(true) => {
                    self.pending.remove(&stream);
                }
                Err(e) => {
                    self.pending.remove(&stream);
                    reset(&mut self.conn, stream, &e);
                }
            }
        }
    }
}

/// The response to a request's header block.
fn request(root: &Path, list: &[h3::Header]) -> Pending {
    let field = |name: &[u8]| {
        list.iter()
            .find(|h| h.name() == name)
            .map_or(&[][..], |h| h.value())
    };
    let response = files::respond(root, field(b":method"), field(b":path"));
    let headers = vec![
        h3::Header::new(b":status", response.status.to_string().as_bytes()),
        h3::Header::new(b"content-length", response.length.to_string().as_bytes()),
        h3::Header::new(b"server", b"quiche-h3-server"),
    ];
    Pending {
        headers: Some(headers),
        response,
    }
}

/// Sends as much of a response as the stream takes; true once all of it is sent.
fn send(
    conn: &mut quiche::Connection,
    h3: &mut h3::Connection,
    stream: u64,
    pending: &mut Pending,
) -> Result<bool, String> {
    let body = &mut pending.response.body;
    if let Some(headers) = &pending.headers {
        match h3.send_response(conn, stream, headers, body.is_done()) {
            Ok(()) => pending.headers = None,
            Err(h3::Error::StreamBlocked) => return Ok(false),
            Err(e) => return Err(format!("sending the header block: {e}")),
        }
    }
    while !body.is_done() {
        let (data, fin) = body.next().map_err(|e| format!("reading the file: {e}"))?;
        let len = data.len();
        match h3.send_body(conn, stream, data, fin) {
            Ok(n) => {
                body.consume(n);
                if n < len {
                    return Ok(false);
                }
            }
            Err(h3::Error::Done) => return Ok(false),
            Err(e) => return Err(format!("sending the body: {e}")),
        }
    }
    Ok(true)
}

/// Abandons a response: its stream is reset so the client sees it was not sent whole. A peer
/// that stopped the stream (STOP_SENDING) has already had it reset by quiche.
fn reset(conn: &mut quiche::Connection, stream: u64, why: &str) {
    eprintln!("{}: stream {stream} reset: {why}", conn.trace_id());
    let _ = conn.stream_shutdown(stream, quiche::Shutdown::Write, H3_INTERNAL_ERROR);
}
