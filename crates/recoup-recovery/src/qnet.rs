//! The Q-network of `art-dqn` (ART §8): a small multilayer perceptron from the adapter's state
//! ([`DqnState`]) to one Q-value per redundancy level R = 1..=r_max, stored as safetensors.
//!
//! Inference is a plain forward pass here, so every host of the policies (transport, simulator,
//! C ABI, Python) runs `art-dqn` without an ML framework; training, with candle, is in the
//! `recoup-dqn` crate, which writes this format through [`QNet::save`] and checks that candle's
//! forward pass and this one agree.
//!
//! File format: tensors `fc1.weight` `[h1, inputs]`, `fc1.bias` `[h1]`, `fc2.weight`
//! `[h2, h1]`, `fc2.bias` `[h2]`, `q.weight` `[r_max, h2]`, `q.bias` `[r_max]`, all F32 (the
//! `[out, in]` layout of a linear layer), ReLU between layers; metadata `format` = [`FORMAT`] and
//! `state` = the features of the reading it was trained for ([`state_features`]) joined by
//! commas, so a file is read only with the state it was trained on.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

use crate::config::ArtReading;
use crate::error::Error;

/// The `format` metadata of a weights file this crate reads.
pub const FORMAT: &str = "recoup-art-dqn/1";

/// The inputs of the network under `reading=text`, in order (recoup's own state; see
/// `LearnedState` in `art.rs` for each one).
pub const TEXT_FEATURES: [&str; 6] = ["p_r", "p_r_long", "round", "level", "burst", "round_loss"];

/// The inputs under `reading=code`, in order: quic-art's `struct rl_state` (RL_Agent.h:19-30 on
/// branch `add_rl_to_art`), each scaled to [0, 1] (see `CodeObserver` in `art.rs`).
pub const CODE_FEATURES: [&str; 7] = [
    "send_rate",
    "ack_rate",
    "min_rtt",
    "srtt",
    "lost_queue",
    "in_flight",
    "rounds_failed",
];

/// The inputs of `reading`'s network, in order.
#[must_use]
pub fn state_features(reading: ArtReading) -> &'static [&'static str] {
    match reading {
        ArtReading::Code => &CODE_FEATURES,
        ArtReading::Text => &TEXT_FEATURES,
    }
}

/// The most inputs a reading has.
pub const MAX_STATE_LEN: usize = 7;

/// One decision's input: the first `len` values, `len` the reading's number of features.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DqnState {
    values: [f32; MAX_STATE_LEN],
    len: usize,
}

impl DqnState {
    /// A state of `values` (at most [`MAX_STATE_LEN`]; more are cut).
    #[must_use]
    pub fn new(values: &[f32]) -> Self {
        let len = values.len().min(MAX_STATE_LEN);
        let mut all = [0.0; MAX_STATE_LEN];
        all[..len].copy_from_slice(&values[..len]);
        Self { values: all, len }
    }

    #[must_use]
    pub fn as_slice(&self) -> &[f32] {
        &self.values[..self.len]
    }
}

/// Layer names in file order: two hidden layers and the Q-value head.
pub const LAYERS: [&str; 3] = ["fc1", "fc2", "q"];

/// Largest R a network may choose; the same bound as `art`'s and `art-mab`'s `r_max`.
pub const MAX_ACTIONS: usize = 64;

/// Largest hidden layer accepted: a bound on the memory a file can make us allocate.
pub const MAX_HIDDEN: usize = 4096;

/// A dense layer: `y = W x + b`, `W` row-major [rows = outputs, cols = inputs].
#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub inputs: usize,
}

impl Dense {
    #[must_use]
    pub fn outputs(&self) -> usize {
        self.bias.len()
    }
}

/// The network: [`LAYERS`] in order, with metadata (the training's parameters).
#[derive(Clone, Debug, PartialEq)]
pub struct QNet {
    layers: Vec<Dense>,
    /// The reading whose state the network takes.
    reading: ArtReading,
    metadata: BTreeMap<String, String>,
}

