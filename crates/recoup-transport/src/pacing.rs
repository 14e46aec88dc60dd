//! Packet pacing: a token bucket that spreads a window's worth of packets over an RTT.
//!
//! RFC 9002 §7.7 recommends pacing. Without an explicit rate from the controller the rate is
//! 1.25 · cwnd / smoothed_rtt (the factor lets the window fill slightly faster than it drains, as
//! in Linux and quinn), and a burst of a few packets may leave back to back.

use std::time::Duration;

use recoup_time::Instant;

use crate::rtt::GRANULARITY;

/// Packets allowed back to back after an idle period.
pub const DEFAULT_BURST_PACKETS: u64 = 10;

/// RFC 9002 §7.7 N = 1.25, as a fraction.
const RATE_GAIN: (u128, u128) = (5, 4);

/// A token-bucket pacer. Tokens are bytes; they accrue at the pacing rate up to the burst size.
#[derive(Clone, Debug)]
pub struct Pacer {
    capacity: u64,
    tokens: u64,
    last_refill: Instant,
    /// Nanoseconds of refill time that did not yet make a whole byte, so slow rates still accrue.
    carry_nanos: u128,
    /// The rate (bytes/s) of the last computation, used to refill on send.
    rate: u64,
    last_sent: Option<Instant>,
}

impl Pacer {
    /// A pacer allowing bursts of `burst_packets` datagrams of `max_datagram_size` bytes.
    #[must_use]
    pub fn new(max_datagram_size: u64, burst_packets: u64, now: Instant) -> Self {
        let capacity = max_datagram_size.saturating_mul(burst_packets.max(1));
        Self {
            capacity,
            tokens: capacity,
            last_refill: now,
            carry_nanos: 0,
            rate: 0,
            last_sent: None,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last_refill);
        self.last_refill = self.last_refill.max(now);
        if self.rate == 0 {
            self.carry_nanos = 0;
            return;
        }
        let scaled = elapsed
            .as_nanos()
            .saturating_mul(u128::from(self.rate))
            .saturating_add(self.carry_nanos);
        // Refilled several times per packet: 64-bit division whenever the product fits, which
        // it does unless the sender sat idle for many seconds at a high rate.
        let (new, carry) = match u64::try_from(scaled) {
            Ok(s) => (u128::from(s / 1_000_000_000), u128::from(s % 1_000_000_000)),
            Err(_) => (scaled / 1_000_000_000, scaled % 1_000_000_000),
        };
        self.carry_nanos = carry;
        let new = u64::try_from(new).unwrap_or(u64::MAX);
        self.tokens = self.tokens.saturating_add(new).min(self.capacity);
        if self.tokens == self.capacity {
            self.carry_nanos = 0;
        }
    }

    /// When a packet of `packet_size` bytes may leave: `None` means now. `explicit_rate` (bytes/s,
    /// a controller's pacing rate) takes precedence over 1.25 · `cwnd` / `srtt`. A rate of zero
    /// disables pacing rather than stalling, and no packet ever waits longer than one smoothed
    /// RTT (at least kGranularity), so a tiny rate slows the sender without stopping it.
    #[must_use]
    pub fn next_send_time(
        &mut self,
        now: Instant,
        cwnd: u64,
        srtt: Duration,
        explicit_rate: Option<u64>,
        packet_size: u64,
    ) -> Option<Instant> {
        self.rate = match explicit_rate {
            Some(r) => r,
            None if srtt.is_zero() => 0,
            None => {
                let r = u128::from(cwnd) * 1_000_000_000 * RATE_GAIN.0
                    / (srtt.as_nanos() * RATE_GAIN.1);
                u64::try_from(r).unwrap_or(u64::MAX)
            }
        };
        self.refill(now);
        // A packet larger than the bucket can only wait for a full bucket.
        let needed = packet_size.min(self.capacity);
        if self.rate == 0 || self.tokens >= needed {
            return None;
        }
        // The anti-stall bound: at least one packet per smoothed RTT.
        let latest = self
            .last_sent
            .map(|l| l.saturating_add(srtt.max(GRANULARITY)));
        if latest.is_some_and(|l| now >= l) {
            return None;
        }
        let missing = u128::from(needed - self.tokens) * 1_000_000_000;
        // Asked whenever pacing holds a packet back: 64-bit division when the operands fit,
        // which they do unless a packet misses billions of bytes.
        let wait_nanos = match (u64::try_from(missing), u64::try_from(self.carry_nanos)) {
            (Ok(m), Ok(c)) => m.saturating_sub(c).div_ceil(self.rate),
            _ => u64::try_from(
                missing
                    .saturating_sub(self.carry_nanos)
                    .div_ceil(u128::from(self.rate)),
            )
            .unwrap_or(u64::MAX),
        }
        .max(1);
        let wait = Duration::from_nanos(wait_nanos);
        let at = now.saturating_add(wait);
        Some(latest.map_or(at, |l| at.min(l)))
    }

