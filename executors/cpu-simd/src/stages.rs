//! The stages of a compiled region besides fused groups: batched GEMM plans (operand strides
//! passed straight through, so a transposed weight is never copied; run by `gemm_run.rs`)
//! and `iota`.

use crate::decode::Ty;
use crate::exec::{self, Bufs};
use crate::group::{BufId, GroupBuilder, GroupPlan};
use crate::layout::Layout;

#[derive(Debug)]
pub(crate) enum Stage {
    Group(GroupBuilder),
    Ready(GroupPlan),
    Gemm(GemmPlan),
    /// Two independent products run side by side (`gemm_pair.rs`).
    GemmPair(Box<(GemmPlan, GemmPlan)>),
    Iota(IotaPlan),
    Conv(crate::conv::ConvPlan),
    Pad(crate::movement::PadPlan),
    MaxPool(crate::pool::PoolPlan),
    Attn(crate::attn::AttnPlan),
    AttnBwd(crate::attn_bwd::AttnBwdPlan),
    Take(crate::movement::TakePlan),
    IndexAdd(crate::index_add::IndexAddPlan),
    LayerNorm(crate::layer_norm::LayerNormPlan),
}

/// `out[b] = a[b] @ b[b]` for every batch index `b`; `a` is `[..., m, k]`, `b` is `[..., k, n]`
/// (strided views), `out` contiguous `[..., m, n]`.
#[derive(Debug, Clone)]
pub(crate) struct GemmPlan {
    pub(crate) ty: Ty,
    pub(crate) a: (BufId, Layout),
    pub(crate) b: (BufId, Layout),
    pub(crate) out: BufId,
    pub(crate) batch: Vec<usize>,
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    /// `out = Σ_b a[b] @ b[b]`: one `[m, n]` output summed over the batch (a weight
    /// gradient followed by its sum over the batch dims; see `gemm_sum.rs`).
    pub(crate) accumulate: bool,
    /// A bias add and ReLU run on each output panel after its product (`gemm_epi.rs`).
    pub(crate) epilogue: Option<crate::gemm_epi::GemmEpi>,
    /// The right operand, a static input, kept packed between runs (`prepack.rs`).
    pub(crate) packed: Option<std::sync::Arc<crate::prepack::PackedSlot>>,
}

impl GemmPlan {
    /// A batched product against a broadcast right operand (`x[B, T, K] @ w[K, N]`, every
    /// linear layer on a 3-D input) is one GEMM with `B * T` rows when `a`'s batch dims step
    /// through its rows evenly: one large call instead of `B` small ones, each of which pays
    /// gemm's packing of `w` and is too small to spread over the threads.
    pub(crate) fn fold_broadcast_batches(mut self) -> GemmPlan {
        let r = self.batch.len() + 2;
        let (la, lb) = (&self.a.1, &self.b.1);
        let b_broadcast = self
            .batch
            .iter()
            .zip(&lb.strides)
            .all(|(&size, &stride)| size == 1 || stride == 0);
        if self.batch.is_empty() || !b_broadcast {
            return self;
        }
        // Walking from the rows outwards, each batch dim of size > 1 must step over exactly
        // the rows (and batch dims) inside it.
        let (mut rows, mut step) = (self.m, la.strides[r - 2]);
        for (d, &size) in self.batch.iter().enumerate().rev() {
            if size == 1 {
                continue;
            }
            if la.strides[d] != step * rows as i64 {
                return self;
            }
            step = la.strides[d];
            rows = size;
        }
        self.m *= self.batch.iter().product::<usize>();
        self.batch.clear();
        self.a.1.strides.drain(..r - 2);
        self.b.1.strides.drain(..r - 2);
        self
    }

    /// A product summed over its batch dims (`accumulate`) is one GEMM with `k * batch`
    /// when each batch dim steps both operands evenly along `k`: `Σ_b x_bᵀ g_b` is
    /// `x_flatᵀ g_flat`, with no per-batch products and no sum pass.
    pub(crate) fn fold_summed_batches(mut self) -> GemmPlan {
        let r = self.batch.len() + 2;
        if !self.accumulate || self.batch.is_empty() {
            return self;
        }
        let (la, lb) = (&self.a.1, &self.b.1);
        let (mut extent, mut sa, mut sb) = (self.k, la.strides[r - 1], lb.strides[r - 2]);
        for (d, &size) in self.batch.iter().enumerate().rev() {
            if size == 1 {
                continue;
            }
            if la.strides[d] != sa * extent as i64 || lb.strides[d] != sb * extent as i64 {
                return self;
            }
            (sa, sb, extent) = (la.strides[d], lb.strides[d], size);
        }
        // k's stride is now the innermost batch-free one: unchanged.
        self.k *= self.batch.iter().product::<usize>();
        self.batch.clear();
        self.a.1.strides.drain(..r - 2);
        self.b.1.strides.drain(..r - 2);
        self.accumulate = false;
        self
    }
}

