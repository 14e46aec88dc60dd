//! Duplication: netem's `duplicate P% [C%]` (sch_netem.c `netem_enqueue`): a chosen datagram
//! is sent twice. The decision is `q->duplicate >= get_crandom(&q->dup_cor)`, with netem's
//! correlation ([`crate::crandom`]).
//!
//! netem clones the packet before its corruption and delay and enqueues the clone again at the
//! root qdisc with duplication switched off, so the copy meets loss, corruption and delay on its
//! own. Here the copy leaves right behind the original, at the same instant, and crosses the
//! rest of the chain as a datagram of its own: put `duplicate` first in a chain and the copy
//! draws its own loss, corruption and jitter, as in netem. A copy is never copied again.
//!
//! `duplicate 1%`, `duplicate 5% 25%`.

use std::collections::VecDeque;
use std::str::FromStr;

use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::crandom::Correlated;
use crate::datagram::Datagram;
use crate::error::Error;
use crate::node::{ElementStats, Node, Output};
use crate::units::{prob_in, Prob};

/// What a duplicate element does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DuplicateSpec {
    /// Probability that a datagram is sent twice.
    pub prob: Prob,
    /// netem's correlation of successive decisions (0 %: independent).
    pub correlation: Prob,
}

impl FromStr for DuplicateSpec {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self, Error> {
        let words: Vec<&str> = input.split_whitespace().collect();
        match words.as_slice() {
            ["duplicate", p] => Ok(Self {
                prob: prob_in(input, p)?,
                correlation: Prob::ZERO,
            }),
            ["duplicate", p, c] => Ok(Self {
                prob: prob_in(input, p)?,
                correlation: prob_in(input, c)?,
            }),
            ["duplicate"] => Err(Error::spec(input, input, "missing percentage")),
            ["duplicate", _, _, extra, ..] => Err(Error::spec(
                input,
                extra,
                "unexpected argument (`duplicate P% [CORRELATION%]`)",
            )),
            _ => Err(Error::spec(
                input,
                input,
                "expected `duplicate P% [CORRELATION%]`",
            )),
        }
    }
}

/// Forwards every datagram at once, and a copy right behind each chosen one.
#[derive(Debug)]
pub struct Duplicate {
    spec: DuplicateSpec,
    rng: ChaCha8Rng,
    crandom: Correlated,
    /// The datagram and its copy, until the driver has taken both.
    out: VecDeque<Datagram>,
    duplicated: u64,
    stats: ElementStats,
}

impl Duplicate {
    #[must_use]
    pub fn new(spec: DuplicateSpec, mut rng: ChaCha8Rng) -> Self {
        let crandom = Correlated::new(spec.correlation, &mut rng);
        Self {
            spec,
            rng,
            crandom,
            out: VecDeque::new(),
            duplicated: 0,
            stats: ElementStats::default(),
        }
    }

    /// Copies sent so far.
    #[must_use]
    pub fn duplicated(&self) -> u64 {
        self.duplicated
    }
}

impl Node for Duplicate {
    fn process(&mut self, input: Option<Datagram>, _now: Instant) -> Output {
        if let Some(d) = input {
            self.stats.on_receive(&d);
            // The driver calls again with `None` after each datagram, which hands out the copy.
            let copy = self
                .spec
                .prob
                .picks(self.crandom.next(&mut self.rng))
                .then(|| d.clone());
            self.duplicated += u64::from(copy.is_some());
            self.out.push_back(d);
            self.out.extend(copy);
        }
        match self.out.pop_front() {
            Some(d) => {
                self.stats.on_forward(&d);
                Output::Datagram(d)
            }
            None => Output::None,
        }
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

    /// Feeds datagrams `0..n` (tagged by index) and drains after each; returns the tags out.
    fn run(spec: &str, seed: u64, n: u64) -> (Duplicate, Vec<u64>) {
        let spec: DuplicateSpec = spec.parse().expect("spec");
        let mut dup = Duplicate::new(spec, element_rng(seed, "down/0-duplicate"));
        let a: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let mut out = Vec::new();
        for i in 0..n {
            let mut input = Some(Datagram::new(a, a, vec![7; 20]).with_id(i));
            while let Output::Datagram(d) = dup.process(input.take(), Instant::ZERO) {
                assert_eq!(d.payload, [7; 20], "a copy is the datagram unchanged");
                out.push(d.id);
            }
        }
        (dup, out)
    }

    #[test]
    fn the_share_of_copies_is_binomial_and_each_copy_follows_its_original() {
        const SEED: u64 = 11;
        let (n, p) = (20_000u64, 0.05);
        println!("seed {SEED}, n {n}, p {p}");
        let (dup, out) = run("duplicate 5%", SEED, n);
        // Every datagram once, in order, its copy (if any) straight after it.
        let (mut k, mut copies) = (0, 0u64);
        for i in 0..n {
            assert_eq!(out.get(k), Some(&i), "datagram {i} missing or out of order");
            k += 1;
            if out.get(k) == Some(&i) {
                copies += 1;
                k += 1;
            }
        }
        assert_eq!(k, out.len(), "nothing else left the element");
        assert_eq!(copies, dup.duplicated());
        assert_eq!(dup.stats().forwarded, n + copies);
        // Five standard deviations of Binomial(n, p) either side of n p.
        let mean = n as f64 * p;
        let bound = 5.0 * (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (copies as f64 - mean).abs() <= bound,
            "{copies} copies of {n} at {p}: outside {mean} ± {bound:.0} (seed {SEED})"
        );
    }

    #[test]
    fn none_at_zero_all_at_full_and_the_seed_fixes_the_pattern() {
        assert_eq!(run("duplicate 0%", 1, 500).0.duplicated(), 0);
        let (all, out) = run("duplicate 100%", 1, 500);
        assert_eq!((all.duplicated(), out.len()), (500, 1000));
        assert_eq!(
            run("duplicate 30% 50%", 4, 500).1,
            run("duplicate 30% 50%", 4, 500).1
        );
        assert_ne!(
            run("duplicate 30%", 4, 500).1,
            run("duplicate 30%", 5, 500).1
        );
        // Full correlation repeats the first decision for ever: all copies or none.
        let (c, _) = run("duplicate 50% 100%", 2, 500);
        assert!([0, 500].contains(&c.duplicated()), "{}", c.duplicated());
    }

    #[test]
    fn parses_netem_syntax_and_names_bad_values() {
        let s: DuplicateSpec = "duplicate 1% 25%".parse().expect("valid");
        assert_eq!(
            s,
            DuplicateSpec {
                prob: Prob::from_fraction(0.01),
                correlation: Prob::from_fraction(0.25)
            }
        );
        let s: DuplicateSpec = "duplicate 2"
            .parse()
            .expect("tc reads a bare number as percent");
        assert_eq!(s.prob, Prob::from_fraction(0.02));
        for (bad, part, why) in [
            ("duplicate 150%", "150%", "between 0 and 100"),
            ("duplicate", "duplicate", "missing percentage"),
            ("duplicate 1% x", "x", "not a percentage"),
            ("duplicate 1% 2% 3%", "3%", "unexpected argument"),
        ] {
            let e = bad.parse::<DuplicateSpec>().expect_err(bad).to_string();
            assert!(
                e.contains(&format!("`{part}`")) && e.contains(why) && e.contains(bad),
                "{bad}: {e}"
            );
        }
    }
}
