//! BBRv3's tunable parameters, given as `bbr3:key=value,...` (`--cc`, a scenario's `cc`).
//!
//! The draft fixes them as constants (§2.8); Linux exposes the same three as module parameters
//! of `tcp_bbr` (`bbr_loss_thresh`, `bbr_beta`, `bbr_inflight_headroom`), which is where
//! operators tune them. Each is a share, so each has a range outside which BBRv3's rules stop
//! meaning anything; a value outside it is refused with its key named.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::RangeInclusive;

use crate::error::Error;

/// BBRv3's loss response (draft-ietf-ccwg-bbr-06 §2.8).
#[derive(Clone, Copy, Debug)]
pub struct Bbr3Params {
    /// §2.8 LossThresh: the loss rate per round a bandwidth probe tolerates (0.02).
    pub loss_thresh: f64,
    /// §2.8 Beta: the multiplicative decrease per round with loss, CUBIC's 0.7.
    pub beta: f64,
    /// §2.8 Headroom: the share of `inflight_longterm` left free for other flows (0.15).
    pub headroom: f64,
}

impl Default for Bbr3Params {
    fn default() -> Self {
        Self {
            loss_thresh: 0.02,
            beta: 0.7,
            headroom: 0.15,
        }
    }
}

/// Each key, its accepted range and what the range means. `loss_thresh` stops below 1 because
/// `InflightAtLoss` divides by 1 - LossThresh; `beta` above 0 because a decrease to nothing
/// leaves no flight to probe from.
const KEYS: [(&str, RangeInclusive<f64>, &str); 3] = [
    ("loss_thresh", 0.001..=0.5, "a share in [0.001, 0.5]"),
    ("beta", 0.1..=1.0, "a share in [0.1, 1]"),
    ("headroom", 0.0..=0.9, "a share in [0, 0.9]"),
];

impl Bbr3Params {
    fn field(&mut self, key: &str) -> Option<&mut f64> {
        match key {
            "loss_thresh" => Some(&mut self.loss_thresh),
            "beta" => Some(&mut self.beta),
            "headroom" => Some(&mut self.headroom),
            _ => None,
        }
    }

    fn values(&self) -> [f64; 3] {
        [self.loss_thresh, self.beta, self.headroom]
    }

    /// Parses the `key=value,...` after `bbr3:`; values are decimals or percentages (`2%`).
    ///
    /// # Errors
    /// An item without `=`, an unknown or repeated key, or a value outside its range, each
    /// naming the item and listing what is accepted.
    pub fn parse(list: &str) -> Result<Self, Error> {
        let invalid = |detail: String| Error::invalid("congestion controller", detail);
        let keys = KEYS.map(|(k, _, _)| k).join(", ");
        let mut params = Self::default();
        let mut seen: Vec<&str> = Vec::new();
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(invalid(format!(
                    "bbr3 parameter `{item}` is not `key=value`; accepted keys: {keys}"
                )));
            };
            let (key, value) = (key.trim(), value.trim());
            let Some((name, range, expected)) = KEYS.iter().find(|(k, _, _)| *k == key) else {
                return Err(invalid(format!(
                    "unknown bbr3 parameter `{key}`; accepted keys: {keys}"
                )));
            };
            if seen.contains(name) {
                return Err(invalid(format!("bbr3 parameter `{key}` given twice")));
            }
            seen.push(name);
            let parsed = match value.strip_suffix('%') {
                Some(pct) => pct.trim().parse::<f64>().map(|v| v / 100.0),
                None => value.parse::<f64>(),
            };
            match parsed {
                Ok(v) if range.contains(&v) => {
                    if let Some(field) = params.field(name) {
                        *field = v;
                    }
                }
                _ => {
                    return Err(invalid(format!(
                        "bad value `{value}` for bbr3 parameter `{key}`: expected {expected}"
                    )))
                }
            }
        }
        Ok(params)
    }
}

/// `key=value` for each parameter that differs from the default, comma-separated (empty for
/// the defaults), so `bbr3:<this>` parses back to the same parameters.
impl fmt::Display for Bbr3Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = Self::default().values();
        let mut sep = "";
        for ((key, _, _), (value, base)) in KEYS.iter().zip(self.values().into_iter().zip(default))
        {
            if value.to_bits() != base.to_bits() {
                write!(f, "{sep}{key}={value}")?;
                sep = ",";
            }
        }
        Ok(())
    }
}

// Parsed values are finite, so comparing bit patterns is equality (and agrees with `Hash`).
impl PartialEq for Bbr3Params {
    fn eq(&self, other: &Self) -> bool {
        self.values().map(f64::to_bits) == other.values().map(f64::to_bits)
    }
}

impl Eq for Bbr3Params {}

impl Hash for Bbr3Params {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.values().map(f64::to_bits).hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_percentages_and_prints_back_what_changed() {
        let p = Bbr3Params::parse("loss_thresh=5%, beta=0.8").expect("valid");
        assert!((p.loss_thresh - 0.05).abs() < 1e-12);
        assert!((p.beta - 0.8).abs() < 1e-12);
        assert!((p.headroom - 0.15).abs() < 1e-12);
        assert_eq!(p.to_string(), "loss_thresh=0.05,beta=0.8");
        assert_eq!(Bbr3Params::parse(&p.to_string()).ok(), Some(p));
        assert_eq!(Bbr3Params::default().to_string(), "");
    }

    #[test]
    fn bad_items_name_the_key_and_what_is_accepted() {
        for (list, needle) in [
            ("beta=0", "`beta`: expected a share in [0.1, 1]"),
            (
                "loss_thresh=1",
                "`loss_thresh`: expected a share in [0.001, 0.5]",
            ),
            ("headroom=x", "`headroom`: expected a share in [0, 0.9]"),
            ("headroom=NaN", "`headroom`"),
            (
                "gain=2",
                "unknown bbr3 parameter `gain`; accepted keys: loss_thresh, beta, headroom",
            ),
            ("beta", "`beta` is not `key=value`"),
            ("beta=0.5,beta=0.6", "`beta` given twice"),
        ] {
            let err = Bbr3Params::parse(list).expect_err(list).to_string();
            assert!(err.contains(needle), "{list}: {err}");
        }
    }
}
