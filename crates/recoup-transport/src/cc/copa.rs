//! Copa (Arun & Balakrishnan, "Copa: Practical Delay-Based Congestion Control for the Internet",
//! NSDI 2018).
//!
//! Copa steers toward the target rate 1/(δ·d_q) packets per second, where the queueing delay
//! d_q = RTTstanding − RTTmin; RTTstanding is the smallest RTT of the last srtt/2 and RTTmin the
//! smallest of a long window (10 s). On each acknowledgement the window moves by v/(δ·cwnd)
//! packets toward the target; the velocity v doubles once the window has kept one direction for
//! three RTTs and returns to 1 when the direction turns. Packets are paced at
//! 2·cwnd/RTTstanding, and a flow starts in slow start, doubling its window each RTT until its
//! rate exceeds the target (paper §2). When the queue has not nearly emptied for five RTTs, a
//! buffer-filling flow shares the bottleneck: Copa then runs in competitive mode, where 1/δ
//! follows additive increase (+1 per RTT) and multiplicative decrease (halved on loss), and goes
//! back to the default δ once the queue empties again (§2, "Competing with buffer-filling
//! schemes").
//!
//! Where the paper leaves a choice to the host protocol, the RFC 9002 rules of the other
//! controllers apply: an application-limited sender does not grow its window (§7.8), one loss
//! reaction per recovery period (§7.3.2), and persistent congestion collapses the window to the
//! minimum (§7.6.2). In default mode a loss does not change the window (Copa reacts to delay, and
//! the paper's robustness to non-congestive loss rests on that).

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::Instant;

use super::{AckEvent, CcConfig, CongestionController};
use crate::rtt::{RttEstimator, GRANULARITY};

/// §2: δ of the default mode.
pub const DEFAULT_DELTA: f64 = 0.5;
/// §2: RTTmin is the smallest RTT over this long window.
const RTT_MIN_WINDOW: Duration = Duration::from_secs(10);
/// Samples of the 10-second filter closer together than this share one entry.
const RTT_MIN_RESOLUTION: Duration = Duration::from_millis(100);
/// §2: the velocity doubles only after the window has moved one way for this many RTTs.
const SAME_DIRECTION_RTTS: u32 = 3;
/// §2: packets are paced at this multiple of cwnd / RTTstanding.
const PACING_GAIN: f64 = 2.0;
/// §2, competitive mode: RTTmax is the largest RTT of the last four RTTs; the queue is nearly
/// empty when d_q < 0.1·(RTTmax − RTTmin); without that for five RTTs, a buffer-filler is present.
const RTT_MAX_RTTS: u32 = 4;
const NEARLY_EMPTY_FRACTION: f64 = 0.1;
const EMPTY_CHECK_RTTS: u32 = 5;
/// A numeric bound on v, not the paper's: a window moving one way for 40 RTTs stops doubling the
/// step there rather than overflowing.
const MAX_VELOCITY: f64 = (1u64 << 40) as f64;

/// Copa's operating mode (§2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopaMode {
    /// δ as configured (0.5 by default).
    Default,
    /// A buffer-filling flow shares the bottleneck: 1/δ follows AIMD.
    Competitive,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

/// A windowed minimum or maximum of RTT samples: a monotonic deque holding the samples that can
/// still become the extreme. A sample within `resolution` of the newest entry that does not
/// replace it is dropped, so the state holds at most window / resolution entries and the newest
/// extreme can leave the window up to `resolution` early.
#[derive(Clone, Debug)]
struct WindowedRtt {
    max: bool,
    resolution: Duration,
    entries: VecDeque<(Instant, Duration)>,
}

impl WindowedRtt {
    fn new(max: bool, resolution: Duration) -> Self {
        Self {
            max,
            resolution,
            entries: VecDeque::new(),
        }
    }

    /// `a` is at least as extreme as `b`.
    fn dominates(&self, a: Duration, b: Duration) -> bool {
        if self.max {
            a >= b
        } else {
            a <= b
        }
    }

