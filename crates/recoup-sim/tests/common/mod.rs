//! A live stream over the real QUIC transport through a simulated path: a server writes frames
//! of a 4 Mbit/s, 30 fps stream on one QUIC stream; the client reads and checks every byte.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::any::Any;
use std::net::SocketAddr;
use std::time::Duration;

use recoup_elements::{Datagram, Node, Output, PathSpec};
use recoup_recovery::{Policy, PolicySpec};
use recoup_sim::{NodeApp, QuicNode, Simulator};
use recoup_time::Instant;
use recoup_transport::cc::CcAlgorithm;
use recoup_transport::streams::StreamId;
use recoup_transport::{
    simulation_tls, ClientConfig, ConnectionHandle, ConnectionStats, Endpoint, PolicyFactory,
    Protection, Recovered, ServerConfig, TransportConfig,
};

pub const CLIENT: &str = "10.0.0.1:50000";
pub const SERVER: &str = "10.0.0.2:443";

/// Prints the seed if the test panics while this guard lives.
pub struct SeedGuard(pub u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failed with seed {}", self.0);
        }
    }
}

/// Seeds for multi-seed tests: `RECOUP_SEED` alone if set, else `defaults`.
pub fn seeds(defaults: &[u64]) -> Vec<u64> {
    match std::env::var("RECOUP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) => vec![s],
        None => defaults.to_vec(),
    }
}

/// Server side: once connected, writes one frame every frame interval on one stream.
pub struct LiveSender {
    pub conn: Option<ConnectionHandle>,
    stream: Option<StreamId>,
    frame_interval: Duration,
    frame_bytes: usize,
    next_frame: Instant,
    end: Instant,
    pub written: u64,
    finished: bool,
    pub recovered: Vec<Recovered>,
}

impl NodeApp for LiveSender {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> Option<Instant> {
        if self.conn.is_none() {
            self.conn = ep.accept();
        }
        let conn = ep.connection_mut(self.conn?)?;
        self.recovered.extend(conn.drain_recovered());
        if !conn.is_established() {
            return None;
        }
        let id = match self.stream {
            Some(id) => id,
            None => {
                let id = conn.open_stream(false).ok()?;
                self.stream = Some(id);
                self.next_frame = now;
                id
            }
        };
        while self.next_frame <= now && self.next_frame < self.end {
            // Byte i of the stream is i mod 251, so the viewer can check every byte's position.
            let frame: Vec<u8> = (0..self.frame_bytes as u64)
                .map(|k| ((self.written + k) % 251) as u8)
                .collect();
            let n = conn.stream_write(id, &frame).unwrap_or(0);
            self.written += n as u64;
            self.next_frame += self.frame_interval;
        }
        if self.next_frame >= self.end && !self.finished {
            self.finished = conn.stream_finish(id).is_ok();
        }
        (!self.finished).then_some(self.next_frame)
    }
}

/// Client side: reads the stream and checks every byte's value against its offset.
#[derive(Default)]
pub struct Viewer {
    conn: Option<ConnectionHandle>,
    pub received: u64,
    pub corrupt: u64,
    pub fin: bool,
}

impl NodeApp for Viewer {
    fn poll(&mut self, _now: Instant, ep: &mut Endpoint) -> Option<Instant> {
        let h = self.conn.or_else(|| ep.handles().next())?;
        self.conn = Some(h);
        let conn = ep.connection_mut(h)?;
        let mut buf = vec![0u8; 65536];
        while conn.accept_stream(false).is_some() {}
        for id in conn.readable_streams() {
            while let Ok((n, fin)) = conn.stream_read(id, &mut buf) {
                for (i, b) in buf[..n].iter().enumerate() {
                    if u64::from(*b) != (self.received + i as u64) % 251 {
                        self.corrupt += 1;
                    }
                }
                self.received += n as u64;
                if fin {
                    self.fin = true;
                    break;
                }
                if n == 0 {
                    break;
                }
            }
        }
        None
    }
}

/// Drops every datagram between two instants (a link outage), passes the rest.
pub struct Blackout {
    from: Instant,
    to: Instant,
    held: Option<Datagram>,
}

impl Node for Blackout {
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
        if let Some(d) = input {
            if now < self.from || now >= self.to {
                self.held = Some(d);
            }
        }
        match self.held.take() {
            Some(d) => Output::Datagram(d),
            None => Output::None,
        }
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

/// One simulated live-streaming run.
pub struct Run {
    pub policy: PolicySpec,
    pub custom: Option<PolicyFactory>,
    pub seed: u64,
    pub secs: u64,
    pub down: String,
    pub up: String,
    pub blackout: Option<(Duration, Duration)>,
    pub cc: CcAlgorithm,
    pub record_sends: bool,
    /// The simulator's default (null) unless a test hashes packet bytes recorded under AES-GCM.
    pub protection: Protection,
}

impl Run {
    /// AutoRec's testbed setting: 5 % loss, 60 ms RTT, 12 Mbit/s, a 4 Mbit/s stream.
    pub fn testbed(policy: &str, seed: u64, secs: u64) -> Self {
        Self {
            policy: policy.parse().expect("policy"),
            custom: None,
            seed,
            secs,
            down: "bernoulli 5% | droptail packets=100 | rate 12Mbps | delay 30ms".into(),
            up: "droptail packets=100 | rate 12Mbps | delay 30ms".into(),
            blackout: None,
            cc: CcAlgorithm::Bbr,
            record_sends: false,
            protection: Protection::default(),
        }
    }
}

pub struct Outcome {
    pub written: u64,
    pub received: u64,
    pub corrupt: u64,
    pub fin: bool,
    pub recovered: Vec<Recovered>,
    pub stats: ConnectionStats,
    pub open_lineages: usize,
    /// Entries the policy still holds after the run (reinjection queue, tracked lineages).
    pub policy_state: usize,
    pub sent_log: Vec<(Instant, u64)>,
    pub finished_at: Instant,
}

impl Outcome {
    /// Mean recovery latency (ms) and count of lost data whose first retransmission was lost.
    pub fn multi_latency_ms(&self) -> (usize, f64) {
        let multi: Vec<f64> = self
            .recovered
            .iter()
            .filter(|x| !x.first_retransmit_arrived)
            .map(|x| x.recovery_latency().as_secs_f64() * 1e3)
            .collect();
        let mean = multi.iter().sum::<f64>() / multi.len().max(1) as f64;
        (multi.len(), mean)
    }