    /// A packet of `bytes` left at `now`.
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.refill(now);
        self.tokens = self.tokens.saturating_sub(bytes);
        self.last_sent = Some(now);
    }

    /// Bytes that may leave back to back right now (as of the last refill).
    #[must_use]
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Send as fast as the pacer allows; return the send times.
    fn send_times(
        pacer: &mut Pacer,
        n: usize,
        cwnd: u64,
        srtt: Duration,
        rate: Option<u64>,
    ) -> Vec<Instant> {
        let mut now = Instant::ZERO;
        let mut times = Vec::new();
        while times.len() < n {
            match pacer.next_send_time(now, cwnd, srtt, rate, 1200) {
                None => {
                    pacer.on_sent(now, 1200);
                    times.push(now);
                }
                Some(t) => {
                    assert!(t > now, "the pacer must move time forward");
                    now = t;
                }
            }
        }
        times
    }

    #[test]
    fn burst_then_spacing_from_cwnd_and_rtt() {
        let mut pacer = Pacer::new(1200, 10, Instant::ZERO);
        // cwnd 120 000 over 100 ms, · 1.25 = 1.5 MB/s: one 1200-byte packet per 800 µs.
        let times = send_times(&mut pacer, 30, 120_000, ms(100), None);
        assert!(times[..10].iter().all(|&t| t == Instant::ZERO));
        for w in times[10..].windows(2) {
            let gap = w[1] - w[0];
            assert_eq!(gap, Duration::from_micros(800), "{times:?}");
        }
        assert_eq!(times[10], Instant::ZERO + Duration::from_micros(800));
    }

    #[test]
    fn explicit_rate_wins_and_fractional_rates_accrue() {
        let mut pacer = Pacer::new(1200, 1, Instant::ZERO);
        // 7 000 bytes/s: 1200 bytes every 171.428... ms; the carry keeps the average exact.
        let times = send_times(&mut pacer, 8, 1_000_000, ms(1000), Some(7000));
        let total = times[7] - times[0];
        let ideal = Duration::from_nanos(7 * 1_200_000_000_000 / 7000);
        assert!(
            total.abs_diff(ideal) <= Duration::from_nanos(7),
            "{total:?} vs {ideal:?}"
        );
    }

    #[test]
    fn never_stalls() {
        // Zero rate: unpaced.
        let mut pacer = Pacer::new(1200, 1, Instant::ZERO);
        pacer.on_sent(Instant::ZERO, 1200);
        assert_eq!(
            pacer.next_send_time(Instant::ZERO, 0, ms(100), None, 1200),
            None
        );
        assert_eq!(
            pacer.next_send_time(Instant::ZERO, 1000, ms(0), None, 1200),
            None
        );
        assert_eq!(
            pacer.next_send_time(Instant::ZERO, 0, ms(100), Some(0), 1200),
            None
        );
        // A 1 byte/s rate waits at most one smoothed RTT per packet.
        let mut pacer = Pacer::new(1200, 1, Instant::ZERO);
        let times = send_times(&mut pacer, 3, 1000, ms(50), Some(1));
        assert_eq!(times[2] - times[1], ms(50));
        // A packet bigger than the bucket still goes once the bucket is full.
        let mut pacer = Pacer::new(1000, 1, Instant::ZERO);
        assert_eq!(
            pacer.next_send_time(Instant::ZERO, 10_000, ms(10), None, 1500),
            None
        );
    }
}
