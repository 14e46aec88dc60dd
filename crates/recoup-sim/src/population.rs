//! Population scenarios: a simulated deployment fleet (AutoRec Figs. 21-22, TOO Fig. 3).
//!
//! AutoRec's Figs. 21-22 (§VII-B) and TOO's Fig. 3 (§3) are measured over the live streams of a
//! CDN, each with its own bitrate, RTT and loss. A population file describes such a fleet: N
//! streams whose bitrate, smoothed RTT, loss rate and loss model are drawn, per stream, from the
//! distributions the file gives; every stream then runs every policy of the file on the same
//! stream seed (common random numbers, DESIGN.md principle 3), so the policies' differences are
//! their own. Stream `i` has seed `seed + i`; its draws come from
//! [`element_rng`]`(seed + i, "population")`, so a stream's parameters depend only on the file
//! and `i`, never on how many streams are drawn.
//!
//! Each stream is written as an ordinary scenario (DESIGN.md "Scenario file") and loaded by
//! [`crate::scenario::load_str`], so a stream is exactly what `recoup run` would run from that
//! text ([`Stream::toml`]).
//!
//! ```toml
//! name = "deployment"
//! seed = 1
//! streams = 200
//! duration = "100s"
//! queue = "droptail packets=100"
//!
//! [draw]
//! bitrate = { dist = "lognormal", mean = "984.5kbps", cv = 0.6, min = "200kbps" }
//! srtt = { dist = "lognormal", mean = "95.5ms", cv = 0.8, min = "5ms", max = "2s" }
//! loss = { dist = "lognormal", mean = 0.04, cv = 1.0, max = 0.5 }
//! headroom = { dist = "uniform", min = 2.0, max = 8.0 }
//! burst = { dist = "uniform", min = 1.0, max = 4.0 }
//!
//! [[loss_model]]
//! kind = "bernoulli"          # bernoulli | gemodel | bursts | trace
//! weight = 0.5
//!
//! [[loss_model]]
//! kind = "bursts"
//! weight = 0.3
//! burst = { single = 0.372, p90 = 13, p95 = 27, p99 = 125, max = 183 }
//!
//! [[loss_model]]
//! kind = "trace"
//! weight = 0.2
//! traces = ["../../../shared/traces/mahimahi/ATT-LTE-driving.down"]
//!
//! [app]                       # merged into each stream's [app]
//! kind = "live"               # live (the default) | moq
//! fps = 30
//!
//! [transport]
//! cc = "bbr"
//!
//! [[policy]]
//! name = "arq"
//! ```
//!
//! Draws: `bitrate` (the stream's encoding rate), `srtt` (the path's RTT), `loss` (the
//! stream's mean packet loss rate, a fraction), `headroom` (the link rate as a multiple of the
//! bitrate, for the `bernoulli`, `gemodel` and `bursts` models) and `burst` (gemodel's mean
//! burst length in packets). A distribution is `const` (`value`), `uniform` (`min`, `max`) or
//! `lognormal` (`mean`, `cv` = standard deviation / mean; optional `min` / `max` clamp the draw;
//! for `loss`, optional `zero`: the share of draws that are exactly 0, the others log-normal
//! with mean `mean / (1 - zero)` and this cv, so that `mean` is the mean of all draws before the
//! clamp); values are numbers in the key's base unit (bit/s, ms, fraction, factor) or strings
//! with a unit (`"984.5kbps"`, `"95.5ms"`). The loss models, drawn by `weight`:
//! - `bernoulli`: independent loss at the drawn rate (`mm-loss`), on a link of
//!   bitrate x headroom;
//! - `gemodel`: netem `gemodel p r 100% 0%` with the drawn rate as its stationary loss rate
//!   p / (p + r) and r = 1 / burst (a bad state lasts `burst` packets on average); with
//!   `slot = "30ms"`, time-slotted (`slotted-gemodel 30ms p r 100% 0%`, the state changes once
//!   per slot, as in AutoRec Fig. 20), so a bad state lasts `burst` slots;
//! - `bursts`: the `bursts` loss element (`recoup_elements::LossSpec::Bursts`) at the drawn rate:
//!   burst sizes (consecutive lost packets) drawn per burst from the model's `burst` table, the
//!   same for every stream, with geometric gaps between bursts; on a link of bitrate x headroom.
//!   A burst of n packets also ends after n full datagrams' time at the stream's bitrate (`pace`:
//!   an outage, which a stalled sender cannot stretch by sending nothing).
//!   `burst` gives the distribution of a burst's size by points of its CDF: `single`, the share
//!   of bursts of one packet (in (0, 1)); any percentiles `pNN = SIZE` (`p90 = 13`: 90 % of
//!   bursts have at most 13 packets; sizes whole numbers that grow with the percentile, each
//!   percentile above `single`); and `max`, the largest burst (above every percentile, at most
//!   `recoup_elements::MAX_BURST`). Between the points the CDF is linear in log size, so each
//!   given percentile is exact. The drawn loss may not exceed the rate at which every gap is one
//!   packet (mean / (mean + 1)): `draw.loss`'s largest value is checked against it;
//! - `trace`: one of `traces` (mm-link files, picked uniformly) as the downlink, with Bernoulli
//!   loss at the drawn rate besides the trace's own queue drops.
//!
//! Loss applies to the downlink (the CDN's sending direction, where both papers measure); the
//! uplink carries ACKs at the downlink's rate (10 Mbit/s under a trace), without random loss.
//!
//! Every key is checked before any run: unknown keys, a distribution that cannot be sampled
//! (a negative RTT or bitrate, a probability outside [0, 1], min > max, a non-positive cv or
//! weight) and a trace that does not exist are errors naming the key.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rand_chacha::rand_core::RngCore;
use rand_chacha::ChaCha8Rng;
use recoup_elements::{element_rng, parse_duration, parse_rate, BurstSizes, MAX_BURST};
use serde::Deserialize;

use crate::metrics::{mean, metric_values, percentile, RunRow};
use crate::scenario::{load_str, Scenario, MAX_SCENARIO_BYTES};
use crate::Error;

/// Most streams one population may expand to.
pub const MAX_STREAMS: usize = 1_000_000;

