//! The dual-side FEC baselines (DESIGN.md "dual-side baselines"; AutoRec §VII Figs. 19-20) on
//! the [`crate::fec::FecScheme`] interface: WebRTC FEC (2014 and today's), Hairpin and Tambur,
//! and LADR's opportunistic FEC (WebRTC FEC behind LADR §3.4's session monitors).
//! Each module holds its sizing rule as pure functions (tested by hand-computed cases) and the
//! scheme that applies it to the frames a call sends. Coding and the repair frames belong to the
//! transport's FEC extension.

pub mod config;
pub mod frames;
pub mod hairpin;
pub mod ladr;
pub mod tambur;
pub mod webrtc;

#[cfg(test)]
mod tests;

pub use config::{HairpinConfig, LadrFecConfig, TableRef, TamburConfig, WebRtcConfig};
pub use hairpin::HairpinFec;
pub use ladr::{LadrFec, OpportunisticGate};
pub use tambur::TamburFec;
pub use webrtc::{WebRtcFec, WebRtcVariant};
