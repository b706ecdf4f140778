//! Neural-network functions: log_softmax, cross_entropy, nll_loss, mse_loss, layer_norm.

use crate::elementwise::{div, exp, log, mul, ne, neg, require_float, rsqrt, sub, to, upcast};
use crate::{call, call1, CallArgs};
use thunder_core::clang;
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Result};
use thunder_core::ir::{Arg, ShapeDisplay};
use thunder_core::prims::Prim;
use thunder_core::tensor::Tensor;

/// `x - max - log(sum(exp(x - max)))` over `dim`, in f32 for f16/bf16.
fn log_softmax_impl(op: &str, a: &Tensor, dim: i64) -> Result<Tensor> {
    require_float(op, a)?;
    let d = clang::canonical_dim(op, dim, a.rank())?;
    if a.numel() == 0 {
        return Ok(a.clone());
    }
    let dims: Vec<i64> = if a.rank() == 0 {
        vec![]
    } else {
        vec![d as i64]
    };
    let x = upcast(a)?;
    let max = clang::reduce(Prim::Amax, &x, &dims, true)?;
    let shifted = sub(&x, &max)?;
    let total = clang::reduce(Prim::Sum, &exp(&shifted)?, &dims, true)?;
    to(&sub(&shifted, log(&total)?)?, a.dtype())
}

pub(crate) fn log_softmax_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    Ok(vec![log_softmax_impl(c.op, &c.tensor(0)?, c.int(1)?)?])
}

pub fn log_softmax(a: &Tensor, dim: i64) -> Result<Tensor> {
    call1(
        "ltorch.log_softmax",
        vec![Arg::Value(a.value()), Arg::Int(dim)],
    )
}

/// A one-hot encoding of class indices `target: [N]` over `classes`, in `dtype`. Indices
/// outside `0..classes` give all-zero rows.
fn one_hot(target: &Tensor, classes: i64, dtype: DType) -> Result<Tensor> {
    let n = target.shape()[0];
    let iota = clang::iota(classes, target.device())?;
    let idx = clang::reshape(&clang::convert(target, DType::I64)?, vec![n, 1])?;
    let hot = crate::elementwise::eq(&idx, &iota)?;
    clang::convert(&hot, dtype)
}

fn check_logits(op: &str, logits: &Tensor) -> Result<(i64, i64)> {
    require_float(op, logits)?;
    if logits.rank() != 2 {
        bail_op!(
            op,
            "expected input of shape [N, C], got {}",
            ShapeDisplay(logits.shape())
        );
    }
    Ok((logits.shape()[0], logits.shape()[1]))
}

fn check_index_target(op: &str, target: &Tensor, n: i64) -> Result<()> {
    if dtype::is_float(target.dtype()) || target.dtype() == DType::Bool || target.shape() != [n] {
        bail_op!(
            op,
            "class-index targets must be integers of shape [{n}], got {}",
            target.ty()
        );
    }
    Ok(())
}

/// Mean over the rows whose target is not `ignore_index` of
/// `(1 - eps) * -logp[target] + eps * -mean(logp)`, as torch's cross_entropy and nll_loss.
fn class_index_loss(logp: &Tensor, target: &Tensor, ignore_index: i64, eps: f64) -> Result<Tensor> {
    let classes = logp.shape()[1];
    let kept = clang::convert(&ne(target, ignore_index)?, logp.dtype())?;
    // Masked by `kept`: an ignore_index inside 0..C would otherwise still pick a class.
    let picked = clang::reduce(
        Prim::Sum,
        &mul(&one_hot(target, classes, logp.dtype())?, logp)?,
        &[1],
        false,
    )?;
    let picked = mul(&picked, &kept)?;
    let mut per_row = neg(&mul(&picked, 1.0 - eps)?)?;
    if eps != 0.0 {
        let uniform = clang::reduce(Prim::Sum, logp, &[1], false)?;
        per_row = sub(
            &per_row,
            &mul(&mul(&uniform, eps / classes as f64)?, &kept)?,
        )?;
    }
    let total = clang::reduce(Prim::Sum, &per_row, &[0], false)?;
    let count = clang::reduce(Prim::Sum, &kept, &[0], false)?;
    div(&total, &count)
}

/// `cross_entropy(logits [N, C], target[, ignore_index, label_smoothing])`, mean over the
/// batch. `target` holds class indices (`[N]`, integer) or class probabilities (`[N, C]`).
/// Class indices without label smoothing and nothing empty go through `cross_entropy_lse`
/// (`cross_entropy.rs`), whose gradient saves one float per row.
pub(crate) fn cross_entropy_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    if c.args.len() != 2 {
        c.expect(4)?;
    }
    let (logits, target) = (c.tensor(0)?, c.tensor(1)?);
    let (n, classes) = check_logits(c.op, &logits)?;
    let (ignore_index, eps) = if c.args.len() == 4 {
        let eps = match c.args.get(3) {
            Some(Arg::Float(e)) if (0.0..=1.0).contains(e) => *e,
            other => bail_op!(
                c.op,
                "label_smoothing must be a float in [0, 1], got {other:?}"
            ),
        };
        (c.int(2)?, eps)
    } else {
        (-100, 0.0)
    };
    if eps == 0.0 && crate::cross_entropy::fits_pair(&logits, &target) {
        let outs = call(
            "ltorch.cross_entropy_lse",
            vec![
                Arg::Value(logits.value()),
                Arg::Value(target.value()),
                Arg::Int(ignore_index),
            ],
        )?;
        return Ok(outs.into_iter().take(1).collect());
    }
    let logp = log_softmax_impl(c.op, &logits, 1)?;
    let loss = if dtype::is_float(target.dtype()) {
        if target.shape() != logits.shape() {
            bail_op!(
                c.op,
                "probability targets must have the logits' shape {}, got {}",
                ShapeDisplay(logits.shape()),
                ShapeDisplay(target.shape())
            );
        }
        let mut probs = clang::convert(&target, logp.dtype())?;
        if eps != 0.0 {
            probs = crate::elementwise::add(&mul(&probs, 1.0 - eps)?, eps / classes as f64)?;
        }
        let per_row = clang::reduce(Prim::Sum, &mul(&probs, &logp)?, &[1], false)?;
        let total = clang::reduce(Prim::Sum, &per_row, &[0], false)?;
        neg(&mul(&total, 1.0 / n.max(1) as f64)?)?
    } else {
        check_index_target(c.op, &target, n)?;
        class_index_loss(&logp, &target, ignore_index, eps)?
    };
    Ok(vec![to(&loss, logits.dtype())?])
}

