//! The Q-network in candle, for training: the same layers as [`QNet`] (two ReLU hidden layers
//! and a linear head), converted to and from it.

use std::collections::BTreeMap;

use candle_core::{Device, Tensor, Var};
use rand::Rng;
use recoup_recovery::qnet::{Dense, DqnState, QNet};
use recoup_recovery::ArtReading;

use crate::error::Error;

#[derive(Debug)]
pub struct Mlp {
    /// (weight [out, in], bias [out]) per layer, in `LAYERS` order.
    layers: Vec<(Var, Var)>,
}

impl Mlp {
    /// Fresh weights for a state of `inputs` values, drawn from `rng`: U(-1/sqrt(in),
    /// 1/sqrt(in)), the usual initialization of a linear layer (drawn here, not by candle, whose
    /// CPU generator cannot be seeded).
    pub fn init(
        inputs: usize,
        hidden: [usize; 2],
        actions: usize,
        rng: &mut impl Rng,
    ) -> Result<Self, Error> {
        let sizes = [inputs, hidden[0], hidden[1], actions];
        let mut layers = Vec::with_capacity(3);
        for pair in sizes.windows(2) {
            let (inputs, outputs) = (pair[0], pair[1]);
            // Layer widths are small; the bound is only a scale.
            let bound = 1.0 / (inputs as f32).sqrt();
            let mut draw =
                |n: usize| -> Vec<f32> { (0..n).map(|_| rng.gen_range(-bound..bound)).collect() };
            let weight = draw(outputs * inputs);
            let bias = draw(outputs);
            layers.push(Dense {
                weight,
                bias,
                inputs,
            });
        }
        Self::from_dense(&layers)
    }

    /// The trainable copy of a saved network.
    pub fn from_qnet(net: &QNet) -> Result<Self, Error> {
        Self::from_dense(net.layers())
    }

    fn from_dense(layers: &[Dense]) -> Result<Self, Error> {
        let dev = Device::Cpu;
        let layers = layers
            .iter()
            .map(|l| {
                let w = Tensor::from_slice(&l.weight, (l.outputs(), l.inputs), &dev)?;
                let b = Tensor::from_slice(&l.bias, l.outputs(), &dev)?;
                Ok((Var::from_tensor(&w)?, Var::from_tensor(&b)?))
            })
            .collect::<Result<Vec<_>, candle_core::Error>>()?;
        Ok(Self { layers })
    }

    /// Q-values [batch, actions] of states [batch, inputs].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, Error> {
        let last = self.layers.len().saturating_sub(1);
        let mut x = x.clone();
        for (i, (w, b)) in self.layers.iter().enumerate() {
            x = x
                .matmul(&w.as_tensor().t()?)?
                .broadcast_add(b.as_tensor())?;
            if i < last {
                x = x.relu()?;
            }
        }
        Ok(x)
    }

    /// Every trainable tensor, for the optimizer.
    #[must_use]
    pub fn vars(&self) -> Vec<Var> {
        self.layers
            .iter()
            .flat_map(|(w, b)| [w.clone(), b.clone()])
            .collect()
    }

    /// Copies `other`'s weights into this network (the target network's periodic sync).
    pub fn assign(&self, other: &Self) -> Result<(), Error> {
        for ((w, b), (ow, ob)) in self.layers.iter().zip(&other.layers) {
            w.set(ow.as_tensor())?;
            b.set(ob.as_tensor())?;
        }
        Ok(())
    }

    /// The network as the policy reads it under `reading`, with `metadata`.
    pub fn to_qnet(
        &self,
        reading: ArtReading,
        metadata: BTreeMap<String, String>,
    ) -> Result<QNet, Error> {
        let layers = self
            .layers
            .iter()
            .map(|(w, b)| {
                let (_, inputs) = w.as_tensor().dims2()?;
                Ok(Dense {
                    weight: w.as_tensor().flatten_all()?.to_vec1::<f32>()?,
                    bias: b.as_tensor().to_vec1::<f32>()?,
                    inputs,
                })
            })
            .collect::<Result<Vec<_>, candle_core::Error>>()?;
        QNet::new(layers, reading, metadata).map_err(Error::Config)
    }
}

/// A batch of states, all of one reading's length, as a tensor [n, length].
pub fn states(rows: &[DqnState]) -> Result<Tensor, Error> {
    let len = rows.first().map_or(0, |r| r.as_slice().len());
    let flat: Vec<f32> = rows.iter().flat_map(DqnState::as_slice).copied().collect();
    Ok(Tensor::from_vec(flat, (rows.len(), len), &Device::Cpu)?)
}
