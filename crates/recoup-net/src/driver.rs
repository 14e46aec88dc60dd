//! The UDP driver: one non-blocking socket, one sans-IO [`Endpoint`] behind it, real-time timers.
//!
//! Single-threaded loop: receive everything queued (GRO batches split by their stride), run due
//! timers, let the application act on each connection, send everything the endpoint has (runs of
//! equal-size datagrams to one destination leave as one GSO send where the OS supports it), then
//! sleep in `epoll` until the socket is readable, the next transport timer, or a stop request.

use std::collections::VecDeque;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mio::{Events, Interest, Poll, Token, Waker};
use quinn_udp::{RecvMeta, UdpSocketState};
use recoup_time::{IndexedHeap, Instant};
use recoup_transport::{Connection, ConnectionHandle, Endpoint};

use crate::clock::Clock;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::steer::Steering;

const SOCKET: Token = Token(0);
const WAKER: Token = Token(1);

/// Largest UDP payload, so one receive buffer holds any (GRO-coalesced) datagram.
const RECV_BUF: usize = u16::MAX as usize;
/// Socket buffers asked for; the kernel may cap them (net.core.rmem_max).
const SOCKET_BUFFER: usize = 8 * 1024 * 1024;
/// Datagrams handled before sending again, so a flood of input cannot starve output.
const MAX_RECV_PER_TURN: usize = 256;
/// Bytes in one GSO send: a UDP payload's limit with room for headers.
const MAX_GSO_BYTES: usize = 65_000;
/// Send buffers kept for reuse (a batch in hand, one moving on, the held ones).
const MAX_SPARE_BUFFERS: usize = 4;
/// `epoll` counts whole milliseconds; a shorter wait (a pacing gap) is slept precisely instead.
const EPOLL_GRANULARITY: Duration = Duration::from_millis(1);
/// While timers keep falling due (a sender pacing out a window), the loop does not wait, so it
/// polls for input at least this often: ACKs are then handled at most this late.
const MAX_POLL_GAP: Duration = Duration::from_micros(250);

/// What handles the connections of a [`Driver`]: the server, client or viewer logic, per
/// connection handle (HTTP/3, hq-interop, or a `recoup_apps::StreamApp` over `recoup_apps::conn`).
pub trait ConnectionHandler {
    /// A connection a peer opened (servers only), before its first [`ConnectionHandler::drive`].
    fn accepted(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection);
    /// Reacts to events and moves stream data. Called for a connection when it is created, in
    /// each turn in which it handled a datagram or a timer or sent a datagram, when its
    /// [`ConnectionHandler::next_wakeup`] is due, and for every connection after a [`Wakeup`] or a
    /// stop; not for idle connections.
    fn drive(&mut self, now: Instant, handle: ConnectionHandle, conn: &mut Connection);
    /// The endpoint dropped a closed connection.
    fn removed(&mut self, handle: ConnectionHandle);
    /// Whether the driver should return now.
    fn finished(&self) -> bool;
    /// When the application next has something to do on its own on this connection (a live
    /// stream's next frame), besides the transport's timers; asked after each
    /// [`ConnectionHandler::drive`] of it. The driver wakes then and drives that connection.
    fn next_wakeup(&self, _handle: ConnectionHandle) -> Option<Instant> {
        None
    }
    /// Whether the application migrated its connections (`Connection::migrate`) and the driver
    /// must move to a new local socket before sending again (RFC 9000 §9.2). Asked once a turn.
    fn take_rebind(&mut self) -> bool {
        false
    }
    /// The driver began a graceful drain ([`Stopper::drain`]): new connections are refused from
    /// now on; finish what is in flight and close, so that [`ConnectionHandler::finished`] can
    /// say so. Every connection is driven in the same turn.
    fn drain(&mut self, _now: Instant) {}
}

/// Wakes a waiting driver from any thread, so that it drives every connection in its next
/// turn: work that arrives from outside the socket (an origin's bytes for a relayed response).
#[derive(Clone, Debug)]
pub struct Wakeup(Arc<WakeupState>);

