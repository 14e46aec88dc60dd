//! Real-time communication: frames at the frame clock, one stream per frame, each with a
//! playback deadline (capture time + `deadline`, e.g. 100 ms at 60 fps as in AutoRec §VII).
//!
//! A frame misses its deadline if its last byte has not arrived by then. The screen keeps
//! showing the previous frame for every missed one, so a run of `m` consecutive missed frames
//! is one freeze of `m` frame intervals.

use std::collections::VecDeque;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::frame::{FrameError, FrameSource, OneFramePerStream};
use crate::source::EncoderConfig;
use crate::{clock_tick, keep_first_error, unexpected, write_front, StreamApp, StreamKey, Write};

/// RTC parameters (both ends).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RtcConfig {
    pub encoder: EncoderConfig,
    /// Playback deadline after capture.
    pub deadline: Duration,
}

impl Default for RtcConfig {
    /// 4 Mbit/s at 60 fps, 100 ms deadline (AutoRec §VII RTC setting); key frame every 2 s.
    fn default() -> Self {
        Self {
            encoder: EncoderConfig {
                bitrate: 4_000_000,
                fps: 60,
                gop: 120,
                key_ratio: 5.0,
                size_noise: 0.1,
            },
            deadline: Duration::from_millis(100),
        }
    }
}

/// Frames captured before `start + duration`, frame `i` on `Local(i)`.
#[derive(Debug)]
pub struct RtcSender {
    encoder: EncoderConfig,
    deadline: Duration,
    rng: ChaCha8Rng,
    start: Instant,
    end: Instant,
    next_frame: u64,
    pending: VecDeque<(StreamKey, FrameSource)>,
}

impl RtcSender {
    #[must_use]
    pub fn new(config: &RtcConfig, start: Instant, duration: Duration, rng: ChaCha8Rng) -> Self {
        Self {
            encoder: config.encoder,
            deadline: config.deadline,
            rng,
            start,
            end: start + duration,
            next_frame: 0,
            pending: VecDeque::new(),
        }
    }
}

impl StreamApp for RtcSender {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        loop {
            let t = clock_tick(self.start, self.encoder.fps, self.next_frame);
            if t > now || t >= self.end {
                break;
            }
            let (kind, len) = self.encoder.frame(self.next_frame, &mut self.rng);
            let source = FrameSource::new(kind, self.next_frame, t, len);
            self.pending
                .push_back((StreamKey::Local(self.next_frame), source));
            self.next_frame += 1;
        }
        write_front(&mut self.pending, max)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let t = clock_tick(self.start, self.encoder.fps, self.next_frame);
        (t < self.end).then_some(t)
    }

    /// Frame `i`'s playout deadline: its capture time plus the deadline.
    fn stream_deadline(&self, stream: StreamKey) -> Option<Instant> {
        let StreamKey::Local(i) = stream else {
            return None;
        };
        Some(clock_tick(self.start, self.encoder.fps, i) + self.deadline)
    }

    fn finish(&mut self, _now: Instant) {}
}

/// What an RTC receiver measured, over the frames whose deadline passed before the end.
#[derive(Clone, Debug, PartialEq)]
pub struct RtcOutcome {
    pub frames_due: u64,
    pub frames_on_time: u64,
    /// Completed, but after the deadline.
    pub frames_late: u64,
    /// Runs of consecutive missed frames.
    pub freezes: u64,
    /// Missed frames times the frame interval.
    pub frozen: Duration,
    /// Frames due times the frame interval.
    pub playback: Duration,
    /// Frozen time by the WebRTC statistics definition ([`webrtc_frozen`]).
    pub frozen_webrtc: Duration,
    pub error: Option<FrameError>,
}

/// Frames of history in WebRTC's mean frame duration (webrtc-stats `freezeCount`).
const FREEZE_HISTORY: usize = 30;

