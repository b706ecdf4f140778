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

/// The float tensor a VJP's first argument is and the row dim of its second (softmax's and
/// log_softmax's `(x, dim)`), or None where nothing is differentiable.
fn row_op_input(op: &str, args: &[Arg]) -> Result<Option<(Tensor, Vec<i64>)>> {
    let (Some(Arg::Value(x)), Some(Arg::Int(dim))) = (args.first(), args.get(1)) else {
        return Ok(None);
    };
    let x = tensor_of(*x)?;
    if !dtype::is_float(x.dtype()) {
        return Ok(None);
    }
    let d = clang::canonical_dim(op, *dim, x.rank())?;
    let dims = if x.rank() == 0 {
        vec![]
    } else {
        vec![d as i64]
    };
    Ok(Some((x, dims)))
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
    let (Some(y), Some(Some(g))) = (outs.first(), cots.first()) else {
        return Ok(vec![None; args.len()]);
    };
    let Some((x, dims)) = row_op_input("ltorch.softmax", args)? else {
        return Ok(vec![None; args.len()]);
    };
    if x.numel() == 0 {
        return Ok(vec![Some(g.clone()), None]);
    }
    let (y32, g32) = (upcast(y)?, upcast(g)?);
    let dot = clang::reduce(Prim::Sum, &mul(&g32, &y32)?, &dims, true)?;
    let dx = mul(&y32, &sub(&g32, &dot)?)?;
    Ok(vec![Some(to(&dx, x.dtype())?), None])
}

/// torch's log_softmax gradient from the output: `g - exp(y) * sum(g)` over the row, in f32
/// for f16/bf16 (differentiating the decomposition also differentiates its row maximum).
pub(crate) fn log_softmax(
    args: &[Arg],
    outs: &[Tensor],
    cots: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    let (Some(y), Some(Some(g))) = (outs.first(), cots.first()) else {
        return Ok(vec![None; args.len()]);
    };
    let Some((x, dims)) = row_op_input("ltorch.log_softmax", args)? else {
        return Ok(vec![None; args.len()]);
    };
    if x.numel() == 0 {
        return Ok(vec![Some(g.clone()), None]);
    }
    let (y32, g32) = (upcast(y)?, upcast(g)?);
    let total = clang::reduce(Prim::Sum, &g32, &dims, true)?;
    let dx = sub(&g32, &mul(&exp(&y32)?, &total)?)?;
    Ok(vec![Some(to(&dx, x.dtype())?), None])
}
