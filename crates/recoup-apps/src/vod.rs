//! Video on demand with adaptive bitrate (ART §7.5): a DASH-style player fetching the segments of
//! a bitrate ladder one after the other over one connection, choosing each segment's bitrate
//! from the download rate of the last ones, and playing from a buffer.
//!
//! The ABR is the "basic" rate-based scheme ART uses ([`pick`]): the download rate over the last
//! [`VodConfig::rate_window`] segments (their bytes over their download times), and the highest
//! bitrate `b` with `rate > b * upper` (`upper` = 1.2), else the one below the highest bitrate
//! under the rate; the lowest bitrate until a segment has been measured.
//!
//! Playback ([`Playback`]) starts once [`VodConfig::startup_segments`] segments are buffered,
//! plays segment after segment, and stalls when the next one has not arrived: a rebuffering event
//! lasting until [`VodConfig::resume_segments`] are buffered again. The player fetches the next
//! segment as soon as the last arrived, unless the buffer holds [`VodConfig::max_buffer`] or more.
//!
//! On the wire each segment is one request/response pair on its own stream, framed like RPC
//! ([`crate::transfer`]): request `i` asks for segment `i`, and its payload length names the
//! representation (ladder index + 1 bytes), so the server needs nothing but the frame layer. The
//! response is one frame of the segment's size (bitrate x segment duration / 8, the nominal size
//! of a constant-bitrate encoding).

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::Instant;

use crate::frame::{FrameError, FrameKind, FrameSource, ReceivedFrame, FRAME_HEADER_LEN};
use crate::transfer::{Incoming, Responder};
use crate::{keep_first_error, unexpected, write_front, StreamApp, StreamKey, Write};

/// The DASH dataset's Big Buck Bunny representations ART's §7.5 uses (Lederer et al., MMSys
/// 2012: 20 bitrates from 45 kbit/s to 3.9 Mbit/s, 4 s segments, 9:56 long), bit/s.
pub const BIG_BUCK_BUNNY: [u64; 20] = [
    45_226, 88_783, 128_503, 177_437, 217_761, 255_865, 323_047, 378_355, 509_091, 577_751,
    782_553, 1_008_699, 1_207_152, 1_473_801, 2_087_347, 2_409_742, 2_944_291, 3_340_509,
    3_613_836, 3_936_261,
];

/// A VoD session.
#[derive(Clone, Debug, PartialEq)]
pub struct VodConfig {
    /// Bitrates of the representations, bit/s, strictly ascending.
    pub ladder: Vec<u64>,
    /// Media time per segment.
    pub segment: Duration,
    /// Segments in the presentation.
    pub segments: u32,
    /// Segments buffered before playback starts.
    pub startup_segments: u32,
    /// Segments buffered before playback resumes after a stall.
    pub resume_segments: u32,
    /// The player fetches nothing while this much media is buffered.
    pub max_buffer: Duration,
    /// Segments whose download rate the ABR averages.
    pub rate_window: usize,
    /// Go up to a bitrate only when the rate exceeds it by this factor.
    pub upper: f64,
}

impl Default for VodConfig {
    /// Big Buck Bunny as ART plays it: 150 segments of 4 s (600 s); the basic ABR's parameters
    /// (5 segments, x1.2); start and resume after one segment, at most 60 s buffered.
    fn default() -> Self {
        Self {
            ladder: BIG_BUCK_BUNNY.to_vec(),
            segment: Duration::from_secs(4),
            segments: 150,
            startup_segments: 1,
            resume_segments: 1,
            max_buffer: Duration::from_secs(60),
            rate_window: 5,
            upper: 1.2,
        }
    }
}

