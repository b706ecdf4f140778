//! The attention backward `ltorch.sdpa_bwd` (planned in `sdpa.rs`) without the `[..., L, S]`
//! probabilities: FlashAttention-2's recurrence, which rebuilds each tile of
//! `P = exp(scale · q kᵀ - lse)` from `q`, `k` and the forward's row log-sum-exp and uses it
//! at once:
//!
//! ```text
//! D   = rowsum(dO ∘ O)                      (once, [..., L])
//! per key block j, per query block i:
//!   P   = exp(scale · Q_i K_jᵀ - lse_i)     (0 past the causal diagonal)
//!   dV_j += Pᵀ dO_i
//!   dS  = scale · P ∘ (dO_i V_jᵀ - D_i)
//!   dK_j += dSᵀ Q_i
//!   dQ_i += dS K_j
//! ```
//!
//! Tiles are `BR` queries by `BC` keys; every product is a `gemm` call on strided views, so
//! `q`, `k`, `v` and `dO` are read where they lie (a head split is never copied).
//!
//! Threads: with at least two batch indices (batch × heads) per thread, each task takes one
//! batch index and walks its key blocks in order, so it alone writes that index's `dQ`, `dK`
//! and `dV` and the sums run in a fixed order. With fewer, two passes split the work finer and
//! stay deterministic: tasks over (batch, key block) write `dK_j` and `dV_j`, then tasks over
//! (batch, query block) recompute the tiles they need for `dQ_i` (two of the five products
//! run twice).

use crate::attn::{batch_offset, batch_view, View};
use crate::exec::{isa_level, Bufs};
use crate::group::BufId;
use crate::layout::Layout;
use crate::math;
use gemm::Parallelism;
use rayon::prelude::*;

/// Query rows and keys per tile.
const BR: usize = 64;
const BC: usize = 64;
/// Below this many multiply-adds (all five products) the tasks run on the calling thread.
const PAR_MIN: usize = 1 << 18;

#[derive(Debug, Clone)]
pub(crate) struct AttnBwdPlan {
    /// `[..., L, Ev]`, `[..., L, E]`, `[..., S, E]`, `[..., S, Ev]`, `[..., L, Ev]` views.
    pub(crate) dout: (BufId, Layout),
    pub(crate) q: (BufId, Layout),
    pub(crate) k: (BufId, Layout),
    pub(crate) v: (BufId, Layout),
    pub(crate) out: (BufId, Layout),
    /// f32 `[..., L]` view.
    pub(crate) lse: (BufId, Layout),
    /// `[..., L, E]`, `[..., S, E]`, `[..., S, Ev]` views with unit column stride: contiguous,
    /// or places in a consumer's buffer (`placement.rs`: the concatenation of the three).
    pub(crate) dq: (BufId, Layout),
    pub(crate) dk: (BufId, Layout),
    pub(crate) dv: (BufId, Layout),
    pub(crate) batch: Vec<usize>,
    pub(crate) l: usize,
    pub(crate) s: usize,
    pub(crate) e: usize,
    pub(crate) ev: usize,
    pub(crate) causal: bool,
    pub(crate) scale: f32,
}

/// One batch index's operands.
struct Views {
    dout: View,
    q: View,
    k: View,
    v: View,
    /// `lse` and `D` rows of this batch index (gathered contiguous, `L` long).
    lse: *const f32,
    delta: *const f32,
    dq: Rows,
    dk: Rows,
    dv: Rows,
}

/// An output's rows at one batch index: row `i` starts at `p + i * rs`, columns contiguous.
#[derive(Clone, Copy)]
struct Rows {
    p: *mut f32,
    rs: isize,
}

impl Rows {
    /// Row `i`.
    ///
    /// # Safety
    /// Row `i` lies in the view.
    unsafe fn row(self, i: usize) -> *mut f32 {
        // SAFETY: forwarded.
        unsafe { self.p.offset(i as isize * self.rs) }
    }

    /// Zeroes `n` rows of `cols` from row `i0`.
    ///
    /// # Safety
    /// The rows lie in the view and belong to the caller.
    unsafe fn zero(self, i0: usize, n: usize, cols: usize) {
        for i in i0..i0 + n {
            // SAFETY: forwarded.
            unsafe { std::ptr::write_bytes(self.row(i), 0, cols) };
        }
    }
}

/// Which products a pass over one tile computes.
#[derive(Clone, Copy, PartialEq)]
enum Want {
    /// `dV_j`, `dK_j` and `dQ_i` (one task owns the whole batch index).
    All,
    /// `dV_j` and `dK_j` only.
    Kv,
    /// `dQ_i` only.
    Q,
}

/// Per-task tiles.
struct Tiles {
    p: Vec<f32>,
    ds: Vec<f32>,
}

