//! Live streaming: an encoder writing frames at the frame clock into one long-lived stream
//! (as HTTP-FLV does), and a player that parses them as bytes arrive and plays them back.
//!
//! The player's model: playback starts once `startup` worth of frames has arrived; then one
//! frame every frame interval. If the next frame has not fully arrived when its turn comes, the
//! picture freezes (a stall) until `rebuffer` worth of frames is buffered again (or the stream
//! ended and everything left has arrived); playback resumes then, late by the frozen time.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::frame::{FrameError, FrameParser, FrameSource, ReceivedFrame};
use crate::source::EncoderConfig;
use crate::{clock_tick, frames_in, unexpected, StreamApp, StreamKey, Write, WriteData};

/// Live stream parameters (both ends).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveConfig {
    pub encoder: EncoderConfig,
    /// When the encoder captures its first frame.
    pub start: LiveStart,
    /// Video buffered before playback starts.
    pub startup: Duration,
    /// Video buffered after a stall before playback resumes.
    pub rebuffer: Duration,
}

impl Default for LiveConfig {
    /// A 4 Mbit/s, 30 fps stream, GOP 30, key frames 5 times larger, ±10 % size noise; 1 s
    /// start-up buffer, 0.5 s rebuffer.
    fn default() -> Self {
        Self {
            encoder: EncoderConfig {
                bitrate: 4_000_000,
                fps: 30,
                gop: 30,
                key_ratio: 5.0,
                size_noise: 0.1,
            },
            start: LiveStart::Session,
            startup: Duration::from_secs(1),
            rebuffer: Duration::from_millis(500),
        }
    }
}

/// When a live encoder starts capturing, relative to the connection that carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LiveStart {
    /// At the session's start, before the handshake: the frames captured while it completes
    /// wait and leave together once it has, as a server that hands a joining viewer what it has
    /// buffered (a GOP cache) does.
    #[default]
    Session,
    /// At the live edge once the viewer is connected: the first frame is captured when the
    /// connection first asks for data, so nothing has piled up behind the handshake.
    Connect,
}

/// The encoder side: frames captured at `start + i / fps` for as long as `duration` lasts, all
/// written to `Local(0)`; the last frame's last bytes carry FIN.
#[derive(Debug)]
pub struct LiveSource {
    encoder: EncoderConfig,
    rng: ChaCha8Rng,
    start: Instant,
    /// With [`LiveStart::Connect`], whether `start` still waits for the connection.
    start_at_connect: bool,
    /// Frames captured before this instant are sent.
    end: Instant,
    next_frame: u64,
    pending: VecDeque<FrameSource>,
    fin_sent: bool,
}

impl LiveSource {
    #[must_use]
    pub fn new(config: &LiveConfig, start: Instant, duration: Duration, rng: ChaCha8Rng) -> Self {
        Self {
            encoder: config.encoder,
            rng,
            start,
            start_at_connect: config.start == LiveStart::Connect,
            end: start + duration,
            next_frame: 0,
            pending: VecDeque::new(),
            fin_sent: false,
        }
    }

    /// Frames captured so far.
    #[must_use]
    pub fn frames_captured(&self) -> u64 {
        self.next_frame
    }

    fn capture_time(&self, i: u64) -> Instant {
        clock_tick(self.start, self.encoder.fps, i)
    }

    fn all_captured(&self) -> bool {
        self.capture_time(self.next_frame) >= self.end
    }
}

impl StreamApp for LiveSource {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        if self.start_at_connect {
            // The stream still ends when the session does.
            self.start_at_connect = false;
            self.start = self.start.max(now);
        }
        loop {
            let t = self.capture_time(self.next_frame);
            if t > now || t >= self.end {
                break;
            }
            let (kind, len) = self.encoder.frame(self.next_frame, &mut self.rng);
            self.pending
                .push_back(FrameSource::new(kind, self.next_frame, t, len));
            self.next_frame += 1;
        }
        if max == 0 || self.fin_sent {
            return None;
        }
        let all_captured = self.all_captured();
        let data = match self.pending.front_mut() {
            Some(frame) => {
                let data = frame.read(max);
                if frame.is_empty() {
                    self.pending.pop_front();
                }
                data
            }
            None if all_captured => WriteData::Bytes(Bytes::new()),
            None => return None,
        };
        let fin = self.pending.is_empty() && all_captured;
        self.fin_sent = fin;
        Some(Write {
            stream: StreamKey::Local(0),
            data,
            fin,
        })
    }

    fn next_wakeup(&self) -> Option<Instant> {
        if self.all_captured() {
            None
        } else {
            Some(self.capture_time(self.next_frame))
        }
    }

    fn finish(&mut self, _now: Instant) {}
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Playback {
    /// Waiting for the start-up buffer.
    Startup,
    /// The next frame is due at this instant.
    Playing(Instant),
    /// Frozen since this instant, rebuffering.
    Stalled(Instant),
    /// Everything played and the stream ended.
    Ended,
}

