//! h3's QUIC traits (`h3::quic`) over a recoup [`Connection`], through a mailbox.
//!
//! The transport connection lives inside the endpoint and is lent to the application only during
//! [`crate::driver::ConnectionHandler::drive`], so h3's stream handles cannot hold it. They hold
//! the connection's [`Mailbox`] instead: [`Mailbox::pull`] moves transport events, new streams and
//! received bytes in, the tasks run, and [`Mailbox::push`] moves what they wrote, finished, reset,
//! opened or closed out to the transport. Both bound what they buffer (so flow control still pushes
//! back on the peer) and wake the tasks whose handles can make progress.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::quic::{self as hq, ConnectionErrorIncoming, StreamErrorIncoming, WriteBuf};
use h3_datagram::datagram::EncodedDatagram;
use h3_datagram::quic_traits::{
    DatagramConnectionExt, RecvDatagram, SendDatagram, SendDatagramErrorIncoming,
};
use recoup_time::Instant;
use recoup_transport::coding::BufMutExt;
use recoup_transport::streams::{StreamEvent, StreamId};
use recoup_transport::{CloseReason, Connection, Event};

use crate::stream_io;

/// Bytes a send handle may queue before `poll_ready` waits for the transport to take them.
const SEND_QUEUE: usize = 64 * 1024;
/// Bytes read ahead of a receive handle before the stream is left to flow control.
const RECV_QUEUE: usize = 256 * 1024;
/// Bytes read from the transport at a time.
const READ_CHUNK: usize = 32 * 1024;
/// Received HTTP Datagrams held for a reader that is slower than the peer; beyond it the
/// oldest are dropped, as a datagram may be anywhere on the path (RFC 9221 §5).
const DATAGRAM_QUEUE: usize = 256;

/// Why a stream half ended abnormally.
#[derive(Clone, Debug)]
enum Ended {
    /// The peer reset it (receiving) or asked us to stop (sending), with its code.
    Peer(u64),
    /// The transport refused an operation on it.
    Transport(String),
}

impl Ended {
    fn to_error(&self) -> StreamErrorIncoming {
        match self {
            Self::Peer(code) => StreamErrorIncoming::StreamTerminated { error_code: *code },
            Self::Transport(why) => StreamErrorIncoming::Unknown(why.clone().into()),
        }
    }
}

/// One stream's state between its h3 handles and the transport.
#[derive(Debug, Default)]
struct StreamBox {
    /// A receive handle exists (otherwise received bytes are discarded).
    recv_handle: bool,
    received: VecDeque<Bytes>,
    received_len: usize,
    recv_fin: bool,
    recv_ended: Option<Ended>,
    /// STOP_SENDING the handle asked for, not yet passed to the transport.
    stop: Option<u64>,
    recv_waker: Option<Waker>,

    /// A send handle exists.
    send_handle: bool,
    queued: VecDeque<Bytes>,
    queued_len: usize,
    /// The handle finished the stream: FIN goes after the queued bytes.
    finish: bool,
    /// RESET_STREAM the handle asked for, not yet passed to the transport.
    reset: Option<u64>,
    /// Nothing more will be passed to the transport (FIN or reset done, or the peer stopped us).
    send_done: bool,
    send_ended: Option<Ended>,
    send_waker: Option<Waker>,
    /// The stream's bytes must be acknowledged within a time (a MoQ group's deadline), or the
    /// stream is reset.
    deadline: Option<Deadline>,
    /// The task waiting for the sending side to be closed (all acknowledged, reset or stopped).
    closed_waker: Option<Waker>,
    /// A send order the handle set, not yet passed to the transport.
    send_order: Option<u8>,
}

/// A stream whose bytes are worth sending only until `budget` after the application wrote
/// them (a MoQ group whose objects expire): once a byte written at `t` is still unacknowledged
/// at `t + budget`, the stream is reset with `code` (RFC 9000 §3.1: RESET_STREAM from "Send"
/// or "Data Sent"), so none of it is retransmitted or copied any more. Offsets count the bytes
/// the application wrote; bytes still queued here or in flight are unacknowledged.
#[derive(Debug)]
struct Deadline {
    budget: Duration,
    code: u64,
    /// Bytes the application wrote to the stream so far.
    written: u64,
    /// The end offset and time of each write not yet known to be acknowledged, oldest first.
    writes: VecDeque<(u64, Instant)>,
    /// The stream was reset at this time because a write outlived its budget.
    expired: Option<Instant>,
}