impl Tiles {
    fn new() -> Tiles {
        Tiles {
            p: vec![0.0; BR * BC],
            ds: vec![0.0; BR * BC],
        }
    }
}

impl AttnBwdPlan {
    fn batches(&self) -> usize {
        self.batch.iter().product()
    }

    /// The views of batch index `bi`; `stats` holds `lse` and `D` for every batch index.
    fn views(&self, bufs: &Bufs, bi: usize, stats: &Stats) -> Views {
        let view =
            |(buf, layout): &(BufId, Layout)| batch_view(bufs, &self.batch, (*buf, layout), bi, 4);
        let out = |(buf, layout): &(BufId, Layout)| {
            let o = batch_view(bufs, &self.batch, (*buf, layout), bi, 4);
            Rows {
                p: o.p as *mut f32,
                rs: o.rs,
            }
        };
        Views {
            dout: view(&self.dout),
            q: view(&self.q),
            k: view(&self.k),
            v: view(&self.v),
            lse: stats.lse[bi * self.l..].as_ptr(),
            delta: stats.delta[bi * self.l..].as_ptr(),
            dq: out(&self.dq),
            dk: out(&self.dk),
            dv: out(&self.dv),
        }
    }
}

pub(crate) fn run(p: &AttnBwdPlan, bufs: &Bufs) {
    let t = std::time::Instant::now();
    let nb = p.batches();
    if nb == 0 {
        return;
    }
    let work = nb * p.l * p.s * (2 * p.e + 3 * p.ev);
    let parallel = work >= PAR_MIN;
    let threads = rayon::current_num_threads();
    let stats = Stats::gather(p, bufs, parallel);
    let kb = p.s.div_ceil(BC);
    let qb = p.l.div_ceil(BR);
    if !parallel || nb >= 2 * threads {
        let task = |bi: usize| {
            let v = p.views(bufs, bi, &stats);
            let mut tiles = Tiles::new();
            // SAFETY: batch index bi's dq rows are zeroed and written by this task only.
            unsafe { v.dq.zero(0, p.l, p.e) };
            for j in 0..kb {
                // SAFETY: this task owns every output row of batch bi.
                unsafe { key_block(p, &v, &mut tiles, j, Want::All) };
            }
        };
        if parallel && nb > 1 {
            (0..nb).into_par_iter().for_each(crate::ftz::carried(task));
        } else {
            (0..nb).for_each(task);
        }
    } else {
        (0..nb * kb)
            .into_par_iter()
            .for_each(crate::ftz::carried(|t| {
                let (bi, j) = (t / kb, t % kb);
                let v = p.views(bufs, bi, &stats);
                // SAFETY: key block j of batch bi's dk/dv rows is written by this task only.
                unsafe { key_block(p, &v, &mut Tiles::new(), j, Want::Kv) };
            }));
        (0..nb * qb)
            .into_par_iter()
            .for_each(crate::ftz::carried(|t| {
                let (bi, i) = (t / qb, t % qb);
                let v = p.views(bufs, bi, &stats);
                // SAFETY: query block i of batch bi's dq rows is written by this task only.
                unsafe { query_block(p, &v, &mut Tiles::new(), i) };
            }));
    }
    if crate::exec::trace() {
        crate::exec::trace_line(format_args!(
            "cpu-simd attn bwd: {:>6.1} us batch {:?} L {} S {} E {} Ev {} causal {}",
            t.elapsed().as_secs_f64() * 1e6,
            p.batch,
            p.l,
            p.s,
            p.e,
            p.ev,
            p.causal
        ));
    }
}

/// Every row's `lse` (gathered from its view) and `D`.
struct Stats {
    lse: Vec<f32>,
    delta: Vec<f32>,
}

impl Stats {
    /// `D[b, i] = Σ_c dO[b, i, c] · O[b, i, c]`, summed in f32 over sixteen lanes.
    fn gather(p: &AttnBwdPlan, bufs: &Bufs, parallel: bool) -> Stats {
        let n = p.batches() * p.l;
        let (mut lse, mut delta) = (vec![0f32; n], vec![0f32; n]);
        if p.l == 0 {
            return Stats { lse, delta };
        }
        let rank = p.lse.1.strides.len();
        let row = |(bi, (ls, ds)): (usize, (&mut [f32], &mut [f32]))| {
            let g = batch_view(bufs, &p.batch, (p.dout.0, &p.dout.1), bi, 4);
            let o = batch_view(bufs, &p.batch, (p.out.0, &p.out.1), bi, 4);
            let lp = bufs.ptr(p.lse.0) as *const f32;
            let (loff, lrs) = (
                batch_offset(&p.batch, &p.lse.1, bi),
                p.lse.1.strides[rank - 1] as isize,
            );
            for (i, (l, d)) in ls.iter_mut().zip(ds.iter_mut()).enumerate() {
                // SAFETY: row i of batch bi's lse view.
                *l = unsafe { *lp.offset(loff + i as isize * lrs) };
                let mut lanes = [0f32; 16];
                for c in 0..p.ev {
                    // SAFETY: row i, column c of batch bi's views.
                    let (x, y) = unsafe {
                        (
                            *(g.p as *const f32).offset(i as isize * g.rs + c as isize * g.cs),
                            *(o.p as *const f32).offset(i as isize * o.rs + c as isize * o.cs),
                        )
                    };
                    lanes[c % 16] += x * y;
                }
                *d = lanes.iter().sum();
            }
        };
        if parallel {
            lse.par_chunks_mut(p.l)
                .zip(delta.par_chunks_mut(p.l))
                .enumerate()
                .for_each(crate::ftz::carried(row));
        } else {
            lse.chunks_mut(p.l)
                .zip(delta.chunks_mut(p.l))
                .enumerate()
                .for_each(row);
        }
        Stats { lse, delta }
    }
}

