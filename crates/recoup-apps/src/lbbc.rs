//! Loss-based bitrate control (LADR §3.2): a CUBIC curve on the encoder's target rate, started
//! only by the shallow-buffer congestion signal, beside a delay-based controller; the encoder
//! follows min(B_l, B_d).
//!
//! The signal needs all of, over `n` consecutive lossy frames (§3.2 "Congestion signal
//! detection"):
//! - their ACK rate is below their average bitrate. The ACK rate is measured between the first
//!   and the last acknowledgement of a non-lost packet of the `n` frames; when nothing (or only
//!   one packet, which spans no time) was acknowledged it is 0, so the condition holds (§3.2:
//!   "the corner case where all packets in the n frames are lost, we set the ACK rate to 0");
//! - the first lossy frame's end-packet RTT (its last non-lost packet, §2.4) is below
//!   RTT_min + δ: the buffer overflowed before a queue a delay-based controller would see built
//!   up. δ must stay below one frame interval (§3.2).
//!
//! On a signal (§3.2 "Congestion Avoidance"): B_max = the rate the `n` frames were sent at (the
//! over-aggressive rate), B_safe = (1 - β) · R_ack, and B_l(t) = C (t - K)^3 + B_max with
//! K = cbrt((B_max - (1 - β) · R_ack) / C), so B_l(0) = B_safe. The paper gives C = 1 without a
//! unit; we read rates in Mbit/s and t in seconds (CUBIC's own convention is segments and
//! seconds), which makes K a few seconds at gaming rates. Frames captured before a signal do not
//! count towards the next one.
//!
//! Before the first signal B_l is unset and the delay-based controller alone sets the rate: the
//! loss-based controller is "initialised when the signals fire" (§3.2 co-existence, point 1).

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::Instant;

/// LBBC's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LbbcConfig {
    /// Consecutive lossy frames per signal (§3.2: at least 3 to smooth the ACK rate).
    pub n: u32,
    /// Queuing margin above RTT_min (§3.2: less than a frame interval).
    pub delta: Duration,
    /// CUBIC's β (§3.2 default 0.8): B_safe = (1 - β) · R_ack.
    pub beta: f64,
    /// CUBIC's C in Mbit/s per s³ (§3.2 default 1).
    pub c: f64,
}

impl Default for LbbcConfig {
    /// n = 3, δ = 10 ms (below 16.7 ms, one frame at 60 fps), β = 0.8, C = 1.
    fn default() -> Self {
        Self {
            n: 3,
            delta: Duration::from_millis(10),
            beta: 0.8,
            c: 1.0,
        }
    }
}

impl LbbcConfig {
    /// Checks the parameters against the paper's ranges for a stream at `fps`; the error names
    /// the key (`lbbc_n`, `lbbc_delta`, `lbbc_beta`, `lbbc_c`).
    ///
    /// # Errors
    /// A message naming the offending key and its allowed range.
    pub fn validate(&self, fps: u32) -> Result<(), String> {
        if self.n < 3 {
            return Err(format!(
                "lbbc_n = {}: must be at least 3 (LADR §3.2: fewer ACK-rate samples fluctuate)",
                self.n
            ));
        }
        let interval = Duration::from_nanos(1_000_000_000 / u64::from(fps.max(1)));
        if self.delta.is_zero() || self.delta >= interval {
            return Err(format!(
                "lbbc_delta = {:?}: must be above 0 and below one frame interval ({interval:?}, \
                 LADR §3.2)",
                self.delta
            ));
        }
        if !(self.beta > 0.0 && self.beta < 1.0) {
            return Err(format!("lbbc_beta = {}: must be in (0, 1)", self.beta));
        }
        if !(self.c.is_finite() && self.c > 0.0) {
            return Err(format!("lbbc_c = {}: must be a positive number", self.c));
        }
        Ok(())
    }
}

/// What LBBC needs of one frame once each of its first-transmission packets was acknowledged
/// or declared lost.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameFeedback {
    pub captured: Instant,
    /// Encoded size in bytes.
    pub bytes: u64,
    /// A packet of its first transmission was lost.
    pub lossy: bool,
    /// (when, bytes) of every acknowledged first-transmission packet.
    pub acks: Vec<(Instant, u64)>,
    /// RTT of its last non-lost packet (§2.4's end packet), if one was acknowledged.
    pub end_rtt: Option<Duration>,
}