impl Deadline {
    /// When the oldest unacknowledged write expires.
    fn due(&self) -> Option<Instant> {
        if self.expired.is_some() {
            return None;
        }
        self.writes.front().map(|&(_, at)| at + self.budget)
    }

    /// Whether nothing written is still waiting to be acknowledged.
    fn settled(&self) -> bool {
        self.expired.is_some() || self.writes.is_empty()
    }
}

impl StreamBox {
    fn incoming(bidi: bool) -> Self {
        Self {
            recv_handle: true,
            send_handle: bidi,
            send_done: !bidi,
            ..Self::default()
        }
    }

    fn outgoing(bidi: bool) -> Self {
        Self {
            recv_handle: bidi,
            send_handle: true,
            ..Self::default()
        }
    }

    /// Whether the box can go: no handle left and nothing still to pass to the transport.
    fn is_spent(&self) -> bool {
        !self.recv_handle
            && !self.send_handle
            && self.send_done
            && self.stop.is_none()
            && self.deadline.as_ref().is_none_or(Deadline::settled)
    }

    /// Notes `n` bytes written by the application at `now`, for the stream's deadline.
    fn wrote(&mut self, n: usize, now: Instant) {
        if let Some(d) = &mut self.deadline {
            d.written += n as u64;
            d.writes.push_back((d.written, now));
        }
    }
}

/// What h3's handles and the transport exchange for one connection.
#[derive(Debug, Default)]
pub(crate) struct Mailbox {
    streams: HashMap<u64, StreamBox>,
    incoming_bidi: VecDeque<u64>,
    incoming_uni: VecDeque<u64>,
    accept_wakers: Vec<Waker>,
    /// Per direction (bidirectional first): the tasks waiting for a stream of their own, and
    /// the streams opened for them but not yet taken.
    open_waiters: [Vec<Waker>; 2],
    opened: [VecDeque<u64>; 2],
    /// The CONNECTION_CLOSE h3 asked for (application code, reason).
    close: Option<(u64, String)>,
    /// The transport connection ended.
    closed: Option<ConnectionErrorIncoming>,
    /// The tasks waiting for the connection to end.
    closed_wakers: Vec<Waker>,
    /// HTTP Datagrams (RFC 9297) are offered on this connection (SETTINGS_H3_DATAGRAM, §2.1.1):
    /// received QUIC DATAGRAM frames go to the datagram reader; otherwise nothing may carry
    /// them and they are dropped.
    http_datagrams: bool,
    datagrams_in: VecDeque<Bytes>,
    datagram_waker: Option<Waker>,
    datagrams_out: VecDeque<Bytes>,
    /// The largest datagram the transport takes now; `None` while the peer accepts none.
    datagram_max: Option<usize>,
    /// The time of the last pull or push: when the tasks' writes in between happened.
    now: Instant,
}

/// The mailbox as the handles share it (behind a mutex only so a server stays `Send`: one
/// thread uses it).
pub(crate) type Shared = Arc<Mutex<Mailbox>>;

