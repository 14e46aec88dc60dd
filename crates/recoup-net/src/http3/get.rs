//! The HTTP/3 side of `recoup get`: one request per URL on one connection, each body handed to
//! the caller as it arrives.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Buf, Bytes};
use http::{header, Request, StatusCode};
use recoup_time::Instant;
use recoup_transport::{Connection, ConnectionHandle};

use super::adapter::QuicConn;
use super::session::Session;
use super::tasks::Spawner;
use crate::bodies::Files;
use crate::client::describe_close;
use crate::driver::ConnectionHandler;
use crate::error::Error;

/// What a request task hands the application.
#[derive(Debug, Default)]
struct Outcome {
    body: VecDeque<Bytes>,
    /// The response ended (FIN after the last DATA frame).
    complete: bool,
    error: Option<Error>,
}

type SharedOutcome = Arc<Mutex<Outcome>>;

fn lock(outcome: &SharedOutcome) -> std::sync::MutexGuard<'_, Outcome> {
    outcome.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The HTTP/3 downloads of `recoup get` on the UDP driver: one request per URL, all at once
/// (the transport opens their streams as the server's MAX_STREAMS allows, RFC 9000 §4.6).
pub(crate) struct H3Get<'a> {
    handle: ConnectionHandle,
    session: Session,
    /// One per URL, in order.
    outcomes: Vec<SharedOutcome>,
    pub(crate) files: Files<'a>,
    closed: bool,
}

impl std::fmt::Debug for H3Get<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H3Get")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl<'a> H3Get<'a> {
    /// Requests `https://{authority}{path}` for each of `paths` (with `range` as the `Range`
    /// header) on the connection `handle`, whose handshake has started.
    pub(crate) fn new(
        now: Instant,
        handle: ConnectionHandle,
        authority: &str,
        paths: &[String],
        range: Option<&str>,
        files: Files<'a>,
    ) -> Result<Self, Error> {
        let mut requests = Vec::with_capacity(paths.len());
        for path in paths {
            let mut request = Request::get(format!("https://{authority}{path}"));
            if let Some(range) = range {
                request = request.header(header::RANGE, format!("bytes={range}"));
            }
            let request = request
                .body(())
                .map_err(|e| Error::Config(format!("request for {path:?}: {e}")))?;
            requests.push((request, path.clone(), SharedOutcome::default()));
        }
        let outcomes = requests.iter().map(|(_, _, o)| Arc::clone(o)).collect();
        let session = Session::new(now, false);
        session
            .spawner()
            .spawn(fetch_all(session.quic(), session.spawner(), requests));
        Ok(Self {
            handle,
            session,
            outcomes,
            files,
            closed: false,
        })
    }

    /// Hands on what arrived for each URL, and ends the URLs whose response ended.
    fn write_bodies(&mut self, now: Instant) {
        for (index, outcome) in self.outcomes.iter().enumerate() {
            if self.files.is_ended(index) {
                continue;
            }
            let (chunks, complete, error) = {
                let mut o = lock(outcome);
                (std::mem::take(&mut o.body), o.complete, o.error.take())
            };
            // A URL whose bytes cannot be kept ends at its failed write; the rest is dropped.
            if !chunks.iter().all(|chunk| self.files.write(index, chunk)) {
                continue;
            }
            if let Some(e) = error {
                self.files.fail(index, e);
            } else if complete {
                self.files.complete(now, index);
            }
        }
    }
}

/// Sets up HTTP/3, then sends every request, each in a task of its own that collects its
/// response body into its outcome.
async fn fetch_all(
    quic: QuicConn,
    spawner: Spawner,
    requests: Vec<(Request<()>, String, SharedOutcome)>,
) {
    let (mut conn, sender) = match h3::client::new(quic).await {
        Ok(pair) => pair,
        Err(e) => {
            let why = format!("HTTP/3 setup: {e}");
            for (_, _, outcome) in &requests {
                lock(outcome).error = Some(Error::Connection(why.clone()));
            }
            return;
        }
    };
    // The connection's control streams are read while it is polled.
    spawner.spawn(async move {
        let e = std::future::poll_fn(|cx| conn.poll_close(cx)).await;
        tracing::debug!("HTTP/3 connection ended: {e}");
    });
    // Each task holds a sender: h3 closes the connection when the last one is dropped.
    for (request, path, outcome) in requests {
        spawner.spawn(fetch(sender.clone(), request, path, outcome));
    }
}

/// Sends one request and collects its response body into `outcome`.
async fn fetch(
    mut sender: h3::client::SendRequest<QuicConn, Bytes>,
    request: Request<()>,
    path: String,
    outcome: SharedOutcome,
) {
    let result = async {
        let h3_error = |e: h3::error::StreamError| Error::Connection(format!("HTTP/3: {e}"));
        let mut stream = sender.send_request(request).await.map_err(h3_error)?;
        stream.finish().await.map_err(h3_error)?;
        let response = stream.recv_response().await.map_err(h3_error)?;
        let status = response.status();
        tracing::debug!(?response, "response");
        if !status.is_success() {
            return Err(Error::Status {
                status: status_line(status),
                path: path.clone(),
            });
        }
        while let Some(mut data) = stream.recv_data().await.map_err(h3_error)? {
            let bytes = data.copy_to_bytes(data.remaining());
            lock(&outcome).body.push_back(bytes);
        }
        Ok(())
    };
    let result: Result<(), Error> = result.await;
    let mut o = lock(&outcome);
    match result {
        Ok(()) => o.complete = true,
        Err(e) => o.error = Some(e),
    }
}

/// `404 Not Found`.
fn status_line(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

impl ConnectionHandler for H3Get<'_> {
    fn accepted(&mut self, now: Instant, _handle: ConnectionHandle, conn: &mut Connection) {
        // A client endpoint accepts nothing; close anything that appears anyway.
        conn.close(
            now,
            h3::error::Code::H3_GENERAL_PROTOCOL_ERROR.value(),
            "not a server",
        );
    }

    fn drive(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection) {
        if handle != self.handle || self.closed {
            return;
        }
        let ended = self.session.drive(now, conn);
        self.write_bodies(now);
        if let Some(reason) = ended {
            self.closed = true;
            let why = describe_close(&reason);
            self.files.fail_rest(|| Error::Connection(why.clone()));
        } else if self.files.all_ended() {
            if self.files.failures() == 0 {
                conn.close(now, super::NO_ERROR, "done");
            } else {
                conn.close(
                    now,
                    h3::error::Code::H3_REQUEST_CANCELLED.value(),
                    "download failed",
                );
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

    fn next_wakeup(&self, handle: ConnectionHandle) -> Option<Instant> {
        (handle == self.handle)
            .then(|| self.session.next_wakeup())
            .flatten()
    }
}
