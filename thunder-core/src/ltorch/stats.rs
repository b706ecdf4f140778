//! More reductions and their index-returning kin: prod, amin, max/min, argmax/argmin,
//! var_mean, cumsum, topk and sort.

use super::elementwise::{to, upcast};
use super::{call, call1, CallArgs};
use crate::clang;
use crate::dtype::{self, DType};
use crate::error::{bail_op, Error, Result};
use crate::ir::Arg;
use crate::prims::{prim1, Prim};
use crate::tensor::Tensor;
use crate::trace_ctx::{bind, sticky};

fn value(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

fn opt_int(c: &CallArgs, i: usize) -> Result<Option<i64>> {
    match c.args.get(i) {
        Some(Arg::None) => Ok(None),
        _ => c.int(i).map(Some),
    }
}

fn opt_dtype(c: &CallArgs, i: usize) -> Result<Option<DType>> {
    match c.args.get(i) {
        Some(Arg::None) => Ok(None),
        _ => c.dtype(i).map(Some),
    }
}

/// Binds a prim with several outputs.
fn prim_n(prim: Prim, args: Vec<Arg>) -> Result<Vec<Tensor>> {
    bind(crate::ir::prim_symbol(prim), args)
}

/// Two outputs of a multi-output ltorch op.
fn call2(id: &str, args: Vec<Arg>) -> Result<(Tensor, Tensor)> {
    let mut outs = call(id, args)?;
    match (outs.pop(), outs.pop()) {
        (Some(second), Some(first)) if outs.is_empty() => Ok((first, second)),
        _ => Err(Error::Bug(format!("{id} did not return two outputs"))),
    }
}

/// For `Tensor` methods that return a pair: the first error poisons both.
pub(crate) fn sticky2(r: Result<(Tensor, Tensor)>) -> (Tensor, Tensor) {
    match r {
        Ok(pair) => pair,
        Err(e) => {
            let p = sticky(Err(e));
            (p.clone(), p)
        }
    }
}

/// A 0-d tensor as `[1]`, so a prim that takes a dim can run on it (torch treats dim 0 and
/// -1 of a scalar as that one element); the caller reshapes back.
fn at_least_1d(a: &Tensor) -> Result<Tensor> {
    if a.rank() == 0 {
        clang::reshape(a, vec![1])
    } else {
        Ok(a.clone())
    }
}

/// Reinserts `dim` as a size-1 dim when `keepdim` (the prim removed it).
fn keep(out: &Tensor, shape: &[i64], dim: usize, keepdim: bool) -> Result<Tensor> {
    let mut kept = shape.to_vec();
    if keepdim {
        if let Some(d) = kept.get_mut(dim) {
            *d = 1;
        }
    } else if !kept.is_empty() {
        kept.remove(dim);
    }
    clang::reshape(out, kept)
}

pub(crate) fn prod_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let dims = match opt_int(c, 1)? {
        None => clang::reduction_dims(c.op, None, a.rank())?,
        Some(d) => clang::reduction_dims(c.op, Some(&[d]), a.rank())?,
    };
    // As torch: bools and ints multiply as i64; f16/bf16 in f32, rounded once.
    let (compute, result) = match a.dtype() {
        d if !dtype::is_float(d) => (DType::I64, DType::I64),
        d if dtype::is_low_precision(d) => (DType::F32, d),
        d => (d, d),
    };
    let out = clang::reduce(Prim::Prod, &clang::convert(&a, compute)?, &dims, c.bool(2)?)?;
    Ok(vec![clang::convert(&out, result)?])
}

/// Product over `dim` (`None`: all).
pub fn prod(a: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.prod",
        vec![
            value(a),
            dim.map_or(Arg::None, Arg::Int),
            Arg::Bool(keepdim),
        ],
    )
}

pub(crate) fn amin_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let dims = c.opt_ints(1)?.filter(|d| !d.is_empty());
    let dims = clang::reduction_dims(c.op, dims.as_deref(), a.rank())?;
    Ok(vec![clang::reduce(Prim::Amin, &a, &dims, c.bool(2)?)?])
}

pub fn amin(a: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.amin",
        vec![
            value(a),
            dims.map_or(Arg::None, |d| Arg::Ints(d.to_vec())),
            Arg::Bool(keepdim),
        ],
    )
}

/// `max(a)` (a full reduction) or `max(a, dim, keepdim)` (values and i64 indices); `min` alike.
fn extreme(c: &CallArgs, is_max: bool) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let (value_prim, index_prim) = if is_max {
        (Prim::Amax, Prim::Argmax)
    } else {
        (Prim::Amin, Prim::Argmin)
    };
    let Some(dim) = opt_int(c, 1)? else {
        if c.bool(2)? {
            bail_op!(c.op, "keepdim=True needs a dim (argument 1 is None)");
        }
        let all: Vec<i64> = (0..a.rank() as i64).collect();
        if a.numel() == 0 {
            bail_op!(
                c.op,
                "argument 0 is empty ({}): the extremum of nothing is undefined; give a dim",
                a.ty()
            );
        }
        return Ok(vec![clang::reduce(value_prim, &a, &all, false)?]);
    };
    let d = clang::canonical_dim(c.op, dim, a.rank())?;
    let x = at_least_1d(&a)?;
    if x.shape()[d] == 0 {
        bail_op!(
            c.op,
            "dim {dim} of argument 0 ({}) has size 0: the extremum of nothing is undefined",
            a.ty()
        );
    }
    let keepdim = c.bool(2)?;
    let indices = prim1(index_prim, vec![value(&x), Arg::Int(d as i64)])?;
    // The values are read at the indices (not reduced again), so the gradient goes to the
    // chosen element only, as torch's, rather than being shared among ties.
    let mut one = x.shape().to_vec();
    one[d] = 1;
    let picked = prim1(
        Prim::TakeAlongAxis,
        vec![
            value(&x),
            value(&clang::reshape(&indices, one)?),
            Arg::Int(d as i64),
        ],
    )?;
    let values = clang::reshape(&picked, indices.shape().to_vec())?;
    Ok(vec![
        keep(&values, a.shape(), d, keepdim)?,
        keep(&indices, a.shape(), d, keepdim)?,
    ])
}

