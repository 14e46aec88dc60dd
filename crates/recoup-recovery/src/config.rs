//! Policy specifications: `name[:key=value,...]` strings (DESIGN.md "Policies", "Scenario file")
//! parsed into typed configurations, printed back in a canonical form that parses to the same
//! value.
//!
//! Every parameter of DESIGN.md is settable; defaults are the papers'. Each configuration struct
//! is its own parameter list ([`crate::params`]): a field is a parameter, named by the field (or
//! its `rename`), with its default in the struct's `Default` and, where a value has a range, a
//! `deserialize_with` below that checks it. `Display` prints only the parameters that differ
//! from the default, so `autorec` prints as `autorec` and a preset prints as its values.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::autorec_modes::{OffMode, ReinjectionCount, TUnitSample};
use crate::error::Error;
use crate::params::{self, in_range, Params};
use crate::qnet::QNet;

/// The policy names the parser accepts.
pub const POLICY_NAMES: &str =
    "arq, fixed, or3, art, art-mab, art-dqn, autorec, too, draft-wu, ladr-rrl (alias ladr), crest";

/// OR3's redundancy level per round (ART §7.1 baselines): R counts every send of the round,
/// the ARQ retransmission included (ART Fig. 9: R_1 = 3 replicas k = 1, 2, 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Or3Variant {
    /// OR3: R = 2n - 1, i.e. 2n - 2 copies besides the retransmission (0, 2, 4, ...).
    #[default]
    #[serde(rename = "2n-1")]
    TwoNMinusOne,
    /// "QUIC (R = 2n + 1)": 2n copies besides the retransmission (2, 4, 6, ...).
    #[serde(rename = "2n+1")]
    TwoNPlusOne,
}

impl Or3Variant {
    /// Sends of round `round` (>= 1), the retransmission included.
    #[must_use]
    pub fn redundancy(self, round: u32) -> u32 {
        let twice = round.max(1).saturating_mul(2);
        match self {
            Self::TwoNMinusOne => twice - 1,
            Self::TwoNPlusOne => twice.saturating_add(1),
        }
    }
}

/// How far copies may exceed the congestion window (ART §6.4 "opportunism"; `art`, `art-mab`
/// and `crest`); as a parameter `on`, `off` or a packet budget `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opportunism {
    /// Copies wait for the congestion window like any other packet.
    Off,
    /// Copies may exceed the congestion window by up to this many packets.
    Budget(u32),
    /// Copies ignore the congestion window (pacing still spaces them): ART §6.4 "allows replicas
    /// to be sent on time even when the congestion window is insufficient", with no budget given.
    /// Copies exist only for lost data and R <= r_max, so what they add is bounded by the data in
    /// flight.
    On,
}

impl Opportunism {
    /// Whether a copy may leave now past the congestion window, `packet` the largest packet's
    /// size in bytes.
    #[must_use]
    pub fn allows(self, ctx: &crate::api::SendContext, packet: u64) -> bool {
        match self {
            Self::Off => false,
            Self::Budget(packets) => {
                let budget = u64::from(packets).saturating_mul(packet);
                ctx.bytes_in_flight < ctx.cwnd.saturating_add(budget)
            }
            Self::On => true,
        }
    }
}

impl fmt::Display for Opportunism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Off => f.write_str("off"),
            Self::Budget(n) => write!(f, "{n}"),
            Self::On => f.write_str("on"),
        }
    }
}

impl Serialize for Opportunism {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Opportunism {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = String::deserialize(d)?;
        match v.as_str() {
            "on" => Ok(Self::On),
            "off" | "0" => Ok(Self::Off),
            n => match n.parse::<u32>() {
                Ok(n) if (1..=10_000).contains(&n) => Ok(Self::Budget(n)),
                _ => Err(serde::de::Error::custom(
                    "`on`, `off` or a packet budget in 0..=10000",
                )),
            },
        }
    }
}

/// ART's Replica Scheduler (ART §6.2) and opportunism (§6.4), shared by `art` and `art-mab`:
/// its parameters are given in the same list as theirs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerConfig {
    /// Spread replicas over the escape space; `scheduler=off` is the back-to-back ablation.
    #[serde(rename = "scheduler")]
    pub enabled: bool,
    /// Scaling coefficient of the escape space, min(BDP, a * B_max); ART uses 1. Only under
    /// `reading=text`: quic-art has no escape space.
    #[serde(deserialize_with = "scale")]
    pub a: f64,
    /// B_max is the largest loss burst in this many last RTTs (ART: "5 ~ 10"). Only under
    /// `reading=text`: quic-art has no B_max.
    #[serde(deserialize_with = "rtts")]
    pub burst_rtts: u32,
    /// ART §6.4 introduces opportunism as part of ART ("in this paper, we introduce
    /// opportunism"), so it is on by default.
    pub opportunism: Opportunism,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            a: 1.0,
            burst_rtts: 8,
            opportunism: Opportunism::On,
        }
    }
}

/// What ART's redundancy level R counts. ART §5.2 defines R_n as "the number of replicas that
/// should be resent" in round n; whether the ARQ retransmission is one of them, the text reads
/// both ways.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LevelCounts {
    /// Every send of the round, the retransmission included: "the sender retransmits 3 replicas
    /// of the lost packet (i.e., k = 1, 2, 3) during the first retransmission round", and "in
    /// the case of Figure 9, we have R_1 = 3" (§5.1-5.2), where k counts retransmissions.
    #[default]
    Sends,
    /// Copies beyond the retransmission: Fig. 12 tries "R = 0", and §7.1 lists "QUIC (R = 1)"
    /// as a variant of traditional QUIC, which retransmits one replica per loss.
    Copies,
}

