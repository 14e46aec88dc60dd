//! Scenario files (DESIGN.md "Scenario file (TOML)") and sweep plans.
//!
//! A file describes a run, or with a `[sweep]` table a grid of runs: seed and repetitions,
//! duration, the path (`[path]` for both directions, `[path.down]` / `[path.up]` overriding it
//! key by key), the application (`[app]`), the transport (`[transport]`) and the policies
//! (`[[policy]]`) that all run on the same seeds. Unknown keys are errors naming the key, with
//! the file, line and column; every string value is checked by the parser that will use it
//! (rates, durations, loss and queue descriptions, congestion controllers, policies). Relative
//! paths (traces, loss replay files) resolve against the folder of the file.
//!
//! Each table is a `#[serde(deny_unknown_fields)]` struct and each key one of its fields, which
//! holds the key's default (the struct's `Default`, for `[app]` the application's own) and its
//! check (the field's deserializer); the keys a sweep may vary are read from the same structs
//! (`keys`). What is left after deserializing are the checks that span keys (`rate` or `trace`,
//! a gaming session's rate range). `[transport]` deserializes straight into [`TransportSpec`].
//!
//! A `[sweep]` table maps axes to values: any scenario key path (`"path.loss"`,
//! `"path.down.rate"`, `"app.bitrate"`, `"transport.cc"`, `"duration"` ...) or a policy parameter
//! (`"policy.<label>.<param>"`), to a list of values or a range `{ from, to, step }` (numbers, or
//! strings with one unit such as `"10ms"`). The sweep expands to the cartesian product, in the
//! order of the axes in the file, each point named `base[axis=value,...]`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use recoup_apps::frame::MAX_PAYLOAD;
use recoup_apps::gaming::GamingConfig;
use recoup_apps::lbbc::LbbcConfig;
use recoup_apps::live::{LiveConfig, LiveStart};
use recoup_apps::moq::MoqConfig;
use recoup_apps::rtc::RtcConfig;
use recoup_apps::source::EncoderConfig;
use recoup_apps::transfer::{FileConfig, RpcConfig};
use recoup_apps::vod::VodConfig;
use recoup_elements::{
    parse_duration, parse_rate, ElementSpec, LossSpec, PathSpec, Prob, QueueSpec, ServiceSpec,
};
use recoup_recovery::{FecSpec, PolicySpec};
use recoup_transport::cc::CcAlgorithm;
use recoup_transport::loss::{LossDetectionMode, ThresholdRtt};
use recoup_transport::{CopiesBeyondCwnd, Protection};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::app::AppSpec;
use crate::Error;

/// Largest scenario file read (1 MiB).
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;
/// Most points one sweep may expand to.
pub const MAX_SWEEP_POINTS: usize = 100_000;
/// Smallest receive window or send buffer a scenario may set: one full-size QUIC packet
/// (RFC 9000 §14).
pub const MIN_RECEIVE_WINDOW: u64 = 1200;

fn invalid(file: &str, key: &str, detail: impl Into<String>) -> Error {
    Error::Invalid {
        file: file.to_owned(),
        key: key.to_owned(),
        detail: detail.into(),
    }
}

fn parse_error(file: &str, src: &str, e: &toml::de::Error) -> Error {
    let at = e.span().map_or(0, |s| s.start).min(src.len());
    let before = &src[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = src[line_start..at].chars().count() + 1;
    let text = src[line_start..].lines().next().unwrap_or("").to_owned();
    Error::Parse {
        file: file.to_owned(),
        line,
        column,
        message: e.message().trim().to_owned(),
        text,
    }
}

// ---- values checked while deserializing (so errors carry the value's position) ----

#[derive(Clone, Copy, Debug, PartialEq)]
struct Dur(Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s)
            .map(Dur)
            .map_err(|e| de::Error::custom(format!("bad duration `{s}`: {e}")))
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Rate(u64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_rate(&s)
            .map(Rate)
            .map_err(|e| de::Error::custom(format!("bad rate `{s}`: {e}")))
    }
}

/// A string parsed by `T::from_str` (loss, queue, congestion controller).
#[derive(Clone, Debug, PartialEq)]
struct Parsed<T>(T);

impl<'de, T> Deserialize<'de> for Parsed<T>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map(Parsed).map_err(de::Error::custom)
    }
}

/// A field parsed by its `FromStr` (congestion controller, loss detection).
fn from_str<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    Parsed::deserialize(d).map(|p: Parsed<T>| p.0)
}

/// A byte count: an integer, or a string with a unit (`B`, `kB`, `MB`, `GB`, `KiB`, `MiB`,
/// `GiB`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Size(u64);

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("bad size `{s}` (e.g. 1500, \"64KiB\", \"1MB\")"))?;
    let mult = match unit.trim() {
        "" | "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("bad size `{s}`: unknown unit `{other}`")),
    };
    let bytes = (value * mult).round();
    if !(0.0..=1e12).contains(&bytes) {
        return Err(format!("bad size `{s}`: out of range"));
    }
    Ok(bytes as u64)
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte count (integer or string such as \"1MB\")")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom("size must not be negative"))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

// ---- the file's shape ----

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: Option<String>,
    seed: Option<u64>,
    repetitions: Option<u32>,
    duration: Option<Dur>,
    path: Option<RawPath>,
    app: Option<RawApp>,
    transport: Option<TransportSpec>,
    policy: Option<Vec<RawPolicy>>,
    sweep: Option<toml::Table>,
}

/// `[path.down]` / `[path.up]`: a key set here overrides `[path]`'s for that direction.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDirection {
    delay: Option<Dur>,
    jitter: Option<Dur>,
    rate: Option<Rate>,
    trace: Option<String>,
    queue: Option<Parsed<QueueSpec>>,
    loss: Option<Parsed<LossSpec>>,
}

/// `[path]`: both directions, with the defaults of a key neither direction sets. `rate` or
/// `trace` has no default, and `rtt` or `delay` (one way) gives the delay.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawPath {
    rtt: Option<Dur>,
    delay: Option<Dur>,
    jitter: Dur,
    rate: Option<Rate>,
    trace: Option<String>,
    queue: Parsed<QueueSpec>,
    loss: Parsed<LossSpec>,
    down: Option<RawDirection>,
    up: Option<RawDirection>,
}

impl Default for RawPath {
    /// No delay, jitter or loss, and an unbounded queue.
    fn default() -> Self {
        Self {
            rtt: None,
            delay: None,
            jitter: Dur(Duration::ZERO),
            rate: None,
            trace: None,
            queue: Parsed(QueueSpec::Infinite),
            loss: Parsed(LossSpec::Bernoulli(Prob::ZERO)),
            down: None,
            up: None,
        }
    }
}

/// `[app]`, by `kind`. Each kind's table holds every key with its default (the application's
/// own, through the table's `Default`) and its check (the field's deserializer); [`app`] adds
/// only the checks that span several keys or tables.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum RawApp {
    Live(RawLive),
    File(RawFileApp),
    Rpc(RawRpc),
    Rtc(RawRtc),
    Gaming(RawGaming),
    Vod(RawVod),
    Moq(RawMoq),
}

// ---- `[app]` keys: inside the `kind`-tagged table serde keeps no position, so each key's
// deserializer names its key, and holds its range check ----

/// An `[app]` value read as `R` and turned into `T` by `check`, errors naming `app.<key>`.
fn app_key<'de, D, R, T>(
    d: D,
    key: &str,
    check: impl FnOnce(R) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    R: Deserialize<'de>,
{
    let named = |e: String| <D::Error as de::Error>::custom(format!("`app.{key}`: {e}"));
    let raw = R::deserialize(d).map_err(|e| named(e.to_string()))?;
    check(raw).map_err(named)
}

fn rate_of(v: String) -> Result<u64, String> {
    parse_rate(&v).map_err(|e| format!("bad rate `{v}`: {e}"))
}

fn duration_of(v: String) -> Result<Duration, String> {
    parse_duration(&v).map_err(|e| format!("bad duration `{v}`: {e}"))
}

