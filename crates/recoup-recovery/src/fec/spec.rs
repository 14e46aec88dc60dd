//! Naming a FEC scheme: `block:k=9,m=1`, with the policies' `key=value` parameter syntax.

use std::fmt;
use std::str::FromStr;

use super::{BlockConfig, BlockFec, Fec};
use crate::error::Error;
use crate::params::{changed, Params};

/// Every built-in FEC scheme name, for error messages.
pub const FEC_NAMES: &str = "block";

/// A FEC scheme and its parameters, as given on the command line or in a scenario file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FecSpec {
    Block(BlockConfig),
}

impl FecSpec {
    /// The scheme's name as the parser accepts it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Block(_) => "block",
        }
    }

    /// A fresh scheme for one connection. `seed` drives any random choice a scheme makes.
    #[must_use]
    pub fn build(&self, _seed: u64) -> Fec {
        match self {
            Self::Block(c) => Fec::Block(BlockFec::new(*c)),
        }
    }

    /// The scenario-file form: `name = "block"`, `params = "k=9,m=1"`.
    pub fn from_name_params(name: &str, params: &str) -> Result<Self, Error> {
        let scheme: &'static str = match name.trim() {
            "block" => "block",
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
        let spec = Self::Block(p.take()?);
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
        };
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
}
