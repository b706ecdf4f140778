//! Shape ops and constants: what shape arithmetic is made of (Shape, Gather, Concat,
//! Unsqueeze, Range, ConstantOfShape: folded at import), and the layout ops of the models.

use super::fold::{self, broadcast, clamp_slice};
use crate::error::Result;
use crate::node::{literal, NodeCtx, FOLD_LIMIT};
use crate::value::{HostArr, Val};
use thunder_core::{DType, Device, Tensor};
use thunder_torch as ltorch;

fn numel(shape: &[i64]) -> usize {
    shape.iter().map(|&d| d.max(0) as usize).product()
}

pub fn constant(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let h = if let Some(a) = ctx.attr_tensor("value")? {
        HostArr::from_array(&a)?
    } else if ctx.has_attr("value_float") {
        HostArr {
            shape: vec![],
            dtype: DType::F32,
            data: vec![ctx.attr_f("value_float", 0.0)],
        }
    } else if ctx.has_attr("value_int") {
        HostArr {
            shape: vec![],
            dtype: DType::I64,
            data: vec![ctx.attr_i("value_int", 0) as f64],
        }
    } else if let Some(v) = ctx.attr_ints("value_ints") {
        HostArr::ints_1d(&v)
    } else {
        return Err(ctx.unsupported(
            "only the value, value_float, value_int and value_ints attributes are supported",
        ));
    };
    Ok(vec![ctx.folded(h, 0)?])
}

pub fn shape(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let shape = ctx.shape(0)?;
    let r = shape.len() as i64;
    let clamp = |x: i64| (if x < 0 { x + r } else { x }).clamp(0, r) as usize;
    let start = clamp(ctx.attr_i("start", 0));
    let end = clamp(ctx.attr_i("end", r));
    let dims = if start < end {
        &shape[start..end]
    } else {
        &[][..]
    };
    Ok(vec![ctx.folded(HostArr::ints_1d(dims), 0)?])
}

pub fn size(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let n = numel(&ctx.shape(0)?) as f64;
    Ok(vec![ctx.folded(
        HostArr {
            shape: vec![],
            dtype: DType::I64,
            data: vec![n],
        },
        0,
    )?])
}

pub fn constant_of_shape(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let shape = ctx.ints(0)?;
    let (value, dtype) = match ctx.attr_tensor("value")? {
        Some(a) => (a.to_f64_vec()?.first().copied().unwrap_or(0.0), a.dtype()),
        None => (0.0, DType::F32),
    };
    if shape.iter().any(|&d| d < 0) {
        return Err(ctx.err(format!("negative size in shape {shape:?}")));
    }
    if numel(&shape) <= FOLD_LIMIT {
        let data = vec![value; numel(&shape)];
        return Ok(vec![ctx.folded(HostArr { shape, dtype, data }, 0)?]);
    }
    let t = ltorch::full(&shape, literal(value, dtype), Device::Cpu, dtype)?;
    Ok(vec![Val::Traced(t)])
}

pub fn range(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let (start, limit, delta) = (ctx.host(0)?, ctx.host(1)?, ctx.host(2)?);
    let (s, l, d) = (start.data[0], limit.data[0], delta.data[0]);
    if d == 0.0 {
        return Err(ctx.err("delta is 0"));
    }
    let n = ((l - s) / d).ceil().max(0.0) as usize;
    let dtype = start.dtype;
    if n <= FOLD_LIMIT {
        let data = (0..n).map(|i| s + i as f64 * d).collect();
        return Ok(vec![ctx.folded(
            HostArr {
                shape: vec![n as i64],
                dtype,
                data,
            },
            0,
        )?]);
    }
    if dtype.is_float() {
        return Err(ctx.unsupported(format!("a float Range of {n} values")));
    }
    let t = ltorch::arange(s as i64, l as i64, d as i64, Device::Cpu, dtype)?;
    Ok(vec![Val::Traced(t)])
}

