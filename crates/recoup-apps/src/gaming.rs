//! Cloud gaming (LADR §2, §5): a 60 fps encoder whose bitrate follows a bitrate controller's
//! target, one stream per frame, and LADR's frame metrics measured at the sender from per-packet
//! feedback (LADR's detection is SACK-based and sender-only, §2.5, so its metrics are too).
//!
//! - Bitrate control: the delay-based controller's rate B_d (the transport's congestion
//!   controller, Copa, as window / smoothed RTT), and with LBBC (`crate::lbbc`) min(B_l, B_d),
//!   clamped to `[min_bitrate, max_bitrate]`. Each frame is encoded at the target of the moment
//!   it is captured.
//! - Pending-data limit (LADR §3.3): at every frame tick (every t_inv), t_pend = bytes waiting to
//!   be sent (new data not sent yet and lost data not re-sent yet) / the current pacing rate;
//!   when t_pend > 2 t_inv the encoder skips that frame.
//!
//! Frame metrics (LADR Table 1, §2.2, §5.1), over the frames captured during the run:
//! - *frame delay* t_F: capture to the acknowledgement that completes the frame's bytes;
//! - its breakdown (§2.2): propagation = RTT_min; queuing = RTT of the end packet (the frame's
//!   last non-lost first-transmission packet) − RTT_min; recovery = t_F − RTT of the end packet
//!   (§5.1's frame recovery time; for a frame without loss it is the time its packets took to
//!   leave the sender);
//! - *lossy frame*: a packet of its first transmission was declared lost;
//! - *loss-affected frame*: lossy, or completed while an earlier lossy frame was not yet
//!   complete (previous losses unrecovered);
//! - *frame over 100 ms*: t_F above the deadline, or never completed.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::frame::{FrameError, FrameSource, OneFramePerStream, FRAME_HEADER_LEN};
use crate::lbbc::{target_rate, FrameFeedback, Lbbc, LbbcConfig};
use crate::source::EncoderConfig;
use crate::{
    clock_tick, keep_first_error, unexpected, write_front, PacketFeedback, PathFeedback, StreamApp,
};
use crate::{StreamKey, Write};

/// Cloud-gaming parameters (both ends).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GamingConfig {
    /// Frame rate, GOP and size noise; `bitrate` is the start rate, before any feedback.
    pub encoder: EncoderConfig,
    pub min_bitrate: u64,
    pub max_bitrate: u64,
    /// The frame-delay threshold of "frames over 100 ms".
    pub deadline: Duration,
    /// Loss-based bitrate control beside the delay-based controller (LADR §3.2).
    pub lbbc: Option<LbbcConfig>,
    /// LADR §3.3's pending-data limit.
    pub pending_limit: bool,
    /// The share of the delay-based controller's rate the encoder targets. Pudica keeps the
    /// bandwidth utilisation below one (LADR §2.4 footnote 5); an encoder at exactly Copa's
    /// window / SRTT runs at the bottleneck's rate and queues at the sender without end. 0.9 is
    /// our assumption, not a number from LADR or Pudica.
    pub utilization: f64,
}

impl Default for GamingConfig {
    /// 60 fps starting at 10 Mbit/s, between 1 and 30 Mbit/s, 100 ms threshold; mostly delta
    /// frames (a key frame every 10 s, as cloud gaming sends P frames, LADR §4). Delay-based
    /// control only.
    fn default() -> Self {
        Self {
            encoder: EncoderConfig {
                bitrate: 10_000_000,
                fps: 60,
                gop: 600,
                key_ratio: 3.0,
                size_noise: 0.1,
            },
            min_bitrate: 1_000_000,
            max_bitrate: 30_000_000,
            deadline: Duration::from_millis(100),
            lbbc: None,
            pending_limit: false,
            utilization: 0.9,
        }
    }
}