/// Defines `[app]` keys whose deserializer is [`app_key`] with a check.
macro_rules! app_keys {
    ($($(#[$doc:meta])* $key:ident: $raw:ty => $out:ty = $check:expr;)*) => {$(
        $(#[$doc])*
        fn $key<'de, D: Deserializer<'de>>(d: D) -> Result<$out, D::Error> {
            app_key(d, stringify!($key), $check)
        }
    )*};
}

/// Most transfers (files or requests) of one run.
const MAX_TRANSFERS: u32 = 1_000_000;

/// A transfer's size: at most a frame's payload (1 GiB).
fn transfer_size(s: Size) -> Result<u64, String> {
    if s.0 > u64::from(MAX_PAYLOAD) {
        Err("larger than 1 GiB".into())
    } else {
        Ok(s.0)
    }
}

app_keys! {
    bitrate: String => u64 = rate_of;
    min_bitrate: String => u64 = rate_of;
    max_bitrate: String => u64 = rate_of;
    fps: u32 => u32 = |fps| {
        if (1..=1000).contains(&fps) {
            Ok(fps)
        } else {
            Err("must be between 1 and 1000".to_owned())
        }
    };
    key_ratio: f64 => f64 = |r: f64| {
        if r.is_finite() && r > 0.0 {
            Ok(r)
        } else {
            Err("must be > 0".to_owned())
        }
    };
    size_noise: f64 => f64 = |n| {
        if (0.0..1.0).contains(&n) {
            Ok(n)
        } else {
            Err("must be in [0, 1)".to_owned())
        }
    };
    startup: String => Duration = duration_of;
    rebuffer: String => Duration = duration_of;
    deadline: String => Duration = duration_of;
    interval: String => Duration = duration_of;
    think: String => Duration = duration_of;
    segment: String => Duration = duration_of;
    max_buffer: String => Duration = duration_of;
    lbbc_delta: String => Duration = duration_of;
    start: String => LiveStart = |s: String| match s.as_str() {
        "session" => Ok(LiveStart::Session),
        "connect" => Ok(LiveStart::Connect),
        other => Err(format!("unknown start `{other}`: expected `session` or `connect`")),
    };
    count: u32 => u32 = |n| match n {
        0 => Err("must be at least 1".to_owned()),
        n if n > MAX_TRANSFERS => Err(format!("at most {MAX_TRANSFERS}")),
        n => Ok(n),
    };
    size: Size => u64 = transfer_size;
    request: Size => u64 = transfer_size;
    response: Size => u64 = transfer_size;
    ladder: Vec<String> => Vec<u64> = |l: Vec<String>| l.into_iter().map(rate_of).collect();
    delay_controller: String => DelayController = |s: String| match s.trim() {
        "copa" => Ok(DelayController::Copa),
        "pudica" => Err(
            "`pudica` is not implemented (its paper is not among ours); use `copa`".to_owned()
        ),
        other => Err(format!("unknown controller `{other}` (known: copa)")),
    };
    loss_controller: String => Option<LossController> = |s: String| match s.trim() {
        "none" => Ok(None),
        "lbbc" => Ok(Some(LossController::Lbbc)),
        other => Err(format!("unknown controller `{other}` (known: none, lbbc)")),
    };
}

/// `kind = "live"`: [`LiveConfig`].
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawLive {
    #[serde(deserialize_with = "bitrate")]
    bitrate: u64,
    #[serde(deserialize_with = "fps")]
    fps: u32,
    gop: u32,
    #[serde(deserialize_with = "key_ratio")]
    key_ratio: f64,
    #[serde(deserialize_with = "size_noise")]
    size_noise: f64,
    #[serde(deserialize_with = "startup")]
    startup: Duration,
    #[serde(deserialize_with = "rebuffer")]
    rebuffer: Duration,
    #[serde(deserialize_with = "start")]
    start: LiveStart,
}

impl Default for RawLive {
    fn default() -> Self {
        let d = LiveConfig::default();
        Self {
            bitrate: d.encoder.bitrate,
            fps: d.encoder.fps,
            gop: d.encoder.gop,
            key_ratio: d.encoder.key_ratio,
            size_noise: d.encoder.size_noise,
            startup: d.startup,
            rebuffer: d.rebuffer,
            start: d.start,
        }
    }
}

impl From<RawLive> for LiveConfig {
    fn from(t: RawLive) -> Self {
        Self {
            encoder: EncoderConfig {
                bitrate: t.bitrate,
                fps: t.fps,
                gop: t.gop,
                key_ratio: t.key_ratio,
                size_noise: t.size_noise,
            },
            start: t.start,
            startup: t.startup,
            rebuffer: t.rebuffer,
        }
    }
}

/// `kind = "file"`: [`FileConfig`]; `size` has no default.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFileApp {
    #[serde(deserialize_with = "size")]
    size: u64,
    #[serde(default = "one", deserialize_with = "count")]
    count: u32,
    #[serde(default, deserialize_with = "interval")]
    interval: Duration,
}

/// `kind = "rpc"`: [`RpcConfig`]; `response` has no default.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRpc {
    #[serde(default = "rpc_request", deserialize_with = "request")]
    request: u64,
    #[serde(deserialize_with = "response")]
    response: u64,
    #[serde(default = "one", deserialize_with = "count")]
    count: u32,
    #[serde(default, deserialize_with = "think")]
    think: Duration,
}

/// One transfer.
fn one() -> u32 {
    1
}

/// A 100-byte request.
fn rpc_request() -> u64 {
    100
}

/// `kind = "rtc"`: [`RtcConfig`].
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawRtc {
    #[serde(deserialize_with = "bitrate")]
    bitrate: u64,
    #[serde(deserialize_with = "fps")]
    fps: u32,
    gop: u32,
    #[serde(deserialize_with = "key_ratio")]
    key_ratio: f64,
    #[serde(deserialize_with = "size_noise")]
    size_noise: f64,
    #[serde(deserialize_with = "deadline")]
    deadline: Duration,
}

impl Default for RawRtc {
    fn default() -> Self {
        let d = RtcConfig::default();
        Self {
            bitrate: d.encoder.bitrate,
            fps: d.encoder.fps,
            gop: d.encoder.gop,
            key_ratio: d.encoder.key_ratio,
            size_noise: d.encoder.size_noise,
            deadline: d.deadline,
        }
    }
}

impl From<RawRtc> for RtcConfig {
    fn from(t: RawRtc) -> Self {
        Self {
            encoder: EncoderConfig {
                bitrate: t.bitrate,
                fps: t.fps,
                gop: t.gop,
                key_ratio: t.key_ratio,
                size_noise: t.size_noise,
            },
            deadline: t.deadline,
        }
    }
}

/// Most tracks of a MoQ broadcast.
const MAX_TRACKS: u32 = 16;

app_keys! {
    tracks: u32 => u32 = |n| {
        if (1..=MAX_TRACKS).contains(&n) {
            Ok(n)
        } else {
            Err(format!("must be between 1 and {MAX_TRACKS}"))
        }
    };
}

/// `app.gop` of a MoQ broadcast: a group is a GOP, so at least one frame.
fn group_frames<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    app_key(d, "gop", |n: u32| {
        if n >= 1 {
            Ok(n)
        } else {
            Err("must be at least 1 (a group is one GOP)".to_owned())
        }
    })
}

/// `app.deadline` of a MoQ broadcast: a delivery timeout between 1 ms and 60 s.
fn delivery_deadline<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    app_key(d, "deadline", |v: String| {
        let d = duration_of(v)?;
        if (Duration::from_millis(1)..=Duration::from_secs(60)).contains(&d) {
            Ok(d)
        } else {
            Err("must be between 1ms and 60s".to_owned())
        }
    })
}

/// `kind = "moq"`: [`MoqConfig`].
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawMoq {
    #[serde(deserialize_with = "tracks")]
    tracks: u32,
    #[serde(deserialize_with = "bitrate")]
    bitrate: u64,
    #[serde(deserialize_with = "fps")]
    fps: u32,
    #[serde(deserialize_with = "group_frames")]
    gop: u32,
    #[serde(deserialize_with = "key_ratio")]
    key_ratio: f64,
    #[serde(deserialize_with = "size_noise")]
    size_noise: f64,
    #[serde(deserialize_with = "delivery_deadline")]
    deadline: Duration,
}

impl Default for RawMoq {
    fn default() -> Self {
        let d = MoqConfig::default();
        Self {
            tracks: d.tracks,
            bitrate: d.encoder.bitrate,
            fps: d.encoder.fps,
            gop: d.encoder.gop,
            key_ratio: d.encoder.key_ratio,
            size_noise: d.encoder.size_noise,
            deadline: d.deadline,
        }
    }
}

impl From<RawMoq> for MoqConfig {
    fn from(t: RawMoq) -> Self {
        Self {
            tracks: t.tracks,
            encoder: EncoderConfig {
                bitrate: t.bitrate,
                fps: t.fps,
                gop: t.gop,
                key_ratio: t.key_ratio,
                size_noise: t.size_noise,
            },
            deadline: t.deadline,
        }
    }
}

/// Cloud gaming's delay-based bitrate controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DelayController {
    /// Copa, the transport's congestion controller (so `transport.cc` must be `copa`).
    Copa,
}

/// Cloud gaming's loss-based bitrate controller beside the delay-based one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LossController {
    /// LADR §3.2.
    Lbbc,
}

/// `kind = "gaming"` (docs/LADR.md): [`GamingConfig`], cloud gaming with a bitrate controller.
/// The `lbbc_*` keys apply with `loss_controller = "lbbc"`.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawGaming {
    #[serde(deserialize_with = "bitrate")]
    bitrate: u64,
    #[serde(deserialize_with = "min_bitrate")]
    min_bitrate: u64,
    #[serde(deserialize_with = "max_bitrate")]
    max_bitrate: u64,
    #[serde(deserialize_with = "fps")]
    fps: u32,
    gop: u32,
    #[serde(deserialize_with = "key_ratio")]
    key_ratio: f64,
    #[serde(deserialize_with = "size_noise")]
    size_noise: f64,
    #[serde(deserialize_with = "deadline")]
    deadline: Duration,
    #[serde(deserialize_with = "delay_controller")]
    delay_controller: DelayController,
    /// `none` or `lbbc`.
    #[serde(deserialize_with = "loss_controller")]
    loss_controller: Option<LossController>,
    lbbc_n: u32,
    #[serde(deserialize_with = "lbbc_delta")]
    lbbc_delta: Duration,
    lbbc_beta: f64,
    lbbc_c: f64,
    /// LADR §3.3's pending-data limit.
    pending_limit: bool,
    /// The share of the delay-based rate the encoder targets, in (0, 1].
    utilization: f64,
}

impl Default for RawGaming {
    fn default() -> Self {
        let d = GamingConfig::default();
        let l = LbbcConfig::default();
        Self {
            bitrate: d.encoder.bitrate,
            min_bitrate: d.min_bitrate,
            max_bitrate: d.max_bitrate,
            fps: d.encoder.fps,
            gop: d.encoder.gop,
            key_ratio: d.encoder.key_ratio,
            size_noise: d.encoder.size_noise,
            deadline: d.deadline,
            delay_controller: DelayController::Copa,
            loss_controller: d.lbbc.map(|_| LossController::Lbbc),
            lbbc_n: l.n,
            lbbc_delta: l.delta,
            lbbc_beta: l.beta,
            lbbc_c: l.c,
            pending_limit: d.pending_limit,
            utilization: d.utilization,
        }
    }
}

