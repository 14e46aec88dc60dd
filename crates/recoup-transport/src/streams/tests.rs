//! Tests of the stream map: frame checks with their RFC 9000 codes, flow-control updates, the
//! send side through the map, and a lossy round trip of many streams between two maps.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::error::TransportErrorCode as Code;

fn limits(stream: u64, conn: u64, bidi: u64, uni: u64) -> FlowLimits {
    FlowLimits {
        initial_max_data: conn,
        initial_max_stream_data_bidi_local: stream,
        initial_max_stream_data_bidi_remote: stream,
        initial_max_stream_data_uni: stream,
        initial_max_streams_bidi: bidi,
        initial_max_streams_uni: uni,
    }
}

/// A client and a server that granted each other `l`.
fn pair(l: FlowLimits, cap: usize) -> (Streams, Streams) {
    let mut c = Streams::new(Side::Client, l, cap);
    let mut s = Streams::new(Side::Server, l, cap);
    assert!(c.set_peer_params(l).is_ok());
    assert!(s.set_peer_params(l).is_ok());
    (c, s)
}

fn code(r: Result<(), TransportError>) -> Option<Code> {
    r.err().map(|e| e.code)
}

/// What the connection would do with a received control frame.
fn deliver(to: &mut Streams, f: ControlFrame) -> Result<(), TransportError> {
    match f {
        ControlFrame::MaxData(m) => {
            to.on_max_data(m);
            Ok(())
        }
        ControlFrame::MaxStreamData { id, max } => to.on_max_stream_data(id, max),
        ControlFrame::MaxStreams { bidi, max } => to.on_max_streams(bidi, max),
        ControlFrame::DataBlocked(l) => {
            to.on_data_blocked(l);
            Ok(())
        }
        ControlFrame::StreamDataBlocked { id, limit } => to.on_stream_data_blocked(id, limit),
        ControlFrame::StreamsBlocked { bidi, limit } => to.on_streams_blocked(bidi, limit),
        ControlFrame::ResetStream {
            id,
            code,
            final_size,
        } => to.on_reset_stream(id, code, final_size),
        ControlFrame::StopSending { id, code } => to.on_stop_sending(id, code),
    }
}

fn drain_control(s: &mut Streams) -> Vec<ControlFrame> {
    std::iter::from_fn(|| s.poll_control(1000)).collect()
}

/// Sends everything new from `from` to `to` without loss, acking each piece.
fn flush(from: &mut Streams, to: &mut Streams) {
    while let Some(c) = from.poll_new(1000) {
        let mut b = Vec::new();
        assert!(from.read_range(c.id, c.offset, c.len, &mut b).is_ok());
        assert_eq!(to.on_stream(c.id, c.offset, &b, c.fin), Ok(()));
        from.on_acked(c.id, c.offset, c.len, c.fin);
    }
    for f in drain_control(from) {
        assert_eq!(deliver(to, f), Ok(()));
        from.on_control_acked(f);
    }
}

fn read_all(s: &mut Streams, id: StreamId) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 500];
    loop {
        match s.read(id, &mut buf) {
            Ok((n, fin)) => {
                out.extend_from_slice(&buf[..n]);
                if fin {
                    return (out, true);
                }
            }
            Err(_) => return (out, false),
        }
    }
}

#[test]
fn stream_id_bits() {
    assert_eq!(StreamId::new(Side::Client, Dir::Bi, 0), StreamId(0));
    assert_eq!(StreamId::new(Side::Server, Dir::Bi, 0), StreamId(1));
    assert_eq!(StreamId::new(Side::Client, Dir::Uni, 0), StreamId(2));
    let id = StreamId::new(Side::Server, Dir::Uni, 3);
    assert_eq!(id, StreamId(15));
    assert_eq!(
        (id.initiator(), id.dir(), id.index(), id.is_bidi()),
        (Side::Server, Dir::Uni, 3, false)
    );
    assert_eq!(StreamId(4).initiator(), Side::Client);
    assert!(StreamId(4).is_bidi());
}

