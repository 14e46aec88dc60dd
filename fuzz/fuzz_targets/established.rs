//! Arbitrary 1-RTT payloads into an established connection, either side.
//! The body, and its input format, is `recoup_transport::fuzzing::established` (replayed on stable by
//! the crate's `tests/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| recoup_transport::fuzzing::established(data));
