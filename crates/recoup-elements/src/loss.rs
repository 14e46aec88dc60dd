//! Loss models: Bernoulli (`mm-loss`, netem `loss random`), netem `gemodel` and 4-state `state`
//! with the kernel's exact decision order, time-slotted Gilbert-Elliott, bursts of measured sizes
//! (`bursts`), replay from a file, and `mm-onoff` outages.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use recoup_time::Instant;

use crate::datagram::Datagram;
use crate::error::Error;
use crate::log::{DropReason, EventLog, LogEvent};
use crate::node::{ElementStats, Node, Output};
use crate::rng::fnv1a64;
use crate::trace::read_bounded;
use crate::units::{parse_duration, parse_percent, Prob};

mod bursts;
mod crn;
pub use bursts::{BurstSizes, MAX_BURST};
pub use crn::{LossForecast, DEFAULT_CRN_SLOT};

/// netem Gilbert-Elliott parameters as the kernel holds them (`struct tc_netem_gemodel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeParams {
    /// Good → bad transition probability.
    pub p: Prob,
    /// Bad → good transition probability.
    pub r: Prob,
    /// Probability of *delivery* in the bad state (`h`; tc takes `1-h` and stores `h`).
    pub h: Prob,
    /// Probability of loss in the good state (`1-k`).
    pub k1: Prob,
}

impl GeParams {
    /// Parse `p [r [1-h [1-k]]]` (percentages) with tc's defaults: `r = 1 - p`, `1-h = 100 %`,
    /// `1-k = 0 %` (iproute2 q_netem.c since 5.2; with only `p` given this is Bernoulli(p)).
    fn parse(input: &str, args: &[&str]) -> Result<Self, Error> {
        let names = ["p", "r", "1-h", "1-k"];
        let values = percents(input, args, &names)?;
        let p = values[0];
        Ok(Self {
            p: Prob::from_fraction(p),
            r: Prob::from_fraction(values.get(1).copied().unwrap_or(1.0 - p)),
            h: values.get(2).map_or(Prob::ZERO, |&one_minus_h| {
                Prob::from_fraction(one_minus_h).complement()
            }),
            k1: Prob::from_fraction(values.get(3).copied().unwrap_or(0.0)),
        })
    }

    /// Stationary loss rate: `pi_G (1-k) + pi_B (1-h)`, `pi_B = p / (p + r)`.
    #[must_use]
    pub fn loss_rate(&self) -> f64 {
        let (p, r) = (self.p.fraction(), self.r.fraction());
        if p + r == 0.0 {
            return self.k1.fraction();
        }
        let pi_b = p / (p + r);
        (1.0 - pi_b) * self.k1.fraction() + pi_b * self.h.complement().fraction()
    }
}

/// netem 4-state (GI) parameters (`struct tc_netem_gimodel`). States: 1 = received in a gap,
/// 2 = received in a burst, 3 = lost in a burst, 4 = isolated loss in a gap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FourStateParams {
    /// 1 → 3.
    pub p13: Prob,
    /// 3 → 1.
    pub p31: Prob,
    /// 3 → 2.
    pub p32: Prob,
    /// 2 → 3.
    pub p23: Prob,
    /// 1 → 4.
    pub p14: Prob,
}

impl FourStateParams {
    /// Parse `p13 [p31 [p32 [p23 [p14]]]]` with tc's defaults: `p31 = 1 - p13`, `p32 = 0`,
    /// `p23 = 100 %`, `p14 = 0`. Outgoing probabilities of a state may not exceed 100 %.
    fn parse(input: &str, args: &[&str]) -> Result<Self, Error> {
        let names = ["p13", "p31", "p32", "p23", "p14"];
        let v = percents(input, args, &names)?;
        let get = |i: usize, default: f64| v.get(i).copied().unwrap_or(default);
        let (p13, p31, p32, p23, p14) = (
            v[0],
            get(1, 1.0 - v[0]),
            get(2, 0.0),
            get(3, 1.0),
            get(4, 0.0),
        );
        if p13 + p14 > 1.0 + 1e-12 {
            return Err(Error::spec(
                input,
                args[4.min(args.len() - 1)],
                "p13 + p14 exceed 100 %",
            ));
        }
        if p31 + p32 > 1.0 + 1e-12 {
            return Err(Error::spec(
                input,
                args.get(2).unwrap_or(&args[0]),
                "p31 + p32 exceed 100 %",
            ));
        }
        Ok(Self {
            p13: Prob::from_fraction(p13),
            p31: Prob::from_fraction(p31),
            p32: Prob::from_fraction(p32),
            p23: Prob::from_fraction(p23),
            p14: Prob::from_fraction(p14),
        })
    }
}

