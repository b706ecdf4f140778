//! Cross-entropy over class indices as the pair of ops its gradient goes through.
//!
//! `cross_entropy` with integer targets, 2-D logits, nothing empty and no label smoothing
//! decomposes into `cross_entropy_lse`, which also returns each row's log-sum-exp. That op has
//! its own VJP, recording `cross_entropy_bwd`: under grad the forward keeps
//! `cross_entropy_lse` whole, so the backward reads the logits, the targets and one float per
//! row instead of saved `[N, C]` log-probabilities. Executors with row kernels claim the two
//! ops; everyone else runs their decompositions.

use crate::elementwise::{add, div, exp, log, mul, ne, sub, to, upcast, where_};
use crate::{call, CallArgs};
use thunder_core::clang;
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Error, Result};
use thunder_core::ir::{Arg, ShapeDisplay};
use thunder_core::prims::Prim;
use thunder_core::tensor::Tensor;

fn v(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

/// The dtype the log-sum-exp is kept in: f64 for f64 logits, else f32.
fn acc_dtype(logits: &Tensor) -> DType {
    if logits.dtype() == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// Checks `logits [N, C]` (float, N and C > 0) and `target [N]` (integer); returns (N, C).
fn check_pair(op: &str, logits: &Tensor, target: &Tensor) -> Result<(i64, i64)> {
    crate::elementwise::require_float(op, logits)?;
    if logits.rank() != 2 || logits.numel() == 0 {
        bail_op!(
            op,
            "expected logits of shape [N, C] with N, C > 0, got {}",
            ShapeDisplay(logits.shape())
        );
    }
    let (n, classes) = (logits.shape()[0], logits.shape()[1]);
    if dtype::is_float(target.dtype()) || target.dtype() == DType::Bool || target.shape() != [n] {
        bail_op!(
            op,
            "class-index targets must be integers of shape [{n}], got {}",
            target.ty()
        );
    }
    Ok((n, classes))
}

/// Whether `cross_entropy(logits, target)` fits the pair: integer class targets of 2-D
/// logits with nothing empty.
pub(crate) fn fits_pair(logits: &Tensor, target: &Tensor) -> bool {
    check_pair("ltorch.cross_entropy", logits, target).is_ok()
}

/// 1 where `target` is a class index (not `ignore_index`), in `dtype`, and the mask itself.
fn kept_rows(target: &Tensor, ignore_index: i64, dtype: DType) -> Result<(Tensor, Tensor)> {
    let keep = ne(target, ignore_index)?;
    Ok((clang::convert(&keep, dtype)?, keep))
}

/// A one-hot encoding of `target [N]` over `classes`, in `dtype` (out-of-range rows all 0).
fn one_hot(target: &Tensor, classes: i64, dtype: DType) -> Result<Tensor> {
    let n = target.shape()[0];
    let iota = clang::iota(classes, target.device())?;
    let idx = clang::reshape(&clang::convert(target, DType::I64)?, vec![n, 1])?;
    clang::convert(&crate::elementwise::eq(&idx, &iota)?, dtype)
}

/// `cross_entropy_lse(logits [N, C], target [N], ignore_index) -> (loss, lse)`: lse the row
/// log-sum-exp in f32 (f64 for f64 logits); loss the mean over the kept rows of
/// `lse - logits[i, target[i]]`, in the logits' dtype (NaN when every row is ignored).
pub(crate) fn cross_entropy_lse_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let (logits, target) = (c.tensor(0)?, c.tensor(1)?);
    let (n, classes) = check_pair(c.op, &logits, &target)?;
    let ignore_index = c.int(2)?;
    let x = upcast(&logits)?;
    let max = clang::reduce(Prim::Amax, &x, &[1], true)?;
    let total = clang::reduce(Prim::Sum, &exp(&sub(&x, &max)?)?, &[1], true)?;
    let lse = clang::reshape(&add(&max, &log(&total)?)?, vec![n])?;
    let picked = clang::reduce(
        Prim::Sum,
        &mul(&one_hot(&target, classes, x.dtype())?, &x)?,
        &[1],
        false,
    )?;
    let (kept, keep) = kept_rows(&target, ignore_index, x.dtype())?;
    // `where`, not a product with the mask: an ignored row's lse may be inf.
    let per_row = where_(&keep, &sub(&lse, &picked)?, 0.0)?;
    let loss = div(
        &clang::reduce(Prim::Sum, &per_row, &[0], false)?,
        &clang::reduce(Prim::Sum, &kept, &[0], false)?,
    )?;
    Ok(vec![to(&loss, logits.dtype())?, lse])
}

/// `cross_entropy_bwd(grad_loss, logits, target, lse, ignore_index) -> grad_logits`:
/// `(softmax - onehot) * grad_loss / count` on the kept rows, 0 on ignored ones, in the logits'
/// dtype; the softmax recomputed from the saved log-sum-exp.
pub(crate) fn cross_entropy_bwd_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let (g, logits, target, lse) = (c.tensor(0)?, c.tensor(1)?, c.tensor(2)?, c.tensor(3)?);
    let (n, classes) = check_pair(c.op, &logits, &target)?;
    let acc = acc_dtype(&logits);
    if g.rank() != 0 || g.dtype() != logits.dtype() {
        bail_op!(
            c.op,
            "grad_loss must be a 0-d {} tensor, got {}",
            logits.dtype().short_name(),
            g.ty()
        );
    }
    if lse.shape() != [n] || lse.dtype() != acc {
        bail_op!(
            c.op,
            "lse must be {} [{n}], got {}",
            acc.short_name(),
            lse.ty()
        );
    }
    let ignore_index = c.int(4)?;
    let x = upcast(&logits)?;
    let p = probabilities(&x, &lse)?;
    let (kept, keep) = kept_rows(&target, ignore_index, acc)?;
    let count = clang::reduce(Prim::Sum, &kept, &[0], false)?;
    let scale = div(&to(&g, acc)?, &count)?;
    // 0 on ignored rows even when count is 0 (torch's gradient of an all-ignored batch).
    let row_scale = where_(&keep, &scale, 0.0)?;
    let d = sub(&p, &one_hot(&target, classes, acc)?)?;
    let grad = mul(&d, &crate::shape::unsqueeze(&row_scale, 1)?)?;
    Ok(vec![to(&grad, logits.dtype())?])
}

