//! recoup's FEC extension end to end (docs/FEC.md): negotiation both ways, restoring lost
//! packets from repair symbols, and malformed REPAIR frames closing the connection with the
//! RFC 9000 error code.

mod common;
#[path = "common/fec_call.rs"]
mod fec_call;

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{data, drain, pump, seed, NetConfig, Pair, SeedGuard, SERVER};
use rand::seq::index;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use recoup_recovery::FecSpec;
use recoup_time::Instant;
use recoup_transport::fec::{decode, CodedRepair};
use recoup_transport::frame::{Frame, RepairFrame};
use recoup_transport::{CloseReason, Error, Event, TransportConfig, TransportErrorCode};

fn with_fec(spec: &str) -> TransportConfig {
    TransportConfig {
        fec: Some(spec.parse::<FecSpec>().expect("scheme")),
        ..TransportConfig::default()
    }
}

/// The server sends `payload` on one stream it opens; the client reads it. Returns the bytes
/// the client read.
fn download(p: &mut Pair, payload: &[u8], deadline: Duration) -> Vec<u8> {
    p.handshake();
    let id = p
        .server_conn()
        .expect("server")
        .open_stream(false)
        .expect("open");
    let (mut written, mut finished, mut done) = (0, false, false);
    let mut received = Vec::with_capacity(payload.len());
    let mut client_stream = None;
    let ok = p.run_until(deadline, |p| {
        if done {
            return true;
        }
        pump(
            p.server_conn().expect("server"),
            id,
            payload,
            &mut written,
            &mut finished,
        );
        let c = p.client_conn();
        if client_stream.is_none() {
            client_stream = c.accept_stream(false);
        }
        if let Some(sid) = client_stream {
            done = drain(c, sid, &mut received);
        }
        done
    });
    assert!(
        ok,
        "download incomplete at {:?}: {} of {} bytes",
        p.now,
        received.len(),
        payload.len()
    );
    received
}

/// recoup's client: announces that it decodes repair symbols.
fn decoding() -> TransportConfig {
    TransportConfig {
        fec_receive: true,
        ..TransportConfig::default()
    }
}

fn lossy(loss: f64) -> NetConfig {
    NetConfig {
        loss,
        ..NetConfig::default()
    }
}

#[test]
fn recoup_endpoints_negotiate_fec_and_restore_lost_packets() {
    for spec in ["block:k=4,m=1", "block:k=8,m=3"] {
        let s = seed(31);
        let _g = SeedGuard(s);
        let mut p = Pair::with_configs(s, lossy(0.05), decoding(), with_fec(spec));
        let payload = data(2 * 1024 * 1024, s);
        let got = download(&mut p, &payload, Duration::from_secs(60));
        assert!(
            got == payload,
            "{spec}: received bytes differ from sent bytes"
        );
        let server = p.server_conn().expect("server");
        assert!(
            server.fec_active(),
            "{spec}: the client announced recoup_fec"
        );
        let ss = server.stats();
        let cs = p.client_conn().stats();
        eprintln!("{spec}: server {ss:?}\nclient {cs:?}");
        assert!(ss.repair_packets_sent > 0, "{spec}: {ss:?}");
        assert!(cs.repair_frames_received > 0, "{spec}: {cs:?}");
        assert!(cs.fec_recovered_packets > 0, "{spec}: {cs:?}");
        assert!(cs.fec_recovered_bytes > 0, "{spec}: {cs:?}");
        // The client has no scheme: it decodes but never sends repairs.
        assert!(!p.client_conn().fec_active());
        assert_eq!(cs.repair_packets_sent, 0);
    }
}

#[test]
fn no_repair_frame_toward_a_peer_that_did_not_negotiate() {
    let s = seed(32);
    let _g = SeedGuard(s);
    let client = TransportConfig {
        fec_receive: false,
        ..TransportConfig::default()
    };
    let mut p = Pair::with_configs(s, lossy(0.05), client, with_fec("block:k=4,m=1"));
    let payload = data(512 * 1024, s);
    let (got, logged) = warnings(|| download(&mut p, &payload, Duration::from_secs(60)));
    assert!(got == payload, "received bytes differ from sent bytes");
    // The server says once, naming the scheme, that it falls back to ARQ.
    let warned: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("did not negotiate FEC"))
        .collect();
    assert_eq!(warned.len(), 1, "{logged}");
    assert!(
        warned[0].contains("WARN") && warned[0].contains("block:k=4,m=1"),
        "{logged}"
    );
    let server = p.server_conn().expect("server");
    assert!(
        !server.fec_active(),
        "the client did not announce recoup_fec"
    );
    let ss = server.stats();
    assert_eq!(
        (ss.repair_packets_sent, ss.repair_bytes_sent),
        (0, 0),
        "{ss:?}"
    );
    let cs = p.client_conn().stats();
    assert_eq!(cs.repair_frames_received, 0);
    assert!(
        cs.packets_lost + ss.packets_lost > 0,
        "the loss was plain ARQ's to recover"
    );
}

