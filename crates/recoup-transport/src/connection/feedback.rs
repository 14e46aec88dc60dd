//! Per-packet feedback for applications that adapt to the path: a cloud-gaming encoder's bitrate
//! controller reads, per video frame, when its packets went out, which were acknowledged and
//! which were lost (LADR §3.2's congestion signals are defined on exactly that). Recorded only
//! with [`TransportConfig::record_packets`](crate::TransportConfig::record_packets), drained by
//! [`Connection::drain_packet_records`].

use recoup_recovery::{PacketInfo, SendKind};
use recoup_time::Instant;

use super::Connection;
use crate::streams::StreamId;

/// One application-data packet event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PacketRecord {
    /// Sent at `at`: `bytes` on the wire, the stream bytes it carried per stream, and whether
    /// it re-sent lost data (retransmission or copy) rather than new data.
    Sent {
        pn: u64,
        at: Instant,
        bytes: usize,
        resend: bool,
        streams: Vec<(StreamId, u64)>,
    },
    Acked {
        pn: u64,
        at: Instant,
    },
    Lost {
        pn: u64,
        at: Instant,
    },
}

impl Connection {
    /// Starts or stops recording packet events on this connection alone, overriding
    /// `TransportConfig::record_packets`: a server whose connections run different
    /// applications records only for those that drain the records.
    pub fn set_record_packets(&mut self, on: bool) {
        self.config.record_packets = on;
        if !on {
            self.packet_records.clear();
        }
    }

    /// Packet events since the last call (none unless `record_packets` is set).
    pub fn drain_packet_records(&mut self) -> impl Iterator<Item = PacketRecord> + '_ {
        self.packet_records.drain(..)
    }

    /// The rate pacing sends at now, bytes per second: the congestion controller's, capped by
    /// the recovery policy's limit (LADR's reactive rate limit) and the configured
    /// `max_pacing_rate`. `None` when none of them sets one.
    #[must_use]
    pub fn pacing_rate(&self) -> Option<u64> {
        self.recovery.pacing_rate()
    }

    pub(super) fn record_sent(&mut self, info: &PacketInfo<'_>) {
        if self.config.record_packets {
            self.packet_records.push(PacketRecord::Sent {
                pn: info.pn,
                at: info.sent,
                bytes: info.bytes,
                resend: info.kind != SendKind::New,
                streams: info
                    .ranges
                    .iter()
                    .map(|r| (StreamId(r.range.stream), r.range.len()))
                    .collect(),
            });
        }
    }

    pub(super) fn record_acked(&mut self, pn: u64, at: Instant) {
        if self.config.record_packets {
            self.packet_records.push(PacketRecord::Acked { pn, at });
        }
    }

    pub(super) fn record_lost(&mut self, pn: u64, at: Instant) {
        if self.config.record_packets {
            self.packet_records.push(PacketRecord::Lost { pn, at });
        }
    }
}