/// A parameter value: a number, or a string with a unit (`"984.5kbps"`, `"95.5ms"`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Quantity {
    Number(f64),
    Text(String),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDist {
    dist: String,
    value: Option<Quantity>,
    mean: Option<Quantity>,
    cv: Option<f64>,
    min: Option<Quantity>,
    max: Option<Quantity>,
    zero: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDraw {
    bitrate: RawDist,
    srtt: RawDist,
    loss: RawDist,
    headroom: Option<RawDist>,
    burst: Option<RawDist>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLossModel {
    kind: String,
    weight: f64,
    traces: Option<Vec<String>>,
    slot: Option<String>,
    burst: Option<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPopulation {
    name: Option<String>,
    seed: Option<u64>,
    streams: Option<usize>,
    duration: Option<String>,
    queue: Option<String>,
    draw: RawDraw,
    loss_model: Vec<RawLossModel>,
    app: Option<toml::Table>,
    transport: Option<toml::Table>,
    policy: Vec<toml::Table>,
}

/// A checked distribution, in the key's base unit (bit/s, ms, fraction, plain number).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    Const(f64),
    Uniform {
        min: f64,
        max: f64,
    },
    /// Log-normal with this mean and coefficient of variation, clamped to `[min, max]`; with
    /// `zero > 0`, a draw is 0 with probability `zero` and otherwise log-normal with mean
    /// `mean / (1 - zero)` and this cv, so that `mean` stays the mean of all draws.
    LogNormal {
        mean: f64,
        cv: f64,
        min: f64,
        max: f64,
        zero: f64,
    },
}

/// A uniform draw in [0, 1) with 53 random bits.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

impl Dist {
    /// One draw. Always takes two words from `rng`, whatever the distribution, so that a
    /// change of one key's distribution does not shift the other keys' draws.
    #[must_use]
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        let u = unit(rng);
        let v = unit(rng);
        // Box-Muller: a standard normal from two uniforms (1 - u is in (0, 1]).
        let normal = |u: f64| (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos();
        match *self {
            Self::Const(v) => v,
            Self::Uniform { min, max } => min + u * (max - min),
            Self::LogNormal {
                mean,
                cv,
                min,
                max,
                zero,
            } => {
                if u < zero {
                    return 0f64.clamp(min, max);
                }
                // The rest of u, again uniform in [0, 1) (u itself when zero is 0).
                let u = (u - zero) / (1.0 - zero);
                // mean = exp(mu + sigma^2 / 2), cv^2 = exp(sigma^2) - 1.
                let s2 = cv.mul_add(cv, 1.0).ln();
                let mu = (mean / (1.0 - zero)).ln() - s2 / 2.0;
                (mu + s2.sqrt() * normal(u)).exp().clamp(min, max)
            }
        }
    }

    /// The largest value a draw can take.
    #[must_use]
    pub fn upper(&self) -> f64 {
        match *self {
            Self::Const(v) => v,
            Self::Uniform { max, .. } | Self::LogNormal { max, .. } => max,
        }
    }
}

/// How a key's values are read and what range they must lie in.
#[derive(Clone, Copy)]
struct Kind {
    /// Converts a unit string to the base unit.
    parse: fn(&str) -> Result<f64, String>,
    /// The values a draw may take.
    low: f64,
    high: f64,
    /// Whether 0 is allowed (a rate or an RTT of zero is not).
    zero: bool,
}

fn rate_bps(s: &str) -> Result<f64, String> {
    parse_rate(s).map(|b| b as f64)
}

fn duration_ms(s: &str) -> Result<f64, String> {
    parse_duration(s).map(|d| d.as_secs_f64() * 1e3)
}

fn plain(s: &str) -> Result<f64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))
}

const RATE: Kind = Kind {
    parse: rate_bps,
    low: 0.0,
    high: 1e12,
    zero: false,
};
const DURATION: Kind = Kind {
    parse: duration_ms,
    low: 0.0,
    high: 3.6e6,
    zero: false,
};
const PROBABILITY: Kind = Kind {
    parse: plain,
    low: 0.0,
    high: 1.0,
    zero: true,
};
const FACTOR: Kind = Kind {
    parse: plain,
    low: 1.0,
    high: 1e6,
    zero: false,
};

fn err(file: &str, key: &str, detail: impl Into<String>) -> Error {
    Error::Invalid {
        file: file.to_owned(),
        key: key.to_owned(),
        detail: detail.into(),
    }
}

fn quantity(q: &Quantity, kind: Kind, file: &str, key: &str) -> Result<f64, Error> {
    let v = match q {
        Quantity::Number(n) => *n,
        Quantity::Text(s) => (kind.parse)(s).map_err(|e| err(file, key, e))?,
    };
    let ok = v.is_finite() && v >= kind.low && v <= kind.high && (kind.zero || v > 0.0);
    if ok {
        Ok(v)
    } else {
        Err(err(
            file,
            key,
            format!(
                "{v} is outside [{}, {}]{}",
                kind.low,
                kind.high,
                if kind.zero { "" } else { " or zero" }
            ),
        ))
    }
}

fn dist(raw: &RawDist, kind: Kind, file: &str, key: &str) -> Result<Dist, Error> {
    let get = |name: &str, v: &Option<Quantity>| -> Result<f64, Error> {
        let q = v
            .as_ref()
            .ok_or_else(|| err(file, key, format!("`{}` needs `{name}`", raw.dist)))?;
        quantity(q, kind, file, &format!("{key}.{name}"))
    };
    let opt = |name: &str, v: &Option<Quantity>, default: f64| match v {
        Some(q) => quantity(q, kind, file, &format!("{key}.{name}")),
        None => Ok(default),
    };
    let unused = |names: &[(&str, bool)]| -> Result<(), Error> {
        match names.iter().find(|(_, set)| *set) {
            Some((n, _)) => Err(err(
                file,
                &format!("{key}.{n}"),
                format!("not a parameter of `{}`", raw.dist),
            )),
            None => Ok(()),
        }
    };
    let d = match raw.dist.as_str() {
        "const" => {
            unused(&[
                ("zero", raw.zero.is_some()),
                ("mean", raw.mean.is_some()),
                ("cv", raw.cv.is_some()),
                ("min", raw.min.is_some()),
                ("max", raw.max.is_some()),
            ])?;
            Dist::Const(get("value", &raw.value)?)
        }
        "uniform" => {
            unused(&[
                ("value", raw.value.is_some()),
                ("mean", raw.mean.is_some()),
                ("cv", raw.cv.is_some()),
                ("zero", raw.zero.is_some()),
            ])?;
            Dist::Uniform {
                min: get("min", &raw.min)?,
                max: get("max", &raw.max)?,
            }
        }
        "lognormal" => {
            unused(&[("value", raw.value.is_some())])?;
            let cv = raw
                .cv
                .ok_or_else(|| err(file, key, "`lognormal` needs `cv`"))?;
            if !(cv.is_finite() && cv > 0.0 && cv <= 100.0) {
                return Err(err(
                    file,
                    &format!("{key}.cv"),
                    format!("{cv} must be in (0, 100]"),
                ));
            }
            let mean = get("mean", &raw.mean)?;
            if mean <= 0.0 {
                return Err(err(file, &format!("{key}.mean"), "must be > 0"));
            }
            let zero = raw.zero.unwrap_or(0.0);
            if raw.zero.is_some() && !kind.zero {
                return Err(err(
                    file,
                    &format!("{key}.zero"),
                    "this key cannot be 0 (a share of zero draws is for loss rates)",
                ));
            }
            if !(0.0..1.0).contains(&zero) {
                return Err(err(
                    file,
                    &format!("{key}.zero"),
                    format!("{zero} is not a share in [0, 1)"),
                ));
            }
            let min = opt("min", &raw.min, kind.low)?;
            if zero > 0.0 && min > 0.0 {
                return Err(err(
                    file,
                    &format!("{key}.zero"),
                    format!("zero draws need `min` 0, not {min}"),
                ));
            }
            Dist::LogNormal {
                mean,
                cv,
                min,
                max: opt("max", &raw.max, kind.high)?,
                zero,
            }
        }
        other => {
            return Err(err(
                file,
                &format!("{key}.dist"),
                format!("unknown distribution `{other}` (const, uniform, lognormal)"),
            ))
        }
    };
    if let Dist::Uniform { min, max } | Dist::LogNormal { min, max, .. } = d {
        if min > max {
            return Err(err(file, key, format!("min {min} > max {max}")));
        }
    }
    Ok(d)
}

