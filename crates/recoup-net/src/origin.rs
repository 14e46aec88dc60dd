//! Content from an origin: `recoup serve --origin http://HOST:PORT[/PREFIX]` answers each request
//! with what an HTTP/1.1 origin returns for the same path (under PREFIX), as a CDN edge does: the
//! AutoRec paper's CDN nodes "deliver live-streaming data obtained from the origin servers to
//! real user clients" (AutoRec §VI, Fig. 12(b)), with the loss recovery policy on the edge's
//! downstream side.
//!
//! Each request is fetched on its own thread by a blocking HTTP/1.1 client, and the body is
//! handed over in chunks as it arrives, so a live origin that never ends is relayed as it
//! grows and a large file is never held whole. The hand-over is a bounded channel: when the
//! QUIC stream pushes back (a slow client), the chunks wait there, the fetching thread blocks,
//! and TCP pushes back on the origin. Each chunk wakes the server's event loop ([`Wakeup`]).
//!
//! [`OriginResponse::poll`] is transport-neutral (status, then body chunks, then the end or a
//! failure); [`OriginRelay`] writes it to an hq-interop stream, and HTTP/3 maps the same
//! events, awaited through [`OriginResponse::poll_event`], to the origin's status and headers,
//! then DATA.

use std::io::Read;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use recoup_transport::streams::StreamId;
use recoup_transport::Connection;
use ureq::http::Uri;

use crate::driver::Wakeup;
use crate::error::Error;
use crate::hq::percent_decode;
use crate::stream_io;

/// Body bytes read from the origin per chunk.
const CHUNK: usize = 64 * 1024;
/// Chunks waiting between the origin's thread and the QUIC stream (at most 1 MiB per request).
const QUEUED_CHUNKS: usize = 16;
/// How long the TCP connection to the origin may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the origin may take to send its status line and headers.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// An HTTP/1.1 origin (plain `http://`) whose paths are relayed.
#[derive(Debug)]
pub struct Origin {
    /// `http://host:port` and the path prefix, without a trailing `/`.
    base: String,
    agent: ureq::Agent,
    /// Wakes the server's driver whenever a fetch delivers an event.
    wakeup: Wakeup,
}

/// What the origin answered, before its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginHead {
    pub status: u16,
    pub content_length: Option<u64>,
    pub content_type: Option<String>,
}

impl OriginHead {
    /// A 2xx status: the body is the content asked for.
    #[must_use]
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// What a fetch produces, in this order: one `Head`, `Data` chunks, then `End` or `Failed`
/// (`Failed` alone when the origin never answered).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OriginEvent {
    Head(OriginHead),
    Data(Vec<u8>),
    /// The body is complete.
    End,
    /// The origin could not be reached, or broke off: the reason, naming the URL.
    Failed(String),
}

