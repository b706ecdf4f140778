//! The stages of a compiled region besides fused groups: batched GEMM through the `gemm`
//! crate (operand strides passed straight through, so a transposed weight is never copied)
//! and `iota`.

use crate::decode::Ty;
use crate::exec::{self, Bufs};
use crate::group::{BufId, GroupBuilder, GroupPlan};
use crate::layout::Layout;
use gemm::Parallelism;

/// Below this many multiply-adds a GEMM runs on the calling thread.
const GEMM_PAR_MIN: usize = 1 << 23;

#[derive(Debug)]
pub(crate) enum Stage {
    Group(GroupBuilder),
    Ready(GroupPlan),
    Gemm(GemmPlan),
    Iota(IotaPlan),
    Conv(crate::conv::ConvPlan),
    Pad(crate::movement::PadPlan),
    Attn(crate::attn::AttnPlan),
    AttnBwd(crate::attn_bwd::AttnBwdPlan),
    Take(crate::movement::TakePlan),
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

    /// Runs the stage; only a take can fail (an index out of range).
    pub(crate) fn run(&self, bufs: &Bufs) -> Result<(), thunder_abi::PluginError> {
        // Products flush subnormals on this thread as on the workers (`ftz.rs`).
        let _flush = matches!(
            self,
            Stage::Gemm(_) | Stage::Conv(_) | Stage::Attn(_) | Stage::AttnBwd(_)
        )
        .then(crate::ftz::FlushGuard::flush);
        match self {
            Stage::Take(t) => return crate::movement::run_take(t, bufs),
            Stage::Ready(g) => exec::run_group(g, bufs),
            Stage::Gemm(g) => run_gemm(g, bufs),
            Stage::Iota(i) => run_iota(i, bufs),
            Stage::Conv(c) => crate::conv::run(c, bufs),
            Stage::Pad(p) => crate::movement::run(p, bufs),
            Stage::Attn(a) => crate::attn::run(a, bufs),
            Stage::AttnBwd(a) => crate::attn_bwd::run(a, bufs),
            Stage::LayerNorm(l) => crate::layer_norm::run(l, bufs),
            // `finish` lowered every group before the region was handed out.
            Stage::Group(_) => {}
        }
        Ok(())
    }
}

fn run_gemm(g: &GemmPlan, bufs: &Bufs) {
    // The flag is read once per process (`exec::trace`): a lookup in the environment per call
    // took a lock and a scan, a fixed cost the small GEMMs of a training step paid every time.
    if exec::trace() {
        let t = std::time::Instant::now();
        run_gemm_inner(g, bufs);
        eprintln!(
            "cpu-simd gemm:  {:>9.1} us batch {:?} m {} k {} n {} a {:?} b {:?}",
            t.elapsed().as_secs_f64() * 1e6,
            g.batch,
            g.m,
            g.k,
            g.n,
            g.a.1.strides,
            g.b.1.strides
        );
    } else {
        run_gemm_inner(g, bufs);
    }
}

