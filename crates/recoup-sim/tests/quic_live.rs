//! The real QUIC transport through the simulator: a server streams frames of a live video to a
//! client over a lossy path; every byte arrives, and loss-recovery policies change how fast.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use recoup_recovery::PolicySpec;
use recoup_sim::{Application, PathSpec, QuicNode, Simulator};
use recoup_time::Instant;
use recoup_transport::streams::StreamId;
use recoup_transport::{
    client_config, self_signed, server_config, ClientConfig, ConnectionHandle, Endpoint, Recovered,
    ServerConfig, ServerVerification, TransportConfig,
};

const CLIENT: &str = "10.0.0.1:50000";
const SERVER: &str = "10.0.0.2:443";

/// Server side: once connected, writes `frame_bytes` every frame interval on one stream.
struct LiveSender {
    conn: Option<ConnectionHandle>,
    stream: Option<StreamId>,
    frame_interval: Duration,
    frame_bytes: usize,
    next_frame: Instant,
    end: Instant,
    written: u64,
    finished: bool,
    recovered: Vec<Recovered>,
}

impl Application for LiveSender {
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

/// Client side: reads the stream and checks the bytes.
#[derive(Default)]
struct Viewer {
    conn: Option<ConnectionHandle>,
    received: u64,
    corrupt: u64,
    fin: bool,
}

impl Application for Viewer {
    fn poll(&mut self, _now: Instant, ep: &mut Endpoint) -> Option<Instant> {
        let h = self.conn.or_else(|| ep.handles().next())?;
        self.conn = Some(h);
        let conn = ep.connection_mut(h)?;
        let mut buf = vec![0u8; 65536];
        while let Some(id) = conn.accept_stream(false) {
            let _ = id;
        }
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

struct Outcome {
    written: u64,
    received: u64,
    fin: bool,
    recovered: Vec<Recovered>,
    copies: u64,
}

fn run(policy: &str, seed: u64, secs: u64) -> Outcome {
    let (certs, key) = self_signed(&["localhost"]).expect("cert");
    let transport = TransportConfig {
        policy: policy.parse::<PolicySpec>().expect("policy"),
        record_recovery: true,
        cc: recoup_transport::cc::CcAlgorithm::Bbr,
        seed,
        ..TransportConfig::default()
    };
    let server_tls = server_config(certs.clone(), key, &[b"hq-interop"], None).expect("tls");
    let client_tls =
        client_config(&[b"hq-interop"], ServerVerification::Roots(certs), None).expect("tls");
    let client_addr: SocketAddr = CLIENT.parse().expect("addr");
    let server_addr: SocketAddr = SERVER.parse().expect("addr");
    let server_ep = Endpoint::new(
        Some(ServerConfig {
            transport: transport.clone(),
            tls: Arc::new(server_tls),
        }),
        transport.local_cid_len,
    );
    let mut client_ep = Endpoint::new(None, transport.local_cid_len);
    client_ep
        .connect(
            Instant::ZERO,
            &ClientConfig {
                transport: TransportConfig {
                    seed: seed ^ 1,
                    ..transport.clone()
                },
                tls: Arc::new(client_tls),
                server_name: "localhost".into(),
            },
            server_addr,
        )
        .expect("connect");
    let end = Instant::ZERO + Duration::from_secs(secs);
    let sender = LiveSender {
        conn: None,
        stream: None,
        frame_interval: Duration::from_micros(33_333),
        // 4 Mbit/s at 30 fps.
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
    let s = sim.add_node(
        "server",
        Box::new(QuicNode::new(server_addr, server_ep, sender)),
    );
    let down: PathSpec = "bernoulli 5% | droptail packets=100 | rate 12Mbps | delay 30ms"
        .parse()
        .expect("path");
    let up: PathSpec = "droptail packets=100 | rate 12Mbps | delay 30ms"
        .parse()
        .expect("path");
    let down = down.build(seed, "down", None, 0).expect("build");
    let up = up.build(seed, "up", None, 0).expect("build");
    sim.add_path(s, client_addr, down, c);
    sim.add_path(c, server_addr, up, s);
    sim.run_until(end + Duration::from_secs(10));
    let viewer = sim.downcast::<QuicNode<Viewer>>(c).expect("client");
    let (received, fin) = (viewer.app().received, viewer.app().fin);
    assert_eq!(viewer.app().corrupt, 0);
    let server = sim.downcast_mut::<QuicNode<LiveSender>>(s).expect("server");
    let h = server.app().conn.expect("accepted");
    let conn = server.endpoint_mut().connection_mut(h).expect("conn");
    let copies = conn.stats().copy_packets;
    let mut recovered: Vec<Recovered> = conn.drain_recovered().collect();
    let app = server.app_mut();
    recovered.append(&mut app.recovered);
    Outcome {
        written: app.written,
        received,
        fin,
        recovered,
        copies,
    }
}

fn multi_latency_ms(r: &[Recovered]) -> (usize, f64) {
    let multi: Vec<f64> = r
        .iter()
        .filter(|x| !x.first_retransmit_arrived)
        .map(|x| x.recovery_latency().as_secs_f64() * 1e3)
        .collect();
    let mean = multi.iter().sum::<f64>() / multi.len().max(1) as f64;
    (multi.len(), mean)
}

#[test]
fn every_policy_delivers_every_byte_through_a_lossy_path() {
    for policy in ["arq", "fixed:1", "autorec", "too", "or3", "art"] {
        let o = run(policy, 7, 10);
        assert!(
            o.fin,
            "{policy}: stream did not finish: {} of {} bytes",
            o.received, o.written
        );
        assert_eq!(o.received, o.written, "{policy}: bytes lost");
        assert!(
            !o.recovered.is_empty(),
            "{policy}: 5% loss but no recovery recorded"
        );
        let (n, mean) = multi_latency_ms(&o.recovered);
        eprintln!(
            "{policy}: {} lost ranges, {n} needing 2+ retransmissions, mean latency {mean:.1} ms, copies {}",
            o.recovered.len(),
            o.copies
        );
    }
}
