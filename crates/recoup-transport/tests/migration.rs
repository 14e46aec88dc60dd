//! Path validation, NAT rebinding, client migration and connection ID rotation (RFC 9000 §8.2,
//! §9, §5.1), and the AEAD limits and key update timing of RFC 9001 §6, on virtual time.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{bidi_transfer, seed, Dir, NetConfig, Pair, SeedGuard, CLIENT};
use recoup_time::Instant;
use recoup_transport::{CloseReason, Event, TransportConfig, TransportErrorCode};

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("addr")
}

/// Runs a bidirectional transfer and, at `at`, calls `change` once.
fn transfer_changing_at(p: &mut Pair, len: usize, at: Duration, change: impl FnOnce(&mut Pair)) {
    let mut change = Some(change);
    let when = Instant::ZERO + at;
    p.app_wakeup = Some(when);
    bidi_transfer(p, len, Duration::from_secs(60), |p| {
        if p.now >= when {
            if let Some(f) = change.take() {
                f(p);
            }
        }
    });
}

/// RFC 9000 §9.3, §8.2.2, §9.4: the client's NAT changes its port mid-transfer without the
/// client knowing. The server moves to the new address on the client's next packet, validates
/// it (the client answers the PATH_CHALLENGE), keeps congestion state (only the port changed)
/// and the transfer completes byte-exact.
#[test]
fn nat_rebinding_moves_the_server_to_the_new_port_rfc9000_9_3() {
    let s = seed(40);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    let rebound = addr("10.0.0.1:50001");
    transfer_changing_at(&mut p, 8 * 1024 * 1024, Duration::from_millis(400), |p| {
        p.client_addr = rebound;
    });
    let srv = p.server_conn().expect("server");
    assert_eq!(srv.remote_address(), rebound);
    assert!(srv.path_validated());
    let m = srv.migration_stats();
    assert_eq!(m.migrations, 1, "{m:?}");
    assert_eq!(m.paths_validated, 1, "{m:?}");
    assert!(m.challenges_sent >= 1, "{m:?}");
    assert_eq!(
        m.path_resets, 0,
        "a port change keeps CC and RTT (§9.4): {m:?}"
    );
    let c = p.client_conn().migration_stats();
    assert!(
        c.challenges_received >= 1 && c.responses_sent >= 1,
        "§8.2.2: {c:?}"
    );
    assert!(
        p.server_sent
            .iter()
            .any(|&(to, len)| to == rebound && len >= 1200),
        "§8.2.1: the challenge's datagram is padded to 1200 bytes"
    );
}

/// RFC 9000 §9.4: when the peer's IP address (not only its port) changes, congestion control and
/// the RTT estimate start again once the new path is validated.
#[test]
fn a_new_ip_address_resets_congestion_control_rfc9000_9_4() {
    let s = seed(41);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    let moved = addr("10.9.9.9:40000");
    transfer_changing_at(&mut p, 8 * 1024 * 1024, Duration::from_millis(400), |p| {
        p.client_addr = moved;
    });
    let srv = p.server_conn().expect("server");
    assert_eq!(srv.remote_address(), moved);
    let m = srv.migration_stats();
    assert_eq!((m.paths_validated, m.path_resets), (1, 1), "{m:?}");
}

/// RFC 9000 §9.3.3, §9.3.2, §8.2.4, §9.3: an attacker forwards a copy of the client's newest
/// packet from another address, ahead of the original. The server moves there but may send at
/// most three times what it received from that address before validating it; nobody answers
/// the PATH_CHALLENGE, and at the validation deadline the server goes back to the client's
/// validated address.
#[test]
fn failed_validation_falls_back_to_the_validated_address_rfc9000_9_3_2() {
    let s = seed(42);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    p.handshake();
    let settle = p.now + Duration::from_millis(500);
    p.run_until(settle - Instant::ZERO, |_| false);
    // The client's acknowledgment of some server data: a non-probing packet it will not send
    // again, stolen before the network carries it. Nothing else is in flight, so the client
    // stays silent afterwards.
    let srv = p.server_conn().expect("server");
    let id = srv.open_stream(false).expect("open");
    srv.stream_write(id, b"y").expect("write");
    p.run_until(Duration::from_secs(10), |p| {
        !p.client_conn().readable_streams().is_empty()
    });
    // The acknowledgment waits for its delay timer.
    let now = p.client.poll_timeout().expect("ACK timer");
    p.now = now;
    p.client.handle_timeout(now);
    let datagram = p.client.poll_transmit(now).expect("client ACK").contents;
    let attacker = addr("192.0.2.66:9999");
    let _ = p.server.handle_datagram(now, attacker, &datagram);
    let srv = p.server_conn().expect("server");
    assert_eq!(
        srv.remote_address(),
        attacker,
        "§9.3: highest packet number moves the path"
    );
    assert!(!srv.path_validated());
    // The original arrives later: a duplicate, ignored.
    let _ = p.server.handle_datagram(now, addr(CLIENT), &datagram);
    let until = p.now + Duration::from_secs(5);
    p.run_until(until - Instant::ZERO, |_| false);
    let srv = p.server_conn().expect("server");
    assert_eq!(
        srv.remote_address(),
        addr(CLIENT),
        "§9.3.2: back to the validated address"
    );
    let m = srv.migration_stats();
    assert_eq!((m.validations_failed, m.paths_validated), (1, 0), "{m:?}");
    let to_attacker: usize = p
        .server_sent
        .iter()
        .filter(|(to, _)| *to == attacker)
        .map(|(_, len)| len)
        .sum();
    assert!(to_attacker > 0, "the server challenged the new address");
    assert!(
        to_attacker <= 3 * datagram.len(),
        "§9.3/§8.1: {to_attacker} bytes sent for {} received",
        datagram.len()
    );
    // And the connection still works on the old path.
    bidi_transfer(&mut p, 64 * 1024, Duration::from_secs(30), |_| {});
}

