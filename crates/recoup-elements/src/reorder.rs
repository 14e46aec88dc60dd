//! Reordering: netem's `delay T [J] reorder P% [C%] [gap N]` (tc-netem(8); sch_netem.c
//! `netem_enqueue`). netem reorders by sending some datagrams at once, ahead of the ones that
//! wait out the delay, so reordering needs a delay (tc refuses `reorder` without one). After
//! each datagram sent ahead, the next `gap - 1` are delayed; each one after that is sent ahead
//! with probability `P` (correlated by `C`, [`crate::crandom`]) or delayed. `gap` defaults to 1:
//! every datagram is a candidate. The counter starts at 0, so the first `gap - 1` are delayed.
//!
//! Here the element is the delay itself, written as in tc: `delay 10ms reorder 25% 50% gap 5`
//! in a chain (and `recoup link --delay 10ms --reorder "25% 50% gap 5"`). Delayed datagrams go
//! through a [`Delay`] with its jitter, which never reorders them among themselves (netem's
//! jitter can); datagrams sent ahead skip only this element's delay, not a rate limit or queue
//! earlier in the chain.

use std::str::FromStr;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::crandom::Correlated;
use crate::datagram::Datagram;
use crate::delay::Delay;
use crate::error::Error;
use crate::node::{ElementStats, Node, Output};
use crate::units::{prob_in, Prob};

/// netem's `reorder P% [C%] [gap N]`, without the delay it applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReorderSpec {
    /// Probability that a candidate is sent ahead.
    pub prob: Prob,
    /// netem's correlation of successive decisions (0 %: independent).
    pub correlation: Prob,
    /// After a datagram sent ahead, `gap - 1` are delayed before the next candidate (at least 1).
    pub gap: u32,
}

impl FromStr for ReorderSpec {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self, Error> {
        let words: Vec<&str> = input.split_whitespace().collect();
        let (percents, gap) = match words.as_slice() {
            ["reorder", rest @ ..] => match rest {
                [head @ .., "gap", n] => {
                    let gap = match n.parse::<u32>() {
                        Ok(g) if g > 0 => g,
                        _ => {
                            return Err(Error::spec(input, n, "gap must be a whole number above 0"))
                        }
                    };
                    (head, Some(gap))
                }
                _ => (rest, None),
            },
            _ => {
                return Err(Error::spec(
                    input,
                    input,
                    "expected `reorder P% [CORRELATION%] [gap N]`",
                ))
            }
        };
        let (prob, correlation) = match percents {
            [p] => (prob_in(input, p)?, Prob::ZERO),
            [p, c] => (prob_in(input, p)?, prob_in(input, c)?),
            [] => return Err(Error::spec(input, input, "missing percentage")),
            [_, _, extra, ..] => {
                return Err(Error::spec(
                    input,
                    extra,
                    "unexpected argument (`reorder P% [CORRELATION%] [gap N]`)",
                ))
            }
        };
        // q_netem.c: "gap specified without reorder probability".
        if prob == Prob::ZERO && gap.is_some() {
            return Err(Error::spec(
                input,
                input,
                "gap without a reorder percentage",
            ));
        }
        Ok(Self {
            prob,
            correlation,
            gap: gap.unwrap_or(1),
        })
    }
}

/// A delay line that sends chosen datagrams at once, ahead of the delayed ones.
#[derive(Debug)]
pub struct Reorder {
    spec: ReorderSpec,
    rng: ChaCha8Rng,
    crandom: Correlated,
    /// netem's `q->counter`: datagrams delayed since the last one sent ahead.
    counter: u32,
    delay: Delay,
    reordered: u64,
    stats: ElementStats,
}

impl Reorder {
    /// Decisions draw from `rng`, the delay line's jitter from `jitter_rng`.
    #[must_use]
    pub fn new(
        spec: ReorderSpec,
        delay: Duration,
        jitter: Duration,
        mut rng: ChaCha8Rng,
        jitter_rng: ChaCha8Rng,
    ) -> Self {
        let crandom = Correlated::new(spec.correlation, &mut rng);
        Self {
            spec,
            rng,
            crandom,
            counter: 0,
            delay: Delay::new(delay, jitter, jitter_rng),
            reordered: 0,
            stats: ElementStats::default(),
        }
    }

