//! Round-trip time estimation (RFC 9002 §5).

use std::time::Duration;

use recoup_recovery::RttSample;
use recoup_time::Instant;

/// RFC 9002 §6.1.2: the timer granularity, a floor under every loss and probe delay.
pub const GRANULARITY: Duration = Duration::from_millis(1);

/// RFC 9002 §6.2.2: the RTT assumed before the first sample.
pub const DEFAULT_INITIAL_RTT: Duration = Duration::from_millis(333);

/// `d * num / den` without overflow or panics, saturating at `Duration::MAX`.
pub(crate) fn mul_ratio(d: Duration, num: u64, den: u64) -> Duration {
    let nanos = d.as_nanos().saturating_mul(u128::from(num)) / u128::from(den.max(1));
    duration_from_nanos_saturating(nanos)
}

pub(crate) fn duration_from_nanos_saturating(nanos: u128) -> Duration {
    let secs = nanos / 1_000_000_000;
    match u64::try_from(secs) {
        // The remainder is < 10^9 and fits in u32.
        Ok(secs) => Duration::new(secs, (nanos % 1_000_000_000) as u32),
        Err(_) => Duration::MAX,
    }
}

/// The RTT state of a connection: latest, minimum, smoothed and variation (RFC 9002 §5).
#[derive(Clone, Debug)]
pub struct RttEstimator {
    initial: Duration,
    latest: Duration,
    /// `latest` less the ACK delay, as RFC 9002 §5.3 adjusts it.
    latest_adjusted: Duration,
    smoothed: Duration,
    var: Duration,
    min: Duration,
    first_sample: Option<Instant>,
}

impl Default for RttEstimator {
    fn default() -> Self {
        Self::new(DEFAULT_INITIAL_RTT)
    }
}

impl RttEstimator {
    /// An estimator that assumes `initial_rtt` until the first sample (RFC 9002 §5.3, §6.2.2).
    #[must_use]
    pub fn new(initial_rtt: Duration) -> Self {
        Self {
            initial: initial_rtt,
            latest: initial_rtt,
            latest_adjusted: initial_rtt,
            smoothed: initial_rtt,
            var: initial_rtt / 2,
            min: initial_rtt,
            first_sample: None,
        }
    }

    /// Feed one RTT sample (RFC 9002 §5.3). `ack_delay` is the peer-reported delay, already zero
    /// where it must be ignored; `max_ack_delay` caps it once the handshake is confirmed.
    pub fn update(
        &mut self,
        now: Instant,
        latest_rtt: Duration,
        ack_delay: Duration,
        max_ack_delay: Duration,
        handshake_confirmed: bool,
    ) {
        self.latest = latest_rtt;
        self.latest_adjusted = latest_rtt;
        if self.first_sample.is_none() {
            // RFC 9002 §5.3: the first sample initialises everything; ack delay is not used.
            self.first_sample = Some(now);
            self.min = latest_rtt;
            self.smoothed = latest_rtt;
            self.var = latest_rtt / 2;
            return;
        }
        // RFC 9002 §5.2: min_rtt ignores ack delay.
        self.min = self.min.min(latest_rtt);
        // RFC 9002 §5.3: the peer's max_ack_delay binds only after handshake confirmation.
        let ack_delay = if handshake_confirmed {
            ack_delay.min(max_ack_delay)
        } else {
            ack_delay
        };
        // RFC 9002 §5.3: never subtract ack delay below min_rtt.
        let adjusted = if latest_rtt >= self.min.saturating_add(ack_delay) {
            latest_rtt - ack_delay
        } else {
            latest_rtt
        };
        self.latest_adjusted = adjusted;
        let deviation = self.smoothed.abs_diff(adjusted);
        self.var = mul_ratio(self.var, 3, 4).saturating_add(deviation / 4);
        self.smoothed = mul_ratio(self.smoothed, 7, 8).saturating_add(adjusted / 8);
    }

    /// RFC 9002 §6.2.1: smoothed_rtt + max(4·rttvar, kGranularity), without max_ack_delay or
    /// backoff.
    #[must_use]
    pub fn pto_base(&self) -> Duration {
        self.smoothed
            .saturating_add(self.var.saturating_mul(4).max(GRANULARITY))
    }

    /// The RTT assumed before any sample.
    #[must_use]
    pub fn initial(&self) -> Duration {
        self.initial
    }

    /// The most recent sample (the initial RTT before any).
    #[must_use]
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// The most recent sample less the ACK delay the peer reported, never below min_rtt: the
    /// `adjusted_rtt` of RFC 9002 §5.3 (the initial RTT before any sample).
    #[must_use]
    pub fn latest_adjusted(&self) -> Duration {
        self.latest_adjusted
    }

    /// The smoothed RTT (RFC 9002 §5.3).
    #[must_use]
    pub fn smoothed(&self) -> Duration {
        self.smoothed
    }