/// What a player measured.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveOutcome {
    pub frames_received: u64,
    pub frames_played: u64,
    pub bytes_received: u64,
    /// From the session start to the first frame played; `None` if playback never started.
    pub startup_delay: Option<Duration>,
    /// Stalls after playback started.
    pub freezes: u64,
    /// Time spent frozen (a stall still going on at the end counts up to the end).
    pub frozen: Duration,
    /// From the session start to [`StreamApp::finish`].
    pub session: Duration,
    /// Mean and largest capture-to-arrival delay of the frames.
    pub frame_delay_mean: Option<Duration>,
    pub frame_delay_max: Option<Duration>,
    /// The stream's FIN arrived.
    pub ended: bool,
    /// The first integrity error (the stream cannot be parsed past it).
    pub error: Option<FrameError>,
}

/// The receiving side: parses frames from `Peer(0)` and simulates playback.
#[derive(Debug)]
pub struct LivePlayer {
    start: Instant,
    fps: u32,
    startup_frames: usize,
    rebuffer_frames: usize,
    parser: FrameParser,
    /// Completion times of frames received and not yet played, in order.
    buffer: VecDeque<Instant>,
    state: Playback,
    ended_at: Option<Instant>,
    frames_received: u64,
    frames_played: u64,
    startup_delay: Option<Duration>,
    freezes: u64,
    frozen: Duration,
    session: Duration,
    delay_sum: Duration,
    delay_max: Option<Duration>,
    scratch: Vec<ReceivedFrame>,
}

impl LivePlayer {
    /// A player whose session starts at `start`.
    #[must_use]
    pub fn new(config: &LiveConfig, start: Instant) -> Self {
        let fps = config.encoder.fps.max(1);
        Self {
            start,
            fps,
            startup_frames: frames_in(config.startup, fps),
            rebuffer_frames: frames_in(config.rebuffer, fps),
            parser: FrameParser::new(Some(0)),
            buffer: VecDeque::new(),
            state: Playback::Startup,
            ended_at: None,
            frames_received: 0,
            frames_played: 0,
            startup_delay: None,
            freezes: 0,
            frozen: Duration::ZERO,
            session: Duration::ZERO,
            delay_sum: Duration::ZERO,
            delay_max: None,
            scratch: Vec::new(),
        }
    }

    /// What was measured so far (complete after [`StreamApp::finish`]).
    #[must_use]
    pub fn outcome(&self) -> LiveOutcome {
        let n = u32::try_from(self.frames_received).unwrap_or(u32::MAX);
        LiveOutcome {
            frames_received: self.frames_received,
            frames_played: self.frames_played,
            bytes_received: self.parser.bytes(),
            startup_delay: self.startup_delay,
            freezes: self.freezes,
            frozen: self.frozen,
            session: self.session,
            frame_delay_mean: (n > 0).then(|| self.delay_sum / n),
            frame_delay_max: self.delay_max,
            ended: self.ended_at.is_some(),
            error: self.parser.error().cloned(),
        }
    }

    fn frame_interval(&self) -> Duration {
        Duration::from_nanos(1_000_000_000 / u64::from(self.fps))
    }

    /// When `need` more frames (or, once the stream ended, all that is left) have arrived.
    fn buffered_at(&self, need: usize) -> Option<Instant> {
        if let Some(&t) = self.buffer.get(need - 1) {
            return Some(t);
        }
        let ended = self.ended_at?;
        Some(self.buffer.back().map_or(ended, |&t| t.max(ended)))
    }

