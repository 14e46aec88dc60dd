//! Protocol violations close the connection with the RFC 9000 §20.1 error code: the violating
//! packet is crafted with the sender's real 1-RTT keys (the `test-hooks` feature), handed to
//! the receiver, and both ends must report the code — the receiver as a local close, the
//! sender as the peer's CONNECTION_CLOSE.

mod common;

use std::time::Duration;

use common::{seed, NetConfig, Pair, SeedGuard, CLIENT, SERVER};
use recoup_transport::frame::{Frame, StreamFrame};
use recoup_transport::{CloseReason, Connection, Event, TransportConfig, TransportErrorCode};

/// Which end sends the violating packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum From {
    Client,
    Server,
}

fn closes(conn: &mut Connection) -> Vec<CloseReason> {
    std::iter::from_fn(|| conn.poll_event())
        .filter_map(|e| match e {
            Event::Closed(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// Establishes a pair, lets `prepare` act on it, injects `payload` (with `bits` in the first
/// byte) from `from`, and checks both ends close with `code`.
fn violation(
    name: &str,
    from: From,
    payload: &[u8],
    bits: u8,
    code: TransportErrorCode,
    prepare: impl FnOnce(&mut Pair),
) {
    let s = seed(21);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), TransportConfig::default());
    p.handshake();
    // Let the handshake settle (HANDSHAKE_DONE, connection IDs) before the violation.
    let settle = p.now + Duration::from_millis(200);
    p.run_until(settle - recoup_time::Instant::ZERO, |_| false);
    prepare(&mut p);
    let now = p.now;
    let datagram = match from {
        From::Client => p.client_conn().seal_raw_1rtt_for_test(now, payload, bits),
        From::Server => p
            .server_conn()
            .expect("server")
            .seal_raw_1rtt_for_test(now, payload, bits),
    }
    .expect("1-RTT keys");
    match from {
        From::Client => {
            let addr = CLIENT.parse().expect("addr");
            let h = p.server.handle_datagram(now, addr, &datagram);
            assert_eq!(h, p.server_h, "routed to the connection");
        }
        From::Server => {
            let addr = SERVER.parse().expect("addr");
            let h = p.client.handle_datagram(now, addr, &datagram);
            assert_eq!(h, Some(p.client_h), "routed to the connection");
        }
    }
    let end = p.now + Duration::from_secs(5);
    let ok = p.run_until(end - recoup_time::Instant::ZERO, |p| {
        p.client_conn().is_closing() && p.server_conn().is_some_and(|c| c.is_closing())
    });
    let cs = p.client_conn().stats();
    let ss = p.server_conn().expect("server").stats();
    assert!(ok, "{name}: both ends close; client {cs:?} server {ss:?}");
    let client = closes(p.client_conn());
    let server = closes(p.server_conn().expect("server"));
    let (receiver, sender) = match from {
        From::Client => (server, client),
        From::Server => (client, server),
    };
    match receiver.as_slice() {
        [CloseReason::Local(e)] => {
            assert_eq!(
                e.transport_code(),
                Some(code),
                "{name}: receiver closed with {e:?}"
            );
        }
        other => panic!("{name}: receiver closes {other:?}"),
    }
    match sender.as_slice() {
        [CloseReason::Remote(e)] => {
            assert_eq!(
                e.transport_code(),
                Some(code),
                "{name}: sender was told {e:?}"
            );
        }
        other => panic!("{name}: sender closes {other:?}"),
    }
}

fn frame(f: Frame<'_>) -> Vec<u8> {
    let mut buf = Vec::new();
    f.encode(&mut buf);
    buf
}

fn stream(id: u64, offset: u64, data: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    StreamFrame {
        stream_id: id,
        offset,
        data,
        fin: false,
    }
    .encode(&mut buf, true);
    buf
}

#[test]
fn malformed_frames_are_frame_encoding_errors() {
    // A STREAM frame whose Length runs past the packet.
    let mut truncated = stream(0, 0, &[7; 40]);
    truncated.truncate(20);
    violation(
        "truncated STREAM",
        From::Client,
        &truncated,
        0,
        TransportErrorCode::FRAME_ENCODING_ERROR,
        |_| {},
    );
    // RFC 9000 §12.4: a frame type we do not know.
    violation(
        "unknown frame type",
        From::Server,
        &[0x40, 0x40, 0, 0, 0],
        0,
        TransportErrorCode::FRAME_ENCODING_ERROR,
        |_| {},
    );
}

#[test]
fn data_beyond_max_stream_data_is_a_flow_control_error() {
    let window = TransportConfig::default().stream_receive_window;
    violation(
        "beyond the stream window",
        From::Client,
        &stream(0, window, &[1; 10]),
        0,
        TransportErrorCode::FLOW_CONTROL_ERROR,
        |_| {},
    );
}

#[test]
fn a_stream_beyond_max_streams_is_a_stream_limit_error() {
    let limit = TransportConfig::default().max_streams_uni;
    // Client-initiated unidirectional stream number `limit` (they count from 0).
    let id = limit << 2 | 0b10;
    violation(
        "one stream too many",
        From::Client,
        &stream(id, 0, b"x"),
        0,
        TransportErrorCode::STREAM_LIMIT_ERROR,
        |_| {},
    );
}

#[test]
fn stream_frames_on_the_wrong_streams_are_stream_state_errors() {
    // Server-initiated bidirectional stream 1 that the server never opened.
    violation(
        "locally-initiated, unopened",
        From::Client,
        &stream(1, 0, b"x"),
        0,
        TransportErrorCode::STREAM_STATE_ERROR,
        |_| {},
    );
    // Server-initiated unidirectional stream 3, opened: the server only sends on it.
    violation(
        "send-only stream",
        From::Client,
        &stream(3, 0, b"x"),
        0,
        TransportErrorCode::STREAM_STATE_ERROR,
        |p| {
            let srv = p.server_conn().expect("server");
            let id = srv.open_stream(false).expect("open");
            assert_eq!(id.0, 3);
            srv.stream_write(id, b"hello").expect("write");
        },
    );
}

#[test]
fn invalid_packets_after_the_handshake_are_protocol_violations() {
    let ping = frame(Frame::Ping);
    violation(
        "reserved bits",
        From::Client,
        &ping,
        0x18,
        TransportErrorCode::PROTOCOL_VIOLATION,
        |_| {},
    );
    violation(
        "reserved bits",
        From::Server,
        &ping,
        0x08,
        TransportErrorCode::PROTOCOL_VIOLATION,
        |_| {},
    );
    violation(
        "HANDSHAKE_DONE from a client",
        From::Client,
        &frame(Frame::HandshakeDone),
        0,
        TransportErrorCode::PROTOCOL_VIOLATION,
        |_| {},
    );
    violation(
        "no frames",
        From::Server,
        &[],
        0,
        TransportErrorCode::PROTOCOL_VIOLATION,
        |_| {},
    );
    // RFC 9000 §19.7: only servers send NEW_TOKEN.
    violation(
        "NEW_TOKEN from a client",
        From::Client,
        &frame(Frame::NewToken { token: b"tok" }),
        0,
        TransportErrorCode::PROTOCOL_VIOLATION,
        |_| {},
    );
}
