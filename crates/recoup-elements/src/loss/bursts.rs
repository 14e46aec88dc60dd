//! `bursts`: loss in bursts whose sizes follow a measured distribution (points of its CDF), with
//! geometric gaps between them sized so that the long-run loss rate is the one asked for.

use std::fmt;
use std::time::Duration;

use recoup_time::Instant;

/// Largest burst (packets) a [`BurstSizes`] may reach.
pub const MAX_BURST: u32 = 100_000;

/// The distribution of a loss burst's size, the number of consecutive lost packets, from points
/// `(s_i, c_i)` of its CDF: `s_0 = 1 < s_1 < ... < s_n` packets and `0 < c_0 < c_1 < ... < c_n =
/// 1`, where `c_i = P(size <= s_i)`.
///
/// Between two points the CDF is linear in the logarithm of the size: for a whole number `s`
/// with `s_{i-1} <= s <= s_i`,
///
/// `P(size <= s) = c_{i-1} + (c_i - c_{i-1}) ln(s / s_{i-1}) / ln(s_i / s_{i-1})`.
///
/// So `c_0` is the share of single-packet bursts, every `s_i` is exactly the distribution's
/// `c_i` quantile (the smallest size whose CDF reaches `c_i`), and `s_n` is the largest burst.
#[derive(Clone, Debug, PartialEq)]
pub struct BurstSizes {
    points: Vec<(u32, f64)>,
    mean: f64,
}

impl BurstSizes {
    /// Checks the points (see the type); an error gives the index of the first bad point and
    /// what is wrong with it.
    pub fn new(points: Vec<(u32, f64)>) -> Result<Self, (usize, String)> {
        let Some(&(first, c0)) = points.first() else {
            return Err((0, "no points".to_owned()));
        };
        if first != 1 {
            return Err((
                0,
                format!(
                    "the first point is size 1 (the share of single-packet bursts), not {first}"
                ),
            ));
        }
        for (i, &(s, c)) in points.iter().enumerate() {
            if !(1..=MAX_BURST).contains(&s) {
                return Err((i, format!("size {s} is outside 1..={MAX_BURST} packets")));
            }
            if !(c.is_finite() && c > 0.0 && c <= 1.0) {
                return Err((i, format!("share {c} is outside (0, 1]")));
            }
            if i > 0 {
                let (ps, pc) = points[i - 1];
                if s <= ps {
                    return Err((
                        i,
                        format!("size {s} does not exceed the previous point's {ps}"),
                    ));
                }
                if c <= pc {
                    return Err((
                        i,
                        format!("share {c} does not exceed the previous point's {pc}"),
                    ));
                }
            }
        }
        let last = points.len() - 1;
        if points[last].1 != 1.0 {
            return Err((
                last,
                format!(
                    "the last point is the largest burst, with share 1 (100 %), not {}",
                    points[last].1
                ),
            ));
        }
        debug_assert!(c0 > 0.0);
        let mut sizes = Self { points, mean: 0.0 };
        // E[size] = sum over s >= 0 of P(size > s).
        sizes.mean = (0..sizes.max()).map(|s| 1.0 - sizes.cdf(s)).sum();
        Ok(sizes)
    }

    /// The points `(size, P(size <= size))`.
    #[must_use]
    pub fn points(&self) -> &[(u32, f64)] {
        &self.points
    }

    /// The largest burst.
    #[must_use]
    pub fn max(&self) -> u32 {
        self.points[self.points.len() - 1].0
    }

    /// Mean burst size in packets.
    #[must_use]
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The highest stationary loss rate with these bursts: every gap one packet,
    /// `mean / (mean + 1)`.
    #[must_use]
    pub fn max_loss_rate(&self) -> f64 {
        self.mean / (self.mean + 1.0)
    }