    /// Datagrams sent ahead of the delay so far (whether or not one was waiting to be
    /// overtaken).
    #[must_use]
    pub fn reordered(&self) -> u64 {
        self.reordered
    }

    /// sch_netem.c: delayed if `q->counter < q->gap - 1 || q->reorder < get_crandom(...)`; the
    /// draw is only taken once the gap is over.
    fn send_ahead(&mut self) -> bool {
        if self.counter < self.spec.gap - 1
            || !self.spec.prob.picks(self.crandom.next(&mut self.rng))
        {
            self.counter = self.counter.saturating_add(1);
            return false;
        }
        self.counter = 0;
        true
    }

    fn count(&mut self, out: Output) -> Output {
        if let Output::Datagram(d) = &out {
            self.stats.on_forward(d);
        }
        out
    }
}

impl Node for Reorder {
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
        let input = match input {
            Some(d) => {
                self.stats.on_receive(&d);
                if self.send_ahead() {
                    // netem puts it at the head of its queue. The driver calls again with
                    // `None` at once, which lets the delay line give its wake-up.
                    self.reordered += 1;
                    return self.count(Output::Datagram(d));
                }
                Some(d)
            }
            None => None,
        };
        let out = self.delay.process(input, now);
        self.count(out)
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

    const MS: u64 = 1_000_000;

    fn reorder(spec: &str, seed: u64, delay_us: u64) -> Reorder {
        Reorder::new(
            spec.parse().expect("spec"),
            Duration::from_micros(delay_us),
            Duration::ZERO,
            element_rng(seed, "down/2-reorder"),
            element_rng(seed, "down/2-reorder/jitter"),
        )
    }

    /// Drives the element as the simulator does: datagram `i` arrives at `i` ms; every
    /// wake-up is honoured at its time. Returns (time left, id) in the order they left.
    fn drive(node: &mut Reorder, n: u64) -> Vec<(u64, u64)> {
        let a: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let mut out = Vec::new();
        let mut step = |node: &mut Reorder, input: Option<Datagram>, now: u64| {
            let mut input = input;
            loop {
                match node.process(input.take(), Instant::from_nanos(now)) {
                    Output::Datagram(d) => out.push((now, d.id)),
                    Output::Callback(t) => return Some(t.as_nanos()),
                    Output::None => return None,
                }
            }
        };
        let mut wake = None;
        for i in 0..n {
            let now = i * MS;
            while let Some(w) = wake.filter(|w| *w <= now) {
                wake = step(node, None, w);
            }
            wake = step(node, Some(Datagram::new(a, a, vec![0; 10]).with_id(i)), now);
        }
        while let Some(w) = wake {
            wake = step(node, None, w);
        }
        out
    }

    #[test]
    fn every_fifth_overtakes_the_delayed_ones_at_full_probability() {
        // reorder 100% gap 5 on a 10.5 ms delay, one datagram per ms: datagrams 4, 9, 14, 19
        // leave on arrival, the others 10.5 ms after theirs.
        let mut node = reorder("reorder 100% gap 5", 1, 10_500);
        let out = drive(&mut node, 20);
        let ids: Vec<u64> = out.iter().map(|o| o.1).collect();
        assert_eq!(
            ids,
            [4, 9, 0, 1, 2, 3, 14, 5, 6, 7, 8, 19, 10, 11, 12, 13, 15, 16, 17, 18]
        );
        for (t, id) in out {
            let delay = if id % 5 == 4 { 0 } else { 10_500_000 };
            assert_eq!(t, id * MS + delay, "datagram {id}");
        }
        assert_eq!(node.reordered(), 4);
        assert_eq!((node.stats().received, node.stats().forwarded), (20, 20));
    }