/// Total frozen time as WebRTC's statistics count it (W3C webrtc-stats `freezeCount` /
/// `totalFreezesDuration`), the percent-of-video-frozen measure of the videoconferencing FEC
/// papers' testbeds: a rendered frame's duration (the time to the next rendered frame) is a
/// freeze if it is at least max(3·avg, avg + 150 ms), avg the mean duration of the last 30
/// rendered frames; the freeze lasts that whole duration. `rendered` are the playout indices of
/// the frames shown (on time), ascending; `end` the index where playback stops; `interval` one
/// frame's time.
#[must_use]
pub fn webrtc_frozen(rendered: &[u64], end: u64, interval: Duration) -> Duration {
    let mut history: VecDeque<u64> = VecDeque::with_capacity(FREEZE_HISTORY);
    let mut frozen_frames = 0u64;
    let nexts = rendered.iter().skip(1).copied().chain(std::iter::once(end));
    for (&at, next) in rendered.iter().zip(nexts) {
        let d = next.saturating_sub(at);
        if !history.is_empty() {
            let avg = history.iter().sum::<u64>() as f64 / history.len() as f64;
            let interval_ms = interval.as_secs_f64() * 1e3;
            let threshold = (3.0 * avg).max(avg + 150.0 / interval_ms);
            if d as f64 >= threshold {
                frozen_frames += d;
            }
        }
        if history.len() == FREEZE_HISTORY {
            history.pop_front();
        }
        history.push_back(d);
    }
    interval
        .checked_mul(u32::try_from(frozen_frames).unwrap_or(u32::MAX))
        .unwrap_or(Duration::MAX)
}

/// The receiving side.
#[derive(Debug)]
pub struct RtcReceiver {
    start: Instant,
    fps: u32,
    deadline: Duration,
    /// Frames sent in all.
    total: u64,
    frames: OneFramePerStream,
    /// Per frame index: completed by its deadline.
    on_time: Vec<bool>,
    late: u64,
    outcome: Option<RtcOutcome>,
    error: Option<FrameError>,
}

impl RtcReceiver {
    #[must_use]
    pub fn new(config: &RtcConfig, start: Instant, duration: Duration) -> Self {
        let fps = config.encoder.fps.max(1);
        let total = u64::try_from((duration.as_nanos() * u128::from(fps)).div_ceil(1_000_000_000))
            .unwrap_or(u64::MAX);
        Self {
            start,
            fps,
            deadline: config.deadline,
            total,
            frames: OneFramePerStream::default(),
            on_time: Vec::new(),
            late: 0,
            outcome: None,
            error: None,
        }
    }

    fn deadline_of(&self, i: u64) -> Instant {
        clock_tick(self.start, self.fps, i) + self.deadline
    }

