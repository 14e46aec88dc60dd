//! netem's correlated random numbers (sch_netem.c `get_crandom`), which its `duplicate` and
//! `reorder` decisions draw from: each answer is a weighted mean of a fresh uniform `u32` and
//! the previous answer, with weight `rho + 1` (out of 2^32) on the previous one. At 0 %
//! correlation it is a plain uniform draw.
//!
//! As in the kernel, a correlation above 0 also narrows the distribution of the answers around
//! one half, so the share of events picked drifts from the configured percentage towards 50 %;
//! we keep the kernel's formula rather than a corrected one, so that a `tc` command and its
//! recoup spelling behave alike.

use rand::RngCore;

use crate::units::Prob;

/// One correlated stream (`struct crndstate`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Correlated {
    rho: u32,
    last: u32,
}

impl Correlated {
    /// `init_crandom`: the previous answer starts as a random draw, taken only when correlated
    /// so that an uncorrelated element draws exactly one `u32` per decision.
    pub(crate) fn new(correlation: Prob, rng: &mut impl RngCore) -> Self {
        let last = if correlation == Prob::ZERO {
            0
        } else {
            rng.next_u32()
        };
        Self {
            rho: correlation.0,
            last,
        }
    }

    /// The next answer (`get_crandom`).
    pub(crate) fn next(&mut self, rng: &mut impl RngCore) -> u32 {
        let value = rng.next_u32();
        if self.rho == 0 {
            return value;
        }
        let rho = u64::from(self.rho) + 1;
        // At most (2^32 - 1) * 2^32: no overflow in u64, and the mean fits a u32.
        let answer = (u64::from(value) * ((1u64 << 32) - rho) + u64::from(self.last) * rho) >> 32;
        self.last = u32::try_from(answer).unwrap_or(u32::MAX);
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::element_rng;

    #[test]
    fn uncorrelated_is_the_plain_stream_and_full_correlation_never_moves() {
        let mut plain = element_rng(3, "x");
        let mut rng = element_rng(3, "x");
        let mut c = Correlated::new(Prob::ZERO, &mut rng);
        for _ in 0..16 {
            assert_eq!(c.next(&mut rng), plain.next_u32());
        }
        // rho + 1 = 2^32: the fresh value has no weight, the first answer repeats for ever.
        let mut c = Correlated::new(Prob::ONE, &mut rng);
        let first = c.next(&mut rng);
        assert!((0..1000).all(|_| c.next(&mut rng) == first));
    }

    #[test]
    fn half_correlation_is_the_kernel_mean() {
        let mut rng = element_rng(5, "y");
        let mut c = Correlated::new(Prob::from_fraction(0.5), &mut rng);
        let mut replay = element_rng(5, "y");
        let mut last = u64::from(replay.next_u32());
        let rho = u64::from(Prob::from_fraction(0.5).0) + 1;
        for _ in 0..100 {
            let value = u64::from(replay.next_u32());
            last = (value * ((1 << 32) - rho) + last * rho) >> 32;
            assert_eq!(u64::from(c.next(&mut rng)), last);
        }
    }
}
