//! The demo's model: an MLP 64 → 128 → 128 → 10 with ReLU, initialized like torch.nn.Linear.

use anyhow::Result;
use rand::{Rng, SeedableRng};
use thunder_core::{Array, Tensor};
use thunder_torch::prelude::*;

pub const LAYERS: [(i64, i64); 3] = [(64, 128), (128, 128), (128, 10)];
pub const PARAM_NAMES: [&str; 6] = ["w1", "b1", "w2", "b2", "w3", "b3"];

/// Weights and biases uniform in ±1/sqrt(fan_in), as torch.nn.Linear does.
pub fn init_params(seed: u64) -> Result<Vec<Array>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut params = Vec::new();
    for (fan_in, fan_out) in LAYERS {
        let bound = 1.0 / (fan_in as f32).sqrt();
        let mut uniform =
            |n: i64| -> Vec<f32> { (0..n).map(|_| rng.gen_range(-bound..bound)).collect() };
        params.push(
            Array::from_slice(&uniform(fan_in * fan_out), &[fan_out, fan_in])?
                .with_requires_grad(true),
        );
        params.push(Array::from_slice(&uniform(fan_out), &[fan_out])?.with_requires_grad(true));
    }
    Ok(params)
}

/// Logits of the MLP for `x: [B, 64]`; `p` holds w1, b1, w2, b2, w3, b3.
pub fn logits(p: &[Tensor], x: &Tensor) -> Tensor {
    let h1 = x.linear(&p[0], Some(&p[1])).relu();
    let h2 = h1.linear(&p[2], Some(&p[3])).relu();
    h2.linear(&p[4], Some(&p[5]))
}
