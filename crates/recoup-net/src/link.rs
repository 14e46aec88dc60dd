//! `recoup link`: a user-space UDP relay that applies the simulator's path elements
//! (`recoup-elements`) in real time, so a real QUIC client and server see the same loss, queue,
//! rate and delay a simulated run does.
//!
//! Each client (by source address) gets its own socket towards the server, so the server sees a
//! distinct 4-tuple per client, and its own pair of element chains: `up` (client → server) and
//! `down` (server → client). Client `k` draws from seed `seed + k` with the simulator's element
//! names (`down/0-loss`, …), so client 0 meets the loss pattern of a simulated run with `seed`.
//!
//! A chain runs on scheduled time, not on the time the loop happens to wake: a wake-up due at
//! `t` is processed at `t` even when the loop gets there late, so the elements compute exactly
//! what they would in the simulator; only the final send can be late, and that lateness (sent
//! minus scheduled) is what [`Lateness`] records.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use mio::{Events, Interest, Poll, Token};
use quinn_udp::UdpSocketState;
use recoup_elements::{Corrupt, Datagram, Duplicate, ElementSpec, Node, Output, PathSpec, Reorder};
use recoup_time::Instant;

use crate::clock::Clock;
use crate::driver::{bind_udp, poll_events, RecvBatch, Stopper};
use crate::error::Error;
use crate::link_log::LinkLog;
use crate::rebind::RebindSpec;

const LISTEN: Token = Token(0);
const WAKER: Token = Token(1);
/// Client `k`'s upstream socket is `Token(FIRST_CLIENT + k)`.
const FIRST_CLIENT: usize = 2;

/// Datagrams taken from one socket per turn, so a flood on one cannot delay sends.
const MAX_RECV_PER_SOCKET: usize = 64;
/// Clients beyond this are ignored (and counted), so the relay's memory stays bounded.
pub const MAX_CLIENTS: usize = 4096;
/// `epoll` counts whole milliseconds and mio rounds a timeout up: waits shorter than this are
/// finished with short sleeps instead, checking the sockets between them.
const PRECISE_WINDOW: Duration = Duration::from_millis(2);
/// Longest sleep in the precise window: input arriving meanwhile is seen at most this late.
const SLEEP_SLICE: Duration = Duration::from_micros(200);
/// Resolution and range of the lateness histogram.
const LATENESS_BUCKET: Duration = Duration::from_micros(1);
const LATENESS_BUCKETS: usize = 20_000;

/// What `recoup link` is asked to do.
#[derive(Clone, Debug)]
pub struct LinkOptions {
    /// Address clients send to.
    pub listen: SocketAddr,
    /// The server the relay forwards to.
    pub upstream: SocketAddr,
    /// Elements server → client.
    pub down: PathSpec,
    /// Elements client → server.
    pub up: PathSpec,
    /// Client `k` uses seed `seed + k`.
    pub seed: u64,
    /// A client silent this long in both directions is forgotten.
    pub idle_timeout: Duration,
    /// Stop after this long (`None`: until stopped).
    pub duration: Option<Duration>,
    /// NAT rebinding of each client's source port (and address).
    pub rebind: Option<RebindSpec>,
}

/// Distribution of how late datagrams left the socket relative to when the chain scheduled
/// them: 1 µs buckets up to 20 ms, exact mean and maximum.
#[derive(Clone)]
pub struct Lateness {
    buckets: Vec<u64>,
    count: u64,
    sum_nanos: u128,
    max: Duration,
}

impl fmt::Debug for Lateness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lateness")
            .field("count", &self.count)
            .field("mean", &self.mean())
            .field("p99", &self.quantile(0.99))
            .field("max", &self.max)
            .finish()
    }
}

impl Default for Lateness {
    fn default() -> Self {
        Self {
            buckets: vec![0; LATENESS_BUCKETS + 1],
            count: 0,
            sum_nanos: 0,
            max: Duration::ZERO,
        }
    }
}

impl Lateness {
    pub fn record(&mut self, late: Duration) {
        let bucket = (late.as_nanos() / LATENESS_BUCKET.as_nanos()).min(LATENESS_BUCKETS as u128);
        self.buckets[bucket as usize] += 1;
        self.count += 1;
        self.sum_nanos += late.as_nanos();
        self.max = self.max.max(late);
    }

