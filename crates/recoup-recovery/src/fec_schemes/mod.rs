//! The dual-side FEC baselines' decisions, as pure functions: how much repair each scheme sends
//! for what it has seen (DESIGN.md "dual-side baselines"; AutoRec §VII Figs. 19-20). Coding and
//! the repair frames belong to the transport's FEC extension; these only size the redundancy.

pub mod hairpin;
pub mod tambur;
pub mod webrtc;