fn percents(input: &str, args: &[&str], names: &[&str]) -> Result<Vec<f64>, Error> {
    if args.is_empty() {
        return Err(Error::spec(input, input, format!("missing {}", names[0])));
    }
    if let Some(extra) = args.get(names.len()) {
        return Err(Error::spec(
            input,
            extra,
            format!("too many arguments (at most {})", names.join(" ")),
        ));
    }
    args.iter()
        .zip(names)
        .map(|(a, n)| parse_percent(a).map_err(|d| Error::spec(input, a, format!("{n}: {d}"))))
        .collect()
}

/// Which loss model, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum LossSpec {
    /// Each packet lost independently (`mm-loss`, netem `loss random`).
    Bernoulli(Prob),
    /// netem `gemodel`.
    GilbertElliott(GeParams),
    /// netem `state`.
    FourState(FourStateParams),
    /// Gilbert-Elliott whose state changes once per `slot` of time (from the epoch), not per
    /// packet; packets within a slot are lost independently with the state's loss probability.
    SlottedGe {
        /// Slot length (e.g. 30 ms, or one video frame).
        slot: Duration,
        /// Transition and loss probabilities, as for `gemodel`.
        params: GeParams,
    },
    /// Loss in bursts of measured sizes: `bursts RATE [pace=DUR] SIZE:SHARE ...`, e.g. `bursts
    /// 4% pace=10ms 1:37.2% 13:90% 27:95% 125:99% 183:100%`. Burst sizes (consecutive lost
    /// packets) are drawn independently from `sizes` ([`BurstSizes`]: the points of their CDF,
    /// log-linear between them). After a burst comes a gap of `1 + N` delivered packets, `N`
    /// geometric (every packet of a gap after its first starts a burst with probability `q`), so
    /// bursts never merge and the gaps have mean `1 / q = E[size] (1 - rate) / rate`: the
    /// long-run loss rate is `rate`. The element starts in a gap (the first packet may start a
    /// burst). `rate` may be at most [`BurstSizes::max_loss_rate`] (every gap one packet).
    ///
    /// Without `pace` a burst lasts until `size` packets are lost, however long that takes. With
    /// `pace`, a burst of `size` packets also ends `size` x `pace` after its first loss: the
    /// burst is an outage as long as `size` packets sent one per `pace`. Packets that come at
    /// least that fast are lost in bursts of exactly the drawn sizes; a sender that slows down
    /// during the outage (a full window, probe timeouts backing off) loses fewer, and the loss
    /// rate falls below `rate` accordingly. (Without it, a sender that stops until it hears an
    /// ACK can wait forever for a long burst to end.)
    Bursts {
        /// Stationary loss rate, a fraction.
        rate: f64,
        /// The time a burst may take per packet of its size.
        pace: Option<Duration>,
        /// Distribution of a burst's size.
        sizes: BurstSizes,
    },
    /// Replay a loss pattern from a file: one line per packet, `1` lost, `0` delivered; blank
    /// lines and lines starting with `#` are skipped; the pattern repeats.
    Replay(PathBuf),
    /// `mm-onoff`: alternating on and off periods with exponentially distributed lengths
    /// (whole milliseconds), starting on at the epoch; packets arriving while off are dropped.
    OnOff {
        /// Mean on period.
        mean_on: Duration,
        /// Mean off period.
        mean_off: Duration,
    },
    /// Per-packet common random numbers ([`LossForecast`]): `crn [slot=DUR] MODEL`, where MODEL
    /// is `bernoulli`, `gemodel`, `slotted-gemodel` (its own slot) or `replay` (one line per
    /// slot). A packet's fate depends on its key and its time slot, never on other packets.
    Crn {
        /// How often the hidden state steps (default [`DEFAULT_CRN_SLOT`]).
        slot: Duration,
        /// The model whose probabilities are used.
        model: Box<LossSpec>,
    },
}

