//! DATAGRAM frames (RFC 9221): the send and receive queues, the size limits both ends
//! announced, writing the frames into 1-RTT packets and taking them out of received ones.
//!
//! Invariants: a datagram is sent at most once and never retransmitted (§5.2), so a packet's
//! `SentFrames` keeps only how many it carried (for the loss count), never their bytes, and no
//! stream range: the loss-recovery policy and the lineages never see datagram data. Datagrams
//! wait for the congestion window and pacing like stream data (§5.4). Both queues are bounded
//! in bytes and drop their oldest entry to make room (counted, and logged to qlog).

use std::collections::VecDeque;

use bytes::Bytes;
use recoup_time::Instant;

use super::send::{Open, TAG_LEN};
use super::{Connection, Event};
use crate::error::{transport_err, Error, TransportError};
use crate::frame::{DatagramFrame, Frame};
use crate::qlog::{self, DatagramDropped, QlogFrame, RawInfo};

/// The longest packet number encoding: a datagram sized for it fits any 1-RTT packet.
const MAX_PN_LEN: usize = 4;

/// Datagrams waiting to be sent and waiting to be read.
#[derive(Debug, Default)]
pub(super) struct DatagramQueues {
    send: VecDeque<Bytes>,
    send_bytes: usize,
    recv: VecDeque<Bytes>,
    recv_bytes: usize,
}

impl DatagramQueues {
    pub fn has_send(&self) -> bool {
        !self.send.is_empty()
    }
}

/// The most data a DATAGRAM frame with a Length field can carry in `frame_room` bytes.
fn max_data_len(frame_room: usize) -> usize {
    let mut n = frame_room.saturating_sub(2);
    while n > 0 && DatagramFrame::frame_len(n, true) > frame_room {
        n -= 1;
    }
    n
}

impl Connection {
    /// The largest datagram [`Connection::datagram_send`] accepts now: what fits both the
    /// peer's `max_datagram_frame_size` (RFC 9221 §3) and a 1-RTT packet of the path's current
    /// datagram size (§5: a DATAGRAM frame cannot be split across packets). `None` while the
    /// peer's transport parameters are unknown or when it announced no DATAGRAM support.
    #[must_use]
    pub fn datagram_max_size(&self) -> Option<usize> {
        let peer = self.handshake.peer_params.as_ref()?.max_datagram_frame_size;
        if peer == 0 {
            return None;
        }
        let peer = usize::try_from(peer).unwrap_or(usize::MAX);
        Some(max_data_len(peer.min(self.datagram_frame_room())))
    }

    /// Bytes a DATAGRAM frame may take in an otherwise empty 1-RTT packet.
    fn datagram_frame_room(&self) -> usize {
        let header = 1 + self.cids.remote().len() + MAX_PN_LEN;
        self.path.max_datagram_size.saturating_sub(header + TAG_LEN)
    }

    /// Queues `data` to go in a DATAGRAM frame (RFC 9221) at the next chance the congestion
    /// window and pacing give (§5.4); it is sent once and never retransmitted (§5.2). When the
    /// queue holds more than [`crate::DatagramConfig::send_buffer`] bytes, the oldest datagrams
    /// are dropped. Fails when the connection is closing, before the peer's transport
    /// parameters are known, when the peer did not announce `max_datagram_frame_size`, or when
    /// `data` exceeds [`Connection::datagram_max_size`].
    pub fn datagram_send(&mut self, now: Instant, data: Bytes) -> Result<(), Error> {
        self.check_open()?;
        let Some(params) = self.handshake.peer_params.as_ref() else {
            return Err(Error::InvalidState(
                "the peer's transport parameters are not known yet: DATAGRAM needs its \
                 max_datagram_frame_size (RFC 9221 §3)",
            ));
        };
        let peer = params.max_datagram_frame_size;
        if peer == 0 {
            return Err(Error::DatagramsUnsupported);
        }
        let frame = DatagramFrame::frame_len(data.len(), true);
        if frame as u64 > peer {
            return Err(Error::DatagramTooLarge {
                size: data.len(),
                max: self.datagram_max_size().unwrap_or(0),
                limit: "the peer's max_datagram_frame_size (RFC 9221 §3)",
            });
        }
        if frame > self.datagram_frame_room() {
            return Err(Error::DatagramTooLarge {
                size: data.len(),
                max: self.datagram_max_size().unwrap_or(0),
                limit: "a packet of the path's datagram size (RFC 9221 §5)",
            });
        }
        let q = &mut self.datagrams;
        q.send_bytes += data.len();
        q.send.push_back(data);
        while q.send_bytes > self.config.datagrams.send_buffer && q.send.len() > 1 {
            let old = q.send.pop_front().map_or(0, |d| d.len());
            q.send_bytes -= old;
            self.stats.datagram_frames_dropped += 1;
            log_dropped(self.qlog.as_mut(), now, old, "send_queue_full");
        }
        Ok(())
    }

