//! An in-process client/server pair on virtual time with a seeded lossy network between them
//! (no sockets, no sleeps). The seed comes from `RECOUP_SEED` when set; a failing test prints it.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;
use recoup_transport::streams::StreamId;
use recoup_transport::{
    client_config, self_signed, server_config, ClientConfig, Connection, ConnectionHandle,
    Endpoint, ServerConfig, ServerVerification, TransportConfig,
};

pub const CLIENT: &str = "10.0.0.1:50000";
pub const SERVER: &str = "10.0.0.2:4433";

/// The seed for a test: `RECOUP_SEED` if set, else `default`.
pub fn seed(default: u64) -> u64 {
    std::env::var("RECOUP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Prints the seed if the test panics while this guard lives.
pub struct SeedGuard(pub u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "test failed with seed {} (rerun with RECOUP_SEED={})",
                self.0, self.0
            );
        }
    }
}

/// What the network does to each datagram, per direction.
#[derive(Clone, Copy, Debug)]
pub struct NetConfig {
    pub one_way_delay: Duration,
    pub loss: f64,
    /// Loss toward the server when it differs from `loss` (a path lossy only downstream).
    pub loss_to_server: Option<f64>,
    /// Probability that a datagram is held back by up to `reorder_delay` extra.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Probability that one byte of a datagram is flipped.
    pub corrupt: f64,
    /// Bottleneck rate in bytes per second (0 = unlimited).
    pub rate: u64,
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            one_way_delay: Duration::from_millis(20),
            loss: 0.0,
            loss_to_server: None,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(10),
            corrupt: 0.0,
            rate: 12_500_000 / 8 * 8,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dir {
    ToServer,
    ToClient,
}

pub fn tls_configs() -> (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>) {
    let (certs, key) = self_signed(&["localhost"]).expect("certificate");
    let server = server_config(certs.clone(), key, &[b"hq-interop"], None).expect("server config");
    let client =
        client_config(&[b"hq-interop"], ServerVerification::Roots(certs), None).expect("client");
    (Arc::new(client), Arc::new(server))
}

/// A datagram on the wire: (arrival, sequence, direction, the client's address it came from or
/// goes to, bytes).
type InFlight = (Instant, u64, Dir, SocketAddr, Vec<u8>);

#[derive(Debug)]
pub struct Pair {
    pub now: Instant,
    pub client: Endpoint,
    pub server: Endpoint,
    pub client_h: ConnectionHandle,
    pub server_h: Option<ConnectionHandle>,
    pub net: NetConfig,
    rng: ChaCha8Rng,
    /// (arrival, sequence, direction, bytes)
    queue: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    /// Bottleneck: when each direction's link is free again.
    link_free: [Instant; 2],
    /// Every datagram handed to the network: (time, direction, length, dropped).
    pub trace: Vec<(Instant, Dir, usize, bool)>,
    pub delivered: [u64; 2],
    /// When set, every datagram handed to the network is kept here (before loss/corruption).
    pub capture: Option<Vec<(Dir, Vec<u8>)>>,
    /// Steps taken without virtual time moving; a livelock guard.
    stalled_steps: u64,
    /// A time the test's application wants to act at (time otherwise jumps to the next
    /// transport event).
    pub app_wakeup: Option<Instant>,
    /// The deadline of the current `run_until`: time never jumps past it.
    until: Option<Instant>,
    /// The client's address as the server sees it. A test changes it to play a NAT rebinding
    /// (the client does not know); datagrams the server sends anywhere else are lost.
    pub client_addr: SocketAddr,
    /// Every datagram the server sent: (destination, bytes).
    pub server_sent: Vec<(SocketAddr, usize)>,
    /// Indices into `server_sent` of datagrams the network loses (a test's chosen losses).
    pub drop_server_datagrams: Vec<usize>,
    /// The path MTU, as UDP payload bytes: larger datagrams are dropped (a test lowers it to
    /// play a path that carries less, or one whose MTU shrinks mid-connection).
    pub mtu: usize,
}

impl Pair {
    pub fn new(seed: u64, net: NetConfig, transport: TransportConfig) -> Self {
        Self::with_configs(seed, net, transport.clone(), transport)
    }

    pub fn with_configs(
        seed: u64,
        net: NetConfig,
        client_transport: TransportConfig,
        server_transport: TransportConfig,
    ) -> Self {
        Self::with_tls(seed, net, client_transport, server_transport, tls_configs())
    }

