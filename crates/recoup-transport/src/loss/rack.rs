//! RACK (RFC 8985 §6) state of one packet number space, adapted to QUIC.
//!
//! TCP's RACK works on sequence ranges and SACK blocks; QUIC gives every transmission its own
//! packet number, increasing in send order (RFC 9000 §12.3), so:
//! - "sent after" compares (send time, packet number) instead of (send time, end sequence);
//! - RACK.end_seq is the largest newly acknowledged packet number that advanced RACK;
//! - DSACK (a duplicate delivery revealing a spurious retransmission) becomes the acknowledgement
//!   of a packet this detector already declared lost;
//! - reordering is seen when an ACK newly acknowledges a packet older than RACK.end_seq, i.e. the
//!   peer received it after a later one (ACK frames are cumulative, so nothing else explains it);
//! - a "recovery" (RFC 8985 §6.2 step 4, counted to expire the widened window) runs from a loss
//!   declaration until a packet sent after it is acknowledged, like RFC 9002 §7.3.2;
//! - a DSACK round ends when a packet sent after the widening is acknowledged (TCP: SND.UNA passes
//!   the SND.NXT recorded then).
//!
//! Instead of RFC 8985's "reo_wnd = 0 before reordering is seen, in recovery or once DupThresh
//! segments are SACKed", the caller keeps RFC 9002's packet threshold until reordering is seen,
//! which is the same DupThresh rule stated in packet numbers (RFC 8985 §6.2 allows it).

use std::time::Duration;

use recoup_time::Instant;

use crate::rtt::{mul_ratio, RttEstimator, GRANULARITY};

/// RFC 8985 §6.2 step 4: recoveries a widened reordering window survives without new DSACKs.
const REO_WND_PERSIST: u32 = 16;

/// Cap on RACK.reo_wnd_mult; the window is capped by SRTT long before this.
const MAX_REO_WND_MULT: u32 = 1 << 16;

/// What one ACK frame told RACK about a space.
#[derive(Clone, Copy, Debug)]
pub(super) struct RackAck {
    /// The largest newly acknowledged packet: (packet number, send time).
    pub newest: Option<(u64, Instant)>,
    /// The smallest newly acknowledged packet number.
    pub oldest: Option<u64>,
    /// Packets declared lost were acknowledged (the QUIC counterpart of DSACK).
    pub spurious: bool,
    /// The largest packet number sent in the space so far (TCP's SND.NXT - 1).
    pub largest_sent: Option<u64>,
}

#[derive(Clone, Debug)]
pub(super) struct Rack {
    /// RACK.xmit_ts and RACK.end_seq: the most recently sent packet that was delivered.
    newest: Option<(Instant, u64)>,
    /// RACK.rtt: the RTT measured on that packet (ACK delay included, as RFC 8985 §6.2 step 2).
    rtt: Duration,
    /// RACK.reordering_seen.
    reordering_seen: bool,
    /// RACK.reo_wnd_mult (starts at 1).
    reo_wnd_mult: u32,
    /// RACK.reo_wnd_persist.
    reo_wnd_persist: u32,
    /// RACK.dsack_round: the largest packet number sent when the window was last widened.
    dsack_round: Option<u64>,
    /// The largest packet number sent when the current recovery began.
    recovery_end: Option<u64>,
}

impl Rack {
    pub(super) fn new() -> Self {
        Self {
            newest: None,
            rtt: Duration::ZERO,
            reordering_seen: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_round: None,
            recovery_end: None,
        }
    }

    /// RFC 8985 §6.2 steps 2-4 for one ACK frame.
    pub(super) fn on_ack(&mut self, ack: &RackAck, now: Instant) {
        // Step 3: a packet older than RACK's newest delivered one arrived late.
        let end_seq = self.end_seq();
        if ack.spurious || ack.oldest.zip(end_seq).is_some_and(|(o, e)| o < e) {
            self.reordering_seen = true;
        }
        // Step 2: advance to the most recently sent delivered packet.
        if let Some((pn, sent)) = ack.newest {
            if self
                .newest
                .is_none_or(|(ts, end)| sent_after(sent, pn, ts, end))
            {
                self.newest = Some((sent, pn));
                self.rtt = now.saturating_duration_since(sent);
            }
        }
        let end_seq = self.end_seq();
        let passed = |mark: Option<u64>| mark.zip(end_seq).is_some_and(|(m, e)| e > m);
        let exiting_recovery = passed(self.recovery_end);
        if exiting_recovery {
            self.recovery_end = None;
        }
        // Step 4: widen once per round trip that sees a spurious loss; forget the widening
        // after REO_WND_PERSIST recoveries without one.
        if passed(self.dsack_round) {
            self.dsack_round = None;
        }
        if self.dsack_round.is_none() && ack.spurious {
            self.dsack_round = ack.largest_sent;
            self.reo_wnd_mult = self.reo_wnd_mult.saturating_add(1).min(MAX_REO_WND_MULT);
            self.reo_wnd_persist = REO_WND_PERSIST;
        } else if exiting_recovery {
            self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
            }
        }
    }

    /// Packets were declared lost: a recovery starts unless one is running.
    pub(super) fn on_loss(&mut self, largest_sent: Option<u64>) {
        if self.recovery_end.is_none() {
            self.recovery_end = largest_sent;
        }
    }

    /// RACK.end_seq: packets numbered below it were sent before the newest delivered packet.
    pub(super) fn end_seq(&self) -> Option<u64> {
        self.newest.map(|(_, end)| end)
    }

    /// Whether `(time_sent, pn)` went out before RACK's newest delivered packet.
    pub(super) fn sent_before_newest(&self, time_sent: Instant, pn: u64) -> bool {
        self.newest
            .is_some_and(|(ts, end)| sent_after(ts, end, time_sent, pn))
    }

    /// Until reordering is seen, the packet threshold (DupThresh) also declares losses.
    pub(super) fn packet_threshold_applies(&self) -> bool {
        !self.reordering_seen
    }

    /// RFC 8985 §6.2 step 4: RACK.reo_wnd = min(reo_wnd_mult · min_RTT / 4, SRTT).
    pub(super) fn reo_wnd(&self, rtt: &RttEstimator) -> Duration {
        mul_ratio(rtt.min(), u64::from(self.reo_wnd_mult), 4).min(rtt.smoothed())
    }

    /// RFC 8985 §6.2 step 5: a packet sent before RACK.xmit_ts is lost RACK.rtt + RACK.reo_wnd
    /// after its send. Floored at the timer granularity (RFC 9002 §6.1.2) so a zero RTT cannot
    /// declare a whole flight lost at once.
    pub(super) fn loss_delay(&self, rtt: &RttEstimator) -> Duration {
        self.rtt.saturating_add(self.reo_wnd(rtt)).max(GRANULARITY)
    }
}