    #[must_use]
    pub fn count(&self) -> u64 {
        self.count
    }

    #[must_use]
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let nanos = self.sum_nanos / u128::from(self.count);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The upper edge of the bucket holding quantile `q` (the maximum beyond the histogram).
    #[must_use]
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                if i == LATENESS_BUCKETS {
                    return self.max;
                }
                let edge = LATENESS_BUCKET * u32::try_from(i + 1).unwrap_or(u32::MAX);
                return edge.min(self.max);
            }
        }
        self.max
    }

    #[must_use]
    pub fn max(&self) -> Duration {
        self.max
    }
}

/// Counters of one direction, summed over clients.
#[derive(Clone, Debug, Default)]
pub struct DirectionReport {
    /// Datagrams (and UDP payload bytes) that entered the chain.
    pub datagrams_in: u64,
    pub bytes_in: u64,
    /// Dropped by a loss model.
    pub lost: u64,
    /// Dropped by a queue (droptail/drophead full, or CoDel).
    pub queue_dropped: u64,
    /// Delivered with a bit flipped by a corrupt element.
    pub corrupted: u64,
    /// Extra copies made by a duplicate element (each also counts in `delivered`).
    pub duplicated: u64,
    /// Sent ahead of the delay by a reorder element.
    pub reordered: u64,
    /// Sent on, and their UDP payload bytes.
    pub delivered: u64,
    pub bytes_out: u64,
    /// The OS refused the send (socket buffer full or an ICMP error).
    pub send_failed: u64,
    /// Still inside the chain when the relay stopped or forgot the client.
    pub in_flight: u64,
    /// Sent minus scheduled, for every delivered datagram.
    pub lateness: Lateness,
}

/// What a run of the relay did.
#[derive(Clone, Debug, Default)]
pub struct LinkReport {
    pub elapsed: Duration,
    /// Clients seen (each new source address counts once per idle period).
    pub clients: u64,
    /// Datagrams from sources beyond [`MAX_CLIENTS`].
    pub refused: u64,
    /// Source bindings changed by `--rebind-*`, over all clients.
    pub rebinds: u64,
    pub down: DirectionReport,
    pub up: DirectionReport,
}

impl fmt::Display for LinkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "link: {} client(s) in {:.1} s{}",
            self.clients,
            self.elapsed.as_secs_f64(),
            if self.refused > 0 {
                format!(
                    ", {} datagrams from clients over the limit ignored",
                    self.refused
                )
            } else {
                String::new()
            }
        )?;
        if self.rebinds > 0 {
            writeln!(f, "rebinds: {}", self.rebinds)?;
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        for (name, d) in [("down", &self.down), ("up", &self.up)] {
            writeln!(
                f,
                "{name:>4}: in {} ({} B), lost {}, queue-dropped {}, corrupted {}, duplicated {}, \
                 reordered {}, delivered {} ({} B), send failed {}, in flight {}",
                d.datagrams_in,
                d.bytes_in,
                d.lost,
                d.queue_dropped,
                d.corrupted,
                d.duplicated,
                d.reordered,
                d.delivered,
                d.bytes_out,
                d.send_failed,
                d.in_flight
            )?;
            writeln!(
                f,
                "      timing error (sent - scheduled): mean {:.0} us, p50 {:.0} us, p99 {:.0} us, \
                 max {:.0} us",
                us(d.lateness.mean()),
                us(d.lateness.quantile(0.5)),
                us(d.lateness.quantile(0.99)),
                us(d.lateness.max())
            )?;
        }
        Ok(())
    }
}

/// Which counter an element's drops go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DropKind {
    Loss,
    Queue,
    None,
}

/// One direction's elements, driven on scheduled time.
struct Chain {
    nodes: Vec<(DropKind, Box<dyn Node>)>,
    wakes: Vec<Option<Instant>>,
    /// The chain's own clock: the time of the last call, never decreasing.
    now: Instant,
    /// Datagrams that left the last element, with the time they were scheduled to.
    out: VecDeque<(Instant, Datagram)>,
    work: VecDeque<(usize, Datagram)>,
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chain")
            .field("elements", &self.nodes.len())
            .field("now", &self.now)
            .field("out", &self.out.len())
            .finish_non_exhaustive()
    }
}

