//! rms_norm, batch_norm and group_norm: normalization by statistics over the batch (per channel) or over
//! channel groups (per sample), both from `prims.var_mean` (biased variance, as torch
//! normalizes).

use crate::elementwise::{add, mul, require_float, rsqrt, sub, to, upcast};
use crate::nn::normalized_dims;
use crate::{call, call1, CallArgs};
use thunder_core::clang;
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Error, Result};
use thunder_core::ir::Arg;
use thunder_core::prims::Prim;
use thunder_core::tensor::Tensor;
use thunder_core::trace_ctx::bind;

fn value(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

/// A per-channel `[C]` tensor as `[1, C, 1, ...]` for a rank-`rank` input, in `dtype`.
fn per_channel(t: &Tensor, rank: usize, dtype: dtype::DType) -> Result<Tensor> {
    let mut shape = vec![1i64; rank];
    shape[1] = t.shape()[0];
    clang::reshape(&to(t, dtype)?, shape)
}

fn check_channels(
    c: &CallArgs,
    i: usize,
    what: &str,
    t: &Option<Tensor>,
    channels: i64,
) -> Result<()> {
    if let Some(t) = t {
        if t.shape() != [channels] {
            bail_op!(
                c.op,
                "argument {i} ({what}) must have shape [{channels}] (one value per channel), got {}",
                t.ty()
            );
        }
    }
    Ok(())
}

fn number(c: &CallArgs, i: usize, what: &str) -> Result<f64> {
    match c.args.get(i) {
        Some(Arg::Float(x)) => Ok(*x),
        Some(Arg::Int(x)) => Ok(*x as f64),
        other => bail_op!(
            c.op,
            "argument {i} ({what}) must be a number, got {other:?}"
        ),
    }
}

/// Argument 0 of batch_norm and group_norm: a float `[N, C, *]` tensor.
fn channels_input(c: &CallArgs) -> Result<Tensor> {
    let a = c.tensor(0)?;
    if !dtype::is_float(a.dtype()) {
        bail_op!(
            c.op,
            "argument 0 (input) must be floating point, got {}",
            a.dtype().short_name()
        );
    }
    if a.rank() < 2 {
        bail_op!(
            c.op,
            "argument 0 (input) must be [N, C, *] (rank >= 2), got {}",
            a.ty()
        );
    }
    Ok(a)
}

/// `batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)`.
///
/// Outputs: the normalized input, and, when training with running statistics, the updated
/// `running_mean` and `running_var` (torch updates its buffers in place; traces are pure, so
/// the new values are returned for the caller to store). As torch: the batch variance
/// normalizes biased and enters the running variance unbiased (`* n / (n - 1)`), and
/// `new = (1 - momentum) * running + momentum * batch`.
pub(crate) fn batch_norm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(8)?;
    let a = channels_input(c)?;
    let channels = a.shape()[1];
    let (rm, rv) = (c.opt_tensor(1)?, c.opt_tensor(2)?);
    let (w, b) = (c.opt_tensor(3)?, c.opt_tensor(4)?);
    for (i, what, t) in [
        (1, "running_mean", &rm),
        (2, "running_var", &rv),
        (3, "weight", &w),
        (4, "bias", &b),
    ] {
        check_channels(c, i, what, t, channels)?;
    }
    let training = c.bool(5)?;
    let momentum = number(c, 6, "momentum")?;
    let eps = number(c, 7, "eps")?;
    let x = upcast(&a)?;
    let compute = x.dtype();
    let rank = a.rank();
    let dims: Vec<i64> = (0..rank as i64).filter(|&d| d != 1).collect();
    let n: i64 = dims.iter().map(|&d| a.shape()[d as usize]).product();
    let mut extra = Vec::new();
    let (mean, var) = if training {
        if n <= 1 {
            bail_op!(
                c.op,
                "expected more than 1 value per channel when training, got input {}",
                a.ty()
            );
        }
        let stats = bind(
            thunder_core::ir::prim_symbol(Prim::VarMean),
            vec![value(&x), Arg::Ints(dims.clone()), Arg::Int(0)],
        )?;
        let (var, mean) = match stats.as_slice() {
            [var, mean] => (var.clone(), mean.clone()),
            _ => return Err(Error::Bug("var_mean did not return two outputs".into())),
        };
        match (&rm, &rv) {
            (Some(rm), Some(rv)) => {
                let update = |running: &Tensor, batch: &Tensor| -> Result<Tensor> {
                    let r = mul(&to(running, compute)?, 1.0 - momentum)?;
                    to(&add(&r, &mul(batch, momentum)?)?, running.dtype())
                };
                extra.push(update(rm, &mean)?);
                let unbiased = mul(&var, n as f64 / (n - 1) as f64)?;
                extra.push(update(rv, &unbiased)?);
            }
            (None, None) => {}
            _ => bail_op!(
                c.op,
                "argument 1 (running_mean) and argument 2 (running_var) must both be given or both be None"
            ),
        }
        let mut shape = vec![1i64; rank];
        shape[1] = channels;
        (
            clang::reshape(&mean, shape.clone())?,
            clang::reshape(&var, shape)?,
        )
    } else {
        match (&rm, &rv) {
            (Some(rm), Some(rv)) => (per_channel(rm, rank, compute)?, per_channel(rv, rank, compute)?),
            _ => bail_op!(
                c.op,
                "argument 1 (running_mean) and argument 2 (running_var) are needed when training=False"
            ),
        }
    };
    let mut y = mul(&sub(&x, &mean)?, &rsqrt(&add(&var, eps)?)?)?;
    if let Some(w) = &w {
        y = mul(&y, &per_channel(w, rank, compute)?)?;
    }
    if let Some(b) = &b {
        y = add(&y, &per_channel(b, rank, compute)?)?;
    }
    let mut outs = vec![to(&y, a.dtype())?];
    outs.extend(extra);
    Ok(outs)
}