/// The mailbox; a panic elsewhere while it was held leaves nothing half-done worth refusing.
pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, Mailbox> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Adds `waker` unless the task it wakes is already waiting (a task re-polled while it waits
/// must not grow the list).
fn wait(wakers: &mut Vec<Waker>, waker: &Waker) {
    if !wakers.iter().any(|w| w.will_wake(waker)) {
        wakers.push(waker.clone());
    }
}

fn wake_all(wakers: &mut Vec<Waker>) {
    for w in wakers.drain(..) {
        w.wake();
    }
}

fn wake(waker: &mut Option<Waker>) {
    if let Some(w) = waker.take() {
        w.wake();
    }
}

/// h3's view of a transport close.
fn incoming_error(reason: &CloseReason) -> ConnectionErrorIncoming {
    match reason {
        CloseReason::IdleTimeout => ConnectionErrorIncoming::Timeout,
        CloseReason::Remote(e) | CloseReason::Local(e) if e.application => {
            ConnectionErrorIncoming::ApplicationClose { error_code: e.code }
        }
        other => ConnectionErrorIncoming::Undefined(Arc::new(std::io::Error::other(format!(
            "{other:?}"
        )))),
    }
}

impl Mailbox {
    /// Moves the transport's news in: events, streams the peer opened, received bytes. Returns
    /// the close reason when the connection ended in this call.
    pub(crate) fn pull(&mut self, now: Instant, conn: &mut Connection) -> Option<CloseReason> {
        self.now = now;
        let mut ended = None;
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Connected => {}
                Event::Closed(reason) => {
                    self.end(incoming_error(&reason));
                    ended = Some(reason);
                }
                Event::Stream(StreamEvent::Reset { id, code }) => {
                    if let Some(s) = self.streams.get_mut(&id.0) {
                        s.recv_ended.get_or_insert(Ended::Peer(code));
                        wake(&mut s.recv_waker);
                    }
                }
                Event::Stream(StreamEvent::Stopped { id, code }) => {
                    if let Some(s) = self.streams.get_mut(&id.0) {
                        s.send_ended.get_or_insert(Ended::Peer(code));
                        s.send_done = true;
                        s.queued.clear();
                        s.queued_len = 0;
                        wake(&mut s.send_waker);
                    }
                }
                Event::Stream(StreamEvent::Finished(_)) => {}
                Event::DatagramReceived => self.receive_datagrams(conn),
            }
        }
        for (bidi, queue) in [
            (true, &mut self.incoming_bidi),
            (false, &mut self.incoming_uni),
        ] {
            while let Some(id) = conn.accept_stream(bidi) {
                self.streams.insert(id.0, StreamBox::incoming(bidi));
                queue.push_back(id.0);
            }
        }
        if !self.incoming_bidi.is_empty() || !self.incoming_uni.is_empty() {
            wake_all(&mut self.accept_wakers);
        }
        for id in conn.readable_streams() {
            self.read_stream(conn, id);
        }
        self.datagram_max = conn.datagram_max_size();
        ended
    }

    /// A mailbox whose connection offers HTTP Datagrams (RFC 9297 §2.1.1).
    pub(crate) fn with_http_datagrams() -> Self {
        Self {
            http_datagrams: true,
            ..Self::default()
        }
    }

    fn receive_datagrams(&mut self, conn: &mut Connection) {
        let mut dropped = 0;
        while let Some(d) = conn.datagram_recv() {
            if !self.http_datagrams {
                dropped += 1;
                continue;
            }
            if self.datagrams_in.len() == DATAGRAM_QUEUE {
                self.datagrams_in.pop_front();
                dropped += 1;
            }
            self.datagrams_in.push_back(d);
        }
        if dropped > 0 {
            tracing::debug!(
                dropped,
                http_datagrams = self.http_datagrams,
                "DATAGRAM frames dropped on HTTP/3 (not offered, or the reader is behind)"
            );
        }
        if !self.datagrams_in.is_empty() {
            wake(&mut self.datagram_waker);
        }
    }

    fn read_stream(&mut self, conn: &mut Connection, id: StreamId) {
        let mut buf = vec![0u8; READ_CHUNK];
        let Some(s) = self.streams.get_mut(&id.0) else {
            // A stream whose handles are gone: its bytes mean nothing any more.
            while let Ok((n, fin)) = stream_io::read(conn, id, &mut buf) {
                if n == 0 || fin {
                    break;
                }
            }
            return;
        };
        let mut woke = false;
        while !s.recv_fin && s.recv_ended.is_none() && s.received_len < RECV_QUEUE {
            match stream_io::read(conn, id, &mut buf) {
                Ok((n, fin)) => {
                    if n > 0 && s.recv_handle {
                        s.received.push_back(Bytes::copy_from_slice(&buf[..n]));
                        s.received_len += n;
                    }
                    s.recv_fin |= fin;
                    woke |= n > 0 || fin;
                    if n == 0 && !fin {
                        break;
                    }
                }
                Err(e) => {
                    s.recv_ended = Some(Ended::Transport(e.to_string()));
                    woke = true;
                }
            }
        }
        if woke {
            wake(&mut s.recv_waker);
        }
    }

    /// Moves the tasks' output to the transport: opened streams, queued bytes, FINs, resets,
    /// STOP_SENDINGs and a close. Wakes the handles that can go on.
    pub(crate) fn push(&mut self, now: Instant, conn: &mut Connection) {
        self.now = now;
        for (slot, bidi) in [(0, true), (1, false)] {
            // A stream per waiting task, as many as the peer's stream limit allows (opened ones
            // not yet taken count: the first tasks to ask take them).
            while self.closed.is_none() && self.opened[slot].len() < self.open_waiters[slot].len() {
                match conn.open_stream(bidi) {
                    Ok(id) => {
                        self.streams.insert(id.0, StreamBox::outgoing(bidi));
                        self.opened[slot].push_back(id.0);
                    }
                    // The peer's stream limit: wait for MAX_STREAMS (RFC 9000 §4.6).
                    Err(recoup_transport::Error::Blocked) => break,
                    Err(e) => self.end(ConnectionErrorIncoming::InternalError(e.to_string())),
                }
            }
            let ready = self.opened[slot].len().min(self.open_waiters[slot].len());
            for waker in self.open_waiters[slot].drain(..ready) {
                waker.wake();
            }
        }
        for (&id, s) in &mut self.streams {
            let id = StreamId(id);
            if let Some(code) = s.stop.take() {
                conn.stream_stop(id, code).ok();
            }
            expire(now, conn, id, s);
            if s.send_done {
                continue;
            }
            if let Some(order) = s.send_order.take() {
                conn.stream_set_send_order(id, order).ok();
            }
            if let Some(code) = s.reset.take() {
                conn.stream_reset(now, id, code).ok();
                s.send_done = true;
                continue;
            }
            if let Err(e) = write_queued(conn, id, s) {
                s.send_ended = Some(Ended::Transport(e.to_string()));
                s.send_done = true;
                s.queued.clear();
                s.queued_len = 0;
                wake(&mut s.send_waker);
                continue;
            }
            if s.queued.is_empty() && s.finish {
                if let Err(e) = conn.stream_finish(id) {
                    s.send_ended = Some(Ended::Transport(e.to_string()));
                }
                s.send_done = true;
            }
            if s.queued_len < SEND_QUEUE {
                wake(&mut s.send_waker);
            }
        }
        self.streams.retain(|_, s| !s.is_spent());
        // Sent once, never retransmitted (RFC 9221 §5.2): the transport keeps them out of
        // loss recovery.
        for d in self.datagrams_out.drain(..) {
            if let Err(e) = conn.datagram_send(now, d) {
                tracing::debug!("HTTP Datagram not sent: {e}");
            }
        }
        if let Some((code, reason)) = self.close.take() {
            conn.close(now, code, &reason);
        }
    }

    /// When the next stream deadline falls due: the driver must push then.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.streams
            .values()
            .filter_map(|s| s.deadline.as_ref().and_then(Deadline::due))
            .min()
    }

    /// Gives stream `id` a deadline: bytes written from now on must be acknowledged within
    /// `budget`, or the stream is reset with `code`.
    pub(crate) fn set_deadline(&mut self, id: u64, budget: Duration, code: u64) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.deadline = Some(Deadline {
                budget,
                code,
                written: 0,
                writes: VecDeque::new(),
                expired: None,
            });
        }
    }

    /// The connection ended: every waiting handle learns it.
    fn end(&mut self, error: ConnectionErrorIncoming) {
        self.closed.get_or_insert(error);
        wake_all(&mut self.accept_wakers);
        wake_all(&mut self.closed_wakers);
        for waiters in &mut self.open_waiters {
            wake_all(waiters);
        }
        for s in self.streams.values_mut() {
            wake(&mut s.recv_waker);
            wake(&mut s.send_waker);
            wake(&mut s.closed_waker);
        }
        wake(&mut self.datagram_waker);
    }

    fn connection_error(&self) -> Option<StreamErrorIncoming> {
        self.closed
            .clone()
            .map(|e| StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: e,
            })
    }
}

