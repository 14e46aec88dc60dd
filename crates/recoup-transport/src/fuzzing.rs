//! The fuzz targets' bodies (feature `fuzzing`; docs/FUZZING.md). Each takes arbitrary bytes and
//! panics only when a property it checks fails: cargo-fuzz runs them under libFuzzer
//! (`fuzz/fuzz_targets/`), and `tests/fuzz_replay.rs` replays every file of `fuzz/corpus` and
//! `fuzz/regressions` through the same functions on the stable toolchain.
//!
//! Not an API: names and input formats change whenever a target is improved.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use recoup_time::Instant;

use crate::cid::ConnectionId;
use crate::coding::BufMutExt;
use crate::config::{
    ClientConfig, DatagramConfig, ServerConfig, TransportConfig, MIN_INITIAL_SIZE,
};
use crate::crypto::{initial_keys, Side};
use crate::endpoint::{ConnectionHandle, Endpoint};
use crate::error::TransportErrorCode;
use crate::fec::FecReceiver;
use crate::frame::{Frame, FrameType, Frames};
use crate::packet::{
    decode_pn, read_truncated_pn, CoalescedPackets, FirstByte, Header, PacketType, PartialDecode,
    VersionInvariants,
};
use crate::retry::tag_is_valid;
use crate::transport_params::{self, TransportParameters};

/// A fuzz target: its name (the directory of its corpus) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by the name cargo-fuzz and the corpus directories use.
pub const TARGETS: &[Target] = &[
    ("packet_header", packet_header),
    ("frames", frames),
    ("repair_frame", repair_frame),
    ("transport_params", transport_params),
    ("server_datagram", server_datagram),
    ("established", established),
];

/// The client address the harnesses' datagrams come from, and a second one (a rebinding).
pub const CLIENT: &str = "10.0.0.1:50000";
const CLIENT_REBOUND: &str = "10.0.0.1:50001";
const SERVER: &str = "10.0.0.2:4433";

/// Coalesced-packet splitting and header parsing (RFC 9000 §12.2, §17): long and short headers,
/// Version Negotiation, Retry. Input: one byte choosing the local CID length, then a datagram.
/// What parses must be consistent with the datagram and, for packets we could send, re-written
/// by [`Header::write`] it must parse back to the same header.
pub fn packet_header(data: &[u8]) {
    let Some((&cid_len, datagram)) = data.split_first() else {
        return;
    };
    let cid_len = usize::from(cid_len % 21);
    let mut total = 0;
    for packet in CoalescedPackets::new(datagram, cid_len) {
        let Ok(p) = packet else { break };
        total += p.packet_len();
        assert!(total <= datagram.len(), "packets run past the datagram");
        match p.ty {
            PacketType::VersionNegotiation => {
                assert_eq!(p.versions().count() * 4 + header_len(&p), p.packet_len());
            }
            PacketType::Retry => {
                // RFC 9001 §5.8: the tag is checked against whatever ODCID the client sent.
                let _ = tag_is_valid(&p.dcid, p.packet);
                assert_eq!(header_len(&p) + p.token.len() + 16, p.packet_len());
            }
            _ => rewrite_header(&p, cid_len),
        }
        let fb = FirstByte(p.first_byte);
        let _ = fb.check_reserved_bits();
        if let Some(pn_offset) = p.pn_offset {
            if let Ok(pn) = read_truncated_pn(p.packet, pn_offset, fb.pn_len()) {
                let _ = decode_pn(pn, fb.pn_len(), Some(u64::from(p.first_byte) << 24));
            }
        }
    }
    let _ = VersionInvariants::parse(datagram);
}

/// Bytes of a long header up to its type-specific fields.
fn header_len(p: &PartialDecode<'_>) -> usize {
    1 + 4 + 1 + p.dcid.len() + 1 + p.scid.len()
}

/// Writes the header `p` describes and checks that it parses back to the same fields.
fn rewrite_header(p: &PartialDecode<'_>, cid_len: usize) {
    let header = match p.ty {
        PacketType::Initial => Header::Initial {
            version: p.version,
            dcid: p.dcid,
            scid: p.scid,
            token: p.token,
        },
        PacketType::ZeroRtt => Header::ZeroRtt {
            version: p.version,
            dcid: p.dcid,
            scid: p.scid,
        },
        PacketType::Handshake => Header::Handshake {
            version: p.version,
            dcid: p.dcid,
            scid: p.scid,
        },
        PacketType::OneRtt => Header::OneRtt {
            dcid: p.dcid,
            spin: p.spin().unwrap_or(false),
            key_phase: false,
        },
        PacketType::Retry | PacketType::VersionNegotiation => return,
    };
    let mut buf = Vec::new();
    let layout = header.write(&mut buf, 0, 1);
    // A payload long enough for the header-protection sample (RFC 9001 §5.4.2).
    buf.resize(layout.payload_offset() + 20, 0);
    layout.set_length(&mut buf, 16);
    buf.resize(buf.len() + 16, 0);
    let back = PartialDecode::parse(&buf, cid_len).expect("a written header parses");
    assert_eq!(
        (back.ty, back.version, back.dcid, back.scid, back.token),
        (p.ty, p.version, p.dcid, p.scid, p.token),
        "written header parses to other fields"
    );
    assert_eq!(back.packet_len(), buf.len());
}