    /// Play out everything that happens up to `now`, given the frames received so far.
    fn advance(&mut self, now: Instant) {
        loop {
            match self.state {
                Playback::Startup => match self.buffered_at(self.startup_frames) {
                    Some(_) if self.buffer.is_empty() => self.state = Playback::Ended,
                    Some(t) if t <= now => {
                        self.startup_delay = Some(t.saturating_duration_since(self.start));
                        self.state = Playback::Playing(t);
                    }
                    _ => break,
                },
                Playback::Playing(due) => {
                    if due > now {
                        break;
                    }
                    match self.buffer.front() {
                        Some(&arrived) if arrived <= due => {
                            self.buffer.pop_front();
                            self.frames_played += 1;
                            self.state = Playback::Playing(due + self.frame_interval());
                        }
                        None if self.ended_at.is_some_and(|e| e <= due) => {
                            self.state = Playback::Ended;
                        }
                        _ => {
                            self.freezes += 1;
                            self.state = Playback::Stalled(due);
                        }
                    }
                }
                Playback::Stalled(since) => match self.buffered_at(self.rebuffer_frames) {
                    Some(t) if t.max(since) <= now => {
                        let resume = t.max(since);
                        self.frozen += resume.saturating_duration_since(since);
                        self.state = if self.buffer.is_empty() {
                            Playback::Ended
                        } else {
                            Playback::Playing(resume)
                        };
                    }
                    _ => break,
                },
                Playback::Ended => break,
            }
        }
    }
}

