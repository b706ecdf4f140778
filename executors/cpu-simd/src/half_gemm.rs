//! bf16 and f16 work on the CPU, as regions of their own: `prims.matmul` of two half-type
//! tensors, the `prims.transpose`s and `prims.broadcast_in_dim`s of half-type values (read as
//! strided views), and `prims.convert_element_type` between a half type and f32. The fused
//! loops and the f32 GEMM stages compute in f32 and f64 only; a half-type program's
//! elementwise work reaches the executors as f32 between such converts, and its products and
//! converts were left to the interpreter, which sums in f64 one element at a time (a bf16
//! `[256, 256] @ [256, 256]` took it about a second) and converted at a few hundred MB/s: in
//! a bf16 MLP layer (`[512, 768]`, 3,072 hidden, tanh GELU) its converts took 93 of 114 ms.
//!
//! On a CPU with AVX-512-BF16, bf16 products run on `bf16_gemm.rs`'s kernel. Otherwise (and
//! for f16) each product converts its operands to f32 blocks (a view that is row- or column-major
//! keeps its order, so a transposed weight is converted as it lies), multiplies them with the
//! `gemm` crate (f32 sums, as PyTorch's CPU bf16 and f16 GEMMs accumulate) and rounds the
//! result once to the output type, ties to even. Against the interpreter's f64 sums that
//! differs by at most an ulp of the output type in the last rounding. Converts round f32 to
//! the half type to nearest, ties to even (as the interpreter does); widening is exact.