#[derive(Debug, Clone)]
pub(crate) struct IotaPlan {
    pub(crate) ty: Ty,
    pub(crate) out: BufId,
    pub(crate) start: i64,
    pub(crate) step: i64,
    pub(crate) len: usize,
}

impl Stage {
    /// Lowers a group that is still being built; other stages are already final.
    pub(crate) fn finish(self) -> Stage {
        match self {
            Stage::Group(b) => Stage::Ready(b.finish()),
            s => s,
        }
    }

    /// Runs the stage; only a take or an index_add can fail (an index out of range).
    pub(crate) fn run(&self, bufs: &Bufs) -> Result<(), thunder_abi::PluginError> {
        // Products flush subnormals on this thread as on the workers (`ftz.rs`).
        let _flush = matches!(
            self,
            Stage::Gemm(_)
                | Stage::GemmPair(_)
                | Stage::Conv(_)
                | Stage::Attn(_)
                | Stage::AttnBwd(_)
        )
        .then(crate::ftz::FlushGuard::flush);
        match self {
            Stage::Take(t) => return crate::movement::run_take(t, bufs),
            Stage::IndexAdd(p) => return crate::index_add::run(p, bufs),
            Stage::Ready(g) => exec::run_group(g, bufs),
            Stage::Gemm(g) => run_gemm(g, bufs),
            Stage::GemmPair(p) => run_gemm_pair(p, bufs),
            Stage::Iota(i) => run_iota(i, bufs),
            Stage::Conv(c) => crate::conv::run(c, bufs),
            Stage::Pad(p) => run_pad(p, bufs),
            Stage::MaxPool(p) => run_max_pool(p, bufs),
            Stage::Attn(a) => crate::attn::run(a, bufs),
            Stage::AttnBwd(a) => crate::attn_bwd::run(a, bufs),
            Stage::LayerNorm(l) => crate::layer_norm::run(l, bufs),
            // `finish` lowered every group before the region was handed out.
            Stage::Group(_) => {}
        }
        Ok(())
    }
}

/// Runs `f`; under `THUNDER_CPU_SIMD_TRACE`, then prints `line` of its time in
/// microseconds. The flag is read once per process (`exec::trace`): a lookup in the
/// environment per call took a lock and a scan, a fixed cost the small GEMMs of a training
/// step paid every time.
fn traced(f: impl FnOnce(), line: impl FnOnce(f64) -> String) {
    if exec::trace() {
        let t = std::time::Instant::now();
        f();
        crate::exec::trace_line(format_args!("{}", line(t.elapsed().as_secs_f64() * 1e6)));
    } else {
        f()
    }
}

fn run_gemm(g: &GemmPlan, bufs: &Bufs) {
    traced(
        || crate::gemm_run::run(g, bufs),
        |us| {
            format!(
                "cpu-simd gemm:  {us:>9.1} us batch {:?} m {} k {} n {} a {:?} b {:?}",
                g.batch, g.m, g.k, g.n, g.a.1.strides, g.b.1.strides
            )
        },
    )
}

fn run_gemm_pair(p: &(GemmPlan, GemmPlan), bufs: &Bufs) {
    traced(
        || crate::gemm_pair::run(p, bufs),
        |us| {
            let (a, b) = p;
            format!(
                "cpu-simd gemm pair: {us:>9.1} us m {} k {} n {} a {:?} b {:?} | m {} k {} n {} a {:?} b {:?}",
                a.m, a.k, a.n, a.a.1.strides, a.b.1.strides, b.m, b.k, b.n, b.a.1.strides, b.b.1.strides
            )
        },
    )
}

/// A pad stage (ResNet-50's max-pool padding, a copy of 64 x 112 x 112, was the one stage of
/// its region the trace left out).
fn run_pad(p: &crate::movement::PadPlan, bufs: &Bufs) {
    traced(
        || crate::movement::run(p, bufs),
        |us| {
            format!(
                "cpu-simd pad:   {us:>9.1} us {:?} -> {:?} config {:?}",
                p.in_shape, p.out_shape, p.config
            )
        },
    )
}

fn run_max_pool(p: &crate::pool::PoolPlan, bufs: &Bufs) {
    traced(
        || crate::pool::run(p, bufs),
        |us| {
            format!(
                "cpu-simd max pool: {us:>9.1} us {:?} -> {:?} stride {:?} taps {:?} x {:?}",
                p.in_shape, p.out_shape, p.stride, p.dh, p.dw
            )
        },
    )
}

fn run_iota(i: &IotaPlan, bufs: &Bufs) {
    let out = bufs.ptr(i.out);
    let value = |k: usize| i.start.wrapping_add((k as i64).wrapping_mul(i.step));
    // SAFETY: the output holds `len` elements of `ty`.
    unsafe {
        match i.ty {
            Ty::I64 => (0..i.len).for_each(|k| *(out as *mut i64).add(k) = value(k)),
            Ty::F32 => (0..i.len).for_each(|k| *(out as *mut f32).add(k) = value(k) as f32),
            Ty::F64 => (0..i.len).for_each(|k| *(out as *mut f64).add(k) = value(k) as f64),
            Ty::B8 => {}
        }
    }
}
