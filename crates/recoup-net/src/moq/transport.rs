//! The transports moq-net's server sessions run over in `recoup serve`: the poll traits of
//! web-transport-trait (`web_transport_trait::poll`) on recoup's h3 adapter, for both kinds of
//! MoQ session. [`WtSession`] is a WebTransport session (h3-webtransport's, at
//! [`super::PATH`]); [`super::quic::QuicSession`] is a whole QUIC connection whose ALPN is a
//! MoQ version. Both hand moq-net the same streams ([`SendStream`], [`RecvStream`]) over the
//! adapter's stream halves; they differ in how a session ends and in how stream error codes
//! travel ([`Codes`]).
//!
//! Each clone of a session keeps its own operation in progress (an accept, an open), as the
//! poll contract asks ([`Slot`]); the session itself (its streams, datagrams, end) is shared.
//! Streams of another WebTransport session, and HTTP requests, never reach the MoQ session:
//! the former are refused as the echo session refuses them, the latter are answered by the
//! server.
//!
//! Unidirectional streams the MoQ session opens carry its groups (moq-lite: one group per
//! stream), so each gets the session's deadline ([`GroupDeadline`], kept by
//! [`crate::http3::adapter`]'s `Deadline`): a group whose bytes are not acknowledged in time is
//! reset rather than retransmitted.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::quic::{self as hq, StreamErrorIncoming};
use h3_datagram::quic_traits::RecvDatagram;
use h3_webtransport::server::AcceptedBi;
use h3_webtransport::SessionId;
use web_transport_trait::poll;

use crate::http3::adapter::{Datagrams, QuicConn, RecvHalf, SendHalf, StreamTap};
use crate::http3::capsule;
use crate::http3::serve::lock;
use crate::http3::webtransport::{Host, Session, WT_BUFFERED_STREAM_REJECTED};

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type WtSend = h3_webtransport::stream::SendStream<SendHalf, Bytes>;
type WtRecv = h3_webtransport::stream::RecvStream<RecvHalf, Bytes>;

/// The first HTTP/3 error code of the WebTransport application error range
/// (draft-ietf-webtrans-http3, Resetting Data Streams: WEBTRANSPORT_APPLICATION_ERROR).
const WT_APPLICATION_ERROR_FIRST: u64 = 0x52e4_a40f_a8db;

/// The HTTP/3 error code that carries WebTransport application error `code` on a QUIC stream
/// (draft-ietf-webtrans-http3, Resetting Data Streams): every 0x1f-th code is skipped, being
/// reserved for GREASE (RFC 9114 §8.1).
#[must_use]
pub(crate) fn http3_code(code: u32) -> u64 {
    let n = u64::from(code);
    WT_APPLICATION_ERROR_FIRST + n + n / 0x1e
}

/// The WebTransport application error code an HTTP/3 stream error code carries, if any.
#[must_use]
pub(crate) fn application_code(h3: u64) -> Option<u32> {
    let shifted = h3.checked_sub(WT_APPLICATION_ERROR_FIRST)?;
    // Codes at 0x1e mod 0x1f after the first are GREASE, not application codes.
    if shifted % 0x1f == 0x1e {
        return None;
    }
    u32::try_from(shifted - shifted / 0x1f).ok()
}

/// How a session's application error codes travel in RESET_STREAM and STOP_SENDING.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Codes {
    /// Mapped into HTTP/3's WebTransport range ([`http3_code`]).
    WebTransport,
    /// As they are: the QUIC application error code is moq-lite's (raw QUIC).
    Quic,
}

impl Codes {
    #[must_use]
    fn wire(self, code: u32) -> u64 {
        match self {
            Self::WebTransport => http3_code(code),
            Self::Quic => u64::from(code),
        }
    }

    #[must_use]
    fn application(self, wire: u64) -> Option<u32> {
        match self {
            Self::WebTransport => application_code(wire),
            Self::Quic => u32::try_from(wire).ok(),
        }
    }
}

