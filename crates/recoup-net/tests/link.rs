//! Accuracy of the link emulator on 127.0.0.1: delivered rate, added delay and loss rate measured
//! by real UDP sockets on either side of a [`Relay`], against what it was configured with.
//!
//! The tests take turns (one lock) so that they do not disturb each other's timing; each stops
//! its relay and is bounded by the relay's own `duration`.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use recoup_elements::PathSpec;
use recoup_net::clock::Clock;
use recoup_net::link_log::{parse, LogEvent};
use recoup_net::rebind::RebindSpec;
use recoup_net::{LinkOptions, LinkReport, Relay, Stopper};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const SEED: u64 = 7;

struct Running {
    addr: SocketAddr,
    stopper: Stopper,
    thread: JoinHandle<LinkReport>,
}

impl Running {
    fn start(upstream: SocketAddr, up: &str, down: &str) -> Self {
        Self::start_full(upstream, up, down, None, None)
    }

    /// With the downlink logged into `log` (`recoup link --log`).
    fn start_logged(upstream: SocketAddr, up: &str, down: &str, log: Option<PathBuf>) -> Self {
        Self::start_full(upstream, up, down, log, None)
    }

    fn start_with(upstream: SocketAddr, up: &str, down: &str, rebind: Option<RebindSpec>) -> Self {
        Self::start_full(upstream, up, down, None, rebind)
    }

    fn start_full(
        upstream: SocketAddr,
        up: &str,
        down: &str,
        log: Option<PathBuf>,
        rebind: Option<RebindSpec>,
    ) -> Self {
        let options = LinkOptions {
            listen: "127.0.0.1:0".parse().expect("addr"),
            upstream,
            down: down.parse::<PathSpec>().expect("down spec"),
            up: up.parse::<PathSpec>().expect("up spec"),
            seed: SEED,
            idle_timeout: Duration::from_secs(5),
            // A safety bound: every test stops its relay long before.
            duration: Some(Duration::from_secs(30)),
            rebind,
        };
        // Elements are not `Send`: the relay is built on the thread that runs it.
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut relay = Relay::bind(options).expect("bind relay");
            if let Some(path) = &log {
                relay.log_downlink(path).expect("create the log");
            }
            tx.send((relay.local_addr().expect("addr"), relay.stopper()))
                .expect("send");
            relay.run().expect("relay run")
        });
        let (addr, stopper) = rx.recv().expect("relay started");
        Self {
            addr,
            stopper,
            thread,
        }
    }

    fn stop(self) -> LinkReport {
        self.stopper.stop();
        let report = self.thread.join().expect("relay thread");
        println!("{report}");
        report
    }
}

fn socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    s
}

/// Receives until `quiet` passes without input; returns (arrival ns, payload).
fn drain(sink: &UdpSocket, clock: Clock, quiet: Duration) -> Vec<(u64, Vec<u8>)> {
    sink.set_read_timeout(Some(quiet)).expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while let Ok((n, _)) = sink.recv_from(&mut buf) {
        got.push((clock.now().as_nanos(), buf[..n].to_vec()));
    }
    got
}

