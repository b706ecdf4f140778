//! Meta rules of the data-movement prims: slice, pad, cat, flip, take, take_along_axis,
//! scatter_add and index_add. Dims are canonical (ltorch wraps negative ones); each message
//! names the prim and the offending argument. Index values are only known at run time, so an
//! out-of-range index is the executor's error, not this one's.

use super::{expect_arity, ints_arg, scalar_fits, tensor, Types};
use crate::dtype;
use crate::error::{bail_op, Error, Result};
use crate::ir::{Arg, ShapeDisplay, TensorType};
use thunder_abi::prims::IndexingPrim;

pub(super) fn meta(prim: IndexingPrim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    match prim {
        IndexingPrim::Slice => slice(op, args, types),
        IndexingPrim::Pad => pad(op, args, types),
        IndexingPrim::Cat => cat(op, args, types),
        IndexingPrim::Flip => flip(op, args, types),
        IndexingPrim::Take => take(op, args, types),
        IndexingPrim::TakeAlongAxis => take_along_axis(op, args, types),
        IndexingPrim::ScatterAdd => scatter_add(op, args, types),
        IndexingPrim::IndexAdd => index_add(op, args, types),
    }
}

fn int_arg(op: &str, args: &[Arg], i: usize, what: &str) -> Result<i64> {
    match args.get(i) {
        Some(Arg::Int(v)) => Ok(*v),
        other => Err(Error::op(
            op,
            format!("argument {i} ({what}) must be an int, got {other:?}"),
        )),
    }
}

/// `dim` of a tensor of rank `rank`, in `[0, rank)`.
fn dim_arg(op: &str, args: &[Arg], i: usize, a: &TensorType) -> Result<usize> {
    let dim = int_arg(op, args, i, "dim")?;
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

fn same_device(op: &str, a: &TensorType, b: &TensorType, what: &str) -> Result<()> {
    if a.device != b.device {
        bail_op!(
            op,
            "{what} is on {} but the input is on {}",
            b.device,
            a.device
        );
    }
    Ok(())
}

fn same_dtype(op: &str, a: &TensorType, b: &TensorType, what: &str) -> Result<()> {
    if a.dtype != b.dtype {
        bail_op!(
            op,
            "{what} has dtype {} but the input has {} (prims do not promote)",
            b.dtype.short_name(),
            a.dtype.short_name()
        );
    }
    Ok(())
}

/// An index tensor: an integer dtype (not b8), on the input's device.
fn index_tensor<'a>(
    op: &str,
    types: &'a [Option<TensorType>],
    i: usize,
    a: &TensorType,
) -> Result<&'a TensorType> {
    let index = tensor(op, types, i)?;
    if dtype::int_range(index.dtype).is_none() {
        bail_op!(
            op,
            "index (argument {i}) must have an integer dtype, got {}",
            index.dtype.short_name()
        );
    }
    same_device(op, a, index, "index")?;
    Ok(index)
}

fn rank_at_least_one(op: &str, a: &TensorType, what: &str) -> Result<()> {
    if a.rank() == 0 {
        bail_op!(op, "{what} must have rank >= 1, got a 0-d tensor");
    }
    Ok(())
}

fn per_dim<'a>(op: &str, args: &'a [Arg], i: usize, what: &str, rank: usize) -> Result<&'a [i64]> {
    let v = ints_arg(op, args, i, what)?;
    if v.len() != rank {
        bail_op!(
            op,
            "{what} {v:?} must have one entry per dim ({rank}), got {}",
            v.len()
        );
    }
    Ok(v)
}

fn slice(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 4)?;
    let a = tensor(op, types, 0)?;
    let start = per_dim(op, args, 1, "start", a.rank())?;
    let end = per_dim(op, args, 2, "end", a.rank())?;
    let strides = per_dim(op, args, 3, "strides", a.rank())?;
    let mut shape = Vec::with_capacity(a.rank());
    for d in 0..a.rank() {
        let (s, e, st, size) = (start[d], end[d], strides[d], a.shape[d]);
        if st < 1 {
            bail_op!(
                op,
                "strides {strides:?}: dim {d} has stride {st}, expected >= 1"
            );
        }
        if s < 0 || s > e || e > size {
            bail_op!(
                op,
                "start {start:?} / end {end:?} out of range for {}: dim {d} needs 0 <= start ({s}) <= end ({e}) <= {size}",
                ShapeDisplay(&a.shape)
            );
        }
        // ceil((e - s) / st), written so a huge stride cannot overflow.
        shape.push(if e == s { 0 } else { (e - s - 1) / st + 1 });
    }
    Ok(TensorType::new(shape, a.dtype, a.device))
}

fn pad(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 3)?;
    let a = tensor(op, types, 0)?;
    if types[1].is_some() {
        bail_op!(
            op,
            "padding value (argument 1) must be a number, not a tensor"
        );
    }
    scalar_fits(op, &args[1], a.dtype).map_err(|e| match e {
        Error::Op { kind, .. } => Error::op(op, format!("padding value (argument 1): {kind}")),
        other => other,
    })?;
    let config = ints_arg(op, args, 2, "config")?;
    if config.len() != 3 * a.rank() {
        bail_op!(
            op,
            "config {config:?} must hold (low, high, interior) for each of the {} dims",
            a.rank()
        );
    }
    let mut shape = Vec::with_capacity(a.rank());
    for (d, c) in config.chunks(3).enumerate() {
        let (lo, hi, interior, size) = (c[0], c[1], c[2], a.shape[d]);
        if interior < 0 {
            bail_op!(
                op,
                "config: dim {d} has interior padding {interior}, expected >= 0"
            );
        }
        // In i128: literals from trace text may be anywhere in i64.
        let n = i128::from(lo)
            + i128::from(hi)
            + i128::from(size)
            + i128::from((size - 1).max(0)) * i128::from(interior);
        if n < 0 || n > i128::from(i64::MAX) {
            bail_op!(
                op,
                "config: dim {d} of {} with (low, high, interior) = ({lo}, {hi}, {interior}) would have size {n}",
                ShapeDisplay(&a.shape)
            );
        }
        shape.push(n as i64);
    }
    Ok(TensorType::new(shape, a.dtype, a.device))
}

