//! AutoRec's Reinjection Controller switches: the paper's reading by default (AutoRec §V-B,
//! §VIII-C, §III-C), recoup's earlier controller as the other value of each. Each
//! is a policy parameter (`autorec:offmode=once`) through its serde name.

use serde::{Deserialize, Serialize};

/// What off-mode lets the controller reinject (`offmode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OffMode {
    /// From the head of the queue, each resent entry to the tail, for as long as off-mode lasts
    /// (AutoRec §V-B, Fig. 11): an entry can be reinjected again within one off-mode period.
    #[default]
    #[serde(rename = "repeat")]
    Repeat,
    /// Each entry at most once per off-mode period, and only entries last sent before the period
    /// began (recoup's earlier rule: so that one period would not spend all K copies of a range
    /// back to back; the paper has no such rule).
    #[serde(rename = "once")]
    Once,
}

/// What an ARQ retransmission does to A_i, the reinjections counted against K_theta (`count`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReinjectionCount {
    /// A_i counts every reinjection of the data, whatever round: the retransmission of a lost
    /// last replica brings the data back with its count, and data that had K_theta already is
    /// left to ARQ (AutoRec §VIII-C).
    #[default]
    #[serde(rename = "data")]
    PerData,
    /// A_i restarts at 0 with every ARQ round (recoup's earlier rule).
    #[serde(rename = "round")]
    PerRound,
}

/// What a T_unit sample measures (`t_unit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TUnitSample {
    /// Per lost range, from its first transmission to its first retransmission (AutoRec §III-C,
    /// §VIII-A).
    #[default]
    #[serde(rename = "rtx")]
    FirstRetransmission,
    /// Per lost packet of any kind, from its send to its loss declaration (recoup's
    /// earlier measure).
    #[serde(rename = "loss")]
    LossDeclaration,
}