/// A loss model and its share of the streams.
#[derive(Clone, Debug, PartialEq)]
pub enum LossModel {
    Bernoulli,
    /// Per packet (netem), or with a slot, time-slotted: the state changes once per slot.
    GilbertElliott {
        slot: Option<String>,
    },
    /// Bursts of sizes drawn from this distribution, the same for every stream.
    Bursts(BurstSizes),
    /// A downlink trace, picked uniformly from these (resolved, existing) files.
    Trace(Vec<PathBuf>),
}

/// What a `burst` table accepts, for its errors.
const BURST_FORM: &str = "`burst = { single = SHARE, pNN = SIZE ..., max = SIZE }`: `single` the \
                          share of one-packet bursts in (0, 1), percentiles `pNN` (0 < NN < 100) \
                          of whole packets growing with NN, `max` the largest burst";

/// A `[[loss_model]]`'s `burst` table (see the module documentation) as CDF points.
fn burst_sizes(table: &toml::Table, file: &str, key: &str) -> Result<BurstSizes, Error> {
    let bad = |k: &str, detail: String| err(file, &format!("{key}.{k}"), detail);
    let whole = |k: &str, v: &toml::Value| -> Result<u32, Error> {
        let n = match v {
            toml::Value::Integer(n) => Some(*n),
            toml::Value::Float(f) if f.fract() == 0.0 && f.is_finite() => Some(*f as i64),
            _ => None,
        };
        match n {
            Some(n) if (1..=i64::from(MAX_BURST)).contains(&n) => Ok(n as u32),
            _ => Err(bad(
                k,
                format!("{v} is not a whole number of packets in 1..={MAX_BURST}; {BURST_FORM}"),
            )),
        }
    };
    let mut single = None;
    let mut max = None;
    let mut percentiles: Vec<(f64, u32, &str)> = Vec::new();
    for (k, v) in table {
        match k.as_str() {
            "single" => {
                let share = v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
                match share {
                    Some(c) if c > 0.0 && c < 1.0 => single = Some(c),
                    _ => {
                        return Err(bad(
                            k,
                            format!("{v} is not a share in (0, 1) (0.372 is 37.2 %); {BURST_FORM}"),
                        ))
                    }
                }
            }
            "max" => max = Some(whole(k, v)?),
            _ => {
                let nn = k
                    .strip_prefix('p')
                    .and_then(|nn| nn.parse::<f64>().ok())
                    .filter(|nn| *nn > 0.0 && *nn < 100.0);
                let Some(nn) = nn else {
                    return Err(bad(k, format!("unknown key; {BURST_FORM}")));
                };
                percentiles.push((nn / 100.0, whole(k, v)?, k));
            }
        }
    }
    let single = single.ok_or_else(|| bad("single", format!("missing; {BURST_FORM}")))?;
    let max = max.ok_or_else(|| bad("max", format!("missing; {BURST_FORM}")))?;
    percentiles.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut points = vec![(1, single)];
    let mut prev_key = "single";
    for &(c, size, k) in &percentiles {
        if c <= single {
            return Err(bad(
                k,
                format!(
                    "{k} is not above `single` ({single}): that share of bursts is one packet \
                     already; {BURST_FORM}"
                ),
            ));
        }
        let (prev_size, _) = points[points.len() - 1];
        if size <= prev_size {
            let prev = if prev_key == "single" {
                "1 (`single`)".to_owned()
            } else {
                format!("{prev_size} ({prev_key})")
            };
            return Err(bad(
                k,
                format!(
                    "{k} = {size} is not above {prev}: a higher percentile needs a larger \
                     burst; {BURST_FORM}"
                ),
            ));
        }
        points.push((size, c));
        prev_key = k;
    }
    let largest = points[points.len() - 1].0;
    if max <= largest {
        return Err(bad(
            "max",
            format!("{max} is not above the largest percentile's {largest}; {BURST_FORM}"),
        ));
    }
    points.push((max, 1.0));
    BurstSizes::new(points).map_err(|(_, d)| err(file, key, format!("{d}; {BURST_FORM}")))
}

/// A checked population file.
#[derive(Clone, Debug)]
pub struct Population {
    pub name: String,
    pub seed: u64,
    pub streams: usize,
    pub duration: String,
    pub queue: String,
    pub bitrate: Dist,
    pub srtt: Dist,
    pub loss: Dist,
    pub headroom: Dist,
    pub burst: Dist,
    /// Loss models with their weights (normalised to sum to 1).
    pub loss_models: Vec<(LossModel, f64)>,
    app: toml::Table,
    transport: toml::Table,
    policies: Vec<toml::Table>,
    file: String,
}

/// One stream's draws.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StreamParams {
    pub stream: usize,
    pub seed: u64,
    pub bitrate_kbps: f64,
    pub srtt_ms: f64,
    pub loss_rate: f64,
    /// `bernoulli`, `gemodel`, `bursts` or `trace`.
    pub loss_model: &'static str,
    /// Link rate (bernoulli, gemodel, bursts); empty under a trace.
    pub link_mbps: Option<f64>,
    /// Mean burst length in packets (gemodel: drawn; bursts: the mean of the burst sizes).
    pub burst: Option<f64>,
    /// The trace's file name (trace).
    pub trace: Option<String>,
}

/// One stream: its draws, its scenario text, and the scenario loaded from it.
#[derive(Clone, Debug)]
pub struct Stream {
    pub params: StreamParams,
    pub toml: String,
    pub scenario: Scenario,
}

