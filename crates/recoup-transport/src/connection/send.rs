//! Building datagrams: which space, which frames, in what order, within which limits.

use recoup_recovery::{
    data_send_key, packet_key, DataRange, LossId, RecoveryPolicy, SendKind, SentRange,
};
use recoup_time::Instant;

use super::{Connection, SentFrames, State, Transmit, TransmitInfo};
use crate::cc::CongestionController;
use crate::config::MIN_INITIAL_SIZE;
use crate::crypto::Side;
use crate::frame::{
    crypto_data_fit, encode_ack, encode_stream_header, stream_data_fit, stream_header_len,
    ConnectionClose, Frame, StreamDir,
};
use crate::loss::{SentPacket, SpaceId};
use crate::packet::{pn_len_for, Header, HeaderLayout, QUIC_VERSION_1};
use crate::qlog::{Event, PacketEvent, PacketHeader, QlogFrame, RawInfo, SendKindInfo};
use crate::streams::{Chunk, ControlFrame, StreamId};

/// Room kept for the AEAD tag.
pub(super) const TAG_LEN: usize = 16;
/// At most this many stream frames in one packet (the `fins` bitmask is a u64).
const MAX_STREAM_FRAMES: usize = 64;

/// A packet being written into the datagram, sealed once its contents are final.
pub(super) struct Open {
    space: SpaceId,
    pn: u64,
    layout: HeaderLayout,
    pub(super) frames: SentFrames,
    pub(super) ack_eliciting: bool,
    /// Carries frames other than ACK, PADDING and CONNECTION_CLOSE (counts toward bytes in flight).
    pub(super) in_flight: bool,
    /// qlog frame descriptions, when qlog is on.
    pub(super) qlog_frames: Vec<QlogFrame>,
    /// Carries PATH_CHALLENGE or PATH_RESPONSE: its datagram is padded (RFC 9000 §8.2.1).
    path_probe: bool,
}

