//! A frame held back only by the pacer (RFC 9002 §7.7) gets a wake-up for when the pacer lets
//! it go. Without one, a connection that nothing else wakes holds it until the peer's next
//! datagram: the endpoint asks a connection for datagrams only when something touched it.

mod common;

use std::time::Duration;

use common::{seed, NetConfig, Pair, SeedGuard};
use recoup_transport::TransportConfig;

#[test]
fn a_control_frame_held_by_the_pacer_has_a_wakeup() {
    let s = seed(21);
    let _g = SeedGuard(s);
    // 1.2 MB/s: a packet's pacing interval is about 1 ms, far below any PTO or ACK delay. A
    // burst of one packet: one packet of data empties the pacer.
    let transport = TransportConfig {
        max_pacing_rate: Some(1_200_000),
        pacing_burst: 1,
        seed: s,
        ..TransportConfig::default()
    };
    let mut p = Pair::new(s, NetConfig::default(), transport);
    p.handshake();
    // Quiet, with a full pacer.
    let settle = p.now - recoup_time::Instant::ZERO + Duration::from_millis(500);
    p.run_until(settle, |_| false);
    let now = p.now;
    let conn = p.server_conn().expect("server connection");
    let spare = conn.open_stream(false).expect("stream");
    let bulk = conn.open_stream(false).expect("stream");
    // One packet of data, and no more.
    let written = conn.stream_write(bulk, &[7; 500]).expect("write");
    assert_eq!(written, 500, "seed {s}");
    conn.stream_finish(bulk).expect("finish");
    let mut sent = 0;
    while p.server.poll_transmit(now).is_some() {
        sent += 1;
    }
    assert!(sent > 0, "seed {s}: nothing sent");
    // A control frame now: the pacer has no room for it.
    let conn = p.server_conn().expect("server connection");
    conn.stream_reset(now, spare, 1).expect("reset");
    assert!(
        p.server.poll_transmit(now).is_none(),
        "seed {s}: the pacer let the RESET_STREAM go at once; the test needs it held"
    );
    let at = p.server.poll_timeout().expect("no timer at all");
    assert!(
        at - now <= Duration::from_millis(5),
        "seed {s}: the next wake-up is {:?} away, not the pacer's",
        at - now
    );
    p.server.handle_timeout(at);
    assert!(
        p.server.poll_transmit(at).is_some(),
        "seed {s}: nothing sent at the pacer's wake-up"
    );
}