impl Chain {
    fn new(spec: &PathSpec, seed: u64, prefix: &str) -> Result<Self, Error> {
        let built = spec.build(seed, prefix, None, 0)?;
        let nodes: Vec<(DropKind, Box<dyn Node>)> = spec
            .elements
            .iter()
            .zip(built)
            .map(|(e, (_, node))| {
                let kind = match e {
                    ElementSpec::Loss(_) | ElementSpec::Blackhole(_) | ElementSpec::Mtu(_) => {
                        DropKind::Loss
                    }
                    ElementSpec::Link { .. } => DropKind::Queue,
                    ElementSpec::Delay { .. }
                    | ElementSpec::Corrupt(_)
                    | ElementSpec::Duplicate(_)
                    | ElementSpec::Reorder { .. } => DropKind::None,
                };
                (kind, node)
            })
            .collect();
        Ok(Self {
            wakes: vec![None; nodes.len()],
            nodes,
            now: Instant::ZERO,
            out: VecDeque::new(),
            work: VecDeque::new(),
        })
    }

    fn next_wake(&self) -> Option<Instant> {
        self.wakes.iter().flatten().min().copied()
    }

    /// Runs every wake-up due up to `t`, each at its own time.
    fn run_until(&mut self, t: Instant) {
        loop {
            let due = self
                .wakes
                .iter()
                .enumerate()
                .filter_map(|(i, w)| w.filter(|w| *w <= t).map(|w| (w, i)))
                .min();
            let Some((w, i)) = due else { break };
            self.wakes[i] = None;
            self.now = self.now.max(w);
            self.call(i, None);
        }
    }

    /// A datagram enters the first element at `at`.
    fn push(&mut self, d: Datagram, at: Instant) {
        self.run_until(at);
        self.now = self.now.max(at);
        if self.nodes.is_empty() {
            self.out.push_back((self.now, d));
        } else {
            self.call(0, Some(d));
        }
    }

    /// Calls element `first`, hands what it emits to the next element at the same instant (as
    /// the simulator does), until every element has answered with a wake-up or nothing.
    fn call(&mut self, first: usize, input: Option<Datagram>) {
        let now = self.now;
        let mut next = Some((first, input));
        while let Some((i, mut input)) = next.take() {
            loop {
                match self.nodes[i].1.process(input.take(), now) {
                    Output::Datagram(d) if i + 1 == self.nodes.len() => {
                        self.out.push_back((now, d));
                    }
                    Output::Datagram(d) => self.work.push_back((i + 1, d)),
                    Output::Callback(t) => {
                        self.wakes[i] = Some(t);
                        break;
                    }
                    Output::None => {
                        self.wakes[i] = None;
                        break;
                    }
                }
            }
            next = self.work.pop_front().map(|(i, d)| (i, Some(d)));
        }
    }

    /// Drops by loss models and by queues so far.
    fn drops(&self) -> (u64, u64) {
        let count = |kind| {
            self.nodes
                .iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, n)| n.stats().dropped)
                .sum()
        };
        (count(DropKind::Loss), count(DropKind::Queue))
    }

    /// A counter summed over the chain's elements of type `T`.
    fn count<T: 'static>(&self, counter: fn(&T) -> u64) -> u64 {
        self.nodes
            .iter()
            .filter_map(|(_, n)| n.as_any()?.downcast_ref::<T>())
            .map(counter)
            .sum()
    }

    /// Datagrams inside the elements (entered or copied, not dropped, not yet out).
    fn in_flight(&self, entered: u64, delivered_or_out: u64) -> u64 {
        let (lost, queued) = self.drops();
        (entered + self.count(Duplicate::duplicated))
            .saturating_sub(lost + queued + delivered_or_out)
    }
}

#[derive(Debug)]
struct Client {
    addr: SocketAddr,
    socket: mio::net::UdpSocket,
    state: UdpSocketState,
    up: Chain,
    down: Chain,
    /// Datagrams that entered each chain, and that left it (delivered or failed to send).
    up_counts: (u64, u64),
    down_counts: (u64, u64),
    last_input: Instant,
    /// When the source binding changes next, and how many changes came before.
    next_rebind: Option<Instant>,
    rebinds: u64,
}