impl Connection {
    /// The next datagram to send, if any. Call until it returns `None` after every input.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let mut buf = Vec::new();
        let info = self.poll_transmit_into(now, &mut buf)?;
        Some(info.with_contents(buf))
    }

    /// [`Connection::poll_transmit`] into the caller's buffer: the datagram is appended to `buf`
    /// (nothing is appended when it returns `None`), so a driver can build a GSO batch in place
    /// without a fresh allocation and a copy per datagram.
    #[must_use]
    pub fn poll_transmit_into(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<TransmitInfo> {
        let sent = self.transmit_into(now, buf);
        // A policy's `None` stands for this call only: events and time come before the next.
        self.recovery.copy_declined = false;
        sent
    }

    /// What [`Connection::poll_transmit_into`] sends, within one call.
    fn transmit_into(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<TransmitInfo> {
        match self.state {
            State::Closed | State::Draining { .. } => return None,
            State::Closing { .. } => return self.transmit_close(now).map(|t| t.append_to(buf)),
            _ => {}
        }
        self.maybe_update_keys(now);
        if let Some(t) = self.transmit_off_path_response(now) {
            return Some(t.append_to(buf));
        }
        if let Some(info) = self.transmit_mtu_probe(now, buf) {
            return Some(info);
        }
        let mds = self.path.max_datagram_size;
        self.recovery
            .update_send_state(now, self.streams.has_new_data(), mds);
        self.fec_on_send_state(now);
        let mut limit = mds;
        if let Some(budget) = self.path.amplification_budget() {
            // RFC 9000 §8.1: three times what we received until the address is validated.
            limit = limit.min(budget);
            self.recovery
                .loss
                .set_amplification_blocked(budget < MIN_INITIAL_SIZE, now);
        }
        self.coalesce_finished_copy(now);
        self.datagram_key = None;
        // Offsets below are absolute in `buf`; the datagram starts at `base`.
        let base = buf.len();
        buf.reserve(limit);
        let max_size = limit;
        let limit = base + limit;
        let mut open: Option<Open> = None;
        let mut pad = false;
        for space in SpaceId::ALL {
            if !self.keys.has(space) {
                continue;
            }
            // Space for at least a minimal packet with a tag.
            if buf.len() + 64 > limit {
                break;
            }
            if !self.wants_to_send(space, now) {
                continue;
            }
            if let Some(prev) = open.take() {
                self.seal(now, prev, buf, None);
            }
            let Some(pkt) = self.write_packet(now, space, buf, limit) else {
                continue;
            };
            // RFC 9000 §14.1: datagrams with a client's Initial, or a server's ack-eliciting
            // Initial, are padded to 1200 bytes.
            if space == SpaceId::Initial && (self.side == Side::Client || pkt.ack_eliciting) {
                pad = true;
            }
            pad |= pkt.path_probe;
            open = Some(pkt);
            if space == SpaceId::Initial
                && self.side == Side::Client
                && self.keys.has(SpaceId::Handshake)
            {
                // RFC 9001 §4.9.1: a client discards Initial keys when it first sends a
                // Handshake packet; keep building so the Handshake packet joins this datagram.
            }
        }
        let Some(pkt) = open else {
            self.recovery.pacing_wakeup = if self.state == State::Established {
                // A waiting FEC repair symbol is not counted: asking the scheme has it decide
                // (`poll_repair`), which would move its decisions in time.
                let control = self.control_waiting() || self.datagrams.has_send();
                self.recovery
                    .pacing_wakeup_at(now, self.streams.has_new_data(), control, mds)
            } else {
                None
            };
            self.note_send_stall();
            return None;
        };
        self.recovery.pacing_wakeup = None;
        let pad_to = pad.then_some(base + MIN_INITIAL_SIZE.min(max_size));
        self.seal(now, pkt, buf, pad_to);
        let len = buf.len() - base;
        if len == 0 {
            return None;
        }
        self.on_datagram_sent(now, len);
        Some(TransmitInfo {
            destination: self.path.remote,
            len,
            key: self.datagram_key.take(),
        })
    }

    /// RFC 9001 §5.7: a server holds 1-RTT packets until its handshake completes, so a client
    /// sends a copy of its Finished (its Handshake CRYPTO data) in a Handshake packet beside
    /// every 1-RTT packet until one of its Handshake packets is acknowledged; a lost Finished
    /// then holds up nothing.
    fn coalesce_finished_copy(&mut self, now: Instant) {
        let hs = SpaceId::Handshake;
        if self.side == Side::Client
            && self.state == State::Established
            && self.keys.has(hs)
            && !self.recovery.loss.handshake_ack_received()
            && !self.spaces[hs].crypto_send.has_data()
            && self.wants_to_send(SpaceId::Data, now)
        {
            self.spaces[hs].crypto_send.requeue_unacked();
        }
    }

    fn on_datagram_sent(&mut self, now: Instant, len: usize) {
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += len as u64;
        self.path.on_datagram_sent(len);
        if let Some(pacer) = self.recovery.pacer.as_mut() {
            pacer.on_sent(now, len as u64);
        }
        // RFC 9001 §4.9.1: the client drops Initial keys once it sends a Handshake packet.
        if self.side == Side::Client
            && self.keys.has(SpaceId::Handshake)
            && self.spaces[SpaceId::Handshake].next_pn > 0
        {
            self.discard_space(SpaceId::Initial, now);
        }
    }

    /// Whether `space` has anything to put in a packet right now.
    fn wants_to_send(&mut self, space: SpaceId, now: Instant) -> bool {
        let s = &self.spaces[space];
        if s.ack_due(now) || s.probes > 0 {
            return true;
        }
        let crypto = s.crypto_send.has_data();
        let mds = self.path.max_datagram_size;
        let can_send = self.recovery.congestion_allows(now, mds);
        if crypto {
            return can_send;
        }
        if space != SpaceId::Data || self.state != State::Established {
            return false;
        }
        if self.migration.has_frames_for(self.path.remote) {
            // Path validation is not held back by the congestion window: a new path starts
            // with a fresh one only once validated (RFC 9000 §9.4).
            return true;
        }
        if can_send
            && (self.recovery.lineage.has_retransmit()
                || self.streams.has_new_data()
                || self.control_waiting()
                || self.datagrams.has_send()
                || self.fec_has_repair(now))
        {
            return true;
        }
        if !self.recovery.policy_has_copy(now, mds) {
            return false;
        }
        let has_new_data = self.streams.has_new_data();
        self.recovery.note_copy_held(now, has_new_data, mds);
        can_send || self.recovery.copy_may_exceed_cwnd(now, has_new_data, mds)
    }

    /// Whether 1-RTT control frames wait for congestion control and pacing: HANDSHAKE_DONE,
    /// connection IDs, stream control frames, a key update's acknowledgment.
    fn control_waiting(&self) -> bool {
        self.handshake.done_pending
            || self.cids.has_frames()
            || self.streams.has_control()
            || self.keys.update.wants_ack(self.key_update_due().0)
            || self.recovery.tail_ping_due(self.streams.has_new_data())
    }

    /// The waiting copy left (`sent`) or was dropped: count it if the window had held it.
    fn copy_done(&mut self, now: Instant, sent: bool) {
        let Some(since) = self.recovery.copy_held_since.take() else {
            return;
        };
        if sent {
            self.stats.copies_held_by_cwnd += 1;
            self.stats.copy_cwnd_wait += now.saturating_duration_since(since);
        } else {
            self.stats.held_copies_dropped += 1;
        }
    }

    /// Appends the header of the next packet of `space`; returns its number and layout.
    fn write_header(&self, space: SpaceId, buf: &mut Vec<u8>) -> (u64, HeaderLayout) {
        let pn = self.spaces[space].next_pn;
        let pn_len = pn_len_for(pn, self.recovery.loss.largest_acked(space));
        let dcid = self.cids.remote();
        let scid = self.cids.initial_local();
        let header = match space {
            SpaceId::Initial => Header::Initial {
                version: QUIC_VERSION_1,
                dcid,
                scid,
                token: self.handshake.retry.as_ref().map_or(&[], |r| &r.token),
            },
            SpaceId::Handshake => Header::Handshake {
                version: QUIC_VERSION_1,
                dcid,
                scid,
            },
            SpaceId::Data => Header::OneRtt {
                dcid,
                spin: false,
                key_phase: self.keys.one_rtt().is_some_and(|k| k.key_phase()),
            },
        };
        (pn, header.write(buf, pn, pn_len))
    }

    /// Writes one packet of `space` into `buf` (unsealed). `None` if nothing went in.
    fn write_packet(
        &mut self,
        now: Instant,
        space: SpaceId,
        buf: &mut Vec<u8>,
        limit: usize,
    ) -> Option<Open> {
        let start = buf.len();
        let (pn, layout) = self.write_header(space, buf);
        let end = limit - TAG_LEN;
        if buf.len() >= end {
            buf.truncate(start);
            return None;
        }
        let mut pkt = Open {
            space,
            pn,
            layout,
            frames: SentFrames::default(),
            ack_eliciting: false,
            in_flight: false,
            qlog_frames: Vec::new(),
            path_probe: false,
        };
        let qlog = self.qlog.is_some();
        let data = space == SpaceId::Data && self.state == State::Established;
        if data {
            // A waiting repair symbol goes first, so it finds the whole packet free (source
            // packets keep room for its header, not for an ACK as well).
            self.fec_write_repair(now, buf, end, &mut pkt, qlog);
        }
        // ACK first: it is what the peer needs most and it is never congestion-limited.
        let ack_wanted = {
            let s = &self.spaces[space];
            s.ack_needed
        };
        if ack_wanted {
            self.write_ack(now, space, buf, end, &mut pkt);
        }
        let probe = self.spaces[space].probes > 0;
        let can_send = probe
            || self
                .recovery
                .congestion_allows(now, self.path.max_datagram_size);
        if data {
            let q = qlog.then_some(&mut pkt.qlog_frames);
            if self.write_path_frames(buf, end, q) {
                pkt.path_probe = true;
                pkt.ack_eliciting = true;
                pkt.in_flight = true;
            }
        }
        if probe && space != SpaceId::Data && !self.spaces[space].crypto_send.has_data() {
            // RFC 9002 §6.2.4: each probe in a handshake space carries CRYPTO data not yet
            // acknowledged, not just a PING: the peer may have lost all of it, and a server that
            // never saw the ClientHello cannot start a connection from a PING (RFC 9002 §6.2.2.1:
            // the client's probes are what gets a stalled handshake going again). Data already
            // queued goes first, so two probes of a long flight carry different parts of it.
            self.spaces[space].crypto_send.requeue_unacked();
        }
        if can_send {
            self.write_crypto(space, buf, end, &mut pkt, qlog);
            if data {
                self.write_control(buf, end, &mut pkt, qlog);
                // Before stream data: a datagram is worth only what it is worth now.
                self.write_datagrams(now, buf, end, &mut pkt, qlog);
            }
        }
        if data {
            // Without window, only a copy the policy lets exceed it.
            let stream_end = self.fec_stream_end(end);
            self.write_stream_data(now, buf, stream_end, &mut pkt, qlog, can_send);
        }
        if can_send {
            if probe && !pkt.ack_eliciting && buf.len() < end {
                // RFC 9002 §6.2.4: a probe must elicit an ACK.
                Frame::Ping.encode(buf);
                pkt.ack_eliciting = true;
                pkt.in_flight = true;
                if qlog {
                    pkt.qlog_frames.push(QlogFrame::Ping);
                }
            }
            if probe && pkt.ack_eliciting {
                self.spaces[space].probes -= 1;
            }
            if data
                && !pkt.ack_eliciting
                && buf.len() < end
                && self.recovery.tail_ping_due(self.streams.has_new_data())
            {
                // `TransportConfig::tail_ping`: after a burst's last packet, so that a receiver
                // that finds the burst's tail missing acknowledges at once (RFC 9000 §13.2.1).
                Frame::Ping.encode(buf);
                pkt.ack_eliciting = true;
                pkt.in_flight = true;
                if qlog {
                    pkt.qlog_frames.push(QlogFrame::Ping);
                }
            }
        }
        if buf.len() == layout.payload_offset() {
            buf.truncate(start);
            return None;
        }
        Some(pkt)
    }

    fn write_ack(
        &mut self,
        now: Instant,
        space: SpaceId,
        buf: &mut Vec<u8>,
        end: usize,
        pkt: &mut Open,
    ) {
        let s = &self.spaces[space];
        let Some((largest, received_at)) = s.largest_received else {
            return;
        };
        // RFC 9000 §13.2.5: ACK delay only means something in the application data space.
        let delay = if space == SpaceId::Data {
            let micros = now.saturating_duration_since(received_at).as_micros() as u64;
            micros >> self.config.ack_delay_exponent
        } else {
            0
        };
        // Encoded in place; fewer ranges if they do not fit.
        let start = buf.len();
        for max_ranges in [32usize, 8, 2, 1] {
            buf.truncate(start);
            if !encode_ack(buf, &s.received, delay, None, max_ranges) {
                buf.truncate(start);
                return;
            }
            if buf.len() <= end {
                break;
            }
        }
        if buf.len() > end {
            buf.truncate(start);
            return;
        }
        pkt.frames.ack_largest = Some(largest);
        if self.qlog.is_some() {
            let ranges: Vec<[u64; 2]> = s
                .received
                .iter_desc()
                .take(32)
                .map(|r| [r.start, r.end - 1])
                .collect();
            let delay_ms = (delay << self.config.ack_delay_exponent) as f64 / 1e3;
            pkt.qlog_frames.push(QlogFrame::Ack {
                ack_delay: (space == SpaceId::Data).then_some(delay_ms),
                acked_ranges: ranges,
                ect1: None,
                ect0: None,
                ce: None,
            });
        }
        self.spaces[space].on_ack_sent();
    }

    fn write_crypto(
        &mut self,
        space: SpaceId,
        buf: &mut Vec<u8>,
        end: usize,
        pkt: &mut Open,
        qlog: bool,
    ) {
        let s = &mut self.spaces[space].crypto_send;
        while s.has_data() && buf.len() + 8 < end {
            // The offset is not known before `next`; assume the largest varint for it.
            let Some(fit) = crypto_data_fit(u64::MAX >> 2, end - buf.len()) else {
                break;
            };
            let Some((offset, data)) = s.next(fit) else {
                break;
            };
            Frame::Crypto { offset, data }.encode(buf);
            let range_end = offset + data.len() as u64;
            let crypto = &mut pkt.frames.rare_mut().crypto;
            match crypto.last_mut() {
                Some(last) if last.end == offset => last.end = range_end,
                _ => crypto.push(offset..range_end),
            }
            pkt.ack_eliciting = true;
            pkt.in_flight = true;
            if qlog {
                pkt.qlog_frames.push(QlogFrame::Crypto {
                    offset,
                    length: data.len() as u64,
                });
            }
        }
    }

    fn write_control(&mut self, buf: &mut Vec<u8>, end: usize, pkt: &mut Open, qlog: bool) {
        if self.handshake.done_pending && self.side == Side::Server && buf.len() < end {
            Frame::HandshakeDone.encode(buf);
            self.handshake.done_pending = false;
            pkt.frames.handshake_done = true;
            pkt.ack_eliciting = true;
            pkt.in_flight = true;
            if qlog {
                pkt.qlog_frames.push(QlogFrame::HandshakeDone);
            }
        }
        while buf.len() + 40 <= end {
            let Some(c) = self.cids.poll_new() else {
                break;
            };
            let frame = Frame::NewConnectionId {
                seq: c.seq,
                retire_prior_to: 0,
                cid: c.cid,
                reset_token: c.reset_token,
            };
            frame.encode(buf);
            pkt.frames.rare_mut().new_cids.push(c.seq);
            pkt.ack_eliciting = true;
            pkt.in_flight = true;
            if qlog {
                pkt.qlog_frames.push(QlogFrame::of(&frame, None));
            }
        }
        while buf.len() + 9 <= end {
            let Some(seq) = self.cids.poll_retire() else {
                break;
            };
            Frame::RetireConnectionId { seq }.encode(buf);
            if qlog {
                pkt.qlog_frames.push(QlogFrame::RetireConnectionId {
                    sequence_number: seq,
                });
            }
            pkt.frames.rare_mut().retire_cids.push(seq);
            pkt.ack_eliciting = true;
            pkt.in_flight = true;
        }
        while let Some(c) = self.streams.poll_control(end.saturating_sub(buf.len())) {
            let frame = control_frame(c);
            frame.encode(buf);
            if qlog {
                pkt.qlog_frames.push(QlogFrame::of(&frame, None));
            }
            pkt.frames.rare_mut().control.push(c);
            pkt.ack_eliciting = true;
            pkt.in_flight = true;
        }
        let due = self.key_update_due().0;
        if self.keys.update.wants_ack(due) && !pkt.ack_eliciting && buf.len() < end {
            // The first packet of a new key phase should elicit an ACK so the update can be
            // confirmed (RFC 9001 §6.1); a PING does if nothing else does.
            Frame::Ping.encode(buf);
            pkt.ack_eliciting = true;
            pkt.in_flight = true;
        }
    }

    /// Stream data: a waiting copy whose round's retransmission already went out, then ARQ
    /// retransmissions, then new data. `cwnd_ok`: congestion control and pacing allow a packet;
    /// if not, only a copy the policy lets exceed the window goes.
    fn write_stream_data(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        end: usize,
        pkt: &mut Open,
        qlog: bool,
        cwnd_ok: bool,
    ) {
        // Copies go right behind their round's retransmission, before other lineages'
        // retransmissions (DESIGN.md: fixed(R) sends its copies back to back); under a small
        // window, sending every retransmission first would let the acknowledgements overtake
        // the copies. A copy whose retransmission is still queued waits for it.
        let mds = self.path.max_datagram_size;
        if self.recovery.policy_has_copy(now, mds) {
            if let Some(req) = self.recovery.pending_copy {
                let ready = !self.recovery.lineage.retransmit_queued(req.id);
                let has_new_data = self.streams.has_new_data();
                if ready && (cwnd_ok || self.recovery.copy_may_exceed_cwnd(now, has_new_data, mds))
                {
                    self.recovery.pending_copy = None;
                    if let Some(range) = self.recovery.lineage.range(req.id) {
                        // In a packet of its own, so its loss or arrival speaks only of it.
                        let _ = self.write_lineage(
                            now,
                            req.id,
                            range,
                            SendKind::Copy,
                            buf,
                            end,
                            pkt,
                            qlog,
                        );
                    }
                    let sent = pkt.frames.kind.is_some();
                    self.copy_done(now, sent);
                    if sent {
                        return;
                    }
                } else {
                    let has_new_data = self.streams.has_new_data();
                    self.recovery.note_copy_held(now, has_new_data, mds);
                }
            }
        }
        if !cwnd_ok {
            return;
        }
        // Retransmissions.
        while pkt.frames.stream.len() < MAX_STREAM_FRAMES {
            let Some((id, range)) = self.recovery.lineage.next_retransmit() else {
                break;
            };
            if !self.write_lineage(
                now,
                id,
                range,
                SendKind::Retransmission,
                buf,
                end,
                pkt,
                qlog,
            ) {
                break;
            }
        }
        if pkt.frames.kind.is_some() || self.recovery.pending_copy.is_some() {
            // A copy waits for its retransmission (sent above, or queued behind others): it
            // goes in the next packet, before new data.
            return;
        }
        // New data.
        while pkt.frames.stream.len() < MAX_STREAM_FRAMES && buf.len() + 8 < end {
            let space = end - buf.len();
            // Size the chunk for the worst-case header of a 4-byte offset and stream id.
            let Some(max) = stream_data_fit(1 << 30, 1 << 30, space, true) else {
                break;
            };
            let Some(chunk) = self.streams.poll_new(max) else {
                break;
            };
            let start = buf.len();
            if self
                .write_stream_frame(chunk.id, chunk.offset, chunk.len, chunk.fin, buf)
                .is_err()
            {
                buf.truncate(start);
                break;
            }
            self.stats.stream_bytes_new += chunk.len as u64;
            self.record_range(
                pkt,
                chunk.id,
                chunk.offset,
                chunk.len,
                chunk.fin,
                None,
                qlog,
            );
            pkt.frames.kind = Some(SendKind::New);
        }
    }

    /// Writes the still-unacknowledged parts of lineage `id`. Returns false if they did not fit.
    #[expect(
        clippy::too_many_arguments,
        reason = "one packet-building step with its context"
    )]
    fn write_lineage(
        &mut self,
        now: Instant,
        id: LossId,
        range: DataRange,
        kind: SendKind,
        buf: &mut Vec<u8>,
        end: usize,
        pkt: &mut Open,
        qlog: bool,
    ) -> bool {
        let sid = StreamId(range.stream);
        let mut chunks = self.streams.unacked(sid, range.start, range.end);
        // `Lineages::split` cuts only a lineage owed a retransmission (its tail is queued right
        // behind it); a copy, sent only once its retransmission has gone, that no longer fits
        // an empty packet is skipped.
        if pkt.frames.stream.is_empty() {
            let empty = end.saturating_sub(pkt.layout.payload_offset());
            if let Some(at) = split_point(&chunks, empty, end.saturating_sub(buf.len())) {
                // The lineage came from a larger packet than any we send now (path MTU
                // discovery fell back): what fits goes now, the rest becomes a lineage of its own.
                if self.recovery.lineage.split(id, at).is_some() {
                    chunks = self.streams.unacked(sid, range.start, at);
                }
            }
        }
        let start = buf.len();
        let frames_before = pkt.frames.stream.len();
        let qlog_before = pkt.qlog_frames.len();
        for c in &chunks {
            if pkt.frames.stream.len() >= MAX_STREAM_FRAMES
                || self
                    .write_stream_frame(c.id, c.offset, c.len, c.fin, buf)
                    .is_err()
                || buf.len() > end
            {
                buf.truncate(start);
                pkt.frames.stream.truncate(frames_before);
                // The trace must not show frames the packet does not carry.
                pkt.qlog_frames.truncate(qlog_before);
                return false;
            }
            self.record_range(pkt, c.id, c.offset, c.len, c.fin, Some(id), qlog);
        }
        let bytes: u64 = chunks.iter().map(|c| c.len as u64).sum();
        match kind {
            SendKind::Retransmission => self.stats.stream_bytes_retransmitted += bytes,
            SendKind::Copy => self.stats.stream_bytes_copied += bytes,
            SendKind::New => {}
        }
        // Even when nothing is left to send (all acknowledged meanwhile), the retransmission is
        // done: record it so the queue moves on.
        self.recovery.lineage.on_sent(id, pkt.pn, now, kind);
        if !chunks.is_empty() {
            pkt.frames.kind = Some(kind);
        }
        true
    }

    #[expect(clippy::too_many_arguments, reason = "fields of one stream frame")]
    fn record_range(
        &mut self,
        pkt: &mut Open,
        id: StreamId,
        offset: u64,
        len: usize,
        fin: bool,
        loss: Option<LossId>,
        qlog: bool,
    ) {
        if fin {
            pkt.frames.fins |= 1 << pkt.frames.stream.len();
        }
        pkt.frames.stream.push(SentRange {
            range: DataRange {
                stream: id.0,
                start: offset,
                end: offset + len as u64,
            },
            loss,
        });
        pkt.ack_eliciting = true;
        pkt.in_flight = true;
        if qlog {
            pkt.qlog_frames.push(QlogFrame::Stream {
                stream_id: id.0,
                offset,
                length: len as u64,
                fin,
            });
        }
    }

    /// Appends a STREAM frame, its data copied from the send buffer. On an error the frame's
    /// header may be left in `buf`: the callers cut `buf` back to where the frame began.
    fn write_stream_frame(
        &self,
        id: StreamId,
        offset: u64,
        len: usize,
        fin: bool,
        buf: &mut Vec<u8>,
    ) -> Result<(), crate::Error> {
        encode_stream_header(buf, id.0, offset, fin, Some(len));
        if len > 0 {
            self.streams.read_range(id, offset, len, buf)?;
        }
        Ok(())
    }

    /// Pads (if asked), protects and records the packet.
    fn seal(&mut self, now: Instant, mut pkt: Open, buf: &mut Vec<u8>, pad_to: Option<usize>) {
        let payload_len = buf.len() - pkt.layout.payload_offset();
        // RFC 9001 §5.4.2: enough bytes after the packet number for the header-protection sample.
        let min_payload = 4usize.saturating_sub(pkt.layout.pn_len);
        if payload_len < min_payload {
            buf.resize(buf.len() + (min_payload - payload_len), 0);
        }
        if let Some(target) = pad_to {
            if buf.len() + TAG_LEN < target {
                buf.resize(target - TAG_LEN, 0);
                pkt.in_flight = true;
            }
        }
        pkt.layout.set_length(buf, TAG_LEN);
        let size = buf.len() + TAG_LEN - pkt.layout.start;
        let pn_offset = pkt.layout.pn_offset;
        let pn_len = pkt.layout.pn_len;
        let start = pkt.layout.start;
        let sealed = self
            .keys
            .seal(pkt.space, pkt.pn, buf, start, (pn_offset - start, pn_len));
        if !matches!(sealed, Some(Ok(()))) {
            // Keys vanished or the layout is inconsistent: a bug, not the peer's doing. Drop the
            // packet; its frames were not recorded as sent and will be sent again.
            tracing::error!(space = ?pkt.space, pn = pkt.pn, "could not seal packet");
            buf.truncate(start);
            return;
        }
        let space = pkt.space;
        self.note_datagram_key(space, pkt.pn, &pkt.frames);
        self.spaces[space].next_pn += 1;
        self.stats.packets_sent += 1;
        if pkt.ack_eliciting {
            let recovery = &self.recovery;
            self.idle.on_eliciting_sent(now, || recovery.three_pto());
        }
        if space == SpaceId::Data {
            self.recovery.data_packets_sent += 1;
            self.recovery
                .on_data_packet_sent(!pkt.frames.stream.is_empty(), pkt.ack_eliciting);
            self.keys.update.on_sent(pkt.pn, pkt.ack_eliciting);
            match pkt.frames.kind {
                Some(SendKind::Retransmission) => self.stats.retransmission_packets += 1,
                Some(SendKind::Copy) => self.stats.copy_packets += 1,
                Some(SendKind::New) => self.stats.new_packets += 1,
                None => {}
            }
            if let Some(binding) = self.recovery.rate_limit_binding() {
                self.stats.rate_limited_packets += 1;
                self.stats.rate_limit_binding_packets += u64::from(binding);
            }
            let info = pkt.frames.info(pkt.pn, now, size);
            self.recovery.copy_declined = false;
            self.recovery.policy.on_packet_sent(now, &info);
            self.record_sent(&info);
            self.fec_on_packet_sent(now, pkt.pn, &pkt.frames);
        }
        if let Some(q) = self.qlog.as_mut() {
            let (trigger, kind) = match pkt.frames.kind {
                Some(SendKind::Copy) => (Some("recoup_copy"), Some("copy")),
                Some(SendKind::Retransmission) => (None, Some("retransmission")),
                _ => (None, None),
            };
            q.log(
                now,
                Event::PacketSent(PacketEvent {
                    header: PacketHeader {
                        packet_type: packet_type_name(space).into(),
                        packet_number: pkt.pn,
                    },
                    raw: RawInfo {
                        length: size as u64,
                    },
                    frames: pkt.qlog_frames,
                    trigger: trigger.map(str::to_owned),
                    recoup: kind.map(|k| SendKindInfo { kind: k.into() }),
                }),
            );
        }
        if pkt.in_flight {
            let in_flight = self.recovery.loss.bytes_in_flight();
            self.recovery.cc.on_packet_sent(now, size as u64, in_flight);
        }
        let sent = SentPacket::new(
            pkt.pn,
            now,
            size,
            pkt.ack_eliciting,
            pkt.in_flight,
            pkt.frames,
        );
        let _ = self.recovery.loss.on_packet_sent(space, sent, now);
    }

    /// Keys the datagram by its stream data if it carries any (the first range: a copy travels
    /// alone, a retransmission leads its packet), else by its first packet's number.
    fn note_datagram_key(&mut self, space: SpaceId, pn: u64, frames: &SentFrames) {
        let data_key = frames.stream.first().map(|r| match r.loss {
            Some(id) => {
                let start = self
                    .recovery
                    .lineage
                    .range(id)
                    .map_or(r.range.start, |l| l.start);
                let sends = self.recovery.lineage.sends(id).unwrap_or(0);
                data_send_key(r.range.stream, start, sends)
            }
            None => data_send_key(r.range.stream, r.range.start, 0),
        });
        match data_key {
            Some(k) => self.datagram_key = Some(k),
            None => {
                self.datagram_key.get_or_insert(packet_key(space as u8, pn));
            }
        }
    }

    /// In the closing state: one CONNECTION_CLOSE per received packet (RFC 9000 §10.2.1). The
    /// first also carries the PATH_RESPONSEs still owed on the current path (§8.2.2).
    fn transmit_close(&mut self, now: Instant) -> Option<Transmit> {
        let err = match &mut self.state {
            State::Closing { frame, pending, .. } if *pending => {
                *pending = false;
                frame.clone()
            }
            _ => return None,
        };
        let mut buf = Vec::new();
        let mut open = None;
        let mut answered = false;
        for space in SpaceId::ALL {
            if !self.keys.has(space) {
                continue;
            }
            if let Some(prev) = open.take() {
                self.seal(now, prev, &mut buf, None);
            }
            let (pn, layout) = self.write_header(space, &mut buf);
            // RFC 9000 §10.2.3: an application close becomes APPLICATION_ERROR before 1-RTT,
            // where the application's code must not be revealed.
            let reason = err.reason.as_bytes();
            let reason = &reason[..reason.len().min(256)];
            let frame = if err.application && space != SpaceId::Data {
                ConnectionClose {
                    error_code: crate::TransportErrorCode::APPLICATION_ERROR.0,
                    frame_type: Some(0),
                    reason: &[],
                }
            } else if err.application {
                ConnectionClose {
                    error_code: err.code,
                    frame_type: None,
                    reason,
                }
            } else {
                ConnectionClose {
                    error_code: err.code,
                    frame_type: Some(err.frame_type.unwrap_or(0)),
                    reason,
                }
            };
            let frame = Frame::ConnectionClose(frame);
            frame.encode(&mut buf);
            let mut qlog_frames = vec![QlogFrame::of(&frame, None)];
            if space == SpaceId::Data {
                let end = self.path.max_datagram_size - TAG_LEN;
                self.write_path_responses(&mut buf, end, &mut qlog_frames);
                answered = qlog_frames.len() > 1;
            }
            if self.qlog.is_none() {
                qlog_frames.clear();
            }
            open = Some(Open {
                space,
                pn,
                layout,
                frames: SentFrames::default(),
                ack_eliciting: false,
                in_flight: false,
                qlog_frames,
                path_probe: false,
            });
        }
        let pkt = open?;
        let pad_to = if pkt.space == SpaceId::Initial && self.side == Side::Client {
            Some(MIN_INITIAL_SIZE)
        } else if answered {
            // RFC 9000 §8.2.2: a PATH_RESPONSE's datagram is expanded to 1200 bytes, within the
            // anti-amplification limit (§8.1).
            let budget = self.path.amplification_budget().unwrap_or(usize::MAX);
            Some(
                MIN_INITIAL_SIZE
                    .min(budget)
                    .min(self.path.max_datagram_size),
            )
        } else {
            None
        };
        self.seal(now, pkt, &mut buf, pad_to);
        self.on_datagram_sent(now, buf.len());
        Some(Transmit {
            destination: self.path.remote,
            contents: buf,
            key: self.datagram_key.take(),
        })
    }

    /// A datagram with only a PATH_RESPONSE for a challenge that came from an address other
    /// than the current path's: it goes back there (RFC 9000 §8.2.2), padded as far as the
    /// anti-amplification limit toward that unvalidated address allows, and does not count
    /// against the current path's limit.
    fn transmit_off_path_response(&mut self, now: Instant) -> Option<Transmit> {
        if self.state != State::Established || !self.keys.has(SpaceId::Data) {
            return None;
        }
        let (destination, data, size) = self.poll_off_path_response()?;
        let mut buf = Vec::with_capacity(size);
        let (pn, layout) = self.write_header(SpaceId::Data, &mut buf);
        Frame::PathResponse(data).encode(&mut buf);
        let pkt = Open {
            space: SpaceId::Data,
            pn,
            layout,
            frames: SentFrames::default(),
            ack_eliciting: true,
            in_flight: true,
            qlog_frames: vec![QlogFrame::of(&Frame::PathResponse(data), None)],
            path_probe: true,
        };
        self.seal(now, pkt, &mut buf, Some(size));
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += buf.len() as u64;
        Some(Transmit {
            destination,
            contents: buf,
            key: self.datagram_key.take(),
        })
    }

    /// Counts (and logs once) a sender that has stream data, a retransmission or a copy
    /// waiting, nothing in flight and no timer armed: no acknowledgment and no PTO will come,
    /// so only the peer can wake it. A bug wherever it happens; the state logged is what it
    /// takes to find it (a dash.js run stalled once for 29 s without a trace of why).
    fn note_send_stall(&mut self) {
        if self.state != State::Established || self.recovery.loss.bytes_in_flight() != 0 {
            return;
        }
        let retransmit = self.recovery.lineage.has_retransmit();
        let new_data = self.streams.has_new_data();
        let copy = self.recovery.pending_copy;
        let datagrams = self.datagrams.has_send();
        // The timer last: it asks the policy, and this runs whenever nothing could be sent.
        if !(retransmit || new_data || copy.is_some() || datagrams)
            || self.recovery.timeout().is_some()
        {
            return;
        }
        if self.stats.send_stalls == 0 {
            tracing::warn!(
                cwnd = self.recovery.cc.window(),
                max_datagram_size = self.path.max_datagram_size,
                new_data,
                retransmit,
                copy = ?copy,
                datagrams,
                send_state = ?self.recovery.send_state,
                pmtud = ?self.pmtud,
                "sender stalled: data waits, nothing in flight, no timer armed"
            );
        }
        self.stats.send_stalls += 1;
    }

    /// A path MTU probe (RFC 9000 §14.3), appended to `buf`: a 1-RTT packet of PING and PADDING
    /// of the size being tried, when discovery wants one, the handshake is confirmed, the path
    /// is validated and congestion control lets it go (RFC 8899 §3: probes are congestion
    /// controlled; their loss is not taken as congestion).
    fn transmit_mtu_probe(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<TransmitInfo> {
        let size = self.pmtud.as_ref()?.probe_size()?;
        if self.state != State::Established
            || !self.handshake.confirmed
            || !self.path_validated()
            || !self.keys.has(SpaceId::Data)
            || !self.recovery.congestion_allows(now, size)
        {
            return None;
        }
        let base = buf.len();
        buf.reserve(size);
        let (pn, layout) = self.write_header(SpaceId::Data, buf);
        Frame::Ping.encode(buf);
        let pkt = Open {
            space: SpaceId::Data,
            pn,
            layout,
            frames: SentFrames {
                mtu_probe: true,
                ..SentFrames::default()
            },
            ack_eliciting: true,
            in_flight: true,
            qlog_frames: vec![QlogFrame::of(&Frame::Ping, None)],
            path_probe: false,
        };
        self.seal(now, pkt, buf, Some(base + size));
        let len = buf.len() - base;
        if len == 0 {
            return None;
        }
        self.stats.mtu_probes_sent += 1;
        if let Some(d) = self.pmtud.as_mut() {
            d.on_probe_sent(pn, len);
        }
        self.on_datagram_sent(now, len);
        Some(TransmitInfo {
            destination: self.path.remote,
            len,
            key: self.datagram_key.take(),
        })
    }

    /// RFC 9001 §6: start a key update when asked or when the interval is reached, once the
    /// handshake is confirmed and a packet of the current phase was acknowledged.
    /// Whether a key update is due (asked for, the interval reached, or the confidentiality
    /// limit near), and whether it is the limit.
    pub(super) fn key_update_due(&self) -> (bool, bool) {
        let (confidentiality_limit, _) = self.keys.aead_limits(&self.config);
        let update = &self.keys.update;
        // RFC 9001 §6.6: update before the confidentiality limit; a quarter of it is left for
        // the acknowledgment and the wait an update needs.
        let near_limit = update.sent_in_phase >= confidentiality_limit - confidentiality_limit / 4;
        let due = update.requested
            || near_limit
            || self
                .config
                .key_update_interval
                .is_some_and(|n| update.sent_in_phase >= n);
        (due, near_limit)
    }

    fn maybe_update_keys(&mut self, now: Instant) {
        let (confidentiality_limit, _) = self.keys.aead_limits(&self.config);
        let (due, near_limit) = self.key_update_due();
        let update = &self.keys.update;
        // Asked before every packet and rarely due: the PTO only when it is.
        let three_pto = (due && self.handshake.confirmed).then(|| self.three_pto());
        // §6.5 asks for three PTOs between updates (SHOULD); near the limit §6.6's MUST wins and
        // only §6.1's acknowledgment of the current phase is awaited.
        let allowed = three_pto.is_some_and(|t| update.may_initiate(now, t))
            || (near_limit && update.phase_acked);
        let Some(three_pto) = three_pto.filter(|_| allowed) else {
            if update.sent_in_phase >= confidentiality_limit {
                // §6.6: the key may protect no more packets and no update is possible yet: stop
                // using the connection (no CONNECTION_CLOSE either, it would need the key).
                self.stop_at_aead_limit("confidentiality limit reached before a key update");
            }
            return;
        };
        let Some(keys) = self.keys.one_rtt_mut() else {
            return;
        };
        keys.initiate_update();
        // RFC 9001 §6.5: the previous receive key serves reordered packets for a while, then
        // goes (the responder arms the same timer when it sees the update).
        self.keys.update.drop_previous_at = Some(now + three_pto);
        self.stats.key_updates += 1;
        self.keys.update.requested = false;
        self.keys.update.start_phase();
        self.keys.update.announce = true;
    }
}