    /// Like [`Pair::with_configs`] with given TLS configs (making a certificate is slow).
    pub fn with_tls(
        seed: u64,
        net: NetConfig,
        client_transport: TransportConfig,
        server_transport: TransportConfig,
        (client_tls, server_tls): (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>),
    ) -> Self {
        let now = Instant::ZERO;
        let mut ct = client_transport;
        ct.seed = seed;
        let mut st = server_transport;
        st.seed = seed.wrapping_add(1);
        let cid_len = ct.local_cid_len;
        let server = Endpoint::new(
            Some(ServerConfig {
                transport: st,
                tls: server_tls,
            }),
            cid_len,
        );
        let mut client = Endpoint::new(None, cid_len);
        let client_h = client
            .connect(
                now,
                &ClientConfig {
                    transport: ct,
                    tls: client_tls,
                    server_name: "localhost".into(),
                },
                SERVER.parse().expect("addr"),
            )
            .expect("connect");
        Self {
            now,
            client,
            server,
            client_h,
            server_h: None,
            net,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x006e_6574_776f_726b),
            queue: BinaryHeap::new(),
            seq: 0,
            link_free: [now, now],
            trace: Vec::new(),
            delivered: [0, 0],
            capture: None,
            stalled_steps: 0,
            app_wakeup: None,
            until: None,
            client_addr: CLIENT.parse().expect("addr"),
            server_sent: Vec::new(),
            drop_server_datagrams: Vec::new(),
            mtu: usize::MAX,
        }
    }

    pub fn client_conn(&mut self) -> &mut Connection {
        self.client
            .connection_mut(self.client_h)
            .expect("client connection")
    }

    pub fn server_conn(&mut self) -> Option<&mut Connection> {
        let h = self.server_h?;
        self.server.connection_mut(h)
    }

    fn send(&mut self, dir: Dir, mut bytes: Vec<u8>) {
        let client_addr = self.client_addr;
        if bytes.len() > self.mtu {
            self.trace.push((self.now, dir, bytes.len(), true));
            return;
        }
        let loss = match dir {
            Dir::ToServer => self.net.loss_to_server.unwrap_or(self.net.loss),
            Dir::ToClient => self.net.loss,
        };
        let lost = self.rng.gen_bool(loss);
        self.trace.push((self.now, dir, bytes.len(), lost));
        if let Some(c) = self.capture.as_mut() {
            c.push((dir, bytes.clone()));
        }
        if lost {
            return;
        }
        if self.net.corrupt > 0.0 && self.rng.gen_bool(self.net.corrupt) && !bytes.is_empty() {
            let i = self.rng.gen_range(0..bytes.len());
            bytes[i] ^= 1 << self.rng.gen_range(0..8);
        }
        let d = dir as usize;
        let mut depart = self.now.max(self.link_free[d]);
        if let Some(ns) = (bytes.len() as u64 * 1_000_000_000).checked_div(self.net.rate) {
            depart += Duration::from_nanos(ns);
            self.link_free[d] = depart;
        }
        let mut arrival = depart + self.net.one_way_delay;
        if self.net.reorder > 0.0 && self.rng.gen_bool(self.net.reorder) {
            let extra = self
                .rng
                .gen_range(0..=self.net.reorder_delay.as_micros() as u64);
            arrival += Duration::from_micros(extra);
        }
        self.seq += 1;
        self.queue
            .push(Reverse((arrival, self.seq, dir, client_addr, bytes)));
    }