/// Which reading of ART `art` and `art-mab` follow (DESIGN.md principle 6: where the paper is
/// silent or reads two ways, the authors' released code decides, and the paper-text reading stays
/// available by name). Given as `reading=code` or `reading=text`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArtReading {
    /// As quic-art (the authors' LSQUIC fork) runs ART: R counts duplicates beyond the
    /// retransmission; round n's level starts at 2n - 1; p_r is over the outcomes held; a lost
    /// range's duplicate count carries over between rounds; duplicates are spread by clock within
    /// min_rtt of the loss detection; `art-mab` is UCB with quic-art's reward. The `art` module
    /// documents each rule with its source.
    #[default]
    Code,
    /// recoup's reading of the paper's text before quic-art was read: R counts every send of the
    /// round by default (`level`), each round's level starts at 1, p_r is over L_queue slots,
    /// duplicates are placed at packet positions within an escape space of min(BDP, a B_max),
    /// and `art-mab` rewards a recovered round with eta^-(R-1).
    Text,
}

impl fmt::Display for ArtReading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Code => "code",
            Self::Text => "text",
        })
    }
}

impl FromStr for ArtReading {
    type Err = String;

    /// `code` or `text`, as the `reading` parameter takes them.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "code" => Ok(Self::Code),
            "text" => Ok(Self::Text),
            other => Err(format!(
                "unknown reading `{other}`; expected `code` or `text`"
            )),
        }
    }
}

/// The `reading` parameter, taken before the rest: it decides the other parameters' defaults.
#[derive(Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct ReadingParams {
    reading: ArtReading,
}

/// `art`: ART's test-and-verification Redundancy Adapter (§6.1) with the Replica Scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ArtConfig {
    /// Parsed from the same list by its own struct, before the fields below, whose defaults it
    /// chooses ([`ArtConfig::for_reading`]).
    #[serde(skip)]
    pub reading: ArtReading,
    /// Length of the replica-outcome bitmap (ART: L_queue >= 10).
    #[serde(deserialize_with = "l_queue")]
    pub l_queue: usize,
    /// Largest redundancy level R.
    #[serde(deserialize_with = "one_to_64")]
    pub r_max: u32,
    /// Whether R counts the retransmission. `reading=code` counts duplicates only
    /// ([`LevelCounts::Copies`]) and refuses `level=sends`.
    pub level: LevelCounts,
    /// Hold R at this level instead of adapting it: ART Fig. 18(b)'s "ART-fix" (with the
    /// scheduler) and "ART-norand" (with `scheduler=off`). By default R adapts. Under
    /// `reading=code` every round's level is R, so only the first round sends duplicates (the
    /// count carries over between rounds).
    #[serde(deserialize_with = "some_one_to_64")]
    pub fixed: Option<u32>,
    /// Parsed from the same list by its own struct.
    #[serde(skip)]
    pub scheduler: SchedulerConfig,
}

impl ArtConfig {
    /// The defaults of `reading`.
    #[must_use]
    pub fn for_reading(reading: ArtReading) -> Self {
        match reading {
            ArtReading::Code => Self {
                reading,
                // quic-art: MAX_FEEDBACK_WINDOW_SIZE 10 (src/liblsquic/lsquic_send_ctl.h:14),
                // copied into the connection's window at lsquic_send_ctl.c:375.
                l_queue: 10,
                // quic-art has no upper bound: the level grows by one per call while p_r = 1
                // (lsquic_art_feedback.c:63-66; need = max(R, 1) at lsquic_send_ctl.c:1135).
                // 64 is the largest level this parameter accepts.
                r_max: 64,
                // quic-art's R is `need`, the duplicates sent after the retransmission
                // (lsquic_send_ctl.c:1135, 2739).
                level: LevelCounts::Copies,
                // quic-art always adapts (lsquic_art_feedback.c:57-69 on every new round).
                fixed: None,
                // The scheduler runs (the AL_ART_SCHE alarm, lsquic_send_ctl.c:2667-2672,
                // 2736-2745), and duplicates skip the window check (opportunism on,
                // lsquic_send_ctl.c:1750-1753; there they skip the pacer too).
                scheduler: SchedulerConfig::default(),
            },
            ArtReading::Text => Self {
                reading,
                l_queue: 10,
                r_max: 10,
                level: LevelCounts::Sends,
                fixed: None,
                scheduler: SchedulerConfig::default(),
            },
        }
    }
}

impl Default for ArtConfig {
    fn default() -> Self {
        Self::for_reading(ArtReading::default())
    }
}

/// The bandit algorithm of `art-mab` (ART §8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BanditAlgo {
    #[default]
    #[serde(rename = "eg", alias = "epsilon-greedy")]
    EpsilonGreedy,
    #[serde(rename = "ucb")]
    Ucb,
}

