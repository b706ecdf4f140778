//! Scaled dot-product attention and the pair of ops its gradient goes through.
//!
//! `scaled_dot_product_attention` without a mask decomposes into `sdpa_fwd_lse`, which also
//! returns each query row's log-sum-exp. That op has its own VJP, recording `sdpa_bwd`: under
//! grad the forward keeps `sdpa_fwd_lse` whole, so the backward reads q, k, v, the output and
//! the log-sum-exp (one float per query row) instead of the T x T probabilities. Executors with
//! flash kernels claim the two ops; everyone else runs their decompositions, which recompute
//! the probabilities from the log-sum-exp in the backward.

use crate::elementwise::{div, exp, log, mul, require_float, sub, to, upcast};
use crate::{call, call1, CallArgs};
use thunder_core::clang;
use thunder_core::dtype::DType;
use thunder_core::error::{bail_op, Error, Result};
use thunder_core::ir::{Arg, ShapeDisplay};
use thunder_core::prims::Prim;
use thunder_core::tensor::Tensor;

fn v(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

/// The scale argument, or torch's default 1/sqrt(E) for head size `e`.
fn scale_of(op: &str, arg: Option<&Arg>, e: i64) -> Result<f64> {
    match arg {
        Some(Arg::None) => Ok(1.0 / (e as f64).sqrt()),
        Some(Arg::Float(s)) => Ok(*s),
        Some(Arg::Int(s)) => Ok(*s as f64),
        other => bail_op!(op, "scale must be a float or None, got {other:?}"),
    }
}

fn last(t: &Tensor, from_end: usize) -> i64 {
    t.shape()[t.rank() - from_end]
}

/// `q kᵀ · scale` in q's dtype, the causal mask (top-left aligned, as torch) applied as -inf.
fn scores(q: &Tensor, k: &Tensor, scale: f64, causal: bool) -> Result<Tensor> {
    let kt = crate::shape::transpose(k, -2, -1)?;
    let s = mul(&crate::linalg::matmul(q, &kt)?, scale)?;
    if !causal {
        return Ok(s);
    }
    causal_mask(&s, last(q, 2), last(k, 2))
}

fn causal_mask(s: &Tensor, l: i64, len_k: i64) -> Result<Tensor> {
    let (rows, cols) = clang::index_grid(l, len_k, s.device())?;
    let keep = crate::elementwise::le(&cols, &rows)?;
    crate::elementwise::where_(&keep, s, f64::NEG_INFINITY)
}

/// `scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale)`: the softmax of
/// `q kᵀ · scale` plus the mask, times `v`. torch's defaults: scale 1/sqrt(E), a causal mask
/// aligned top-left, a bool mask keeps where true, a float mask is added.
pub(crate) fn sdpa_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(6)?;
    let (q, k, val) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
    require_float(c.op, &q)?;
    if q.rank() < 2 || k.rank() < 2 || val.rank() < 2 {
        bail_op!(
            c.op,
            "q, k and v need at least 2 dims, got {}, {} and {}",
            ShapeDisplay(q.shape()),
            ShapeDisplay(k.shape()),
            ShapeDisplay(val.shape())
        );
    }
    let mask = c.opt_tensor(3)?;
    let causal = c.bool(4)?;
    if causal && mask.is_some() {
        bail_op!(c.op, "attn_mask and is_causal cannot both be set");
    }
    let scale = scale_of(c.op, c.args.get(5), last(&q, 1))?;
    if mask.is_none() && flash_shaped(&q, &k, &val) {
        let outs = call(
            "ltorch.sdpa_fwd_lse",
            vec![v(&q), v(&k), v(&val), Arg::Bool(causal), Arg::Float(scale)],
        )?;
        return Ok(outs.into_iter().take(1).collect());
    }
    let mut scores = scores(&q, &k, scale, causal)?;
    match &mask {
        Some(m) if m.dtype() == DType::Bool => {
            scores = crate::elementwise::where_(m, &scores, f64::NEG_INFINITY)?;
        }
        Some(m) => scores = crate::elementwise::add(&scores, m)?,
        None => {}
    }
    let attn = crate::reduction::softmax(&scores, -1)?;
    Ok(vec![crate::linalg::matmul(&attn, &val)?])
}

/// Whether q, k, v fit `sdpa_fwd_lse` (see [`check_flash_shapes`]) with nothing empty: an
/// empty row has no log-sum-exp worth saving.
fn flash_shaped(q: &Tensor, k: &Tensor, val: &Tensor) -> bool {
    check_flash_shapes("ltorch.scaled_dot_product_attention", q, k, val).is_ok()
        && q.numel() > 0
        && k.numel() > 0
        && val.numel() > 0
}

