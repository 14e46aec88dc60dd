//! `TransportConfig::max_pto`: a server whose every ACK from the client is lost keeps probing at
//! most the bound apart (RFC 9002 §6.2.1 would double the period past the idle timeout), and the
//! idle timeout (RFC 9000 §10.1) still ends the connection on time.

mod common;

use std::time::Duration;

use common::{Dir, NetConfig, Pair};
use recoup_time::Instant;
use recoup_transport::{MaxPto, TransportConfig};

const IDLE: Duration = Duration::from_secs(30);

/// The server streams to the client; at 2 s every datagram toward the server starts to be lost.
/// Returns the gaps between the server's sends after that, and when the server's connection
/// closed.
fn blackout(max_pto: MaxPto) -> (Vec<Duration>, Instant) {
    let transport = TransportConfig {
        max_idle_timeout: IDLE,
        max_pto,
        ..TransportConfig::default()
    };
    let mut p = Pair::new(common::seed(7), NetConfig::default(), transport);
    p.handshake();
    let payload = common::data(64 << 20, 3);
    let (mut written, mut fin, mut sid) = (0, false, None);
    let cut = Instant::ZERO + Duration::from_secs(2);
    let closed = p.run_until(Duration::from_secs(120), |p| {
        if p.now >= cut {
            p.net.loss_to_server = Some(1.0);
        }
        let mut sink = Vec::new();
        if let Some(id) = sid {
            common::drain(p.client_conn(), id, &mut sink);
        }
        let Some(srv) = p.server_conn() else {
            return true;
        };
        if srv.is_closed() {
            return true;
        }
        let id = *sid.get_or_insert_with(|| srv.open_stream(true).expect("open"));
        common::pump(srv, id, &payload, &mut written, &mut fin);
        false
    });
    assert!(closed, "the server's connection outlived 120 s");
    let sends: Vec<Instant> = p
        .trace
        .iter()
        .filter(|(t, dir, ..)| *dir == Dir::ToClient && *t >= cut)
        .map(|(t, ..)| *t)
        .collect();
    let gaps = sends
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .collect();
    (gaps, p.now)
}

#[test]
fn probes_to_a_peer_whose_acks_are_lost_stay_within_the_bound_and_the_idle_timeout_ends_it() {
    let _guard = common::SeedGuard(common::seed(7));
    let round = Duration::from_millis(100);
    let (gaps, closed) = blackout(MaxPto::Auto);
    let bound = IDLE / MaxPto::AUTO_SHARE;
    let rounds = gaps.iter().filter(|g| **g > round).count();
    let longest = gaps.iter().max().copied().unwrap_or_default();
    // The last send of a round to the next probe: the bound, give or take a timer's granularity.
    assert!(
        longest <= bound + Duration::from_millis(5),
        "a gap of {longest:?} between probes, above the bound {bound:?}"
    );
    assert!(
        rounds >= 8,
        "{rounds} probe rounds before the idle timeout: {gaps:?}"
    );
    // The bound keeps probes coming, not the connection alive: it closes one idle timeout after
    // the last datagram from the client (sent just before the cut, at most a few PTOs of
    // handshake-time RTT after it).
    let cut = Instant::ZERO + Duration::from_secs(2);
    let after = closed.saturating_duration_since(cut);
    assert!(
        after >= IDLE && after <= IDLE + Duration::from_secs(1),
        "closed {after:?} after the blackout began"
    );

    // RFC 9002 as written: the period doubles past the bound, and fewer rounds fit.
    let (gaps, _) = blackout(MaxPto::Unbounded);
    let unbounded_rounds = gaps.iter().filter(|g| **g > round).count();
    let unbounded_longest = gaps.iter().max().copied().unwrap_or_default();
    assert!(
        unbounded_longest > 2 * bound,
        "unbounded, the longest gap was {unbounded_longest:?}"
    );
    assert!(
        unbounded_rounds + 3 < rounds,
        "bounded {rounds} rounds, unbounded {unbounded_rounds}"
    );
}
