//! RFC 9002 §6.2.4: a PTO probe in the Initial or Handshake space carries the CRYPTO data not yet
//! acknowledged. A server that never saw the ClientHello cannot start a connection from an Initial
//! with only a PING in it (aioquic closes with "Packet contains no CRYPTO frame").

mod common;

use std::sync::Arc;
use std::time::Duration;

use recoup_time::Instant;
use recoup_transport::frame::{Frame, Frames};
use recoup_transport::packet::{decode_pn, PacketType, PartialDecode};
use recoup_transport::{initial_keys, ClientConfig, Endpoint, Side, TransportConfig};

/// The client Initial packets of `datagram`, decrypted as the server would (RFC 9001 §5.2):
/// for each, its CRYPTO frames as (offset, bytes).
fn client_initials(datagram: &[u8], client_dcid: &[u8]) -> Vec<Vec<(u64, Vec<u8>)>> {
    let keys = initial_keys(client_dcid, Side::Server);
    let mut out = Vec::new();
    let mut rest = datagram;
    while !rest.is_empty() {
        let Ok(h) = PartialDecode::parse(rest, client_dcid.len()) else {
            break;
        };
        let len = h.packet_len();
        if h.ty == PacketType::Initial {
            let pn_offset = h.pn_offset.expect("an Initial has a packet number");
            let mut packet = h.packet.to_vec();
            let (pn_len, truncated) = keys
                .remote
                .unprotect_header(&mut packet, pn_offset)
                .expect("header protection");
            let pn = decode_pn(truncated, pn_len, None);
            let payload = keys
                .remote
                .open(pn, &mut packet, pn_offset + pn_len)
                .expect("the client's Initial decrypts with the Initial keys");
            let crypto = Frames::new(payload)
                .map(|f| f.expect("our own frames parse"))
                .filter_map(|f| match f {
                    Frame::Crypto { offset, data } => Some((offset, data.to_vec())),
                    _ => None,
                })
                .collect();
            out.push(crypto);
        }
        rest = &rest[len..];
    }
    out
}

/// The CRYPTO bytes from offset 0 that `frames` cover contiguously.
fn crypto_prefix(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut sorted = frames.to_vec();
    sorted.sort_by_key(|(offset, _)| *offset);
    let mut out = Vec::new();
    for (offset, data) in sorted {
        let offset = offset as usize;
        if offset > out.len() {
            break;
        }
        let skip = out.len() - offset;
        if skip < data.len() {
            out.extend_from_slice(&data[skip..]);
        }
    }
    out
}

#[test]
fn every_probe_for_a_lost_client_hello_carries_the_client_hello_rfc9002_6_2_4() {
    let (client_tls, _) = common::tls_configs();
    let mut client = Endpoint::new(None, TransportConfig::default().local_cid_len);
    let mut now = Instant::ZERO;
    client
        .connect(
            now,
            &ClientConfig {
                transport: TransportConfig::default(),
                tls: Arc::clone(&client_tls),
                server_name: "localhost".into(),
            },
            common::SERVER.parse().expect("addr"),
        )
        .expect("connect");
    let first = client.poll_transmit(now).expect("the first Initial");
    assert!(client.poll_transmit(now).is_none(), "one first flight");
    let dcid = PartialDecode::parse(&first.contents, 0)
        .expect("our Initial parses")
        .dcid
        .to_vec();
    let initials = client_initials(&first.contents, &dcid);
    assert_eq!(initials.len(), 1);
    let client_hello = crypto_prefix(&initials[0]);
    assert!(
        client_hello.len() > 4 && client_hello[0] == 1,
        "a ClientHello"
    );

    // The first Initial, and then every probe, is lost: each PTO's probes must each carry the
    // whole ClientHello, since any one of them may be the first the server sees.
    let mut probes = 0;
    for pto in 1..=3 {
        let due = client.poll_timeout().expect("a PTO is armed");
        assert!(due > now, "PTO {pto} in the future");
        now = due;
        client.handle_timeout(now);
        let mut this_pto = 0;
        while let Some(t) = client.poll_transmit(now) {
            assert!(
                t.contents.len() >= 1200,
                "RFC 9000 §14.1: padded client Initial"
            );
            for frames in client_initials(&t.contents, &dcid) {
                assert_eq!(
                    crypto_prefix(&frames),
                    client_hello,
                    "probe {this_pto} of PTO {pto} does not carry the ClientHello"
                );
                this_pto += 1;
            }
        }
        assert!(this_pto >= 1, "PTO {pto} sent no Initial probe");
        probes += this_pto;
    }
    assert!(probes >= 3);
    assert!(now < Instant::ZERO + Duration::from_secs(10));
}