/// The relay: one socket towards clients, one per client towards the server.
#[derive(Debug)]
pub struct Relay {
    options: LinkOptions,
    poll: Poll,
    listen: mio::net::UdpSocket,
    listen_state: UdpSocketState,
    stopper: Stopper,
    clock: Clock,
    clients: HashMap<usize, Client>,
    by_addr: HashMap<SocketAddr, usize>,
    next_client: usize,
    /// Sockets that may have input left (mio is edge-triggered).
    readable: Vec<Token>,
    recv: RecvBatch,
    report: LinkReport,
    /// The downlink's per-packet log (`--log`).
    log: Option<LinkLog>,
}

impl Relay {
    /// Binds the client-facing socket and checks that both chains can be built (trace and
    /// replay files exist and parse).
    pub fn bind(options: LinkOptions) -> Result<Self, Error> {
        if let Some(r) = &options.rebind {
            r.check(options.upstream)?;
        }
        Chain::new(&options.down, options.seed, "down")?;
        Chain::new(&options.up, options.seed, "up")?;
        let (mut listen, listen_state) = bind_udp(options.listen)?;
        let poll = Poll::new().map_err(|e| Error::io("epoll", e))?;
        poll.registry()
            .register(&mut listen, LISTEN, Interest::READABLE)
            .map_err(|e| Error::io("registering the socket", e))?;
        let stopper = Stopper::new(poll.registry(), WAKER)?;
        Ok(Self {
            options,
            poll,
            listen,
            listen_state,
            stopper,
            clock: Clock::new(),
            clients: HashMap::new(),
            by_addr: HashMap::new(),
            next_client: 0,
            readable: Vec::new(),
            recv: RecvBatch::new(),
            report: LinkReport::default(),
            log: None,
        })
    }

