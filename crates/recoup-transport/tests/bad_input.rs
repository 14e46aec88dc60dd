//! Bad input through the connection state machine: over a million mutated and random datagrams
//! into endpoints before and after the handshake, plus protected packets with mutated frames.
//! Nothing may panic, memory stays bounded, and garbage that does not authenticate never hurts
//! an established connection.
//!
//! The only test in this binary, so the resident-memory check sees no other test's allocations.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{data, seed, tls_configs, Dir, NetConfig, Pair, SeedGuard, CLIENT, SERVER};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;
use recoup_transport::frame::{Frame, StreamDir, StreamFrame};
use recoup_transport::{Endpoint, TransportConfig};

type Tls = (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>);

/// Applies one to three random mutations to a copy of a corpus entry.
fn mutate(rng: &mut ChaCha8Rng, corpus: &[Vec<u8>], out: &mut Vec<u8>) {
    let a = &corpus[rng.gen_range(0..corpus.len())];
    out.clear();
    out.extend_from_slice(a);
    for _ in 0..rng.gen_range(1..=3) {
        match rng.gen_range(0..7) {
            0 if !out.is_empty() => {
                for _ in 0..rng.gen_range(1..=4) {
                    let i = rng.gen_range(0..out.len());
                    out[i] ^= 1 << rng.gen_range(0..8);
                }
            }
            1 => {
                let len = rng.gen_range(0..=out.len());
                out.truncate(len);
            }
            2 => {
                // Splice: our prefix, another datagram's suffix.
                let b = &corpus[rng.gen_range(0..corpus.len())];
                out.truncate(rng.gen_range(0..=out.len()));
                let from = rng.gen_range(0..=b.len());
                out.extend_from_slice(&b[from..]);
            }
            3 if !out.is_empty() => {
                let i = rng.gen_range(0..out.len());
                out[i] = [0x00, 0xff, 0x7f, 0x80, 0x40, 0x3f, 0xc0][rng.gen_range(0..7)];
            }
            4 => {
                let at = rng.gen_range(0..=out.len());
                let n = rng.gen_range(1..64);
                let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                out.splice(at..at, bytes);
            }
            5 if !out.is_empty() => {
                let at = rng.gen_range(0..out.len());
                let end = (at + rng.gen_range(1..64)).min(out.len());
                out.drain(at..end);
            }
            // The header: first byte, version, connection ID lengths.
            _ if !out.is_empty() => {
                let i = rng.gen_range(0..out.len().min(24));
                out[i] ^= 1 << rng.gen_range(0..8);
            }
            _ => {}
        }
    }
}

/// Random bytes; half the time shaped like a short header to `dcid`, so they reach the
/// connection rather than stopping at the endpoint's routing.
fn random_datagram(rng: &mut ChaCha8Rng, dcid: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let len = rng.gen_range(0..1500);
    out.extend((0..len).map(|_| rng.gen::<u8>()));
    if rng.gen_bool(0.5) && out.len() > dcid.len() + 1 {
        out[0] = 0x40 | (out[0] & 0x3f);
        out[1..=dcid.len()].copy_from_slice(dcid);
    } else if rng.gen_bool(0.3) && out.len() > 6 {
        // A long header of version 1.
        out[0] |= 0xc0;
        out[1..5].copy_from_slice(&1u32.to_be_bytes());
    }
}

/// Valid frames an established peer may well send; mutated and combined into payloads.
fn frame_corpus() -> Vec<Vec<u8>> {
    let mut frames = vec![
        Frame::Ping,
        Frame::Padding { len: 1 },
        Frame::MaxData(1 << 40),
        Frame::MaxStreamData {
            stream_id: 0,
            max: 1 << 30,
        },
        Frame::MaxStreams {
            dir: StreamDir::Bidi,
            max: 200,
        },
        Frame::DataBlocked(1000),
        Frame::StreamDataBlocked {
            stream_id: 0,
            limit: 1000,
        },
        Frame::StreamsBlocked {
            dir: StreamDir::Uni,
            limit: 10,
        },
        Frame::PathChallenge([1; 8]),
        Frame::PathResponse([2; 8]),
        Frame::RetireConnectionId { seq: 1 },
        Frame::ResetStream {
            stream_id: 4,
            error_code: 7,
            final_size: 10,
        },
        Frame::StopSending {
            stream_id: 0,
            error_code: 3,
        },
        Frame::Crypto {
            offset: 0,
            data: &[0; 16],
        },
    ]
    .into_iter()
    .map(|f| {
        let mut buf = Vec::new();
        f.encode(&mut buf);
        buf
    })
    .collect::<Vec<_>>();
    for (id, offset, fin) in [(0, 0, false), (0, 100, true), (4, 0, false), (2, 5, false)] {
        let mut buf = Vec::new();
        StreamFrame {
            stream_id: id,
            offset,
            data: &[0xab; 100],
            fin,
        }
        .encode(&mut buf, true);
        frames.push(buf);
    }
    // ACK of the first packets (sent by every side).
    frames.push(vec![0x02, 0x02, 0x00, 0x00, 0x02]);
    frames
}

fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn established_pair(s: u64, tls: &Tls) -> Pair {
    let mut p = Pair::with_tls(
        s,
        NetConfig::default(),
        TransportConfig::default(),
        TransportConfig::default(),
        tls.clone(),
    );
    p.handshake();
    p
}

/// An established pair that moved some data both ways, with every datagram captured.
fn captured_pair(s: u64, tls: &Tls) -> Pair {
    let mut p = Pair::with_tls(
        s,
        NetConfig::default(),
        TransportConfig::default(),
        TransportConfig::default(),
        tls.clone(),
    );
    p.capture = Some(Vec::new());
    p.handshake();
    let id = p.client_conn().open_stream(true).expect("open");
    let payload = data(64 * 1024, s);
    let mut written = 0;
    let mut echoed = 0;
    let mut buf = vec![0u8; 65536];
    let mut sid = None;
    let ok = p.run_until(Duration::from_secs(10), |p| {
        if written < payload.len() {
            written += p
                .client_conn()
                .stream_write(id, &payload[written..])
                .unwrap_or(0);
        }
        let _ = p.client_conn().stream_read(id, &mut buf);
        let Some(srv) = p.server_conn() else {
            return false;
        };
        sid = sid.or_else(|| srv.accept_stream(true));
        if let Some(sid) = sid {
            if let Ok((n, _)) = srv.stream_read(sid, &mut buf) {
                echoed += srv.stream_write(sid, &buf[..n]).unwrap_or(0);
            }
        }
        echoed == payload.len()
    });
    assert!(ok, "setup transfer");
    p
}

/// Feeds `count` inputs to `endpoint` (mutated `corpus` entries and random bytes) and drains
/// its output after each.
fn pound(
    rng: &mut ChaCha8Rng,
    endpoint: &mut Endpoint,
    now: Instant,
    from: SocketAddr,
    corpus: &[Vec<u8>],
    dcid: &[u8],
    count: u64,
) {
    let mut buf = Vec::with_capacity(2048);
    for _ in 0..count {
        if rng.gen_bool(0.85) {
            mutate(rng, corpus, &mut buf);
        } else {
            random_datagram(rng, dcid, &mut buf);
        }
        let _ = endpoint.handle_datagram(now, from, &buf);
        while endpoint.poll_transmit(now).is_some() {}
    }
}