use crate::region::{check_tensor, Side};
use half::{bf16, f16};
use rayon::prelude::*;
use std::collections::HashMap;
use thunder_abi::export::CompiledRegion;
use thunder_abi::prims::{Prim, PrimKind, ReductionPrim, ShapePrim};
use thunder_abi::{
    ArgView, DTypeCode, ExecContext, OpView, PluginError, RegionSpec, TensorDesc, TraceView,
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

    /// One element widened to f32 (exact).
    #[inline(always)]
    pub(crate) fn widen_one(self, bits: u16) -> f32 {
        match self {
            Half::Bf16 => f32::from_bits(u32::from(bits) << 16),
            Half::F16 => f16::from_bits(bits).to_f32(),
        }
    }

    /// Every element of `src` widened to f32 (exact).
    fn widen(self, src: &[u16], dst: &mut [f32]) {
        // The type is matched once, outside the loop, so each loop vectorizes.
        match self {
            Half::Bf16 => dst
                .iter_mut()
                .zip(src)
                .for_each(|(d, &s)| *d = Half::Bf16.widen_one(s)),
            Half::F16 => dst
                .iter_mut()
                .zip(src)
                .for_each(|(d, &s)| *d = Half::F16.widen_one(s)),
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

/// A value's element type here: a half type, or f32 on the far side of a convert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elem {
    Half(Half),
    F32,
}

impl Elem {
    fn of(d: DTypeCode) -> Option<Elem> {
        match d {
            DTypeCode::F32 => Some(Elem::F32),
            _ => Half::of(d).map(Elem::Half),
        }
    }

    fn dtype(self) -> DTypeCode {
        match self {
            Elem::Half(h) => h.dtype(),
            Elem::F32 => DTypeCode::F32,
        }
    }

    fn size(self) -> usize {
        match self {
            Elem::Half(_) => 2,
            Elem::F32 => 4,
        }
    }

    fn half(self) -> Option<Half> {
        match self {
            Elem::Half(h) => Some(h),
            Elem::F32 => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum HalfOp {
    Transpose {
        a: u32,
        perm: Vec<usize>,
    },
    Matmul {
        a: u32,
        b: u32,
    },
    /// `broadcast_in_dim`: input dim `i` becomes output dim `dims[i]` (a view).
    Broadcast {
        a: u32,
        dims: Vec<usize>,
    },
    /// `convert_element_type` between a half type and f32.
    Convert {
        a: u32,
        from: Elem,
    },
    /// `sum` over `dims` (`half_sum.rs`).
    Sum {
        a: u32,
        dims: Vec<usize>,
    },
}

#[derive(Debug, Clone)]
struct Decoded {
    op: HalfOp,
    out: u32,
    ty: Elem,
    shape: Vec<usize>,
}

/// Type and shape of a half-type (or f32) CPU value.
fn meta(view: &TraceView, id: u32) -> Result<(Elem, Vec<usize>), String> {
    let (dtype, shape) = crate::decode::cpu_value(view, id)?;
    let ty = Elem::of(dtype)
        .ok_or_else(|| format!("value {id} is {}, not bf16, f16 or f32", dtype.short_name()))?;
    Ok((ty, shape))
}

fn tensor(view: &TraceView, op: &OpView, i: usize) -> Result<(u32, Elem, Vec<usize>), String> {
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
    let ints = |i: usize| match op.args.get(i) {
        Some(ArgView::Ints(v)) => v
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("argument {i}: negative entry")))
            .collect::<Result<Vec<usize>, String>>(),
        other => Err(format!(
            "argument {i} must be a list of ints, got {other:?}"
        )),
    };
    let op = match prim.kind() {
        PrimKind::Convert(_) => {
            if op.args.len() != 2 || ta.half().is_some() == ty.half().is_some() || sa != shape {
                return Err("converts between a half type and f32 of one shape only".into());
            }
            HalfOp::Convert { a, from: ta }
        }
        _ if ta != ty || ty.half().is_none() => {
            return Err(format!(
                "operand {ta:?}, output {ty:?}: only half-type products, views and converts here"
            ))
        }
        PrimKind::Shape(ShapePrim::BroadcastInDim) => {
            let (out_shape, dims) = (ints(1)?, ints(2)?);
            let mut last = None;
            let ok = op.args.len() == 3
                && out_shape == shape
                && dims.len() == sa.len()
                && dims.iter().zip(&sa).all(|(&d, &s)| {
                    let rising = last.is_none_or(|l| d > l);
                    last = Some(d);
                    rising && d < shape.len() && (s == 1 || s == shape[d])
                });
            if !ok {
                return Err(format!(
                    "cannot broadcast {sa:?} to {shape:?} along {dims:?}"
                ));
            }
            HalfOp::Broadcast { a, dims }
        }
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
        PrimKind::Reduction(ReductionPrim::Sum) => {
            let dims = ints(1)?;
            let mut seen = vec![false; sa.len()];
            let valid = op.args.len() == 2
                && dims
                    .iter()
                    .all(|&d| d < sa.len() && !std::mem::replace(&mut seen[d], true));
            let kept: Vec<usize> = (0..sa.len())
                .filter(|d| !dims.contains(d))
                .map(|d| sa[d])
                .collect();
            if !valid || kept != shape {
                return Err(format!("cannot sum {sa:?} over {dims:?} into {shape:?}"));
            }
            HalfOp::Sum { a, dims }
        }
        _ => return Err("only matmul, sum, transpose and broadcast run here in half types".into()),
    };
    Ok(Decoded { op, out, ty, shape })
}

/// Whether `op` is a half-type product, view or convert this module runs.
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

/// A step's result: its buffer, read as written (row-major), with its shape.
fn written(out: Buf, shape: &[usize]) -> (View, Vec<usize>) {
    let v = View {
        buf: out,
        offset: 0,
        strides: contiguous(shape),
    };
    (v, shape.to_vec())
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
    /// A view's elements, converted from `from` to `to` (or copied, a region output that
    /// is a view), into a contiguous buffer.
    Rows {
        src: View,
        shape: Vec<usize>,
        from: Elem,
        to: Elem,
        out: Buf,
    },
    /// A view of `shape` summed over `dims`.
    Sum {
        src: View,
        shape: Vec<usize>,
        dims: Vec<usize>,
        ty: Half,
        out: Buf,
    },
}

impl Step {
    /// One line for the trace: the product's sizes and operand strides, or the conversion
    /// and the view's shape and strides.
    fn describe(&self) -> String {
        match self {
            Step::Product(p) => format!(
                "product {:?} batch {:?} m {} k {} n {} a strides {:?} b strides {:?}",
                p.ty, p.batch, p.m, p.k, p.n, p.a.strides, p.b.strides
            ),
            Step::Rows {
                src,
                shape,
                from,
                to,
                ..
            } => format!(
                "rows {from:?} -> {to:?} shape {shape:?} strides {:?}",
                src.strides
            ),
            Step::Sum {
                src,
                shape,
                dims,
                ty,
                ..
            } => format!(
                "sum {ty:?} shape {shape:?} strides {:?} over {dims:?}",
                src.strides
            ),
        }
    }
}

pub(crate) struct HalfRegion {
    inputs: Vec<(u32, Elem, Vec<usize>)>,
    outputs: Vec<(u32, Elem, Vec<usize>)>,
    /// Bytes of each scratch buffer.
    scratch: Vec<usize>,
    steps: Vec<Step>,
}

/// When output `j` is the transpose of a 2-d product that nothing else reads (a weight
/// gradient, `(xᵀ @ g)ᵀ`), makes the product compute `gᵀ @ x` into the output directly:
/// `(a @ b)ᵀ = bᵀ @ aᵀ`, the same sums over the same depth in the same order, with no
/// transposed copy of the result (2.4M bf16 elements took 1.0-1.7 ms to copy).
fn product_transposed(steps: &mut [Step], v: &View, outputs: &[Buf], j: usize) -> bool {
    let Buf::Scratch(_) = v.buf else {
        return false;
    };
    let reads = |st: &Step| match st {
        Step::Product(p) => p.a.buf == v.buf || p.b.buf == v.buf,
        Step::Rows { src, .. } | Step::Sum { src, .. } => src.buf == v.buf,
    };
    let shared = steps.iter().any(reads)
        || outputs
            .iter()
            .enumerate()
            .any(|(i, &b)| i != j && b == v.buf);
    let Some(Step::Product(p)) = steps
        .iter_mut()
        .find(|st| matches!(st, Step::Product(p) if p.out == v.buf))
    else {
        return false;
    };
    if shared || !p.batch.is_empty() || v.offset != 0 || v.strides != [1, p.n] {
        return false;
    }
    let flip = |w: &View| View {
        strides: vec![w.strides[1], w.strides[0]],
        ..w.clone()
    };
    (p.a, p.b) = (flip(&p.b), flip(&p.a));
    (p.m, p.n) = (p.n, p.m);
    p.out = Buf::Output(j);
    true
}

fn unsupported(m: impl std::fmt::Display) -> PluginError {
    PluginError::unsupported(format!("cpu-simd (half types): {m}"))
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
            let mut new_buf =
                |id: u32, bytes: usize| match region.outputs.iter().position(|&o| o == id) {
                    Some(j) => Buf::Output(j),
                    None => {
                        scratch.push(bytes);
                        Buf::Scratch(scratch.len() - 1)
                    }
                };
            let numel: usize = d.shape.iter().product();
            match d.op {
                HalfOp::Broadcast { a, ref dims } => {
                    let (v, sa) = get(a)?;
                    let mut strides = vec![0; d.shape.len()];
                    for (i, &od) in dims.iter().enumerate() {
                        if sa[i] != 1 {
                            strides[od] = v.strides[i];
                        }
                    }
                    vals.insert(d.out, (View { strides, ..v }, d.shape.clone()));
                }
                HalfOp::Convert { a, from } => {
                    let (v, _) = get(a)?;
                    let out = new_buf(d.out, numel * d.ty.size());
                    steps.push(Step::Rows {
                        src: v,
                        shape: d.shape.clone(),
                        from,
                        to: d.ty,
                        out,
                    });
                    vals.insert(d.out, written(out, &d.shape));
                }
                HalfOp::Transpose { a, ref perm } => {
                    let (v, _) = get(a)?;
                    let strides = perm.iter().map(|&p| v.strides[p]).collect();
                    vals.insert(d.out, (View { strides, ..v }, d.shape.clone()));
                }
                HalfOp::Sum { a, ref dims } => {
                    let (v, sa) = get(a)?;
                    let ty =
                        d.ty.half()
                            .ok_or_else(|| PluginError::internal("an f32 sum in a half region"))?;
                    let out = new_buf(d.out, numel * 2);
                    steps.push(Step::Sum {
                        src: v,
                        shape: sa,
                        dims: dims.clone(),
                        ty,
                        out,
                    });
                    vals.insert(d.out, written(out, &d.shape));
                }
                HalfOp::Matmul { a, b } => {
                    let ((va, sa), (vb, sb)) = (get(a)?, get(b)?);
                    let r = sa.len();
                    let ty = d
                        .ty
                        .half()
                        .ok_or_else(|| PluginError::internal("an f32 product in a half region"))?;
                    let out = new_buf(d.out, numel * 2);
                    steps.push(Step::Product(Product {
                        ty,
                        a: va,
                        b: vb,
                        out,
                        batch: sa[..r - 2].to_vec(),
                        m: sa[r - 2],
                        k: sa[r - 1],
                        n: sb[r - 1],
                    }));
                    vals.insert(d.out, written(out, &d.shape));
                }
            }
        }
        let output_bufs: Vec<Buf> = outputs
            .iter()
            .filter_map(|(id, _, _)| vals.get(id).map(|(v, _)| v.buf))
            .collect();
        for (j, (id, ty, _)) in outputs.iter().enumerate() {
            let (v, shape) = vals
                .get(id)
                .cloned()
                .ok_or_else(|| PluginError::internal(format!("output {id} is never defined")))?;
            if v.buf != Buf::Output(j) && product_transposed(&mut steps, &v, &output_bufs, j) {
                continue;
            }
            if v.buf != Buf::Output(j) {
                steps.push(Step::Rows {
                    src: v,
                    shape,
                    from: *ty,
                    to: *ty,
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

/// A host tensor's address and bytes, checked against what the region was compiled for.
fn checked(
    what: Side,
    desc: &TensorDesc<'_>,
    (id, ty, shape): &(u32, Elem, Vec<usize>),
) -> Result<(*mut u8, usize), PluginError> {
    let p = check_tensor(what, desc, *id, ty.dtype(), shape)?;
    Ok((p, desc.numel() * ty.size()))
}

/// The region's buffers for one run: address and bytes of each.
struct Bufs {
    inputs: Vec<(*mut u8, usize)>,
    outputs: Vec<(*mut u8, usize)>,
    scratch: Vec<(*mut u8, usize)>,
    /// What `scratch` points into (u32s: aligned for f32).
    _owned: Vec<Vec<u32>>,
}

impl Bufs {
    fn raw(&self, b: Buf) -> (*mut u8, usize) {
        match b {
            Buf::Input(i) => self.inputs[i],
            Buf::Output(j) => self.outputs[j],
            Buf::Scratch(s) => self.scratch[s],
        }
    }

    fn slice(&self, b: Buf) -> &[u16] {
        let (p, bytes) = self.raw(b);
        // SAFETY: the buffer holds `bytes` bytes for the run (host tensors checked), aligned
        // for its element type.
        unsafe { std::slice::from_raw_parts(p as *const u16, bytes / 2) }
    }

    fn slice_mut(&mut self, b: Buf) -> &mut [u16] {
        if let Buf::Input(_) = b {
            // Regions never write their inputs.
            return &mut [];
        }
        let (p, bytes) = self.raw(b);
        // SAFETY: as above; no other slice of this buffer is alive while this one is.
        unsafe { std::slice::from_raw_parts_mut(p as *mut u16, bytes / 2) }
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
                *d = ty.widen_one(src[base + i * rs + j * cs]);
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

fn run_sum(src: &View, shape: &[usize], dims: &[usize], ty: Half, out: Buf, bufs: &mut Bufs) {
    let numel: usize = (0..shape.len())
        .filter(|d| !dims.contains(d))
        .map(|d| shape[d])
        .product();
    // `Bufs` lends one slice at a time: the sums are made in a vector of their own (the
    // output's size, small beside the input) and copied to the output.
    let input = crate::half_sum::SumInput {
        src: bufs.slice(src.buf),
        offset: src.offset,
        strides: &src.strides,
        shape,
    };
    let mut sums = vec![0u16; numel];
    crate::half_sum::run(&input, dims, ty, &mut sums);
    let dst = bufs.slice_mut(out);
    let n = dst.len().min(numel);
    dst[..n].copy_from_slice(&sums[..n]);
}

fn run_product(p: &Product, bufs: &mut Bufs) {
    let (m, k, n) = (p.m, p.k, p.n);
    let r = p.batch.len() + 2;
    let batches: usize = p.batch.iter().product();
    #[cfg(target_arch = "x86_64")]
    if p.ty == Half::Bf16 && crate::bf16_gemm::available() {
        // The kernel reads the left rows in place, `k` contiguous; a left operand with `m`
        // contiguous (`gᵀ @ x`, every weight gradient) is transposed into a kept buffer
        // first: a blocked copy of m x k elements, where the f32 path widened both operands
        // and ran at half the rate (6.5 against 3.3 ms for a 3072 x 512 x 768 product).
        let in_place = p.a.strides[r - 1] == 1 || k <= 1;
        let mut kept = if in_place {
            Vec::new()
        } else {
            LEFT.with(|c| c.take())
        };
        if !in_place && kept.len() < m * k {
            kept.resize(m * k, 0);
        }
        for bi in 0..batches {
            let ao = batch_offset(&p.a, &p.batch, bi);
            let bo = batch_offset(&p.b, &p.batch, bi);
            let (a, lda) = if in_place {
                (
                    bufs.slice(p.a.buf).as_ptr().wrapping_add(ao),
                    p.a.strides[r - 2],
                )
            } else {
                let src = Addr(bufs.raw(p.a.buf).0);
                let dst = Addr(kept.as_mut_ptr() as *mut u8);
                // SAFETY: the view addresses m x k elements of its buffer from `ao`; `kept`
                // holds m x k.
                unsafe {
                    transpose_copy(
                        (src, ao, (p.a.strides[r - 2], p.a.strides[r - 1])),
                        dst,
                        (m, k),
                        2,
                    )
                };
                (kept.as_ptr(), k)
            };
            let x = crate::bf16_gemm::Operands {
                a,
                lda,
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
        if !in_place {
            LEFT.with(|c| c.replace(kept));
        }
        return;
    }
    WIDE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => widened(p, bufs, &mut kept),
        Err(_) => widened(p, bufs, &mut Default::default()),
    })
}

thread_local! {
    /// A transposed left operand of the bf16 kernel, kept between calls.
    static LEFT: std::cell::Cell<Vec<u16>> = const { std::cell::Cell::new(Vec::new()) };
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

/// A raw address shared by the row tasks of one step (each writes its own rows).
#[derive(Clone, Copy)]
struct Addr(*mut u8);
// SAFETY: tasks read the source and write disjoint rows of the output.
unsafe impl Send for Addr {}
unsafe impl Sync for Addr {}

impl Addr {
    /// The address (a method, so that closures capture the `Sync` wrapper).
    fn get(&self) -> *mut u8 {
        self.0
    }
}

/// A view of `shape`, converted from `from` to `to` (or copied), into a contiguous buffer:
/// row by row along the last dim, contiguous rows converted as slices, broadcast ones (stride
/// 0) filled, threaded when large.
fn run_rows(src: &View, shape: &[usize], (from, to): (Elem, Elem), out: Buf, bufs: &mut Bufs) {
    let n: usize = shape.iter().product();
    if n == 0 {
        return;
    }
    let last = shape.len().saturating_sub(1);
    if from == to && last >= 1 && src.strides[last] != 1 && src.strides[last - 1] == 1 {
        // A transposed view (a weight gradient returned as `gᵀ`): blocked, so that reads and
        // writes both stay within a few cache lines; row by row, every element of a row was
        // a line of its own (2.1 ms for 768 x 3072 bf16, against about 0.2).
        let (rows, cols) = (shape[last - 1], shape[last]);
        let lead = &shape[..last - 1];
        let (sp, dp) = (Addr(bufs.raw(src.buf).0), Addr(bufs.raw(out).0));
        let mut idx = vec![0usize; lead.len()];
        for bi in 0..n / (rows * cols) {
            let base = src.offset
                + idx
                    .iter()
                    .zip(&src.strides)
                    .map(|(i, s)| i * s)
                    .sum::<usize>();
            let dst = Addr(dp.0.wrapping_add(bi * rows * cols * from.size()));
            // SAFETY: the view addresses these rows x cols elements of its buffer; the output
            // holds `n` elements of `to`.
            unsafe {
                transpose_copy(
                    (Addr(sp.0), base, (src.strides[last - 1], src.strides[last])),
                    dst,
                    (rows, cols),
                    from.size(),
                )
            };
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < lead[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        return;
    }
    let (inner, step) = match shape.last() {
        Some(&w) => (w, src.strides[last]),
        None => (1, 1),
    };
    // Each row's first element in the source.
    let mut starts = Vec::with_capacity(n / inner);
    let mut idx = vec![0usize; last];
    for _ in 0..n / inner {
        starts.push(
            src.offset
                + idx
                    .iter()
                    .zip(&src.strides)
                    .map(|(i, s)| i * s)
                    .sum::<usize>(),
        );
        for d in (0..last).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let (sp, dp) = (Addr(bufs.raw(src.buf).0), Addr(bufs.raw(out).0));
    let row = |r: usize| {
        let (base, o) = (starts[r], r * inner);
        // SAFETY: the view addresses `inner` elements from `base` with stride `step` in its
        // buffer; row `r` of the output is written by this task only.
        unsafe { convert_row((sp, base, step), (dp, o), inner, (from, to)) }
    };
    if n >= 1 << 16 && starts.len() > 1 {
        (0..starts.len()).into_par_iter().for_each(row);
    } else {
        (0..starts.len()).for_each(row);
    }
}

/// Copies the `rows x cols` view at `src` (element `base + i * rs + j * cs`, elements of
/// `size` bytes) to `dst` in row-major order, in 32 x 32 blocks, over the threads when large.
///
/// # Safety
/// The view addresses those elements of its buffer; `dst` holds `rows * cols` elements.
unsafe fn transpose_copy(
    (src, base, (rs, cs)): (Addr, usize, (usize, usize)),
    dst: Addr,
    (rows, cols): (usize, usize),
    size: usize,
) {
    // SAFETY (both arms): forwarded from the caller; the element types have these sizes.
    match size {
        2 => unsafe { transpose_typed::<u16>((src, base, (rs, cs)), dst, (rows, cols)) },
        _ => unsafe { transpose_typed::<u32>((src, base, (rs, cs)), dst, (rows, cols)) },
    }
}

/// [`transpose_copy`] for elements of type `T`.
///
/// # Safety
/// As for [`transpose_copy`], with elements of `T`.
unsafe fn transpose_typed<T: Copy>(
    (src, base, (rs, cs)): (Addr, usize, (usize, usize)),
    dst: Addr,
    (rows, cols): (usize, usize),
) {
    const B: usize = 16;
    let block_row = |br: usize| {
        let (s, d) = (src.get() as *const T, dst.get() as *mut T);
        let (r0, r1) = (br * B, (br * B + B).min(rows));
        for c0 in (0..cols).step_by(B) {
            let c1 = (c0 + B).min(cols);
            for c in c0..c1 {
                for r in r0..r1 {
                    // SAFETY: inside the view and the output (caller's contract).
                    unsafe { *d.add(r * cols + c) = *s.add(base + r * rs + c * cs) };
                }
            }
        }
    };
    let blocks = rows.div_ceil(B);
    if rows * cols >= 1 << 16 && blocks > 1 {
        (0..blocks).into_par_iter().for_each(block_row);
    } else {
        (0..blocks).for_each(block_row);
    }
}

/// `count` elements from `src` (element `base + i * step`) to `dst` (from element `o`).
///
/// # Safety
/// The addresses hold those elements of their types.
unsafe fn convert_row(
    (src, base, step): (Addr, usize, usize),
    (dst, o): (Addr, usize),
    count: usize,
    (from, to): (Elem, Elem),
) {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        if step == 0 && count > 1 {
            // A broadcast row: its one element converted once, then copied along the row in
            // doubling runs. Gathered element by element, a scalar gradient broadcast to
            // `[512, 768]` bf16 took 0.85 ms (AMD EPYC Zen 4, two threads).
            convert_row((src, base, 1), (dst, o), 1, (from, to));
            let (size, row) = (to.size(), dst.0.add(o * to.size()));
            let mut filled = 1;
            while filled < count {
                let more = filled.min(count - filled);
                std::ptr::copy_nonoverlapping(row, row.add(filled * size), more * size);
                filled += more;
            }
            return;
        }
        let gather = |size: usize| -> Vec<u8> {
            // The row's source elements, contiguous (a strided row; broadcast ones are filled
            // above).
            let mut v = vec![0u8; count * size];
            for i in 0..count {
                std::ptr::copy_nonoverlapping(
                    src.0.add((base + i * step) * size),
                    v.as_mut_ptr().add(i * size),
                    size,
                );
            }
            v
        };
        let size = from.size();
        let owned;
        let s: *const u8 = if step == 1 || count == 1 {
            src.0.add(base * size)
        } else {
            owned = gather(size);
            owned.as_ptr()
        };
        match (from, to) {
            (Elem::Half(h), Elem::F32) => h.widen(
                std::slice::from_raw_parts(s as *const u16, count),
                std::slice::from_raw_parts_mut((dst.0 as *mut f32).add(o), count),
            ),
            (Elem::F32, Elem::Half(h)) => h.narrow(
                std::slice::from_raw_parts(s as *const f32, count),
                std::slice::from_raw_parts_mut((dst.0 as *mut u16).add(o), count),
            ),
            _ => std::ptr::copy_nonoverlapping(s, dst.0.add(o * to.size()), count * to.size()),
        }
    }
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
            .map(|(i, (d, m))| checked(Side::Input(i), d, m))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = outputs
            .iter()
            .zip(&self.outputs)
            .enumerate()
            .map(|(j, (d, m))| checked(Side::Output(j), d, m))
            .collect::<Result<Vec<_>, _>>()?;
        let mut owned: Vec<Vec<u32>> = self
            .scratch
            .iter()
            .map(|&bytes| vec![0u32; bytes.div_ceil(4)])
            .collect();
        // Moving `owned` into `Bufs` keeps its vectors' heap buffers where they are.
        let scratch = owned
            .iter_mut()
            .zip(&self.scratch)
            .map(|(v, &bytes)| (v.as_mut_ptr() as *mut u8, bytes))
            .collect();
        let mut bufs = Bufs {
            inputs: ins,
            outputs: outs,
            scratch,
            _owned: owned,
        };
        let t = crate::exec::trace().then(std::time::Instant::now);
        for step in &self.steps {
            let ts = t.map(|_| std::time::Instant::now());
            match step {
                Step::Product(p) => run_product(p, &mut bufs),
                Step::Rows {
                    src,
                    shape,
                    from,
                    to,
                    out,
                } => run_rows(src, shape, (*from, *to), *out, &mut bufs),
                Step::Sum {
                    src,
                    shape,
                    dims,
                    ty,
                    out,
                } => run_sum(src, shape, dims, *ty, *out, &mut bufs),
            }
            if let Some(ts) = ts {
                crate::exec::trace_line(format_args!(
                    "cpu-simd half step: {:>9.1} us {}",
                    ts.elapsed().as_secs_f64() * 1e6,
                    step.describe()
                ));
            }
        }
        if let Some(t) = t {
            crate::exec::trace_line(format_args!(
                "cpu-simd half:  {:>9.1} us {} steps",
                t.elapsed().as_secs_f64() * 1e6,
                self.steps.len()
            ));
        }
        Ok(())
    }
}
