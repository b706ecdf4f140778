//! A product read only by a bias add (`add(matmul(x, w), broadcast_in_dim(b, [.., n], [r-1]))`,
//! every `linear` with a bias) and then, optionally, by a ReLU (`maximum(y, 0.0)`) runs them as
//! its **epilogue**: each panel of the output gets its bias and ReLU right after its GEMM, on the
//! same thread, while it is in cache. Without it the pair was a fused loop of its own over the
//! `[rows, n]` output: an MLP step's forward spent about as long in its two bias+ReLU loops
//! (about 20 us each, threaded, for 32K elements) as in the GEMM before each.
//!
//! The epilogue does the separate ops' arithmetic in their order on the rounded product
//! (`(x @ w) + b`, then the ReLU), so results are bit for bit those of the unfused ops.

use crate::decode::{Decoded, Op, Operand};
use crate::exec::Bufs;
use crate::group::BufId;
use crate::layout::Layout;
use crate::ops::{BinaryOp, Real};
use crate::plan::Planner;
use std::collections::{HashMap, HashSet};
use thunder_abi::PluginError;

/// An epilogue found in a region: positions of the ops it takes over.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The bias vector (the broadcast's input, `[n]`).
    bias: u32,
    relu: bool,
    /// The broadcast, the add and, with a ReLU, the maximum, in order.
    pub(crate) ops: Vec<usize>,
}

/// A planned epilogue: the bias vector's buffer and layout, and whether a ReLU follows.
#[derive(Debug, Clone)]
pub(crate) struct GemmEpi {
    pub(crate) bias: (BufId, Layout),
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
            relu: false,
            ops: vec![bpos, j],
        };
        if let Some(k) = sole(ops[j].out) {
            if crate::fusion::is_relu(&ops[k], ops[j].out) && ops[k].shape == d.shape {
                epi.relu = true;
                epi.ops.push(k);
            }
        }
        found.insert(i, epi);
    }
    found
}

impl Planner {
    /// Plans `mm` with its epilogue; the stage's output is the epilogue's last op's value.
    pub(crate) fn add_gemm_epi(
        &mut self,
        mm: &Decoded,
        epi: &Found,
        last: &Decoded,
    ) -> Result<(), PluginError> {
        let Op::Matmul { a, b } = mm.op else {
            return Err(crate::plan::internal("a GEMM epilogue without its matmul"));
        };
        let mut plan = self
            .product(mm.ty, (a, b), (last.out, mm.ty, &mm.shape), false)?
            .fold_broadcast_batches();
        let bias = self.materialize(epi.bias)?;
        plan.epilogue = Some(GemmEpi {
            bias,
            relu: epi.relu,
        });
        self.push_product(plan, last, &mm.shape);
        Ok(())
    }
}

/// The bias vector's first element and stride, as the run reads them.
pub(crate) struct EpiRun<T> {
    pub(crate) bias: *const T,
    pub(crate) stride: isize,
    pub(crate) relu: bool,
}

// SAFETY: the bias is only read, by panels that each write their own part of the output.
unsafe impl<T> Send for EpiRun<T> {}
unsafe impl<T> Sync for EpiRun<T> {}

impl<T> EpiRun<T> {
    pub(crate) fn new(epi: &GemmEpi, bufs: &Bufs) -> EpiRun<T> {
        let (buf, layout) = &epi.bias;
        EpiRun {
            bias: (bufs.ptr(*buf) as *const T).wrapping_offset(layout.offset as isize),
            stride: layout.strides[0] as isize,
            relu: epi.relu,
        }
    }
}

impl<T: Real> EpiRun<T> {
    /// `dst[i][j] = relu?(dst[i][j] + bias[c0 + j])` for `rows` rows of `cols` elements,
    /// `ld` apart.
    ///
    /// # Safety
    /// `dst` addresses those elements, owned by the caller, and the bias `c0 + cols` elements.
    pub(crate) unsafe fn apply(&self, dst: *mut T, ld: isize, rows: usize, c0: usize, cols: usize) {
        // SAFETY (whole fn): forwarded from the caller.
        unsafe {
            let bias: std::borrow::Cow<[T]> = if self.stride == 1 {
                std::slice::from_raw_parts(self.bias.add(c0), cols).into()
            } else {
                (0..cols)
                    .map(|j| *self.bias.offset((c0 + j) as isize * self.stride))
                    .collect::<Vec<T>>()
                    .into()
            };
            for i in 0..rows {
                let row = std::slice::from_raw_parts_mut(dst.offset(i as isize * ld), cols);
                add_dispatch(row, &bias, self.relu);
            }
        }
    }
}

/// `row[j] = relu?(row[j] + bias[j])`, compiled for AVX-512 where the CPU has it.
fn add_dispatch<T: Real>(row: &mut [T], bias: &[T], relu: bool) {
    #[cfg(target_arch = "x86_64")]
    if crate::exec::isa_level() >= 2 {
        // SAFETY: the level says the CPU has these features.
        return unsafe { add_avx512(row, bias, relu) };
    }
    add(row, bias, relu)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn add_avx512<T: Real>(row: &mut [T], bias: &[T], relu: bool) {
    add(row, bias, relu)
}

#[inline(always)]
fn add<T: Real>(row: &mut [T], bias: &[T], relu: bool) {
    let zero = T::from_f64(0.0);
    if relu {
        // `prims.maximum(y, 0.0)`: NaN stays NaN, -0.0 and negatives become +0.0.
        row.iter_mut().zip(bias).for_each(|(x, &b)| {
            let y = *x + b;
            *x = if y <= zero { zero } else { y };
        });
    } else {
        row.iter_mut().zip(bias).for_each(|(x, &b)| *x = *x + b);
    }
}