#[test]
fn open_is_blocked_at_the_peer_limit_and_says_so_once() {
    let (mut c, _) = pair(limits(100, 1000, 2, 0), 100);
    assert_eq!(c.open(true).ok(), Some(StreamId(0)));
    assert_eq!(c.open(true).ok(), Some(StreamId(4)));
    assert!(matches!(c.open(true), Err(Error::Blocked)));
    assert!(matches!(c.open(false), Err(Error::Blocked)));
    assert!(matches!(c.open(true), Err(Error::Blocked)));
    let frames = drain_control(&mut c);
    assert_eq!(
        frames,
        vec![
            ControlFrame::StreamsBlocked {
                bidi: true,
                limit: 2
            },
            ControlFrame::StreamsBlocked {
                bidi: false,
                limit: 0
            }
        ]
    );
    // Lost while still current: queued again; after a raise it is stale.
    c.on_control_lost(frames[0]);
    assert_eq!(c.poll_control(1000), Some(frames[0]));
    assert_eq!(c.on_max_streams(true, 3), Ok(()));
    c.on_control_lost(frames[0]);
    assert_eq!(c.poll_control(1000), None);
    assert_eq!(c.open(true).ok(), Some(StreamId(8)));
    assert_eq!(
        code(c.on_max_streams(true, (1 << 60) + 1)),
        Some(Code::FRAME_ENCODING_ERROR)
    );
    let mut bad = limits(1, 1, 1, 1);
    bad.initial_max_streams_uni = (1 << 60) + 1;
    assert_eq!(
        code(c.set_peer_params(bad)),
        Some(Code::TRANSPORT_PARAMETER_ERROR)
    );
}

#[test]
fn stream_state_errors() {
    let state = Some(Code::STREAM_STATE_ERROR);
    let (_, mut s) = pair(limits(100, 1000, 10, 10), 100);
    let ours_bidi = StreamId::new(Side::Server, Dir::Bi, 0);
    let ours_uni = StreamId::new(Side::Server, Dir::Uni, 0);
    let theirs_uni = StreamId::new(Side::Client, Dir::Uni, 0);
    // §19.8, §19.4, §19.5, §19.10, §19.13: a locally initiated stream not yet created.
    assert_eq!(code(s.on_stream(ours_bidi, 0, b"x", false)), state);
    assert_eq!(code(s.on_reset_stream(ours_bidi, 0, 0)), state);
    assert_eq!(code(s.on_stop_sending(ours_bidi, 0)), state);
    assert_eq!(code(s.on_max_stream_data(ours_bidi, 10)), state);
    assert_eq!(code(s.on_stream_data_blocked(ours_bidi, 10)), state);
    // Receive-type frames on our send-only stream, even once it exists.
    assert_eq!(code(s.on_stream(ours_uni, 0, b"x", false)), state);
    assert_eq!(s.open(false).ok(), Some(ours_uni));
    assert_eq!(code(s.on_stream(ours_uni, 0, b"x", false)), state);
    assert_eq!(code(s.on_reset_stream(ours_uni, 0, 0)), state);
    assert_eq!(code(s.on_stream_data_blocked(ours_uni, 0)), state);
    // Send-type frames on the peer's (our receive-only) stream.
    assert_eq!(code(s.on_stop_sending(theirs_uni, 0)), state);
    assert_eq!(code(s.on_max_stream_data(theirs_uni, 10)), state);
    // The valid directions work.
    assert_eq!(s.on_stream(theirs_uni, 0, b"x", false), Ok(()));
    assert_eq!(s.on_max_stream_data(ours_uni, 200), Ok(()));
    assert_eq!(s.on_stop_sending(ours_uni, 7), Ok(()));
}

#[test]
fn peer_streams_beyond_the_granted_limit_are_a_stream_limit_error() {
    let (_, mut s) = pair(limits(100, 1000, 2, 1), 100);
    let limit = Some(Code::STREAM_LIMIT_ERROR);
    let bidi = |i| StreamId::new(Side::Client, Dir::Bi, i);
    let uni = |i| StreamId::new(Side::Client, Dir::Uni, i);
    assert_eq!(code(s.on_stream(bidi(2), 0, b"", false)), limit);
    assert_eq!(code(s.on_max_stream_data(bidi(2), 5)), limit);
    assert_eq!(code(s.on_reset_stream(uni(1), 0, 0)), limit);
    // Stream 1 opens stream 0 too (§3.2), in order.
    assert_eq!(s.on_stream(bidi(1), 0, b"hi", false), Ok(()));
    assert_eq!(s.accept(true), Some(bidi(0)));
    assert_eq!(s.accept(true), Some(bidi(1)));
    assert_eq!(s.accept(true), None);
    // STOP_SENDING may be the first frame of a peer's bidirectional stream.
    assert_eq!(s.on_stop_sending(bidi(0), 1), Ok(()));
    assert_eq!(s.on_stream_data_blocked(uni(0), 0), Ok(()));
    assert_eq!(s.accept(false), Some(uni(0)));
    assert_eq!(
        code(s.on_streams_blocked(true, (1 << 60) + 1)),
        Some(Code::FRAME_ENCODING_ERROR)
    );
}