    /// Adds `sample` taken at `now` and returns the extreme of the last `window`.
    fn update(&mut self, now: Instant, sample: Duration, window: Duration) -> Duration {
        while self
            .entries
            .front()
            .is_some_and(|&(t, _)| now.saturating_duration_since(t) > window)
        {
            self.entries.pop_front();
        }
        while self
            .entries
            .back()
            .is_some_and(|&(_, v)| self.dominates(sample, v))
        {
            self.entries.pop_back();
        }
        let close = self
            .entries
            .back()
            .is_some_and(|&(t, _)| now.saturating_duration_since(t) < self.resolution);
        if !close {
            self.entries.push_back((now, sample));
        }
        self.entries.front().map_or(sample, |&(_, v)| v)
    }
}

/// The Copa congestion controller.
#[derive(Clone, Debug)]
pub struct Copa {
    mds: u64,
    min_window: u64,
    /// Bytes; fractional so that per-ACK steps below one byte still add up.
    cwnd: f64,
    slow_start: bool,
    default_delta: f64,
    mode: CopaMode,
    /// 1/δ in competitive mode.
    inv_delta: f64,
    velocity: f64,
    direction: Option<Direction>,
    /// RTTs the window kept `direction` after the one in which it turned.
    same_direction_rtts: u32,
    /// The current RTT window began at this time; it ends when a packet sent since is
    /// acknowledged. `None` before the first acknowledgement.
    round_start: Option<Instant>,
    /// cwnd when the current RTT window began (the velocity rule compares against it).
    round_cwnd: f64,
    loss_in_round: bool,
    standing_filter: WindowedRtt,
    min_filter: WindowedRtt,
    max_filter: WindowedRtt,
    rtt_standing: Option<Duration>,
    rtt_min: Option<Duration>,
    rtt_max: Option<Duration>,
    last_nearly_empty: Option<Instant>,
    /// RFC 9002 §7.3.2: losses of packets sent before this belong to the last reaction.
    recovery_start: Option<Instant>,
}

impl Copa {
    /// Copa with the default δ of 0.5.
    #[must_use]
    pub fn new(config: &CcConfig) -> Self {
        Self::with_delta(config, DEFAULT_DELTA)
    }

    /// Copa with default-mode δ `delta` (> 0; smaller values weigh throughput more than delay).
    #[must_use]
    pub fn with_delta(config: &CcConfig, delta: f64) -> Self {
        let delta = if delta.is_finite() && delta > 0.0 {
            delta
        } else {
            DEFAULT_DELTA
        };
        Self {
            mds: config.max_datagram_size.max(1),
            min_window: config.minimum_window(),
            cwnd: config.initial_window() as f64,
            slow_start: true,
            default_delta: delta,
            mode: CopaMode::Default,
            inv_delta: 1.0 / delta,
            velocity: 1.0,
            direction: None,
            same_direction_rtts: 0,
            round_start: None,
            round_cwnd: config.initial_window() as f64,
            loss_in_round: false,
            standing_filter: WindowedRtt::new(false, GRANULARITY),
            min_filter: WindowedRtt::new(false, RTT_MIN_RESOLUTION),
            max_filter: WindowedRtt::new(true, GRANULARITY),
            rtt_standing: None,
            rtt_min: None,
            rtt_max: None,
            last_nearly_empty: None,
            recovery_start: None,
        }
    }

    /// The δ in use: the configured one in default mode, 1 / (AIMD state) in competitive mode.
    #[must_use]
    pub fn delta(&self) -> f64 {
        match self.mode {
            CopaMode::Default => self.default_delta,
            CopaMode::Competitive => 1.0 / self.inv_delta,
        }
    }

    #[must_use]
    pub fn mode(&self) -> CopaMode {
        self.mode
    }

    #[must_use]
    pub fn velocity(&self) -> f64 {
        self.velocity
    }

    #[must_use]
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    #[must_use]
    pub fn rtt_standing(&self) -> Option<Duration> {
        self.rtt_standing
    }

    /// d_q = RTTstanding − RTTmin.
    #[must_use]
    pub fn queueing_delay(&self) -> Option<Duration> {
        Some(self.rtt_standing?.saturating_sub(self.rtt_min?))
    }