/// A constant with a new shape (same data), or the traced reshape.
fn reshaped(ctx: &mut NodeCtx, shape: Vec<i64>) -> Result<Vec<Val>> {
    if ctx.all_const() {
        let mut h = ctx.host(0)?;
        h.shape = shape;
        return Ok(vec![ctx.folded(h, 0)?]);
    }
    let a = ctx.tensor(0)?;
    if a.shape() == shape.as_slice() {
        return Ok(vec![Val::Traced(a)]);
    }
    Ok(vec![Val::Traced(ltorch::reshape(&a, &shape)?)])
}

pub fn reshape(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let input = ctx.shape(0)?;
    let mut shape = ctx.ints(1)?;
    let allowzero = ctx.attr_i("allowzero", 0) == 1;
    for (i, d) in shape.iter_mut().enumerate() {
        if *d == 0 && !allowzero {
            *d = *input
                .get(i)
                .ok_or_else(|| ctx.err(format!("shape has 0 at {i} beyond the input's rank")))?;
        }
    }
    let n = numel(&input);
    if let Some(k) = shape.iter().position(|&d| d == -1) {
        let rest: i64 = shape
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != k)
            .map(|(_, &d)| d)
            .product();
        if rest == 0 || n as i64 % rest != 0 {
            return Err(ctx.err(format!("cannot reshape {input:?} to {shape:?}")));
        }
        shape[k] = n as i64 / rest;
    }
    if numel(&shape) != n || shape.iter().any(|&d| d < 0) {
        return Err(ctx.err(format!(
            "cannot reshape {input:?} ({n} elements) to {shape:?}"
        )));
    }
    reshaped(ctx, shape)
}

pub fn flatten(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let input = ctx.shape(0)?;
    let axis = ctx.attr_i("axis", 1);
    let axis = if axis < 0 {
        axis + input.len() as i64
    } else {
        axis
    };
    if axis < 0 || axis > input.len() as i64 {
        return Err(ctx.err(format!("axis {axis} out of range for rank {}", input.len())));
    }
    let (a, b) = input.split_at(axis as usize);
    reshaped(ctx, vec![a.iter().product(), b.iter().product()])
}

pub fn transpose(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let rank = ctx.rank(0)?;
    let perm = ctx
        .attr_ints("perm")
        .unwrap_or_else(|| (0..rank as i64).rev().collect());
    let a = ctx.tensor(0)?;
    Ok(vec![Val::Traced(ltorch::permute(&a, &perm)?)])
}

/// Axes from input 1 (opset 13+) or the `axes` attribute.
fn axes(ctx: &NodeCtx, since: i64) -> Result<Option<Vec<i64>>> {
    if ctx.opset() >= since {
        if ctx.has_input(1) {
            return ctx.ints(1).map(Some);
        }
        return Ok(None);
    }
    Ok(ctx.attr_ints("axes"))
}

pub fn squeeze(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let input = ctx.shape(0)?;
    let axes = match axes(ctx, 13)? {
        Some(a) => a
            .iter()
            .map(|&x| ctx.axis(x, input.len()))
            .collect::<Result<Vec<_>>>()?,
        None => (0..input.len() as i64)
            .filter(|&i| input[i as usize] == 1)
            .collect(),
    };
    let shape = input
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(&(*i as i64)))
        .map(|(_, &d)| d)
        .collect();
    reshaped(ctx, shape)
}

pub fn unsqueeze(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let input = ctx.shape(0)?;
    let axes = axes(ctx, 13)?.ok_or_else(|| ctx.err("no axes given"))?;
    let out_rank = input.len() + axes.len();
    let mut axes = axes
        .iter()
        .map(|&x| ctx.axis(x, out_rank))
        .collect::<Result<Vec<_>>>()?;
    axes.sort();
    let mut shape = Vec::with_capacity(out_rank);
    let mut it = input.iter();
    for i in 0..out_rank as i64 {
        if axes.contains(&i) {
            shape.push(1);
        } else {
            shape.push(*it.next().ok_or_else(|| ctx.err("repeated axes"))?);
        }
    }
    reshaped(ctx, shape)
}

