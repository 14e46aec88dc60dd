//! Media over QUIC as a relay's egress sends it (MoQ Transport, draft-ietf-moq-transport; the
//! moq-lite profile): a broadcast of *tracks*, each a sequence of *groups* (one GOP each, from a
//! key frame), each a sequence of *objects* (the frames). Every group goes on a stream of its
//! own, the objects in order, the group's last object with the stream's FIN.
//!
//! Each track has a delivery deadline: an object is due at the subscriber by its capture time
//! plus the deadline (MoQ Transport's DELIVERY TIMEOUT; 500 ms by default). When an object's
//! deadline passes before the peer has acknowledged it, the publisher gives up on its whole group
//! (the later objects of a GOP depend on it): it resets the group's stream with
//! [`DELIVERY_TIMEOUT`] and writes no more of that group, so the transport sends none of the
//! group's data again, neither retransmission nor copy ([`crate::StreamApp::poll_reset`]).
//!
//! Objects carry recoup's frame header ([`crate::frame`]) with sequence number
//! `track << 40 | frame index`, so the subscriber knows each object's track, index and capture
//! time from its bytes alone.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::frame::{
    FrameError, FrameKind, FrameParser, FrameSource, FRAME_HEADER_LEN, MAX_PAYLOAD,
};
use crate::source::EncoderConfig;
use crate::{clock_tick, keep_first_error, unexpected, StreamApp, StreamKey, Write, WriteData};

/// The application error code of a group's reset: MoQ Transport's DELIVERY_TIMEOUT stream reset
/// code (draft-ietf-moq-transport, "Data Streams": RESET_STREAM codes).
pub const DELIVERY_TIMEOUT: u64 = 0x2;

/// Bits of an object's sequence number that hold its frame index; the track is above them.
const TRACK_SHIFT: u32 = 40;

/// A broadcast's parameters (both ends).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoqConfig {
    /// Video tracks, each encoded at `encoder.bitrate / tracks`.
    pub tracks: u32,
    /// Every track's encoder; `gop` frames per group (at least 1).
    pub encoder: EncoderConfig,
    /// Every track's delivery deadline after capture.
    pub deadline: Duration,
}

impl Default for MoqConfig {
    /// One 4 Mbit/s track at 30 fps in groups of 30 frames (the AutoRec testbed's live stream);
    /// 500 ms delivery deadline.
    fn default() -> Self {
        Self {
            tracks: 1,
            encoder: EncoderConfig {
                bitrate: 4_000_000,
                fps: 30,
                gop: 30,
                key_ratio: 5.0,
                size_noise: 0.1,
            },
            deadline: Duration::from_millis(500),
        }
    }
}

impl MoqConfig {
    /// One track's encoder.
    fn track_encoder(&self) -> EncoderConfig {
        EncoderConfig {
            bitrate: self.encoder.bitrate / u64::from(self.tracks.max(1)),
            gop: self.encoder.gop.max(1),
            ..self.encoder
        }
    }
}

/// One object (frame) of a broadcast, as the publisher produces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoqObject {
    pub track: u32,
    /// Index of the frame in its track.
    pub frame: u64,
    /// The group's stream: `Local(stream)` of the publisher.
    pub stream: u64,
    pub kind: FrameKind,
    pub payload_len: u32,
    pub capture: Instant,
    pub deadline: Instant,
    /// The last object of its group: its stream ends with it.
    pub last_in_group: bool,
}

impl MoqObject {
    /// Bytes of the object on its stream, header included.
    #[must_use]
    pub fn wire_len(&self) -> u64 {
        FRAME_HEADER_LEN as u64 + u64::from(self.payload_len.min(MAX_PAYLOAD))
    }

    /// The sequence number in the object's frame header.
    #[must_use]
    pub fn sequence(&self) -> u64 {
        (u64::from(self.track) << TRACK_SHIFT) | self.frame
    }
}

/// The objects of a broadcast in capture order (tracks in order at one instant), and the stream
/// of each group. A function of the configuration, start, length and random generator alone, so
/// a test can rebuild what a run's publisher sent.
#[derive(Debug)]
pub struct MoqSchedule {
    config: MoqConfig,
    encoder: EncoderConfig,
    rng: ChaCha8Rng,
    start: Instant,
    end: Instant,
    /// Per track: the next frame index, and the stream of its current group.
    next_frame: Vec<u64>,
    group_stream: Vec<u64>,
    next_stream: u64,
}