#[derive(Debug)]
struct WakeupState {
    waker: Waker,
    /// Set by [`Wakeup::wake`], taken by the driver's next turn: a turn that has input to
    /// receive does not poll for events, and would not see the waker's.
    pending: AtomicBool,
}

impl Wakeup {
    /// A wakeup for `registry`'s poll, reported as `token`.
    pub(crate) fn new(registry: &mio::Registry, token: Token) -> Result<Self, Error> {
        let waker = Waker::new(registry, token).map_err(|e| Error::io("waker", e))?;
        Ok(Self(Arc::new(WakeupState {
            waker,
            pending: AtomicBool::new(false),
        })))
    }

    pub fn wake(&self) {
        self.0.pending.store(true, Ordering::SeqCst);
        if let Err(e) = self.0.waker.wake() {
            tracing::warn!("waking the driver: {e}");
        }
    }

    /// Wakes the driver without asking it to drive every connection: it has datagrams passed
    /// on by another worker ([`crate::steer`]).
    pub(crate) fn nudge(&self) {
        if let Err(e) = self.0.waker.wake() {
            tracing::warn!("waking the driver: {e}");
        }
    }

    /// Whether [`Wakeup::wake`] was called since the last call.
    fn take(&self) -> bool {
        self.0.pending.swap(false, Ordering::SeqCst)
    }
}

/// Asks running drivers to stop or drain, from any thread (a signal handler): one driver, or
/// every worker of a server ([`Driver::share_stopper`]).
#[derive(Clone, Debug)]
pub struct Stopper {
    flag: Arc<AtomicBool>,
    draining: Arc<AtomicBool>,
    wakers: Arc<Mutex<Vec<Wakeup>>>,
}

impl Stopper {
    /// A stopper that wakes `registry`'s poll with `token`.
    pub(crate) fn new(registry: &mio::Registry, token: Token) -> Result<Self, Error> {
        Ok(Self::waking(Wakeup::new(registry, token)?))
    }

    /// A stopper that wakes `wakeup`'s driver.
    fn waking(wakeup: Wakeup) -> Self {
        Self {
            flag: Arc::new(AtomicBool::new(false)),
            draining: Arc::new(AtomicBool::new(false)),
            wakers: Arc::new(Mutex::new(vec![wakeup])),
        }
    }

    fn wake_all(&self) {
        let wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        for w in wakers.iter() {
            w.wake();
        }
    }