/// What went wrong on the transport, as the MoQ session needs to tell it apart.
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum TransportError {
    #[error("MoQ session closed (code {code}): {reason}")]
    SessionClosed { code: u32, reason: String },
    #[error("stream reset or stopped by the peer (application code {0})")]
    Stream(u32),
    #[error("{0}")]
    Other(String),
}

impl web_transport_trait::Error for TransportError {
    fn session_error(&self) -> Option<(u32, String)> {
        match self {
            Self::SessionClosed { code, reason } => Some((*code, reason.clone())),
            _ => None,
        }
    }

    fn stream_error(&self) -> Option<u32> {
        match self {
            Self::Stream(code) => Some(*code),
            _ => None,
        }
    }
}

impl TransportError {
    /// The session's connection ended (or refused an operation).
    pub(crate) fn connection_gone(e: impl std::fmt::Display) -> Self {
        Self::SessionClosed {
            code: 0,
            reason: format!("the connection ended: {e}"),
        }
    }
}

fn stream_error(e: &StreamErrorIncoming, codes: Codes) -> TransportError {
    match e {
        StreamErrorIncoming::StreamTerminated { error_code } => {
            TransportError::Stream(codes.application(*error_code).unwrap_or(0))
        }
        other => TransportError::Other(other.to_string()),
    }
}

/// A session's end, seen by every clone and stream of it: once ended, every operation fails
/// with its error.
#[derive(Clone, Debug, Default)]
pub(crate) struct SessionEnd(Arc<Mutex<Ending>>);

#[derive(Debug, Default)]
struct Ending {
    error: Option<TransportError>,
    wakers: Vec<Waker>,
}

impl SessionEnd {
    /// Ends the session with `error` (the first end wins) and wakes whoever waits on it.
    pub(crate) fn end(&self, error: TransportError) {
        let mut e = lock(&self.0);
        if e.error.is_none() {
            e.error = Some(error);
        }
        for w in e.wakers.drain(..) {
            w.wake();
        }
    }

    pub(crate) fn ended(&self) -> Option<TransportError> {
        lock(&self.0).error.clone()
    }

    /// Ready with the session's end, if it ended; registers `cx` for it otherwise.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<TransportError> {
        let mut e = lock(&self.0);
        if let Some(err) = &e.error {
            return Poll::Ready(err.clone());
        }
        if !e.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            e.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// The deadline of a session's group streams, and the code they are reset with once it
/// passed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroupDeadline {
    pub budget: Duration,
    pub expired_code: u32,
}

/// What a session's streams share: the connection, the session's end, its codes.
#[derive(Clone, Debug)]
pub(crate) struct StreamParts {
    pub quic: QuicConn,
    pub end: SessionEnd,
    pub codes: Codes,
    pub deadline: GroupDeadline,
}

impl StreamParts {
    /// The sending half `stream` as moq-net sees it.
    pub(crate) fn send<S: hq::SendStream<Bytes>>(&self, stream: S) -> SendStream<S> {
        let id = stream.send_id().into_inner();
        SendStream {
            stream,
            quic: self.quic.clone(),
            id,
            end: self.end.clone(),
            codes: self.codes,
        }
    }

    /// A group stream: its objects are worth sending only until the deadline.
    pub(crate) fn group<S: hq::SendStream<Bytes>>(&self, stream: S) -> SendStream<S> {
        let send = self.send(stream);
        self.quic.set_deadline(
            send.id,
            self.deadline.budget,
            self.codes.wire(self.deadline.expired_code),
        );
        send
    }

    /// Both halves of `bidi` as moq-net sees them.
    pub(crate) fn bidi<B: hq::BidiStream<Bytes>>(
        &self,
        bidi: B,
    ) -> (SendStream<B::SendStream>, RecvStream<B::RecvStream>)
    where
        B::RecvStream: hq::RecvStream<Buf = Bytes>,
    {
        let (send, recv) = bidi.split();
        (self.send(send), self.recv(recv))
    }

    /// The receiving half `recv` as moq-net sees it.
    pub(crate) fn recv<R: hq::RecvStream<Buf = Bytes>>(&self, recv: R) -> RecvStream<R> {
        RecvStream {
            recv,
            buffered: std::collections::VecDeque::new(),
            fin: false,
            error: None,
            codes: self.codes,
        }
    }
}

