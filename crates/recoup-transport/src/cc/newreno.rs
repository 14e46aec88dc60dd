//! NewReno (RFC 9002 §7 and Appendix B), with HyStart++ (RFC 9406) in its initial slow start.

use recoup_time::Instant;

use super::hystart::{self, HyStart};
use super::{AckEvent, CcConfig, CongestionController};
use crate::rtt::RttEstimator;

/// RFC 9002 §7.3.2 kLossReductionFactor, as a fraction.
const LOSS_REDUCTION: (u64, u64) = (1, 2);

/// The RFC 9002 congestion controller.
#[derive(Clone, Debug)]
pub struct NewReno {
    mds: u64,
    min_window: u64,
    cwnd: u64,
    ssthresh: u64,
    /// RFC 9002 §7.3.2: packets sent up to this time belong to the current recovery period.
    recovery_start: Option<Instant>,
    /// Bytes acknowledged since the last congestion-avoidance increase (RFC 9002 §7.3.3).
    bytes_acked: u64,
    /// RFC 9002 §7.3.2: recovery ends when a packet sent during it is acknowledged.
    recovering: bool,
    /// HyStart++ while the initial slow start lasts (RFC 9406 §4.2: "only for the initial slow
    /// start"); `None` once it ended or when turned off.
    hystart: Option<HyStart>,
}

impl NewReno {
    #[must_use]
    pub fn new(config: &CcConfig) -> Self {
        Self {
            mds: config.max_datagram_size,
            min_window: config.minimum_window(),
            cwnd: config.initial_window(),
            ssthresh: u64::MAX,
            recovery_start: None,
            bytes_acked: 0,
            recovering: false,
            hystart: config.hystart.then(|| HyStart::new(config.paced)),
        }
    }

    /// RFC 9002 Appendix B.4 InCongestionRecovery.
    fn in_recovery(&self, sent: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent <= start)
    }

    /// The slow start threshold (`u64::MAX` until the first loss).
    #[must_use]
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
}

impl CongestionController for NewReno {
    fn on_packet_sent(&mut self, now: Instant, _bytes: u64, _bytes_in_flight: u64) {
        if let Some(h) = self.hystart.as_mut() {
            h.on_packet_sent(now);
        }
    }

    /// RFC 9002 Appendix B.5 OnPacketsAcked.
    fn on_ack(&mut self, ack: &AckEvent<'_>) {
        let hystart_growth = hystart::ack_growth(self.hystart.as_mut(), ack, self.mds);
        for p in ack.acked {
            // RFC 9002 §7.3.2: no growth during recovery; §7.8: none while app-limited.
            if self.in_recovery(p.time_sent) {
                continue;
            }
            self.recovering = false;
            if ack.app_limited {
                continue;
            }
            if self.cwnd < self.ssthresh {
                if hystart_growth.is_none() {
                    // RFC 9002 §7.3.1: slow start.
                    self.cwnd = self.cwnd.saturating_add(p.bytes);
                }
            } else {
                // RFC 9002 §7.3.3: one datagram per window of acknowledged bytes.
                self.bytes_acked = self.bytes_acked.saturating_add(p.bytes);
                if self.bytes_acked >= self.cwnd {
                    self.bytes_acked -= self.cwnd;
                    self.cwnd = self.cwnd.saturating_add(self.mds);
                }
            }
        }
        if let Some(growth) = hystart_growth.filter(|_| !ack.app_limited) {
            // HyStart++ grows the window once per ACK (RFC 9406 §4.2); its slow start lasts
            // until a loss or the end of CSS, with no ssthresh to cross.
            self.cwnd = self.cwnd.saturating_add(growth);
        }
        if hystart::slow_start_over(&mut self.hystart, ack) {
            // RFC 9406 §4.2: CSS_ROUNDS rounds of CSS: "enter congestion avoidance by setting
            // the ssthresh to the current cwnd".
            self.ssthresh = self.cwnd;
        }
    }

