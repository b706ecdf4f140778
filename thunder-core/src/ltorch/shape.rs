//! Shape ltorch ops: reshape (with -1), transpose, permute, unsqueeze, expand.

use super::{call1, CallArgs};
use crate::clang;
use crate::error::{bail_op, Result};
use crate::ir::{Arg, ShapeDisplay};
use crate::tensor::Tensor;

/// Resolves one `-1` in a requested shape against the element count.
fn infer_shape(op: &str, from: &[i64], numel: usize, shape: &[i64]) -> Result<Vec<i64>> {
    let mut out = shape.to_vec();
    let unknown: Vec<usize> = shape
        .iter()
        .enumerate()
        .filter(|(_, &d)| d == -1)
        .map(|(i, _)| i)
        .collect();
    if unknown.len() > 1 {
        bail_op!(
            op,
            "only one dimension can be inferred, got {}",
            ShapeDisplay(shape)
        );
    }
    if let Some(d) = shape.iter().find(|&&d| d < -1) {
        bail_op!(op, "invalid shape dimension {d} in {}", ShapeDisplay(shape));
    }
    let known: i64 = shape.iter().filter(|&&d| d != -1).product();
    if let Some(&i) = unknown.first() {
        if known == 0 || numel as i64 % known != 0 {
            bail_op!(
                op,
                "shape {} is invalid for input {} of size {numel}",
                ShapeDisplay(shape),
                ShapeDisplay(from)
            );
        }
        out[i] = numel as i64 / known;
    } else if known as usize != numel {
        bail_op!(
            op,
            "cannot reshape {} ({numel} elements) to {} ({known} elements)",
            ShapeDisplay(from),
            ShapeDisplay(shape)
        );
    }
    Ok(out)
}

pub(crate) fn reshape_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    let shape = infer_shape(c.op, a.shape(), a.numel(), &c.ints(1)?)?;
    Ok(vec![clang::reshape(&a, shape)?])
}

pub fn reshape(a: &Tensor, shape: &[i64]) -> Result<Tensor> {
    call1(
        "ltorch.reshape",
        vec![Arg::Value(a.value()), Arg::Ints(shape.to_vec())],
    )
}

pub(crate) fn transpose_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let d0 = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let d1 = clang::canonical_dim(c.op, c.int(2)?, a.rank())?;
    let mut perm: Vec<i64> = (0..a.rank() as i64).collect();
    if a.rank() > 0 {
        perm.swap(d0, d1);
    }
    Ok(vec![clang::transpose(&a, perm)?])
}

pub fn transpose(a: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
    call1(
        "ltorch.transpose",
        vec![Arg::Value(a.value()), Arg::Int(dim0), Arg::Int(dim1)],
    )
}

pub(crate) fn permute_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    let dims = c.ints(1)?;
    if dims.len() != a.rank() {
        bail_op!(
            c.op,
            "number of dims {} does not match the input rank {}",
            dims.len(),
            a.rank()
        );
    }
    let perm = dims
        .iter()
        .map(|&d| clang::canonical_dim(c.op, d, a.rank()).map(|d| d as i64))
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![clang::transpose(&a, perm)?])
}

pub fn permute(a: &Tensor, dims: &[i64]) -> Result<Tensor> {
    call1(
        "ltorch.permute",
        vec![Arg::Value(a.value()), Arg::Ints(dims.to_vec())],
    )
}

pub(crate) fn unsqueeze_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    let dim = clang::canonical_dim(c.op, c.int(1)?, a.rank() + 1)?;
    let mut shape = a.shape().to_vec();
    shape.insert(dim, 1);
    Ok(vec![clang::reshape(&a, shape)?])
}

pub fn unsqueeze(a: &Tensor, dim: i64) -> Result<Tensor> {
    call1(
        "ltorch.unsqueeze",
        vec![Arg::Value(a.value()), Arg::Int(dim)],
    )
}

pub(crate) fn expand_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    let mut shape = c.ints(1)?;
    if shape.len() < a.rank() {
        bail_op!(
            c.op,
            "the target shape {} has fewer dims than the input {}",
            ShapeDisplay(&shape),
            ShapeDisplay(a.shape())
        );
    }
    let offset = shape.len() - a.rank();
    for (i, d) in shape.iter_mut().enumerate() {
        if *d == -1 {
            if i < offset {
                bail_op!(c.op, "-1 is not allowed in a new leading dimension");
            }
            *d = a.shape()[i - offset];
        }
    }
    Ok(vec![clang::expand_to(&a, &shape)?])
}

pub fn expand(a: &Tensor, shape: &[i64]) -> Result<Tensor> {
    call1(
        "ltorch.expand",
        vec![Arg::Value(a.value()), Arg::Ints(shape.to_vec())],
    )
}
