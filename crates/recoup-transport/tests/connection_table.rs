//! The server's connection table: a limit that refuses politely (RFC 9000 §5.2.2), slots and
//! routes released when a connection closes, and slots reused by later connections.

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{seed, tls_configs, SeedGuard, SERVER};
use recoup_time::Instant;
use recoup_transport::error::TransportErrorCode;
use recoup_transport::{
    ClientConfig, CloseReason, ConnectionHandle, Endpoint, Event, ServerConfig, TransportConfig,
};

/// One way, every datagram.
const DELAY: Duration = Duration::from_millis(10);
/// The least time a step moves.
const TICK: Duration = Duration::from_micros(100);

/// A server and clients, each client an endpoint of its own at its own address, on a lossless
/// network with a fixed delay.
struct Net {
    now: Instant,
    server: Endpoint,
    clients: Vec<(SocketAddr, Endpoint, ConnectionHandle)>,
    /// (arrival, to the server?, client index, bytes), in sending order.
    wire: VecDeque<(Instant, bool, usize, Vec<u8>)>,
    client_tls: std::sync::Arc<rustls::ClientConfig>,
    seed: u64,
    /// The last short-header datagram each client sent.
    last_short: Vec<Option<Vec<u8>>>,
}

impl Net {
    fn new(seed: u64, limit: usize) -> Self {
        let (client_tls, server_tls) = tls_configs();
        let transport = TransportConfig {
            seed,
            ..TransportConfig::default()
        };
        let mut server = Endpoint::new(
            Some(ServerConfig {
                transport: transport.clone(),
                tls: server_tls,
            }),
            transport.local_cid_len,
        );
        server.set_connection_limit(limit);
        Self {
            now: Instant::ZERO,
            server,
            clients: Vec::new(),
            wire: VecDeque::new(),
            client_tls,
            seed,
            last_short: Vec::new(),
        }
    }

    /// Starts client number `clients.len()`; returns its index.
    fn connect(&mut self) -> usize {
        let k = self.clients.len();
        let addr: SocketAddr = format!("10.0.0.{}:4000", k + 1).parse().expect("addr");
        let transport = TransportConfig {
            seed: self.seed.wrapping_add(100 + k as u64),
            ..TransportConfig::default()
        };
        let mut ep = Endpoint::new(None, transport.local_cid_len);
        let h = ep
            .connect(
                self.now,
                &ClientConfig {
                    transport,
                    tls: self.client_tls.clone(),
                    server_name: "localhost".into(),
                },
                SERVER.parse().expect("addr"),
            )
            .expect("connect");
        self.clients.push((addr, ep, h));
        self.last_short.push(None);
        k
    }

    fn client(&mut self, k: usize) -> &mut recoup_transport::Connection {
        let (_, ep, h) = &mut self.clients[k];
        ep.connection_mut(*h).expect("client connection")
    }

    /// Moves time to the next event (not past `end`) and handles it; removes closed server
    /// connections, and returns the handles removed.
    fn step(&mut self, end: Instant) -> Vec<ConnectionHandle> {
        for (k, (_, ep, _)) in self.clients.iter_mut().enumerate() {
            while let Some(t) = ep.poll_transmit(self.now) {
                if t.contents.first().is_some_and(|b| b & 0x80 == 0) {
                    self.last_short[k] = Some(t.contents.clone());
                }
                self.wire.push_back((self.now + DELAY, true, k, t.contents));
            }
        }
        while let Some(t) = self.server.poll_transmit(self.now) {
            if let Some(k) = self.clients.iter().position(|c| c.0 == t.destination) {
                self.wire
                    .push_back((self.now + DELAY, false, k, t.contents));
            }
        }
        let timers = self.clients.iter_mut().filter_map(|c| c.1.poll_timeout());
        let next = timers
            .chain(self.server.poll_timeout())
            .chain(self.wire.front().map(|w| w.0))
            .min();
        // Time always moves (at least a tick), so a due timer that stays due cannot spin.
        self.now = next
            .unwrap_or(self.now + DELAY)
            .max(self.now + TICK)
            .min(end);
        while self.wire.front().is_some_and(|w| w.0 <= self.now) {
            let Some((_, to_server, k, bytes)) = self.wire.pop_front() else {
                break;
            };
            let server: SocketAddr = SERVER.parse().expect("addr");
            let (addr, ep, _) = &mut self.clients[k];
            if to_server {
                let _ = self.server.handle_datagram(self.now, *addr, &bytes);
            } else {
                let _ = ep.handle_datagram(self.now, server, &bytes);
            }
        }
        for (_, ep, _) in &mut self.clients {
            ep.handle_timeout(self.now);
        }
        self.server.handle_timeout(self.now);
        while self.server.accept().is_some() {}
        let removed = self.server.remove_closed();
        self.check_timer();
        removed
    }