/// Checks q, k and v of the two flash-shaped ops: one float dtype, equal batch dims (no
/// broadcasting), matching head and key sizes.
fn check_flash_shapes(op: &str, q: &Tensor, k: &Tensor, val: &Tensor) -> Result<()> {
    require_float(op, q)?;
    if q.rank() < 2 {
        bail_op!(
            op,
            "query needs at least 2 dims, got {}",
            ShapeDisplay(q.shape())
        );
    }
    let r = q.rank();
    let same_batch = k.rank() == r
        && val.rank() == r
        && q.shape()[..r - 2] == k.shape()[..r - 2]
        && q.shape()[..r - 2] == val.shape()[..r - 2];
    if !same_batch || last(q, 1) != last(k, 1) || last(k, 2) != last(val, 2) {
        bail_op!(
            op,
            "expected query (..., L, E), key (..., S, E) and value (..., S, Ev) with the same batch dims, got {}, {} and {}",
            ShapeDisplay(q.shape()),
            ShapeDisplay(k.shape()),
            ShapeDisplay(val.shape())
        );
    }
    if q.dtype() != k.dtype() || q.dtype() != val.dtype() {
        bail_op!(
            op,
            "query, key and value must share a dtype, got {}, {} and {}",
            q.dtype().short_name(),
            k.dtype().short_name(),
            val.dtype().short_name()
        );
    }
    Ok(())
}

/// `sdpa_fwd_lse(q, k, v, is_causal, scale) -> (out, lse)`: attention's output and each query
/// row's log-sum-exp of the scaled, masked scores, in f32 (f64 for f64 inputs). The softmax is
/// spelled as `ltorch.softmax` decomposes, so without the lse (inference) the prims are the
/// ones the unmasked attention always had.
pub(crate) fn sdpa_fwd_lse_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let (q, k, val) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?);
    check_flash_shapes(c.op, &q, &k, &val)?;
    let causal = c.bool(3)?;
    let scale = scale_of(c.op, c.args.get(4), last(&q, 1))?;
    let x = upcast(&scores(&q, &k, scale, causal)?)?;
    let row = [x.rank() as i64 - 1];
    let max = clang::reduce(Prim::Amax, &x, &row, true)?;
    let e = exp(&sub(&x, &max)?)?;
    let total = clang::reduce(Prim::Sum, &e, &row, true)?;
    let attn = to(&div(&e, &total)?, q.dtype())?;
    let out = crate::linalg::matmul(&attn, &val)?;
    let lse = crate::elementwise::add(&max, &log(&total)?)?;
    let lse = clang::reshape(&lse, q.shape()[..q.rank() - 1].to_vec())?;
    Ok(vec![out, lse])
}

/// `sdpa_bwd(grad_out, q, k, v, out, lse, is_causal, scale) -> (dq, dk, dv)`, recomputing the
/// probabilities from the saved log-sum-exp: P = exp(s - lse), dV = Pᵀ dO, dS = P (dO Vᵀ - D)
/// with D the row sums of dO * O, dQ = scale dS K, dK = scale dSᵀ Q.
pub(crate) fn sdpa_bwd_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(8)?;
    let (g, q, k, val, out, lse) = (
        c.tensor(0)?,
        c.tensor(1)?,
        c.tensor(2)?,
        c.tensor(3)?,
        c.tensor(4)?,
        c.tensor(5)?,
    );
    check_flash_shapes(c.op, &q, &k, &val)?;
    let mut out_shape = q.shape()[..q.rank() - 1].to_vec();
    out_shape.push(last(&val, 1));
    for (name, t) in [("grad_out", &g), ("out", &out)] {
        if t.shape() != out_shape.as_slice() || t.dtype() != q.dtype() {
            bail_op!(
                c.op,
                "{name} must be {} {}, got {} {}",
                q.dtype().short_name(),
                ShapeDisplay(&out_shape),
                t.dtype().short_name(),
                ShapeDisplay(t.shape())
            );
        }
    }
    let acc = acc_dtype(&q);
    if lse.shape() != &q.shape()[..q.rank() - 1] || lse.dtype() != acc {
        bail_op!(
            c.op,
            "lse must be {} {}, got {} {}",
            acc.short_name(),
            ShapeDisplay(&q.shape()[..q.rank() - 1]),
            lse.dtype().short_name(),
            ShapeDisplay(lse.shape())
        );
    }
    let causal = c.bool(6)?;
    let scale = scale_of(c.op, c.args.get(7), last(&q, 1))?;
    let p = probabilities(&q, &k, &lse, causal, scale)?;
    let dv = crate::linalg::matmul(&crate::shape::transpose(&to(&p, val.dtype())?, -2, -1)?, &g)?;
    let vt = crate::shape::transpose(&val, -2, -1)?;
    let dp = to(&crate::linalg::matmul(&g, &vt)?, acc)?;
    let row = [q.rank() as i64 - 1];
    let d = clang::reduce(Prim::Sum, &mul(&to(&g, acc)?, &to(&out, acc)?)?, &row, true)?;
    let (dq, dk) = score_grads(&mul(&p, &sub(&dp, &d)?)?, &q, &k, scale)?;
    Ok(vec![dq, dk, dv])
}

