//! The FEC baselines' parameters (`webrtc14:...`, `webrtc-now:...`, `hairpin:lambda=..`,
//! `tambur:max_ratio=..`), in the policies' `key=value` syntax.

use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::hairpin::{LAMBDA_DEFAULT, MAX_ROUNDS};
use super::tambur::{MAX_RATIO_DEFAULT, TAU_FRAMES};
use super::webrtc::{default_table_path, HybridThresholds, RateTable, TABLE_FILE};
use crate::error::Error;
use crate::params::{duration, in_range};

/// WebRTC's rate table as a parameter: the path it was given by (empty: the default location)
/// and the table, loaded when the parameter is parsed so a bad path is an error there.
#[derive(Clone, Copy, Debug, Default)]
pub struct TableRef {
    path: &'static str,
    table: Option<&'static RateTable>,
}

impl PartialEq for TableRef {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for TableRef {}

impl TableRef {
    /// The table; `None` only before `WebRtcConfig::resolve` looked it up.
    #[must_use]
    pub fn table(&self) -> Option<&'static RateTable> {
        self.table
    }

    /// Loads `path` once per process: tables are immutable and shared by every connection of a
    /// run, so each distinct path is read and kept once (a bounded, intended leak).
    fn load(path: &str) -> Result<Self, Error> {
        static TABLES: OnceLock<Mutex<Vec<TableRef>>> = OnceLock::new();
        let cache = TABLES.get_or_init(|| Mutex::new(Vec::new()));
        let mut cache = cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hit) = cache.iter().find(|t| t.path == path) {
            return Ok(*hit);
        }
        let table = RateTable::load(Path::new(path))?;
        let entry = Self {
            path: Box::leak(path.to_owned().into_boxed_str()),
            table: Some(Box::leak(Box::new(table))),
        };
        cache.push(entry);
        Ok(entry)
    }
}

impl Serialize for TableRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.path)
    }
}

impl<'de> Deserialize<'de> for TableRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let path = String::deserialize(d)?;
        Self::load(&path).map_err(serde::de::Error::custom)
    }
}

/// `webrtc14:` / `webrtc-now:` parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebRtcConfig {
    /// Path of WebRTC's FEC rate table (default: `shared/data/webrtc_fec_rate_table.txt` in the
    /// nearest ancestor of the working directory that has it).
    pub table: TableRef,
    /// Below this RTT NACK alone recovers in time: no FEC on delta frames.
    #[serde(with = "duration")]
    pub low_rtt: Duration,
    /// From this RTT on FEC is whole (between, `webrtc14` scales it down).
    #[serde(with = "duration")]
    pub high_rtt: Duration,
}

impl Default for WebRtcConfig {
    fn default() -> Self {
        let h = HybridThresholds::default();
        Self {
            table: TableRef::default(),
            low_rtt: h.low,
            high_rtt: h.high,
        }
    }
}

impl WebRtcConfig {
    /// Loads the default table when none was named.
    pub(crate) fn resolve(mut self, scheme: &'static str) -> Result<Self, Error> {
        if self.table.table.is_none() {
            let path = default_table_path().ok_or_else(|| Error::RateTable {
                path: format!("shared/data/{TABLE_FILE}"),
                detail: format!(
                    "not found in any ancestor of the working directory; give `{scheme}:table=PATH`"
                ),
            })?;
            let loaded = TableRef::load(&path.to_string_lossy())?;
            self.table = TableRef {
                path: "",
                table: loaded.table,
            };
        }
        if self.low_rtt > self.high_rtt {
            return Err(Error::Inconsistent {
                policy: scheme,
                detail: format!(
                    "low_rtt ({:?}) is above high_rtt ({:?})",
                    self.low_rtt, self.high_rtt
                ),
            });
        }
        Ok(self)
    }

    #[must_use]
    pub fn hybrid(&self) -> HybridThresholds {
        HybridThresholds {
            low: self.low_rtt,
            high: self.high_rtt,
        }
    }
}

/// `hairpin:` parameters. `lambda` is the scheme's; the others choose between readings of its
/// model for the ablation of EXPERIMENTS.md (Fig. 19, "Hairpin: why the smaller effect").
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HairpinConfig {
    /// Weight of bandwidth against deadline misses: 1e-1 (LC), 1e-4 (default), 1e-7 (HC).
    #[serde(deserialize_with = "lambda")]
    pub lambda: f64,
    /// How the rounds left before a frame's deadline are counted.
    pub rounds: RoundCount,
    /// Most rounds a plan looks ahead (1: all of a frame's repair in the round being sent).
    #[serde(deserialize_with = "max_rounds")]
    pub max_rounds: u32,
    /// What the bandwidth term of the objective counts.
    pub cost: CostTerm,
    /// Which loss rate the plan assumes for every round.
    pub loss: LossEstimate,
}

