//! Turning one trace op into an instruction, once per compile. Everything a kernel relies on
//! (arity, argument kinds, dims in range, shapes and dtypes agreeing with the trace's metadata)
//! is checked here, so a run only has to check the host's descriptors.

use crate::args::{
    arity, dims_arg, expect_out, invalid, shape_arg, unsupported, DecodeError, Env, SlotMeta,
    TensorOrScalar,
};
use crate::data::{describe, lane_kind, numel, round_float, LaneKind, Scalar};
use crate::elementwise::{binary_supports, unary_supports};
use crate::reduce::ReduceOp;
use thunder_abi::prims::{
    BinaryPrim, ComparePrim, FactoryPrim, PredicatePrim, Prim, PrimKind, ReductionPrim, ShapePrim,
    UnaryPrim,
};
use thunder_abi::{ArgView, DTypeCode, DeviceKind};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operand {
    Slot(usize),
    Scalar(Scalar),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Instr {
    Unary {
        op: UnaryPrim,
        a: usize,
    },
    Predicate {
        op: PredicatePrim,
        a: usize,
    },
    Binary {
        op: BinaryPrim,
        a: Operand,
        b: Operand,
    },
    Compare {
        op: ComparePrim,
        a: Operand,
        b: Operand,
    },
    Where {
        pred: usize,
        a: Operand,
        b: Operand,
    },
    Convert {
        a: usize,
    },
    BroadcastInDim {
        a: usize,
        dims: Vec<usize>,
    },
    Reshape {
        a: usize,
    },
    Transpose {
        a: usize,
        perm: Vec<usize>,
    },
    Reduce {
        op: ReduceOp,
        a: usize,
        dims: Vec<usize>,
    },
    Matmul {
        a: usize,
        b: usize,
    },
    Full {
        value: Scalar,
    },
    Iota {
        start: i64,
        step: i64,
    },
    /// Kernels kept in their own modules (see `kernels`), some with several outputs.
    Kernel(crate::kernels::KernelInstr),
    /// slice, pad, cat, flip and the gathers and scatters (`indexing`).
    Indexing(crate::indexing::IndexInstr),
}

/// Decodes `prim(args)` whose output has metadata `out`.
pub(crate) fn decode(
    prim: Prim,
    args: &[ArgView],
    out: &SlotMeta,
    env: &Env,
) -> Result<Instr, DecodeError> {
    match prim.kind() {
        PrimKind::Unary(op) => unary(op, args, out, env),
        PrimKind::Predicate(op) => predicate(op, args, out, env),
        PrimKind::Binary(op) => binary(op, args, out, env),
        PrimKind::Compare(op) => compare(op, args, out, env),
        PrimKind::Where(_) => where_(args, out, env),
        PrimKind::Convert(_) => convert(args, out, env),
        PrimKind::Shape(op) => match op {
            ShapePrim::BroadcastInDim => broadcast_in_dim(args, out, env),
            ShapePrim::Reshape => reshape(args, out, env),
            ShapePrim::Transpose => transpose(args, out, env),
        },
        PrimKind::Reduction(op) => match op {
            ReductionPrim::Sum => reduce(ReduceOp::Sum, args, out, env),
            ReductionPrim::Amax => reduce(ReduceOp::Amax, args, out, env),
            ReductionPrim::Prod => reduce(ReduceOp::Prod, args, out, env),
            ReductionPrim::Amin => reduce(ReduceOp::Amin, args, out, env),
            ReductionPrim::Argmax | ReductionPrim::Argmin | ReductionPrim::VarMean => {
                crate::kernels::decode_single(prim, args, out, env)
            }
        },
        PrimKind::Scan(_) | PrimKind::Sort(_) | PrimKind::Conv(_) | PrimKind::Random(_) => {
            crate::kernels::decode_single(prim, args, out, env)
        }
        PrimKind::Indexing(p) => crate::indexing::decode(p, args, out, env),
        PrimKind::Matmul(_) => matmul(args, out, env),
        PrimKind::Factory(op) => match op {
            FactoryPrim::Full => full(args, out),
            FactoryPrim::Iota => iota(args, out),
        },
    }
}

fn unary(op: UnaryPrim, args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<Instr, DecodeError> {
    arity(args, 1)?;
    let (a, meta) = env.tensor(args, 0)?;
    if !unary_supports(op, lane_kind(meta.dtype)) {
        return unsupported(format!(
            "not supported for {} (the host converts to a float dtype first)",
            meta.dtype.short_name()
        ));
    }
    expect_out(out, meta.dtype, &meta.shape)?;
    Ok(Instr::Unary { op, a })
}

fn predicate(
    op: PredicatePrim,
    args: &[ArgView],
    out: &SlotMeta,
    env: &Env,
) -> Result<Instr, DecodeError> {
    arity(args, 1)?;
    let (a, meta) = env.tensor(args, 0)?;
    if lane_kind(meta.dtype) != LaneKind::Float {
        return unsupported(format!(
            "not supported for {} (float dtypes only)",
            meta.dtype.short_name()
        ));
    }
    expect_out(out, DTypeCode::Bool, &meta.shape)?;
    Ok(Instr::Predicate { op, a })
}

/// The two operands of a binary or comparison op: at most one literal, tensors of equal dtype
/// and shape. Returns them with the tensors' dtype and shape.
fn operands(
    args: &[ArgView],
    env: &Env,
) -> Result<(Operand, Operand, DTypeCode, Vec<usize>), DecodeError> {
    arity(args, 2)?;
    let (a, b) = (env.operand(args, 0)?, env.operand(args, 1)?);
    let (dtype, shape) = match (&a, &b) {
        (TensorOrScalar::Tensor(_, x), TensorOrScalar::Tensor(_, y)) if x != y => {
            return invalid(format!(
                "operands {} and {} differ (prims neither broadcast nor promote)",
                describe(x.dtype, &x.shape),
                describe(y.dtype, &y.shape)
            ));
        }
        (TensorOrScalar::Tensor(_, m), _) | (_, TensorOrScalar::Tensor(_, m)) => {
            (m.dtype, m.shape.clone())
        }
        (TensorOrScalar::Scalar(_), TensorOrScalar::Scalar(_)) => {
            return invalid("at least one operand must be a tensor")
        }
    };
    let lower = |e: TensorOrScalar<'_>| match e {
        TensorOrScalar::Tensor(slot, _) => Operand::Slot(slot),
        TensorOrScalar::Scalar(s) => Operand::Scalar(s),
    };
    Ok((lower(a), lower(b), dtype, shape))
}

fn binary(
    op: BinaryPrim,
    args: &[ArgView],
    out: &SlotMeta,
    env: &Env,
) -> Result<Instr, DecodeError> {
    let (a, b, dtype, shape) = operands(args, env)?;
    if !binary_supports(op, lane_kind(dtype)) {
        return unsupported(format!("not supported for {}", dtype.short_name()));
    }
    let as_operand = |o: Operand| match o {
        Operand::Scalar(s) => s
            .operand_of(dtype)
            .map(Operand::Scalar)
            .or_else(unsupported),
        slot => Ok(slot),
    };
    if op == BinaryPrim::Pow
        && matches!(b, Operand::Scalar(Scalar::Int(e)) if e < 0)
        && lane_kind(dtype) == LaneKind::Int
    {
        return invalid("integer to a negative power");
    }
    expect_out(out, dtype, &shape)?;
    Ok(Instr::Binary {
        op,
        a: as_operand(a)?,
        b: as_operand(b)?,
    })
}

fn compare(
    op: ComparePrim,
    args: &[ArgView],
    out: &SlotMeta,
    env: &Env,
) -> Result<Instr, DecodeError> {
    // A float literal beside a float tensor is rounded to its dtype first (the prim contract);
    // other literals keep their own kind and the kernel compares in the wider lane.
    let (a, b, dtype, shape) = operands(args, env)?;
    let round = |o: Operand| match o {
        Operand::Scalar(Scalar::Float(v)) if lane_kind(dtype) == LaneKind::Float => {
            Operand::Scalar(Scalar::Float(round_float(v, dtype)))
        }
        other => other,
    };
    expect_out(out, DTypeCode::Bool, &shape)?;
    Ok(Instr::Compare {
        op,
        a: round(a),
        b: round(b),
    })
}

fn where_(args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<Instr, DecodeError> {
    arity(args, 3)?;
    let (pred, meta) = env.tensor(args, 0)?;
    if meta.dtype != DTypeCode::Bool || meta.shape != out.shape {
        return invalid(format!(
            "condition {} must be b8 of the output's shape {}",
            describe(meta.dtype, &meta.shape),
            describe(out.dtype, &out.shape)
        ));
    }
    let branch = |i: usize| match env.operand(args, i)? {
        TensorOrScalar::Tensor(slot, m) => {
            expect_out(out, m.dtype, &m.shape)?;
            Ok(Operand::Slot(slot))
        }
        TensorOrScalar::Scalar(s) => s
            .operand_of(out.dtype)
            .map(Operand::Scalar)
            .or_else(unsupported),
    };
    Ok(Instr::Where {
        pred,
        a: branch(1)?,
        b: branch(2)?,
    })
}

fn convert(args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<Instr, DecodeError> {
    arity(args, 2)?;
    let (a, meta) = env.tensor(args, 0)?;
    let Some(ArgView::DType(to)) = args.get(1) else {
        return invalid(format!("argument 1 must be a dtype, got {:?}", args.get(1)));
    };
    expect_out(out, *to, &meta.shape)?;
    Ok(Instr::Convert { a })
}

fn broadcast_in_dim(args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<Instr, DecodeError> {
    arity(args, 3)?;
    let (a, meta) = env.tensor(args, 0)?;
    let shape = shape_arg(args, 1)?;
    let dims = dims_arg(args, 2, "broadcast_dims", shape.len())?;
    if dims.len() != meta.shape.len() {
        return invalid(format!(
            "broadcast_dims {dims:?} must name one output dim per input dim ({})",
            meta.shape.len()
        ));
    }
    for (i, (&size, &d)) in meta.shape.iter().zip(&dims).enumerate() {
        if size != 1 && size != shape[d] {
            return invalid(format!(
                "input dim {i} has size {size}; output dim {d} needs 1 or {}",
                shape[d]
            ));
        }
    }
    expect_out(out, meta.dtype, &shape)?;
    Ok(Instr::BroadcastInDim { a, dims })
}

fn reshape(args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<Instr, DecodeError> {
    arity(args, 2)?;
    let (a, meta) = env.tensor(args, 0)?;
    let shape = shape_arg(args, 1)?;
    if numel(&shape) != numel(&meta.shape) {
        return invalid(format!(
            "cannot reshape {} to {shape:?}",
            describe(meta.dtype, &meta.shape)
        ));
    }
    expect_out(out, meta.dtype, &shape)?;
    Ok(Instr::Reshape { a })
}

fn transpose(args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<Instr, DecodeError> {
    arity(args, 2)?;
    let (a, meta) = env.tensor(args, 0)?;
    let perm = dims_arg(args, 1, "permutation", meta.shape.len())?;
    if perm.len() != meta.shape.len() {
        return invalid(format!(
            "permutation {perm:?} must have {} entries",
            meta.shape.len()
        ));
    }
    let shape: Vec<usize> = perm.iter().map(|&p| meta.shape[p]).collect();
    expect_out(out, meta.dtype, &shape)?;
    Ok(Instr::Transpose { a, perm })
}

fn reduce(op: ReduceOp, args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<Instr, DecodeError> {
    arity(args, 2)?;
    let (a, meta) = env.tensor(args, 0)?;
    let dims = dims_arg(args, 1, "dims", meta.shape.len())?;
    if matches!(op, ReduceOp::Sum | ReduceOp::Prod) && meta.dtype == DTypeCode::Bool {
        return unsupported("not supported for b8 (the host converts to an integer dtype first)");
    }
    // A sum over nothing is 0; a maximum over nothing has no value.
    if let (ReduceOp::Amax | ReduceOp::Amin, Some(&d)) =
        (op, dims.iter().find(|&&d| meta.shape[d] == 0))
    {
        return invalid(format!(
            "cannot reduce over dim {d} of size 0 (the maximum of nothing)"
        ));
    }
    let shape: Vec<usize> = (0..meta.shape.len())
        .filter(|d| !dims.contains(d))
        .map(|d| meta.shape[d])
        .collect();
    expect_out(out, meta.dtype, &shape)?;
    Ok(Instr::Reduce { op, a, dims })
}

fn matmul(args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<Instr, DecodeError> {
    arity(args, 2)?;
    let ((a, ma), (b, mb)) = (env.tensor(args, 0)?, env.tensor(args, 1)?);
    let (sa, sb) = (&ma.shape, &mb.shape);
    let (ra, rb) = (sa.len(), sb.len());
    if ra < 2
        || ra != rb
        || sa[..ra - 2] != sb[..rb - 2]
        || sa[ra - 1] != sb[rb - 2]
        || ma.dtype != mb.dtype
    {
        return invalid(format!("cannot multiply {} by {} (expects [..., m, k] @ [..., k, n], equal batch dims and dtypes)", describe(ma.dtype, sa), describe(mb.dtype, sb)));
    }
    if ma.dtype == DTypeCode::Bool {
        return unsupported("not supported for b8");
    }
    let mut shape = sa[..ra - 1].to_vec();
    shape.push(sb[rb - 1]);
    expect_out(out, ma.dtype, &shape)?;
    Ok(Instr::Matmul { a, b })
}

fn full(args: &[ArgView], out: &SlotMeta) -> Result<Instr, DecodeError> {
    arity(args, 4)?;
    let shape = shape_arg(args, 0)?;
    let fill = match args.get(1) {
        Some(ArgView::Int(v)) => Scalar::Int(*v),
        Some(ArgView::Float(v)) => Scalar::Float(*v),
        Some(ArgView::Bool(v)) => Scalar::Bool(*v),
        other => {
            return invalid(format!(
                "argument 1 (fill value) must be a number, got {other:?}"
            ))
        }
    };
    match args.get(2) {
        Some(ArgView::Device(d)) if d.kind == DeviceKind::Cpu => {}
        Some(ArgView::Device(d)) => return unsupported(format!("runs on CPU only, not {d:?}")),
        other => return invalid(format!("argument 2 must be a device, got {other:?}")),
    }
    let Some(ArgView::DType(dtype)) = args.get(3) else {
        return invalid(format!("argument 3 must be a dtype, got {:?}", args.get(3)));
    };
    expect_out(out, *dtype, &shape)?;
    let value = fill.cast_to(*dtype).or_else(invalid)?;
    Ok(Instr::Full { value })
}

fn iota(args: &[ArgView], out: &SlotMeta) -> Result<Instr, DecodeError> {
    arity(args, 5)?;
    let int = |i: usize| match args.get(i) {
        Some(ArgView::Int(v)) => Ok(*v),
        other => invalid(format!("argument {i} must be an int, got {other:?}")),
    };
    let (length, start, step) = (int(0)?, int(1)?, int(2)?);
    if length < 0 {
        return invalid(format!("length must be >= 0, got {length}"));
    }
    match args.get(3) {
        Some(ArgView::Device(d)) if d.kind == DeviceKind::Cpu => {}
        Some(ArgView::Device(d)) => return unsupported(format!("runs on CPU only, not {d:?}")),
        other => return invalid(format!("argument 3 must be a device, got {other:?}")),
    }
    let Some(ArgView::DType(dtype)) = args.get(4) else {
        return invalid(format!("argument 4 must be a dtype, got {:?}", args.get(4)));
    };
    if *dtype == DTypeCode::Bool {
        return unsupported("iota of b8");
    }
    expect_out(out, *dtype, &[length as usize])?;
    Ok(Instr::Iota { start, step })
}
