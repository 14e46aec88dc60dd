//! The fuzz targets on the stable toolchain (docs/FUZZING.md): every file of `fuzz/corpus/<target>`
//! (the seed corpus) and `fuzz/regressions/<target>` (inputs that once crashed recoup) goes
//! through the same `recoup_transport::fuzzing` function the cargo-fuzz target runs, so CI
//! checks them without nightly.
//!
//! `write_seed_corpus` (ignored) regenerates the seed corpus from valid encodings:
//! `cargo test -p recoup-transport --test fuzz_replay -- --ignored write_seed_corpus`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use recoup_recovery::RangeSet;
use recoup_time::Instant;
use recoup_transport::cid::ConnectionId;
use recoup_transport::frame::{
    encode_ack, ConnectionClose, DatagramFrame, EcnCounts, Frame, RepairFrame, StreamDir,
    StreamFrame,
};
use recoup_transport::fuzzing::{sealed_initial, Established, CLIENT, TARGETS};
use recoup_transport::packet::{write_version_negotiation, PartialDecode};
use recoup_transport::retry::write_retry;
use recoup_transport::transport_params::TransportParameters;
use recoup_transport::{
    initial_keys, simulation_tls, ClientConfig, Endpoint, Protection, ServerConfig, Side,
    TransportConfig,
};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted; none if it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn replay_corpus_and_regressions() {
    let root = fuzz_dir();
    let mut replayed = 0;
    for (name, target) in TARGETS {
        let corpus = files(&root.join("corpus").join(name));
        assert!(!corpus.is_empty(), "no seed corpus for fuzz target {name}");
        for path in corpus
            .into_iter()
            .chain(files(&root.join("regressions").join(name)))
        {
            let data = std::fs::read(&path).expect("read a corpus file");
            eprintln!("{name}: {}", path.display());
            target(&data);
            replayed += 1;
        }
    }
    // Every directory names a target: an input filed under a misspelt name would never run.
    for kind in ["corpus", "regressions"] {
        for dir in std::fs::read_dir(root.join(kind)).into_iter().flatten() {
            let dir = dir.expect("directory entry").file_name();
            let dir = dir.to_string_lossy();
            assert!(
                TARGETS.iter().any(|(n, _)| *n == dir),
                "fuzz/{kind}/{dir} is no fuzz target"
            );
        }
    }
    eprintln!("replayed {replayed} inputs");
}

/// One script record for the endpoint targets (`recoup_transport::fuzzing`'s `records`).
fn record(op: u8, body: &[u8]) -> Vec<u8> {
    let len = u16::try_from(body.len()).expect("record fits");
    let mut v = vec![op];
    v.extend_from_slice(&len.to_be_bytes());
    v.extend_from_slice(body);
    v
}

fn script(flags: u8, records: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![flags];
    for r in records {
        v.extend_from_slice(r);
    }
    v
}

