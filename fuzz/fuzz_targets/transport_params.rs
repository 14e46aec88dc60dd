//! Transport parameter decoding and validation (RFC 9000 §18).
//! The body, and its input format, is `recoup_transport::fuzzing::transport_params` (replayed on stable by
//! the crate's `tests/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| recoup_transport::fuzzing::transport_params(data));
