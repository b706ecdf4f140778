//! Composites over existing prims: rms_norm, mse_loss, masked_fill, tril/triu, var/std,
//! all/any, the `*_like` factories, flatten, squeeze and t.

use super::elementwise::{add, div, mul, ne, require_float, rsqrt, sub, to, upcast};
use super::nn::normalized_dims;
use super::{call1, CallArgs};
use crate::clang::{self, Operand, Promotion};
use crate::dtype::{self, DType};
use crate::error::{bail_op, Result};
use crate::ir::{Arg, ShapeDisplay};
use crate::prims::Prim;
use crate::tensor::Tensor;

/// `x / sqrt(mean(x^2 over normalized_shape) + eps) * weight`; `eps = None` is the dtype's
/// machine epsilon, as torch's rms_norm.
pub(crate) fn rms_norm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    require_float(c.op, &a)?;
    let (norm, dims) = normalized_dims(c, &a)?;
    let eps = match c.args.get(3) {
        Some(Arg::Float(e)) => *e,
        Some(Arg::None) => match a.dtype() {
            DType::F16 => 9.765625e-4,
            DType::BF16 => 7.8125e-3,
            DType::F64 => f64::EPSILON,
            _ => f32::EPSILON as f64,
        },
        other => bail_op!(
            c.op,
            "argument 3 (eps) must be a float or None, got {other:?}"
        ),
    };
    let count: i64 = norm.iter().product();
    let x = upcast(&a)?;
    let ms = mul(
        &clang::reduce(Prim::Sum, &mul(&x, &x)?, &dims, true)?,
        1.0 / count.max(1) as f64,
    )?;
    let mut y = mul(&x, rsqrt(&add(&ms, eps)?)?)?;
    if let Some(w) = c.opt_tensor(2)? {
        y = mul(&y, &w)?;
    }
    Ok(vec![to(&y, a.dtype())?])
}

pub fn rms_norm(
    a: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Result<Tensor> {
    call1(
        "ltorch.rms_norm",
        vec![
            Arg::Value(a.value()),
            Arg::Ints(normalized_shape.to_vec()),
            weight.map_or(Arg::None, |w| Arg::Value(w.value())),
            eps.map_or(Arg::None, Arg::Float),
        ],
    )
}

/// Mean squared error over all elements.
pub(crate) fn mse_loss_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let (a, b) = (c.tensor(0)?, c.tensor(1)?);
    require_float(c.op, &a)?;
    let d = sub(&a, &b)?;
    let sq = mul(&d, &d)?;
    Ok(vec![super::reduction::mean(&sq, None, false)?])
}

pub fn mse_loss(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    call1(
        "ltorch.mse_loss",
        vec![Arg::Value(a.value()), Arg::Value(b.value())],
    )
}

/// `where(mask, value, a)`, keeping `a`'s dtype.
pub(crate) fn masked_fill_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let (a, mask) = (c.tensor(0)?, c.tensor(1)?);
    if mask.dtype() != DType::Bool {
        bail_op!(c.op, "mask must be b8, got {}", mask.dtype().short_name());
    }
    let value = c.operand(2)?;
    let value = match value {
        Operand::Tensor(t) if t.rank() != 0 => bail_op!(
            c.op,
            "value must be a number or a 0-d tensor, got {}",
            ShapeDisplay(t.shape())
        ),
        Operand::Tensor(t) => Operand::Tensor(clang::convert(&t, a.dtype())?),
        Operand::Float(x) if !dtype::is_float(a.dtype()) => Operand::Int(x as i64),
        other => other,
    };
    let out = clang::where_(c.op, &mask, &value, &Operand::Tensor(a.clone()))?;
    Ok(vec![clang::convert(&out, a.dtype())?])
}

pub fn masked_fill(a: &Tensor, mask: &Tensor, value: impl Into<Operand>) -> Result<Tensor> {
    call1(
        "ltorch.masked_fill",
        vec![
            Arg::Value(a.value()),
            Arg::Value(mask.value()),
            value.into().to_arg(),
        ],
    )
}