impl From<RawGaming> for GamingConfig {
    fn from(t: RawGaming) -> Self {
        Self {
            encoder: EncoderConfig {
                bitrate: t.bitrate,
                fps: t.fps,
                gop: t.gop,
                key_ratio: t.key_ratio,
                size_noise: t.size_noise,
            },
            min_bitrate: t.min_bitrate,
            max_bitrate: t.max_bitrate,
            deadline: t.deadline,
            lbbc: t.loss_controller.map(|LossController::Lbbc| LbbcConfig {
                n: t.lbbc_n,
                delta: t.lbbc_delta,
                beta: t.lbbc_beta,
                c: t.lbbc_c,
            }),
            pending_limit: t.pending_limit,
            utilization: t.utilization,
        }
    }
}

/// `kind = "vod"`: [`VodConfig`], key for key.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawVod {
    /// Bitrates, ascending (default: Big Buck Bunny's 20).
    #[serde(deserialize_with = "ladder")]
    ladder: Vec<u64>,
    #[serde(deserialize_with = "segment")]
    segment: Duration,
    segments: u32,
    startup_segments: u32,
    resume_segments: u32,
    #[serde(deserialize_with = "max_buffer")]
    max_buffer: Duration,
    rate_window: usize,
    upper: f64,
}

impl Default for RawVod {
    fn default() -> Self {
        let d = VodConfig::default();
        Self {
            ladder: d.ladder,
            segment: d.segment,
            segments: d.segments,
            startup_segments: d.startup_segments,
            resume_segments: d.resume_segments,
            max_buffer: d.max_buffer,
            rate_window: d.rate_window,
            upper: d.upper,
        }
    }
}

impl From<RawVod> for VodConfig {
    fn from(t: RawVod) -> Self {
        Self {
            ladder: t.ladder,
            segment: t.segment,
            segments: t.segments,
            startup_segments: t.startup_segments,
            resume_segments: t.resume_segments,
            max_buffer: t.max_buffer,
            rate_window: t.rate_window,
            upper: t.upper,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: String,
    #[serde(default)]
    params: String,
    label: Option<String>,
}

/// The tables of a scenario file; a sweep axis sets a key inside one of them, never a whole table.
const TABLES: [&str; 5] = ["path", "app", "transport", "policy", "sweep"];

/// The keys a table accepts, for sweep axes: the field names that serde's derive hands to
/// `deserialize_struct`, read without any input.
fn keys<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);

    impl<'de> Deserializer<'de> for Probe<'_> {
        type Error = de::value::Error;

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("only the keys were wanted"))
        }

        fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a table"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    // The probe always fails, after recording the fields.
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

// ---- the checked scenario ----

/// One direction of the path: loss, then a queue feeding a link, then delay.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectionSpec {
    pub loss: LossSpec,
    pub queue: QueueSpec,
    /// Rate or trace; a relative trace path is already resolved against the scenario's folder.
    pub service: ServiceSpec,
    /// One-way delay.
    pub delay: Duration,
    pub jitter: Duration,
}

impl DirectionSpec {
    /// The element chain: always `loss | queue + link | delay`, so element names (and so their
    /// random streams) do not depend on parameter values.
    #[must_use]
    pub fn path_spec(&self) -> PathSpec {
        PathSpec {
            elements: vec![
                ElementSpec::Loss(self.loss.clone()),
                ElementSpec::Link {
                    service: self.service.clone(),
                    queue: self.queue,
                },
                ElementSpec::Delay {
                    delay: self.delay,
                    jitter: self.jitter,
                },
            ],
        }
    }
}

/// Transport settings, the `[transport]` table: a key is a field, with its default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransportSpec {
    /// Congestion controller (`newreno`, `cubic`, `bbr`, `bbr3`, `copa`, `none`).
    #[serde(deserialize_with = "from_str")]
    pub cc: CcAlgorithm,
    /// Initial congestion window in packets; `None` keeps the transport's default.
    #[serde(deserialize_with = "initial_window")]
    pub initial_window: Option<u64>,
    /// HyStart++ (RFC 9406) in the initial slow start of `cubic` and `newreno`; `None` keeps the
    /// transport's default (on).
    pub hystart: Option<bool>,
    /// Loss detection: `rfc9002` (RFC 9002 §6) or `rack-tlp` (RFC 8985).
    #[serde(deserialize_with = "from_str")]
    pub loss_detection: LossDetectionMode,
    /// The RTT sample RFC 9002's time threshold multiplies with smoothed_rtt: `latest` as
    /// measured (RFC 9002 §6.1.2) or `adjusted`, less the peer's ACK delay (quic-go's reading).
    #[serde(deserialize_with = "from_str")]
    pub threshold_rtt: ThresholdRtt,
    /// A PING-only packet after each burst's last packet (`TransportConfig::tail_ping`).
    pub tail_ping: bool,
    /// The receiver's buffer: the flow-control window it keeps ahead of what its application
    /// has read, for the connection and for each stream (ART §4.4, Fig. 24); `None` keeps the
    /// transport's defaults.
    #[serde(deserialize_with = "receive_window")]
    pub receive_window: Option<u64>,
    /// The sender's buffer per stream: it frees bytes only up to the first unacknowledged one,
    /// so a hole stalls the sender once this much follows it, as a receive buffer stalls the
    /// receiver; `None` keeps the transport's default.
    #[serde(deserialize_with = "send_buffer")]
    pub send_buffer: Option<u64>,
    /// Which copies may exceed the congestion window (`policy`, `offmode`, `always`).
    #[serde(deserialize_with = "from_str")]
    pub copies_beyond_cwnd: CopiesBeyondCwnd,
    /// Dual-side FEC from the server (`block:k=9,m=1`, docs/FEC.md); the simulated client
    /// always decodes. `None`: no repair symbols.
    #[serde(deserialize_with = "some_from_str")]
    pub fec: Option<FecSpec>,
    /// Packets pacing lets leave back to back after an idle period (at least 1); `None` keeps
    /// the transport's default (10).
    #[serde(deserialize_with = "pacing_burst")]
    pub pacing_burst: Option<u64>,
    /// An upper bound on the pacing rate (`"20Mbps"`), bits per second, on top of the
    /// congestion controller's: an ablation knob (experiments/ladr/pacing.py). `None`: no bound.
    #[serde(deserialize_with = "max_pacing_rate")]
    pub max_pacing_rate: Option<u64>,
    /// Packet protection after the handshake: `null` (a keyed checksum, no encryption; the
    /// default, same results at a fraction of the cost) or `aead` (the negotiated AES-GCM, as
    /// over real sockets).
    #[serde(deserialize_with = "from_str")]
    pub protection: Protection,
}

fn pacing_burst<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(d)? {
        0 => Err(de::Error::custom(
            "`transport.pacing_burst` must be at least 1 packet",
        )),
        n => Ok(Some(n)),
    }
}

fn max_pacing_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Rate::deserialize(d)? {
        Rate(bps) if bps < 8 => Err(de::Error::custom(format!(
            "`transport.max_pacing_rate`: {bps} bit/s is below one byte per second"
        ))),
        Rate(bps) => Ok(Some(bps)),
    }
}

fn some_from_str<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    from_str(d).map(Some)
}

fn receive_window<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    at_least_one_packet(d, "transport.receive_window")
}

fn send_buffer<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    at_least_one_packet(d, "transport.send_buffer")
}

/// A buffer size (`"8MB"` or bytes) that holds at least one packet.
fn at_least_one_packet<'de, D: Deserializer<'de>>(
    d: D,
    key: &str,
) -> Result<Option<u64>, D::Error> {
    match Size::deserialize(d)? {
        Size(w) if w < MIN_RECEIVE_WINDOW => Err(de::Error::custom(format!(
            "`{key}`: {w} bytes is less than one packet ({MIN_RECEIVE_WINDOW} bytes)"
        ))),
        Size(w) => Ok(Some(w)),
    }
}

fn initial_window<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(d)? {
        0 => Err(de::Error::custom(
            "`initial_window` must be at least 1 packet",
        )),
        n => Ok(Some(n)),
    }
}

/// One policy to run.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyEntry {
    /// Unique within the scenario; names the policy in results (default: `name`).
    pub label: String,
    pub name: String,
    pub params: String,
    /// Placeholder `arq` for the oracle, which the run builds itself (`oracle` below).
    pub spec: PolicySpec,
    /// The simulation-only oracle ([`crate::oracle`]): built per run from the down path's loss
    /// draws.
    pub oracle: bool,
}

/// One concrete scenario (a sweep point, or the whole file without a sweep).
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    /// First seed; runs use `seed .. seed + repetitions`.
    pub seed: u64,
    pub repetitions: u32,
    pub duration: Duration,
    pub down: DirectionSpec,
    pub up: DirectionSpec,
    pub app: AppSpec,
    pub transport: TransportSpec,
    pub policies: Vec<PolicyEntry>,
}

/// The built-in default: AutoRec's testbed (§VII): 5 % loss, 60 ms RTT, 12 Mbit/s, a 4 Mbit/s
/// live stream for 60 s, BBR, several seeds, and the policies compared there.
pub const DEFAULT_SCENARIO_TOML: &str = r#"# AutoRec testbed setting (AutoRec §VII): 5 % loss, 60 ms RTT, 12 Mbit/s, 4 Mbit/s live stream.
name = "default"
seed = 1
repetitions = 10
duration = "60s"

[path]
rtt = "60ms"
rate = "12Mbps"
queue = "droptail packets=100"
loss = "bernoulli 5%"

[app]
kind = "live"
bitrate = "4Mbps"
fps = 30

[transport]
cc = "bbr"

[[policy]]
name = "arq"

[[policy]]
name = "or3"

[[policy]]
name = "art"

