//! A [`StreamApp`] on one connection of recoup's QUIC transport: how its stream keys map to stream
//! IDs, how the transport's packet records reach [`StreamApp::on_feedback`], and the write loop.
//! The simulator's nodes and the real-socket driver (`recoup-net`'s cloud-gaming sessions) share
//! it, so an application behaves the same on both.

use foldhash::{HashMap, HashMapExt};
use recoup_time::Instant;
use recoup_transport::streams::{Dir, StreamId};
use recoup_transport::{Connection, Error as TransportError, PacketRecord, Side};

use crate::{FrameError, PacketFeedback, PathFeedback, StreamApp, StreamKey, WriteData};

/// Bytes asked of the application per write call.
const WRITE_CHUNK: usize = 64 * 1024;

/// What [`AppConn::write`] left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Written {
    /// The application has nothing more to write now.
    Idle,
    /// The transport took less than offered (flow control, send buffer, the peer's
    /// MAX_STREAMS); the rest is kept for the next call.
    Blocked,
}

/// One application endpoint's view of one connection.
#[derive(Debug)]
pub struct AppConn {
    side: Side,
    /// Whether the application's streams are bidirectional (it answers on the streams its peer
    /// opens, rpc). Otherwise they are unidirectional: a bidirectional stream whose reverse
    /// half nobody finishes is never released, and the peer's MAX_STREAMS would stop the
    /// application after as many streams.
    bidi: bool,
    /// `Local(i)` streams opened so far, by index. Looked up at every write, several times per
    /// packet sent: foldhash rather than SipHash (0.8 % of a bulk transfer's instructions);
    /// nothing iterates over it, so its order, which varies per process, never shows.
    local: HashMap<u64, StreamId>,
    /// A write the transport has not taken whole yet.
    pending: Option<(StreamKey, WriteData, bool)>,
}

impl AppConn {
    #[must_use]
    pub fn new(side: Side, bidi: bool) -> Self {
        Self {
            side,
            bidi,
            local: HashMap::new(),
            pending: None,
        }
    }

    /// Stream `id` as the application names it.
    #[must_use]
    pub fn key(&self, id: StreamId) -> StreamKey {
        if id.initiator() == self.side {
            StreamKey::Local(id.index())
        } else {
            StreamKey::Peer(id.index())
        }
    }

    /// Hands the packet records since the last call (empty unless the transport records them,
    /// `TransportConfig::record_packets`) and the path's rates to the application.
    pub fn feedback(&self, now: Instant, conn: &mut Connection, app: &mut dyn StreamApp) {
        if !app.wants_feedback() {
            // Records the transport keeps would pile up unread.
            conn.drain_packet_records().for_each(drop);
            return;
        }
        let feedback: Vec<PacketFeedback> = conn
            .drain_packet_records()
            .map(|r| match r {
                PacketRecord::Sent {
                    pn,
                    at,
                    bytes,
                    resend,
                    streams,
                } => PacketFeedback::Sent {
                    pn,
                    at,
                    bytes,
                    resend,
                    streams: streams
                        .into_iter()
                        .map(|(id, n)| (self.key(id), n))
                        .collect(),
                },
                PacketRecord::Acked { pn, at } => PacketFeedback::Acked { pn, at },
                PacketRecord::Lost { pn, at } => PacketFeedback::Lost { pn, at },
            })
            .collect();
        let (srtt, cwnd, _) = conn.path_stats();
        let path = PathFeedback {
            pacing_rate: conn.pacing_rate(),
            delay_rate: (!srtt.is_zero())
                .then(|| (cwnd as f64 * 8.0 / srtt.as_secs_f64()).min(u64::MAX as f64) as u64),
        };
        app.on_feedback(now, &feedback, path);
    }

    /// Reads what stream `id` has into the application, up to its end: the bytes read, and the
    /// application's first complaint about them.
    pub fn read(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        app: &mut dyn StreamApp,
        id: StreamId,
    ) -> (u64, Option<FrameError>) {
        let key = self.key(id);
        let mut error = None;
        // The bytes go to the application where the transport holds them: a copy into a buffer
        // of ours cost a bulk transfer 2 % of its CPU (BENCHMARKS.md, the simulator profile).
        let read = conn.stream_read_with(id, |piece, fin| {
            if let Err(e) = app.on_stream_bytes(now, key, piece, fin) {
                error.get_or_insert(e);
            }
        });
        (read.map_or(0, |(n, _)| n as u64), error)
    }

