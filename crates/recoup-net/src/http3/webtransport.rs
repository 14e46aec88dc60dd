//! WebTransport over HTTP/3 (draft-ietf-webtrans-http3) in `recoup serve`, with
//! h3-webtransport over the mailbox: a session at [`ECHO_PATH`] echoes each bidirectional
//! stream's bytes back on it, each unidirectional stream's bytes on a new unidirectional stream
//! and each datagram as a datagram, until the client closes the session.
//!
//! The session ends when the client sends CLOSE_WEBTRANSPORT_SESSION or DRAIN_WEBTRANSPORT_SESSION
//! or ends the CONNECT stream (draft-ietf-webtrans-http3, Session Termination), when the server drains, or when the connection ends.
//! Then, as the draft's Session Termination requires, the session's streams are reset and stopped with WT_SESSION_GONE,
//! no datagram or stream is sent for it any more, and the server ends its side of the CONNECT
//! stream with FIN (or resets it, with the HTTP/3 error, when the client's side was malformed).
//! The connection stays for HTTP requests; streams and datagrams for other sessions are refused
//! (streams reset with WT_BUFFERED_STREAM_REJECTED, draft-ietf-webtrans-http3, Buffering Incoming Streams and Datagrams; datagrams dropped, RFC 9297
//! §2.1), each logged.
//!
//! Streams of a session are QUIC streams, so the connection's loss-recovery policy applies to
//! them as to any stream; datagrams are sent once and never retransmitted (RFC 9221 §5.2).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use h3::error::StreamError;
use h3::ext::Protocol;
use h3::quic::{self as hq, StreamErrorIncoming};
use h3::server::RequestStream;
use h3_datagram::datagram::Datagram;
use h3_datagram::datagram_handler::DatagramReader;
use h3_webtransport::server::{AcceptedBi, WebTransportSession};
use h3_webtransport::SessionId;
use http::{Method, Request};

use super::adapter::{BidiStream, Datagrams, QuicConn, RecvHalf, StreamTap};
use super::capsule::{self, Capsule, ConnectStream};
use super::tasks::Spawner;

/// The path of the echo sessions.
pub(crate) const ECHO_PATH: &str = "/webtransport/echo";

/// WT_SESSION_GONE (draft-ietf-webtrans-http3, IANA Considerations): the stream's session ended.
const WT_SESSION_GONE: u64 = 0x170d_7b68;
/// WT_BUFFERED_STREAM_REJECTED (draft-ietf-webtrans-http3, IANA Considerations): a stream for a session that
/// does not exist here.
pub(crate) const WT_BUFFERED_STREAM_REJECTED: u64 = 0x3994_bd84;

