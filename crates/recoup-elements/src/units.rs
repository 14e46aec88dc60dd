//! Parsers for the quantities in scenario strings: rates, durations, netem percentages.
//! Each returns a short reason on failure; callers wrap it into [`crate::Error::Spec`]
//! naming the bad token.

use std::time::Duration;

/// A probability stored the way netem stores it: a `u32` scaled so that `u32::MAX` is 100 %
/// (`set_percent` in iproute2's q_netem.c rounds `fraction * UINT32_MAX` to nearest-even).
/// Comparing `u32` draws against it reproduces netem's decisions bit for bit in distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Prob(pub u32);

impl Prob {
    /// 0 %.
    pub const ZERO: Self = Self(0);
    /// 100 %.
    pub const ONE: Self = Self(u32::MAX);

    /// From a fraction in `[0, 1]` (clamped).
    #[must_use]
    pub fn from_fraction(f: f64) -> Self {
        let scaled = (f.clamp(0.0, 1.0) * f64::from(u32::MAX)).round_ties_even();
        // In range by the clamp above.
        Self(scaled as u32)
    }

    /// As a fraction in `[0, 1]`.
    #[must_use]
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / f64::from(u32::MAX)
    }

    /// `1 - self`, exactly as tc computes `UINT32_MAX - value` for gemodel's `1-h`.
    #[must_use]
    pub fn complement(self) -> Self {
        Self(u32::MAX - self.0)
    }

    /// Whether a `u32` draw picks this event, as sch_netem.c decides `corrupt` and `duplicate`
    /// (`q->p && q->p >= get_crandom(...)`): never at 0 %, always at 100 %.
    #[must_use]
    pub fn picks(self, draw: u32) -> bool {
        self.0 != 0 && self.0 >= draw
    }
}

/// A netem percentage: a decimal number with an optional `%`, always meaning percent (tc's
/// `parse_percent`: "5" and "5%" are both 5 %), between 0 and 100.
pub fn parse_percent(token: &str) -> Result<f64, String> {
    let number = token.strip_suffix('%').unwrap_or(token);
    let value: f64 = number
        .parse()
        .map_err(|_| "not a percentage (expected e.g. `1%` or `0.1%`)".to_owned())?;
    if !value.is_finite() || !(0.0..=100.0).contains(&value) {
        return Err("percentage must be between 0 and 100".to_owned());
    }
    Ok(value / 100.0)
}

/// A netem percentage token of scenario string `input`, as a [`Prob`]; the error names the token.
pub(crate) fn prob_in(input: &str, token: &str) -> Result<Prob, crate::Error> {
    parse_percent(token)
        .map(Prob::from_fraction)
        .map_err(|d| crate::Error::spec(input, token, d))
}

fn split_number(token: &str) -> Result<(f64, &str), String> {
    let end = token
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(token.len());
    let (num, unit) = token.split_at(end);
    let value: f64 = num
        .parse()
        .map_err(|_| "expected a number followed by a unit".to_owned())?;
    if !value.is_finite() || value < 0.0 {
        return Err("expected a non-negative number".to_owned());
    }
    Ok((value, unit))
}

/// A bit rate such as `12Mbps`, `500kbps`, `1.5Gbit`, `64000bps`, in bits per second.
/// Units are bits (unlike tc, where `mbps` means megabytes); a rate of zero is rejected.
pub fn parse_rate(token: &str) -> Result<u64, String> {
    let (value, unit) = split_number(token)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "bps" | "bit" | "b/s" => 1e0,
        "kbps" | "kbit" | "kb/s" => 1e3,
        "mbps" | "mbit" | "mb/s" => 1e6,
        "gbps" | "gbit" | "gb/s" => 1e9,
        "" => return Err("missing unit (bps, kbps, Mbps, Gbps)".to_owned()),
        _ => {
            return Err(format!(
                "unknown rate unit `{unit}` (bps, kbps, Mbps, Gbps)"
            ))
        }
    };
    let bps = (value * mult).round();
    if !(1.0..=1e12).contains(&bps) {
        return Err("rate must be between 1 bps and 1 Tbps".to_owned());
    }
    Ok(bps as u64)
}

/// A duration such as `60ms`, `1.5s`, `250us`, `100ns`.
pub fn parse_duration(token: &str) -> Result<Duration, String> {
    let (value, unit) = split_number(token)?;
    let nanos_per = match unit {
        "ns" => 1e0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" => return Err("missing unit (ns, us, ms, s)".to_owned()),
        _ => return Err(format!("unknown duration unit `{unit}` (ns, us, ms, s)")),
    };
    let nanos = (value * nanos_per).round();
    // About 292 years: far beyond any simulation, far below u64 overflow.
    if nanos > 9.2e18 {
        return Err("duration too large".to_owned());
    }
    Ok(Duration::from_nanos(nanos as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_follow_tc() {
        assert_eq!(parse_percent("5%"), Ok(0.05));
        assert_eq!(parse_percent("5"), Ok(0.05));
        assert_eq!(parse_percent("0.1%"), Ok(0.001));
        assert!(parse_percent("101%").is_err());
        assert!(parse_percent("-1%").is_err());
        assert!(parse_percent("5%%").is_err());
        assert!(parse_percent("abc").is_err());
        assert!(parse_percent("nan").is_err());
        assert_eq!(Prob::from_fraction(1.0), Prob::ONE);
        assert_eq!(Prob::from_fraction(0.0), Prob::ZERO);
        assert_eq!(Prob::from_fraction(0.5).0, 2_147_483_648);
        assert!(!Prob::ZERO.picks(0), "0 % never picks, even a zero draw");
        assert!(Prob::ONE.picks(u32::MAX));
        assert!(Prob(7).picks(7) && !Prob(7).picks(8));
    }

    #[test]
    fn rates_and_durations() {
        assert_eq!(parse_rate("12Mbps"), Ok(12_000_000));
        assert_eq!(parse_rate("1.5Gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("500kbps"), Ok(500_000));
        assert!(parse_rate("12").is_err());
        assert!(parse_rate("0Mbps").is_err());
        assert!(parse_rate("12furlongs").is_err());
        assert_eq!(parse_duration("60ms"), Ok(Duration::from_millis(60)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("60").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("1e30s").is_err());
    }
}
