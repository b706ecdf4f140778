//! bf16 and f16 products on the CPU: `prims.matmul` of two half-type tensors, with the
//! `prims.transpose`s in front of it (a linear's weight) read as strided views, claimed as
//! regions of their own. The fused loops and the f32 GEMM stages compute in f32 and f64
//! only; a half-type program's elementwise work already reaches the executors as f32 between
//! converts, but its products were left to the interpreter, which sums in f64 one element at
//! a time (a bf16 `[256, 256] @ [256, 256]` took it about a second).
//!
//! On a CPU with AVX-512-BF16, bf16 products run on `bf16_gemm.rs`'s kernel. Otherwise (and
//! for f16) each product converts its operands to f32 blocks (a view that is row- or column-major
//! keeps its order, so a transposed weight is converted as it lies), multiplies them with the
//! `gemm` crate (f32 sums, as PyTorch's CPU bf16 and f16 GEMMs accumulate) and rounds the
//! result once to the output type, ties to even. Against the interpreter's f64 sums that
//! differs by at most an ulp of the output type in the last rounding.

use half::{bf16, f16};
use rayon::prelude::*;
use std::collections::HashMap;
use thunder_abi::export::CompiledRegion;
use thunder_abi::prims::{Prim, PrimKind, ShapePrim};
use thunder_abi::{
    ArgView, DTypeCode, DeviceKind, ExecContext, OpView, PluginError, RegionSpec, TensorDesc,
    TraceView,
};

/// Below this many multiply-adds a product runs on the calling thread.
const PAR_MIN: usize = 1 << 18;

/// The half types this module takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Half {
    Bf16,
    F16,
}

impl Half {
    fn of(d: DTypeCode) -> Option<Half> {
        match d {
            DTypeCode::BF16 => Some(Half::Bf16),
            DTypeCode::F16 => Some(Half::F16),
            _ => None,
        }
    }

    fn dtype(self) -> DTypeCode {
        match self {
            Half::Bf16 => DTypeCode::BF16,
            Half::F16 => DTypeCode::F16,
        }
    }

    /// Every element of `src` widened to f32 (exact).
    fn widen(self, src: &[u16], dst: &mut [f32]) {
        match self {
            Half::Bf16 => dst
                .iter_mut()
                .zip(src)
                .for_each(|(d, &s)| *d = f32::from_bits(u32::from(s) << 16)),
            Half::F16 => dst
                .iter_mut()
                .zip(src)
                .for_each(|(d, &s)| *d = f16::from_bits(s).to_f32()),
        }
    }