pub(crate) fn max_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    extreme(c, true)
}

pub(crate) fn min_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    extreme(c, false)
}

/// The maximum of every element (`torch.max(a)`).
pub fn max(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.max", vec![value(a), Arg::None, Arg::Bool(false)])
}

/// `torch.max(a, dim, keepdim)`: the maxima along `dim` and their first indices.
pub fn max_dim(a: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    call2(
        "ltorch.max",
        vec![value(a), Arg::Int(dim), Arg::Bool(keepdim)],
    )
}

pub fn min(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.min", vec![value(a), Arg::None, Arg::Bool(false)])
}

pub fn min_dim(a: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    call2(
        "ltorch.min",
        vec![value(a), Arg::Int(dim), Arg::Bool(keepdim)],
    )
}

fn arg_extreme(c: &CallArgs, prim: Prim) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    if a.dtype() == DType::Bool {
        bail_op!(c.op, "argument 0 must not be b8 (as torch)");
    }
    let keepdim = c.bool(2)?;
    let (x, d, shape) = match opt_int(c, 1)? {
        // As torch: no dim means the index into the flattened tensor.
        None => (
            clang::reshape(&a, vec![a.numel() as i64])?,
            0,
            vec![a.numel() as i64],
        ),
        Some(dim) => (
            at_least_1d(&a)?,
            clang::canonical_dim(c.op, dim, a.rank())?,
            a.shape().to_vec(),
        ),
    };
    if x.shape()[d] == 0 {
        bail_op!(
            c.op,
            "argument 0 ({}) is empty along the reduced dim: the index of the extremum of nothing is undefined",
            a.ty()
        );
    }
    let out = prim1(prim, vec![value(&x), Arg::Int(d as i64)])?;
    match opt_int(c, 1)? {
        None if keepdim => Ok(vec![clang::reshape(&out, vec![1; a.rank()])?]),
        None => Ok(vec![out]),
        Some(_) => Ok(vec![keep(&out, &shape, d, keepdim)?]),
    }
}

pub(crate) fn argmax_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    arg_extreme(c, Prim::Argmax)
}

pub(crate) fn argmin_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    arg_extreme(c, Prim::Argmin)
}

/// Index of the first maximum along `dim` (`None`: of the flattened tensor), as i64.
pub fn argmax(a: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.argmax",
        vec![
            value(a),
            dim.map_or(Arg::None, Arg::Int),
            Arg::Bool(keepdim),
        ],
    )
}

pub fn argmin(a: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.argmin",
        vec![
            value(a),
            dim.map_or(Arg::None, Arg::Int),
            Arg::Bool(keepdim),
        ],
    )
}

pub(crate) fn var_mean_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    if !dtype::is_float(a.dtype()) {
        bail_op!(
            c.op,
            "argument 0 must be floating point, got {} (as torch: var and std only support floating point)",
            a.dtype().short_name()
        );
    }
    let dims = c.opt_ints(1)?.filter(|d| !d.is_empty());
    let dims = clang::reduction_dims(c.op, dims.as_deref(), a.rank())?;
    let correction = match c.args.get(2) {
        Some(Arg::Int(v)) => Arg::Int(*v),
        Some(Arg::Float(v)) => Arg::Float(*v),
        other => bail_op!(
            c.op,
            "argument 2 (correction) must be a number, got {other:?}"
        ),
    };
    let keepdim = c.bool(3)?;
    let outs = prim_n(
        Prim::VarMean,
        vec![value(&upcast(&a)?), Arg::Ints(dims.clone()), correction],
    )?;
    let kept: Vec<i64> = a
        .shape()
        .iter()
        .enumerate()
        .map(|(i, &d)| if dims.contains(&(i as i64)) { 1 } else { d })
        .collect();
    outs.iter()
        .map(|t| {
            let t = to(t, a.dtype())?;
            if keepdim {
                clang::reshape(&t, kept.clone())
            } else {
                Ok(t)
            }
        })
        .collect()
}

/// `torch.var_mean(a, dims, correction=, keepdim=)`: (variance, mean).
pub fn var_mean(
    a: &Tensor,
    dims: Option<&[i64]>,
    correction: i64,
    keepdim: bool,
) -> Result<(Tensor, Tensor)> {
    call2(
        "ltorch.var_mean",
        vec![
            value(a),
            dims.map_or(Arg::None, |d| Arg::Ints(d.to_vec())),
            Arg::Int(correction),
            Arg::Bool(keepdim),
        ],
    )
}

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

/// `torch.polygamma(n, a)` for `n` 0 (digamma) and 1 (trigamma), the orders with prims.
pub(crate) fn polygamma_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let prim = match c.int(0)? {
        0 => Prim::Digamma,
        1 => Prim::Trigamma,
        n => bail_op!(
            c.op,
            "argument 0 (n = {n}) must be 0 or 1 (higher orders are not implemented)"
        ),
    };
    Ok(vec![clang::unary(
        c.op,
        prim,
        &c.tensor(1)?,
        clang::Promotion::IntToFloat,
    )?])
}

pub fn polygamma(n: i64, a: &Tensor) -> Result<Tensor> {
    call1("ltorch.polygamma", vec![Arg::Int(n), value(a)])
}
