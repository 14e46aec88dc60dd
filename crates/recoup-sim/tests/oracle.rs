//! The oracle on the real transport in the simulator.

use recoup_sim::run::run_one;
use recoup_sim::scenario::{load_str, Scenario};
use recoup_sim::Error;

fn scenario(loss: &str, rtt: &str) -> Scenario {
    let text = format!(
        r#"
        name = "oracle"
        duration = "15s"
        [path]
        rtt = "{rtt}"
        rate = "12Mbps"
        queue = "droptail packets=100"
        loss = "{loss}"
        [app]
        kind = "live"
        bitrate = "4Mbps"
        [[policy]]
        name = "arq"
        [[policy]]
        name = "oracle"
        "#
    );
    load_str(&text, "oracle.toml", None, "oracle")
        .expect("scenario")
        .remove(0)
}

#[test]
fn the_oracle_never_loses_data_and_recovers_within_one_extra_round() {
    // Seeds 1-2 of each setting (the seed of each run is printed).
    let mut doomed_retransmissions = 0;
    for (loss, rtt) in [("crn bernoulli 10%", "60ms"), ("crn bernoulli 5%", "200ms")] {
        let sc = scenario(loss, rtt);
        for seed in 1..=2u64 {
            eprintln!("seed {seed}, {loss}, rtt {rtt}");
            let rows: Vec<_> = sc
                .policies
                .iter()
                .map(|p| run_one(&sc, p, seed).expect("run"))
                .collect();
            for r in &rows {
                eprintln!(
                    "  {}: lost {} multi {} lat {:?} multi lat {:?} cost {:?} n_max {}",
                    r.policy,
                    r.lost_ranges,
                    r.lost_ranges_multi,
                    r.recovery_latency_ms,
                    r.recovery_latency_multi_ms,
                    r.redundancy_cost,
                    r.n_max
                );
                assert_eq!(r.app_error, None, "{}: data lost or corrupt", r.policy);
            }
            let (arq, oracle) = (&rows[0], &rows[1]);
            doomed_retransmissions += oracle.lost_ranges_multi;
            // Every lineage is recovered by its first round: the oracle copies until a send
            // arrives (random loss keyed per packet, so the forecast is exact).
            assert!(oracle.n_max <= 1, "oracle needed {} rounds", oracle.n_max);
            // Copies are spent only on doomed sends: at least one per range whose
            // retransmission was lost, and at 5-10 % loss far fewer than two on average (a copy
            // beyond the first needs that copy lost too).
            assert!(oracle.copies_sent >= oracle.lost_ranges_multi);
            assert!(
                oracle.copies_sent <= 2 * oracle.lost_ranges_multi,
                "oracle copies {} for {} doomed retransmissions",
                oracle.copies_sent,
                oracle.lost_ranges_multi
            );
            assert!(
                oracle.recovery_latency_multi_ms <= arq.recovery_latency_multi_ms,
                "oracle slower than arq"
            );
        }
    }
    assert!(doomed_retransmissions > 0, "no second losses to judge by");
}

#[test]
fn the_oracle_needs_per_packet_draws_and_names_the_fix() {
    let sc = scenario("bernoulli 5%", "60ms");
    let err = run_one(&sc, &sc.policies[1], 1).expect_err("sequential draws");
    assert!(matches!(err, Error::OracleNeedsCrn), "{err}");
    assert!(err.to_string().contains("crn"), "{err}");
}

#[test]
fn real_sockets_cannot_name_the_oracle() {
    let e = "oracle"
        .parse::<recoup_recovery::PolicySpec>()
        .expect_err("simulation only")
        .to_string();
    assert!(e.contains("only in simulation"), "{e}");
}
