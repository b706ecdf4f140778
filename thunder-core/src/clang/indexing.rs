//! Builders for the data-movement prims (slice, pad, cat, flip, take, take_along_axis,
//! scatter_add, index_add). Like `reshape` and `transpose`, the structural ones record nothing
//! when they would not change their input, so composites do not leave identity ops behind.

use crate::error::{Error, Result};
use crate::ir::Arg;
use crate::prims::{prim1, Prim};
use crate::tensor::Tensor;

fn v(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

/// `lax.slice`: per dim, elements `start, start + stride, ...` below `end`.
pub fn slice(t: &Tensor, start: Vec<i64>, end: Vec<i64>, strides: Vec<i64>) -> Result<Tensor> {
    let whole = start.iter().all(|&s| s == 0)
        && end.as_slice() == t.shape()
        && strides.iter().all(|&s| s == 1);
    if whole {
        return Ok(t.clone());
    }
    prim1(
        Prim::Slice,
        vec![v(t), Arg::Ints(start), Arg::Ints(end), Arg::Ints(strides)],
    )
}

/// Elements `[start, end)` with step `step` of dim `dim` (already canonical and in range).
pub fn slice_in_dim(t: &Tensor, dim: usize, start: i64, end: i64, step: i64) -> Result<Tensor> {
    let rank = t.rank();
    let mut starts = vec![0; rank];
    let mut ends = t.shape().to_vec();
    let mut strides = vec![1; rank];
    let (s, e, st) = (starts.get_mut(dim), ends.get_mut(dim), strides.get_mut(dim));
    match (s, e, st) {
        (Some(s), Some(e), Some(st)) => {
            *s = start;
            *e = end;
            *st = step;
        }
        _ => {
            return Err(Error::Bug(format!(
                "slice_in_dim: dim {dim} of rank {rank}"
            )))
        }
    }
    slice(t, starts, ends, strides)
}

/// `lax.pad` with `config` the flat `[low, high, interior]` per dim.
pub fn pad(t: &Tensor, value: Arg, config: Vec<i64>) -> Result<Tensor> {
    if config.iter().all(|&c| c == 0) {
        return Ok(t.clone());
    }
    prim1(Prim::Pad, vec![v(t), value, Arg::Ints(config)])
}

/// Concatenation along a canonical `dim`; one tensor is returned as is.
pub fn cat(tensors: &[Tensor], dim: usize) -> Result<Tensor> {
    if let [only] = tensors {
        return Ok(only.clone());
    }
    let mut args = vec![Arg::Int(dim as i64)];
    args.extend(tensors.iter().map(v));
    prim1(Prim::Cat, args)
}

pub fn flip(t: &Tensor, dims: Vec<i64>) -> Result<Tensor> {
    // A bad dim goes to the prim, whose meta reports it.
    let trivial = |&d: &i64| {
        usize::try_from(d)
            .ok()
            .and_then(|d| t.shape().get(d))
            .is_some_and(|&size| size <= 1)
    };
    if dims.iter().all(trivial) {
        return Ok(t.clone());
    }
    prim1(Prim::Flip, vec![v(t), Arg::Ints(dims)])
}

pub fn take(a: &Tensor, index: &Tensor, dim: usize) -> Result<Tensor> {
    prim1(Prim::Take, vec![v(a), v(index), Arg::Int(dim as i64)])
}

pub fn take_along_axis(a: &Tensor, index: &Tensor, dim: usize) -> Result<Tensor> {
    prim1(
        Prim::TakeAlongAxis,
        vec![v(a), v(index), Arg::Int(dim as i64)],
    )
}

pub fn scatter_add(a: &Tensor, index: &Tensor, src: &Tensor, dim: usize) -> Result<Tensor> {
    prim1(
        Prim::ScatterAdd,
        vec![v(a), v(index), v(src), Arg::Int(dim as i64)],
    )
}

pub fn index_add(a: &Tensor, index: &Tensor, src: &Tensor, dim: usize) -> Result<Tensor> {
    prim1(
        Prim::IndexAdd,
        vec![v(a), v(index), v(src), Arg::Int(dim as i64)],
    )
}