impl QNet {
    /// A network from its layers (`fc1`, `fc2`, `q`) taking `reading`'s state; checks that the
    /// shapes chain from that state's length to between 1 and [`MAX_ACTIONS`] outputs and that
    /// every number is finite. `metadata` is kept and saved (the `format` and `state` keys are
    /// set here).
    pub fn new(
        layers: Vec<Dense>,
        reading: ArtReading,
        metadata: BTreeMap<String, String>,
    ) -> Result<Self, String> {
        if layers.len() != LAYERS.len() {
            return Err(format!(
                "expected {} layers, got {}",
                LAYERS.len(),
                layers.len()
            ));
        }
        let features = state_features(reading);
        let mut inputs = features.len();
        for (name, layer) in LAYERS.iter().zip(&layers) {
            let outputs = layer.outputs();
            if layer.inputs != inputs {
                return Err(format!(
                    "`{name}.weight` takes {} inputs, but the layer before gives {inputs}",
                    layer.inputs
                ));
            }
            if outputs == 0 || layer.weight.len() != outputs * inputs {
                return Err(format!(
                    "`{name}.weight` has {} values for shape [{outputs}, {inputs}]",
                    layer.weight.len()
                ));
            }
            if layer
                .weight
                .iter()
                .chain(&layer.bias)
                .any(|v| !v.is_finite())
            {
                return Err(format!("`{name}` holds a value that is not finite"));
            }
            inputs = outputs;
        }
        if inputs > MAX_ACTIONS {
            return Err(format!(
                "`q` has {inputs} outputs (redundancy levels); at most {MAX_ACTIONS} are accepted"
            ));
        }
        let mut metadata = metadata;
        metadata.insert("format".to_owned(), FORMAT.to_owned());
        metadata.insert("state".to_owned(), features.join(","));
        Ok(Self {
            layers,
            reading,
            metadata,
        })
    }

    /// Reads a weights file; every error names `path`.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = std::fs::read(path).map_err(|e| weights_error(path, e))?;
        Self::from_bytes(&bytes).map_err(|detail| weights_error(path, detail))
    }

    /// Parses the bytes of a weights file.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let (_, header) = SafeTensors::read_metadata(bytes)
            .map_err(|e| format!("not a safetensors file ({e})"))?;
        let metadata: BTreeMap<String, String> = header
            .metadata()
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        match metadata.get("format") {
            Some(f) if f == FORMAT => {}
            Some(f) => return Err(format!("format `{f}`, expected `{FORMAT}`")),
            None => return Err(format!("no `format` metadata, expected `{FORMAT}`")),
        }
        let state = metadata.get("state").map_or("(none)", String::as_str);
        let Some(reading) = [ArtReading::Code, ArtReading::Text]
            .into_iter()
            .find(|&r| state == state_features(r).join(","))
        else {
            return Err(format!(
                "trained on state `{state}`; this build feeds `{}` (reading=code) or `{}` \
                 (reading=text)",
                CODE_FEATURES.join(","),
                TEXT_FEATURES.join(",")
            ));
        };
        let tensors =
            SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file ({e})"))?;
        let mut layers = Vec::with_capacity(LAYERS.len());
        let mut inputs = state_features(reading).len();
        for name in LAYERS {
            let weight = tensor(&tensors, &format!("{name}.weight"))?;
            let bias = tensor(&tensors, &format!("{name}.bias"))?;
            let (w_shape, b_shape) = (weight.shape(), bias.shape());
            let outputs = match (w_shape, b_shape) {
                ([rows, cols], [len]) if *cols == inputs && rows == len => *rows,
                _ => {
                    return Err(format!(
                        "`{name}.weight` has shape {w_shape:?} and `{name}.bias` {b_shape:?}; \
                         expected [n, {inputs}] and [n]"
                    ))
                }
            };
            if outputs == 0 || outputs > MAX_HIDDEN {
                return Err(format!(
                    "`{name}` has {outputs} outputs; expected 1..={MAX_HIDDEN}"
                ));
            }
            layers.push(Dense {
                weight: floats(&weight),
                bias: floats(&bias),
                inputs,
            });
            inputs = outputs;
        }
        Self::new(layers, reading, metadata)
    }

    /// Writes the network as safetensors; errors name `path`.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let bytes: Vec<(String, Vec<u8>, Vec<usize>)> = LAYERS
            .iter()
            .zip(&self.layers)
            .flat_map(|(name, l)| {
                [
                    (
                        format!("{name}.weight"),
                        le_bytes(&l.weight),
                        vec![l.outputs(), l.inputs],
                    ),
                    (format!("{name}.bias"), le_bytes(&l.bias), vec![l.outputs()]),
                ]
            })
            .collect();
        let views = bytes
            .iter()
            .map(|(name, data, shape)| {
                TensorView::new(Dtype::F32, shape.clone(), data).map(|v| (name.clone(), v))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| weights_error(path, e))?;
        let metadata: HashMap<String, String> = self.metadata.clone().into_iter().collect();
        let bytes = safetensors::serialize(views, Some(metadata))
            .map_err(|e| weights_error(path, e))
            .and_then(|b| sorted_header(b).map_err(|e| weights_error(path, e)))?;
        std::fs::write(path, bytes).map_err(|e| weights_error(path, e))
    }

    /// Number of actions: R = 1..=`actions()`.
    #[must_use]
    pub fn actions(&self) -> usize {
        self.layers.last().map_or(0, Dense::outputs)
    }

    #[must_use]
    pub fn layers(&self) -> &[Dense] {
        &self.layers
    }

    /// The reading whose state the network takes.
    #[must_use]
    pub fn reading(&self) -> ArtReading {
        self.reading
    }

    /// A metadata value (`gamma`, `seed`, ... as the trainer wrote them).
    #[must_use]
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    /// Q(state, R) for R = 1..=`actions()`; `state` has the network's reading's length.
    #[must_use]
    pub fn q_values(&self, state: &[f32]) -> Vec<f32> {
        debug_assert_eq!(state.len(), state_features(self.reading).len());
        let mut x: Vec<f32> = state.to_vec();
        let last = self.layers.len().saturating_sub(1);
        for (i, layer) in self.layers.iter().enumerate() {
            let mut y = layer.bias.clone();
            for (out, row) in y.iter_mut().zip(layer.weight.chunks_exact(layer.inputs)) {
                *out += row.iter().zip(&x).map(|(w, v)| w * v).sum::<f32>();
                if i < last {
                    *out = out.max(0.0);
                }
            }
            x = y;
        }
        x
    }

    /// The greedy decision: the R with the highest Q-value, the smallest R among ties.
    #[must_use]
    pub fn greedy(&self, state: &[f32]) -> u32 {
        argmax(&self.q_values(state))
    }
}

