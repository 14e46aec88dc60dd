//! RACK-TLP loss detection (RFC 8985) end to end: a transfer over a lossy path completes intact.

mod common;

use std::time::Duration;

use common::{data, seed, NetConfig, Pair, SeedGuard};
use recoup_transport::loss::LossDetectionMode;
use recoup_transport::TransportConfig;

/// Client writes `payload` on one unidirectional stream and finishes it; returns what the server
/// read before `deadline` (virtual time).
fn send_one_stream(p: &mut Pair, payload: &[u8], deadline: Duration) -> Vec<u8> {
    p.handshake();
    let id = p.client_conn().open_stream(false).expect("open a stream");
    let mut offset = 0;
    let mut fin_sent = false;
    let mut got = Vec::with_capacity(payload.len());
    let mut stream = None;
    let mut buf = vec![0u8; 32 * 1024];
    let mut fin_read = false;
    p.run_until(deadline, |p| {
        let c = p.client_conn();
        while let Some(rest) = payload.get(offset..).filter(|r| !r.is_empty()) {
            match c.stream_write(id, rest) {
                Ok(n) if n > 0 => offset += n,
                _ => break,
            }
        }
        if offset == payload.len() && !fin_sent {
            fin_sent = c.stream_finish(id).is_ok();
        }
        if let Some(s) = p.server_conn() {
            stream = stream.or_else(|| s.accept_stream(false));
            if let Some(sid) = stream {
                while let Ok((n, fin)) = s.stream_read(sid, &mut buf) {
                    got.extend_from_slice(&buf[..n]);
                    fin_read |= fin;
                    if fin || n == 0 {
                        break;
                    }
                }
            }
        }
        fin_read
    });
    got
}

#[test]
fn one_megabyte_under_five_percent_loss_with_rack_tlp() {
    let s = seed(8985);
    let _g = SeedGuard(s);
    let net = NetConfig {
        loss: 0.05,
        reorder: 0.02,
        ..NetConfig::default()
    };
    let transport = TransportConfig {
        loss_detection: LossDetectionMode::RackTlp,
        ..TransportConfig::default()
    };
    let mut p = Pair::new(s, net, transport);
    let payload = data(1024 * 1024, s);
    let got = send_one_stream(&mut p, &payload, Duration::from_secs(120));
    let now = p.now;
    let stats = p.client_conn().stats();
    assert_eq!(
        got.len(),
        payload.len(),
        "incomplete at {now:?}; client {stats:?}"
    );
    assert!(got == payload, "received bytes differ from sent bytes");
    // Losses happened and were repaired.
    assert!(p.trace.iter().any(|&(.., dropped)| dropped));
    assert!(stats.packets_lost > 0, "{stats:?}");
}