impl VodConfig {
    /// Checks the ladder and the counts; the error names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.ladder.is_empty() {
            return Err("ladder: at least one bitrate".into());
        }
        if let Some(w) = self.ladder.windows(2).find(|w| w[0] >= w[1]) {
            return Err(format!(
                "ladder: bitrates must be strictly ascending ({} then {})",
                w[0], w[1]
            ));
        }
        if self.ladder[0] == 0 {
            return Err("ladder: bitrates must be > 0".into());
        }
        if self.ladder.len() > 255 {
            return Err("ladder: at most 255 bitrates".into());
        }
        if self.segment.is_zero() {
            return Err("segment: must be > 0".into());
        }
        if self.segments == 0 {
            return Err("segments: at least one".into());
        }
        if self.startup_segments == 0 || self.resume_segments == 0 {
            return Err("startup_segments and resume_segments: at least one".into());
        }
        if self.rate_window == 0 {
            return Err("rate_window: at least one segment".into());
        }
        if !(self.upper.is_finite() && self.upper >= 1.0) {
            return Err("upper: must be >= 1".into());
        }
        Ok(())
    }

    /// Bytes of segment at ladder index `rep`, frame header included.
    #[must_use]
    pub fn segment_bytes(&self, rep: usize) -> u64 {
        let bits = u128::from(self.ladder[rep]) * self.segment.as_nanos() / 1_000_000_000;
        u64::try_from(bits / 8).unwrap_or(u64::MAX).max(1)
    }
}

/// The basic rate-based choice: the ladder index for the next segment given the measured
/// download rate (bit/s; `None` before any segment was measured).
#[must_use]
pub fn pick(ladder: &[u64], rate: Option<f64>, upper: f64) -> usize {
    let Some(rate) = rate else {
        return 0;
    };
    let mut next = 0;
    for (i, &b) in ladder.iter().enumerate().skip(1) {
        let b = b as f64;
        if rate > b {
            next = if rate > b * upper { i } else { i - 1 };
        }
    }
    next
}

/// Playback from a buffer of whole segments: start-up, stalls (rebuffering) and their time.
/// Fed with segment arrivals in order; time runs on the caller's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Playback {
    segment: Duration,
    startup: u32,
    resume: u32,
    /// Segments arrived so far; all of them, or `total`, end the presentation.
    arrived: u32,
    total: u32,
    /// When playback (re)started and the segment index it started at; `None` while waiting.
    playing: Option<(Instant, u32)>,
    /// Segments played before the current run of playback.
    played: u32,
    /// When the wait for the start or for a resume began.
    waiting_since: Instant,
    pub startup_delay: Option<Duration>,
    pub rebuffers: u32,
    pub rebuffer_time: Duration,
}

impl Playback {
    #[must_use]
    pub fn new(config: &VodConfig, start: Instant) -> Self {
        Self {
            segment: config.segment,
            startup: config.startup_segments,
            resume: config.resume_segments,
            arrived: 0,
            total: config.segments,
            playing: None,
            played: 0,
            waiting_since: start,
            startup_delay: None,
            rebuffers: 0,
            rebuffer_time: Duration::ZERO,
        }
    }

    /// Segments played by `now` (whole or in part: the one playing counts).
    fn position(&self, now: Instant) -> u32 {
        match self.playing {
            None => self.played,
            Some((since, from)) => {
                let n = now.saturating_duration_since(since).as_nanos() / self.segment.as_nanos();
                (from + u32::try_from(n).unwrap_or(u32::MAX)).min(self.arrived)
            }
        }
    }

    /// Brings the state to `now`: a stall happens when playback runs past the last segment
    /// that arrived before the presentation's end.
    fn advance(&mut self, now: Instant) {
        let Some((since, from)) = self.playing else {
            return;
        };
        let run_out = since + self.segment * (self.arrived - from);
        if now >= run_out {
            self.played = self.arrived;
            self.playing = None;
            if self.arrived < self.total {
                self.rebuffers += 1;
                self.waiting_since = run_out;
            }
        }
    }

    /// Segment arrived whole at `now`.
    pub fn on_segment(&mut self, now: Instant) {
        self.advance(now);
        self.arrived += 1;
        if self.playing.is_none() && self.played < self.total {
            let needed = if self.startup_delay.is_none() {
                self.startup
            } else {
                self.resume
            };
            let buffered = self.arrived - self.played;
            if buffered >= needed.min(self.total - self.played) {
                let waited = now.saturating_duration_since(self.waiting_since);
                match self.startup_delay {
                    None => self.startup_delay = Some(waited),
                    Some(_) => self.rebuffer_time += waited,
                }
                self.playing = Some((now, self.played));
            }
        }
    }

    /// Media buffered ahead of the playback position at `now`.
    #[must_use]
    pub fn buffered(&self, now: Instant) -> Duration {
        match self.playing {
            None => self.segment * (self.arrived - self.played),
            Some((since, from)) => {
                let end = since + self.segment * (self.arrived - from);
                end.saturating_duration_since(now)
            }
        }
    }