    /// Copies sent per first-transmission packet (AutoRec's redundancy cost).
    pub fn redundancy_cost(&self) -> f64 {
        self.stats.copy_packets as f64 / self.stats.new_packets.max(1) as f64
    }
}

pub fn run(r: &Run) -> Outcome {
    let (client_tls, server_tls) =
        simulation_tls(r.seed, "localhost", &[b"hq-interop"], r.protection).expect("tls");
    let transport = TransportConfig {
        policy: r.policy.clone(),
        custom_policy: r.custom.clone(),
        record_recovery: true,
        cc: r.cc,
        seed: r.seed,
        ..TransportConfig::default()
    };
    let client_addr: SocketAddr = CLIENT.parse().expect("addr");
    let server_addr: SocketAddr = SERVER.parse().expect("addr");
    let server_ep = Endpoint::new(
        Some(ServerConfig {
            transport: transport.clone(),
            tls: server_tls,
        }),
        transport.local_cid_len,
    );
    let mut client_ep = Endpoint::new(None, transport.local_cid_len);
    client_ep
        .connect(
            Instant::ZERO,
            &ClientConfig {
                transport: TransportConfig {
                    seed: r.seed ^ 1,
                    policy: PolicySpec::Arq,
                    custom_policy: None,
                    ..transport.clone()
                },
                tls: client_tls,
                server_name: "localhost".into(),
            },
            server_addr,
        )
        .expect("connect");
    let end = Instant::ZERO + Duration::from_secs(r.secs);
    let sender = LiveSender {
        conn: None,
        stream: None,
        frame_interval: Duration::from_micros(33_333),
        frame_bytes: 4_000_000 / 8 / 30,
        next_frame: Instant::ZERO,
        end,
        written: 0,
        finished: false,
        recovered: Vec::new(),
    };
    let mut sim = Simulator::new();
    let c = sim.add_node(
        "client",
        Box::new(QuicNode::new(client_addr, client_ep, Viewer::default())),
    );
    let mut server = QuicNode::new(server_addr, server_ep, sender);
    if r.record_sends {
        server.record_sends();
    }
    let s = sim.add_node("server", Box::new(server));
    let mut down = r
        .down
        .parse::<PathSpec>()
        .expect("path")
        .build(r.seed, "down", None, 0)
        .expect("build");
    if let Some((from, len)) = r.blackout {
        let from = Instant::ZERO + from;
        down.insert(
            0,
            (
                "down/blackout".to_string(),
                Box::new(Blackout {
                    from,
                    to: from + len,
                    held: None,
                }),
            ),
        );
    }
    let up =
        r.up.parse::<PathSpec>()
            .expect("path")
            .build(r.seed, "up", None, 0)
            .expect("build");
    sim.add_path(s, client_addr, down, c);
    sim.add_path(c, server_addr, up, s);
    // Run until the viewer has the whole stream (or a generous deadline).
    let deadline = end + Duration::from_secs(30);
    let mut finished_at = deadline;
    while sim.next_time().is_some_and(|t| t <= deadline) {
        sim.step();
        if sim
            .downcast::<QuicNode<Viewer>>(c)
            .is_some_and(|v| v.app().fin)
        {
            finished_at = sim.now();
            break;
        }
    }
    // Let the last acknowledgements reach the sender.
    sim.run_until(sim.now() + Duration::from_secs(2));
    let viewer = sim.downcast::<QuicNode<Viewer>>(c).expect("client");
    let (received, corrupt, fin) = (
        viewer.app().received,
        viewer.app().corrupt,
        viewer.app().fin,
    );
    let server = sim.downcast_mut::<QuicNode<LiveSender>>(s).expect("server");
    let sent_log = server.sent_log().to_vec();
    let h = server.app().conn.expect("accepted");
    let conn = server.endpoint_mut().connection_mut(h).expect("conn");
    let stats = conn.stats();
    let open_lineages = conn.open_lineages();
    let policy_state = match conn.policy() {
        Policy::AutoRec(p) => p.tracked(),
        Policy::Too(p) => p.queue_len(),
        Policy::DraftWu(p) => p.tracked(),
        Policy::Art(p) => p.tracked(),
        _ => 0,
    };
    let mut recovered: Vec<Recovered> = conn.drain_recovered().collect();
    let app = server.app_mut();
    recovered.append(&mut app.recovered);
    Outcome {
        written: app.written,
        received,
        corrupt,
        fin,
        recovered,
        stats,
        open_lineages,
        policy_state,
        sent_log,
        finished_at,
    }
}
