//! The one place real time enters: a monotonic epoch mapped onto `recoup_time::Instant`.

use std::time::Duration;

use recoup_time::Instant;

/// Monotonic clock whose zero is when it was created.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: std::time::Instant,
    /// The wall clock at `epoch`, milliseconds since the Unix epoch (qlog's `reference_time`).
    epoch_unix_ms: f64,
}

impl Clock {
    #[must_use]
    pub fn new() -> Self {
        Self {
            epoch: real_now(),
            epoch_unix_ms: wall_now_unix_ms(),
        }
    }

    /// `at` on the wall clock, milliseconds since the Unix epoch.
    #[must_use]
    pub fn unix_ms(&self, at: Instant) -> f64 {
        self.epoch_unix_ms + at.saturating_duration_since(Instant::ZERO).as_secs_f64() * 1e3
    }

    /// Now, as the transport counts time.
    #[must_use]
    pub fn now(&self) -> Instant {
        Instant::from_duration_since_epoch(real_now().saturating_duration_since(self.epoch))
    }

    /// `at` as a `std::time::Instant` (for libraries that take those: moq-net).
    #[must_use]
    pub fn std_instant(&self, at: Instant) -> std::time::Instant {
        self.epoch + at.saturating_duration_since(Instant::ZERO)
    }

    /// A `std::time::Instant` as the transport counts time (the epoch if earlier).
    #[must_use]
    pub fn from_std(&self, at: std::time::Instant) -> Instant {
        Instant::from_duration_since_epoch(at.saturating_duration_since(self.epoch))
    }

    /// How long until `deadline` (zero if it has passed).
    #[must_use]
    pub fn until(&self, deadline: Instant) -> Duration {
        deadline.saturating_duration_since(self.now())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "recoup-net is the real-time driver: it alone reads the clock (DESIGN.md principle 1)"
)]
fn real_now() -> std::time::Instant {
    std::time::Instant::now()
}

#[expect(
    clippy::disallowed_methods,
    reason = "recoup-net is the real-time driver: it alone reads the clock (DESIGN.md principle 1)"
)]
fn wall_now_unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_moves_forward_from_zero() {
        let clock = Clock::new();
        let a = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        let b = clock.now();
        assert!(b.saturating_duration_since(a) >= Duration::from_millis(2));
        assert_eq!(clock.until(a), Duration::ZERO);
        assert!(clock.until(b + Duration::from_secs(10)) > Duration::from_secs(9));
        // 2020-01-01 in Unix milliseconds: the wall clock, not the monotonic one.
        assert!(clock.unix_ms(a) > 1.577e12);
        assert!(clock.unix_ms(b) - clock.unix_ms(a) >= 2.0);
    }
}