    /// The session ends at `now`: a stall still in progress counts up to `now`.
    pub fn finish(&mut self, now: Instant) {
        self.advance(now);
        if self.playing.is_none() && self.startup_delay.is_some() && self.played < self.total {
            self.rebuffer_time += now.saturating_duration_since(self.waiting_since);
            self.waiting_since = now;
        }
    }

    /// Segments played, the one playing included.
    #[must_use]
    pub fn segments_played(&self, now: Instant) -> u32 {
        self.position(now)
    }
}

/// What the player measured.
#[derive(Clone, Debug, PartialEq)]
pub struct VodOutcome {
    pub segments: u32,
    pub segments_received: u32,
    /// Mean bitrate of the segments received (the paper's "average bitrate"), bit/s.
    pub mean_bitrate: Option<f64>,
    /// Changes of representation between consecutive segments.
    pub switches: u32,
    pub startup_delay: Option<Duration>,
    pub rebuffers: u32,
    pub rebuffer_time: Duration,
    pub bytes_received: u64,
    pub error: Option<FrameError>,
}

/// The DASH player.
#[derive(Debug)]
pub struct VodClient {
    config: VodConfig,
    next: u32,
    /// When the next request may go out (the previous segment arrived, the buffer has room).
    next_at: Option<Instant>,
    outgoing: VecDeque<(StreamKey, FrameSource)>,
    /// The segment in flight: index, representation, request time, its response.
    in_flight: Option<(u32, usize, Instant, Incoming)>,
    /// (bytes, download time) of the last segments.
    recent: VecDeque<(u64, Duration)>,
    reps: Vec<usize>,
    playback: Playback,
    bytes: u64,
    error: Option<FrameError>,
    scratch: Vec<ReceivedFrame>,
}

impl VodClient {
    #[must_use]
    pub fn new(config: &VodConfig, start: Instant) -> Self {
        Self {
            config: config.clone(),
            next: 0,
            next_at: Some(start),
            outgoing: VecDeque::new(),
            in_flight: None,
            recent: VecDeque::new(),
            reps: Vec::new(),
            playback: Playback::new(config, start),
            bytes: 0,
            error: None,
            scratch: Vec::new(),
        }
    }

    /// The download rate over the last segments, bit/s.
    fn rate(&self) -> Option<f64> {
        let bytes: u64 = self.recent.iter().map(|r| r.0).sum();
        let secs: f64 = self.recent.iter().map(|r| r.1.as_secs_f64()).sum();
        (secs > 0.0).then(|| bytes as f64 * 8.0 / secs)
    }

    #[must_use]
    pub fn outcome(&self) -> VodOutcome {
        let n = self.reps.len();
        let mean = (n > 0).then(|| {
            self.reps
                .iter()
                .map(|&r| self.config.ladder[r] as f64)
                .sum::<f64>()
                / n as f64
        });
        VodOutcome {
            segments: self.config.segments,
            segments_received: u32::try_from(n).unwrap_or(u32::MAX),
            mean_bitrate: mean,
            switches: u32::try_from(self.reps.windows(2).filter(|w| w[0] != w[1]).count())
                .unwrap_or(u32::MAX),
            startup_delay: self.playback.startup_delay,
            rebuffers: self.playback.rebuffers,
            rebuffer_time: self.playback.rebuffer_time,
            bytes_received: self.bytes,
            error: self.error.clone(),
        }
    }

    fn receive(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let Some((i, rep, asked, incoming)) = &mut self.in_flight else {
            return Err(unexpected(stream));
        };
        if stream != StreamKey::Local(u64::from(*i)) {
            return Err(unexpected(stream));
        }
        self.bytes += data.len() as u64;
        let Some(frame) = incoming.push(now, data, fin, &mut self.scratch)? else {
            return Ok(());
        };
        let want = self.config.segment_bytes(*rep);
        let got = u64::from(frame.header.payload_len) + FRAME_HEADER_LEN as u64;
        if got != want.max(FRAME_HEADER_LEN as u64) {
            return Err(FrameError::Protocol(format!(
                "segment {i}: {got} bytes, representation {rep} has {want}"
            )));
        }
        let took = now.saturating_duration_since(*asked);
        self.recent.push_back((got, took));
        while self.recent.len() > self.config.rate_window {
            self.recent.pop_front();
        }
        self.reps.push(*rep);
        self.in_flight = None;
        self.playback.on_segment(now);
        self.next += 1;
        self.next_at = (self.next < self.config.segments).then(|| {
            // Fetch on at once unless the buffer is full; then when it has a segment's room.
            let over = self
                .playback
                .buffered(now)
                .saturating_sub(self.config.max_buffer);
            now + over
        });
        Ok(())
    }
}