    /// Sends what both sides have, then advances time to the next event and processes it.
    /// Returns false when nothing will ever happen again.
    pub fn step(&mut self) -> bool {
        let server_addr: SocketAddr = SERVER.parse().expect("addr");
        while let Some(t) = self.client.poll_transmit(self.now) {
            self.send(Dir::ToServer, t.contents);
        }
        while let Some(t) = self.server.poll_transmit(self.now) {
            self.server_sent.push((t.destination, t.contents.len()));
            if self
                .drop_server_datagrams
                .contains(&(self.server_sent.len() - 1))
            {
                self.trace
                    .push((self.now, Dir::ToClient, t.contents.len(), true));
            } else if t.destination == self.client_addr {
                self.send(Dir::ToClient, t.contents);
            }
        }
        self.assert_no_send_stall();
        let next = [
            self.queue.peek().map(|Reverse((t, ..))| *t),
            self.client.poll_timeout(),
            self.server.poll_timeout(),
            self.app_wakeup.filter(|&t| t > self.now),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(mut next) = next else {
            return false;
        };
        if let Some(until) = self.until.filter(|&u| u > self.now) {
            next = next.min(until);
        }
        if next > self.now {
            self.now = next;
            self.stalled_steps = 0;
        } else {
            // A timer that stays due after `handle_timeout`, or a datagram storm, would spin
            // here forever without virtual time moving.
            self.stalled_steps += 1;
            assert!(
                self.stalled_steps < 100_000,
                "livelock: 100000 steps at {:?} without time moving",
                self.now
            );
        }
        while self
            .queue
            .peek()
            .is_some_and(|Reverse((t, ..))| *t <= self.now)
        {
            let Some(Reverse((_, _, dir, client_addr, bytes))) = self.queue.pop() else {
                break;
            };
            self.delivered[dir as usize] += 1;
            match dir {
                Dir::ToServer => {
                    let h = self.server.handle_datagram(self.now, client_addr, &bytes);
                    if self.server_h.is_none() {
                        self.server_h = h;
                    }
                }
                Dir::ToClient => {
                    let _ = self.client.handle_datagram(self.now, server_addr, &bytes);
                }
            }
        }
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        true
    }

    /// Every test checks this invariant: a sender with data waiting keeps something in flight
    /// or a timer armed (see `ConnectionStats::send_stalls`).
    fn assert_no_send_stall(&mut self) {
        let client = self.client_conn().stats().send_stalls;
        let server = self.server_conn().map_or(0, |c| c.stats().send_stalls);
        assert!(
            client == 0 && server == 0,
            "sender stalled at {:?} (client {client}, server {server} times): data waits, \
             nothing in flight, no timer armed",
            self.now
        );
    }

    /// Steps until `done` or the virtual deadline; returns whether `done` held.
    pub fn run_until(
        &mut self,
        deadline: Duration,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> bool {
        let end = Instant::ZERO + deadline;
        self.until = Some(end);
        let result = loop {
            if done(self) {
                break true;
            }
            if self.now >= end || !self.step() {
                break done(self);
            }
        };
        self.until = None;
        result
    }

    pub fn handshake(&mut self) {
        let ok = self.run_until(Duration::from_secs(60), |p| {
            p.client_conn().is_established() && p.server_conn().is_some_and(|c| c.is_established())
        });
        assert!(ok, "handshake did not complete by {:?}", self.now);
    }
}

/// Deterministic test data.
pub fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// Writes as much of `payload[*written..]` as the stream takes, and the FIN after the last byte.
pub fn pump(c: &mut Connection, id: StreamId, payload: &[u8], written: &mut usize, fin: &mut bool) {
    while *written < payload.len() {
        match c.stream_write(id, &payload[*written..]) {
            Ok(n) if n > 0 => *written += n,
            _ => break,
        }
    }
    if *written == payload.len() && !*fin {
        *fin = c.stream_finish(id).is_ok();
    }
}

/// Reads what is there into `out`; true once the FIN was read.
pub fn drain(c: &mut Connection, id: StreamId, out: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 16384];
    loop {
        match c.stream_read(id, &mut buf) {
            Ok((n, fin)) => {
                out.extend_from_slice(&buf[..n]);
                if fin {
                    return true;
                }
                if n == 0 {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
}

/// A bidirectional transfer (both directions at once) on one bidi stream.
pub fn bidi_transfer(
    p: &mut Pair,
    len: usize,
    deadline: Duration,
    mut each: impl FnMut(&mut Pair),
) {
    p.handshake();
    let up = data(len, 1);
    let down = data(len, 2);
    let id = p.client_conn().open_stream(true).expect("open");
    let (mut cw, mut cf, mut sw, mut sf) = (0, false, 0, false);
    let (mut got_up, mut got_down) = (Vec::new(), Vec::new());
    let (mut up_done, mut down_done) = (false, false);
    let mut sid = None;
    let ok = p.run_until(deadline, |p| {
        each(p);
        pump(p.client_conn(), id, &up, &mut cw, &mut cf);
        if !down_done {
            down_done = drain(p.client_conn(), id, &mut got_down);
        }
        let Some(srv) = p.server_conn() else {
            return false;
        };
        if sid.is_none() {
            sid = srv.accept_stream(true);
        }
        if let Some(sid) = sid {
            pump(srv, sid, &down, &mut sw, &mut sf);
            if !up_done {
                up_done = drain(srv, sid, &mut got_up);
            }
        }
        up_done && down_done
    });
    assert!(ok, "up {} down {} of {len}", got_up.len(), got_down.len());
    assert!(got_up == up && got_down == down, "bytes differ");
}

/// A qlog sink the test reads back: what a `QlogWriter` wrote, shared with the test.
#[derive(Clone, Debug, Default)]
pub struct Sink(pub Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