fn control_frame(c: ControlFrame) -> Frame<'static> {
    let dir = |bidi: bool| {
        if bidi {
            StreamDir::Bidi
        } else {
            StreamDir::Uni
        }
    };
    match c {
        ControlFrame::MaxData(max) => Frame::MaxData(max),
        ControlFrame::MaxStreamData { id, max } => Frame::MaxStreamData {
            stream_id: id.0,
            max,
        },
        ControlFrame::MaxStreams { bidi, max } => Frame::MaxStreams {
            dir: dir(bidi),
            max,
        },
        ControlFrame::DataBlocked(limit) => Frame::DataBlocked(limit),
        ControlFrame::StreamDataBlocked { id, limit } => Frame::StreamDataBlocked {
            stream_id: id.0,
            limit,
        },
        ControlFrame::StreamsBlocked { bidi, limit } => Frame::StreamsBlocked {
            dir: dir(bidi),
            limit,
        },
        ControlFrame::ResetStream {
            id,
            code,
            final_size,
        } => Frame::ResetStream {
            stream_id: id.0,
            error_code: code,
            final_size,
        },
        ControlFrame::StopSending { id, code } => Frame::StopSending {
            stream_id: id.0,
            error_code: code,
        },
    }
}

pub(super) fn packet_type_name(space: SpaceId) -> &'static str {
    match space {
        SpaceId::Initial => "initial",
        SpaceId::Handshake => "handshake",
        SpaceId::Data => "1RTT",
    }
}

