//! Shape ltorch ops: reshape (with -1), transpose, permute, unsqueeze, expand, flatten,
//! unflatten, squeeze and t.

use crate::reduction::dims_arg;
use crate::{call1, CallArgs};
use thunder_core::clang;
use thunder_core::error::{bail_op, Result};
use thunder_core::ir::{Arg, ShapeDisplay};
use thunder_core::tensor::Tensor;

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

/// Merges dims `start..=end` into one (negative indices allowed; a 0-d tensor becomes `[1]`).
pub(crate) fn flatten_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    if a.rank() == 0 {
        return Ok(vec![clang::reshape(&a, vec![1])?]);
    }
    let s = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let e = clang::canonical_dim(c.op, c.int(2)?, a.rank())?;
    if s > e {
        bail_op!(c.op, "start_dim {s} comes after end_dim {e}");
    }
    let mut shape: Vec<i64> = a.shape()[..s].to_vec();
    shape.push(a.shape()[s..=e].iter().product());
    shape.extend_from_slice(&a.shape()[e + 1..]);
    Ok(vec![clang::reshape(&a, shape)?])
}

pub fn flatten(a: &Tensor, start_dim: i64, end_dim: i64) -> Result<Tensor> {
    call1(
        "ltorch.flatten",
        vec![
            Arg::Value(a.value()),
            Arg::Int(start_dim),
            Arg::Int(end_dim),
        ],
    )
}

/// Removes size-1 dims (all of them, or those listed; listed dims of another size stay).
pub(crate) fn squeeze_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    let listed = match c.opt_ints(1)? {
        None => None,
        Some(d) => Some(
            d.iter()
                .map(|&x| clang::canonical_dim(c.op, x, a.rank()))
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let shape = a
        .shape()
        .iter()
        .enumerate()
        .filter(|(i, &d)| !(d == 1 && listed.as_ref().is_none_or(|l| l.contains(i))))
        .map(|(_, &d)| d)
        .collect();
    Ok(vec![clang::reshape(&a, shape)?])
}

pub fn squeeze(a: &Tensor, dims: Option<&[i64]>) -> Result<Tensor> {
    call1(
        "ltorch.squeeze",
        vec![Arg::Value(a.value()), dims_arg(dims)],
    )
}

/// Transpose of a matrix; 0-d and 1-D tensors are returned as they are, as torch.t.
pub(crate) fn t_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    match a.rank() {
        0 | 1 => Ok(vec![a]),
        2 => Ok(vec![clang::transpose(&a, vec![1, 0])?]),
        r => bail_op!(c.op, "expects a tensor with <= 2 dims, got {r} dims"),
    }
}

pub fn t(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.t", vec![Arg::Value(a.value())])
}

/// Splits `dim` into `sizes` (one may be -1), as torch.unflatten.
pub(crate) fn unflatten_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let d = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let mut sizes = c.ints(2)?;
    let size = if a.rank() == 0 { 1 } else { a.shape()[d] };
    let unknown: Vec<usize> = sizes
        .iter()
        .enumerate()
        .filter(|(_, &s)| s == -1)
        .map(|(i, _)| i)
        .collect();
    let known: i64 = sizes.iter().filter(|&&s| s != -1).product();
    match unknown.as_slice() {
        [] if known == size => {}
        [i] if known > 0 && size % known == 0 => sizes[*i] = size / known,
        _ => bail_op!(
            c.op,
            "sizes {} do not multiply to dim {d}'s size {size}",
            ShapeDisplay(&sizes)
        ),
    }
    let mut shape = a.shape()[..d.min(a.rank())].to_vec();
    shape.extend_from_slice(&sizes);
    if a.rank() > 0 {
        shape.extend_from_slice(&a.shape()[d + 1..]);
    }
    Ok(vec![clang::reshape(&a, shape)?])
}

pub fn unflatten(a: &Tensor, dim: i64, sizes: &[i64]) -> Result<Tensor> {
    call1(
        "ltorch.unflatten",
        vec![
            Arg::Value(a.value()),
            Arg::Int(dim),
            Arg::Ints(sizes.to_vec()),
        ],
    )
}