/// The destination connection ID of a short-header datagram from the client.
fn short_dcid(datagram: &[u8], len: usize) -> Option<Vec<u8>> {
    (datagram.first()? & 0x80 == 0).then(|| datagram.get(1..1 + len).map(<[u8]>::to_vec))?
}

/// RFC 9000 §9.2, §9.5, §5.1.2: the client moves to a new local port mid-transfer. It uses a
/// connection ID it never used on the old path, retires the old one, validates the new path,
/// and the transfer completes; the server stops routing the retired ID.
#[test]
fn client_migration_uses_a_fresh_connection_id_and_retires_the_old_rfc9000_9_5() {
    let s = seed(43);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    p.capture = Some(Vec::new());
    let new_port = addr("10.0.0.1:50002");
    let mut migrated_at = None;
    transfer_changing_at(&mut p, 8 * 1024 * 1024, Duration::from_millis(400), |p| {
        let now = p.now;
        p.client_conn().migrate(now, true).expect("migrate");
        p.client_addr = new_port;
        migrated_at = Some(p.capture.as_ref().map_or(0, Vec::len));
    });
    let split = migrated_at.expect("migrated");
    let cid_len = TransportConfig::default().local_cid_len;
    let captured = p.capture.take().expect("capture");
    let dcids = |range: &[(Dir, Vec<u8>)]| -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = range
            .iter()
            .filter(|(d, _)| *d == Dir::ToServer)
            .filter_map(|(_, b)| short_dcid(b, cid_len))
            .collect();
        v.dedup();
        v
    };
    let before = dcids(&captured[..split]);
    let after = dcids(&captured[split..]);
    assert_eq!(before.len(), 1, "one ID before migrating");
    assert!(!after.is_empty());
    assert!(
        after.iter().all(|c| !before.contains(c)),
        "§9.5: no ID of the old path on the new one"
    );
    let old = &before[0];
    let srv = p.server_conn().expect("server");
    assert_eq!(srv.remote_address(), new_port);
    assert!(
        srv.local_cids().all(|c| c.as_slice() != old.as_slice()),
        "§5.1.2: the old ID was retired"
    );
    let c = p.client_conn().migration_stats();
    assert_eq!((c.migrations, c.paths_validated), (1, 1), "{c:?}");
}

/// RFC 9000 §9.5: without a spare connection ID from the peer, a client cannot migrate; §9: nor
/// before the handshake is confirmed.
#[test]
fn migration_needs_a_confirmed_handshake_and_a_spare_id_rfc9000_9() {
    let s = seed(44);
    let _g = SeedGuard(s);
    // The server keeps two of its IDs with the client: one in use, one spare.
    let server = TransportConfig {
        active_connection_id_limit: 2,
        ..TransportConfig::default()
    };
    let mut p = Pair::with_configs(s, NetConfig::default(), TransportConfig::default(), server);
    let now = p.now;
    assert!(
        p.client_conn().migrate(now, true).is_err(),
        "before the handshake"
    );
    p.handshake();
    let settle = p.now + Duration::from_millis(500);
    p.run_until(settle - Instant::ZERO, |_| false);
    let now = p.now;
    p.client_conn().migrate(now, true).expect("the spare ID");
    assert!(
        p.client_conn().migrate(now, true).is_err(),
        "the spare ID is used up until the server issues another"
    );
}

