//! The connection's hooks into the FEC extension (`crate::fec`, docs/FEC.md): negotiation,
//! source symbols of sent and received packets, writing REPAIR frames, restoring lost packets.

use crate::qlog::{Event, FecRecovered, QlogFrame};
use recoup_recovery::fec::FecContext;
use recoup_recovery::{FecScheme, PacketInfo, RttSample, SendState};
use recoup_time::Instant;

use super::send::Open;
use super::{Connection, SentFrames};
use crate::cc::CongestionController;
use crate::config::TransportConfig;
use crate::error::{transport_err, TransportError};
use crate::fec::{source_symbol, FecReceiver, FecSender};
use crate::frame::{Frame, Frames, RepairFrame, StreamFrame, MAX_REPAIR_OVERHEAD};
use crate::streams::StreamId;
use crate::transport_params::TransportParameters;

/// FEC state of one connection.
#[derive(Debug)]
pub(super) struct FecState {
    /// Present once the peer announced that it decodes and we have a scheme.
    sender: Option<FecSender>,
    /// Present when we announced that we decode.
    pub receiver: Option<FecReceiver>,
    /// The sending state the scheme last heard of.
    send_state: Option<SendState>,
}

impl FecState {
    pub fn new(config: &TransportConfig) -> Self {
        Self {
            sender: None,
            receiver: config.fec_receive.then(FecReceiver::default),
            send_state: None,
        }
    }
}

impl Connection {
    /// Whether we send repair symbols on this connection (a scheme is set and the peer
    /// negotiated FEC).
    #[must_use]
    pub fn fec_active(&self) -> bool {
        self.fec.sender.is_some()
    }

    /// The FEC scheme in use, once negotiated.
    #[must_use]
    pub fn fec_scheme(&self) -> Option<&recoup_recovery::Fec> {
        self.fec.sender.as_ref().map(FecSender::scheme)
    }

    /// Tells the FEC scheme the playout deadline of a stream's data (in the rtc application a
    /// stream is a video frame). Without FEC it does nothing.
    pub fn set_stream_deadline(&mut self, id: StreamId, deadline: Instant) {
        if let Some(s) = self.fec.sender.as_mut() {
            s.set_deadline(id.0, deadline);
        }
    }

    /// The peer's transport parameters arrived: start FEC if both sides want it.
    pub(super) fn fec_on_peer_params(&mut self, params: &TransportParameters) {
        let Some(spec) = self.config.fec else {
            return;
        };
        if params.recoup_fec {
            // A seed of its own, so that FEC draws nothing from the connection's generator.
            let seed = self.config.seed ^ crate::fec::TRANSPORT_PARAMETER_ID;
            self.fec.sender = Some(FecSender::new(spec.build(seed)));
        } else {
            tracing::warn!(
                fec = %spec,
                "the peer did not negotiate FEC (no recoup_fec transport parameter): plain ARQ"
            );
        }
    }

    pub(super) fn fec_on_send_state(&mut self, now: Instant) {
        let state = self.recovery.send_state;
        if let Some(s) = self.fec.sender.as_mut() {
            if state.is_some() && state != self.fec.send_state {
                self.fec.send_state = state;
                s.scheme_mut()
                    .on_send_state(now, state.unwrap_or(SendState::OffMode));
            }
        }
    }

    fn fec_context(&self) -> FecContext {
        let rtt = self.recovery.loss.rtt();
        FecContext {
            state: self.recovery.send_state.unwrap_or(SendState::OffMode),
            rtt: rtt.has_sample().then(|| rtt.sample()),
            cwnd: self.recovery.cc.window(),
            bytes_in_flight: self.recovery.loss.bytes_in_flight(),
        }
    }

    /// Whether a repair symbol waits to be sent.
    pub(super) fn fec_has_repair(&mut self, now: Instant) -> bool {
        let ctx = self.fec_context();
        self.fec
            .sender
            .as_mut()
            .is_some_and(|s| s.peek(now, &ctx).is_some())
    }

    /// Where STREAM frames must end in a packet: with FEC on, room is kept for a repair
    /// frame's header so that a repair symbol over this packet fits a packet of its own.
    pub(super) fn fec_stream_end(&self, end: usize) -> usize {
        if self.fec.sender.is_some() {
            end.saturating_sub(MAX_REPAIR_OVERHEAD)
        } else {
            end
        }
    }

    /// Writes the next repair symbol into the packet if one waits, congestion control lets it
    /// go and it fits.
    pub(super) fn fec_write_repair(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        end: usize,
        pkt: &mut Open,
        qlog: bool,
    ) {
        if self.fec.sender.is_none()
            || !self
                .recovery
                .congestion_allows(now, self.path.max_datagram_size)
        {
            return;
        }
        let ctx = self.fec_context();
        let Some(sender) = self.fec.sender.as_mut() else {
            return;
        };
        let Some(r) = sender.peek(now, &ctx) else {
            return;
        };
        let frame = RepairFrame {
            first_pn: r.first_pn,
            span: r.span,
            window: r.window,
            repairs: r.repairs,
            index: r.index,
            symbol: &r.symbol,
        };
        let len = Frame::Repair(frame).encoded_len();
        if buf.len() + len > end {
            return;
        }
        Frame::Repair(frame).encode(buf);
        if qlog {
            pkt.qlog_frames
                .push(QlogFrame::of(&Frame::Repair(frame), None));
        }
        sender.pop();
        pkt.frames.repair = true;
        pkt.ack_eliciting = true;
        pkt.in_flight = true;
        self.stats.repair_packets_sent += 1;
        self.stats.repair_bytes_sent += len as u64;
    }

