//! The HTTP/3 side of `recoup serve`: one task per connection accepts requests, one task per
//! request answers it from [`Sources`].
//!
//! Files get `Content-Length`, a `Content-Type` from the extension and single byte ranges
//! (206 / 416, RFC 9110 §14); live streams are sent as they are produced, without a length and
//! with `cache-control: no-store`. Errors: 404 for a missing file, 403 for a path leading
//! outside the root or an unreadable file (logged), 400 for a malformed path or live query,
//! 405 for methods other than GET and HEAD.

use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Poll, Waker};

use bytes::Bytes;
use h3::server::{Connection as H3Connection, RequestResolver, RequestStream};
use http::{header, Method, Request, Response, StatusCode};
use recoup_time::Instant;
use recoup_transport::streams::StreamId;

use super::adapter::{BidiStream, QuicConn};
use super::session::Session;
use super::tasks::{Spawner, Timers};
use super::webtransport;
use crate::content::{self, Content, ContentKind, Sources, LIVE_CONTENT_TYPE};
use crate::error::Error;
use crate::live::{LiveParams, LiveStream};
use crate::metrics::Metrics;
use crate::origin::{OriginEvent, OriginResponse};
use crate::range::{self, ByteRange};

/// File bytes per DATA frame.
const CHUNK: usize = 64 * 1024;

type Stream = RequestStream<BidiStream, Bytes>;

/// What the server loop and a connection's HTTP/3 tasks share.
#[derive(Debug, Default)]
pub(crate) struct ServeState {
    /// The kind of the connection's first request, set once it is resolved.
    pub first: OnceLock<ContentKind>,
    /// Set by [`ServeState::drain`]: send GOAWAY, accept no more requests, end live streams.
    draining: AtomicBool,
    /// The accept task's waker while it waits for a request, to wake it for the GOAWAY.
    accept_waker: Mutex<Option<Waker>>,
    /// No request will be accepted any more: GOAWAY was sent, or the accept loop ended.
    goaway_sent: AtomicBool,
    /// Requests being answered.
    in_flight: AtomicUsize,
}