/// Keeps elements on and below (`lower`) or above the `diagonal`-th diagonal of the last two dims.
fn triangle(c: &CallArgs, lower: bool) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    let k = c.int(1)?;
    if a.rank() < 2 {
        bail_op!(
            c.op,
            "expected a tensor with at least 2 dims, got {}",
            ShapeDisplay(a.shape())
        );
    }
    let (rows, cols) = (a.shape()[a.rank() - 2], a.shape()[a.rank() - 1]);
    let (row, col) = clang::index_grid(rows, cols, a.device())?;
    // col - row <= k keeps the lower triangle; col - row >= k the upper.
    let diff = sub(&col, &row)?;
    let keep = if lower {
        super::elementwise::le(&diff, k)?
    } else {
        super::elementwise::ge(&diff, k)?
    };
    let zero = if dtype::is_float(a.dtype()) {
        Operand::Float(0.0)
    } else if a.dtype() == DType::Bool {
        Operand::Bool(false)
    } else {
        Operand::Int(0)
    };
    let out = clang::where_(c.op, &keep, &Operand::Tensor(a.clone()), &zero)?;
    Ok(vec![clang::convert(&out, a.dtype())?])
}

pub(crate) fn tril_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    triangle(c, true)
}

pub(crate) fn triu_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    triangle(c, false)
}

pub fn tril(a: &Tensor, diagonal: i64) -> Result<Tensor> {
    call1(
        "ltorch.tril",
        vec![Arg::Value(a.value()), Arg::Int(diagonal)],
    )
}

pub fn triu(a: &Tensor, diagonal: i64) -> Result<Tensor> {
    call1(
        "ltorch.triu",
        vec![Arg::Value(a.value()), Arg::Int(diagonal)],
    )
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
        &super::elementwise::sqrt(&upcast(&v)?)?,
        a.dtype(),
    )?])
}

fn dims_arg(dims: Option<&[i64]>) -> Arg {
    dims.map_or(Arg::None, |d| Arg::Ints(d.to_vec()))
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

fn like(c: &CallArgs, fill: Arg) -> Result<Vec<Tensor>> {
    let a = c.tensor(0)?;
    let fill = match (&fill, dtype::category(a.dtype())) {
        (Arg::Float(x), dtype::Category::Int) => Arg::Int(*x as i64),
        (Arg::Float(x), dtype::Category::Bool) => Arg::Bool(*x != 0.0),
        (Arg::Int(i), dtype::Category::Bool) => Arg::Bool(*i != 0),
        (Arg::Int(i), dtype::Category::Float) => Arg::Float(*i as f64),
        (Arg::Bool(b), dtype::Category::Float) => Arg::Float(*b as i64 as f64),
        (Arg::Bool(b), dtype::Category::Int) => Arg::Int(*b as i64),
        _ => fill,
    };
    Ok(vec![clang::full(
        a.shape().to_vec(),
        fill,
        a.device(),
        a.dtype(),
    )?])
}

pub(crate) fn zeros_like_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    like(c, Arg::Int(0))
}

pub(crate) fn ones_like_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    like(c, Arg::Int(1))
}

pub(crate) fn full_like_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    like(c, c.number(1)?)
}

pub fn zeros_like(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.zeros_like", vec![Arg::Value(a.value())])
}

pub fn ones_like(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.ones_like", vec![Arg::Value(a.value())])
}

pub fn full_like(a: &Tensor, fill: impl Into<Arg>) -> Result<Tensor> {
    call1("ltorch.full_like", vec![Arg::Value(a.value()), fill.into()])
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

/// Batched matmul of two 3-D tensors with equal batch sizes, as torch.bmm.
pub(crate) fn bmm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let (a, b) = (c.tensor(0)?, c.tensor(1)?);
    if a.rank() != 3 || b.rank() != 3 || a.shape()[0] != b.shape()[0] {
        bail_op!(
            c.op,
            "expected [B, N, K] and [B, K, M], got {} and {}",
            ShapeDisplay(a.shape()),
            ShapeDisplay(b.shape())
        );
    }
    Ok(vec![super::linalg::matmul(&a, &b)?])
}

pub fn bmm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    call1(
        "ltorch.bmm",
        vec![Arg::Value(a.value()), Arg::Value(b.value())],
    )
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
    let ax = super::elementwise::abs(&x)?;
    let out = if p == 2.0 {
        super::elementwise::sqrt(&clang::reduce(Prim::Sum, &mul(&x, &x)?, &dims, keepdim)?)?
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