impl GamingConfig {
    /// Checks the bounds that make a session possible: the rate range, the start rate within
    /// it, the utilisation, LBBC's parameters for the frame rate. The error is the offending
    /// key (`min_bitrate`, `bitrate`, `utilization`, `lbbc_*`) and why.
    ///
    /// # Errors
    /// The first key out of bounds.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, why: &str| Err((key.to_string(), why.to_string()));
        if self.min_bitrate == 0 || self.min_bitrate > self.max_bitrate {
            return bad("min_bitrate", "must be above 0 and at most max_bitrate");
        }
        if !(self.min_bitrate..=self.max_bitrate).contains(&self.encoder.bitrate) {
            return bad(
                "bitrate",
                "the start rate must lie between min_bitrate and max_bitrate",
            );
        }
        if !(self.utilization > 0.0 && self.utilization <= 1.0) {
            return bad("utilization", "must be in (0, 1]");
        }
        if let Some(l) = self.lbbc {
            l.validate(self.encoder.fps).map_err(|e| {
                let key = e.split(' ').next().unwrap_or("lbbc").to_string();
                (key, e)
            })?;
        }
        Ok(())
    }
}

/// One frame as the sender tracks it.
#[derive(Clone, Debug)]
struct FrameRec {
    captured: Instant,
    bytes: u64,
    sent_new: u64,
    /// First-transmission packets neither acknowledged nor lost yet.
    open_first: BTreeSet<u64>,
    lossy: bool,
    acked_bytes: u64,
    /// (when, bytes) of acknowledged first-transmission packets.
    acks: Vec<(Instant, u64)>,
    /// Packet number and RTT of the newest acknowledged first-transmission packet.
    end: Option<(u64, Duration)>,
    complete: Option<Instant>,
    affected: bool,
}

#[derive(Clone, Debug)]
struct PacketRec {
    sent: Instant,
    resend: bool,
    frames: Vec<(u64, u64)>,
}

/// The sender's per-frame book, fed with packet feedback.
#[derive(Clone, Debug, Default)]
struct FrameLedger {
    frames: Vec<FrameRec>,
    packets: HashMap<u64, PacketRec>,
    rtt_min: Option<Duration>,
    /// Lost stream bytes not re-sent yet.
    lost_unsent: u64,
    /// Frames before this index were handed to LBBC.
    next_resolved: usize,
    /// Lossy frames not complete yet.
    open_lossy: BTreeSet<u64>,
}

impl FrameLedger {
    fn add(&mut self, captured: Instant, bytes: u64) {
        self.frames.push(FrameRec {
            captured,
            bytes,
            sent_new: 0,
            open_first: BTreeSet::new(),
            lossy: false,
            acked_bytes: 0,
            acks: Vec::new(),
            end: None,
            complete: None,
            affected: false,
        });
    }

    /// Bytes waiting at the sender: new data not sent and lost data not re-sent.
    fn unsent(&self) -> u64 {
        let new: u64 = self.frames[self.next_unsent_hint()..]
            .iter()
            .map(|f| f.bytes.saturating_sub(f.sent_new))
            .sum();
        new + self.lost_unsent
    }

    /// Frames are sent in order, so only the last few can hold unsent bytes; the scan starts at
    /// the first frame resolution has not passed (every earlier one was fully sent).
    fn next_unsent_hint(&self) -> usize {
        self.next_resolved.min(self.frames.len())
    }

    fn frame(&mut self, i: u64) -> Option<&mut FrameRec> {
        usize::try_from(i).ok().and_then(|i| self.frames.get_mut(i))
    }

