//! A MoQ session on a QUIC connection of its own (raw QUIC: the connection's ALPN is a MoQ
//! version, [`ALPNS`]), as moq-net's transport: the session's streams are the connection's
//! streams, its datagrams the connection's QUIC DATAGRAM frames (RFC 9221), and its close the
//! connection's CONNECTION_CLOSE with moq-lite's code (RFC 9000 §10.2). The streams are
//! [`super::transport`]'s, so group streams get the same deadline as over WebTransport.

use std::task::{Context, Poll};

use bytes::Bytes;
use h3::quic::{self as hq, ConnectionErrorIncoming};
use h3_datagram::quic_traits::RecvDatagram;
use web_transport_trait::poll;

use super::transport::{
    Codes, GroupDeadline, RecvStream, SendStream, SessionEnd, StreamParts, TransportError,
};
use crate::http3::adapter::{QuicConn, RecvHalf, SendHalf};

/// The ALPN tokens `recoup serve --moq` offers for MoQ over raw QUIC: every version moq-net's
/// server accepts, in its order of preference (moq-lite first, then the IETF moq-transport
/// drafts; `moql` is moq-lite-01/02, negotiated by SETUP).
pub(crate) const ALPNS: &[&str] = moq_net::ALPNS;

/// The MoQ ALPN `alpn` names, if it names one.
#[must_use]
pub(crate) fn moq_alpn(alpn: &[u8]) -> Option<&'static str> {
    ALPNS.iter().copied().find(|a| a.as_bytes() == alpn)
}

/// The session's end as moq-net is told it: the peer's CONNECTION_CLOSE carries the MoQ
/// session's code.
fn closed(e: &ConnectionErrorIncoming) -> TransportError {
    match e {
        ConnectionErrorIncoming::ApplicationClose { error_code } => {
            match u32::try_from(*error_code) {
                Ok(code) => TransportError::SessionClosed {
                    code,
                    reason: "closed by the peer".into(),
                },
                Err(_) => TransportError::connection_gone(e),
            }
        }
        other => TransportError::connection_gone(other),
    }
}

/// A QUIC connection as a MoQ session, for moq-net.
#[derive(Clone, Debug)]
pub(crate) struct QuicSession {
    quic: QuicConn,
    streams: StreamParts,
    alpn: &'static str,
}

impl QuicSession {
    pub(crate) fn new(quic: QuicConn, alpn: &'static str, deadline: GroupDeadline) -> Self {
        Self {
            streams: StreamParts {
                quic: quic.clone(),
                end: SessionEnd::default(),
                codes: Codes::Quic,
                deadline,
            },
            quic,
            alpn,
        }
    }

    fn poll_ended(&self, cx: &mut Context<'_>) -> Poll<TransportError> {
        if let Poll::Ready(e) = self.streams.end.poll(cx) {
            return Poll::Ready(e);
        }
        self.quic.poll_closed(cx).map(|e| closed(&e))
    }
}

impl poll::Session for QuicSession {
    type SendStream = SendStream<SendHalf>;
    type RecvStream = RecvStream<RecvHalf>;
    type Error = TransportError;

    fn poll_accept_uni(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, TransportError>> {
        if let Some(e) = self.streams.end.ended() {
            return Poll::Ready(Err(e));
        }
        hq::Connection::<Bytes>::poll_accept_recv(&mut self.quic, cx).map(|r| {
            r.map(|recv| self.streams.recv(recv))
                .map_err(|e| closed(&e))
        })
    }

    fn poll_accept_bi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(Self::SendStream, Self::RecvStream), TransportError>> {
        if let Some(e) = self.streams.end.ended() {
            return Poll::Ready(Err(e));
        }
        hq::Connection::<Bytes>::poll_accept_bidi(&mut self.quic, cx).map(|r| {
            r.map(|bidi| self.streams.bidi(bidi))
                .map_err(|e| closed(&e))
        })
    }

    fn poll_open_uni(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, TransportError>> {
        if let Some(e) = self.streams.end.ended() {
            return Poll::Ready(Err(e));
        }
        hq::OpenStreams::<Bytes>::poll_open_send(&mut self.quic, cx).map(|r| {
            r.map(|send| self.streams.group(send))
                .map_err(TransportError::connection_gone)
        })
    }

    fn poll_open_bi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(Self::SendStream, Self::RecvStream), TransportError>> {
        if let Some(e) = self.streams.end.ended() {
            return Poll::Ready(Err(e));
        }
        hq::OpenStreams::<Bytes>::poll_open_bidi(&mut self.quic, cx).map(|r| {
            r.map(|bidi| self.streams.bidi(bidi))
                .map_err(TransportError::connection_gone)
        })
    }

    fn poll_send_datagram(
        &mut self,
        _cx: &mut Context<'_>,
        payload: &[u8],
    ) -> Poll<Result<(), TransportError>> {
        if let Some(e) = self.streams.end.ended() {
            return Poll::Ready(Err(e));
        }
        // A datagram the path cannot take now is dropped, as the network may drop any
        // (RFC 9221 §5): the caller is not held up.
        if let Err(e) = self.quic.datagrams().queue(Bytes::copy_from_slice(payload)) {
            tracing::debug!("MoQ datagram not sent: {e:?}");
        }
        Poll::Ready(Ok(()))
    }

    fn poll_recv_datagram(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, TransportError>> {
        if let Some(e) = self.streams.end.ended() {
            return Poll::Ready(Err(e));
        }
        self.quic
            .datagrams()
            .poll_incoming_datagram(cx)
            .map_err(|e| closed(&e))
    }

    fn max_datagram_size(&self) -> usize {
        1200
    }

    fn protocol(&self) -> Option<&str> {
        // The ALPN names the MoQ version (moq-net reads it; `moql` leaves it to SETUP).
        Some(self.alpn)
    }

    fn close(&mut self, code: u32, reason: &str) {
        if self.streams.end.ended().is_some() {
            return;
        }
        tracing::info!(
            code,
            reason,
            alpn = self.alpn,
            "MoQ session closed by the server"
        );
        self.quic.close(u64::from(code), reason);
        self.streams.end.end(TransportError::SessionClosed {
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