fn opt(t: Option<&Tensor>) -> Arg {
    t.map_or(Arg::None, value)
}

/// What [`batch_norm`] returns: the output and, when training with running statistics, their
/// updated values.
pub struct BatchNorm {
    pub output: Tensor,
    pub running_mean: Option<Tensor>,
    pub running_var: Option<Tensor>,
}

#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<BatchNorm> {
    let mut outs = call(
        "ltorch.batch_norm",
        vec![
            value(input),
            opt(running_mean),
            opt(running_var),
            opt(weight),
            opt(bias),
            Arg::Bool(training),
            Arg::Float(momentum),
            Arg::Float(eps),
        ],
    )?
    .into_iter();
    let output = outs
        .next()
        .ok_or_else(|| Error::Bug("ltorch.batch_norm returned no output".into()))?;
    Ok(BatchNorm {
        output,
        running_mean: outs.next(),
        running_var: outs.next(),
    })
}

/// `group_norm(input, num_groups, weight, bias, eps)`: each sample's channels are split into
/// `num_groups` groups, normalized by their own mean and biased variance, then scaled and
/// shifted per channel.
pub(crate) fn group_norm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let a = channels_input(c)?;
    let groups = c.int(1)?;
    let (n, channels) = (a.shape()[0], a.shape()[1]);
    if groups < 1 || channels % groups != 0 {
        bail_op!(
            c.op,
            "argument 1 (num_groups = {groups}) must be >= 1 and divide the {channels} channels of argument 0 {}",
            a.ty()
        );
    }
    let (w, b) = (c.opt_tensor(2)?, c.opt_tensor(3)?);
    check_channels(c, 2, "weight", &w, channels)?;
    check_channels(c, 3, "bias", &b, channels)?;
    let eps = number(c, 4, "eps")?;
    let x = upcast(&a)?;
    let compute = x.dtype();
    let per_group = a.numel() as i64 / (n * groups).max(1);
    let grouped = clang::reshape(&x, vec![n, groups, per_group])?;
    let stats = bind(
        thunder_core::ir::prim_symbol(Prim::VarMean),
        vec![value(&grouped), Arg::Ints(vec![2]), Arg::Int(0)],
    )?;
    let (var, mean) = match stats.as_slice() {
        [var, mean] => (
            clang::reshape(var, vec![n, groups, 1])?,
            clang::reshape(mean, vec![n, groups, 1])?,
        ),
        _ => return Err(Error::Bug("var_mean did not return two outputs".into())),
    };
    let normed = mul(&sub(&grouped, &mean)?, &rsqrt(&add(&var, eps)?)?)?;
    let mut y = clang::reshape(&normed, a.shape().to_vec())?;
    if let Some(w) = &w {
        y = mul(&y, &per_channel(w, a.rank(), compute)?)?;
    }
    if let Some(b) = &b {
        y = add(&y, &per_channel(b, a.rank(), compute)?)?;
    }
    Ok(vec![to(&y, a.dtype())?])
}

pub fn group_norm(
    input: &Tensor,
    num_groups: i64,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    call1(
        "ltorch.group_norm",
        vec![
            value(input),
            Arg::Int(num_groups),
            opt(weight),
            opt(bias),
            Arg::Float(eps),
        ],
    )
}

/// `x / sqrt(mean(x^2 over normalized_shape) + eps) * weight`; `eps = None` is the dtype's
/// machine epsilon, as torch's rms_norm.
pub(crate) fn rms_norm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    require_float(c.op, &a)?;
    let (norm, dims) = normalized_dims(c, &a)?;
    let eps = match c.args.get(3) {
        Some(Arg::Float(e)) => *e,
        Some(Arg::None) => match a.dtype() {
            DType::F16 => 9.765625e-4,
            DType::BF16 => 7.8125e-3,
            DType::F64 => f64::EPSILON,
            _ => f32::EPSILON as f64,
        },
        other => bail_op!(
            c.op,
            "argument 3 (eps) must be a float or None, got {other:?}"
        ),
    };
    let count: i64 = norm.iter().product();
    let x = upcast(&a)?;
    let ms = mul(
        &clang::reduce(Prim::Sum, &mul(&x, &x)?, &dims, true)?,
        1.0 / count.max(1) as f64,
    )?;
    let mut y = mul(&x, rsqrt(&add(&ms, eps)?)?)?;
    if let Some(w) = c.opt_tensor(2)? {
        y = mul(&y, &w)?;
    }
    Ok(vec![to(&y, a.dtype())?])
}

pub fn rms_norm(
    a: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Result<Tensor> {
    call1(
        "ltorch.rms_norm",
        vec![
            Arg::Value(a.value()),
            Arg::Ints(normalized_shape.to_vec()),
            weight.map_or(Arg::None, |w| Arg::Value(w.value())),
            eps.map_or(Arg::None, Arg::Float),
        ],
    )
}