fn cat(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    if args.len() < 2 {
        bail_op!(
            op,
            "expects a dim and at least one tensor, got {} arguments",
            args.len()
        );
    }
    let first = tensor(op, types, 1)?;
    if first.rank() == 0 {
        bail_op!(
            op,
            "tensor 0 is 0-d; zero-dimensional tensors cannot be concatenated"
        );
    }
    let dim = dim_arg(op, args, 0, first)?;
    let mut size = 0i64;
    for i in 1..args.len() {
        let t = tensor(op, types, i)?;
        let k = i - 1;
        same_dtype(op, first, t, &format!("tensor {k}"))?;
        same_device(op, first, t, &format!("tensor {k}"))?;
        let matches = t.rank() == first.rank()
            && (0..t.rank()).all(|d| d == dim || t.shape[d] == first.shape[d]);
        if !matches {
            bail_op!(
                op,
                "tensor {k} has shape {} but tensor 0 has {}: sizes must match except in dim {dim}",
                ShapeDisplay(&t.shape),
                ShapeDisplay(&first.shape)
            );
        }
        size += t.shape[dim];
    }
    let mut shape = first.shape.clone();
    shape[dim] = size;
    Ok(TensorType::new(shape, first.dtype, first.device))
}

fn flip(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 2)?;
    let a = tensor(op, types, 0)?;
    let dims = ints_arg(op, args, 1, "dims")?;
    let mut seen = vec![false; a.rank()];
    for &d in dims {
        if d < 0 || d as usize >= a.rank() || seen[d as usize] {
            bail_op!(
                op,
                "dims {dims:?} must be distinct and in [0, {})",
                a.rank()
            );
        }
        seen[d as usize] = true;
    }
    Ok(a.clone())
}

fn take(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 3)?;
    let a = tensor(op, types, 0)?;
    rank_at_least_one(op, a, "input")?;
    let index = index_tensor(op, types, 1, a)?;
    if index.rank() != 1 {
        bail_op!(
            op,
            "index must be 1-D, got shape {}",
            ShapeDisplay(&index.shape)
        );
    }
    let dim = dim_arg(op, args, 2, a)?;
    let mut shape = a.shape.clone();
    shape[dim] = index.shape[0];
    Ok(TensorType::new(shape, a.dtype, a.device))
}

/// `index`'s size may not exceed `limit`'s in any dim but `skip`.
fn index_fits(
    op: &str,
    index: &TensorType,
    limit: &TensorType,
    skip: Option<usize>,
    what: &str,
) -> Result<()> {
    if index.rank() != limit.rank() {
        bail_op!(
            op,
            "index has rank {} but {what} has rank {}",
            index.rank(),
            limit.rank()
        );
    }
    for d in 0..index.rank() {
        if Some(d) != skip && index.shape[d] > limit.shape[d] {
            bail_op!(
                op,
                "index {} is larger than {what} {} in dim {d}",
                ShapeDisplay(&index.shape),
                ShapeDisplay(&limit.shape)
            );
        }
    }
    Ok(())
}

fn take_along_axis(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 3)?;
    let a = tensor(op, types, 0)?;
    rank_at_least_one(op, a, "input")?;
    let index = index_tensor(op, types, 1, a)?;
    let dim = dim_arg(op, args, 2, a)?;
    index_fits(op, index, a, Some(dim), "the input")?;
    Ok(TensorType::new(index.shape.clone(), a.dtype, a.device))
}

fn src_tensor<'a>(
    op: &str,
    types: &'a [Option<TensorType>],
    a: &TensorType,
) -> Result<&'a TensorType> {
    let src = tensor(op, types, 2)?;
    same_dtype(op, a, src, "src")?;
    same_device(op, a, src, "src")?;
    Ok(src)
}

fn scatter_add(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 4)?;
    let a = tensor(op, types, 0)?;
    rank_at_least_one(op, a, "input")?;
    let index = index_tensor(op, types, 1, a)?;
    let src = src_tensor(op, types, a)?;
    let dim = dim_arg(op, args, 3, a)?;
    index_fits(op, index, src, None, "src")?;
    index_fits(op, index, a, Some(dim), "the input")?;
    Ok(a.clone())
}

fn index_add(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 4)?;
    let a = tensor(op, types, 0)?;
    rank_at_least_one(op, a, "input")?;
    let index = index_tensor(op, types, 1, a)?;
    if index.rank() != 1 {
        bail_op!(
            op,
            "index must be 1-D, got shape {}",
            ShapeDisplay(&index.shape)
        );
    }
    let src = src_tensor(op, types, a)?;
    let dim = dim_arg(op, args, 3, a)?;
    let mut expected = a.shape.clone();
    expected[dim] = index.shape[0];
    if src.shape != expected {
        bail_op!(
            op,
            "src has shape {} but must be {} (the input's shape with dim {dim} the index length)",
            ShapeDisplay(&src.shape),
            ShapeDisplay(&expected)
        );
    }
    Ok(a.clone())
}
