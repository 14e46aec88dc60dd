//! `TransportConfig::tail_ping`: a PING after a burst's last packet makes the receiver
//! acknowledge at once when the tail is missing (RFC 9000 §13.2.1), so the tail's loss is found
//! by RFC 9002 §6.1.2's time threshold, about 9/8 RTT after its send. Without it, a lost tail
//! with nothing sent after it waits for the probe timeout.

mod common;

use std::time::Duration;

use common::{drain, seed, NetConfig, Pair, SeedGuard};
use recoup_time::Instant;
use recoup_transport::TransportConfig;

const ONE_WAY: Duration = Duration::from_millis(30);

/// A quiet connection's server sends a two-packet burst whose second packet is lost; returns
/// how long after the write the client had the whole burst, and the server's stats.
fn lost_tail(tail_ping: bool, s: u64) -> (Duration, recoup_transport::ConnectionStats) {
    let transport = TransportConfig {
        tail_ping,
        seed: s,
        ..TransportConfig::default()
    };
    let net = NetConfig {
        one_way_delay: ONE_WAY,
        ..NetConfig::default()
    };
    let mut p = Pair::new(s, net, transport);
    p.handshake();
    // Quiet: the handshake's ACKs are done and the RTT estimate has settled.
    let settle = p.now - Instant::ZERO + Duration::from_secs(2);
    p.run_until(settle, |_| false);
    let written_at = p.now;
    let first = p.server_sent.len();
    // The second datagram of the burst is its tail: lose it.
    p.drop_server_datagrams.push(first + 1);
    let conn = p.server_conn().expect("server connection");
    let id = conn.open_stream(false).expect("stream");
    let payload = [7u8; 2000];
    assert_eq!(conn.stream_write(id, &payload).expect("write"), 2000);
    let mut got = Vec::new();
    let deadline = p.now - Instant::ZERO + Duration::from_secs(5);
    let done = p.run_until(deadline, |p| {
        let c = p.client_conn();
        if let Some(sid) = c.accept_stream(false) {
            assert_eq!(sid, id);
        }
        drain(c, id, &mut got);
        got.len() == payload.len()
    });
    assert!(
        done,
        "seed {s}: the burst never arrived ({} bytes)",
        got.len()
    );
    // The lost datagram was the burst's data, not an ACK.
    assert!(
        p.server_sent[first + 1].1 > 600,
        "seed {s}: lost datagram of {} bytes is not the tail",
        p.server_sent[first + 1].1
    );
    let stats = p.server_conn().expect("server connection").stats();
    (p.now - written_at, stats)
}

#[test]
fn a_lost_tail_is_found_by_the_time_threshold_with_a_tail_ping() {
    let s = seed(5);
    let _g = SeedGuard(s);
    let rtt = 2 * ONE_WAY;
    let (with, stats) = lost_tail(true, s);
    assert_eq!(stats.packets_lost, 1, "seed {s}: {stats:?}");
    assert_eq!(stats.pto_expirations, 0, "seed {s}: {stats:?}");
    // 9/8 RTT to declare the tail lost, then one way for its retransmission, with a few ms
    // of serialisation and timer granularity.
    let bound = rtt * 9 / 8 + ONE_WAY + Duration::from_millis(10);
    assert!(with <= bound, "seed {s}: {with:?} > {bound:?}");

    let (without, stats) = lost_tail(false, s);
    assert_eq!(stats.pto_expirations, 1, "seed {s}: {stats:?}");
    assert!(
        without >= with + Duration::from_millis(20),
        "seed {s}: without the PING {without:?}, with it {with:?}"
    );
}

/// The sizes of the server's datagrams in each of ten 3000-byte bursts, 100 ms apart.
fn bursts(tail_ping: bool, s: u64) -> Vec<Vec<usize>> {
    let transport = TransportConfig {
        tail_ping,
        seed: s,
        ..TransportConfig::default()
    };
    let mut p = Pair::new(s, NetConfig::default(), transport);
    p.handshake();
    let id = p
        .server_conn()
        .expect("server connection")
        .open_stream(false)
        .expect("stream");
    let mut sizes = Vec::new();
    for _ in 0..10 {
        let settle = p.now - Instant::ZERO + Duration::from_millis(100);
        p.run_until(settle, |_| false);
        let first = p.server_sent.len();
        let conn = p.server_conn().expect("server connection");
        assert_eq!(conn.stream_write(id, &[1u8; 3000]).expect("write"), 3000);
        let settle = p.now - Instant::ZERO + Duration::from_millis(100);
        p.run_until(settle, |_| false);
        sizes.push(p.server_sent[first..].iter().map(|&(_, n)| n).collect());
    }
    sizes
}

#[test]
fn a_tail_ping_costs_one_small_packet_per_burst() {
    let s = seed(6);
    let _g = SeedGuard(s);
    // Each burst: three packets of data, then (with the option) one PING-only packet of a few
    // tens of bytes; the client sends nothing the server would acknowledge on its own.
    for (tail_ping, pings) in [(true, 1), (false, 0)] {
        let sizes = bursts(tail_ping, s);
        for burst in &sizes {
            let data = burst.iter().filter(|&&n| n > 100).count();
            let small: Vec<_> = burst.iter().filter(|&&n| n <= 100).collect();
            assert_eq!(data, 3, "seed {s}, tail_ping {tail_ping}: {sizes:?}");
            assert_eq!(
                small.len(),
                pings,
                "seed {s}, tail_ping {tail_ping}: {sizes:?}"
            );
            assert!(small.iter().all(|&&n| n < 40), "seed {s}: {sizes:?}");
        }
    }
}
