//! Arbitrary datagrams (and validly sealed Initials) into a fresh server endpoint.
//! The body, and its input format, is `recoup_transport::fuzzing::server_datagram` (replayed on stable by
//! the crate's `tests/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| recoup_transport::fuzzing::server_datagram(data));