/// A congestion signal and the curve it started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Signal {
    pub at: Instant,
    /// The over-aggressive rate B_max, bits per second.
    pub b_max: u64,
    /// The measured ACK rate R_ack, bits per second.
    pub r_ack: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Curve {
    start: Instant,
    /// Mbit/s.
    b_max: f64,
    /// Seconds (negative when R_ack·(1-β) exceeded B_max).
    k: f64,
}

/// The loss-based controller.
#[derive(Clone, Debug)]
pub struct Lbbc {
    cfg: LbbcConfig,
    fps: u32,
    /// The current run of consecutive lossy frames (at most `n`).
    run: VecDeque<FrameFeedback>,
    curve: Option<Curve>,
    /// Frames captured before this do not count towards a signal.
    fresh_after: Instant,
    signals: u64,
}

impl Lbbc {
    #[must_use]
    pub fn new(cfg: LbbcConfig, fps: u32) -> Self {
        Self {
            cfg,
            fps: fps.max(1),
            run: VecDeque::new(),
            curve: None,
            fresh_after: Instant::ZERO,
            signals: 0,
        }
    }

    /// Congestion signals so far.
    #[must_use]
    pub fn signals(&self) -> u64 {
        self.signals
    }

    /// The next frame in capture order is resolved. Returns the signal if it fired.
    pub fn on_frame(
        &mut self,
        now: Instant,
        frame: FrameFeedback,
        rtt_min: Duration,
    ) -> Option<Signal> {
        if !frame.lossy || frame.captured < self.fresh_after {
            self.run.clear();
            return None;
        }
        self.run.push_back(frame);
        if self.run.len() < self.cfg.n as usize {
            return None;
        }
        while self.run.len() > self.cfg.n as usize {
            self.run.pop_front();
        }
        let bitrate = self.run_bitrate();
        let r_ack = self.run_ack_rate();
        let first_rtt = self.run.front().and_then(|f| f.end_rtt);
        // Unknown end-packet RTT (the first frame lost everything): no queue was measured, so
        // nothing says a delay-based controller could have seen this congestion.
        let shallow = first_rtt.is_none_or(|r| r < rtt_min + self.cfg.delta);
        if r_ack >= bitrate || !shallow {
            return None;
        }
        let signal = Signal {
            at: now,
            b_max: bitrate,
            r_ack,
        };
        let b_max = bitrate as f64 / 1e6;
        let safe = (1.0 - self.cfg.beta) * r_ack as f64 / 1e6;
        self.curve = Some(Curve {
            start: now,
            b_max,
            k: ((b_max - safe) / self.cfg.c).cbrt(),
        });
        self.run.clear();
        self.fresh_after = now;
        self.signals += 1;
        Some(signal)
    }

    /// B_l at `now`, bits per second; `None` before the first signal.
    #[must_use]
    pub fn rate(&self, now: Instant) -> Option<u64> {
        let c = self.curve?;
        let t = now.saturating_duration_since(c.start).as_secs_f64();
        let mbps = self.cfg.c * (t - c.k).powi(3) + c.b_max;
        Some((mbps.max(0.0) * 1e6).min(u64::MAX as f64) as u64)
    }

    /// The run's average bitrate: its bytes over its frames' time at the frame rate.
    fn run_bitrate(&self) -> u64 {
        let bytes: u64 = self.run.iter().map(|f| f.bytes).sum();
        bytes * 8 * u64::from(self.fps) / self.run.len().max(1) as u64
    }

    /// Bits per second acknowledged between the run's first and last ACK of a non-lost packet.
    fn run_ack_rate(&self) -> u64 {
        let mut acks: Vec<(Instant, u64)> = self
            .run
            .iter()
            .flat_map(|f| f.acks.iter().copied())
            .collect();
        acks.sort_unstable();
        let (Some(first), Some(last)) = (acks.first(), acks.last()) else {
            return 0;
        };
        let span = last.0.saturating_duration_since(first.0).as_secs_f64();
        if span <= 0.0 {
            return 0;
        }
        // The first acknowledgement opens the interval; its bytes arrived before it.
        let bytes: u64 = acks.iter().skip(1).map(|a| a.1).sum();
        (bytes as f64 * 8.0 / span) as u64
    }
}