/// An operation in progress. Behind a mutex only so that the session is `Sync`, as moq-net
/// asks of a transport; it is reached through `&mut self`, so the lock is never contended.
struct Slot<T>(Mutex<Option<Boxed<T>>>);

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self(Mutex::new(None))
    }
}

impl<T> Slot<T> {
    fn clear(&mut self) {
        *self
            .0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Polls the operation (made by `make` when none is in progress), forgetting it once done.
    fn poll(&mut self, cx: &mut Context<'_>, make: impl FnOnce() -> Boxed<T>) -> Poll<T> {
        let slot = self
            .0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let f = slot.get_or_insert_with(make);
        let out = f.as_mut().poll(cx);
        if out.is_ready() {
            *slot = None;
        }
        out
    }
}

/// What every clone of a WebTransport session shares.
struct Shared {
    session: Arc<Session>,
    id: SessionId,
    connect: StreamTap,
    datagrams: Mutex<Datagrams>,
    streams: StreamParts,
    host: Mutex<Box<dyn Host>>,
}

/// A WebTransport session of `recoup serve` for moq-net.
pub(crate) struct WtSession {
    shared: Arc<Shared>,
    accept_uni: Slot<Result<Option<(SessionId, WtRecv)>, TransportError>>,
    accept_bi: Slot<Result<Option<AcceptedBi<QuicConn, Bytes>>, TransportError>>,
    open_uni: Slot<Result<WtSend, TransportError>>,
    open_bi: Slot<Result<OpenedBi, TransportError>>,
}

type OpenedBi = h3_webtransport::stream::BidiStream<crate::http3::adapter::BidiStream, Bytes>;

impl std::fmt::Debug for WtSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WtSession")
            .field("session", &self.shared.id)
            .finish_non_exhaustive()
    }
}

impl Clone for WtSession {
    fn clone(&self) -> Self {
        Self::from_shared(Arc::clone(&self.shared))
    }
}

/// Where the session's end is announced: the CONNECT stream's watcher ends it.
#[derive(Clone)]
pub(crate) struct EndHandle(Arc<Shared>);

impl std::fmt::Debug for EndHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndHandle").finish_non_exhaustive()
    }
}

impl EndHandle {
    /// The session ended (the client closed it, or the connection went): every pending
    /// operation fails with `error`.
    pub(crate) fn end(&self, error: TransportError) {
        self.0.streams.end.end(error);
    }

    pub(crate) fn is_ended(&self) -> bool {
        self.0.streams.end.ended().is_some()
    }

    /// Whether the server drains: the session is to end.
    pub(crate) fn draining(&self) -> bool {
        lock(&self.0.host).draining()
    }

    /// Tells the server the session is over (its connection stays for HTTP requests).
    pub(crate) fn release(&self) {
        lock(&self.0.host).session_ended();
    }
}

/// How a MoQ session's WebTransport transport is set up.
pub(crate) struct WtParts {
    pub session: Session,
    pub id: SessionId,
    pub quic: QuicConn,
    pub connect: StreamTap,
    pub datagrams: Datagrams,
    pub deadline: GroupDeadline,
    pub host: Box<dyn Host>,
}

impl WtSession {
    pub(crate) fn new(parts: WtParts) -> (Self, EndHandle) {
        let shared = Arc::new(Shared {
            session: Arc::new(parts.session),
            id: parts.id,
            connect: parts.connect,
            datagrams: Mutex::new(parts.datagrams),
            streams: StreamParts {
                quic: parts.quic,
                end: SessionEnd::default(),
                codes: Codes::WebTransport,
                deadline: parts.deadline,
            },
            host: Mutex::new(parts.host),
        });
        (Self::from_shared(Arc::clone(&shared)), EndHandle(shared))
    }

