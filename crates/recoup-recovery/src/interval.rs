//! Per-interval loss measurements for policies that decide periodically (AutoRec's decision
//! interval, TOO's activator cycle).

use std::time::Duration;

/// Packet outcomes and loss detection times seen since the interval began.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntervalStats {
    acked: u64,
    lost: u64,
    detections: u32,
    detection_sum: Duration,
}

impl IntervalStats {
    pub fn on_acked(&mut self) {
        self.acked = self.acked.saturating_add(1);
    }

    pub fn on_lost(&mut self) {
        self.lost = self.lost.saturating_add(1);
    }

    /// One sample of the loss detection time T_unit; what it is measured on is the caller's
    /// choice (AutoRec: first send to first retransmission of a lost range, §III-C).
    pub fn on_detection(&mut self, detection: Duration) {
        self.detections = self.detections.saturating_add(1);
        self.detection_sum = self.detection_sum.saturating_add(detection);
    }

    /// Lost packets over packets whose fate was decided in the interval; 0 with no packets.
    #[must_use]
    pub fn loss_rate(&self) -> f64 {
        let decided = self.acked.saturating_add(self.lost);
        if decided == 0 {
            0.0
        } else {
            // Exact below 2^53 packets.
            self.lost as f64 / decided as f64
        }
    }

    /// Mean of the loss detection times sampled in the interval.
    #[must_use]
    pub fn mean_detection(&self) -> Option<Duration> {
        (self.detections > 0).then(|| self.detection_sum / self.detections)
    }

    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_and_mean_detection() {
        let mut s = IntervalStats::default();
        assert_eq!(s.loss_rate(), 0.0);
        assert_eq!(s.mean_detection(), None);
        for _ in 0..9 {
            s.on_acked();
        }
        s.on_lost();
        assert!((s.loss_rate() - 0.1).abs() < 1e-12);
        assert_eq!(s.mean_detection(), None, "a loss is not a detection sample");
        s.on_detection(Duration::from_millis(70));
        s.on_detection(Duration::from_millis(50));
        assert_eq!(s.mean_detection(), Some(Duration::from_millis(60)));
        assert!((s.loss_rate() - 0.1).abs() < 1e-12);
        s.reset();
        assert_eq!(s, IntervalStats::default());
    }
}