/// Frame decoding (RFC 9000 §19) over an arbitrary decrypted payload: what decodes re-encodes to
/// the size it reports and decodes again to the same frame; ACK ranges descend without touching.
pub fn frames(payload: &[u8]) {
    for frame in Frames::new(payload) {
        let Ok(frame) = frame else { break };
        if let Frame::Ack(ack) = &frame {
            let mut prev: Option<u64> = None;
            for r in ack.ranges() {
                assert!(r.start() <= r.end(), "ACK range {r:?} runs backwards");
                if let Some(p) = prev {
                    assert!(*r.end() + 1 < p, "ACK range {r:?} touches the one above");
                }
                prev = Some(*r.start());
            }
        }
        let mut buf = Vec::new();
        frame.encode(&mut buf);
        assert_eq!(buf.len(), frame.encoded_len(), "{frame:?}");
        let again: Vec<_> = Frames::new(&buf).collect();
        assert_eq!(again, [Ok(frame)], "re-encoded frame decodes differently");
    }
}

/// recoup's REPAIR frame (docs/FEC.md). Input: the carrying packet's number (2 bytes, big
/// endian), then the frame body after its type. The parser either fails with
/// FRAME_ENCODING_ERROR or yields a frame that re-encodes to its size, and a receiver fed that
/// frame (after some source symbols) fails only with PROTOCOL_VIOLATION.
pub fn repair_frame(data: &[u8]) {
    let (carrier, body) = match data {
        [a, b, rest @ ..] => (u64::from(u16::from_be_bytes([*a, *b])), rest),
        _ => return,
    };
    // The type as the 4-byte varint it is on the wire (RFC 9000 §16: 0xbf5ec0de), not its bare
    // hex digits, which read as a 1-byte type 0x3f and never reach the REPAIR parser.
    let mut payload = Vec::new();
    payload.put_varint(FrameType::REPAIR.0);
    payload.extend_from_slice(body);
    let mut receiver = FecReceiver::default();
    for pn in 0..8u64 {
        receiver.on_source(pn * 3, vec![pn as u8; 40 + pn as usize * 100]);
    }
    // Only the first frame is the REPAIR frame under test: whatever follows its symbol is
    // another frame, whose errors name its own type.
    match Frames::new(&payload).next() {
        Some(Err(e)) => {
            assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR);
            assert_eq!(e.frame_type, Some(FrameType::REPAIR.0));
        }
        Some(Ok(Frame::Repair(r))) => {
            let mut buf = Vec::new();
            Frame::Repair(r).encode(&mut buf);
            assert_eq!(buf.len(), Frame::Repair(r).encoded_len());
            if let Err(e) = receiver.on_repair(carrier, &r) {
                assert_eq!(e.code, TransportErrorCode::PROTOCOL_VIOLATION);
            }
        }
        other => panic!("a REPAIR type decodes as {other:?}"),
    }
}

/// Transport parameter decoding and validation (RFC 9000 §18) from either side; what decodes
/// re-encodes and decodes to the same parameters.
pub fn transport_params(data: &[u8]) {
    for side in [
        transport_params::Side::Client,
        transport_params::Side::Server,
    ] {
        if let Ok(params) = TransportParameters::decode(data, side) {
            let mut buf = Vec::new();
            params.encode(&mut buf);
            assert_eq!(TransportParameters::decode(&buf, side).ok(), Some(params));
        }
    }
}

/// Reads a script of records `[op, len_hi, len_lo, bytes...]`; a length past the end takes what
/// is left.
fn records(mut data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let (&op, rest) = data.split_first()?;
        let (len, rest) = match rest {
            [a, b, rest @ ..] => (usize::from(u16::from_be_bytes([*a, *b])), rest),
            _ => (rest.len(), &[][..]),
        };
        let (body, rest) = rest.split_at(len.min(rest.len()));
        data = rest;
        Some((op, body))
    })
}

/// One ALPN for every harness connection.
const ALPN: &[&[u8]] = &[b"hq-interop"];