    fn apply(&mut self, fb: &PacketFeedback) {
        match fb {
            PacketFeedback::Sent {
                pn,
                at,
                resend,
                streams,
                ..
            } => {
                let mut frames = Vec::with_capacity(streams.len());
                for &(key, len) in streams {
                    let StreamKey::Local(i) = key else { continue };
                    let Some(f) = self.frame(i) else { continue };
                    if *resend {
                        self.lost_unsent = self.lost_unsent.saturating_sub(len);
                    } else {
                        f.sent_new += len;
                        f.open_first.insert(*pn);
                    }
                    frames.push((i, len));
                }
                self.packets.insert(
                    *pn,
                    PacketRec {
                        sent: *at,
                        resend: *resend,
                        frames,
                    },
                );
            }
            PacketFeedback::Acked { pn, at } => {
                let Some(p) = self.packets.remove(pn) else {
                    return;
                };
                let rtt = at.saturating_duration_since(p.sent);
                if !p.resend {
                    self.rtt_min = Some(self.rtt_min.map_or(rtt, |m| m.min(rtt)));
                }
                for (i, len) in p.frames {
                    let Some(f) = self.frame(i) else { continue };
                    f.acked_bytes += len;
                    if !p.resend {
                        f.open_first.remove(pn);
                        f.acks.push((*at, len));
                        if f.end.is_none_or(|(e, _)| e < *pn) {
                            f.end = Some((*pn, rtt));
                        }
                    }
                    if f.complete.is_none() && f.sent_new >= f.bytes && f.acked_bytes >= f.bytes {
                        f.complete = Some(*at);
                        let lossy = f.lossy;
                        // Previous losses unrecovered: an earlier lossy frame still incomplete.
                        let earlier = self.open_lossy.range(..i).next().is_some();
                        self.open_lossy.remove(&i);
                        if let Some(f) = self.frame(i) {
                            f.affected = lossy || earlier;
                        }
                    }
                }
            }
            PacketFeedback::Lost { pn, .. } => {
                let Some(p) = self.packets.remove(pn) else {
                    return;
                };
                for (i, len) in p.frames {
                    self.lost_unsent += len;
                    let Some(f) = self.frame(i) else { continue };
                    if !p.resend {
                        f.open_first.remove(pn);
                        f.lossy = true;
                    }
                    if f.complete.is_none() {
                        self.open_lossy.insert(i);
                    }
                }
            }
        }
    }

    /// Frames, in capture order, whose first transmission is now fully acknowledged or lost.
    fn drain_resolved(&mut self) -> Vec<FrameFeedback> {
        let mut out = Vec::new();
        while let Some(f) = self.frames.get(self.next_resolved) {
            if f.sent_new < f.bytes || !f.open_first.is_empty() {
                break;
            }
            out.push(FrameFeedback {
                captured: f.captured,
                bytes: f.bytes,
                lossy: f.lossy,
                acks: f.acks.clone(),
                end_rtt: f.end.map(|(_, r)| r),
            });
            self.next_resolved += 1;
        }
        out
    }
}

/// LADR's frame metrics of one run (fractions, milliseconds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GamingOutcome {
    /// Frames encoded and sent.
    pub frames: u64,
    /// Frames the pending-data limit skipped.
    pub frames_skipped: u64,
    pub lossy_frames: u64,
    pub loss_affected_frames: u64,
    /// Frame delay above the deadline, or never completed.
    pub frames_over_deadline: u64,
    /// Frame delays of completed frames, ms (unsorted, capture order).
    pub delays_ms: Vec<f64>,
    /// Mean propagation / queuing / recovery parts over completed frames with an end packet, ms.
    pub propagation_ms: Option<f64>,
    pub queuing_ms: Option<f64>,
    pub recovery_ms: Option<f64>,
    /// Frame recovery time (§5.1) of completed lossy frames, ms.
    pub recovery_lossy_ms: Vec<f64>,
    /// Mean encoder target over the frames, Mbit/s.
    pub mean_bitrate_mbps: Option<f64>,
    /// LBBC congestion signals.
    pub lbbc_signals: u64,
}

/// The sending side: frames at the frame clock into `Local(k)`, k counting encoded frames
/// (skipped ticks open no stream).
#[derive(Debug)]
pub struct GamingSender {
    cfg: GamingConfig,
    rng: ChaCha8Rng,
    start: Instant,
    end: Instant,
    next_tick: u64,
    pending: VecDeque<(StreamKey, FrameSource)>,
    target: u64,
    pacing_rate: Option<u64>,
    lbbc: Option<Lbbc>,
    ledger: FrameLedger,
    skipped: u64,
    bitrate_sum: f64,
    outcome: Option<GamingOutcome>,
}

impl GamingSender {
    #[must_use]
    pub fn new(cfg: &GamingConfig, start: Instant, duration: Duration, rng: ChaCha8Rng) -> Self {
        Self {
            cfg: *cfg,
            rng,
            start,
            end: start + duration,
            next_tick: 0,
            pending: VecDeque::new(),
            target: cfg.encoder.bitrate,
            pacing_rate: None,
            lbbc: cfg.lbbc.map(|l| Lbbc::new(l, cfg.encoder.fps)),
            ledger: FrameLedger::default(),
            skipped: 0,
            bitrate_sum: 0.0,
            outcome: None,
        }
    }