/// R (1-based) of the largest value, the smallest R among ties; 1 for an empty slice.
#[must_use]
pub fn argmax(q: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in q.iter().enumerate() {
        if *v > q[best] {
            best = i;
        }
    }
    u32::try_from(best).map_or(1, |b| b.saturating_add(1))
}

/// safetensors writes its header from hash maps, in an order that changes from run to run; the
/// same network must give the same file, so the header's keys are sorted (and padded back to
/// the same length: compact JSON of the same content is never longer).
fn sorted_header(mut bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let len = bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("no header length")?;
    let end = len
        .checked_add(8)
        .filter(|&e| e <= bytes.len())
        .ok_or("short header")?;
    let mut header: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..end]).map_err(|e| e.to_string())?;
    if let Some(meta) = header.get_mut("__metadata__") {
        let sorted: BTreeMap<String, String> =
            serde_json::from_value(meta.take()).map_err(|e| e.to_string())?;
        *meta = serde_json::to_value(sorted).map_err(|e| e.to_string())?;
    }
    let mut text = serde_json::to_string(&header).map_err(|e| e.to_string())?;
    if text.len() > len {
        return Err("sorted header longer than the original".to_owned());
    }
    text.extend(std::iter::repeat_n(' ', len - text.len()));
    bytes.splice(8..end, text.into_bytes());
    Ok(bytes)
}

fn weights_error(path: &Path, detail: impl std::fmt::Display) -> Error {
    Error::Weights {
        path: path.display().to_string(),
        detail: detail.to_string(),
    }
}

fn tensor<'a>(tensors: &'a SafeTensors<'a>, name: &str) -> Result<TensorView<'a>, String> {
    let t = tensors
        .tensor(name)
        .map_err(|_| format!("no tensor `{name}`"))?;
    if t.dtype() != Dtype::F32 {
        return Err(format!("`{name}` is {:?}, expected F32", t.dtype()));
    }
    Ok(t)
}

