//! Delivery-rate estimation (draft-cheng-iccrg-delivery-rate-estimation-02), the bandwidth signal
//! BBR feeds on.
//!
//! Every in-flight packet carries a [`RateSnapshot`] of the connection's delivery counters taken
//! when it was sent; when it is acknowledged the difference between then and now is one sample of
//! the delivery rate.

use std::time::Duration;

use recoup_time::Instant;

/// The delivery state at the time a packet was sent (draft §3.2 "P.delivered" ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateSnapshot {
    /// Bytes delivered (acknowledged) before this packet was sent.
    pub delivered: u64,
    /// When `delivered` last changed.
    pub delivered_time: Instant,
    /// Send time of the first packet of the flight this one belongs to.
    pub first_sent_time: Instant,
    /// Whether the connection was application-limited when this packet was sent.
    pub is_app_limited: bool,
    /// Bytes in flight right after this packet was sent, itself included
    /// (draft-ietf-ccwg-bbr-06 §4.1.2.1.2 "P.tx_in_flight").
    pub tx_in_flight: u64,
    /// Bytes declared lost before this packet was sent ("P.lost"; see
    /// [`DeliveryRateEstimator::on_packet_lost`] for which losses count).
    pub lost: u64,
}

/// One delivery-rate sample, produced per ACK that newly acknowledges in-flight packets (draft §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateSample {
    /// Total bytes delivered on the connection after this ACK ("C.delivered").
    pub delivered_total: u64,
    /// `delivered` of the most recently sent packet acknowledged ("RS.prior_delivered").
    pub prior_delivered: u64,
    /// Bytes delivered over the sample's interval.
    pub delivered: u64,
    /// The longer of the send and ACK intervals (draft §3.3).
    pub interval: Duration,
    /// Bytes per second; `None` when the interval is shorter than min_rtt or zero (draft §3.3:
    /// such samples overestimate).
    pub delivery_rate: Option<u64>,
    /// The sample was taken while application-limited, so it may underestimate the bottleneck.
    pub is_app_limited: bool,
    /// RTT of the most recently sent packet acknowledged.
    pub rtt: Duration,
    /// `tx_in_flight` of the most recently sent packet acknowledged (draft-ietf-ccwg-bbr-06
    /// §2.3 "RS.tx_in_flight").
    pub tx_in_flight: u64,
    /// `lost` of the most recently sent packet acknowledged: the bytes lost since it was sent
    /// ("RS.lost") are the connection's lost count after the ACK's losses minus this.
    pub prior_lost: u64,
}

/// The connection-wide delivery counters ("C.*" in the draft).
#[derive(Clone, Debug, Default)]
pub struct DeliveryRateEstimator {
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    /// Draft §3.4: `delivered` value at which the app-limited period ends; 0 when not limited.
    app_limited_until: u64,
    /// Bytes declared lost ("C.lost" of draft-ietf-ccwg-bbr-06 §2.2).
    lost: u64,
}

/// Accumulates the acknowledgements of one ACK into a sample (draft §3.3 "UpdateRateSample").
#[derive(Clone, Copy, Debug)]
pub(crate) struct RateSampler {
    newest: Option<(RateSnapshot, Instant)>,
}

impl DeliveryRateEstimator {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Take the snapshot for a packet of `bytes` sent at `now` (draft §3.2). `bytes_in_flight` is
    /// before the packet is added.
    #[must_use]
    pub fn on_packet_sent(
        &mut self,
        now: Instant,
        bytes: u64,
        bytes_in_flight: u64,
    ) -> RateSnapshot {
        if bytes_in_flight == 0 {
            // Starting from idle: the flight begins now.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        RateSnapshot {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            is_app_limited: self.app_limited_until != 0,
            tx_in_flight: bytes_in_flight.saturating_add(bytes),
            lost: self.lost,
        }
    }

    /// `bytes` of an in-flight packet were declared lost. The connection counts only the losses
    /// it tells congestion control of (ARCHITECTURE.md "The path of a loss": not an older copy
    /// of a round, not a path MTU probe), so a loss rate computed from these counts what the
    /// controller would react to.
    pub fn on_packet_lost(&mut self, bytes: u64) {
        self.lost = self.lost.saturating_add(bytes);
    }

    /// The sender has nothing to send and is below its window (draft §3.4): samples taken until
    /// the data now in flight is delivered are marked app-limited.
    pub fn on_app_limited(&mut self, bytes_in_flight: u64) {
        self.app_limited_until = self.delivered.saturating_add(bytes_in_flight).max(1);
    }

    /// Start accumulating one ACK.
    pub(crate) fn sampler() -> RateSampler {
        RateSampler { newest: None }
    }

    /// One in-flight packet of `bytes`, sent at `time_sent` with `snapshot`, was acknowledged at
    /// `now` (draft §3.3 "UpdateRateSample").
    pub(crate) fn on_packet_acked(
        &mut self,
        sampler: &mut RateSampler,
        now: Instant,
        bytes: u64,
        time_sent: Instant,
        snapshot: &RateSnapshot,
    ) {
        self.delivered = self.delivered.saturating_add(bytes);
        self.delivered_time = now;
        let newer = match sampler.newest {
            None => true,
            Some((ref s, sent)) => {
                snapshot.delivered > s.delivered
                    || (snapshot.delivered == s.delivered && time_sent >= sent)
            }
        };
        if newer {
            sampler.newest = Some((*snapshot, time_sent));
            // The next flight starts at the send time of the newest acknowledged packet.
            self.first_sent_time = time_sent;
        }
    }