    /// A 1-RTT packet was sealed: if it carried stream data it is a source symbol.
    pub(super) fn fec_on_packet_sent(&mut self, now: Instant, pn: u64, frames: &SentFrames) {
        if self.fec.sender.is_none() || frames.stream.is_empty() {
            return;
        }
        let mut symbol = Vec::new();
        let mut data = Vec::new();
        for (i, r) in frames.stream.iter().enumerate() {
            data.clear();
            let len = r.range.len() as usize;
            if len > 0
                && self
                    .streams
                    .read_range(StreamId(r.range.stream), r.range.start, len, &mut data)
                    .is_err()
            {
                // Just written from the send buffer, so still there; if not, no symbol.
                return;
            }
            source_symbol(
                &mut symbol,
                &StreamFrame {
                    stream_id: r.range.stream,
                    offset: r.range.start,
                    data: &data,
                    fin: frames.fins >> i & 1 == 1,
                },
            );
        }
        let kind = frames.kind.unwrap_or(recoup_recovery::SendKind::New);
        if let Some(s) = self.fec.sender.as_mut() {
            s.on_source_sent(now, pn, kind, &frames.stream, frames.fins, symbol);
        }
    }

    pub(super) fn fec_on_packet_acked(
        &mut self,
        now: Instant,
        info: &PacketInfo<'_>,
        repair: bool,
    ) {
        if let Some(s) = self.fec.sender.as_mut() {
            s.scheme_mut().on_packet_acked(now, info, repair);
        }
    }

    pub(super) fn fec_on_packet_lost(&mut self, now: Instant, info: &PacketInfo<'_>, repair: bool) {
        if let Some(s) = self.fec.sender.as_mut() {
            s.scheme_mut().on_packet_lost(now, info, repair);
        }
    }

    pub(super) fn fec_on_rtt_update(&mut self, now: Instant, rtt: &RttSample) {
        if let Some(s) = self.fec.sender.as_mut() {
            s.scheme_mut().on_rtt_update(now, rtt);
        }
    }

    pub(super) fn fec_timeout(&self) -> Option<Instant> {
        self.fec.sender.as_ref()?.scheme().poll_timeout()
    }

    pub(super) fn fec_on_timeout(&mut self, now: Instant) {
        if let Some(s) = self.fec.sender.as_mut() {
            if s.scheme().poll_timeout().is_some_and(|t| now >= t) {
                s.scheme_mut().on_timeout(now);
            }
        }
    }

    /// Packet `pn` arrived with these STREAM frames (`symbol`, as [`source_symbol`] writes them).
    pub(super) fn fec_on_source_received(&mut self, pn: u64, symbol: Vec<u8>) {
        if let Some(r) = self.fec.receiver.as_mut() {
            r.on_source(pn, symbol);
        }
    }

    /// A REPAIR frame arrived in packet `pn`: restore what it completes and hand the restored
    /// STREAM frames to the streams as if they had arrived (they are not acknowledged).
    pub(super) fn on_repair_frame(
        &mut self,
        now: Instant,
        pn: u64,
        frame: &RepairFrame<'_>,
    ) -> Result<(), TransportError> {
        let Some(receiver) = self.fec.receiver.as_mut() else {
            // We did not announce recoup_fec: to us this is an unknown frame type (§12.4).
            return Err(transport_err!(
                FRAME_ENCODING_ERROR,
                "REPAIR frame without the recoup_fec transport parameter"
            ));
        };
        self.stats.repair_frames_received += 1;
        for restored in receiver.on_repair(pn, frame)? {
            let mut canonical = Vec::new();
            let mut bytes = 0u64;
            for f in Frames::new(&restored.symbol) {
                match f? {
                    Frame::Padding { .. } => {}
                    Frame::Stream(s) => {
                        self.streams
                            .on_stream(StreamId(s.stream_id), s.offset, s.data, s.fin)?;
                        source_symbol(&mut canonical, &s);
                        bytes += s.data.len() as u64;
                    }
                    other => {
                        return Err(transport_err!(
                            PROTOCOL_VIOLATION,
                            "REPAIR restored packet {} holding a {} frame",
                            restored.pn,
                            other.ty().name()
                        ));
                    }
                }
            }
            self.stats.fec_recovered_packets += 1;
            self.stats.fec_recovered_bytes += bytes;
            if let Some(q) = self.qlog.as_mut() {
                q.log(
                    now,
                    Event::FecRecovered(FecRecovered {
                        packet_number: restored.pn,
                        stream_bytes: bytes,
                    }),
                );
            }
            if let Some(r) = self.fec.receiver.as_mut() {
                r.on_source(restored.pn, canonical);
            }
        }
        Ok(())
    }
}