    #[test]
    fn the_gap_is_kept_and_candidates_go_ahead_at_the_binomial_rate() {
        const SEED: u64 = 21;
        let (n, p, gap) = (20_000u64, 0.25, 5);
        println!("seed {SEED}, n {n}, p {p}, gap {gap}");
        // A 100 ms delay: a datagram that left at its own arrival was sent ahead.
        let mut node = reorder("reorder 25% gap 5", SEED, 100_000);
        let out = drive(&mut node, n);
        assert_eq!(out.len() as u64, n, "nothing lost or duplicated");
        let mut ahead: Vec<u64> = out
            .iter()
            .filter(|(t, id)| *t == id * MS)
            .map(|o| o.1)
            .collect();
        ahead.sort_unstable();
        assert_eq!(ahead.len() as u64, node.reordered());
        // netem's counter starts at 0: the first gap - 1 are delayed, and gap - 1 after each.
        let mut previous: Option<u64> = None;
        for &a in &ahead {
            let earliest = previous.map_or(gap - 1, |p| p + gap);
            assert!(
                a >= earliest,
                "{a} sent ahead within the gap after {previous:?}"
            );
            previous = Some(a);
        }
        // Candidates: every datagram past its gap, up to and including one sent ahead.
        let candidates: u64 = {
            let mut count = 0;
            let mut since = 0;
            let mut next_ahead = ahead.iter().peekable();
            for i in 0..n {
                if since >= gap - 1 {
                    count += 1;
                }
                if next_ahead.peek() == Some(&&i) {
                    next_ahead.next();
                    since = 0;
                } else {
                    since += 1;
                }
            }
            count
        };
        let mean = candidates as f64 * p;
        let bound = 5.0 * (candidates as f64 * p * (1.0 - p)).sqrt();
        let got = ahead.len() as f64;
        assert!(
            (got - mean).abs() <= bound,
            "{got} of {candidates} candidates ahead at {p}: outside {mean} ± {bound:.0} \
             (seed {SEED})"
        );
    }

    #[test]
    fn zero_percent_never_reorders_and_the_seed_fixes_the_pattern() {
        let out = drive(&mut reorder("reorder 0%", 1, 3_000), 200);
        assert!(out.windows(2).all(|w| w[0].1 < w[1].1));
        let a = drive(&mut reorder("reorder 30% 50% gap 2", 9, 3_000), 500);
        assert_eq!(
            a,
            drive(&mut reorder("reorder 30% 50% gap 2", 9, 3_000), 500)
        );
        assert_ne!(
            a,
            drive(&mut reorder("reorder 30% 50% gap 2", 10, 3_000), 500)
        );
    }

    #[test]
    fn parses_netem_syntax_and_names_bad_values() {
        let s: ReorderSpec = "reorder 25% 50% gap 5".parse().expect("valid");
        assert_eq!(
            s,
            ReorderSpec {
                prob: Prob::from_fraction(0.25),
                correlation: Prob::from_fraction(0.5),
                gap: 5
            }
        );
        let s: ReorderSpec = "reorder 10".parse().expect("bare percent");
        assert_eq!(
            (s.prob, s.correlation, s.gap),
            (Prob::from_fraction(0.1), Prob::ZERO, 1)
        );
        for (bad, part, why) in [
            ("reorder 125%", "125%", "between 0 and 100"),
            ("reorder 25% gap 0", "0", "above 0"),
            ("reorder 25% gap x", "x", "above 0"),
            ("reorder 0% gap 3", "reorder 0% gap 3", "gap without"),
            ("reorder", "reorder", "missing percentage"),
            ("reorder gap 5", "reorder gap 5", "missing percentage"),
            ("reorder 1% 2% 3%", "3%", "unexpected argument"),
        ] {
            let e = bad.parse::<ReorderSpec>().expect_err(bad).to_string();
            assert!(
                e.contains(&format!("`{part}`")) && e.contains(why) && e.contains(bad),
                "{bad}: {e}"
            );
        }
    }
}