/// `art-mab`: ART with a multi-armed bandit over R in `1..=r_max` (ART §8, MAB-EG / MAB-UCB).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ArtMabConfig {
    /// Parsed from the same list by its own struct, before the fields below, whose defaults it
    /// chooses ([`ArtMabConfig::for_reading`]).
    #[serde(skip)]
    pub reading: ArtReading,
    pub algo: BanditAlgo,
    /// Penalty factor. `reading=text`: each extra replica divides a success's reward by eta.
    /// `reading=code`: each lost round k of a recovered range pays -eta k R_k.
    #[serde(deserialize_with = "eta")]
    pub eta: f64,
    /// Exploration probability of epsilon-greedy.
    #[serde(deserialize_with = "probability")]
    pub epsilon: f64,
    /// UCB exploration weight c in mean + sqrt(c ln N / n).
    #[serde(deserialize_with = "weight")]
    pub ucb_c: f64,
    /// Arms are R = 1..=r_max (sends of the round under `reading=text`, duplicates beyond the
    /// retransmission under `reading=code`).
    #[serde(deserialize_with = "one_to_64")]
    pub r_max: u32,
    /// Parsed from the same list by its own struct.
    #[serde(skip)]
    pub scheduler: SchedulerConfig,
}

impl ArtMabConfig {
    /// The defaults of `reading`. quic-art's bandit is on branch `add_multi_armed_bandit`
    /// (237dc91), in src/liblsquic/multi_armed_bandit.{c,h} and lsquic_send_ctl.c.
    #[must_use]
    pub fn for_reading(reading: ArtReading) -> Self {
        match reading {
            ArtReading::Code => Self {
                reading,
                // The epsilon-greedy call is commented out in favour of UCB
                // (lsquic_send_ctl.c:1167-1168 on that branch).
                algo: BanditAlgo::Ucb,
                // A lost round k pays -1.01 k R_k (multi_armed_bandit.c:152).
                eta: 1.01,
                // EPSILON 0.1, never decayed (multi_armed_bandit.h:5).
                epsilon: 0.1,
                // The bonus 0.5 sqrt(2 ln N / n) (multi_armed_bandit.c:80) is sqrt(c ln N / n)
                // with c = 0.5.
                ucb_c: 0.5,
                // NUM_OF_ARMS 10, arm i meaning i duplicates (multi_armed_bandit.h:4;
                // lsquic_send_ctl.c:1168-1169 on that branch).
                r_max: 10,
                // As `art`'s: the bandit branch schedules duplicates as ART does
                // (lsquic_send_ctl.c:1171 there).
                scheduler: SchedulerConfig::default(),
            },
            ArtReading::Text => Self {
                reading,
                algo: BanditAlgo::EpsilonGreedy,
                eta: 1.01,
                epsilon: 0.1,
                ucb_c: 2.0,
                r_max: 10,
                scheduler: SchedulerConfig::default(),
            },
        }
    }
}

impl Default for ArtMabConfig {
    fn default() -> Self {
        Self::for_reading(ArtReading::default())
    }
}

/// `art-dqn`: ART with a DQN Redundancy Adapter (ART §8), loaded from a weights file that
/// `recoup train-dqn` writes. R ranges over the network's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct ArtDqnConfig {
    /// `reading=code` (the default): quic-art's state, actions and reward around `art`'s code
    /// reading; `reading=text`: recoup's own state and reward around `art`'s text reading. The
    /// weights file must have been trained for the same reading.
    pub reading: ArtReading,
    /// The weights file, as given (relative paths are read from the working directory).
    pub weights: String,
    /// The network read from `weights` when the specification was parsed.
    pub net: Arc<QNet>,
    /// Parsed from the same list by its own struct.
    pub scheduler: SchedulerConfig,
}

/// `art-dqn`'s own parameter list.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct ArtDqnParams {
    /// Path of the safetensors file (no commas: they separate parameters).
    weights: String,
}

/// `autorec` (AutoRec §V).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AutoRecConfig {
    /// Recovery latency tolerance.
    #[serde(with = "params::duration")]
    pub alpha: Duration,
    /// Redundancy cost tolerance (fraction).
    #[serde(deserialize_with = "tolerance")]
    pub beta: f64,
    /// Goodput reduction tolerance (fraction).
    #[serde(deserialize_with = "fraction")]
    pub gamma: f64,
    /// Decision interval D in smoothed RTTs.
    #[serde(rename = "d", deserialize_with = "rtts")]
    pub d_rtts: u32,
    /// Upper end of the K search range.
    #[serde(deserialize_with = "zero_to_64")]
    pub k_max: u32,
    /// Opportunistic reinjection after T_thres of silence, even in on-mode.
    pub opportunistic: bool,
    /// A fixed K instead of the Redundancy Adapter (the formula-accuracy experiment).
    #[serde(rename = "k", deserialize_with = "some_zero_to_64")]
    pub fixed_k: Option<u32>,
    /// Off-mode reinjection: as long as off-mode lasts, or once per entry per period.
    pub offmode: OffMode,
    /// Whether A_i counts over the data's lifetime or restarts with each ARQ round.
    pub count: ReinjectionCount,
    /// What a T_unit sample measures.
    pub t_unit: TUnitSample,
}

impl AutoRecConfig {
    /// The testbed defaults (AutoRec §VII): 30 ms / 30 % / 20 %.
    #[must_use]
    pub fn testbed() -> Self {
        Self {
            alpha: Duration::from_millis(30),
            beta: 0.3,
            gamma: 0.2,
            d_rtts: 5,
            k_max: 10,
            opportunistic: true,
            fixed_k: None,
            offmode: OffMode::default(),
            count: ReinjectionCount::default(),
            t_unit: TUnitSample::default(),
        }
    }

    /// The deployment tolerances: 200 ms / 50 % / 50 %.
    #[must_use]
    pub fn deployment() -> Self {
        Self {
            alpha: Duration::from_millis(200),
            beta: 0.5,
            gamma: 0.5,
            ..Self::testbed()
        }
    }
}

