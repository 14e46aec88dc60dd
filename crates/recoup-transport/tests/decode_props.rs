//! Decoders never panic on hostile input, and what the encoders write decodes back unchanged.
//!
//! Proptest cases default to 2000 per property; `PROPTEST_CASES` overrides. The seeded loop
//! (`a_million_random_and_mutated_inputs`) takes its seed from `RECOUP_SEED` and prints it, with
//! the failing input, if a decoder panics.

use proptest::prelude::*;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::RangeSet;
use recoup_transport::cid::ConnectionId;
use recoup_transport::coding::{BufMutExt, VarInt};
use recoup_transport::fec::FecReceiver;
use recoup_transport::frame::{
    encode_ack, ConnectionClose, DatagramFrame, EcnCounts, Frame, Frames, RepairFrame, StreamDir,
    StreamFrame, MAX_STREAM_COUNT,
};
use recoup_transport::packet::{
    decode_pn, pn_len_for, read_truncated_pn, write_version_negotiation, CoalescedPackets,
    FirstByte, Header, VersionInvariants, QUIC_VERSION_1,
};
use recoup_transport::transport_params::{PreferredAddress, Side, TransportParameters};
use recoup_transport::TransportErrorCode;

/// Run every decoder over `bytes`, touching everything the decoded values expose. Returns how
/// many packets, frames and parameter sets decoded, so the loops can show they reach past the
/// first byte.
fn exercise(bytes: &[u8]) -> usize {
    let mut decoded = 0;
    for cid_len in [0, 8, 20] {
        for packet in CoalescedPackets::new(bytes, cid_len) {
            let Ok(p) = packet else { break };
            decoded += 1;
            let _ = p.spin();
            let _ = p.versions().count();
            let fb = FirstByte(p.first_byte);
            let _ = fb.check_reserved_bits();
            if let Some(pn_offset) = p.pn_offset {
                if let Ok(pn) = read_truncated_pn(p.packet, pn_offset, fb.pn_len()) {
                    let _ = decode_pn(pn, fb.pn_len(), Some(u64::from(p.first_byte) << 20));
                }
                // Frames start somewhere after the header: try the bytes past the packet number.
                let body = p.packet.get(pn_offset + fb.pn_len()..).unwrap_or(&[]);
                decoded += exercise_frames(body);
            }
        }
    }
    let _ = VersionInvariants::parse(bytes);
    decoded += exercise_frames(bytes);
    for side in [Side::Client, Side::Server] {
        if let Ok(tp) = TransportParameters::decode(bytes, side) {
            decoded += 1;
            // Whatever decodes re-encodes to something that decodes the same.
            let mut buf = Vec::new();
            tp.encode(&mut buf);
            assert_eq!(TransportParameters::decode(&buf, side).unwrap(), tp);
        }
    }
    decoded
}

fn exercise_frames(bytes: &[u8]) -> usize {
    let mut decoded = 0;
    for frame in Frames::new(bytes) {
        let Ok(frame) = frame else { break };
        decoded += 1;
        if let Frame::Ack(ack) = &frame {
            let mut prev: Option<u64> = None;
            for r in ack.ranges() {
                assert!(r.start() <= r.end());
                // Descending with at least one missing packet between ranges.
                if let Some(p) = prev {
                    assert!(*r.end() + 1 < p, "{ack:?}");
                }
                prev = Some(*r.start());
            }
            let _ = ack.ack_delay_micros(20);
        }
        let _ = frame.ty().is_ack_eliciting();
        // Everything decoded re-encodes (STREAM without Length may grow by the Length field).
        let mut buf = Vec::new();
        frame.encode(&mut buf);
        assert_eq!(buf.len(), frame.encoded_len());
    }
    decoded
}

