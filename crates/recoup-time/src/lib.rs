//! Injected time.
//!
//! recoup's transport, policies and simulator never read a clock (DESIGN.md principle 1). Every
//! entry point takes `now: Instant`, where [`Instant`] is a point on a timeline chosen by whoever
//! drives the state machine: the simulator starts at [`Instant::ZERO`] and advances virtually; the
//! real-time driver maps `std::time::Instant` onto it with [`Instant::from_duration_since_epoch`].
//!
//! Unlike `std::time::Instant`, this one is plain data (nanoseconds since the driver's epoch), so a
//! simulated run is reproducible to the nanosecond and instants can be printed and compared in tests.

mod heap;

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

pub use heap::IndexedHeap;

/// `a · b / d` rounded down, saturating at `u64::MAX` (also for `d == 0`): a rate times a
/// duration, or ticks of a clock, asked per packet or per poll. The product is formed in 64 bits
/// when it fits (128-bit division costs several times as much), in 128 otherwise.
#[must_use]
pub fn mul_div(a: u64, b: u64, d: u64) -> u64 {
    if d == 0 {
        return u64::MAX;
    }
    match a.checked_mul(b) {
        Some(x) => x / d,
        None => u64::try_from(u128::from(a) * u128::from(b) / u128::from(d)).unwrap_or(u64::MAX),
    }
}

/// `d` in whole nanoseconds, saturating at `u64::MAX` (about 584 years).
#[must_use]
pub fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The earlier of two optional deadlines (`None` is "never"): the timer polls combine several
/// per packet, and this costs a compare where an iterator chain over an array costs more.
#[must_use]
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// A point in time, in nanoseconds since the driver's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch. The simulator starts every run here.
    pub const ZERO: Self = Self(0);
    /// The latest representable instant; useful as "never" for timers.
    pub const MAX: Self = Self(u64::MAX);

    /// An instant `nanos` nanoseconds after the epoch.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// An instant `d` after the epoch, saturating at [`Instant::MAX`].
    #[must_use]
    pub fn from_duration_since_epoch(d: Duration) -> Self {
        Self(saturating_nanos(d))
    }

    /// Nanoseconds since the epoch.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the epoch.
    #[must_use]
    pub const fn duration_since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// Time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    #[must_use]
    pub fn saturating_duration_since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// Time elapsed from `earlier` to `self`, or `None` if `earlier` is later.
    #[must_use]
    pub fn checked_duration_since(self, earlier: Self) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration::from_nanos)
    }

    /// `self + d`, or `None` on overflow.
    #[must_use]
    pub fn checked_add(self, d: Duration) -> Option<Self> {
        u64::try_from(d.as_nanos())
            .ok()
            .and_then(|n| self.0.checked_add(n))
            .map(Self)
    }

    /// `self - d`, or `None` if that would be before the epoch.
    #[must_use]
    pub fn checked_sub(self, d: Duration) -> Option<Self> {
        u64::try_from(d.as_nanos())
            .ok()
            .and_then(|n| self.0.checked_sub(n))
            .map(Self)
    }

    /// `self + d`, saturating at [`Instant::MAX`].
    #[must_use]
    pub fn saturating_add(self, d: Duration) -> Self {
        self.checked_add(d).unwrap_or(Self::MAX)
    }

    /// `self - d`, saturating at [`Instant::ZERO`].
    #[must_use]
    pub fn saturating_sub(self, d: Duration) -> Self {
        self.checked_sub(d).unwrap_or(Self::ZERO)
    }

    /// Seconds since the epoch as a float, for logs and plots.
    #[must_use]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Milliseconds since the epoch as a float, for qlog's relative times.
    #[must_use]
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl Add<Duration> for Instant {
    type Output = Self;
    /// Saturates at [`Instant::MAX`]: a timer armed "far in the future" must not wrap to the past.
    fn add(self, rhs: Duration) -> Self {
        self.saturating_add(rhs)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Self;
    /// Saturates at [`Instant::ZERO`].
    fn sub(self, rhs: Duration) -> Self {
        self.saturating_sub(rhs)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero, like `std::time::Instant` since Rust 1.60.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{:?}", self.duration_since_epoch())
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let t = Instant::from_nanos(10);
        assert_eq!(t - Duration::from_nanos(20), Instant::ZERO);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(t - Instant::from_nanos(30), Duration::ZERO);
        assert_eq!(t.checked_duration_since(Instant::from_nanos(30)), None);
    }

    #[test]
    fn mul_div_takes_either_width_and_saturates() {
        assert_eq!(mul_div(7, 1_000_000_000, 30), 233_333_333);
        // The product overflows 64 bits; the quotient does not.
        assert_eq!(mul_div(u64::MAX, 6, 8), u64::MAX / 8 * 6 + 5);
        assert_eq!(mul_div(u64::MAX, 2, 1), u64::MAX);
        assert_eq!(mul_div(1, 1, 0), u64::MAX);
    }

    #[test]
    fn round_trips_through_durations() {
        let d = Duration::from_millis(1234);
        let t = Instant::from_duration_since_epoch(d);
        assert_eq!(t.duration_since_epoch(), d);
        assert_eq!(t - Instant::ZERO, d);
        assert_eq!(format!("{t}"), "1.234000s");
        assert_eq!(format!("{t:?}"), "t+1.234s");
    }
}