impl Default for AutoRecConfig {
    fn default() -> Self {
        Self::testbed()
    }
}

/// `autorec`'s `preset`: the base that the other parameters change.
#[derive(Default, Deserialize)]
#[serde(default)]
struct AutoRecPreset {
    preset: Preset,
}

#[derive(Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Preset {
    #[default]
    Testbed,
    Deployment,
}

/// `too` (TOO §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TooConfig {
    /// Activation threshold on E_waiting.
    #[serde(with = "params::duration")]
    pub theta: Duration,
    /// Maximum lost times n in E_waiting.
    #[serde(deserialize_with = "one_to_64")]
    pub n: u32,
    /// Activator cycle in smoothed RTTs.
    #[serde(rename = "cycle", deserialize_with = "srtts")]
    pub cycle_srtts: u32,
}

impl Default for TooConfig {
    fn default() -> Self {
        Self {
            theta: Duration::from_millis(50),
            n: 4,
            cycle_srtts: 2,
        }
    }
}

/// `draft-wu` (draft-wu-moq-recovery-for-video-streaming-00): see the `draft_wu` module.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DraftWuConfig {
    /// Most extra sends of a lost range per retransmission round; 0 for no cap (the draft's
    /// abstract and TOO §2.2 set none).
    #[serde(deserialize_with = "zero_to_64")]
    pub limit: u32,
}

/// `crest`: see the `crest` module for the rules.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CrestConfig {
    /// Cost tolerance: copies per round K with K · p <= beta (AutoRec's G(K) <= beta).
    #[serde(deserialize_with = "tolerance")]
    pub beta: f64,
    /// Chance that a round's retransmission and all its copies are lost, at most.
    #[serde(deserialize_with = "fraction")]
    pub target: f64,
    /// Most copies per round.
    #[serde(deserialize_with = "zero_to_64")]
    pub k_max: u32,
    /// Copies that cannot arrive within this long after the data's first send are not sent;
    /// zero turns the rule off.
    #[serde(with = "params::duration")]
    pub deadline: Duration,
    /// Packet outcomes the loss estimate remembers (weight 1 / window).
    #[serde(deserialize_with = "window")]
    pub window: u32,
    /// How far copies sent at once (under independent loss) may exceed the congestion window
    /// (ART §6.4); dispersed copies always wait for it.
    pub opportunism: Opportunism,
}

impl Default for CrestConfig {
    fn default() -> Self {
        Self {
            beta: 0.3,
            target: 0.01,
            k_max: 10,
            deadline: Duration::ZERO,
            window: 512,
            opportunism: Opportunism::On,
        }
    }
}

/// `ladr-rrl`: LADR's reactive rate limit (LADR §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LadrConfig {
    #[serde(deserialize_with = "packets")]
    pub n_high: u32,
    #[serde(deserialize_with = "packets")]
    pub n_low: u32,
}

impl Default for LadrConfig {
    fn default() -> Self {
        Self {
            n_high: 4,
            n_low: 2,
        }
    }
}

/// `fixed`'s parameter list (`fixed:2` is `fixed:r=2`).
#[derive(Serialize, Deserialize)]
#[serde(default)]
struct FixedParams {
    /// Copies besides the retransmission.
    #[serde(deserialize_with = "copies")]
    r: u32,
}

impl Default for FixedParams {
    fn default() -> Self {
        Self { r: 1 }
    }
}

/// `or3`'s parameter list.
#[derive(Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Or3Params {
    variant: Or3Variant,
}

// Value ranges; each error text states what is accepted.

fn copies<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 0..=64, "an integer copy count in 0..=64")
}

fn l_queue<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    in_range(d, 1..=65_536, "an integer in 1..=65536 (ART: >= 10)")
}

fn one_to_64<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1..=64, "an integer in 1..=64")
}

fn some_one_to_64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    one_to_64(d).map(Some)
}

fn zero_to_64<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 0..=64, "an integer in 0..=64")
}

fn some_zero_to_64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    zero_to_64(d).map(Some)
}

fn rtts<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1..=1000, "a whole number of RTTs in 1..=1000")
}

fn srtts<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1..=1000, "a whole number of SRTTs in 1..=1000")
}

fn packets<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1..=1_000_000, "a packet count in 1..=1000000")
}

fn scale<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 1.0..=1000.0, "a scaling coefficient in [1, 1000]")
}

fn eta<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 1.0..=100.0, "a number in [1, 100]")
}

fn probability<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 0.0..=1.0, "a probability in [0, 1]")
}

fn weight<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 0.0..=100.0, "a number in [0, 100]")
}

fn tolerance<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 0.0..=100.0, "a fraction >= 0 (`0.3` or `30%`)")
}

fn window<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1..=1_000_000, "a packet count in 1..=1000000")
}

fn fraction<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 0.0..=1.0, "a fraction in [0, 1] (`0.2` or `20%`)")
}

/// The Replica Scheduler's parameters that only `reading=text` has: quic-art spreads duplicates
/// over min_rtt and has no escape space (the `art` module).
const TEXT_ONLY_KEYS: [&str; 2] = ["a", "burst_rtts"];

/// `art`'s and `art-mab`'s `reading`, refusing the parameters the other reading lacks.
fn take_reading(p: &mut Params, policy: &'static str) -> Result<ArtReading, Error> {
    let reading = p.take::<ReadingParams>()?.reading;
    if reading == ArtReading::Code {
        if let Some(key) = TEXT_ONLY_KEYS.into_iter().find(|key| p.given(key)) {
            return Err(Error::Inconsistent {
                policy,
                detail: format!(
                    "`{key}` applies only to `reading=text` (the escape space min(BDP, a B_max)); \
                     `reading=code` spreads duplicates over min_rtt as quic-art does"
                ),
            });
        }
    }
    Ok(reading)
}

