//! VJP rules of the prims that reduce or reorder along dims: prod, cumsum, and those with
//! several outputs (var_mean, topk, sort).

use super::{diff_tensor, ints, p2, scalar_f64, unreduce, v};
use crate::error::{Error, Result};
use crate::ir::Arg;
use crate::prims::{prim1, Prim};
use crate::tensor::Tensor;
use thunder_abi::prims::{PrimKind, ReductionPrim};

pub(super) fn int(arg: &Arg, prim: Prim) -> Result<i64> {
    match arg {
        Arg::Int(i) => Ok(*i),
        other => Err(Error::Bug(format!(
            "{}: expected an int, got {other:?}",
            prim.id()
        ))),
    }
}

fn where_(pred: &Tensor, a: Arg, b: Arg) -> Result<Tensor> {
    prim1(Prim::Where, vec![v(pred), a, b])
}

/// `prod`: `out / x` is wrong where `x` is 0, so zeros are counted per reduced slice. With no
/// zero the cotangent is `g * out / x`; with exactly one, the zero position gets `g` times the
/// product of the others and every other position 0 (`out` is 0); with more, everything is 0.
pub(super) fn prod(x: &Tensor, dims: &[i64], out: &Tensor, g: &Tensor) -> Result<Tensor> {
    let shape = x.shape();
    let is_zero = p2(Prim::Eq, v(x), Arg::Float(0.0))?;
    let safe = where_(&is_zero, Arg::Float(1.0), v(x))?;
    let zeros = crate::clang::convert(&is_zero, x.dtype())?;
    let count = unreduce(
        &prim1(Prim::Sum, vec![v(&zeros), Arg::Ints(dims.to_vec())])?,
        shape,
        dims,
    )?;
    let others = unreduce(
        &prim1(Prim::Prod, vec![v(&safe), Arg::Ints(dims.to_vec())])?,
        shape,
        dims,
    )?;
    let single_zero = p2(Prim::Eq, v(&count), Arg::Float(1.0))?;
    let at_zero = where_(&single_zero, v(&others), Arg::Float(0.0))?;
    let elsewhere = p2(Prim::Div, v(&unreduce(out, shape, dims)?), v(&safe))?;
    let d = where_(&is_zero, v(&at_zero), v(&elsewhere))?;
    p2(Prim::Mul, v(&unreduce(g, shape, dims)?), v(&d))
}

/// `cumsum`: the cotangent of `x[i]` is `sum_{j >= i} g[j]`, computed as
/// `sum(g) - cumsum(g) + g` (no flip needed; exact in the f64 reference, within rounding of
/// the row total otherwise).
pub(super) fn cumsum(dim: i64, g: &Tensor) -> Result<Tensor> {
    let total = unreduce(
        &prim1(Prim::Sum, vec![v(g), Arg::Ints(vec![dim])])?,
        g.shape(),
        &[dim],
    )?;
    let running = prim1(Prim::Cumsum, vec![v(g), Arg::Int(dim)])?;
    p2(Prim::Add, v(&p2(Prim::Sub, v(&total), v(&running))?), v(g))
}

/// Cotangents of the arguments of a prim with several outputs; `gs[i]` is the cotangent of
/// output `i`, `None` where nothing downstream reads it.
pub fn multi_output_vjp(
    prim: Prim,
    args: &[Arg],
    outs: &[Tensor],
    gs: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    let Some(x) = args.first().map(diff_tensor).transpose()?.flatten() else {
        return Ok(vec![None; args.len()]);
    };
    let mut cots: Vec<Option<Tensor>> = vec![None; args.len()];
    match prim.kind() {
        PrimKind::Reduction(ReductionPrim::VarMean) => {
            let dims = ints(&args[1], prim)?;
            let correction = scalar_f64(&args[2]).unwrap_or(1.0);
            let n: i64 = dims.iter().map(|&d| x.shape()[d as usize]).product();
            let mean = outs
                .get(1)
                .ok_or_else(|| Error::Bug("var_mean: missing mean output".into()))?;
            let mut total: Option<Tensor> = None;
            if let Some(Some(g_var)) = gs.first() {
                // d var / dx = 2 (x - mean) / (N - correction)
                let centered = p2(Prim::Sub, v(&x), v(&unreduce(mean, x.shape(), &dims)?))?;
                let scale = 2.0 / (n as f64 - correction).max(0.0);
                let gv = p2(
                    Prim::Mul,
                    v(&unreduce(g_var, x.shape(), &dims)?),
                    v(&centered),
                )?;
                total = Some(p2(Prim::Mul, v(&gv), Arg::Float(scale))?);
            }
            if let Some(Some(g_mean)) = gs.get(1) {
                let gm = p2(
                    Prim::Div,
                    v(&unreduce(g_mean, x.shape(), &dims)?),
                    Arg::Float(n as f64),
                )?;
                total = Some(match total {
                    Some(t) => p2(Prim::Add, v(&t), v(&gm))?,
                    None => gm,
                });
            }
            cots[0] = total;
        }
        PrimKind::Sort(_) => {
            // Only the values are differentiable; the indices route their cotangent back.
            if let Some(Some(g)) = gs.first() {
                let dim = int(&args[if prim == Prim::Topk { 2 } else { 1 }], prim)?;
                let indices = outs
                    .get(1)
                    .ok_or_else(|| Error::Bug(format!("{}: missing indices", prim.id())))?;
                cots[0] = Some(scatter_along(&x, dim, indices, g)?);
            }
        }
        PrimKind::Reduction(
            ReductionPrim::Sum
            | ReductionPrim::Amax
            | ReductionPrim::Prod
            | ReductionPrim::Amin
            | ReductionPrim::Argmax
            | ReductionPrim::Argmin,
        )
        | PrimKind::Unary(_)
        | PrimKind::Predicate(_)
        | PrimKind::Binary(_)
        | PrimKind::Compare(_)
        | PrimKind::Where(_)
        | PrimKind::Convert(_)
        | PrimKind::Shape(_)
        | PrimKind::Indexing(_)
        | PrimKind::Scan(_)
        | PrimKind::Conv(_)
        | PrimKind::Random(_)
        | PrimKind::Matmul(_)
        | PrimKind::Factory(_) => {
            return Err(Error::Bug(format!(
                "{} does not have several outputs",
                prim.id()
            )))
        }
    }
    Ok(cots)
}

/// A tensor shaped like `x` holding `g[..., j, ...]` at `x[..., indices[..., j, ...], ...]`
/// along `dim` (the indices of a sort or topk are distinct per row, so nothing collides).
fn scatter_along(x: &Tensor, dim: i64, indices: &Tensor, g: &Tensor) -> Result<Tensor> {
    let zeros = crate::clang::full(x.shape().to_vec(), Arg::Float(0.0), x.device(), g.dtype())?;
    crate::clang::scatter_add(&zeros, indices, g, dim as usize)
}
