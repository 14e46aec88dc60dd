//! Blackhole: the QUIC interop runner's `blackhole` scenario (quic-network-simulator
//! `sim/scenarios/blackhole`): traffic flows for `on`, then everything is dropped for `off`,
//! `repeat` times, then traffic flows for good. The clock starts at the first datagram the
//! element sees, so each client of `recoup link` meets the same pattern from its handshake on.
//!
//! `blackhole on=5s off=2s`, `blackhole on=1s off=500ms repeat=3`.

use std::str::FromStr;
use std::time::Duration;

use recoup_time::Instant;

use crate::datagram::Datagram;
use crate::error::Error;
use crate::node::{ElementStats, Node, Output};
use crate::units::parse_duration;

/// When a blackhole drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlackholeSpec {
    /// Traffic flows this long before each outage.
    pub on: Duration,
    /// Each outage lasts this long.
    pub off: Duration,
    /// Number of outages (the runner's `--repeat`, default 1).
    pub repeat: u32,
}

impl FromStr for BlackholeSpec {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self, Error> {
        let mut words = input.split_whitespace();
        if words.next() != Some("blackhole") {
            return Err(Error::spec(
                input,
                input,
                "expected `blackhole on=T off=T [repeat=N]`",
            ));
        }
        let (mut on, mut off, mut repeat) = (None, None, 1);
        for word in words {
            let duration = |v: &str| parse_duration(v).map_err(|d| Error::spec(input, word, d));
            match word.split_once('=') {
                Some(("on", v)) => on = Some(duration(v)?),
                Some(("off", v)) => off = Some(duration(v)?),
                Some(("repeat", v)) => {
                    repeat = v.parse().map_err(|_| {
                        Error::spec(input, word, "expected a whole number of outages")
                    })?;
                }
                _ => {
                    return Err(Error::spec(
                        input,
                        word,
                        "unknown argument (on=TIME, off=TIME, repeat=N)",
                    ))
                }
            }
        }
        match (on, off) {
            (Some(on), Some(off)) => Ok(Self { on, off, repeat }),
            (None, _) => Err(Error::spec(input, input, "missing on=TIME")),
            (_, None) => Err(Error::spec(input, input, "missing off=TIME")),
        }
    }
}

/// Drops every datagram during the outages, forwards the others at once.
#[derive(Debug)]
pub struct Blackhole {
    spec: BlackholeSpec,
    start: Option<Instant>,
    stats: ElementStats,
}

impl Blackhole {
    #[must_use]
    pub fn new(spec: BlackholeSpec) -> Self {
        Self {
            spec,
            start: None,
            stats: ElementStats::default(),
        }
    }

    fn blocked(&self, since_start: Duration) -> bool {
        let cycle = self.spec.on + self.spec.off;
        if cycle.is_zero() {
            return false;
        }
        let n = since_start.as_nanos() / cycle.as_nanos();
        if n >= u128::from(self.spec.repeat) {
            return false;
        }
        since_start.as_nanos() % cycle.as_nanos() >= self.spec.on.as_nanos()
    }
}

impl Node for Blackhole {
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
        let Some(d) = input else {
            return Output::None;
        };
        let start = *self.start.get_or_insert(now);
        let blocked = self.blocked(now.saturating_duration_since(start));
        self.stats.pass_or_drop(d, |_| blocked)
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
    fn drops_exactly_during_each_outage_then_never() {
        let spec: BlackholeSpec = "blackhole on=1s off=500ms repeat=2".parse().expect("spec");
        let mut b = Blackhole::new(spec);
        let a: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        // The first datagram at 10 s starts the element's clock.
        let t0 = Instant::from_nanos(10_000_000_000);
        let passed = |b: &mut Blackhole, ms: u64| {
            let now = t0 + Duration::from_millis(ms);
            matches!(
                b.process(Some(Datagram::new(a, a, vec![1])), now),
                Output::Datagram(_)
            )
        };
        let pattern: Vec<bool> = [0, 999, 1000, 1499, 1500, 2499, 2500, 2999, 3000, 60_000]
            .iter()
            .map(|&ms| passed(&mut b, ms))
            .collect();
        assert_eq!(
            pattern,
            [true, true, false, false, true, true, false, false, true, true]
        );
        assert_eq!(b.stats().dropped, 4);
    }

    #[test]
    fn parses_the_runner_arguments() {
        let s: BlackholeSpec = "blackhole on=5s off=2s".parse().expect("valid");
        assert_eq!(
            s,
            BlackholeSpec {
                on: Duration::from_secs(5),
                off: Duration::from_secs(2),
                repeat: 1
            }
        );
        for bad in [
            "blackhole on=5s",
            "blackhole off=1s on=x",
            "blackhole on=1s off=1s n=2",
        ] {
            let e = bad.parse::<BlackholeSpec>().expect_err(bad).to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }
}
