//! Element chains described as strings, e.g.
//! `bernoulli 1% | droptail packets=100 | rate 12Mbps | delay 30ms`.
//!
//! Elements are separated by `|` and run left to right. A queue description (`infinite`,
//! `droptail …`, `drophead …`, `codel …`) must be followed by the link it feeds (`rate …` or
//! `trace …`); a link without one gets an infinite queue, as in mm-link. netem's `reorder`
//! rides on a delay as in tc: `delay 10ms reorder 25% 50% gap 5`.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::blackhole::{Blackhole, BlackholeSpec};
use crate::corrupt::{Corrupt, CorruptSpec};
use crate::delay::Delay;
use crate::duplicate::{Duplicate, DuplicateSpec};
use crate::error::Error;
use crate::link::{Link, Service};
use crate::loss::{Loss, LossSpec};
use crate::mtu::{Mtu, MtuSpec};
use crate::node::Node;
use crate::queue::QueueSpec;
use crate::reorder::{Reorder, ReorderSpec};
use crate::rng::element_rng;
use crate::trace::Trace;
use crate::units::{parse_duration, parse_rate};

/// How a link serves bytes, before any file is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceSpec {
    /// Constant bit rate in bit/s (`rate 12Mbps`).
    Rate(u64),
    /// An `mm-link` trace file (`trace path/to/file`), resolved against the build's base folder.
    Trace(PathBuf),
}

/// One element of a chain.
#[derive(Clone, Debug, PartialEq)]
pub enum ElementSpec {
    /// A queue and the link it feeds.
    Link {
        /// Constant rate or trace.
        service: ServiceSpec,
        /// Queue discipline in front of it.
        queue: QueueSpec,
    },
    /// Fixed delay with optional jitter (`delay 30ms` or `delay 30ms 5ms`).
    Delay {
        /// Base one-way delay.
        delay: Duration,
        /// Half-width of the uniform jitter.
        jitter: Duration,
    },
    /// A loss model.
    Loss(LossSpec),
    /// Bit flips (`corrupt 2% burst=3`).
    Corrupt(CorruptSpec),
    /// Outages (`blackhole on=5s off=2s`).
    Blackhole(BlackholeSpec),
    /// A hop that drops datagrams above a size (`mtu 1400`, `mtu 1452 then=1350 after=2s`).
    Mtu(MtuSpec),
    /// Copies (`duplicate 1%`).
    Duplicate(DuplicateSpec),
    /// A delay that sends some datagrams ahead (`delay 10ms reorder 25% 50% gap 5`).
    Reorder {
        /// One-way delay of the datagrams not sent ahead; never zero.
        delay: Duration,
        /// Half-width of their uniform jitter.
        jitter: Duration,
        /// Which are sent ahead.
        reorder: ReorderSpec,
    },
}

impl ElementSpec {
    /// Short kind name used in element names.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Link {
                service: ServiceSpec::Rate(_),
                ..
            } => "rate",
            Self::Link {
                service: ServiceSpec::Trace(_),
                ..
            } => "trace",
            Self::Delay { .. } => "delay",
            Self::Loss(_) => "loss",
            Self::Corrupt(_) => "corrupt",
            Self::Blackhole(_) => "blackhole",
            Self::Mtu(_) => "mtu",
            Self::Duplicate(_) => "duplicate",
            Self::Reorder { .. } => "reorder",
        }
    }
}

const QUEUE_KINDS: [&str; 4] = ["infinite", "droptail", "drophead", "codel"];
const LOSS_KINDS: [&str; 12] = [
    "crn",
    "none",
    "bernoulli",
    "random",
    "loss",
    "drop",
    "gemodel",
    "state",
    "slotted-gemodel",
    "bursts",
    "replay",
    "onoff",
];

/// tc's rule (q_netem.c: "reordering not possible without specifying some delay"): netem
/// reorders by sending some datagrams ahead of delayed ones.
const REORDER_NEEDS_DELAY: &str =
    "reorder needs a delay: write it after one, as in tc (`delay 10ms reorder 25%`)";