fn encode(frames: &[Frame<'_>]) -> Vec<u8> {
    let mut buf = Vec::new();
    for f in frames {
        f.encode(&mut buf);
    }
    buf
}

/// A real handshake's datagrams: (to the server?, bytes), in order, and the local CID length.
fn handshake_datagrams() -> (Vec<(bool, Vec<u8>)>, usize) {
    let (client_tls, server_tls) =
        simulation_tls(5, "localhost", &[b"hq-interop"], Protection::Aead).expect("tls");
    let transport = TransportConfig {
        seed: 5,
        ..TransportConfig::default()
    };
    let cid_len = transport.local_cid_len;
    let mut server = Endpoint::new(
        Some(ServerConfig {
            transport: transport.clone(),
            tls: server_tls,
        }),
        cid_len,
    );
    let mut client = Endpoint::new(None, cid_len);
    let server_addr: SocketAddr = "10.0.0.2:4433".parse().expect("addr");
    let client_addr: SocketAddr = CLIENT.parse().expect("addr");
    let config = ClientConfig {
        transport,
        tls: client_tls,
        server_name: "localhost".into(),
    };
    let h = client
        .connect(Instant::ZERO, &config, server_addr)
        .expect("connect");
    let mut now = Instant::ZERO;
    let mut seen = Vec::new();
    for _ in 0..20 {
        while let Some(t) = client.poll_transmit(now) {
            server.handle_datagram(now, client_addr, &t.contents);
            seen.push((true, t.contents));
        }
        while let Some(t) = server.poll_transmit(now) {
            client.handle_datagram(now, server_addr, &t.contents);
            seen.push((false, t.contents));
        }
        now += Duration::from_millis(10);
        client.handle_timeout(now);
        server.handle_timeout(now);
    }
    let established = client.connection(h).expect("client").is_established();
    assert!(established, "corpus handshake completes");
    (seen, cid_len)
}

/// The decrypted payload of a client's first Initial (its ClientHello in CRYPTO frames), and
/// the packet's CIDs.
fn open_client_initial(datagram: &[u8]) -> (ConnectionId, ConnectionId, Vec<u8>) {
    let p = PartialDecode::parse(datagram, 0).expect("client Initial");
    let keys = initial_keys(&p.dcid, Side::Server);
    let mut packet = p.packet.to_vec();
    let pn_offset = p.pn_offset.expect("Initial has a packet number");
    let (pn_len, pn) = keys
        .remote
        .unprotect_header(&mut packet, pn_offset)
        .expect("header protection");
    let payload = keys
        .remote
        .open(pn, &mut packet, pn_offset + pn_len)
        .expect("client Initial opens");
    (p.dcid, p.scid, payload.to_vec())
}

fn cids_record(dcid: &ConnectionId, scid: &ConnectionId, frames: &[u8]) -> Vec<u8> {
    let mut body = vec![dcid.len() as u8];
    body.extend_from_slice(dcid);
    body.push(scid.len() as u8);
    body.extend_from_slice(scid);
    body.extend_from_slice(frames);
    record(2, &body)
}

#[test]
#[ignore = "writes fuzz/corpus; run by hand after changing a target's input format"]
fn write_seed_corpus() {
    let mut out: Vec<(&str, &str, Vec<u8>)> = Vec::new();
    let (datagrams, cid_len) = handshake_datagrams();
    let prefix = |d: &[u8]| [&[cid_len as u8][..], d].concat();
    let first_initial = datagrams[0].1.clone();
    let server_flight = datagrams.iter().find(|(up, _)| !up).expect("server flight");
    let short = datagrams
        .iter()
        .find(|(up, d)| *up && d[0] & 0x80 == 0)
        .expect("a 1-RTT datagram");
    out.push(("packet_header", "client_initial", prefix(&first_initial)));
    out.push((
        "packet_header",
        "server_coalesced",
        prefix(&server_flight.1),
    ));
    out.push(("packet_header", "short_header", prefix(&short.1)));
    let cid = |b: &[u8]| ConnectionId::new(b).expect("cid");
    let mut vn = Vec::new();
    write_version_negotiation(&mut vn, &[1; 8], &[2; 8], &[1, 0x6b33_43cf], 0x15);
    out.push(("packet_header", "version_negotiation", prefix(&vn)));
    let mut retry = Vec::new();
    write_retry(
        &mut retry,
        &cid(&[1; 8]),
        &cid(&[3; 8]),
        b"token",
        &cid(&[2; 8]),
    );
    out.push(("packet_header", "retry", prefix(&retry)));

    let mut ranges = RangeSet::new(64);
    for r in [0..3, 5..9, 20..21, 40..100] {
        ranges.insert(r);
    }
    let mut ack = Vec::new();
    encode_ack(&mut ack, &ranges, 25, None, 64);
    out.push(("frames", "ack_ranges", ack.clone()));
    let mut ack_ecn = Vec::new();
    let ecn = EcnCounts {
        ect0: 10,
        ect1: 1,
        ce: 2,
    };
    encode_ack(&mut ack_ecn, &ranges, 3, Some(&ecn), 2);
    out.push(("frames", "ack_ecn", ack_ecn.clone()));
    let stream = StreamFrame {
        stream_id: 4,
        offset: 1000,
        data: b"hello",
        fin: true,
    };
    let mut last_stream = Vec::new();
    stream.encode(&mut last_stream, false);
    out.push(("frames", "stream_without_length", last_stream));
    let reset_token = [0xaa; 16];
    let symbol = [0x5a; 64];
    let repair = RepairFrame {
        first_pn: 3,
        span: 10,
        window: 0b10_0000_1011,
        repairs: 2,
        index: 1,
        symbol: &symbol,
    };
    let every = [
        Frame::Padding { len: 3 },
        Frame::Ping,
        Frame::ResetStream {
            stream_id: 2,
            error_code: 7,
            final_size: 100,
        },
        Frame::StopSending {
            stream_id: 3,
            error_code: 8,
        },
        Frame::Crypto {
            offset: 0,
            data: b"client hello",
        },
        Frame::NewToken { token: b"tok" },
        Frame::Stream(stream),
        Frame::MaxData(1 << 20),
        Frame::MaxStreamData {
            stream_id: 4,
            max: 1 << 16,
        },
        Frame::MaxStreams {
            dir: StreamDir::Bidi,
            max: 100,
        },
        Frame::MaxStreams {
            dir: StreamDir::Uni,
            max: 3,
        },
        Frame::DataBlocked(5),
        Frame::StreamDataBlocked {
            stream_id: 4,
            limit: 9,
        },
        Frame::StreamsBlocked {
            dir: StreamDir::Uni,
            limit: 4,
        },
        Frame::NewConnectionId {
            seq: 1,
            retire_prior_to: 0,
            cid: cid(&[7; 8]),
            reset_token,
        },
        Frame::RetireConnectionId { seq: 0 },
        Frame::PathChallenge([1; 8]),
        Frame::PathResponse([2; 8]),
        Frame::ConnectionClose(ConnectionClose {
            error_code: 0x0a,
            frame_type: Some(0x08),
            reason: b"bad",
        }),
        Frame::ConnectionClose(ConnectionClose {
            error_code: 3,
            frame_type: None,
            reason: b"",
        }),
        Frame::HandshakeDone,
        Frame::Repair(repair),
        Frame::Datagram(DatagramFrame {
            data: b"datagram",
            with_len: true,
        }),
    ];
    let mut all = ack;
    all.extend(encode(&every));
    out.push(("frames", "every_type", all));

    let mut body = encode(&[Frame::Repair(repair)]);
    body.drain(..4); // The target prefixes the type itself.
    out.push((
        "repair_frame",
        "valid",
        [&30u16.to_be_bytes()[..], &body].concat(),
    ));

    let client_params = TransportParameters {
        initial_source_connection_id: Some(cid(&[1; 8])),
        initial_max_data: 1 << 20,
        initial_max_streams_bidi: 100,
        recoup_fec: true,
        ..TransportParameters::default()
    };
    let mut tp = Vec::new();
    client_params.encode(&mut tp);
    out.push(("transport_params", "client", tp));
    let server_params = TransportParameters {
        original_destination_connection_id: Some(cid(&[2; 8])),
        retry_source_connection_id: Some(cid(&[3; 8])),
        stateless_reset_token: Some(reset_token),
        preferred_address: Some(recoup_transport::transport_params::PreferredAddress {
            ipv4: Some("192.0.2.1:443".parse().expect("v4")),
            ipv6: None,
            connection_id: cid(&[4; 8]),
            stateless_reset_token: [0xbb; 16],
        }),
        disable_active_migration: true,
        max_idle_timeout: 30_000,
        ..client_params
    };
    let mut tp = Vec::new();
    server_params.encode(&mut tp);
    out.push(("transport_params", "server", tp));

    let (dcid, scid, hello) = open_client_initial(&first_initial);
    out.push((
        "server_datagram",
        "client_initial",
        script(0, &[record(0, &first_initial), record(3, &[20])]),
    ));
    out.push((
        "server_datagram",
        "client_initial_retry",
        script(1, &[record(0, &first_initial)]),
    ));
    out.push((
        "server_datagram",
        "sealed_client_hello",
        script(4, &[cids_record(&dcid, &scid, &hello), record(3, &[5])]),
    ));
    out.push((
        "server_datagram",
        "sealed_ping",
        script(0, &[cids_record(&dcid, &scid, &encode(&[Frame::Ping]))]),
    ));
    out.push((
        "server_datagram",
        "unknown_short_header",
        script(2, &[record(1, &short.1)]),
    ));
    // A datagram of another version: Version Negotiation.
    let mut other_version = first_initial.clone();
    other_version[1..5].copy_from_slice(&0x1a2a_3a4a_u32.to_be_bytes());
    out.push((
        "server_datagram",
        "other_version",
        script(0, &[record(0, &other_version)]),
    ));

    let stream_up = encode(&[Frame::Stream(StreamFrame {
        stream_id: 0,
        offset: 0,
        data: b"GET /\r\n",
        fin: true,
    })]);
    out.push((
        "established",
        "stream",
        script(0, &[record(0, &stream_up), record(3, &[10])]),
    ));
    let mut acks = RangeSet::new(8);
    acks.insert(0..3);
    let mut from_server = Vec::new();
    encode_ack(&mut from_server, &acks, 0, None, 8);
    from_server.extend(encode(&[
        Frame::NewConnectionId {
            seq: 8,
            retire_prior_to: 2,
            cid: cid(&[9; 8]),
            reset_token,
        },
        Frame::PathChallenge([3; 8]),
        Frame::MaxStreams {
            dir: StreamDir::Bidi,
            max: 1000,
        },
    ]));
    let from_client = encode(&[
        Frame::RetireConnectionId { seq: 1 },
        Frame::StreamDataBlocked {
            stream_id: 0,
            limit: 0,
        },
        Frame::ResetStream {
            stream_id: 4,
            error_code: 1,
            final_size: 10,
        },
    ]);
    out.push((
        "established",
        "control_frames",
        script(
            0,
            &[
                record(1, &from_server),
                record(0, &from_client),
                record(3, &[1]),
            ],
        ),
    ));
    // FEC: two source packets, then a repair over them (carried by a later packet).
    let source = |pn: u64| {
        encode(&[Frame::Stream(StreamFrame {
            stream_id: 0,
            offset: pn * 8,
            data: &[pn as u8; 8],
            fin: false,
        })])
    };
    let symbol = [0x11; 40];
    let repair = encode(&[Frame::Repair(RepairFrame {
        first_pn: 0,
        span: 2,
        window: 0b11,
        repairs: 1,
        index: 0,
        symbol: &symbol,
    })]);
    out.push((
        "established",
        "fec_repair",
        script(
            1,
            &[
                record(0, &source(0)),
                record(0, &source(1)),
                record(0, &repair),
                record(3, &[2]),
            ],
        ),
    ));
    // DATAGRAM (RFC 9221) both ways, one with a Length field and one running to the end.
    let datagram = |with_len| {
        encode(&[Frame::Datagram(DatagramFrame {
            data: b"unreliable",
            with_len,
        })])
    };
    out.push((
        "established",
        "datagrams",
        script(
            2,
            &[
                record(0, &datagram(true)),
                record(1, &datagram(false)),
                record(3, &[1]),
            ],
        ),
    ));
    let close = encode(&[Frame::ConnectionClose(ConnectionClose {
        error_code: 0,
        frame_type: None,
        reason: b"done",
    })]);
    out.push((
        "established",
        "close",
        script(0, &[record(1, &close), record(3, &[50])]),
    ));

    let root = fuzz_dir().join("corpus");
    for (target, name, bytes) in out {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        std::fs::write(dir.join(name), &bytes).expect("corpus file");
        eprintln!("{target}/{name}: {} bytes", bytes.len());
    }
}

/// The endpoint targets are only worth their time if what they seal gets past packet
/// protection: a STREAM frame the harness seals reaches the server's stream layer, and a
/// ClientHello sealed into an Initial with the fuzzer's CIDs starts a connection.
#[test]
fn harness_packets_reach_the_connection() {
    let mut e = Established::new(false, false);
    let now = e.now;
    let payload = encode(&[Frame::Stream(StreamFrame {
        stream_id: 0,
        offset: 0,
        data: b"ping",
        fin: true,
    })]);
    let datagram = e
        .client
        .connection_mut(e.client_h)
        .and_then(|c| c.seal_raw_1rtt_for_test(now, &payload, 0))
        .expect("1-RTT keys after the handshake");
    let client: SocketAddr = CLIENT.parse().expect("addr");
    e.server.handle_datagram(now, client, &datagram);
    let server = e.server.connection_mut(e.server_h).expect("server");
    assert!(
        server.accept_stream(true).is_some(),
        "sealed STREAM frame arrives"
    );

    let (datagrams, _) = handshake_datagrams();
    let (dcid, scid, hello) = open_client_initial(&datagrams[0].1);
    let tls = simulation_tls(6, "localhost", &[b"hq-interop"], Protection::Aead).expect("tls");
    let transport = TransportConfig::default();
    let cid_len = transport.local_cid_len;
    let mut endpoint = Endpoint::new(
        Some(ServerConfig {
            transport,
            tls: tls.1,
        }),
        cid_len,
    );
    let sealed = sealed_initial(&dcid, &scid, 0, &hello);
    assert!(endpoint
        .handle_datagram(Instant::ZERO, client, &sealed)
        .is_some());
    assert!(
        endpoint.accept().is_some(),
        "sealed ClientHello starts a connection"
    );
}