/// Sends `count` datagrams of `size` bytes at `pps`, numbered in their first 8 bytes and
/// stamped with the send time (ns) in the next 8.
fn send_paced(to: SocketAddr, from: &UdpSocket, clock: Clock, count: u64, size: usize, pps: f64) {
    let start = clock.now();
    let mut payload = vec![0u8; size.max(16)];
    let mut sent = 0;
    while sent < count {
        let elapsed = clock.now().saturating_duration_since(start).as_secs_f64();
        let due = ((elapsed * pps) as u64 + 1).min(count);
        while sent < due {
            payload[..8].copy_from_slice(&sent.to_le_bytes());
            payload[8..16].copy_from_slice(&clock.now().as_nanos().to_le_bytes());
            from.send_to(&payload, to).expect("send");
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

fn word(payload: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(payload[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

#[test]
fn delivered_rate_matches_the_configured_rate() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let clock = Clock::new();
    let sink = socket();
    let link = Running::start(
        sink.local_addr().expect("addr"),
        "droptail packets=100 | rate 12Mbps",
        "",
    );
    // Offer 15 Mbit/s of 1200-byte datagrams (1228 bytes on the wire) for 2 s: the link is
    // saturated, so it delivers exactly its rate and the queue drops the rest.
    let size = 1200;
    let wire_bits = (size + 28) as f64 * 8.0;
    let pps = 15e6 / wire_bits;
    let count = (2.0 * pps) as u64;
    let sender = socket();
    let receiver = std::thread::scope(|s| {
        let r = s.spawn(|| drain(&sink, clock, Duration::from_millis(500)));
        send_paced(link.addr, &sender, clock, count, size, pps);
        r.join().expect("sink")
    });
    let report = link.stop();
    let n = receiver.len();
    assert!(n > 1000, "only {n} datagrams arrived");
    let span = (receiver[n - 1].0 - receiver[0].0) as f64 / 1e9;
    // n - 1 serialisation times separate the first arrival from the last.
    let rate = (n - 1) as f64 * wire_bits / span;
    println!(
        "seed {SEED}: delivered {n} of {count} datagrams, {:.3} Mbit/s over {span:.3} s",
        rate / 1e6
    );
    // Tolerance: the rate comes from two timestamps 2.4 s apart, each of which a busy 2-vCPU
    // machine may delay by tens of ms (scheduling); 3 % allows 70 ms in total. The elements
    // themselves are exact (their unit tests check serialisation to the ns).
    assert!(
        (rate / 12e6 - 1.0).abs() < 0.03,
        "delivered {:.3} Mbit/s, configured 12",
        rate / 1e6
    );
    assert_eq!(report.clients, 1);
    assert_eq!(
        report.up.datagrams_in, count,
        "the OS lost input to the relay"
    );
    assert!(
        report.up.queue_dropped > 0,
        "15 Mbit/s into 12 must overflow"
    );
    assert_eq!(
        report.up.delivered + report.up.queue_dropped,
        count,
        "every datagram is delivered or dropped by the queue"
    );
    assert_eq!(report.up.delivered, n as u64, "the sink missed datagrams");
}

#[test]
fn added_delay_matches_the_configured_rtt() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let clock = Clock::new();
    // An echo server behind the link: each datagram crosses up (30 ms) and down (30 ms).
    let echo = socket();
    let echo_addr = echo.local_addr().expect("addr");
    let stop_echo = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let echo_thread = {
        let stop = stop_echo.clone();
        echo.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if let Ok((n, from)) = echo.recv_from(&mut buf) {
                    echo.send_to(&buf[..n], from).expect("echo");
                }
            }
        })
    };
    let link = Running::start(echo_addr, "delay 30ms", "delay 30ms");
    let client = socket();
    let count = 500;
    let replies = std::thread::scope(|s| {
        let r = s.spawn(|| drain(&client, clock, Duration::from_millis(500)));
        send_paced(link.addr, &client, clock, count, 100, 500.0);
        r.join().expect("client")
    });
    let report = link.stop();
    stop_echo.store(true, std::sync::atomic::Ordering::SeqCst);
    echo_thread.join().expect("echo thread");
    assert_eq!(replies.len() as u64, count, "replies lost without loss");
    let mut rtts: Vec<u64> = replies.iter().map(|(t, p)| t - word(p, 1)).collect();
    rtts.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    let p50 = rtts[rtts.len() / 2];
    let p99 = rtts[rtts.len() * 99 / 100];
    println!(
        "seed {SEED}: rtt through a 60 ms link: min {:.3} ms, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        ms(rtts[0]),
        ms(p50),
        ms(p99),
        ms(rtts[rtts.len() - 1])
    );
    // Never early: each direction schedules 30 ms after it saw the datagram, which is after it
    // was sent.
    assert!(rtts[0] >= 60_000_000, "min rtt {:.3} ms", ms(rtts[0]));
    // Typically late by the relay's input latency (it sleeps at most 200 us at a time near a
    // deadline) plus its send lateness, per direction, plus four loopback hops: 2 ms at the
    // median leaves room for scheduling noise on a shared 2-vCPU machine.
    assert!(p50 < 62_000_000, "p50 rtt {:.3} ms", ms(p50));
    assert_eq!(report.up.delivered, count);
    assert_eq!(report.down.delivered, count);
}

#[test]
fn loss_rate_matches_the_configured_loss() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let clock = Clock::new();
    let sink = socket();
    let link = Running::start(sink.local_addr().expect("addr"), "bernoulli 5%", "");
    let count: u64 = 6000;
    let sender = socket();
    let got = std::thread::scope(|s| {
        let r = s.spawn(|| drain(&sink, clock, Duration::from_millis(500)));
        send_paced(link.addr, &sender, clock, count, 200, 5000.0);
        r.join().expect("sink")
    });
    let report = link.stop();
    let lost = count - got.len() as u64;
    let p = lost as f64 / count as f64;
    // Four binomial standard errors: a correct 5 % Bernoulli model falls outside with
    // probability about 6e-5.
    let se = (0.05 * 0.95 / count as f64).sqrt();
    println!(
        "seed {SEED}: lost {lost} of {count} = {:.2} % (configured 5 %, tolerance {:.2} %)",
        p * 100.0,
        4.0 * se * 100.0
    );
    assert!((p - 0.05).abs() <= 4.0 * se, "loss rate {p}");
    // And every missing datagram is one the loss model dropped, none the OS.
    assert_eq!(report.up.lost, lost);
    assert_eq!(report.up.datagrams_in, count);
}

