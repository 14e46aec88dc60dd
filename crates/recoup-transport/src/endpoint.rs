//! Many connections behind one socket: routing by connection ID, accepting new connections up
//! to a limit, version negotiation, Retry (RFC 9000 §8.1.2) and stateless resets (§10.3).
//! Sans-IO like [`Connection`]; the driver calls it the same way.
//!
//! Invariants: every route points at a live slot and is listed in that slot, so removing a
//! connection removes exactly its routes; a slot freed by [`Endpoint::remove_closed`] is reused
//! by the next connection, so a handle is valid from its creation until `remove_closed` returns
//! it, and not after.
//!
//! The endpoint does not ask every connection at every call: a server with a thousand viewers
//! would spend most of its time asking idle ones. A connection is *touched* when anything may
//! have changed it (a datagram, a timer, a packet sent, the application holding it through
//! [`Endpoint::connection_mut`]); only touched connections have their timer recomputed and their
//! routes synced, and a connection is asked for datagrams from when it is touched until it has
//! none. Its state changes only through those calls, so nothing else can make it want to send or
//! move its timer.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};
use recoup_time::{IndexedHeap, Instant};

use crate::cid::ConnectionId;
use crate::config::{ClientConfig, ServerConfig, MIN_INITIAL_SIZE};
use crate::connection::{CidEvent, Connection, Transmit, TransmitInfo};
use crate::crypto::{initial_keys, Side};
use crate::error::{Error, TransportErrorCode};
use crate::frame::{ConnectionClose, Frame};
use crate::packet::{
    decode_pn, write_version_negotiation, Header, PacketType, PartialDecode, VersionInvariants,
    QUIC_VERSION_1,
};
use crate::retry::{write_retry, RetryTokens};
use crate::stateless_reset::ResetKey;

/// Identifies a connection within its [`Endpoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub usize);

/// Limits on what an endpoint queues for others.
const MAX_PENDING_STATELESS: usize = 64;
/// Reason phrases of a refusal with CONNECTION_REFUSED (RFC 9000 §5.2.2).
const REFUSED_AT_LIMIT: &[u8] = b"server at its connection limit";
const REFUSED_SHUTTING_DOWN: &[u8] = b"server shutting down";

/// RFC 9000 §10.3.3 (and §21.11): stateless resets are rate-limited; at most this many per
/// second, so that a flood of packets for unknown IDs does not become a flood of resets.
const MAX_RESETS_PER_SECOND: u32 = 100;

/// One connection and the routes that lead to it, which leave with it.
#[derive(Debug)]
struct Slot {
    /// Boxed: a free slot should not cost a whole connection's size.
    conn: Box<Connection>,
    /// Our connection IDs routed here.
    cids: Vec<ConnectionId>,
    /// The client's first destination ID, routed here with its address (servers only).
    initial: Option<(SocketAddr, ConnectionId)>,
}

/// Which of the endpoint's work lists a slot index is in (bits of [`Endpoint::listed`]). They
/// belong to the index, not the connection: an index freed while listed stays listed, and the
/// entry serves whichever connection reuses it.
const STALE: u8 = 1;
const SENDING: u8 = 2;
const WOKEN: u8 = 4;
const UNCHECKED: u8 = 8;

