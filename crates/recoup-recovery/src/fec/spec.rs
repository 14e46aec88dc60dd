//! Naming a FEC scheme: `block:k=9,m=1`, with the policies' `key=value` parameter syntax.

use std::fmt;
use std::str::FromStr;

use super::{BlockConfig, BlockFec, Fec};
use crate::error::Error;
use crate::fec_schemes::{
    HairpinConfig, HairpinFec, LadrFec, LadrFecConfig, TamburConfig, TamburFec, WebRtcConfig,
    WebRtcFec, WebRtcVariant,
};
use crate::params::{changed, Params};

/// Every built-in FEC scheme name, for error messages.
pub const FEC_NAMES: &str = "block, webrtc14, webrtc-now, hairpin, tambur, ladr";

/// A FEC scheme and its parameters, as given on the command line or in a scenario file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FecSpec {
    Block(BlockConfig),
    /// WebRTC FEC, 2014's or today's (AutoRec §VII's WebRTC₁₄ and WebRTC_NOW).
    WebRtc(WebRtcVariant, WebRtcConfig),
    Hairpin(HairpinConfig),
    Tambur(TamburConfig),
    /// LADR's opportunistic FEC (LADR §3.4).
    Ladr(LadrFecConfig),
}

impl FecSpec {
    /// The scheme's name as the parser accepts it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Block(_) => "block",
            Self::WebRtc(WebRtcVariant::V14, _) => "webrtc14",
            Self::WebRtc(WebRtcVariant::Now, _) => "webrtc-now",
            Self::Hairpin(_) => "hairpin",
            Self::Tambur(_) => "tambur",
            Self::Ladr(_) => "ladr",
        }
    }

    /// A fresh scheme for one connection. `seed` drives any random choice a scheme makes.
    #[must_use]
    pub fn build(&self, _seed: u64) -> Fec {
        match self {
            Self::Block(c) => Fec::Block(BlockFec::new(*c)),
            Self::WebRtc(v, c) => Fec::WebRtc(Box::new(WebRtcFec::new(*v, *c))),
            Self::Hairpin(c) => Fec::Hairpin(Box::new(HairpinFec::new(*c))),
            Self::Tambur(c) => Fec::Tambur(Box::new(TamburFec::new(*c))),
            Self::Ladr(c) => Fec::Ladr(Box::new(LadrFec::new(*c))),
        }
    }

    /// The scenario-file form: `name = "block"`, `params = "k=9,m=1"`.
    pub fn from_name_params(name: &str, params: &str) -> Result<Self, Error> {
        let scheme: &'static str = match name.trim() {
            "block" => "block",
            "webrtc14" => "webrtc14",
            "webrtc-now" => "webrtc-now",
            "hairpin" => "hairpin",
            "tambur" => "tambur",
            "ladr" => "ladr",
            "" => {
                return Err(Error::Empty {
                    accepted: FEC_NAMES,
                })
            }
            other => {
                return Err(Error::UnknownFecScheme {
                    name: other.to_owned(),
                    accepted: FEC_NAMES,
                })
            }
        };
        let mut p = Params::split(scheme, params, None)?;
        let spec = match scheme {
            "block" => Self::Block(p.take()?),
            "webrtc14" | "webrtc-now" => {
                let variant = if scheme == "webrtc14" {
                    WebRtcVariant::V14
                } else {
                    WebRtcVariant::Now
                };
                let c: WebRtcConfig = p.take()?;
                p.finish()?;
                return Ok(Self::WebRtc(variant, c.resolve(scheme)?));
            }
            "hairpin" => Self::Hairpin(p.take()?),
            "ladr" => {
                let c: LadrFecConfig = p.take()?;
                p.finish()?;
                let table = WebRtcConfig {
                    table: c.table,
                    ..WebRtcConfig::default()
                }
                .resolve(scheme)?
                .table;
                return Ok(Self::Ladr(LadrFecConfig { table, ..c }));
            }
            _ => Self::Tambur(p.take()?),
        };
        p.finish()?;
        Ok(spec)
    }
}

impl FromStr for FecSpec {
    type Err = Error;

    /// `name` or `name:params`, e.g. `block`, `block:k=4,m=2`.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.split_once(':') {
            Some((name, params)) => Self::from_name_params(name, params),
            None => Self::from_name_params(s, ""),
        }
    }
}