/// RFC 9001 §6.6: with a (lowered) confidentiality limit and no configured interval, the
/// client updates its keys before any key protects that many packets, and the server follows.
#[test]
fn key_updates_before_the_confidentiality_limit_rfc9001_6_6() {
    let s = seed(45);
    let _g = SeedGuard(s);
    let client = TransportConfig {
        aead_confidentiality_limit: Some(1000),
        ..TransportConfig::default()
    };
    // 1 % loss keeps the window (packets in flight while an update waits for its
    // acknowledgment) well below the quarter of the limit left for it.
    let net = NetConfig {
        loss: 0.01,
        ..NetConfig::default()
    };
    let mut p = Pair::with_configs(s, net, client, TransportConfig::default());
    bidi_transfer(&mut p, 4 * 1024 * 1024, Duration::from_secs(60), |_| {});
    let c = p.client_conn();
    assert!(!c.is_closing(), "the limit was never reached");
    let c = c.stats();
    // ~3000 packets each way, an update at 750 packets of a phase.
    assert!(c.key_updates >= 2, "{c:?}");
    let srv = p.server_conn().expect("server").stats();
    assert_eq!(srv.key_updates, c.key_updates);
}

/// RFC 9001 §6.6: a key that reaches its confidentiality limit before an update is possible
/// (here: the update must wait for an acknowledgment and three PTOs) protects no more packets;
/// the connection stops with AEAD_LIMIT_REACHED.
#[test]
fn reaching_the_confidentiality_limit_stops_the_connection_rfc9001_6_6() {
    let s = seed(46);
    let _g = SeedGuard(s);
    let client = TransportConfig {
        aead_confidentiality_limit: Some(40),
        ..TransportConfig::default()
    };
    let mut p = Pair::with_configs(s, NetConfig::default(), client, TransportConfig::default());
    p.handshake();
    let id = p.client_conn().open_stream(false).expect("open");
    let payload = vec![7u8; 200_000];
    let mut written = 0;
    let mut fin = false;
    p.run_until(Duration::from_secs(10), |p| {
        common::pump(p.client_conn(), id, &payload, &mut written, &mut fin);
        p.client_conn().is_closing()
    });
    let c = p.client_conn();
    assert!(c.is_closed());
    let mut reason = None;
    while let Some(e) = c.poll_event() {
        if let Event::Closed(CloseReason::Local(e)) = e {
            reason = e.transport_code();
        }
    }
    assert_eq!(reason, Some(TransportErrorCode::AEAD_LIMIT_REACHED));
}

/// RFC 9001 §6.6: received packets that fail authentication count against the integrity limit;
/// past it the connection closes with AEAD_LIMIT_REACHED.
#[test]
fn failed_decryptions_past_the_integrity_limit_close_rfc9001_6_6() {
    let s = seed(47);
    let _g = SeedGuard(s);
    let server = TransportConfig {
        aead_integrity_limit: Some(3),
        ..TransportConfig::default()
    };
    let mut p = Pair::with_configs(s, NetConfig::default(), TransportConfig::default(), server);
    p.handshake();
    let settle = p.now + Duration::from_millis(300);
    p.run_until(settle - Instant::ZERO, |_| false);
    let id = p.client_conn().open_stream(false).expect("open");
    p.client_conn().stream_write(id, b"x").expect("write");
    let now = p.now;
    let good = p
        .client
        .poll_transmit(now)
        .expect("client datagram")
        .contents;
    for i in 0..4 {
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x01; // the AEAD tag
        let _ = p.server.handle_datagram(now, addr(CLIENT), &bad);
        let srv = p.server_conn().expect("server");
        assert_eq!(srv.is_closing(), i == 3, "after {} failures", i + 1);
    }
    let srv = p.server_conn().expect("server");
    let mut reason = None;
    while let Some(e) = srv.poll_event() {
        if let Event::Closed(CloseReason::Local(e)) = e {
            reason = e.transport_code();
        }
    }
    assert_eq!(reason, Some(TransportErrorCode::AEAD_LIMIT_REACHED));
}

