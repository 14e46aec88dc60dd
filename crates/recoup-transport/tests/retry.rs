//! Retry (RFC 9000 §8.1.2, §17.2.5, §7.3; RFC 9001 §5.8) between our client and server.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{data, seed, NetConfig, Pair, SeedGuard, CLIENT, SERVER};
use recoup_transport::cid::ConnectionId;
use recoup_transport::packet::{PacketType, PartialDecode};
use recoup_transport::retry::write_retry;
use recoup_transport::{CloseReason, Event, TransportConfig, TransportErrorCode};

const KEY: [u8; 32] = [0x5a; 32];

fn cid_len() -> usize {
    TransportConfig::default().local_cid_len
}

/// The client's next datagram's first packet: (type, destination ID, source ID, token).
fn next_initial(p: &mut Pair) -> Option<(PacketType, ConnectionId, ConnectionId, Vec<u8>)> {
    let t = p.client.poll_transmit(p.now)?;
    let h = PartialDecode::parse(&t.contents, cid_len()).expect("our packet parses");
    Some((h.ty, h.dcid, h.scid, h.token.to_vec()))
}

fn retry_datagram(to: &ConnectionId, scid: &[u8], token: &[u8], odcid: &ConnectionId) -> Vec<u8> {
    let mut buf = Vec::new();
    let scid = ConnectionId::new(scid).expect("cid");
    write_retry(&mut buf, to, &scid, token, odcid);
    buf
}