impl fmt::Display for FecSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // k and m are the point of a block code: always printed.
        let items = match self {
            Self::Block(c) => {
                let mut items = vec![format!("k={}", c.k), format!("m={}", c.m)];
                items.extend(changed(
                    &BlockConfig {
                        k: c.k,
                        m: c.m,
                        ..*c
                    },
                    Some(&BlockConfig {
                        k: c.k,
                        m: c.m,
                        ..BlockConfig::default()
                    }),
                ));
                items
            }
            Self::WebRtc(_, c) => changed(c, Some(&WebRtcConfig::default())),
            Self::Hairpin(c) => changed(c, Some(&HairpinConfig::default())),
            Self::Tambur(c) => changed(c, Some(&TamburConfig::default())),
            Self::Ladr(c) => changed(c, Some(&LadrFecConfig::default())),
        };
        if items.is_empty() {
            return f.write_str(self.name());
        }
        write!(f, "{}:{}", self.name(), items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        match s.parse::<FecSpec>() {
            Ok(spec) => panic!("`{s}` should not parse, got {spec:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn block_parses_and_prints_back() {
        let spec: FecSpec = "block:k=4,m=2".parse().unwrap();
        assert_eq!(
            spec,
            FecSpec::Block(BlockConfig {
                k: 4,
                m: 2,
                flush: true
            })
        );
        assert_eq!(spec.to_string(), "block:k=4,m=2");
        assert_eq!(
            "block".parse::<FecSpec>().unwrap().to_string(),
            "block:k=9,m=1"
        );
        let off: FecSpec = "block:flush=off".parse().unwrap();
        assert_eq!(off.to_string(), "block:k=9,m=1,flush=off");
        assert_eq!(off.to_string().parse::<FecSpec>().unwrap(), off);
    }

    #[test]
    fn bad_specs_name_what_is_wrong() {
        assert!(err("raptor").contains("unknown FEC scheme `raptor`"));
        assert!(err("raptor").contains("block"));
        let e = err("block:k=200,m=1");
        assert!(
            e.contains("`k`") && e.contains("200") && e.contains("1..=96"),
            "{e}"
        );
        let e = err("block:k=9,m=0");
        assert!(e.contains("`m`") && e.contains("1..=96"), "{e}");
        let e = err("block:r=2");
        assert!(
            e.contains("unknown parameter `r`") && e.contains("k, m, flush"),
            "{e}"
        );
    }

    #[test]
    fn baselines_parse_print_back_and_name_bad_values() {
        for (given, printed) in [
            ("webrtc14", "webrtc14"),
            ("webrtc-now:low_rtt=10ms", "webrtc-now:low_rtt=10ms"),
            ("hairpin", "hairpin"),
            ("hairpin:lambda=1e-7", "hairpin:lambda=0.0000001"),
            ("tambur:max_ratio=50%", "tambur:max_ratio=0.5"),
            ("tambur:max_ratio=0", "tambur:max_ratio=0"),
        ] {
            let spec: FecSpec = given.parse().unwrap_or_else(|e| panic!("{given}: {e}"));
            assert_eq!(spec.to_string(), printed, "{given}");
            assert_eq!(printed.parse::<FecSpec>().unwrap(), spec, "{printed}");
            assert_eq!(crate::fec::FecScheme::name(&spec.build(1)), spec.name());
        }
        let e = err("hairpin:lambda=2");
        assert!(e.contains("`lambda`") && e.contains("0..=1"), "{e}");
        let ablation: FecSpec = "hairpin:rounds=arrival,max_rounds=2,cost=share,loss=max"
            .parse()
            .unwrap();
        assert_eq!(
            ablation.to_string(),
            "hairpin:rounds=arrival,max_rounds=2,cost=share,loss=max"
        );
        let e = err("hairpin:max_rounds=0");
        assert!(e.contains("`max_rounds`") && e.contains("1..=16"), "{e}");
        let e = err("hairpin:rounds=three");
        assert!(e.contains("`rounds`") && e.contains("three"), "{e}");
        let e = err("tambur:ratio=0.3");
        assert!(
            e.contains("unknown parameter `ratio`") && e.contains("max_ratio"),
            "{e}"
        );
        let e = err("webrtc14:table=/nonexistent/table.txt");
        assert!(e.contains("/nonexistent/table.txt"), "{e}");
        let e = err("webrtc-now:low_rtt=200ms");
        assert!(e.contains("low_rtt") && e.contains("high_rtt"), "{e}");
        assert!(err("webrtc").contains("webrtc14, webrtc-now, hairpin, tambur"));
    }

    #[test]
    fn ladr_thresholds_out_of_range_name_their_key() {
        let spec: FecSpec = "ladr:k=2,t_hold=1s,t_q=20ms".parse().expect("valid");
        assert_eq!(spec.name(), "ladr");
        let e = err("ladr:k=-1");
        assert!(e.contains("`k`") && e.contains("0..=1000"), "{e}");
        let e = err("ladr:t_hold=soon");
        assert!(e.contains("`t_hold`"), "{e}");
        let e = err("ladr:t_q=-5ms");
        assert!(e.contains("`t_q`"), "{e}");
        let e = err("ladr:n_high=4");
        assert!(e.contains("unknown parameter `n_high`"), "{e}");
    }
}