    /// Every element of `src` rounded to the half type (ties to even; NaN stays NaN).
    fn narrow(self, src: &[f32], dst: &mut [u16]) {
        match self {
            Half::Bf16 => dst
                .iter_mut()
                .zip(src)
                .for_each(|(d, &s)| *d = bf16::from_f32(s).to_bits()),
            Half::F16 => dst
                .iter_mut()
                .zip(src)
                .for_each(|(d, &s)| *d = f16::from_f32(s).to_bits()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum HalfOp {
    Transpose { a: u32, perm: Vec<usize> },
    Matmul { a: u32, b: u32 },
}

#[derive(Debug, Clone)]
struct Decoded {
    op: HalfOp,
    out: u32,
    ty: Half,
    shape: Vec<usize>,
}

/// Type and shape of a half-type CPU value.
fn meta(view: &TraceView, id: u32) -> Result<(Half, Vec<usize>), String> {
    let m = view
        .values
        .get(id as usize)
        .ok_or_else(|| format!("value {id} is not in the trace"))?;
    if m.device.kind != DeviceKind::Cpu {
        return Err(format!("value {id} is on {:?}, not the CPU", m.device));
    }
    let ty = Half::of(m.dtype)
        .ok_or_else(|| format!("value {id} is {}, not bf16 or f16", m.dtype.short_name()))?;
    let shape = m
        .shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("value {id} has a negative dim")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((ty, shape))
}

fn tensor(view: &TraceView, op: &OpView, i: usize) -> Result<(u32, Half, Vec<usize>), String> {
    match op.args.get(i) {
        Some(ArgView::Value(v)) => meta(view, *v).map(|(t, s)| (*v, t, s)),
        other => Err(format!("argument {i} must be a tensor, got {other:?}")),
    }
}

fn decode(view: &TraceView, op: &OpView) -> Result<Decoded, String> {
    let prim = Prim::from_id(&op.symbol).ok_or("not a prim")?;
    let &[out] = op.outputs.as_slice() else {
        return Err(format!("expected 1 output, got {}", op.outputs.len()));
    };
    let (ty, shape) = meta(view, out)?;
    let (a, ta, sa) = tensor(view, op, 0)?;
    if ta != ty {
        return Err(format!("operand is {ta:?}, output {ty:?}"));
    }
    let op = match prim.kind() {
        PrimKind::Shape(ShapePrim::Transpose) => {
            let perm = match op.args.get(1) {
                Some(ArgView::Ints(p)) => p
                    .iter()
                    .map(|&d| usize::try_from(d).ok().filter(|&d| d < sa.len()))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("the permutation names a dim out of range")?,
                other => return Err(format!("argument 1 must be a permutation, got {other:?}")),
            };
            let mut seen = vec![false; sa.len()];
            if perm.len() != sa.len() || perm.iter().any(|&d| std::mem::replace(&mut seen[d], true))
            {
                return Err("the permutation must name every dim once".into());
            }
            if perm.iter().map(|&d| sa[d]).ne(shape.iter().copied()) {
                return Err(format!("output shape {shape:?} is not {sa:?} permuted"));
            }
            HalfOp::Transpose { a, perm }
        }
        PrimKind::Matmul(_) => {
            let (b, tb, sb) = tensor(view, op, 1)?;
            let r = sa.len();
            if op.args.len() != 2
                || tb != ty
                || r < 2
                || sb.len() != r
                || sa[..r - 2] != sb[..r - 2]
                || sa[r - 1] != sb[r - 2]
            {
                return Err("expects [..., m, k] @ [..., k, n] of one half type".into());
            }
            let mut want = sa[..r - 1].to_vec();
            want.push(sb[r - 1]);
            if want != shape {
                return Err(format!("output shape {shape:?}, expected {want:?}"));
            }
            HalfOp::Matmul { a, b }
        }
        _ => return Err("only matmul and transpose run here in half types".into()),
    };
    Ok(Decoded { op, out, ty, shape })
}

/// Whether `op` is a half-type product or transpose this module runs.
pub(crate) fn accepts(view: &TraceView, op: &OpView) -> bool {
    !op.composite && decode(view, op).is_ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Buf {
    Input(usize),
    Output(usize),
    Scratch(usize),
}

/// Elements of a buffer seen with a shape: element `idx` at `offset + Σ idx[d] * strides[d]`.
#[derive(Debug, Clone)]
struct View {
    buf: Buf,
    offset: usize,
    strides: Vec<usize>,
}

fn contiguous(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

#[derive(Debug)]
struct Product {
    ty: Half,
    a: View,
    b: View,
    out: Buf,
    batch: Vec<usize>,
    m: usize,
    k: usize,
    n: usize,
}

#[derive(Debug)]
enum Step {
    Product(Product),
    /// A region output that is a view of another value (a transpose): copied out.
    Copy {
        src: View,
        shape: Vec<usize>,
        out: Buf,
    },
}

pub(crate) struct HalfRegion {
    inputs: Vec<(u32, Half, Vec<usize>)>,
    outputs: Vec<(u32, Half, Vec<usize>)>,
    /// Elements of each scratch buffer.
    scratch: Vec<usize>,
    steps: Vec<Step>,
}

fn unsupported(m: impl std::fmt::Display) -> PluginError {
    PluginError::unsupported(format!("cpu-simd (half-type products): {m}"))
}

impl HalfRegion {
    pub(crate) fn compile(view: &TraceView, region: &RegionSpec) -> Result<Self, PluginError> {
        let metas = |ids: &[u32]| {
            ids.iter()
                .map(|&id| meta(view, id).map(|(t, s)| (id, t, s)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(unsupported)
        };
        let inputs = metas(&region.inputs)?;
        let outputs = metas(&region.outputs)?;
        let mut vals: HashMap<u32, (View, Vec<usize>)> = HashMap::new();
        for (i, (id, _, shape)) in inputs.iter().enumerate() {
            let v = View {
                buf: Buf::Input(i),
                offset: 0,
                strides: contiguous(shape),
            };
            vals.insert(*id, (v, shape.clone()));
        }
        let (mut scratch, mut steps) = (Vec::new(), Vec::new());
        for &i in region.ops.iter() {
            let op = view.ops.get(i as usize).ok_or_else(|| {
                PluginError::invalid(format!("cpu-simd: op {i} is not in the trace"))
            })?;
            let d = decode(view, op).map_err(|m| unsupported(format!("{}: {m}", op.symbol)))?;
            let get = |id: u32| {
                vals.get(&id).cloned().ok_or_else(|| {
                    PluginError::internal(format!("value {id} is read before it is defined"))
                })
            };
            match d.op {
                HalfOp::Transpose { a, ref perm } => {
                    let (v, _) = get(a)?;
                    let strides = perm.iter().map(|&p| v.strides[p]).collect();
                    vals.insert(d.out, (View { strides, ..v }, d.shape.clone()));
                }
                HalfOp::Matmul { a, b } => {
                    let ((va, sa), (vb, sb)) = (get(a)?, get(b)?);
                    let r = sa.len();
                    let out = match region.outputs.iter().position(|&o| o == d.out) {
                        Some(j) => Buf::Output(j),
                        None => {
                            scratch.push(d.shape.iter().product());
                            Buf::Scratch(scratch.len() - 1)
                        }
                    };
                    steps.push(Step::Product(Product {
                        ty: d.ty,
                        a: va,
                        b: vb,
                        out,
                        batch: sa[..r - 2].to_vec(),
                        m: sa[r - 2],
                        k: sa[r - 1],
                        n: sb[r - 1],
                    }));
                    let v = View {
                        buf: out,
                        offset: 0,
                        strides: contiguous(&d.shape),
                    };
                    vals.insert(d.out, (v, d.shape.clone()));
                }
            }
        }
        for (j, (id, _, _)) in outputs.iter().enumerate() {
            let (v, shape) = vals
                .get(id)
                .cloned()
                .ok_or_else(|| PluginError::internal(format!("output {id} is never defined")))?;
            if v.buf != Buf::Output(j) {
                steps.push(Step::Copy {
                    src: v,
                    shape,
                    out: Buf::Output(j),
                });
            }
        }
        Ok(HalfRegion {
            inputs,
            outputs,
            scratch,
            steps,
        })
    }
}

/// A host tensor's elements, checked against what the region was compiled for.
fn checked(
    what: &str,
    desc: &TensorDesc<'_>,
    (id, ty, shape): &(u32, Half, Vec<usize>),
) -> Result<(*mut u16, usize), PluginError> {
    let same_shape = desc.shape.len() == shape.len()
        && desc
            .shape
            .iter()
            .zip(shape)
            .all(|(&g, &w)| g >= 0 && g as usize == w);
    if desc.dtype != ty.dtype() || !same_shape || desc.device.kind != DeviceKind::Cpu {
        return Err(PluginError::invalid(format!(
            "cpu-simd: {what} (value {id}): expected a CPU {}{shape:?}, got {:?} {}{:?}",
            ty.dtype().short_name(),
            desc.device.kind,
            desc.dtype.short_name(),
            desc.shape.as_slice()
        )));
    }
    let n = desc.numel();
    if n > 0 && !desc.strides.is_empty() && !desc.is_contiguous() {
        return Err(unsupported(format!(
            "{what} (value {id}): strided tensors are not supported"
        )));
    }
    let p = desc.base_ptr() as *mut u16;
    if n > 0 && (p.is_null() || !(p as usize).is_multiple_of(2)) {
        return Err(PluginError::invalid(format!(
            "cpu-simd: {what} (value {id}): null or misaligned data"
        )));
    }
    Ok((p, n))
}

/// The region's buffers for one run.
struct Bufs {
    inputs: Vec<(*mut u16, usize)>,
    outputs: Vec<(*mut u16, usize)>,
    scratch: Vec<Vec<u16>>,
}

impl Bufs {
    fn slice(&self, b: Buf) -> &[u16] {
        match b {
            // SAFETY: the host's tensors hold `len` elements for the run (checked).
            Buf::Input(i) => unsafe {
                std::slice::from_raw_parts(self.inputs[i].0, self.inputs[i].1)
            },
            Buf::Output(j) => unsafe {
                std::slice::from_raw_parts(self.outputs[j].0, self.outputs[j].1)
            },
            Buf::Scratch(s) => &self.scratch[s],
        }
    }

    fn slice_mut(&mut self, b: Buf) -> &mut [u16] {
        match b {
            // Regions never write their inputs.
            Buf::Input(_) => &mut [],
            // SAFETY: as above; no other slice of the output is alive while this one is.
            Buf::Output(j) => unsafe {
                std::slice::from_raw_parts_mut(self.outputs[j].0, self.outputs[j].1)
            },
            Buf::Scratch(s) => &mut self.scratch[s],
        }
    }
}

/// An `[rows, cols]` matrix of a view at one batch index, widened to f32 in the view's own
/// order where it is row- or column-major (returning the f32 block's row and column
/// strides), else gathered row-major.
fn widen_matrix(
    ty: Half,
    src: &[u16],
    base: usize,
    (rs, cs): (usize, usize),
    (rows, cols): (usize, usize),
    dst: &mut [f32],
) -> (isize, isize) {
    let n = rows * cols;
    if n == 0 {
        return (cols as isize, 1);
    }
    let mut dense = || {
        let s = &src[base..base + n];
        if n >= 1 << 16 {
            dst.par_chunks_mut(1 << 14)
                .zip(s.par_chunks(1 << 14))
                .for_each(|(d, s)| ty.widen(s, d));
        } else {
            ty.widen(s, dst);
        }
    };
    if cs == 1 && (rs == cols || rows == 1) {
        dense();
        (cols as isize, 1)
    } else if rs == 1 && (cs == rows || cols == 1) {
        dense();
        (1, rows as isize)
    } else {
        for (i, row) in dst.chunks_exact_mut(cols).enumerate() {
            for (j, d) in row.iter_mut().enumerate() {
                let mut one = [0f32];
                ty.widen(&[src[base + i * rs + j * cs]], &mut one);
                *d = one[0];
            }
        }
        (cols as isize, 1)
    }
}

/// The offset of flat batch index `bi` in a view whose leading dims are `batch`.
fn batch_offset(v: &View, batch: &[usize], bi: usize) -> usize {
    let (mut off, mut rem) = (v.offset, bi);
    for d in (0..batch.len()).rev() {
        off += (rem % batch[d]) * v.strides[d];
        rem /= batch[d];
    }
    off
}

fn run_product(p: &Product, bufs: &mut Bufs) {
    let (m, k, n) = (p.m, p.k, p.n);
    let r = p.batch.len() + 2;
    let batches: usize = p.batch.iter().product();
    #[cfg(target_arch = "x86_64")]
    if p.ty == Half::Bf16 && (p.a.strides[r - 1] == 1 || k <= 1) && crate::bf16_gemm::available() {
        for bi in 0..batches {
            let ao = batch_offset(&p.a, &p.batch, bi);
            let bo = batch_offset(&p.b, &p.batch, bi);
            let x = crate::bf16_gemm::Operands {
                a: bufs.slice(p.a.buf).as_ptr().wrapping_add(ao),
                lda: p.a.strides[r - 2],
                b: bufs.slice(p.b.buf).as_ptr().wrapping_add(bo),
                brs: p.b.strides[r - 2],
                bcs: p.b.strides[r - 1],
                out: bufs.slice_mut(p.out).as_mut_ptr().wrapping_add(bi * m * n),
                ldo: n,
            };
            // SAFETY: the views address m x k and k x n elements of their buffers at these
            // offsets, the output m x n; the CPU has AVX-512-BF16.
            unsafe { crate::bf16_gemm::gemm((m, n, k), x) };
        }
        return;
    }
    WIDE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => widened(p, bufs, &mut kept),
        Err(_) => widened(p, bufs, &mut Default::default()),
    })
}

thread_local! {
    /// The widened operands and sums, kept between calls: fresh ones were page faults on every
    /// call, a tenth of a 2048-square product's time.
    static WIDE: std::cell::RefCell<[Vec<f32>; 3]> = std::cell::RefCell::new(Default::default());
}

/// [`run_product`] on widened f32 blocks (`kept`: buffers to reuse).
fn widened(p: &Product, bufs: &mut Bufs, kept: &mut [Vec<f32>; 3]) {
    let (m, k, n) = (p.m, p.k, p.n);
    let r = p.batch.len() + 2;
    let batches: usize = p.batch.iter().product();
    for (v, len) in kept.iter_mut().zip([m * k, k * n, m * n]) {
        if v.len() < len {
            v.resize(len, 0.0);
        }
    }
    let [a32, b32, c32] = kept;
    let (a32, b32, c32) = (&mut a32[..m * k], &mut b32[..k * n], &mut c32[..m * n]);
    let threads = rayon::current_num_threads();
    let par = if m * n * k >= PAR_MIN && threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    for bi in 0..batches {
        let ao = batch_offset(&p.a, &p.batch, bi);
        let bo = batch_offset(&p.b, &p.batch, bi);
        let (a_src, b_src) = (bufs.slice(p.a.buf), bufs.slice(p.b.buf));
        let (ars, acs) = widen_matrix(
            p.ty,
            a_src,
            ao,
            (p.a.strides[r - 2], p.a.strides[r - 1]),
            (m, k),
            a32,
        );
        let (brs, bcs) = widen_matrix(
            p.ty,
            b_src,
            bo,
            (p.b.strides[r - 2], p.b.strides[r - 1]),
            (k, n),
            b32,
        );
        if m * n > 0 {
            // SAFETY: the f32 blocks hold m x k, k x n and m x n elements with the strides
            // given; the output block is written only here.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    c32.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    a32.as_ptr(),
                    acs,
                    ars,
                    b32.as_ptr(),
                    bcs,
                    brs,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                )
            };
        }
        let out = &mut bufs.slice_mut(p.out)[bi * m * n..(bi + 1) * m * n];
        if out.len() >= 1 << 16 {
            out.par_chunks_mut(1 << 14)
                .zip(c32.par_chunks(1 << 14))
                .for_each(|(o, c)| p.ty.narrow(c, o));
        } else {
            p.ty.narrow(c32, out);
        }
    }
}

/// Copies a view of `shape` into a contiguous buffer, element by element.
fn run_copy(src: &View, shape: &[usize], out: Buf, bufs: &mut Bufs) {
    let n: usize = shape.iter().product();
    let from: Vec<u16> = {
        let s = bufs.slice(src.buf);
        let mut idx = vec![0usize; shape.len()];
        (0..n)
            .map(|_| {
                let off = src.offset
                    + idx
                        .iter()
                        .zip(&src.strides)
                        .map(|(i, s)| i * s)
                        .sum::<usize>();
                for d in (0..shape.len()).rev() {
                    idx[d] += 1;
                    if idx[d] < shape[d] {
                        break;
                    }
                    idx[d] = 0;
                }
                s[off]
            })
            .collect()
    };
    bufs.slice_mut(out)[..n].copy_from_slice(&from);
}

impl CompiledRegion for HalfRegion {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        crate::region::check_call(
            ctx,
            (inputs.len(), outputs.len()),
            (self.inputs.len(), self.outputs.len()),
        )?;
        let ins = inputs
            .iter()
            .zip(&self.inputs)
            .enumerate()
            .map(|(i, (d, m))| checked(&format!("input {i}"), d, m))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = outputs
            .iter()
            .zip(&self.outputs)
            .enumerate()
            .map(|(j, (d, m))| checked(&format!("output {j}"), d, m))
            .collect::<Result<Vec<_>, _>>()?;
        let mut bufs = Bufs {
            inputs: ins,
            outputs: outs,
            scratch: self.scratch.iter().map(|&n| vec![0u16; n]).collect(),
        };
        let t = crate::exec::trace().then(std::time::Instant::now);
        for step in &self.steps {
            match step {
                Step::Product(p) => run_product(p, &mut bufs),
                Step::Copy { src, shape, out } => run_copy(src, shape, *out, &mut bufs),
            }
        }
        if let Some(t) = t {
            eprintln!(
                "cpu-simd half:  {:>9.1} us {} steps",
                t.elapsed().as_secs_f64() * 1e6,
                self.steps.len()
            );
        }
        Ok(())
    }
}