#[test]
fn receive_flow_control_at_stream_and_connection_level() {
    let (_, mut s) = pair(limits(100, 150, 10, 10), 100);
    let a = StreamId(0);
    let b = StreamId(4);
    let flow = Some(Code::FLOW_CONTROL_ERROR);
    assert_eq!(code(s.on_stream(a, 0, &[0; 101], false)), flow);
    assert_eq!(code(s.on_stream(a, 100, &[0; 1], false)), flow);
    assert_eq!(s.on_stream(a, 0, &[0; 100], false), Ok(()));
    // Duplicates do not count against the connection.
    assert_eq!(s.on_stream(a, 0, &[0; 100], false), Ok(()));
    assert_eq!(s.on_stream(a, 50, &[0; 50], false), Ok(()));
    assert_eq!(code(s.on_stream(b, 0, &[0; 51], false)), flow);
    // Only the highest offset counts, even with a hole below it.
    assert_eq!(s.on_stream(b, 49, &[0; 1], false), Ok(()));
    assert_eq!(code(s.on_stream(StreamId(8), 0, &[0; 1], false)), flow);
    // A reset's final size counts too (§4.5).
    assert_eq!(code(s.on_reset_stream(b, 0, 51)), flow);
}

#[test]
fn final_size_errors() {
    let (_, mut s) = pair(limits(100, 1000, 10, 10), 100);
    let id = StreamId(0);
    let fse = Some(Code::FINAL_SIZE_ERROR);
    assert_eq!(s.on_stream(id, 0, &[1; 10], true), Ok(()));
    assert_eq!(code(s.on_stream(id, 10, &[1; 1], false)), fse);
    assert_eq!(code(s.on_stream(id, 0, &[1; 9], true)), fse);
    assert_eq!(code(s.on_reset_stream(id, 0, 11)), fse);
    let id2 = StreamId(4);
    assert_eq!(s.on_stream(id2, 0, &[1; 30], false), Ok(()));
    assert_eq!(code(s.on_reset_stream(id2, 0, 29)), fse);
    assert_eq!(s.on_reset_stream(id2, 5, 40), Ok(()));
    assert_eq!(code(s.on_reset_stream(id2, 5, 41)), fse);
    assert_eq!(code(s.on_stream(id2, 35, &[1; 6], false)), fse);
    assert_eq!(
        s.poll_event(),
        Some(StreamEvent::Reset { id: id2, code: 5 })
    );
    assert!(s.readable().contains(&id2));
    assert!(matches!(
        s.read(id2, &mut [0; 8]),
        Err(Error::InvalidState(_))
    ));
    assert!(matches!(
        s.read(id2, &mut [0; 8]),
        Err(Error::UnknownStream(4))
    ));
}

#[test]
fn credit_updates_are_issued_as_data_is_read_and_let_the_sender_continue() {
    let (mut c, mut s) = pair(limits(1000, 1500, 10, 10), 1 << 20);
    let a = c.open(true).unwrap_or(StreamId(99));
    let b = c.open(true).unwrap_or(StreamId(99));
    let payload: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let (mut wa, mut wb) = (0, 0);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let mut saw = (false, false);
    for _ in 0..200 {
        for (id, w) in [(a, &mut wa), (b, &mut wb)] {
            match c.write(id, &payload[*w..]) {
                Ok(n) => *w += n,
                Err(Error::Blocked) => {}
                Err(e) => panic!("write: {e}"),
            }
        }
        let frames = drain_control(&mut c);
        saw.0 |= frames
            .iter()
            .any(|f| matches!(f, ControlFrame::StreamDataBlocked { .. }));
        saw.1 |= frames
            .iter()
            .any(|f| matches!(f, ControlFrame::DataBlocked(_)));
        for f in frames {
            assert_eq!(deliver(&mut s, f), Ok(()));
        }
        flush(&mut c, &mut s);
        got_a.extend(read_all(&mut s, a).0);
        got_b.extend(read_all(&mut s, b).0);
        flush(&mut s, &mut c);
        if wa == payload.len() && wb == payload.len() {
            break;
        }
    }
    assert!(saw.0 && saw.1, "both kinds of BLOCKED were reported");
    flush(&mut c, &mut s);
    got_a.extend(read_all(&mut s, a).0);
    got_b.extend(read_all(&mut s, b).0);
    assert_eq!(got_a, payload);
    assert_eq!(got_b, payload);
}