/// `exp(x - lse[:, None])`: the softmax of the (upcast) logits from their log-sum-exp.
fn probabilities(x: &Tensor, lse: &Tensor) -> Result<Tensor> {
    exp(&sub(x, &crate::shape::unsqueeze(lse, 1)?)?)
}

/// The VJP of `cross_entropy_lse`: one `cross_entropy_bwd` reading logits, target and the
/// saved log-sum-exp, plus, where something differentiates the lse itself, its term
/// (d lse / d logits = softmax).
pub(crate) fn cross_entropy_lse_vjp(
    args: &[Arg],
    outs: &[Tensor],
    cots: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    const OP: &str = "ltorch.cross_entropy_lse";
    let ([logits, target, ignore_index], [_, lse]) = (args, outs) else {
        return Err(Error::Bug(format!(
            "{OP}: {} arguments and {} outputs, expected 3 and 2",
            args.len(),
            outs.len()
        )));
    };
    let logits_t = logits
        .as_value()
        .ok_or_else(|| Error::Bug(format!("{OP}: logits must be a tensor")))
        .and_then(thunder_core::trace_ctx::tensor_of)?;
    let mut grad: Option<Tensor> = None;
    if let Some(Some(g)) = cots.first() {
        let bwd_args = vec![
            v(g),
            logits.clone(),
            target.clone(),
            v(lse),
            ignore_index.clone(),
        ];
        grad = call("ltorch.cross_entropy_bwd", bwd_args)?
            .into_iter()
            .next();
    }
    if let Some(Some(g_lse)) = cots.get(1) {
        let x = upcast(&logits_t)?;
        let p = probabilities(&x, lse)?;
        let extra = to(
            &mul(&p, &crate::shape::unsqueeze(&to(g_lse, p.dtype())?, 1)?)?,
            logits_t.dtype(),
        )?;
        grad = Some(match grad {
            Some(prev) => add(&prev, &extra)?,
            None => extra,
        });
    }
    Ok(vec![grad, None, None])
}

/// Cross-entropy's mean loss over the kept rows and each row's log-sum-exp (what the
/// backward reads).
pub fn cross_entropy_lse(
    logits: &Tensor,
    target: &Tensor,
    ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    let mut outs = call(
        "ltorch.cross_entropy_lse",
        vec![v(logits), v(target), Arg::Int(ignore_index)],
    )?
    .into_iter();
    match (outs.next(), outs.next()) {
        (Some(loss), Some(lse)) => Ok((loss, lse)),
        _ => Err(Error::Bug(
            "ltorch.cross_entropy_lse: expected two outputs".into(),
        )),
    }
}

/// The gradient of `cross_entropy_lse`'s loss with respect to the logits.
pub fn cross_entropy_bwd(
    grad_loss: &Tensor,
    logits: &Tensor,
    target: &Tensor,
    lse: &Tensor,
    ignore_index: i64,
) -> Result<Tensor> {
    crate::call1(
        "ltorch.cross_entropy_bwd",
        vec![
            v(grad_loss),
            v(logits),
            v(target),
            v(lse),
            Arg::Int(ignore_index),
        ],
    )
}