#[test]
fn rfc9000_8_1_2_client_follows_a_retry_and_the_transfer_completes() {
    let s = seed(1);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    p.server.require_retry(&KEY);
    p.handshake();
    assert_eq!(p.server.retries_sent, 1);
    assert_eq!(p.server.invalid_tokens, 0);
    // RFC 9000 §7.3: the client checked original_ and retry_source_connection_id (a mismatch
    // closes it, see below); both sides are up.
    let payload = data(200_000, s);
    let c = p.client_conn();
    let id = c.open_stream(false).expect("open");
    let mut written = 0;
    let mut got = Vec::new();
    let ok = p.run_until(Duration::from_secs(30), |p| {
        let c = p.client_conn();
        while written < payload.len() {
            match c.stream_write(id, &payload[written..]) {
                Ok(n) if n > 0 => written += n,
                _ => break,
            }
        }
        if written == payload.len() {
            let _ = c.stream_finish(id);
        }
        let Some(server) = p.server_conn() else {
            return false;
        };
        let _ = server.accept_stream(false);
        let mut buf = [0u8; 65536];
        loop {
            match server.stream_read(id, &mut buf) {
                Ok((n, fin)) => {
                    got.extend_from_slice(&buf[..n]);
                    if fin {
                        return true;
                    }
                    if n == 0 {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
    });
    assert!(
        ok && got == payload,
        "seed {s}: {} of {} bytes",
        got.len(),
        payload.len()
    );
}

#[test]
fn rfc9000_8_1_2_handshake_with_retry_completes_at_thirty_percent_loss() {
    for i in 0..20 {
        let s = seed(300 + i);
        let _g = SeedGuard(s);
        let net = NetConfig {
            loss: 0.3,
            ..NetConfig::default()
        };
        let mut p = Pair::new(s, net, TransportConfig::default());
        p.server.require_retry(&KEY);
        p.handshake();
        assert!(p.server.retries_sent >= 1, "seed {s}");
    }
}

#[test]
fn rfc9000_17_2_5_2_client_follows_one_retry_with_a_valid_tag_only() {
    let mut p = Pair::new(seed(2), NetConfig::default(), TransportConfig::default());
    let server: SocketAddr = SERVER.parse().expect("addr");
    let (ty, odcid, scid, token) = next_initial(&mut p).expect("first Initial");
    assert_eq!((ty, token.len()), (PacketType::Initial, 0));
    let now = p.now;
    // RFC 9001 §5.8: a tag computed for another original ID fails; the client ignores it.
    let wrong = ConnectionId::new(&[9; 8]).expect("cid");
    p.client
        .handle_datagram(now, server, &retry_datagram(&scid, &[1; 8], b"tok", &wrong));
    assert!(
        next_initial(&mut p).is_none(),
        "a Retry with a bad tag was followed"
    );
    // §17.2.5.2: a Retry with an empty token is dropped too.
    p.client
        .handle_datagram(now, server, &retry_datagram(&scid, &[1; 8], b"", &odcid));
    assert!(
        next_initial(&mut p).is_none(),
        "a Retry without token was followed"
    );
    // A valid Retry: the ClientHello goes again at once, to the Retry's ID, with its token.
    p.client
        .handle_datagram(now, server, &retry_datagram(&scid, &[1; 8], b"tok", &odcid));
    let (ty, dcid, _, token) = next_initial(&mut p).expect("Initial after the Retry");
    assert_eq!(
        (ty, &dcid[..], &token[..]),
        (PacketType::Initial, &[1u8; 8][..], &b"tok"[..])
    );
    // §17.2.5.2: at most one Retry per connection attempt.
    p.client
        .handle_datagram(now, server, &retry_datagram(&scid, &[2; 8], b"two", &odcid));
    assert!(
        next_initial(&mut p).is_none(),
        "a second Retry was followed"
    );
    p.now += Duration::from_secs(2);
    let now = p.now;
    p.client.handle_timeout(now);
    let (_, dcid, _, token) = next_initial(&mut p).expect("a retransmitted Initial");
    assert_eq!((&dcid[..], &token[..]), (&[1u8; 8][..], &b"tok"[..]));
}

#[test]
fn rfc9000_7_3_client_closes_when_the_server_ignores_its_retry() {
    // The client follows a Retry that no server sent; the server (no Retry configured) then
    // accepts its Initial and states the Retry's ID as the original destination ID, with no
    // retry_source_connection_id: both are wrong, and the client must close.
    let mut p = Pair::new(seed(3), NetConfig::default(), TransportConfig::default());
    let server: SocketAddr = SERVER.parse().expect("addr");
    let (_, odcid, scid, _) = next_initial(&mut p).expect("first Initial");
    let now = p.now;
    p.client
        .handle_datagram(now, server, &retry_datagram(&scid, &[1; 8], b"tok", &odcid));
    p.run_until(Duration::from_secs(5), |p| {
        p.client_conn().is_closed() || p.client_conn().is_established()
    });
    let mut reason = None;
    while let Some(e) = p.client_conn().poll_event() {
        if let Event::Closed(r) = e {
            reason = Some(r);
        }
    }
    match reason {
        Some(CloseReason::Local(e)) => assert_eq!(
            e.transport_code(),
            Some(TransportErrorCode::TRANSPORT_PARAMETER_ERROR),
            "{e:?}"
        ),
        other => panic!("client did not close on the transport parameters: {other:?}"),
    }
}

#[test]
fn rfc9000_8_1_3_server_drops_a_token_replayed_from_another_address() {
    let mut p = Pair::new(seed(4), NetConfig::default(), TransportConfig::default());
    p.server.require_retry(&KEY);
    let client: SocketAddr = CLIENT.parse().expect("addr");
    let first = p.client.poll_transmit(p.now).expect("Initial").contents;
    let now = p.now;
    assert!(p.server.handle_datagram(now, client, &first).is_none());
    let retry = p.server.poll_transmit(now).expect("a Retry").contents;
    let h = PartialDecode::parse(&retry, cid_len()).expect("Retry parses");
    assert_eq!(h.ty, PacketType::Retry);
    p.client
        .handle_datagram(now, SERVER.parse().expect("addr"), &retry);
    let second = p
        .client
        .poll_transmit(now)
        .expect("Initial with token")
        .contents;
    let elsewhere: SocketAddr = "10.0.0.9:50000".parse().expect("addr");
    assert!(p.server.handle_datagram(now, elsewhere, &second).is_none());
    assert_eq!(p.server.invalid_tokens, 1);
    // Expired: more than the token lifetime later, from the right address.
    let late = now + recoup_transport::retry::TOKEN_LIFETIME + Duration::from_secs(1);
    assert!(p.server.handle_datagram(late, client, &second).is_none());
    assert_eq!(p.server.invalid_tokens, 2);
    assert!(
        p.server.handle_datagram(now, client, &second).is_some(),
        "the valid token"
    );
}

/// `Endpoint::retry_above`: Initials are accepted without a Retry (the round trip saved) until
/// the given number of handshakes is in flight; beyond, each new client gets a stateless Retry
/// and no state; a client that completes its handshake frees its place; and the Pair's client,
/// arriving while the flood holds the threshold, is served after a Retry.
#[test]
fn retry_switches_on_while_handshakes_in_flight_reach_the_threshold() {
    let s = seed(9);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    p.server.retry_above(&KEY, 3);
    let (client_tls, _) = common::tls_configs();
    // Silent clients: each sends its first Initial and never answers.
    for i in 0..5u16 {
        let mut silent = recoup_transport::Endpoint::new(None, cid_len());
        silent
            .connect(
                p.now,
                &recoup_transport::ClientConfig {
                    transport: TransportConfig::default(),
                    tls: std::sync::Arc::clone(&client_tls),
                    server_name: "localhost".into(),
                },
                SERVER.parse().expect("addr"),
            )
            .expect("connect");
        let initial = silent.poll_transmit(p.now).expect("an Initial");
        let from = SocketAddr::from(([10, 0, 0, 1], 2000 + i));
        p.server.handle_datagram(p.now, from, &initial.contents);
    }
    assert_eq!(
        p.server.handshakes_in_flight(),
        3,
        "three accepted, then Retry"
    );
    assert_eq!(p.server.retries_sent, 2);
    // The real client meets the threshold too: a Retry, then its validated connection.
    p.handshake();
    assert_eq!(p.server.retries_sent, 3);
    assert!(p.client_conn().is_established());
    assert_eq!(p.server.invalid_tokens, 0);
}