/// A built-in policy with its parameters. Parse with [`str::parse`] or
/// [`PolicySpec::from_name_params`]; build a [`Policy`](crate::Policy) with `PolicySpec::build`.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum PolicySpec {
    #[default]
    Arq,
    /// `fixed:R`: R copies besides the retransmission, every round, back to back.
    Fixed {
        copies: u32,
    },
    Or3 {
        variant: Or3Variant,
    },
    Art(ArtConfig),
    ArtMab(ArtMabConfig),
    ArtDqn(ArtDqnConfig),
    AutoRec(AutoRecConfig),
    Too(TooConfig),
    DraftWu(DraftWuConfig),
    LadrRrl(LadrConfig),
    Crest(CrestConfig),
}

impl PolicySpec {
    /// The policy's name as the parser accepts it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Arq => "arq",
            Self::Fixed { .. } => "fixed",
            Self::Or3 { .. } => "or3",
            Self::Art(_) => "art",
            Self::ArtMab(_) => "art-mab",
            Self::ArtDqn(_) => "art-dqn",
            Self::AutoRec(_) => "autorec",
            Self::Too(_) => "too",
            Self::DraftWu(_) => "draft-wu",
            Self::LadrRrl(_) => "ladr-rrl",
            Self::Crest(_) => "crest",
        }
    }

    /// Parse the scenario-file form: `name = "autorec"`, `params = "alpha=30ms,beta=0.3"`.
    pub fn from_name_params(name: &str, params: &str) -> Result<Self, Error> {
        let name = name.trim();
        let policy: &'static str = match name {
            "arq" => "arq",
            "fixed" => "fixed",
            "or3" => "or3",
            "art" => "art",
            "art-mab" => "art-mab",
            "art-dqn" => "art-dqn",
            "autorec" => "autorec",
            "too" => "too",
            "draft-wu" => "draft-wu",
            "ladr-rrl" | "ladr" => "ladr-rrl",
            "crest" => "crest",
            // Built by the simulator, which alone has the loss draws (recoup-sim's oracle).
            "oracle" => return Err(Error::SimulationOnly { name: "oracle" }),
            "" => {
                return Err(Error::Empty {
                    accepted: POLICY_NAMES,
                })
            }
            other => {
                return Err(Error::UnknownPolicy {
                    name: other.to_owned(),
                    accepted: POLICY_NAMES,
                })
            }
        };
        let mut p = Params::split(policy, params, (policy == "fixed").then_some("r"))?;
        let spec = match policy {
            "arq" => Self::Arq,
            "fixed" => Self::Fixed {
                copies: p.take::<FixedParams>()?.r,
            },
            "or3" => Self::Or3 {
                variant: p.take::<Or3Params>()?.variant,
            },
            "art" => {
                let reading = take_reading(&mut p, policy)?;
                p.defaults_from(&ArtConfig::for_reading(reading));
                let mut art: ArtConfig = p.take()?;
                art.reading = reading;
                if reading == ArtReading::Code && art.level == LevelCounts::Sends {
                    return Err(Error::Inconsistent {
                        policy,
                        detail: "`level=sends` applies only to `reading=text`: under \
                                 `reading=code` R counts the duplicates beyond the \
                                 retransmission, as quic-art does (`level=copies`)"
                            .to_owned(),
                    });
                }
                art.scheduler = p.take()?;
                Self::Art(art)
            }
            "art-mab" => {
                let reading = take_reading(&mut p, policy)?;
                p.defaults_from(&ArtMabConfig::for_reading(reading));
                let mut mab: ArtMabConfig = p.take()?;
                mab.reading = reading;
                mab.scheduler = p.take()?;
                Self::ArtMab(mab)
            }
            "art-dqn" => {
                let reading = take_reading(&mut p, policy)?;
                let own: ArtDqnParams = p.take()?;
                let scheduler = p.take()?;
                p.finish()?;
                if own.weights.is_empty() {
                    return Err(Error::Inconsistent {
                        policy,
                        detail: "`weights=PATH` is required (a file written by `recoup \
                                 train-dqn`)"
                            .to_owned(),
                    });
                }
                let net = QNet::load(Path::new(&own.weights))?;
                if net.reading() != reading {
                    let trained = net.reading();
                    return Err(Error::Inconsistent {
                        policy,
                        detail: format!(
                            "`{}` was trained for `reading={trained}` (its state), not \
                             `reading={reading}`: give `reading={trained}`, or train for this \
                             reading with `recoup train-dqn --reading {reading}`",
                            own.weights
                        ),
                    });
                }
                return Ok(Self::ArtDqn(ArtDqnConfig {
                    reading,
                    weights: own.weights,
                    net: Arc::new(net),
                    scheduler,
                }));
            }
            "autorec" => {
                let base = match p.take::<AutoRecPreset>()?.preset {
                    Preset::Testbed => AutoRecConfig::testbed(),
                    Preset::Deployment => AutoRecConfig::deployment(),
                };
                p.defaults_from(&base);
                Self::AutoRec(p.take()?)
            }
            "too" => Self::Too(p.take()?),
            "draft-wu" => Self::DraftWu(p.take()?),
            "crest" => Self::Crest(p.take()?),
            _ => {
                let ladr: LadrConfig = p.take()?;
                if ladr.n_low > ladr.n_high {
                    return Err(Error::Inconsistent {
                        policy,
                        detail: "n_low must not exceed n_high".to_owned(),
                    });
                }
                Self::LadrRrl(ladr)
            }
        };
        p.finish()?;
        Ok(spec)
    }
}