impl MoqSchedule {
    #[must_use]
    pub fn new(config: &MoqConfig, start: Instant, duration: Duration, rng: ChaCha8Rng) -> Self {
        let tracks = config.tracks.max(1) as usize;
        Self {
            config: *config,
            encoder: config.track_encoder(),
            rng,
            start,
            end: start + duration,
            next_frame: vec![0; tracks],
            group_stream: vec![0; tracks],
            next_stream: 0,
        }
    }

    /// The track with the earliest next capture, and that time, if before the end.
    fn next(&self) -> Option<(usize, Instant)> {
        self.next_frame
            .iter()
            .enumerate()
            .map(|(t, &n)| (t, clock_tick(self.start, self.encoder.fps, n)))
            .min_by_key(|&(t, at)| (at, t))
            .filter(|&(_, at)| at < self.end)
    }

    /// When the next object is captured, if before the end.
    #[must_use]
    pub fn next_capture(&self) -> Option<Instant> {
        self.next().map(|(_, at)| at)
    }

    /// The next object captured at or before `now`.
    pub fn next_due(&mut self, now: Instant) -> Option<MoqObject> {
        let (t, capture) = self.next().filter(|&(_, at)| at <= now)?;
        let frame = self.next_frame[t];
        let gop = u64::from(self.encoder.gop);
        if frame % gop == 0 {
            self.group_stream[t] = self.next_stream;
            self.next_stream += 1;
        }
        let (kind, payload_len) = self.encoder.frame(frame, &mut self.rng);
        self.next_frame[t] += 1;
        Some(MoqObject {
            track: u32::try_from(t).unwrap_or(u32::MAX),
            frame,
            stream: self.group_stream[t],
            kind,
            payload_len,
            capture,
            deadline: capture + self.config.deadline,
            last_in_group: (frame + 1) % gop == 0,
        })
    }
}

/// A group whose objects are not all acknowledged yet.
#[derive(Debug, Default)]
struct OpenGroup {
    /// Bytes of the group's objects produced so far.
    len: u64,
    /// End offset and deadline of each object not yet acknowledged, in stream order.
    owed: VecDeque<(u64, Instant)>,
    /// Its last object was produced.
    complete: bool,
}

/// The publisher: produces every track's objects at the frame clock, writes them in capture
/// order, and resets a group when an object of it misses its deadline.
#[derive(Debug)]
pub struct MoqPublisher {
    schedule: MoqSchedule,
    /// Objects to write, in capture order: stream, bytes left, and whether the group ends.
    queue: VecDeque<(StreamKey, FrameSource, bool)>,
    groups: BTreeMap<u64, OpenGroup>,
    /// Groups reset while their track was still producing them: their later objects are dropped.
    abandoned: BTreeSet<u64>,
    /// Groups reset, and objects never written because their group was.
    pub groups_reset: u64,
    pub objects_dropped: u64,
}

impl MoqPublisher {
    #[must_use]
    pub fn new(config: &MoqConfig, start: Instant, duration: Duration, rng: ChaCha8Rng) -> Self {
        Self {
            schedule: MoqSchedule::new(config, start, duration, rng),
            queue: VecDeque::new(),
            groups: BTreeMap::new(),
            abandoned: BTreeSet::new(),
            groups_reset: 0,
            objects_dropped: 0,
        }
    }

    fn produce(&mut self, now: Instant) {
        while let Some(o) = self.schedule.next_due(now) {
            if self.abandoned.contains(&o.stream) {
                self.objects_dropped += 1;
                if o.last_in_group {
                    self.abandoned.remove(&o.stream);
                }
                continue;
            }
            let source = FrameSource::new(o.kind, o.sequence(), o.capture, o.payload_len);
            let group = self.groups.entry(o.stream).or_default();
            group.len += source.len();
            group.owed.push_back((group.len, o.deadline));
            group.complete = o.last_in_group;
            self.queue
                .push_back((StreamKey::Local(o.stream), source, o.last_in_group));
        }
    }
}

