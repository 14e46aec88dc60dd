//! CPU cost of one redundancy decision (ART §8 "CPU overhead"): ART's test-and-verification
//! step against ART-DQN's Q-network, both as the bare adapter and through the policy's
//! `on_data_lost` (state, decision, copy bookkeeping), plus the same network run by candle.
//!
//! Run: `cargo run -p recoup-dqn --release --example decision_cost [WEIGHTS]`
//! Without WEIGHTS the network is the default shape (7-64-64-10, the code reading's) with seeded
//! random weights: the cost does not depend on the values.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_dqn::net::{states, Mlp};
use recoup_dqn::TrainConfig;
use recoup_recovery::qnet::{state_features, DqnState, QNet};
use recoup_recovery::{
    art_adapt, ArtDqnConfig, DataRange, LossTrigger, LostData, OutcomeWindow, PolicySpec,
    RecoveryPolicy, SchedulerConfig,
};
use recoup_time::Instant;

const DECISIONS: usize = 200_000;

#[expect(
    clippy::disallowed_methods,
    reason = "a benchmark measures wall-clock time"
)]
fn best_ns_per(n: usize, mut f: impl FnMut()) -> f64 {
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let start = std::time::Instant::now();
        f();
        best = best.min(start.elapsed());
    }
    best.as_nanos() as f64 / n as f64
}

fn random_states(n: usize, len: usize) -> Vec<DqnState> {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    (0..n)
        .map(|_| {
            let values: Vec<f32> = (0..len).map(|_| rng.gen_range(0.0..1.0)).collect();
            DqnState::new(&values)
        })
        .collect()
}

/// `n` rounds through the policy: each loses a range (a decision) and acknowledges it.
fn policy_rounds(spec: &PolicySpec, n: usize) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let fates: Vec<bool> = (0..n).map(|_| rng.gen_bool(0.1)).collect();
    best_ns_per(n, || {
        let mut p = spec.build(1);
        for (i, &again) in fates.iter().enumerate() {
            let id = i as u64;
            let now = Instant::from_nanos(id * 1_000);
            let range = DataRange {
                stream: 0,
                start: id * 1200,
                end: id * 1200 + 1200,
            };
            let mut lost = LostData {
                id,
                range,
                round: 1,
                first_sent: now,
                first_detected: now,
                lost_sent: now,
                trigger: LossTrigger::PacketThreshold,
            };
            p.on_data_lost(now, &lost);
            if again {
                lost.round = 2;
                p.on_data_lost(now, &lost);
            }
            p.on_data_acked(now, id);
        }
        black_box(&p);
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cfg = TrainConfig::with_default_scenarios()?;
    let net = match std::env::args().nth(1).map(PathBuf::from) {
        Some(path) => QNet::load(&path)?,
        None => Mlp::init(
            state_features(cfg.reading).len(),
            cfg.hidden,
            cfg.actions,
            &mut ChaCha8Rng::seed_from_u64(1),
        )?
        .to_qnet(cfg.reading, BTreeMap::new())?,
    };
    let shape: Vec<String> = std::iter::once(net.layers()[0].inputs)
        .chain(net.layers().iter().map(|l| l.outputs()))
        .map(|n| n.to_string())
        .collect();
    println!(
        "{DECISIONS} decisions, network {}, best of 5, release build",
        shape.join("-")
    );
    let inputs = random_states(DECISIONS, net.layers()[0].inputs);

    let mut window = OutcomeWindow::new(10);
    let mut outcomes = ChaCha8Rng::seed_from_u64(4);
    let mut r = 1u32;
    let verify = best_ns_per(DECISIONS, || {
        for _ in 0..DECISIONS {
            window.push(outcomes.gen_bool(0.1));
            r = art_adapt(black_box(r), window.p_r(), 10);
        }
        black_box(r);
    });
    let plain = best_ns_per(DECISIONS, || {
        for s in &inputs {
            black_box(net.greedy(black_box(s.as_slice())));
        }
    });
    let mlp = Mlp::from_qnet(&net)?;
    let candle_n = DECISIONS / 20;
    let candle = best_ns_per(candle_n, || {
        for s in &inputs[..candle_n] {
            let q = states(std::slice::from_ref(s))
                .and_then(|x| mlp.forward(&x))
                .and_then(|q| Ok(q.argmax(1)?.to_vec1::<u32>()?));
            let _ = black_box(q);
        }
    });
    println!("| decision | ns / decision | x art |");
    println!("|---|---|---|");
    println!("| art: bitmap push + test-and-verification step | {verify:.1} | 1 |");
    println!(
        "| art-dqn: Q-network forward pass + argmax (plain Rust, as the policy runs it) | {plain:.1} | {:.0} |",
        plain / verify
    );
    println!(
        "| art-dqn: the same network in candle (batch of 1) | {candle:.1} | {:.0} |",
        candle / verify
    );

    let dqn = PolicySpec::ArtDqn(ArtDqnConfig {
        reading: net.reading(),
        weights: "(in memory)".to_owned(),
        net: Arc::new(net),
        scheduler: SchedulerConfig::default(),
    });
    let n = DECISIONS / 2;
    let base = policy_rounds(&"art".parse()?, n);
    for spec in ["art".parse()?, "art-mab".parse()?, dqn] {
        let ns = policy_rounds(&spec, n);
        println!(
            "| policy {}: on_data_lost + on_data_acked per lost range (10 % lost again) | {ns:.1} | {:.1} |",
            spec.name(),
            ns / base
        );
    }
    Ok(())
}
