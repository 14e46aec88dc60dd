//! DATAGRAM frames (RFC 9221) between two recoup endpoints on virtual time: both directions,
//! the send-side limits (§3), the receive-side violations (§3), loss without retransmission
//! (§5.2) and without the loss-recovery policy seeing any data, the bounded send queue, and
//! the qlog of it all.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{seed, NetConfig, Pair, SeedGuard, Sink, CLIENT};
use recoup_recovery::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendState,
};
use recoup_time::Instant;
use recoup_transport::frame::{DatagramFrame, Frame};
use recoup_transport::qlog::{QlogWriter, VantagePoint};
use recoup_transport::{
    CloseReason, Connection, DatagramConfig, Error, Event, PolicyFactory, TransportConfig,
    TransportErrorCode,
};

fn with_datagrams(max_frame_size: u64) -> TransportConfig {
    TransportConfig {
        datagrams: DatagramConfig {
            max_frame_size,
            ..DatagramConfig::default()
        },
        ..TransportConfig::default()
    }
}

fn payload(side: u8, i: usize) -> Bytes {
    Bytes::from(vec![side ^ i as u8; 100 + i % 900])
}

/// Reads every datagram waiting, after checking the event announced them.
fn received(conn: &mut Connection, announced: &mut bool) -> Vec<Bytes> {
    while let Some(e) = conn.poll_event() {
        *announced |= e == Event::DatagramReceived;
    }
    std::iter::from_fn(|| conn.datagram_recv()).collect()
}

fn until(p: &Pair, after: Duration) -> Duration {
    (p.now + after) - Instant::ZERO
}

#[test]
fn datagrams_flow_both_ways() {
    let s = seed(90);
    let _g = SeedGuard(s);
    let mut p = Pair::new(s, NetConfig::default(), with_datagrams(65_535));
    p.handshake();
    let now = p.now;
    let max = p.client_conn().datagram_max_size().expect("server accepts");
    assert!(
        max > 1000 && max < p.client_conn().max_datagram_size(),
        "{max}"
    );
    let n = 200;
    for i in 0..n {
        p.client_conn().datagram_send(now, payload(1, i)).unwrap();
        let server = p.server_conn().expect("server");
        server.datagram_send(now, payload(2, i)).unwrap();
    }
    let (mut at_server, mut at_client) = (Vec::new(), Vec::new());
    let (mut server_told, mut client_told) = (false, false);
    let deadline = until(&p, Duration::from_secs(10));
    p.run_until(deadline, |p| {
        at_client.extend(received(p.client_conn(), &mut client_told));
        let server = p.server_conn().expect("server");
        at_server.extend(received(server, &mut server_told));
        at_client.len() == n && at_server.len() == n
    });
    // A lossless path keeps order here; RFC 9221 §5.1 promises no order in general.
    let want = |side| (0..n).map(|i| payload(side, i)).collect::<Vec<_>>();
    assert_eq!(at_server, want(1));
    assert_eq!(at_client, want(2));
    assert!(server_told && client_told, "Event::DatagramReceived");
    let (c, sv) = (p.client_conn().stats(), p.server_conn().unwrap().stats());
    for st in [c, sv] {
        assert_eq!(st.datagram_frames_sent, n as u64);
        assert_eq!(st.datagram_frames_received, n as u64);
        assert_eq!(st.datagram_frames_dropped + st.datagram_frames_unread, 0);
        assert_eq!(st.stream_bytes_new, 0, "datagrams are not stream data");
    }
}

#[test]
fn sending_needs_the_peers_parameter_and_a_frame_that_fits() {
    let s = seed(91);
    let _g = SeedGuard(s);
    // The server accepts frames of up to 200 bytes; the client announces nothing.
    let mut p = Pair::with_configs(
        s,
        NetConfig::default(),
        with_datagrams(0),
        with_datagrams(200),
    );
    let now = p.now;
    let early = p.client_conn().datagram_send(now, Bytes::from_static(b"x"));
    assert!(matches!(early, Err(Error::InvalidState(_))), "{early:?}");
    p.handshake();
    let now = p.now;
    // 200 bytes of frame: type, a 2-byte length, 197 bytes of data (§3 counts the whole frame).
    assert_eq!(p.client_conn().datagram_max_size(), Some(197));
    let c = p.client_conn();
    c.datagram_send(now, Bytes::from(vec![0; 197])).unwrap();
    let err = c.datagram_send(now, Bytes::from(vec![0; 198])).unwrap_err();
    assert!(
        matches!(err, Error::DatagramTooLarge { size: 198, max: 197, limit }
            if limit.contains("max_datagram_frame_size")),
        "{err}"
    );
    assert!(err.to_string().contains("at most 197 bytes"), "{err}");
    let server = p.server_conn().expect("server");
    assert_eq!(server.datagram_max_size(), None);
    let err = server
        .datagram_send(now, Bytes::from_static(b"x"))
        .unwrap_err();
    assert_eq!(err, Error::DatagramsUnsupported);
    assert!(err.to_string().contains("max_datagram_frame_size"), "{err}");

    // A peer that accepts anything: the packet is the limit.
    let mut p = Pair::new(s, NetConfig::default(), with_datagrams(65_535));
    p.handshake();
    let now = p.now;
    let c = p.client_conn();
    let max = c.datagram_max_size().unwrap();
    c.datagram_send(now, Bytes::from(vec![0; max])).unwrap();
    let err = c
        .datagram_send(now, Bytes::from(vec![0; max + 1]))
        .unwrap_err();
    assert!(
        matches!(err, Error::DatagramTooLarge { limit, .. } if limit.contains("packet")),
        "{err}"
    );
    // The largest one goes out and arrives.
    let mut got = Vec::new();
    let mut told = false;
    let deadline = until(&p, Duration::from_secs(2));
    p.run_until(deadline, |p| {
        got.extend(received(p.server_conn().expect("server"), &mut told));
        !got.is_empty()
    });
    assert_eq!(got, [Bytes::from(vec![0; max])]);
}