    /// Finish the ACK's sample (draft §3.3 "GenerateRateSample"). `None` if no in-flight packet
    /// was acknowledged.
    pub(crate) fn finish(
        &mut self,
        sampler: RateSampler,
        now: Instant,
        min_rtt: Duration,
    ) -> Option<RateSample> {
        let (p, time_sent) = sampler.newest?;
        // Draft §3.4: the app-limited bubble has left the pipe.
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let send_elapsed = time_sent.saturating_duration_since(p.first_sent_time);
        let ack_elapsed = self
            .delivered_time
            .saturating_duration_since(p.delivered_time);
        // Draft §3.3: the longer interval guards against ACK compression.
        let interval = send_elapsed.max(ack_elapsed);
        let delivered = self.delivered.saturating_sub(p.delivered);
        let delivery_rate = if interval.is_zero() || interval < min_rtt {
            None
        } else {
            let rate = u128::from(delivered) * 1_000_000_000 / interval.as_nanos();
            Some(u64::try_from(rate).unwrap_or(u64::MAX))
        };
        Some(RateSample {
            delivered_total: self.delivered,
            prior_delivered: p.delivered,
            delivered,
            interval,
            delivery_rate,
            is_app_limited: p.is_app_limited,
            rtt: now.saturating_duration_since(time_sent),
            tx_in_flight: p.tx_in_flight,
            prior_lost: p.lost,
        })
    }

    /// Total bytes delivered so far.
    #[must_use]
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes declared lost so far ([`Self::on_packet_lost`]).
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Whether samples are currently marked app-limited.
    #[must_use]
    pub fn is_app_limited(&self) -> bool {
        self.app_limited_until != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn steady_flight_measures_the_ack_rate() {
        let mut e = DeliveryRateEstimator::new();
        // Ten 1000-byte packets sent back to back at t=0, acknowledged 1 ms apart from t=100.
        let snaps: Vec<_> = (0..10)
            .map(|i| e.on_packet_sent(at(0), 1000, i * 1000))
            .collect();
        let mut last = None;
        for (i, s) in snaps.iter().enumerate() {
            let now = at(100 + i as u64);
            let mut sampler = DeliveryRateEstimator::sampler();
            e.on_packet_acked(&mut sampler, now, 1000, at(0), s);
            last = e.finish(sampler, now, Duration::from_millis(50));
        }
        let last = last.expect("a sample");
        // The last packet: delivered 10000 since its snapshot (0 at t=0) over max(0, 109 ms).
        assert_eq!(last.delivered, 10_000);
        assert_eq!(last.interval, Duration::from_millis(109));
        assert_eq!(last.delivery_rate, Some(10_000_000 / 109));
        assert_eq!(last.delivered_total, 10_000);
        assert!(!last.is_app_limited);
        assert_eq!(last.rtt, Duration::from_millis(109));
    }

    /// What BBRv3 reads of a sample besides the rate (draft-ietf-ccwg-bbr-06 §4.1.2.2): the
    /// data in flight when the newest acknowledged packet left, itself included, and the losses
    /// counted before it left.
    #[test]
    fn samples_carry_in_flight_at_send_and_losses_before_it() {
        let mut e = DeliveryRateEstimator::new();
        let first = e.on_packet_sent(at(0), 1200, 0);
        e.on_packet_lost(1200);
        let second = e.on_packet_sent(at(1), 1000, 2400);
        assert_eq!((first.tx_in_flight, first.lost), (1200, 0));
        assert_eq!((second.tx_in_flight, second.lost), (3400, 1200));
        e.on_packet_lost(500);
        assert_eq!(e.lost(), 1700);
        let mut sampler = DeliveryRateEstimator::sampler();
        e.on_packet_acked(&mut sampler, at(50), 1200, at(0), &first);
        e.on_packet_acked(&mut sampler, at(50), 1000, at(1), &second);
        let rs = e.finish(sampler, at(50), Duration::ZERO).expect("sample");
        assert_eq!((rs.tx_in_flight, rs.prior_lost), (3400, 1200));
    }

    #[test]
    fn short_intervals_give_no_rate_and_app_limited_marks_clear() {
        let mut e = DeliveryRateEstimator::new();
        e.on_app_limited(0);
        let s = e.on_packet_sent(at(0), 1200, 0);
        assert!(s.is_app_limited);
        let mut sampler = DeliveryRateEstimator::sampler();
        e.on_packet_acked(&mut sampler, at(10), 1200, at(0), &s);
        let rs = e
            .finish(sampler, at(10), Duration::from_millis(20))
            .expect("sample");
        assert!(rs.is_app_limited);
        // 10 ms interval < 20 ms min_rtt: no rate.
        assert_eq!(rs.delivery_rate, None);
        // Delivered (1200) passed the mark (1): no longer app-limited.
        assert!(!e.is_app_limited());
        assert!(!e.on_packet_sent(at(11), 1200, 0).is_app_limited);
        assert_eq!(
            e.finish(DeliveryRateEstimator::sampler(), at(12), Duration::ZERO),
            None
        );
    }
}