#[test]
fn max_data_window_stays_ahead_and_lost_updates_are_resent_only_if_current() {
    let (_, mut s) = pair(limits(1000, 1000, 10, 10), 100);
    let id = StreamId(0);
    assert_eq!(s.on_stream(id, 0, &[0; 600], false), Ok(()));
    assert_eq!(s.poll_control(1000), None);
    assert_eq!(read_all(&mut s, id).0.len(), 600);
    let frames = drain_control(&mut s);
    assert_eq!(
        frames,
        vec![
            ControlFrame::MaxData(1600),
            ControlFrame::MaxStreamData { id, max: 1600 }
        ]
    );
    s.on_control_lost(frames[0]);
    s.on_control_lost(frames[1]);
    assert_eq!(drain_control(&mut s), frames);
    // A newer limit supersedes the lost one.
    assert_eq!(s.on_stream(id, 600, &[0; 1000], false), Ok(()));
    assert_eq!(read_all(&mut s, id).0.len(), 1000);
    let newer = drain_control(&mut s);
    assert_eq!(newer[0], ControlFrame::MaxData(2600));
    s.on_control_lost(frames[0]);
    s.on_control_lost(frames[1]);
    assert_eq!(s.poll_control(1000), None);
    // A frame that does not fit waits.
    s.on_control_lost(newer[0]);
    assert_eq!(s.poll_control(2), None);
    assert_eq!(s.poll_control(5), Some(newer[0]));
}

#[test]
fn max_streams_is_returned_as_peer_streams_close() {
    let (mut c, mut s) = pair(limits(1000, 100_000, 0, 2), 100);
    let ids: Vec<StreamId> = (0..2).filter_map(|_| c.open(false).ok()).collect();
    assert_eq!(ids.len(), 2);
    assert!(c.open(false).is_err());
    for &id in &ids {
        assert_eq!(c.write(id, b"hello").ok(), Some(5));
    }
    assert!(c.finish(ids[0]).is_ok());
    flush(&mut c, &mut s);
    assert_eq!(drain_control(&mut s), vec![]);
    assert_eq!(read_all(&mut s, ids[0]), (b"hello".to_vec(), true));
    // One of two streams back: half the allowance, announce.
    assert_eq!(
        drain_control(&mut s),
        vec![ControlFrame::MaxStreams {
            bidi: false,
            max: 3
        }]
    );
    // A peer reset, once the application saw it, frees the slot too.
    assert_eq!(s.on_reset_stream(ids[1], 9, 5), Ok(()));
    assert!(s.read(ids[1], &mut [0; 4]).is_err());
    flush(&mut s, &mut c);
    assert!(s.is_empty());
    // Never accepted, but served and gone: not offered any more.
    assert_eq!(s.accept(false), None);
    assert_eq!(
        c.open(false).ok(),
        Some(StreamId::new(Side::Client, Dir::Uni, 2))
    );
    assert_eq!(
        c.open(false).ok(),
        Some(StreamId::new(Side::Client, Dir::Uni, 3))
    );
    assert!(c.open(false).is_err());
}

#[test]
fn round_robin_and_copies_do_not_consume_credit() {
    let (mut c, _) = pair(limits(1000, 300, 10, 10), 1000);
    let ids: Vec<StreamId> = (0..3).filter_map(|_| c.open(true).ok()).collect();
    for &id in &ids {
        assert_eq!(c.write(id, &[1; 100]).ok(), Some(100));
    }
    // Connection credit is spent.
    assert!(matches!(c.write(ids[0], &[1; 1]), Err(Error::Blocked)));
    let order: Vec<StreamId> = (0..6)
        .filter_map(|_| c.poll_new(50).map(|ch| ch.id))
        .collect();
    assert_eq!(order, [ids[0], ids[1], ids[2], ids[0], ids[1], ids[2]]);
    // Copies of sent data, as often as the connection likes.
    let mut out = Vec::new();
    for _ in 0..5 {
        assert!(c.read_range(ids[1], 0, 100, &mut out).is_ok());
    }
    assert_eq!(out.len(), 500);
    c.on_max_data(350);
    assert_eq!(c.write(ids[2], &[1; 100]).ok(), Some(50));
    assert_eq!(c.writable(), vec![]);
}