impl StreamApp for VodClient {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        if max == 0 {
            return None;
        }
        if self.next_at.is_some_and(|t| t <= now) {
            self.next_at = None;
            let rep = pick(&self.config.ladder, self.rate(), self.config.upper);
            let i = self.next;
            let stream = StreamKey::Local(u64::from(i));
            let request = FrameSource::new(FrameKind::Request, u64::from(i), now, rep as u32 + 1);
            self.outgoing.push_back((stream, request));
            self.in_flight = Some((i, rep, now, Incoming::new(u64::from(i))));
        }
        write_front(&mut self.outgoing, max)
    }

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
        self.next_at
    }

    fn finish(&mut self, now: Instant) {
        self.playback.finish(now);
    }
}

/// The DASH server: answers each request with the segment of the representation it names.
#[derive(Debug)]
pub struct VodServer {
    config: VodConfig,
    responder: Responder,
}

impl VodServer {
    #[must_use]
    pub fn new(config: &VodConfig) -> Self {
        Self {
            config: config.clone(),
            responder: Responder::default(),
        }
    }
}

impl StreamApp for VodServer {
    fn poll_write(&mut self, _now: Instant, max: usize) -> Option<Write> {
        self.responder.poll_write(max)
    }

    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let config = &self.config;
        let count = u64::from(config.segments);
        self.responder
            .on_request(now, (stream, data, fin), count, |i, request| {
                let rep = (request.payload_len as usize).wrapping_sub(1);
                if request.kind != FrameKind::Request || rep >= config.ladder.len() {
                    return Err(FrameError::Protocol(format!(
                        "segment {i}: a request must name one of {} representations",
                        config.ladder.len()
                    )));
                }
                let payload = config
                    .segment_bytes(rep)
                    .saturating_sub(FRAME_HEADER_LEN as u64);
                Ok(u32::try_from(payload).unwrap_or(u32::MAX))
            })
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn finish(&mut self, _now: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ms, pipe};

    #[test]
    fn the_basic_rule_picks_the_ladder_step_for_a_rate() {
        let l = &BIG_BUCK_BUNNY;
        // Nothing measured yet: the lowest.
        assert_eq!(pick(l, None, 1.2), 0);
        // Below the second step: the lowest.
        assert_eq!(pick(l, Some(80_000.0), 1.2), 0);
        // 300 kbit/s is above 255 865 but not above 1.2 x 255 865 = 307 038: one step below.
        assert_eq!(l[pick(l, Some(300_000.0), 1.2)], 217_761);
        // 320 000 > 255 865 x 1.2: 255 865 itself (323 047 is above the rate).
        assert_eq!(l[pick(l, Some(320_000.0), 1.2)], 255_865);
        // Far above the top: the top.
        assert_eq!(pick(l, Some(10e6), 1.2), l.len() - 1);
        // Between 3 613 836 and 3 936 261: 3.7 Mbit/s is not 1.2 x 3 613 836, so one below.
        assert_eq!(l[pick(l, Some(3.7e6), 1.2)], 3_340_509);
        // With upper = 1 the highest bitrate under the rate.
        assert_eq!(l[pick(l, Some(1.0e6), 1.0)], 782_553);
    }

    fn config(segments: u32) -> VodConfig {
        VodConfig {
            ladder: vec![100_000, 200_000, 400_000],
            segment: Duration::from_secs(2),
            segments,
            ..VodConfig::default()
        }
    }

