//! Congestion control driven by a connection on virtual time: what the controllers see of a
//! sender's traffic, as opposed to the controllers' own unit tests, which feed them events.

mod common;

use std::time::Duration;

use common::{data, drain, pump, seed, NetConfig, Pair, SeedGuard};
use recoup_time::Instant;
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

/// What the first flight of an object of `size` bytes, written at once into an idle connection
/// without pacing, left: (object bytes not sent, window bytes unused, the last datagram's
/// length). Asserts that bytes in flight stay within the window (RFC 9002 §7).
fn first_flight(size: usize, initial_window: Option<u64>) -> (u64, u64, u64) {
    let s = seed(6);
    let _g = SeedGuard(s);
    let transport = TransportConfig {
        // Pacing would spread the flight; the window alone is under test.
        pacing: false,
        initial_window,
        ..TransportConfig::default()
    };
    let mut p = Pair::new(s, NetConfig::default(), transport);
    p.handshake();
    // Idle until everything of the handshake is acknowledged.
    p.run_until(p.now - Instant::ZERO + Duration::from_secs(1), |_| false);
    let now = p.now;
    let server = p.server_conn().expect("server connection");
    let (_, window, before) = server.path_stats();
    assert_eq!(before, 0, "size {size}: the handshake is acknowledged");
    let id = server.open_stream(false).expect("stream");
    let object = data(size, s);
    let (mut written, mut fin) = (0, false);
    pump(server, id, &object, &mut written, &mut fin);
    assert!(fin, "size {size}: written at once");
    let mut last = 0;
    while let Some(t) = p.server.poll_transmit(now) {
        last = t.contents.len() as u64;
    }
    let server = p.server_conn().expect("server connection");
    let (_, _, in_flight) = server.path_stats();
    assert!(
        in_flight <= window,
        "size {size}: {in_flight} in flight over {window}"
    );
    let left = size as u64 - server.stats().stream_bytes_new;
    (left, window - in_flight, last)
}

/// RFC 9002 §7: a packet may not take bytes in flight over the window, and its own size is
/// what counts. An object leaves whole in the first flight whenever its last, short packet fits
/// the window's rest, even when a full datagram would not.
#[test]
fn the_last_short_packet_of_an_object_uses_the_window_rest() {
    let mds = TransportConfig::default().max_datagram_size as u64;
    let mut short_last_packets = 0;
    for size in (11_000..13_600).step_by(50) {
        let (left, room, last) = first_flight(size, None);
        // What stays behind would not fit the window's rest in one packet: a short header
        // with the longest CID and packet number, a STREAM frame header and the AEAD tag
        // take under 64 bytes.
        assert!(
            left == 0 || room < left + 64,
            "size {size}: {left} bytes wait with {room} bytes of window left"
        );
        // Under a full-datagram test the last packet would have waited for an ACK.
        if left == 0 && room + last < mds {
            short_last_packets += 1;
        }
    }
    assert!(
        short_last_packets > 0,
        "no size exercised a short last packet"
    );
}

/// A backlog larger than the window fills it down to less than half a datagram: a short
/// packet goes into a rest of half a datagram or more (RFC 1122 §4.2.3.4's fraction).
#[test]
fn a_backlog_fills_the_window_to_within_half_a_datagram() {
    let mds = TransportConfig::default().max_datagram_size as u64;
    // 80 datagrams of window: the full packets, each a few bytes short of a datagram, leave
    // more than half a datagram of it.
    for size in (120_000..130_000).step_by(2_000) {
        let (left, room, _) = first_flight(size, Some(80));
        assert!(left > 0, "size {size}: a backlog");
        assert!(room < mds / 2, "size {size}: {room} bytes of window unused");
    }
}