    /// Complete after [`StreamApp::finish`]; before it, counts nothing as due.
    #[must_use]
    pub fn outcome(&self) -> RtcOutcome {
        self.outcome.clone().unwrap_or(RtcOutcome {
            frames_due: 0,
            frames_on_time: 0,
            frames_late: self.late,
            freezes: 0,
            frozen: Duration::ZERO,
            playback: Duration::ZERO,
            frozen_webrtc: Duration::ZERO,
            error: self.error.clone(),
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
        if i >= self.total {
            return Err(unexpected(stream));
        }
        let deadline = self.deadline_of(i);
        if let Some(f) = self.frames.push(now, i, data, fin)? {
            if f.completed <= deadline {
                let idx = usize::try_from(i).unwrap_or(usize::MAX);
                if self.on_time.len() <= idx {
                    self.on_time.resize(idx + 1, false);
                }
                self.on_time[idx] = true;
            } else {
                self.late += 1;
            }
        }
        Ok(())
    }
}

impl StreamApp for RtcReceiver {
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
        let interval = Duration::from_nanos(1_000_000_000 / u64::from(self.fps));
        let mut due = 0u64;
        let (mut on_time, mut freezes, mut missed) = (0u64, 0u64, 0u64);
        let mut in_freeze = false;
        let mut rendered = Vec::new();
        while due < self.total && self.deadline_of(due) <= now {
            let ok = usize::try_from(due)
                .ok()
                .and_then(|i| self.on_time.get(i))
                .copied()
                .unwrap_or(false);
            if ok {
                on_time += 1;
                rendered.push(due);
                in_freeze = false;
            } else {
                missed += 1;
                if !in_freeze {
                    freezes += 1;
                }
                in_freeze = true;
            }
            due += 1;
        }
        let times = |n: u64| interval.checked_mul(u32::try_from(n).unwrap_or(u32::MAX));
        self.outcome = Some(RtcOutcome {
            frames_due: due,
            frames_on_time: on_time,
            frames_late: self.late,
            freezes,
            frozen: times(missed).unwrap_or(Duration::MAX),
            playback: times(due).unwrap_or(Duration::MAX),
            frozen_webrtc: webrtc_frozen(&rendered, due, interval),
            error: self.error.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ms, pipe};
    use recoup_elements::element_rng;

    #[test]
    fn deadline_misses_and_freezes() {
        let cfg = RtcConfig {
            encoder: EncoderConfig {
                bitrate: 800_000,
                fps: 10,
                gop: 10,
                key_ratio: 3.0,
                size_noise: 0.0,
            },
            deadline: Duration::from_millis(100),
        };
        let mut tx = RtcSender::new(
            &cfg,
            ms(0),
            Duration::from_secs(1),
            element_rng(1, "app/rtc"),
        );
        let mut rx = RtcReceiver::new(&cfg, ms(0), Duration::from_secs(1));
        // Frames 3 and 4 take 150 ms (late), frame 7 never arrives, the rest 40 ms.
        while let Some(t) = tx.next_wakeup() {
            let i = t.as_nanos() / 100_000_000;
            match i {
                3 | 4 => {
                    pipe(&mut tx, &mut rx, t, t + Duration::from_millis(150));
                }
                7 => while tx.poll_write(t, 1500).is_some() {},
                _ => {
                    pipe(&mut tx, &mut rx, t, t + Duration::from_millis(40));
                }
            }
        }
        assert_eq!(
            tx.stream_deadline(StreamKey::Local(3)),
            Some(ms(400)),
            "captured at 300 ms"
        );
        assert_eq!(tx.stream_deadline(StreamKey::Peer(3)), None);
        // Frame 9's deadline (1000 ms) has passed at 1000 ms; nothing later exists.
        rx.finish(ms(2000));
        let o = rx.outcome();
        assert_eq!(o.frames_due, 10);
        assert_eq!(o.frames_on_time, 7);
        assert_eq!(o.frames_late, 2);
        assert_eq!(o.freezes, 2);
        assert_eq!(o.frozen, Duration::from_millis(300));
        assert_eq!(o.playback, Duration::from_secs(1));
        assert_eq!(o.error, None);
        // At 650 ms only frames 0..=5 are due (deadline <= 650).
        rx.finish(ms(650));
        assert_eq!(rx.outcome().frames_due, 6);
    }

    #[test]
    fn webrtc_freezes_need_a_gap_well_above_the_mean() {
        let i = Duration::from_millis(10);
        let all: Vec<u64> = (0..100).collect();
        assert_eq!(webrtc_frozen(&all, 100, i), Duration::ZERO);
        // At 100 fps avg = 1 frame: a freeze is a gap of max(3, 1 + 15) = 16 frames or more.
        // Frames 40..=54 missing: frame 39 lasts 16 frames, a freeze of 160 ms.
        let gap: Vec<u64> = (0..100).filter(|f| !(40..55).contains(f)).collect();
        assert_eq!(webrtc_frozen(&gap, 100, i), Duration::from_millis(160));
        // One frame fewer missing: a 15-frame duration is no freeze.
        let short: Vec<u64> = (0..100).filter(|f| !(40..54).contains(f)).collect();
        assert_eq!(webrtc_frozen(&short, 100, i), Duration::ZERO);
        // At 10 fps avg = 100 ms: max(300, 250) ms, three frame intervals.
        let ten = Duration::from_millis(100);
        let a: Vec<u64> = (0..20).filter(|f| !(10..12).contains(f)).collect();
        assert_eq!(webrtc_frozen(&a, 20, ten), Duration::from_millis(300));
        assert_eq!(webrtc_frozen(&[], 20, ten), Duration::ZERO);
    }

    #[test]
    fn rejects_streams_beyond_the_run_and_double_frames() {
        let cfg = RtcConfig::default();
        let mut rx = RtcReceiver::new(&cfg, ms(0), Duration::from_secs(1));
        assert!(rx
            .on_stream_bytes(ms(0), StreamKey::Peer(60), b"x", false)
            .is_err());
        let mut two = crate::frame::encode_frame(crate::frame::FrameKind::Key, 0, ms(0), 5);
        two.extend(crate::frame::encode_frame(
            crate::frame::FrameKind::Key,
            1,
            ms(0),
            5,
        ));
        assert!(rx
            .on_stream_bytes(ms(1), StreamKey::Peer(0), &two, true)
            .is_err());
        assert!(rx.outcome().error.is_some());
    }
}
