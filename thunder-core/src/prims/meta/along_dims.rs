//! Meta rules of the prims that reduce or reorder along dims: argmax/argmin, var_mean, cumsum,
//! topk and sort. Each message names the prim and the offending argument.

use super::{expect_arity, ints_arg, tensor, Types};
use crate::dtype::{self, DType};
use crate::error::{bail_op, Error, Result};
use crate::ir::{Arg, ShapeDisplay, TensorType};
use thunder_abi::prims::{Prim, SortPrim};

pub(super) fn int_arg(op: &str, args: &[Arg], i: usize, what: &str) -> Result<i64> {
    match args.get(i) {
        Some(Arg::Int(v)) => Ok(*v),
        other => Err(Error::op(
            op,
            format!("argument {i} ({what}) must be an int, got {other:?}"),
        )),
    }
}

fn bool_arg(op: &str, args: &[Arg], i: usize, what: &str) -> Result<bool> {
    match args.get(i) {
        Some(Arg::Bool(v)) => Ok(*v),
        other => Err(Error::op(
            op,
            format!("argument {i} ({what}) must be True or False, got {other:?}"),
        )),
    }
}

/// A dim of `a` in `[0, rank)`: prims take canonical dims (ltorch wraps negative ones).
fn dim_in_range(op: &str, a: &TensorType, dim: i64) -> Result<usize> {
    if dim < 0 || dim as usize >= a.rank() {
        bail_op!(
            op,
            "dim {dim} is out of range for {} (expected a dim in [0, {}))",
            ShapeDisplay(&a.shape),
            a.rank()
        );
    }
    Ok(dim as usize)
}

fn without_dim(a: &TensorType, dim: usize) -> Vec<i64> {
    let mut shape = a.shape.clone();
    shape.remove(dim);
    shape
}

/// `argmax(a, dim)`, `argmin(a, dim)`: i64 out, `dim` removed.
pub(super) fn arg_reduction(prim: Prim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 2)?;
    let a = tensor(op, types, 0)?;
    let dim = dim_in_range(op, a, int_arg(op, args, 1, "dim")?)?;
    if a.shape[dim] == 0 {
        bail_op!(
            op,
            "dim {dim} of {} has size 0 (the index of the extremum of nothing is undefined)",
            ShapeDisplay(&a.shape)
        );
    }
    Ok(TensorType::new(without_dim(a, dim), DType::I64, a.device))
}

/// `var_mean(a, dims, correction)`: (variance, mean), both of `a`'s float dtype.
pub(super) fn var_mean(prim: Prim, args: &[Arg], types: Types) -> Result<Vec<TensorType>> {
    let op = prim.id();
    expect_arity(op, args, 3)?;
    let a = tensor(op, types, 0)?;
    if !dtype::is_float(a.dtype) {
        bail_op!(
            op,
            "argument 0 must be floating point, got {}",
            a.dtype.short_name()
        );
    }
    let dims = ints_arg(op, args, 1, "dims")?;
    let mut reduced = vec![false; a.rank()];
    for &d in dims {
        if d < 0 || d as usize >= a.rank() || reduced[d as usize] {
            bail_op!(
                op,
                "dims {dims:?} must be distinct and in [0, {})",
                a.rank()
            );
        }
        reduced[d as usize] = true;
    }
    match args.get(2) {
        Some(Arg::Int(_) | Arg::Float(_)) => {}
        other => bail_op!(
            op,
            "argument 2 (correction) must be a number, got {other:?}"
        ),
    }
    let shape: Vec<i64> = a
        .shape
        .iter()
        .zip(&reduced)
        .filter(|(_, &r)| !r)
        .map(|(&d, _)| d)
        .collect();
    let t = TensorType::new(shape, a.dtype, a.device);
    Ok(vec![t.clone(), t])
}

/// `cumsum(a, dim)`: same type as `a`.
pub(super) fn scan(prim: Prim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 2)?;
    let a = tensor(op, types, 0)?;
    dim_in_range(op, a, int_arg(op, args, 1, "dim")?)?;
    if a.dtype == DType::Bool {
        return Err(Error::dtype(op, DType::Bool, ""));
    }
    Ok(a.clone())
}

/// `topk(a, k, dim, largest, sorted)` and `sort(a, dim, descending, stable)`:
/// (values of `a`'s dtype, i64 indices).
pub(super) fn sort(prim: SortPrim, args: &[Arg], types: Types) -> Result<Vec<TensorType>> {
    let op = prim.id();
    let a = tensor(op, types, 0)?;
    let shape = match prim {
        SortPrim::Topk => {
            expect_arity(op, args, 5)?;
            let k = int_arg(op, args, 1, "k")?;
            let dim = dim_in_range(op, a, int_arg(op, args, 2, "dim")?)?;
            bool_arg(op, args, 3, "largest")?;
            bool_arg(op, args, 4, "sorted")?;
            if k < 0 || k > a.shape[dim] {
                bail_op!(
                    op,
                    "k ({k}) must be in [0, {}], the size of dim {dim} of {}",
                    a.shape[dim],
                    ShapeDisplay(&a.shape)
                );
            }
            let mut shape = a.shape.clone();
            shape[dim] = k;
            shape
        }
        SortPrim::Sort => {
            expect_arity(op, args, 4)?;
            dim_in_range(op, a, int_arg(op, args, 1, "dim")?)?;
            bool_arg(op, args, 2, "descending")?;
            bool_arg(op, args, 3, "stable")?;
            a.shape.clone()
        }
    };
    Ok(vec![
        TensorType::new(shape.clone(), a.dtype, a.device),
        TensorType::new(shape, DType::I64, a.device),
    ])
}