impl StreamApp for MoqPublisher {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        self.produce(now);
        if max == 0 {
            return None;
        }
        let (stream, source, ends_group) = self.queue.front_mut()?;
        let stream = *stream;
        let data: WriteData = source.read(max);
        let done = source.is_empty();
        let fin = done && *ends_group;
        if done {
            self.queue.pop_front();
        }
        Some(Write { stream, data, fin })
    }

    fn poll_reset(&mut self, now: Instant, acked: &dyn Fn(StreamKey) -> u64) -> Option<StreamKey> {
        self.produce(now);
        let mut expired = None;
        self.groups.retain(|&stream, group| {
            let acked = acked(StreamKey::Local(stream));
            while group.owed.front().is_some_and(|&(end, _)| end <= acked) {
                group.owed.pop_front();
            }
            if expired.is_none() && group.owed.front().is_some_and(|&(_, due)| due <= now) {
                expired = Some((stream, group.complete));
                return false;
            }
            !(group.complete && group.owed.is_empty())
        });
        let (stream, complete) = expired?;
        self.groups_reset += 1;
        if !complete {
            self.abandoned.insert(stream);
        }
        let key = StreamKey::Local(stream);
        let before = self.queue.len();
        self.queue.retain(|(k, _, _)| *k != key);
        self.objects_dropped += (before - self.queue.len()) as u64;
        Some(key)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let deadline = self
            .groups
            .values()
            .filter_map(|g| g.owed.front().map(|&(_, due)| due))
            .min();
        match (self.schedule.next_capture(), deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn finish(&mut self, _now: Instant) {}
}

/// What a subscriber measured, over the objects whose deadline passed before the end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MoqOutcome {
    pub objects_due: u64,
    pub objects_on_time: u64,
    /// Received whole, but after the deadline.
    pub objects_late: u64,
    /// Never received whole (their group was reset, or the run ended first).
    pub objects_dropped: u64,
    /// Capture to last byte of each object received whole, milliseconds.
    pub delays_ms: Vec<f64>,
    pub error: Option<FrameError>,
}

/// The subscriber: reads every group stream and times each object.
#[derive(Debug)]
pub struct MoqSubscriber {
    start: Instant,
    end: Instant,
    fps: u32,
    tracks: u32,
    deadline: Duration,
    parsers: BTreeMap<u64, FrameParser>,
    /// Capture and arrival of each object received whole.
    received: Vec<(Instant, Instant)>,
    outcome: Option<MoqOutcome>,
    error: Option<FrameError>,
}

impl MoqSubscriber {
    #[must_use]
    pub fn new(config: &MoqConfig, start: Instant, duration: Duration) -> Self {
        Self {
            start,
            end: start + duration,
            fps: config.encoder.fps.max(1),
            tracks: config.tracks.max(1),
            deadline: config.deadline,
            parsers: BTreeMap::new(),
            received: Vec::new(),
            outcome: None,
            error: None,
        }
    }

    /// Complete after [`StreamApp::finish`].
    #[must_use]
    pub fn outcome(&self) -> MoqOutcome {
        self.outcome.clone().unwrap_or_else(|| MoqOutcome {
            error: self.error.clone(),
            ..MoqOutcome::default()
        })
    }

    fn receive(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let StreamKey::Peer(i) = stream else {
            return Err(unexpected(stream));
        };
        let parser = self
            .parsers
            .entry(i)
            .or_insert_with(|| FrameParser::new(None));
        let mut frames = Vec::new();
        let pushed = parser.push(now, data, &mut frames);
        let ended = if fin { parser.finish() } else { Ok(()) };
        if fin {
            self.parsers.remove(&i);
        }
        for f in frames {
            let track = f.header.sequence >> TRACK_SHIFT;
            if track >= u64::from(self.tracks) {
                return Err(FrameError::Protocol(format!(
                    "object of track {track} on stream {i}: the broadcast has {} tracks",
                    self.tracks
                )));
            }
            let capture = self.start + Duration::from_micros(f.header.capture_us);
            self.received.push((capture, f.completed));
        }
        pushed.and(ended)
    }
}

