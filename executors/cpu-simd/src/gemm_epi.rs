//! A product read only by a bias add (`add(matmul(x, w), broadcast_in_dim(b, [.., n], [r-1]))`,
//! every `linear` with a bias), then optionally by a residual add of a tensor of the output's
//! shape (a transformer's `x + proj(..)`) and then by a ReLU (`maximum(y, 0.0)`), runs them as
//! its **epilogue**: each panel of the output gets its bias, residual and ReLU right after its
//! GEMM, on the same thread, while it is in cache. Without it the pair was a fused loop of its
//! own over the `[rows, n]` output: an MLP step's forward spent about as long in its two
//! bias+ReLU loops (about 20 us each, threaded, for 32K elements) as in the GEMM before each,
//! and a BERT layer's two residual adds each read and wrote its `[tokens, hidden]` again.
//!
//! The epilogue does the separate ops' arithmetic in their order on the rounded product
//! (`((x @ w) + b) + r`, then the ReLU), so results are bit for bit those of the unfused ops.

use crate::decode::{Decoded, Op, Operand};
use crate::exec::Bufs;
use crate::group::BufId;
use crate::layout::Layout;
use crate::ops::{BinaryOp, Real};
use crate::plan::numel;
use crate::plan::Planner;
use std::collections::{HashMap, HashSet};
use thunder_abi::PluginError;

/// An epilogue found in a region: positions of the ops it takes over.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The bias vector (the broadcast's input, `[n]`).
    bias: u32,
    /// The residual added after the bias (a value defined before the product).
    residual: Option<u32>,
    relu: bool,
    /// The broadcast, the add, a reshape and the residual add, and the maximum (those there
    /// are), in order.
    pub(crate) ops: Vec<usize>,
}

/// A planned epilogue: the bias vector's buffer and layout, the residual's (viewed as the
/// output's `[rows, n]`), and whether a ReLU follows.
#[derive(Debug, Clone)]
pub(crate) struct GemmEpi {
    pub(crate) bias: (BufId, Layout),
    pub(crate) residual: Option<(BufId, Layout)>,
    pub(crate) relu: bool,
}

/// The epilogue of each plain product (by position) that has one. `taken` are positions other
/// fusions own; `outputs` the values read outside the prims (an intermediate that is one stays
/// where it is, so the epilogue stops before it).
pub(crate) fn find(
    ops: &[Decoded],
    outputs: &[u32],
    taken: &HashSet<usize>,
) -> HashMap<usize, Found> {
    let uses = crate::fusion::Uses::of(ops);
    let producer = &uses.producer;
    let sole = |v: u32| uses.sole(v, outputs, taken);
    let mut found = HashMap::new();
    for (i, d) in ops.iter().enumerate() {
        if !matches!(d.op, Op::Matmul { .. }) || taken.contains(&i) || !d.ty.is_float() {
            continue;
        }
        let Some(j) = sole(d.out) else { continue };
        let Op::Binary {
            op: BinaryOp::Add,
            a: Operand::Val(x),
            b: Operand::Val(y),
        } = ops[j].op
        else {
            continue;
        };
        let other = if x == d.out { y } else { x };
        // The other addend: a broadcast of an `[n]` vector along the last dim, read only here.
        let Some(&bpos) = producer.get(&other) else {
            continue;
        };
        let r = d.shape.len();
        let bias = match &ops[bpos].op {
            Op::Broadcast { a, dims } if dims.as_slice() == [r - 1] => *a,
            _ => continue,
        };
        let bias_ready = producer.get(&bias).is_none_or(|&p| p < i);
        let bias_fits = ops
            .iter()
            .find(|o| o.out == bias)
            .is_none_or(|o| o.shape == d.shape[r - 1..] && o.ty == d.ty);
        if x == y
            || sole(other) != Some(j)
            || taken.contains(&bpos)
            || ops[j].shape != d.shape
            || !bias_ready
            || !bias_fits
        {
            continue;
        }
        let mut epi = Found {
            bias,
            residual: None,
            relu: false,
            ops: vec![bpos, j],
        };
        let mut cur = ops[j].out;
        let mut shape = &d.shape;
        // The residual add, straight after the bias or after a reshape that keeps the rows
        // (an importer's `[tokens, n]` product viewed as `[batch, seq, n]`).
        let mut next = sole(cur).map(|k| (k, None));
        if let Some((k, _)) = next {
            if matches!(ops[k].op, Op::Reshape { a } if a == cur)
                && ops[k].shape.last() == d.shape.last()
            {
                next = sole(ops[k].out).map(|k2| (k2, Some(k)));
            }
        }
        if let Some((k, reshape)) = next {
            let at = reshape.map_or(cur, |p| ops[p].out);
            // Any shape holding the product's rows, `[rows, n]` or `[.., rows', n]`.
            let rows_kept =
                numel(&ops[k].shape) == numel(&d.shape) && ops[k].shape.last() == d.shape.last();
            let residual = crate::fusion::residual_addend(ops, producer, (i, k), at);
            if let Some(r) = residual.filter(|_| rows_kept) {
                epi.residual = Some(r);
                epi.ops.extend(reshape);
                epi.ops.push(k);
                cur = ops[k].out;
                shape = &ops[k].shape;
            }
        }
        if let Some(k) = sole(cur) {
            if crate::fusion::is_relu(&ops[k], cur) && &ops[k].shape == shape {
                epi.relu = true;
                epi.ops.push(k);
            }
        }
        found.insert(i, epi);
    }
    found
}

