//! The own VJPs of ltorch composites listed in [`crate::OWN_VJPS`] (embedding's lives with
//! embedding in `indexing.rs`).

use thunder_core::clang;
use thunder_core::dtype;
use thunder_core::error::Result;
use thunder_core::ir::Arg;
use thunder_core::prims::{prim1, Prim};
use thunder_core::tensor::Tensor;
use thunder_core::trace_ctx::tensor_of;

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