    /// The target rate 1/(δ·d_q) in bytes per second (packets of the maximum datagram size);
    /// `None` before an RTT sample, infinite when the queue is empty.
    #[must_use]
    pub fn target_rate(&self) -> Option<f64> {
        let dq = self.queueing_delay()?.as_secs_f64();
        Some(if dq > 0.0 {
            self.mds as f64 / (self.delta() * dq)
        } else {
            f64::INFINITY
        })
    }

    /// The current rate cwnd / RTTstanding in bytes per second.
    fn current_rate(&self) -> Option<f64> {
        let standing = self.rtt_standing?.as_secs_f64();
        (standing > 0.0).then(|| self.cwnd / standing)
    }

    /// The RTT of this ACK: that of the newest packet it acknowledges, else the estimator's.
    fn sample(ack: &AckEvent<'_>) -> Option<Duration> {
        ack.rate_sample
            .map(|rs| rs.rtt)
            .filter(|rtt| !rtt.is_zero())
            .or_else(|| ack.rtt.has_sample().then(|| ack.rtt.latest()))
    }

    fn update_filters(&mut self, now: Instant, rtt: Duration, srtt: Duration) {
        self.rtt_standing = Some(self.standing_filter.update(now, rtt, srtt / 2));
        let min = self.min_filter.update(now, rtt, RTT_MIN_WINDOW);
        self.rtt_min = Some(min);
        let max = self.max_filter.update(now, rtt, srtt * RTT_MAX_RTTS);
        self.rtt_max = Some(max);
        let dq = self.queueing_delay().unwrap_or_default().as_secs_f64();
        let spread = max.saturating_sub(min).as_secs_f64();
        if dq <= NEARLY_EMPTY_FRACTION * spread {
            self.last_nearly_empty = Some(now);
        }
        let empty_recently = self
            .last_nearly_empty
            .is_some_and(|t| now.saturating_duration_since(t) <= srtt * EMPTY_CHECK_RTTS);
        match (self.mode, empty_recently) {
            (CopaMode::Default, false) => {
                self.mode = CopaMode::Competitive;
                self.inv_delta = 1.0 / self.default_delta;
            }
            (CopaMode::Competitive, true) => {
                // §2: back in default mode, δ returns to its default.
                self.mode = CopaMode::Default;
                self.inv_delta = 1.0 / self.default_delta;
            }
            _ => {}
        }
    }

    /// Once per RTT window: the velocity rule and competitive mode's additive increase.
    fn end_round(&mut self, now: Instant) {
        let direction = if self.cwnd > self.round_cwnd {
            Some(Direction::Up)
        } else if self.cwnd < self.round_cwnd {
            Some(Direction::Down)
        } else {
            None
        };
        if !self.slow_start {
            if direction.is_some() && direction == self.direction {
                self.same_direction_rtts += 1;
                if self.same_direction_rtts >= SAME_DIRECTION_RTTS {
                    self.velocity = (self.velocity * 2.0).min(MAX_VELOCITY);
                }
            } else {
                self.direction = direction;
                self.same_direction_rtts = 0;
                self.velocity = 1.0;
            }
        }
        if self.mode == CopaMode::Competitive && !self.loss_in_round {
            self.inv_delta += 1.0;
        }
        self.loss_in_round = false;
        self.round_start = Some(now);
        self.round_cwnd = self.cwnd;
    }
}

