//! Reductions: sum, amax, mean, and softmax (a row reduction).

use super::elementwise::{div, exp, sub, to, upcast};
use super::{call1, CallArgs};
use crate::clang;
use crate::dtype::{self, DType};
use crate::error::{bail_op, Result};
use crate::ir::Arg;
use crate::prims::Prim;
use crate::tensor::Tensor;

/// Dims argument as torch takes it: `None` or an empty list both mean every dim.
fn dims_of(c: &CallArgs, i: usize, rank: usize) -> Result<Vec<i64>> {
    let dims = c.opt_ints(i)?.filter(|d| !d.is_empty());
    clang::reduction_dims(c.op, dims.as_deref(), rank)
}

pub(crate) fn sum_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let dims = dims_of(c, 1, a.rank())?;
    // torch sums bools and ints as i64 and low-precision floats in f32.
    let (compute, result) = match a.dtype() {
        d if !dtype::is_float(d) => (DType::I64, DType::I64),
        d if dtype::is_low_precision(d) => (DType::F32, d),
        d => (d, d),
    };
    let out = clang::reduce(Prim::Sum, &clang::convert(&a, compute)?, &dims, c.bool(2)?)?;
    Ok(vec![clang::convert(&out, result)?])
}

fn dims_arg(dims: Option<&[i64]>) -> Arg {
    dims.map_or(Arg::None, |d| Arg::Ints(d.to_vec()))
}

/// Sum over `dims` (`None`: all).
pub fn sum(a: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.sum",
        vec![Arg::Value(a.value()), dims_arg(dims), Arg::Bool(keepdim)],
    )
}

pub(crate) fn amax_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let dims = dims_of(c, 1, a.rank())?;
    Ok(vec![clang::reduce(Prim::Amax, &a, &dims, c.bool(2)?)?])
}

pub fn amax(a: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.amax",
        vec![Arg::Value(a.value()), dims_arg(dims), Arg::Bool(keepdim)],
    )
}

pub(crate) fn mean_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    if !dtype::is_float(a.dtype()) {
        bail_op!(
            c.op,
            "could not infer output dtype: input dtype must be floating point, got {}",
            a.dtype().short_name()
        );
    }
    let dims = dims_of(c, 1, a.rank())?;
    let count: i64 = dims.iter().map(|&d| a.shape()[d as usize]).product();
    let x = upcast(&a)?;
    let total = clang::reduce(Prim::Sum, &x, &dims, c.bool(2)?)?;
    Ok(vec![to(&div(&total, count as f64)?, a.dtype())?])
}

pub fn mean(a: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.mean",
        vec![Arg::Value(a.value()), dims_arg(dims), Arg::Bool(keepdim)],
    )
}

pub(crate) fn softmax_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    if !dtype::is_float(a.dtype()) {
        bail_op!(
            c.op,
            "expected a floating-point tensor, got {}",
            a.dtype().short_name()
        );
    }
    let dim = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    if a.numel() == 0 {
        // Nothing to normalize; the row maximum of an empty row does not exist.
        return Ok(vec![a]);
    }
    let dims: Vec<i64> = if a.rank() == 0 {
        vec![]
    } else {
        vec![dim as i64]
    };
    let x = upcast(&a)?;
    // Subtracting the row maximum keeps exp from overflowing.
    let max = clang::reduce(Prim::Amax, &x, &dims, true)?;
    let e = exp(&sub(&x, &max)?)?;
    let s = clang::reduce(Prim::Sum, &e, &dims, true)?;
    Ok(vec![to(&div(&e, &s)?, a.dtype())?])
}

pub fn softmax(a: &Tensor, dim: i64) -> Result<Tensor> {
    call1("ltorch.softmax", vec![Arg::Value(a.value()), Arg::Int(dim)])
}
