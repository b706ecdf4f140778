//! `ltorch.layer_norm(x, normalized_shape, weight, bias, eps)` claimed whole on f32: one task
//! per block of rows, each row read twice from cache (sum, then the centred sum of squares, both
//! accumulated in f64) and written once, instead of the decomposition's three fused loops over
//! the whole tensor (BERT and GPT-2 imported from ONNX run 13 to 25 of them per call).
//!
//! The decomposition's arithmetic with less rounding: the mean and the variance are summed in
//! f64 (the fused loops accumulate in f64 too), `(x - mean) * rstd` is taken in f64 (the
//! decomposition rounds the mean to f32 first), then `* w + b` in f32.
//! Anything but f32 tensors, or a weight / bias not shaped like `normalized_shape`, is left to
//! the decomposition.

use crate::decode::{fail, value_meta, Ty, R};
use crate::exec::Bufs;
use crate::group::BufId;
use crate::layout::Layout;
use crate::plan::{numel, Planner, ValState};
use crate::stages::Stage;
use rayon::prelude::*;
use thunder_abi::{ArgView, OpView, PluginError, TraceView};

pub(crate) const SYMBOL: &str = "ltorch.layer_norm";

/// Elements below which a layer norm runs on the calling thread.
const PAR_MIN: usize = 1 << 15;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LayerNormOp {
    pub(crate) x: u32,
    pub(crate) weight: Option<u32>,
    pub(crate) bias: Option<u32>,
    pub(crate) out: u32,
    pub(crate) shape: Vec<usize>,
    /// Elements per normalized row (the product of `normalized_shape`).
    pub(crate) n: usize,
    /// How many trailing dims are normalized (the weight's and bias's rank).
    pub(crate) norm_rank: usize,
    pub(crate) eps: f64,
}

/// Decodes the composite; the error says what did not fit.
pub(crate) fn decode(view: &TraceView, op: &OpView) -> Result<LayerNormOp, PluginError> {
    decode_inner(view, op).map_err(|m| PluginError::unsupported(format!("{SYMBOL}: {m}")))
}

fn decode_inner(view: &TraceView, op: &OpView) -> R<LayerNormOp> {
    let args = op.args.as_slice();
    if args.len() != 5 || op.outputs.len() != 1 {
        return fail(format!(
            "expected 5 arguments and 1 output, got {} and {}",
            args.len(),
            op.outputs.len()
        ));
    }
    let f32_tensor = |i: usize, name: &str| -> R<Option<(u32, Vec<usize>)>> {
        match &args[i] {
            ArgView::None => Ok(None),
            ArgView::Value(v) => {
                let (ty, shape) = value_meta(view, *v)?;
                if ty != Ty::F32 {
                    return fail(format!("{name} is {ty:?}; claimed in f32 only"));
                }
                Ok(Some((*v, shape)))
            }
            other => fail(format!("{name} must be a tensor, got {other:?}")),
        }
    };
    let Some((x, shape)) = f32_tensor(0, "input")? else {
        return fail("the input is None");
    };
    let norm: Vec<usize> = match &args[1] {
        ArgView::Ints(d) if d.iter().all(|&x| x >= 0) => d.iter().map(|&x| x as usize).collect(),
        other => return fail(format!("normalized_shape must be sizes, got {other:?}")),
    };
    if norm.is_empty() || norm.len() > shape.len() || shape[shape.len() - norm.len()..] != norm[..]
    {
        return fail(format!(
            "normalized_shape {norm:?} is not the trailing dims of {shape:?}"
        ));
    }
    let mut affine = [None, None];
    for (slot, (i, name)) in affine.iter_mut().zip([(2, "weight"), (3, "bias")]) {
        if let Some((id, s)) = f32_tensor(i, name)? {
            if s != norm {
                return fail(format!("{name} is {s:?}, not normalized_shape {norm:?}"));
            }
            *slot = Some(id);
        }
    }
    let eps = match &args[4] {
        ArgView::Float(e) => *e,
        other => return fail(format!("eps must be a float, got {other:?}")),
    };
    let out = op.outputs[0];
    let (ty, out_shape) = value_meta(view, out)?;
    if ty != Ty::F32 || out_shape != shape {
        return fail(format!(
            "output is {ty:?}{out_shape:?}, expected F32{shape:?}"
        ));
    }
    Ok(LayerNormOp {
        x,
        weight: affine[0],
        bias: affine[1],
        out,
        n: norm.iter().product(),
        norm_rank: norm.len(),
        shape,
        eps,
    })
}