#[cfg(feature = "test-hooks")]
impl Connection {
    /// Test hook: the packet number the next 1-RTT packet will carry.
    #[doc(hidden)]
    #[must_use]
    pub fn next_1rtt_pn_for_test(&self) -> u64 {
        self.spaces[SpaceId::Data].next_pn
    }

    /// Test hook (feature `test-hooks`, for the crate's own protocol-violation and bad-input
    /// tests and the `established` fuzz target): protects `payload` as the next 1-RTT packet to the peer, frames exactly as given
    /// (none added, no padding; a 4-byte packet number leaves room for the header-protection
    /// sample even with an empty payload), with `first_byte_bits`
    /// ORed into the unprotected first byte (`0x18` sets the reserved bits). The packet number is
    /// recorded as sent (not in flight) so the peer's ACK of it is valid. `None` before 1-RTT
    /// keys exist.
    #[doc(hidden)]
    pub fn seal_raw_1rtt_for_test(
        &mut self,
        now: Instant,
        payload: &[u8],
        first_byte_bits: u8,
    ) -> Option<Vec<u8>> {
        let keys = self.keys.one_rtt()?;
        let pn = self.spaces[SpaceId::Data].next_pn;
        let mut buf = Vec::new();
        // Four packet-number bytes: the header-protection sample then fits even without payload.
        let layout = Header::OneRtt {
            dcid: self.cids.remote(),
            spin: false,
            key_phase: keys.key_phase(),
        }
        .write(&mut buf, pn, 4);
        buf[0] |= first_byte_bits;
        buf.extend_from_slice(payload);
        keys.seal(pn, &mut buf, layout.pn_offset, layout.pn_len)
            .ok()?;
        self.spaces[SpaceId::Data].next_pn += 1;
        let size = buf.len();
        let _ = self.recovery.loss.on_packet_sent(
            SpaceId::Data,
            SentPacket::new(pn, now, size, false, false, SentFrames::default()),
            now,
        );
        Some(buf)
    }
}

/// Where to split a lineage whose `chunks` do not fit even a packet with nothing else in it
/// (`empty` bytes of payload): at the first byte that does not fit the `free` bytes left in
/// this one. `None` when the chunks fit an empty packet (they wait for one, as before).
fn split_point(chunks: &[Chunk], empty: usize, free: usize) -> Option<u64> {
    let frame = |c: &Chunk| stream_header_len(c.id.0, c.offset, c.len, true) + c.len;
    if chunks.iter().map(frame).sum::<usize>() <= empty {
        return None;
    }
    let mut free = free;
    for c in chunks {
        if frame(c) <= free {
            free -= frame(c);
            continue;
        }
        let fit = stream_data_fit(c.id.0, c.offset, free, true).unwrap_or(0);
        return Some(c.offset + fit.min(c.len) as u64);
    }
    None
}
