//! Tambur (Rudow et al., NSDI 2023): streaming codes over video frames.
//!
//! A streaming code protects frame `i` with parity that also covers the `tau` frames before it,
//! so a burst that wipes out most of frame `j` can be decoded from the parities of frames
//! `j..=j+tau`, within a playback delay of `tau` frames (Tambur uses `tau` = 3). Parity is sized
//! per frame as a share of the frame's packets, predicted from the losses of recent frames and
//! capped by the maximum redundancy (AutoRec §VII: 25 % by default; Tambur_HC 50 %; Tambur_LC
//! the least setting, exactly one repair packet per frame).
//!
//! The prediction here is the mean loss fraction of the lossy frames in the last `window` frames
//! (how much of a frame a burst takes when it hits): Tambur learns this mapping from traces with
//! a small model; we use the statistic it is trained on, so parity follows burst intensity and
//! stays at one packet per frame when recent frames saw no loss.

use std::collections::{BTreeMap, VecDeque};

use recoup_time::Instant;

use super::config::TamburConfig;
use super::frames::FrameCollector;
use crate::api::PacketInfo;
use crate::fec::{
    FecContext, FecScheme, RepairRequest, SourcePacket, MAX_REPAIRS, MAX_WINDOW_SPAN,
};

/// AutoRec §VII's Tambur settings: maximum redundancy ratio.
pub const MAX_RATIO_DEFAULT: f64 = 0.25;
pub const MAX_RATIO_HIGH_COST: f64 = 0.5;
/// Tambur_LC: the least setting, which leaves exactly one repair packet per frame.
pub const MAX_RATIO_LOW_COST: f64 = 0.0;
/// Frames of playback delay the code may use to decode (Tambur's `tau`).
pub const TAU_FRAMES: u32 = 3;

/// The recent frames' loss record and the parity-sizing rule.
#[derive(Clone, Debug)]
pub struct TamburSizer {
    max_ratio: f64,
    window: usize,
    /// Per recent frame: (packets lost, packets sent).
    recent: VecDeque<(u32, u32)>,
}

impl TamburSizer {
    /// `max_ratio` caps parity / frame packets; `window` frames of history (at least one).
    #[must_use]
    pub fn new(max_ratio: f64, window: usize) -> Self {
        Self {
            max_ratio: max_ratio.clamp(0.0, 1.0),
            window: window.max(1),
            recent: VecDeque::new(),
        }
    }

    /// What the receiver's feedback says about one past frame.
    pub fn record_frame(&mut self, lost: u32, sent: u32) {
        if self.recent.len() == self.window {
            self.recent.pop_front();
        }
        self.recent.push_back((lost.min(sent), sent));
    }

    /// The predicted share of a frame a burst takes: the mean loss fraction of the lossy frames
    /// in the window, 0 without any.
    #[must_use]
    pub fn predicted_ratio(&self) -> f64 {
        let lossy: Vec<f64> = self
            .recent
            .iter()
            .filter(|(l, s)| *l > 0 && *s > 0)
            .map(|(l, s)| f64::from(*l) / f64::from(*s))
            .collect();
        if lossy.is_empty() {
            0.0
        } else {
            lossy.iter().sum::<f64>() / lossy.len() as f64
        }
    }

    /// Parity packets for a frame of `packets` packets: the predicted share, at least one and at
    /// most `max_ratio` of the frame (but never below one).
    #[must_use]
    pub fn parity_packets(&self, packets: usize) -> usize {
        if packets == 0 {
            return 0;
        }
        let cap = ((self.max_ratio * packets as f64).floor() as usize).max(1);
        // The tolerance keeps 0.15 · 20 (3.0000000000000004 in floating point) at 3.
        let want = (self.predicted_ratio() * packets as f64 - 1e-9).ceil() as usize;
        want.clamp(1, cap)
    }
}

/// The Tambur scheme: after each frame, parity sized by [`TamburSizer`] over that frame and the
/// `tau` frames before it (as many as one repair frame can name).
#[derive(Debug)]
pub struct TamburFec {
    config: TamburConfig,
    sizer: TamburSizer,
    frames: FrameCollector,
    /// The last `tau` frames' packets.
    recent: VecDeque<Vec<u64>>,
    /// First-transmission packet -> its frame, until its fate is known.
    owner: BTreeMap<u64, u64>,
    /// Per frame: (lost, settled, sent).
    outcome: BTreeMap<u64, (u32, u32, u32)>,
    next_frame: u64,
    ready: VecDeque<RepairRequest>,
}