    #[test]
    fn rebuffering_is_counted_from_hand_built_arrivals() {
        let c = config(5);
        let mut p = Playback::new(&c, ms(0));
        // First segment at 500 ms: start-up delay 500 ms, plays until 2500.
        p.on_segment(ms(500));
        assert_eq!(p.startup_delay, Some(Duration::from_millis(500)));
        // Second at 2000: in time, playback runs until 4500.
        p.on_segment(ms(2000));
        assert_eq!(p.buffered(ms(2000)), Duration::from_millis(2500));
        // Third only at 5300: a stall from 4500 to 5300.
        p.on_segment(ms(5300));
        assert_eq!(p.rebuffers, 1);
        assert_eq!(p.rebuffer_time, Duration::from_millis(800));
        // Fourth at 6000 (in time: segments 3 and 4 play 5300..9300), fifth at 10 000: a stall
        // from 9300 to 10 000.
        p.on_segment(ms(6000));
        p.on_segment(ms(10_000));
        assert_eq!(p.rebuffers, 2);
        assert_eq!(p.rebuffer_time, Duration::from_millis(1500));
        // The last segment plays out; the end of the presentation is no stall.
        p.finish(ms(20_000));
        assert_eq!(p.rebuffers, 2);
        assert_eq!(p.rebuffer_time, Duration::from_millis(1500));
        assert_eq!(p.segments_played(ms(20_000)), 5);
    }

    #[test]
    fn a_stall_still_running_at_the_end_counts_up_to_the_end() {
        let c = config(3);
        let mut p = Playback::new(&c, ms(0));
        p.on_segment(ms(100)); // plays 100..2100
        p.finish(ms(3000));
        assert_eq!(p.rebuffers, 1);
        assert_eq!(p.rebuffer_time, Duration::from_millis(900));
    }

    #[test]
    fn startup_waits_for_its_segments() {
        let c = VodConfig {
            startup_segments: 2,
            ..config(4)
        };
        let mut p = Playback::new(&c, ms(0));
        p.on_segment(ms(300));
        assert_eq!(p.startup_delay, None);
        p.on_segment(ms(700));
        assert_eq!(p.startup_delay, Some(Duration::from_millis(700)));
        assert_eq!(p.rebuffers, 0);
    }

    #[test]
    fn a_session_over_an_ideal_pipe_climbs_the_ladder_and_never_stalls() {
        let c = config(6);
        let mut client = VodClient::new(&c, ms(0));
        let mut server = VodServer::new(&c);
        let mut now = ms(0);
        // Request, then the response 50 ms later (a fast pipe: the rate is the segment size
        // over 50 ms, far above the ladder).
        while let Some(t) = client.next_wakeup() {
            now = now.max(t);
            pipe(&mut client, &mut server, now, now);
            now += Duration::from_millis(50);
            pipe(&mut server, &mut client, now, now);
        }
        client.finish(now + Duration::from_secs(20));
        let o = client.outcome();
        assert_eq!(o.error, None);
        assert_eq!(o.segments_received, 6);
        // The lowest first, then the top from the first measurement on.
        assert_eq!(o.switches, 1);
        assert_eq!(o.rebuffers, 0);
        assert_eq!(o.startup_delay, Some(Duration::from_millis(50)));
        let want = (100_000.0 + 5.0 * 400_000.0) / 6.0;
        assert!((o.mean_bitrate.expect("segments") - want).abs() < 1e-6);
    }

    #[test]
    fn bad_configs_and_requests_are_named() {
        let mut c = config(3);
        c.ladder = vec![200, 100];
        assert!(c
            .validate()
            .expect_err("order")
            .contains("strictly ascending"));
        let c = config(3);
        let mut server = VodServer::new(&c);
        // A request for a representation the ladder does not have (payload 9 bytes: index 8).
        let req = FrameSource::new(FrameKind::Request, 0, ms(0), 9)
            .read(1000)
            .to_vec();
        let e = server
            .on_stream_bytes(ms(0), StreamKey::Peer(0), &req, true)
            .expect_err("bad representation");
        assert!(e.to_string().contains("representations"), "{e}");
        // A request past the end of the presentation.
        let req = FrameSource::new(FrameKind::Request, 7, ms(0), 1)
            .read(1000)
            .to_vec();
        let e = server
            .on_stream_bytes(ms(0), StreamKey::Peer(7), &req, true)
            .expect_err("past the end");
        assert!(e.to_string().contains("request 7"), "{e}");
    }
}