/// The encoder's target: min(B_l, B_d) (§3.2 co-existence); B_d alone before LBBC's first
/// signal.
#[must_use]
pub fn target_rate(b_l: Option<u64>, b_d: u64) -> u64 {
    b_l.map_or(b_d, |l| l.min(b_d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// A frame of 10 packets of 1000 bytes captured at `at_ms`; `lost` of them lost; the others
    /// acknowledged `gap_ms` apart starting at `at_ms + rtt_ms`.
    fn frame(at_ms: u64, lost: u64, gap_ms: u64, rtt_ms: u64) -> FrameFeedback {
        let acks: Vec<(Instant, u64)> = (0..10 - lost)
            .map(|i| (ms(at_ms + rtt_ms + i * gap_ms), 1000))
            .collect();
        FrameFeedback {
            captured: ms(at_ms),
            bytes: 10_000,
            lossy: lost > 0,
            end_rtt: (lost < 10).then(|| Duration::from_millis(rtt_ms)),
            acks,
        }
    }

    const RTT_MIN: Duration = Duration::from_millis(10);

    #[test]
    fn fires_on_the_third_lossy_frame_with_a_low_ack_rate_and_no_queue() {
        let mut l = Lbbc::new(LbbcConfig::default(), 60);
        // 10 kB per frame at 60 fps = 4.8 Mbit/s; ACKs 2 ms apart over three frames = 27 kB
        // over ~50 ms ≈ 4.3 Mbit/s < 4.8; end RTT 12 ms < 10 + 10.
        assert_eq!(l.on_frame(ms(30), frame(0, 1, 2, 12), RTT_MIN), None);
        assert_eq!(l.on_frame(ms(47), frame(17, 1, 2, 12), RTT_MIN), None);
        let s = l
            .on_frame(ms(64), frame(34, 1, 2, 12), RTT_MIN)
            .expect("signal");
        assert_eq!(s.b_max, 4_800_000);
        assert!(s.r_ack < s.b_max, "{s:?}");
        assert_eq!(l.signals(), 1);
        // B_l starts at B_safe = 0.2 · R_ack and is back at B_max after K seconds.
        let b0 = l.rate(ms(64)).expect("initialised");
        assert!((b0 as f64 - 0.2 * s.r_ack as f64).abs() < 1000.0, "{b0}");
        let k = ((4.8 - 0.2 * s.r_ack as f64 / 1e6) / 1.0f64).cbrt();
        let at_k = l.rate(ms(64) + Duration::from_secs_f64(k)).expect("set");
        assert!((at_k as f64 - 4.8e6).abs() < 1000.0, "{at_k}");
        assert!(l.rate(ms(64) + Duration::from_secs(10)).expect("set") > 4_800_000);
    }

    #[test]
    fn needs_n_consecutive_lossy_frames() {
        let mut l = Lbbc::new(LbbcConfig::default(), 60);
        assert_eq!(l.on_frame(ms(30), frame(0, 1, 2, 12), RTT_MIN), None);
        assert_eq!(l.on_frame(ms(47), frame(17, 1, 2, 12), RTT_MIN), None);
        // A clean frame breaks the run.
        assert_eq!(l.on_frame(ms(64), frame(34, 0, 2, 12), RTT_MIN), None);
        assert_eq!(l.on_frame(ms(81), frame(51, 1, 2, 12), RTT_MIN), None);
        assert_eq!(l.on_frame(ms(98), frame(68, 1, 2, 12), RTT_MIN), None);
        assert_eq!(l.rate(ms(98)), None, "uninitialised until it fires");
        assert!(l.on_frame(ms(115), frame(85, 1, 2, 12), RTT_MIN).is_some());
    }

    #[test]
    fn no_signal_when_acks_keep_up_or_a_queue_built() {
        let mut l = Lbbc::new(LbbcConfig::default(), 60);
        // ACKs 0.1 ms apart: far above the bitrate (random loss, not congestion).
        let fast = |at| {
            let mut f = frame(at, 1, 1, 12);
            for (i, a) in f.acks.iter_mut().enumerate() {
                a.0 = ms(at + 12) + Duration::from_micros(100 * i as u64);
            }
            f
        };
        for i in 0..6 {
            assert_eq!(l.on_frame(ms(30 + 17 * i), fast(17 * i), RTT_MIN), None);
        }
        // Slow ACKs but the first frame's end RTT is 25 ms >= 10 + 10: a deep-buffer queue,
        // the delay-based controller's job.
        let mut l = Lbbc::new(LbbcConfig::default(), 60);
        for i in 0..6 {
            assert_eq!(
                l.on_frame(ms(30 + 17 * i), frame(17 * i, 1, 2, 25), RTT_MIN),
                None
            );
        }
        // Exactly at the bound RTT_min + δ = 20 ms does not count as shallow.
        let mut l = Lbbc::new(LbbcConfig::default(), 60);
        for i in 0..3 {
            assert_eq!(
                l.on_frame(ms(30 + 17 * i), frame(17 * i, 1, 2, 20), RTT_MIN),
                None
            );
        }
    }

    #[test]
    fn everything_lost_counts_as_ack_rate_zero() {
        let mut l = Lbbc::new(LbbcConfig::default(), 60);
        l.on_frame(ms(30), frame(0, 10, 2, 12), RTT_MIN);
        l.on_frame(ms(47), frame(17, 10, 2, 12), RTT_MIN);
        let s = l
            .on_frame(ms(64), frame(34, 10, 2, 12), RTT_MIN)
            .expect("signal");
        assert_eq!(s.r_ack, 0);
        assert_eq!(l.rate(ms(64)), Some(0));
    }

    #[test]
    fn frames_from_before_a_signal_do_not_start_the_next() {
        let mut l = Lbbc::new(LbbcConfig::default(), 60);
        for i in 0..3 {
            l.on_frame(ms(30 + 17 * i), frame(17 * i, 1, 2, 12), RTT_MIN);
        }
        assert_eq!(l.signals(), 1);
        // Frames captured at 51..=85 ms were sent before the signal at 64 ms... those captured
        // before it are ignored; three fresh ones fire again.
        assert_eq!(l.on_frame(ms(81), frame(51, 1, 2, 12), RTT_MIN), None);
        for i in 0..2 {
            assert_eq!(
                l.on_frame(ms(98 + 17 * i), frame(68 + 17 * i, 1, 2, 12), RTT_MIN),
                None
            );
        }
        assert!(l.on_frame(ms(132), frame(102, 1, 2, 12), RTT_MIN).is_some());
        assert_eq!(l.signals(), 2);
    }

    #[test]
    fn target_is_the_minimum_and_hands_over_when_b_l_overtakes_b_d() {
        let mut l = Lbbc::new(LbbcConfig::default(), 60);
        let b_d = 6_000_000;
        assert_eq!(
            target_rate(l.rate(ms(0)), b_d),
            b_d,
            "B_d alone before a signal"
        );
        for i in 0..3 {
            l.on_frame(ms(30 + 17 * i), frame(17 * i, 1, 2, 12), RTT_MIN);
        }
        let t0 = ms(64);
        let low = target_rate(l.rate(t0), b_d);
        assert!(
            low < 1_000_000,
            "LBBC holds the rate right after the signal: {low}"
        );
        // The cubic crosses B_d = 6 Mbit/s once (t - K)^3 = 6 - 4.8, i.e. t = K + 1.063 s;
        // before that LBBC limits, after it the delay-based controller does.
        let s = l.curve.expect("curve");
        let cross = s.k + (6.0f64 - 4.8).cbrt();
        let before = t0 + Duration::from_secs_f64(cross - 0.05);
        let after = t0 + Duration::from_secs_f64(cross + 0.05);
        assert!(target_rate(l.rate(before), b_d) < b_d);
        assert_eq!(target_rate(l.rate(after), b_d), b_d);
    }

    #[test]
    fn validation_names_the_key() {
        let ok = LbbcConfig::default();
        assert_eq!(ok.validate(60), Ok(()));
        let e = LbbcConfig { n: 2, ..ok }.validate(60).unwrap_err();
        assert!(e.contains("lbbc_n"), "{e}");
        let e = LbbcConfig {
            delta: Duration::from_millis(17),
            ..ok
        }
        .validate(60)
        .unwrap_err();
        assert!(e.contains("lbbc_delta"), "{e}");
        assert!(LbbcConfig { beta: 1.0, ..ok }
            .validate(60)
            .unwrap_err()
            .contains("lbbc_beta"));
        assert!(LbbcConfig { c: 0.0, ..ok }
            .validate(60)
            .unwrap_err()
            .contains("lbbc_c"));
    }
}