#[test]
fn streams_of_a_higher_send_order_go_first_and_equal_ones_take_turns() {
    let (mut c, _) = pair(limits(1000, 10_000, 10, 10), 1000);
    let ids: Vec<StreamId> = (0..3).filter_map(|_| c.open(false).ok()).collect();
    for &id in &ids {
        assert_eq!(c.write(id, &[1; 100]).ok(), Some(100));
    }
    assert!(c.set_send_order(ids[1], 7).is_ok());
    assert!(c.set_send_order(ids[2], 7).is_ok());
    assert!(matches!(
        c.set_send_order(StreamId(99), 1),
        Err(Error::UnknownStream(99))
    ));
    let order: Vec<StreamId> = std::iter::from_fn(|| c.poll_new(50).map(|ch| ch.id)).collect();
    // The two of order 7 in turns until they are sent, then the one of order 0.
    assert_eq!(
        order,
        [ids[1], ids[2], ids[1], ids[2], ids[0], ids[0]],
        "{order:?}"
    );
}

#[test]
fn a_higher_send_order_blocked_by_its_credit_does_not_hold_the_others_up() {
    // 100 bytes of credit per stream: the first stream's second write waits for MAX_STREAM_DATA.
    let (mut c, _) = pair(limits(100, 10_000, 10, 10), 1000);
    let ids: Vec<StreamId> = (0..2).filter_map(|_| c.open(false).ok()).collect();
    assert_eq!(c.write(ids[0], &[1; 100]).ok(), Some(100));
    assert_eq!(c.write(ids[1], &[1; 100]).ok(), Some(100));
    assert!(c.set_send_order(ids[0], 9).is_ok());
    assert_eq!(c.poll_new(100).map(|ch| ch.id), Some(ids[0]));
    assert_eq!(c.poll_new(100).map(|ch| ch.id), Some(ids[1]));
    assert_eq!(c.poll_new(100), None);
}

#[test]
fn acked_streams_free_their_memory_and_are_forgotten() {
    let (mut c, _) = pair(limits(1 << 20, 1 << 20, 10, 10), 1 << 16);
    let id = c.open(false).unwrap_or(StreamId(99));
    assert_eq!(c.write(id, &[5; 10_000]).ok(), Some(10_000));
    assert!(c.finish(id).is_ok());
    let chunks: Vec<Chunk> = std::iter::from_fn(|| c.poll_new(1000)).collect();
    assert_eq!(chunks.len(), 10);
    assert!(chunks[9].fin);
    // Acks in reverse, with repeats; memory is freed only when the prefix is acked.
    for ch in chunks.iter().rev().skip(1) {
        c.on_acked(ch.id, ch.offset, ch.len, ch.fin);
        c.on_acked(ch.id, ch.offset, ch.len, ch.fin);
    }
    assert_eq!(c.buffered(id), (1000, 0));
    assert_eq!(
        c.unacked(id, 0, 10_000),
        vec![Chunk {
            id,
            offset: 9000,
            len: 1000,
            fin: true
        }]
    );
    assert_eq!(c.poll_event(), None);
    let last = chunks[9];
    c.on_acked(id, last.offset, last.len, last.fin);
    assert_eq!(c.poll_event(), Some(StreamEvent::Finished(id)));
    assert!(c.is_empty());
    assert_eq!(c.unacked(id, 0, 10_000), vec![]);
    assert!(matches!(c.write(id, b"x"), Err(Error::UnknownStream(_))));
    // Late acks and peer frames for the forgotten stream are harmless.
    c.on_acked(id, 0, 1000, false);
    assert_eq!(c.on_max_stream_data(id, 1 << 30), Ok(()));
}