impl FromStr for LossSpec {
    type Err = Error;

    /// Forms: `none`; `bernoulli 5%`; netem's verbatim `[loss] random 5%`, `[loss] 5%`,
    /// `[loss] gemodel p [r [1-h [1-k]]]`, `[loss] state p13 [p31 [p32 [p23 [p14]]]]`;
    /// `slotted-gemodel 30ms p [r [1-h [1-k]]]`; `bursts RATE SIZE:SHARE ...`; `replay FILE`;
    /// `onoff ON OFF` (durations; a bare number is seconds, as for mm-onoff). Percentages follow
    /// tc: `5` and `5%` both mean 5 %.
    fn from_str(input: &str) -> Result<Self, Error> {
        let mut words: Vec<&str> = input.split_whitespace().collect();
        if words.first() == Some(&"loss") || words.first() == Some(&"drop") {
            words.remove(0);
        }
        let Some((&kind, args)) = words.split_first() else {
            return Err(Error::spec(input, input, "empty loss description"));
        };
        if kind == "crn" {
            return parse_crn(input, args);
        }
        let one_percent = |args: &[&str]| -> Result<Prob, Error> {
            match args {
                [p] => parse_percent(p)
                    .map(Prob::from_fraction)
                    .map_err(|d| Error::spec(input, p, d)),
                [] => Err(Error::spec(input, kind, "missing percentage")),
                [_, extra, ..] => Err(Error::spec(
                    input,
                    extra,
                    "unexpected argument (loss correlation is not supported)",
                )),
            }
        };
        match kind {
            "none" if args.is_empty() => Ok(Self::Bernoulli(Prob::ZERO)),
            "bernoulli" | "random" => one_percent(args).map(Self::Bernoulli),
            "gemodel" => GeParams::parse(input, args).map(Self::GilbertElliott),
            "state" => FourStateParams::parse(input, args).map(Self::FourState),
            "slotted-gemodel" => {
                let Some((slot, rest)) = args.split_first() else {
                    return Err(Error::spec(input, kind, "missing slot duration"));
                };
                let slot_d = parse_duration(slot).map_err(|d| Error::spec(input, slot, d))?;
                if slot_d.is_zero() {
                    return Err(Error::spec(input, slot, "slot must be > 0"));
                }
                Ok(Self::SlottedGe {
                    slot: slot_d,
                    params: GeParams::parse(input, rest)?,
                })
            }
            "bursts" => parse_bursts(input, args),
            "replay" => match args {
                [file] => Ok(Self::Replay(PathBuf::from(file))),
                [] => Err(Error::spec(input, kind, "missing file")),
                [_, extra, ..] => Err(Error::spec(input, extra, "unexpected argument")),
            },
            "onoff" => match args {
                [on, off] => {
                    let on_d = onoff_duration(input, on)?;
                    let off_d = onoff_duration(input, off)?;
                    if on_d.is_zero() && off_d.is_zero() {
                        return Err(Error::spec(input, input, "on and off cannot both be 0"));
                    }
                    Ok(Self::OnOff {
                        mean_on: on_d,
                        mean_off: off_d,
                    })
                }
                [_, _, extra, ..] => Err(Error::spec(input, extra, "unexpected argument")),
                _ => Err(Error::spec(input, kind, "expected ON OFF mean durations")),
            },
            _ if kind.starts_with(|c: char| c.is_ascii_digit()) => {
                one_percent(&words).map(Self::Bernoulli)
            }
            _ => Err(Error::spec(
                input,
                kind,
                "unknown loss model (none, bernoulli, random, gemodel, state, slotted-gemodel, bursts, replay, onoff, crn)",
            )),
        }
    }
}

