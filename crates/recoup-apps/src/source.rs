//! The frame-size model shared by the live and RTC senders: a constant-bitrate encoder with a
//! GOP structure (one key frame every `gop` frames, `key_ratio` times larger than a delta
//! frame) and seeded multiplicative size noise.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::frame::{FrameKind, FRAME_HEADER_LEN, MAX_PAYLOAD};

/// Encoder parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncoderConfig {
    /// Target bit rate, bits per second, frame headers included.
    pub bitrate: u64,
    /// Frames per second (at least 1).
    pub fps: u32,
    /// Frames per GOP: frame `i` is a key frame when `i % gop == 0`; 0 means only frame 0.
    pub gop: u32,
    /// Key frame size / delta frame size.
    pub key_ratio: f64,
    /// Each frame's size is multiplied by a uniform factor in `[1 - noise, 1 + noise]`.
    pub size_noise: f64,
}

impl EncoderConfig {
    /// Kind and payload length of frame `index`. Sizes average to `bitrate` over a GOP (before
    /// noise, which has mean 1); every frame has at least its header.
    pub fn frame(&self, index: u64, rng: &mut ChaCha8Rng) -> (FrameKind, u32) {
        let fps = f64::from(self.fps.max(1));
        let mean = self.bitrate as f64 / 8.0 / fps;
        let key = if self.gop == 0 {
            index == 0
        } else {
            index % u64::from(self.gop) == 0
        };
        let ratio = self.key_ratio.max(0.0);
        // Over a GOP of g frames: key + (g - 1) deltas = g * mean.
        let delta = match self.gop {
            0 | 1 => mean,
            g => mean * f64::from(g) / (ratio + f64::from(g) - 1.0),
        };
        let base = if key && self.gop != 1 {
            delta * ratio
        } else {
            delta
        };
        let noise = self.size_noise.clamp(0.0, 1.0);
        let factor = if noise > 0.0 {
            1.0 + noise * rng.gen_range(-1.0..=1.0)
        } else {
            1.0
        };
        let total = (base * factor).round().max(FRAME_HEADER_LEN as f64);
        let payload = (total - FRAME_HEADER_LEN as f64).min(f64::from(MAX_PAYLOAD));
        let kind = if key {
            FrameKind::Key
        } else {
            FrameKind::Delta
        };
        (kind, payload as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use recoup_elements::element_rng;

    #[test]
    fn gop_sizes_average_to_the_bitrate() {
        let cfg = EncoderConfig {
            bitrate: 4_000_000,
            fps: 30,
            gop: 30,
            key_ratio: 5.0,
            size_noise: 0.0,
        };
        let mut rng = element_rng(1, "t");
        let frames: Vec<(FrameKind, u32)> = (0..60).map(|i| cfg.frame(i, &mut rng)).collect();
        assert_eq!(frames[0].0, FrameKind::Key);
        assert_eq!(frames[30].0, FrameKind::Key);
        assert_eq!(frames[1].0, FrameKind::Delta);
        let key = f64::from(frames[0].1 + 32);
        let delta = f64::from(frames[1].1 + 32);
        assert!((key / delta - 5.0).abs() < 0.01, "{key} / {delta}");
        let total: u64 = frames.iter().map(|f| u64::from(f.1) + 32).sum();
        // Two seconds at 4 Mbit/s = 1 MB, within rounding.
        assert!((total as i64 - 1_000_000).abs() < 60, "{total}");
    }

    #[test]
    fn noise_is_seeded_and_bounded() {
        let cfg = EncoderConfig {
            bitrate: 1_000_000,
            fps: 25,
            gop: 0,
            key_ratio: 5.0,
            size_noise: 0.2,
        };
        let draw = |seed| {
            let mut rng = element_rng(seed, "app/live");
            (1..200)
                .map(|i| cfg.frame(i, &mut rng).1)
                .collect::<Vec<_>>()
        };
        let a = draw(1);
        assert_eq!(a, draw(1));
        assert_ne!(a, draw(2));
        let mean = 1_000_000.0 / 8.0 / 25.0;
        for s in a {
            let total = f64::from(s) + 32.0;
            assert!(
                total >= mean * 0.8 - 1.0 && total <= mean * 1.2 + 1.0,
                "{total}"
            );
        }
    }
}