/// The accumulation dtype of attention over `t`: f64 for f64, else f32.
fn acc_dtype(t: &Tensor) -> DType {
    if t.dtype() == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// The attention probabilities exp(scale q kᵀ - lse), recomputed in the accumulation dtype
/// from q and k converted first (as a flash kernel accumulates the scores, unrounded).
fn probabilities(q: &Tensor, k: &Tensor, lse: &Tensor, causal: bool, scale: f64) -> Result<Tensor> {
    let acc = acc_dtype(q);
    let kt = crate::shape::transpose(&to(k, acc)?, -2, -1)?;
    let mut s = mul(&crate::linalg::matmul(&to(q, acc)?, &kt)?, scale)?;
    if causal {
        s = causal_mask(&s, last(q, 2), last(k, 2))?;
    }
    exp(&sub(&s, &crate::shape::unsqueeze(lse, -1)?)?)
}

/// dQ and dK from the cotangent `ds` of the scaled scores.
fn score_grads(ds: &Tensor, q: &Tensor, k: &Tensor, scale: f64) -> Result<(Tensor, Tensor)> {
    let ds = to(ds, q.dtype())?;
    let dq = mul(&crate::linalg::matmul(&ds, k)?, scale)?;
    let dst = crate::shape::transpose(&ds, -2, -1)?;
    let dk = mul(&crate::linalg::matmul(&dst, q)?, scale)?;
    Ok((dq, dk))
}

/// The VJP of `sdpa_fwd_lse`: one `sdpa_bwd` reading the saved output and log-sum-exp, plus,
/// where something differentiates the log-sum-exp itself, its term (d lse / d s = P).
pub(crate) fn sdpa_fwd_lse_vjp(
    args: &[Arg],
    outs: &[Tensor],
    cots: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    const OP: &str = "ltorch.sdpa_fwd_lse";
    let ([q, k, _, causal, scale], [out, lse]) = (args, outs) else {
        return Err(Error::Bug(format!(
            "{OP}: {} arguments and {} outputs, expected 5 and 2",
            args.len(),
            outs.len()
        )));
    };
    let tensor = |a: &Arg| {
        a.as_value()
            .ok_or_else(|| Error::Bug(format!("{OP}: q and k must be tensors")))
            .and_then(thunder_core::trace_ctx::tensor_of)
    };
    let mut grads: Vec<Option<Tensor>> = vec![None; args.len()];
    if let Some(Some(g)) = cots.first() {
        let mut bwd_args = vec![v(g)];
        bwd_args.extend(args[..3].iter().cloned());
        bwd_args.extend([v(out), v(lse), causal.clone(), scale.clone()]);
        for (slot, grad) in grads.iter_mut().zip(call("ltorch.sdpa_bwd", bwd_args)?) {
            *slot = Some(grad);
        }
    }
    if let Some(Some(g_lse)) = cots.get(1) {
        let (q, k) = (tensor(q)?, tensor(k)?);
        let causal = matches!(causal, Arg::Bool(true));
        let scale = scale_of(OP, Some(scale), last(&q, 1))?;
        let p = probabilities(&q, &k, lse, causal, scale)?;
        let ds = mul(&p, &crate::shape::unsqueeze(&to(g_lse, p.dtype())?, -1)?)?;
        let (dq, dk) = score_grads(&ds, &q, &k, scale)?;
        for (slot, extra) in grads.iter_mut().zip([dq, dk]) {
            *slot = Some(match slot.take() {
                Some(prev) => crate::elementwise::add(&prev, &extra)?,
                None => extra,
            });
        }
    }
    Ok(grads)
}

pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    val: &Tensor,
    attn_mask: Option<&Tensor>,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    call1(
        "ltorch.scaled_dot_product_attention",
        vec![
            v(q),
            v(k),
            v(val),
            attn_mask.map_or(Arg::None, v),
            Arg::Bool(is_causal),
            scale.map_or(Arg::None, Arg::Float),
        ],
    )
}

/// Attention's output and each query row's log-sum-exp (what a flash forward saves).
pub fn sdpa_fwd_lse(
    q: &Tensor,
    k: &Tensor,
    val: &Tensor,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<(Tensor, Tensor)> {
    let mut outs = call(
        "ltorch.sdpa_fwd_lse",
        vec![
            v(q),
            v(k),
            v(val),
            Arg::Bool(is_causal),
            scale.map_or(Arg::None, Arg::Float),
        ],
    )?
    .into_iter();
    match (outs.next(), outs.next()) {
        (Some(out), Some(lse)) => Ok((out, lse)),
        _ => Err(Error::Bug(
            "ltorch.sdpa_fwd_lse: expected two outputs".into(),
        )),
    }
}