/// `crn [slot=DUR] MODEL ...`.
fn parse_crn(input: &str, args: &[&str]) -> Result<LossSpec, Error> {
    let (slot, rest) = match args.split_first() {
        Some((first, rest)) if first.starts_with("slot=") => {
            let value = &first["slot=".len()..];
            let slot = parse_duration(value).map_err(|d| Error::spec(input, first, d))?;
            if slot.is_zero() {
                return Err(Error::spec(input, first, "slot must be > 0"));
            }
            (slot, rest)
        }
        _ => (DEFAULT_CRN_SLOT, args),
    };
    if rest.is_empty() {
        return Err(Error::spec(input, input, "crn: missing the loss model"));
    }
    let model: LossSpec = rest.join(" ").parse().map_err(|e| match e {
        Error::Spec { part, detail, .. } => Error::spec(input, &part, detail),
        other => other,
    })?;
    match model {
        LossSpec::Bernoulli(_)
        | LossSpec::GilbertElliott(_)
        | LossSpec::SlottedGe { .. }
        | LossSpec::Replay(_) => Ok(LossSpec::Crn {
            slot,
            model: Box::new(model),
        }),
        _ => Err(Error::spec(
            input,
            rest[0],
            "crn draws support bernoulli, gemodel, slotted-gemodel and replay",
        )),
    }
}

/// `bursts RATE [pace=DUR] SIZE:SHARE ...`.
fn parse_bursts(input: &str, args: &[&str]) -> Result<LossSpec, Error> {
    const FORM: &str = "expected `bursts RATE [pace=DUR] SIZE:SHARE ...`, the burst sizes' CDF \
                        from `1:SHARE` (single-packet bursts) to `MAX:100%`, e.g. \
                        `bursts 4% pace=10ms 1:37.2% 13:90% 183:100%`";
    let Some((rate_token, mut point_tokens)) = args.split_first() else {
        return Err(Error::spec(
            input,
            "bursts",
            format!("missing the loss rate: {FORM}"),
        ));
    };
    let rate = parse_percent(rate_token).map_err(|d| Error::spec(input, rate_token, d))?;
    let mut pace = None;
    if let Some((first, rest)) = point_tokens.split_first() {
        if let Some(value) = first.strip_prefix("pace=") {
            let d = parse_duration(value).map_err(|d| Error::spec(input, first, d))?;
            if d.is_zero() {
                return Err(Error::spec(input, first, "pace must be > 0"));
            }
            pace = Some(d);
            point_tokens = rest;
        }
    }
    if point_tokens.is_empty() {
        return Err(Error::spec(
            input,
            rate_token,
            format!("missing the burst sizes: {FORM}"),
        ));
    }
    let mut points = Vec::with_capacity(point_tokens.len());
    for token in point_tokens {
        let bad = |d: &str| Error::spec(input, token, d);
        let (size, share) = token.split_once(':').ok_or_else(|| bad(FORM))?;
        let size: u32 = size
            .parse()
            .map_err(|_| bad("the size is not a whole number of packets"))?;
        let share = parse_percent(share).map_err(|d| bad(&d))?;
        points.push((size, share));
    }
    let sizes = BurstSizes::new(points)
        .map_err(|(i, d)| Error::spec(input, point_tokens[i], format!("{d}: {FORM}")))?;
    if rate > sizes.max_loss_rate() {
        return Err(Error::spec(
            input,
            rate_token,
            format!(
                "above {:.4} %, the highest loss rate with these bursts (mean {:.3} packets, \
                 every gap one packet)",
                sizes.max_loss_rate() * 100.0,
                sizes.mean()
            ),
        ));
    }
    Ok(LossSpec::Bursts { rate, pace, sizes })
}

