//! CUBIC (RFC 9438), with RFC 9002's recovery period and persistent congestion rules, and
//! HyStart++ (RFC 9406) in its initial slow start.

use recoup_time::Instant;

use super::hystart::{self, HyStart};
use super::{AckEvent, CcConfig, CongestionController};
use crate::rtt::RttEstimator;

/// RFC 9438 §5.1: C, in segments per second cubed.
const C: f64 = 0.4;
/// RFC 9438 §4.6: multiplicative decrease factor.
const BETA: f64 = 0.7;
/// RFC 9438 §4.3: additive increase of the Reno-friendly estimate, 3(1-β)/(1+β) segments per RTT.
const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// The CUBIC congestion controller. Windows are kept in bytes as `f64`; RFC 9438 states its
/// formulas in segments, converted here with the maximum datagram size.
#[derive(Clone, Debug)]
pub struct Cubic {
    mds: f64,
    min_window: f64,
    cwnd: f64,
    ssthresh: f64,
    /// RFC 9438 §4.1 W_max, bytes.
    w_max: f64,
    /// cwnd before the last reduction (RFC 9438 §4.3 cwnd_prior).
    cwnd_prior: f64,
    /// RFC 9438 §4.2 K, seconds.
    k: f64,
    /// Start of the current congestion avoidance epoch (RFC 9438 §4.2 t = 0).
    epoch_start: Option<Instant>,
    /// RFC 9438 §4.3 W_est, bytes.
    w_est: f64,
    recovery_start: Option<Instant>,
    recovering: bool,
    last_ack: Option<Instant>,
    /// HyStart++ while the initial slow start lasts (RFC 9406 §4.2: "only for the initial slow
    /// start"; later slow starts stop at the ssthresh a loss set); `None` once it ended or when
    /// turned off.
    hystart: Option<HyStart>,
}

impl Cubic {
    #[must_use]
    pub fn new(config: &CcConfig) -> Self {
        let cwnd = config.initial_window() as f64;
        Self {
            mds: config.max_datagram_size.max(1) as f64,
            min_window: config.minimum_window() as f64,
            cwnd,
            ssthresh: f64::INFINITY,
            w_max: cwnd,
            cwnd_prior: cwnd,
            k: 0.0,
            epoch_start: None,
            w_est: cwnd,
            recovery_start: None,
            recovering: false,
            last_ack: None,
            hystart: config.hystart.then(|| HyStart::new(config.paced)),
        }
    }