    /// Asks for a graceful drain: no new connections, what is in flight finishes within the
    /// driver's drain timeout ([`Driver::set_drain_timeout`]), then the driver returns.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    #[must_use]
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// Datagrams of one destination and size, sent in one call.
#[derive(Debug)]
struct Batch {
    destination: SocketAddr,
    contents: Vec<u8>,
    segment: usize,
    count: usize,
}

impl Batch {
    /// An empty batch writing into `contents` (a recycled buffer).
    fn new(mut contents: Vec<u8>) -> Self {
        contents.clear();
        Self {
            destination: SocketAddr::from(([0, 0, 0, 0], 0)),
            contents,
            segment: 0,
            count: 0,
        }
    }
}

/// A non-blocking UDP socket on `addr` with enlarged buffers, and its quinn-udp state (which
/// turns on GRO where the OS has it: receivers must split by [`RecvMeta::stride`]).
pub(crate) fn bind_udp(addr: SocketAddr) -> Result<(mio::net::UdpSocket, UdpSocketState), Error> {
    bind_udp_with(addr, false)
}

/// [`bind_udp`], with `reuse_port`: SO_REUSEPORT, so that several workers' sockets share the
/// address and the kernel spreads datagrams over them by a hash of their 4-tuple.
fn bind_udp_with(
    addr: SocketAddr,
    reuse_port: bool,
) -> Result<(mio::net::UdpSocket, UdpSocketState), Error> {
    let bind_error = |e| Error::io(format!("binding {addr}"), e);
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .map_err(bind_error)?;
    if reuse_port {
        socket
            .set_reuse_port(true)
            .map_err(|e| Error::io(format!("SO_REUSEPORT on {addr}"), e))?;
    }
    socket.bind(&addr.into()).map_err(bind_error)?;
    let std_socket: std::net::UdpSocket = socket.into();
    let state = UdpSocketState::new((&std_socket).into())
        .map_err(|e| Error::io("configuring the UDP socket", e))?;
    for (what, result) in [
        (
            "send",
            state.set_send_buffer_size((&std_socket).into(), SOCKET_BUFFER),
        ),
        (
            "receive",
            state.set_recv_buffer_size((&std_socket).into(), SOCKET_BUFFER),
        ),
    ] {
        if let Err(e) = result {
            tracing::debug!("socket {what} buffer not enlarged: {e}");
        }
    }
    std_socket
        .set_nonblocking(true)
        .map_err(|e| Error::io("making the socket non-blocking", e))?;
    Ok((mio::net::UdpSocket::from_std(std_socket), state))
}

/// Buffers for one batch of received messages (`recvmmsg`; with GRO a message may hold several
/// datagrams).
#[derive(Debug, Default)]
pub(crate) struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    meta: Vec<RecvMeta>,
    /// Messages filled by the last [`RecvBatch::recv`].
    filled: usize,
}

impl RecvBatch {
    pub(crate) fn new() -> Self {
        let batch = quinn_udp::BATCH_SIZE.max(1);
        Self {
            bufs: vec![vec![0; RECV_BUF]; batch],
            meta: vec![RecvMeta::default(); batch],
            filled: 0,
        }
    }

    /// Receives one batch from `socket`; `false` if it had nothing.
    pub(crate) fn recv(
        &mut self,
        state: &UdpSocketState,
        socket: &mio::net::UdpSocket,
    ) -> Result<bool, Error> {
        self.filled = 0;
        let mut slices: Vec<IoSliceMut<'_>> =
            self.bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        loop {
            match state.recv(socket.into(), &mut slices, &mut self.meta) {
                Ok(n) => {
                    self.filled = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error for an earlier send (a peer gone) surfaces here on Linux: not
                // input; the transport's timers and the relay's idle timeout cope.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(Error::io("receiving", e)),
            }
        }
    }

    /// Whether the last receive emptied the socket: it filled fewer messages than it had room
    /// for, so the kernel had no more at that moment. Said only where quinn-udp receives with
    /// `recvmmsg`, which takes every message it has room for; elsewhere (the BSDs, illumos) it
    /// may return one message from a full socket, and only an empty receive tells.
    pub(crate) fn drained(&self) -> bool {
        cfg!(any(target_os = "linux", target_os = "android")) && self.filled < self.bufs.len()
    }

    /// The datagrams of the last receive as (sender, payload), split where GRO coalesced them;
    /// mutable, so that an endpoint can unprotect their packets in place.
    pub(crate) fn datagrams(&mut self) -> impl Iterator<Item = (SocketAddr, &mut [u8])> {
        self.meta
            .iter()
            .zip(&mut self.bufs)
            .take(self.filled)
            .flat_map(|(m, buf)| {
                let data = buf.get_mut(..m.len).unwrap_or_default();
                data.chunks_mut(m.stride.max(1)).map(move |d| (m.addr, d))
            })
    }
}

/// Waits on `poll`; a signal's interruption is an early wake-up, not an error.
pub(crate) fn poll_events(
    poll: &mut Poll,
    events: &mut Events,
    timeout: Option<Duration>,
) -> Result<(), Error> {
    match poll.poll(events, timeout) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
        Err(e) => Err(Error::io("epoll wait", e)),
    }
}