fn onoff_duration(input: &str, token: &str) -> Result<Duration, Error> {
    if let Ok(secs) = token.parse::<f64>() {
        if secs.is_finite() && (0.0..1e9).contains(&secs) {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(Error::spec(
            input,
            token,
            "must be a non-negative number of seconds",
        ));
    }
    parse_duration(token).map_err(|d| Error::spec(input, token, d))
}

/// Load a loss replay file (see [`LossSpec::Replay`]).
pub fn load_replay(path: &Path) -> Result<Vec<bool>, Error> {
    let text = read_bounded(path)?;
    let mut pattern = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        match raw.trim() {
            "" => {}
            l if l.starts_with('#') => {}
            "0" => pattern.push(false),
            "1" => pattern.push(true),
            other => {
                return Err(Error::file(
                    path,
                    Some(i + 1),
                    format!("`{other}` is not 0 or 1"),
                ))
            }
        }
    }
    if pattern.is_empty() {
        return Err(Error::file(path, None, "no 0/1 lines"));
    }
    Ok(pattern)
}

#[derive(Debug)]
enum Model {
    Bernoulli(Prob),
    Ge {
        params: GeParams,
        bad: bool,
    },
    FourState {
        params: FourStateParams,
        state: u8,
    },
    Slotted {
        slot_ns: u64,
        params: GeParams,
        bad: bool,
        slot: u64,
        state_rng: Box<ChaCha8Rng>,
    },
    Bursts(Box<bursts::Bursts>),
    Replay {
        pattern: Arc<[bool]>,
        pos: usize,
    },
    OnOff {
        mean_on_ms: f64,
        mean_off_ms: f64,
        on: bool,
        next_switch_ms: u64,
    },
    Crn(Box<LossForecast>),
}

/// A loss element: forwards or drops each datagram at once, never holds one.
#[derive(Debug)]
pub struct Loss {
    model: Model,
    rng: ChaCha8Rng,
    stats: ElementStats,
    log: Option<EventLog>,
}

impl Loss {
    /// Build from a spec. `rng` is this element's stream; the slotted model derives its state
    /// stream from it so that the slot states do not depend on how many packets were sent.
    /// Replay files are read here.
    pub fn new(spec: &LossSpec, mut rng: ChaCha8Rng) -> Result<Self, Error> {
        let model = match spec {
            LossSpec::Crn { .. } => Model::Crn(Box::new(LossForecast::new(spec, rng.clone())?)),
            LossSpec::Bernoulli(p) => Model::Bernoulli(*p),
            LossSpec::GilbertElliott(params) => Model::Ge {
                params: *params,
                bad: false,
            },
            LossSpec::FourState(params) => Model::FourState {
                params: *params,
                state: 1,
            },
            LossSpec::SlottedGe { slot, params } => {
                let mut seed = [0u8; 32];
                rng.fill_bytes(&mut seed);
                Model::Slotted {
                    slot_ns: recoup_time::saturating_nanos(*slot).max(1),
                    params: *params,
                    bad: false,
                    slot: 0,
                    state_rng: Box::new(rand_chacha::rand_core::SeedableRng::from_seed(seed)),
                }
            }
            LossSpec::Bursts { rate, pace, sizes } => {
                Model::Bursts(Box::new(bursts::Bursts::new(*rate, *pace, sizes.clone())))
            }
            LossSpec::Replay(path) => Model::Replay {
                pattern: load_replay(path)?.into(),
                pos: 0,
            },
            LossSpec::OnOff { mean_on, mean_off } => Model::OnOff {
                mean_on_ms: mean_on.as_secs_f64() * 1000.0,
                mean_off_ms: mean_off.as_secs_f64() * 1000.0,
                // mm-onoff starts "off" with a switch due at once, i.e. on from the epoch.
                on: false,
                next_switch_ms: 0,
            },
        };
        Ok(Self {
            model,
            rng,
            stats: ElementStats::default(),
            log: None,
        })
    }

    /// Keep an event log of drops (at most `capacity` events).
    #[must_use]
    pub fn with_log(mut self, capacity: usize) -> Self {
        self.log = Some(EventLog::new(capacity));
        self
    }

