//! Receiving datagrams: split coalesced packets, remove protection, process frames.

use std::net::SocketAddr;

use recoup_time::Instant;

use super::migration::is_probing;
use super::send::packet_type_name;
use super::spaces::on_crypto_frame;
use super::{CloseError, Connection, State};
use crate::cid::ConnectionId;
use crate::crypto::Side;
use crate::error::{transport_err, Error, TransportError};
use crate::fec::source_symbol;
use crate::frame::{frame_allowed_or_err, Frame, Frames, StreamDir};
use crate::loss::SpaceId;
use crate::packet::{decode_pn, FirstByte, PacketType, PartialDecode};
use crate::qlog::{Event, PacketEvent, PacketHeader, QlogFrame, RawInfo};
use crate::stateless_reset::reset_tail;
use crate::streams::StreamId;

/// What processing a packet reads of its header once the packet's bytes may be unprotected in
/// place (a [`PartialDecode`] borrows them).
struct ReceivedHeader {
    ty: PacketType,
    dcid: ConnectionId,
    scid: ConnectionId,
    pn_offset: Option<usize>,
}

impl ReceivedHeader {
    fn of(header: &PartialDecode<'_>) -> Self {
        Self {
            ty: header.ty,
            dcid: header.dcid,
            scid: header.scid,
            pn_offset: header.pn_offset,
        }
    }
}

impl Connection {
    /// Processes one UDP datagram from `remote`. Malformed or undecryptable packets are dropped
    /// (RFC 9000 §12.2, §5.2); protocol violations close the connection with their error code.
    /// Packets are unprotected where they lie: the buffer holds no particular bytes afterwards.
    pub fn handle_datagram_in_place(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &mut [u8],
    ) {
        if matches!(self.state, State::Closed | State::Draining { .. }) {
            return;
        }
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += datagram.len() as u64;
        if remote == self.path.remote {
            self.path.on_datagram_received(datagram.len());
        } else if self.side == Side::Client {
            // A client only talks to the address it connected to: we never use a server's
            // preferred address (RFC 9000 §9.6), so anything else is not our server.
            return;
        }
        // Read before the packets are unprotected over them (a failed AEAD open may leave its
        // input changed).
        let reset_tail = reset_tail(datagram);
        // A server counts a datagram from another address toward that address's path once the
        // peer has moved there (`on_peer_address_change`, RFC 9000 §9.3).
        let from = (remote, datagram.len());
        let mut rest = datagram;
        let mut last_failed = false;
        while !rest.is_empty() {
            let dropped = self.stats.packets_dropped;
            let Some(len) = self.handle_first_packet(now, from, rest) else {
                return;
            };
            last_failed = self.stats.packets_dropped > dropped;
            rest = &mut std::mem::take(&mut rest)[len..];
            if self.state != State::Handshaking && !self.handshake.early_one_rtt.is_empty() {
                self.process_early_one_rtt(now);
            }
        }
        // RFC 9000 §10.3.1: a datagram whose (last) packet cannot be processed may be a
        // stateless reset from a peer that lost this connection.
        if last_failed && reset_tail.is_some_and(|tail| self.cids.holds_reset_token(&tail)) {
            self.on_stateless_reset(now);
        }
    }

    /// Processes the packet at the start of `bytes` in place: a protocol violation closes the
    /// connection, anything else that fails drops the packet. Returns the packet's length, or
    /// `None` when nothing more of the datagram is processed: the packet cannot be parsed (nor
    /// then, RFC 9000 §12.2, what follows it) or the connection no longer processes packets.
    fn handle_first_packet(
        &mut self,
        now: Instant,
        from: (SocketAddr, usize),
        bytes: &mut [u8],
    ) -> Option<usize> {
        let (len, header, retry) = match PartialDecode::parse(bytes, self.config.local_cid_len) {
            Ok(h) => {
                // A Retry is read as it is, never unprotected.
                let retry = (h.ty == PacketType::Retry).then(|| self.on_retry(now, &h));
                (h.packet_len(), ReceivedHeader::of(&h), retry)
            }
            Err(e) => {
                tracing::trace!(error = %e, "dropping undecodable packet");
                self.stats.packets_dropped += 1;
                return None;
            }
        };
        let len = len.min(bytes.len());
        let handled =
            retry.unwrap_or_else(|| self.handle_packet(now, from, &header, &mut bytes[..len]));
        match handled {
            Ok(()) => {}
            Err(Error::Transport(err)) => {
                self.close_with_error(now, &err);
                return None;
            }
            Err(_) => self.stats.packets_dropped += 1,
        }
        (!matches!(self.state, State::Closed | State::Draining { .. })).then_some(len)
    }