pub(crate) type Session = WebTransportSession<QuicConn, Bytes>;
type Stream = RequestStream<BidiStream, Bytes>;
type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Whether `request` is an extended CONNECT for WebTransport (RFC 9220 §3,
/// draft-ietf-webtrans-http3, Creating a New Session).
pub(crate) fn is_webtransport(request: &Request<()>) -> bool {
    request.method() == Method::CONNECT
        && request.extensions().get::<Protocol>() == Some(&Protocol::WEB_TRANSPORT)
}

/// Set once a session ended; wakes its stream tasks so they reset their streams.
#[derive(Debug, Default)]
struct End {
    ended: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl End {
    fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        for w in super::serve::lock(&self.wakers).drain(..) {
            w.wake();
        }
    }

    fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.ended.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        let mut wakers = super::serve::lock(&self.wakers);
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// What the session loop waits for.
enum Event {
    Bidi(Box<Result<Option<AcceptedBi<QuicConn, Bytes>>, StreamError>>),
    Uni(Result<Option<(SessionId, UniStream)>, h3::error::ConnectionError>),
    Datagram(Result<Datagram<Bytes>, StreamError>),
    Connect(Result<Option<Bytes>, StreamErrorIncoming>),
    Drain,
}

type UniStream = h3_webtransport::stream::RecvStream<RecvHalf, Bytes>;
type Reader = DatagramReader<Datagrams>;

/// What a session asks of the server that accepted it.
pub(crate) trait Host: Send {
    /// The server drains: the session is to end.
    fn draining(&self) -> bool;
    /// Answers an HTTP request that arrived on the session's connection.
    fn request(&self, request: Request<()>, stream: Stream);
    /// The session ended (called once); the connection stays for HTTP requests.
    fn session_ended(&mut self);
}

/// Runs an accepted echo session until the connection ends; `connect` taps its CONNECT stream.
pub(crate) async fn echo(
    session: Session,
    connect: StreamTap,
    datagrams: Datagrams,
    remote: SocketAddr,
    spawner: Spawner,
    mut host: impl Host,
) {
    let session = Arc::new(session);
    let connect_id = connect.id();
    // The session ID is the CONNECT stream's ID (draft-ietf-webtrans-http3, Session ID), which the
    // session's streams carry. Not `session.session_id()`: h3 0.0.8 converts a stream ID to a
    // session ID by its index (the ID divided by four), right only for stream 0.
    let Ok(id) = SessionId::try_from(connect_id) else {
        return;
    };
    let end = Arc::new(End::default());
    let mut parser = ConnectStream::default();
    let mut bidi: Option<Boxed<_>> = None;
    let mut uni: Option<Boxed<_>> = None;
    let mut reader: Option<Boxed<(Reader, _)>> = Some(read_datagram(session.datagram_reader()));
    let mut connect_open = true;
    // Whether the host was told that the session ended.
    let mut live_reported = false;
    let (mut streams, mut echoed, mut stray) = (0u64, 0u64, 0u64);
    tracing::info!(%remote, session = ?id, "WebTransport session accepted");
    loop {
        let event = std::future::poll_fn(|cx| {
            if !end.ended.load(Ordering::SeqCst) && host.draining() {
                return Poll::Ready(Event::Drain);
            }
            let s = Arc::clone(&session);
            let f = bidi.get_or_insert_with(|| Box::pin(async move { s.accept_bi().await }));
            if let Poll::Ready(r) = f.as_mut().poll(cx) {
                bidi = None;
                return Poll::Ready(Event::Bidi(Box::new(r)));
            }
            let s = Arc::clone(&session);
            let f = uni.get_or_insert_with(|| Box::pin(async move { s.accept_uni().await }));
            if let Poll::Ready(r) = f.as_mut().poll(cx) {
                uni = None;
                return Poll::Ready(Event::Uni(r));
            }
            if let Some(f) = &mut reader {
                if let Poll::Ready((r, d)) = f.as_mut().poll(cx) {
                    reader = Some(read_datagram(r));
                    return Poll::Ready(Event::Datagram(d));
                }
            }
            if connect_open {
                if let Poll::Ready(r) = connect.poll_data(cx) {
                    return Poll::Ready(Event::Connect(r));
                }
            }
            Poll::Pending
        })
        .await;
        let live = !end.ended.load(Ordering::SeqCst);
        match event {
            Event::Bidi(accepted) => match *accepted {
                Ok(Some(AcceptedBi::BidiStream(sid, stream))) => {
                    let (send, recv) = hq::BidiStream::<Bytes>::split(stream);
                    if sid == id && live {
                        streams += 1;
                        spawner.spawn(copy(recv, Output::Ready(send), Arc::clone(&end)));
                    } else {
                        refuse(remote, sid, id, recv, send);
                    }
                }
                Ok(Some(AcceptedBi::Request(req, stream))) => host.request(req, stream),
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(%remote, "HTTP/3 connection ended: {e}");
                    break;
                }
            },
            Event::Uni(Ok(Some((sid, recv)))) => {
                if sid == id && live {
                    streams += 1;
                    let s = Arc::clone(&session);
                    let open: Boxed<_> = Box::pin(async move { s.open_uni(id).await });
                    spawner.spawn(copy(recv, Output::Opening(open), Arc::clone(&end)));
                } else {
                    let mut recv = recv;
                    let code = refusal(sid, id);
                    tracing::info!(%remote, session = ?sid, code, "unidirectional stream refused: no such session (or it ended)");
                    hq::RecvStream::stop_sending(&mut recv, code);
                }
            }
            Event::Datagram(Ok(d)) => {
                if d.stream_id().into_inner() == connect_id && live {
                    echoed += 1;
                    if let Err(e) = datagrams.send(connect_id, d.payload()) {
                        tracing::debug!(%remote, "datagram not echoed: {e:?}");
                    }
                } else {
                    // The first is logged; a flood of them is counted, not logged one by one.
                    stray += 1;
                    let stream = d.stream_id().into_inner();
                    if stray == 1 {
                        tracing::info!(%remote, stream, "datagram dropped: no such session (RFC 9297 §2.1)");
                    } else {
                        tracing::debug!(%remote, stream, stray, "datagram dropped: no such session");
                    }
                }
            }
            Event::Connect(Ok(Some(bytes))) => match parser.feed(&bytes) {
                Ok(capsules) => {
                    for c in capsules {
                        match c {
                            Capsule::Close { code, reason } => {
                                tracing::info!(%remote, code, %reason, streams, datagrams = echoed, "WebTransport session closed by the client");
                            }
                            Capsule::Drain => {
                                tracing::info!(%remote, streams, datagrams = echoed, "WebTransport session drained by the client");
                            }
                        }
                        close(&end, &connect, &mut connect_open, None);
                    }
                }
                Err(bad) => {
                    tracing::warn!(%remote, code = bad.code, "WebTransport CONNECT stream malformed: {}", bad.why);
                    end.end();
                    connect.abort(bad.code);
                    connect_open = false;
                }
            },
            Event::Connect(Ok(None)) => {
                if let Err(bad) = parser.finish() {
                    tracing::warn!(%remote, code = bad.code, "WebTransport CONNECT stream malformed: {}", bad.why);
                }
                if live {
                    tracing::info!(%remote, streams, datagrams = echoed, "WebTransport session ended: the client closed its CONNECT stream");
                }
                close(&end, &connect, &mut connect_open, None);
            }
            Event::Connect(Err(e)) => {
                tracing::info!(%remote, "WebTransport CONNECT stream ended: {e}");
                end.end();
                connect_open = false;
            }
            Event::Drain => {
                tracing::info!(%remote, streams, datagrams = echoed, "WebTransport session closed: the server drains");
                close(&end, &connect, &mut connect_open, Some("draining"));
            }
            Event::Uni(Ok(None)) => break,
            Event::Uni(Err(e)) => {
                tracing::debug!(%remote, "HTTP/3 connection ended: {e}");
                break;
            }
            Event::Datagram(Err(e)) => {
                // A datagram too short for its Quarter Stream ID: h3-datagram closed the
                // connection with H3_DATAGRAM_ERROR (RFC 9297 §2.1).
                tracing::warn!(%remote, "HTTP Datagram refused: {e}");
                reader = None;
            }
        }
        if !live_reported && end.ended.load(Ordering::SeqCst) {
            live_reported = true;
            host.session_ended();
        }
    }
    end.end();
    if stray > 0 {
        tracing::info!(%remote, stray, "datagrams dropped on this connection: no such session");
    }
    if !live_reported {
        host.session_ended();
    }
}

fn read_datagram(mut reader: Reader) -> Boxed<(Reader, Result<Datagram<Bytes>, StreamError>)> {
    Box::pin(async move {
        let d = reader.read_datagram().await;
        (reader, d)
    })
}

/// Ends the session: its streams go (WT_SESSION_GONE) and the server's side of the CONNECT
/// stream ends with FIN, after a CLOSE_WEBTRANSPORT_SESSION (code 0) with `reason` when the
/// server is the one ending it (draft-ietf-webtrans-http3, Session Termination).
fn close(end: &End, connect: &StreamTap, open: &mut bool, reason: Option<&str>) {
    end.end();
    connect.finish_with(reason.map_or_else(Vec::new, |r| capsule::close_frame(0, r)));
    *open = false;
}

/// Why a stream for session `sid` is refused on a connection whose session is `id`: that
/// session ended (WT_SESSION_GONE, draft-ietf-webtrans-http3, Session Termination), or there is
/// no such session (WT_BUFFERED_STREAM_REJECTED, Buffering Incoming Streams and Datagrams).
fn refusal(sid: SessionId, id: SessionId) -> u64 {
    if sid == id {
        WT_SESSION_GONE
    } else {
        WT_BUFFERED_STREAM_REJECTED
    }
}

/// A bidirectional stream of an unknown or ended session: both halves refused.
fn refuse(
    remote: SocketAddr,
    sid: SessionId,
    id: SessionId,
    mut recv: impl hq::RecvStream,
    mut send: impl hq::SendStream<Bytes>,
) {
    let code = refusal(sid, id);
    tracing::info!(%remote, session = ?sid, ours = ?id, code, "bidirectional stream refused: no such session (or it ended)");
    recv.stop_sending(code);
    send.reset(code);
}

/// Where a copy writes: a stream, or one being opened.
enum Output<S> {
    Ready(S),
    Opening(Boxed<Result<S, StreamError>>),
}

/// Copies `recv` to the output until FIN; when the session ends first, both are reset and
/// stopped with WT_SESSION_GONE; a stream the peer reset is reset with the peer's code.
async fn copy<R, S>(mut recv: R, out: Output<S>, end: Arc<End>)
where
    R: hq::RecvStream<Buf = Bytes> + Send,
    S: hq::SendStreamUnframed<Bytes> + Send,
{
    let mut send = match out {
        Output::Ready(s) => s,
        Output::Opening(open) => match open.await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("echo stream not opened: {e}");
                recv.stop_sending(WT_SESSION_GONE);
                return;
            }
        },
    };
    let mut pending: Option<Bytes> = None;
    let result = std::future::poll_fn(|cx| loop {
        if end.poll(cx).is_ready() {
            return Poll::Ready(Err(WT_SESSION_GONE));
        }
        if let Some(buf) = &mut pending {
            match send.poll_send(cx, buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(code_of(&e))),
                Poll::Ready(Ok(_)) if !buf.has_remaining() => pending = None,
                Poll::Ready(Ok(_)) => continue,
            }
        }
        match recv.poll_data(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(Some(chunk))) => pending = Some(chunk),
            Poll::Ready(Ok(None)) => return Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(code_of(&e))),
        }
    })
    .await;
    match result {
        Ok(()) => {
            if let Err(e) = std::future::poll_fn(|cx| send.poll_finish(cx)).await {
                tracing::debug!("echo stream not finished: {e}");
            }
        }
        Err(code) => {
            send.reset(code);
            recv.stop_sending(code);
        }
    }
}

/// The code to pass on for a stream that failed: the peer's own, else WT_SESSION_GONE.
fn code_of(e: &StreamErrorIncoming) -> u64 {
    match e {
        StreamErrorIncoming::StreamTerminated { error_code } => *error_code,
        _ => WT_SESSION_GONE,
    }
}