/// The query blocks that see key block `j` (all of them unless causal).
fn query_blocks(p: &AttnBwdPlan, j: usize) -> std::ops::Range<usize> {
    let first = if p.causal { j * BC / BR } else { 0 };
    first.min(p.l.div_ceil(BR))..p.l.div_ceil(BR)
}

/// The key blocks query block `i` sees.
fn key_blocks(p: &AttnBwdPlan, i: usize) -> std::ops::Range<usize> {
    let kb = p.s.div_ceil(BC);
    let end = if p.causal {
        // The last row of the block sees keys up to its own index.
        ((i * BR + BR.min(p.l - i * BR) - 1) / BC + 1).min(kb)
    } else {
        kb
    };
    0..end
}

/// Key block `j`: `dK_j` and `dV_j` over every query block that sees it (and, for
/// [`Want::All`], each `dQ_i`).
///
/// # Safety
/// The views address their batch index; the caller owns the output rows this writes.
unsafe fn key_block(p: &AttnBwdPlan, v: &Views, tiles: &mut Tiles, j: usize, want: Want) {
    let (c0, cols) = (j * BC, BC.min(p.s - j * BC));
    let mut first = true;
    for i in query_blocks(p, j) {
        let (r0, rows) = (i * BR, BR.min(p.l - i * BR));
        // SAFETY: forwarded.
        unsafe { tile(p, v, tiles, (r0, rows), (c0, cols), want, first) };
        first = false;
    }
    if first {
        // No query sees these keys (causal, with S > L): their gradients are zero.
        // SAFETY: rows c0.. of this batch index's dk and dv.
        unsafe {
            v.dk.zero(c0, cols, p.e);
            v.dv.zero(c0, cols, p.ev);
        }
    }
}

/// Query block `i`: `dQ_i` over every key block it sees.
///
/// # Safety
/// As for [`key_block`].
unsafe fn query_block(p: &AttnBwdPlan, v: &Views, tiles: &mut Tiles, i: usize) {
    let (r0, rows) = (i * BR, BR.min(p.l - i * BR));
    // SAFETY: rows r0.. of this batch index's dq.
    unsafe { v.dq.zero(r0, rows, p.e) };
    for j in key_blocks(p, i) {
        let (c0, cols) = (j * BC, BC.min(p.s - j * BC));
        // SAFETY: forwarded.
        unsafe { tile(p, v, tiles, (r0, rows), (c0, cols), Want::Q, false) };
    }
}

/// `out[m × n] (+)= a[m × k] · b[k × n]` on strided f32 views (`(row stride, column stride)`).
///
/// # Safety
/// Every view addresses `m × k`, `k × n` and `m × n` elements.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn mm(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    (drs, dcs): (isize, isize),
    accumulate: bool,
    a: *const f32,
    (ars, acs): (isize, isize),
    b: *const f32,
    (brs, bcs): (isize, isize),
) {
    // SAFETY: forwarded.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            dcs,
            drs,
            accumulate,
            a,
            acs,
            ars,
            b,
            bcs,
            brs,
            if accumulate { 1.0f32 } else { 0.0f32 },
            1.0f32,
            false,
            false,
            false,
            Parallelism::None,
        )
    }
}

