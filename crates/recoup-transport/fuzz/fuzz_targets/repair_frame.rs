//! recoup's REPAIR frame (docs/FEC.md) over arbitrary bodies: the parser either fails with
//! FRAME_ENCODING_ERROR or yields a frame that re-encodes to its size, and a receiver fed that
//! frame (after some source symbols) fails only with PROTOCOL_VIOLATION, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use recoup_transport::fec::FecReceiver;
use recoup_transport::frame::{Frame, FrameType, Frames};
use recoup_transport::TransportErrorCode;

fuzz_target!(|input: (u16, Vec<u8>)| {
    let (carrier, body) = input;
    let mut payload = vec![0x3f, 0x5e, 0xc0, 0xde];
    payload.extend_from_slice(&body);
    let mut receiver = FecReceiver::default();
    for pn in 0..8u64 {
        receiver.on_source(pn * 3, vec![pn as u8; 40 + pn as usize * 100]);
    }
    for frame in Frames::new(&payload) {
        match frame {
            Err(e) => {
                assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR);
                assert_eq!(e.frame_type, Some(FrameType::REPAIR.0));
                break;
            }
            Ok(Frame::Repair(r)) => {
                let mut buf = Vec::new();
                Frame::Repair(r).encode(&mut buf);
                assert_eq!(buf.len(), Frame::Repair(r).encoded_len());
                if let Err(e) = receiver.on_repair(u64::from(carrier), &r) {
                    assert_eq!(e.code, TransportErrorCode::PROTOCOL_VIOLATION);
                }
            }
            Ok(_) => {}
        }
    }
});
