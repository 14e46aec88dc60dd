//! No congestion control: a window that never limits, for constant-bitrate real-time senders
//! such as Ringmaster's (AutoRec §VII, Fig. 20: "a constant bitrate transmission scheme without
//! congestion control"). The application's frame clock is then the only thing that paces data.

use recoup_time::Instant;

use super::{AckEvent, CongestionController};
use crate::rtt::RttEstimator;

/// Large enough that no sender reaches it, small enough that the pacer's rate arithmetic
/// (window · 10^9 · gain, in u128) cannot overflow.
const UNLIMITED_WINDOW: u64 = 1 << 50;

/// The controller that never holds a packet back.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoControl;

impl CongestionController for NoControl {
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u64, _bytes_in_flight: u64) {}

    fn on_ack(&mut self, _ack: &AckEvent<'_>) {}

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _largest_lost_sent_time: Instant,
        _lost_bytes: u64,
        _persistent_congestion: bool,
        _rtt: &RttEstimator,
    ) {
    }

    fn window(&self) -> u64 {
        UNLIMITED_WINDOW
    }

    fn name(&self) -> &'static str {
        "none"
    }

    fn state(&self) -> &'static str {
        "none"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_do_not_shrink_the_window() {
        let mut c = NoControl;
        let before = c.window();
        let t = Instant::ZERO;
        c.on_congestion_event(t, t, 100_000, true, &RttEstimator::default());
        assert_eq!(c.window(), before);
        assert!(before > 1 << 40);
    }
}