    /// Processes the 1-RTT packets that arrived before the handshake completed, now that it has
    /// (RFC 9001 §5.7: they "MAY be stored and later decrypted").
    fn process_early_one_rtt(&mut self, now: Instant) {
        for mut bytes in std::mem::take(&mut self.handshake.early_one_rtt) {
            // Held packets came on the handshake's path: no migration before it completes
            // (RFC 9000 §9), and their datagrams were counted when they arrived.
            let _ = self.handle_first_packet(now, (self.path.remote, 0), &mut bytes);
            if matches!(self.state, State::Closed | State::Draining { .. }) {
                return;
            }
        }
    }

    /// `from`: the datagram's source address and size.
    fn handle_packet(
        &mut self,
        now: Instant,
        from: (SocketAddr, usize),
        header: &ReceivedHeader,
        packet: &mut [u8],
    ) -> Result<(), Error> {
        let space = match header.ty {
            PacketType::Initial => SpaceId::Initial,
            PacketType::Handshake => SpaceId::Handshake,
            PacketType::OneRtt => SpaceId::Data,
            // We never send 0-RTT, and we speak only v1 (a version negotiation packet ends
            // nothing); a Retry was handled before (`handle_first_packet`).
            PacketType::ZeroRtt | PacketType::VersionNegotiation | PacketType::Retry => {
                return Err(Error::Decrypt);
            }
        };
        if space == SpaceId::Data && self.state == State::Handshaking {
            // RFC 9001 §5.7: neither side decrypts 1-RTT packets before its handshake is
            // complete. A server has the keys earlier but must not process (and so must not
            // acknowledge) them: a client may take an ACK of 1-RTT as handshake confirmation
            // (RFC 9001 §4.1.2) and drop its Handshake keys while its Finished is still lost.
            // The packets wait, bounded, for the handshake (`process_early_one_rtt`).
            return if self.handshake.buffer_early_one_rtt(packet) {
                Ok(())
            } else {
                Err(Error::Decrypt)
            };
        }
        if !self.keys.has(space) {
            // Keys not yet available (reordering) or already discarded: drop.
            return Err(Error::Decrypt);
        }
        let pn_offset = header.pn_offset.ok_or(Error::Decrypt)?;
        let packet_len = packet.len() as u64;
        let largest = self.spaces[space].largest_received.map(|(pn, _)| pn);
        // Remove header protection, decode the packet number, decrypt.
        let (pn_len, truncated) = self.keys.unprotect_header(space, packet, pn_offset)?;
        let pn = decode_pn(truncated, pn_len, largest);
        let header_len = pn_offset + pn_len;
        let first = FirstByte(packet[0]);
        let (payload, peer_updated) = match self.keys.open(space, pn, packet, header_len) {
            Ok(opened) => opened,
            Err(e) => {
                // RFC 9001 §6.6: count packets that fail authentication, under any key; past the
                // integrity limit the connection closes with AEAD_LIMIT_REACHED.
                self.keys.update.failed_decryptions += 1;
                let (_, integrity_limit) = self.keys.aead_limits(&self.config);
                if self.keys.update.failed_decryptions > integrity_limit {
                    return Err(transport_err!(
                        AEAD_LIMIT_REACHED,
                        "{} packets failed authentication",
                        self.keys.update.failed_decryptions
                    )
                    .into());
                }
                return Err(e);
            }
        };
        // Authenticated from here on: violations close the connection.
        self.stats.packets_received += 1;
        first.check_reserved_bits()?;
        if self.spaces[space].is_duplicate(pn) {
            return Ok(());
        }
        if peer_updated {
            // RFC 9001 §6.1: the peer moved to the next key phase; keep the old receive key
            // around for reordered packets for a while.
            self.stats.key_updates += 1;
            self.keys.update.start_phase();
            self.keys.update.drop_previous_at = Some(now + self.three_pto());
        }
        if space == SpaceId::Handshake && self.side == Side::Server {
            // RFC 9000 §8.1: a Handshake packet proves the client owns its address; RFC 9001
            // §4.9.1: the server drops Initial keys on first processing one.
            self.path.validate();
            self.recovery.loss.set_amplification_blocked(false, now);
            self.discard_space(SpaceId::Initial, now);
        }
        if self.side == Side::Client && space != SpaceId::Data {
            // RFC 9000 §7.2: the client switches to the server's chosen connection ID.
            self.cids.adopt_server_cid(header.scid);
        }
        let three_pto = self.three_pto();
        self.idle.on_packet_received(now, three_pto);
        let packet_type = header.ty;
        // Logged before its frames are processed, with them, so that a reader of the trace sees
        // an ACK before the losses it declares (as aioquic and quinn log), and can rebuild
        // what was acknowledged from the trace alone (`recoup analyze`).
        if self.qlog.is_some() || (self.side == Side::Server && self.qlog_first.is_none()) {
            let exponent =
                (space == SpaceId::Data).then_some(self.handshake.peer_ack_delay_exponent);
            let event = Event::PacketReceived(PacketEvent {
                header: PacketHeader {
                    packet_type: packet_type_name(space).into(),
                    packet_number: pn,
                },
                raw: RawInfo { length: packet_len },
                frames: qlog_received_frames(payload, exponent),
                trigger: None,
                recoup: None,
            });
            match self.qlog.as_mut() {
                Some(q) => q.log(now, event),
                // A server's first Initial arrives before its driver can hand it a writer:
                // kept for the trace it may be given (`set_qlog`).
                None => self.qlog_first = Some((now, event)),
            }
        }
        let largest_yet = largest.is_none_or(|l| pn > l);
        let (ack_eliciting, probing) =
            self.process_frames(now, space, (packet_type, pn), &header.dcid, from, payload)?;
        if space == SpaceId::Data && !probing && self.side == Side::Server {
            if from.0 != self.path.remote && largest_yet {
                // RFC 9000 §9.3: only a non-probing packet with the highest packet number so far
                // moves us to the peer's new address; an older one (reordered) does not.
                self.on_peer_address_change(now, from.0, from.1, header.dcid);
            } else if from.0 == self.path.remote {
                self.note_peer_dcid(header.dcid);
            }
        }
        let max_ack_delay = self.config.max_ack_delay;
        let threshold = self.config.ack_eliciting_threshold;
        self.spaces[space].on_packet_received(
            pn,
            now,
            ack_eliciting,
            space != SpaceId::Data,
            threshold,
            max_ack_delay,
        );
        Ok(())
    }

