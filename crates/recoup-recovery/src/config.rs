//! Policy specifications: `name[:key=value,...]` strings (DESIGN.md "Policies", "Scenario file")
//! parsed into typed configurations, printed back in a canonical form that parses to the same
//! value.
//!
//! Every parameter of DESIGN.md is settable; defaults are the papers'. `Display` prints only the
//! parameters that differ from the default, so `autorec` prints as `autorec` and a preset prints
//! as its values.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::Error;

/// The policy names the parser accepts.
pub const POLICY_NAMES: &str = "arq, fixed, or3, art, art-mab, autorec, too, ladr-rrl (alias ladr)";

/// OR3's redundancy level per round (ART §7.1 baselines): R counts every send of the round,
/// the ARQ retransmission included (ART Fig. 9: R_1 = 3 replicas k = 1, 2, 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Or3Variant {
    /// OR3: R = 2n - 1, i.e. 2n - 2 copies besides the retransmission (0, 2, 4, ...).
    #[default]
    TwoNMinusOne,
    /// "QUIC (R = 2n + 1)": 2n copies besides the retransmission (2, 4, 6, ...).
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

    fn as_str(self) -> &'static str {
        match self {
            Self::TwoNMinusOne => "2n-1",
            Self::TwoNPlusOne => "2n+1",
        }
    }
}

/// How far ART's copies may exceed the congestion window (ART §6.4 "opportunism").
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

impl fmt::Display for Opportunism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Off => f.write_str("off"),
            Self::Budget(n) => write!(f, "{n}"),
            Self::On => f.write_str("on"),
        }
    }
}

/// ART's Replica Scheduler (ART §6.2) and opportunism (§6.4), shared by `art` and `art-mab`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SchedulerConfig {
    /// Spread replicas over the escape space; `false` is the back-to-back ablation.
    pub enabled: bool,
    /// Scaling coefficient of the escape space, min(BDP, a * B_max); ART uses 1.
    pub a: f64,
    /// B_max is the largest loss burst in this many last RTTs (ART: "5 ~ 10").
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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

impl LevelCounts {
    fn as_str(self) -> &'static str {
        match self {
            Self::Sends => "sends",
            Self::Copies => "copies",
        }
    }
}

/// `art`: ART's test-and-verification Redundancy Adapter (§6.1) with the Replica Scheduler.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArtConfig {
    /// Length of the replica-outcome bitmap (ART: L_queue >= 10).
    pub l_queue: usize,
    /// Largest redundancy level R.
    pub r_max: u32,
    /// Whether R counts the retransmission.
    pub level: LevelCounts,
    pub scheduler: SchedulerConfig,
}

impl Default for ArtConfig {
    fn default() -> Self {
        Self {
            l_queue: 10,
            r_max: 10,
            level: LevelCounts::default(),
            scheduler: SchedulerConfig::default(),
        }
    }
}

/// The bandit algorithm of `art-mab` (ART §8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BanditAlgo {
    #[default]
    EpsilonGreedy,
    Ucb,
}

impl BanditAlgo {
    fn as_str(self) -> &'static str {
        match self {
            Self::EpsilonGreedy => "eg",
            Self::Ucb => "ucb",
        }
    }
}

/// `art-mab`: ART with a multi-armed bandit over R in `1..=r_max` (ART §8, MAB-EG / MAB-UCB).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArtMabConfig {
    pub algo: BanditAlgo,
    /// Penalty factor: each extra replica divides a success's reward by eta (ART: 1.01).
    pub eta: f64,
    /// Exploration probability of epsilon-greedy.
    pub epsilon: f64,
    /// UCB exploration weight c in mean + sqrt(c ln t / n).
    pub ucb_c: f64,
    /// Arms are R = 1..=r_max (ART: 10).
    pub r_max: u32,
    pub scheduler: SchedulerConfig,
}

impl Default for ArtMabConfig {
    fn default() -> Self {
        Self {
            algo: BanditAlgo::EpsilonGreedy,
            eta: 1.01,
            epsilon: 0.1,
            ucb_c: 2.0,
            r_max: 10,
            scheduler: SchedulerConfig::default(),
        }
    }
}

/// `autorec` (AutoRec §V).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoRecConfig {
    /// Recovery latency tolerance.
    pub alpha: Duration,
    /// Redundancy cost tolerance (fraction).
    pub beta: f64,
    /// Goodput reduction tolerance (fraction).
    pub gamma: f64,
    /// Decision interval D in smoothed RTTs.
    pub d_rtts: u32,
    /// Upper end of the K search range.
    pub k_max: u32,
    /// Opportunistic reinjection after T_thres of silence, even in on-mode.
    pub opportunistic: bool,
    /// A fixed K instead of the Redundancy Adapter (the formula-accuracy experiment).
    pub fixed_k: Option<u32>,
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

