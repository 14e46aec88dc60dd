//! What the video-call FEC schemes share: the packets of the frame being sent (in the rtc
//! application one stream is one frame, so the packet carrying a FIN closes it), a loss-rate
//! filter, and splitting a frame's repair into windows a repair frame can name.

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::Instant;

use crate::api::SendKind;
use crate::fec::{RepairRequest, SourcePacket, MAX_REPAIRS, MAX_WINDOW_SPAN};

/// A frame's first transmissions, complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub packets: Vec<u64>,
    /// The earliest playout deadline any of its packets carried.
    pub deadline: Option<Instant>,
}

/// Collects first transmissions until a packet ends a stream.
#[derive(Clone, Debug, Default)]
pub struct FrameCollector {
    open: Vec<u64>,
    deadline: Option<Instant>,
}

impl FrameCollector {
    /// The completed frame when `p` (a first transmission) ends one. Retransmissions and copies
    /// are not part of a frame's first round and are ignored.
    pub fn on_source(&mut self, p: &SourcePacket<'_>) -> Option<Frame> {
        if p.kind != SendKind::New {
            return None;
        }
        self.open.push(p.pn);
        self.deadline = match (self.deadline, p.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        p.ends_stream().then(|| Frame {
            packets: std::mem::take(&mut self.open),
            deadline: self.deadline.take(),
        })
    }
}

/// The loss rate as WebRTC filters it for FEC (`VCMLossProtectionLogic`, max filter): the
/// highest loss rate of the last ten one-second intervals, the current one included.
#[derive(Clone, Debug, Default)]
pub struct LossFilter {
    /// (interval start, lost, settled), oldest first.
    intervals: VecDeque<(Instant, u32, u32)>,
}

const INTERVAL: Duration = Duration::from_secs(1);
const INTERVALS: usize = 10;

impl LossFilter {
    /// One packet's fate is known.
    pub fn record(&mut self, now: Instant, lost: bool) {
        let fresh = self
            .intervals
            .back()
            .is_none_or(|&(start, _, _)| now - start >= INTERVAL);
        if fresh {
            if self.intervals.len() == INTERVALS {
                self.intervals.pop_front();
            }
            self.intervals.push_back((now, 0, 0));
        }
        if let Some(last) = self.intervals.back_mut() {
            last.1 += u32::from(lost);
            last.2 += 1;
        }
    }

    /// The mean loss rate over the ten intervals, a fraction; 0 before any outcome.
    #[must_use]
    pub fn mean(&self) -> f64 {
        let (lost, n) = self
            .intervals
            .iter()
            .fold((0u64, 0u64), |(l, n), &(_, a, b)| {
                (l + u64::from(a), n + u64::from(b))
            });
        if n == 0 {
            0.0
        } else {
            lost as f64 / n as f64
        }
    }

    /// The filtered loss rate, a fraction; 0 before any outcome.
    #[must_use]
    pub fn loss(&self) -> f64 {
        self.intervals
            .iter()
            .filter(|(_, _, n)| *n > 0)
            .map(|&(_, l, n)| f64::from(l) / f64::from(n))
            .fold(0.0, f64::max)
    }
}

/// `repairs` repair symbols over `packets`, split into windows whose span a repair frame can
/// name; each window gets its share of the repairs, rounded up (at least one).
#[must_use]
pub fn repair_windows(packets: &[u64], repairs: usize) -> Vec<RepairRequest> {
    if packets.is_empty() || repairs == 0 {
        return Vec::new();
    }
    let mut groups: Vec<Vec<u64>> = Vec::new();
    for &pn in packets {
        match groups.last_mut() {
            Some(g) if pn - g[0] < MAX_WINDOW_SPAN => g.push(pn),
            _ => groups.push(vec![pn]),
        }
    }
    let total = packets.len();
    groups
        .into_iter()
        .map(|window| {
            let share = (repairs * window.len()).div_ceil(total).max(1);
            RepairRequest {
                window,
                repairs: u16::try_from(share).unwrap_or(MAX_REPAIRS).min(MAX_REPAIRS),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::ms;

    fn packet(
        pn: u64,
        kind: SendKind,
        fin: bool,
        deadline: Option<Instant>,
    ) -> SourcePacket<'static> {
        SourcePacket {
            pn,
            sent: ms(0),
            symbol_bytes: 1000,
            kind,
            ranges: &[],
            fins: u64::from(fin),
            deadline,
        }
    }

    #[test]
    fn a_fin_closes_the_frame_and_retransmissions_are_not_in_it() {
        let mut c = FrameCollector::default();
        assert_eq!(
            c.on_source(&packet(1, SendKind::New, false, Some(ms(120)))),
            None
        );
        assert_eq!(
            c.on_source(&packet(2, SendKind::Retransmission, true, None)),
            None
        );
        let f = c.on_source(&packet(3, SendKind::New, true, Some(ms(100))));
        assert_eq!(
            f,
            Some(Frame {
                packets: vec![1, 3],
                deadline: Some(ms(100))
            })
        );
        let g = c.on_source(&packet(4, SendKind::New, true, None));
        assert_eq!(g.map(|f| (f.packets, f.deadline)), Some((vec![4], None)));
    }

    #[test]
    fn loss_filter_keeps_the_worst_of_ten_seconds() {
        let mut f = LossFilter::default();
        assert_eq!(f.loss(), 0.0);
        for i in 0..10 {
            f.record(ms(i), i < 2);
        }
        assert!((f.loss() - 0.2).abs() < 1e-12);
        assert!((f.mean() - 0.2).abs() < 1e-12);
        // Clean seconds after it: the 20 % interval stays the maximum for ten intervals.
        for s in 1..10 {
            f.record(ms(1000 * s), false);
        }
        assert!((f.loss() - 0.2).abs() < 1e-12);
        assert!((f.mean() - 2.0 / 19.0).abs() < 1e-12);
        f.record(ms(10_000), false);
        assert_eq!(f.loss(), 0.0);
    }

    #[test]
    fn windows_fit_a_repair_frame() {
        assert!(repair_windows(&[], 3).is_empty());
        assert!(repair_windows(&[1, 2], 0).is_empty());
        let one = repair_windows(&[5, 6, 8], 2);
        assert_eq!(
            one,
            vec![RepairRequest {
                window: vec![5, 6, 8],
                repairs: 2
            }]
        );
        let pns: Vec<u64> = (0..150).collect();
        let split = repair_windows(&pns, 15);
        assert_eq!(split.len(), 2);
        assert_eq!(split[0].window.len(), 96);
        assert_eq!((split[0].repairs, split[1].repairs), (10, 6));
    }
}