impl ServeState {
    /// Starts a graceful drain (RFC 9114 §5.2): GOAWAY, then the requests in flight finish.
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        if let Some(w) = lock(&self.accept_waker).take() {
            w.wake();
        }
    }

    /// Whether a drain was asked for.
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// GOAWAY is sent and no request is in flight: the connection may close.
    pub(crate) fn drained(&self) -> bool {
        self.goaway_sent.load(Ordering::SeqCst) && self.in_flight.load(Ordering::SeqCst) == 0
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Counts a request as in flight while it lives.
struct InFlight(Arc<ServeState>);

impl InFlight {
    fn new(state: &Arc<ServeState>) -> Self {
        state.in_flight.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(state))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts serving HTTP/3 on a connection whose handshake chose `h3`; the state is shared with
/// the server loop (the first request's kind, the drain). With `webtransport` the connection
/// offers extended CONNECT (RFC 9220), HTTP Datagrams (RFC 9297) and WebTransport
/// (draft-ietf-webtrans-http3), and accepts a session at [`webtransport::ECHO_PATH`].
pub(crate) fn session(
    now: Instant,
    sources: Arc<Sources>,
    remote: SocketAddr,
    webtransport: bool,
) -> (Session, Arc<ServeState>) {
    let session = Session::new(now, webtransport);
    let state = Arc::new(ServeState::default());
    let spawner = session.spawner();
    spawner.spawn(accept_requests(
        Server {
            quic: session.quic(),
            sources,
            timers: session.timers(),
            spawner: spawner.clone(),
            remote,
            state: Arc::clone(&state),
        },
        webtransport,
    ));
    (session, state)
}

/// What a connection's tasks share to answer requests.
#[derive(Clone)]
struct Server {
    quic: QuicConn,
    sources: Arc<Sources>,
    timers: Arc<Timers>,
    spawner: Spawner,
    remote: SocketAddr,
    state: Arc<ServeState>,
}

impl Server {
    fn answer(&self, request: Request<()>, stream: Stream) {
        self.spawner.spawn(answer(
            request,
            stream,
            Arc::clone(&self.sources),
            Arc::clone(&self.timers),
            self.remote,
            InFlight::new(&self.state),
        ));
    }

    fn resolve_and_answer(&self, resolver: RequestResolver<QuicConn, Bytes>) {
        let server = self.clone();
        self.spawner.spawn(async move {
            match resolver.resolve_request().await {
                Ok((request, stream)) => server.answer(request, stream),
                Err(e) => tracing::info!(remote = %server.remote, "bad HTTP/3 request: {e}"),
            }
        });
    }
}

/// The settings of a connection that offers WebTransport: extended CONNECT (RFC 9220 §3),
/// SETTINGS_H3_DATAGRAM (RFC 9297 §2.1.1), and WebTransport's (draft-ietf-webtrans-http3, Establishing a WebTransport-Capable HTTP/3 Connection),
/// one session per connection, as browsers open them.
async fn webtransport_connection(
    quic: QuicConn,
) -> Result<H3Connection<QuicConn, Bytes>, h3::error::ConnectionError> {
    h3::server::builder()
        .enable_extended_connect(true)
        .enable_datagram(true)
        .enable_webtransport(true)
        .max_webtransport_sessions(1)
        .send_grease(true)
        .build(quic)
        .await
}

/// What the accept loop waits for.
enum Next<T> {
    Accepted(T),
    Drain,
}

async fn accept_requests(server: Server, webtransport: bool) {
    let (remote, state) = (server.remote, Arc::clone(&server.state));
    let setup = if webtransport {
        webtransport_connection(server.quic.clone()).await
    } else {
        H3Connection::new(server.quic.clone()).await
    };
    let mut conn: H3Connection<QuicConn, Bytes> = match setup {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%remote, "HTTP/3 connection setup failed: {e}");
            return;
        }
    };
    loop {
        let next = {
            let mut accept = std::pin::pin!(conn.accept());
            std::future::poll_fn(|cx| {
                if state.draining() && !state.goaway_sent.load(Ordering::SeqCst) {
                    return Poll::Ready(Next::Drain);
                }
                *lock(&state.accept_waker) = Some(cx.waker().clone());
                accept.as_mut().poll(cx).map(Next::Accepted)
            })
            .await
        };
        match next {
            Next::Drain => {
                // The GOAWAY names the request after the last accepted: every request below it
                // is answered, none after it (RFC 9114 §5.2).
                if let Err(e) = conn.shutdown(1).await {
                    tracing::debug!(%remote, "GOAWAY: {e}");
                }
                state.goaway_sent.store(true, Ordering::SeqCst);
                tracing::info!(%remote, "GOAWAY sent");
            }
            Next::Accepted(Ok(Some(resolver))) if !webtransport => {
                server.resolve_and_answer(resolver);
            }
            Next::Accepted(Ok(Some(resolver))) => {
                // A WebTransport CONNECT takes the connection (h3-webtransport's session owns
                // it), so with WebTransport on the headers are read before the next request.
                let (request, stream) = match resolver.resolve_request().await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::info!(%remote, "bad HTTP/3 request: {e}");
                        continue;
                    }
                };
                if !webtransport::is_webtransport(&request) {
                    server.answer(request, stream);
                } else if request.uri().path() == webtransport::ECHO_PATH {
                    serve_webtransport(&server, request, stream, conn).await;
                    state.goaway_sent.store(true, Ordering::SeqCst);
                    return;
                } else if let (true, Some(egress)) = (
                    request.uri().path() == crate::moq::PATH,
                    server.sources.moq.clone(),
                ) {
                    serve_moq(&server, egress, request, stream, conn).await;
                    state.goaway_sent.store(true, Ordering::SeqCst);
                    return;
                } else {
                    refuse_webtransport(remote, &request, stream).await;
                }
            }
            Next::Accepted(Ok(None)) => break,
            Next::Accepted(Err(e)) => {
                // Peers close with H3_NO_ERROR or, like aioquic, with 0: both are normal.
                tracing::debug!(%remote, "HTTP/3 connection ended: {e}");
                break;
            }
        }
    }
    // Whatever ended the loop, nothing more is accepted: a drain need not wait for a GOAWAY.
    state.goaway_sent.store(true, Ordering::SeqCst);
}