#[test]
fn stop_sending_resets_with_the_peer_code_until_the_reset_is_acked() {
    let (mut c, mut s) = pair(limits(1000, 1000, 10, 10), 1000);
    let id = c.open(true).unwrap_or(StreamId(99));
    assert_eq!(c.write(id, &[3; 300]).ok(), Some(300));
    let first = c.poll_new(100);
    assert!(first.is_some());
    assert_eq!(c.on_stop_sending(id, 42), Ok(()));
    assert_eq!(c.poll_event(), Some(StreamEvent::Stopped { id, code: 42 }));
    assert!(c.write(id, b"x").is_err());
    assert_eq!(c.poll_new(1000), None);
    let reset = ControlFrame::ResetStream {
        id,
        code: 42,
        final_size: 100,
    };
    assert_eq!(c.poll_control(1000), Some(reset));
    c.on_control_lost(reset);
    assert_eq!(c.poll_control(1000), Some(reset));
    // The unsent 200 bytes went back to the connection: 700 + 200 may now be written elsewhere.
    let other = c.open(true).unwrap_or(StreamId(99));
    assert_eq!(c.write(other, &[0; 2000]).ok(), Some(900));
    assert_eq!(deliver(&mut s, reset), Ok(()));
    c.on_control_acked(reset);
    c.on_control_lost(reset);
    assert_eq!(c.poll_control(1000), Some(ControlFrame::DataBlocked(1000)));
    assert_eq!(c.poll_control(1000), None);
    // Our receiving half of the bidirectional stream is still there until read.
    assert_eq!(c.buffered(id), (0, 0));
    assert_eq!(c.len(), 2);
    assert_eq!(s.poll_event(), Some(StreamEvent::Reset { id, code: 42 }));
}

#[test]
fn stop_sending_from_us_discards_and_returns_credit() {
    let (mut c, mut s) = pair(limits(1000, 1000, 10, 10), 1000);
    let id = c.open(false).unwrap_or(StreamId(99));
    assert_eq!(c.write(id, &[3; 800]).ok(), Some(800));
    flush(&mut c, &mut s);
    assert!(s.stop_sending(id, 6).is_ok());
    assert_eq!(s.buffered(id), (0, 0));
    let frames = drain_control(&mut s);
    assert!(frames.contains(&ControlFrame::StopSending { id, code: 6 }));
    assert!(frames.contains(&ControlFrame::MaxData(1800)));
    for f in frames {
        assert_eq!(deliver(&mut c, f), Ok(()));
    }
    flush(&mut c, &mut s);
    assert!(s.is_empty(), "the reset ended the stopped stream");
}

struct Endpoint {
    s: Streams,
    lost: Vec<Chunk>,
}

/// Moves one batch from `from` to `to`: retransmissions of what was lost, new data, random
/// copies; shuffled; each piece or its ack lost at random.
fn transmit(from: &mut Endpoint, to: &mut Endpoint, rng: &mut ChaCha8Rng, seed: u64) {
    let loss = 0.2;
    let mut batch: Vec<(Chunk, Vec<u8>)> = Vec::new();
    for lost in std::mem::take(&mut from.lost) {
        for ch in from
            .s
            .unacked(lost.id, lost.offset, lost.offset + lost.len as u64)
        {
            let mut b = Vec::new();
            assert!(
                from.s.read_range(ch.id, ch.offset, ch.len, &mut b).is_ok(),
                "seed {seed}"
            );
            batch.push((ch, b));
        }
    }
    while batch.len() < 60 {
        let Some(ch) = from.s.poll_new(rng.gen_range(1..1400)) else {
            break;
        };
        let mut b = Vec::new();
        assert!(
            from.s.read_range(ch.id, ch.offset, ch.len, &mut b).is_ok(),
            "seed {seed}"
        );
        if rng.gen_bool(0.2) {
            batch.push((ch, b.clone()));
        }
        batch.push((ch, b));
    }
    batch.shuffle(rng);
    for (ch, b) in batch {
        if rng.gen_bool(loss) {
            from.lost.push(ch);
            continue;
        }
        let r = to.s.on_stream(ch.id, ch.offset, &b, ch.fin);
        assert_eq!(r, Ok(()), "seed {seed}: {ch:?}");
        if rng.gen_bool(loss) {
            from.lost.push(ch);
        } else {
            from.s.on_acked(ch.id, ch.offset, ch.len, ch.fin);
        }
    }
    while let Some(f) = from.s.poll_control(1200) {
        if rng.gen_bool(loss) {
            from.s.on_control_lost(f);
            continue;
        }
        assert_eq!(deliver(&mut to.s, f), Ok(()), "seed {seed}: {f:?}");
        if rng.gen_bool(loss) {
            from.s.on_control_lost(f);
        } else {
            from.s.on_control_acked(f);
        }
    }
}