/// Valid inputs to mutate: coalesced packets, a frame sequence, transport parameters.
fn corpus() -> Vec<Vec<u8>> {
    let dcid = ConnectionId::new(&[0xd0; 8]).unwrap();
    let scid = ConnectionId::new(&[0x5c; 8]).unwrap();
    let mut frames = Vec::new();
    for f in sample_frames() {
        f.encode(&mut frames);
    }
    let mut datagram = Vec::new();
    for (i, header) in [
        Header::Initial {
            version: QUIC_VERSION_1,
            dcid,
            scid,
            token: b"token",
        },
        Header::Handshake {
            version: QUIC_VERSION_1,
            dcid,
            scid,
        },
        Header::OneRtt {
            dcid,
            spin: true,
            key_phase: false,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let pn = 1000 * i as u64;
        let layout = header.write(&mut datagram, pn, pn_len_for(pn, None));
        datagram.extend_from_slice(&frames);
        layout.set_length(&mut datagram, 16);
        datagram.extend_from_slice(&[0xaa; 16]);
    }
    let mut vn = Vec::new();
    write_version_negotiation(&mut vn, &scid, &dcid, &[QUIC_VERSION_1, 0x1a2a3a4a], 0x55);
    let mut tp = Vec::new();
    full_params().encode(&mut tp);
    vec![datagram, frames, vn, tp]
}

fn sample_frames() -> Vec<Frame<'static>> {
    let mut ranges = RangeSet::new(8);
    for pn in [1, 2, 3, 7, 9, 10, 30] {
        ranges.insert_one(pn);
    }
    let mut ack = Vec::new();
    encode_ack(&mut ack, &ranges, 40, Some(&EcnCounts::default()), 8);
    let ack: &'static [u8] = Box::leak(ack.into_boxed_slice());
    let mut frames: Vec<Frame<'static>> = Frames::new(ack).map(Result::unwrap).collect();
    frames.extend([
        Frame::Ping,
        Frame::Crypto {
            offset: 5,
            data: b"hello",
        },
        Frame::Stream(StreamFrame {
            stream_id: 4,
            offset: 100,
            data: b"stream data",
            fin: true,
        }),
        Frame::NewConnectionId {
            seq: 2,
            retire_prior_to: 1,
            cid: ConnectionId::new(&[1; 8]).unwrap(),
            reset_token: [2; 16],
        },
        Frame::MaxStreams {
            dir: StreamDir::Uni,
            max: 10,
        },
        Frame::ConnectionClose(ConnectionClose {
            error_code: 1,
            frame_type: Some(6),
            reason: b"why",
        }),
        Frame::NewToken { token: b"t" },
        Frame::Datagram(DatagramFrame {
            data: b"datagram",
            with_len: true,
        }),
        Frame::Padding { len: 3 },
    ]);
    frames
}

fn full_params() -> TransportParameters {
    TransportParameters {
        original_destination_connection_id: Some(ConnectionId::new(&[1; 8]).unwrap()),
        max_idle_timeout: 30_000,
        stateless_reset_token: Some([7; 16]),
        initial_max_data: 1 << 20,
        initial_max_streams_bidi: 100,
        disable_active_migration: true,
        preferred_address: Some(PreferredAddress {
            ipv4: Some("192.0.2.1:4433".parse().unwrap()),
            ipv6: None,
            connection_id: ConnectionId::new(&[9; 4]).unwrap(),
            stateless_reset_token: [3; 16],
        }),
        initial_source_connection_id: Some(ConnectionId::EMPTY),
        ..Default::default()
    }
}