    /// The client-facing address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.listen
            .local_addr()
            .map_err(|e| Error::io("local address", e))
    }

    /// Logs the downlink (server → client) per packet into `path`, in mm-link's
    /// `--downlink-log` format ([`crate::link_log`]).
    pub fn log_downlink(&mut self, path: &Path) -> Result<(), Error> {
        self.log = Some(LinkLog::create(path, self.clock.unix_ms(Instant::ZERO))?);
        Ok(())
    }

    #[must_use]
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Relays until stopped or the duration is over; returns the counters.
    pub fn run(&mut self) -> Result<LinkReport, Error> {
        let start = self.clock.now();
        let end = self.options.duration.map(|d| start + d);
        let mut events = Events::with_capacity(64);
        loop {
            self.receive()?;
            let now = self.clock.now();
            self.rebind_due(now)?;
            self.transmit(now);
            let next_expiry = self.expire(now);
            if self.stopper.is_stopped() || end.is_some_and(|e| now >= e) {
                break;
            }
            let deadline = [self.next_wake(), next_expiry, end]
                .into_iter()
                .flatten()
                .min();
            self.wait(deadline, &mut events)?;
        }
        let ids: Vec<usize> = self.clients.keys().copied().collect();
        for id in ids {
            self.forget(id);
        }
        self.report.elapsed = self.clock.now().saturating_duration_since(start);
        if let Some(log) = self.log.as_mut() {
            log.flush();
        }
        Ok(self.report.clone())
    }

    fn next_wake(&self) -> Option<Instant> {
        self.clients
            .values()
            .flat_map(|c| [c.up.next_wake(), c.down.next_wake(), c.next_rebind])
            .flatten()
            .min()
    }

    /// Takes input from every socket known to be readable, at most a batch each.
    fn receive(&mut self) -> Result<(), Error> {
        let mut still = Vec::new();
        for token in std::mem::take(&mut self.readable) {
            if self.receive_from(token)? {
                still.push(token);
            }
        }
        self.readable = still;
        Ok(())
    }

    /// Returns whether the socket may hold more input.
    fn receive_from(&mut self, token: Token) -> Result<bool, Error> {
        let mut taken = 0;
        while taken < MAX_RECV_PER_SOCKET {
            let socket = if token == LISTEN {
                Some((&self.listen_state, &self.listen))
            } else {
                self.clients
                    .get(&(token.0 - FIRST_CLIENT))
                    .map(|c| (&c.state, &c.socket))
            };
            let Some((state, socket)) = socket else {
                return Ok(false);
            };
            if !self.recv.recv(state, socket)? {
                return Ok(false);
            }
            let now = self.clock.now();
            // Taken out while `input` borrows the relay, put back before any error returns.
            let mut batch = std::mem::take(&mut self.recv);
            let relayed = batch.datagrams().try_for_each(|(from, datagram)| {
                taken += 1;
                self.input(token, from, datagram, now)
            });
            self.recv = batch;
            relayed?;
        }
        Ok(true)
    }

    fn input(
        &mut self,
        token: Token,
        from: SocketAddr,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), Error> {
        let upstream = self.options.upstream;
        if token == LISTEN {
            let Some(id) = self.client_for(from, now)? else {
                self.report.refused += 1;
                return Ok(());
            };
            let Some(c) = self.clients.get_mut(&id) else {
                return Ok(());
            };
            c.last_input = now;
            c.up_counts.0 += 1;
            self.report.up.datagrams_in += 1;
            self.report.up.bytes_in += payload.len() as u64;
            c.up.push(Datagram::new(from, upstream, payload.to_vec()), now);
        } else if let Some(c) = self.clients.get_mut(&(token.0 - FIRST_CLIENT)) {
            // The upstream socket is unconnected: relay only what the server sends.
            if from != upstream {
                return Ok(());
            }
            c.last_input = now;
            c.down_counts.0 += 1;
            self.report.down.datagrams_in += 1;
            self.report.down.bytes_in += payload.len() as u64;
            let mut d = Datagram::new(upstream, c.addr, payload.to_vec());
            if let Some(log) = self.log.as_mut() {
                log.arrival(now, payload.len());
                // The arrival time rides in the datagram's tracing tag to its departure.
                d.id = now.saturating_duration_since(Instant::ZERO).as_nanos() as u64;
            }
            c.down.push(d, now);
        }
        Ok(())
    }

    /// The client for source `from`, created on its first datagram; `None` over the limit.
    fn client_for(&mut self, from: SocketAddr, now: Instant) -> Result<Option<usize>, Error> {
        if let Some(&id) = self.by_addr.get(&from) {
            return Ok(Some(id));
        }
        if self.clients.len() >= MAX_CLIENTS {
            return Ok(None);
        }
        let id = self.next_client;
        let seed = self.options.seed.wrapping_add(id as u64);
        // Loopback stays loopback: the relay opens nothing reachable from outside for it.
        let (mut socket, state) = bind_udp(SocketAddr::new(self.local_upstream_ip(), 0))?;
        self.poll
            .registry()
            .register(&mut socket, Token(FIRST_CLIENT + id), Interest::READABLE)
            .map_err(|e| Error::io("registering a client socket", e))?;
        let client = Client {
            addr: from,
            socket,
            state,
            up: Chain::new(&self.options.up, seed, "up")?,
            down: Chain::new(&self.options.down, seed, "down")?,
            up_counts: (0, 0),
            down_counts: (0, 0),
            last_input: now,
            next_rebind: self.options.rebind.map(|r| now + r.first),
            rebinds: 0,
        };
        tracing::info!(client = %from, index = id, seed, "new client");
        self.next_client += 1;
        self.clients.insert(id, client);
        self.by_addr.insert(from, id);
        self.report.clients += 1;
        Ok(Some(id))
    }

    /// Moves every client whose rebinding is due to a new socket: the server sees a new source
    /// port (and address), and what it sends to the old one is lost with the closed socket.
    fn rebind_due(&mut self, now: Instant) -> Result<(), Error> {
        let Some(spec) = self.options.rebind else {
            return Ok(());
        };
        let original = self.local_upstream_ip();
        for (&id, c) in &mut self.clients {
            let Some(due) = c.next_rebind.filter(|d| *d <= now) else {
                continue;
            };
            c.rebinds += 1;
            let (mut socket, state) = bind_udp(spec.local(original, c.rebinds))?;
            let token = Token(FIRST_CLIENT + id);
            let registry = self.poll.registry();
            if let Err(e) = registry.deregister(&mut c.socket) {
                tracing::debug!("deregistering a rebound socket: {e}");
            }
            registry
                .register(&mut socket, token, Interest::READABLE)
                .map_err(|e| Error::io("registering a rebound socket", e))?;
            let old = c.socket.local_addr().ok();
            c.socket = socket;
            c.state = state;
            c.next_rebind = spec.after(due);
            self.report.rebinds += 1;
            tracing::info!(
                index = id,
                from = ?old,
                to = ?c.socket.local_addr().ok(),
                "client rebound"
            );
        }
        Ok(())
    }

    /// The address a client's upstream socket binds to before any rebinding.
    fn local_upstream_ip(&self) -> IpAddr {
        match self.options.upstream.ip() {
            ip if ip.is_loopback() => ip,
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        }
    }

    /// Runs every chain up to `now` and sends what left them.
    fn transmit(&mut self, now: Instant) {
        let upstream = self.options.upstream;
        let Self {
            clients,
            listen,
            listen_state,
            clock,
            report,
            log,
            ..
        } = self;
        for c in clients.values_mut() {
            c.up.run_until(now);
            while let Some((due, d)) = c.up.out.pop_front() {
                c.up_counts.1 += 1;
                send(
                    &c.state,
                    &c.socket,
                    upstream,
                    &d.payload,
                    due,
                    clock,
                    &mut report.up,
                );
            }
            c.down.run_until(now);
            while let Some((due, d)) = c.down.out.pop_front() {
                c.down_counts.1 += 1;
                if let Some(log) = log.as_mut() {
                    let arrived = Instant::ZERO + Duration::from_nanos(d.id);
                    log.departure(due, d.payload.len(), arrived);
                }
                send(
                    listen_state,
                    listen,
                    c.addr,
                    &d.payload,
                    due,
                    clock,
                    &mut report.down,
                );
            }
        }
    }

    /// Forgets clients idle for the timeout with nothing in flight; returns the next time one
    /// may expire.
    fn expire(&mut self, now: Instant) -> Option<Instant> {
        let timeout = self.options.idle_timeout;
        let idle: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, c)| {
                now.saturating_duration_since(c.last_input) >= timeout
                    && c.up.next_wake().is_none()
                    && c.down.next_wake().is_none()
            })
            .map(|(&id, _)| id)
            .collect();
        for id in idle {
            tracing::info!(index = id, "client idle, forgotten");
            self.forget(id);
        }
        self.clients.values().map(|c| c.last_input + timeout).min()
    }

    /// Removes a client, folding its elements' drop counters into the report.
    fn forget(&mut self, id: usize) {
        let Some(mut c) = self.clients.remove(&id) else {
            return;
        };
        self.by_addr.remove(&c.addr);
        if let Err(e) = self.poll.registry().deregister(&mut c.socket) {
            tracing::debug!("deregistering a client socket: {e}");
        }
        for (chain, counts, r) in [
            (&c.up, c.up_counts, &mut self.report.up),
            (&c.down, c.down_counts, &mut self.report.down),
        ] {
            let (lost, queued) = chain.drops();
            r.corrupted += chain.count(Corrupt::corrupted);
            r.duplicated += chain.count(Duplicate::duplicated);
            r.reordered += chain.count(Reorder::reordered);
            r.lost += lost;
            r.queue_dropped += queued;
            r.in_flight += chain.in_flight(counts.0, counts.1);
        }
    }

    /// Sleeps until input, `deadline` or a stop, waking no later than `deadline` (up to the
    /// OS's timer slack).
    fn wait(&mut self, deadline: Option<Instant>, events: &mut Events) -> Result<(), Error> {
        let timeout = deadline.map(|d| self.clock.until(d));
        if !self.readable.is_empty() || timeout == Some(Duration::ZERO) {
            return self.poll_events(events, Some(Duration::ZERO));
        }
        match timeout {
            Some(t) if t < PRECISE_WINDOW => {
                self.poll_events(events, Some(Duration::ZERO))?;
                if self.readable.is_empty() {
                    std::thread::sleep(t.min(SLEEP_SLICE));
                }
                Ok(())
            }
            // mio rounds up to whole milliseconds: ask for one less so it cannot overshoot.
            Some(t) => self.poll_events(events, Some(t - PRECISE_WINDOW / 2)),
            None => self.poll_events(events, None),
        }
    }

    fn poll_events(&mut self, events: &mut Events, timeout: Option<Duration>) -> Result<(), Error> {
        poll_events(&mut self.poll, events, timeout)?;
        for event in events.iter() {
            let token = event.token();
            if token != WAKER && !self.readable.contains(&token) {
                self.readable.push(token);
            }
        }
        Ok(())
    }
}