/// RFC 8985 §6.2 RACK_sent_after: `(t1, pn1)` was sent after `(t2, pn2)`; the packet number
/// breaks ties between packets sent at the same instant.
fn sent_after(t1: Instant, pn1: u64, t2: Instant, pn2: u64) -> bool {
    t1 > t2 || (t1 == t2 && pn1 > pn2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn ack(newest: (u64, u64), oldest: u64, spurious: bool, largest_sent: u64) -> RackAck {
        RackAck {
            newest: Some((newest.0, at(newest.1))),
            oldest: Some(oldest),
            spurious,
            largest_sent: Some(largest_sent),
        }
    }

    #[test]
    fn advances_only_to_later_packets_and_sees_reordering() {
        let mut r = Rack::new();
        r.on_ack(&ack((5, 50), 3, false, 9), at(150));
        assert_eq!(r.end_seq(), Some(5));
        assert_eq!(r.rtt, Duration::from_millis(100));
        assert!(r.sent_before_newest(at(40), 4));
        assert!(!r.sent_before_newest(at(60), 6));
        assert!(r.packet_threshold_applies());
        // 4 arrives after 5: reordering; RACK keeps 5 and its RTT.
        r.on_ack(&ack((4, 40), 4, false, 9), at(200));
        assert_eq!(r.end_seq(), Some(5));
        assert_eq!(r.rtt, Duration::from_millis(100));
        assert!(!r.packet_threshold_applies());
    }

    #[test]
    fn spurious_losses_widen_once_per_round_and_expire_after_16_recoveries() {
        let mut rtt = RttEstimator::new(Duration::from_millis(100));
        rtt.update(
            at(100),
            Duration::from_millis(100),
            Duration::ZERO,
            Duration::ZERO,
            true,
        );
        let mut r = Rack::new();
        assert_eq!(r.reo_wnd(&rtt), Duration::from_millis(25));
        r.on_ack(&ack((1, 0), 1, true, 10), at(100));
        assert_eq!(r.reo_wnd(&rtt), Duration::from_millis(50));
        // Same round (nothing sent after packet 10 delivered yet): no second widening.
        r.on_ack(&ack((8, 10), 8, true, 12), at(110));
        assert_eq!(r.reo_wnd(&rtt), Duration::from_millis(50));
        // Packet 11 was sent after the widening: the round is over, a new DSACK widens again.
        r.on_ack(&ack((11, 20), 11, true, 20), at(120));
        assert_eq!(r.reo_wnd(&rtt), Duration::from_millis(75));
        // Capped by SRTT.
        for pn in [30, 40, 50, 60] {
            r.on_ack(&ack((pn - 5, pn), pn - 5, true, pn), at(pn + 100));
        }
        assert_eq!(r.reo_wnd(&rtt), Duration::from_millis(100));
        // 16 recoveries without spurious losses restore the default window.
        let mut pn = 100;
        for i in 0..REO_WND_PERSIST {
            assert!(r.reo_wnd_mult > 1, "still widened before recovery {i}");
            r.on_loss(Some(pn + 1));
            r.on_ack(&ack((pn + 2, pn), pn + 2, false, pn + 2), at(pn + 100));
            pn += 10;
        }
        assert_eq!(r.reo_wnd(&rtt), Duration::from_millis(25));
    }

    #[test]
    fn loss_delay_has_a_floor() {
        let rtt = RttEstimator::new(Duration::ZERO);
        let r = Rack::new();
        assert_eq!(r.loss_delay(&rtt), GRANULARITY);
    }
}