    fn in_recovery(&self, sent: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent <= start)
    }

    /// RFC 9438 §4.2 Figure 1: W_cubic(t) = C·(t − K)³ + W_max, in bytes, `t` in seconds.
    fn w_cubic(&self, t: f64) -> f64 {
        let d = t - self.k;
        C * d * d * d * self.mds + self.w_max
    }

    /// The slow start threshold in bytes (`u64::MAX` until the first loss).
    #[must_use]
    pub fn ssthresh(&self) -> u64 {
        to_bytes(self.ssthresh)
    }

    /// One acknowledged packet of `bytes` in congestion avoidance (RFC 9438 §4.2-§4.5).
    fn congestion_avoidance(&mut self, now: Instant, bytes: f64, srtt: f64) {
        let epoch_start = match self.epoch_start {
            Some(e) => e,
            None => {
                // RFC 9438 §4.2: a new epoch; K from the distance to the plateau.
                self.epoch_start = Some(now);
                self.k = if self.cwnd < self.w_max {
                    ((self.w_max - self.cwnd) / self.mds / C).cbrt()
                } else {
                    self.w_max = self.cwnd;
                    0.0
                };
                self.w_est = self.cwnd;
                now
            }
        };
        let t = now.saturating_duration_since(epoch_start).as_secs_f64();

        // RFC 9438 §4.3: the Reno-friendly estimate, with α = 1 once past cwnd_prior.
        let alpha = if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            ALPHA
        };
        self.w_est += alpha * bytes * self.mds / self.cwnd;

        if self.w_cubic(t) < self.w_est {
            // Reno-friendly region.
            self.cwnd = self.w_est;
        } else {
            // RFC 9438 §4.4 / §4.5: concave and convex regions, toward W_cubic(t + RTT),
            // bounded to [cwnd, 1.5·cwnd].
            let target = self.w_cubic(t + srtt).clamp(self.cwnd, 1.5 * self.cwnd);
            self.cwnd += (target - self.cwnd) * bytes / self.cwnd;
        }
    }

    /// Grows the window for the packets `ack` acknowledged; `hystart_growth` is HyStart++'s
    /// growth for the whole ACK while the initial slow start lasts.
    fn grow(&mut self, ack: &AckEvent<'_>, hystart_growth: Option<u64>) {
        let now = ack.now;
        if ack.app_limited {
            // RFC 9438 §5.8: time spent application-limited does not count toward t, and the
            // window does not grow.
            if let (Some(e), Some(last)) = (self.epoch_start, self.last_ack) {
                self.epoch_start = Some(e + now.saturating_duration_since(last));
            }
            self.last_ack = Some(now);
            if ack.acked.iter().any(|p| !self.in_recovery(p.time_sent)) {
                self.recovering = false;
            }
            return;
        }
        self.last_ack = Some(now);
        let srtt = ack.rtt.smoothed().as_secs_f64();
        for p in ack.acked {
            // RFC 9002 §7.3.2: no growth for packets sent before recovery began.
            if self.in_recovery(p.time_sent) {
                continue;
            }
            self.recovering = false;
            let bytes = p.bytes as f64;
            if self.cwnd < self.ssthresh {
                if hystart_growth.is_none() {
                    // RFC 9438 §4.10: standard slow start.
                    self.cwnd += bytes;
                }
            } else {
                self.congestion_avoidance(now, bytes, srtt);
            }
        }
        if let Some(growth) = hystart_growth {
            // HyStart++ grows the window once per ACK (RFC 9406 §4.2); its slow start lasts
            // until a loss or the end of CSS, with no ssthresh to cross.
            self.cwnd += growth as f64;
        }
    }
}

fn to_bytes(w: f64) -> u64 {
    if w >= u64::MAX as f64 {
        u64::MAX
    } else {
        w as u64
    }
}

impl CongestionController for Cubic {
    fn on_packet_sent(&mut self, now: Instant, _bytes: u64, _bytes_in_flight: u64) {
        if let Some(h) = self.hystart.as_mut() {
            h.on_packet_sent(now);
        }
    }

    fn on_ack(&mut self, ack: &AckEvent<'_>) {
        let hystart_growth = hystart::ack_growth(self.hystart.as_mut(), ack, self.mds as u64);
        self.grow(ack, hystart_growth);
        if hystart::slow_start_over(&mut self.hystart, ack) {
            // RFC 9406 §4.2: CSS_ROUNDS rounds of CSS: "enter congestion avoidance by setting
            // the ssthresh to the current cwnd".
            self.ssthresh = self.cwnd;
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
        if !self.in_recovery(largest_lost_sent_time) {
            // RFC 9406 §4.2: a loss in slow start or CSS ends HyStart++; the reduction below
            // sets the ssthresh later slow starts stop at.
            self.hystart = None;
            self.recovery_start = Some(now);
            self.recovering = true;
            self.epoch_start = None;
            self.cwnd_prior = self.cwnd;
            // RFC 9438 §4.7: fast convergence releases bandwidth to newer flows.
            self.w_max = if self.cwnd < self.w_max {
                self.cwnd * (1.0 + BETA) / 2.0
            } else {
                self.cwnd
            };
            // RFC 9438 §4.6.
            self.ssthresh = (self.cwnd * BETA).max(self.min_window);
            self.cwnd = self.ssthresh;
        }
        if persistent_congestion {
            // RFC 9002 §7.6.2.
            self.cwnd = self.min_window;
            self.recovery_start = None;
            self.recovering = false;
            self.epoch_start = None;
        }
    }

    fn window(&self) -> u64 {
        to_bytes(self.cwnd.max(self.min_window))
    }

    fn on_max_datagram_size(&mut self, mds: u64) {
        self.mds = mds.max(1) as f64;
        self.min_window = 2.0 * self.mds;
    }

    fn name(&self) -> &'static str {
        "cubic"
    }