/// One socket and the endpoint behind it.
#[derive(Debug)]
pub struct Driver {
    socket: mio::net::UdpSocket,
    state: UdpSocketState,
    poll: Poll,
    stopper: Stopper,
    endpoint: Endpoint,
    clock: Clock,
    max_segments: usize,
    /// Batches the socket refused for lack of buffer space (at most two), sent first when it
    /// drains.
    blocked: VecDeque<Batch>,
    /// Buffers of sent batches, for the next ones: the transport writes datagrams straight
    /// into them.
    spare: Vec<Vec<u8>>,
    recv: RecvBatch,
    /// The socket may hold datagrams: set by a readable event, cleared when a receive finds it
    /// empty or empties it. The poll is edge-triggered (a new arrival is a new event), so a
    /// wake-up for a timer alone tries no receive: each try that finds nothing is a system
    /// call, and a paced sender wakes for its timers far more often than ACKs arrive.
    readable: bool,
    /// When the poll was last asked for events.
    last_poll: Instant,
    /// Each connection's [`ConnectionHandler::next_wakeup`] since it was last driven, by slot
    /// index.
    app_wakeups: IndexedHeap<Instant>,
    /// The connections to drive this turn (kept for its allocation).
    to_drive: Vec<ConnectionHandle>,
    /// Wakes this driver; the stopper wakes it too.
    wakeup: Wakeup,
    /// Passes datagrams to the worker that owns their connection, and takes theirs.
    steering: Option<Steering>,
    /// Where the endpoint's Retry and refusal counts go, with the counts already added.
    metrics: Option<(Metrics, u64, u64)>,
    /// How long a drain lets connections finish before they are closed.
    drain_timeout: Duration,
    /// When the drain in progress gives up waiting.
    drain_deadline: Option<Instant>,
}

impl Driver {
    /// Binds `addr` (port 0 picks a free one) for `endpoint`. `gso: false` sends one datagram
    /// per system call: packet captures on loopback see a GSO batch as one oversized datagram.
    pub fn bind(addr: SocketAddr, endpoint: Endpoint, gso: bool) -> Result<Self, Error> {
        Self::bind_with(addr, endpoint, gso, false)
    }

    /// [`Driver::bind`] with SO_REUSEPORT: one of several workers on one address.
    pub fn bind_shared(addr: SocketAddr, endpoint: Endpoint, gso: bool) -> Result<Self, Error> {
        Self::bind_with(addr, endpoint, gso, true)
    }

    fn bind_with(
        addr: SocketAddr,
        endpoint: Endpoint,
        gso: bool,
        reuse_port: bool,
    ) -> Result<Self, Error> {
        let (mut socket, state) = bind_udp_with(addr, reuse_port)?;
        let poll = Poll::new().map_err(|e| Error::io("epoll", e))?;
        poll.registry()
            .register(&mut socket, SOCKET, Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| Error::io("registering the socket", e))?;
        let wakeup = Wakeup::new(poll.registry(), WAKER)?;
        let stopper = Stopper::waking(wakeup.clone());
        let max_segments = if gso {
            state.max_gso_segments().max(1)
        } else {
            1
        };
        if gso && max_segments == 1 {
            tracing::info!("UDP GSO is not available here: one datagram per send");
        }
        tracing::debug!(
            gso_segments = max_segments,
            gro_segments = state.gro_segments(),
            "UDP socket ready"
        );
        Ok(Self {
            socket,
            state,
            poll,
            stopper,
            endpoint,
            clock: Clock::new(),
            max_segments,
            blocked: VecDeque::new(),
            spare: Vec::new(),
            recv: RecvBatch::new(),
            readable: true,
            last_poll: Instant::ZERO,
            app_wakeups: IndexedHeap::default(),
            to_drive: Vec::new(),
            wakeup,
            steering: None,
            metrics: None,
            drain_timeout: Duration::ZERO,
            drain_deadline: None,
        })
    }

