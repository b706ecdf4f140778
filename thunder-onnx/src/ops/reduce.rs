//! Reductions, arg-reductions and (log-)softmax.

use crate::error::Result;
use crate::node::NodeCtx;
use crate::value::Val;
use thunder_core::Tensor;
use thunder_torch as ltorch;

/// The reduced axes: input 1 from `since` on, else the `axes` attribute; `None` is all axes
/// (or none at all with `noop_with_empty_axes`, signalled by `Some(vec![])`).
fn reduce_axes(ctx: &NodeCtx, since: i64) -> Result<Option<Vec<i64>>> {
    let rank = ctx.rank(0)?;
    let given = if ctx.opset() >= since {
        if ctx.has_input(1) {
            Some(ctx.ints(1)?)
        } else {
            None
        }
    } else {
        ctx.attr_ints("axes")
    };
    match given {
        Some(a) if !a.is_empty() => Ok(Some(
            a.iter()
                .map(|&x| ctx.axis(x, rank))
                .collect::<Result<Vec<_>>>()?,
        )),
        _ if ctx.attr_i("noop_with_empty_axes", 0) == 1 => Ok(Some(vec![])),
        _ => Ok(None),
    }
}

type Reducer = fn(&Tensor, Option<&[i64]>, bool) -> thunder_core::Result<Tensor>;

fn reduce(ctx: &mut NodeCtx, since: i64, f: Reducer) -> Result<Vec<Val>> {
    let axes = reduce_axes(ctx, since)?;
    let keepdims = ctx.attr_i("keepdims", 1) == 1;
    let a = ctx.tensor(0)?;
    if axes.as_ref().is_some_and(|a| a.is_empty()) {
        return Ok(vec![Val::Traced(a)]);
    }
    if a.rank() == 0 {
        return Ok(vec![Val::Traced(a)]);
    }
    let y = f(&a, axes.as_deref(), keepdims)?;
    // torch sums and multiplies integers in i64; ONNX keeps the input's type.
    let y = if y.dtype() != a.dtype() {
        ltorch::to(&y, a.dtype())?
    } else {
        y
    };
    Ok(vec![Val::Traced(y)])
}

pub fn reduce_sum(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    reduce(ctx, 13, ltorch::sum)
}

pub fn reduce_mean(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    reduce(ctx, 18, ltorch::mean)
}

pub fn reduce_max(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    reduce(ctx, 18, ltorch::amax)
}

pub fn reduce_min(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    reduce(ctx, 18, ltorch::amin)
}

pub fn reduce_l2(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    reduce(ctx, 18, |a, dims, keep| ltorch::norm(a, 2.0, dims, keep))
}

pub fn reduce_prod(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    reduce(ctx, 18, |a, dims, keep| match dims {
        None => ltorch::prod(a, None, keep),
        Some(dims) => {
            let mut sorted = dims.to_vec();
            sorted.sort_unstable_by(|x, y| y.cmp(x));
            let mut out = a.clone();
            for d in sorted {
                out = ltorch::prod(&out, Some(d), keep)?;
            }
            Ok(out)
        }
    })
}

fn arg(ctx: &mut NodeCtx, max: bool) -> Result<Vec<Val>> {
    let rank = ctx.rank(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", 0), rank)?;
    let keepdims = ctx.attr_i("keepdims", 1) == 1;
    if ctx.attr_i("select_last_index", 0) == 1 {
        return Err(ctx.unsupported("select_last_index=1"));
    }
    let a = ctx.tensor(0)?;
    let out = if max {
        ltorch::argmax(&a, Some(axis), keepdims)?
    } else {
        ltorch::argmin(&a, Some(axis), keepdims)?
    };
    Ok(vec![Val::Traced(out)])
}

pub fn argmax(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    arg(ctx, true)
}

pub fn argmin(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    arg(ctx, false)
}

/// The softmax axis; before opset 13 the op works on the input flattened at `axis`, which is
/// the same as a softmax over the last dimension only when `axis` is the last.
fn softmax_axis(ctx: &NodeCtx) -> Result<i64> {
    let rank = ctx.rank(0)?;
    if ctx.opset() >= 13 {
        return ctx.axis(ctx.attr_i("axis", -1), rank);
    }
    let axis = ctx.axis(ctx.attr_i("axis", 1), rank)?;
    if axis != rank as i64 - 1 {
        return Err(ctx.unsupported(format!(
            "before opset 13, only the last axis (axis {axis} of rank {rank} flattens the input)"
        )));
    }
    Ok(axis)
}

pub fn softmax(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let axis = softmax_axis(ctx)?;
    let a = ctx.tensor(0)?;
    Ok(vec![Val::Traced(ltorch::softmax(&a, axis)?)])
}

pub fn log_softmax(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let axis = softmax_axis(ctx)?;
    let a = ctx.tensor(0)?;
    Ok(vec![Val::Traced(ltorch::log_softmax(&a, axis)?)])
}