impl TamburFec {
    #[must_use]
    pub fn new(config: TamburConfig) -> Self {
        Self {
            config,
            sizer: TamburSizer::new(config.max_ratio, config.window as usize),
            frames: FrameCollector::default(),
            recent: VecDeque::new(),
            owner: BTreeMap::new(),
            outcome: BTreeMap::new(),
            next_frame: 0,
            ready: VecDeque::new(),
        }
    }

    fn settle(&mut self, pn: u64, lost: bool) {
        let Some(frame) = self.owner.remove(&pn) else {
            return;
        };
        let Some(o) = self.outcome.get_mut(&frame) else {
            return;
        };
        o.0 += u32::from(lost);
        o.1 += 1;
        if o.1 >= o.2 {
            let (l, _, n) = *o;
            self.outcome.remove(&frame);
            self.sizer.record_frame(l, n);
        }
    }
}

impl FecScheme for TamburFec {
    fn name(&self) -> &'static str {
        "tambur"
    }

    fn on_source_sent(&mut self, _now: Instant, packet: &SourcePacket<'_>) {
        let Some(frame) = self.frames.on_source(packet) else {
            return;
        };
        let idx = self.next_frame;
        self.next_frame += 1;
        for &pn in &frame.packets {
            self.owner.insert(pn, idx);
        }
        let n = frame.packets.len();
        self.outcome
            .insert(idx, (0, 0, u32::try_from(n).unwrap_or(u32::MAX)));
        let parity = self.sizer.parity_packets(n);
        let last = frame.packets.last().copied().unwrap_or(0);
        let mut window: Vec<u64> = self
            .recent
            .iter()
            .flatten()
            .chain(&frame.packets)
            .copied()
            .filter(|&pn| last - pn < MAX_WINDOW_SPAN)
            .collect();
        window.sort_unstable();
        self.ready.push_back(RepairRequest {
            window,
            repairs: u16::try_from(parity)
                .unwrap_or(MAX_REPAIRS)
                .min(MAX_REPAIRS),
        });
        self.recent.push_back(frame.packets);
        while self.recent.len() > self.config.tau as usize {
            self.recent.pop_front();
        }
    }

    fn on_packet_acked(&mut self, _now: Instant, packet: &PacketInfo<'_>, repair: bool) {
        if !repair {
            self.settle(packet.pn, false);
        }
    }

    fn on_packet_lost(&mut self, _now: Instant, packet: &PacketInfo<'_>, repair: bool) {
        if !repair {
            self.settle(packet.pn, true);
        }
    }

    fn poll_repair(&mut self, _now: Instant, _ctx: &FecContext) -> Option<RepairRequest> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_packet_per_frame_without_loss_and_in_the_low_cost_setting() {
        let mut s = TamburSizer::new(MAX_RATIO_DEFAULT, 30);
        assert_eq!(s.parity_packets(20), 1);
        for _ in 0..10 {
            s.record_frame(0, 20);
        }
        assert_eq!(s.parity_packets(20), 1);
        let mut lc = TamburSizer::new(MAX_RATIO_LOW_COST, 30);
        lc.record_frame(10, 20);
        assert_eq!(lc.parity_packets(20), 1);
        assert_eq!(lc.parity_packets(0), 0);
    }

    #[test]
    fn parity_follows_burst_intensity_up_to_the_cap() {
        let mut s = TamburSizer::new(MAX_RATIO_DEFAULT, 4);
        // Two lossy frames losing 10 % and 20 %: predicted 15 %, 3 of 20.
        s.record_frame(2, 20);
        s.record_frame(0, 20);
        s.record_frame(4, 20);
        assert!((s.predicted_ratio() - 0.15).abs() < 1e-12);
        assert_eq!(s.parity_packets(20), 3);
        // A heavy burst: 80 % of a frame; capped at 25 % (5 of 20), 50 % under HC.
        s.record_frame(16, 20);
        assert_eq!(s.parity_packets(20), 5);
        let mut hc = TamburSizer::new(MAX_RATIO_HIGH_COST, 4);
        hc.record_frame(16, 20);
        assert_eq!(hc.parity_packets(20), 10);
        // The window forgets: four clean frames later the prediction is back to zero.
        for _ in 0..4 {
            s.record_frame(0, 20);
        }
        assert_eq!(s.predicted_ratio(), 0.0);
        assert_eq!(s.parity_packets(20), 1);
    }
}