impl StreamApp for LivePlayer {
    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        if stream != StreamKey::Peer(0) {
            return Err(unexpected(stream));
        }
        // Play out what was due strictly before these bytes arrived (a frame completing exactly
        // at its turn plays), then take them in.
        self.advance(Instant::from_nanos(now.as_nanos().saturating_sub(1)));
        self.scratch.clear();
        let pushed = self.parser.push(now, data, &mut self.scratch);
        for f in &self.scratch {
            let capture = Instant::from_nanos(f.header.capture_us.saturating_mul(1_000));
            let delay = f.completed.saturating_duration_since(capture);
            self.delay_sum += delay;
            self.delay_max = Some(self.delay_max.map_or(delay, |m| m.max(delay)));
            self.frames_received += 1;
            self.buffer.push_back(f.completed);
        }
        pushed?;
        if fin {
            self.parser.finish()?;
            self.ended_at = Some(now);
        }
        // Events at `now` itself wait: more bytes may still arrive at this instant.
        Ok(())
    }

    /// None: playback is computed lazily from arrival times, so it needs no timer.
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn finish(&mut self, now: Instant) {
        self.advance(now);
        if let Playback::Stalled(since) = self.state {
            self.frozen += now.saturating_duration_since(since);
            self.state = Playback::Stalled(now);
        }
        self.session = now.saturating_duration_since(self.start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{encode_frame, FrameKind};
    use crate::testutil::{ms, pipe};
    use recoup_elements::element_rng;

    fn config(fps: u32, startup_ms: u64, rebuffer_ms: u64) -> LiveConfig {
        LiveConfig {
            encoder: EncoderConfig {
                bitrate: 1_000_000,
                fps,
                gop: 10,
                key_ratio: 5.0,
                size_noise: 0.1,
            },
            start: LiveStart::Session,
            startup: Duration::from_millis(startup_ms),
            rebuffer: Duration::from_millis(rebuffer_ms),
        }
    }

    /// Delivers frame `seq` (10-byte payload) to the player at `at_ms`.
    fn deliver(p: &mut LivePlayer, seq: u64, at_ms: u64) {
        let f = encode_frame(FrameKind::Delta, seq, ms(seq * 100), 10);
        p.on_stream_bytes(ms(at_ms), StreamKey::Peer(0), &f, false)
            .expect("valid");
    }

    #[test]
    fn source_writes_frames_on_the_clock_and_ends_with_fin() {
        let cfg = config(10, 100, 100);
        let mut src = LiveSource::new(
            &cfg,
            ms(0),
            Duration::from_millis(1000),
            element_rng(1, "a"),
        );
        let mut player = LivePlayer::new(&cfg, ms(0));
        assert_eq!(src.next_wakeup(), Some(ms(0)));
        let mut t = 0;
        while let Some(w) = src.next_wakeup() {
            t = w.as_nanos() / 1_000_000;
            pipe(&mut src, &mut player, w, ms(t + 20));
        }
        assert_eq!(t, 900);
        assert_eq!(src.frames_captured(), 10);
        // The FIN went out with the last frame.
        assert_eq!(src.poll_write(ms(2000), 1500), None);
        player.finish(ms(2000));
        let o = player.outcome();
        assert_eq!(o.frames_received, 10);
        assert_eq!(o.frames_played, 10);
        assert!(o.ended);
        assert_eq!(o.error, None);
        assert_eq!(o.freezes, 0);
        assert_eq!(o.startup_delay, Some(Duration::from_millis(20)));
        assert_eq!(o.frame_delay_max, Some(Duration::from_millis(20)));
        // 1 Mbit/s for one second is about 125 kB.
        assert!(
            (o.bytes_received as i64 - 125_000).abs() < 13_000,
            "{}",
            o.bytes_received
        );
    }

    #[test]
    fn source_respects_the_write_budget() {
        let cfg = config(10, 100, 100);
        let mut src = LiveSource::new(&cfg, ms(0), Duration::from_millis(100), element_rng(1, "a"));
        assert_eq!(src.poll_write(ms(0), 0), None);
        let w = src.poll_write(ms(0), 7).expect("bytes");
        assert_eq!(w.data.to_vec(), b"RCPF\x01\x01\x00"[..7].to_vec());
        assert!(!w.fin);
        let mut total = 7;
        let mut fin = false;
        while let Some(w) = src.poll_write(ms(0), 100) {
            assert!(w.data.len() <= 100);
            total += w.data.len();
            fin = w.fin;
        }
        assert!(fin);
        let (_, len) = cfg.encoder.frame(0, &mut element_rng(1, "a"));
        assert_eq!(total, len as usize + 32);
    }

    #[test]
    fn player_stalls_when_a_frame_is_late_and_resumes_after_rebuffering() {
        // 10 fps, start after 2 frames, resume after 2 frames.
        let mut p = LivePlayer::new(&config(10, 200, 200), ms(0));
        deliver(&mut p, 0, 50);
        deliver(&mut p, 1, 150); // start-up buffer full: frame 0 plays at 150, frame 1 at 250
        deliver(&mut p, 2, 300); // frame 2 due at 350: in time
                                 // Frame 3 is due at 450 but arrives at 700: stall from 450.
        deliver(&mut p, 3, 700);
        deliver(&mut p, 4, 720); // two frames buffered at 720: resume, frozen 270 ms
        deliver(&mut p, 5, 800);
        p.finish(ms(1000));
        let o = p.outcome();
        assert_eq!(o.startup_delay, Some(Duration::from_millis(150)));
        assert_eq!(o.freezes, 1);
        assert_eq!(o.frozen, Duration::from_millis(270));
        // Played: 0@150 1@250 2@350 3@720 4@820 5@920.
        assert_eq!(o.frames_played, 6);
        assert_eq!(o.session, Duration::from_secs(1));
    }

    #[test]
    fn a_stall_at_the_end_counts_until_finish_and_fin_drains_the_buffer() {
        let mut p = LivePlayer::new(&config(10, 100, 300), ms(0));
        deliver(&mut p, 0, 0);
        deliver(&mut p, 1, 50);
        p.finish(ms(500)); // frame 2 due at 200, never came
        let o = p.outcome();
        assert_eq!((o.freezes, o.frozen), (1, Duration::from_millis(300)));

        // With FIN, the rebuffer threshold no longer applies: what is left plays.
        let mut p = LivePlayer::new(&config(10, 100, 1000), ms(0));
        deliver(&mut p, 0, 0);
        let last = encode_frame(FrameKind::Delta, 1, ms(100), 10);
        p.on_stream_bytes(ms(300), StreamKey::Peer(0), &last, true)
            .expect("valid");
        p.finish(ms(1000));
        let o = p.outcome();
        assert_eq!(o.freezes, 1);
        assert_eq!(o.frozen, Duration::from_millis(200));
        assert_eq!(o.frames_played, 2);
        assert!(o.ended);
    }

    #[test]
    fn corruption_and_gaps_are_reported() {
        let mut p = LivePlayer::new(&config(10, 100, 100), ms(0));
        let mut f = encode_frame(FrameKind::Delta, 0, ms(0), 100);
        f[50] ^= 0x80;
        let e = p
            .on_stream_bytes(ms(10), StreamKey::Peer(0), &f, false)
            .expect_err("corrupt");
        assert!(matches!(e, FrameError::Checksum { .. }));
        assert_eq!(p.outcome().error, Some(e));

        let mut p = LivePlayer::new(&config(10, 100, 100), ms(0));
        let f = encode_frame(FrameKind::Delta, 1, ms(0), 10);
        assert!(p
            .on_stream_bytes(ms(10), StreamKey::Peer(0), &f, false)
            .is_err());
        assert!(p
            .on_stream_bytes(ms(10), StreamKey::Peer(1), &[], false)
            .is_err());
        let mut p = LivePlayer::new(&config(10, 100, 100), ms(0));
        assert!(p
            .on_stream_bytes(ms(10), StreamKey::Peer(0), &f[..5], true)
            .is_err());
    }
}