    fn from_shared(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            accept_uni: Slot::default(),
            accept_bi: Slot::default(),
            open_uni: Slot::default(),
            open_bi: Slot::default(),
        }
    }

    fn poll_ended(&self, cx: &mut Context<'_>) -> Poll<TransportError> {
        self.shared.streams.end.poll(cx)
    }
}

impl poll::Session for WtSession {
    type SendStream = SendStream<WtSend>;
    type RecvStream = RecvStream<WtRecv>;
    type Error = TransportError;

    fn poll_accept_uni(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, TransportError>> {
        loop {
            if let Poll::Ready(e) = self.poll_ended(cx) {
                return Poll::Ready(Err(e));
            }
            let s = Arc::clone(&self.shared.session);
            let accepted = std::task::ready!(self.accept_uni.poll(cx, || {
                Box::pin(async move {
                    s.accept_uni()
                        .await
                        .map_err(TransportError::connection_gone)
                })
            }));
            match accepted {
                Ok(Some((sid, stream))) if sid == self.shared.id => {
                    return Poll::Ready(Ok(self.shared.streams.recv(stream)));
                }
                Ok(Some((sid, mut stream))) => {
                    tracing::info!(session = ?sid, "unidirectional stream refused: no such session");
                    hq::RecvStream::stop_sending(&mut stream, WT_BUFFERED_STREAM_REJECTED);
                }
                Ok(None) => {
                    return Poll::Ready(Err(TransportError::connection_gone("no more streams")))
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_accept_bi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(Self::SendStream, Self::RecvStream), TransportError>> {
        loop {
            if let Poll::Ready(e) = self.poll_ended(cx) {
                return Poll::Ready(Err(e));
            }
            let s = Arc::clone(&self.shared.session);
            let accepted = std::task::ready!(self.accept_bi.poll(cx, || {
                Box::pin(
                    async move { s.accept_bi().await.map_err(TransportError::connection_gone) },
                )
            }));
            match accepted {
                Ok(Some(AcceptedBi::BidiStream(sid, stream))) if sid == self.shared.id => {
                    return Poll::Ready(Ok(self.shared.streams.bidi(stream)));
                }
                Ok(Some(AcceptedBi::BidiStream(sid, stream))) => {
                    tracing::info!(session = ?sid, "bidirectional stream refused: no such session");
                    let (mut send, mut recv) = hq::BidiStream::<Bytes>::split(stream);
                    hq::RecvStream::stop_sending(&mut recv, WT_BUFFERED_STREAM_REJECTED);
                    hq::SendStream::<Bytes>::reset(&mut send, WT_BUFFERED_STREAM_REJECTED);
                }
                Ok(Some(AcceptedBi::Request(request, stream))) => {
                    lock(&self.shared.host).request(request, stream);
                }
                Ok(None) => {
                    return Poll::Ready(Err(TransportError::connection_gone("no more streams")))
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_open_uni(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, TransportError>> {
        if let Poll::Ready(e) = self.poll_ended(cx) {
            self.open_uni.clear();
            return Poll::Ready(Err(e));
        }
        let (s, id) = (Arc::clone(&self.shared.session), self.shared.id);
        let opened = std::task::ready!(self.open_uni.poll(cx, || {
            Box::pin(async move {
                s.open_uni(id)
                    .await
                    .map_err(TransportError::connection_gone)
            })
        }));
        Poll::Ready(opened.map(|stream| self.shared.streams.group(stream)))
    }

    fn poll_open_bi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(Self::SendStream, Self::RecvStream), TransportError>> {
        if let Poll::Ready(e) = self.poll_ended(cx) {
            self.open_bi.clear();
            return Poll::Ready(Err(e));
        }
        let (s, id) = (Arc::clone(&self.shared.session), self.shared.id);
        let opened = std::task::ready!(self.open_bi.poll(cx, || {
            Box::pin(async move { s.open_bi(id).await.map_err(TransportError::connection_gone) })
        }));
        Poll::Ready(opened.map(|stream| self.shared.streams.bidi(stream)))
    }

    fn poll_send_datagram(
        &mut self,
        _cx: &mut Context<'_>,
        payload: &[u8],
    ) -> Poll<Result<(), TransportError>> {
        if let Some(e) = self.shared.streams.end.ended() {
            return Poll::Ready(Err(e));
        }
        let datagrams = lock(&self.shared.datagrams);
        // A datagram the path cannot take now is dropped, as the network may drop any
        // (RFC 9221 §5): the caller is not held up.
        if let Err(e) = datagrams.send(self.shared.connect.id(), payload) {
            tracing::debug!("MoQ datagram not sent: {e:?}");
        }
        Poll::Ready(Ok(()))
    }

    fn poll_recv_datagram(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, TransportError>> {
        loop {
            if let Poll::Ready(e) = self.poll_ended(cx) {
                return Poll::Ready(Err(e));
            }
            let mut datagrams = lock(&self.shared.datagrams);
            let d = match std::task::ready!(datagrams.poll_incoming_datagram(cx)) {
                Ok(d) => d,
                Err(e) => return Poll::Ready(Err(TransportError::connection_gone(e))),
            };
            // The Quarter Stream ID names the session's CONNECT stream (RFC 9297 §2.1); a
            // datagram for another is dropped.
            let mut r = recoup_transport::coding::Reader::new(&d);
            match r.varint_with_len("Quarter Stream ID") {
                Ok((q, len)) if q == self.shared.connect.id() / 4 => {
                    return Poll::Ready(Ok(d.slice(len..)));
                }
                _ => tracing::debug!("HTTP Datagram dropped: not for the MoQ session"),
            }
        }
    }

    fn max_datagram_size(&self) -> usize {
        // The QUIC DATAGRAM limit less the Quarter Stream ID (at most 8 bytes, RFC 9297 §2.1).
        1200 - 8
    }

    fn protocol(&self) -> Option<&str> {
        // h3-webtransport answers the CONNECT without WT-Protocol: no subprotocol was chosen,
        // and the MoQ version is negotiated by the SETUP messages.
        None
    }

    fn close(&mut self, code: u32, reason: &str) {
        let end = EndHandle(Arc::clone(&self.shared));
        if end.is_ended() {
            return;
        }
        tracing::info!(code, reason, "MoQ session closed by the server");
        // CLOSE_WEBTRANSPORT_SESSION with the code, then FIN (draft-ietf-webtrans-http3,
        // Session Termination).
        self.shared
            .connect
            .finish_with(capsule::close_frame(code, reason));
        end.end(TransportError::SessionClosed {
            code,
            reason: reason.to_owned(),
        });
    }

    fn poll_closed(&mut self, cx: &mut Context<'_>) -> Poll<TransportError> {
        self.poll_ended(cx)
    }

    fn stats(&self) -> impl web_transport_trait::Stats {
        web_transport_trait::StatsUnavailable
    }
}

/// The sending half of a stream of a MoQ session.
pub(crate) struct SendStream<S> {
    stream: S,
    quic: QuicConn,
    id: u64,
    end: SessionEnd,
    codes: Codes,
}

impl<S> std::fmt::Debug for SendStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendStream").field("id", &self.id).finish()
    }
}

impl<S> poll::SendStream for SendStream<S>
where
    S: hq::SendStream<Bytes> + hq::SendStreamUnframed<Bytes> + Send + Sync + Unpin + 'static,
{
    type Error = TransportError;

    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, TransportError>> {
        let mut b = buf;
        poll::SendStream::poll_write_buf(self, cx, &mut b)
    }

    fn poll_write_buf<B: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut B,
    ) -> Poll<Result<usize, TransportError>> {
        if let Some(e) = self.end.ended() {
            return Poll::Ready(Err(e));
        }
        hq::SendStreamUnframed::<Bytes>::poll_send(&mut self.stream, cx, buf)
            .map_err(|e| stream_error(&e, self.codes))
    }

    fn set_priority(&mut self, order: u8) {
        // moq-net's send order (higher first): its rank of the group among every group it
        // sends, from the subscription's priority and the group's age. The transport serves
        // new data of higher orders first.
        self.quic.set_send_order(self.id, order);
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        let waker = Waker::noop();
        match hq::SendStream::<Bytes>::poll_finish(
            &mut self.stream,
            &mut Context::from_waker(waker),
        ) {
            Poll::Ready(r) => r.map_err(|e| stream_error(&e, self.codes)),
            Poll::Pending => Ok(()),
        }
    }

    fn reset(&mut self, code: u32) {
        hq::SendStream::<Bytes>::reset(&mut self.stream, self.codes.wire(code));
    }

    fn poll_closed(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), TransportError>> {
        self.quic
            .poll_send_closed(self.id, cx)
            .map_err(|e| stream_error(&e, self.codes))
    }
}

/// The receiving half of a stream of a MoQ session.
pub(crate) struct RecvStream<R> {
    recv: R,
    /// Bytes received and not yet read.
    buffered: std::collections::VecDeque<Bytes>,
    fin: bool,
    error: Option<TransportError>,
    codes: Codes,
}

impl<R> std::fmt::Debug for RecvStream<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvStream")
            .field("fin", &self.fin)
            .finish_non_exhaustive()
    }
}

impl<R: hq::RecvStream<Buf = Bytes>> RecvStream<R> {
    /// Moves what arrived into `buffered` until nothing more is there; ready at the end (FIN or
    /// an error), pending (with `cx` registered) otherwise.
    fn fill(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while !self.fin && self.error.is_none() {
            match std::task::ready!(self.recv.poll_data(cx)) {
                Ok(Some(b)) => self.buffered.push_back(b),
                Ok(None) => self.fin = true,
                Err(e) => self.error = Some(stream_error(&e, self.codes)),
            }
        }
        Poll::Ready(())
    }
}

impl<R> poll::RecvStream for RecvStream<R>
where
    R: hq::RecvStream<Buf = Bytes> + Send + Sync + Unpin + 'static,
{
    type Error = TransportError;

    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        dst: &mut [u8],
    ) -> Poll<Result<Option<usize>, TransportError>> {
        let ended = self.fill(cx).is_ready();
        if let Some(front) = self.buffered.front_mut() {
            let n = front.len().min(dst.len());
            dst[..n].copy_from_slice(&front[..n]);
            front.advance(n);
            if front.is_empty() {
                self.buffered.pop_front();
            }
            return Poll::Ready(Ok(Some(n)));
        }
        if !ended {
            return Poll::Pending;
        }
        match &self.error {
            Some(e) => Poll::Ready(Err(e.clone())),
            None => Poll::Ready(Ok(None)),
        }
    }

    fn stop(&mut self, code: u32) {
        self.recv.stop_sending(self.codes.wire(code));
        self.buffered.clear();
    }

    fn poll_closed(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), TransportError>> {
        std::task::ready!(self.fill(cx));
        Poll::Ready(self.error.clone().map_or(Ok(()), Err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_codes_map_to_http3_codes_and_back() {
        // draft-ietf-webtrans-http3, Resetting Data Streams: 0 is the first code, and the
        // 0x1f-th code after it is reserved, so 0x1e maps past it.
        assert_eq!(http3_code(0), 0x52e4_a40f_a8db);
        assert_eq!(http3_code(0x1d), 0x52e4_a40f_a8db + 0x1d);
        assert_eq!(http3_code(0x1e), 0x52e4_a40f_a8db + 0x1f);
        for code in [0, 1, 0x1d, 0x1e, 0x1f, 1000, u32::MAX] {
            assert_eq!(application_code(http3_code(code)), Some(code), "{code}");
            assert_eq!(
                Codes::WebTransport.application(Codes::WebTransport.wire(code)),
                Some(code)
            );
            // Raw QUIC carries moq-lite's codes as they are.
            assert_eq!(Codes::Quic.wire(code), u64::from(code));
            assert_eq!(Codes::Quic.application(u64::from(code)), Some(code));
        }
        assert_eq!(application_code(0x52e4_a40f_a8db + 0x1e), None);
        assert_eq!(application_code(0x100), None);
        assert_eq!(Codes::Quic.application(1 << 40), None);
    }
}