/// 100 bidirectional streams; the server echoes each. Loss, duplicates, reordering and copies
/// on both paths; small windows and stream limits so every credit mechanism is exercised.
#[test]
fn hundred_streams_round_trip_through_loss_and_copies() {
    for seed in 0..3u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let stream_window = 4000;
        let cap = 3000;
        let (c, s) = pair(limits(stream_window, 30_000, 25, 0), cap);
        let mut client = Endpoint {
            s: c,
            lost: Vec::new(),
        };
        let mut server = Endpoint {
            s,
            lost: Vec::new(),
        };
        let data: Vec<Vec<u8>> = (0..100)
            .map(|_| {
                let n = rng.gen_range(0..12_000);
                (0..n).map(|_| rng.gen()).collect()
            })
            .collect();
        let mut ids: Vec<StreamId> = Vec::new();
        let mut written = vec![0usize; 100];
        let mut finished = [false; 100];
        let mut echoed: BTreeMap<StreamId, Vec<u8>> = BTreeMap::new();
        let mut complete = 0;
        // Server side: per stream, bytes read and not yet echoed, and whether the FIN was read.
        let mut echo: BTreeMap<StreamId, (Vec<u8>, bool, bool)> = BTreeMap::new();
        let mut finished_events = 0;
        let mut rounds = 0;
        while !(complete == 100 && client.s.is_empty() && server.s.is_empty()) {
            rounds += 1;
            assert!(rounds < 5000, "seed {seed}: stuck, {complete} complete");
            while ids.len() < 100 {
                match client.s.open(true) {
                    Ok(id) => ids.push(id),
                    Err(Error::Blocked) => break,
                    Err(e) => panic!("seed {seed}: open: {e}"),
                }
            }
            for (i, &id) in ids.iter().enumerate() {
                if written[i] < data[i].len() {
                    match client.s.write(id, &data[i][written[i]..]) {
                        Ok(n) => written[i] += n,
                        Err(Error::Blocked) => {}
                        Err(e) => panic!("seed {seed}: write: {e}"),
                    }
                }
                if written[i] == data[i].len() && !finished[i] {
                    assert!(client.s.finish(id).is_ok(), "seed {seed}");
                    finished[i] = true;
                }
            }
            while let Some(id) = server.s.accept(true) {
                echo.insert(id, (Vec::new(), false, false));
            }
            for id in server.s.readable() {
                let (bytes, fin) = read_all(&mut server.s, id);
                let e = echo.entry(id).or_default();
                e.0.extend(bytes);
                e.1 |= fin;
            }
            for (&id, (pending, fin_read, fin_sent)) in &mut echo {
                if !pending.is_empty() {
                    match server.s.write(id, pending) {
                        Ok(n) => {
                            pending.drain(..n);
                        }
                        Err(Error::Blocked) => {}
                        Err(e) => panic!("seed {seed}: echo: {e}"),
                    }
                }
                if *fin_read && pending.is_empty() && !*fin_sent {
                    assert!(server.s.finish(id).is_ok(), "seed {seed}");
                    *fin_sent = true;
                }
            }
            for id in client.s.readable() {
                let (bytes, fin) = read_all(&mut client.s, id);
                let got = echoed.entry(id).or_default();
                got.extend(bytes);
                if fin {
                    let i = ids.iter().position(|&x| x == id).unwrap_or(usize::MAX);
                    assert_eq!(got, &data[i], "seed {seed}: stream {id}");
                    complete += 1;
                }
            }
            for ep in [&client, &server] {
                for &id in &ids {
                    let (send, recv) = ep.s.buffered(id);
                    assert!(send <= cap, "seed {seed}: send buffer {send}");
                    assert!(
                        recv as u64 <= stream_window,
                        "seed {seed}: recv buffer {recv}"
                    );
                }
            }
            // The peer's streams held never exceed what we granted beyond those closed.
            assert!(
                server.s.len() <= 25,
                "seed {seed}: more streams than granted"
            );
            transmit(&mut client, &mut server, &mut rng, seed);
            transmit(&mut server, &mut client, &mut rng, seed);
            while let Some(ev) = client.s.poll_event() {
                assert!(
                    matches!(ev, StreamEvent::Finished(_)),
                    "seed {seed}: {ev:?}"
                );
                finished_events += 1;
            }
        }
        assert_eq!(finished_events, 100, "seed {seed}");
        assert_eq!(echo.len(), 100, "seed {seed}");
    }
}

