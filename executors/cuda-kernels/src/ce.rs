//! Cross-entropy's op pair as one region each: `ltorch.cross_entropy_lse` (loss and row
//! log-sum-exp) and `ltorch.cross_entropy_bwd` (the logits' gradient), for f32/f16/bf16 logits
//! and i32/i64 targets on CUDA.
//!
//! The dtype conversions around them join the region when they are the only use: a
//! `bf16/f16 -> f32` convert whose output only the op reads (nanoGPT's `logits.float()`, and
//! its recomputation in the backward), and, after the backward op, an `f32 -> bf16/f16`
//! convert that is the only reader of the gradient. The kernels then read the 16-bit logits
//! and write the 16-bit gradient; the f32 `[N, C]` never exists.

use crate::spec::{Operand, Spec};
use thunder_abi::{ArgView, DTypeCode, DeviceKind, OpView, TraceView};
use thunder_cuda_common::cross_entropy::chain;
pub use thunder_cuda_common::cross_entropy::{BWD, FWD};

fn meta(view: &TraceView, v: u32) -> Option<&thunder_abi::ValueMeta> {
    view.values.get(v as usize)
}

fn operand(view: &TraceView, v: u32) -> Result<Operand, String> {
    let m = meta(view, v).ok_or_else(|| format!("value {v} is not in the view"))?;
    if m.device.kind != DeviceKind::Cuda {
        return Err(format!("t{v} is not on a CUDA device"));
    }
    Ok(Operand {
        value: v,
        dtype: m.dtype,
        shape: m.shape.to_vec(),
    })
}

fn int_arg(op: &OpView, i: usize) -> Result<i64, String> {
    match op.args.get(i) {
        Some(ArgView::Int(v)) => Ok(*v),
        other => Err(format!("argument {i}: expected an int, got {other:?}")),
    }
}

fn value_arg(op: &OpView, i: usize) -> Result<u32, String> {
    op.args
        .get(i)
        .and_then(ArgView::as_value)
        .ok_or_else(|| format!("argument {i}: expected a tensor"))
}

/// One cross-entropy region: its ops (ascending), the kernels' job, and the kernels' outputs
/// in order as `(value, dtype, elements)`, `None` for the scratch buffers passed between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    pub ops: Vec<u32>,
    pub spec: Spec,
    pub outputs: Vec<(Option<u32>, DTypeCode, usize)>,
}

/// The region for the cross-entropy op at `i`, or `None` when the kernels do not take it
/// (then it is decomposed for the fusers).
pub fn region(view: &TraceView, i: usize) -> Option<Region> {
    decode_region(view, i).ok()
}

/// [`region`] with the reason it is refused.
pub fn decode_region(view: &TraceView, i: usize) -> Result<Region, String> {
    let op = view.ops.get(i).ok_or("no such op")?;
    let fwd = match op.symbol.as_str() {
        FWD => true,
        BWD => false,
        other => return Err(format!("{other} is not a cross-entropy op")),
    };
    if op.claimed {
        return Err("already claimed".into());
    }
    let li = if fwd { 0 } else { 1 };
    let logits_v = value_arg(op, li)?;
    let logits = operand(view, logits_v)?;
    let target = operand(view, value_arg(op, li + 1)?)?;
    let ignore_index = int_arg(op, if fwd { 2 } else { 4 })?;
    let [rows, classes] = logits.shape[..] else {
        return Err(format!("logits {:?} are not [N, C]", logits.shape));
    };
    if rows <= 0 || classes <= 0 || classes > i64::from(i32::MAX) {
        return Err(format!("logits {:?}: empty or too wide", logits.shape));
    }
    if !matches!(
        logits.dtype,
        DTypeCode::F32 | DTypeCode::BF16 | DTypeCode::F16
    ) {
        return Err(format!(
            "{} logits (f32, bf16 and f16 only)",
            logits.dtype.short_name()
        ));
    }
    if !matches!(target.dtype, DTypeCode::I32 | DTypeCode::I64) || target.shape != [rows] {
        return Err(format!(
            "target {} {:?}: expected i32 or i64 [{rows}]",
            target.dtype.short_name(),
            target.shape
        ));
    }
    let chain = chain(view, i).ok_or("not a cross-entropy op")?;
    // The values the kernels read: the 16-bit input of a joined convert (the classes its
    // last dim, the rows its leading dims), or the op's own logits.
    let read = operand(view, chain.read)?;
    if read.numel() != logits.numel() || read.shape.last() != Some(&classes) {
        return Err(format!(
            "the kernels cannot read {:?} as rows of {classes}",
            read.shape
        ));
    }
    let mut ops: Vec<u32> = chain.ops.iter().map(|&o| o as u32).collect();
    ops.push(i as u32);
    let outputs;
    let spec = if fwd {
        let loss = op
            .outputs
            .first()
            .and_then(|&v| meta(view, v))
            .ok_or("no loss output")?
            .dtype;
        let n = rows as usize;
        outputs = vec![
            (op.outputs.first().copied(), loss, 1),
            (op.outputs.get(1).copied(), DTypeCode::F32, n),
            (None, DTypeCode::F32, n),
            (None, DTypeCode::U8, n),
        ];
        Spec::CrossEntropy {
            logits: read,
            target,
            rows,
            classes,
            ignore_index,
            loss,
        }
    } else {
        let grad = operand(view, value_arg(op, 0)?)?;
        let lse = operand(view, value_arg(op, 3)?)?;
        if !grad.shape.is_empty() || grad.dtype != logits.dtype {
            return Err("grad_loss is not a 0-d tensor of the logits' dtype".into());
        }
        if lse.dtype != DTypeCode::F32 || lse.shape != [rows] {
            return Err("lse is not f32 [N]".into());
        }
        let out_v = chain.write;
        let out = meta(view, out_v).ok_or("no output meta")?.dtype;
        outputs = vec![
            (Some(out_v), out, logits.numel() as usize),
            (None, DTypeCode::F32, 1),
        ];
        Spec::CrossEntropyBwd {
            grad,
            logits: read,
            target,
            lse,
            rows,
            classes,
            ignore_index,
            out,
        }
    };
    ops.sort_unstable();
    Ok(Region { ops, spec, outputs })
}

/// Every cross-entropy region the kernels take in `view`.
pub fn claims(view: &TraceView) -> Vec<Vec<u32>> {
    (0..view.ops.len())
        .filter_map(|i| region(view, i).map(|r| r.ops))
        .collect()
}
