//! Loss-recovery policies for recoup: pure logic over transport-neutral events.
//!
//! The contract with the transport is in [`api`]; DESIGN.md "Policies" lists each policy's
//! formulas and defaults.

pub mod api;
mod arq;
mod fixed;

pub use api::{
    CopyRequest, DataRange, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample,
    SendContext, SendKind, SendState, SentRange,
};
pub use arq::Arq;
pub use fixed::Fixed;
