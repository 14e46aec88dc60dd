//! AutoRec's Reinjection Controller switches: the paper's reading by default (AutoRec §V-B,
//! §VIII-C, §III-C), the controller recoup had before issue 12 as the other value of each.

/// A policy parameter with a fixed set of named values (`offmode=once`).
pub trait Switch: Copy + PartialEq + 'static {
    /// Every value with its name; the first is the default.
    const VALUES: &'static [(&'static str, Self)];
    /// The accepted names, for error messages.
    const EXPECTED: &'static str;

    #[must_use]
    fn from_name(name: &str) -> Option<Self> {
        Self::VALUES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
    }

    #[must_use]
    fn name(self) -> &'static str {
        Self::VALUES
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("", |&(n, _)| n)
    }
}

/// What off-mode lets the controller reinject (`offmode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OffMode {
    /// From the head of the queue, each resent entry to the tail, for as long as off-mode lasts
    /// (AutoRec §V-B, Fig. 11): an entry can be reinjected again within one off-mode period.
    #[default]
    Repeat,
    /// Each entry at most once per off-mode period, and only entries last sent before the period
    /// began (recoup before issue 12: so that one period would not spend all K copies of a range
    /// back to back; the paper has no such rule).
    Once,
}

impl Switch for OffMode {
    const VALUES: &'static [(&'static str, Self)] =
        &[("repeat", Self::Repeat), ("once", Self::Once)];
    const EXPECTED: &'static str =
        "`repeat` (AutoRec §V-B) or `once` (one reinjection per entry per off-mode period)";
}

/// What an ARQ retransmission does to A_i, the reinjections counted against K_theta (`count`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReinjectionCount {
    /// A_i counts every reinjection of the data, whatever round: the retransmission of a lost
    /// last replica brings the data back with its count, and data that had K_theta already is
    /// left to ARQ (AutoRec §VIII-C).
    #[default]
    PerData,
    /// A_i restarts at 0 with every ARQ round (recoup before issue 12).
    PerRound,
}

impl Switch for ReinjectionCount {
    const VALUES: &'static [(&'static str, Self)] =
        &[("data", Self::PerData), ("round", Self::PerRound)];
    const EXPECTED: &'static str = "`data` (A_i over the data's lifetime, AutoRec §VIII-C) or `round` (A_i restarts with each ARQ round)";
}

/// What a T_unit sample measures (`t_unit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TUnitSample {
    /// Per lost range, from its first transmission to its first retransmission (AutoRec §III-C,
    /// §VIII-A).
    #[default]
    FirstRetransmission,
    /// Per lost packet of any kind, from its send to its loss declaration (recoup before
    /// issue 12).
    LossDeclaration,
}

impl Switch for TUnitSample {
    const VALUES: &'static [(&'static str, Self)] = &[
        ("rtx", Self::FirstRetransmission),
        ("loss", Self::LossDeclaration),
    ];
    const EXPECTED: &'static str = "`rtx` (first send to first retransmission, AutoRec §III-C) or `loss` (every lost packet's send to its loss declaration)";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T: Switch + std::fmt::Debug + Default>() {
        assert_eq!(
            T::VALUES[0].1,
            T::default(),
            "the first value is the default"
        );
        for &(name, v) in T::VALUES {
            assert_eq!(T::from_name(name), Some(v));
            assert_eq!(v.name(), name);
            assert!(T::EXPECTED.contains(&format!("`{name}`")), "{name}");
        }
        assert_eq!(T::from_name("sometimes"), None);
    }

    #[test]
    fn names_round_trip_and_the_first_is_the_default() {
        round_trips::<OffMode>();
        round_trips::<ReinjectionCount>();
        round_trips::<TUnitSample>();
    }
}