/// Drops the writes of stream `id` the peer acknowledged, and resets the stream when the oldest
/// write left outlived its deadline ([`Deadline`]). Wakes a task waiting for the stream to close
/// once nothing is left to acknowledge.
fn expire(now: Instant, conn: &mut Connection, id: StreamId, s: &mut StreamBox) {
    let Some(d) = &mut s.deadline else {
        return;
    };
    if d.expired.is_some() {
        return;
    }
    // Unacknowledged: queued here, or held by the transport (queued or in flight).
    let unacked = (s.queued_len + conn.stream_buffered(id).0) as u64;
    let floor = d.written.saturating_sub(unacked);
    while d.writes.front().is_some_and(|&(end, _)| end <= floor) {
        d.writes.pop_front();
    }
    match d.writes.front() {
        Some(&(_, at)) if at + d.budget <= now => {
            tracing::debug!(
                stream = id.0,
                written_ms_ago = now.saturating_duration_since(at).as_secs_f64() * 1e3,
                unacked,
                "stream reset: its data outlived the deadline"
            );
            conn.stream_reset(now, id, d.code).ok();
            d.expired = Some(now);
            s.send_done = true;
            s.reset = None;
            s.queued.clear();
            s.queued_len = 0;
            wake(&mut s.send_waker);
            wake(&mut s.closed_waker);
        }
        None if s.send_done => wake(&mut s.closed_waker),
        _ => {}
    }
}