#[test]
fn downlink_log_parses_back_with_every_datagram_and_its_delay() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let clock = Clock::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("down.log");
    // An echo server behind the link: what it sends back crosses the logged downlink.
    let echo = socket();
    let echo_addr = echo.local_addr().expect("addr");
    let link = Running::start_logged(echo_addr, "", "delay 20ms", Some(log.clone()));
    let client = socket();
    let count = 200;
    let replies = std::thread::scope(|s| {
        let echo_thread = s.spawn(|| {
            let mut buf = [0u8; 2048];
            for _ in 0..count {
                let (n, from) = echo.recv_from(&mut buf).expect("echo input");
                echo.send_to(&buf[..n], from).expect("echo");
            }
        });
        let r = s.spawn(|| drain(&client, clock, Duration::from_millis(500)));
        send_paced(link.addr, &client, clock, count, 100, 1000.0);
        echo_thread.join().expect("echo thread");
        r.join().expect("client")
    });
    let report = link.stop();
    assert_eq!(replies.len() as u64, count);
    let text = std::fs::read_to_string(&log).expect("log written");
    let (init, events) = parse(&text).expect("the log parses");
    assert!(init.is_some_and(|ms| ms > 1_577_000_000_000), "{init:?}");
    let arrivals: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match *e {
            LogEvent::Arrival { ms, bytes } => Some((ms, bytes)),
            _ => None,
        })
        .collect();
    let departures: Vec<(u64, u64, u64)> = events
        .iter()
        .filter_map(|e| match *e {
            LogEvent::Departure {
                ms,
                bytes,
                delay_ms,
            } => Some((ms, bytes, delay_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(arrivals.len() as u64, report.down.datagrams_in);
    assert_eq!(departures.len() as u64, report.down.delivered);
    assert_eq!(departures.len() as u64, count);
    // Each datagram left the 20 ms delay line 20 ms (scheduled time) after it arrived, in order.
    for ((a_ms, a_bytes), (d_ms, d_bytes, delay)) in arrivals.iter().zip(&departures) {
        assert_eq!((*a_bytes, *d_bytes), (100, 100));
        assert_eq!(*delay, 20, "arrived {a_ms} ms, left {d_ms} ms");
        assert!((19..=21).contains(&(d_ms - a_ms)), "{a_ms} -> {d_ms}");
    }
}

/// The interop runner's `rebind --rebind-addr`: the server sees the client's datagrams from a
/// new address and port after each rebinding, and its replies to the new binding still reach the
/// client; corrupted datagrams are counted.
#[test]
fn rebinding_changes_the_source_the_server_sees() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let clock = Clock::new();
    let server = socket();
    let rebind = RebindSpec {
        first: Duration::from_millis(200),
        every: Some(Duration::from_millis(200)),
        addr: true,
    };
    let link = Running::start_with(
        server.local_addr().expect("addr"),
        "corrupt 100% within=1",
        "",
        Some(rebind),
    );
    let client = socket();
    let mut sources = Vec::new();
    let mut buf = [0u8; 64];
    let start = clock.now();
    while clock.now().saturating_duration_since(start) < Duration::from_millis(700) {
        client.send_to(&[0u8; 8], link.addr).expect("send");
        let (n, from) = server.recv_from(&mut buf).expect("relayed");
        assert_eq!(buf[..n].iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        if sources.last() != Some(&from) {
            sources.push(from);
        }
        server.send_to(b"reply", from).expect("reply");
        let (n, _) = client
            .recv_from(&mut buf)
            .expect("reply through the new binding");
        assert_eq!(&buf[..n], b"reply");
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = link.stop();
    println!("sources seen by the server: {sources:?}");
    assert!(sources.len() >= 3, "three bindings in 700 ms: {sources:?}");
    assert!(sources.windows(2).all(|w| w[0].ip() != w[1].ip()));
    assert_eq!(report.rebinds, sources.len() as u64 - 1);
    assert_eq!(report.up.corrupted, report.up.delivered);
}
