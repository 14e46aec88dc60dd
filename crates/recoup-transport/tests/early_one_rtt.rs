//! RFC 9001 §5.7: 1-RTT packets are processed only once the handshake is complete, and a
//! client coalesces a copy of its Finished with its 1-RTT packets until a Handshake packet of
//! its own is acknowledged.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{data, seed, NetConfig, Pair, SeedGuard, CLIENT};
use recoup_transport::packet::{PacketType, PartialDecode};
use recoup_transport::TransportConfig;

/// A loss-free pair run until the client completes its handshake (it has not sent its
/// Finished yet), with `upload` written on a new client stream.
fn client_done_with_upload(upload: &[u8]) -> Pair {
    let mut p = Pair::new(seed(1), NetConfig::default(), TransportConfig::default());
    assert!(p.run_until(Duration::from_secs(5), |p| p.client_conn().is_established()));
    let c = p.client_conn();
    let id = c.open_stream(true).expect("open");
    assert_eq!(c.stream_write(id, upload).expect("write"), upload.len());
    c.stream_finish(id).expect("finish");
    p
}

/// The client's next datagrams, each split into its long-header part and its 1-RTT packet.
fn client_datagrams(p: &mut Pair) -> Vec<(Vec<u8>, Vec<u8>)> {
    let cid_len = TransportConfig::default().local_cid_len;
    let mut out = Vec::new();
    while let Some(t) = p.client.poll_transmit(p.now) {
        let mut rest = &t.contents[..];
        let (mut long, mut short) = (Vec::new(), Vec::new());
        while !rest.is_empty() {
            let h = PartialDecode::parse(rest, cid_len).expect("our own packet parses");
            let n = h.packet_len().min(rest.len());
            if h.ty == PacketType::OneRtt {
                short.extend_from_slice(&rest[..n]);
            } else {
                long.extend_from_slice(&rest[..n]);
            }
            rest = &rest[n..];
        }
        out.push((long, short));
    }
    out
}

#[test]
fn rfc9001_5_7_server_holds_one_rtt_packets_until_its_handshake_completes() {
    let upload = data(500, 1);
    let mut p = client_done_with_upload(&upload);
    let from: SocketAddr = CLIENT.parse().expect("addr");
    let datagrams = client_datagrams(&mut p);
    let (finished, request) = datagrams.first().expect("a datagram").clone();
    assert!(!finished.is_empty() && !request.is_empty());
    let now = p.now;
    p.server.handle_datagram(now, from, &request);
    let server = p.server_conn().expect("server");
    assert!(!server.is_established());
    assert!(
        server.readable_streams().is_empty(),
        "1-RTT data processed before the handshake completed"
    );
    // Nothing was processed, so nothing is acknowledged: the server has nothing to send.
    assert!(p.server.poll_transmit(now).is_none());
    p.server.handle_datagram(now, from, &finished);
    let server = p.server_conn().expect("server");
    assert!(server.is_established());
    let _ = server.accept_stream(true);
    let id = *server
        .readable_streams()
        .first()
        .expect("held data processed");
    let mut buf = [0u8; 1000];
    let (n, fin) = server.stream_read(id, &mut buf).expect("read");
    assert_eq!((&buf[..n], fin), (&upload[..], true));
}

#[test]
fn rfc9001_5_7_client_sends_finished_copies_beside_one_rtt_until_acknowledged() {
    let upload = data(6000, 2);
    let mut p = client_done_with_upload(&upload);
    let from: SocketAddr = CLIENT.parse().expect("addr");
    let datagrams = client_datagrams(&mut p);
    assert!(datagrams.len() > 2, "{} datagrams", datagrams.len());
    for (i, (long, short)) in datagrams.iter().enumerate() {
        assert!(!short.is_empty(), "datagram {i} has no 1-RTT packet");
        assert!(!long.is_empty(), "datagram {i} carries no Finished copy");
    }
    // The datagram with the original Finished is lost; the next one completes the handshake.
    let now = p.now;
    let (long, short) = &datagrams[1];
    p.server
        .handle_datagram(now, from, &[long.as_slice(), short].concat());
    assert!(p.server_conn().expect("server").is_established());
}

/// The client writes an upload the moment its handshake completes, so its first 1-RTT packets
/// travel beside its Finished and in the datagrams after it. When the Finished is lost, a
/// server that
/// acknowledged those 1-RTT packets would let the client confirm the handshake (RFC 9001
/// §4.1.2) and drop its Handshake keys with the Finished never delivered: the server would
/// never complete. Under RFC 9001 §5.7 the server holds them until its handshake completes.
#[test]
fn rfc9001_5_7_handshake_and_first_request_complete_at_thirty_percent_loss() {
    for i in 0..40 {
        let s = seed(700 + i);
        let _g = SeedGuard(s);
        let net = NetConfig {
            loss: 0.3,
            ..NetConfig::default()
        };
        let mut p = Pair::new(s, net, TransportConfig::default());
        // Several datagrams, within the client's initial window, so that some arrive while the
        // one with the Finished is lost.
        let upload = data(8 * 1024, s);
        let mut request = None;
        let mut received = Vec::new();
        let ok = p.run_until(Duration::from_secs(60), |p| {
            if request.is_none() && p.client_conn().is_established() {
                let c = p.client_conn();
                let id = c.open_stream(true).expect("open");
                assert_eq!(c.stream_write(id, &upload).expect("write"), upload.len());
                c.stream_finish(id).expect("finish");
                request = Some(id);
            }
            let Some(server) = p.server_conn() else {
                return false;
            };
            if !server.is_established() {
                return false;
            }
            let _ = server.accept_stream(true);
            let Some(&id) = server.readable_streams().first() else {
                return false;
            };
            let mut buf = [0u8; 4096];
            loop {
                // `Blocked` until the next in-order bytes arrive.
                let Ok((n, fin)) = server.stream_read(id, &mut buf) else {
                    return false;
                };
                received.extend_from_slice(&buf[..n]);
                if fin || n == 0 {
                    return fin;
                }
            }
        });
        assert!(received == upload || !ok, "seed {s}: upload corrupted");
        assert!(
            ok,
            "seed {s}: server established {:?}, client closed {}, at {:?}",
            p.server_conn().map(|c| c.is_established()),
            p.client_conn().is_closed(),
            p.now
        );
    }
}