/// Accepts a WebTransport session on `conn` and echoes on it until the connection ends,
/// answering the HTTP requests that arrive meanwhile.
async fn serve_webtransport(
    server: &Server,
    request: Request<()>,
    stream: Stream,
    conn: H3Connection<QuicConn, Bytes>,
) {
    let remote = server.remote;
    let connect = server.quic.tap(stream.id().into_inner());
    let path = request.uri().path().to_owned();
    // The session counts as a request in flight: a drain waits for it to close.
    let host = WebTransportHost {
        server: server.clone(),
        in_flight: Some(InFlight::new(&server.state)),
    };
    match webtransport::Session::accept(request, stream, conn).await {
        Ok(session) => {
            webtransport::echo(
                session,
                connect,
                server.quic.datagrams(),
                remote,
                server.spawner.clone(),
                host,
            )
            .await;
        }
        // Without the client's SETTINGS_ENABLE_WEBTRANSPORT and SETTINGS_H3_DATAGRAM,
        // h3-webtransport closes the connection with H3_SETTINGS_ERROR
        // (draft-ietf-webtrans-http3, Establishing a WebTransport-Capable HTTP/3 Connection).
        Err(e) => tracing::warn!(%remote, %path, "WebTransport session refused: {e}"),
    }
}

/// Accepts a WebTransport session on `conn` for the MoQ egress and serves it until it ends
/// (`crate::moq`), answering the HTTP requests that arrive meanwhile.
async fn serve_moq(
    server: &Server,
    egress: crate::moq::Egress,
    request: Request<()>,
    stream: Stream,
    conn: H3Connection<QuicConn, Bytes>,
) {
    let remote = server.remote;
    let connect = server.quic.tap(stream.id().into_inner());
    let host = WebTransportHost {
        server: server.clone(),
        in_flight: Some(InFlight::new(&server.state)),
    };
    match webtransport::Session::accept(request, stream, conn).await {
        Ok(session) => {
            let conn = crate::moq::Connection {
                quic: server.quic.clone(),
                connect,
                datagrams: server.quic.datagrams(),
                spawner: server.spawner.clone(),
                timers: Arc::clone(&server.timers),
                remote,
            };
            crate::moq::serve(egress, session, conn, host).await;
        }
        Err(e) => tracing::warn!(%remote, "MoQ WebTransport session refused: {e}"),
    }
}

/// The server as a WebTransport session sees it.
struct WebTransportHost {
    server: Server,
    /// The session, while it lasts.
    in_flight: Option<InFlight>,
}

impl webtransport::Host for WebTransportHost {
    fn draining(&self) -> bool {
        self.server.state.draining()
    }

    fn request(&self, request: Request<()>, stream: Stream) {
        self.server.answer(request, stream);
    }

    fn session_ended(&mut self) {
        self.in_flight = None;
        // The session was the connection's reason to stay; a drain may now close it once the
        // requests in flight are answered.
        if self.server.state.draining() {
            self.server.state.goaway_sent.store(true, Ordering::SeqCst);
        }
    }
}

/// A WebTransport CONNECT to a path with no session behind it: 404, logged (RFC 9110 §15.5.5).
async fn refuse_webtransport(remote: SocketAddr, request: &Request<()>, mut stream: Stream) {
    let path = request.uri().path();
    tracing::info!(%remote, stream = stream.id().into_inner(), %path, "WebTransport session refused: 404, no such path");
    let why = format!(
        "{path} (WebTransport sessions are at {})",
        webtransport::ECHO_PATH
    );
    if let Err(e) = send_error(&mut stream, StatusCode::NOT_FOUND, &why, false).await {
        tracing::debug!(%remote, "404 not sent: {e}");
    }
}