/// A packet with `payload` sealed by the client's keys, handed to the server; the server
/// must close with PROTOCOL_VIOLATION naming DATAGRAM.
fn server_rejects(server_max: u64, payload: &[u8], why: &str) {
    let s = seed(92);
    let _g = SeedGuard(s);
    let mut p = Pair::with_configs(
        s,
        NetConfig::default(),
        with_datagrams(65_535),
        with_datagrams(server_max),
    );
    p.handshake();
    let settle = until(&p, Duration::from_millis(200));
    p.run_until(settle, |_| false);
    let now = p.now;
    let packet = p
        .client_conn()
        .seal_raw_1rtt_for_test(now, payload, 0)
        .expect("1-RTT keys");
    let addr = CLIENT.parse().expect("addr");
    let _ = p.server.handle_datagram(now, addr, &packet);
    let server = p.server_conn().expect("server");
    let closes: Vec<_> = std::iter::from_fn(|| server.poll_event())
        .filter_map(|e| match e {
            Event::Closed(r) => Some(r),
            _ => None,
        })
        .collect();
    match closes.as_slice() {
        [CloseReason::Local(e)] => {
            assert_eq!(
                e.transport_code(),
                Some(TransportErrorCode::PROTOCOL_VIOLATION),
                "{why}: {e:?}"
            );
            assert_eq!(e.frame_type, Some(0x31), "{why}");
            assert!(e.reason.contains("max_datagram_frame_size"), "{why}: {e:?}");
        }
        other => panic!("{why}: server closes {other:?}"),
    }
}

fn datagram_frame(len: usize) -> Vec<u8> {
    let data = vec![5; len];
    let mut buf = Vec::new();
    Frame::Datagram(DatagramFrame {
        data: &data,
        with_len: true,
    })
    .encode(&mut buf);
    buf
}

#[test]
fn unannounced_or_oversized_datagrams_are_protocol_violations() {
    // RFC 9221 §3: a DATAGRAM frame to an endpoint that announced no support...
    server_rejects(0, &datagram_frame(10), "no support announced");
    // ... or larger than it announced (100 bytes of frame: 98 bytes of data fit, 99 do not).
    server_rejects(100, &datagram_frame(98), "one byte over");
}

/// Records what the policy is told, to show datagrams never reach it as data.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    packets_sent: u64,
    ranges_sent: u64,
    packets_lost: u64,
    ranges_lost: u64,
    data_lost: u64,
}

#[derive(Debug)]
struct Recorder(Arc<Mutex<Seen>>);

impl RecoveryPolicy for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn on_packet_sent(&mut self, _now: Instant, packet: &PacketInfo<'_>) {
        let mut s = self.0.lock().unwrap();
        s.packets_sent += 1;
        s.ranges_sent += packet.ranges.len() as u64;
    }
    fn on_packet_acked(&mut self, _now: Instant, _packet: &PacketInfo<'_>) {}
    fn on_packet_lost(&mut self, _now: Instant, packet: &PacketInfo<'_>, _t: LossTrigger) {
        let mut s = self.0.lock().unwrap();
        s.packets_lost += 1;
        s.ranges_lost += packet.ranges.len() as u64;
    }
    fn on_data_lost(&mut self, _now: Instant, _lost: &LostData) {
        self.0.lock().unwrap().data_lost += 1;
    }
    fn on_data_acked(&mut self, _now: Instant, _id: LossId) {}
    fn on_rtt_update(&mut self, _now: Instant, _rtt: &RttSample) {}
    fn on_send_state(&mut self, _now: Instant, _state: SendState) {}
    fn poll_copy(&mut self, _now: Instant, _ctx: &SendContext) -> Option<CopyRequest> {
        None
    }
}