    /// The oldest received datagram not yet read. [`Event::DatagramReceived`] says when the
    /// queue stops being empty: read until `None` then.
    pub fn datagram_recv(&mut self) -> Option<Bytes> {
        let d = self.datagrams.recv.pop_front()?;
        self.datagrams.recv_bytes -= d.len();
        Some(d)
    }

    /// Writes queued datagrams, oldest first, while they fit before `end`. A datagram that no
    /// longer fits even an empty packet (the path's datagram size shrank since it was queued)
    /// is dropped; one that fits an empty packet but not this one waits for the next.
    pub(super) fn write_datagrams(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        end: usize,
        pkt: &mut Open,
        qlog: bool,
    ) {
        let room = self.datagram_frame_room();
        while let Some(front) = self.datagrams.send.front() {
            let len = DatagramFrame::frame_len(front.len(), true);
            if len > room {
                let dropped = front.len();
                self.datagrams.send.pop_front();
                self.datagrams.send_bytes -= dropped;
                self.stats.datagram_frames_dropped += 1;
                log_dropped(self.qlog.as_mut(), now, dropped, "too_large");
                continue;
            }
            if buf.len() + len > end {
                break;
            }
            let Some(data) = self.datagrams.send.pop_front() else {
                break;
            };
            self.datagrams.send_bytes -= data.len();
            let frame = DatagramFrame {
                data: &data,
                with_len: true,
            };
            Frame::Datagram(frame).encode(buf);
            pkt.frames.datagrams += 1;
            pkt.ack_eliciting = true;
            pkt.in_flight = true;
            self.stats.datagram_frames_sent += 1;
            if qlog {
                pkt.qlog_frames.push(QlogFrame::Datagram {
                    length: data.len() as u64,
                });
            }
        }
    }

    /// A DATAGRAM frame arrived: §3 lets it in only if we announced support, and only up to
    /// the size we announced (else PROTOCOL_VIOLATION); it then waits for the application.
    pub(super) fn on_datagram_frame(
        &mut self,
        now: Instant,
        frame: &DatagramFrame<'_>,
    ) -> Result<(), TransportError> {
        let max = self.config.datagrams.max_frame_size;
        if max == 0 {
            return Err(transport_err!(
                PROTOCOL_VIOLATION,
                "DATAGRAM frame, but we announced no max_datagram_frame_size (RFC 9221 §3)"
            ));
        }
        let size = frame.encoded_len();
        if size as u64 > max {
            return Err(transport_err!(
                PROTOCOL_VIOLATION,
                "DATAGRAM frame of {size} bytes exceeds the max_datagram_frame_size {max} we \
                 announced (RFC 9221 §3)"
            ));
        }
        self.stats.datagram_frames_received += 1;
        let limit = self.config.datagrams.receive_buffer;
        let len = frame.data.len();
        if len > limit {
            self.stats.datagram_frames_unread += 1;
            log_dropped(self.qlog.as_mut(), now, len, "receive_queue_full");
            return Ok(());
        }
        let q = &mut self.datagrams;
        let was_empty = q.recv.is_empty();
        while q.recv_bytes + len > limit {
            let old = q.recv.pop_front().map_or(0, |d| d.len());
            q.recv_bytes -= old;
            self.stats.datagram_frames_unread += 1;
            log_dropped(self.qlog.as_mut(), now, old, "receive_queue_full");
        }
        if was_empty {
            self.events.push_back(Event::DatagramReceived);
        }
        q.recv_bytes += len;
        q.recv.push_back(Bytes::copy_from_slice(frame.data));
        Ok(())
    }
}

fn log_dropped(q: Option<&mut qlog::QlogWriter>, now: Instant, len: usize, trigger: &str) {
    if let Some(q) = q {
        q.log(
            now,
            qlog::Event::DatagramDropped(DatagramDropped {
                raw: RawInfo { length: len as u64 },
                trigger: trigger.into(),
            }),
        );
    }
}