/// TLS for the harnesses, made once: a seeded provider leaks a few bytes per call, and making a
/// certificate per input would dominate the run.
fn tls() -> &'static (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>) {
    static TLS: OnceLock<(Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>)> = OnceLock::new();
    TLS.get_or_init(|| {
        crate::simulation_tls(1, "localhost", ALPN, crate::Protection::Aead).expect("seeded TLS")
    })
}

fn server_endpoint(fec_receive: bool, datagrams: bool) -> Endpoint {
    let transport = TransportConfig {
        seed: 2,
        fec_receive,
        datagrams: datagram_config(datagrams),
        ..TransportConfig::default()
    };
    let cid_len = transport.local_cid_len;
    Endpoint::new(
        Some(ServerConfig {
            transport,
            tls: Arc::clone(&tls().1),
        }),
        cid_len,
    )
}

/// DATAGRAM frames (RFC 9221) accepted up to 1200-byte frames when `on`.
fn datagram_config(on: bool) -> DatagramConfig {
    DatagramConfig {
        max_frame_size: if on { 1200 } else { 0 },
        ..DatagramConfig::default()
    }
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("harness address")
}

/// What the harnesses do after each input: read everything the endpoint sends and due timers.
/// Bounded, so a livelock shows up as the fuzzer's timeout rather than an endless loop here.
fn drain(endpoint: &mut Endpoint, now: Instant) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut sent = Vec::new();
    while let Some(t) = endpoint.poll_transmit(now) {
        sent.push((t.destination, t.contents));
        assert!(sent.len() < 10_000, "endpoint keeps sending at one instant");
    }
    if endpoint.poll_timeout().is_some_and(|t| t <= now) {
        endpoint.handle_timeout(now);
    }
    while endpoint.accept().is_some() {}
    sent
}

/// A client Initial packet (RFC 9000 §17.2.2) carrying `frames`, padded to 1200 bytes and
/// protected with the Initial keys of `dcid` (RFC 9001 §5.2), as a client would send it.
#[must_use]
pub fn sealed_initial(dcid: &ConnectionId, scid: &ConnectionId, pn: u64, frames: &[u8]) -> Vec<u8> {
    let keys = initial_keys(dcid, Side::Client);
    let mut buf = Vec::new();
    let layout = Header::Initial {
        version: crate::packet::QUIC_VERSION_1,
        dcid: *dcid,
        scid: *scid,
        token: &[],
    }
    .write(&mut buf, pn, 4);
    buf.extend_from_slice(frames);
    let tag = keys.local.tag_len();
    // PADDING frames (zeros) up to the minimum Initial size (RFC 9000 §14.1), within the 2-byte
    // Length field's reach.
    let target = (MIN_INITIAL_SIZE - tag)
        .max(buf.len())
        .min(16_383 + layout.pn_offset - tag);
    buf.resize(target, 0);
    layout.set_length(&mut buf, tag);
    keys.local
        .seal(pn, &mut buf, layout.pn_offset, layout.pn_len)
        .expect("4-byte packet number leaves room for the sample");
    buf
}

/// Splits `[dcid_len, dcid.., scid_len, scid.., rest..]`, lengths taken modulo 21.
fn two_cids(body: &[u8]) -> Option<(ConnectionId, ConnectionId, &[u8])> {
    let (&n, rest) = body.split_first()?;
    let (dcid, rest) = rest.split_at_checked(usize::from(n % 21))?;
    let (&m, rest) = rest.split_first()?;
    let (scid, rest) = rest.split_at_checked(usize::from(m % 21))?;
    Some((
        ConnectionId::new(dcid).ok()?,
        ConnectionId::new(scid).ok()?,
        rest,
    ))
}

/// The server's datagram entry point ([`Endpoint::handle_datagram`]) from a fresh endpoint: no
/// input may panic it. Input: a flags byte (bit 0 requires Retry, bit 1 sets a stateless reset
/// key, bit 2 accepts FEC), then records (see `records`) whose `op % 4` says:
/// 0 and 1: a raw datagram from the client's address or a second one;
/// 2: `[dcid_len, dcid, scid_len, scid, frames]`, the frames sealed into a valid client Initial
/// (so they reach the connection past packet protection);
/// 3: time moves on by the first byte times 10 ms.
pub fn server_datagram(data: &[u8]) {
    let Some((&flags, script)) = data.split_first() else {
        return;
    };
    let mut server = server_endpoint(flags & 4 != 0, false);
    if flags & 1 != 0 {
        server.require_retry(&[7; 32]);
    }
    if flags & 2 != 0 {
        server.set_stateless_reset_key(&[9; 32]);
    }
    let mut now = Instant::ZERO;
    let mut pn = 0;
    for (op, body) in records(script) {
        match op % 4 {
            0 => _ = server.handle_datagram(now, addr(CLIENT), body),
            1 => _ = server.handle_datagram(now, addr(CLIENT_REBOUND), body),
            2 => {
                let Some((dcid, scid, frames)) = two_cids(body) else {
                    continue;
                };
                let datagram = sealed_initial(&dcid, &scid, pn, frames);
                pn += 1;
                _ = server.handle_datagram(now, addr(CLIENT), &datagram);
            }
            _ => {
                let step = body.first().copied().unwrap_or(1);
                now += Duration::from_millis(10 * u64::from(step));
            }
        }
        drain(&mut server, now);
    }
}

