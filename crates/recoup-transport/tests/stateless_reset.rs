//! Stateless reset (RFC 9000 §10.3) between our server and client.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{seed, tls_configs, NetConfig, Pair, SeedGuard, SERVER};
use recoup_transport::cid::ConnectionId;
use recoup_transport::stateless_reset::ResetKey;
use recoup_transport::{CloseReason, Endpoint, Event, ServerConfig, TransportConfig};

const SECRET: [u8; 32] = [0x42; 32];

/// An established pair whose server derives reset tokens from `SECRET`, after a short exchange
/// (so the server has issued more connection IDs with NEW_CONNECTION_ID).
fn established(s: u64) -> Pair {
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    p.server.set_stateless_reset_key(&SECRET);
    p.handshake();
    let deadline = p.now + Duration::from_millis(500);
    p.run_until(deadline - recoup_time::Instant::ZERO, |_| false);
    p
}

fn closed_by_reset(p: &mut Pair) -> bool {
    let mut reset = false;
    while let Some(e) = p.client_conn().poll_event() {
        reset |= e == Event::Closed(CloseReason::StatelessReset);
    }
    reset
}

/// The server process is replaced by a new one on the same address that kept only its reset
/// key (`with_key`) or nothing.
fn restart_server(p: &mut Pair, with_key: bool) {
    let transport = TransportConfig {
        seed: 99,
        ..TransportConfig::default()
    };
    let mut server = Endpoint::new(
        Some(ServerConfig {
            transport,
            tls: tls_configs().1,
        }),
        TransportConfig::default().local_cid_len,
    );
    if with_key {
        server.set_stateless_reset_key(&SECRET);
    }
    p.server = server;
    p.server_h = None;
}

#[test]
fn rfc9000_10_3_a_restarted_server_resets_the_old_connection_at_once() {
    let s = seed(1);
    let _g = SeedGuard(s);
    let mut p = established(s);
    restart_server(&mut p, true);
    // The client's next packet reaches a server without the connection.
    let c = p.client_conn();
    let id = c.open_stream(true).expect("open");
    c.stream_write(id, b"GET /\r\n").expect("write");
    let start = p.now;
    let ok = p.run_until(Duration::from_secs(60), |p| {
        p.client_conn().is_closed() || p.client_conn().is_closing()
    });
    assert!(ok, "seed {s}: the client never closed");
    assert_eq!(p.server.resets_sent, 1, "seed {s}");
    assert!(
        closed_by_reset(&mut p),
        "seed {s}: closed, but not by the reset"
    );
    // One round trip (40 ms) after its packet, not an idle timeout.
    assert!(
        p.now - start < Duration::from_millis(200),
        "seed {s}: took {:?}",
        p.now - start
    );
}

#[test]
fn rfc9000_10_3_without_the_key_a_restarted_server_sends_no_reset() {
    let s = seed(2);
    let mut p = established(s);
    restart_server(&mut p, false);
    let c = p.client_conn();
    let id = c.open_stream(true).expect("open");
    c.stream_write(id, b"GET /\r\n").expect("write");
    p.run_until(
        p.now - recoup_time::Instant::ZERO + Duration::from_secs(1),
        |_| false,
    );
    assert_eq!(p.server.resets_sent, 0);
    assert!(!p.client_conn().is_closing(), "seed {s}");
}

#[test]
fn rfc9000_10_3_1_tokens_from_new_connection_id_reset_and_others_do_not() {
    let s = seed(3);
    let mut p = established(s);
    let key = ResetKey::new(&SECRET);
    let server_cids: Vec<ConnectionId> = p.server_conn().expect("server").local_cids().collect();
    assert!(server_cids.len() > 1, "the server issued more IDs");
    let from: SocketAddr = SERVER.parse().expect("addr");
    let now = p.now;
    // A datagram ending with a token no ID of the server has: dropped, nothing happens.
    let mut fake = vec![0x41; 30];
    fake.extend_from_slice(&ResetKey::new(&[0; 32]).token(&server_cids[1]));
    p.client.handle_datagram(now, from, &fake);
    assert!(!p.client_conn().is_closing() && !closed_by_reset(&mut p));
    // Too short to be a reset (RFC 9000 §10.3: at least 21 bytes) even with the right token.
    let token = key.token(server_cids.last().expect("an ID"));
    let mut short = vec![0x41; 4];
    short.extend_from_slice(&token);
    p.client.handle_datagram(now, from, &short);
    assert!(!p.client_conn().is_closing());
    // The token of an ID the server issued in NEW_CONNECTION_ID, not the one in use.
    let mut reset = vec![0x41; 30];
    reset.extend_from_slice(&token);
    p.client.handle_datagram(now, from, &reset);
    assert!(closed_by_reset(&mut p));
    // RFC 9000 §10.3.1: draining, nothing more is sent.
    assert!(p.client.poll_transmit(now).is_none());
}