/// `too` (TOO §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooConfig {
    /// Activation threshold on E_waiting.
    pub theta: Duration,
    /// Maximum lost times n in E_waiting.
    pub n: u32,
    /// Activator cycle in smoothed RTTs.
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

/// `ladr-rrl`: LADR's reactive rate limit (LADR §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LadrConfig {
    pub n_high: u32,
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
    AutoRec(AutoRecConfig),
    Too(TooConfig),
    LadrRrl(LadrConfig),
}

const FIXED_PARAMS: &str = "r (or a bare count, `fixed:2`)";
const OR3_PARAMS: &str = "variant (2n-1 | 2n+1)";
const ART_PARAMS: &str =
    "l_queue, r_max, level (sends | copies), scheduler, a, burst_rtts, opportunism (on | off | N)";
const MAB_PARAMS: &str =
    "algo (eg | ucb), eta, epsilon, ucb_c, r_max, scheduler, a, burst_rtts, opportunism (on | off | N)";
const AUTOREC_PARAMS: &str =
    "preset (testbed | deployment), alpha, beta, gamma, d, k_max, opportunistic, k";
const TOO_PARAMS: &str = "theta, n, cycle";
const LADR_PARAMS: &str = "n_high, n_low";

/// Longest duration a parameter may take; anything longer is a typo.
const MAX_DURATION: Duration = Duration::from_secs(3600);

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
            Self::AutoRec(_) => "autorec",
            Self::Too(_) => "too",
            Self::LadrRrl(_) => "ladr-rrl",
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
            "autorec" => "autorec",
            "too" => "too",
            "ladr-rrl" | "ladr" => "ladr-rrl",
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
        let accepted = match policy {
            "arq" => "(none)",
            "fixed" => FIXED_PARAMS,
            "or3" => OR3_PARAMS,
            "art" => ART_PARAMS,
            "art-mab" => MAB_PARAMS,
            "autorec" => AUTOREC_PARAMS,
            "too" => TOO_PARAMS,
            _ => LADR_PARAMS,
        };
        let mut p = Params::split(policy, accepted, params, policy == "fixed")?;
        let spec = match policy {
            "arq" => Self::Arq,
            "fixed" => Self::Fixed {
                copies: p
                    .take_u32("r", 0..=64, "an integer copy count in 0..=64")?
                    .unwrap_or(1),
            },
            "or3" => Self::Or3 {
                variant: match p.take("variant") {
                    None => Or3Variant::default(),
                    Some(v) => match v.as_str() {
                        "2n-1" => Or3Variant::TwoNMinusOne,
                        "2n+1" => Or3Variant::TwoNPlusOne,
                        _ => return Err(p.bad("variant", &v, "`2n-1` or `2n+1`")),
                    },
                },
            },
            "art" => {
                let d = ArtConfig::default();
                let l_queue = p
                    .take_u32(
                        "l_queue",
                        1..=65_536,
                        "an integer in 1..=65536 (ART: >= 10)",
                    )?
                    .map_or(d.l_queue, |v| v as usize);
                let r_max = p
                    .take_u32("r_max", 1..=64, "an integer in 1..=64")?
                    .unwrap_or(d.r_max);
                let level = match p.take("level") {
                    None => d.level,
                    Some(v) => match v.as_str() {
                        "sends" => LevelCounts::Sends,
                        "copies" => LevelCounts::Copies,
                        _ => return Err(p.bad("level", &v, "`sends` or `copies`")),
                    },
                };
                Self::Art(ArtConfig {
                    l_queue,
                    r_max,
                    level,
                    scheduler: p.take_scheduler()?,
                })
            }
            "art-mab" => {
                let d = ArtMabConfig::default();
                let algo = match p.take("algo") {
                    None => d.algo,
                    Some(v) => match v.as_str() {
                        "eg" | "epsilon-greedy" => BanditAlgo::EpsilonGreedy,
                        "ucb" => BanditAlgo::Ucb,
                        _ => return Err(p.bad("algo", &v, "`eg` (epsilon-greedy) or `ucb`")),
                    },
                };
                Self::ArtMab(ArtMabConfig {
                    algo,
                    eta: p
                        .take_f64("eta", 1.0, 100.0, "a number in [1, 100]")?
                        .unwrap_or(d.eta),
                    epsilon: p
                        .take_f64("epsilon", 0.0, 1.0, "a probability in [0, 1]")?
                        .unwrap_or(d.epsilon),
                    ucb_c: p
                        .take_f64("ucb_c", 0.0, 100.0, "a number in [0, 100]")?
                        .unwrap_or(d.ucb_c),
                    r_max: p
                        .take_u32("r_max", 1..=64, "an integer in 1..=64")?
                        .unwrap_or(d.r_max),
                    scheduler: p.take_scheduler()?,
                })
            }
            "autorec" => {
                let base = match p.take("preset") {
                    None => AutoRecConfig::testbed(),
                    Some(v) => match v.as_str() {
                        "testbed" => AutoRecConfig::testbed(),
                        "deployment" => AutoRecConfig::deployment(),
                        _ => return Err(p.bad("preset", &v, "`testbed` or `deployment`")),
                    },
                };
                Self::AutoRec(AutoRecConfig {
                    alpha: p.take_duration("alpha")?.unwrap_or(base.alpha),
                    beta: p
                        .take_f64("beta", 0.0, 100.0, "a fraction >= 0 (`0.3` or `30%`)")?
                        .unwrap_or(base.beta),
                    gamma: p
                        .take_f64("gamma", 0.0, 1.0, "a fraction in [0, 1] (`0.2` or `20%`)")?
                        .unwrap_or(base.gamma),
                    d_rtts: p
                        .take_u32("d", 1..=1000, "a whole number of RTTs in 1..=1000")?
                        .unwrap_or(base.d_rtts),
                    k_max: p
                        .take_u32("k_max", 0..=64, "an integer in 0..=64")?
                        .unwrap_or(base.k_max),
                    opportunistic: p.take_bool("opportunistic")?.unwrap_or(base.opportunistic),
                    fixed_k: p.take_u32("k", 0..=64, "an integer in 0..=64")?,
                })
            }
            "too" => {
                let d = TooConfig::default();
                Self::Too(TooConfig {
                    theta: p.take_duration("theta")?.unwrap_or(d.theta),
                    n: p.take_u32("n", 1..=64, "an integer in 1..=64")?
                        .unwrap_or(d.n),
                    cycle_srtts: p
                        .take_u32("cycle", 1..=1000, "a whole number of SRTTs in 1..=1000")?
                        .unwrap_or(d.cycle_srtts),
                })
            }
            _ => {
                let d = LadrConfig::default();
                let n_high = p
                    .take_u32("n_high", 1..=1_000_000, "a packet count in 1..=1000000")?
                    .unwrap_or(d.n_high);
                let n_low = p
                    .take_u32("n_low", 1..=1_000_000, "a packet count in 1..=1000000")?
                    .unwrap_or(d.n_low);
                if n_low > n_high {
                    return Err(Error::Inconsistent {
                        policy,
                        detail: "n_low must not exceed n_high",
                    });
                }
                Self::LadrRrl(LadrConfig { n_high, n_low })
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

/// `key=value` pairs of one specification, consumed key by key; leftovers are unknown keys.
struct Params {
    policy: &'static str,
    accepted: &'static str,
    items: Vec<(String, String)>,
}

impl Params {
    fn split(
        policy: &'static str,
        accepted: &'static str,
        params: &str,
        bare_count: bool,
    ) -> Result<Self, Error> {
        let mut items: Vec<(String, String)> = Vec::new();
        let params = params.trim();
        if params.is_empty() {
            return Ok(Self {
                policy,
                accepted,
                items,
            });
        }
        for (i, item) in params.split(',').enumerate() {
            let item = item.trim();
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                // `fixed:2` is `fixed:r=2`.
                None if bare_count && i == 0 && !item.is_empty() => ("r", item),
                None => {
                    return Err(Error::Malformed {
                        policy,
                        item: item.to_owned(),
                        accepted,
                    })
                }
            };
            if key.is_empty() {
                return Err(Error::Malformed {
                    policy,
                    item: item.to_owned(),
                    accepted,
                });
            }
            if items.iter().any(|(k, _)| k == key) {
                return Err(Error::Duplicate {
                    policy,
                    key: key.to_owned(),
                });
            }
            items.push((key.to_owned(), value.to_owned()));
        }
        Ok(Self {
            policy,
            accepted,
            items,
        })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let i = self.items.iter().position(|(k, _)| k == key)?;
        Some(self.items.remove(i).1)
    }

    fn bad(&self, key: &str, value: &str, expected: &'static str) -> Error {
        Error::BadValue {
            policy: self.policy,
            key: key.to_owned(),
            value: value.to_owned(),
            expected,
        }
    }

    fn take_u32(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<u32>,
        expected: &'static str,
    ) -> Result<Option<u32>, Error> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        match v.parse::<u32>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(self.bad(key, &v, expected)),
        }
    }

    fn take_f64(
        &mut self,
        key: &str,
        min: f64,
        max: f64,
        expected: &'static str,
    ) -> Result<Option<f64>, Error> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        let parsed = match v.strip_suffix('%') {
            Some(pct) => pct.trim().parse::<f64>().map(|x| x / 100.0),
            None => v.parse::<f64>(),
        };
        match parsed {
            Ok(x) if x.is_finite() && x >= min && x <= max => Ok(Some(x)),
            _ => Err(self.bad(key, &v, expected)),
        }
    }

    fn take_bool(&mut self, key: &str) -> Result<Option<bool>, Error> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        match v.as_str() {
            "on" | "true" | "yes" | "1" => Ok(Some(true)),
            "off" | "false" | "no" | "0" => Ok(Some(false)),
            _ => Err(self.bad(key, &v, "`on` or `off`")),
        }
    }

    fn take_duration(&mut self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        parse_duration(&v)
            .map(Some)
            .ok_or_else(|| self.bad(key, &v, "a duration up to 1h like `30ms`, `0.2s`, `500us`"))
    }

    fn take_scheduler(&mut self) -> Result<SchedulerConfig, Error> {
        let d = SchedulerConfig::default();
        Ok(SchedulerConfig {
            enabled: self.take_bool("scheduler")?.unwrap_or(d.enabled),
            a: self
                .take_f64("a", 1.0, 1000.0, "a scaling coefficient in [1, 1000]")?
                .unwrap_or(d.a),
            burst_rtts: self
                .take_u32("burst_rtts", 1..=1000, "a whole number of RTTs in 1..=1000")?
                .unwrap_or(d.burst_rtts),
            opportunism: match self.take("opportunism") {
                None => d.opportunism,
                Some(v) => match v.as_str() {
                    "on" => Opportunism::On,
                    "off" | "0" => Opportunism::Off,
                    n => match n.parse::<u32>() {
                        Ok(n) if (1..=10_000).contains(&n) => Opportunism::Budget(n),
                        _ => {
                            return Err(self.bad(
                                "opportunism",
                                &v,
                                "`on`, `off` or a packet budget in 0..=10000",
                            ))
                        }
                    },
                },
            },
        })
    }

    /// Every key must have been consumed.
    fn finish(self) -> Result<(), Error> {
        match self.items.into_iter().next() {
            None => Ok(()),
            Some((key, _)) => Err(Error::UnknownParameter {
                policy: self.policy,
                key,
                accepted: self.accepted,
            }),
        }
    }
}

