//! AutoRec's switches back to the Reinjection Controller of commit 7dd5adc reproduce that
//! controller packet for packet on the real transport in the simulator.

mod common;

use common::{run, Run, SeedGuard};
use recoup_time::Instant;
use recoup_transport::Protection;

/// FNV-1a over every sent datagram's time (ns) and content hash: equal digests mean the same
/// packets at the same times.
fn digest(log: &[(Instant, u64)]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (t, contents) in log {
        let nanos = t.saturating_duration_since(Instant::ZERO).as_nanos() as u64;
        for b in nanos
            .to_le_bytes()
            .into_iter()
            .chain(contents.to_le_bytes())
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[test]
fn the_old_controller_switches_reproduce_it_packet_for_packet() {
    const POLICY: &str = "autorec:offmode=once,count=round,t_unit=loss";
    // (rate, one-way delay, seed, datagrams sent, digest). Recorded by running this test with
    // POLICY = "autorec" on commit 7dd5adc, before the switches existed; digests re-recorded when
    // the server stopped sending disable_active_migration (it follows migrations now): with that
    // parameter sent again the run reproduces 7dd5adc's digests (0xf654_5104_d6aa_f7ab,
    // 0x7740_e512_2cc4_8af9, 0x4b5b_e614_a580_398e), so only the handshake's bytes differ. The
    // two 12 Mbit/s digests were re-recorded again when BBR's pacing rate came to be set from the
    // first RTT sample (the off-mode runs' sends move with the pacer; the on-mode 3 Mbit/s run's
    // did not); they were 13282 / 0x6196_c40f_a0af_f8f8 and 14828 / 0xeead_877b_1b56_1fe6. All
    // three were re-recorded when BBR's recovery window came to leave room for the fast
    // retransmit (draft-cardwell-iccrg-bbr §4.2.3.4), which moves every send after a loss; they
    // were 13292 / 0xa495_e70f_97ce_89ad, 14862 / 0x27cc_ec6d_5b0a_2e3c and
    // 11884 / 0x5cf0_f3b7_da81_0951.
    const OLD: [(&str, &str, u64, usize, u64); 3] = [
        ("12Mbps", "30ms", 1, 13328, 0x9ea8_f581_fa24_0ba3),
        ("12Mbps", "75ms", 2, 14664, 0x2059_4fe8_0374_6536),
        ("3Mbps", "30ms", 3, 11910, 0x1900_16d5_cc90_bd76),
    ];
    // The testbed (off-mode between frames), a long RTT (larger K), and a 3 Mbit/s path that the
    // 4 Mbit/s stream fills (on-mode: opportunistic reinjection only).
    for (rate, delay, seed, sent, old) in OLD {
        let _g = SeedGuard(seed);
        let mut r = Run::testbed(POLICY, seed, 30);
        r.down = format!("bernoulli 5% | droptail packets=100 | rate {rate} | delay {delay}");
        r.up = format!("droptail packets=100 | rate {rate} | delay {delay}");
        r.record_sends = true;
        // The digests hash packet bytes, and were recorded with AES-GCM protection.
        r.protection = Protection::Aead;
        let o = run(&r);
        assert!(o.fin && o.received == o.written, "bytes lost");
        assert!(o.stats.copy_packets > 0, "no copies: nothing was compared");
        assert_eq!(
            (o.sent_log.len(), digest(&o.sent_log)),
            (sent, old),
            "{POLICY} at {rate}, {delay} one way: the packet trace differs from 7dd5adc's"
        );
    }
}
