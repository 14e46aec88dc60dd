//! Training `art-dqn` (ART §8) for either reading: a short run produces a file the policy loads,
//! training is a function of its seed, candle's forward pass is the policy's, the trained policy
//! runs deterministically in the simulator, and the text reading trains as it did before the
//! code reading existed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_dqn::net::{states, Mlp};
use recoup_dqn::{train, TrainConfig};
use recoup_recovery::qnet::{state_features, DqnState, QNet};
use recoup_recovery::{ArtReading, PolicySpec};
use recoup_sim::run::run_one;
use recoup_sim::scenario::{load_str, PolicyEntry, Scenario};

fn seed() -> u64 {
    std::env::var("RECOUP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

fn scenario(policy: &str) -> Scenario {
    let text = format!(
        r#"
        name = "dqn-short"
        duration = "2s"
        [path]
        rtt = "40ms"
        rate = "12Mbps"
        queue = "droptail packets=100"
        loss = "crn bernoulli 10%"
        [app]
        kind = "live"
        bitrate = "4Mbps"
        [[policy]]
        {policy}
        "#
    );
    load_str(&text, "dqn-short.toml", None, "dqn-short")
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

/// A few short episodes with a small replay buffer: seconds, not minutes.
fn short_config(seed: u64) -> TrainConfig {
    let mut cfg = TrainConfig::with_default_scenarios().unwrap_or_else(|e| panic!("{e}"));
    cfg.scenarios = vec![scenario(r#"name = "arq""#)];
    cfg.episodes = 3;
    cfg.seed = seed;
    cfg.batch = 16;
    cfg.replay = 1000;
    cfg
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("recoup-dqn-{}-{name}", std::process::id()))
}

#[test]
fn a_short_training_writes_a_file_the_policy_loads() {
    let seed = seed();
    for reading in [ArtReading::Code, ArtReading::Text] {
        let mut episodes = Vec::new();
        let mut cfg = short_config(seed);
        cfg.reading = reading;
        let net = train(&cfg, |r| episodes.push(r.clone()))
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(episodes.len(), 3);
        assert!(
            episodes.iter().all(|e| e.decisions > 0),
            "10 % loss makes decisions: {episodes:?}"
        );
        // Epsilon falls, and there was something to learn from.
        assert!(episodes[0].epsilon > episodes[2].epsilon);
        assert!(episodes.iter().any(|e| e.loss.is_some()), "{episodes:?}");
        assert_eq!(net.reading(), reading);

        let path = temp(&format!("short-{reading}.safetensors"));
        net.save(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(net.metadata("seed"), Some(seed.to_string().as_str()));
        let given = match reading {
            ArtReading::Code => "",
            ArtReading::Text => "reading=text,",
        };
        let policy = format!(
            r#"name = "art-dqn"
            params = "{given}weights={}""#,
            path.display()
        );
        let s = scenario(&policy);
        let PolicySpec::ArtDqn(cfg) = &s.policies[0].spec else {
            panic!("parsed as {:?}", s.policies[0].spec)
        };
        assert_eq!(*cfg.net, net);
        assert_eq!(cfg.reading, reading);
        // The trained policy in the simulator: every byte delivered, the same row twice.
        let entry: &PolicyEntry = &s.policies[0];
        let a = run_one(&s, entry, 1).unwrap_or_else(|e| panic!("{e}"));
        let b = run_one(&s, entry, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.app_error, None);
        assert!(a.lost_ranges > 0);
        assert_eq!(
            serde_json::to_string(&a).ok(),
            serde_json::to_string(&b).ok()
        );
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn training_is_a_function_of_its_seed() {
    let seed = seed();
    for reading in [ArtReading::Code, ArtReading::Text] {
        let mut cfg = short_config(seed);
        cfg.reading = reading;
        cfg.episodes = 2;
        let a = train(&cfg, |_| {}).unwrap_or_else(|e| panic!("{e}"));
        let b = train(&cfg, |_| {}).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b, "seed {seed}, {reading}");
        let (pa, pb) = (
            temp(&format!("a-{reading}.safetensors")),
            temp(&format!("b-{reading}.safetensors")),
        );
        a.save(&pa).unwrap_or_else(|e| panic!("{e}"));
        b.save(&pb).unwrap_or_else(|e| panic!("{e}"));
        let (ba, bb) = (std::fs::read(&pa).ok(), std::fs::read(&pb).ok());
        assert!(
            ba.is_some() && ba == bb,
            "the files differ (seed {seed}, {reading})"
        );
        cfg.seed = seed + 1;
        let c = train(&cfg, |_| {}).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(a.layers(), c.layers(), "another seed, other weights");
        let _ = std::fs::remove_file(&pa);
        let _ = std::fs::remove_file(&pb);
    }
}

#[test]
fn candle_and_the_policy_compute_the_same_q_values() {
    let seed = seed();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let inputs = state_features(ArtReading::Code).len();
    let mlp = Mlp::init(inputs, [32, 16], 10, &mut rng).unwrap_or_else(|e| panic!("{e}"));
    let net: QNet = mlp
        .to_qnet(ArtReading::Code, BTreeMap::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<DqnState> = (0..64)
        .map(|_| {
            let values: Vec<f32> = (0..inputs).map(|_| rng.gen_range(-1.0..2.0)).collect();
            DqnState::new(&values)
        })
        .collect();
    let q = states(&rows)
        .and_then(|x| mlp.forward(&x))
        .and_then(|q| Ok(q.to_vec2::<f32>()?))
        .unwrap_or_else(|e| panic!("{e}"));
    for (row, candle) in rows.iter().zip(&q) {
        let plain = net.q_values(row.as_slice());
        for (a, b) in plain.iter().zip(candle) {
            assert!((a - b).abs() < 1e-4, "seed {seed}: {plain:?} vs {candle:?}");
        }
    }
    // Round trip: the policy's network back into candle is the same network.
    let back = Mlp::from_qnet(&net)
        .and_then(|m| m.to_qnet(ArtReading::Code, BTreeMap::new()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, net);
}

#[test]
fn bad_settings_are_errors() {
    let mut cfg = short_config(1);
    cfg.episodes = 0;
    let e = train(&cfg, |_| {}).err().map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("episodes")));
    let mut cfg = short_config(1);
    cfg.gamma = 0.5;
    let e = train(&cfg, |_| {}).err().map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("gamma")));
}

/// The first episode of a short training under `reading=text` (before any gradient step: the
/// acting network is the seeded initial one, half its decisions greedy) decides and earns as
/// recorded from the trainer before it had `reading` (decisions, mean reward, mean R).
#[test]
fn reading_text_training_explores_as_before_readings_existed() {
    for (seed, want) in [
        (
            1,
            (62, 0x3fe9_e194_194a_5295_u64, 0x4015_def7_bdef_7bdf_u64),
        ),
        (5, (54, 0x3fea_cb8e_521c_fb2b, 0x4012_f684_bda1_2f68)),
    ] {
        let mut cfg = short_config(seed);
        cfg.reading = ArtReading::Text;
        cfg.episodes = 1;
        cfg.epsilon_start = 0.5;
        let mut reports = Vec::new();
        train(&cfg, |r| reports.push(r.clone())).unwrap_or_else(|e| panic!("{e}"));
        let r = &reports[0];
        let got = (
            r.decisions,
            r.mean_reward.map_or(0, f64::to_bits),
            r.mean_r.map_or(0, f64::to_bits),
        );
        assert_eq!(got, want, "seed {seed}");
    }
}