pub fn concat(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let rank = ctx.rank(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", 0), rank)? as usize;
    let n = ctx.n_inputs();
    if ctx.all_const() {
        let parts = (0..n).map(|i| ctx.host(i)).collect::<Result<Vec<_>>>()?;
        let parts: Vec<HostArr> = parts
            .into_iter()
            .filter(|p| !p.data.is_empty() || p.shape.len() == rank)
            .collect();
        for p in &parts {
            let same = p.shape.len() == rank
                && p.shape
                    .iter()
                    .zip(&parts[0].shape)
                    .enumerate()
                    .all(|(i, (a, b))| i == axis || a == b);
            if !same {
                return Err(ctx.err(format!(
                    "shapes {:?} and {:?} do not concatenate on axis {axis}",
                    parts[0].shape, p.shape
                )));
            }
        }
        return Ok(vec![ctx.folded(fold::concat(&parts, axis), 0)?]);
    }
    let tensors = (0..n)
        .map(|i| ctx.tensor(i))
        .collect::<Result<Vec<Tensor>>>()?;
    Ok(vec![Val::Traced(ltorch::cat(&tensors, axis as i64)?)])
}

pub fn slice(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let shape = ctx.shape(0)?;
    let rank = shape.len();
    let (starts, ends, axes, steps) = if ctx.opset() >= 10 {
        let starts = ctx.ints(1)?;
        let ends = ctx.ints(2)?;
        let axes = if ctx.has_input(3) {
            Some(ctx.ints(3)?)
        } else {
            None
        };
        let steps = if ctx.has_input(4) {
            Some(ctx.ints(4)?)
        } else {
            None
        };
        (starts, ends, axes, steps)
    } else {
        let get = |n: &str| {
            ctx.attr_ints(n)
                .ok_or_else(|| ctx.err(format!("attribute `{n}` is required")))
        };
        (get("starts")?, get("ends")?, ctx.attr_ints("axes"), None)
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(ctx.err("starts, ends, axes and steps differ in length"));
    }
    let mut plan = Vec::new();
    for k in 0..starts.len() {
        let axis = ctx.axis(axes[k], rank)? as usize;
        if steps[k] == 0 {
            return Err(ctx.err("a step is 0"));
        }
        let (s, e) = clamp_slice(starts[k], ends[k], steps[k], shape[axis]);
        plan.push((axis, s, e, steps[k]));
    }
    if ctx.all_const() {
        let mut h = ctx.host(0)?;
        for &(axis, s, e, step) in &plan {
            h = fold::slice(&h, axis, s, e, step);
        }
        return Ok(vec![ctx.folded(h, 0)?]);
    }
    let mut t = ctx.tensor(0)?;
    for (axis, s, e, step) in plan {
        if step < 0 {
            // Walk the flipped axis forwards: index i is dim - 1 - i there.
            let dim = shape[axis];
            let (fs, fe) = (dim - 1 - s, dim - 1 - e);
            t = ltorch::flip(&t, &[axis as i64])?;
            t = ltorch::slice(&t, axis as i64, Some(fs), Some(fe.max(fs)), -step)?;
            continue;
        }
        if s == 0 && e == shape[axis] && step == 1 {
            continue;
        }
        t = ltorch::slice(&t, axis as i64, Some(s), Some(e.max(s)), step)?;
    }
    Ok(vec![Val::Traced(t)])
}

pub fn split(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let shape = ctx.shape(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", 0), shape.len())? as usize;
    let n_out = ctx.node.output.len();
    let sizes = if ctx.opset() >= 13 && ctx.has_input(1) {
        ctx.ints(1)?
    } else if let Some(s) = ctx.attr_ints("split").filter(|_| ctx.opset() < 13) {
        s
    } else {
        let parts = if ctx.has_attr("num_outputs") {
            ctx.attr_i("num_outputs", 1)
        } else {
            n_out as i64
        };
        let dim = shape[axis];
        let chunk = (dim + parts - 1) / parts.max(1);
        (0..parts)
            .map(|i| (dim - i * chunk).clamp(0, chunk))
            .collect()
    };
    if sizes.iter().sum::<i64>() != shape[axis] || sizes.len() != n_out {
        return Err(ctx.err(format!(
            "split sizes {sizes:?} do not cover dimension {} into {n_out} outputs",
            shape[axis]
        )));
    }
    let a = ctx.tensor(0)?;
    let mut start = 0;
    let mut outs = Vec::new();
    for len in sizes {
        outs.push(Val::Traced(ltorch::narrow(&a, axis as i64, start, len)?));
        start += len;
    }
    Ok(outs)
}

pub fn expand(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let input = ctx.shape(0)?;
    let shape = ctx.ints(1)?;
    let target = broadcast(&input, &shape)
        .ok_or_else(|| ctx.err(format!("{input:?} does not broadcast with {shape:?}")))?;
    if ctx.all_const() && numel(&target) <= FOLD_LIMIT {
        let h = ctx.host(0)?;
        let out = fold::expand(&h, &target).ok_or_else(|| ctx.err("cannot expand"))?;
        return Ok(vec![ctx.folded(out, 0)?]);
    }
    let a = ctx.tensor(0)?;
    if a.shape() == target.as_slice() {
        return Ok(vec![Val::Traced(a)]);
    }
    Ok(vec![Val::Traced(ltorch::expand(&a, &target)?)])
}

pub fn gather(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let shape = ctx.shape(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", 0), shape.len())? as usize;
    let ishape = ctx.shape(1)?;
    let dim = shape[axis];
    if let Some(c) = ctx.input(1)?.as_const() {
        let idx = crate::value::HostArr::from_array(&c.array)?.ints();
        let idx: Vec<i64> = idx
            .iter()
            .map(|&i| if i < 0 { i + dim } else { i })
            .collect();
        if let Some(bad) = idx.iter().find(|&&i| i < 0 || i >= dim) {
            return Err(ctx.err(format!("index {bad} is out of range for dimension {dim}")));
        }
        if ctx.all_const() {
            let h = ctx.host(0)?;
            return Ok(vec![ctx.folded(fold::gather(&h, axis, &idx, &ishape), 0)?]);
        }
        if ishape.is_empty() {
            let a = ctx.tensor(0)?;
            let one = ltorch::narrow(&a, axis as i64, idx[0], 1)?;
            let mut out = shape.clone();
            out.remove(axis);
            return Ok(vec![Val::Traced(ltorch::reshape(&one, &out)?)]);
        }
    }
    let a = ctx.tensor(0)?;
    let mut index = ctx.tensor(1)?;
    if index.dtype() != DType::I64 {
        index = ltorch::to(&index, DType::I64)?;
    }
    if axis == 0 && shape.len() == 2 {
        return Ok(vec![Val::Traced(ltorch::embedding(&index, &a, None)?)]);
    }
    let flat = ltorch::reshape(&index, &[numel(&ishape) as i64])?;
    let picked = ltorch::index_select(&a, axis as i64, &flat)?;
    let mut out = shape[..axis].to_vec();
    out.extend_from_slice(&ishape);
    out.extend_from_slice(&shape[axis + 1..]);
    Ok(vec![Val::Traced(ltorch::reshape(&picked, &out)?)])
}

pub fn trilu(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let k = if ctx.has_input(1) {
        ctx.ints(1)?.first().copied().unwrap_or(0)
    } else {
        0
    };
    let upper = ctx.attr_i("upper", 1) == 1;
    let a = ctx.tensor(0)?;
    let out = if upper {
        ltorch::triu(&a, k)?
    } else {
        ltorch::tril(&a, k)?
    };
    Ok(vec![Val::Traced(out)])
}
