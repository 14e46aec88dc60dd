//! Frame decoding (RFC 9000 §19) over arbitrary decrypted payloads.
//! The body, and its input format, is `recoup_transport::fuzzing::frames` (replayed on stable by
//! the crate's `tests/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| recoup_transport::fuzzing::frames(data));
