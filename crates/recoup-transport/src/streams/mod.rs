//! QUIC streams (RFC 9000 §2-§4): stream ids, the per-connection stream map, flow control in
//! both directions and the stream-related control frames.
//!
//! Frame-agnostic: the connection translates between frames and these calls. It pulls new data
//! with [`Streams::poll_new`], re-sends any unacknowledged range (retransmissions and copies, as
//! often as its policy wants) with [`Streams::unacked`] and [`Streams::read_range`], and reports
//! acks with [`Streams::on_acked`]. Only new bytes consume flow-control credit.

mod flow;
pub(crate) mod recv;
mod send;
mod send_buf;
mod sourced;

pub use flow::ControlFrame;
pub use sourced::{ByteSource, SourcedBytes};

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::ops::Bound::{Excluded, Unbounded};

use crate::error::{transport_err, Error, TransportError};
use bytes::Bytes;
use flow::{Pending, RecvWindow, SendCredit};
use recv::{RecvState, RecvStream};
use send::{SendStream, Written};

/// RFC 9000 §4.6: a stream count above 2^60 could not be expressed as a stream id.
const MAX_STREAM_COUNT: u64 = 1 << 60;

/// Capacity an emptied stream buffer keeps: a few frames' worth, so a stream that empties and
/// fills again with every packet or frame does not give its buffer back and grow it anew each
/// time.
const KEPT_BUFFER: usize = 64 * 1024;

/// Frees an emptied stream buffer larger than [`KEPT_BUFFER`] (a burst, a bulk transfer's
/// window). Freed whole, not shrunk: glibc serves a buffer this large from its own mapping, and
/// shrinking it in place would make every regrowth an `mremap` with fresh zeroed pages (a bulk
/// download spent 70 % more system time so).
fn release_idle(buf: &mut VecDeque<u8>) {
    if buf.is_empty() && buf.capacity() > KEPT_BUFFER {
        *buf = VecDeque::new();
    }
}

pub use crate::crypto::Side;

/// A stream's direction (RFC 9000 §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Bi,
    Uni,
}

impl Dir {
    #[must_use]
    pub fn from_bidi(bidi: bool) -> Self {
        if bidi {
            Self::Bi
        } else {
            Self::Uni
        }
    }

    fn slot(self) -> usize {
        match self {
            Self::Bi => 0,
            Self::Uni => 1,
        }
    }
}

/// A stream id (RFC 9000 §2.1): bit 0 is the initiator, bit 1 the direction, the rest the index.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

impl StreamId {
    #[must_use]
    pub const fn new(initiator: Side, dir: Dir, index: u64) -> Self {
        let server = matches!(initiator, Side::Server) as u64;
        let uni = matches!(dir, Dir::Uni) as u64;
        Self(index << 2 | uni << 1 | server)
    }

    #[must_use]
    pub const fn initiator(self) -> Side {
        if self.0 & 1 == 0 {
            Side::Client
        } else {
            Side::Server
        }
    }

    #[must_use]
    pub const fn dir(self) -> Dir {
        if self.0 & 2 == 0 {
            Dir::Bi
        } else {
            Dir::Uni
        }
    }

    #[must_use]
    pub const fn is_bidi(self) -> bool {
        self.0 & 2 == 0
    }

    /// The stream's number among streams of its initiator and direction.
    #[must_use]
    pub const fn index(self) -> u64 {
        self.0 >> 2
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StreamId({})", self.0)
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The flow-control transport parameters (RFC 9000 §18.2), ours or the peer's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowLimits {
    pub initial_max_data: u64,
    pub initial_max_stream_data_bidi_local: u64,
    pub initial_max_stream_data_bidi_remote: u64,
    pub initial_max_stream_data_uni: u64,
    pub initial_max_streams_bidi: u64,
    pub initial_max_streams_uni: u64,
}

/// A piece of stream data to put in a STREAM frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Chunk {
    pub id: StreamId,
    pub offset: u64,
    pub len: usize,
    pub fin: bool,
}

/// Something the application should learn about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// The peer reset its sending part (RESET_STREAM); unread data is gone and the next `read`
    /// fails.
    Reset { id: StreamId, code: u64 },
    /// The peer asked us to stop (STOP_SENDING); we reset our sending part with its code (§3.5).
    Stopped { id: StreamId, code: u64 },
    /// All data and the FIN were acknowledged; the sending part is gone.
    Finished(StreamId),
}

/// Send and receive halves; `None` for a half the stream's direction lacks or that is done.
#[derive(Debug)]
struct Stream {
    send: Option<SendStream>,
    recv: Option<RecvStream>,
    /// Where the stream's new data goes among the others' ([`Streams::set_send_order`]).
    send_order: u8,
}

/// Which half a frame addresses, for the state checks of RFC 9000 §19.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Half {
    Send,
    Recv,
}

