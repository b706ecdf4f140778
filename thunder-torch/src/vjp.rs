//! The own VJPs of ltorch composites listed in [`crate::OWN_VJPS`] (embedding's lives with
//! embedding in `indexing.rs`).

use thunder_core::clang;
use thunder_core::dtype;
use thunder_core::error::Result;
use thunder_core::ir::Arg;
use thunder_core::prims::{prim1, Prim};
use thunder_core::tensor::Tensor;
use thunder_core::trace_ctx::tensor_of;

use crate::elementwise::{exp, mul, sub, to, upcast};

/// torch's relu gradient: the cotangent where the output is positive, none at the tie.
pub(crate) fn relu(
    args: &[Arg],
    outs: &[Tensor],
    cots: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    let (Some(out), Some(Some(g))) = (outs.first(), cots.first()) else {
        return Ok(vec![None; args.len()]);
    };
    let differentiable = match args.first() {
        Some(Arg::Value(x)) => dtype::is_float(tensor_of(*x)?.dtype()),
        _ => false,
    };
    if !differentiable {
        return Ok(vec![None]);
    }
    let positive = prim1(Prim::Gt, vec![Arg::Value(out.value()), Arg::Float(0.0)])?;
    let mask = clang::convert(&positive, g.dtype())?;
    Ok(vec![Some(prim1(
        Prim::Mul,
        vec![Arg::Value(g.value()), Arg::Value(mask.value())],
    )?)])
}

/// The f32 operands of softmax's and log_softmax's VJPs (`(x, dim)`, output `y`, cotangent
/// `g`: the row dims, `y` and `g` upcast for f16/bf16).
struct RowGrad {
    dims: Vec<i64>,
    y: Tensor,
    g: Tensor,
}

/// A row op's VJP from `rule` over its f32 operands, cast back to the input's dtype: none where
/// nothing is differentiable, the (empty) cotangent for an empty input.
fn row_vjp(
    op: &str,
    args: &[Arg],
    outs: &[Tensor],
    cots: &[Option<Tensor>],
    rule: impl Fn(&RowGrad) -> Result<Tensor>,
) -> Result<Vec<Option<Tensor>>> {
    let (Some(y), Some(Some(g)), Some(Arg::Value(x)), Some(Arg::Int(dim))) =
        (outs.first(), cots.first(), args.first(), args.get(1))
    else {
        return Ok(vec![None; args.len()]);
    };
    let x = tensor_of(*x)?;
    if !dtype::is_float(x.dtype()) {
        return Ok(vec![None; args.len()]);
    }
    if x.numel() == 0 {
        return Ok(vec![Some(g.clone()), None]);
    }
    let d = clang::canonical_dim(op, *dim, x.rank())?;
    let operands = RowGrad {
        dims: if x.rank() == 0 {
            vec![]
        } else {
            vec![d as i64]
        },
        y: upcast(y)?,
        g: upcast(g)?,
    };
    Ok(vec![Some(to(&rule(&operands)?, x.dtype())?), None])
}

/// torch's softmax gradient from the output: `y * (g - sum(g * y))` over the row, in f32 for
/// f16/bf16. Differentiating the decomposition instead also differentiates its row maximum
/// (whose contribution is zero): two more reductions, one of them a pass of its own after the
/// first, in every backward (3.2x the copy floor on an H200 for bf16 rows of 768).
pub(crate) fn softmax(
    args: &[Arg],
    outs: &[Tensor],
    cots: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    row_vjp("ltorch.softmax", args, outs, cots, |r| {
        let dot = clang::reduce(Prim::Sum, &mul(&r.g, &r.y)?, &r.dims, true)?;
        mul(&r.y, &sub(&r.g, &dot)?)
    })
}

/// torch's log_softmax gradient from the output: `g - exp(y) * sum(g)` over the row, in f32
/// for f16/bf16 (differentiating the decomposition also differentiates its row maximum).
pub(crate) fn log_softmax(
    args: &[Arg],
    outs: &[Tensor],
    cots: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    row_vjp("ltorch.log_softmax", args, outs, cots, |r| {
        let total = clang::reduce(Prim::Sum, &r.g, &r.dims, true)?;
        sub(&r.g, &mul(&exp(&r.y)?, &total)?)
    })
}
