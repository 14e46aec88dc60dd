//! Corruption: netem's `corrupt P%` (a chosen datagram gets one random bit flipped at a random
//! byte, sch_netem.c `netem_enqueue`), with the two limits of the QUIC interop runner's
//! `corrupt-rate` scenario (quic-network-simulator `corrupt-rate-error-model.cc`): at most
//! `burst` datagrams corrupted in a row, and the flipped byte within the first `within` bytes,
//! where it usually hits the QUIC header.
//!
//! `corrupt 30%`, `corrupt 30% burst=3`, `corrupt 2% burst=3 within=50`.

use std::str::FromStr;

use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::datagram::Datagram;
use crate::error::Error;
use crate::node::{ElementStats, Node, Output};
use crate::units::{prob_in, Prob};

/// What a corrupt element does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorruptSpec {
    /// Probability that a datagram is corrupted (netem's `corrupt` percentage).
    pub prob: Prob,
    /// At most this many corrupted in a row (the runner's `--burst_to_*`); `None`: no limit.
    pub burst: Option<u32>,
    /// Flip a bit within the first this many payload bytes; `None`: anywhere (netem).
    pub within: Option<usize>,
}

impl FromStr for CorruptSpec {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self, Error> {
        let mut words = input.split_whitespace();
        if words.next() != Some("corrupt") {
            return Err(Error::spec(
                input,
                input,
                "expected `corrupt P% [burst=N] [within=B]`",
            ));
        }
        let percent = words
            .next()
            .ok_or_else(|| Error::spec(input, input, "missing percentage"))?;
        let prob = prob_in(input, percent)?;
        let mut spec = Self {
            prob,
            burst: None,
            within: None,
        };
        for word in words {
            let positive = |v: &str| match v.parse::<u32>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(Error::spec(input, word, "expected a whole number above 0")),
            };
            match word.split_once('=') {
                Some(("burst", v)) => spec.burst = Some(positive(v)?),
                Some(("within", v)) => spec.within = Some(positive(v)? as usize),
                _ => {
                    return Err(Error::spec(
                        input,
                        word,
                        "unknown argument (burst=N, within=BYTES)",
                    ))
                }
            }
        }
        Ok(spec)
    }
}

/// Flips one bit in chosen datagrams and forwards every datagram at once.
#[derive(Debug)]
pub struct Corrupt {
    spec: CorruptSpec,
    rng: ChaCha8Rng,
    in_a_row: u32,
    corrupted: u64,
    stats: ElementStats,
}

impl Corrupt {
    #[must_use]
    pub fn new(spec: CorruptSpec, rng: ChaCha8Rng) -> Self {
        Self {
            spec,
            rng,
            in_a_row: 0,
            corrupted: 0,
            stats: ElementStats::default(),
        }
    }

    /// Datagrams corrupted so far.
    #[must_use]
    pub fn corrupted(&self) -> u64 {
        self.corrupted
    }

    fn decide(&mut self) -> bool {
        // The runner's model: a burst at the limit forces one clean datagram.
        if self.spec.burst.is_some_and(|b| self.in_a_row >= b) {
            self.in_a_row = 0;
            return false;
        }
        let hit = self.spec.prob.picks(self.rng.next_u32());
        self.in_a_row = if hit { self.in_a_row + 1 } else { 0 };
        hit
    }
}

impl Node for Corrupt {
    fn process(&mut self, input: Option<Datagram>, _now: Instant) -> Output {
        let Some(mut d) = input else {
            return Output::None;
        };
        self.stats.on_receive(&d);
        if self.decide() && !d.payload.is_empty() {
            let span = self
                .spec
                .within
                .map_or(d.payload.len(), |w| w.min(d.payload.len()));
            let at = self.rng.gen_range(0..span);
            d.payload[at] ^= 1 << self.rng.gen_range(0..8);
            self.corrupted += 1;
        }
        self.stats.on_forward(&d);
        Output::Datagram(d)
    }

    fn stats(&self) -> ElementStats {
        self.stats
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::rng::element_rng;

    fn run(spec: &str, n: usize, len: usize) -> (Corrupt, Vec<Vec<u8>>) {
        let spec: CorruptSpec = spec.parse().expect("spec");
        let mut c = Corrupt::new(spec, element_rng(7, "down/0-corrupt"));
        let a: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let out = (0..n)
            .map(
                |_| match c.process(Some(Datagram::new(a, a, vec![0; len])), Instant::ZERO) {
                    Output::Datagram(d) => d.payload,
                    other => panic!("corrupt must forward at once, got {other:?}"),
                },
            )
            .collect();
        (c, out)
    }

    #[test]
    fn parses_netem_syntax_and_the_runner_limits() {
        let s: CorruptSpec = "corrupt 30% burst=3 within=50".parse().expect("valid");
        assert_eq!(s.prob, Prob::from_fraction(0.3));
        assert_eq!((s.burst, s.within), (Some(3), Some(50)));
        let s: CorruptSpec = "corrupt 2"
            .parse()
            .expect("tc reads a bare number as percent");
        assert_eq!(
            (s.prob, s.burst, s.within),
            (Prob::from_fraction(0.02), None, None)
        );
        for bad in [
            "corrupt",
            "corrupt 101%",
            "corrupt 5% burst=0",
            "corrupt 5% limit=3",
        ] {
            let e = bad.parse::<CorruptSpec>().expect_err(bad).to_string();
            assert!(e.contains(bad), "{bad}: the message names the input: {e}");
        }
    }

    #[test]
    fn a_corrupted_datagram_differs_in_exactly_one_bit() {
        let (c, out) = run("corrupt 30%", 2000, 100);
        let flipped: Vec<u32> = out
            .iter()
            .map(|p| p.iter().map(|b| b.count_ones()).sum())
            .collect();
        assert!(flipped.iter().all(|&n| n <= 1), "netem flips one bit");
        let hits = flipped.iter().filter(|&&n| n == 1).count();
        assert_eq!(hits as u64, c.corrupted());
        // 600 expected; 5 standard deviations of Binomial(2000, 0.3) is 102.
        assert!(
            (500..=700).contains(&hits),
            "{hits} of 2000 corrupted at 30 %"
        );
    }

    #[test]
    fn burst_and_window_limits_hold() {
        let (_, out) = run("corrupt 100% burst=3 within=50", 400, 1200);
        let hit: Vec<bool> = out.iter().map(|p| p.iter().any(|&b| b != 0)).collect();
        // At 100 % the runner's model corrupts three, lets one through, and so on.
        assert!(hit.chunks(4).all(|c| c == [true, true, true, false]));
        assert!(out.iter().all(|p| p[50..].iter().all(|&b| b == 0)));
    }
}