    /// Decide the fate of one packet passing at `now`: `true` means lost. Only `crn` models
    /// read `key` (the datagram's [`Datagram::key`], or a hash of its payload); the others draw
    /// the next number of the element's stream.
    pub fn decide(&mut self, now: Instant, key: u64) -> bool {
        let rng = &mut self.rng;
        match &mut self.model {
            Model::Crn(forecast) => forecast.lost(key, now),
            // sch_netem.c loss_event, CLG_RANDOM: `q->loss && q->loss >= rnd`.
            Model::Bernoulli(p) => p.0 != 0 && p.0 >= rng.next_u32(),
            Model::Ge { params, bad } => ge_step(params, bad, rng),
            Model::FourState { params, state } => four_state_step(params, state, rng.next_u32()),
            Model::Slotted {
                slot_ns,
                params,
                bad,
                slot,
                state_rng,
            } => {
                let current = now.as_nanos() / *slot_ns;
                while *slot < current {
                    let threshold = if *bad { params.r } else { params.p };
                    if state_rng.next_u32() < threshold.0 {
                        *bad = !*bad;
                    }
                    *slot += 1;
                }
                let rnd = rng.next_u32();
                if *bad {
                    rnd > params.h.0
                } else {
                    rnd < params.k1.0
                }
            }
            Model::Bursts(b) => b.step(now, || rng.gen::<f64>()),
            Model::Replay { pattern, pos } => {
                let lost = pattern[*pos];
                *pos = (*pos + 1) % pattern.len();
                lost
            }
            Model::OnOff {
                mean_on_ms,
                mean_off_ms,
                on,
                next_switch_ms,
            } => {
                // loss_queue.cc StochasticSwitchingLink: whole-ms clock, truncated exponential
                // period lengths capped at 2^30 ms.
                let now_ms = now.as_nanos() / 1_000_000;
                while *next_switch_ms <= now_ms {
                    *on = !*on;
                    let mean = if *on { *mean_on_ms } else { *mean_off_ms };
                    let u: f64 = rng.gen();
                    let len = (-(1.0 - u).ln() * mean).min(f64::from(1u32 << 30));
                    *next_switch_ms += len as u64;
                }
                !*on
            }
        }
    }
}

/// sch_netem.c `loss_gilb_ell`: transition first, then the loss draw against the probability of
/// the state the packet found (the state before the transition).
fn ge_step(params: &GeParams, bad: &mut bool, rng: &mut ChaCha8Rng) -> bool {
    if *bad {
        if rng.next_u32() < params.r.0 {
            *bad = false;
        }
        rng.next_u32() > params.h.0
    } else {
        if rng.next_u32() < params.p.0 {
            *bad = true;
        }
        rng.next_u32() < params.k1.0
    }
}

/// sch_netem.c `loss_4state`: one draw picks the next state; the packet is lost iff that state
/// is a loss state (3 or 4).
fn four_state_step(params: &FourStateParams, state: &mut u8, rnd: u32) -> bool {
    let rnd = u64::from(rnd);
    let (p13, p31, p32, p23, p14) = (
        u64::from(params.p13.0),
        u64::from(params.p31.0),
        u64::from(params.p32.0),
        u64::from(params.p23.0),
        u64::from(params.p14.0),
    );
    match *state {
        1 => {
            if rnd < p14 {
                *state = 4;
                true
            } else if rnd < p13 + p14 {
                *state = 3;
                true
            } else {
                false
            }
        }
        2 => {
            if rnd < p23 {
                *state = 3;
                true
            } else {
                false
            }
        }
        3 => {
            if rnd < p32 {
                *state = 2;
                false
            } else if rnd < p31 + p32 {
                *state = 1;
                false
            } else {
                true
            }
        }
        _ => {
            *state = 1;
            false
        }
    }
}

impl Node for Loss {
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
        let Some(d) = input else {
            return Output::None;
        };
        self.stats.on_receive(&d);
        if self.decide(now, d.key.unwrap_or_else(|| fnv1a64(&d.payload))) {
            self.stats.dropped += 1;
            if let Some(log) = self.log.as_mut() {
                log.push(LogEvent::Drop {
                    time: now,
                    id: d.id,
                    bytes: d.wire_len(),
                    reason: DropReason::Loss,
                });
            }
            Output::None
        } else {
            self.stats.on_forward(&d);
            Output::Datagram(d)
        }
    }

    fn stats(&self) -> ElementStats {
        self.stats
    }

    fn event_log(&self) -> Option<&EventLog> {
        self.log.as_ref()
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