/// `30ms`, `0.2s`, `500us`, `100ns`, `1.5s`; at most [`MAX_DURATION`].
fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = s.split_at(split);
    let nanos_per_unit = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    let nanos = (value * nanos_per_unit).round();
    let max = MAX_DURATION.as_secs_f64() * 1e9;
    if !nanos.is_finite() || !(0.0..=max).contains(&nanos) {
        return None;
    }
    // In range [0, 3.6e12]: the conversion is exact.
    Some(Duration::from_nanos(nanos as u64))
}

/// The shortest exact unit: `30ms`, `1500us`, `7ns`.
struct DisplayDuration(Duration);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.as_nanos();
        if n == 0 {
            f.write_str("0ms")
        } else if n % 1_000_000_000 == 0 {
            write!(f, "{}s", n / 1_000_000_000)
        } else if n % 1_000_000 == 0 {
            write!(f, "{}ms", n / 1_000_000)
        } else if n % 1_000 == 0 {
            write!(f, "{}us", n / 1_000)
        } else {
            write!(f, "{n}ns")
        }
    }
}

/// Collects `key=value` items that differ from the default.
struct Items(Vec<String>);

impl Items {
    fn push_if<T: PartialEq + fmt::Display>(&mut self, key: &str, value: T, default: T) {
        if value != default {
            self.0.push(format!("{key}={value}"));
        }
    }

