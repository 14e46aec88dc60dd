//! Frame decoding (RFC 9000 §19) over arbitrary decrypted payloads; what decodes must re-encode
//! to the size it reports.
#![no_main]

use libfuzzer_sys::fuzz_target;
use recoup_transport::frame::{Frame, Frames};

fuzz_target!(|payload: &[u8]| {
    for frame in Frames::new(payload) {
        let Ok(frame) = frame else { break };
        if let Frame::Ack(ack) = &frame {
            let mut prev: Option<u64> = None;
            for r in ack.ranges() {
                assert!(r.start() <= r.end());
                if let Some(p) = prev {
                    assert!(*r.end() + 1 < p);
                }
                prev = Some(*r.start());
            }
        }
        let mut buf = Vec::new();
        frame.encode(&mut buf);
        assert_eq!(buf.len(), frame.encoded_len());
    }
});