/// Streams initiated by one side in one direction.
#[derive(Clone, Debug, Default)]
struct Counts {
    /// Streams opened so far (the next index).
    opened: u64,
    /// Streams closed and forgotten (only tracked for peer streams).
    closed: u64,
    /// The limit: the peer's MAX_STREAMS for ours, what we advertised for the peer's.
    limit: u64,
}

/// All streams of one connection.
#[derive(Debug)]
pub struct Streams {
    side: Side,
    local: FlowLimits,
    peer: FlowLimits,
    send_buffer_cap: usize,
    streams: BTreeMap<StreamId, Stream>,
    /// Streams we open, indexed by [`Dir::slot`].
    ours: [Counts; 2],
    /// Streams the peer opens.
    theirs: [Counts; 2],
    accept_queue: [VecDeque<StreamId>; 2],
    /// Blocked announcements for our stream limits, once per value.
    streams_blocked_at: [Option<u64>; 2],
    /// Connection credit the peer gave us. Reserved when `write` accepts bytes, so sending
    /// never waits for it and copies never touch it.
    conn_send: SendCredit,
    conn_recv: RecvWindow,
    /// Sum over streams of the highest offset received (§4.1).
    conn_received: u64,
    /// Sum over streams of bytes read or discarded.
    conn_retired: u64,
    /// Streams with new data or a FIN to send.
    sendable: BTreeSet<StreamId>,
    /// The stream served last, for round-robin.
    last_sent: Option<StreamId>,
    pending: Pending,
    events: VecDeque<StreamEvent>,
}

impl Streams {
    /// `local` are the limits we grant (our transport parameters); `send_buffer_cap` bounds the
    /// bytes each stream holds for (re)transmission.
    #[must_use]
    pub fn new(side: Side, local: FlowLimits, send_buffer_cap: usize) -> Self {
        let cap_streams = |n: u64| n.min(MAX_STREAM_COUNT);
        Self {
            side,
            local,
            peer: FlowLimits::default(),
            send_buffer_cap,
            streams: BTreeMap::new(),
            ours: Default::default(),
            theirs: [
                Counts {
                    limit: cap_streams(local.initial_max_streams_bidi),
                    ..Counts::default()
                },
                Counts {
                    limit: cap_streams(local.initial_max_streams_uni),
                    ..Counts::default()
                },
            ],
            accept_queue: Default::default(),
            streams_blocked_at: [None; 2],
            conn_send: SendCredit::new(0),
            conn_recv: RecvWindow::new(local.initial_max_data),
            conn_received: 0,
            conn_retired: 0,
            sendable: BTreeSet::new(),
            last_sent: None,
            pending: Pending::default(),
            events: VecDeque::new(),
        }
    }

    /// The peer's transport parameters. Limits only grow; streams already open get the new
    /// initial credit if it is larger.
    pub fn set_peer_params(&mut self, peer: FlowLimits) -> Result<(), TransportError> {
        // RFC 9000 §18.2
        if peer.initial_max_streams_bidi > MAX_STREAM_COUNT
            || peer.initial_max_streams_uni > MAX_STREAM_COUNT
        {
            return Err(transport_err!(
                TRANSPORT_PARAMETER_ERROR,
                "initial_max_streams above 2^60"
            ));
        }
        self.peer = peer;
        self.conn_send.raise(peer.initial_max_data);
        for (slot, max) in [peer.initial_max_streams_bidi, peer.initial_max_streams_uni]
            .into_iter()
            .enumerate()
        {
            self.ours[slot].limit = self.ours[slot].limit.max(max);
        }
        let side = self.side;
        for (&id, s) in &mut self.streams {
            if let Some(send) = &mut s.send {
                send.credit.raise(send_credit(side, &peer, id));
            }
        }
        Ok(())
    }

    // ----- application API -----

    /// Opens a stream of ours. `Err(Blocked)` at the peer's MAX_STREAMS limit; a STREAMS_BLOCKED
    /// is then queued (once per limit value).
    pub fn open(&mut self, bidi: bool) -> Result<StreamId, Error> {
        let dir = Dir::from_bidi(bidi);
        let c = &mut self.ours[dir.slot()];
        if c.opened >= c.limit {
            if self.streams_blocked_at[dir.slot()] != Some(c.limit) {
                self.streams_blocked_at[dir.slot()] = Some(c.limit);
                self.pending.streams_blocked[dir.slot()] = Some(c.limit);
            }
            return Err(Error::Blocked);
        }
        let id = StreamId::new(self.side, dir, c.opened);
        c.opened += 1;
        let stream = self.new_stream(id);
        self.streams.insert(id, stream);
        Ok(id)
    }

    /// Takes the next stream the peer opened.
    pub fn accept(&mut self, bidi: bool) -> Option<StreamId> {
        self.accept_queue[Dir::from_bidi(bidi).slot()].pop_front()
    }