/// A set of connections sharing one local address.
#[derive(Debug)]
pub struct Endpoint {
    server: Option<ServerConfig>,
    local_cid_len: usize,
    connections: Vec<Option<Slot>>,
    /// Indexes of `None` slots, reused before the table grows.
    free: Vec<usize>,
    /// Connections accepted by a server beyond this many are refused (RFC 9000 §5.2.2).
    limit: Option<usize>,
    /// Set by [`Endpoint::share_connection_count`]: the connections of every endpoint sharing
    /// it (the workers of one server), which `limit` bounds instead of this endpoint's own.
    shared_count: Option<Arc<AtomicUsize>>,
    /// The reason phrase of a refusal's CONNECTION_CLOSE.
    refuse_reason: &'static [u8],
    /// Our own connection IDs, looked up for every datagram: a fast hasher, since we chose the
    /// keys (random, RFC 9000 §5.1) and a peer cannot make them collide.
    routes: HashMap<ConnectionId, ConnectionHandle>,
    /// Client-chosen destination IDs of accepted connections, so retransmitted first Initials
    /// find their connection (RFC 9000 §7.2). A peer chooses these keys: std's keyed SipHash.
    initial_routes: std::collections::HashMap<(SocketAddr, ConnectionId), ConnectionHandle>,
    accept_queue: VecDeque<ConnectionHandle>,
    stateless: VecDeque<Transmit>,
    /// Touched connections whose timer and routes are not yet brought up to date.
    stale: Vec<usize>,
    /// Connections that may have a datagram to send, in round-robin order.
    sending: VecDeque<usize>,
    /// Connections that handled a datagram or a timer, or sent, since
    /// [`Endpoint::drain_woken`] last took them.
    woken: Vec<usize>,
    /// Touched connections not yet checked for being closed by [`Endpoint::remove_closed`].
    unchecked: Vec<usize>,
    /// Each connection's `poll_timeout()` when it was last touched, by slot index.
    timers: IndexedHeap<Instant>,
    /// Per slot index, the lists it is in (`STALE`, `SENDING`, `WOKEN`, `UNCHECKED`).
    listed: Vec<u8>,
    /// Connections created so far; each gets its own seed from it.
    created: u64,
    /// Set by [`Endpoint::require_retry`]: every new connection first proves its address.
    retry: Option<RetryTokens>,
    /// Set by [`Endpoint::retry_above`]: a Retry only while at least this many handshakes are
    /// in flight; `None` with `retry` set: a Retry for every new client.
    retry_above: Option<usize>,
    /// Where [`Endpoint::handle_datagram`] copies a datagram, kept so that it allocates once.
    rx_copy: Vec<u8>,
    /// Set by [`Endpoint::set_stateless_reset_key`]: reset tokens derive from it.
    reset_key: Option<ResetKey>,
    /// The second the reset rate limit counts in, and the resets sent in it.
    reset_window: (Instant, u32),
    /// Stateless resets sent.
    pub resets_sent: u64,
    /// Datagrams that matched no connection and could not start one.
    pub dropped: u64,
    /// Retry packets sent, and Initials dropped for an invalid or expired token.
    pub retries_sent: u64,
    pub invalid_tokens: u64,
    /// Connection attempts refused with CONNECTION_REFUSED because the table was full.
    pub refused: u64,
}

/// An endpoint that goes away (a worker that panicked) no longer holds its connections against
/// the limit it shares.
impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(c) = &self.shared_count {
            c.fetch_sub(self.len(), Ordering::Relaxed);
        }
    }
}

impl Endpoint {
    /// An endpoint that accepts connections if `server` is given, and can start client
    /// connections with [`Endpoint::connect`] either way. `local_cid_len` must match the
    /// `local_cid_len` of the configs used (short headers do not carry the length).
    #[must_use]
    pub fn new(server: Option<ServerConfig>, local_cid_len: usize) -> Self {
        Self {
            server,
            local_cid_len,
            connections: Vec::new(),
            free: Vec::new(),
            limit: None,
            shared_count: None,
            refuse_reason: REFUSED_AT_LIMIT,
            routes: HashMap::new(),
            initial_routes: std::collections::HashMap::new(),
            accept_queue: VecDeque::new(),
            stateless: VecDeque::new(),
            stale: Vec::new(),
            sending: VecDeque::new(),
            woken: Vec::new(),
            unchecked: Vec::new(),
            timers: IndexedHeap::default(),
            listed: Vec::new(),
            created: 0,
            retry: None,
            retry_above: None,
            rx_copy: Vec::new(),
            reset_key: None,
            reset_window: (Instant::ZERO, 0),
            resets_sent: 0,
            dropped: 0,
            retries_sent: 0,
            invalid_tokens: 0,
            refused: 0,
        }
    }

    /// Accept at most `limit` connections at a time (a server's; closed ones count until
    /// [`Endpoint::remove_closed`] drops them). Beyond it, a client's first Initial is answered
    /// with an Initial carrying CONNECTION_CLOSE with CONNECTION_REFUSED, without keeping
    /// state (RFC 9000 §5.2.2).
    pub fn set_connection_limit(&mut self, limit: usize) {
        self.limit = Some(limit);
    }