fn floats(t: &TensorView<'_>) -> Vec<f32> {
    t.data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text reading's state length, which these networks take.
    const STATE_LEN: usize = TEXT_FEATURES.len();

    /// A network whose Q-values are easy to compute: fc1 and fc2 pass the state through
    /// (identity on the first inputs), the head weights input `j` for action `j`.
    fn tiny(actions: usize) -> QNet {
        let identity = |n: usize, inputs: usize| Dense {
            weight: (0..n * inputs)
                .map(|k| if k / inputs == k % inputs { 1.0 } else { 0.0 })
                .collect(),
            bias: vec![0.0; n],
            inputs,
        };
        let head = Dense {
            weight: (0..actions * STATE_LEN)
                .map(|k| {
                    if k / STATE_LEN == k % STATE_LEN {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect(),
            bias: (0..actions).map(|a| -0.01 * a as f32).collect(),
            inputs: STATE_LEN,
        };
        match QNet::new(
            vec![
                identity(STATE_LEN, STATE_LEN),
                identity(STATE_LEN, STATE_LEN),
                head,
            ],
            ArtReading::Text,
            BTreeMap::new(),
        ) {
            Ok(n) => n,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn forward_pass_and_greedy_choice() {
        let net = tiny(4);
        let s = [0.1, 0.9, 0.3, 0.0, 0.0, 0.0];
        let q = net.q_values(&s);
        assert_eq!(q.len(), 4);
        assert!((q[1] - 0.89).abs() < 1e-6, "{q:?}");
        assert_eq!(net.greedy(&s), 2);
        // ReLU on hidden layers: a negative input contributes nothing.
        let q = net.q_values(&[-5.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert!(q[0].abs() < 1e-6, "{q:?}");
        // Ties go to the smallest R.
        assert_eq!(argmax(&[1.0, 1.0, 0.5]), 1);
        assert_eq!(argmax(&[]), 1);
    }

    #[test]
    fn save_and_load_round_trip() {
        let dir = std::env::temp_dir().join(format!("recoup-qnet-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("tiny.safetensors");
        let net = tiny(3);
        if let Err(e) = net.save(&path) {
            panic!("{e}");
        }
        let back = match QNet::load(&path) {
            Ok(n) => n,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(back, net);
        assert_eq!(back.actions(), 3);
        assert_eq!(back.reading(), ArtReading::Text);
        // A network of the code reading's seven inputs comes back as one.
        let wide = |inputs: usize, outputs: usize| Dense {
            weight: vec![0.5; inputs * outputs],
            bias: vec![0.0; outputs],
            inputs,
        };
        let layers = vec![wide(7, 4), wide(4, 4), wide(4, 10)];
        let code = match QNet::new(layers.clone(), ArtReading::Code, BTreeMap::new()) {
            Ok(n) => n,
            Err(e) => panic!("{e}"),
        };
        let path = dir.join("code.safetensors");
        if let Err(e) = code.save(&path) {
            panic!("{e}");
        }
        match QNet::load(&path) {
            Ok(back) => {
                assert_eq!(back, code);
                assert_eq!(back.reading(), ArtReading::Code);
                assert_eq!(
                    back.metadata("state"),
                    Some(CODE_FEATURES.join(",").as_str())
                );
            }
            Err(e) => panic!("{e}"),
        }
        // The same layers do not chain from the text reading's six inputs.
        let e = QNet::new(layers, ArtReading::Text, BTreeMap::new())
            .err()
            .unwrap_or_default();
        assert!(e.contains("fc1.weight") && e.contains("7 inputs"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shapes_must_chain() {
        let mut layers = tiny(3).layers;
        layers[1].inputs = 5;
        let e = QNet::new(layers, ArtReading::Text, BTreeMap::new())
            .err()
            .unwrap_or_default();
        assert!(e.contains("fc2.weight"), "{e}");
        let mut layers = tiny(3).layers;
        layers[2].bias[0] = f32::NAN;
        let e = QNet::new(layers, ArtReading::Text, BTreeMap::new())
            .err()
            .unwrap_or_default();
        assert!(e.contains("not finite"), "{e}");
    }
}