/// A client and a server endpoint, handshake complete, on virtual time.
#[derive(Debug)]
pub struct Established {
    pub now: Instant,
    pub client: Endpoint,
    pub server: Endpoint,
    pub client_h: ConnectionHandle,
    pub server_h: ConnectionHandle,
}

impl Established {
    /// Runs a handshake with the harness's TLS and seeds; `fec` makes both ends negotiate FEC,
    /// `datagrams` DATAGRAM frames (RFC 9221).
    #[must_use]
    pub fn new(fec: bool, datagrams: bool) -> Self {
        let transport = TransportConfig {
            seed: 1,
            fec_receive: fec,
            datagrams: datagram_config(datagrams),
            ..TransportConfig::default()
        };
        let cid_len = transport.local_cid_len;
        let mut client = Endpoint::new(None, cid_len);
        let client_h = client
            .connect(
                Instant::ZERO,
                &ClientConfig {
                    transport,
                    tls: Arc::clone(&tls().0),
                    server_name: "localhost".into(),
                },
                addr(SERVER),
            )
            .expect("client connection");
        let mut this = Self {
            now: Instant::ZERO,
            client,
            server: server_endpoint(fec, datagrams),
            client_h,
            server_h: ConnectionHandle(0),
        };
        for _ in 0..20 {
            this.exchange();
            let up = |e: &Endpoint, h| e.connection(h).is_some_and(|c| c.is_established());
            if up(&this.client, this.client_h) && up(&this.server, this.server_h) {
                return this;
            }
            this.now += Duration::from_millis(10);
        }
        panic!("harness handshake did not complete");
    }

    /// Delivers what each end sends to the other until both are quiet at this instant.
    pub fn exchange(&mut self) {
        for _ in 0..16 {
            let to_server = drain(&mut self.client, self.now);
            let to_client = drain(&mut self.server, self.now);
            if to_server.is_empty() && to_client.is_empty() {
                return;
            }
            for (_, d) in to_server {
                if let Some(h) = self.server.handle_datagram(self.now, addr(CLIENT), &d) {
                    self.server_h = h;
                }
            }
            for (to, d) in to_client {
                if to == addr(CLIENT) {
                    _ = self.client.handle_datagram(self.now, addr(SERVER), &d);
                }
            }
        }
    }
}

/// Decrypted 1-RTT payloads into an established connection (a handshake per input): every frame
/// type reaches the connection's frame handling on either side. Input: a flags byte (bit 0
/// negotiates FEC, bit 1 DATAGRAM frames), then records (see `records`) whose `op % 4` says:
/// 0: a 1-RTT payload the client seals with its real keys, to the server;
/// 1: the same from the server to the client;
/// 2: a raw datagram to the server;
/// 3: time moves on by the first byte times 10 ms and both ends exchange what they send.
pub fn established(data: &[u8]) {
    let Some((&flags, script)) = data.split_first() else {
        return;
    };
    let mut e = Established::new(flags & 1 != 0, flags & 2 != 0);
    for (op, body) in records(script) {
        let now = e.now;
        match op % 4 {
            0 => {
                let c = e.client.connection_mut(e.client_h);
                if let Some(d) = c.and_then(|c| c.seal_raw_1rtt_for_test(now, body, 0)) {
                    _ = e.server.handle_datagram(now, addr(CLIENT), &d);
                }
            }
            1 => {
                let s = e.server.connection_mut(e.server_h);
                if let Some(d) = s.and_then(|c| c.seal_raw_1rtt_for_test(now, body, 0)) {
                    _ = e.client.handle_datagram(now, addr(SERVER), &d);
                }
            }
            2 => _ = e.server.handle_datagram(now, addr(CLIENT), body),
            _ => {
                let step = body.first().copied().unwrap_or(1);
                e.now += Duration::from_millis(10 * u64::from(step));
                e.exchange();
            }
        }
    }
    e.exchange();
}