/// `nll_loss(logp [N, C], target [N], ignore_index)`, mean over the kept rows.
pub(crate) fn nll_loss_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let (logp, target) = (c.tensor(0)?, c.tensor(1)?);
    let (n, _) = check_logits(c.op, &logp)?;
    check_index_target(c.op, &target, n)?;
    let x = upcast(&logp)?;
    Ok(vec![to(
        &class_index_loss(&x, &target, c.int(2)?, 0.0)?,
        logp.dtype(),
    )?])
}

pub fn nll_loss(logp: &Tensor, target: &Tensor, ignore_index: i64) -> Result<Tensor> {
    call1(
        "ltorch.nll_loss",
        vec![
            Arg::Value(logp.value()),
            Arg::Value(target.value()),
            Arg::Int(ignore_index),
        ],
    )
}

/// `cross_entropy` with `ignore_index` and `label_smoothing` (torch's defaults are -100, 0.0).
pub fn cross_entropy_with(
    logits: &Tensor,
    target: &Tensor,
    ignore_index: i64,
    label_smoothing: f64,
) -> Result<Tensor> {
    call1(
        "ltorch.cross_entropy",
        vec![
            Arg::Value(logits.value()),
            Arg::Value(target.value()),
            Arg::Int(ignore_index),
            Arg::Float(label_smoothing),
        ],
    )
}

pub fn cross_entropy(logits: &Tensor, target: &Tensor) -> Result<Tensor> {
    call1(
        "ltorch.cross_entropy",
        vec![Arg::Value(logits.value()), Arg::Value(target.value())],
    )
}

/// Argument 1 of layer_norm and rms_norm: the trailing `normalized_shape`, checked against
/// `a`, and the dims it covers.
pub(crate) fn normalized_dims(c: &CallArgs, a: &Tensor) -> Result<(Vec<i64>, Vec<i64>)> {
    let norm = c.ints(1)?;
    let r = a.rank();
    if norm.len() > r || a.shape()[r - norm.len()..] != norm[..] {
        bail_op!(
            c.op,
            "normalized_shape {} does not match the trailing dims of {}",
            ShapeDisplay(&norm),
            ShapeDisplay(a.shape())
        );
    }
    Ok((norm.clone(), ((r - norm.len()) as i64..r as i64).collect()))
}

/// Layer norm over the trailing `normalized_shape` dims (biased variance, as torch).
pub(crate) fn layer_norm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let a = c.tensor(0)?;
    require_float(c.op, &a)?;
    let (norm, dims) = normalized_dims(c, &a)?;
    let eps = match c.args.get(4) {
        Some(Arg::Float(e)) => *e,
        other => bail_op!(c.op, "argument 4 (eps) must be a float, got {other:?}"),
    };
    let count: i64 = norm.iter().product();
    let x = upcast(&a)?;
    let mean = mul(
        &clang::reduce(Prim::Sum, &x, &dims, true)?,
        1.0 / count.max(1) as f64,
    )?;
    let centered = sub(&x, &mean)?;
    let var = mul(
        &clang::reduce(Prim::Sum, &mul(&centered, &centered)?, &dims, true)?,
        1.0 / count.max(1) as f64,
    )?;
    let mut y = mul(&centered, rsqrt(&crate::elementwise::add(&var, eps)?)?)?;
    if let Some(w) = c.opt_tensor(2)? {
        y = mul(&y, &w)?;
    }
    if let Some(b) = c.opt_tensor(3)? {
        y = crate::elementwise::add(&y, &b)?;
    }
    Ok(vec![to(&y, a.dtype())?])
}

pub fn layer_norm(
    a: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    let opt = |t: Option<&Tensor>| t.map_or(Arg::None, |t| Arg::Value(t.value()));
    call1(
        "ltorch.layer_norm",
        vec![
            Arg::Value(a.value()),
            Arg::Ints(normalized_shape.to_vec()),
            opt(weight),
            opt(bias),
            Arg::Float(eps),
        ],
    )
}

/// Mean squared error over all elements.
pub(crate) fn mse_loss_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let (a, b) = (c.tensor(0)?, c.tensor(1)?);
    require_float(c.op, &a)?;
    let d = sub(&a, &b)?;
    let sq = mul(&d, &d)?;
    Ok(vec![crate::reduction::mean(&sq, None, false)?])
}

pub fn mse_loss(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    call1(
        "ltorch.mse_loss",
        vec![Arg::Value(a.value()), Arg::Value(b.value())],
    )
}
