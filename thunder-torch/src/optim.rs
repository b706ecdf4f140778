//! Optimizers as traced functions: they take parameters, gradients and optimizer state as
//! tensors and return the updated ones, so an update is one jitted program (or part of a
//! training step's program). Update rules follow torch.optim.

use crate::{add, div, mul, pow, sqrt, sub};
use thunder_core::error::{Error, Result};
use thunder_core::tensor::Tensor;

fn check_lengths(what: &str, params: &[Tensor], others: &[&[Tensor]]) -> Result<()> {
    for o in others {
        if o.len() != params.len() {
            return Err(Error::Usage(format!(
                "{what}: {} parameters but {} gradients or state tensors",
                params.len(),
                o.len()
            )));
        }
    }
    Ok(())
}

/// SGD with momentum and weight decay (torch.optim.SGD, dampening 0, not Nesterov). Momentum
/// buffers start at zero, which gives torch's first step (`buf = grad`).
/// Returns `(new_params, new_momentum_buffers)`.
pub fn sgd(
    params: &[Tensor],
    grads: &[Tensor],
    bufs: &[Tensor],
    lr: f64,
    momentum: f64,
    weight_decay: f64,
) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    check_lengths("sgd", params, &[grads, bufs])?;
    let mut new_params = Vec::with_capacity(params.len());
    let mut new_bufs = Vec::with_capacity(params.len());
    for ((p, g), b) in params.iter().zip(grads).zip(bufs) {
        let d = if weight_decay != 0.0 {
            add(g, mul(p, weight_decay)?)?
        } else {
            g.clone()
        };
        let buf = if momentum != 0.0 {
            add(&mul(b, momentum)?, &d)?
        } else {
            d
        };
        new_params.push(sub(p, mul(&buf, lr)?)?);
        new_bufs.push(buf);
    }
    Ok((new_params, new_bufs))
}

#[derive(Debug, Clone, Copy)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
        }
    }
}

/// AdamW (torch.optim.AdamW): decoupled weight decay, bias-corrected moments. `step` is the
/// 1-based step number as a 0-d float tensor, so one compiled program serves every step.
/// Returns `(new_params, new_m, new_v)`.
pub fn adamw(
    params: &[Tensor],
    grads: &[Tensor],
    m: &[Tensor],
    v: &[Tensor],
    step: &Tensor,
    cfg: AdamWConfig,
) -> Result<(Vec<Tensor>, Vec<Tensor>, Vec<Tensor>)> {
    check_lengths("adamw", params, &[grads, m, v])?;
    let bias1 = sub(1.0, pow(cfg.beta1, step)?)?;
    let bias2 = sub(1.0, pow(cfg.beta2, step)?)?;
    let (mut ps, mut ms, mut vs) = (Vec::new(), Vec::new(), Vec::new());
    for (((p, g), m), v) in params.iter().zip(grads).zip(m).zip(v) {
        let decayed = mul(p, 1.0 - cfg.lr * cfg.weight_decay)?;
        let m2 = add(&mul(m, cfg.beta1)?, &mul(g, 1.0 - cfg.beta1)?)?;
        let v2 = add(&mul(v, cfg.beta2)?, &mul(&mul(g, g)?, 1.0 - cfg.beta2)?)?;
        let m_hat = div(&m2, &bias1)?;
        let v_hat = div(&v2, &bias2)?;
        let update = div(&m_hat, &add(&sqrt(&v_hat)?, cfg.eps)?)?;
        ps.push(sub(&decayed, &mul(&update, cfg.lr)?)?);
        ms.push(m2);
        vs.push(v2);
    }
    Ok((ps, ms, vs))
}