    /// `P(size <= s)`.
    #[must_use]
    pub fn cdf(&self, s: u32) -> f64 {
        let (s0, c0) = self.points[0];
        if s < s0 {
            return 0.0;
        }
        let mut prev = (s0, c0);
        for &(si, ci) in &self.points[1..] {
            if s < si {
                let (a, ca) = prev;
                let t = (f64::from(s) / f64::from(a)).ln() / (f64::from(si) / f64::from(a)).ln();
                return ca + (ci - ca) * t;
            }
            prev = (si, ci);
        }
        1.0
    }

    /// The `u` quantile: the smallest size whose CDF reaches `u` (`u` in (0, 1]; 1 below).
    #[must_use]
    pub fn quantile(&self, u: f64) -> u32 {
        let (_, c0) = self.points[0];
        if u <= c0 {
            return 1;
        }
        for w in self.points.windows(2) {
            let ((a, ca), (b, cb)) = (w[0], w[1]);
            if u <= cb {
                // P(size <= s) >= u  <=>  s >= a (b / a)^t.
                let t = (u - ca) / (cb - ca);
                let x = f64::from(a) * (f64::from(b) / f64::from(a)).powf(t);
                return (x.ceil() as u32).clamp(a + 1, b);
            }
        }
        self.max()
    }
}

impl fmt::Display for BurstSizes {
    /// The spec form, `1:37.2% 13:90% ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (s, c)) in self.points.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{s}:{}%", (c * 100.0 * 1e6).round() / 1e6)?;
        }
        Ok(())
    }
}

/// The element's state: bursts of sizes drawn from [`BurstSizes`], each followed by a gap of at
/// least one delivered packet.
#[derive(Clone, Debug)]
pub(super) struct Bursts {
    sizes: BurstSizes,
    /// Per packet of a gap after its first: the probability that a burst starts here.
    start: f64,
    /// A burst of `size` packets ends at the latest `size` x `pace` after its first loss.
    pace_ns: Option<u64>,
    /// Packets of the current burst still to lose.
    left: u32,
    /// When the current burst ends at the latest (with a pace).
    deadline: Instant,
    /// The next packet is the first of a gap, delivered whatever the draw.
    gap_start: bool,
}

impl Bursts {
    /// Bursts at stationary loss rate `rate` (checked by the spec parser: at most
    /// [`BurstSizes::max_loss_rate`]), each cut short `size` x `pace` after its first loss.
    pub(super) fn new(rate: f64, pace: Option<Duration>, sizes: BurstSizes) -> Self {
        // A gap is 1 + N delivered packets, N geometric with P(N = n) = (1 - q)^n q: mean 1 / q.
        // rate = E[size] / (E[size] + 1 / q)  =>  q = rate / (E[size] (1 - rate)).
        let start = if rate <= 0.0 {
            0.0
        } else {
            (rate / (sizes.mean() * (1.0 - rate))).min(1.0)
        };
        Self {
            sizes,
            start,
            pace_ns: pace.map(|p| recoup_time::saturating_nanos(p).max(1)),
            left: 0,
            deadline: Instant::ZERO,
            gap_start: false,
        }
    }

    /// One packet passing at `now`: `true` if lost. `draw` gives uniform numbers in [0, 1).
    pub(super) fn step(&mut self, now: Instant, mut draw: impl FnMut() -> f64) -> bool {
        if self.left > 0 && self.pace_ns.is_some() && now >= self.deadline {
            // The burst's time is up: this packet is the first of the gap.
            self.left = 0;
            self.gap_start = true;
        }
        if self.left > 0 {
            self.left -= 1;
            self.gap_start = self.left == 0;
            return true;
        }
        if self.gap_start {
            self.gap_start = false;
            return false;
        }
        if draw() < self.start {
            // 1 - draw is in (0, 1].
            let size = self.sizes.quantile(1.0 - draw());
            self.left = size - 1;
            if let Some(pace) = self.pace_ns {
                self.deadline =
                    Instant::from_nanos(now.as_nanos().saturating_add(pace * u64::from(size)));
            }
            self.gap_start = self.left == 0;
            return true;
        }
        false
    }
}