#[test]
fn lost_datagrams_are_not_retransmitted_nor_shown_to_the_policy() {
    let s = seed(93);
    let _g = SeedGuard(s);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let recorder = seen.clone();
    let client = with_datagrams(65_535);
    let server = TransportConfig {
        custom_policy: Some(PolicyFactory::new(move |_| {
            Box::new(Recorder(recorder.clone())) as Box<dyn RecoveryPolicy + Send>
        })),
        record_recovery: true,
        ..with_datagrams(65_535)
    };
    let net = NetConfig {
        loss: 0.1,
        ..NetConfig::default()
    };
    let mut p = Pair::with_configs(s, net, client, server);
    p.handshake();
    let sink = Sink::default();
    let now = p.now;
    let server = p.server_conn().expect("server");
    server.set_qlog(QlogWriter::new(
        Box::new(sink.clone()),
        VantagePoint::Server,
        now,
        0.0,
    ));
    let before = *seen.lock().unwrap();
    let n = 300;
    let mut got = 0;
    let mut told = false;
    for round in 0..30 {
        let now = p.now;
        let server = p.server_conn().expect("server");
        for i in 0..n / 30 {
            server
                .datagram_send(now, payload(3, round * 10 + i))
                .unwrap();
        }
        let deadline = until(&p, Duration::from_millis(100));
        p.run_until(deadline, |p| {
            got += received(p.client_conn(), &mut told).len();
            false
        });
    }
    let deadline = until(&p, Duration::from_secs(2));
    p.run_until(deadline, |p| {
        got += received(p.client_conn(), &mut told).len();
        false
    });
    let server = p.server_conn().expect("server");
    let st = server.stats();
    assert_eq!(st.datagram_frames_sent, n as u64, "each sent once (§5.2)");
    assert!(st.datagram_frames_lost > 0, "10% loss loses some: {st:?}");
    assert!(
        got as u64 <= n as u64 - st.datagram_frames_lost,
        "{got} {st:?}"
    );
    assert!(got > n * 8 / 10, "{got} of {n} arrived");
    assert_eq!(st.retransmission_packets + st.copy_packets, 0, "{st:?}");
    assert_eq!(server.open_lineages(), 0);
    assert_eq!(server.drain_recovered().count(), 0);
    let seen = seen.lock().unwrap();
    assert!(seen.packets_sent > before.packets_sent && seen.packets_lost > 0);
    assert_eq!(
        (seen.ranges_sent, seen.ranges_lost, seen.data_lost),
        (before.ranges_sent, before.ranges_lost, before.data_lost),
        "the policy saw data ranges for datagrams: {seen:?}"
    );
    // qlog: the frames as qlog's `datagram` in packet_sent.
    let log = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    let frames = log.matches(r#""frame_type":"datagram""#).count();
    assert_eq!(frames, n, "every DATAGRAM frame sent is in the trace");
}

#[test]
fn a_full_send_queue_drops_its_oldest_datagrams() {
    let s = seed(94);
    let _g = SeedGuard(s);
    let client = TransportConfig {
        datagrams: DatagramConfig {
            max_frame_size: 65_535,
            send_buffer: 3_000,
            ..DatagramConfig::default()
        },
        ..TransportConfig::default()
    };
    let mut p = Pair::with_configs(s, NetConfig::default(), client, with_datagrams(65_535));
    p.handshake();
    let sink = Sink::default();
    let now = p.now;
    p.client_conn().set_qlog(QlogWriter::new(
        Box::new(sink.clone()),
        VantagePoint::Client,
        now,
        0.0,
    ));
    // Ten of 1000 bytes queued before any can leave: the newest three fit 3000 bytes.
    for i in 0..10u8 {
        p.client_conn()
            .datagram_send(now, Bytes::from(vec![i; 1000]))
            .unwrap();
    }
    let mut got = Vec::new();
    let mut told = false;
    let deadline = until(&p, Duration::from_secs(2));
    p.run_until(deadline, |p| {
        got.extend(received(p.server_conn().expect("server"), &mut told));
        false
    });
    let firsts: Vec<u8> = got.iter().map(|d| d[0]).collect();
    assert_eq!(firsts, [7, 8, 9]);
    let st = p.client_conn().stats();
    assert_eq!(
        (st.datagram_frames_sent, st.datagram_frames_dropped),
        (3, 7)
    );
    let log = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    assert_eq!(
        log.matches(r#""name":"recoup:datagram_dropped""#).count(),
        7,
        "{log}"
    );
    assert!(log.contains(r#""trigger":"send_queue_full""#));
}