impl Planner {
    /// Plans `mm` with its epilogue; the stage's output is the epilogue's last op's value. A
    /// residual whose layout cannot be read as the output's `[rows, n]` ends the epilogue at
    /// the bias add, and the ops after it are planned as they would be without one.
    pub(crate) fn add_gemm_epi(
        &mut self,
        mm: &Decoded,
        epi: &Found,
        decoded: &[Decoded],
    ) -> Result<(), PluginError> {
        let Op::Matmul { a, b } = mm.op else {
            return Err(crate::plan::internal("a GEMM epilogue without its matmul"));
        };
        let n = *mm.shape.last().unwrap_or(&1);
        let rows = numel(&mm.shape) / n.max(1);
        let residual = match epi.residual {
            Some(r) => {
                let shape = self.val(r)?.shape.clone();
                let (buf, layout) = self.materialize(r)?;
                layout.reshape(&shape, &[rows, n]).map(|l| (buf, l))
            }
            None => None,
        };
        // Ops past the bias add when the residual stays out: planned after the product.
        let split = epi.residual.is_some() && residual.is_none();
        let (mine, rest) = epi.ops.split_at(if split { 2 } else { epi.ops.len() });
        let last = mine.last().map_or(mm, |&j| &decoded[j]);
        let mut plan = self
            .product(mm.ty, (a, b), (last.out, mm.ty, &mm.shape), false)?
            .fold_broadcast_batches();
        let bias = self.materialize(epi.bias)?;
        plan.epilogue = Some(GemmEpi {
            bias,
            residual,
            relu: epi.relu && !split,
        });
        self.push_product(plan, last, &last.shape);
        for &k in rest {
            self.add(&decoded[k])?;
        }
        Ok(())
    }
}

/// The bias vector's first element and stride, and the residual's, as the run reads them.
pub(crate) struct EpiRun<T> {
    pub(crate) bias: *const T,
    pub(crate) stride: isize,
    /// The residual's element (0, 0) and its row and column strides, with the output's first
    /// element and row length (a panel finds its rows and columns from its address).
    residual: Option<Residual<T>>,
    pub(crate) relu: bool,
}

struct Residual<T> {
    base: *const T,
    strides: (isize, isize),
    out: *const T,
    n: usize,
}

// SAFETY: the bias is only read, by panels that each write their own part of the output.
unsafe impl<T> Send for EpiRun<T> {}
unsafe impl<T> Sync for EpiRun<T> {}