async fn answer(
    request: Request<()>,
    mut stream: Stream,
    sources: Arc<Sources>,
    timers: Arc<Timers>,
    remote: SocketAddr,
    in_flight: InFlight,
) {
    let state = &in_flight.0;
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let method = request.method().clone();
    let id = stream.id().into_inner();
    let result = if method == Method::GET || method == Method::HEAD {
        let range = request
            .headers()
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let head = method == Method::HEAD;
        let content = sources.resolve(&path);
        if let Ok(c) = &content {
            // Only the first request's kind counts: a connection has one policy.
            let _ = state.first.set(c.kind(sources.origin_kind));
        }
        match content {
            Ok(Content::File { file, len }) => {
                tracing::info!(%remote, stream = id, %method, %path, "HTTP/3");
                send_file(&mut stream, file, len, &path, range.as_deref(), head).await
            }
            Ok(Content::Live { name, params }) => {
                tracing::info!(
                    %remote,
                    stream = id,
                    %name,
                    bitrate = params.encoder.bitrate,
                    fps = params.encoder.fps,
                    gop = params.encoder.gop,
                    duration_ms = params.duration.as_millis(),
                    "HTTP/3 live stream"
                );
                send_live(
                    &mut stream,
                    &params,
                    &timers,
                    head,
                    sources.metrics.as_ref(),
                    state,
                )
                .await
            }
            Ok(Content::Origin(fetch)) => {
                tracing::info!(%remote, stream = id, %method, %path, origin = fetch.url(), "HTTP/3 relayed");
                send_origin(&mut stream, fetch, head).await
            }
            Err(e) => {
                let status = status_of(&e);
                if status == StatusCode::FORBIDDEN {
                    tracing::warn!(%remote, stream = id, %path, "refused: {e}");
                } else {
                    tracing::info!(%remote, stream = id, %path, "{status}: {e}");
                }
                let why = match e {
                    Error::NotFound(_) => path.clone(),
                    Error::Refused(why) | Error::BadRequest(why) => why,
                    other => other.to_string(),
                };
                send_error(&mut stream, status, &why, head).await
            }
        }
    } else {
        tracing::info!(%remote, stream = id, %method, %path, "method not allowed");
        let why = format!("method {method} is not allowed (GET, HEAD)");
        send_error(&mut stream, StatusCode::METHOD_NOT_ALLOWED, &why, false).await
    };
    if let Err(e) = result {
        tracing::info!(%remote, stream = id, %path, "response ended early: {e}");
        // The client must not wait for the rest of a body that will not come.
        stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
    }
}

/// The status that answers a content resolution error.
fn status_of(e: &Error) -> StatusCode {
    match e {
        Error::NotFound(_) => StatusCode::NOT_FOUND,
        Error::Refused(_) => StatusCode::FORBIDDEN,
        Error::BadRequest(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn h3_error(e: h3::error::StreamError) -> Error {
    Error::Connection(format!("HTTP/3: {e}"))
}

async fn send_error(
    stream: &mut Stream,
    status: StatusCode,
    why: &str,
    head: bool,
) -> Result<(), Error> {
    let body = format!("{status}: {why}\n");
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(header::CONTENT_LENGTH, body.len());
    if status == StatusCode::METHOD_NOT_ALLOWED {
        response = response.header(header::ALLOW, "GET, HEAD");
    }
    respond(stream, response, (!head).then(|| Bytes::from(body))).await
}

/// Sends the head, an optional whole body, and FIN.
async fn respond(
    stream: &mut Stream,
    response: http::response::Builder,
    body: Option<Bytes>,
) -> Result<(), Error> {
    let response = response
        .body(())
        .map_err(|e| Error::Config(format!("building a response: {e}")))?;
    stream.send_response(response).await.map_err(h3_error)?;
    if let Some(body) = body {
        stream.send_data(body).await.map_err(h3_error)?;
    }
    stream.finish().await.map_err(h3_error)
}

async fn send_file(
    stream: &mut Stream,
    file: std::fs::File,
    len: u64,
    path: &str,
    range_header: Option<&str>,
    head: bool,
) -> Result<(), Error> {
    let file_path = path.split(['?', '#']).next().unwrap_or_default();
    let response = Response::builder()
        .header(
            header::CONTENT_TYPE,
            content::content_type(std::path::Path::new(file_path)),
        )
        .header(header::ACCEPT_RANGES, "bytes");
    let part = match range_header.map_or(ByteRange::Full, |h| ByteRange::parse(h, len)) {
        ByteRange::Full => 0..len,
        ByteRange::Part(part) => {
            let response = response
                .status(StatusCode::PARTIAL_CONTENT)
                .header(header::CONTENT_RANGE, range::content_range(&part, len))
                .header(header::CONTENT_LENGTH, part.end - part.start);
            return send_file_body(stream, response, file, part, head).await;
        }
        ByteRange::Unsatisfiable => {
            let response = Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{len}"))
                .header(header::CONTENT_LENGTH, 0);
            return respond(stream, response, None).await;
        }
    };
    let response = response
        .status(StatusCode::OK)
        .header(header::CONTENT_LENGTH, len);
    send_file_body(stream, response, file, part, head).await
}

async fn send_file_body(
    stream: &mut Stream,
    response: http::response::Builder,
    mut file: std::fs::File,
    part: std::ops::Range<u64>,
    head: bool,
) -> Result<(), Error> {
    let response = response
        .body(())
        .map_err(|e| Error::Config(format!("building a response: {e}")))?;
    stream.send_response(response).await.map_err(h3_error)?;
    if !head {
        let read_error = |e| Error::io("reading the served file", e);
        file.seek(SeekFrom::Start(part.start)).map_err(read_error)?;
        let mut left = part.end - part.start;
        while left > 0 {
            let want = usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK));
            let mut buf = vec![0u8; want];
            let n = file.read(&mut buf).map_err(read_error)?;
            if n == 0 {
                return Err(Error::Connection(
                    "the served file shrank while it was sent".into(),
                ));
            }
            buf.truncate(n);
            left -= n as u64;
            stream.send_data(Bytes::from(buf)).await.map_err(h3_error)?;
        }
    }
    stream.finish().await.map_err(h3_error)
}

async fn send_live(
    stream: &mut Stream,
    params: &LiveParams,
    timers: &Timers,
    head: bool,
    metrics: Option<&Metrics>,
    state: &ServeState,
) -> Result<(), Error> {
    // Streamed as produced: no length; a cache must not keep a live stream.
    let response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, LIVE_CONTENT_TYPE)
        .header(header::CACHE_CONTROL, "no-store");
    if head {
        return respond(stream, response, None).await;
    }
    let response = response
        .body(())
        .map_err(|e| Error::Config(format!("building a response: {e}")))?;
    stream.send_response(response).await.map_err(h3_error)?;
    let mut live = LiveStream::new(params, timers.now(), crate::os_seed()).with_metrics(metrics);
    loop {
        if state.draining() {
            // The frames captured so far go out whole, then FIN.
            live.end();
        }
        let (data, fin) = live.take_due(timers.now(), StreamId(stream.id().into_inner()))?;
        if !data.is_empty() {
            stream
                .send_data(Bytes::from(data))
                .await
                .map_err(h3_error)?;
        }
        if fin {
            break;
        }
        if let Some(at) = live.next_wakeup() {
            timers.sleep_until(at).await;
        }
    }
    tracing::info!(
        frames = live.frames(),
        bytes = live.written(),
        "HTTP/3 live stream finished"
    );
    stream.finish().await.map_err(h3_error)
}