    /// The server's timer, which it keeps per connection and recomputes only for connections
    /// touched since, is still the earliest of its connections' own.
    fn check_timer(&mut self) {
        let handles: Vec<ConnectionHandle> = self.server.handles().collect();
        let earliest = handles
            .iter()
            .filter_map(|&h| self.server.connection(h)?.poll_timeout())
            .min();
        assert_eq!(
            self.server.poll_timeout(),
            earliest,
            "seed {}: the endpoint's cached timer went stale at {:?}",
            self.seed,
            self.now
        );
    }

    /// The server's handle of client `k`'s connection.
    fn server_handle(&self, k: usize) -> ConnectionHandle {
        let addr = self.clients[k].0;
        self.server
            .handles()
            .find(|&h| {
                self.server
                    .connection(h)
                    .is_some_and(|c| c.remote_address() == addr)
            })
            .expect("the server has the client's connection")
    }

    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        let end = Instant::ZERO + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            self.step(end);
        }
        done(self)
    }
}

fn refused(events: &[Event]) -> bool {
    events.iter().any(|e| {
        matches!(e, Event::Closed(CloseReason::Remote(c))
            if !c.application && c.code == TransportErrorCode::CONNECTION_REFUSED.0)
    })
}

/// A server accepting `limit` connections and `clients` clients connected to it.
fn connected(s: u64, limit: usize, clients: usize) -> Net {
    let mut net = Net::new(s, limit);
    for _ in 0..clients {
        net.connect();
    }
    let ok = net.run_until(Duration::from_secs(5), |n| {
        (0..clients).all(|k| n.client(k).is_established())
    });
    assert!(ok, "seed {s}: the {clients} clients did not connect");
    net
}

fn events(net: &mut Net, k: usize) -> Vec<Event> {
    let c = net.client(k);
    std::iter::from_fn(|| c.poll_event()).collect()
}

#[test]
fn rfc9000_5_2_2_a_full_table_refuses_with_connection_refused() {
    let s = seed(7);
    let _g = SeedGuard(s);
    let mut net = connected(s, 2, 2);
    let third = net.connect();
    let ok = net.run_until(Duration::from_secs(10), |n| n.client(third).is_closed());
    assert!(
        ok,
        "seed {s}: the third client was neither refused nor closed"
    );
    let ev = events(&mut net, third);
    assert!(refused(&ev), "seed {s}: third client's events {ev:?}");
    assert!(!ev.contains(&Event::Connected), "seed {s}");
    assert_eq!(net.server.refused, 1, "seed {s}: one Initial, one refusal");
    assert_eq!(
        net.server.len(),
        2,
        "seed {s}: no state kept for the refused"
    );
    for k in 0..2 {
        assert!(net.client(k).is_established(), "seed {s}: client {k} lost");
    }
}