impl Origin {
    /// Parses `http://host[:port][/prefix]`; the error names what is wrong with it. Fetches
    /// call `wakeup` after every event they deliver.
    pub fn new(url: &str, wakeup: Wakeup) -> Result<Self, Error> {
        let bad = |why| Error::Url {
            url: url.to_owned(),
            why,
        };
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(bad("the origin must be plain http:// (no TLS client)")),
            _ => return Err(bad("the origin must be an http:// URL")),
        }
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.host().is_empty() {
            return Err(bad("no host"));
        }
        if authority.as_str().contains('@') {
            return Err(bad("user info is not supported"));
        }
        if uri.query().is_some() {
            return Err(bad(
                "the origin URL takes no query (requests bring their own)",
            ));
        }
        let prefix = uri.path().trim_end_matches('/');
        let config = ureq::Agent::config_builder()
            .timeout_connect(Some(CONNECT_TIMEOUT))
            // A fresh connection per fetch: an origin may close a kept-alive connection at any
            // time (RFC 9112 §9.6), and ureq sends on a pooled one whose close has not arrived
            // yet without retrying, failing a request a new connection would have served.
            .max_idle_connections(0)
            .timeout_recv_response(Some(HEAD_TIMEOUT))
            // A status is relayed, not an error of the fetch.
            .http_status_as_error(false)
            // A redirect is the origin's answer; an edge does not chase it for the client.
            .max_redirects(0)
            .build();
        Ok(Self {
            base: format!("http://{authority}{prefix}"),
            agent: config.into(),
            wakeup,
        })
    }

    /// The origin URL of a request path (with its query). Paths that are not absolute or that
    /// climb with `..` (also percent-encoded) are refused, so a client cannot step out of the
    /// origin's prefix.
    pub fn url_for(&self, request_path: &str) -> Result<String, Error> {
        let path = request_path.split('#').next().unwrap_or_default();
        if !path.starts_with('/') {
            return Err(Error::Refused(format!(
                "{request_path:?} is not an absolute URL path"
            )));
        }
        let decoded = percent_decode(path.split('?').next().unwrap_or_default())?;
        if decoded.split('/').any(|s| s == "..") {
            return Err(Error::Refused(format!(
                "{request_path:?} climbs out with .."
            )));
        }
        if path
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(Error::BadRequest(format!(
                "{request_path:?} has whitespace or control characters"
            )));
        }
        Ok(format!("{}{path}", self.base))
    }

    /// Starts fetching `request_path` from the origin on a new thread.
    pub fn fetch(&self, request_path: &str) -> Result<OriginResponse, Error> {
        let url = self.url_for(request_path)?;
        let (tx, rx) = mpsc::sync_channel(QUEUED_CHUNKS);
        let task = TaskWaker::default();
        let notify = Notify {
            task: task.clone(),
            driver: self.wakeup.clone(),
        };
        let agent = self.agent.clone();
        let thread_url = url.clone();
        std::thread::Builder::new()
            .name("origin fetch".into())
            .spawn(move || fetch(&agent, &thread_url, &tx, &notify))
            .map_err(|e| Error::io("starting an origin fetch", e))?;
        Ok(OriginResponse { url, rx, task })
    }
}

/// The waker of the task (an HTTP/3 response) waiting for a fetch's next event, if any.
type TaskWaker = Arc<Mutex<Option<Waker>>>;

/// Who is told when a fetch delivers an event: the waiting task, then the driver, which runs
/// the connections (and their woken tasks).
struct Notify {
    task: TaskWaker,
    driver: Wakeup,
}

impl Notify {
    fn notify(&self) {
        let waker = self.task.lock().map(|mut w| w.take()).unwrap_or_default();
        if let Some(w) = waker {
            w.wake();
        }
        self.driver.wake();
    }
}