    /// The encoder's current target, bits per second.
    #[must_use]
    pub fn target(&self) -> u64 {
        self.target
    }

    fn interval(&self) -> Duration {
        Duration::from_nanos(1_000_000_000 / u64::from(self.cfg.encoder.fps.max(1)))
    }

    /// LADR §3.3: whether the frame due now is held back, t_pend > 2 t_inv. Without a pacing
    /// rate nothing limits sending, so nothing is held.
    #[must_use]
    pub fn holds_back(&self) -> bool {
        if !self.cfg.pending_limit {
            return false;
        }
        let Some(rate) = self.pacing_rate.filter(|&r| r > 0) else {
            return false;
        };
        let t_pend = self.ledger.unsent() as f64 / rate as f64;
        t_pend > 2.0 * self.interval().as_secs_f64()
    }

    /// The outcome after [`StreamApp::finish`].
    #[must_use]
    pub fn outcome(&self) -> Option<GamingOutcome> {
        self.outcome.clone()
    }
}

impl StreamApp for GamingSender {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        loop {
            let t = clock_tick(self.start, self.cfg.encoder.fps, self.next_tick);
            if t > now || t >= self.end {
                break;
            }
            self.next_tick += 1;
            if self.holds_back() {
                self.skipped += 1;
                continue;
            }
            let index = self.ledger.frames.len() as u64;
            let encoder = EncoderConfig {
                bitrate: self.target,
                ..self.cfg.encoder
            };
            let (kind, len) = encoder.frame(index, &mut self.rng);
            self.bitrate_sum += self.target as f64;
            self.ledger.add(t, u64::from(len) + FRAME_HEADER_LEN as u64);
            self.pending.push_back((
                StreamKey::Local(index),
                FrameSource::new(kind, index, t, len),
            ));
        }
        write_front(&mut self.pending, max)
    }

    fn wants_feedback(&self) -> bool {
        true
    }

    fn on_feedback(&mut self, now: Instant, packets: &[PacketFeedback], path: PathFeedback) {
        for p in packets {
            self.ledger.apply(p);
        }
        let rtt_min = self.ledger.rtt_min.unwrap_or_default();
        let resolved = self.ledger.drain_resolved();
        if let Some(l) = self.lbbc.as_mut() {
            for f in resolved {
                l.on_frame(now, f, rtt_min);
            }
        }
        self.pacing_rate = path.pacing_rate;
        if let Some(rate) = path.delay_rate {
            let b_d = (rate as f64 * self.cfg.utilization) as u64;
            let b_l = self.lbbc.as_ref().and_then(|l| l.rate(now));
            self.target = target_rate(b_l, b_d).clamp(self.cfg.min_bitrate, self.cfg.max_bitrate);
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let t = clock_tick(self.start, self.cfg.encoder.fps, self.next_tick);
        (t < self.end).then_some(t)
    }

    fn stream_deadline(&self, stream: StreamKey) -> Option<Instant> {
        let StreamKey::Local(i) = stream else {
            return None;
        };
        let f = self.ledger.frames.get(usize::try_from(i).ok()?)?;
        Some(f.captured + self.cfg.deadline)
    }

    fn finish(&mut self, _now: Instant) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let rtt_min = self.ledger.rtt_min;
        let mut o = GamingOutcome {
            frames: self.ledger.frames.len() as u64,
            frames_skipped: self.skipped,
            lbbc_signals: self.lbbc.as_ref().map_or(0, Lbbc::signals),
            ..GamingOutcome::default()
        };
        let (mut prop, mut queue, mut rec, mut parts) = (0.0, 0.0, 0.0, 0u64);
        for f in &self.ledger.frames {
            o.lossy_frames += u64::from(f.lossy);
            let delay = f.complete.map(|c| c.saturating_duration_since(f.captured));
            // A frame never completed was lossy-and-unrecovered or still in flight: both count.
            o.loss_affected_frames += u64::from(f.affected || (f.complete.is_none() && f.lossy));
            if delay.is_none_or(|d| d > self.cfg.deadline) {
                o.frames_over_deadline += 1;
            }
            let Some(delay) = delay else { continue };
            o.delays_ms.push(ms(delay));
            if let (Some((_, end_rtt)), Some(min)) = (f.end, rtt_min) {
                let recovery = delay.saturating_sub(end_rtt);
                prop += ms(min);
                queue += ms(end_rtt.saturating_sub(min));
                rec += ms(recovery);
                parts += 1;
                if f.lossy {
                    o.recovery_lossy_ms.push(ms(recovery));
                }
            }
        }
        if parts > 0 {
            let n = parts as f64;
            (o.propagation_ms, o.queuing_ms, o.recovery_ms) =
                (Some(prop / n), Some(queue / n), Some(rec / n));
        }
        o.mean_bitrate_mbps = (o.frames > 0).then(|| self.bitrate_sum / o.frames as f64 / 1e6);
        self.outcome = Some(o);
    }
}