/// Loads a population file; relative trace paths resolve against its folder.
pub fn load(path: &Path) -> Result<Population, Error> {
    let file = path.display().to_string();
    let io = |source| Error::Io {
        file: path.to_owned(),
        source,
    };
    if std::fs::metadata(path).map_err(io)?.len() > MAX_SCENARIO_BYTES {
        return Err(err(
            &file,
            "",
            format!("file larger than {MAX_SCENARIO_BYTES} bytes"),
        ));
    }
    let src = std::fs::read_to_string(path).map_err(io)?;
    let stem = path.file_stem().map_or_else(
        || "population".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    parse(&src, &file, path.parent(), &stem)
}

/// Parses population text; `file` names it in errors, relative trace paths resolve against
/// `base_dir`, and `default_name` names it without a `name` key.
pub fn parse(
    src: &str,
    file: &str,
    base_dir: Option<&Path>,
    default_name: &str,
) -> Result<Population, Error> {
    let raw: RawPopulation =
        toml::from_str(src).map_err(|e| err(file, "", e.to_string().trim().to_owned()))?;
    let streams = raw.streams.unwrap_or(100);
    if !(1..=MAX_STREAMS).contains(&streams) {
        return Err(err(file, "streams", format!("must be 1 to {MAX_STREAMS}")));
    }
    let duration = raw.duration.unwrap_or_else(|| "60s".to_owned());
    match parse_duration(&duration) {
        Ok(d) if !d.is_zero() => {}
        Ok(_) => return Err(err(file, "duration", "must be > 0")),
        Err(e) => return Err(err(file, "duration", e)),
    }
    let headroom = raw
        .draw
        .headroom
        .as_ref()
        .map_or(Ok(Dist::Const(4.0)), |d| {
            dist(d, FACTOR, file, "draw.headroom")
        })?;
    let burst = raw.draw.burst.as_ref().map_or(Ok(Dist::Const(1.0)), |d| {
        dist(d, FACTOR, file, "draw.burst")
    })?;
    if raw.loss_model.is_empty() {
        return Err(err(file, "loss_model", "needs at least one [[loss_model]]"));
    }
    let mut models = Vec::with_capacity(raw.loss_model.len());
    for (i, m) in raw.loss_model.iter().enumerate() {
        let key = format!("loss_model[{i}]");
        if !(m.weight.is_finite() && m.weight > 0.0) {
            return Err(err(file, &format!("{key}.weight"), "must be > 0"));
        }
        if let Some(slot) = &m.slot {
            let key = format!("{key}.slot");
            if m.kind != "gemodel" {
                return Err(err(
                    file,
                    &key,
                    format!("only for kind `gemodel`, not `{}`", m.kind),
                ));
            }
            match parse_duration(slot) {
                Ok(d) if !d.is_zero() => {}
                Ok(_) => return Err(err(file, &key, "must be > 0")),
                Err(e) => return Err(err(file, &key, e)),
            }
        }
        match (&m.burst, m.kind.as_str()) {
            (Some(_), "bursts") | (None, _) => {}
            (Some(_), other) => {
                return Err(err(
                    file,
                    &format!("{key}.burst"),
                    format!("only for kind `bursts`, not `{other}`"),
                ))
            }
        }
        let model = match (m.kind.as_str(), &m.traces) {
            ("bernoulli", None) => LossModel::Bernoulli,
            ("bursts", None) => {
                let table = m.burst.as_ref().ok_or_else(|| {
                    err(
                        file,
                        &format!("{key}.burst"),
                        format!("kind `bursts` needs {BURST_FORM}"),
                    )
                })?;
                LossModel::Bursts(burst_sizes(table, file, &format!("{key}.burst"))?)
            }
            ("gemodel", None) => LossModel::GilbertElliott {
                slot: m.slot.clone(),
            },
            ("trace", Some(traces)) if !traces.is_empty() => {
                let mut files = Vec::with_capacity(traces.len());
                for (j, t) in traces.iter().enumerate() {
                    let p = match base_dir {
                        Some(dir) if Path::new(t).is_relative() => dir.join(t),
                        _ => PathBuf::from(t),
                    };
                    if !p.is_file() {
                        return Err(err(
                            file,
                            &format!("{key}.traces[{j}]"),
                            format!("no trace file `{}`", p.display()),
                        ));
                    }
                    files.push(p);
                }
                LossModel::Trace(files)
            }
            ("trace", _) => {
                return Err(err(
                    file,
                    &format!("{key}.traces"),
                    "`trace` needs a non-empty list of trace files",
                ))
            }
            ("bernoulli" | "gemodel" | "bursts", Some(_)) => {
                return Err(err(
                    file,
                    &format!("{key}.traces"),
                    format!("only for kind `trace`, not `{}`", m.kind),
                ))
            }
            (other, _) => {
                return Err(err(
                    file,
                    &format!("{key}.kind"),
                    format!("unknown loss model `{other}` (bernoulli, gemodel, bursts, trace)"),
                ))
            }
        };
        models.push((model, m.weight));
    }
    let total: f64 = models.iter().map(|m| m.1).sum();
    for m in &mut models {
        m.1 /= total;
    }
    if raw.policy.is_empty() {
        return Err(err(file, "policy", "needs at least one [[policy]]"));
    }
    let loss = dist(&raw.draw.loss, PROBABILITY, file, "draw.loss")?;
    for (i, (m, _)) in models.iter().enumerate() {
        if let LossModel::Bursts(sizes) = m {
            if loss.upper() > sizes.max_loss_rate() {
                return Err(err(
                    file,
                    "draw.loss",
                    format!(
                        "may draw up to {}, above {:.4}, the highest loss rate of \
                         loss_model[{i}]'s bursts (mean {:.3} packets, every gap one packet): \
                         set a lower `max`",
                        loss.upper(),
                        sizes.max_loss_rate(),
                        sizes.mean()
                    ),
                ));
            }
        }
    }
    let pop = Population {
        name: raw.name.unwrap_or_else(|| default_name.to_owned()),
        seed: raw.seed.unwrap_or(1),
        streams,
        duration,
        queue: raw
            .queue
            .unwrap_or_else(|| "droptail packets=100".to_owned()),
        bitrate: dist(&raw.draw.bitrate, RATE, file, "draw.bitrate")?,
        srtt: dist(&raw.draw.srtt, DURATION, file, "draw.srtt")?,
        loss,
        headroom,
        burst,
        loss_models: models,
        app: stream_app(raw.app.unwrap_or_default(), file)?,
        transport: raw.transport.unwrap_or_default(),
        policies: raw.policy,
        file: file.to_owned(),
    };
    // The shared tables are checked by the scenario loader, on the first stream, before any
    // run: an error there names the key as the scenario file would.
    pop.stream(0)?;
    Ok(pop)
}

/// The `[app]` every stream gets (its `bitrate` is the stream's draw): a live stream, or a MoQ
/// broadcast with `kind = "moq"`, the two apps whose source is one encoder at a bitrate.
fn stream_app(mut app: toml::Table, file: &str) -> Result<toml::Table, Error> {
    match app.get("kind") {
        None => {
            app.insert("kind".into(), "live".into());
        }
        Some(toml::Value::String(k)) if k == "live" || k == "moq" => {}
        Some(other) => {
            return Err(err(
                file,
                "app.kind",
                format!("must be \"live\" or \"moq\", not {other}"),
            ))
        }
    }
    Ok(app)
}

/// A rate as an exact scenario string.
fn rate_text(bps: f64) -> String {
    format!("{}bps", bps.round().max(1.0) as u64)
}

impl Population {
    /// Stream `i`'s draws and scenario.
    pub fn stream(&self, i: usize) -> Result<Stream, Error> {
        let seed = self.seed.wrapping_add(i as u64);
        let mut rng = element_rng(seed, "population");
        let bitrate = self.bitrate.sample(&mut rng);
        let srtt = self.srtt.sample(&mut rng);
        let loss = self.loss.sample(&mut rng);
        let headroom = self.headroom.sample(&mut rng);
        let burst = self.burst.sample(&mut rng);
        let pick = unit(&mut rng);
        let trace_pick = unit(&mut rng);
        let mut acc = 0.0;
        let model = self
            .loss_models
            .iter()
            .find(|(_, w)| {
                acc += w;
                pick < acc
            })
            .or(self.loss_models.last())
            .map(|(m, _)| m)
            .expect("checked: at least one loss model");
        let percent = |p: f64| format!("{}%", (p * 100.0 * 1e6).round() / 1e6);
        let mut down = toml::Table::new();
        let mut up = toml::Table::new();
        let mut params = StreamParams {
            stream: i,
            seed,
            bitrate_kbps: bitrate / 1e3,
            srtt_ms: srtt,
            loss_rate: loss,
            loss_model: "bernoulli",
            link_mbps: None,
            burst: None,
            trace: None,
        };
        let link = bitrate * headroom;
        match model {
            LossModel::Bernoulli => {
                down.insert("rate".into(), rate_text(link).into());
                down.insert("loss".into(), format!("bernoulli {}", percent(loss)).into());
                up.insert("rate".into(), rate_text(link).into());
                params.link_mbps = Some(link / 1e6);
            }
            LossModel::GilbertElliott { slot } => {
                // Stationary loss rate p / (p + r) with every bad-state packet lost (1-h =
                // 100 %) and none in the good state (1-k = 0 %): p = loss * r / (1 - loss).
                let r = 1.0 / burst;
                let p = (loss * r / (1.0 - loss).max(1e-9)).min(1.0);
                let model = match slot {
                    Some(slot) => format!("slotted-gemodel {slot}"),
                    None => "gemodel".to_owned(),
                };
                down.insert("rate".into(), rate_text(link).into());
                down.insert(
                    "loss".into(),
                    format!("{model} {} {} 100% 0%", percent(p), percent(r)).into(),
                );
                up.insert("rate".into(), rate_text(link).into());
                params.loss_model = "gemodel";
                params.link_mbps = Some(link / 1e6);
                params.burst = Some(burst);
            }
            LossModel::Bursts(sizes) => {
                // A burst is an outage as long as its packets take at the stream's bitrate: a
                // sender that keeps sending loses the drawn size, one that stalls loses fewer.
                let datagram = recoup_transport::TransportConfig::default().max_datagram_size;
                let pace_ns = (datagram as f64 * 8.0 / bitrate * 1e9).round().max(1.0);
                down.insert("rate".into(), rate_text(link).into());
                down.insert(
                    "loss".into(),
                    format!("bursts {} pace={pace_ns}ns {sizes}", percent(loss)).into(),
                );
                up.insert("rate".into(), rate_text(link).into());
                params.loss_model = "bursts";
                params.link_mbps = Some(link / 1e6);
                params.burst = Some(sizes.mean());
            }
            LossModel::Trace(files) => {
                let idx = ((trace_pick * files.len() as f64) as usize).min(files.len() - 1);
                let trace = &files[idx];
                down.insert("trace".into(), trace.display().to_string().into());
                down.insert("loss".into(), format!("bernoulli {}", percent(loss)).into());
                up.insert("rate".into(), "10Mbps".into());
                params.loss_model = "trace";
                params.trace = trace.file_name().map(|n| n.to_string_lossy().into_owned());
            }
        }
        let mut path = toml::Table::new();
        path.insert("rtt".into(), format!("{:.3}ms", srtt).into());
        path.insert("queue".into(), self.queue.clone().into());
        path.insert("down".into(), down.into());
        path.insert("up".into(), up.into());
        let mut app = self.app.clone();
        app.insert("bitrate".into(), rate_text(bitrate).into());
        let name = format!("{}[stream={i}]", self.name);
        let mut t = toml::Table::new();
        t.insert("name".into(), name.clone().into());
        t.insert("seed".into(), toml::Value::Integer(seed as i64));
        t.insert("repetitions".into(), 1.into());
        t.insert("duration".into(), self.duration.clone().into());
        t.insert("path".into(), path.into());
        t.insert("app".into(), app.into());
        t.insert("transport".into(), self.transport.clone().into());
        t.insert(
            "policy".into(),
            toml::Value::Array(self.policies.iter().cloned().map(Into::into).collect()),
        );
        let mut text = String::new();
        let _ = writeln!(text, "# {} stream {i} ({})", self.name, self.file);
        text.push_str(&toml::to_string(&t).map_err(|e| err(&self.file, &name, e.to_string()))?);
        let scenario = load_str(&text, &self.file, None, &name)?
            .into_iter()
            .next()
            .ok_or_else(|| err(&self.file, &name, "the stream expands to no scenario"))?;
        Ok(Stream {
            params,
            toml: text,
            scenario,
        })
    }

    /// The first `n` streams.
    pub fn streams(&self, n: usize) -> Result<Vec<Stream>, Error> {
        (0..n).map(|i| self.stream(i)).collect()
    }
}

/// Percentiles of a fleet's per-stream values, one row per policy and metric.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FleetRow {
    pub policy: String,
    pub metric: String,
    /// Streams with a value (a stream without data that needed two retransmissions has no
    /// IRT, as in the papers' per-stream averages).
    pub streams: u64,
    pub mean: Option<f64>,
    pub p5: Option<f64>,
    pub p10: Option<f64>,
    pub p25: Option<f64>,
    pub p50: Option<f64>,
    pub p75: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

/// One point of a metric's CDF over the fleet's streams: the `percent` quantile.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CdfPoint {
    pub policy: String,
    pub metric: String,
    pub percent: u32,
    pub value: f64,
}

