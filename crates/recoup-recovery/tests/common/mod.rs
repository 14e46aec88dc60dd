//! Helpers shared by the integration tests of `art-dqn`.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::qnet::{state_features, Dense, QNet};
use recoup_recovery::ArtReading;

/// A network of `reading`'s state with random weights drawn from `seed`, as an untrained one
/// would be (its greedy choices vary with the state): two hidden layers of 16, `actions`
/// outputs.
pub fn random_net(reading: ArtReading, seed: u64, actions: usize) -> QNet {
    let inputs = state_features(reading).len();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut layer = |inputs: usize, outputs: usize| Dense {
        weight: (0..inputs * outputs)
            .map(|_| rng.gen_range(-1.0..1.0))
            .collect(),
        bias: (0..outputs).map(|_| rng.gen_range(-0.1..0.1)).collect(),
        inputs,
    };
    let layers = vec![layer(inputs, 16), layer(16, 16), layer(16, actions)];
    QNet::new(layers, reading, BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"))
}