/// What the viewer measured: frames verified and their delay from capture to the last byte
/// (the client's side of the frame delay, for real-socket runs where the sender is elsewhere).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GamingViewerOutcome {
    pub frames: u64,
    pub frames_over_deadline: u64,
    pub delays_ms: Vec<f64>,
    pub error: Option<FrameError>,
}

/// The receiving side: verifies every frame (one per stream, sequence = stream index).
#[derive(Debug)]
pub struct GamingViewer {
    deadline: Duration,
    frames: OneFramePerStream,
    outcome: GamingViewerOutcome,
}

impl GamingViewer {
    #[must_use]
    pub fn new(cfg: &GamingConfig) -> Self {
        Self {
            deadline: cfg.deadline,
            frames: OneFramePerStream::default(),
            outcome: GamingViewerOutcome::default(),
        }
    }

    #[must_use]
    pub fn outcome(&self) -> GamingViewerOutcome {
        self.outcome.clone()
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
        if let Some(f) = self.frames.push(now, i, data, fin)? {
            // The capture time is on the sender's clock: meaningful where both share one (the
            // simulator; `recoup link` on one host).
            let capture = Instant::from_nanos(f.header.capture_us.saturating_mul(1_000));
            let delay = f.completed.saturating_duration_since(capture);
            self.outcome.frames += 1;
            self.outcome.frames_over_deadline += u64::from(delay > self.deadline);
            self.outcome.delays_ms.push(delay.as_secs_f64() * 1e3);
        }
        Ok(())
    }
}