fn run_gemm_inner(g: &GemmPlan, bufs: &Bufs) {
    let (m, k, n) = (g.m, g.k, g.n);
    let batches: usize = g.batch.iter().product();
    if g.accumulate && batches == 0 && m * n > 0 {
        // A sum over no products.
        let zero = |p: *mut u8, size: usize| {
            // SAFETY: the output holds m * n elements of `size` bytes.
            unsafe { std::ptr::write_bytes(p, 0, m * n * size) }
        };
        match g.ty {
            Ty::F32 => zero(bufs.ptr(g.out), 4),
            Ty::F64 => zero(bufs.ptr(g.out), 8),
            Ty::B8 | Ty::I64 => {}
        }
        return;
    }
    if m == 0 || n == 0 || batches == 0 {
        return;
    }
    let r = g.batch.len() + 2;
    let (la, lb) = (&g.a.1, &g.b.1);
    let parallelism = if m * n * k >= GEMM_PAR_MIN {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
    };
    let (pa, pb, po) = (bufs.ptr(g.a.0), bufs.ptr(g.b.0), bufs.ptr(g.out));
    for bi in 0..batches {
        // Offsets of batch `bi` in each operand, from its (possibly broadcast) batch strides.
        let (mut oa, mut ob, mut rem) = (la.offset, lb.offset, bi);
        for d in (0..r - 2).rev() {
            let i = (rem % g.batch[d]) as i64;
            rem /= g.batch[d];
            oa += i * la.strides[d];
            ob += i * lb.strides[d];
        }
        // Summed batches all land in the one output, each added to the ones before.
        let (oo, read_dst) = if g.accumulate {
            (0, bi > 0)
        } else {
            ((bi * m * n) as isize, false)
        };
        let (ars, acs, brs, bcs) = (
            la.strides[r - 2] as isize,
            la.strides[r - 1] as isize,
            lb.strides[r - 2] as isize,
            lb.strides[r - 1] as isize,
        );
        if k == 1 && !g.accumulate {
            // An outer product: one rounded product per element, as gemm computes it, without
            // gemm's per-call setup (which dominates when there are many small batches).
            // SAFETY: as for the gemm call below.
            unsafe {
                match g.ty {
                    Ty::F32 => outer::<f32>(pa, pb, po, (oa, ob, oo), (ars, bcs), (m, n)),
                    Ty::F64 => outer::<f64>(pa, pb, po, (oa, ob, oo), (ars, bcs), (m, n)),
                    Ty::B8 | Ty::I64 => {}
                }
            }
            continue;
        }
        // SAFETY: the views address elements inside their buffers (checked when the region
        // was compiled against the buffers' sizes), the output holds batches * m * n elements
        // (m * n when summed), and gemm reads the operands and writes only the output.
        // `read_dst = false` makes it overwrite (and zero-fill when k = 0).
        unsafe {
            match g.ty {
                Ty::F32 => gemm::gemm(
                    m,
                    n,
                    k,
                    (po as *mut f32).offset(oo),
                    1,
                    n as isize,
                    read_dst,
                    (pa as *const f32).offset(oa as isize),
                    acs,
                    ars,
                    (pb as *const f32).offset(ob as isize),
                    bcs,
                    brs,
                    if read_dst { 1.0f32 } else { 0.0f32 },
                    1.0f32,
                    false,
                    false,
                    false,
                    parallelism,
                ),
                Ty::F64 => gemm::gemm(
                    m,
                    n,
                    k,
                    (po as *mut f64).offset(oo),
                    1,
                    n as isize,
                    read_dst,
                    (pa as *const f64).offset(oa as isize),
                    acs,
                    ars,
                    (pb as *const f64).offset(ob as isize),
                    bcs,
                    brs,
                    if read_dst { 1.0f64 } else { 0.0f64 },
                    1.0f64,
                    false,
                    false,
                    false,
                    parallelism,
                ),
                // Refused by decode.
                Ty::B8 | Ty::I64 => {}
            }
        }
    }
}

/// `out[i][j] = 0 + a[i][0] * b[0][j]` for a GEMM with `k = 1`.
///
/// # Safety
/// As for the `gemm` call in `run_gemm_inner`.
unsafe fn outer<T: Copy + Default + std::ops::Mul<Output = T> + std::ops::Add<Output = T>>(
    pa: *mut u8,
    pb: *mut u8,
    po: *mut u8,
    (oa, ob, oo): (i64, i64, isize),
    (ars, bcs): (isize, isize),
    (m, n): (usize, usize),
) {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let (a, b, o) = (
            (pa as *const T).offset(oa as isize),
            (pb as *const T).offset(ob as isize),
            (po as *mut T).offset(oo),
        );
        for i in 0..m {
            let x = *a.offset(i as isize * ars);
            let row = o.add(i * n);
            for j in 0..n {
                // Added to a zero accumulator as gemm does, so a -0 product comes out +0.
                *row.add(j) = T::default() + x * *b.offset(j as isize * bcs);
            }
        }
    }
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
