//! Total CPU of a simulated run per policy, next to `arq` on the same seed: the built-in default
//! scenario (AutoRec testbed, 60 s), one seed, single thread. The transport, the simulator and
//! the application all run in this time; the difference to `arq` is what the policy costs,
//! including the extra packets its copies make the transport build, encrypt and send.
//!
//! Run: `cargo run -p recoup-sim --release --example policy_cpu`

use recoup_sim::run::run_one;
use recoup_sim::scenario::Scenario;

#[expect(
    clippy::disallowed_methods,
    reason = "a benchmark measures wall-clock time"
)]
fn main() {
    let sc = Scenario::builtin_default();
    let extra: Vec<_> = ["fixed:1", "art-mab", "ladr-rrl"]
        .iter()
        .map(|n| recoup_sim::scenario::PolicyEntry {
            label: (*n).to_owned(),
            name: (*n).to_owned(),
            params: String::new(),
            spec: n.parse().expect("policy"),
            oracle: false,
        })
        .collect();
    let policies: Vec<_> = sc.policies.iter().chain(extra.iter()).collect();
    println!(
        "default scenario, {:?} simulated, seed 1, best of 3, release build",
        sc.duration
    );
    println!("| policy | wall ms | x real time | vs arq | packets sent | copies | CPU per packet vs arq |");
    println!("|---|---|---|---|---|---|---|");
    let mut arq: Option<(f64, f64)> = None;
    for p in policies {
        let mut best = f64::MAX;
        let mut row = None;
        for _ in 0..3 {
            let start = std::time::Instant::now();
            let r = run_one(&sc, p, 1).expect("run");
            best = best.min(start.elapsed().as_secs_f64() * 1e3);
            row = Some(r);
        }
        let row = row.expect("ran");
        let packets = row.packets_sent as f64;
        let per_packet = best / packets;
        let (vs, per) = match arq {
            None => {
                arq = Some((best, per_packet));
                ("—".to_owned(), "—".to_owned())
            }
            Some((t, pp)) => (
                format!("{:+.1} %", (best / t - 1.0) * 100.0),
                format!("{:+.1} %", (per_packet / pp - 1.0) * 100.0),
            ),
        };
        println!(
            "| {} | {:.0} | {:.0} | {} | {} | {} | {} |",
            p.label,
            best,
            sc.duration.as_secs_f64() * 1e3 / best,
            vs,
            row.packets_sent,
            row.copies_sent,
            per
        );
    }
}