impl FromStr for PolicySpec {
    type Err = Error;

    /// `name` or `name:params`, e.g. `fixed:2`, `autorec:alpha=30ms,beta=0.3`.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.split_once(':') {
            Some((name, params)) => Self::from_name_params(name, params),
            None => Self::from_name_params(s, ""),
        }
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use params::changed;
        let items = match self {
            Self::Arq => Vec::new(),
            // The copy count is the point of `fixed`: always printed.
            Self::Fixed { copies } => changed(&FixedParams { r: *copies }, None),
            Self::Or3 { variant } => changed(
                &Or3Params { variant: *variant },
                Some(&Or3Params::default()),
            ),
            Self::Art(c) => [
                changed(
                    &ReadingParams { reading: c.reading },
                    Some(&ReadingParams::default()),
                ),
                changed(c, Some(&ArtConfig::for_reading(c.reading))),
                changed(&c.scheduler, Some(&SchedulerConfig::default())),
            ]
            .concat(),
            Self::ArtMab(c) => [
                changed(
                    &ReadingParams { reading: c.reading },
                    Some(&ReadingParams::default()),
                ),
                changed(c, Some(&ArtMabConfig::for_reading(c.reading))),
                changed(&c.scheduler, Some(&SchedulerConfig::default())),
            ]
            .concat(),
            Self::ArtDqn(c) => [
                changed(
                    &ReadingParams { reading: c.reading },
                    Some(&ReadingParams::default()),
                ),
                changed(
                    &ArtDqnParams {
                        weights: c.weights.clone(),
                    },
                    None,
                ),
                changed(&c.scheduler, Some(&SchedulerConfig::default())),
            ]
            .concat(),
            Self::AutoRec(c) => changed(c, Some(&AutoRecConfig::testbed())),
            Self::Too(c) => changed(c, Some(&TooConfig::default())),
            Self::DraftWu(c) => changed(c, Some(&DraftWuConfig::default())),
            Self::LadrRrl(c) => changed(c, Some(&LadrConfig::default())),
            Self::Crest(c) => changed(c, Some(&CrestConfig::default())),
        };
        f.write_str(self.name())?;
        if !items.is_empty() {
            write!(f, ":{}", items.join(","))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::parse_duration;

    fn parse(s: &str) -> PolicySpec {
        match s.parse() {
            Ok(spec) => spec,
            Err(e) => panic!("`{s}` should parse: {e}"),
        }
    }

    fn err(s: &str) -> String {
        match s.parse::<PolicySpec>() {
            Ok(spec) => panic!("`{s}` should not parse, got {spec:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn accepted_forms() {
        assert_eq!(parse("arq"), PolicySpec::Arq);
        assert_eq!(parse("fixed:2"), PolicySpec::Fixed { copies: 2 });
        assert_eq!(parse("fixed:r=2"), PolicySpec::Fixed { copies: 2 });
        assert_eq!(parse("fixed:0"), PolicySpec::Fixed { copies: 0 });
        assert_eq!(
            parse("or3"),
            PolicySpec::Or3 {
                variant: Or3Variant::TwoNMinusOne
            }
        );
        assert_eq!(
            parse("or3:variant=2n+1"),
            PolicySpec::Or3 {
                variant: Or3Variant::TwoNPlusOne
            }
        );
        let PolicySpec::Art(art) = parse("art:reading=text,l_queue=10,a=1,scheduler=off") else {
            panic!("art")
        };
        assert_eq!(art.reading, ArtReading::Text);
        assert_eq!(art.l_queue, 10);
        assert!(!art.scheduler.enabled);
        assert_eq!(art.scheduler.a, 1.0);
        let PolicySpec::ArtMab(mab) = parse("art-mab:algo=ucb,reading=text") else {
            panic!("art-mab")
        };
        assert_eq!(mab.algo, BanditAlgo::Ucb);
        assert_eq!(mab.eta, 1.01);
        assert_eq!(mab.ucb_c, 2.0);
        // Each reading has its own defaults; `reading=code` is the default reading.
        assert_eq!(parse("art"), PolicySpec::Art(ArtConfig::default()));
        assert_eq!(parse("art:reading=code"), parse("art"));
        let PolicySpec::Art(code) = parse("art") else {
            panic!("art")
        };
        assert_eq!(
            (code.reading, code.r_max, code.level, code.l_queue),
            (ArtReading::Code, 64, LevelCounts::Copies, 10)
        );
        let PolicySpec::Art(text) = parse("art:reading=text") else {
            panic!("art")
        };
        assert_eq!((text.r_max, text.level), (10, LevelCounts::Sends));
        let PolicySpec::ArtMab(code) = parse("art-mab") else {
            panic!("art-mab")
        };
        assert_eq!(
            (
                code.reading,
                code.algo,
                code.ucb_c,
                code.r_max,
                code.epsilon,
                code.eta
            ),
            (ArtReading::Code, BanditAlgo::Ucb, 0.5, 10, 0.1, 1.01)
        );
        let PolicySpec::ArtMab(text) = parse("art-mab:reading=text") else {
            panic!("art-mab")
        };
        assert_eq!((text.algo, text.ucb_c), (BanditAlgo::EpsilonGreedy, 2.0));
        // Parameters of both readings, given with `reading=code`.
        let PolicySpec::Art(art) =
            parse("art:r_max=6,fixed=2,scheduler=off,opportunism=3,l_queue=20,level=copies")
        else {
            panic!("art")
        };
        assert_eq!((art.r_max, art.fixed, art.l_queue), (6, Some(2), 20));
        assert_eq!(art.scheduler.opportunism, Opportunism::Budget(3));
        let PolicySpec::ArtMab(mab) = parse("art-mab:algo=eg,epsilon=0.2,r_max=4") else {
            panic!("art-mab")
        };
        assert_eq!(
            (mab.algo, mab.epsilon, mab.r_max),
            (BanditAlgo::EpsilonGreedy, 0.2, 4)
        );
        assert_eq!(
            parse("autorec:alpha=30ms,beta=0.3,gamma=0.2"),
            PolicySpec::AutoRec(AutoRecConfig::testbed())
        );
        assert_eq!(
            parse("autorec:preset=deployment"),
            PolicySpec::AutoRec(AutoRecConfig::deployment())
        );
        let PolicySpec::AutoRec(a) = parse("autorec:opportunistic=off") else {
            panic!("autorec")
        };
        assert!(!a.opportunistic);
        let PolicySpec::AutoRec(a) = parse("autorec:k=3") else {
            panic!("autorec")
        };
        assert_eq!(a.fixed_k, Some(3));
        // Percentages and a preset overridden by an explicit value.
        let PolicySpec::AutoRec(a) = parse("autorec:beta=30%,preset=deployment,alpha=0.1s") else {
            panic!("autorec")
        };
        assert_eq!(a.alpha, Duration::from_millis(100));
        assert!((a.beta - 0.3).abs() < 1e-12);
        assert_eq!(a.gamma, 0.5);
        assert_eq!(
            parse("too:theta=50ms,n=4"),
            PolicySpec::Too(TooConfig::default())
        );
        assert_eq!(
            parse("ladr-rrl:n_high=4,n_low=2"),
            PolicySpec::LadrRrl(LadrConfig::default())
        );
        assert_eq!(parse("ladr"), PolicySpec::LadrRrl(LadrConfig::default()));
        // The scenario-file form: name and params separately.
        assert_eq!(
            PolicySpec::from_name_params("autorec", "alpha=30ms,beta=0.3"),
            Ok(PolicySpec::AutoRec(AutoRecConfig::testbed()))
        );
        assert_eq!(
            PolicySpec::from_name_params(" fixed ", " r = 3 "),
            Ok(PolicySpec::Fixed { copies: 3 })
        );
    }

    #[test]
    fn display_round_trips() {
        let cases = [
            ("arq", "arq"),
            ("fixed:2", "fixed:r=2"),
            ("fixed", "fixed:r=1"),
            ("or3", "or3"),
            ("or3:variant=2n+1", "or3:variant=2n+1"),
            ("art:l_queue=10,scheduler=off", "art:scheduler=off"),
            ("art:reading=code,r_max=64,level=copies", "art"),
            ("art:r_max=10,fixed=3", "art:r_max=10,fixed=3"),
            ("art:reading=text", "art:reading=text"),
            (
                "art:reading=text,l_queue=10,a=1,scheduler=off",
                "art:reading=text,scheduler=off",
            ),
            (
                "art:l_queue=20,a=2.5,burst_rtts=5,opportunism=4,r_max=6,reading=text",
                "art:reading=text,l_queue=20,r_max=6,a=2.5,burst_rtts=5,opportunism=4",
            ),
            (
                "art:reading=text,level=copies,opportunism=off",
                "art:reading=text,level=copies,opportunism=off",
            ),
            (
                "art:opportunism=0,level=sends,reading=text",
                "art:reading=text,opportunism=off",
            ),
            ("art:opportunism=on", "art"),
            ("art-mab:algo=ucb", "art-mab"),
            ("art-mab:algo=eg", "art-mab:algo=eg"),
            ("art-mab:reading=text,algo=eg", "art-mab:reading=text"),
            (
                "art-mab:reading=text,algo=ucb",
                "art-mab:reading=text,algo=ucb",
            ),
            (
                "art-mab:eta=1.05,epsilon=0.2,ucb_c=1.5,scheduler=off,reading=text",
                "art-mab:reading=text,eta=1.05,epsilon=0.2,ucb_c=1.5,scheduler=off",
            ),
            (
                "art-mab:eta=1.05,epsilon=0.2,ucb_c=1.5,scheduler=off",
                "art-mab:eta=1.05,epsilon=0.2,ucb_c=1.5,scheduler=off",
            ),
            ("autorec:alpha=30ms,beta=0.3,gamma=0.2", "autorec"),
            (
                "autorec:preset=deployment",
                "autorec:alpha=200ms,beta=0.5,gamma=0.5",
            ),
            ("autorec:opportunistic=off", "autorec:opportunistic=off"),
            ("autorec:k=3", "autorec:k=3"),
            ("autorec:offmode=repeat,count=data,t_unit=rtx", "autorec"),
            (
                "autorec:t_unit=loss,offmode=once,count=round",
                "autorec:offmode=once,count=round,t_unit=loss",
            ),
            (
                "autorec:alpha=1.5ms,d=10,k_max=4",
                "autorec:alpha=1500us,d=10,k_max=4",
            ),
            ("too:theta=50ms,n=4", "too"),
            ("too:theta=1s,n=2,cycle=3", "too:theta=1s,n=2,cycle=3"),
            ("draft-wu:limit=0", "draft-wu"),
            ("draft-wu:limit=2", "draft-wu:limit=2"),
            ("ladr-rrl:n_high=4,n_low=2", "ladr-rrl"),
            ("ladr-rrl:n_high=8,n_low=3", "ladr-rrl:n_high=8,n_low=3"),
        ];
        for (input, canonical) in cases {
            let spec = parse(input);
            assert_eq!(spec.to_string(), canonical, "display of `{input}`");
            assert_eq!(parse(canonical), spec, "round trip of `{input}`");
        }
    }

    #[test]
    fn errors_name_what_is_accepted() {
        let e = err("quic");
        assert!(
            e.contains("unknown policy `quic`") && e.contains("autorec"),
            "{e}"
        );
        let e = err("");
        assert!(e.contains("empty") && e.contains("arq"), "{e}");
        let e = err("autorec:delta=1");
        assert!(
            e.contains("`delta`") && e.contains("alpha, beta, gamma"),
            "{e}"
        );
        let e = err("arq:r=1");
        assert!(e.contains("unknown parameter `r`"), "{e}");
        let e = err("autorec:alpha=fast");
        assert!(e.contains("`fast`") && e.contains("duration"), "{e}");
        let e = err("autorec:alpha=2h");
        assert!(e.contains("`2h`"), "{e}");
        let e = err("autorec:gamma=1.5");
        assert!(e.contains("[0, 1]"), "{e}");
        let e = err("autorec:beta=NaN");
        assert!(e.contains("`NaN`"), "{e}");
        let e = err("fixed:-1");
        assert!(e.contains("0..=64"), "{e}");
        let e = err("fixed:r=1,r=2");
        assert!(e.contains("twice"), "{e}");
        let e = err("or3:variant=3n");
        assert!(e.contains("`2n-1` or `2n+1`"), "{e}");
        let e = err("art:scheduler=maybe");
        assert!(e.contains("`on` or `off`"), "{e}");
        let e = err("art:l_queue=0");
        assert!(e.contains("1..=65536"), "{e}");
        let e = err("art:reading=paper");
        assert!(
            e.contains("`paper`") && e.contains("`reading`") && e.contains("`code` or `text`"),
            "{e}"
        );
        let e = err("art-mab:reading=lsquic");
        assert!(
            e.contains("`reading`") && e.contains("`code` or `text`"),
            "{e}"
        );
        // Parameters of the other reading are refused by name.
        for (spec, key) in [
            ("art:a=2", "`a`"),
            ("art:reading=code,burst_rtts=5", "`burst_rtts`"),
            ("art-mab:a=1", "`a`"),
            ("art:level=sends", "`level=sends`"),
        ] {
            let e = err(spec);
            assert!(e.contains(key) && e.contains("reading=text"), "{spec}: {e}");
        }
        let e = err("art:level=all");
        assert!(
            e.contains("`all`") && e.contains("`sends` or `copies`"),
            "{e}"
        );
        let e = err("art:opportunism=lots");
        assert!(e.contains("`lots`") && e.contains("packet budget"), "{e}");
        let e = err("art-mab:opportunism=10001");
        assert!(e.contains("0..=10000"), "{e}");
        let e = err("art-mab:algo=thompson");
        assert!(e.contains("ucb"), "{e}");
        let e = err("autorec:offmode=twice");
        assert!(e.contains("`offmode`") && e.contains("`once`"), "{e}");
        let e = err("autorec:count=packet");
        assert!(e.contains("`packet`") && e.contains("`round`"), "{e}");
        let e = err("too:theta");
        assert!(
            e.contains("malformed") && e.contains("theta, n, cycle"),
            "{e}"
        );
        let e = err("too:n=4,,theta=1ms");
        assert!(e.contains("malformed"), "{e}");
        let e = err("ladr-rrl:n_high=2,n_low=3");
        assert!(e.contains("n_low must not exceed n_high"), "{e}");
        let e = err("ladr-rrl:n_high=0");
        assert!(e.contains("`n_high`") && e.contains("1..=1000000"), "{e}");
        let e = err("ladr-rrl:n_low=many");
        assert!(e.contains("`n_low`"), "{e}");
        let e = err("autorec:preset=lab");
        assert!(e.contains("`testbed` or `deployment`"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30ms"), Some(Duration::from_millis(30)));
        assert_eq!(parse_duration("0.2s"), Some(Duration::from_millis(200)));
        assert_eq!(parse_duration("500us"), Some(Duration::from_micros(500)));
        assert_eq!(parse_duration("7ns"), Some(Duration::from_nanos(7)));
        assert_eq!(parse_duration("1h"), None);
        assert_eq!(parse_duration("ms"), None);
        assert_eq!(parse_duration("30"), None);
        assert_eq!(parse_duration("1..2ms"), None);
        assert_eq!(parse_duration("99999999999999999999s"), None);
    }

    #[test]
    fn or3_counts_every_send_of_the_round() {
        let v = Or3Variant::TwoNMinusOne;
        assert_eq!(
            (1..=4).map(|n| v.redundancy(n)).collect::<Vec<_>>(),
            [1, 3, 5, 7]
        );
        let v = Or3Variant::TwoNPlusOne;
        assert_eq!(
            (1..=4).map(|n| v.redundancy(n)).collect::<Vec<_>>(),
            [3, 5, 7, 9]
        );
        assert_eq!(v.redundancy(u32::MAX), u32::MAX);
    }
}