/// Flip, overwrite, insert, delete or truncate a few bytes.
fn mutate(rng: &mut impl RngCore, input: &mut Vec<u8>) {
    for _ in 0..rng.gen_range(1..=4) {
        let len = input.len();
        match rng.gen_range(0..6) {
            0 if len > 0 => input[rng.gen_range(0..len)] ^= 1 << rng.gen_range(0..8),
            1 if len > 0 => input[rng.gen_range(0..len)] = rng.gen(),
            2 => input.insert(rng.gen_range(0..=len), rng.gen()),
            3 if len > 0 => {
                input.remove(rng.gen_range(0..len));
            }
            4 => input.truncate(rng.gen_range(0..=len)),
            // A varint-looking byte: these steer lengths and counts to extremes.
            _ if len > 0 => {
                input[rng.gen_range(0..len)] = [0x3f, 0x7f, 0xbf, 0xff, 0x00][rng.gen_range(0..5)]
            }
            _ => {}
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

#[test]
fn a_million_random_and_mutated_inputs() {
    let seed = std::env::var("RECOUP_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_c0dec);
    const INPUTS: usize = 1_000_000;
    let corpus = corpus();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut input = Vec::with_capacity(256);
    let (mut mutated_decoded, mut random_decoded) = (0usize, 0usize);
    for i in 0..INPUTS {
        input.clear();
        if i % 2 == 0 {
            let len = rng.gen_range(0..64);
            input.resize(len, 0);
            rng.fill_bytes(&mut input);
        } else {
            input.extend_from_slice(&corpus[rng.gen_range(0..corpus.len())]);
            mutate(&mut rng, &mut input);
        }
        match std::panic::catch_unwind(|| exercise(&input)) {
            Ok(n) if i % 2 == 0 => random_decoded += n,
            Ok(n) => mutated_decoded += n,
            Err(panic) => {
                eprintln!(
                    "decoder panicked: RECOUP_SEED={seed} input #{i} = {}",
                    hex::encode(&input)
                );
                std::panic::resume_unwind(panic);
            }
        }
    }
    println!(
        "RECOUP_SEED={seed}: {INPUTS} inputs, {random_decoded} items decoded from random ones, \
         {mutated_decoded} from mutated ones"
    );
    // Mutations of valid inputs mostly still decode in part: several items per input on average.
    assert!(
        mutated_decoded > INPUTS,
        "RECOUP_SEED={seed}: mutated inputs decoded only {mutated_decoded} items"
    );
    assert!(random_decoded > INPUTS / 10, "RECOUP_SEED={seed}");
}

fn arb_cid() -> impl Strategy<Value = ConnectionId> {
    prop::collection::vec(any::<u8>(), 0..=20).prop_map(|b| ConnectionId::new(&b).unwrap())
}

fn varint() -> impl Strategy<Value = u64> {
    prop_oneof![0..64u64, 0..16_384u64, 0..=VarInt::MAX.into_inner()]
}

/// An arbitrary frame built over `data`.
fn build_frame<'a>(
    kind: u8,
    [a, b, c]: [u64; 3],
    data: &'a [u8],
    cid: ConnectionId,
    bytes8: [u8; 8],
) -> Frame<'a> {
    let max = VarInt::MAX.into_inner();
    let dir = if a % 2 == 0 {
        StreamDir::Bidi
    } else {
        StreamDir::Uni
    };
    match kind % 20 {
        0 => Frame::Padding {
            len: 1 + (a % 100) as usize,
        },
        1 => Frame::Ping,
        2 => Frame::ResetStream {
            stream_id: a,
            error_code: b,
            final_size: c,
        },
        3 => Frame::StopSending {
            stream_id: a,
            error_code: b,
        },
        4 => Frame::Crypto {
            offset: b.min(max - data.len() as u64),
            data,
        },
        5 => Frame::NewToken {
            token: if data.is_empty() { b"x" } else { data },
        },
        6 => Frame::Stream(StreamFrame {
            stream_id: a,
            offset: b.min(max - data.len() as u64),
            data,
            fin: c % 2 == 0,
        }),
        7 => Frame::MaxData(a),
        8 => Frame::MaxStreamData {
            stream_id: a,
            max: b,
        },
        9 => Frame::MaxStreams {
            dir,
            max: b % (MAX_STREAM_COUNT + 1),
        },
        10 => Frame::DataBlocked(a),
        11 => Frame::StreamDataBlocked {
            stream_id: a,
            limit: b,
        },
        12 => Frame::StreamsBlocked {
            dir,
            limit: b % (MAX_STREAM_COUNT + 1),
        },
        13 => Frame::NewConnectionId {
            seq: a.max(b),
            retire_prior_to: a.min(b),
            cid: if cid.is_empty() {
                ConnectionId::new(&[1]).unwrap()
            } else {
                cid
            },
            reset_token: [bytes8, bytes8].concat().try_into().unwrap(),
        },
        14 => Frame::RetireConnectionId { seq: a },
        15 => Frame::PathChallenge(bytes8),
        16 => Frame::PathResponse(bytes8),
        17 => Frame::ConnectionClose(ConnectionClose {
            error_code: a,
            frame_type: (b % 2 == 0).then_some(c),
            reason: data,
        }),
        18 => Frame::HandshakeDone,
        // With its Length field: a 0x30 frame would swallow the frames after it.
        19 => Frame::Datagram(DatagramFrame {
            data,
            with_len: true,
        }),
        _ => Frame::Ping,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = exercise(&bytes);
    }

    #[test]
    fn mutated_valid_inputs_never_panic(which in 0usize..4, seed in any::<u64>()) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut input = corpus()[which].clone();
        mutate(&mut rng, &mut input);
        let _ = exercise(&input);
    }

    #[test]
    fn frames_round_trip(
        specs in prop::collection::vec(
            (any::<u8>(), [varint(), varint(), varint()],
             prop::collection::vec(any::<u8>(), 0..40), arb_cid(), any::<[u8; 8]>()),
            1..8,
        )
    ) {
        let frames: Vec<Frame<'_>> = specs
            .iter()
            .map(|(k, v, d, cid, b8)| build_frame(*k, *v, d, *cid, *b8))
            .collect();
        let mut buf = Vec::new();
        for f in &frames {
            let before = buf.len();
            f.encode(&mut buf);
            prop_assert_eq!(buf.len() - before, f.encoded_len());
        }
        let decoded: Vec<Frame<'_>> = Frames::new(&buf).collect::<Result<_, _>>().unwrap();
        // Consecutive PADDING frames decode as one.
        let mut expected: Vec<Frame<'_>> = Vec::new();
        for f in frames {
            match (expected.last_mut(), f) {
                (Some(Frame::Padding { len }), Frame::Padding { len: more }) => *len += more,
                (_, f) => expected.push(f),
            }
        }
        prop_assert_eq!(decoded, expected);
    }

    #[test]
    fn ack_frames_round_trip(
        pns in prop::collection::vec(0u64..5_000, 1..200),
        delay in varint(),
        max_ranges in 1usize..40,
        ecn in prop::option::of((varint(), varint(), varint())),
    ) {
        let mut set = RangeSet::new(1000);
        for pn in pns {
            set.insert_one(pn);
        }
        let ecn = ecn.map(|(ect0, ect1, ce)| EcnCounts { ect0, ect1, ce });
        let mut buf = Vec::new();
        prop_assert!(encode_ack(&mut buf, &set, delay, ecn.as_ref(), max_ranges));
        let decoded: Vec<Frame<'_>> = Frames::new(&buf).collect::<Result<_, _>>().unwrap();
        let [Frame::Ack(ack)] = decoded[..] else { panic!("{decoded:?}") };
        prop_assert_eq!(ack.ack_delay, delay);
        prop_assert_eq!(ack.ecn, ecn);
        let got: Vec<_> = ack.ranges().map(|r| *r.start()..*r.end() + 1).collect();
        let want: Vec<_> = set.iter_desc().take(max_ranges).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn transport_params_round_trip(
        cids in prop::collection::vec(prop::option::of(arb_cid()), 3),
        ints in prop::collection::vec(varint(), 8),
        exp in 0u64..=20,
        delay in 0u64..(1 << 14),
        udp in 1200u64..=65_527,
        limit in 2u64..100,
        streams in (0..=MAX_STREAM_COUNT, 0..=MAX_STREAM_COUNT),
        flags in any::<(bool, bool)>(),
        pa_cid in arb_cid(),
    ) {
        let p = TransportParameters {
            original_destination_connection_id: cids[0],
            max_idle_timeout: ints[0],
            stateless_reset_token: flags.0.then_some([5; 16]),
            max_udp_payload_size: udp,
            initial_max_data: ints[1],
            initial_max_stream_data_bidi_local: ints[2],
            initial_max_stream_data_bidi_remote: ints[3],
            initial_max_stream_data_uni: ints[4],
            initial_max_streams_bidi: streams.0,
            initial_max_streams_uni: streams.1,
            ack_delay_exponent: exp,
            max_ack_delay: delay,
            disable_active_migration: flags.1,
            preferred_address: (!pa_cid.is_empty()).then(|| PreferredAddress {
                ipv4: None,
                ipv6: Some(std::net::SocketAddrV6::new(
                    std::net::Ipv6Addr::from(u128::from(ints[5])), 443, 0, 0)),
                connection_id: pa_cid,
                stateless_reset_token: [1; 16],
            }),
            active_connection_id_limit: limit,
            initial_source_connection_id: cids[1],
            retry_source_connection_id: cids[2],
            recoup_fec: ints[0] % 2 == 1,
            max_datagram_frame_size: ints[6],
        };
        let mut buf = Vec::new();
        p.encode(&mut buf);
        prop_assert_eq!(TransportParameters::decode(&buf, Side::Server).unwrap(), p.clone());
        // A client may send only the non-server-only subset.
        let client = TransportParameters {
            original_destination_connection_id: None,
            stateless_reset_token: None,
            preferred_address: None,
            retry_source_connection_id: None,
            ..p
        };
        let mut buf = Vec::new();
        client.encode(&mut buf);
        prop_assert_eq!(TransportParameters::decode(&buf, Side::Client).unwrap(), client);
    }

    #[test]
    fn headers_round_trip(
        dcid in arb_cid(),
        scid in arb_cid(),
        token in prop::collection::vec(any::<u8>(), 0..50),
        kind in 0u8..4,
        pn in 0u64..(1 << 32),
        largest_acked in prop::option::of(0u64..(1 << 32)),
        payload_len in 0usize..200,
        bits in any::<(bool, bool)>(),
    ) {
        let largest_acked = largest_acked.map(|l| l.min(pn.saturating_sub(1)));
        let header = match kind {
            0 => Header::Initial { version: QUIC_VERSION_1, dcid, scid, token: &token },
            1 => Header::ZeroRtt { version: QUIC_VERSION_1, dcid, scid },
            2 => Header::Handshake { version: QUIC_VERSION_1, dcid, scid },
            _ => Header::OneRtt { dcid, spin: bits.0, key_phase: bits.1 },
        };
        let pn_len = pn_len_for(pn, largest_acked);
        let mut buf = vec![0xee; 3]; // The header need not start the buffer.
        let layout = header.write(&mut buf, pn, pn_len);
        prop_assert_eq!(buf.len() - layout.start, header.encoded_len(pn_len));
        buf.resize(buf.len() + payload_len, 0);
        layout.set_length(&mut buf, 16);
        buf.resize(buf.len() + 16, 0);
        let p = recoup_transport::packet::PartialDecode::parse(&buf[3..], dcid.len()).unwrap();
        prop_assert_eq!(p.ty, header.ty());
        prop_assert_eq!(p.dcid, dcid);
        prop_assert_eq!(p.packet_len(), buf.len() - 3);
        prop_assert_eq!(p.pn_offset, Some(layout.pn_offset - 3));
        let fb = FirstByte(p.first_byte);
        prop_assert_eq!(fb.pn_len(), pn_len);
        prop_assert!(fb.check_reserved_bits().is_ok());
        let truncated = read_truncated_pn(p.packet, layout.pn_offset - 3, pn_len).unwrap();
        let largest_received = largest_acked.or(pn.checked_sub(1));
        prop_assert_eq!(decode_pn(truncated, pn_len, largest_received), pn);
        if kind < 3 {
            prop_assert_eq!(p.scid, scid);
        } else {
            prop_assert_eq!(p.spin(), Some(bits.0));
            prop_assert_eq!(fb.key_phase(), bits.1);
        }
        if kind == 0 {
            prop_assert_eq!(p.token, &token[..]);
        }
    }
}

#[test]
fn varint_writer_matches_reader() {
    let mut buf = Vec::new();
    for v in [0, 63, 64, 16_383, 16_384, VarInt::MAX.into_inner()] {
        buf.clear();
        buf.put_varint(v);
        assert_eq!(
            recoup_transport::coding::Reader::new(&buf)
                .varint("v")
                .unwrap(),
            v
        );
    }
}

/// A REPAIR frame (recoup's FEC extension) from random values.
fn repair_frame(
    first_pn: u64,
    span: u64,
    window: u128,
    m: u16,
    i: u16,
    symbol: &[u8],
) -> Frame<'_> {
    let span = span % 96 + 1;
    // First and last packet of the span always in the window, others as drawn.
    let window = (window & ((1u128 << span) - 1)) | 1 | 1 << (span - 1);
    let repairs = m % 96 + 1;
    Frame::Repair(RepairFrame {
        first_pn,
        span,
        window,
        repairs,
        index: i % repairs,
        symbol,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The REPAIR parser's randomized test (the fuzz target `repair_frame` runs the same checks
    /// under cargo-fuzz): valid frames round-trip; mutated ones fail with FRAME_ENCODING_ERROR
    /// naming the frame type, and what still parses never panics the receiver, which may only
    /// answer PROTOCOL_VIOLATION.
    #[test]
    fn repair_frames_round_trip_and_mutations_fail_cleanly(
        first_pn in 0u64..1 << 40,
        span in any::<u64>(),
        window in any::<u128>(),
        m in any::<u16>(),
        i in any::<u16>(),
        half in 1usize..700,
        seed in any::<u64>(),
        carrier in 0u64..300,
    ) {
        let symbol: Vec<u8> = (0..half * 2).map(|j| (j as u64 ^ seed) as u8).collect();
        let frame = repair_frame(first_pn % 200, span, window, m, i, &symbol);
        let mut buf = Vec::new();
        frame.encode(&mut buf);
        prop_assert_eq!(buf.len(), frame.encoded_len());
        let decoded: Vec<Frame<'_>> = Frames::new(&buf).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&decoded[..], &[frame][..]);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut mutated = buf.clone();
        mutate(&mut rng, &mut mutated);
        let mut receiver = FecReceiver::default();
        for pn in (0..200).step_by(3) {
            receiver.on_source(pn, vec![pn as u8; 1 + (pn as usize * 7) % 1300]);
        }
        for f in Frames::new(&mutated) {
            match f {
                Err(e) => {
                    // A mutated type byte may make another frame (or a non-minimal type).
                    if e.frame_type == Some(0x3f5e_c0de) {
                        prop_assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR);
                    }
                    break;
                }
                Ok(Frame::Repair(r)) => {
                    if let Err(e) = receiver.on_repair(carrier, &r) {
                        prop_assert_eq!(e.code, TransportErrorCode::PROTOCOL_VIOLATION);
                    }
                }
                Ok(_) => {}
            }
        }
    }
}
