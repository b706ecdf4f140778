//! The dtype conversions around cross-entropy's op pair that `cuda-kernels` runs inside its
//! cross-entropy kernels, found here so that `cuda-fuser` (asked first) leaves exactly those.
//!
//! nanoGPT's `cross_entropy(logits.float().view(-1, V), t)` traces to a `bf16 -> f32` convert
//! and reshapes before `ltorch.cross_entropy_lse` (and, recomputed, before
//! `ltorch.cross_entropy_bwd`), and to reshapes, an `f32 -> bf16` convert and more reshapes
//! after the backward op. When each link is the only reader of the value before it, the kernels read the
//! 16-bit logits and write the 16-bit gradient, and the f32 `[N, C]` never exists. Only the
//! ops that `cuda-kernels` takes with a cross-entropy op are left: if it does not take the op,
//! the op is decomposed and the fuser sees the converts again in the next round.

use thunder_abi::{ArgView, DTypeCode, OpView, TraceView};

pub const FWD: &str = "ltorch.cross_entropy_lse";
pub const BWD: &str = "ltorch.cross_entropy_bwd";

/// The ops joined to a cross-entropy op, and the values its kernels read and write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Converts and reshapes before the op (its logits' producers), and after it (readers of
    /// the backward's gradient).
    pub ops: Vec<usize>,
    /// The logits the kernels read: the 16-bit input of the joined convert, or the op's own.
    pub read: u32,
    /// The backward's gradient as the region returns it: the output of the joined convert (or
    /// of the reshapes right after it), or the op's own output (the forward: its loss).
    pub write: u32,
}

fn is_convert(op: &OpView) -> bool {
    matches!(
        op.symbol.as_str(),
        "prims.convert_element_type" | "ltorch.to"
    )
}

fn is_reshape(op: &OpView) -> bool {
    matches!(op.symbol.as_str(), "prims.reshape" | "ltorch.reshape")
}

fn dtype(view: &TraceView, v: u32) -> Option<DTypeCode> {
    view.values.get(v as usize).map(|m| m.dtype)
}

fn last_dim(view: &TraceView, v: u32) -> Option<i64> {
    view.values
        .get(v as usize)
        .and_then(|m| m.shape.last().copied())
}

fn half(d: Option<DTypeCode>) -> bool {
    matches!(d, Some(DTypeCode::BF16 | DTypeCode::F16))
}

/// The ops reading value `v`.
fn readers(view: &TraceView, v: u32) -> Vec<usize> {
    view.ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.input_values().any(|x| x == v))
        .map(|(i, _)| i)
        .collect()
}

/// Whether `op` (unclaimed, one output, first argument `from`) may join as the link after
/// value `from`, which only it reads and the trace does not return.
fn link(view: &TraceView, op: &OpView, from: u32, reader: usize) -> bool {
    !op.claimed
        && op.outputs.len() == 1
        && op.args.first().and_then(ArgView::as_value) == Some(from)
        && readers(view, from) == [reader]
        && !view.outputs.contains(&from)
}

/// The chain around the cross-entropy op at `i` (`None` for other ops). The logits side
/// walks back through reshapes to one `half -> f32` convert, whose input keeps the classes as
/// its last dim; the gradient side (backward only) walks forward through reshapes to one
/// `f32 -> half` convert, and the reshapes right after it. A side that does not end in such a
/// convert joins nothing.
pub fn chain(view: &TraceView, i: usize) -> Option<Chain> {
    let op = view.ops.get(i)?;
    let fwd = match op.symbol.as_str() {
        FWD => true,
        BWD => false,
        _ => return None,
    };
    let logits = op.args.get(if fwd { 0 } else { 1 })?.as_value()?;
    let classes = last_dim(view, logits)?;
    let mut ops = Vec::new();
    let mut read = logits;
    let (mut v, mut user) = (logits, i);
    let mut walked = Vec::new();
    while let Some(p) = view.ops.iter().position(|o| o.outputs.contains(&v)) {
        let prev = &view.ops[p];
        let Some(src) = prev.args.first().and_then(ArgView::as_value) else {
            break;
        };
        // `v` (made by `prev`) must be read by `user` only; `src` may have other readers.
        if prev.claimed
            || prev.outputs.len() != 1
            || readers(view, v) != [user]
            || view.outputs.contains(&v)
        {
            break;
        }
        walked.push(p);
        if is_convert(prev) {
            if dtype(view, v) == Some(DTypeCode::F32)
                && half(dtype(view, src))
                && last_dim(view, src) == Some(classes)
            {
                ops.append(&mut walked);
                read = src;
            }
            break;
        }
        if !is_reshape(prev) {
            break;
        }
        (v, user) = (src, p);
    }
    let mut write = *op.outputs.first()?;
    if !fwd {
        let mut walked = Vec::new();
        let mut v = write;
        while let [r] = readers(view, v)[..] {
            let next = &view.ops[r];
            if !link(view, next, v, r) {
                break;
            }
            let out = next.outputs[0];
            walked.push(r);
            if is_convert(next) {
                if dtype(view, v) == Some(DTypeCode::F32) && half(dtype(view, out)) {
                    ops.append(&mut walked);
                    write = out;
                    // Reshapes after the convert re-view the bytes the kernel writes: joined,
                    // they cost nothing, while a reshape left alone with several readers (the
                    // LM head's two gradient GEMMs) becomes a copy of the whole gradient.
                    while let [r] = readers(view, write)[..] {
                        let next = &view.ops[r];
                        if !is_reshape(next) || !link(view, next, write, r) {
                            break;
                        }
                        ops.push(r);
                        write = next.outputs[0];
                    }
                }
                break;
            }
            if !is_reshape(next) {
                break;
            }
            v = out;
        }
    }
    ops.sort_unstable();
    Some(Chain { ops, read, write })
}

/// Every op joined to some cross-entropy op of `view` (what a fuser leaves to `cuda-kernels`).
pub fn joined_ops(view: &TraceView) -> Vec<usize> {
    (0..view.ops.len())
        .filter_map(|i| chain(view, i))
        .flat_map(|c| c.ops)
        .collect()
}