/// How [`HairpinConfig::rounds`] counts the rounds left (`hairpin::rounds_left`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoundCount {
    /// As the Hairpin authors' simulator counts them (`hkust-spark/ns3-sparkrtc`,
    /// `HairpinPolicy::GetPolicyFECParam`): `floor((left - rtt') / rtt')` rounds in all, the one
    /// being sent included and at least it, with `rtt' = srtt + rttvar` (their `rttSd` is the
    /// same RFC 6298 mean deviation). Theirs also takes the frame's own sending time off the
    /// first round's `left`, which a scheme here does not see.
    #[default]
    Feedback,
    /// Ours before the ablation: a round counts if its packets can still arrive,
    /// `rtt/2 + k·rtt <= left`, as if a loss were known exactly one RTT after its send. Loss
    /// detection takes longer (RFC 9002 §6.1 thresholds, ack delay), so at the retransmission
    /// round this counts a round that arrives after the deadline (EXPERIMENTS.md, Fig. 19).
    Arrival,
}

/// What [`HairpinConfig::cost`] charges for bandwidth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CostTerm {
    /// Expected packets sent per media packet of the frame (linear in the packets sent).
    #[default]
    Packets,
    /// The redundant share of the packets sent, `extra / (media + extra)`, as the reference
    /// simulator's objective (`QoE = -miss + lambda·(1 - share)`) and our bandwidth-cost metric
    /// count it.
    Share,
}

/// Which loss rate [`HairpinConfig::loss`] feeds the plan (`frames::LossFilter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LossEstimate {
    /// Packets lost over packets settled in the last ten seconds.
    #[default]
    Mean,
    /// The worst one-second loss rate of the last ten (WebRTC's filter).
    Max,
}

// Parsing keeps lambda finite and in range, so equality is reflexive.
impl Eq for HairpinConfig {}

impl Default for HairpinConfig {
    fn default() -> Self {
        Self {
            lambda: LAMBDA_DEFAULT,
            rounds: RoundCount::default(),
            max_rounds: MAX_ROUNDS,
            cost: CostTerm::default(),
            loss: LossEstimate::default(),
        }
    }
}

fn lambda<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 0.0..=1.0, "a weight in 0..=1 (e.g. 1e-4)")
}

fn max_rounds<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1..=MAX_ROUNDS, "a round count in 1..=16")
}

/// `tambur:` parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TamburConfig {
    /// Most parity per frame, a share of the frame's packets: 0.25 (default), 0.5 (HC),
    /// 0 (LC: one repair packet per frame).
    #[serde(deserialize_with = "ratio")]
    pub max_ratio: f64,
    /// Frames the streaming code spans before the current one (decoding delay in frames).
    #[serde(deserialize_with = "tau")]
    pub tau: u32,
    /// Past frames whose losses predict the next frame's parity.
    #[serde(deserialize_with = "window")]
    pub window: u32,
}

// Parsing keeps max_ratio finite and in range, so equality is reflexive.
impl Eq for TamburConfig {}

impl Default for TamburConfig {
    fn default() -> Self {
        Self {
            max_ratio: MAX_RATIO_DEFAULT,
            tau: TAU_FRAMES,
            // One second of a 60 fps call.
            window: 60,
        }
    }
}

fn ratio<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 0.0..=1.0, "a share in 0..=1 (or 0%..=100%)")
}

fn tau<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 0..=15, "a frame count in 0..=15")
}

fn window<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    in_range(d, 1..=10_000, "a frame count in 1..=10000")
}

/// `ladr:` parameters (LADR §3.4's opportunistic FEC).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LadrFecConfig {
    /// Procedure #1 switches FEC on when sum_long > k · sum_short.
    #[serde(deserialize_with = "scaling")]
    pub k: f64,
    /// FEC goes off after this long without a loss (#1) or with queuing below t_q (#2).
    #[serde(with = "duration")]
    pub t_hold: Duration,
    /// Procedure #2's queuing-delay threshold.
    #[serde(with = "duration")]
    pub t_q: Duration,
    /// WebRTC's rate table for the repair it sends when on.
    pub table: TableRef,
}

// Parsing keeps k finite, so equality is reflexive.
impl Eq for LadrFecConfig {}

impl Default for LadrFecConfig {
    /// k = 1, t_hold = 400 ms, t_q = 50 ms (LADR §3.4).
    fn default() -> Self {
        Self {
            k: 1.0,
            t_hold: Duration::from_millis(400),
            t_q: Duration::from_millis(50),
            table: TableRef::default(),
        }
    }
}

fn scaling<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    in_range(d, 0.0..=1000.0, "a scaling factor in 0..=1000")
}