impl StreamApp for MoqSubscriber {
    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let r = self.receive(now, stream, data, fin);
        keep_first_error(&mut self.error, r)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn finish(&mut self, now: Instant) {
        // Objects per track captured before the end whose deadline passed by `now`.
        let mut per_track = 0u64;
        loop {
            let capture = clock_tick(self.start, self.fps, per_track);
            if capture >= self.end || capture + self.deadline > now {
                break;
            }
            per_track += 1;
        }
        let objects_due = per_track * u64::from(self.tracks);
        let mut delays_ms = Vec::new();
        let (mut on_time, mut late) = (0u64, 0u64);
        for &(capture, completed) in &self.received {
            if capture + self.deadline > now {
                continue;
            }
            delays_ms.push(completed.saturating_duration_since(capture).as_secs_f64() * 1e3);
            if completed <= capture + self.deadline {
                on_time += 1;
            } else {
                late += 1;
            }
        }
        self.outcome = Some(MoqOutcome {
            objects_due,
            objects_on_time: on_time,
            objects_late: late,
            objects_dropped: objects_due.saturating_sub(on_time + late),
            delays_ms,
            error: self.error.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::testutil::{ms, pipe};

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(3)
    }

    fn config() -> MoqConfig {
        MoqConfig {
            tracks: 2,
            encoder: EncoderConfig {
                gop: 3,
                fps: 10,
                ..MoqConfig::default().encoder
            },
            ..MoqConfig::default()
        }
    }

    #[test]
    fn each_group_on_its_own_stream_tracks_interleaved() {
        let mut s = MoqSchedule::new(&config(), ms(0), Duration::from_millis(700), rng());
        let objects: Vec<_> = std::iter::from_fn(|| s.next_due(ms(10_000))).collect();
        // 7 frames per track, groups of 3: streams 0,1 (t=0), 2,3 (t=300), 4,5 (t=600).
        assert_eq!(objects.len(), 14);
        let streams: Vec<_> = objects.iter().map(|o| (o.track, o.stream)).collect();
        assert_eq!(
            &streams[..6],
            &[(0, 0), (1, 1), (0, 0), (1, 1), (0, 0), (1, 1)]
        );
        assert_eq!(streams[6..8], [(0, 2), (1, 3)]);
        assert_eq!(streams[12..], [(0, 4), (1, 5)]);
        assert!(objects[4].last_in_group && !objects[6].last_in_group);
        assert_eq!(objects[6].kind, FrameKind::Key);
        assert_eq!(objects[6].deadline, ms(800));
    }

    #[test]
    fn an_ideal_pipe_delivers_every_object_on_time() {
        let cfg = config();
        let mut p = MoqPublisher::new(&cfg, ms(0), Duration::from_secs(2), rng());
        let mut sub = MoqSubscriber::new(&cfg, ms(0), Duration::from_secs(2));
        for t in (0..2000).step_by(100) {
            pipe(&mut p, &mut sub, ms(t), ms(t + 20));
            assert_eq!(p.poll_reset(ms(t + 20), &|_| u64::MAX), None);
        }
        sub.finish(ms(3000));
        let o = sub.outcome();
        assert_eq!((o.objects_due, o.objects_on_time), (40, 40), "{o:?}");
        assert_eq!((o.objects_late, o.objects_dropped, o.error), (0, 0, None));
        assert!(o.delays_ms.iter().all(|&d| (d - 20.0).abs() < 1e-9));
    }

    #[test]
    fn a_group_unacknowledged_at_its_deadline_is_reset_and_no_more_of_it_written() {
        let cfg = config();
        let mut p = MoqPublisher::new(&cfg, ms(0), Duration::from_secs(2), rng());
        let drain = |p: &mut MoqPublisher, at| {
            std::iter::from_fn(|| p.poll_write(at, 1 << 20).map(|w| w.stream)).collect::<Vec<_>>()
        };
        // Frames 0 and 1 of both tracks: groups on streams 0 (track 0) and 1 (track 1).
        assert_eq!(
            drain(&mut p, ms(100)),
            [0, 1, 0, 1].map(StreamKey::Local).to_vec()
        );
        // Track 1's group acknowledged, track 0's not at all.
        let acked = |k: StreamKey| {
            if k == StreamKey::Local(1) {
                u64::MAX
            } else {
                0
            }
        };
        assert_eq!(p.poll_reset(ms(499), &acked), None);
        // Frame 0's deadline (and frame 5's capture).
        assert_eq!(p.next_wakeup(), Some(ms(500)));
        assert_eq!(p.poll_reset(ms(500), &acked), Some(StreamKey::Local(0)));
        assert_eq!(p.poll_reset(ms(500), &acked), None);
        // Frame 2 of track 0, still queued, is dropped with its group; the rest goes out.
        assert_eq!(
            drain(&mut p, ms(500)),
            [1, 2, 3, 2, 3, 2, 3].map(StreamKey::Local).to_vec()
        );
        assert_eq!((p.groups_reset, p.objects_dropped), (1, 1));
    }

    #[test]
    fn a_group_reset_while_produced_drops_its_later_objects() {
        let none = |_: StreamKey| 0;
        // A 100 ms deadline: both groups are reset at 100 ms, with one frame of three produced.
        let short = MoqConfig {
            deadline: Duration::from_millis(100),
            ..config()
        };
        let mut q = MoqPublisher::new(&short, ms(0), Duration::from_secs(2), rng());
        while q.poll_write(ms(0), 1 << 20).is_some() {}
        assert_eq!(q.poll_reset(ms(100), &none), Some(StreamKey::Local(0)));
        assert_eq!(q.poll_reset(ms(100), &none), Some(StreamKey::Local(1)));
        let later: Vec<_> =
            std::iter::from_fn(|| q.poll_write(ms(300), 1 << 20).map(|w| w.stream)).collect();
        // Frames 1 and 2 of both groups are dropped; frame 3 opens groups 2 and 3.
        assert_eq!(later, [2, 3].map(StreamKey::Local).to_vec());
        assert_eq!((q.groups_reset, q.objects_dropped), (2, 4));
    }
}