/// A scheduled layer norm: operands as strided views, the output contiguous.
#[derive(Debug, Clone)]
pub(crate) struct LayerNormPlan {
    x: (BufId, Layout),
    weight: Option<(BufId, Layout)>,
    bias: Option<(BufId, Layout)>,
    out: BufId,
    shape: Vec<usize>,
    n: usize,
    norm_rank: usize,
    eps: f64,
}

impl Planner {
    /// Schedules a decoded layer norm as one stage writing its output.
    pub(crate) fn add_layer_norm(&mut self, op: &LayerNormOp) -> Result<(), PluginError> {
        let x = self.materialize(op.x)?;
        let weight = op.weight.map(|w| self.materialize(w)).transpose()?;
        let bias = op.bias.map(|b| self.materialize(b)).transpose()?;
        let out = self.new_buf(op.out, Ty::F32, numel(&op.shape));
        self.stages.push(Stage::LayerNorm(LayerNormPlan {
            x,
            weight,
            bias,
            out,
            shape: op.shape.clone(),
            n: op.n,
            norm_rank: op.norm_rank,
            eps: op.eps,
        }));
        self.producer.insert(out, self.stages.len() - 1);
        self.vals.insert(
            op.out,
            ValState {
                ty: Ty::F32,
                mem: Some((out, Layout::contiguous(&op.shape))),
                shape: op.shape.clone(),
                virt: None,
                konst: None,
            },
        );
        Ok(())
    }
}

