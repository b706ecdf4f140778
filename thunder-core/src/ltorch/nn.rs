//! Neural-network functions: log_softmax, cross_entropy, layer_norm.

use super::elementwise::{exp, log, mul, neg, require_float, rsqrt, sub, to, upcast};
use super::{call1, CallArgs};
use crate::clang;
use crate::dtype::{self, DType};
use crate::error::{bail_op, Result};
use crate::ir::{Arg, ShapeDisplay};
use crate::prims::{prim1, Prim};
use crate::tensor::Tensor;

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

/// `cross_entropy(logits [N, C], target)`, mean over the batch. `target` holds class
/// indices (`[N]`, integer) or class probabilities (`[N, C]`, float), as in torch.
pub(crate) fn cross_entropy_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let (logits, target) = (c.tensor(0)?, c.tensor(1)?);
    require_float(c.op, &logits)?;
    if logits.rank() != 2 {
        bail_op!(
            c.op,
            "expected logits of shape [N, C], got {}",
            ShapeDisplay(logits.shape())
        );
    }
    let (n, classes) = (logits.shape()[0], logits.shape()[1]);
    let logp = log_softmax_impl(c.op, &logits, 1)?;
    let probs = if dtype::is_float(target.dtype()) {
        if target.shape() != logits.shape() {
            bail_op!(
                c.op,
                "probability targets must have the logits' shape {}, got {}",
                ShapeDisplay(logits.shape()),
                ShapeDisplay(target.shape())
            );
        }
        clang::convert(&target, logp.dtype())?
    } else {
        if target.shape() != [n] {
            bail_op!(
                c.op,
                "class-index targets must have shape [{n}], got {}",
                ShapeDisplay(target.shape())
            );
        }
        // One-hot by comparing each index with 0..C.
        let classes_iota = prim1(
            Prim::Iota,
            vec![
                Arg::Int(classes),
                Arg::Int(0),
                Arg::Int(1),
                Arg::Device(target.device()),
                Arg::DType(DType::I64),
            ],
        )?;
        let idx = clang::reshape(&clang::convert(&target, DType::I64)?, vec![n, 1])?;
        let hot = clang::elementwise(
            c.op,
            Prim::Eq,
            &[
                clang::Operand::Tensor(idx),
                clang::Operand::Tensor(classes_iota),
            ],
            clang::Promotion::AlwaysBool,
        )?;
        clang::convert(&hot, logp.dtype())?
    };
    let per_row = clang::reduce(Prim::Sum, &mul(&probs, &logp)?, &[1], false)?;
    let total = clang::reduce(Prim::Sum, &per_row, &[0], false)?;
    Ok(vec![to(
        &neg(&mul(&total, 1.0 / n.max(1) as f64)?)?,
        logits.dtype(),
    )?])
}

pub fn cross_entropy(logits: &Tensor, target: &Tensor) -> Result<Tensor> {
    call1(
        "ltorch.cross_entropy",
        vec![Arg::Value(logits.value()), Arg::Value(target.value())],
    )
}

/// Layer norm over the trailing `normalized_shape` dims (biased variance, as torch).
pub(crate) fn layer_norm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let a = c.tensor(0)?;
    require_float(c.op, &a)?;
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
    let eps = match c.args.get(4) {
        Some(Arg::Float(e)) => *e,
        other => bail_op!(c.op, "argument 4 (eps) must be a float, got {other:?}"),
    };
    let dims: Vec<i64> = ((r - norm.len()) as i64..r as i64).collect();
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
    let mut y = mul(&centered, rsqrt(&super::elementwise::add(&var, eps)?)?)?;
    if let Some(w) = c.opt_tensor(2)? {
        y = mul(&y, &w)?;
    }
    if let Some(b) = c.opt_tensor(3)? {
        y = super::elementwise::add(&y, &b)?;
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