impl<T> EpiRun<T> {
    /// The epilogue of a product writing `out` (rows of `n`, contiguous).
    pub(crate) fn new(epi: &GemmEpi, bufs: &Bufs, out: BufId, n: usize) -> EpiRun<T> {
        let (buf, layout) = &epi.bias;
        EpiRun {
            bias: (bufs.ptr(*buf) as *const T).wrapping_offset(layout.offset as isize),
            stride: layout.strides[0] as isize,
            residual: epi.residual.as_ref().map(|(buf, l)| Residual {
                base: (bufs.ptr(*buf) as *const T).wrapping_offset(l.offset as isize),
                strides: (l.strides[0] as isize, l.strides[1] as isize),
                out: bufs.ptr(out) as *const T,
                n,
            }),
            relu: epi.relu,
        }
    }
}

impl<T: Real> EpiRun<T> {
    /// `dst[i][j] = relu?((dst[i][j] + bias[c0 + j]) + residual?)` for `rows` rows of
    /// `cols` elements, `ld` apart.
    ///
    /// # Safety
    /// `dst` addresses those elements of the output, owned by the caller, and the bias
    /// `c0 + cols` elements.
    pub(crate) unsafe fn apply(&self, dst: *mut T, ld: isize, rows: usize, c0: usize, cols: usize) {
        // SAFETY (whole fn): forwarded from the caller; the residual has the output's rows
        // and columns (checked when planned).
        unsafe {
            let bias: std::borrow::Cow<[T]> = if self.stride == 1 {
                std::slice::from_raw_parts(self.bias.add(c0), cols).into()
            } else {
                (0..cols)
                    .map(|j| *self.bias.offset((c0 + j) as isize * self.stride))
                    .collect::<Vec<T>>()
                    .into()
            };
            let Some(res) = &self.residual else {
                for i in 0..rows {
                    let row = std::slice::from_raw_parts_mut(dst.offset(i as isize * ld), cols);
                    add_dispatch(row, &bias, None, self.relu);
                }
                return;
            };
            let at = dst.offset_from(res.out) as usize;
            let (r0, j0) = (at / res.n, at % res.n);
            let (rs, cs) = res.strides;
            let mut strided = Vec::new();
            for i in 0..rows {
                let row = std::slice::from_raw_parts_mut(dst.offset(i as isize * ld), cols);
                let first = res.base.offset((r0 + i) as isize * rs + j0 as isize * cs);
                let r: &[T] = if cs == 1 {
                    std::slice::from_raw_parts(first, cols)
                } else {
                    strided.clear();
                    strided.extend((0..cols).map(|j| *first.offset(j as isize * cs)));
                    &strided
                };
                add_dispatch(row, &bias, Some(r), self.relu);
            }
        }
    }
}

/// `row[j] = relu?((row[j] + bias[j]) + residual?[j])`, compiled for AVX-512 where the CPU
/// has it.
fn add_dispatch<T: Real>(row: &mut [T], bias: &[T], residual: Option<&[T]>, relu: bool) {
    #[cfg(target_arch = "x86_64")]
    if crate::exec::isa_level() >= 2 {
        // SAFETY: the level says the CPU has these features.
        return unsafe { add_avx512(row, bias, residual, relu) };
    }
    add(row, bias, residual, relu)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn add_avx512<T: Real>(row: &mut [T], bias: &[T], residual: Option<&[T]>, relu: bool) {
    add(row, bias, residual, relu)
}

#[inline(always)]
fn add<T: Real>(row: &mut [T], bias: &[T], residual: Option<&[T]>, relu: bool) {
    let zero = T::from_f64(0.0);
    // `prims.maximum(y, 0.0)`: NaN stays NaN, -0.0 and negatives become +0.0.
    let relu_of = |y: T| if y <= zero { zero } else { y };
    match (residual, relu) {
        (None, false) => row.iter_mut().zip(bias).for_each(|(x, &b)| *x = *x + b),
        (None, true) => row
            .iter_mut()
            .zip(bias)
            .for_each(|(x, &b)| *x = relu_of(*x + b)),
        (Some(r), false) => row
            .iter_mut()
            .zip(bias)
            .zip(r)
            .for_each(|((x, &b), &r)| *x = (*x + b) + r),
        (Some(r), true) => row
            .iter_mut()
            .zip(bias)
            .zip(r)
            .for_each(|((x, &b), &r)| *x = relu_of((*x + b) + r)),
    }
}