/// An ordered chain of elements for one direction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathSpec {
    /// Elements in the order a datagram crosses them.
    pub elements: Vec<ElementSpec>,
}

impl FromStr for PathSpec {
    type Err = Error;

    fn from_str(input: &str) -> Result<Self, Error> {
        let mut elements = Vec::new();
        let mut pending_queue: Option<(QueueSpec, &str)> = None;
        for piece in input.split('|').map(str::trim) {
            if piece.is_empty() {
                if input.trim().is_empty() {
                    break;
                }
                return Err(Error::spec(input, piece, "empty element between `|`"));
            }
            let (kind, rest) = piece.split_once(char::is_whitespace).unwrap_or((piece, ""));
            let rest = rest.trim();
            let wrap = |e: Error| match e {
                Error::Spec { part, detail, .. } => Error::spec(input, &part, detail),
                other => other,
            };
            if QUEUE_KINDS.contains(&kind) {
                if let Some((_, q)) = pending_queue {
                    return Err(Error::spec(input, q, "queue not followed by a link"));
                }
                pending_queue = Some((piece.parse().map_err(wrap)?, piece));
                continue;
            }
            let element = match kind {
                "rate" | "trace" => {
                    let service = if kind == "rate" {
                        ServiceSpec::Rate(
                            parse_rate(rest).map_err(|d| Error::spec(input, piece, d))?,
                        )
                    } else if rest.is_empty() {
                        return Err(Error::spec(input, piece, "missing trace file"));
                    } else {
                        ServiceSpec::Trace(PathBuf::from(rest))
                    };
                    let queue = pending_queue.take().map_or(QueueSpec::Infinite, |(q, _)| q);
                    ElementSpec::Link { service, queue }
                }
                "delay" => {
                    // tc's order: the delay and its jitter, then what rides on it.
                    let words: Vec<&str> = rest.split_whitespace().collect();
                    let split = words.iter().position(|w| *w == "reorder");
                    let (timing, reorder) = words.split_at(split.unwrap_or(words.len()));
                    let dur = |w: &str| parse_duration(w).map_err(|d| Error::spec(input, w, d));
                    let (delay, jitter) = match timing {
                        [d] => (dur(d)?, Duration::ZERO),
                        [d, j] => (dur(d)?, dur(j)?),
                        [_, _, extra, ..] => {
                            return Err(Error::spec(input, extra, "unexpected argument"))
                        }
                        [] => return Err(Error::spec(input, piece, "missing delay")),
                    };
                    if reorder.is_empty() {
                        ElementSpec::Delay { delay, jitter }
                    } else if delay.is_zero() {
                        return Err(Error::spec(input, piece, REORDER_NEEDS_DELAY));
                    } else {
                        ElementSpec::Reorder {
                            delay,
                            jitter,
                            reorder: reorder.join(" ").parse().map_err(wrap)?,
                        }
                    }
                }
                _ if LOSS_KINDS.contains(&kind) => ElementSpec::Loss(piece.parse().map_err(wrap)?),
                "corrupt" => ElementSpec::Corrupt(piece.parse().map_err(wrap)?),
                "blackhole" => ElementSpec::Blackhole(piece.parse().map_err(wrap)?),
                "mtu" => ElementSpec::Mtu(piece.parse().map_err(wrap)?),
                "duplicate" => ElementSpec::Duplicate(piece.parse().map_err(wrap)?),
                "reorder" => return Err(Error::spec(input, piece, REORDER_NEEDS_DELAY)),
                _ => return Err(Error::spec(
                    input,
                    kind,
                    "unknown element (rate, trace, delay, infinite, droptail, drophead, codel, \
                         none, bernoulli, random, gemodel, state, slotted-gemodel, bursts, replay, onoff, \
                         corrupt, blackhole, duplicate, mtu)",
                )),
            };
            if let Some((_, q)) = pending_queue {
                return Err(Error::spec(input, q, "queue not followed by a link"));
            }
            elements.push(element);
        }
        if let Some((_, q)) = pending_queue {
            return Err(Error::spec(input, q, "queue not followed by a link"));
        }
        Ok(Self { elements })
    }
}