    /// Counts this endpoint's connections in `count`, shared with other endpoints (the workers
    /// of one server, each on its own thread), so that [`Endpoint::set_connection_limit`]
    /// bounds their total. Two endpoints accepting at the same instant may both take the last
    /// slot: the total can exceed the limit by one per further endpoint, for as long as those
    /// connections live.
    pub fn share_connection_count(&mut self, count: Arc<AtomicUsize>) {
        count.fetch_add(self.len(), Ordering::Relaxed);
        self.shared_count = Some(count);
    }

    /// Connections counted against the limit: this endpoint's, or all sharing its count.
    fn counted(&self) -> usize {
        self.shared_count
            .as_ref()
            .map_or_else(|| self.len(), |c| c.load(Ordering::Relaxed))
    }

    /// Accepts no new connection from now on (a server shutting down): each new client is
    /// refused as beyond the connection limit, with a reason that says so.
    pub fn stop_accepting(&mut self) {
        self.limit = Some(0);
        self.refuse_reason = REFUSED_SHUTTING_DOWN;
    }

    /// Connections in the table (open, closing or draining).
    #[must_use]
    pub fn len(&self) -> usize {
        self.connections.len() - self.free.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Derives the stateless reset tokens of the connections accepted from now on from
    /// `secret`, and answers short-header packets for unknown connection IDs with a stateless
    /// reset (RFC 9000 §10.3). A server that keeps `secret` across restarts ends the
    /// connections of its previous run at their clients' next packet.
    pub fn set_stateless_reset_key(&mut self, secret: &[u8; 32]) {
        self.reset_key = Some(ResetKey::new(secret));
    }

    /// A server answers every client's first Initial with a Retry and accepts the connection
    /// only when the client returns the token (RFC 9000 §8.1.2), authenticated with `key`.
    pub fn require_retry(&mut self, key: &[u8; 32]) {
        self.retry = Some(RetryTokens::new(key));
        self.retry_above = None;
    }

    /// Like [`Endpoint::require_retry`], but only while at least `handshakes` connections are
    /// in their handshake: a flood of Initials that never complete (each holds a TLS session
    /// and buffers until its idle timeout) meets stateless Retries, while a client at normal
    /// load saves the round trip. A token that does not validate below the threshold is
    /// ignored rather than dropped (RFC 9000 §8.1.3: proceed as if the address were not
    /// validated).
    pub fn retry_above(&mut self, key: &[u8; 32], handshakes: usize) {
        self.retry = Some(RetryTokens::new(key));
        self.retry_above = Some(handshakes);
    }

    /// Server connections whose handshake has not completed (and that are not closing).
    #[must_use]
    pub fn handshakes_in_flight(&self) -> usize {
        self.connections
            .iter()
            .flatten()
            .filter(|s| !s.conn.is_established() && !s.conn.is_closing())
            .count()
    }

    /// Starts a client connection.
    pub fn connect(
        &mut self,
        now: Instant,
        config: &ClientConfig,
        remote: SocketAddr,
    ) -> Result<ConnectionHandle, Error> {
        let mut config = config.clone();
        config.transport.seed = mix(config.transport.seed, self.created);
        let conn = Connection::connect(now, &config, remote)?;
        Ok(self.insert(conn, None))
    }

    fn insert(
        &mut self,
        mut conn: Connection,
        initial: Option<(SocketAddr, ConnectionId)>,
    ) -> ConnectionHandle {
        self.created += 1;
        if let Some(c) = &self.shared_count {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let index = self.free.pop().unwrap_or(self.connections.len());
        let handle = ConnectionHandle(index);
        let cids: Vec<ConnectionId> = conn.local_cids().collect();
        for cid in &cids {
            self.routes.insert(*cid, handle);
        }
        if let Some(key) = initial {
            self.initial_routes.insert(key, handle);
        }
        while conn.poll_cid_event().is_some() {}
        let slot = Some(Slot {
            conn: Box::new(conn),
            cids,
            initial,
        });
        match self.connections.get_mut(index) {
            Some(free) => *free = slot,
            None => {
                self.connections.push(slot);
                self.listed.push(0);
            }
        }
        self.touch(index, WOKEN);
        handle
    }

    /// Slot `idx` may have changed: lists it as stale, sending and unchecked, and in the
    /// lists of `also`.
    fn touch(&mut self, idx: usize, also: u8) {
        self.list(idx, STALE | SENDING | UNCHECKED | also);
    }

    /// Adds slot `idx` to each list of `bits` it is not in yet.
    fn list(&mut self, idx: usize, bits: u8) {
        let Some(listed) = self.listed.get_mut(idx) else {
            return;
        };
        let new = bits & !*listed;
        *listed |= new;
        if new & STALE != 0 {
            self.stale.push(idx);
        }
        if new & UNCHECKED != 0 {
            self.unchecked.push(idx);
        }
        if new & SENDING != 0 {
            self.sending.push_back(idx);
        }
        if new & WOKEN != 0 {
            self.woken.push(idx);
        }
    }

    /// Brings the timers and routes of touched connections up to date.
    fn refresh(&mut self) {
        while let Some(idx) = self.stale.pop() {
            self.listed[idx] &= !STALE;
            self.sync_routes(ConnectionHandle(idx));
            let timeout = self.connections[idx]
                .as_ref()
                .and_then(|s| s.conn.poll_timeout());
            self.timers.set_or_remove(idx, timeout);
        }
    }

    /// Appends to `out` the connections that handled a datagram or a timer, or sent a datagram,
    /// since the last call (each once), and connections created since: those whose events,
    /// streams or state may have changed for the application.
    pub fn drain_woken(&mut self, out: &mut Vec<ConnectionHandle>) {
        for idx in self.woken.drain(..) {
            self.listed[idx] &= !WOKEN;
            if self.connections[idx].is_some() {
                out.push(ConnectionHandle(idx));
            }
        }
    }

    /// A connection the peer opened, once per connection.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        self.accept_queue.pop_front()
    }

    #[must_use]
    pub fn connection(&self, handle: ConnectionHandle) -> Option<&Connection> {
        self.connections
            .get(handle.0)
            .and_then(Option::as_ref)
            .map(|s| &*s.conn)
    }

    /// The connection behind `handle`, counted as touched: whatever the caller does to it
    /// (writes, closes, migrates) is seen by the next call to the endpoint.
    pub fn connection_mut(&mut self, handle: ConnectionHandle) -> Option<&mut Connection> {
        self.touched(handle, 0)
    }

    /// The connection behind `handle`, touched and also listed in `also`.
    fn touched(&mut self, handle: ConnectionHandle, also: u8) -> Option<&mut Connection> {
        self.connections.get(handle.0)?.as_ref()?;
        self.touch(handle.0, also);
        self.connections[handle.0].as_mut().map(|s| &mut *s.conn)
    }

    /// Handles of all live connections.
    pub fn handles(&self) -> impl Iterator<Item = ConnectionHandle> + '_ {
        self.connections
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .map(|(i, _)| ConnectionHandle(i))
    }