    /// Queues bytes; returns how many were taken (limited by stream and connection credit and
    /// the per-stream buffer cap). `Err(Blocked)` if none; STREAM_DATA_BLOCKED / DATA_BLOCKED is
    /// queued once per limit value when credit is what stops the write.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, Error> {
        let available = self.conn_send.available();
        let w = self.send_mut(id)?.write(data, available)?;
        self.account_write(id, w, data.len())
    }

    /// As [`Self::write`], but takes the accepted front of `data` without copying it (the rest
    /// stays in `data`): for a writer that has its bytes in a buffer of its own to give away.
    pub fn write_chunk(&mut self, id: StreamId, data: &mut Bytes) -> Result<usize, Error> {
        let available = self.conn_send.available();
        let offered = data.len();
        let w = self.send_mut(id)?.write_chunk(data, available)?;
        self.account_write(id, w, offered)
    }

    /// As [`Self::write_chunk`], for bytes a source produces when they are sent.
    pub fn write_sourced(&mut self, id: StreamId, data: &mut SourcedBytes) -> Result<usize, Error> {
        let available = self.conn_send.available();
        let offered = data.len();
        let w = self.send_mut(id)?.write_sourced(data, available)?;
        self.account_write(id, w, offered)
    }

    /// Credit, blocked frames and the sendable set after a write of `offered` bytes.
    fn account_write(&mut self, id: StreamId, w: Written, offered: usize) -> Result<usize, Error> {
        self.conn_send.used += w.accepted as u64;
        if let Some(limit) = w.stream_blocked {
            self.pending.stream_data_blocked.insert(id, limit);
        }
        if w.conn_limited {
            if let Some(limit) = self.conn_send.note_blocked() {
                self.pending.data_blocked = Some(limit);
            }
        }
        if w.accepted > 0 {
            self.sendable.insert(id);
        } else if offered > 0 {
            return Err(Error::Blocked);
        }
        Ok(w.accepted)
    }

    /// Ends the stream after the bytes written so far.
    pub fn finish(&mut self, id: StreamId) -> Result<(), Error> {
        let send = self.send_mut(id)?;
        send.finish()?;
        if send.has_new() {
            self.sendable.insert(id);
        }
        Ok(())
    }

    /// Abandons our sending part (RESET_STREAM with `code`). Repeating it is harmless.
    pub fn reset(&mut self, id: StreamId, code: u64) -> Result<(), Error> {
        self.send_mut(id)?;
        self.reset_send(id, code);
        Ok(())
    }

    /// Asks the peer to stop sending (STOP_SENDING with `code`); what arrives is discarded.
    pub fn stop_sending(&mut self, id: StreamId, code: u64) -> Result<(), Error> {
        let recv = self.recv_mut(id)?;
        let before = recv.retired();
        let state = recv.state;
        let all_received = recv.all_received();
        recv.stop(code);
        let after = recv.retired();
        self.retire(after - before);
        match state {
            // §3.5: no need to ask once everything arrived; nobody reads it, so it is done.
            RecvState::Open if all_received => self.drop_recv(id),
            RecvState::Open => {
                self.pending.stop_sending.insert(id);
                self.pending.max_stream_data.remove(&id);
            }
            RecvState::Stopped { .. } => {}
            // The application has given up on the stream, reset or not.
            RecvState::Reset { .. } => self.drop_recv(id),
        }
        self.release_if_done(id);
        Ok(())
    }

    /// Reads in-order bytes. `Ok((n, true))` when the final size was reached (the receiving part
    /// is then gone); `Err(Blocked)` if nothing is available; `Err(InvalidState)` once after a
    /// peer reset (see [`StreamEvent::Reset`] for its code).
    pub fn read(&mut self, id: StreamId, buf: &mut [u8]) -> Result<(usize, bool), Error> {
        self.take_read(id, |recv| recv.read(buf))
    }

    /// Every in-order byte ready, handed to `visit` in the pieces the stream holds (see
    /// `RecvStream::read_with`): what [`Self::read`] gives, without the copy.
    pub fn read_with(
        &mut self,
        id: StreamId,
        visit: impl FnMut(&[u8], bool),
    ) -> Result<(usize, bool), Error> {
        self.take_read(id, |recv| recv.read_with(usize::MAX, visit))
    }

    /// A read of stream `id` by `read`, then its credit and, at the end, the stream released.
    fn take_read(
        &mut self,
        id: StreamId,
        read: impl FnOnce(&mut RecvStream) -> Result<(usize, bool), Error>,
    ) -> Result<(usize, bool), Error> {
        let recv = self.recv_mut(id)?;
        let before = recv.retired();
        match read(recv) {
            Ok((n, fin)) => {
                let after = recv.retired();
                if !fin && recv.final_size().is_none() && recv.window.wants_update(after) {
                    self.pending.max_stream_data.insert(id);
                }
                self.retire(after - before);
                if fin {
                    self.drop_recv(id);
                    self.release_if_done(id);
                }
                Ok((n, fin))
            }
            Err(e) => {
                if matches!(recv.state, RecvState::Reset { .. }) {
                    // The application has now seen the reset.
                    self.drop_recv(id);
                    self.release_if_done(id);
                }
                Err(e)
            }
        }
    }

    /// Streams with bytes, a FIN or a reset to read.
    #[must_use]
    pub fn readable(&self) -> Vec<StreamId> {
        self.streams
            .iter()
            .filter(|(_, s)| s.recv.as_ref().is_some_and(RecvStream::is_readable))
            .map(|(&id, _)| id)
            .collect()
    }

    /// Streams on which `write` would take at least one byte now.
    #[must_use]
    pub fn writable(&self) -> Vec<StreamId> {
        let available = self.conn_send.available();
        self.streams
            .iter()
            .filter(|(_, s)| s.send.as_ref().is_some_and(|s| s.room(available) > 0))
            .map(|(&id, _)| id)
            .collect()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    /// Bytes held for `id` (send buffer, receive buffer), for memory checks.
    #[must_use]
    pub fn buffered(&self, id: StreamId) -> (usize, usize) {
        self.streams.get(&id).map_or((0, 0), |s| {
            (
                s.send.as_ref().map_or(0, SendStream::buffered),
                s.recv.as_ref().map_or(0, RecvStream::buffered),
            )
        })
    }

    /// How many of the first bytes we sent on `id` the peer has acknowledged in order; `None`
    /// once the sending part is gone (every byte and the FIN acknowledged, or reset and done)
    /// or for a stream we never sent on.
    #[must_use]
    pub fn acked_prefix(&self, id: StreamId) -> Option<u64> {
        let send = self.streams.get(&id)?.send.as_ref()?;
        send.reset.is_none().then(|| send.acked_prefix())
    }

    /// Whether every byte written to any stream has been acknowledged (none queued or in
    /// flight).
    #[must_use]
    pub fn all_acked(&self) -> bool {
        self.streams
            .values()
            .all(|s| s.send.as_ref().is_none_or(|send| send.buffered() == 0))
    }

    /// Number of streams with state held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    // ----- sending: what the connection calls -----

    /// Whether `poll_new` has something.
    #[must_use]
    pub fn has_new_data(&self) -> bool {
        !self.sendable.is_empty()
    }

    /// Sets where stream `id`'s new data goes among the other streams': the streams of the
    /// highest send order that have new data to send are served first, round-robin among
    /// themselves (W3C WebTransport's `sendOrder`, which MoQ sessions rank their group streams
    /// by). Every stream starts at 0, so without a call the streams are served round-robin.
    /// Retransmissions are not ordered by it: loss recovery sends them first.
    pub fn set_send_order(&mut self, id: StreamId, order: u8) -> Result<(), Error> {
        let stream = self
            .streams
            .get_mut(&id)
            .ok_or(Error::UnknownStream(id.0))?;
        stream.send_order = order;
        Ok(())
    }

    /// The next piece of new data (at most `max_len` bytes): from the streams of the highest
    /// send order with something to send ([`Self::set_send_order`]), round-robin over them.
    pub fn poll_new(&mut self, max_len: usize) -> Option<Chunk> {
        // The lowest and highest send order among the sendable streams, in one pass.
        let (bottom, top) = self
            .sendable
            .iter()
            .filter_map(|id| self.streams.get(id))
            .map(|s| s.send_order)
            .fold(None, |range: Option<(u8, u8)>, o| {
                Some(range.map_or((o, o), |(lo, hi)| (lo.min(o), hi.max(o))))
            })?;
        // A top stream may have nothing it can send now (its flow-control credit): the others
        // are not held up by it.
        self.poll_new_from(max_len, Some(top)).or_else(|| {
            (bottom < top)
                .then(|| self.poll_new_from(max_len, None))
                .flatten()
        })
    }

    /// The next piece of new data round-robin over the sendable streams of send order `order`
    /// (all of them with `None`).
    fn poll_new_from(&mut self, max_len: usize, order: Option<u8>) -> Option<Chunk> {
        let mut cursor = self.last_sent;
        for _ in 0..self.sendable.len() {
            let next = cursor
                .and_then(|c| self.sendable.range((Excluded(c), Unbounded)).next())
                .or_else(|| self.sendable.first())
                .copied();
            let Some(id) = next else {
                break;
            };
            cursor = Some(id);
            let Some(stream) = self.streams.get_mut(&id) else {
                self.sendable.remove(&id);
                continue;
            };
            if order.is_some_and(|o| o != stream.send_order) {
                continue;
            }
            let Some(send) = stream.send.as_mut() else {
                self.sendable.remove(&id);
                continue;
            };
            let piece = send.poll_new(max_len);
            if !send.has_new() {
                self.sendable.remove(&id);
            }
            if let Some((offset, len, fin)) = piece {
                self.last_sent = Some(id);
                return Some(Chunk {
                    id,
                    offset,
                    len,
                    fin,
                });
            }
        }
        None
    }

    /// Appends bytes `[offset, offset + len)` of `id` to `out` (for retransmissions and copies).
    /// The range must have been sent and not freed by acks; clip it with [`Self::unacked`].
    pub fn read_range(
        &self,
        id: StreamId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        self.streams
            .get(&id)
            .and_then(|s| s.send.as_ref())
            .ok_or(Error::UnknownStream(id.0))?
            .read_range(offset, len, out)
    }

    /// The parts of `[start, end)` of `id` still unacknowledged, as chunks ready to re-send; the
    /// FIN rides on the chunk ending at the final size (or alone) until it is acked. Empty once
    /// the stream is acked, reset or forgotten.
    #[must_use]
    pub fn unacked(&self, id: StreamId, start: u64, end: u64) -> Vec<Chunk> {
        self.streams
            .get(&id)
            .and_then(|s| s.send.as_ref())
            .map_or_else(Vec::new, |s| {
                s.unacked(start, end)
                    .into_iter()
                    .map(|(offset, len, fin)| Chunk {
                        id,
                        offset,
                        len,
                        fin,
                    })
                    .collect()
            })
    }

    /// A STREAM frame carrying `[offset, offset + len)` (and the FIN if `fin`) was acknowledged.
    /// Any copy counts; repeats are harmless. When everything is acked the sending part is
    /// dropped and [`StreamEvent::Finished`] is reported.
    pub fn on_acked(&mut self, id: StreamId, offset: u64, len: usize, fin: bool) {
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return;
        };
        send.on_acked(offset, len, fin);
        if send.is_done() {
            self.drop_send(id);
            self.events.push_back(StreamEvent::Finished(id));
            self.release_if_done(id);
        }
    }

    // ----- control frames -----

    /// Whether `poll_control` may have something.
    #[must_use]
    pub fn has_control(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The next control frame of at most `max_len` encoded bytes.
    pub fn poll_control(&mut self, max_len: usize) -> Option<ControlFrame> {
        let fits = |f: &ControlFrame| f.encoded_len() <= max_len;

        while let Some(&id) = self.pending.reset_stream.first() {
            let frame = self
                .send_of(id)
                .and_then(|s| s.reset)
                .map(|r| ControlFrame::ResetStream {
                    id,
                    code: r.code,
                    final_size: r.final_size,
                });
            match frame {
                Some(f) if !fits(&f) => break,
                Some(f) => {
                    self.pending.reset_stream.remove(&id);
                    return Some(f);
                }
                None => {
                    self.pending.reset_stream.remove(&id);
                }
            }
        }
        while let Some(&id) = self.pending.stop_sending.first() {
            let frame = match self.recv_of(id).map(|r| r.state) {
                Some(RecvState::Stopped { code }) => Some(ControlFrame::StopSending { id, code }),
                _ => None,
            };
            match frame {
                Some(f) if !fits(&f) => break,
                Some(f) => {
                    self.pending.stop_sending.remove(&id);
                    return Some(f);
                }
                None => {
                    self.pending.stop_sending.remove(&id);
                }
            }
        }
        if self.pending.max_data {
            // Raise the limit if the window allows, then advertise the current one (also when
            // re-sending a lost frame whose value is still current).
            let max = self
                .conn_retired
                .saturating_add(self.local.initial_max_data)
                .max(self.conn_recv.max);
            if fits(&ControlFrame::MaxData(max)) {
                self.pending.max_data = false;
                self.conn_recv.update(self.conn_retired);
                return Some(ControlFrame::MaxData(self.conn_recv.max));
            }
        }
        for slot in 0..2 {
            if self.pending.max_streams[slot] {
                let c = &self.theirs[slot];
                let target = (c.closed + initial_streams(&self.local, slot))
                    .min(MAX_STREAM_COUNT)
                    .max(c.limit);
                let f = ControlFrame::MaxStreams {
                    bidi: slot == 0,
                    max: target,
                };
                if fits(&f) {
                    self.pending.max_streams[slot] = false;
                    self.theirs[slot].limit = target;
                    return Some(f);
                }
            }
        }
        while let Some(&id) = self.pending.max_stream_data.first() {
            let Some(recv) = self
                .recv_mut_of(id)
                .filter(|r| r.state == RecvState::Open && r.final_size().is_none())
            else {
                self.pending.max_stream_data.remove(&id);
                continue;
            };
            let consumed = recv.retired();
            let upper = ControlFrame::MaxStreamData {
                id,
                max: consumed.saturating_add(recv.window.max),
            };
            if !fits(&upper) {
                break;
            }
            recv.window.update(consumed);
            let max = recv.window.max;
            self.pending.max_stream_data.remove(&id);
            return Some(ControlFrame::MaxStreamData { id, max });
        }
        if let Some(limit) = self.pending.data_blocked {
            let f = ControlFrame::DataBlocked(limit);
            if fits(&f) {
                self.pending.data_blocked = None;
                if self.conn_send.still_blocked_at(limit) {
                    return Some(f);
                }
            }
        }
        for slot in 0..2 {
            if let Some(limit) = self.pending.streams_blocked[slot] {
                let f = ControlFrame::StreamsBlocked {
                    bidi: slot == 0,
                    limit,
                };
                if fits(&f) {
                    self.pending.streams_blocked[slot] = None;
                    if self.ours[slot].limit == limit {
                        return Some(f);
                    }
                }
            }
        }
        while let Some((&id, &limit)) = self.pending.stream_data_blocked.first_key_value() {
            let f = ControlFrame::StreamDataBlocked { id, limit };
            let current = self
                .send_of(id)
                .is_some_and(|s| s.reset.is_none() && s.credit.still_blocked_at(limit));
            if current && !fits(&f) {
                break;
            }
            self.pending.stream_data_blocked.remove(&id);
            if current {
                return Some(f);
            }
        }
        None
    }

    /// A control frame we sent was lost: queue it again if its information is still current (a
    /// newer limit supersedes an older one).
    pub fn on_control_lost(&mut self, frame: ControlFrame) {
        match frame {
            ControlFrame::MaxData(max) => {
                if max == self.conn_recv.max {
                    self.pending.max_data = true;
                }
            }
            ControlFrame::MaxStreamData { id, max } => {
                if self.recv_of(id).is_some_and(|r| {
                    r.state == RecvState::Open && r.final_size().is_none() && r.window.max == max
                }) {
                    self.pending.max_stream_data.insert(id);
                }
            }
            ControlFrame::MaxStreams { bidi, max } => {
                let slot = Dir::from_bidi(bidi).slot();
                if self.theirs[slot].limit == max {
                    self.pending.max_streams[slot] = true;
                }
            }
            ControlFrame::DataBlocked(limit) => {
                if self.conn_send.still_blocked_at(limit) {
                    self.pending.data_blocked = Some(limit);
                }
            }
            ControlFrame::StreamDataBlocked { id, limit } => {
                if self
                    .send_of(id)
                    .is_some_and(|s| s.reset.is_none() && s.credit.still_blocked_at(limit))
                {
                    self.pending.stream_data_blocked.insert(id, limit);
                }
            }
            ControlFrame::StreamsBlocked { bidi, limit } => {
                let slot = Dir::from_bidi(bidi).slot();
                if self.ours[slot].limit == limit && self.ours[slot].opened >= limit {
                    self.pending.streams_blocked[slot] = Some(limit);
                }
            }
            ControlFrame::ResetStream { id, .. } => {
                if self.send_of(id).is_some_and(|s| s.reset.is_some()) {
                    self.pending.reset_stream.insert(id);
                }
            }
            ControlFrame::StopSending { id, .. } => {
                if self
                    .recv_of(id)
                    .is_some_and(|r| matches!(r.state, RecvState::Stopped { .. }))
                {
                    self.pending.stop_sending.insert(id);
                }
            }
        }
    }

    /// A control frame we sent was acknowledged. An acked RESET_STREAM ends the sending part
    /// (§3.1 "Reset Recvd").
    pub fn on_control_acked(&mut self, frame: ControlFrame) {
        if let ControlFrame::ResetStream { id, .. } = frame {
            if self.send_of(id).is_some_and(|s| s.reset.is_some()) {
                self.pending.reset_stream.remove(&id);
                self.drop_send(id);
                self.release_if_done(id);
            }
        }
    }

    // ----- frames from the peer -----

    /// STREAM (§19.8).
    pub fn on_stream(
        &mut self,
        id: StreamId,
        offset: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<(), TransportError> {
        self.resolve(id, Half::Recv)?;
        let conn_room = self.conn_recv.max.saturating_sub(self.conn_received);
        let Some(recv) = self.recv_mut_of(id) else {
            // Closed and forgotten: a late copy or retransmission.
            return Ok(());
        };
        let before = recv.retired();
        let growth = recv.on_data(offset, data, fin, conn_room)?;
        let after = recv.retired();
        let drained = recv.stopped_and_drained();
        if recv.final_size().is_some() {
            self.pending.max_stream_data.remove(&id);
        }
        self.conn_received += growth;
        self.retire(after - before);
        if drained {
            self.drop_recv(id);
            self.release_if_done(id);
        }
        Ok(())
    }

    /// RESET_STREAM (§19.4).
    pub fn on_reset_stream(
        &mut self,
        id: StreamId,
        code: u64,
        final_size: u64,
    ) -> Result<(), TransportError> {
        self.resolve(id, Half::Recv)?;
        let conn_room = self.conn_recv.max.saturating_sub(self.conn_received);
        let Some(recv) = self.recv_mut_of(id) else {
            return Ok(());
        };
        let before = recv.retired();
        let was_stopped = matches!(recv.state, RecvState::Stopped { .. });
        let (growth, applied) = recv.on_reset(code, final_size, conn_room)?;
        let after = recv.retired();
        self.conn_received += growth;
        self.retire(after - before);
        self.pending.max_stream_data.remove(&id);
        self.pending.stop_sending.remove(&id);
        if applied {
            self.events.push_back(StreamEvent::Reset { id, code });
            if was_stopped {
                // The application gave up on this stream; nobody will read the reset.
                self.drop_recv(id);
                self.release_if_done(id);
            }
        }
        Ok(())
    }

    /// STOP_SENDING (§19.5): we answer with RESET_STREAM carrying the peer's code (§3.5).
    pub fn on_stop_sending(&mut self, id: StreamId, code: u64) -> Result<(), TransportError> {
        self.resolve(id, Half::Send)?;
        if self.send_of(id).is_some_and(|s| s.reset.is_none()) {
            self.reset_send(id, code);
            self.events.push_back(StreamEvent::Stopped { id, code });
        }
        Ok(())
    }

    /// MAX_DATA (§19.9).
    pub fn on_max_data(&mut self, max: u64) {
        self.conn_send.raise(max);
    }

    /// MAX_STREAM_DATA (§19.10).
    pub fn on_max_stream_data(&mut self, id: StreamId, max: u64) -> Result<(), TransportError> {
        self.resolve(id, Half::Send)?;
        if let Some(s) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) {
            s.credit.raise(max);
        }
        Ok(())
    }

    /// MAX_STREAMS (§19.11).
    pub fn on_max_streams(&mut self, bidi: bool, max: u64) -> Result<(), TransportError> {
        if max > MAX_STREAM_COUNT {
            return Err(transport_err!(
                FRAME_ENCODING_ERROR,
                "MAX_STREAMS {max} above 2^60"
            ));
        }
        let c = &mut self.ours[Dir::from_bidi(bidi).slot()];
        c.limit = c.limit.max(max);
        Ok(())
    }

    /// DATA_BLOCKED (§19.12): advertise more credit now if any can be given.
    pub fn on_data_blocked(&mut self, _limit: u64) {
        if self.conn_recv.can_grow(self.conn_retired) {
            self.pending.max_data = true;
        }
    }

    /// STREAM_DATA_BLOCKED (§19.13).
    pub fn on_stream_data_blocked(
        &mut self,
        id: StreamId,
        _limit: u64,
    ) -> Result<(), TransportError> {
        self.resolve(id, Half::Recv)?;
        if self.recv_of(id).is_some_and(|r| {
            r.state == RecvState::Open && r.final_size().is_none() && r.window.can_grow(r.retired())
        }) {
            self.pending.max_stream_data.insert(id);
        }
        Ok(())
    }

    /// STREAMS_BLOCKED (§19.14).
    pub fn on_streams_blocked(&mut self, bidi: bool, limit: u64) -> Result<(), TransportError> {
        if limit > MAX_STREAM_COUNT {
            return Err(transport_err!(
                FRAME_ENCODING_ERROR,
                "STREAMS_BLOCKED {limit} above 2^60"
            ));
        }
        let slot = Dir::from_bidi(bidi).slot();
        let c = &self.theirs[slot];
        if c.closed + initial_streams(&self.local, slot) > c.limit {
            self.pending.max_streams[slot] = true;
        }
        Ok(())
    }

    // ----- internals -----

    /// The state checks every stream frame needs (§19.4, §19.5, §19.8, §19.10, §19.13, §4.6);
    /// opens peer streams up to `id` (§3.2).
    fn resolve(&mut self, id: StreamId, half: Half) -> Result<(), TransportError> {
        let local = id.initiator() == self.side;
        if !id.is_bidi() && local == (half == Half::Recv) {
            let what = if local { "send-only" } else { "receive-only" };
            return Err(transport_err!(STREAM_STATE_ERROR, "stream {id} is {what}"));
        }
        let slot = id.dir().slot();
        if local {
            if id.index() >= self.ours[slot].opened {
                return Err(transport_err!(
                    STREAM_STATE_ERROR,
                    "stream {id} was not opened by us"
                ));
            }
            return Ok(());
        }
        let c = &self.theirs[slot];
        if id.index() >= c.limit {
            return Err(transport_err!(
                STREAM_LIMIT_ERROR,
                "stream {id} beyond the limit of {} we granted",
                c.limit
            ));
        }
        while self.theirs[slot].opened <= id.index() {
            let new = StreamId::new(id.initiator(), id.dir(), self.theirs[slot].opened);
            self.theirs[slot].opened += 1;
            let stream = self.new_stream(new);
            self.streams.insert(new, stream);
            self.accept_queue[slot].push_back(new);
        }
        Ok(())
    }

    fn new_stream(&self, id: StreamId) -> Stream {
        let local = id.initiator() == self.side;
        let send = (local || id.is_bidi())
            .then(|| SendStream::new(send_credit(self.side, &self.peer, id), self.send_buffer_cap));
        let window = match (local, id.dir()) {
            (true, Dir::Bi) => self.local.initial_max_stream_data_bidi_local,
            (false, Dir::Bi) => self.local.initial_max_stream_data_bidi_remote,
            (_, Dir::Uni) => self.local.initial_max_stream_data_uni,
        };
        let recv = (!local || id.is_bidi()).then(|| RecvStream::new(window));
        Stream {
            send,
            recv,
            send_order: 0,
        }
    }

    fn send_mut(&mut self, id: StreamId) -> Result<&mut SendStream, Error> {
        self.streams
            .get_mut(&id)
            .and_then(|s| s.send.as_mut())
            .ok_or(Error::UnknownStream(id.0))
    }

    fn recv_mut(&mut self, id: StreamId) -> Result<&mut RecvStream, Error> {
        self.recv_mut_of(id).ok_or(Error::UnknownStream(id.0))
    }

    fn send_of(&self, id: StreamId) -> Option<&SendStream> {
        self.streams.get(&id).and_then(|s| s.send.as_ref())
    }

    fn recv_of(&self, id: StreamId) -> Option<&RecvStream> {
        self.streams.get(&id).and_then(|s| s.recv.as_ref())
    }

    fn recv_mut_of(&mut self, id: StreamId) -> Option<&mut RecvStream> {
        self.streams.get_mut(&id).and_then(|s| s.recv.as_mut())
    }

    fn reset_send(&mut self, id: StreamId, code: u64) {
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return;
        };
        if let Some(unsent) = send.reset(code) {
            self.conn_send.used = self.conn_send.used.saturating_sub(unsent);
            self.sendable.remove(&id);
            self.pending.stream_data_blocked.remove(&id);
            self.pending.reset_stream.insert(id);
        }
    }

    /// Bytes read or discarded give connection credit back (§4.2).
    fn retire(&mut self, bytes: u64) {
        self.conn_retired += bytes;
        if self.conn_recv.wants_update(self.conn_retired) {
            self.pending.max_data = true;
        }
    }

    fn drop_send(&mut self, id: StreamId) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.send = None;
        }
        self.sendable.remove(&id);
    }

    fn drop_recv(&mut self, id: StreamId) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.recv = None;
        }
    }

    /// Forgets a stream whose halves are both done; a peer stream's slot returns as credit
    /// (MAX_STREAMS, §4.6).
    fn release_if_done(&mut self, id: StreamId) {
        if !self
            .streams
            .get(&id)
            .is_some_and(|s| s.send.is_none() && s.recv.is_none())
        {
            return;
        }
        self.streams.remove(&id);
        self.pending.forget(id);
        self.sendable.remove(&id);
        if id.initiator() != self.side {
            let slot = id.dir().slot();
            // Served without `accept` (found through `readable`): the queue must not keep it.
            self.accept_queue[slot].retain(|&q| q != id);
            let initial = initial_streams(&self.local, slot);
            let c = &mut self.theirs[slot];
            c.closed += 1;
            let target = (c.closed + initial).min(MAX_STREAM_COUNT);
            // Announce once half the initial allowance is back, or at once if the peer used it
            // all and waits.
            if target > c.limit && (target - c.limit >= (initial / 2).max(1) || c.opened == c.limit)
            {
                self.pending.max_streams[slot] = true;
            }
        }
    }
}

/// The initial credit the peer gives our sending part of `id` (RFC 9000 §18.2: "local" and
/// "remote" are from the peer's point of view).
fn send_credit(side: Side, peer: &FlowLimits, id: StreamId) -> u64 {
    match (id.initiator() == side, id.dir()) {
        (true, Dir::Bi) => peer.initial_max_stream_data_bidi_remote,
        (false, Dir::Bi) => peer.initial_max_stream_data_bidi_local,
        (_, Dir::Uni) => peer.initial_max_stream_data_uni,
    }
}

fn initial_streams(local: &FlowLimits, slot: usize) -> u64 {
    if slot == 0 {
        local.initial_max_streams_bidi
    } else {
        local.initial_max_streams_uni
    }
}

#[cfg(test)]
mod tests;
