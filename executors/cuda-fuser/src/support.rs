//! Which ops the fuser claims: decided per op, so that any claimed run of ops compiles (the
//! planner can always start a new kernel at an op it accepts).

use thunder_abi::prims::{Prim, PrimClass};
use thunder_abi::{ArgView, DTypeCode, DeviceKind, OpView, TraceView};

/// Elementwise math the generated code has a CUDA function for, on float operands.
pub fn float_math(prim: Prim) -> bool {
    use Prim::*;
    matches!(
        prim,
        Neg | Abs
            | Exp
            | Exp2
            | Expm1
            | Log
            | Log1p
            | Log2
            | Log10
            | Sqrt
            | Rsqrt
            | Tanh
            | Sin
            | Cos
            | Tan
            | Asin
            | Acos
            | Atan
            | Sinh
            | Cosh
            | Asinh
            | Acosh
            | Atanh
            | Erf
            | Erfc
            | Erfinv
            | Lgamma
            | Reciprocal
            | Floor
            | Ceil
            | Round
            | Trunc
            | Signbit
            | Add
            | Sub
            | Mul
            | Div
            | Pow
            | Maximum
            | Minimum
            | Remainder
            | Fmod
            | Atan2
    )
}

fn on_cuda(view: &TraceView, v: u32) -> Option<DTypeCode> {
    let meta = view.values.get(v as usize)?;
    (meta.device.kind == DeviceKind::Cuda).then_some(meta.dtype)
}

/// Whether the fuser can run `op` (a prim on CUDA tensors of dtypes it handles).
pub fn accepts(view: &TraceView, op: &OpView) -> bool {
    if op.composite {
        return false;
    }
    let Some(prim) = Prim::from_id(&op.symbol) else {
        return false;
    };
    let mut dtypes = Vec::new();
    for v in op.input_values().chain(op.outputs.iter().copied()) {
        match on_cuda(view, v) {
            Some(d) => dtypes.push(d),
            None => return false,
        }
    }
    if dtypes.is_empty() {
        return false;
    }
    let out = view.values[op.outputs[0] as usize].dtype;
    let first_in = op
        .input_values()
        .next()
        .map(|v| view.values[v as usize].dtype);
    match prim.class() {
        PrimClass::Unary | PrimClass::Binary | PrimClass::Predicate => {
            (float_math(prim) && first_in.is_some_and(DTypeCode::is_float))
                // Index arithmetic (masks, offsets) in i32/i64, wrapping like torch.
                || (matches!(prim, Prim::Add | Prim::Sub | Prim::Mul)
                    && matches!(first_in, Some(DTypeCode::I32 | DTypeCode::I64)))
        }
        PrimClass::Compare => true,
        PrimClass::Where | PrimClass::Convert => true,
        PrimClass::Shape => matches!(prim, Prim::BroadcastInDim | Prim::Reshape),
        // Constants and index ramps (one-hots, causal masks) are computed where they are read.
        PrimClass::Factory => {
            matches!(prim, Prim::Iota | Prim::Full)
                && !matches!(out, DTypeCode::U8 | DTypeCode::I8 | DTypeCode::I16)
        }
        PrimClass::Reduction => {
            matches!(prim, Prim::Sum | Prim::Amax)
                && out.is_float()
                && matches!(op.args.get(1), Some(ArgView::Ints(d)) if !d.is_empty())
        }
        _ => false,
    }
}