/// A log sink shared with the subscriber.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with this thread's log events of level WARN and above captured; returns its result
/// and the log text.
fn warnings<T>(f: impl FnOnce() -> T) -> (T, String) {
    let log = Log::default();
    let sink = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8_lossy(
        &log.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_owned();
    (out, text)
}

fn closes(p: &mut Pair, client: bool) -> Vec<CloseReason> {
    let c = if client {
        p.client_conn()
    } else {
        p.server_conn().expect("server")
    };
    std::iter::from_fn(|| c.poll_event())
        .filter_map(|e| match e {
            Event::Closed(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// Establishes a pair (the client decodes unless `client_decodes` is false), lets the server
/// send `stream_bytes` on a stream, injects a packet from the server holding `repair(carrier)`
/// (`carrier`: the injected packet's number), and checks the client closes with `code`.
fn bad_repair(
    name: &str,
    client_decodes: bool,
    stream_bytes: usize,
    repair: impl Fn(u64, &mut Vec<u8>),
    code: TransportErrorCode,
) {
    let s = seed(33);
    let _g = SeedGuard(s);
    let client = TransportConfig {
        fec_receive: client_decodes,
        ..TransportConfig::default()
    };
    let mut p = Pair::with_configs(s, NetConfig::default(), client, TransportConfig::default());
    p.handshake();
    if stream_bytes > 0 {
        let srv = p.server_conn().expect("server");
        let id = srv.open_stream(false).expect("open");
        srv.stream_write(id, &data(stream_bytes, s)).expect("write");
    }
    let settle = p.now + Duration::from_millis(300);
    p.run_until(settle - Instant::ZERO, |_| false);
    let now = p.now;
    let srv = p.server_conn().expect("server");
    let carrier = srv.next_1rtt_pn_for_test();
    let mut payload = Vec::new();
    repair(carrier, &mut payload);
    let datagram = srv
        .seal_raw_1rtt_for_test(now, &payload, 0)
        .expect("1-RTT keys");
    p.client
        .handle_datagram(now, SERVER.parse().expect("addr"), &datagram);
    let end = p.now + Duration::from_secs(5);
    let closed = p.run_until(end - Instant::ZERO, |p| p.client_conn().is_closing());
    assert!(closed, "{name}: the client closes");
    match closes(&mut p, true).as_slice() {
        [CloseReason::Local(e)] => {
            assert_eq!(e.transport_code(), Some(code), "{name}: {e:?}");
            assert_eq!(e.frame_type, Some(0x3f5e_c0de), "{name}: {e:?}");
        }
        other => panic!("{name}: client closes {other:?}"),
    }
}

fn repair_frame(first_pn: u64, span: u64, index: u16, symbol: &[u8], out: &mut Vec<u8>) {
    Frame::Repair(RepairFrame {
        first_pn,
        span,
        window: (1u128 << span) - 1,
        repairs: 1,
        index,
        symbol,
    })
    .encode(out);
}

#[test]
fn malformed_repair_frames_close_with_the_rfc_9000_code() {
    // Symbol index beyond the window's repair count: the frame itself is malformed.
    bad_repair(
        "bad symbol id",
        true,
        0,
        |_, out| {
            let mut frame = Vec::new();
            repair_frame(1, 1, 0, &[0; 4], &mut frame);
            // Type (4 bytes), first pn, span, bitmap, then the repair count and index.
            frame[8] = 1;
            frame[9] = 1;
            out.extend_from_slice(&frame);
        },
        TransportErrorCode::FRAME_ENCODING_ERROR,
    );
    // A window ending at or after the packet that carries its repair: data never sent.
    bad_repair(
        "repair for data never sent",
        true,
        0,
        |carrier, out| repair_frame(carrier, 1, 0, &[0; 4], out),
        TransportErrorCode::PROTOCOL_VIOLATION,
    );
    // A repair symbol shorter than a source symbol it covers (the server's stream packets).
    bad_repair(
        "wrong length",
        true,
        3000,
        |carrier, out| repair_frame(0, carrier.min(96), 0, &[0; 2], out),
        TransportErrorCode::PROTOCOL_VIOLATION,
    );
    // To an endpoint that did not announce recoup_fec, REPAIR is an unknown frame (§12.4).
    bad_repair(
        "not negotiated",
        false,
        0,
        |carrier, out| repair_frame(carrier - 1, 1, 0, &[0; 4], out),
        TransportErrorCode::FRAME_ENCODING_ERROR,
    );
}

/// The repair windows one scheme asked for over a call, with their source and repair symbols.
type Windows = BTreeMap<(u64, u128, u16), (Vec<Vec<u8>>, BTreeMap<u16, Vec<u8>>)>;

/// Every scheme's own windows (the shapes it picks over a call at 10 % loss, retransmission
/// rounds included) decode under every loss pattern up to their repair count (every pattern
/// where there are at most 64 with that many losses, else 24 drawn ones and the worst: the
/// sources first) and fail cleanly beyond it, through the public coding API.
#[test]
fn every_scheme_s_windows_decode_up_to_their_repairs_and_fail_cleanly_beyond() {
    let s = seed(34);
    let _g = SeedGuard(s);
    let mut rng = ChaCha8Rng::seed_from_u64(s);
    for name in [
        "block:k=4,m=1",
        "block:k=9,m=3",
        "webrtc14",
        "webrtc-now",
        "hairpin:lambda=1e-7",
        "tambur:max_ratio=0.5",
    ] {
        let spec: FecSpec = name.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut windows = Windows::new();
        let mut hook = |r: &CodedRepair, sources: &[Vec<u8>]| {
            let w = windows
                .entry((r.first_pn, r.window, r.repairs))
                .or_insert_with(|| (sources.to_vec(), BTreeMap::new()));
            w.1.insert(r.index, r.symbol.clone());
        };
        fec_call::video_call(&spec, 0.1, s, Duration::from_secs(4), Some(&mut hook));
        // One window of each (k, m) shape the scheme used.
        let mut shapes = BTreeMap::new();
        for ((first, _, m), (sources, repairs)) in &windows {
            assert_eq!(repairs.len(), usize::from(*m), "{name}: window at {first}");
            shapes
                .entry((sources.len(), repairs.len()))
                .or_insert((sources, repairs));
        }
        assert!(!shapes.is_empty(), "{name}: no repair over a lossy call");
        for ((k, m), (sources, repairs)) in shapes {
            let n = k + m;
            for lost in 0..=n {
                let mut patterns: Vec<Vec<usize>> = if binomial(n, lost) <= 64 {
                    subsets(n, lost)
                } else {
                    (0..24)
                        .map(|_| index::sample(&mut rng, n, lost).into_vec())
                        .collect()
                };
                patterns.push((0..lost).collect());
                for pattern in patterns {
                    check_pattern(name, k, m, sources, repairs, &pattern);
                }
            }
        }
    }
}

/// Decodes a window of `k` `sources` and `m` `repairs` without the symbols in `lost` (index
/// below k: a source, else repair `i - k`) and checks the outcome.
fn check_pattern(
    name: &str,
    k: usize,
    m: usize,
    sources: &[Vec<u8>],
    repairs: &BTreeMap<u16, Vec<u8>>,
    lost: &[usize],
) {
    let gone = |i: usize| lost.contains(&i);
    let len = repairs.values().next().map_or(0, Vec::len);
    let present: Vec<(usize, &[u8])> = (0..k)
        .filter(|&i| !gone(i))
        .map(|i| (i, sources[i].as_slice()))
        .collect();
    let received: Vec<(usize, &[u8])> = repairs
        .iter()
        .filter(|(j, _)| !gone(k + usize::from(**j)))
        .map(|(j, r)| (usize::from(*j), r.as_slice()))
        .collect();
    let missing = k - present.len();
    let what = format!("{name}: {k}:{m} window without {lost:?}");
    match decode(k, m, &present, &received, len) {
        Ok(restored) => {
            assert!(missing <= received.len(), "{what}: decoded from too little");
            assert_eq!(restored.len(), missing, "{what}");
            for (i, symbol) in restored {
                let source = &sources[i];
                assert_eq!(&symbol[..source.len()], &source[..], "{what}: source {i}");
                assert!(symbol[source.len()..].iter().all(|&b| b == 0), "{what}");
            }
        }
        Err(e) => {
            assert!(missing > received.len(), "{what}: {e}");
            assert_eq!(
                e,
                Error::FecNotEnough {
                    missing,
                    repairs: received.len()
                },
                "{what}"
            );
        }
    }
}

fn binomial(n: usize, k: usize) -> u128 {
    (0..k).fold(1u128, |acc, i| acc * (n - i) as u128 / (i as u128 + 1))
}

/// Every `k`-element subset of `0..n`, ascending.
fn subsets(n: usize, k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    if n < k {
        return Vec::new();
    }
    let mut with_last = subsets(n - 1, k - 1);
    for s in &mut with_last {
        s.push(n - 1);
    }
    let mut out = subsets(n - 1, k);
    out.extend(with_last);
    out
}