impl StreamApp for GamingViewer {
    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let r = self.receive(now, stream, data, fin);
        keep_first_error(&mut self.outcome.error, r)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn finish(&mut self, _now: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::ms;
    use recoup_elements::element_rng;

    fn sender(pending_limit: bool) -> GamingSender {
        let cfg = GamingConfig {
            encoder: EncoderConfig {
                bitrate: 4_800_000,
                size_noise: 0.0,
                // Every frame the mean size (a GOP of one has no larger key frames).
                gop: 1,
                ..GamingConfig::default().encoder
            },
            pending_limit,
            ..GamingConfig::default()
        };
        GamingSender::new(&cfg, ms(0), Duration::from_secs(1), element_rng(1, "t"))
    }

    fn drain(s: &mut GamingSender, now: Instant) -> Vec<Write> {
        let mut out = Vec::new();
        while let Some(w) = s.poll_write(now, 100_000) {
            out.push(w);
        }
        out
    }

    fn sent(pn: u64, at: Instant, frame: u64, len: u64) -> PacketFeedback {
        PacketFeedback::Sent {
            pn,
            at,
            bytes: len as usize + 40,
            resend: false,
            streams: vec![(StreamKey::Local(frame), len)],
        }
    }

    #[test]
    fn pending_data_limit_holds_frames_exactly_when_t_pend_exceeds_two_intervals() {
        let mut s = sender(true);
        // Frame 0 at 0 ms: 10 000 bytes (4.8 Mbit/s at 60 fps), nothing sent yet.
        assert_eq!(drain(&mut s, ms(0)).len(), 1);
        assert_eq!(s.ledger.unsent(), 10_000);
        // t_pend = 10 000 / 300 000 B/s = 33.3 ms: exactly 2 t_inv (33.33 ms) is not above it.
        // Pacing at 300 001 B/s keeps t_pend just below; 299 000 B/s puts it above.
        let path = |rate| PathFeedback {
            pacing_rate: Some(rate),
            delay_rate: None,
        };
        s.on_feedback(ms(1), &[], path(300_001));
        assert!(!s.holds_back());
        s.on_feedback(ms(1), &[], path(299_000));
        assert!(s.holds_back());
        // The tick at 16.7 ms is skipped: no new stream.
        assert!(drain(&mut s, ms(17)).is_empty());
        assert_eq!(s.skipped, 1);
        // Frame 0 leaves: nothing pending, the next tick encodes frame 1 on `Local(1)`.
        s.on_feedback(ms(20), &[sent(0, ms(20), 0, 10_000)], path(299_000));
        assert_eq!(s.ledger.unsent(), 0);
        let w = drain(&mut s, ms(34));
        assert_eq!(w[0].stream, StreamKey::Local(1));
        // Lost data waiting for its retransmission counts as pending too.
        s.on_feedback(
            ms(40),
            &[PacketFeedback::Lost { pn: 0, at: ms(40) }],
            path(299_000),
        );
        assert_eq!(s.ledger.unsent(), 20_000);
        assert!(s.holds_back());
        // Without the limit nothing is held whatever the backlog.
        let mut off = sender(false);
        drain(&mut off, ms(0));
        off.on_feedback(ms(1), &[], path(1));
        assert!(!off.holds_back());
    }

    #[test]
    fn frame_metrics_lossy_affected_delay_and_breakdown() {
        let mut s = sender(false);
        drain(&mut s, ms(0));
        drain(&mut s, ms(17));
        // Frame 0 in two packets, frame 1 in one. Packet 1 (frame 0) is lost and re-sent as 3.
        let fb = [
            sent(0, ms(0), 0, 5_000),
            sent(1, ms(0), 0, 5_000),
            sent(2, ms(17), 1, 10_000),
            PacketFeedback::Acked { pn: 0, at: ms(10) },
            PacketFeedback::Lost { pn: 1, at: ms(20) },
            PacketFeedback::Acked { pn: 2, at: ms(30) },
            PacketFeedback::Sent {
                pn: 3,
                at: ms(20),
                bytes: 5_040,
                resend: true,
                streams: vec![(StreamKey::Local(0), 5_000)],
            },
            PacketFeedback::Acked { pn: 3, at: ms(130) },
        ];
        s.on_feedback(ms(130), &fb, PathFeedback::default());
        s.finish(ms(2000));
        let o = s.outcome().expect("finished");
        assert_eq!(o.frames, 2);
        assert_eq!(o.lossy_frames, 1);
        // Frame 1 completed at 30 ms while lossy frame 0 was still open: loss-affected.
        assert_eq!(o.loss_affected_frames, 2);
        // Frame 0: 130 ms (over 100); frame 1, captured at 16.67 ms: 13.33 ms.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(o.delays_ms[0], 130.0) && close(o.delays_ms[1], 40.0 / 3.0));
        assert_eq!(o.frames_over_deadline, 1);
        // RTT_min = 10 ms (packet 0); end RTTs 10 ms and 13 ms. Propagation 10, queuing
        // (0 + 3) / 2, recovery ((130 - 10) + (13.33 - 13)) / 2.
        assert_eq!(o.propagation_ms, Some(10.0));
        assert_eq!(o.queuing_ms, Some(1.5));
        assert!(close(
            o.recovery_ms.expect("parts"),
            (120.0 + 1.0 / 3.0) / 2.0
        ));
        assert_eq!(o.recovery_lossy_ms, vec![120.0]);
    }

    #[test]
    fn target_follows_the_delay_controller_and_its_bounds() {
        let mut s = sender(false);
        let path = |d| PathFeedback {
            pacing_rate: None,
            delay_rate: Some(d),
        };
        s.on_feedback(ms(0), &[], path(7_000_000));
        assert_eq!(s.target(), 6_300_000, "90 % of Copa's rate");
        s.on_feedback(ms(0), &[], path(100));
        assert_eq!(s.target(), 1_000_000, "min_bitrate");
        s.on_feedback(ms(0), &[], path(u64::MAX));
        assert_eq!(s.target(), 30_000_000, "max_bitrate");
    }
}