/// One tile: queries `r0..r0 + rows` against keys `c0..c0 + cols`.
///
/// # Safety
/// As for [`key_block`]; `first` is true for the first tile of a key block (its `dK_j`, `dV_j`
/// are overwritten rather than added to).
unsafe fn tile(
    p: &AttnBwdPlan,
    v: &Views,
    tiles: &mut Tiles,
    (r0, rows): (usize, usize),
    (c0, cols): (usize, usize),
    want: Want,
    first: bool,
) {
    let (e, ev) = (p.e, p.ev);
    let ld = BC as isize;
    // SAFETY (whole fn): every pointer stays inside its view: rows r0..r0 + rows of q, dO
    // and dq, rows c0..c0 + cols of k, v, dk and dv.
    unsafe {
        let q = (v.q.p as *const f32).offset(r0 as isize * v.q.rs);
        let g = (v.dout.p as *const f32).offset(r0 as isize * v.dout.rs);
        let k = (v.k.p as *const f32).offset(c0 as isize * v.k.rs);
        let vv = (v.v.p as *const f32).offset(c0 as isize * v.v.rs);
        // S = Q_i K_jᵀ
        mm(
            (rows, cols, e),
            tiles.p.as_mut_ptr(),
            (ld, 1),
            false,
            q,
            (v.q.rs, v.q.cs),
            k,
            (v.k.cs, v.k.rs),
        );
        // dP = dO_i V_jᵀ
        mm(
            (rows, cols, ev),
            tiles.ds.as_mut_ptr(),
            (ld, 1),
            false,
            g,
            (v.dout.rs, v.dout.cs),
            vv,
            (v.v.cs, v.v.rs),
        );
        let lse = std::slice::from_raw_parts(v.lse.add(r0), rows);
        let delta = std::slice::from_raw_parts(v.delta.add(r0), rows);
        probabilities(p, tiles, (r0, rows), (c0, cols), lse, delta);
        if want != Want::Q {
            // dV_j (+)= Pᵀ dO_i
            mm(
                (cols, ev, rows),
                v.dv.row(c0),
                (v.dv.rs, 1),
                !first,
                tiles.p.as_ptr(),
                (1, ld),
                g,
                (v.dout.rs, v.dout.cs),
            );
            // dK_j (+)= dSᵀ Q_i
            mm(
                (cols, e, rows),
                v.dk.row(c0),
                (v.dk.rs, 1),
                !first,
                tiles.ds.as_ptr(),
                (1, ld),
                q,
                (v.q.rs, v.q.cs),
            );
        }
        if want != Want::Kv {
            // dQ_i += dS K_j
            mm(
                (rows, e, cols),
                v.dq.row(r0),
                (v.dq.rs, 1),
                true,
                tiles.ds.as_ptr(),
                (ld, 1),
                k,
                (v.k.rs, v.k.cs),
            );
        }
    }
}

/// `tiles.p` holds the scores, `tiles.ds` the products `dO_i V_jᵀ`: turns them into the
/// probabilities and `scale · P ∘ (dP - D)`, compiled for the CPU's vector level.
fn probabilities(
    p: &AttnBwdPlan,
    tiles: &mut Tiles,
    rows: (usize, usize),
    cols: (usize, usize),
    lse: &[f32],
    delta: &[f32],
) {
    #[cfg(target_arch = "x86_64")]
    match isa_level() {
        // SAFETY: the level was detected at run time.
        2 => return unsafe { probabilities_avx512(p, tiles, rows, cols, lse, delta) },
        // SAFETY: as above.
        1 => return unsafe { probabilities_avx2(p, tiles, rows, cols, lse, delta) },
        _ => {}
    }
    probabilities_with::<false>(p, tiles, rows, cols, lse, delta)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn probabilities_avx512(
    p: &AttnBwdPlan,
    tiles: &mut Tiles,
    rows: (usize, usize),
    cols: (usize, usize),
    lse: &[f32],
    delta: &[f32],
) {
    probabilities_with::<true>(p, tiles, rows, cols, lse, delta)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn probabilities_avx2(
    p: &AttnBwdPlan,
    tiles: &mut Tiles,
    rows: (usize, usize),
    cols: (usize, usize),
    lse: &[f32],
    delta: &[f32],
) {
    probabilities_with::<true>(p, tiles, rows, cols, lse, delta)
}

#[inline(always)]
fn probabilities_with<const FMA: bool>(
    p: &AttnBwdPlan,
    tiles: &mut Tiles,
    (r0, rows): (usize, usize),
    (c0, cols): (usize, usize),
    lse: &[f32],
    delta: &[f32],
) {
    let scale = p.scale;
    for i in 0..rows {
        let pr = &mut tiles.p[i * BC..i * BC + cols];
        let dr = &mut tiles.ds[i * BC..i * BC + cols];
        let visible = if p.causal {
            (r0 + i + 1).saturating_sub(c0).min(cols)
        } else {
            cols
        };
        let (m, d) = (lse[i], delta[i]);
        for (x, g) in pr[..visible].iter_mut().zip(dr[..visible].iter_mut()) {
            let e = math::exp::<FMA>(*x * scale - m);
            *x = e;
            *g = scale * (e * (*g - d));
        }
        pr[visible..].fill(0.0);
        dr[visible..].fill(0.0);
    }
}