#[test]
fn a_million_bad_datagrams_through_the_state_machine() {
    let s = seed(31);
    let _g = SeedGuard(s);
    #[expect(
        clippy::disallowed_methods,
        reason = "the test reports its own wall time against the CI budget"
    )]
    let started = std::time::Instant::now();
    let tls = tls_configs();
    let mut rng = ChaCha8Rng::seed_from_u64(s);
    let client_addr: SocketAddr = CLIENT.parse().expect("addr");
    let server_addr: SocketAddr = SERVER.parse().expect("addr");
    let mut total = 0u64;

    // Established connections, fed mutations of their own traffic.
    let mut p = captured_pair(s, &tls);
    let captured = p.capture.take().expect("captured");
    let to_server: Vec<Vec<u8>> = captured
        .iter()
        .filter(|(d, _)| *d == Dir::ToServer)
        .map(|(_, b)| b.clone())
        .collect();
    let to_client: Vec<Vec<u8>> = captured
        .iter()
        .filter(|(d, _)| *d == Dir::ToClient)
        .map(|(_, b)| b.clone())
        .collect();
    assert!(to_server.len() > 20 && to_client.len() > 20);
    let server_cid: Vec<u8> = to_server.last().expect("one")[1..9].to_vec();
    let client_cid: Vec<u8> = to_client.last().expect("one")[1..9].to_vec();
    let rss_before = resident_kib();
    let now = p.now;
    for _ in 0..5 {
        pound(
            &mut rng,
            &mut p.server,
            now,
            client_addr,
            &to_server,
            &server_cid,
            100_000,
        );
        pound(
            &mut rng,
            &mut p.client,
            now,
            server_addr,
            &to_client,
            &client_cid,
            60_000,
        );
        total += 160_000;
    }
    // Nothing that failed to authenticate closed either end, and they still work.
    assert!(!p.client_conn().is_closing(), "client survived");
    assert!(
        !p.server_conn().expect("server").is_closing(),
        "server survived"
    );
    assert_eq!(p.server.handles().count(), 1, "no connection was created");
    let dropped = p.server_conn().expect("server").stats().packets_dropped;
    assert!(
        dropped > 100_000,
        "packets reached the connection: {dropped}"
    );
    let id = p.client_conn().open_stream(false).expect("open");
    let payload = data(100_000, 5);
    let mut written = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let deadline = p.now + Duration::from_secs(10);
    let ok = p.run_until(deadline - Instant::ZERO, |p| {
        written += p
            .client_conn()
            .stream_write(id, &payload[written..])
            .unwrap_or(0);
        if written == payload.len() {
            let _ = p.client_conn().stream_finish(id);
        }
        let srv = p.server_conn().expect("server");
        while let Some(sid) = srv.accept_stream(false) {
            assert_eq!(sid, id);
        }
        while let Ok((n, fin)) = srv.stream_read(id, &mut buf) {
            got.extend_from_slice(&buf[..n]);
            if fin || n == 0 {
                break;
            }
        }
        got.len() == payload.len()
    });
    assert!(ok && got == payload, "a transfer after the storm");

    eprintln!("established: {:?}", started.elapsed());
    // Before the handshake: a fresh pair with the same seed has the same Initial keys, so
    // mutated Initials of the captured run decrypt and reach TLS. Closed connections are
    // replaced.
    let mut fresh_pairs = 0;
    let mut fresh_accepted = 0;
    let mut done = 0u64;
    while done < 300_000 {
        let mut fresh = Pair::with_tls(
            s,
            NetConfig::default(),
            TransportConfig::default(),
            TransportConfig::default(),
            tls.clone(),
        );
        fresh_pairs += 1;
        let now = fresh.now;
        // Drain the client's first flight so it waits for the server.
        while fresh.client.poll_transmit(now).is_some() {}
        for _ in 0..1000 {
            pound(
                &mut rng,
                &mut fresh.server,
                now,
                client_addr,
                &to_server,
                &[],
                1,
            );
            pound(
                &mut rng,
                &mut fresh.client,
                now,
                server_addr,
                &to_client,
                &[],
                1,
            );
            done += 2;
            assert!(
                fresh.server.handles().count() <= 16,
                "bogus Initials create connections: {}",
                fresh.server.handles().count()
            );
            if fresh.client_conn().is_closing() {
                break;
            }
        }
        fresh_accepted += fresh.client_conn().stats().packets_received;
        fresh_accepted += fresh.server.handles().count() as u64;
    }
    // Some Initials authenticated: the inputs got past packet protection into TLS.
    assert!(fresh_accepted > 0, "no mutated Initial was accepted");
    total += done;
    eprintln!("before the handshake: {:?}", started.elapsed());

    // Protected packets with mutated frames into established connections: the frame parser
    // and every frame handler. Violations close the connection; a new pair replaces it.
    let corpus = frame_corpus();
    let mut pairs = 1;
    let mut closes = 0;
    let mut p = established_pair(s + 1, &tls);
    let mut payload = Vec::new();
    let mut frame = Vec::new();
    let mut sealed = 0u64;
    while sealed < 20_000 {
        payload.clear();
        for _ in 0..rng.gen_range(1..=4) {
            if rng.gen_bool(0.5) {
                mutate(&mut rng, &corpus, &mut frame);
            } else {
                frame.clear();
                frame.extend_from_slice(&corpus[rng.gen_range(0..corpus.len())]);
            }
            payload.extend_from_slice(&frame);
        }
        let now = p.now;
        let to_server = rng.gen_bool(0.5);
        let sender = if to_server {
            p.client_conn()
        } else {
            p.server_conn().expect("server")
        };
        let Some(datagram) = sender.seal_raw_1rtt_for_test(now, &payload, 0) else {
            break;
        };
        if to_server {
            let _ = p.server.handle_datagram(now, client_addr, &datagram);
        } else {
            let _ = p.client.handle_datagram(now, server_addr, &datagram);
        }
        sealed += 1;
        while p.server.poll_transmit(now).is_some() {}
        while p.client.poll_transmit(now).is_some() {}
        if p.client_conn().is_closing() || p.server_conn().is_none_or(|c| c.is_closing()) {
            closes += 1;
            pairs += 1;
            p = established_pair(s + pairs, &tls);
        }
    }
    total += sealed;
    eprintln!("protected frames: {:?}", started.elapsed());
    let rss_after = resident_kib();
    let elapsed = started.elapsed();
    eprintln!(
        "{total} bad inputs ({sealed} protected frame payloads, {closes} closes, {fresh_pairs} \
         fresh pairs, {fresh_accepted} accepted) in {elapsed:?}; resident {rss_before:?} -> {rss_after:?} KiB"
    );
    assert!(total >= 1_000_000, "{total}");
    assert!(closes > 1000, "mutated frames are found out: {closes}");
    if let (Some(a), Some(b)) = (rss_before, rss_after) {
        assert!(
            b < a + 64 * 1024,
            "resident memory grew from {a} to {b} KiB"
        );
    }
}