/// The elements of a strided view in row-major order of `shape`.
///
/// # Safety
/// The layout addresses elements inside the buffer at `base`.
unsafe fn gather(base: *const f32, layout: &Layout, shape: &[usize]) -> Vec<f32> {
    let total = numel(shape);
    let mut out = Vec::with_capacity(total);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..total {
        let off: i64 = layout.offset
            + index
                .iter()
                .zip(&layout.strides)
                .map(|(&i, &s)| i as i64 * s)
                .sum::<i64>();
        out.push(*base.offset(off as isize));
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// Whether the view is the buffer's elements in row-major order from its offset.
fn is_contiguous(layout: &Layout, shape: &[usize]) -> bool {
    let mut expect = 1i64;
    for (&d, &s) in shape.iter().zip(&layout.strides).rev() {
        if d != 1 && s != expect {
            return false;
        }
        expect *= d as i64;
    }
    true
}

/// A contiguous copy of an operand unless it already is one (the pointer, and the owner).
///
/// # Safety
/// As for [`gather`].
unsafe fn contiguous(
    bufs: &Bufs,
    (buf, layout): &(BufId, Layout),
    shape: &[usize],
) -> (*const f32, Option<Vec<f32>>) {
    let base = bufs.ptr(*buf) as *const f32;
    if is_contiguous(layout, shape) {
        (base.offset(layout.offset as isize), None)
    } else {
        let v = gather(base, layout, shape);
        (v.as_ptr(), Some(v))
    }
}

#[derive(Clone, Copy)]
struct Ptr(*mut f32);
// SAFETY: tasks write disjoint rows of the output and only read the operands, which outlive
// the run.
unsafe impl Sync for Ptr {}
unsafe impl Send for Ptr {}

impl Ptr {
    fn get(self) -> *mut f32 {
        self.0
    }
}

pub(crate) fn run(p: &LayerNormPlan, bufs: &Bufs) {
    if crate::exec::trace() {
        let t = std::time::Instant::now();
        run_inner(p, bufs);
        crate::exec::trace_line(format_args!(
            "cpu-simd layer_norm: {:>9.1} us shape {:?} n {}",
            t.elapsed().as_secs_f64() * 1e6,
            p.shape,
            p.n
        ));
    } else {
        run_inner(p, bufs);
    }
}

fn run_inner(p: &LayerNormPlan, bufs: &Bufs) {
    let total = numel(&p.shape);
    if total == 0 || p.n == 0 {
        return;
    }
    let rows = total / p.n;
    let norm = &p.shape[p.shape.len() - p.norm_rank..];
    // SAFETY: every layout addresses elements inside its buffer (checked when the region was
    // compiled against the buffers' sizes); the output holds `total` contiguous elements.
    let (x, _xo) = unsafe { contiguous(bufs, &p.x, &p.shape) };
    let w = p
        .weight
        .as_ref()
        .map(|o| unsafe { contiguous(bufs, o, norm) });
    let b = p
        .bias
        .as_ref()
        .map(|o| unsafe { contiguous(bufs, o, norm) });
    let (xp, out) = (Ptr(x as *mut f32), Ptr(bufs.ptr(p.out) as *mut f32));
    let wp = w.as_ref().map(|(q, _)| Ptr(*q as *mut f32));
    let bp = b.as_ref().map(|(q, _)| Ptr(*q as *mut f32));
    let (n, eps) = (p.n, p.eps);
    let block = |r: std::ops::Range<usize>| {
        // SAFETY: rows `r` of the input and output are in bounds; this task alone writes them.
        unsafe {
            let w = wp.map(|q| std::slice::from_raw_parts(q.get() as *const f32, n));
            let b = bp.map(|q| std::slice::from_raw_parts(q.get() as *const f32, n));
            for i in r {
                let xr = std::slice::from_raw_parts(xp.get().add(i * n) as *const f32, n);
                let yr = std::slice::from_raw_parts_mut(out.get().add(i * n), n);
                rows_dispatch(xr, w, b, yr, eps);
            }
        }
    };
    let threads = rayon::current_num_threads();
    if threads <= 1 || total < PAR_MIN || rows < 2 {
        block(0..rows);
    } else {
        let chunks = (threads * 4).min(rows);
        (0..chunks).into_par_iter().for_each(|c| {
            // Workers flush subnormals for the products; this loop keeps IEEE semantics, as
            // the fused loops it replaces do (`ftz.rs`).
            let _ieee = crate::ftz::FlushGuard::ieee();
            block(c * rows / chunks..(c + 1) * rows / chunks);
        });
    }
}

fn rows_dispatch(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, y: &mut [f32], eps: f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::exec::isa_level() >= 2 {
            // SAFETY: the level says the CPU has these features.
            return unsafe { row_avx512(x, w, b, y, eps) };
        }
        if crate::exec::isa_level() == 1 {
            // SAFETY: as above.
            return unsafe { row_avx2(x, w, b, y, eps) };
        }
    }
    row(x, w, b, y, eps)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn row_avx512(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, y: &mut [f32], eps: f64) {
    row(x, w, b, y, eps)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_avx2(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, y: &mut [f32], eps: f64) {
    row(x, w, b, y, eps)
}

/// Lanes of the f64 accumulators (independent sums, so the loop vectorises).
const LANES: usize = 16;

#[inline(always)]
fn row(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, y: &mut [f32], eps: f64) {
    let n = x.len();
    let mut acc = [0f64; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail: f64 = chunks.remainder().iter().map(|&v| f64::from(v)).sum();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f64::from(v);
        }
    }
    let mean = (acc.iter().sum::<f64>() + tail) / n as f64;
    let mut acc = [0f64; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail: f64 = chunks
        .remainder()
        .iter()
        .map(|&v| (f64::from(v) - mean) * (f64::from(v) - mean))
        .sum();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            let d = f64::from(v) - mean;
            *a += d * d;
        }
    }
    let var = (acc.iter().sum::<f64>() + tail) / n as f64;
    let rstd = 1.0 / (var + eps).sqrt();
    // The centred value in f64, so a mean far from zero does not round away the row's detail.
    let norm = |v: f32| ((f64::from(v) - mean) * rstd) as f32;
    match (w, b) {
        (Some(w), Some(b)) => {
            for (((o, &v), &wv), &bv) in y.iter_mut().zip(x).zip(w).zip(b) {
                *o = norm(v) * wv + bv;
            }
        }
        (Some(w), None) => {
            for ((o, &v), &wv) in y.iter_mut().zip(x).zip(w) {
                *o = norm(v) * wv;
            }
        }
        (None, Some(b)) => {
            for ((o, &v), &bv) in y.iter_mut().zip(x).zip(b) {
                *o = norm(v) + bv;
            }
        }
        (None, None) => {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = norm(v);
            }
        }
    }
}
