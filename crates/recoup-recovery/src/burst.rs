//! Loss bursts for ART's escape space (ART §6.2): B_max is the largest run of consecutively
//! numbered lost packets declared in the last few RTTs.

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::Instant;

/// Bursts kept at most; older ones fall out first. Bursts older than the window are useless, so
/// this only bounds memory under pathological loss.
const MAX_BURSTS: usize = 4096;

#[derive(Clone, Debug, Default)]
pub struct BurstTracker {
    last_lost: Option<u64>,
    /// (time the burst last grew, its length), oldest first.
    bursts: VecDeque<(Instant, u64)>,
}

impl BurstTracker {
    /// Packet `pn` was declared lost at `now`: it extends the current burst if it directly follows
    /// the previous lost packet number.
    pub fn on_lost(&mut self, now: Instant, pn: u64) {
        let extends = self
            .last_lost
            .is_some_and(|last| last.checked_add(1) == Some(pn));
        self.last_lost = Some(pn);
        match self.bursts.back_mut() {
            Some((at, len)) if extends => {
                *at = now;
                *len = len.saturating_add(1);
            }
            _ => {
                if self.bursts.len() == MAX_BURSTS {
                    self.bursts.pop_front();
                }
                self.bursts.push_back((now, 1));
            }
        }
    }

    /// The largest burst that grew within `window` before `now` (0 if none), forgetting older ones.
    pub fn max_within(&mut self, now: Instant, window: Duration) -> u64 {
        let horizon = now.checked_sub(window).unwrap_or(Instant::ZERO);
        while self.bursts.front().is_some_and(|&(at, _)| at < horizon) {
            self.bursts.pop_front();
        }
        self.bursts.iter().map(|&(_, len)| len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::ms;

    #[test]
    fn consecutive_numbers_form_a_burst_and_old_bursts_expire() {
        let mut b = BurstTracker::default();
        for pn in [10, 11, 12, 13] {
            b.on_lost(ms(100), pn);
        }
        b.on_lost(ms(150), 20);
        b.on_lost(ms(150), 21);
        assert_eq!(b.max_within(ms(200), Duration::from_millis(500)), 4);
        // The burst of 4 last grew at 100 ms; with a 80 ms window at 200 ms only the 2 remains.
        assert_eq!(b.max_within(ms(200), Duration::from_millis(80)), 2);
        assert_eq!(b.max_within(ms(1000), Duration::from_millis(80)), 0);
        b.on_lost(ms(1000), u64::MAX);
        b.on_lost(ms(1000), 0);
        assert_eq!(b.max_within(ms(1000), Duration::from_millis(80)), 1);
    }
}
