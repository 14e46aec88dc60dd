//! Transport parameter decoding and validation (RFC 9000 §18); what decodes must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use recoup_transport::transport_params::{Side, TransportParameters};

fuzz_target!(|data: &[u8]| {
    for side in [Side::Client, Side::Server] {
        if let Ok(params) = TransportParameters::decode(data, side) {
            let mut buf = Vec::new();
            params.encode(&mut buf);
            assert_eq!(TransportParameters::decode(&buf, side).ok(), Some(params));
        }
    }
});
