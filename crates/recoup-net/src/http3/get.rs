//! The HTTP/3 side of `recoup get`: one request, its body handed to the caller as it arrives.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Buf, Bytes};
use http::{header, Request, StatusCode};
use recoup_time::Instant;
use recoup_transport::{Connection, ConnectionHandle};

use super::adapter::QuicConn;
use super::session::Session;
use super::tasks::Spawner;
use crate::client::describe_close;
use crate::driver::Application;
use crate::error::Error;

/// What the request task hands the application.
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

/// One HTTP/3 download on the UDP driver.
pub(crate) struct H3Get<'a> {
    handle: ConnectionHandle,
    session: Session,
    outcome: SharedOutcome,
    out: &'a mut dyn Write,
    progress: &'a mut dyn FnMut(u64),
    pub(crate) received: u64,
    pub(crate) done_at: Option<Instant>,
    pub(crate) error: Option<Error>,
    closed: bool,
}

impl std::fmt::Debug for H3Get<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H3Get")
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

impl<'a> H3Get<'a> {
    /// Requests `https://{authority}{path}` (with `range` as the `Range` header) on the
    /// connection `handle`, whose handshake has started.
    pub(crate) fn new(
        now: Instant,
        handle: ConnectionHandle,
        authority: &str,
        path: &str,
        range: Option<&str>,
        out: &'a mut dyn Write,
        progress: &'a mut dyn FnMut(u64),
    ) -> Result<Self, Error> {
        let mut request = Request::get(format!("https://{authority}{path}"));
        if let Some(range) = range {
            request = request.header(header::RANGE, format!("bytes={range}"));
        }
        let request = request
            .body(())
            .map_err(|e| Error::Config(format!("request for {path:?}: {e}")))?;
        let session = Session::new(now);
        let outcome = SharedOutcome::default();
        session.spawner().spawn(fetch(
            session.quic(),
            session.spawner(),
            request,
            path.to_owned(),
            Arc::clone(&outcome),
        ));
        Ok(Self {
            handle,
            session,
            outcome,
            out,
            progress,
            received: 0,
            done_at: None,
            error: None,
            closed: false,
        })
    }

    fn fail(&mut self, now: Instant, conn: &mut Connection, error: Error) {
        self.error.get_or_insert(error);
        conn.close(
            now,
            h3::error::Code::H3_REQUEST_CANCELLED.value(),
            "download failed",
        );
        self.closed = true;
    }

    /// Writes what arrived; `true` once the whole body is out.
    fn write_body(&mut self) -> Result<bool, Error> {
        let (chunks, complete, error) = {
            let mut o = lock(&self.outcome);
            (std::mem::take(&mut o.body), o.complete, o.error.take())
        };
        for chunk in chunks {
            self.out
                .write_all(&chunk)
                .map_err(|e| Error::io("writing the body", e))?;
            self.received += chunk.len() as u64;
            (self.progress)(self.received);
        }
        if let Some(e) = error {
            return Err(e);
        }
        if complete {
            self.out
                .flush()
                .map_err(|e| Error::io("writing the body", e))?;
        }
        Ok(complete)
    }
}

/// Sets up HTTP/3, sends the request and collects the response body into `outcome`.
async fn fetch(
    quic: QuicConn,
    spawner: Spawner,
    request: Request<()>,
    path: String,
    outcome: SharedOutcome,
) {
    let result = async {
        let (mut conn, mut sender) = h3::client::new(quic)
            .await
            .map_err(|e| Error::Connection(format!("HTTP/3 setup: {e}")))?;
        // The connection's control streams are read while it is polled.
        spawner.spawn(async move {
            let e = std::future::poll_fn(|cx| conn.poll_close(cx)).await;
            tracing::debug!("HTTP/3 connection ended: {e}");
        });
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

impl Application for H3Get<'_> {
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
        match self.write_body() {
            Ok(true) => {
                self.done_at = Some(now);
                conn.close(now, super::NO_ERROR, "done");
                self.closed = true;
            }
            Ok(false) => {}
            Err(e) => self.fail(now, conn, e),
        }
        if let Some(reason) = ended {
            self.closed = true;
            if self.done_at.is_none() && self.error.is_none() {
                self.error = Some(Error::Connection(describe_close(&reason)));
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
        self.session.next_wakeup()
    }
}