    /// Moves to a new socket on the same IP address and a new port; returns its address. The old
    /// socket closes: what arrives there from now on is lost, as after a real migration.
    pub fn rebind(&mut self) -> Result<SocketAddr, Error> {
        let mut addr = self.local_addr()?;
        addr.set_port(0);
        let (mut socket, state) = bind_udp(addr)?;
        let registry = self.poll.registry();
        registry
            .deregister(&mut self.socket)
            .map_err(|e| Error::io("deregistering the old socket", e))?;
        registry
            .register(&mut socket, SOCKET, Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| Error::io("registering the socket", e))?;
        self.socket = socket;
        self.state = state;
        self.readable = true;
        // Batches held for the old socket go out from the new one.
        let local = self.local_addr()?;
        tracing::info!(%local, "moved to a new local socket");
        Ok(local)
    }

    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.socket
            .local_addr()
            .map_err(|e| Error::io("local address", e))
    }

    #[must_use]
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Wakes this driver from another thread without stopping it.
    #[must_use]
    pub fn wakeup(&self) -> Wakeup {
        self.wakeup.clone()
    }

    /// Makes `stopper` stop and drain this driver too (the workers of one server).
    pub fn share_stopper(&mut self, stopper: &Stopper) {
        stopper
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.wakeup.clone());
        self.stopper = stopper.clone();
    }

    /// Passes datagrams that name another worker's connection to it, and handles those passed
    /// here ([`crate::steer`]).
    pub(crate) fn set_steering(&mut self, steering: Steering) {
        self.steering = Some(steering);
    }

    #[must_use]
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// How long a drain ([`Stopper::drain`]) waits for connections to finish before closing
    /// them as a stop does.
    pub fn set_drain_timeout(&mut self, timeout: Duration) {
        self.drain_timeout = timeout;
    }

    /// Counts the endpoint's Retry packets and refused connections in `metrics` from now on.
    pub fn set_metrics(&mut self, metrics: Metrics) {
        let (retries, refused) = (self.endpoint.retries_sent, self.endpoint.refused);
        self.metrics = Some((metrics, retries, refused));
    }

    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    /// Runs until the application is finished or [`Stopper::stop`] is called; returns whether it
    /// was stopped. On a stop every connection is closed with `stop_code` before returning.
    pub fn run(&mut self, app: &mut impl ConnectionHandler, stop_code: u64) -> Result<bool, Error> {
        let mut events = Events::with_capacity(16);
        loop {
            let more_input = self.receive()?;
            let now = self.clock.now();
            if let Some(steering) = &self.steering {
                for (from, mut datagram) in steering.take() {
                    self.endpoint
                        .handle_datagram_in_place(now, from, &mut datagram);
                }
            }
            if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                self.endpoint.handle_timeout(now);
            }
            while let Some(handle) = self.endpoint.accept() {
                if let Some(conn) = self.endpoint.connection_mut(handle) {
                    app.accepted(now, handle, conn);
                }
            }
            if self.drain_deadline.is_none() && self.stopper.is_draining() {
                self.drain_deadline = Some(now + self.drain_timeout);
                // New clients get CONNECTION_REFUSED (RFC 9000 §5.2.2), without state.
                self.endpoint.stop_accepting();
                app.drain(now);
                // Drive every connection this turn, as after a wake-up.
                self.wakeup.0.pending.store(true, Ordering::SeqCst);
                tracing::info!(timeout_ms = self.drain_timeout.as_millis(), "draining");
            }
            let stopping =
                self.stopper.is_stopped() || self.drain_deadline.is_some_and(|d| now >= d);
            self.drive(now, app, stopping.then_some(stop_code));
            if app.take_rebind() {
                self.rebind()?;
            }
            self.send(now)?;
            for handle in self.endpoint.remove_closed() {
                self.app_wakeups.remove(handle.0);
                app.removed(handle);
            }
            if let Some((m, retries, refused)) = &mut self.metrics {
                m.retries_sent
                    .inc_by(self.endpoint.retries_sent.saturating_sub(*retries));
                m.connections_refused
                    .inc_by(self.endpoint.refused.saturating_sub(*refused));
                (*retries, *refused) = (self.endpoint.retries_sent, self.endpoint.refused);
            }
            if stopping {
                return Ok(true);
            }
            if app.finished() {
                return Ok(false);
            }
            if !more_input {
                let app_wakeup = self.app_wakeups.peek().map(|(t, _)| t);
                let wakeup = match (app_wakeup, self.drain_deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                self.wait(&mut events, wakeup)?;
            }
        }
    }

    /// Drives the connections that have something for the application (see
    /// [`ConnectionHandler::drive`]); on a stop, every connection, closing each with `stop_code`.
    fn drive(&mut self, now: Instant, app: &mut impl ConnectionHandler, stop_code: Option<u64>) {
        let mut handles = std::mem::take(&mut self.to_drive);
        handles.clear();
        self.endpoint.drain_woken(&mut handles);
        if stop_code.is_some() || self.wakeup.take() {
            handles.clear();
            handles.extend(self.endpoint.handles());
        } else {
            while let Some((_, i)) = self.app_wakeups.pop_due(now) {
                handles.push(ConnectionHandle(i));
            }
            handles.sort_unstable();
            handles.dedup();
        }
        for &handle in &handles {
            let Some(conn) = self.endpoint.connection_mut(handle) else {
                continue;
            };
            app.drive(now, handle, conn);
            if let Some(code) = stop_code {
                conn.close(now, code, "stopped");
            }
            self.app_wakeups
                .set_or_remove(handle.0, app.next_wakeup(handle));
        }
        self.to_drive = handles;
    }

    /// Receives until the socket is empty or the turn's budget is used; returns whether input
    /// may remain.
    fn receive(&mut self) -> Result<bool, Error> {
        let mut handled = 0;
        while handled < MAX_RECV_PER_TURN {
            if !self.readable {
                return Ok(false);
            }
            if !self.recv.recv(&self.state, &self.socket)? {
                self.readable = false;
                return Ok(false);
            }
            let now = self.clock.now();
            for (from, datagram) in self.recv.datagrams() {
                handled += 1;
                if let Some(steering) = &self.steering {
                    if steering.pass_on(from, datagram) {
                        continue;
                    }
                }
                self.endpoint.handle_datagram_in_place(now, from, datagram);
            }
            // A datagram arriving from now on is a new event of the edge-triggered poll (an
            // error held back by a short batch is one too), so a drained socket need not be
            // asked again: that empty receive was every other `recvmmsg` of a download.
            if self.recv.drained() {
                self.readable = false;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Sends everything the endpoint has, batching for GSO; stops early if the socket is full.
    /// The transport writes each datagram at the end of the batch being built; one that cannot
    /// join it (another destination, a larger size, a full batch) is moved to the next batch.
    fn send(&mut self, now: Instant) -> Result<(), Error> {
        if !self.flush_blocked() {
            return Ok(());
        }
        let mut batch = Batch::new(self.spare.pop().unwrap_or_default());
        loop {
            let start = batch.contents.len();
            let Some(info) = self.endpoint.poll_transmit_into(now, &mut batch.contents) else {
                break;
            };
            if batch.count == 0 {
                batch.destination = info.destination;
                batch.segment = info.len;
                batch.count = 1;
                continue;
            }
            let fits = batch.destination == info.destination
                && info.len <= batch.segment
                && start == batch.segment * batch.count
                && batch.count < self.max_segments
                && batch.contents.len() <= MAX_GSO_BYTES;
            if fits {
                batch.count += 1;
                continue;
            }
            let mut next = Batch::new(self.spare.pop().unwrap_or_default());
            next.contents.extend_from_slice(&batch.contents[start..]);
            batch.contents.truncate(start);
            next.destination = info.destination;
            next.segment = info.len;
            next.count = 1;
            self.blocked.push_back(std::mem::replace(&mut batch, next));
            if !self.flush_blocked() {
                // The datagram in hand waits behind the refused batch.
                self.blocked.push_back(batch);
                return Ok(());
            }
        }
        if batch.count > 0 {
            self.blocked.push_back(batch);
            self.flush_blocked();
        } else {
            self.spare.push(batch.contents);
        }
        Ok(())
    }

    /// Sends held batches in order; `false` while the socket buffer is full.
    fn flush_blocked(&mut self) -> bool {
        while let Some(batch) = self.blocked.front() {
            let transmit = quinn_udp::Transmit {
                destination: batch.destination,
                ecn: None,
                contents: &batch.contents,
                segment_size: (batch.count > 1).then_some(batch.segment),
                src_ip: None,
            };
            match self.state.try_send((&self.socket).into(), &transmit) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                // Any other send error loses these datagrams; the transport recovers them as it
                // would any loss.
                Err(e) => tracing::debug!("send to {} failed: {e}", batch.destination),
            }
            if let Some(sent) = self.blocked.pop_front() {
                if self.spare.len() < MAX_SPARE_BUFFERS {
                    self.spare.push(sent.contents);
                }
            }
        }
        true
    }

    /// Sleeps until input, the next timer (the transport's or the application's `app_wakeup`),
    /// or a stop.
    fn wait(&mut self, events: &mut Events, app_wakeup: Option<Instant>) -> Result<(), Error> {
        let deadline = match (self.endpoint.poll_timeout(), app_wakeup) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let timeout = deadline.map(|deadline| self.clock.until(deadline));
        if timeout == Some(Duration::ZERO) {
            if self.clock.now().saturating_duration_since(self.last_poll) >= MAX_POLL_GAP {
                self.poll_events(events, Some(Duration::ZERO))?;
            }
            return Ok(());
        }
        if let Some(t) = timeout.filter(|t| *t < EPOLL_GRANULARITY) {
            self.poll_events(events, Some(Duration::ZERO))?;
            if events.is_empty() {
                std::thread::sleep(t);
                // No poll after the nap: look, rather than wait for the next poll's event.
                self.readable = true;
            }
            return Ok(());
        }
        self.poll_events(events, timeout)
    }

    fn poll_events(&mut self, events: &mut Events, timeout: Option<Duration>) -> Result<(), Error> {
        poll_events(&mut self.poll, events, timeout)?;
        self.last_poll = self.clock.now();
        self.readable |= events
            .iter()
            .any(|e| e.token() == SOCKET && (e.is_readable() || e.is_error()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receive that fills every message it has room for may have left more behind; one that
    /// fills fewer emptied the socket, and the driver then stops asking until the next event.
    #[test]
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn a_short_batch_says_the_socket_is_drained() {
        let (socket, state) = bind_udp("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let to = socket.local_addr().expect("local address");
        let mut batch = RecvBatch::new();
        let room = batch.bufs.len();
        // One sender per datagram: GRO never joins datagrams of different flows, so each is a
        // message of its own.
        let senders: Vec<std::net::UdpSocket> = (0..room + 3)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").expect("sender"))
            .collect();
        for s in &senders {
            s.send_to(b"datagram", to).expect("send");
        }
        // Loopback delivers within the send; the pause covers a deferred delivery.
        std::thread::sleep(Duration::from_millis(20));
        let (mut fills, mut received) = (Vec::new(), 0);
        // At most about 5 s of 1 ms pauses.
        for _ in 0..5_000 {
            if received == senders.len() {
                break;
            }
            if batch.recv(&state, &socket).expect("receive") {
                fills.push((batch.filled, batch.drained()));
                received += batch.filled;
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(
            received,
            senders.len(),
            "datagrams lost on loopback: {fills:?}"
        );
        assert_eq!(fills.first(), Some(&(room, false)), "{fills:?}");
        for &(filled, drained) in &fills {
            assert_eq!(drained, filled < room, "{fills:?}");
        }
    }
}
