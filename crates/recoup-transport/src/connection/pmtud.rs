//! Path MTU discovery (RFC 9000 §14.3, by RFC 8899's datagram PLPMTUD): once the handshake is
//! confirmed, probe packets of PING and PADDING find the largest datagram the path carries by a
//! binary search between the configured size, which is assumed to work, and a ceiling (ours and
//! the peer's max_udp_payload_size).
//!
//! Invariants: at most one probe is in flight; the path's datagram size grows only when a probe
//! of that size is acknowledged; a lost probe is no congestion signal (RFC 9000 §14.4) and only
//! counts toward giving up on its size after [`MAX_PROBES`] (RFC 8899 §5.1.2). Black holes
//! (RFC 8899 §4.3): a path whose MTU shrinks below the size in use delivers only small packets,
//! so nothing ack-eliciting is acknowledged and no loss is ever declared; after
//! [`BLACK_HOLE_PTOS`] consecutive PTOs, or on persistent congestion (RFC 9002 §7.6), while
//! sending above the base size, the connection drops back to the base size and searches again.

/// Probes of one size lost before that size counts as too large (RFC 8899 §5.1.2 MAX_PROBES).
const MAX_PROBES: u8 = 3;
/// Consecutive PTOs above the base size that make a black hole suspected. A real outage that
/// long costs one probe per search step once it ends.
pub(super) const BLACK_HOLE_PTOS: u32 = 3;
/// The search stops when the sizes still unknown span fewer bytes than this: another probe would
/// gain less than it costs.
const MIN_STEP: usize = 20;

/// The search state of one path.
#[derive(Clone, Debug)]
pub(super) struct Pmtud {
    /// The size used before discovery and after a black hole.
    base: usize,
    /// The largest size the path is known to carry (what it uses).
    known: usize,
    /// The largest size not yet known to fail.
    high: usize,
    /// The ceiling has been tried in this search (it is tried first: most paths carry it).
    tried_high: bool,
    /// The size being tried, until a probe of it is acknowledged or [`MAX_PROBES`] are lost.
    trying: Option<usize>,
    /// The packet number of the probe in flight: an acknowledgment or loss of an older probe
    /// (sent before a restart) says nothing about the size tried now.
    in_flight: Option<u64>,
    /// Probes of the size being tried lost so far.
    failures: u8,
}

impl Pmtud {
    /// Discovery from `base` up to `ceiling`; `None` when there is nothing to find.
    pub fn new(base: usize, ceiling: usize) -> Option<Self> {
        (ceiling > base).then_some(Self {
            base,
            known: base,
            high: ceiling,
            tried_high: false,
            trying: None,
            in_flight: None,
            failures: 0,
        })
    }

    /// The size of the next probe, if one is due.
    pub fn probe_size(&self) -> Option<usize> {
        if self.in_flight.is_some() {
            return None;
        }
        if let Some(size) = self.trying {
            return Some(size);
        }
        if self.high < self.known + MIN_STEP {
            return None;
        }
        Some(if self.tried_high {
            (self.known + self.high).div_ceil(2)
        } else {
            self.high
        })
    }

    pub fn on_probe_sent(&mut self, pn: u64, size: usize) {
        self.in_flight = Some(pn);
        self.trying = Some(size);
        self.tried_high |= size == self.high;
    }

    /// Probe `pn` was acknowledged: the path carries its size; returns the new datagram size.
    pub fn on_probe_acked(&mut self, pn: u64) -> Option<usize> {
        if self.in_flight != Some(pn) {
            return None;
        }
        self.in_flight = None;
        let size = self.trying.take()?;
        self.failures = 0;
        self.known = self.known.max(size);
        Some(self.known)
    }

    /// Probe `pn` was declared lost.
    pub fn on_probe_lost(&mut self, pn: u64) {
        if self.in_flight != Some(pn) {
            return;
        }
        self.in_flight = None;
        self.failures += 1;
        if self.failures >= MAX_PROBES {
            self.failures = 0;
            if let Some(size) = self.trying.take() {
                self.high = size - 1;
            }
        }
    }

    /// Back to the base size and a new search, if we were sending above it: on a suspected black
    /// hole (RFC 8899 §4.3), and on a new peer address, whose path may carry less (RFC 9000
    /// §14.3). Returns the size to use then.
    pub fn restart(&mut self) -> Option<usize> {
        if self.known == self.base {
            return None;
        }
        self.known = self.base;
        self.tried_high = false;
        self.trying = None;
        self.in_flight = None;
        self.failures = 0;
        Some(self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a path that carries `mtu`; returns the sizes probed and the result.
    fn search(mut d: Pmtud, mtu: usize) -> (Vec<usize>, usize) {
        let mut probed = Vec::new();
        let mut known = d.known;
        while let Some(size) = d.probe_size() {
            assert!(probed.len() < 64, "the search does not end: {probed:?}");
            let pn = probed.len() as u64;
            probed.push(size);
            d.on_probe_sent(pn, size);
            if size <= mtu {
                known = d.on_probe_acked(pn).expect("a probe in flight");
            } else {
                d.on_probe_lost(pn);
            }
        }
        (probed, known)
    }

    #[test]
    fn a_path_that_carries_the_ceiling_needs_one_probe() {
        let d = Pmtud::new(1350, 1452).expect("room to search");
        assert_eq!(search(d, 1500), (vec![1452], 1452));
    }

    #[test]
    fn a_smaller_mtu_is_found_within_the_step_and_never_exceeded() {
        for mtu in [1351, 1380, 1400, 1420, 1451] {
            let d = Pmtud::new(1350, 1452).expect("room to search");
            let (probed, known) = search(d, mtu);
            assert!(
                known <= mtu && mtu - known < MIN_STEP,
                "{mtu}: {known} {probed:?}"
            );
            // The ceiling is tried MAX_PROBES times before the search narrows.
            assert_eq!(probed[..3], [1452; 3], "{mtu}: {probed:?}");
        }
    }

    #[test]
    fn nothing_to_search_without_room_above_the_base() {
        assert!(Pmtud::new(1350, 1350).is_none());
        let d = Pmtud::new(1350, 1360).expect("ten bytes");
        assert_eq!(d.probe_size(), None, "below the step");
    }

    #[test]
    fn a_restart_falls_back_and_ignores_the_probe_sent_before_it() {
        let mut d = Pmtud::new(1350, 1452).expect("room to search");
        assert_eq!(d.restart(), None, "at the base already");
        for pn in 0..3 {
            d.on_probe_sent(pn, 1452);
            d.on_probe_lost(pn);
        }
        assert_eq!(d.probe_size(), Some(1401), "the ceiling failed three times");
        d.on_probe_sent(3, 1401);
        assert_eq!(d.on_probe_acked(3), Some(1401));
        d.on_probe_sent(4, 1426);
        assert_eq!(d.restart(), Some(1350));
        assert_eq!(
            d.probe_size(),
            Some(1451),
            "a new search starts at the ceiling left"
        );
        d.on_probe_sent(5, 1451);
        // Probe 4, sent before the restart, speaks for the old path, not for this search.
        assert_eq!(d.on_probe_acked(4), None);
        d.on_probe_lost(4);
        assert_eq!(d.probe_size(), None, "probe 5 is still in flight");
        assert_eq!(d.on_probe_acked(5), Some(1451));
    }
}
