//! Coalesced-packet splitting and header parsing (RFC 9000 §12.2, §17) on arbitrary datagrams.
#![no_main]

use libfuzzer_sys::fuzz_target;
use recoup_transport::packet::{
    decode_pn, read_truncated_pn, CoalescedPackets, FirstByte, VersionInvariants,
};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the local CID length, as an endpoint configures it.
    let Some((&cid_len, datagram)) = data.split_first() else {
        return;
    };
    let mut total = 0;
    for packet in CoalescedPackets::new(datagram, usize::from(cid_len % 21)) {
        let Ok(p) = packet else { break };
        total += p.packet_len();
        assert!(total <= datagram.len());
        let _ = p.versions().count();
        let fb = FirstByte(p.first_byte);
        let _ = fb.check_reserved_bits();
        if let Some(pn_offset) = p.pn_offset {
            if let Ok(pn) = read_truncated_pn(p.packet, pn_offset, fb.pn_len()) {
                let _ = decode_pn(pn, fb.pn_len(), Some(u64::from(p.first_byte) << 24));
            }
        }
    }
    let _ = VersionInvariants::parse(datagram);
});