    /// Processes a packet's frames; returns whether it was ack-eliciting and whether it was a
    /// probing packet (RFC 9000 §9.1: only probing frames).
    fn process_frames(
        &mut self,
        now: Instant,
        space: SpaceId,
        (packet_type, pn): (PacketType, u64),
        dcid: &ConnectionId,
        from: (SocketAddr, usize),
        payload: &[u8],
    ) -> Result<(bool, bool), Error> {
        if payload.is_empty() {
            return Err(transport_err!(PROTOCOL_VIOLATION, "packet without frames").into());
        }
        let mut ack_eliciting = false;
        let mut crypto_received = false;
        let mut probing = true;
        // The packet's STREAM frames as a FEC source symbol, when we decode repairs.
        let mut fec_symbol = (space == SpaceId::Data && self.fec.receiver.is_some()).then(Vec::new);
        for frame in Frames::new(payload) {
            let frame = frame?;
            let ty = frame.ty();
            probing &= is_probing(&frame);
            frame_allowed_or_err(ty, packet_type)?;
            ack_eliciting |= ty.is_ack_eliciting();
            let with_ty = |e: TransportError| e.with_frame(ty.0);
            match frame {
                Frame::Padding { .. } | Frame::Ping => {}
                Frame::Ack(ack) => {
                    self.on_ack_frame(now, space, &ack).map_err(with_ty)?;
                    if space == SpaceId::Data && self.side == Side::Client {
                        // RFC 9001 §4.1.2: a client MAY consider the handshake confirmed when
                        // a 1-RTT packet of its own is acknowledged (a server acknowledges
                        // 1-RTT only once its handshake is complete, §5.7).
                        self.confirm_handshake(now);
                    }
                }
                Frame::Crypto { offset, data } => {
                    on_crypto_frame(&mut self.spaces[space].crypto_recv, offset, data)
                        .map_err(with_ty)?;
                    crypto_received = true;
                }
                Frame::Stream(s) => {
                    self.streams
                        .on_stream(StreamId(s.stream_id), s.offset, s.data, s.fin)
                        .map_err(with_ty)?;
                    if let Some(symbol) = fec_symbol.as_mut() {
                        source_symbol(symbol, &s);
                    }
                }
                Frame::Repair(r) => self.on_repair_frame(now, pn, &r).map_err(with_ty)?,
                Frame::Datagram(d) => self.on_datagram_frame(now, &d).map_err(with_ty)?,
                Frame::ResetStream {
                    stream_id,
                    error_code,
                    final_size,
                } => self
                    .streams
                    .on_reset_stream(StreamId(stream_id), error_code, final_size)
                    .map_err(with_ty)?,
                Frame::StopSending {
                    stream_id,
                    error_code,
                } => {
                    self.streams
                        .on_stop_sending(StreamId(stream_id), error_code)
                        .map_err(with_ty)?;
                    // RFC 9000 §3.5: STOP_SENDING makes us reset the stream, so its lost data
                    // is abandoned as after `stream_reset`.
                    self.forget_stream_losses(now, StreamId(stream_id));
                }
                Frame::MaxData(max) => self.streams.on_max_data(max),
                Frame::MaxStreamData { stream_id, max } => self
                    .streams
                    .on_max_stream_data(StreamId(stream_id), max)
                    .map_err(with_ty)?,
                Frame::MaxStreams { dir, max } => self
                    .streams
                    .on_max_streams(dir == StreamDir::Bidi, max)
                    .map_err(with_ty)?,
                Frame::DataBlocked(limit) => self.streams.on_data_blocked(limit),
                Frame::StreamDataBlocked { stream_id, limit } => self
                    .streams
                    .on_stream_data_blocked(StreamId(stream_id), limit)
                    .map_err(with_ty)?,
                Frame::StreamsBlocked { dir, limit } => self
                    .streams
                    .on_streams_blocked(dir == StreamDir::Bidi, limit)
                    .map_err(with_ty)?,
                Frame::NewToken { .. } => {
                    if self.side == Side::Server {
                        // RFC 9000 §19.7: only servers send NEW_TOKEN.
                        return Err(with_ty(transport_err!(
                            PROTOCOL_VIOLATION,
                            "NEW_TOKEN from a client"
                        ))
                        .into());
                    }
                }
                Frame::NewConnectionId {
                    seq,
                    retire_prior_to,
                    cid,
                    reset_token,
                } => self
                    .cids
                    .on_new_connection_id(seq, retire_prior_to, cid, reset_token)
                    .map_err(with_ty)?,
                Frame::RetireConnectionId { seq } => {
                    let limit = self.handshake.active_cid_limit(&self.config);
                    self.cids
                        .on_retire_connection_id(seq, dcid, &mut self.rng, limit)
                        .map_err(with_ty)?;
                }
                Frame::PathChallenge(data) => self.on_path_challenge(data, from.0, from.1),
                Frame::PathResponse(data) => self.on_path_response(now, data),
                Frame::ConnectionClose(c) => {
                    let err = CloseError {
                        code: c.error_code,
                        application: c.frame_type.is_none(),
                        frame_type: c.frame_type,
                        reason: String::from_utf8_lossy(c.reason).into_owned(),
                    };
                    self.enter_draining(now, err);
                    return Ok((ack_eliciting, false));
                }
                Frame::HandshakeDone => {
                    if self.side == Side::Server {
                        return Err(with_ty(transport_err!(
                            PROTOCOL_VIOLATION,
                            "HANDSHAKE_DONE from a client"
                        ))
                        .into());
                    }
                    // RFC 9001 §4.1.2: the client's handshake is confirmed.
                    self.confirm_handshake(now);
                }
            }
        }
        if let Some(symbol) = fec_symbol.filter(|s| !s.is_empty()) {
            self.fec_on_source_received(pn, symbol);
        }
        if crypto_received {
            self.read_crypto(now, space)?;
        }
        Ok((ack_eliciting, probing))
    }

    /// Hands in-order CRYPTO bytes to TLS and runs its write loop.
    fn read_crypto(&mut self, now: Instant, space: SpaceId) -> Result<(), TransportError> {
        let mut buf = vec![0u8; 4096];
        loop {
            let recv = &mut self.spaces[space].crypto_recv;
            let n = match recv.read(&mut buf) {
                Ok((n, _)) => n,
                Err(_) => 0,
            };
            if n == 0 {
                break;
            }
            // Slide the CRYPTO buffer window along with what TLS consumed.
            let consumed = recv.retired();
            let _ = recv.window.update(consumed);
            self.keys.tls.read_handshake(&buf[..n])?;
        }
        self.drive_tls(now)
    }
}

/// qlog descriptions of a received packet's frames, every field kept (padding left out).
/// Stops at the first undecodable frame (processing then rejects the packet).
fn qlog_received_frames(payload: &[u8], ack_delay_exponent: Option<u8>) -> Vec<QlogFrame> {
    Frames::new(payload)
        .map_while(Result::ok)
        .filter(|f| !matches!(f, Frame::Padding { .. }))
        .map(|f| QlogFrame::of(&f, ack_delay_exponent))
        .collect()
}