/// RFC 9001 §6.5: an endpoint waits three PTOs after the acknowledgment that confirms one
/// update before starting the next. With an interval of one packet (each update's first packet
/// is enough) the client would otherwise update about once a round trip.
#[test]
fn key_updates_are_three_ptos_apart_rfc9001_6_5() {
    let s = seed(48);
    let _g = SeedGuard(s);
    let client = TransportConfig {
        key_update_interval: Some(1),
        ..TransportConfig::default()
    };
    // No bottleneck queue: the RTT stays at 40 ms.
    let net = NetConfig {
        rate: 0,
        ..NetConfig::default()
    };
    let rtt = net.one_way_delay * 2;
    let mut p = Pair::with_configs(s, net, client, TransportConfig::default());
    p.handshake();
    let mut times = Vec::new();
    p.run_until(Duration::from_secs(3), |p| {
        let now = p.now;
        let n = p.client_conn().stats().key_updates as usize;
        if n > times.len() {
            times.push(now);
        }
        false
    });
    assert!(times.len() >= 5, "updates {times:?}");
    for w in times.windows(2) {
        // PTO > RTT, so three PTOs are more than three RTTs.
        assert!(w[1] - w[0] >= rtt * 3, "updates {:?} apart", w[1] - w[0]);
    }
    let srv = p.server_conn().expect("server").stats();
    assert!(
        srv.key_updates as usize >= times.len() - 1,
        "the server follows"
    );
}

/// A connected pair, 300 ms after the handshake (it is confirmed, the first ACKs are in).
fn settled_pair(seed: u64) -> Pair {
    let mut p = Pair::new(seed, NetConfig::default(), TransportConfig::default());
    p.handshake();
    let settle = p.now + Duration::from_millis(300);
    p.run_until(settle - Instant::ZERO, |_| false);
    p
}

/// A 1-RTT payload of a PATH_CHALLENGE (type 0x1a, 8 bytes of data) and PADDING to 1200 bytes.
fn path_challenge_payload() -> Vec<u8> {
    let mut payload = vec![0x1a, 1, 2, 3, 4, 5, 6, 7, 8];
    payload.resize(1160, 0);
    payload
}

/// RFC 9000 §9.1, §8.2.2: a probing packet (PATH_CHALLENGE and PADDING only) from a new address
/// is answered with a PATH_RESPONSE sent to that address, within three times the bytes it
/// brought (§8.1), and does not move the connection there (§9.3: only non-probing packets do).
#[test]
fn a_probe_from_a_new_address_is_answered_there_without_migrating_rfc9000_9_1() {
    let s = seed(49);
    let _g = SeedGuard(s);
    let mut p = settled_pair(s);
    let now = p.now;
    let payload = path_challenge_payload();
    let probe = p
        .client_conn()
        .seal_raw_1rtt_for_test(now, &payload, 0)
        .expect("1-RTT keys");
    let probe_from = addr("10.0.0.1:50003");
    let _ = p.server.handle_datagram(now, probe_from, &probe);
    let srv = p.server_conn().expect("server");
    assert_eq!(
        srv.remote_address(),
        addr(CLIENT),
        "a probe does not migrate"
    );
    let response = std::iter::from_fn(|| p.server.poll_transmit(now))
        .find(|t| t.destination == probe_from)
        .expect("a datagram to the probing address");
    assert!(response.contents.len() <= 3 * probe.len());
    assert!(
        response.contents.len() >= 1200,
        "§8.2.2: padded to 1200 bytes, {} here",
        response.contents.len()
    );
    let m = p.server_conn().expect("server").migration_stats();
    assert_eq!(
        (m.challenges_received, m.responses_sent, m.migrations),
        (1, 1, 0),
        "{m:?}"
    );
}

/// RFC 9000 §8.2.2: a PATH_CHALLENGE read in the same turn as the application's close is still
/// answered: the PATH_RESPONSE rides in the CONNECTION_CLOSE's packet, which is expanded to 1200
/// bytes. (A client finishing its download as its NAT rebinds did exactly this; the server never
/// got its answer.)
#[test]
fn a_challenge_read_just_before_closing_is_answered_with_the_close_rfc9000_8_2_2() {
    let s = seed(50);
    let _g = SeedGuard(s);
    let mut p = settled_pair(s);
    let now = p.now;
    let payload = path_challenge_payload();
    let challenge = p
        .server_conn()
        .expect("server")
        .seal_raw_1rtt_for_test(now, &payload, 0)
        .expect("1-RTT keys");
    let _ = p
        .client
        .handle_datagram(now, common::SERVER.parse().expect("addr"), &challenge);
    p.client_conn().close(now, 0, "done");
    let sent: Vec<_> = std::iter::from_fn(|| p.client.poll_transmit(now)).collect();
    assert_eq!(sent.len(), 1, "one closing datagram");
    assert!(
        sent[0].contents.len() >= 1200,
        "§8.2.2: padded to 1200 bytes, {} here",
        sent[0].contents.len()
    );
    let m = p.client_conn().migration_stats();
    assert_eq!((m.challenges_received, m.responses_sent), (1, 1), "{m:?}");
}
