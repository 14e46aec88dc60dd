//! Benchmark: how late the link emulator sends datagrams relative to when its elements
//! scheduled them, on loopback, with the link saturated.
//!
//! `cargo run --release -p recoup-net --example link_timing -- [RATE_MBPS...] [--secs N]`
//! (default: 12 and 100 Mbit/s, 10 s each). A sender offers 110 % of the rate in 1200-byte
//! datagrams through `droptail packets=100 | rate R | delay 30ms` to a sink; the relay's summary
//! (timing error mean, p99, max) is printed per rate.

use std::net::UdpSocket;
use std::time::Duration;

use recoup_net::clock::Clock;
use recoup_net::{LinkOptions, Relay};

fn main() {
    let mut rates = Vec::new();
    let mut secs = 10.0_f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--secs" {
            secs = args.next().and_then(|s| s.parse().ok()).expect("--secs N");
        } else {
            rates.push(a.parse::<f64>().expect("rate in Mbit/s"));
        }
    }
    if rates.is_empty() {
        rates = vec![12.0, 100.0];
    }
    for mbps in rates {
        run(mbps, secs);
    }
}

fn run(mbps: f64, secs: f64) {
    let sink = UdpSocket::bind("127.0.0.1:0").expect("bind sink");
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let spec = format!("droptail packets=100 | rate {mbps}Mbps | delay 30ms");
    let options = LinkOptions {
        listen: "127.0.0.1:0".parse().expect("addr"),
        upstream: sink.local_addr().expect("addr"),
        down: "".parse().expect("empty"),
        up: spec.parse().expect("spec"),
        seed: 1,
        idle_timeout: Duration::from_secs(5),
        duration: Some(Duration::from_secs_f64(secs + 2.0)),
        rebind: None,
    };
    // Elements are not `Send`: the relay is built on the thread that runs it.
    let (tx, rx) = std::sync::mpsc::channel();
    let relay = std::thread::spawn(move || {
        let mut relay = Relay::bind(options).expect("relay");
        tx.send((relay.local_addr().expect("addr"), relay.stopper()))
            .expect("send");
        relay.run().expect("relay")
    });
    let (addr, stopper) = rx.recv().expect("relay started");
    let drain = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut n = 0u64;
        while sink.recv_from(&mut buf).is_ok() {
            n += 1;
        }
        n
    });
    let clock = Clock::new();
    let sender = UdpSocket::bind("127.0.0.1:0").expect("bind sender");
    let payload = [0u8; 1200];
    let pps = 1.1 * mbps * 1e6 / (1228.0 * 8.0);
    let mut sent = 0u64;
    loop {
        let elapsed = clock.now().as_secs_f64();
        if elapsed >= secs {
            break;
        }
        let due = (elapsed * pps) as u64 + 1;
        while sent < due {
            sender.send_to(&payload, addr).expect("send");
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let received = drain.join().expect("sink");
    stopper.stop();
    let report = relay.join().expect("relay");
    println!("--- {mbps} Mbit/s, {secs} s: sent {sent}, sink received {received}");
    print!("{report}");
}