/// Writes a stream's queued bytes until the transport pushes back.
fn write_queued(
    conn: &mut Connection,
    id: StreamId,
    s: &mut StreamBox,
) -> Result<(), recoup_transport::Error> {
    while let Some(front) = s.queued.front_mut() {
        let n = stream_io::write(conn, id, front)?;
        if n == 0 {
            break;
        }
        s.queued_len -= n;
        if n == front.len() {
            s.queued.pop_front();
        } else {
            front.advance(n);
        }
    }
    Ok(())
}

fn h3_id(id: u64) -> hq::StreamId {
    // Transport stream IDs are varints, as h3's are.
    hq::StreamId::try_from(id).unwrap_or_else(|_| unreachable!("stream id {id} is not a varint"))
}

/// The connection as h3 sees it; also its stream opener.
#[derive(Clone, Debug)]
pub(crate) struct QuicConn {
    shared: Shared,
}

impl QuicConn {
    pub(crate) fn new(shared: Shared) -> Self {
        Self { shared }
    }

    fn accept(
        &self,
        cx: &mut Context<'_>,
        bidi: bool,
    ) -> Poll<Result<u64, ConnectionErrorIncoming>> {
        let mut m = lock(&self.shared);
        let next = if bidi {
            m.incoming_bidi.pop_front()
        } else {
            m.incoming_uni.pop_front()
        };
        if let Some(id) = next {
            return Poll::Ready(Ok(id));
        }
        if let Some(e) = &m.closed {
            return Poll::Ready(Err(e.clone()));
        }
        wait(&mut m.accept_wakers, cx.waker());
        Poll::Pending
    }

    fn open(&self, cx: &mut Context<'_>, bidi: bool) -> Poll<Result<u64, StreamErrorIncoming>> {
        let mut m = lock(&self.shared);
        let slot = usize::from(!bidi);
        if let Some(id) = m.opened[slot].pop_front() {
            return Poll::Ready(Ok(id));
        }
        if let Some(e) = m.connection_error() {
            return Poll::Ready(Err(e));
        }
        wait(&mut m.open_waiters[slot], cx.waker());
        Poll::Pending
    }

    fn send_half(&self, id: u64) -> SendHalf {
        SendHalf {
            shared: Arc::clone(&self.shared),
            id,
        }
    }

    fn recv_half(&self, id: u64) -> RecvHalf {
        RecvHalf {
            shared: Arc::clone(&self.shared),
            id,
        }
    }

    fn bidi(&self, id: u64) -> BidiStream {
        BidiStream {
            send: self.send_half(id),
            recv: self.recv_half(id),
        }
    }

    /// Closes the connection with application error `code` (RFC 9000 §10.2: CONNECTION_CLOSE
    /// of type 0x1d) when the mailbox is next pushed; a no-op once it is closing or closed.
    pub(crate) fn close(&self, code: u64, reason: &str) {
        let mut m = lock(&self.shared);
        if m.close.is_none() && m.closed.is_none() {
            m.close = Some((code, reason.to_owned()));
        }
    }

    /// Ready with the connection's end, once it ended; registers `cx` for it otherwise.
    pub(crate) fn poll_closed(&self, cx: &mut Context<'_>) -> Poll<ConnectionErrorIncoming> {
        let mut m = lock(&self.shared);
        if let Some(e) = &m.closed {
            return Poll::Ready(e.clone());
        }
        wait(&mut m.closed_wakers, cx.waker());
        Poll::Pending
    }

