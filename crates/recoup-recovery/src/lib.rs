//! Loss-recovery policies for recoup: pure logic over transport-neutral events.
//!
//! The contract with the transport is in [`api`], and the lineage of lost data that a host (the
//! transport, or `recoup analyze` replaying a trace) keeps for it in [`lineage`], with what the
//! host must call and when. DESIGN.md "Policies" lists each policy's formulas and defaults.
//! Policies are named by a [`PolicySpec`] (`"autorec:alpha=30ms"`) and built into a [`Policy`].

// DESIGN.md principle 1: time is injected; clippy.toml bans the clock reads, and this makes
// the ban an error even without `-D warnings`.
#![deny(clippy::disallowed_methods)]

pub mod api;
mod arq;
mod art;
mod autorec;
mod autorec_modes;
mod bandit;
mod burst;
mod config;
mod crest;
pub mod dqn;
mod draft_wu;
mod error;
pub mod fec;
pub mod fec_schemes;
mod fixed;
mod interval;
mod ladr;
pub mod lineage;
mod or3;
mod params;
mod policy;
pub mod qnet;
mod range_set;
pub mod redundancy;
mod reinjection;
#[cfg(test)]
mod testutil;
mod too;

pub use api::{
    data_send_key, packet_key, CopyRequest, DataRange, LossId, LossTrigger, LostData, PacketInfo,
    RecoveryPolicy, RttSample, SendContext, SendKind, SendState, SentRange,
};
pub use arq::Arq;
pub use art::{adapt as art_adapt, Art, OutcomeWindow};
pub use autorec::AutoRec;
pub use autorec_modes::{OffMode, ReinjectionCount, TUnitSample};
pub use config::{
    ArtConfig, ArtDqnConfig, ArtMabConfig, ArtReading, AutoRecConfig, BanditAlgo, CrestConfig,
    DraftWuConfig, LadrConfig, LevelCounts, Opportunism, Or3Variant, PolicySpec, SchedulerConfig,
    TooConfig, POLICY_NAMES,
};
pub use crest::Crest;
pub use draft_wu::DraftWu;
pub use error::Error;
pub use fec::{Fec, FecScheme, FecSpec};
pub use fixed::Fixed;
pub use ladr::LadrRrl;
pub use lineage::{Lineages, Recovered, SendLoss};
pub use or3::Or3;
pub use policy::Policy;
pub use range_set::RangeSet;
pub use reinjection::{OffModePeriod, QueueEntry, ReinjectionQueue};
pub use too::{e_waiting, Too};