    /// RFC 9002 Appendix B.6 OnCongestionEvent and B.8 persistent congestion.
    fn on_congestion_event(
        &mut self,
        now: Instant,
        largest_lost_sent_time: Instant,
        _lost_bytes: u64,
        persistent_congestion: bool,
        _rtt: &RttEstimator,
    ) {
        if !self.in_recovery(largest_lost_sent_time) {
            // RFC 9406 §4.2: a loss in slow start or CSS ends HyStart++.
            self.hystart = None;
            self.recovery_start = Some(now);
            self.ssthresh = (self.cwnd / LOSS_REDUCTION.1 * LOSS_REDUCTION.0).max(self.min_window);
            self.cwnd = self.ssthresh;
            self.bytes_acked = 0;
            self.recovering = true;
        }
        if persistent_congestion {
            // RFC 9002 §7.6.2: collapse to the minimum window and leave recovery.
            self.cwnd = self.min_window;
            self.recovery_start = None;
            self.bytes_acked = 0;
            self.recovering = false;
        }
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_max_datagram_size(&mut self, mds: u64) {
        self.mds = mds;
        self.min_window = mds.saturating_mul(2);
        self.cwnd = self.cwnd.max(self.min_window);
    }

    fn name(&self) -> &'static str {
        "newreno"
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
    use crate::cc::AckedPacket;
    use crate::delivery_rate::RateSnapshot;
    use std::time::Duration;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn ack(cc: &mut NewReno, rtt: &RttEstimator, now: Instant, sent: Instant, n: u64, app: bool) {
        let acked: Vec<AckedPacket> = (0..n)
            .map(|_| AckedPacket {
                time_sent: sent,
                bytes: 1200,
                rate: RateSnapshot::default(),
            })
            .collect();
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

    #[test]
    fn slow_start_then_one_reduction_per_recovery_then_avoidance() {
        let rtt = RttEstimator::new(Duration::from_millis(100));
        let mut cc = NewReno::new(&CcConfig::default());
        assert_eq!(cc.window(), 12_000);
        // Slow start: every acknowledged byte grows the window.
        ack(&mut cc, &rtt, at(100), at(0), 10, false);
        assert_eq!(cc.window(), 24_000);
        assert_eq!(cc.state(), "slow_start");
        // App-limited ACKs do not grow it (RFC 9002 §7.8).
        ack(&mut cc, &rtt, at(110), at(10), 10, true);
        assert_eq!(cc.window(), 24_000);

        // A loss halves it and starts recovery at t=200.
        cc.on_congestion_event(at(200), at(150), 1200, false, &rtt);
        assert_eq!((cc.window(), cc.ssthresh()), (12_000, 12_000));
        assert_eq!(cc.state(), "recovery");
        // Another loss of a packet sent before recovery began: no second reduction.
        cc.on_congestion_event(at(210), at(199), 1200, false, &rtt);
        assert_eq!(cc.window(), 12_000);
        // ACKs of packets sent before recovery do not grow the window.
        ack(&mut cc, &rtt, at(220), at(190), 5, false);
        assert_eq!(cc.window(), 12_000);
        // Congestion avoidance: one datagram per cwnd of acknowledged bytes.
        ack(&mut cc, &rtt, at(320), at(250), 9, false);
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.state(), "congestion_avoidance");
        ack(&mut cc, &rtt, at(330), at(250), 1, false);
        assert_eq!(cc.window(), 13_200);
        // A loss of a packet sent after recovery began is a new congestion event.
        cc.on_congestion_event(at(400), at(250), 1200, false, &rtt);
        assert_eq!(cc.window(), 6600);
    }

    /// HyStart++ (RFC 9406) in NewReno's initial slow start: a round whose RTT rose by the
    /// threshold moves to CSS, where the window grows a quarter as fast.
    #[test]
    fn hystart_conservative_slow_start() {
        let mut cc = NewReno::new(&CcConfig::default());
        let mut t = 0;
        for rtt_ms in [100, 100, 113, 113] {
            let mut rtt = RttEstimator::new(Duration::from_millis(rtt_ms));
            rtt.update(
                at(t + rtt_ms),
                rtt.latest(),
                Duration::ZERO,
                Duration::ZERO,
                true,
            );
            let packets = cc.window() / 1200;
            for _ in 0..packets {
                cc.on_packet_sent(at(t), 1200, 0);
            }
            let before = cc.window();
            for _ in 0..packets {
                ack(&mut cc, &rtt, at(t + rtt_ms), at(t), 1, false);
            }
            let grown = cc.window() - before;
            match rtt_ms {
                100 => assert_eq!(grown, packets * 1200, "slow start doubles"),
                // CSS from the 8th sample of the round on.
                _ if t == 200 => assert_eq!(grown, 7 * 1200 + (packets - 7) * 300),
                _ => assert_eq!(grown, packets * 300, "CSS: a quarter"),
            }
            t += rtt_ms;
        }
        assert_eq!(cc.state(), "slow_start");
    }

    #[test]
    fn persistent_congestion_and_minimum_window() {
        let rtt = RttEstimator::new(Duration::from_millis(100));
        let mut cc = NewReno::new(&CcConfig::default());
        cc.on_congestion_event(at(10), at(5), 1200, true, &rtt);
        assert_eq!(cc.window(), 2400);
        // Recovery was left: a loss of an old packet reduces again, but never below 2 * mds.
        cc.on_congestion_event(at(20), at(6), 1200, false, &rtt);
        assert_eq!(cc.window(), 2400);
        assert_eq!(cc.ssthresh(), 2400);
    }
}