impl CongestionController for Copa {
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u64, _bytes_in_flight: u64) {}

    fn on_ack(&mut self, ack: &AckEvent<'_>) {
        let now = ack.now;
        let acked: u64 = ack.acked.iter().map(|p| p.bytes).sum();
        let Some(rtt) = Self::sample(ack) else {
            return;
        };
        self.update_filters(now, rtt, ack.rtt.smoothed());
        match self.round_start {
            None => {
                self.round_start = Some(now);
                self.round_cwnd = self.cwnd;
            }
            Some(start) if ack.acked.iter().any(|p| p.time_sent >= start) => self.end_round(now),
            Some(_) => {}
        }
        let (Some(current), Some(target)) = (self.current_rate(), self.target_rate()) else {
            return;
        };
        let below_target = current <= target;
        if self.slow_start {
            if !below_target {
                self.slow_start = false;
            } else if !ack.app_limited {
                // Doubles the window per RTT.
                self.cwnd += acked as f64;
            }
            return;
        }
        let wanted = if below_target {
            Direction::Up
        } else {
            Direction::Down
        };
        if self.velocity > 1.0 && self.direction != Some(wanted) {
            // §2 resets v when the direction changes. The window-by-window check sees the turn
            // only at the end of the RTT; until then a v doubled while the window fell would
            // drive it up as fast (measured in the Fig. 13 setting: 0.65 -> 1.45 MB within
            // 250 ms, 72 % loss). So an ACK that turns the window resets v at once.
            self.direction = Some(wanted);
            self.same_direction_rtts = 0;
            self.velocity = 1.0;
        }
        // v/(δ·cwnd) packets per acknowledged packet, in bytes.
        let step = self.velocity * self.mds as f64 * acked as f64 / (self.delta() * self.cwnd);
        if !below_target {
            self.cwnd = (self.cwnd - step).max(self.min_window as f64);
        } else if !ack.app_limited {
            self.cwnd += step;
        }
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        largest_lost_sent_time: Instant,
        _lost_bytes: u64,
        persistent_congestion: bool,
        _rtt: &RttEstimator,
    ) {
        let new_event = self
            .recovery_start
            .is_none_or(|start| largest_lost_sent_time > start);
        if new_event {
            self.recovery_start = Some(now);
            self.loss_in_round = true;
            if self.mode == CopaMode::Competitive {
                self.inv_delta = (self.inv_delta / 2.0).max(1.0 / self.default_delta);
            }
        }
        if persistent_congestion {
            self.cwnd = self.min_window as f64;
            self.velocity = 1.0;
            self.direction = None;
            self.same_direction_rtts = 0;
        }
    }

    fn window(&self) -> u64 {
        self.cwnd as u64
    }

    fn on_max_datagram_size(&mut self, mds: u64) {
        self.mds = mds.max(1);
        self.min_window = self.mds.saturating_mul(2);
        self.cwnd = self.cwnd.max(self.min_window as f64);
    }

    fn pacing_rate(&self) -> Option<u64> {
        let standing = self.rtt_standing?.as_secs_f64();
        (standing > 0.0).then(|| (PACING_GAIN * self.cwnd / standing) as u64)
    }

    fn name(&self) -> &'static str {
        "copa"
    }

    fn state(&self) -> &'static str {
        if self.slow_start {
            "slow_start"
        } else {
            match self.mode {
                CopaMode::Default => "default",
                CopaMode::Competitive => "competitive",
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::AckedPacket;
    use crate::delivery_rate::RateSnapshot;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// One ACK at `now_ms` of a 1200-byte packet whose RTT sample is `rtt_ms` (so it was sent at
    /// `now_ms - rtt_ms`), fed through an RFC 9002 estimator as the connection does.
    fn ack(cc: &mut Copa, est: &mut RttEstimator, now_ms: u64, rtt_ms: u64, app_limited: bool) {
        let now = at(now_ms);
        let rtt = Duration::from_millis(rtt_ms);
        est.update(now, rtt, Duration::ZERO, Duration::from_millis(25), true);
        let acked = [AckedPacket {
            time_sent: at(now_ms - rtt_ms),
            bytes: 1200,
            rate: RateSnapshot::default(),
        }];
        cc.on_ack(&AckEvent {
            now,
            acked: &acked,
            rate_sample: None,
            rtt: est,
            rtt_sampled: true,
            prior_in_flight: 0,
            in_flight: 0,
            app_limited,
            lost_total: 0,
        });
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn target_rate_and_slow_start_exit_by_hand() {
        let mut cc = Copa::new(&CcConfig::default());
        let mut est = RttEstimator::default();
        // First sample: srtt 50 ms, RTTstanding = RTTmin = 50 ms, no queue: unbounded target.
        ack(&mut cc, &mut est, 100, 50, false);
        assert_eq!(cc.target_rate(), Some(f64::INFINITY));
        assert_eq!(
            cc.window(),
            13_200,
            "slow start adds the acknowledged bytes"
        );
        // 10 ms later the 50 ms sample is still within srtt/2 = 25.75 ms: no queue yet.
        ack(&mut cc, &mut est, 110, 62, false);
        assert_eq!(cc.queueing_delay(), Some(Duration::ZERO));
        assert_eq!(cc.window(), 14_400);
        // srtt = 52.81 ms: the window is 26.4 ms and both older samples have left it.
        // d_q = 62 - 50 = 12 ms; target = 1 / (0.5 * 0.012 s) = 166.7 packets/s = 200 000 B/s.
        ack(&mut cc, &mut est, 140, 62, false);
        assert_eq!(cc.rtt_standing(), Some(Duration::from_millis(62)));
        assert_eq!(cc.queueing_delay(), Some(Duration::from_millis(12)));
        assert!(close(cc.target_rate().expect("rate"), 200_000.0));
        // The rate 14 400 / 0.062 = 232 258 B/s exceeds it: slow start ends, the window stays.
        assert!(!cc.in_slow_start());
        assert_eq!(cc.window(), 14_400);
        // Next ACK: above target, so down by v/(δ·cwnd) packets = 1 * 1200 * 1200 / (0.5 *
        // 14 400) = 200 bytes.
        ack(&mut cc, &mut est, 150, 62, false);
        assert!(close(cc.cwnd, 14_200.0));
        assert_eq!(cc.state(), "default");
        // Pacing at 2 * cwnd / RTTstanding = 2 * 14 200 / 0.062 s.
        assert_eq!(cc.pacing_rate(), Some(458_064));

        // δ = 0.25 doubles the target: 1 / (0.25 * 0.012 s) = 333.3 packets/s.
        let mut quarter = Copa::with_delta(&CcConfig::default(), 0.25);
        let mut est = RttEstimator::default();
        for (t, rtt) in [(100, 50), (110, 62), (140, 62)] {
            ack(&mut quarter, &mut est, t, rtt, false);
        }
        assert!(close(quarter.target_rate().expect("rate"), 400_000.0));
    }

    #[test]
    fn velocity_doubles_after_three_rtts_one_way_and_resets_on_a_turn() {
        let mut cc = Copa::new(&CcConfig::default());
        cc.slow_start = false;
        let mut est = RttEstimator::default();
        // A constant 50 ms RTT: no queue, the window rises on every ACK. One ACK per 100 ms,
        // each of a packet sent after the previous ACK, so each ends an RTT window.
        let mut velocities = Vec::new();
        for i in 1..=6 {
            ack(&mut cc, &mut est, 100 * i, 50, false);
            velocities.push(cc.velocity());
            if i == 2 {
                // 12 000 + 1200*1200/(0.5*12 000) = 12 240; + 1200*1200/(0.5*12 240) = 235.294.
                assert!(close(cc.cwnd, 12_475.294_117_647));
            }
        }
        // Window 1 starts the count; up in windows 2-4 (turned in 2, held 3 and 4); v doubles
        // from the window in which "up" has held three RTTs after the turn.
        assert_eq!(velocities, [1.0, 1.0, 1.0, 1.0, 2.0, 4.0]);
        let before = cc.cwnd;
        // A 90 ms sample: d_q = 40 ms, target 60 000 B/s, far below cwnd / 0.09 s. The window
        // that just ended still went up (v = 8), but this ACK turns it down: v = 1 at once.
        ack(&mut cc, &mut est, 700, 90, false);
        assert_eq!(cc.velocity(), 1.0);
        assert!(close(cc.cwnd, before - 1200.0 * 1200.0 / (0.5 * before)));
        // The next windows go down: v stays 1 until "down" has held three RTTs, then doubles.
        let mut velocities = Vec::new();
        for t in [800, 900, 1000, 1100] {
            ack(&mut cc, &mut est, t, 90, false);
            velocities.push(cc.velocity());
        }
        assert_eq!(velocities, [1.0, 1.0, 2.0, 4.0]);
    }

    #[test]
    fn application_limited_acks_do_not_grow_the_window() {
        let mut cc = Copa::new(&CcConfig::default());
        let mut est = RttEstimator::default();
        ack(&mut cc, &mut est, 100, 50, true);
        assert_eq!(cc.window(), 12_000);
        cc.slow_start = false;
        ack(&mut cc, &mut est, 200, 50, true);
        assert_eq!(cc.window(), 12_000);
    }

    #[test]
    fn competitive_mode_when_the_queue_never_empties() {
        let mut cc = Copa::new(&CcConfig::default());
        let mut est = RttEstimator::default();
        ack(&mut cc, &mut est, 100, 50, false);
        // A standing 30 ms queue from now on (RTT 80 ms, RTTmin 50 ms).
        ack(&mut cc, &mut est, 200, 80, false);
        ack(&mut cc, &mut est, 300, 80, false);
        // srtt 59.9 ms: the queue was last nearly empty 300 ms > 5 srtt ago.
        assert_eq!(cc.mode(), CopaMode::Default);
        ack(&mut cc, &mut est, 400, 80, false);
        assert_eq!(cc.mode(), CopaMode::Competitive);
        assert_eq!(cc.state(), "competitive");
        // Entered at 1/δ = 2, and this ACK ended a loss-free RTT: 1/δ = 3.
        assert!(close(cc.delta(), 1.0 / 3.0));
        ack(&mut cc, &mut est, 500, 80, false);
        assert!(close(cc.delta(), 0.25));
        // A loss halves 1/δ (4 -> 2); a second loss of the same period does not.
        let rtt = RttEstimator::default();
        cc.on_congestion_event(at(550), at(540), 1200, false, &rtt);
        assert!(close(cc.delta(), 0.5));
        cc.on_congestion_event(at(551), at(541), 1200, false, &rtt);
        assert!(close(cc.delta(), 0.5));
        // The RTT with the loss brings no increase; the next loss-free one does.
        ack(&mut cc, &mut est, 600, 80, false);
        assert!(close(cc.delta(), 0.5));
        ack(&mut cc, &mut est, 700, 80, false);
        assert!(close(cc.delta(), 1.0 / 3.0));
        // The queue empties: default mode, δ = 0.5.
        ack(&mut cc, &mut est, 800, 50, false);
        assert_eq!(cc.mode(), CopaMode::Default);
        assert!(close(cc.delta(), 0.5));
    }

    #[test]
    fn loss_leaves_the_default_window_and_persistent_congestion_collapses_it() {
        let mut cc = Copa::new(&CcConfig::default());
        let rtt = RttEstimator::default();
        cc.on_congestion_event(at(10), at(5), 1200, false, &rtt);
        assert_eq!(cc.window(), 12_000);
        cc.on_congestion_event(at(20), at(15), 1200, true, &rtt);
        assert_eq!(cc.window(), 2400);
    }

    #[test]
    fn windowed_filters_expire_and_stay_bounded() {
        let mut min = WindowedRtt::new(false, Duration::from_millis(100));
        let w = Duration::from_secs(10);
        let d = Duration::from_millis;
        assert_eq!(min.update(at(0), d(50), w), d(50));
        assert_eq!(min.update(at(5_000), d(70), w), d(50));
        // The 50 ms sample leaves after 10 s; the 70 ms one remains.
        assert_eq!(min.update(at(10_001), d(80), w), d(70));
        // Rising samples 1 ms apart share entries at 100 ms resolution.
        for i in 0..10_000 {
            min.update(at(20_000 + i), d(100) + Duration::from_micros(i), w);
        }
        assert!(min.entries.len() <= 101, "{}", min.entries.len());
        let mut max = WindowedRtt::new(true, GRANULARITY);
        assert_eq!(max.update(at(0), d(50), d(100)), d(50));
        assert_eq!(max.update(at(50), d(40), d(100)), d(50));
        assert_eq!(max.update(at(101), d(45), d(100)), d(45));
    }
}
