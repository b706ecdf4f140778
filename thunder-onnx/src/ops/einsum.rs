//! ONNX Einsum: `thunder_torch::einsum_of` on the node's inputs (sums, permutes, reshapes and
//! matmuls traced inline), its refusals as unsupported-node errors.

use crate::error::Result;
use crate::node::NodeCtx;
use crate::value::Val;

pub fn einsum(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let eq = ctx.attr_s("equation", "");
    if eq.trim().is_empty() {
        return Err(ctx.err("attribute `equation` is required"));
    }
    let operands = (0..ctx.n_inputs())
        .map(|i| ctx.tensor(i))
        .collect::<Result<Vec<_>>>()?;
    match thunder_torch::einsum_of(&eq, &operands, true) {
        Ok(t) => Ok(vec![Val::Traced(t)]),
        Err(e) if e.unsupported => Err(ctx.unsupported(e.message)),
        Err(e) => Err(ctx.err(e.message)),
    }
}