    /// The RTT variation (RFC 9002 §5.3).
    #[must_use]
    pub fn var(&self) -> Duration {
        self.var
    }

    /// The minimum RTT seen (RFC 9002 §5.2); the initial RTT before any sample.
    #[must_use]
    pub fn min(&self) -> Duration {
        self.min
    }

    /// When the first sample was taken, if any (RFC 9002 §7.6.2 needs it).
    #[must_use]
    pub fn first_sample_time(&self) -> Option<Instant> {
        self.first_sample
    }

    /// Whether at least one sample was taken.
    #[must_use]
    pub fn has_sample(&self) -> bool {
        self.first_sample.is_some()
    }

    /// The estimate in the form recovery policies take.
    #[must_use]
    pub fn sample(&self) -> RttSample {
        RttSample {
            latest: self.latest,
            smoothed: self.smoothed,
            min: self.min,
            var: self.var,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn before_any_sample_uses_the_initial_rtt() {
        let rtt = RttEstimator::default();
        assert_eq!(rtt.smoothed(), ms(333));
        assert_eq!(rtt.var(), Duration::from_micros(166_500));
        // 333 + 4 * 166.5
        assert_eq!(rtt.pto_base(), ms(999));
        assert!(!rtt.has_sample());
        let custom = RttEstimator::new(ms(100));
        assert_eq!(custom.pto_base(), ms(300));
    }

    #[test]
    fn hand_computed_sequence() {
        let mut rtt = RttEstimator::new(ms(333));
        let t = Instant::from_nanos(5);
        // First sample: ack delay ignored.
        rtt.update(t, ms(100), ms(20), ms(25), true);
        assert_eq!(
            (rtt.min(), rtt.smoothed(), rtt.var(), rtt.latest()),
            (ms(100), ms(100), ms(50), ms(100))
        );
        assert_eq!(rtt.first_sample_time(), Some(t));
        // 140 - 20 = 120 (>= min + delay). var = 3/4*50 + 1/4*|100-120| = 37.5 + 5 = 42.5;
        // smoothed = 7/8*100 + 1/8*120 = 102.5.
        rtt.update(t, ms(140), ms(20), ms(25), true);
        assert_eq!(rtt.smoothed(), Duration::from_micros(102_500));
        assert_eq!(rtt.var(), Duration::from_micros(42_500));
        // Ack delay 50 capped to max_ack_delay 25 after confirmation: adjusted = 105.
        // var = 3/4*42.5 + 1/4*2.5 = 31.875 + 0.625 = 32.5; smoothed = 7/8*102.5 + 105/8 = 102.8125
        rtt.update(t, ms(130), ms(50), ms(25), true);
        assert_eq!(rtt.smoothed(), Duration::from_nanos(102_812_500));
        assert_eq!(rtt.var(), Duration::from_micros(32_500));
        assert_eq!(rtt.min(), ms(100));
        // pto_base = 102.8125 + 4*32.5
        assert_eq!(rtt.pto_base(), Duration::from_nanos(232_812_500));
    }

    #[test]
    fn ack_delay_uncapped_before_confirmation_but_never_below_min() {
        let mut rtt = RttEstimator::new(ms(333));
        let t = Instant::ZERO;
        rtt.update(t, ms(100), Duration::ZERO, ms(25), false);
        // Unconfirmed: full 60 ms delay subtracted (160 >= 100 + 60) -> 100.
        rtt.update(t, ms(160), ms(60), ms(25), false);
        assert_eq!(rtt.smoothed(), ms(100));
        assert_eq!(rtt.var(), Duration::from_micros(37_500));
        // 110 < min + 20: delay not subtracted, sample stays 110.
        rtt.update(t, ms(110), ms(20), ms(25), true);
        // smoothed = 7/8*100 + 110/8 = 101.25
        assert_eq!(rtt.smoothed(), Duration::from_micros(101_250));
        // A smaller sample lowers min_rtt.
        rtt.update(t, ms(80), Duration::ZERO, ms(25), true);
        assert_eq!(rtt.min(), ms(80));
        assert_eq!(rtt.latest(), ms(80));
    }

    #[test]
    fn pto_base_has_a_granularity_floor() {
        let mut rtt = RttEstimator::new(ms(333));
        for _ in 0..200 {
            rtt.update(
                Instant::ZERO,
                Duration::from_micros(100),
                Duration::ZERO,
                ms(0),
                true,
            );
        }
        assert_eq!(rtt.var(), Duration::ZERO);
        assert_eq!(rtt.pto_base(), Duration::from_micros(100) + GRANULARITY);
    }

    #[test]
    fn mul_ratio_saturates() {
        assert_eq!(mul_ratio(Duration::MAX, 9, 8), Duration::MAX);
        assert_eq!(mul_ratio(ms(8), 9, 8), ms(9));
        assert_eq!(mul_ratio(ms(8), 9, 0), ms(72));
    }
}