/// The fleet's percentiles over streams (AutoRec Figs. 21-22 and TOO Fig. 3 report means and
/// high percentiles of per-stream values).
#[must_use]
pub fn fleet_summary(rows: &[RunRow]) -> Vec<FleetRow> {
    metric_values(rows)
        .into_iter()
        .map(|(policy, metric, v)| {
            let p = |q: f64| percentile(&v, q);
            FleetRow {
                policy,
                metric: metric.to_owned(),
                streams: v.len() as u64,
                mean: mean(&v),
                p5: p(0.05),
                p10: p(0.10),
                p25: p(0.25),
                p50: p(0.50),
                p75: p(0.75),
                p90: p(0.90),
                p95: p(0.95),
                p99: p(0.99),
                max: v.last().copied(),
            }
        })
        .collect()
}

/// Each metric's CDF over streams at 0, 1, ..., 100 %.
#[must_use]
pub fn fleet_cdf(rows: &[RunRow]) -> Vec<CdfPoint> {
    metric_values(rows)
        .into_iter()
        .flat_map(|(policy, metric, v)| {
            (0..=100u32).filter_map(move |q| {
                percentile(&v, f64::from(q) / 100.0).map(|value| CdfPoint {
                    policy: policy.clone(),
                    metric: metric.to_owned(),
                    percent: q,
                    value,
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use recoup_elements::LossSpec;
    use recoup_elements::ServiceSpec;

    const TRACE_DIR: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces/mahimahi"
    );

    fn text(draw_srtt: &str, loss_models: &str) -> String {
        format!(
            r#"
name = "fleet"
seed = 7
streams = 50
duration = "10s"
[draw]
bitrate = {{ dist = "lognormal", mean = "984.5kbps", cv = 0.6, min = "100kbps" }}
srtt = {draw_srtt}
loss = {{ dist = "lognormal", mean = 0.04, cv = 1.0, max = 0.5 }}
headroom = {{ dist = "uniform", min = 2.0, max = 6.0 }}
burst = {{ dist = "uniform", min = 1.0, max = 4.0 }}
{loss_models}
[app]
fps = 30
[transport]
cc = "bbr"
[[policy]]
name = "arq"
[[policy]]
name = "autorec"
params = "alpha=200ms,beta=0.5,gamma=0.5"
"#
        )
    }

    const SRTT: &str =
        r#"{ dist = "lognormal", mean = "95.5ms", cv = 0.8, min = "5ms", max = "2s" }"#;
    const MODELS: &str = r#"
[[loss_model]]
kind = "bernoulli"
weight = 2
[[loss_model]]
kind = "gemodel"
weight = 1
"#;

    fn parse_ok(src: &str) -> Population {
        parse(src, "fleet.toml", Some(Path::new(TRACE_DIR)), "fleet").expect("population")
    }

    fn parse_err(src: &str) -> String {
        parse(src, "fleet.toml", Some(Path::new(TRACE_DIR)), "fleet")
            .expect_err("should fail")
            .to_string()
    }

    #[test]
    fn streams_are_deterministic_and_independent_of_the_fleet_size() {
        let pop = parse_ok(&text(SRTT, MODELS));
        let a = pop.streams(20).expect("streams");
        let b = pop.streams(5).expect("streams");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.params, y.params);
            assert_eq!(x.toml, y.toml);
        }
        assert_eq!(a[3].params.seed, 10);
        assert_eq!(a[3].scenario.seed, 10);
        assert_eq!(a[3].scenario.repetitions, 1);
        assert_eq!(a[3].scenario.policies.len(), 2);
        assert_ne!(a[0].params, a[1].params);
        // Every stream is a live stream at its drawn bitrate over its drawn RTT.
        for s in &a {
            let crate::app::AppSpec::Live(live) = &s.scenario.app else {
                panic!("stream {} is not live", s.params.stream);
            };
            assert_eq!(
                live.encoder.bitrate as f64,
                (s.params.bitrate_kbps * 1e3).round()
            );
            let rtt = 2.0 * s.scenario.down.delay.as_secs_f64() * 1e3;
            assert!(
                (rtt - s.params.srtt_ms).abs() < 0.01,
                "{rtt} vs {}",
                s.params.srtt_ms
            );
            assert!((5.0..=2000.0).contains(&s.params.srtt_ms));
            assert!((0.0..=0.5).contains(&s.params.loss_rate));
        }
    }

    #[test]
    fn a_moq_fleet_broadcasts_at_each_streams_drawn_bitrate() {
        let src = text(SRTT, MODELS).replace(
            "[app]\nfps = 30\n",
            "[app]\nkind = \"moq\"\nfps = 30\ngop = 30\ndeadline = \"400ms\"\n",
        );
        let pop = parse_ok(&src);
        for s in pop.streams(5).expect("streams") {
            let crate::app::AppSpec::Moq(moq) = &s.scenario.app else {
                panic!("stream {} is not a MoQ broadcast", s.params.stream);
            };
            assert_eq!(
                moq.encoder.bitrate as f64,
                (s.params.bitrate_kbps * 1e3).round()
            );
            assert_eq!(moq.deadline, std::time::Duration::from_millis(400));
        }
        let e = parse_err(&text(SRTT, MODELS).replace("[app]\n", "[app]\nkind = \"vod\"\n"));
        assert!(e.contains("app.kind") && e.contains("\"vod\""), "{e}");
    }

    #[test]
    fn draws_follow_the_stated_distributions() {
        // Means of 4000 streams within 5 % of the configured means (the clamps move them by
        // far less: a 0.6-cv log-normal has 0.01 % of its mass below 100 kbit/s).
        let pop = parse_ok(&text(SRTT, MODELS));
        let n = 4000;
        let streams: Vec<StreamParams> = (0..n)
            .map(|i| pop.stream(i).expect("stream").params)
            .collect();
        let avg = |f: &dyn Fn(&StreamParams) -> f64| streams.iter().map(f).sum::<f64>() / n as f64;
        let bitrate = avg(&|s| s.bitrate_kbps);
        assert!(
            (bitrate / 984.5 - 1.0).abs() < 0.05,
            "mean bitrate {bitrate}"
        );
        let srtt = avg(&|s| s.srtt_ms);
        assert!((srtt / 95.5 - 1.0).abs() < 0.05, "mean srtt {srtt}");
        let ge = streams.iter().filter(|s| s.loss_model == "gemodel").count() as f64 / n as f64;
        assert!((ge - 1.0 / 3.0).abs() < 0.03, "gemodel share {ge}");
    }

    #[test]
    fn a_share_of_zero_loss_draws_keeps_the_mean() {
        let base = "loss = { dist = \"lognormal\", mean = 0.04, cv = 1.0, max = 0.5 }";
        let zero = |z: &str| {
            text(SRTT, MODELS).replace(
                base,
                &format!(
                    "loss = {{ dist = \"lognormal\", mean = 0.04, cv = 1.0, max = 0.5, zero = {z} }}"
                ),
            )
        };
        // zero = 0 draws what no `zero` draws.
        let (plain, zero0) = (parse_ok(&text(SRTT, MODELS)), parse_ok(&zero("0.0")));
        for i in 0..50 {
            assert_eq!(
                plain.stream(i).expect("stream").params,
                zero0.stream(i).expect("stream").params
            );
        }
        let pop = parse_ok(&zero("0.6"));
        let n = 4000;
        let loss: Vec<f64> = (0..n)
            .map(|i| pop.stream(i).expect("stream").params.loss_rate)
            .collect();
        let zeros = loss.iter().filter(|&&l| l == 0.0).count() as f64 / n as f64;
        assert!((zeros - 0.6).abs() < 0.03, "zero share {zeros}");
        // The others: log-normal with mean 10 %, clamped at 50 % (which takes 0.18 pp off).
        let mean = loss.iter().sum::<f64>() / n as f64;
        assert!((mean / 0.0393 - 1.0).abs() < 0.1, "mean {mean}");
        // A zero loss is a stream without random loss.
        let s = (0..20)
            .map(|i| pop.stream(i).expect("stream"))
            .find(|s| s.params.loss_rate == 0.0)
            .expect("a lossless stream");
        assert!(
            s.scenario.down.loss == LossSpec::Bernoulli(recoup_elements::Prob::ZERO)
                || matches!(&s.scenario.down.loss, LossSpec::GilbertElliott(g) if g.p == recoup_elements::Prob::ZERO),
            "{:?}",
            s.scenario.down.loss
        );
        for (bad, key) in [("1.0", "draw.loss.zero"), ("-0.1", "draw.loss.zero")] {
            let e = parse_err(&zero(bad));
            assert!(e.contains(key) && e.contains("share in [0, 1)"), "{e}");
        }
        let e = parse_err(&text(
            r#"{ dist = "lognormal", mean = "95.5ms", cv = 0.8, zero = 0.5 }"#,
            MODELS,
        ));
        assert!(e.contains("draw.srtt.zero"), "{e}");
        let e = parse_err(&text(SRTT, MODELS).replace(
            base,
            "loss = { dist = \"uniform\", min = 0.0, max = 0.1, zero = 0.5 }",
        ));
        assert!(
            e.contains("draw.loss.zero") && e.contains("not a parameter of `uniform`"),
            "{e}"
        );
    }

    #[test]
    fn gemodel_streams_lose_at_the_drawn_rate_in_bursts_of_the_drawn_length() {
        let pop = parse_ok(&text(SRTT, MODELS));
        let s = (0..50)
            .map(|i| pop.stream(i).expect("stream"))
            .find(|s| s.params.loss_model == "gemodel")
            .expect("a gemodel stream");
        let LossSpec::GilbertElliott(ge) = &s.scenario.down.loss else {
            panic!("{:?}", s.scenario.down.loss);
        };
        let (p, r) = (ge.p.fraction(), ge.r.fraction());
        assert!((p / (p + r) - s.params.loss_rate).abs() < 1e-6);
        assert!((1.0 / r - s.params.burst.expect("burst")).abs() < 1e-4);
        assert_eq!(
            s.scenario.up.loss,
            LossSpec::Bernoulli(recoup_elements::Prob::ZERO)
        );
    }

    const BURSTS: &str = r#"
[[loss_model]]
kind = "bernoulli"
weight = 1
[[loss_model]]
kind = "bursts"
weight = 1
burst = { single = 0.372, p90 = 13, p95 = 27, p99 = 125, max = 183 }
"#;

    #[test]
    fn bursts_streams_lose_at_the_drawn_rate_in_bursts_of_the_given_sizes() {
        let pop = parse_ok(&text(SRTT, BURSTS));
        let s = (0..50)
            .map(|i| pop.stream(i).expect("stream"))
            .find(|s| s.params.loss_model == "bursts")
            .expect("a bursts stream");
        let LossSpec::Bursts { rate, pace, sizes } = &s.scenario.down.loss else {
            panic!("{:?}", s.scenario.down.loss);
        };
        assert!((rate - s.params.loss_rate).abs() < 1e-8);
        // One 1350-byte datagram's time at the stream's bitrate.
        let pace = pace.expect("a pace").as_secs_f64();
        assert!((pace - 1350.0 * 8.0 / (s.params.bitrate_kbps * 1e3)).abs() < 1e-8);
        assert_eq!(sizes.to_string(), "1:37.2% 13:90% 27:95% 125:99% 183:100%");
        assert_eq!(s.params.burst, Some(sizes.mean()));
        assert!(s.params.link_mbps.is_some());
        assert_eq!(
            s.scenario.up.loss,
            LossSpec::Bernoulli(recoup_elements::Prob::ZERO)
        );
        // Percentiles may be any, in any order in the table.
        let any = BURSTS.replace(
            "single = 0.372, p90 = 13, p95 = 27, p99 = 125, max = 183",
            "max = 50, p50 = 3, single = 0.2",
        );
        let pop = parse_ok(&text(SRTT, &any));
        let LossModel::Bursts(sizes) = &pop.loss_models[1].0 else {
            panic!("{:?}", pop.loss_models);
        };
        assert_eq!(sizes.to_string(), "1:20% 3:50% 50:100%");
    }

    #[test]
    fn bad_burst_tables_are_errors_naming_the_key_and_the_accepted_form() {
        let table = "single = 0.372, p90 = 13, p95 = 27, p99 = 125, max = 183";
        for (new, key, what) in [
            (
                "single = 0.372, p90 = 30, p95 = 27, p99 = 125, max = 183",
                "burst.p95",
                "p95 = 27 is not above 30 (p90)",
            ),
            (
                "single = 0.372, p90 = 13, p95 = 27, p99 = 125, max = 125",
                "burst.max",
                "125 is not above",
            ),
            (
                "single = 1.2, p90 = 13, max = 183",
                "burst.single",
                "not a share in (0, 1)",
            ),
            (
                "single = 0, p90 = 13, max = 183",
                "burst.single",
                "not a share in (0, 1)",
            ),
            ("p90 = 13, p95 = 27, max = 183", "burst.single", "missing"),
            ("single = 0.372, p90 = 13", "burst.max", "missing"),
            (
                "single = 0.372, p30 = 13, max = 183",
                "burst.p30",
                "not above `single`",
            ),
            (
                "single = 0.372, p90 = 1, max = 183",
                "burst.p90",
                "not above 1 (`single`)",
            ),
            (
                "single = 0.372, p90 = 12.5, max = 183",
                "burst.p90",
                "whole number of packets",
            ),
            (
                "single = 0.372, p90 = \"13\", max = 183",
                "burst.p90",
                "whole number of packets",
            ),
            (
                "single = 0.372, p100 = 13, max = 183",
                "burst.p100",
                "unknown key",
            ),
            (
                "single = 0.372, q90 = 13, max = 183",
                "burst.q90",
                "unknown key",
            ),
            (
                "single = 0.372, p90 = 13, max = 1000000",
                "burst.max",
                "1..=100000",
            ),
        ] {
            let e = parse_err(&text(SRTT, &BURSTS.replace(table, new)));
            assert!(
                e.contains(&format!("loss_model[1].{key}")) && e.contains(what),
                "{new}: {e}"
            );
            // Every error spells out what is accepted.
            assert!(
                e.contains("`burst = { single = SHARE, pNN = SIZE ..., max = SIZE }`"),
                "{e}"
            );
        }
        let no_table = BURSTS.replace(&format!("burst = {{ {table} }}\n"), "");
        let e = parse_err(&text(SRTT, &no_table));
        assert!(
            e.contains("loss_model[1].burst") && e.contains("kind `bursts` needs"),
            "{e}"
        );
        let on_bernoulli = BURSTS.replace(
            "kind = \"bernoulli\"\nweight = 1\n",
            &format!("kind = \"bernoulli\"\nweight = 1\nburst = {{ {table} }}\n"),
        );
        let e = parse_err(&text(SRTT, &on_bernoulli));
        assert!(
            e.contains("loss_model[0].burst") && e.contains("only for kind `bursts`"),
            "{e}"
        );
        // Bursts of mean 1.1 packets cannot lose more than 52.4 %: the loss draw's ceiling is
        // checked against it.
        let short = BURSTS.replace(table, "single = 0.9, max = 2");
        let e = parse_err(&text(SRTT, &short).replace("max = 0.5", "max = 0.6"));
        assert!(
            e.contains("draw.loss") && e.contains("loss_model[1]'s bursts"),
            "{e}"
        );
        parse_ok(&text(SRTT, &short));
    }

    #[test]
    fn slotted_gemodel_streams_change_state_once_per_slot() {
        let models = "[[loss_model]]\nkind = \"gemodel\"\nweight = 1\nslot = \"30ms\"\n";
        let pop = parse_ok(&text(SRTT, models));
        let s = pop.stream(0).expect("stream");
        let LossSpec::SlottedGe { slot, params } = &s.scenario.down.loss else {
            panic!("{:?}", s.scenario.down.loss);
        };
        assert_eq!(*slot, std::time::Duration::from_millis(30));
        let (p, r) = (params.p.fraction(), params.r.fraction());
        assert!((p / (p + r) - s.params.loss_rate).abs() < 1e-6);
        let bad = "[[loss_model]]\nkind = \"bernoulli\"\nweight = 1\nslot = \"30ms\"\n";
        let e = parse_err(&text(SRTT, bad));
        assert!(e.contains("loss_model[0].slot"), "{e}");
    }

    #[test]
    fn trace_streams_use_an_existing_trace() {
        let models = r#"
[[loss_model]]
kind = "trace"
weight = 1
traces = ["TMobile-LTE-short.down", "Verizon-LTE-short.down"]
"#;
        let pop = parse_ok(&text(SRTT, models));
        let s = pop.stream(0).expect("stream");
        let ServiceSpec::Trace(t) = &s.scenario.down.service else {
            panic!("{:?}", s.scenario.down.service);
        };
        assert!(t.is_file(), "{}", t.display());
        assert_eq!(s.params.loss_model, "trace");
    }

    #[test]
    fn bad_distributions_and_missing_traces_are_errors_naming_the_key() {
        let negative = r#"{ dist = "uniform", min = "-5ms", max = "100ms" }"#;
        let e = parse_err(&text(negative, MODELS));
        assert!(e.contains("draw.srtt.min"), "{e}");
        let negative = r#"{ dist = "const", value = -5.0 }"#;
        let e = parse_err(&text(negative, MODELS));
        assert!(e.contains("draw.srtt.value"), "{e}");
        let src =
            text(SRTT, MODELS).replace("mean = 0.04, cv = 1.0, max = 0.5", "mean = 1.5, cv = 1.0");
        let e = parse_err(&src);
        assert!(e.contains("draw.loss.mean"), "{e}");
        let src = text(SRTT, MODELS).replace("max = 0.5", "max = 2.0");
        let e = parse_err(&src);
        assert!(e.contains("draw.loss.max"), "{e}");
        let src = text(SRTT, MODELS).replace("min = 2.0, max = 6.0", "min = 6.0, max = 2.0");
        let e = parse_err(&src);
        assert!(
            e.contains("draw.headroom") && e.contains("min 6 > max 2"),
            "{e}"
        );
        let missing = "[[loss_model]]\nkind = \"trace\"\nweight = 1\ntraces = [\"nope.down\"]\n";
        let e = parse_err(&text(SRTT, missing));
        assert!(
            e.contains("loss_model[0].traces[0]") && e.contains("nope.down"),
            "{e}"
        );
        let e = parse_err(&text(
            SRTT,
            "[[loss_model]]\nkind = \"bernoulli\"\nweight = -1\n",
        ));
        assert!(e.contains("loss_model[0].weight"), "{e}");
        let e = parse_err(&text(
            SRTT,
            "[[loss_model]]\nkind = \"erasure\"\nweight = 1\n",
        ));
        assert!(e.contains("loss_model[0].kind"), "{e}");
        let e = parse_err(&text(r#"{ dist = "pareto", mean = "1ms" }"#, MODELS));
        assert!(e.contains("draw.srtt.dist"), "{e}");
        let e = parse_err(&text(SRTT, MODELS).replace("streams = 50", "streams = 50\nfoo = 1"));
        assert!(e.contains("foo"), "{e}");
        // The shared tables go through the scenario loader: a bad policy is named too.
        let e = parse_err(&text(SRTT, MODELS).replace("gamma=0.5", "gamma=7"));
        assert!(e.contains("policy[1]"), "{e}");
    }

    #[test]
    fn the_shipped_deployment_fleet_loads() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/fleet/deployment.toml"
        );
        let pop = load(Path::new(file)).expect("deployment.toml");
        assert_eq!(pop.streams, 200);
        let labels: Vec<String> = pop
            .stream(0)
            .expect("stream")
            .scenario
            .policies
            .into_iter()
            .map(|p| p.label)
            .collect();
        assert_eq!(labels, ["arq", "autorec", "too"]);
        let kinds: Vec<&str> = pop
            .streams(60)
            .expect("streams")
            .iter()
            .map(|s| s.params.loss_model)
            .collect();
        for kind in ["bernoulli", "bursts", "trace"] {
            assert!(kinds.contains(&kind), "no {kind} stream in 60: {kinds:?}");
        }
    }

    #[test]
    fn the_shipped_fleets_bursts_follow_art_s_measured_sizes() {
        // ART §3.2: 37.2 % of loss bursts are one packet; p90, p95, p99 13, 27 and 125 packets.
        // The loss elements of the fleet's bursts streams, as the runs build them (same spec,
        // seed and element name), each fed 100,000 packets at its pace (one datagram per
        // datagram time at the stream's bitrate); their bursts pooled.
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/fleet/deployment.toml"
        );
        let pop = load(Path::new(file)).expect("deployment.toml");
        let mut bursts: Vec<u32> = Vec::new();
        let mut streams = 0;
        for i in 0..200 {
            let s = pop.stream(i).expect("stream");
            if s.params.loss_model != "bursts" {
                continue;
            }
            streams += 1;
            let LossSpec::Bursts {
                pace: Some(pace), ..
            } = s.scenario.down.loss
            else {
                panic!("{:?}", s.scenario.down.loss);
            };
            let pace = recoup_time::saturating_nanos(pace);
            let mut nodes = s
                .scenario
                .down
                .path_spec()
                .build(s.params.seed, "down", None, 0)
                .expect("path");
            let loss = nodes[0]
                .1
                .as_any_mut()
                .and_then(|n| n.downcast_mut::<recoup_elements::Loss>())
                .expect("the first element is the loss element");
            let mut run = 0;
            for k in 0..100_000u64 {
                let now = recoup_time::Instant::from_nanos(k * pace);
                if loss.decide(now, k) {
                    run += 1;
                } else if run > 0 {
                    bursts.push(run);
                    run = 0;
                }
            }
        }
        let n = bursts.len() as f64;
        assert!(n > 10_000.0, "{n} bursts from {streams} streams");
        bursts.sort_unstable();
        for (size, share) in [(1, 0.372), (13, 0.90), (27, 0.95), (125, 0.99)] {
            let se = (share * (1.0 - share) / n).sqrt();
            let got = bursts.iter().filter(|&&b| b <= size).count() as f64 / n;
            eprintln!("P(burst <= {size}) = {got:.4}, ART {share} (se {se:.4}); {n} bursts");
            assert!(
                (got - share).abs() <= 5.0 * se,
                "P(burst <= {size}) = {got}, ART {share} +- {se}"
            );
        }
    }

    #[test]
    fn fleet_percentiles_are_over_streams() {
        let mut rows = Vec::new();
        for (i, latency) in [10.0, 20.0, 30.0, 40.0, 50.0].into_iter().enumerate() {
            let mut r = crate::metrics::run_row(
                "arq",
                i as u64,
                &[],
                &crate::metrics::RunCounters::default(),
                None,
            );
            r.irt_ms = Some(latency);
            rows.push(r);
        }
        let s = fleet_summary(&rows);
        let irt = s.iter().find(|r| r.metric == "irt_ms").expect("irt row");
        assert_eq!(irt.streams, 5);
        assert_eq!(irt.mean, Some(30.0));
        assert_eq!(irt.p50, Some(30.0));
        assert_eq!(irt.p95, Some(48.0));
        assert_eq!(irt.max, Some(50.0));
        let cdf: Vec<f64> = fleet_cdf(&rows)
            .into_iter()
            .filter(|p| p.metric == "irt_ms")
            .map(|p| p.value)
            .collect();
        assert_eq!(cdf.len(), 101);
        assert_eq!((cdf[0], cdf[50], cdf[100]), (10.0, 30.0, 50.0));
    }
}