/// The origin's answer as it arrives: its status, Content-Type and Content-Length, then the
/// body (none for HEAD). An origin that cannot be reached is a 502 (RFC 9110 §15.6.3); one
/// that breaks off mid-body resets the stream, so the client cannot take a cut body for the
/// whole.
async fn send_origin(
    stream: &mut Stream,
    mut fetch: OriginResponse,
    head: bool,
) -> Result<(), Error> {
    let origin = match std::future::poll_fn(|cx| fetch.poll_event(cx)).await {
        OriginEvent::Head(origin) => origin,
        OriginEvent::Failed(why) => {
            tracing::warn!("{why}");
            return send_error(stream, StatusCode::BAD_GATEWAY, &why, head).await;
        }
        OriginEvent::Data(_) | OriginEvent::End => {
            let why = format!("{}: body before the status", fetch.url());
            return send_error(stream, StatusCode::BAD_GATEWAY, &why, head).await;
        }
    };
    if !origin.is_success() {
        tracing::info!(url = fetch.url(), status = origin.status, "origin answered");
    }
    let mut response = Response::builder()
        .status(StatusCode::from_u16(origin.status).unwrap_or(StatusCode::BAD_GATEWAY));
    if let Some(t) = &origin.content_type {
        response = response.header(header::CONTENT_TYPE, t);
    }
    if let Some(len) = origin.content_length {
        response = response.header(header::CONTENT_LENGTH, len);
    }
    if head {
        return respond(stream, response, None).await;
    }
    let response = response
        .body(())
        .map_err(|e| Error::Config(format!("building a response: {e}")))?;
    stream.send_response(response).await.map_err(h3_error)?;
    let mut written = 0u64;
    loop {
        match std::future::poll_fn(|cx| fetch.poll_event(cx)).await {
            OriginEvent::Data(data) => {
                written += data.len() as u64;
                stream
                    .send_data(Bytes::from(data))
                    .await
                    .map_err(h3_error)?;
            }
            OriginEvent::End if origin.content_length.is_none_or(|len| len == written) => break,
            other => {
                stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return Err(Error::Origin(format!(
                    "{}: {other:?} after {written} body bytes",
                    fetch.url()
                )));
            }
        }
    }
    tracing::info!(
        url = fetch.url(),
        bytes = written,
        "HTTP/3 relayed response finished"
    );
    stream.finish().await.map_err(h3_error)
}
