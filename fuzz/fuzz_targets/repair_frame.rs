//! recoup's REPAIR frame (docs/FEC.md): parser and FEC receiver.
//! The body, and its input format, is `recoup_transport::fuzzing::repair_frame` (replayed on stable by
//! the crate's `tests/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| recoup_transport::fuzzing::repair_frame(data));
