//! Congestion control driven by a connection on virtual time: what the controllers see of a
//! sender's traffic, as opposed to the controllers' own unit tests, which feed them events.

mod common;

use std::time::Duration;

use common::{data, drain, pump, seed, NetConfig, Pair, SeedGuard};
use recoup_transport::cc::CcAlgorithm;
use recoup_transport::TransportConfig;

/// The server writes `count` objects of `size` bytes, one every `interval`, each on a stream of
/// its own, over a lossless 60 ms path; returns its congestion window once every object
/// arrived.
fn window_after_objects(cc: CcAlgorithm, size: usize, count: u32, interval: Duration) -> u64 {
    let s = seed(5);
    let _g = SeedGuard(s);
    let net = NetConfig {
        one_way_delay: Duration::from_millis(30),
        ..NetConfig::default()
    };
    let transport = TransportConfig {
        cc,
        ..TransportConfig::default()
    };
    let mut p = Pair::new(s, net, transport);
    p.handshake();
    let start = p.now;
    let object = data(size, s);
    // Per object: its stream, bytes written, FIN sent; then what the client read.
    let mut sent = Vec::new();
    let mut received = Vec::new();
    let mut done = 0;
    let ok = p.run_until(Duration::from_secs(60), |p| {
        let due = start + interval * sent.len() as u32;
        if sent.len() < count as usize {
            if p.now >= due {
                let server = p.server_conn().expect("server connection");
                let id = server.open_stream(false).expect("stream credit");
                sent.push((id, 0, false));
                received.push((None, Vec::new(), false));
            }
            p.app_wakeup = Some(start + interval * sent.len() as u32);
        } else {
            p.app_wakeup = None;
        }
        let server = p.server_conn().expect("server connection");
        for (id, written, fin) in &mut sent {
            pump(server, *id, &object, written, fin);
        }
        let client = p.client_conn();
        while let Some(id) = client.accept_stream(false) {
            if let Some(r) = received.iter_mut().find(|r| r.0.is_none()) {
                r.0 = Some(id);
            }
        }
        for (id, got, fin) in &mut received {
            if let (Some(id), false) = (*id, *fin) {
                *fin = drain(client, id, got);
                if *fin {
                    assert!(*got == object, "{cc}: an object arrived altered");
                    done += 1;
                }
            }
        }
        done == count
    });
    assert!(ok, "{cc}: {done} of {count} objects arrived by {:?}", p.now);
    p.server_conn().expect("server connection").path_stats().1
}

/// RFC 9002 §7.8, RFC 9438 §5.8: a flight that fills the window uses it, even when the
/// application has written nothing more by the time the flight's ACKs come. A sender of
/// objects the size of the initial window, 100 ms apart on a 60 ms path, empties its queue
/// with every object; its window must still grow. (With "nothing queued at ACK time" as the
/// application-limited test, it never did, while every loss would still cut it.)
#[test]
fn objects_that_fill_the_window_grow_it() {
    let initial = TransportConfig::default().max_datagram_size as u64 * 10;
    for cc in [CcAlgorithm::Cubic, CcAlgorithm::NewReno] {
        let window = window_after_objects(cc, 12_000, 20, Duration::from_millis(100));
        assert!(
            window >= initial + 2 * 1350,
            "{cc}: window {window} after 20 objects that each filled it; initial {initial}"
        );
    }
}

/// The other side of the rule: objects much smaller than the window leave it unused, and it
/// does not grow on their ACKs (RFC 9002 §7.8).
#[test]
fn objects_far_below_the_window_do_not_grow_it() {
    let initial = TransportConfig::default().max_datagram_size as u64 * 10;
    for cc in [CcAlgorithm::Cubic, CcAlgorithm::NewReno] {
        let window = window_after_objects(cc, 3_000, 20, Duration::from_millis(100));
        assert_eq!(window, initial, "{cc}");
    }
}