    /// Resets every stream the application gives up on now ([`StreamApp::poll_reset`]), with
    /// `code` as the application error code. A stream not opened yet is opened first, so that
    /// `Local(i)` stays the i-th stream and the peer learns of the abandoned stream. A write
    /// held for a reset stream is dropped.
    pub fn resets(
        &mut self,
        conn: &mut Connection,
        now: Instant,
        app: &mut dyn StreamApp,
        code: u64,
    ) -> Result<(), String> {
        loop {
            let acked = |key: StreamKey| match key {
                StreamKey::Local(i) => self
                    .local
                    .get(&i)
                    .map_or(0, |&id| conn.stream_acked_prefix(id).unwrap_or(u64::MAX)),
                StreamKey::Peer(_) => 0,
            };
            let Some(key) = app.poll_reset(now, &acked) else {
                return Ok(());
            };
            if self.pending.as_ref().is_some_and(|(k, _, _)| *k == key) {
                self.pending = None;
            }
            let StreamKey::Local(i) = key else {
                return Err(format!("reset of the peer's stream {key:?}"));
            };
            let id = match self.local.get(&i) {
                Some(&id) => id,
                None => match conn.open_stream(self.bidi) {
                    Ok(id) => {
                        self.local.insert(i, id);
                        id
                    }
                    // The peer's MAX_STREAMS: nothing of it was sent, nothing to reset.
                    Err(TransportError::Blocked) => continue,
                    Err(e) => return Err(e.to_string()),
                },
            };
            match conn.stream_reset(now, id, code) {
                // A stream whose every byte was acknowledged is gone: nothing left to reset.
                Ok(()) | Err(TransportError::UnknownStream(_)) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Finishes a partial write, then takes new ones while the transport accepts them. An
    /// error is the transport's refusal, other than being blocked.
    pub fn write(
        &mut self,
        conn: &mut Connection,
        now: Instant,
        app: &mut dyn StreamApp,
    ) -> Result<Written, String> {
        loop {
            if let Some((key, mut data, fin)) = self.pending.take() {
                let id = match key {
                    StreamKey::Local(i) => match self.local.get(&i) {
                        Some(&id) => Some(id),
                        None => match conn.open_stream(self.bidi) {
                            Ok(id) => {
                                self.local.insert(i, id);
                                if let Some(d) = app.stream_deadline(key) {
                                    conn.set_stream_deadline(id, d);
                                }
                                Some(id)
                            }
                            // The peer's MAX_STREAMS: wait until it grants more.
                            Err(TransportError::Blocked) => None,
                            Err(e) => return Err(e.to_string()),
                        },
                    },
                    StreamKey::Peer(i) => Some(StreamId::new(
                        self.side.peer(),
                        Dir::from_bidi(self.bidi),
                        i,
                    )),
                };
                // The stream keeps the bytes it takes as they are; the rest stays in `data`.
                let write = |id| match &mut data {
                    WriteData::Bytes(b) => conn.stream_write_chunk(id, b),
                    WriteData::Sourced(s) => conn.stream_write_sourced(id, s),
                };
                match id.map(write) {
                    Some(Ok(_)) | None | Some(Err(TransportError::Blocked)) => {}
                    Some(Err(e)) => return Err(e.to_string()),
                }
                if id.is_none() || !data.is_empty() {
                    self.pending = Some((key, data, fin));
                    return Ok(Written::Blocked);
                }
                if let Some(id) = id {
                    if fin && conn.stream_finish(id).is_err() {
                        return Err("stream finish failed".into());
                    }
                }
            }
            let Some(w) = app.poll_write(now, WRITE_CHUNK) else {
                return Ok(Written::Idle);
            };
            self.pending = Some((w.stream, w.data, w.fin));
        }
    }
}