    /// The connection's HTTP Datagrams.
    pub(crate) fn datagrams(&self) -> Datagrams {
        Datagrams {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Ready once the sending side of stream `id` is closed: everything written was
    /// acknowledged after the FIN (known only for a stream with a deadline), or the stream was
    /// reset or stopped, or the connection ended.
    pub(crate) fn poll_send_closed(
        &self,
        id: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), StreamErrorIncoming>> {
        let mut m = lock(&self.shared);
        let closed = m.connection_error();
        let Some(s) = m.streams.get_mut(&id) else {
            return Poll::Ready(Ok(()));
        };
        if let Some(e) = &s.send_ended {
            return Poll::Ready(Err(e.to_error()));
        }
        if let Some(e) = closed {
            return Poll::Ready(Err(e));
        }
        if s.send_done && s.deadline.as_ref().is_none_or(Deadline::settled) {
            return Poll::Ready(Ok(()));
        }
        s.closed_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Gives stream `id` a deadline ([`Deadline`]): bytes written from now on must be
    /// acknowledged within `budget`, or the stream is reset with `code`.
    pub(crate) fn set_deadline(&self, id: u64, budget: Duration, code: u64) {
        lock(&self.shared).set_deadline(id, budget, code);
    }

    /// Sets where stream `id`'s new data goes among the other streams' (higher first:
    /// `Connection::stream_set_send_order`), when the mailbox is next pushed.
    pub(crate) fn set_send_order(&self, id: u64, order: u8) {
        if let Some(s) = lock(&self.shared).streams.get_mut(&id) {
            s.send_order = Some(order);
        }
    }

    /// A second reader and finisher of stream `id` beside its h3 handles, for a stream h3's
    /// handles leave alone (a WebTransport session's CONNECT stream).
    pub(crate) fn tap(&self, id: u64) -> StreamTap {
        StreamTap {
            shared: Arc::clone(&self.shared),
            id,
        }
    }
}

/// Reads and finishes a stream whose h3 handles are held elsewhere and unused
/// ([`QuicConn::tap`]); dropping it leaves the stream to those handles.
#[derive(Debug)]
pub(crate) struct StreamTap {
    shared: Shared,
    id: u64,
}

impl StreamTap {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn poll_data(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        poll_recv(&self.shared, self.id, cx)
    }

    /// Sends `bytes` and FIN after what was queued (a no-op once the stream's sending side
    /// ended).
    pub(crate) fn finish_with(&self, bytes: Vec<u8>) {
        if let Some(s) = lock(&self.shared).streams.get_mut(&self.id) {
            if !s.send_done && !s.finish && s.reset.is_none() && !bytes.is_empty() {
                s.queued_len += bytes.len();
                s.queued.push_back(Bytes::from(bytes));
            }
            s.finish = true;
        }
    }

    /// Resets the sending side and asks the peer to stop sending, both with `code`.
    pub(crate) fn abort(&self, code: u64) {
        if let Some(s) = lock(&self.shared).streams.get_mut(&self.id) {
            if !s.send_done {
                s.reset = Some(code);
                s.queued.clear();
                s.queued_len = 0;
            }
            if !s.recv_fin && s.recv_ended.is_none() {
                s.stop = Some(code);
            }
        }
    }
}

/// HTTP Datagrams (RFC 9297 §2.1) of the connection: QUIC DATAGRAM frames (RFC 9221) sent and
/// received through the mailbox.
#[derive(Clone, Debug)]
pub(crate) struct Datagrams {
    shared: Shared,
}

impl Datagrams {
    /// Sends `payload` as an HTTP Datagram of the request on stream `stream_id`: its Quarter
    /// Stream ID, then the payload (RFC 9297 §2.1). Written here rather than by h3-datagram
    /// 0.0.2, whose encoder sends a Quarter Stream ID of zero whatever the stream.
    pub(crate) fn send(
        &self,
        stream_id: u64,
        payload: &[u8],
    ) -> Result<(), SendDatagramErrorIncoming> {
        let mut d = Vec::with_capacity(8 + payload.len());
        d.put_varint(stream_id / 4);
        d.extend_from_slice(payload);
        self.queue(Bytes::from(d))
    }

    /// Sends `bytes` as one QUIC DATAGRAM frame (RFC 9221) as they are: a datagram of a
    /// protocol other than HTTP/3 on the connection (MoQ over raw QUIC).
    pub(crate) fn queue(&self, bytes: Bytes) -> Result<(), SendDatagramErrorIncoming> {
        let mut m = lock(&self.shared);
        if let Some(e) = &m.closed {
            return Err(SendDatagramErrorIncoming::ConnectionError(e.clone()));
        }
        match m.datagram_max {
            None => Err(SendDatagramErrorIncoming::NotAvailable),
            Some(max) if bytes.len() > max => Err(SendDatagramErrorIncoming::TooLarge),
            Some(_) => {
                m.datagrams_out.push_back(bytes);
                Ok(())
            }
        }
    }
}

impl<B: Buf> SendDatagram<B> for Datagrams {
    fn send_datagram<T: Into<EncodedDatagram<B>>>(
        &mut self,
        data: T,
    ) -> Result<(), SendDatagramErrorIncoming> {
        let mut data: EncodedDatagram<B> = data.into();
        self.queue(data.copy_to_bytes(data.remaining()))
    }
}

impl RecvDatagram for Datagrams {
    type Buffer = Bytes;

    fn poll_incoming_datagram(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bytes, ConnectionErrorIncoming>> {
        let mut m = lock(&self.shared);
        if let Some(d) = m.datagrams_in.pop_front() {
            return Poll::Ready(Ok(d));
        }
        if let Some(e) = &m.closed {
            return Poll::Ready(Err(e.clone()));
        }
        m.datagram_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl<B: Buf> DatagramConnectionExt<B> for QuicConn {
    type SendDatagramHandler = Datagrams;
    type RecvDatagramHandler = Datagrams;

    fn send_datagram_handler(&self) -> Datagrams {
        Datagrams {
            shared: Arc::clone(&self.shared),
        }
    }

    fn recv_datagram_handler(&self) -> Datagrams {
        Datagrams {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: Buf> hq::Connection<B> for QuicConn {
    type RecvStream = RecvHalf;
    type OpenStreams = Self;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<RecvHalf, ConnectionErrorIncoming>> {
        self.accept(cx, false).map_ok(|id| self.recv_half(id))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream, ConnectionErrorIncoming>> {
        self.accept(cx, true).map_ok(|id| self.bidi(id))
    }

    fn opener(&self) -> Self {
        self.clone()
    }
}

impl<B: Buf> hq::OpenStreams<B> for QuicConn {
    type BidiStream = BidiStream;
    type SendStream = SendHalf;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream, StreamErrorIncoming>> {
        self.open(cx, true).map_ok(|id| self.bidi(id))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendHalf, StreamErrorIncoming>> {
        self.open(cx, false).map_ok(|id| self.send_half(id))
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        QuicConn::close(self, code.value(), &String::from_utf8_lossy(reason));
    }
}

/// The sending half of a stream.
#[derive(Debug)]
pub(crate) struct SendHalf {
    shared: Shared,
    id: u64,
}

impl SendHalf {
    /// Runs `f` on the stream's box with the connection's error, if it ended.
    fn with<R>(
        &self,
        f: impl FnOnce(
            &mut StreamBox,
            Option<StreamErrorIncoming>,
            Instant,
        ) -> Result<R, StreamErrorIncoming>,
    ) -> Result<R, StreamErrorIncoming> {
        let mut m = lock(&self.shared);
        let closed = m.connection_error();
        let now = m.now;
        match m.streams.get_mut(&self.id) {
            Some(s) => f(s, closed, now),
            None => Err(closed.unwrap_or_else(gone)),
        }
    }

    /// Whether more may be sent: the error if the stream or connection ended.
    fn check(
        s: &StreamBox,
        closed: Option<StreamErrorIncoming>,
    ) -> Result<(), StreamErrorIncoming> {
        if let Some(e) = &s.send_ended {
            return Err(e.to_error());
        }
        if let Some(e) = closed {
            return Err(e);
        }
        if s.send_done || s.finish || s.reset.is_some() {
            return Err(StreamErrorIncoming::Unknown(
                "the stream was already finished or reset".into(),
            ));
        }
        Ok(())
    }
}

impl<B: Buf> hq::SendStreamUnframed<B> for SendHalf {
    fn poll_send<D: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut D,
    ) -> Poll<Result<usize, StreamErrorIncoming>> {
        if let Err(e) = std::task::ready!(hq::SendStream::<B>::poll_ready(self, cx)) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(self.with(|s, closed, now| {
            Self::check(s, closed)?;
            let n = buf.remaining().min(SEND_QUEUE - s.queued_len);
            let bytes = buf.copy_to_bytes(n);
            s.queued_len += n;
            s.queued.push_back(bytes);
            s.wrote(n, now);
            Ok(n)
        }))
    }
}

fn gone() -> StreamErrorIncoming {
    StreamErrorIncoming::Unknown("the stream is gone".into())
}

impl Drop for SendHalf {
    fn drop(&mut self) {
        {
            let mut m = lock(&self.shared);
            if let Some(s) = m.streams.get_mut(&self.id) {
                s.send_handle = false;
            }
        }
    }
}

impl<B: Buf> hq::SendStream<B> for SendHalf {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.with(|s, closed, _| {
            Self::check(s, closed)?;
            if s.queued_len < SEND_QUEUE {
                return Ok(true);
            }
            s.send_waker = Some(cx.waker().clone());
            Ok(false)
        })
        .map_or_else(
            |e| Poll::Ready(Err(e)),
            |ready| {
                if ready {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                }
            },
        )
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        let mut data: WriteBuf<B> = data.into();
        let bytes = data.copy_to_bytes(data.remaining());
        self.with(|s, closed, now| {
            Self::check(s, closed)?;
            s.wrote(bytes.len(), now);
            s.queued_len += bytes.len();
            s.queued.push_back(bytes);
            Ok(())
        })
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        // The FIN follows the queued bytes when the mailbox is pushed; nothing to wait for.
        Poll::Ready(self.with(|s, closed, _| {
            Self::check(s, closed)?;
            s.finish = true;
            Ok(())
        }))
    }

    fn reset(&mut self, reset_code: u64) {
        let _ = self.with(|s, _, _| {
            if !s.send_done {
                s.reset = Some(reset_code);
                s.queued.clear();
                s.queued_len = 0;
            }
            Ok(())
        });
    }

    fn send_id(&self) -> hq::StreamId {
        h3_id(self.id)
    }
}

/// The receiving half of a stream.
#[derive(Debug)]
pub(crate) struct RecvHalf {
    shared: Shared,
    id: u64,
}

impl Drop for RecvHalf {
    fn drop(&mut self) {
        {
            let mut m = lock(&self.shared);
            if let Some(s) = m.streams.get_mut(&self.id) {
                s.recv_handle = false;
                s.received.clear();
                s.received_len = 0;
            }
        }
    }
}

/// The next received bytes of stream `id`: `None` at its end.
fn poll_recv(
    shared: &Shared,
    id: u64,
    cx: &mut Context<'_>,
) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
    let mut guard = lock(shared);
    let m = &mut *guard;
    let closed = m.connection_error();
    let Some(s) = m.streams.get_mut(&id) else {
        return Poll::Ready(Err(closed.unwrap_or_else(gone)));
    };
    if let Some(chunk) = s.received.pop_front() {
        s.received_len -= chunk.len();
        return Poll::Ready(Ok(Some(chunk)));
    }
    if let Some(e) = &s.recv_ended {
        return Poll::Ready(Err(e.to_error()));
    }
    if s.recv_fin {
        return Poll::Ready(Ok(None));
    }
    if let Some(e) = closed {
        return Poll::Ready(Err(e));
    }
    s.recv_waker = Some(cx.waker().clone());
    Poll::Pending
}

impl hq::RecvStream for RecvHalf {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        poll_recv(&self.shared, self.id, cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        let mut m = lock(&self.shared);
        if let Some(s) = m.streams.get_mut(&self.id) {
            if !s.recv_fin && s.recv_ended.is_none() {
                s.stop = Some(error_code);
            }
            s.recv_ended
                .get_or_insert(Ended::Transport("stopped locally".into()));
            s.received.clear();
            s.received_len = 0;
        }
    }

    fn recv_id(&self) -> hq::StreamId {
        h3_id(self.id)
    }
}

/// Both halves of a bidirectional stream.
#[derive(Debug)]
pub(crate) struct BidiStream {
    send: SendHalf,
    recv: RecvHalf,
}

impl<B: Buf> hq::SendStream<B> for BidiStream {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        hq::SendStream::<B>::poll_ready(&mut self.send, cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        hq::SendStream::<B>::poll_finish(&mut self.send, cx)
    }

    fn reset(&mut self, reset_code: u64) {
        hq::SendStream::<B>::reset(&mut self.send, reset_code);
    }

    fn send_id(&self) -> hq::StreamId {
        hq::SendStream::<B>::send_id(&self.send)
    }
}

impl hq::RecvStream for BidiStream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code);
    }

    fn recv_id(&self) -> hq::StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> hq::SendStreamUnframed<B> for BidiStream {
    fn poll_send<D: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut D,
    ) -> Poll<Result<usize, StreamErrorIncoming>> {
        hq::SendStreamUnframed::<B>::poll_send(&mut self.send, cx, buf)
    }
}

impl<B: Buf> hq::BidiStream<B> for BidiStream {
    type SendStream = SendHalf;
    type RecvStream = RecvHalf;

    fn split(self) -> (SendHalf, RecvHalf) {
        (self.send, self.recv)
    }
}
