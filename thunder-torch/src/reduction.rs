//! Reductions: sum, amax, mean, prod, amin, max/min (with indices), argmax/argmin, var, std,
//! var_mean, all/any, the vector norm, and softmax (a row reduction).

use crate::elementwise::{div, exp, mul, ne, require_float, sub, to, upcast};
use crate::{call, call1, CallArgs};
use thunder_core::clang::{self, Operand, Promotion};
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Error, Result};
use thunder_core::ir::Arg;
use thunder_core::prims::{prim1, Prim};
use thunder_core::tensor::Tensor;
use thunder_core::trace_ctx::{bind, sticky};

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

pub(super) fn dims_arg(dims: Option<&[i64]>) -> Arg {
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

/// Variance over `dims` with `correction` (1 = unbiased), as torch.var.
fn variance(c: &CallArgs) -> Result<Tensor> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    require_float(c.op, &a)?;
    let dims = c.opt_ints(1)?.filter(|d| !d.is_empty());
    let dims = clang::reduction_dims(c.op, dims.as_deref(), a.rank())?;
    let correction = c.int(2)?;
    let keepdim = c.bool(3)?;
    let n: i64 = dims.iter().map(|&d| a.shape()[d as usize]).product();
    let x = upcast(&a)?;
    let mean = mul(&clang::reduce(Prim::Sum, &x, &dims, true)?, 1.0 / n as f64)?;
    let centered = sub(&x, &mean)?;
    let ss = clang::reduce(Prim::Sum, &mul(&centered, &centered)?, &dims, keepdim)?;
    // torch gives inf/nan when n <= correction; dividing by max(0, n - correction) does the same.
    let var = div(&ss, (n - correction).max(0) as f64)?;
    to(&var, a.dtype())
}

pub(crate) fn var_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    Ok(vec![variance(c)?])
}

pub(crate) fn std_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    let v = variance(c)?;
    let a = c.tensor(0)?;
    Ok(vec![to(
        &crate::elementwise::sqrt(&upcast(&v)?)?,
        a.dtype(),
    )?])
}

pub fn var(a: &Tensor, dims: Option<&[i64]>, correction: i64, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.var",
        vec![
            Arg::Value(a.value()),
            dims_arg(dims),
            Arg::Int(correction),
            Arg::Bool(keepdim),
        ],
    )
}

pub fn std(a: &Tensor, dims: Option<&[i64]>, correction: i64, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.std",
        vec![
            Arg::Value(a.value()),
            dims_arg(dims),
            Arg::Int(correction),
            Arg::Bool(keepdim),
        ],
    )
}

/// all/any over `dims`: counts the nonzero elements.
fn logical_reduce(c: &CallArgs, all: bool) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let dims = c.opt_ints(1)?.filter(|d| !d.is_empty());
    let dims = clang::reduction_dims(c.op, dims.as_deref(), a.rank())?;
    let n: i64 = dims.iter().map(|&d| a.shape()[d as usize]).product();
    let nonzero = clang::convert(&ne(&a, 0i64)?, DType::I64)?;
    let count = clang::reduce(Prim::Sum, &nonzero, &dims, c.bool(2)?)?;
    let (prim, bound) = if all { (Prim::Eq, n) } else { (Prim::Gt, 0) };
    let out = clang::elementwise(
        c.op,
        prim,
        &[Operand::Tensor(count), Operand::Int(bound)],
        Promotion::AlwaysBool,
    )?;
    // torch keeps uint8 for all/any of a uint8 tensor (a legacy of uint8 masks).
    Ok(vec![if a.dtype() == DType::U8 {
        clang::convert(&out, DType::U8)?
    } else {
        out
    }])
}

pub(crate) fn all_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    logical_reduce(c, true)
}

pub(crate) fn any_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    logical_reduce(c, false)
}

pub fn all(a: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.all",
        vec![Arg::Value(a.value()), dims_arg(dims), Arg::Bool(keepdim)],
    )
}

pub fn any(a: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.any",
        vec![Arg::Value(a.value()), dims_arg(dims), Arg::Bool(keepdim)],
    )
}

/// Vector norm over `dims`: p = 2 (sqrt of the sum of squares), 1 (sum of |x|) or inf (max |x|).
pub(crate) fn norm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    require_float(c.op, &a)?;
    let p = match c.args.get(1) {
        Some(Arg::Float(p)) => *p,
        Some(Arg::Int(p)) => *p as f64,
        other => bail_op!(c.op, "p must be a number, got {other:?}"),
    };
    let dims = c.opt_ints(2)?.filter(|d| !d.is_empty());
    let dims = clang::reduction_dims(c.op, dims.as_deref(), a.rank())?;
    let keepdim = c.bool(3)?;
    let x = upcast(&a)?;
    let ax = crate::elementwise::abs(&x)?;
    let out = if p == 2.0 {
        crate::elementwise::sqrt(&clang::reduce(Prim::Sum, &mul(&x, &x)?, &dims, keepdim)?)?
    } else if p == 1.0 {
        clang::reduce(Prim::Sum, &ax, &dims, keepdim)?
    } else if p == f64::INFINITY {
        if dims.iter().any(|&d| a.shape()[d as usize] == 0) {
            bail_op!(c.op, "the inf-norm of an empty dim is undefined");
        }
        clang::reduce(Prim::Amax, &ax, &dims, keepdim)?
    } else {
        bail_op!(c.op, "p = {p} is not supported (2, 1 and inf are)");
    };
    Ok(vec![to(&out, a.dtype())?])
}

pub fn norm(a: &Tensor, p: f64, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    call1(
        "ltorch.norm",
        vec![
            Arg::Value(a.value()),
            Arg::Float(p),
            dims_arg(dims),
            Arg::Bool(keepdim),
        ],
    )
}

pub(super) fn value(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

pub(super) fn opt_int(c: &CallArgs, i: usize) -> Result<Option<i64>> {
    match c.args.get(i) {
        Some(Arg::None) => Ok(None),
        _ => c.int(i).map(Some),
    }
}

pub(super) fn opt_dtype(c: &CallArgs, i: usize) -> Result<Option<DType>> {
    match c.args.get(i) {
        Some(Arg::None) => Ok(None),
        _ => c.dtype(i).map(Some),
    }
}

/// Binds a prim with several outputs.
pub(super) fn prim_n(prim: Prim, args: Vec<Arg>) -> Result<Vec<Tensor>> {
    bind(thunder_core::ir::prim_symbol(prim), args)
}

/// Two outputs of a multi-output ltorch op.
pub(super) fn call2(id: &str, args: Vec<Arg>) -> Result<(Tensor, Tensor)> {
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
pub(super) fn at_least_1d(a: &Tensor) -> Result<Tensor> {
    if a.rank() == 0 {
        clang::reshape(a, vec![1])
    } else {
        Ok(a.clone())
    }
}

/// Reinserts `dim` as a size-1 dim when `keepdim` (the prim removed it).
pub(super) fn keep(out: &Tensor, shape: &[i64], dim: usize, keepdim: bool) -> Result<Tensor> {
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