#[test]
fn a_closed_connection_frees_its_slot_and_routes_for_the_next() {
    let s = seed(8);
    let _g = SeedGuard(s);
    let mut net = Net::new(s, 2);
    let (a, b) = (net.connect(), net.connect());
    let ok = net.run_until(Duration::from_secs(5), |n| {
        n.client(a).is_established() && n.client(b).is_established()
    });
    assert!(ok, "seed {s}: no handshake");
    // Until the server has an RTT sample its PTO is the initial RTT's (RFC 9002 §6.2.2), and
    // the drain after a close lasts three of those: 3 s.
    let settle = net.now - Instant::ZERO + Duration::from_millis(200);
    net.run_until(settle, |_| false);
    let before: Vec<ConnectionHandle> = net.server.handles().collect();
    let now = net.now;
    net.client(a).close(now, 0, "done");
    // The server drains for three PTOs after the peer's close (RFC 9000 §10.2.2: about 0.3 s
    // at this 20 ms RTT), then drops the connection, long before any idle timeout.
    let closed_at = net.now;
    let mut removed = Vec::new();
    while removed.is_empty() && net.now < closed_at + Duration::from_secs(5) {
        removed = net.step(closed_at + Duration::from_secs(5));
    }
    assert_eq!(removed.len(), 1, "seed {s}: removed {removed:?}");
    assert!(
        net.now - closed_at < Duration::from_secs(1),
        "seed {s}: released after {:?}",
        net.now - closed_at
    );
    assert_eq!(net.server.len(), 1, "seed {s}");
    assert!(before.contains(&removed[0]), "seed {s}");
    // A new client fits under the limit again and takes the freed slot.
    let c = net.connect();
    let ok = net.run_until(Duration::from_secs(10), |n| n.client(c).is_established());
    assert!(ok, "seed {s}: the client after the close was not accepted");
    assert_eq!(net.server.refused, 0, "seed {s}");
    let after: Vec<ConnectionHandle> = net.server.handles().collect();
    assert_eq!(after.len(), 2, "seed {s}");
    assert!(
        after.contains(&removed[0]),
        "seed {s}: slot not reused: {after:?}"
    );
    // The old client's connection IDs left with it: its last 1-RTT datagram, replayed, reaches
    // no connection, not the one that now holds its slot.
    let old = net.last_short[a]
        .clone()
        .expect("client a sent 1-RTT packets");
    let addr = net.clients[a].0;
    let now = net.now;
    assert_eq!(
        net.server.handle_datagram(now, addr, &old),
        None,
        "seed {s}"
    );
}

/// The endpoint asks only connections touched since they last had nothing to send, and reports
/// only those with new input: what the application does to an idle connection still goes out at
/// once, and a datagram wakes exactly its connection.
#[test]
fn idle_connections_are_left_alone_and_a_touched_one_is_served() {
    let s = seed(9);
    let _g = SeedGuard(s);
    let mut net = connected(s, 8, 3);
    // Quiet: handshakes confirmed and acknowledged, nothing in flight.
    let settle = net.now - Instant::ZERO + Duration::from_millis(500);
    net.run_until(settle, |_| false);
    // Whatever the settling steps woke.
    net.server.drain_woken(&mut Vec::new());
    let now = net.now;
    assert!(
        net.server.poll_transmit(now).is_none(),
        "seed {s}: not quiet"
    );
    let mut none = Vec::new();
    net.server.drain_woken(&mut none);
    assert_eq!(none, [], "seed {s}: woken without input");

    // The application writes to client 1's idle connection: it goes out at the next poll.
    let h = net.server_handle(1);
    let conn = net.server.connection_mut(h).expect("connection");
    let id = conn.open_stream(false).expect("stream");
    conn.stream_write(id, b"hello").expect("write");
    let t = net
        .server
        .poll_transmit(now)
        .expect("the write was not sent");
    assert_eq!(t.destination, net.clients[1].0, "seed {s}");
    let mut woken = Vec::new();
    net.server.drain_woken(&mut woken);
    assert_eq!(woken, [h], "seed {s}: sending wakes the sender");

    // The client's answer (its ACK, once its ACK timer fires) wakes exactly that connection.
    let server: SocketAddr = SERVER.parse().expect("addr");
    let (addr, ep, _) = &mut net.clients[1];
    let _ = ep.handle_datagram(now, server, &t.contents);
    let mut at = now;
    let mut ack = None;
    for _ in 0..10 {
        ack = ep.poll_transmit(at);
        if ack.is_some() {
            break;
        }
        at = ep.poll_timeout().expect("the client's ACK timer");
        ep.handle_timeout(at);
    }
    let ack = ack.expect("the client never acknowledged");
    woken.clear();
    let _ = net.server.handle_datagram(at, *addr, &ack.contents);
    net.server.drain_woken(&mut woken);
    assert_eq!(woken, [h], "seed {s}: the ACK woke {woken:?}");
    net.check_timer();
}

