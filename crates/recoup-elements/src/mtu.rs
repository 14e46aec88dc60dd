//! MTU: a hop that drops every datagram larger than its limit, as a router with a smaller MTU
//! drops a packet with the don't-fragment bit set (QUIC sends every datagram so, RFC 9000 §14).
//! The limit counts UDP payload bytes, the size a QUIC endpoint chooses. It may shrink once,
//! `after` the first datagram the element sees, to play a route change into a smaller MTU: the
//! black hole a sender's path MTU discovery must detect (RFC 8899 §4.3).
//!
//! `mtu 1400`, `mtu 1452 then=1350 after=2s`.

use std::str::FromStr;
use std::time::Duration;

use recoup_time::Instant;

use crate::datagram::Datagram;
use crate::error::Error;
use crate::node::{ElementStats, Node, Output};
use crate::units::parse_duration;

/// The largest datagram a hop carries, and perhaps a smaller one later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtuSpec {
    /// UDP payload bytes carried at first.
    pub max: usize,
    /// The smaller limit and when it starts, counted from the first datagram.
    pub shrink: Option<(usize, Duration)>,
}

impl FromStr for MtuSpec {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self, Error> {
        let mut words = input.split_whitespace();
        if words.next() != Some("mtu") {
            return Err(Error::spec(
                input,
                input,
                "expected `mtu BYTES [then=BYTES after=TIME]`",
            ));
        }
        let bytes = |word: &str, v: &str| {
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| Error::spec(input, word, "expected a payload size in bytes"))
        };
        let max = match words.next() {
            Some(w) => bytes(w, w)?,
            None => return Err(Error::spec(input, input, "missing the size in bytes")),
        };
        let (mut then, mut after) = (None, None);
        for word in words {
            match word.split_once('=') {
                Some(("then", v)) => then = Some(bytes(word, v)?),
                Some(("after", v)) => {
                    after = Some(parse_duration(v).map_err(|d| Error::spec(input, word, d))?);
                }
                _ => {
                    return Err(Error::spec(
                        input,
                        word,
                        "unknown argument (then=BYTES, after=TIME)",
                    ))
                }
            }
        }
        let shrink = match (then, after) {
            (Some(then), Some(after)) => Some((then, after)),
            (None, None) => None,
            (Some(_), None) => return Err(Error::spec(input, input, "then= needs after=TIME")),
            (None, Some(_)) => return Err(Error::spec(input, input, "after= needs then=BYTES")),
        };
        Ok(Self { max, shrink })
    }
}

/// Drops datagrams above the current limit, forwards the others at once.
#[derive(Debug)]
pub struct Mtu {
    spec: MtuSpec,
    start: Option<Instant>,
    stats: ElementStats,
}

impl Mtu {
    #[must_use]
    pub fn new(spec: MtuSpec) -> Self {
        Self {
            spec,
            start: None,
            stats: ElementStats::default(),
        }
    }

    fn limit(&self, since_start: Duration) -> usize {
        match self.spec.shrink {
            Some((then, after)) if since_start >= after => then,
            _ => self.spec.max,
        }
    }
}

impl Node for Mtu {
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
        let Some(d) = input else {
            return Output::None;
        };
        let start = *self.start.get_or_insert(now);
        let limit = self.limit(now.saturating_duration_since(start));
        self.stats.pass_or_drop(d, |d| d.payload.len() > limit)
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

    #[test]
    fn drops_what_exceeds_the_limit_and_the_smaller_one_after_the_shrink() {
        let spec: MtuSpec = "mtu 1452 then=1350 after=2s".parse().expect("spec");
        let mut m = Mtu::new(spec);
        let a: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let t0 = Instant::from_nanos(5_000_000_000);
        let mut passed = |ms: u64, len: usize| {
            let now = t0 + Duration::from_millis(ms);
            matches!(
                m.process(Some(Datagram::new(a, a, vec![0; len])), now),
                Output::Datagram(_)
            )
        };
        let got: Vec<bool> = [
            (0, 1452),
            (0, 1453),
            (1999, 1400),
            (2000, 1400),
            (2000, 1350),
        ]
        .iter()
        .map(|&(ms, len)| passed(ms, len))
        .collect();
        assert_eq!(got, [true, false, true, false, true]);
        assert_eq!(m.stats().dropped, 2);
    }

    #[test]
    fn parses_and_names_the_bad_word() {
        assert_eq!(
            "mtu 1400".parse::<MtuSpec>().expect("valid"),
            MtuSpec {
                max: 1400,
                shrink: None
            }
        );
        for (bad, word) in [
            ("mtu", "mtu"),
            ("mtu big", "big"),
            ("mtu 0", "0"),
            ("mtu 1400 then=1300", "mtu 1400 then=1300"),
            ("mtu 1400 then=x after=1s", "then=x"),
            ("mtu 1400 size=2", "size=2"),
        ] {
            let e = bad.parse::<MtuSpec>().expect_err(bad).to_string();
            assert!(e.contains(word), "{bad}: {e}");
        }
    }
}