    fn scheduler(&mut self, s: &SchedulerConfig) {
        let d = SchedulerConfig::default();
        self.push_if("scheduler", OnOff(s.enabled), OnOff(d.enabled));
        self.push_if("a", s.a, d.a);
        self.push_if("burst_rtts", s.burst_rtts, d.burst_rtts);
        self.push_if("opportunism", s.opportunism, d.opportunism);
    }
}

#[derive(PartialEq)]
struct OnOff(bool);

impl fmt::Display for OnOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0 { "on" } else { "off" })
    }
}

#[derive(PartialEq)]
struct Dur(Duration);

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        DisplayDuration(self.0).fmt(f)
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Items(Vec::new());
        match self {
            Self::Arq => {}
            Self::Fixed { copies } => items.0.push(format!("r={copies}")),
            Self::Or3 { variant } => {
                items.push_if("variant", variant.as_str(), Or3Variant::default().as_str());
            }
            Self::Art(c) => {
                let d = ArtConfig::default();
                items.push_if("l_queue", c.l_queue, d.l_queue);
                items.push_if("r_max", c.r_max, d.r_max);
                items.push_if("level", c.level.as_str(), d.level.as_str());
                items.scheduler(&c.scheduler);
            }
            Self::ArtMab(c) => {
                let d = ArtMabConfig::default();
                items.push_if("algo", c.algo.as_str(), d.algo.as_str());
                items.push_if("eta", c.eta, d.eta);
                items.push_if("epsilon", c.epsilon, d.epsilon);
                items.push_if("ucb_c", c.ucb_c, d.ucb_c);
                items.push_if("r_max", c.r_max, d.r_max);
                items.scheduler(&c.scheduler);
            }
            Self::AutoRec(c) => {
                let d = AutoRecConfig::testbed();
                items.push_if("alpha", Dur(c.alpha), Dur(d.alpha));
                items.push_if("beta", c.beta, d.beta);
                items.push_if("gamma", c.gamma, d.gamma);
                items.push_if("d", c.d_rtts, d.d_rtts);
                items.push_if("k_max", c.k_max, d.k_max);
                items.push_if(
                    "opportunistic",
                    OnOff(c.opportunistic),
                    OnOff(d.opportunistic),
                );
                if let Some(k) = c.fixed_k {
                    items.0.push(format!("k={k}"));
                }
            }
            Self::Too(c) => {
                let d = TooConfig::default();
                items.push_if("theta", Dur(c.theta), Dur(d.theta));
                items.push_if("n", c.n, d.n);
                items.push_if("cycle", c.cycle_srtts, d.cycle_srtts);
            }
            Self::LadrRrl(c) => {
                let d = LadrConfig::default();
                items.push_if("n_high", c.n_high, d.n_high);
                items.push_if("n_low", c.n_low, d.n_low);
            }
        }
        f.write_str(self.name())?;
        if !items.0.is_empty() {
            write!(f, ":{}", items.0.join(","))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let PolicySpec::Art(art) = parse("art:l_queue=10,a=1,scheduler=off") else {
            panic!("art")
        };
        assert_eq!(art.l_queue, 10);
        assert!(!art.scheduler.enabled);
        assert_eq!(art.scheduler.a, 1.0);
        let PolicySpec::ArtMab(mab) = parse("art-mab:algo=ucb") else {
            panic!("art-mab")
        };
        assert_eq!(mab.algo, BanditAlgo::Ucb);
        assert_eq!(mab.eta, 1.01);
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
            ("art:l_queue=10,a=1,scheduler=off", "art:scheduler=off"),
            (
                "art:l_queue=20,a=2.5,burst_rtts=5,opportunism=4,r_max=6",
                "art:l_queue=20,r_max=6,a=2.5,burst_rtts=5,opportunism=4",
            ),
            (
                "art:level=copies,opportunism=off",
                "art:level=copies,opportunism=off",
            ),
            ("art:opportunism=0,level=sends", "art:opportunism=off"),
            ("art:opportunism=on", "art"),
            ("art-mab:algo=ucb", "art-mab:algo=ucb"),
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
            (
                "autorec:alpha=1.5ms,d=10,k_max=4",
                "autorec:alpha=1500us,d=10,k_max=4",
            ),
            ("too:theta=50ms,n=4", "too"),
            ("too:theta=1s,n=2,cycle=3", "too:theta=1s,n=2,cycle=3"),
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
        let e = err("too:theta");
        assert!(
            e.contains("malformed") && e.contains("theta, n, cycle"),
            "{e}"
        );
        let e = err("too:n=4,,theta=1ms");
        assert!(e.contains("malformed"), "{e}");
        let e = err("ladr-rrl:n_high=2,n_low=3");
        assert!(e.contains("n_low must not exceed n_high"), "{e}");
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