/// Runs one GET; stops early when the receiving side is gone (the client left).
fn fetch(agent: &ureq::Agent, url: &str, tx: &SyncSender<OriginEvent>, notify: &Notify) {
    let send = |event| {
        let delivered = tx.send(event).is_ok();
        notify.notify();
        delivered
    };
    let response = match agent.get(url).call() {
        Ok(r) => r,
        Err(e) => {
            send(OriginEvent::Failed(format!("origin {url}: {e}")));
            return;
        }
    };
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &ureq::http::HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let head = OriginHead {
        status: response.status().as_u16(),
        content_length: header("content-length").and_then(|v| v.parse().ok()),
        content_type: header("content-type"),
    };
    if !send(OriginEvent::Head(head)) {
        return;
    }
    let mut body = response.into_body().into_reader();
    loop {
        let mut buf = vec![0u8; CHUNK];
        match body.read(&mut buf) {
            Ok(0) => {
                send(OriginEvent::End);
                return;
            }
            Ok(n) => {
                buf.truncate(n);
                if !send(OriginEvent::Data(buf)) {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                send(OriginEvent::Failed(format!("origin {url}: body: {e}")));
                return;
            }
        }
    }
}

/// A fetch in progress: its events, taken without blocking.
#[derive(Debug)]
pub struct OriginResponse {
    url: String,
    rx: Receiver<OriginEvent>,
    task: TaskWaker,
}

impl OriginResponse {
    /// The origin URL fetched.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The next event, if one has arrived. A fetch thread that vanished without a last event
    /// shows as `Failed`.
    pub fn poll(&mut self) -> Option<OriginEvent> {
        match self.rx.try_recv() {
            Ok(event) => Some(event),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(OriginEvent::Failed(format!(
                "origin {}: the fetch ended without a result",
                self.url
            ))),
        }
    }

    /// [`OriginResponse::poll`] for a future: while nothing has arrived, the task is woken
    /// when the fetch delivers its next event.
    pub fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<OriginEvent> {
        if let Some(event) = self.poll() {
            return Poll::Ready(event);
        }
        if let Ok(mut task) = self.task.lock() {
            *task = Some(cx.waker().clone());
        }
        // An event sent between the first look and the registration found no waker to wake.
        self.poll().map_or(Poll::Pending, Poll::Ready)
    }
}

/// An origin's response relayed on an hq-interop stream: the body as it arrives, FIN at its
/// end. HTTP/0.9 has no status, so a non-2xx status or a failure is an error (the caller
/// resets the stream and logs it): a client must not take an error page, or a body cut
/// short, for the content.
#[derive(Debug)]
pub struct OriginRelay {
    response: OriginResponse,
    head: Option<OriginHead>,
    chunk: Vec<u8>,
    /// Bytes of `chunk` the stream has taken.
    sent: usize,
    written: u64,
}

impl OriginRelay {
    #[must_use]
    pub fn new(response: OriginResponse) -> Self {
        Self {
            response,
            head: None,
            chunk: Vec::new(),
            sent: 0,
            written: 0,
        }
    }

    /// Body bytes the stream has taken so far.
    #[must_use]
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The origin URL relayed.
    #[must_use]
    pub fn url(&self) -> &str {
        self.response.url()
    }

    /// Moves what the origin delivered into stream `id` until the stream pushes back or
    /// nothing more has arrived; `true` once the FIN is queued.
    pub fn pump(&mut self, conn: &mut Connection, id: StreamId) -> Result<bool, Error> {
        loop {
            while self.sent < self.chunk.len() {
                let n = stream_io::write(conn, id, &self.chunk[self.sent..])?;
                if n == 0 {
                    return Ok(false);
                }
                self.sent += n;
                self.written += n as u64;
            }
            match self.response.poll() {
                None => return Ok(false),
                Some(OriginEvent::Head(head)) => {
                    if !head.is_success() {
                        return Err(Error::Origin(format!(
                            "{} answered status {}",
                            self.url(),
                            head.status
                        )));
                    }
                    tracing::debug!(url = self.url(), ?head, "origin answered");
                    self.head = Some(head);
                }
                Some(OriginEvent::Data(data)) => {
                    self.chunk = data;
                    self.sent = 0;
                }
                Some(OriginEvent::End) => {
                    let expected = self.head.as_ref().and_then(|h| h.content_length);
                    if let Some(len) = expected.filter(|&len| len != self.written) {
                        return Err(Error::Origin(format!(
                            "{} sent {} bytes, Content-Length said {len}",
                            self.url(),
                            self.written
                        )));
                    }
                    conn.stream_finish(id)?;
                    return Ok(true);
                }
                Some(OriginEvent::Failed(why)) => return Err(Error::Origin(why)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wakeup() -> Wakeup {
        let poll = mio::Poll::new().expect("poll");
        Wakeup::new(poll.registry(), mio::Token(0)).expect("wakeup")
    }

    fn bad(url: &str) -> String {
        match Origin::new(url, wakeup()) {
            Err(Error::Url { why, .. }) => why.to_owned(),
            other => panic!("{url}: expected a bad URL, got {other:?}"),
        }
    }

    #[test]
    fn origin_urls_are_checked() {
        assert!(bad("https://example.com").contains("plain http://"));
        assert!(bad("ftp://example.com/").contains("http:// URL"));
        assert!(bad("example.com").contains("http:// URL"));
        assert!(bad("http://u:p@example.com/").contains("user info"));
        assert!(bad("http://example.com/x?a=1").contains("no query"));
        assert!(bad("not a url at all").contains("URL"));
    }

    #[test]
    fn request_paths_map_under_the_prefix() {
        let o = Origin::new("http://127.0.0.1:8080", wakeup()).expect("origin");
        assert_eq!(
            o.url_for("/video.bin").expect("file"),
            "http://127.0.0.1:8080/video.bin"
        );
        assert_eq!(
            o.url_for("/live/cam?fps=30#x").expect("live"),
            "http://127.0.0.1:8080/live/cam?fps=30"
        );
        let o = Origin::new("http://origin.example:81/cdn/", wakeup()).expect("origin");
        assert_eq!(
            o.url_for("/a/b%20c").expect("nested"),
            "http://origin.example:81/cdn/a/b%20c"
        );
        for path in ["/../x", "/a/%2e%2e/x", "x", "/a b", "/%zz"] {
            assert!(o.url_for(path).is_err(), "{path} was accepted");
        }
    }
}
