//! The real QUIC transport through the simulator: every policy delivers a live stream
//! byte-exact through a lossy path.

mod common;

use common::{run, Run, SeedGuard};

#[test]
fn every_policy_delivers_every_byte_through_a_lossy_path() {
    let _g = SeedGuard(7);
    for policy in [
        "arq", "fixed:1", "autorec", "too", "draft-wu", "or3", "art", "art-mab", "ladr-rrl",
    ] {
        let o = run(&Run::testbed(policy, 7, 10));
        assert!(
            o.fin,
            "{policy}: stream did not finish: {} of {}",
            o.received, o.written
        );
        assert_eq!(o.received, o.written, "{policy}: bytes lost");
        assert_eq!(o.corrupt, 0, "{policy}: bytes out of place");
        assert!(
            !o.recovered.is_empty(),
            "{policy}: 5% loss but no recovery recorded"
        );
    }
}