[[policy]]
name = "too"

[[policy]]
name = "autorec"
params = "alpha=30ms,beta=0.3,gamma=0.2"
"#;

impl Scenario {
    /// The built-in default scenario ([`DEFAULT_SCENARIO_TOML`]).
    #[must_use]
    pub fn builtin_default() -> Self {
        match load_str(DEFAULT_SCENARIO_TOML, "<default>", None, "default") {
            Ok(mut v) if v.len() == 1 => v.remove(0),
            // The text is a constant checked by a test.
            other => unreachable!("built-in default scenario is invalid: {other:?}"),
        }
    }

    /// The seeds of its runs.
    pub fn seeds(&self) -> impl Iterator<Item = u64> {
        let first = self.seed;
        (0..u64::from(self.repetitions)).map(move |i| first.wrapping_add(i))
    }
}

/// Loads a scenario file and expands its sweep (one scenario without one).
pub fn load(path: &Path) -> Result<Vec<Scenario>, Error> {
    let file = path.display().to_string();
    let io = |source| Error::Io {
        file: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_SCENARIO_BYTES {
        return Err(invalid(
            &file,
            "",
            format!("file larger than {MAX_SCENARIO_BYTES} bytes"),
        ));
    }
    let src = std::fs::read_to_string(path).map_err(io)?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".to_owned());
    let base = path.parent().map(Path::to_owned);
    load_str(&src, &file, base.as_deref(), &stem)
}

/// Parses scenario text. `file` names it in errors; relative paths resolve against `base_dir`
/// (kept relative without one). Scenarios are named by the file's `name` key, else
/// `default_name` (for a file, its stem); sweep points add `[axis=value,...]`.
pub fn load_str(
    src: &str,
    file: &str,
    base_dir: Option<&Path>,
    default_name: &str,
) -> Result<Vec<Scenario>, Error> {
    // Typed first, so errors carry line and column.
    let raw: RawFile = toml::from_str(src).map_err(|e| parse_error(file, src, &e))?;
    let Some(sweep) = raw.sweep.clone() else {
        let name = raw.name.clone().unwrap_or_else(|| default_name.to_owned());
        return Ok(vec![check(raw, file, base_dir, name)?]);
    };
    let table: toml::Table = toml::from_str(src).map_err(|e| parse_error(file, src, &e))?;
    let points = expand_axes(&sweep, &raw, file)?;
    let base_name = raw.name.clone().unwrap_or_else(|| default_name.to_owned());
    let mut out = Vec::with_capacity(points.len());
    for point in points {
        let mut t = table.clone();
        t.remove("sweep");
        let mut label = Vec::new();
        for (axis, value) in &point {
            apply_axis(&mut t, axis, value, file)?;
            label.push(format!("{axis}={}", display_value(value)));
        }
        let name = format!("{base_name}[{}]", label.join(","));
        let raw: RawFile = toml::Value::Table(t)
            .try_into()
            .map_err(|e: toml::de::Error| invalid(file, &name, e.message().trim()))?;
        out.push(check(raw, file, base_dir, name)?);
    }
    Ok(out)
}

/// Each sweep point's axis values, in the order [`load_str`] returns the points (one point
/// with no axes without a `[sweep]`), so results can carry one typed column per axis.
pub fn sweep_points(src: &str, file: &str) -> Result<Vec<Vec<(String, toml::Value)>>, Error> {
    let raw: RawFile = toml::from_str(src).map_err(|e| parse_error(file, src, &e))?;
    match &raw.sweep {
        Some(sweep) => expand_axes(sweep, &raw, file),
        None => Ok(vec![Vec::new()]),
    }
}

fn display_value(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Axis values in file order; the cartesian product of all axes.
fn expand_axes(
    sweep: &toml::Table,
    raw: &RawFile,
    file: &str,
) -> Result<Vec<Vec<(String, toml::Value)>>, Error> {
    let labels: Vec<String> = raw
        .policy
        .iter()
        .flatten()
        .map(|p| p.label.clone().unwrap_or_else(|| p.name.clone()))
        .collect();
    let mut points: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
    for (axis, values) in sweep {
        check_axis(axis, &labels, file)?;
        let values = axis_values(axis, values, file)?;
        if points.len().saturating_mul(values.len()) > MAX_SWEEP_POINTS {
            return Err(invalid(
                file,
                &format!("sweep.{axis}"),
                format!("more than {MAX_SWEEP_POINTS} points"),
            ));
        }
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push((axis.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    Ok(points)
}

fn check_axis(axis: &str, policy_labels: &[String], file: &str) -> Result<(), Error> {
    let parts: Vec<&str> = axis.split('.').collect();
    let known = match parts.as_slice() {
        [k] => keys::<RawFile>().contains(k) && !TABLES.contains(k),
        ["path", "down" | "up", k] => keys::<RawDirection>().contains(k),
        ["path", k] => keys::<RawPath>().contains(k) && !["down", "up"].contains(k),
        ["app", "kind"] => true,
        ["app", k] => [
            keys::<RawLive>(),
            keys::<RawFileApp>(),
            keys::<RawRpc>(),
            keys::<RawRtc>(),
            keys::<RawGaming>(),
            keys::<RawVod>(),
            keys::<RawMoq>(),
        ]
        .iter()
        .any(|fields| fields.contains(k)),
        ["transport", k] => keys::<TransportSpec>().contains(k),
        ["policy", label, param] if !param.is_empty() => {
            if !policy_labels.iter().any(|l| l == label) {
                return Err(invalid(
                    file,
                    &format!("sweep.\"{axis}\""),
                    format!(
                        "no [[policy]] labelled `{label}` (have: {})",
                        policy_labels.join(", ")
                    ),
                ));
            }
            true
        }
        _ => false,
    };
    if known {
        Ok(())
    } else {
        Err(invalid(
            file,
            &format!("sweep.\"{axis}\""),
            "unknown axis (a scenario key such as path.loss, path.down.rate, app.bitrate, \
             transport.cc, duration, or policy.<label>.<param>)",
        ))
    }
}

/// A list, or a range `{ from, to, step }`.
fn axis_values(axis: &str, v: &toml::Value, file: &str) -> Result<Vec<toml::Value>, Error> {
    let key = format!("sweep.\"{axis}\"");
    match v {
        toml::Value::Array(a) if a.is_empty() => Err(invalid(file, &key, "no values")),
        toml::Value::Array(a) => {
            if a.len() > MAX_SWEEP_POINTS {
                return Err(invalid(file, &key, "too many values"));
            }
            Ok(a.clone())
        }
        toml::Value::Table(t) => {
            for k in t.keys() {
                if !["from", "to", "step"].contains(&k.as_str()) {
                    return Err(invalid(
                        file,
                        &format!("{key}.{k}"),
                        "unknown range key (from, to, step)",
                    ));
                }
            }
            let get = |k: &str| {
                t.get(k)
                    .ok_or_else(|| invalid(file, &key, format!("range needs `{k}`")))
            };
            range_values(get("from")?, get("to")?, get("step")?).map_err(|d| invalid(file, &key, d))
        }
        _ => Err(invalid(
            file,
            &key,
            "expected a list of values or a range { from, to, step }",
        )),
    }
}

/// A number with an optional unit suffix.
fn split_unit(v: &toml::Value) -> Option<(f64, String, bool)> {
    match v {
        toml::Value::Integer(i) => Some((*i as f64, String::new(), true)),
        toml::Value::Float(f) => Some((*f, String::new(), false)),
        toml::Value::String(s) => {
            let end = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
                .unwrap_or(s.len());
            let n: f64 = s[..end].parse().ok()?;
            let integral = !s[..end].contains('.');
            Some((n, s[end..].to_owned(), integral))
        }
        _ => None,
    }
}

fn range_values(
    from: &toml::Value,
    to: &toml::Value,
    step: &toml::Value,
) -> Result<Vec<toml::Value>, String> {
    let bad = || "range values must be numbers, or strings with one unit (\"10ms\")".to_owned();
    let (a, ua, ia) = split_unit(from).ok_or_else(bad)?;
    let (b, ub, ib) = split_unit(to).ok_or_else(bad)?;
    let (s, us, is) = split_unit(step).ok_or_else(bad)?;
    if ua != ub || ua != us {
        return Err(format!(
            "from, to and step must have the same unit (`{ua}`, `{ub}`, `{us}`)"
        ));
    }
    if !(s > 0.0 && s.is_finite() && a.is_finite() && b.is_finite()) || b < a {
        return Err("need step > 0 and from <= to".to_owned());
    }
    let n = ((b - a) / s + 1e-9).floor() as usize + 1;
    if n > MAX_SWEEP_POINTS {
        return Err(format!("more than {MAX_SWEEP_POINTS} values"));
    }
    let integral = ia && ib && is;
    let string = matches!(from, toml::Value::String(_));
    Ok((0..n)
        .map(|i| {
            let x = a + i as f64 * s;
            if string {
                let num = if integral {
                    format!("{}", x.round() as i64)
                } else {
                    let t = format!("{x:.9}");
                    t.trim_end_matches('0').trim_end_matches('.').to_owned()
                };
                toml::Value::String(format!("{num}{ua}"))
            } else if integral {
                toml::Value::Integer(x.round() as i64)
            } else {
                toml::Value::Float((x * 1e9).round() / 1e9)
            }
        })
        .collect())
}

/// Sets `axis` to `value` in the scenario table.
fn apply_axis(
    t: &mut toml::Table,
    axis: &str,
    value: &toml::Value,
    file: &str,
) -> Result<(), Error> {
    let parts: Vec<&str> = axis.split('.').collect();
    if let ["policy", label, param] = parts.as_slice() {
        let value = display_value(value);
        let policies = t
            .get_mut("policy")
            .and_then(toml::Value::as_array_mut)
            .ok_or_else(|| invalid(file, axis, "no [[policy]] list"))?;
        for p in policies.iter_mut().filter_map(toml::Value::as_table_mut) {
            let name = p.get("name").and_then(toml::Value::as_str).unwrap_or("");
            let l = p.get("label").and_then(toml::Value::as_str).unwrap_or(name);
            if l != *label {
                continue;
            }
            let params = p.get("params").and_then(toml::Value::as_str).unwrap_or("");
            let mut items: Vec<(String, String)> = params
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
                    None => (kv.trim().to_owned(), String::new()),
                })
                .collect();
            match items.iter_mut().find(|(k, _)| k == param) {
                Some(item) => item.1 = value.clone(),
                None => items.push(((*param).to_owned(), value.clone())),
            }
            let joined: Vec<String> = items
                .into_iter()
                .map(|(k, v)| if v.is_empty() { k } else { format!("{k}={v}") })
                .collect();
            p.insert("params".into(), toml::Value::String(joined.join(",")));
        }
        return Ok(());
    }
    let (last, tables) = parts
        .split_last()
        .ok_or_else(|| invalid(file, axis, "empty axis"))?;
    if parts.first() == Some(&"app") && !t.contains_key("app") {
        // Without an [app] table the scenario runs the default live stream.
        let mut app = toml::Table::new();
        app.insert("kind".into(), toml::Value::String("live".into()));
        t.insert("app".into(), toml::Value::Table(app));
    }
    let mut cur = t;
    for k in tables {
        let entry = cur
            .entry((*k).to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = entry
            .as_table_mut()
            .ok_or_else(|| invalid(file, axis, format!("`{k}` is not a table")))?;
    }
    cur.insert((*last).to_owned(), value.clone());
    Ok(())
}

fn resolve(base_dir: Option<&Path>, p: &str) -> PathBuf {
    let p = PathBuf::from(p);
    match base_dir {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p,
    }
}

/// One direction: `over` (`[path.down]` or `[path.up]`) key by key, else `[path]`.
fn direction(
    base: &RawPath,
    over: Option<&RawDirection>,
    which: &str,
    file: &str,
    base_dir: Option<&Path>,
) -> Result<DirectionSpec, Error> {
    let o = over.cloned().unwrap_or_default();
    let (rate, trace) = if o.rate.is_some() || o.trace.is_some() {
        (o.rate, o.trace.clone())
    } else {
        (base.rate, base.trace.clone())
    };
    let service = match (rate, trace) {
        (Some(Rate(bps)), None) => ServiceSpec::Rate(bps),
        (None, Some(t)) => ServiceSpec::Trace(resolve(base_dir, &t)),
        (Some(_), Some(_)) => {
            return Err(invalid(
                file,
                &format!("path.{which}"),
                "set `rate` or `trace`, not both",
            ))
        }
        (None, None) => {
            return Err(invalid(
                file,
                &format!("path.{which}"),
                "needs `rate` or `trace`",
            ))
        }
    };
    let loss = match o.loss.unwrap_or_else(|| base.loss.clone()).0 {
        LossSpec::Replay(p) => LossSpec::Replay(resolve(base_dir, &p.to_string_lossy())),
        LossSpec::Crn { slot, model } => match *model {
            LossSpec::Replay(p) => LossSpec::Crn {
                slot,
                model: Box::new(LossSpec::Replay(resolve(base_dir, &p.to_string_lossy()))),
            },
            other => LossSpec::Crn {
                slot,
                model: Box::new(other),
            },
        },
        l => l,
    };
    // `rtt` is split evenly between the directions; with neither `rtt` nor `delay`, none.
    let base_delay = base.delay.or(base.rtt.map(|r| Dur(r.0 / 2)));
    Ok(DirectionSpec {
        loss,
        queue: o.queue.unwrap_or_else(|| base.queue.clone()).0,
        service,
        delay: o.delay.or(base_delay).map_or(Duration::ZERO, |d| d.0),
        jitter: o.jitter.unwrap_or(base.jitter).0,
    })
}

/// The application a scenario runs: each key is checked already ([`RawApp`]); here are the
/// checks that span several keys or tables.
fn app(raw: Option<RawApp>, file: &str, cc: CcAlgorithm) -> Result<AppSpec, Error> {
    Ok(match raw {
        None => AppSpec::Live(LiveConfig::default()),
        Some(RawApp::Live(t)) => AppSpec::Live(t.into()),
        Some(RawApp::File(t)) => AppSpec::File(FileConfig {
            size: t.size,
            count: t.count,
            interval: t.interval,
        }),
        Some(RawApp::Rpc(t)) => AppSpec::Rpc(RpcConfig {
            request: t.request,
            response: t.response,
            count: t.count,
            think: t.think,
        }),
        Some(RawApp::Rtc(t)) => AppSpec::Rtc(t.into()),
        Some(RawApp::Gaming(t)) => {
            let DelayController::Copa = t.delay_controller;
            if cc != CcAlgorithm::Copa {
                return Err(invalid(
                    file,
                    "app.delay_controller",
                    "`copa` is the transport's congestion controller: set transport.cc = \"copa\"",
                ));
            }
            let config = GamingConfig::from(t);
            config
                .validate()
                .map_err(|(key, why)| invalid(file, &format!("app.{key}"), why))?;
            AppSpec::Gaming(config)
        }
        Some(RawApp::Vod(t)) => {
            let config = VodConfig::from(t);
            config.validate().map_err(|e| {
                let (key, detail) = e.split_once(": ").unwrap_or(("", e.as_str()));
                invalid(file, &format!("app.{key}"), detail)
            })?;
            AppSpec::Vod(config)
        }
        Some(RawApp::Moq(t)) => AppSpec::Moq(t.into()),
    })
}

/// Checks a parsed file (or sweep point) and builds the scenario.
fn check(
    raw: RawFile,
    file: &str,
    base_dir: Option<&Path>,
    name: String,
) -> Result<Scenario, Error> {
    let path = raw.path.unwrap_or_default();
    if path.rtt.is_some() && path.delay.is_some() {
        return Err(invalid(
            file,
            "path",
            "set `rtt` or `delay` (one way), not both",
        ));
    }
    let down = direction(&path, path.down.as_ref(), "down", file, base_dir)?;
    let up = direction(&path, path.up.as_ref(), "up", file, base_dir)?;
    let raw_policies = raw.policy.unwrap_or_else(|| {
        vec![RawPolicy {
            name: "arq".into(),
            params: String::new(),
            label: None,
        }]
    });
    let mut policies: Vec<PolicyEntry> = Vec::with_capacity(raw_policies.len());
    for (i, p) in raw_policies.into_iter().enumerate() {
        let key = format!("policy[{i}]");
        let oracle = p.name.trim() == "oracle";
        if oracle && !p.params.trim().is_empty() {
            return Err(invalid(file, &key, "policy `oracle` takes no parameters"));
        }
        let spec = if oracle {
            PolicySpec::Arq
        } else {
            PolicySpec::from_name_params(&p.name, &p.params)
                .map_err(|e| invalid(file, &key, e.to_string()))?
        };
        let label = p.label.unwrap_or_else(|| p.name.trim().to_owned());
        if policies.iter().any(|q| q.label == label) {
            return Err(invalid(
                file,
                &key,
                format!("duplicate policy label `{label}` (set `label`)"),
            ));
        }
        policies.push(PolicyEntry {
            label,
            name: p.name.trim().to_owned(),
            params: p.params,
            spec,
            oracle,
        });
    }
    let repetitions = raw.repetitions.unwrap_or(1);
    if repetitions == 0 {
        return Err(invalid(file, "repetitions", "must be at least 1"));
    }
    let duration = raw.duration.map_or(Duration::from_secs(60), |d| d.0);
    if duration.is_zero() {
        return Err(invalid(file, "duration", "must be > 0"));
    }
    let transport = raw.transport.unwrap_or_default();
    Ok(Scenario {
        name,
        seed: raw.seed.unwrap_or(1),
        repetitions,
        duration,
        down,
        up,
        app: app(raw.app, file, transport.cc)?,
        transport,
        policies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str) -> Result<Scenario, Error> {
        let mut v = load_str(src, "t.toml", Some(Path::new("/base")), "t")?;
        assert_eq!(v.len(), 1);
        Ok(v.remove(0))
    }

    fn err(src: &str) -> String {
        load_str(src, "t.toml", None, "t")
            .expect_err("should fail")
            .to_string()
    }

    const MINIMAL: &str = "[path]\nrate = \"10Mbps\"\n";

    #[test]
    fn gaming_parses_and_bad_values_name_their_key() {
        let g = |app: &str, cc: &str| {
            format!("{MINIMAL}[app]\nkind = \"gaming\"\n{app}[transport]\ncc = \"{cc}\"\n")
        };
        let s = one(&g(
            "loss_controller = \"lbbc\"\npending_limit = true\n",
            "copa",
        ))
        .expect("gaming");
        let AppSpec::Gaming(c) = s.app else {
            panic!("gaming")
        };
        assert_eq!(c.lbbc, Some(LbbcConfig::default()));
        assert!(c.pending_limit);
        for (app, cc, key) in [
            ("", "cubic", "app.delay_controller"),
            (
                "delay_controller = \"pudica\"\n",
                "copa",
                "app.delay_controller",
            ),
            (
                "delay_controller = \"gcc\"\n",
                "copa",
                "app.delay_controller",
            ),
            ("loss_controller = \"bbr\"\n", "copa", "app.loss_controller"),
            (
                "loss_controller = \"lbbc\"\nlbbc_n = 2\n",
                "copa",
                "app.lbbc_n",
            ),
            (
                "loss_controller = \"lbbc\"\nlbbc_delta = \"20ms\"\n",
                "copa",
                "app.lbbc_delta",
            ),
            (
                "loss_controller = \"lbbc\"\nlbbc_beta = 1.5\n",
                "copa",
                "app.lbbc_beta",
            ),
            (
                "min_bitrate = \"5Mbps\"\nmax_bitrate = \"2Mbps\"\n",
                "copa",
                "app.min_bitrate",
            ),
            ("bitrate = \"50Mbps\"\n", "copa", "app.bitrate"),
            ("utilization = 0\n", "copa", "app.utilization"),
            (
                "loss_controller = \"lbbc\"\nlbbc_c = -1.0\n",
                "copa",
                "app.lbbc_c",
            ),
            ("min_bitrate = \"0Mbps\"\n", "copa", "app.min_bitrate"),
            ("max_bitrate = \"fast\"\n", "copa", "app.max_bitrate"),
            ("bitrate = \"2Tbps\"\n", "copa", "app.bitrate"),
            ("deadline = \"soon\"\n", "copa", "app.deadline"),
            (
                "loss_controller = \"lbbc\"\nlbbc_delta = \"5\"\n",
                "copa",
                "app.lbbc_delta",
            ),
        ] {
            let e = err(&g(app, cc));
            assert!(e.contains(key), "{app}: {e}");
        }
    }

    #[test]
    fn builtin_default_is_autorecs_testbed_and_matches_the_file() {
        let d = Scenario::builtin_default();
        assert_eq!(d.name, "default");
        assert_eq!(d.duration, Duration::from_secs(60));
        assert_eq!(d.repetitions, 10);
        assert_eq!(d.seeds().collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
        assert_eq!(d.down.delay, Duration::from_millis(30));
        assert_eq!(d.down.service, ServiceSpec::Rate(12_000_000));
        assert_eq!(d.down.loss, LossSpec::Bernoulli(Prob::from_fraction(0.05)));
        assert_eq!(d.up, d.down);
        assert_eq!(d.transport.cc, CcAlgorithm::Bbr);
        let AppSpec::Live(live) = &d.app else {
            panic!("live app expected")
        };
        assert_eq!(live.encoder.bitrate, 4_000_000);
        let labels: Vec<&str> = d.policies.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(labels, ["arq", "or3", "art", "too", "autorec"]);
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/default.toml");
        let loaded = load(&file).expect("scenarios/default.toml");
        assert_eq!(loaded, vec![d]);
    }

    #[test]
    fn pacing_burst_and_max_pacing_rate_parse_and_name_bad_values() {
        let s = one(&format!(
            "{MINIMAL}[transport]\npacing_burst = 2\nmax_pacing_rate = \"20Mbps\"\n"
        ))
        .expect("valid");
        assert_eq!(s.transport.pacing_burst, Some(2));
        assert_eq!(s.transport.max_pacing_rate, Some(20_000_000));
        for (line, key) in [
            ("pacing_burst = 0", "transport.pacing_burst"),
            ("max_pacing_rate = \"1bps\"", "transport.max_pacing_rate"),
            ("max_pacing_rate = \"fast\"", "max_pacing_rate"),
        ] {
            let e = err(&format!("{MINIMAL}[transport]\n{line}\n"));
            assert!(e.contains(key), "{line}: {e}");
        }
    }

    #[test]
    fn receive_window_and_send_buffer_are_sizes_checked_against_one_packet() {
        let s = one(&format!("{MINIMAL}[transport]\nreceive_window = \"8MB\"\n")).expect("valid");
        assert_eq!(s.transport.receive_window, Some(8_000_000));
        let s = one(&format!("{MINIMAL}[transport]\nreceive_window = 65536\n")).expect("valid");
        assert_eq!(s.transport.receive_window, Some(65_536));
        let e = err(&format!("{MINIMAL}[transport]\nreceive_window = \"100\"\n"));
        assert!(
            e.contains("transport.receive_window") && e.contains("100 bytes"),
            "{e}"
        );
        let e = err(&format!(
            "{MINIMAL}[transport]\nreceive_window = \"8 parsecs\"\n"
        ));
        assert!(e.contains("receive_window") && e.contains("parsecs"), "{e}");
        let v = load_str(
            &format!("{MINIMAL}[sweep]\n\"transport.receive_window\" = [\"2MB\", \"16MB\"]\n"),
            "t.toml",
            None,
            "t",
        )
        .expect("valid sweep");
        let windows: Vec<_> = v.iter().map(|s| s.transport.receive_window).collect();
        assert_eq!(windows, [Some(2_000_000), Some(16_000_000)]);
        let s = one(&format!("{MINIMAL}[transport]\nsend_buffer = \"64MB\"\n")).expect("valid");
        assert_eq!(s.transport.send_buffer, Some(64_000_000));
        let e = err(&format!("{MINIMAL}[transport]\nsend_buffer = 10\n"));
        assert!(
            e.contains("transport.send_buffer") && e.contains("10 bytes"),
            "{e}"
        );
    }

    #[test]
    fn defaults_and_overrides_per_direction() {
        let s = one(
            "seed = 7\n[path]\nrtt = \"40ms\"\nrate = \"5Mbps\"\nloss = \"bernoulli 1%\"\n\
             [path.down]\nloss = \"gemodel 1% 10% 70% 0.1%\"\nqueue = \"codel\"\n\
             [path.up]\ntrace = \"traces/x.up\"\ndelay = \"5ms\"\n",
        )
        .expect("valid");
        assert_eq!((s.seed, s.repetitions), (7, 1));
        assert_eq!(s.duration, Duration::from_secs(60));
        assert!(matches!(s.down.loss, LossSpec::GilbertElliott(_)));
        assert!(matches!(s.down.queue, QueueSpec::CoDel { .. }));
        assert_eq!(s.down.service, ServiceSpec::Rate(5_000_000));
        assert_eq!(s.down.delay, Duration::from_millis(20));
        assert_eq!(s.up.loss, LossSpec::Bernoulli(Prob::from_fraction(0.01)));
        assert_eq!(s.up.service, ServiceSpec::Trace("/base/traces/x.up".into()));
        assert_eq!(s.up.delay, Duration::from_millis(5));
        assert_eq!(s.up.queue, QueueSpec::Infinite);
        assert_eq!(s.transport, TransportSpec::default());
        assert_eq!(s.policies.len(), 1);
        assert_eq!(s.policies[0].spec, PolicySpec::Arq);
        assert!(matches!(s.app, AppSpec::Live(_)));
        let names: Vec<String> = s
            .down
            .path_spec()
            .build(1, "down", None, 0)
            .expect("build")
            .into_iter()
            .map(|n| n.0)
            .collect();
        assert_eq!(names, ["down/0-loss", "down/1-rate", "down/2-delay"]);
        let r = one("[path]\nrate = \"1Mbps\"\nloss = \"replay losses.txt\"\n").expect("valid");
        assert_eq!(r.down.loss, LossSpec::Replay("/base/losses.txt".into()));
    }

    #[test]
    fn transport_keys_and_their_sweep_axes() {
        let s = one(&format!(
            "{MINIMAL}[transport]\ncc = \"copa\"\ncopies_beyond_cwnd = \"offmode\"\n"
        ))
        .expect("valid");
        assert_eq!(s.transport.cc, CcAlgorithm::Copa);
        assert_eq!(s.transport.copies_beyond_cwnd, CopiesBeyondCwnd::OffMode);
        let s = one(&format!("{MINIMAL}[transport]\ncc = \"bbr3\"\n")).expect("valid");
        assert_eq!(
            s.transport.cc,
            CcAlgorithm::Bbr3(recoup_transport::cc::Bbr3Params::default())
        );
        let e = err(&format!("{MINIMAL}[transport]\ncc = \"bbr3:headroom=1\"\n"));
        assert!(
            e.contains("`headroom`: expected a share in [0, 0.9]"),
            "{e}"
        );
        let e = err(&format!("{MINIMAL}[transport]\ncc = \"vegas\"\n"));
        assert!(
            e.contains("unknown name \"vegas\"")
                && e.contains("accepted: newreno, cubic, bbr, bbr3, copa, none"),
            "{e}"
        );
        let v = load_str(
            &format!(
                "{MINIMAL}[sweep]\n\"transport.copies_beyond_cwnd\" = [\"policy\", \"always\"]\n"
            ),
            "t.toml",
            None,
            "t",
        )
        .expect("sweep");
        let rules: Vec<CopiesBeyondCwnd> =
            v.iter().map(|s| s.transport.copies_beyond_cwnd).collect();
        assert_eq!(rules, [CopiesBeyondCwnd::Policy, CopiesBeyondCwnd::Always]);
    }

    #[test]
    fn an_app_table_without_keys_is_the_applications_default() {
        let app = |kind: &str, keys: &str| {
            let cc = if kind == "gaming" { "copa" } else { "bbr" };
            one(&format!(
                "{MINIMAL}[app]\nkind = \"{kind}\"\n{keys}[transport]\ncc = \"{cc}\"\n"
            ))
            .expect(kind)
            .app
        };
        assert_eq!(app("live", ""), AppSpec::Live(LiveConfig::default()));
        assert_eq!(app("rtc", ""), AppSpec::Rtc(RtcConfig::default()));
        assert_eq!(app("gaming", ""), AppSpec::Gaming(GamingConfig::default()));
        assert_eq!(app("vod", ""), AppSpec::Vod(VodConfig::default()));
        assert_eq!(app("moq", ""), AppSpec::Moq(MoqConfig::default()));
        assert_eq!(
            app("file", "size = 1000\n"),
            AppSpec::File(FileConfig {
                size: 1000,
                count: 1,
                interval: Duration::ZERO
            })
        );
        assert_eq!(
            app("rpc", "response = 1000\n"),
            AppSpec::Rpc(RpcConfig {
                request: 100,
                response: 1000,
                count: 1,
                think: Duration::ZERO
            })
        );
    }

    #[test]
    fn each_app_key_is_checked_by_its_field_and_named_in_the_error() {
        for (kind, keys, key, why) in [
            ("live", "fps = 0\n", "app.fps", "between 1 and 1000"),
            ("rtc", "fps = 1001\n", "app.fps", "between 1 and 1000"),
            (
                "moq",
                "deadline = \"0ms\"\n",
                "app.deadline",
                "between 1ms and 60s",
            ),
            (
                "moq",
                "deadline = \"61s\"\n",
                "app.deadline",
                "between 1ms and 60s",
            ),
            ("moq", "gop = 0\n", "app.gop", "at least 1"),
            ("moq", "tracks = 17\n", "app.tracks", "between 1 and 16"),
            ("live", "key_ratio = 0.0\n", "app.key_ratio", "> 0"),
            ("gaming", "size_noise = 1.0\n", "app.size_noise", "[0, 1)"),
            (
                "live",
                "bitrate = \"fast\"\n",
                "app.bitrate",
                "bad rate `fast`",
            ),
            (
                "live",
                "startup = \"soon\"\n",
                "app.startup",
                "bad duration `soon`",
            ),
            (
                "live",
                "start = \"now\"\n",
                "app.start",
                "`session` or `connect`",
            ),
            (
                "file",
                "size = 1000\ncount = 0\n",
                "app.count",
                "at least 1",
            ),
            (
                "rpc",
                "response = 10\ncount = 2000000\n",
                "app.count",
                "at most",
            ),
            ("file", "size = \"2GiB\"\n", "app.size", "larger than 1 GiB"),
            (
                "rpc",
                "response = \"2GiB\"\n",
                "app.response",
                "larger than 1 GiB",
            ),
            (
                "rpc",
                "response = 10\nrequest = -1\n",
                "app.request",
                "negative",
            ),
            (
                "vod",
                "ladder = [\"1Mbps\", \"x\"]\n",
                "app.ladder",
                "bad rate `x`",
            ),
            ("vod", "segment = \"4\"\n", "app.segment", "bad duration"),
            (
                "gaming",
                "loss_controller = \"bbr\"\n",
                "app.loss_controller",
                "none, lbbc",
            ),
            (
                "gaming",
                "lbbc_delta = \"5\"\n",
                "app.lbbc_delta",
                "bad duration",
            ),
        ] {
            let e = err(&format!(
                "{MINIMAL}[app]\nkind = \"{kind}\"\n{keys}[transport]\ncc = \"copa\"\n"
            ));
            assert!(e.contains(key) && e.contains(why), "{kind} {keys}: {e}");
        }
    }

    #[test]
    fn every_app_kind() {
        let s = one(&format!(
            "{MINIMAL}[app]\nkind = \"file\"\nsize = \"1MB\"\ncount = 3\ninterval = \"1s\"\n"
        ))
        .expect("file");
        assert_eq!(
            s.app,
            AppSpec::File(FileConfig {
                size: 1_000_000,
                count: 3,
                interval: Duration::from_secs(1)
            })
        );
        let s = one(&format!(
            "{MINIMAL}[app]\nkind = \"rpc\"\nresponse = 65536\nthink = \"10ms\"\ncount = 100\n"
        ))
        .expect("rpc");
        assert_eq!(
            s.app,
            AppSpec::Rpc(RpcConfig {
                request: 100,
                response: 65_536,
                count: 100,
                think: Duration::from_millis(10)
            })
        );
        let s = one(&format!(
            "{MINIMAL}[app]\nkind = \"rtc\"\nfps = 60\ndeadline = \"100ms\"\nbitrate = \"2Mbps\"\n"
        ))
        .expect("rtc");
        let AppSpec::Rtc(rtc) = s.app else {
            panic!("rtc")
        };
        assert_eq!((rtc.encoder.fps, rtc.encoder.bitrate), (60, 2_000_000));
        assert_eq!(rtc.deadline, Duration::from_millis(100));
        let s = one(&format!(
            "{MINIMAL}[app]\nkind = \"live\"\ngop = 60\nkey_ratio = 3.5\nstartup = \"2s\"\n"
        ))
        .expect("live");
        let AppSpec::Live(live) = s.app else {
            panic!("live")
        };
        assert_eq!((live.encoder.gop, live.encoder.key_ratio), (60, 3.5));
        assert_eq!(live.startup, Duration::from_secs(2));
        assert_eq!(live.start, LiveStart::Session);
        let s = one(&format!(
            "{MINIMAL}[app]\nkind = \"live\"\nstart = \"connect\"\n"
        ))
        .expect("live at connect");
        let AppSpec::Live(live) = s.app else {
            panic!("live")
        };
        assert_eq!(live.start, LiveStart::Connect);
        let e = err(&format!(
            "{MINIMAL}[app]\nkind = \"live\"\nstart = \"now\"\n"
        ));
        assert!(
            e.contains("app.start") && e.contains("`session` or `connect`"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_key_with_file_line_and_column() {
        let e = err("seed = 1\nrepetitons = 5\n");
        assert!(e.starts_with("t.toml:2:1: "), "{e}");
        assert!(e.contains("repetitons"), "{e}");
        let e = err("[path]\nrate = \"10Mbps\"\nrtt = \"60\"\n");
        assert!(e.starts_with("t.toml:3:7: "), "{e}");
        assert!(e.contains("bad duration `60`"), "{e}");
        let e = err("[path]\nrate = \"10Mbps\"\nloss = \"bernouli 5%\"\n");
        assert!(e.starts_with("t.toml:3:8: "), "{e}");
        assert!(e.contains("bernouli"), "{e}");
        let e = err("[path]\nrate = \"10Mbps\"\nqueue = \"droptail\"\n");
        assert!(
            e.contains("t.toml:3:9") && e.contains("needs a limit"),
            "{e}"
        );
        let e = err("[path]\nrate = \"12 Mbps\"\n");
        assert!(e.contains("t.toml:2:8") && e.contains("bad rate"), "{e}");
        let e = err(&format!("{MINIMAL}[path.down]\nrtt = \"10ms\"\n"));
        assert!(e.contains("t.toml:4:1") && e.contains("rtt"), "{e}");
        let e = err(&format!("{MINIMAL}[transport]\ncc = \"vegas\"\n"));
        assert!(e.contains("t.toml:4:6") && e.contains("vegas"), "{e}");
        let e = err(&format!(
            "{MINIMAL}[transport]\ncopies_beyond_cwnd = \"sometimes\"\n"
        ));
        assert!(
            e.contains("t.toml:4:22")
                && e.contains("copies_beyond_cwnd")
                && e.contains("sometimes")
                && e.contains("policy, offmode, always"),
            "{e}"
        );
        let e = err(&format!(
            "{MINIMAL}[app]\nkind = \"live\"\nbitrat = \"1Mbps\"\n"
        ));
        assert!(e.contains("bitrat"), "{e}");
        let e = err(&format!("{MINIMAL}[app]\nkind = \"tv\"\n"));
        assert!(e.contains("tv"), "{e}");
        let e = err(&format!(
            "{MINIMAL}[[policy]]\nname = \"autorec\"\nparams = \"alpah=3ms\"\n"
        ));
        assert!(e.contains("policy[0]") && e.contains("alpah"), "{e}");
        let e = err(&format!(
            "{MINIMAL}[[policy]]\nname = \"arq\"\n[[policy]]\nname = \"arq\"\n"
        ));
        assert!(e.contains("policy[1]") && e.contains("duplicate"), "{e}");
        let e = err("[path]\nrate = \"1Mbps\"\ntrace = \"x\"\n");
        assert!(e.contains("path.down") && e.contains("not both"), "{e}");
        let e = err("duration = \"1s\"\n");
        assert!(
            e.contains("`path.down`") && e.contains("needs `rate` or `trace`"),
            "{e}"
        );
        let e = err("[path\n");
        assert!(e.starts_with("t.toml:1:"), "{e}");
        let e = err(&format!("{MINIMAL}repetitions = 0\n"));
        assert!(e.contains("`repetitions`"), "{e}");
    }

    #[test]
    fn transport_keys_and_loss_detection() {
        let s = one(MINIMAL).expect("valid");
        assert_eq!(s.transport.loss_detection, LossDetectionMode::Rfc9002);
        let s = one(&format!(
            "{MINIMAL}[transport]\nloss_detection = \"rack-tlp\"\ninitial_window = 20\nhystart = false\n"
        ))
        .expect("valid");
        assert_eq!(s.transport.loss_detection, LossDetectionMode::RackTlp);
        assert_eq!(s.transport.initial_window, Some(20));
        assert_eq!(s.transport.hystart, Some(false));
        assert_eq!(one(MINIMAL).expect("valid").transport.hystart, None);
        assert_eq!(s.transport.threshold_rtt, ThresholdRtt::Latest);
        let s = one(&format!(
            "{MINIMAL}[transport]\nthreshold_rtt = \"adjusted\"\n"
        ))
        .expect("valid");
        assert_eq!(s.transport.threshold_rtt, ThresholdRtt::Adjusted);
        assert!(!s.transport.tail_ping);
        let s = one(&format!("{MINIMAL}[transport]\ntail_ping = true\n")).expect("valid");
        assert!(s.transport.tail_ping);
        let e = err(&format!("{MINIMAL}[transport]\nloss_detection = \"bbr\"\n"));
        assert!(
            e.starts_with("t.toml:4:18: ")
                && e.contains("| loss_detection = \"bbr\"")
                && e.contains("unknown name \"bbr\"")
                && e.contains("rfc9002, rack-tlp"),
            "{e}"
        );
        let e = err(&format!("{MINIMAL}[transport]\ninitial_window = 0\n"));
        assert!(
            e.starts_with("t.toml:4:18: ") && e.contains("`initial_window` must be at least 1"),
            "{e}"
        );
        let v = load_str(
            &format!(
                "{MINIMAL}[sweep]\n\"transport.loss_detection\" = [\"rfc9002\", \"rack-tlp\"]\n"
            ),
            "t.toml",
            None,
            "t",
        )
        .expect("sweep over loss detection");
        let modes: Vec<_> = v.iter().map(|s| s.transport.loss_detection).collect();
        assert_eq!(
            modes,
            [LossDetectionMode::Rfc9002, LossDetectionMode::RackTlp]
        );
    }

    #[test]
    fn sweep_axes_are_the_tables_fields() {
        assert_eq!(
            keys::<RawFile>(),
            [
                "name",
                "seed",
                "repetitions",
                "duration",
                "path",
                "app",
                "transport",
                "policy",
                "sweep"
            ]
        );
        assert_eq!(
            keys::<RawPath>(),
            ["rtt", "delay", "jitter", "rate", "trace", "queue", "loss", "down", "up"]
        );
        assert_eq!(
            keys::<RawDirection>(),
            ["delay", "jitter", "rate", "trace", "queue", "loss"]
        );
        assert_eq!(
            keys::<TransportSpec>(),
            [
                "cc",
                "initial_window",
                "hystart",
                "loss_detection",
                "threshold_rtt",
                "tail_ping",
                "receive_window",
                "send_buffer",
                "copies_beyond_cwnd",
                "fec",
                "pacing_burst",
                "max_pacing_rate",
                "protection"
            ]
        );
        assert_eq!(keys::<RawFileApp>(), ["size", "count", "interval"]);
        // Keys that name a table are not axes.
        for axis in ["path", "path.down", "transport", "policy"] {
            let e = err(&format!("{MINIMAL}[sweep]\n\"{axis}\" = [1]\n"));
            assert!(e.contains("unknown axis"), "{axis}: {e}");
        }
    }

    #[test]
    fn sweeps_expand_in_order_with_stable_names() {
        let src = format!(
            "name = \"s\"\n{MINIMAL}loss = \"bernoulli 1%\"\n\
             [[policy]]\nname = \"arq\"\n[[policy]]\nname = \"autorec\"\nparams = \"beta=0.3\"\n\
             [sweep]\n\"path.loss\" = [\"bernoulli 1%\", \"bernoulli 5%\"]\n\
             \"policy.autorec.alpha\" = {{ from = \"10ms\", to = \"30ms\", step = \"10ms\" }}\n"
        );
        let v = load_str(&src, "t.toml", None, "t").expect("sweep");
        let names: Vec<&str> = v.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "s[path.loss=bernoulli 1%,policy.autorec.alpha=10ms]",
                "s[path.loss=bernoulli 1%,policy.autorec.alpha=20ms]",
                "s[path.loss=bernoulli 1%,policy.autorec.alpha=30ms]",
                "s[path.loss=bernoulli 5%,policy.autorec.alpha=10ms]",
                "s[path.loss=bernoulli 5%,policy.autorec.alpha=20ms]",
                "s[path.loss=bernoulli 5%,policy.autorec.alpha=30ms]",
            ]
        );
        assert_eq!(
            v[4].down.loss,
            LossSpec::Bernoulli(Prob::from_fraction(0.05))
        );
        assert_eq!(v[4].policies[1].params, "beta=0.3,alpha=20ms");
        assert_eq!(
            v[4].policies[1].spec,
            PolicySpec::from_name_params("autorec", "alpha=20ms,beta=0.3").expect("valid")
        );
        assert_eq!(v[4].policies[0].spec, PolicySpec::Arq);
        // Numeric ranges, and keys that create tables.
        let src = format!("{MINIMAL}[sweep]\nseed = {{ from = 1, to = 3, step = 1 }}\n\"path.down.rate\" = [\"1Mbps\"]\n\"app.fps\" = [25]\n");
        let v = load_str(&src, "t.toml", None, "t").expect("sweep");
        assert_eq!(v.iter().map(|s| s.seed).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(v[0].down.service, ServiceSpec::Rate(1_000_000));
        assert_eq!(v[0].up.service, ServiceSpec::Rate(10_000_000));
        assert_eq!(v[0].name, "t[seed=1,path.down.rate=1Mbps,app.fps=25]");
        let AppSpec::Live(l) = &v[0].app else {
            panic!("live")
        };
        assert_eq!(l.encoder.fps, 25);
        let src = format!(
            "{MINIMAL}[sweep]\n\"app.size_noise\" = {{ from = 0.1, to = 0.3, step = 0.1 }}\n"
        );
        let v = load_str(&src, "t.toml", None, "t").expect("float range");
        assert_eq!(v.len(), 3);
        assert_eq!(v[2].name, "t[app.size_noise=0.3]");
    }

    #[test]
    fn sweep_errors_name_the_axis() {
        let e = err(&format!(
            "{MINIMAL}[sweep]\n\"path.los\" = [\"bernoulli 1%\"]\n"
        ));
        assert!(
            e.contains("sweep.\"path.los\"") && e.contains("unknown axis"),
            "{e}"
        );
        let e = err(&format!(
            "{MINIMAL}[sweep]\n\"policy.autorec.alpha\" = [\"1ms\"]\n"
        ));
        assert!(e.contains("no [[policy]] labelled `autorec`"), "{e}");
        let e = err(&format!(
            "{MINIMAL}[sweep]\n\"path.loss\" = [\"bernoulli 1%\", \"bogus\"]\n"
        ));
        assert!(
            e.contains("t[path.loss=bogus]") && e.contains("bogus"),
            "{e}"
        );
        let e = err(&format!(
            "{MINIMAL}[sweep]\nseed = {{ from = 1, to = 3 }}\n"
        ));
        assert!(e.contains("range needs `step`"), "{e}");
        let e = err(&format!(
            "{MINIMAL}[sweep]\nseed = {{ from = 1, to = 3, step = 0 }}\n"
        ));
        assert!(e.contains("step > 0"), "{e}");
        let e = err(&format!(
            "{MINIMAL}[sweep]\nduration = {{ from = \"1s\", to = \"3ms\", step = \"1s\" }}\n"
        ));
        assert!(e.contains("same unit"), "{e}");
        let e = err(&format!("{MINIMAL}[sweep]\nseed = []\n"));
        assert!(e.contains("no values"), "{e}");
        let e = err(&format!(
            "{MINIMAL}[sweep]\nseed = {{ from = 1, to = 1000000000, step = 1 }}\n"
        ));
        assert!(e.contains("more than"), "{e}");
        let e = err(&format!("{MINIMAL}[[policy]]\nname = \"autorec\"\n[sweep]\n\"policy.autorec.alpha\" = [\"fast\"]\n"));
        assert!(e.contains("policy[0]"), "{e}");
    }

    #[test]
    fn example_scenarios_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let load_one = |name: &str| load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("scenarios/")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".toml"))
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "autorec-fig18.toml",
                "autorec-rtt-queue.toml",
                "autorec-switches.toml",
                "autorec-testbed.toml",
                "bulk.toml",
                "default.toml",
                "ge-burst.toml",
                "lte-trace.toml",
                "objects.toml"
            ]
        );
        for f in &files {
            for s in load_one(f) {
                for d in [&s.down, &s.up] {
                    // Traces beside the repository exist in a full checkout only.
                    let has_files = match &d.service {
                        ServiceSpec::Trace(p) => p.exists(),
                        ServiceSpec::Rate(_) => true,
                    };
                    if has_files {
                        d.path_spec()
                            .build(1, "down", None, 0)
                            .unwrap_or_else(|e| panic!("{f}: {e}"));
                    }
                }
            }
        }
        let alpha = load_one("autorec-testbed.toml");
        assert_eq!(alpha.len(), 5);
        assert_eq!(
            alpha[0].name,
            "autorec-testbed-alpha[policy.autorec.alpha=10ms]"
        );
        let ge = load_one("ge-burst.toml");
        assert_eq!(ge.len(), 5);
        let LossSpec::SlottedGe { slot, params } = &ge[0].down.loss else {
            panic!("slotted GE")
        };
        assert_eq!(*slot, Duration::from_millis(30));
        assert_eq!(params.p, Prob::from_fraction(0.2));
        assert_eq!(params.r, Prob::from_fraction(0.8));
        assert_eq!(params.h.complement(), Prob::from_fraction(0.1));
        assert_eq!(params.k1, Prob::from_fraction(0.01));
        assert_eq!(ge[0].up.loss, LossSpec::Bernoulli(Prob::ZERO));
        assert_eq!(ge[0].policies.len(), 4);
        assert!(matches!(ge[0].app, AppSpec::Rtc(_)));
        let lte = load_one("lte-trace.toml");
        let ServiceSpec::Trace(down) = &lte[0].down.service else {
            panic!("trace")
        };
        assert!(
            down.ends_with("scenarios/../../shared/traces/mahimahi/TMobile-LTE-short.down"),
            "{}",
            down.display()
        );
        assert_eq!(lte[0].name, "lte-trace");
        let objects = load_one("objects.toml");
        assert_eq!(objects.len(), 6);
        let AppSpec::File(file) = &objects[0].app else {
            panic!("file transfers")
        };
        assert_eq!((file.size, file.count), (12 * 1024, 600));
        let fig18 = load_one("autorec-fig18.toml");
        assert_eq!(fig18.len(), 16);
        let starts: Vec<LiveStart> = fig18
            .iter()
            .map(|s| match &s.app {
                AppSpec::Live(live) => live.start,
                _ => panic!("live"),
            })
            .collect();
        assert_eq!(starts[..2], [LiveStart::Session, LiveStart::Connect]);
    }
}