/// Sends one datagram and records its lateness (or the failure).
fn send(
    state: &UdpSocketState,
    socket: &mio::net::UdpSocket,
    to: SocketAddr,
    payload: &[u8],
    due: Instant,
    clock: &Clock,
    report: &mut DirectionReport,
) {
    let transmit = quinn_udp::Transmit {
        destination: to,
        ecn: None,
        contents: payload,
        segment_size: None,
        src_ip: None,
    };
    match state.try_send(socket.into(), &transmit) {
        Ok(()) => {
            report
                .lateness
                .record(clock.now().saturating_duration_since(due));
            report.delivered += 1;
            report.bytes_out += payload.len() as u64;
        }
        // UDP has no retransmission: a datagram the OS refuses is lost, and counted.
        Err(e) => {
            tracing::debug!("send to {to} failed: {e}");
            report.send_failed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgram(n: usize) -> Datagram {
        let a: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        Datagram::new(a, a, vec![0; n])
    }

    fn at_ms(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn chain_schedules_on_element_time_even_when_run_late() {
        // 12 Mbit/s: a 1472-byte payload is 1500 bytes on the wire, 1 ms; then 10 ms delay.
        let spec: PathSpec = "rate 12Mbps | delay 10ms".parse().expect("spec");
        let mut chain = Chain::new(&spec, 1, "down").expect("chain");
        chain.push(dgram(1472), at_ms(0));
        chain.push(dgram(1472), at_ms(0));
        assert_eq!(chain.next_wake(), Some(at_ms(1)));
        // The loop wakes 5 ms late: both are still scheduled as the elements computed.
        chain.run_until(at_ms(20));
        let due: Vec<Instant> = chain.out.iter().map(|o| o.0).collect();
        assert_eq!(due, vec![at_ms(11), at_ms(12)]);
        assert_eq!(chain.next_wake(), None);
    }

    #[test]
    fn chain_counts_drops_by_kind() {
        let spec: PathSpec = "bernoulli 100% | droptail packets=1 | rate 1Mbps"
            .parse()
            .expect("spec");
        let mut chain = Chain::new(&spec, 1, "up").expect("chain");
        for _ in 0..3 {
            chain.push(dgram(100), at_ms(0));
        }
        assert_eq!(chain.drops(), (3, 0));
        let spec: PathSpec = "droptail packets=1 | rate 1Mbps".parse().expect("spec");
        let mut chain = Chain::new(&spec, 1, "up").expect("chain");
        for _ in 0..4 {
            chain.push(dgram(100), at_ms(0));
        }
        // One in service, one waiting, two dropped.
        assert_eq!(chain.drops(), (0, 2));
        assert_eq!(chain.in_flight(4, 0), 2);
        let empty = Chain::new(&PathSpec::default(), 1, "up").expect("chain");
        assert_eq!(empty.next_wake(), None);
    }

    #[test]
    fn chain_counts_copies_and_reordering_and_keeps_in_flight_honest() {
        let spec: PathSpec = "duplicate 100% | delay 10ms reorder 100% gap 2"
            .parse()
            .expect("spec");
        let mut chain = Chain::new(&spec, 1, "down").expect("chain");
        for ms in 0..3 {
            chain.push(dgram(100), at_ms(ms));
        }
        // Six datagrams: each first copy waits (gap 2), each second is sent ahead.
        assert_eq!(chain.count(Duplicate::duplicated), 3);
        assert_eq!(chain.count(Reorder::reordered), 3);
        assert_eq!(chain.out.len(), 3);
        assert_eq!(chain.in_flight(3, 3), 3);
        chain.run_until(at_ms(20));
        assert_eq!(chain.out.len(), 6);
        assert_eq!(chain.in_flight(3, 6), 0);
    }

    #[test]
    fn lateness_quantiles() {
        let mut l = Lateness::default();
        assert_eq!(l.quantile(0.99), Duration::ZERO);
        for us in 1..=100 {
            l.record(Duration::from_micros(us) - Duration::from_nanos(500));
        }
        assert_eq!(l.count(), 100);
        assert_eq!(l.quantile(0.5), Duration::from_micros(50));
        assert_eq!(l.quantile(0.99), Duration::from_micros(99));
        assert_eq!(l.max(), Duration::from_nanos(99_500));
        assert_eq!(l.mean(), Duration::from_nanos(50_000));
        l.record(Duration::from_secs(1));
        assert_eq!(l.quantile(1.0), Duration::from_secs(1));
    }
}