    /// Processes a datagram from `remote`; returns the connection it went to, if any. The
    /// datagram is copied first; [`Self::handle_datagram_in_place`] saves the copy.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &[u8],
    ) -> Option<ConnectionHandle> {
        let mut copy = std::mem::take(&mut self.rx_copy);
        copy.clear();
        copy.extend_from_slice(datagram);
        let handle = self.handle_datagram_in_place(now, remote, &mut copy);
        self.rx_copy = copy;
        handle
    }

    /// [`Self::handle_datagram`] for a caller that owns the datagram's buffer: its packets are
    /// unprotected where they are, without a copy
    /// ([`Connection::handle_datagram_in_place`]), and the buffer holds no particular bytes
    /// afterwards.
    pub fn handle_datagram_in_place(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &mut [u8],
    ) -> Option<ConnectionHandle> {
        // Routes issued since the last call must be known.
        self.refresh();
        let long = datagram.first().is_some_and(|b| b & 0x80 != 0);
        let dcid = if long {
            let inv = VersionInvariants::parse(datagram).ok()?;
            if inv.version != QUIC_VERSION_1 {
                if inv.version != 0 {
                    self.version_negotiation(remote, datagram.len(), inv.dcid, inv.scid);
                }
                self.dropped += 1;
                return None;
            }
            ConnectionId::new(inv.dcid).ok()?
        } else {
            match datagram.get(1..1 + self.local_cid_len) {
                Some(b) => ConnectionId::new(b).ok()?,
                None => {
                    self.dropped += 1;
                    return None;
                }
            }
        };
        let handle = self
            .routes
            .get(&dcid)
            .or_else(|| self.initial_routes.get(&(remote, dcid)))
            .copied()
            .or_else(|| self.try_accept(now, remote, datagram, dcid));
        let Some(handle) = handle else {
            self.dropped += 1;
            if !long {
                return self.unknown_short_header(now, remote, datagram);
            }
            return None;
        };
        // Routes it issues are synced when it is refreshed, before the next datagram.
        let conn = self.touched(handle, WOKEN)?;
        conn.handle_datagram_in_place(now, remote, datagram);
        Some(handle)
    }

    fn try_accept(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &[u8],
        dcid: ConnectionId,
    ) -> Option<ConnectionHandle> {
        let server = self.server.as_ref()?;
        // RFC 9000 §14.1: a server discards Initial packets in datagrams under 1200 bytes.
        if datagram.len() < MIN_INITIAL_SIZE {
            return None;
        }
        let header = PartialDecode::parse(datagram, self.local_cid_len).ok()?;
        if header.ty != PacketType::Initial || dcid.len() < 8 {
            // RFC 9000 §7.2: the client's first destination ID has at least 8 bytes.
            return None;
        }
        // State (a TLS session, buffers) only for an Initial that authenticates: anyone can make
        // one, but a corrupted or random datagram must not leave a connection behind.
        if !initial_authenticates(&header, &dcid) {
            return None;
        }
        if self.limit.is_some_and(|limit| self.counted() >= limit) {
            self.refuse(remote, &header, &dcid);
            return None;
        }
        let mut config = server.clone();
        config.transport.seed = mix(config.transport.seed, self.created);
        let reset_key = self.reset_key.as_ref();
        // Whether this client must prove its address first: always with `require_retry`,
        // under load with `retry_above`.
        let must_retry = self.retry.is_some()
            && self
                .retry_above
                .is_none_or(|t| self.len() >= t && self.handshakes_in_flight() >= t);
        let accept = |odcid, retry_scid| {
            Connection::accept_with_ids(
                now,
                &config,
                remote,
                odcid,
                retry_scid,
                header.scid,
                reset_key,
            )
            .ok()
        };
        let conn = match self.retry.as_mut() {
            None => accept(dcid, None)?,
            Some(tokens) if !header.token.is_empty() => {
                // RFC 9000 §8.1.3: a token we did not issue to this address for this attempt,
                // or an old one, is dropped when a Retry is due (the client's attempt then
                // times out, as §8.1.3 allows instead of INVALID_TOKEN, which would need
                // connection state), and ignored otherwise.
                match tokens.validate(now, remote, header.token, &dcid) {
                    Some(odcid) => {
                        tracing::debug!(%remote, "Retry token validated");
                        accept(odcid, Some(dcid))?
                    }
                    None if must_retry => {
                        tracing::debug!(%remote, "dropping an Initial with an invalid Retry token");
                        self.invalid_tokens += 1;
                        return None;
                    }
                    None => accept(dcid, None)?,
                }
            }
            Some(tokens) if must_retry => {
                // RFC 9000 §8.1.2: ask the client to prove its address first; no state kept.
                let retry_scid = tokens.new_scid(&dcid);
                let token = tokens.issue(now, remote, &dcid, &retry_scid);
                if self.stateless.len() < MAX_PENDING_STATELESS {
                    let mut buf = Vec::new();
                    write_retry(&mut buf, &header.scid, &retry_scid, &token, &dcid);
                    self.stateless.push_back(Transmit {
                        destination: remote,
                        contents: buf,
                        key: None,
                    });
                    self.retries_sent += 1;
                    tracing::debug!(%remote, "sent a Retry");
                }
                return None;
            }
            Some(_) => accept(dcid, None)?,
        };
        let handle = self.insert(conn, Some((remote, dcid)));
        self.accept_queue.push_back(handle);
        Some(handle)
    }

    /// A short-header datagram for no connection we know: a stateless reset for one of ours
    /// (its destination ID is random, so only the token tells, RFC 9000 §10.3.1), or a packet
    /// of a connection we lost, which we reset if we can (§10.3).
    fn unknown_short_header(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &[u8],
    ) -> Option<ConnectionHandle> {
        let reset = self.connections.iter().position(|s| {
            s.as_ref().is_some_and(|s| {
                s.conn.remote_address() == remote && s.conn.is_stateless_reset(datagram)
            })
        });
        if let Some(idx) = reset {
            let conn = self.touched(ConnectionHandle(idx), WOKEN)?;
            conn.on_stateless_reset(now);
            return Some(ConnectionHandle(idx));
        }
        let key = self.reset_key.as_ref()?;
        let packet = key.reset_for(datagram, self.local_cid_len)?;
        let (start, sent) = &mut self.reset_window;
        if now.saturating_duration_since(*start) >= std::time::Duration::from_secs(1) {
            *start = now;
            *sent = 0;
        }
        if *sent >= MAX_RESETS_PER_SECOND || self.stateless.len() >= MAX_PENDING_STATELESS {
            return None;
        }
        *sent += 1;
        self.resets_sent += 1;
        tracing::debug!(%remote, "sent a stateless reset");
        self.stateless.push_back(Transmit {
            destination: remote,
            contents: packet,
            key: None,
        });
        None
    }

    fn version_negotiation(&mut self, remote: SocketAddr, len: usize, dcid: &[u8], scid: &[u8]) {
        // RFC 9000 §6.1: only in answer to datagrams large enough to be a client's first.
        if self.server.is_none()
            || len < MIN_INITIAL_SIZE
            || self.stateless.len() >= MAX_PENDING_STATELESS
        {
            return;
        }
        let mut buf = Vec::new();
        // Echo the client's IDs swapped (RFC 9000 §17.2.1).
        write_version_negotiation(&mut buf, scid, dcid, &[QUIC_VERSION_1], 0x2a);
        self.stateless.push_back(Transmit {
            destination: remote,
            contents: buf,
            key: None,
        });
    }

    fn sync_routes(&mut self, handle: ConnectionHandle) {
        let Some(slot) = self.connections.get_mut(handle.0).and_then(Option::as_mut) else {
            return;
        };
        while let Some(ev) = slot.conn.poll_cid_event() {
            match ev {
                CidEvent::Issued(cid) => {
                    self.routes.insert(cid, handle);
                    slot.cids.push(cid);
                }
                CidEvent::Retired(cid) => {
                    self.routes.remove(&cid);
                    slot.cids.retain(|c| *c != cid);
                }
            }
        }
    }

    /// The next datagram to send from any connection. Call until `None`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let mut buf = Vec::new();
        let info = self.poll_transmit_into(now, &mut buf)?;
        Some(info.with_contents(buf))
    }

    /// [`Endpoint::poll_transmit`] into the caller's buffer: the datagram is appended to `buf`,
    /// nothing when it returns `None` ([`Connection::poll_transmit_into`]).
    #[must_use]
    pub fn poll_transmit_into(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<TransmitInfo> {
        if let Some(t) = self.stateless.pop_front() {
            return Some(t.append_to(buf));
        }
        // One datagram per connection in turn; a connection with nothing leaves the turn until
        // it is touched again.
        while let Some(idx) = self.sending.pop_front() {
            let Some(slot) = self.connections[idx].as_mut() else {
                self.listed[idx] &= !SENDING;
                continue;
            };
            let sent = slot.conn.poll_transmit_into(now, buf);
            self.listed[idx] &= !SENDING;
            match sent {
                // Sending arms timers; back of the turn for its next datagram.
                Some(t) => {
                    self.touch(idx, WOKEN);
                    return Some(t);
                }
                // Its timer may have moved (the pacer's) and it may have closed, but it has
                // nothing to send.
                None => self.list(idx, STALE | UNCHECKED),
            }
        }
        None
    }

    /// The earliest timer of any connection.
    #[must_use]
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.refresh();
        self.timers.peek().map(|(t, _)| t)
    }

    /// Runs due timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.refresh();
        // A connection's next timer is set when it is next refreshed, not here: each runs at
        // most once per call, and one due again waits for the next.
        while let Some((_, idx)) = self.timers.pop_due(now) {
            if let Some(conn) = self.touched(ConnectionHandle(idx), WOKEN) {
                conn.handle_timeout(now);
            }
        }
    }

    /// Drops connections that are closed, with their routes, and frees their memory and slots.
    /// Returns their handles, which are invalid from now on (the next connection may reuse
    /// them); call it after draining their events.
    pub fn remove_closed(&mut self) -> Vec<ConnectionHandle> {
        let mut removed = Vec::new();
        // Only a touched connection can have closed since the last call.
        let mut unchecked = std::mem::take(&mut self.unchecked);
        unchecked.sort_unstable();
        for idx in unchecked.drain(..) {
            self.listed[idx] &= !UNCHECKED;
            let closed = self.connections[idx]
                .as_ref()
                .is_some_and(|s| s.conn.is_closed());
            if !closed {
                continue;
            }
            self.timers.remove(idx);
            if let Some(slot) = self.connections[idx].take() {
                for cid in &slot.cids {
                    self.routes.remove(cid);
                }
                if let Some(key) = &slot.initial {
                    self.initial_routes.remove(key);
                }
            }
            self.free.push(idx);
            if let Some(c) = &self.shared_count {
                c.fetch_sub(1, Ordering::Relaxed);
            }
            removed.push(ConnectionHandle(idx));
        }
        self.unchecked = unchecked;
        removed
    }

    /// Answers a client's first Initial with an Initial that closes the attempt with
    /// CONNECTION_REFUSED (RFC 9000 §5.2.2, §10.2.3: a server may close during the handshake
    /// from the Initial space). Stateless, like a Retry: the packet is protected with the
    /// Initial keys of the client's destination ID (RFC 9001 §5.2).
    fn refuse(&mut self, remote: SocketAddr, header: &PartialDecode<'_>, dcid: &ConnectionId) {
        self.refused += 1;
        if self.stateless.len() >= MAX_PENDING_STATELESS {
            return;
        }
        let seed = self.server.as_ref().map_or(0, |s| s.transport.seed);
        let Ok(scid) = ConnectionId::new(&mix(seed, self.created + self.refused).to_be_bytes())
        else {
            return;
        };
        let mut buf = Vec::new();
        let layout = Header::Initial {
            version: QUIC_VERSION_1,
            dcid: header.scid,
            scid,
            token: &[],
        }
        .write(&mut buf, 0, 1);
        Frame::ConnectionClose(ConnectionClose {
            error_code: TransportErrorCode::CONNECTION_REFUSED.0,
            frame_type: Some(0),
            reason: self.refuse_reason,
        })
        .encode(&mut buf);
        let keys = initial_keys(dcid, Side::Server);
        layout.set_length(&mut buf, keys.local.tag_len());
        if keys
            .local
            .seal(0, &mut buf, layout.pn_offset, layout.pn_len)
            .is_err()
        {
            return;
        }
        tracing::debug!(%remote, reason = %String::from_utf8_lossy(self.refuse_reason), "refused a connection");
        self.stateless.push_back(Transmit {
            destination: remote,
            contents: buf,
            key: None,
        });
    }
}

/// Whether the first packet of a datagram is an Initial protected with the keys derived from
/// its destination ID (RFC 9001 §5.2), as a client's first Initial is.
fn initial_authenticates(header: &PartialDecode<'_>, dcid: &ConnectionId) -> bool {
    let Some(pn_offset) = header.pn_offset else {
        return false;
    };
    let keys = initial_keys(dcid, Side::Server);
    let mut packet = header.packet.to_vec();
    let Ok((pn_len, truncated)) = keys.remote.unprotect_header(&mut packet, pn_offset) else {
        return false;
    };
    let pn = decode_pn(truncated, pn_len, None);
    keys.remote
        .open(pn, &mut packet, pn_offset + pn_len)
        .is_ok()
}

/// Per-connection seed: stable for a run, different for every connection.
fn mix(seed: u64, n: u64) -> u64 {
    // SplitMix64 finalizer.
    let mut z = seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