    fn state(&self) -> &'static str {
        if self.recovering {
            "recovery"
        } else if self.cwnd < self.ssthresh {
            "slow_start"
        } else {
            "congestion_avoidance"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::hystart::CSS_ROUNDS;
    use crate::cc::AckedPacket;
    use crate::delivery_rate::RateSnapshot;
    use std::time::Duration;

    const MDS: f64 = 1200.0;

    fn at_secs(s: f64) -> Instant {
        Instant::from_nanos((s * 1e9) as u64)
    }

    fn ack_one(cc: &mut Cubic, rtt: &RttEstimator, now: Instant, sent: Instant, app: bool) {
        let acked = [AckedPacket {
            time_sent: sent,
            bytes: 1200,
            rate: RateSnapshot::default(),
        }];
        cc.on_ack(&AckEvent {
            now,
            acked: &acked,
            rate_sample: None,
            rtt,
            rtt_sampled: true,
            prior_in_flight: 0,
            in_flight: 0,
            app_limited: app,
            lost_total: 0,
        });
    }

    /// A Cubic that just lost at a window of `segments`, at t = 1 s.
    fn after_loss(segments: f64) -> Cubic {
        let mut cc = Cubic::new(&CcConfig::default());
        cc.cwnd = segments * MDS;
        cc.w_max = 0.0;
        let rtt = RttEstimator::default();
        cc.on_congestion_event(at_secs(1.0), at_secs(0.9), 1200, false, &rtt);
        cc
    }

    /// Acknowledge a window's worth of packets per RTT, one at a time, from t = 1 s until `until`.
    fn run(cc: &mut Cubic, rtt: &RttEstimator, until: f64) {
        let r = rtt.smoothed().as_secs_f64();
        let mut now = 1.0;
        while now < until {
            let packets = (cc.cwnd / MDS).floor().max(1.0);
            let step = r / packets;
            for _ in 0..packets as u64 {
                now += step;
                ack_one(cc, rtt, at_secs(now), at_secs(now - r), false);
            }
        }
    }

    #[test]
    fn reduction_and_k() {
        let cc = after_loss(100.0);
        assert_eq!(cc.window(), 84_000);
        assert_eq!(cc.ssthresh(), 84_000);
        assert_eq!(cc.w_max, 120_000.0);
        assert_eq!(cc.state(), "recovery");
        let mut cc = cc;
        let rtt = RttEstimator::new(Duration::from_millis(100));
        ack_one(&mut cc, &rtt, at_secs(1.2), at_secs(1.1), false);
        // K = cbrt((100 - 70) / 0.4) = cbrt(75).
        assert!((cc.k - 75f64.cbrt()).abs() < 1e-9, "K = {}", cc.k);
        assert!((cc.w_cubic(0.0) - 84_000.0).abs() < 1e-6);
        assert!((cc.w_cubic(cc.k) - 120_000.0).abs() < 1e-6);
        assert!((cc.w_cubic(cc.k + 2.0) - (120_000.0 + 0.4 * 8.0 * MDS)).abs() < 1e-6);
        assert_eq!(cc.state(), "congestion_avoidance");
    }

    #[test]
    fn window_follows_the_cubic_curve() {
        let rtt = RttEstimator::new(Duration::from_millis(100));
        let mut cc = after_loss(100.0);
        let k = 75f64.cbrt();
        for t in [0.5, 1.5, 3.0, k, 5.0] {
            let mut c = cc.clone();
            run(&mut c, &rtt, 1.0 + t);
            let w = c.cwnd;
            // The window chases W_cubic(t + RTT) and lags it by about an RTT.
            let lo = cc_curve(k, t - 0.2);
            let hi = cc_curve(k, t + 0.1);
            assert!(lo <= w && w <= hi, "t={t}: cwnd {w} outside [{lo}, {hi}]");
        }
        // The plateau: near K the window stays within a segment or two of W_max.
        run(&mut cc, &rtt, 1.0 + k);
        assert!((cc.cwnd - 120_000.0).abs() < 2.0 * MDS, "{}", cc.cwnd);
    }

    fn cc_curve(k: f64, t: f64) -> f64 {
        (C * (t - k).powi(3) + 100.0) * MDS
    }

    #[test]
    fn reno_friendly_region_at_short_rtt() {
        let rtt = RttEstimator::new(Duration::from_millis(10));
        let mut cc = after_loss(20.0);
        run(&mut cc, &rtt, 1.3);
        let t = cc
            .last_ack
            .and_then(|l| cc.epoch_start.map(|e| (l - e).as_secs_f64()))
            .expect("epoch");
        // Reno adds α = 0.53 then 1 segment per 10 ms RTT; the cubic curve is still below
        // W_max = 20 segments at t ≈ 0.3 s < K = 2.47 s.
        assert!(cc.w_cubic(t) < 20.0 * MDS);
        assert_eq!(cc.cwnd, cc.w_est);
        assert!(cc.cwnd > 30.0 * MDS, "cwnd {}", cc.cwnd / MDS);
    }

    #[test]
    fn fast_convergence_and_app_limited() {
        let mut cc = after_loss(100.0);
        // A second loss below W_max (120 000): W_max = 84 000 · 1.7 / 2.
        cc.on_congestion_event(
            at_secs(2.0),
            at_secs(1.5),
            1200,
            false,
            &RttEstimator::default(),
        );
        assert!((cc.w_max - 71_400.0).abs() < 1e-6);
        assert!((cc.cwnd - 58_800.0).abs() < 1e-6);

        let rtt = RttEstimator::new(Duration::from_millis(100));
        ack_one(&mut cc, &rtt, at_secs(2.1), at_secs(2.05), false);
        let w = cc.cwnd;
        let epoch = cc.epoch_start.expect("epoch");
        // Application-limited for 5 s: no growth, and the epoch moves with the idle time.
        for i in 1..=50 {
            ack_one(
                &mut cc,
                &rtt,
                at_secs(2.1 + 0.1 * f64::from(i)),
                at_secs(2.05),
                true,
            );
        }
        assert_eq!(cc.cwnd, w);
        let shifted = cc.epoch_start.expect("epoch") - epoch;
        assert!((shifted.as_secs_f64() - 5.0).abs() < 1e-6, "{shifted:?}");
    }

    /// Slow start by round trips: each round sends the window at `t` and acknowledges it one
    /// packet per ACK at `t + rtt_ms`, every ACK with an RTT sample of `rtt_ms`. Returns the
    /// time after the round.
    fn slow_start_round(cc: &mut Cubic, t: f64, rtt_ms: f64) -> f64 {
        let mut rtt = RttEstimator::new(Duration::from_secs_f64(rtt_ms / 1e3));
        let now = at_secs(t + rtt_ms / 1e3);
        rtt.update(now, rtt.latest(), Duration::ZERO, Duration::ZERO, true);
        let packets = (cc.cwnd / MDS) as u64;
        for _ in 0..packets {
            cc.on_packet_sent(at_secs(t), 1200, 0);
        }
        for _ in 0..packets {
            ack_one(cc, &rtt, now, at_secs(t), false);
        }
        t + rtt_ms / 1e3
    }

    /// HyStart++ (RFC 9406 §4.2) in CUBIC's initial slow start: a round whose RTT rose by the
    /// threshold enters CSS, which grows the window a quarter as fast; after CSS_ROUNDS rounds
    /// of it the window becomes the ssthresh and congestion avoidance begins.
    #[test]
    fn hystart_css_then_congestion_avoidance() {
        let mut cc = Cubic::new(&CcConfig::default());
        let mut t = slow_start_round(&mut cc, 0.0, 100.0);
        assert_eq!(cc.window(), 20 * 1200, "standard slow start doubles");
        t = slow_start_round(&mut cc, t, 100.0);
        assert_eq!(cc.window(), 40 * 1200);
        // 12.5 ms more (100 ms / 8): CSS from the 8th RTT sample of this round on, that ACK
        // included.
        t = slow_start_round(&mut cc, t, 112.5);
        assert!(cc.hystart.as_ref().is_some_and(HyStart::in_css));
        assert_eq!(cc.window(), (40 * 4 + 7 * 4 + 33) * 1200 / 4);
        let before = cc.window();
        t = slow_start_round(&mut cc, t, 112.5);
        let acked = before / 1200 * 1200;
        assert_eq!(
            cc.window(),
            before + acked / 4,
            "CSS grows a quarter as fast"
        );
        assert_eq!(cc.ssthresh(), u64::MAX);
        // Each round ends with its first ACK here (the window leaves at once), so CSS began
        // between rounds; five rounds of it end slow start.
        let mut rounds = 1;
        while cc.hystart.is_some() {
            assert_eq!(cc.state(), "slow_start");
            let w = cc.window();
            t = slow_start_round(&mut cc, t, 112.5);
            rounds += 1;
            if cc.hystart.is_none() {
                // The round's first ACK set the ssthresh to the window; the rest of the
                // round's ACKs grew it in congestion avoidance, by less than a datagram.
                assert!(cc.ssthresh() >= w && cc.ssthresh() <= cc.window());
                assert!(cc.window() - cc.ssthresh() < 1200, "{cc:?}");
            }
        }
        assert_eq!(rounds, CSS_ROUNDS);
        assert_eq!(cc.state(), "congestion_avoidance");
    }

    /// A round back below the CSS baseline was a spurious exit: standard slow start again.
    #[test]
    fn hystart_resumes_slow_start_when_the_rtt_falls_back() {
        let mut cc = Cubic::new(&CcConfig::default());
        let mut t = slow_start_round(&mut cc, 0.0, 100.0);
        t = slow_start_round(&mut cc, t, 120.0);
        assert!(cc.hystart.as_ref().is_some_and(HyStart::in_css));
        t = slow_start_round(&mut cc, t, 100.0);
        assert!(cc.hystart.as_ref().is_some_and(|h| !h.in_css()));
        let w = cc.window();
        slow_start_round(&mut cc, t, 100.0);
        assert_eq!(cc.window(), 2 * w);
    }

    /// Without HyStart++ the RTT does not matter to slow start; a loss ends HyStart++.
    #[test]
    fn hystart_off_and_after_a_loss() {
        let config = CcConfig {
            hystart: false,
            ..CcConfig::default()
        };
        let mut cc = Cubic::new(&config);
        let mut t = 0.0;
        for rtt in [100.0, 100.0, 150.0] {
            t = slow_start_round(&mut cc, t, rtt);
        }
        assert_eq!(cc.window(), 80 * 1200);

        let mut cc = Cubic::new(&CcConfig::default());
        let t = slow_start_round(&mut cc, 0.0, 100.0);
        cc.on_congestion_event(
            at_secs(t),
            at_secs(t - 0.05),
            1200,
            false,
            &RttEstimator::default(),
        );
        assert!(cc.hystart.is_none());
    }

    #[test]
    fn slow_start_and_persistent_congestion() {
        let rtt = RttEstimator::new(Duration::from_millis(100));
        let mut cc = Cubic::new(&CcConfig::default());
        ack_one(&mut cc, &rtt, at_secs(0.1), at_secs(0.0), false);
        assert_eq!(cc.window(), 13_200);
        assert_eq!(cc.state(), "slow_start");
        cc.on_congestion_event(at_secs(0.2), at_secs(0.15), 1200, true, &rtt);
        assert_eq!(cc.window(), 2400);
        // ssthresh stays at β · cwnd.
        assert_eq!(cc.ssthresh(), 9240);
    }
}
