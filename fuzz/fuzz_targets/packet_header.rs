//! Packet headers (RFC 9000 §17): long and short headers, Version Negotiation, Retry, coalescing.
//! The body, and its input format, is `recoup_transport::fuzzing::packet_header` (replayed on stable by
//! the crate's `tests/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| recoup_transport::fuzzing::packet_header(data));