/// `TransportConfig::cid_prefix`: every connection ID a server issues, in its handshake and in
/// NEW_CONNECTION_ID frames, starts with the prefix naming its worker.
#[test]
fn every_connection_id_a_server_issues_names_its_worker() {
    let server = TransportConfig {
        cid_prefix: Some(3),
        ..TransportConfig::default()
    };
    let mut p = common::Pair::with_configs(
        common::seed(5),
        common::NetConfig::default(),
        TransportConfig::default(),
        server,
    );
    p.handshake();
    // Long enough for the NEW_CONNECTION_ID frames after the handshake.
    p.run_until(std::time::Duration::from_secs(3), |_| false);
    let conn = p.server_conn().expect("server connection");
    let ids: Vec<_> = conn.local_cids().collect();
    assert!(ids.len() >= 2, "{ids:?}");
    for id in ids {
        assert_eq!(id.as_slice()[0], 3, "{id:?}");
    }
}

/// The workers of one server share their connection count: the limit bounds their total, and a
/// worker that goes away no longer holds its connections against it.
#[test]
fn endpoints_sharing_a_count_are_limited_together() {
    let s = seed(9);
    let _g = SeedGuard(s);
    let shared = Arc::new(AtomicUsize::new(0));
    let mut net = Net::new(s, 2);
    net.server.share_connection_count(Arc::clone(&shared));
    // Another endpoint sharing the count holds one connection.
    let transport = TransportConfig {
        seed: s,
        ..TransportConfig::default()
    };
    let mut sibling = Endpoint::new(None, transport.local_cid_len);
    sibling.share_connection_count(Arc::clone(&shared));
    let config = ClientConfig {
        transport,
        tls: net.client_tls.clone(),
        server_name: "localhost".into(),
    };
    let _held = sibling
        .connect(net.now, &config, "10.9.9.9:443".parse().expect("addr"))
        .expect("connect");
    assert_eq!(shared.load(Ordering::Relaxed), 1, "seed {s}");

    let first = net.connect();
    assert!(
        net.run_until(Duration::from_secs(5), |n| n.client(first).is_established()),
        "seed {s}: the first client was not accepted"
    );
    let second = net.connect();
    assert!(
        net.run_until(Duration::from_secs(10), |n| n.client(second).is_closed()),
        "seed {s}: the second client was not refused"
    );
    let ev = events(&mut net, second);
    assert!(refused(&ev), "seed {s}: second client's events {ev:?}");
    assert_eq!(shared.load(Ordering::Relaxed), 2, "seed {s}");

    drop(sibling);
    assert_eq!(
        shared.load(Ordering::Relaxed),
        1,
        "seed {s}: the sibling's slot freed"
    );
    let third = net.connect();
    assert!(
        net.run_until(Duration::from_secs(5), |n| n.client(third).is_established()),
        "seed {s}: the third client was not accepted after the sibling went away"
    );
    assert_eq!(shared.load(Ordering::Relaxed), 2, "seed {s}");
}
