//! Ops along one dim that keep or reorder it: cumsum (a scan), topk and sort.

use crate::reduction::{at_least_1d, call2, opt_dtype, prim_n, value};
use crate::{call1, CallArgs};
use thunder_core::clang;
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Result};
use thunder_core::ir::Arg;
use thunder_core::prims::{prim1, Prim};
use thunder_core::tensor::Tensor;

pub(crate) fn cumsum_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let d = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    // As torch: bools and ints sum as i64 unless a dtype is given; f16/bf16 in f32.
    let result = match opt_dtype(c, 2)? {
        Some(dt) => dt,
        None if !dtype::is_float(a.dtype()) => DType::I64,
        None => a.dtype(),
    };
    if result == DType::Bool {
        bail_op!(c.op, "argument 2 (dtype) cannot be b8");
    }
    let compute = if dtype::is_low_precision(result) {
        DType::F32
    } else {
        result
    };
    let x = at_least_1d(&clang::convert(&a, compute)?)?;
    let out = prim1(Prim::Cumsum, vec![value(&x), Arg::Int(d as i64)])?;
    let out = clang::reshape(&out, a.shape().to_vec())?;
    Ok(vec![clang::convert(&out, result)?])
}

/// Running sum along `dim`, optionally computed in and returned as `dtype`.
pub fn cumsum(a: &Tensor, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
    call1(
        "ltorch.cumsum",
        vec![value(a), Arg::Int(dim), dtype.map_or(Arg::None, Arg::DType)],
    )
}

pub(crate) fn topk_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let a = c.tensor(0)?;
    if a.dtype() == DType::Bool {
        bail_op!(c.op, "argument 0 must not be b8 (as torch on CPU)");
    }
    let k = c.int(1)?;
    let d = clang::canonical_dim(c.op, c.int(2)?, a.rank())?;
    let (largest, sorted) = (c.bool(3)?, c.bool(4)?);
    let x = at_least_1d(&a)?;
    let size = x.shape()[d];
    if k < 0 || k > size {
        bail_op!(
            c.op,
            "argument 1 (k = {k}) must be in [0, {size}], the size of dim {} of {}",
            c.int(2)?,
            a.ty()
        );
    }
    let outs = prim_n(
        Prim::Topk,
        vec![
            value(&x),
            Arg::Int(k),
            Arg::Int(d as i64),
            Arg::Bool(largest),
            Arg::Bool(sorted),
        ],
    )?;
    if a.rank() == 0 {
        return outs.iter().map(|t| clang::reshape(t, Vec::new())).collect();
    }
    Ok(outs)
}

/// The `k` largest (or smallest) values along `dim` and their i64 indices.
pub fn topk(a: &Tensor, k: i64, dim: i64, largest: bool, sorted: bool) -> Result<(Tensor, Tensor)> {
    call2(
        "ltorch.topk",
        vec![
            value(a),
            Arg::Int(k),
            Arg::Int(dim),
            Arg::Bool(largest),
            Arg::Bool(sorted),
        ],
    )
}

pub(crate) fn sort_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    let d = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let x = at_least_1d(&a)?;
    let outs = prim_n(
        Prim::Sort,
        vec![
            value(&x),
            Arg::Int(d as i64),
            Arg::Bool(c.bool(2)?),
            Arg::Bool(c.bool(3)?),
        ],
    )?;
    if a.rank() == 0 {
        return outs.iter().map(|t| clang::reshape(t, Vec::new())).collect();
    }
    Ok(outs)
}

/// Values sorted along `dim` and the permutation (i64). Always stable.
pub fn sort(a: &Tensor, dim: i64, descending: bool, stable: bool) -> Result<(Tensor, Tensor)> {
    call2(
        "ltorch.sort",
        vec![
            value(a),
            Arg::Int(dim),
            Arg::Bool(descending),
            Arg::Bool(stable),
        ],
    )
}