/// A built element, named for its random stream and for reports.
pub type NamedNode = (String, Box<dyn Node>);

impl PathSpec {
    /// Whether an element can change a datagram's bytes (a corrupt element): elsewhere every
    /// datagram arrives as it was sent, or not at all.
    #[must_use]
    pub fn alters_bytes(&self) -> bool {
        self.elements
            .iter()
            .any(|e| matches!(e, ElementSpec::Corrupt(_)))
    }

    /// Instantiate the chain. Element `i` is named `{prefix}/{i}-{kind}` and draws from
    /// `element_rng(seed, name)`. Relative trace and replay paths resolve against `base_dir`.
    /// `log_capacity > 0` turns on each element's event log.
    pub fn build(
        &self,
        seed: u64,
        prefix: &str,
        base_dir: Option<&Path>,
        log_capacity: usize,
    ) -> Result<Vec<NamedNode>, Error> {
        let resolve = |p: &Path| match base_dir {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p.to_owned(),
        };
        let mut out: Vec<NamedNode> = Vec::with_capacity(self.elements.len());
        for (i, e) in self.elements.iter().enumerate() {
            let name = format!("{prefix}/{i}-{}", e.kind());
            let node: Box<dyn Node> = match e {
                ElementSpec::Link { service, queue } => {
                    let service = match service {
                        ServiceSpec::Rate(bps) => Service::Rate(*bps),
                        ServiceSpec::Trace(path) => {
                            Service::Trace(Arc::new(Trace::load(&resolve(path))?))
                        }
                    };
                    let link = Link::new(service, *queue);
                    Box::new(if log_capacity > 0 {
                        link.with_log(log_capacity)
                    } else {
                        link
                    })
                }
                ElementSpec::Delay { delay, jitter } => {
                    Box::new(Delay::new(*delay, *jitter, element_rng(seed, &name)))
                }
                ElementSpec::Loss(spec) => {
                    let spec = match spec {
                        LossSpec::Replay(p) => LossSpec::Replay(resolve(p)),
                        LossSpec::Crn { slot, model } => match model.as_ref() {
                            LossSpec::Replay(p) => LossSpec::Crn {
                                slot: *slot,
                                model: Box::new(LossSpec::Replay(resolve(p))),
                            },
                            _ => spec.clone(),
                        },
                        other => other.clone(),
                    };
                    let loss = Loss::new(&spec, element_rng(seed, &name))?;
                    Box::new(if log_capacity > 0 {
                        loss.with_log(log_capacity)
                    } else {
                        loss
                    })
                }
                ElementSpec::Corrupt(spec) => {
                    Box::new(Corrupt::new(*spec, element_rng(seed, &name)))
                }
                ElementSpec::Blackhole(spec) => Box::new(Blackhole::new(*spec)),
                ElementSpec::Mtu(spec) => Box::new(Mtu::new(*spec)),
                ElementSpec::Duplicate(spec) => {
                    Box::new(Duplicate::new(*spec, element_rng(seed, &name)))
                }
                ElementSpec::Reorder {
                    delay,
                    jitter,
                    reorder,
                } => Box::new(Reorder::new(
                    *reorder,
                    *delay,
                    *jitter,
                    element_rng(seed, &name),
                    element_rng(seed, &format!("{name}/jitter")),
                )),
            };
            out.push((name, node));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Limits;

    #[test]
    fn parses_a_full_chain() {
        let p: PathSpec = "bernoulli 5% | droptail packets=100 | rate 12Mbps | delay 30ms 2ms | gemodel 1% 10% 70% 0.1%"
            .parse()
            .expect("valid");
        assert_eq!(p.elements.len(), 4);
        assert_eq!(
            p.elements[1],
            ElementSpec::Link {
                service: ServiceSpec::Rate(12_000_000),
                queue: QueueSpec::DropTail(Limits {
                    packets: Some(100),
                    bytes: None
                }),
            }
        );
        assert_eq!(
            p.elements[2],
            ElementSpec::Delay {
                delay: Duration::from_millis(30),
                jitter: Duration::from_millis(2)
            }
        );
        let p: PathSpec = "trace traces/x.down | delay 10ms".parse().expect("valid");
        assert_eq!(
            p.elements[0],
            ElementSpec::Link {
                service: ServiceSpec::Trace("traces/x.down".into()),
                queue: QueueSpec::Infinite
            }
        );
        assert_eq!("".parse::<PathSpec>().expect("empty").elements.len(), 0);
    }

    #[test]
    fn errors_name_the_bad_part() {
        for (bad, part) in [
            ("rate 12Mbps | dleay 30ms", "dleay"),
            ("rate 12", "rate 12"),
            ("droptail packets=10 | delay 5ms", "droptail packets=10"),
            ("droptail packets=10", "droptail packets=10"),
            ("delay 30", "30"),
            ("delay 30ms | | rate 1Mbps", ""),
            ("gemodel 1% 10% 70% zz", "zz"),
            ("codel target=x | rate 1Mbps", "target=x"),
            ("trace", "trace"),
            ("duplicate 150% | delay 5ms", "150%"),
            ("rate 1Mbps | reorder 25%", "reorder 25%"),
            ("delay 0ms reorder 25%", "delay 0ms reorder 25%"),
            ("delay 10ms 1ms reorder 25% gap 0", "0"),
            ("delay 10ms 1ms 2ms reorder 25%", "2ms"),
        ] {
            let e = bad.parse::<PathSpec>().expect_err(bad).to_string();
            assert!(e.contains(&format!("`{part}`")), "{bad:?} -> {e}");
            assert!(e.contains(bad), "error should quote the whole spec: {e}");
        }
    }

    #[test]
    fn netem_duplicate_and_reorder_are_elements_reorder_rides_on_its_delay() {
        let p: PathSpec =
            "duplicate 1% 10% | bernoulli 1% | rate 1Mbps | delay 10ms 2ms reorder 25% 50% gap 5"
                .parse()
                .expect("valid");
        let kinds: Vec<&str> = p.elements.iter().map(ElementSpec::kind).collect();
        assert_eq!(kinds, ["duplicate", "loss", "rate", "reorder"]);
        assert_eq!(
            p.elements[3],
            ElementSpec::Reorder {
                delay: Duration::from_millis(10),
                jitter: Duration::from_millis(2),
                reorder: "reorder 25% 50% gap 5".parse().expect("reorder"),
            }
        );
        let nodes = p.build(1, "down", None, 0).expect("build");
        assert_eq!(nodes[3].0, "down/3-reorder");
        for bad in ["reorder 25%", "delay 0ms reorder 25%"] {
            let e = bad.parse::<PathSpec>().expect_err(bad).to_string();
            assert!(e.contains("reorder needs a delay"), "{bad}: {e}");
        }
    }

    #[test]
    fn build_names_elements_and_reports_missing_traces() {
        let p: PathSpec = "bernoulli 1% | rate 1Mbps | delay 1ms"
            .parse()
            .expect("valid");
        let nodes = p.build(1, "down", None, 0).expect("build");
        let names: Vec<&str> = nodes.iter().map(|n| n.0.as_str()).collect();
        assert_eq!(names, ["down/0-loss", "down/1-rate", "down/2-delay"]);
        let p: PathSpec = "trace nowhere.down".parse().expect("valid");
        let e = p
            .build(1, "down", Some(Path::new("/tmp/base")), 0)
            .err()
            .expect("missing")
            .to_string();
        assert!(e.contains("/tmp/base/nowhere.down"), "{e}");
    }
}