/// Unidirectional streams under loss where the sender resets some and the receiver stops some:
/// the others arrive intact, no frame is refused, and in the end both maps hold nothing.
#[test]
fn resets_and_stops_under_loss_leave_no_state() {
    for seed in 0..3u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (c, s) = pair(limits(3000, 20_000, 0, 10), 2000);
        let mut client = Endpoint {
            s: c,
            lost: Vec::new(),
        };
        let mut server = Endpoint {
            s,
            lost: Vec::new(),
        };
        let data: Vec<Vec<u8>> = (0..40)
            .map(|_| (0..rng.gen_range(0..8000)).map(|_| rng.gen()).collect())
            .collect();
        let mut ids: Vec<StreamId> = Vec::new();
        let mut written = [0usize; 40];
        // Client: 0 writing, 1 finished or reset, 2 gave up (stopped by the peer).
        let mut state = [0u8; 40];
        let mut got: BTreeMap<StreamId, Vec<u8>> = BTreeMap::new();
        let mut outcome: BTreeMap<StreamId, &str> = BTreeMap::new();
        let mut rounds = 0;
        while !(ids.len() == 40 && client.s.is_empty() && server.s.is_empty()) {
            rounds += 1;
            assert!(rounds < 5000, "seed {seed}: stuck");
            while ids.len() < 40 {
                match client.s.open(false) {
                    Ok(id) => ids.push(id),
                    Err(_) => break,
                }
            }
            for (i, &id) in ids.iter().enumerate() {
                if state[i] != 0 {
                    continue;
                }
                if i % 5 == 1 && written[i] >= data[i].len() / 2 {
                    assert!(client.s.reset(id, i as u64).is_ok(), "seed {seed}");
                    state[i] = 1;
                    continue;
                }
                // Streams to be reset get only their first half written.
                let upto = if i % 5 == 1 {
                    data[i].len() / 2
                } else {
                    data[i].len()
                };
                match client.s.write(id, &data[i][written[i]..upto]) {
                    Ok(n) => written[i] += n,
                    Err(Error::Blocked) => {}
                    Err(_) => state[i] = 2,
                }
                if state[i] == 0 && written[i] == data[i].len() {
                    assert!(client.s.finish(id).is_ok(), "seed {seed}");
                    state[i] = 1;
                }
            }
            while server.s.accept(false).is_some() {}
            for id in server.s.readable() {
                let (bytes, fin) = read_all(&mut server.s, id);
                let g = got.entry(id).or_default();
                g.extend(bytes);
                if fin {
                    outcome.insert(id, "fin");
                }
                if id.index() % 7 == 2 && !outcome.contains_key(&id) {
                    assert!(server.s.stop_sending(id, 99).is_ok(), "seed {seed}");
                    outcome.insert(id, "stopped");
                }
            }
            transmit(&mut client, &mut server, &mut rng, seed);
            transmit(&mut server, &mut client, &mut rng, seed);
            while let Some(ev) = server.s.poll_event() {
                let StreamEvent::Reset { id, code } = ev else {
                    panic!("seed {seed}: {ev:?}");
                };
                let i = id.index();
                assert!(
                    (i % 5 == 1 && code == i) || (i % 7 == 2 && code == 99),
                    "seed {seed}: stream {id} reset with {code}"
                );
                outcome.entry(id).or_insert("reset");
            }
        }
        let count = |what: &str| outcome.values().filter(|&&v| v == what).count();
        assert!(
            count("reset") >= 7 && count("stopped") >= 1,
            "seed {seed}: {outcome:?}"
        );
        for (i, &id) in ids.iter().enumerate() {
            let g = got.get(&id).map_or(&[][..], Vec::as_slice);
            assert_eq!(g, &data[i][..g.len()], "seed {seed}: stream {id} corrupted");
            if i % 5 != 1 && id.index() % 7 != 2 {
                assert_eq!(outcome.get(&id), Some(&"fin"), "seed {seed}: stream {id}");
                assert_eq!(g.len(), data[i].len(), "seed {seed}: stream {id}");
            }
        }
    }
}
