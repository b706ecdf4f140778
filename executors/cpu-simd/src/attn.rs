//! Fused attention (`attn_match.rs` finds it): `softmax(mask(scale · q kᵀ)) v` without the
//! `[..., L, S]` score matrix. Each task takes one batch index and a block of query rows and
//! walks the keys in blocks with an online softmax (FlashAttention's recurrence): per block,
//! scores by GEMM into a cache-sized tile, the running row maximum `m` and sum `l` updated,
//! the accumulator rescaled by `exp(m_old - m_new)` and `p · v_block` added by GEMM; at the
//! end each row is divided by `l`. A row whose scores are all -inf comes out NaN, as the
//! decomposition gives it.
//!
//! The same kernel runs `ltorch.sdpa_fwd_lse` (planned in `sdpa.rs`): a causal mask computed
//! from the indices (key `j` visible to query `i` when `j <= i`, top-left aligned, key blocks
//! past the diagonal skipped) and the row log-sum-exp `m + log(l)` written beside the output,
//! which is all the backward (`attn_bwd.rs`) needs to recompute the probabilities.

use crate::attn_match::MaskKind;
#[cfg(target_arch = "x86_64")]
use crate::attn_tile::{self, Strided};
use crate::exec::{isa_level, Bufs};
use crate::group::BufId;
use crate::layout::Layout;
use crate::math;
use gemm::Parallelism;
use rayon::prelude::*;

/// Query rows per task: [`BR_WIDE`] when that still leaves every thread several tasks, else
/// [`BR`]. Wider tasks make half as many `gemm` calls per score: MiniLM's attention (B8 H12
/// L128 D32) went from 7.9 to 7.0 ms a forward and GPT-2's (B1 H12 L128 D64) from 3.5 to
/// 3.0 ms (AMD EPYC Zen 5, 2 threads).
const BR: usize = 32;
const BR_WIDE: usize = 128;
/// Keys per tile.
const BC: usize = 128;
/// Below this many multiply-adds (both products) the tasks run on the calling thread.
const PAR_MIN: usize = 1 << 18;

#[derive(Debug, Clone)]
pub(crate) struct AttnPlan {
    /// `[..., L, D]`, `[..., D, S]`, `[..., S, Dv]` views; the batch dims are shared.
    pub(crate) q: (BufId, Layout),
    pub(crate) kt: (BufId, Layout),
    pub(crate) v: (BufId, Layout),
    /// A `[..., L, S]` view: b8 (keep where true, else the fill) or f32 (added).
    pub(crate) mask: Option<(MaskKind, BufId, Layout)>,
    /// Key `j` hidden from query `i` when `j > i`.
    pub(crate) causal: bool,
    /// A `[..., L, Dv]` view with unit column stride: contiguous, or a place in a consumer's
    /// buffer (`placement.rs`: the heads' merge, a concatenation).
    pub(crate) out: (BufId, Layout),
    /// Contiguous f32 `[..., L]`: the log-sum-exp of each row's (scaled, masked) scores.
    pub(crate) lse: Option<BufId>,
    pub(crate) batch: Vec<usize>,
    pub(crate) l: usize,
    pub(crate) s: usize,
    pub(crate) d: usize,
    pub(crate) dv: usize,
    /// The scores times `factor` (or divided by it when `.1`), rounded to f32 as the
    /// decomposition's literal is.
    pub(crate) scale: Option<(f32, bool)>,
}

/// Raw operand pointers at one batch index, with the row/column strides of the last dims.
pub(crate) struct View {
    pub(crate) p: *const u8,
    pub(crate) rs: isize,
    pub(crate) cs: isize,
}

/// `layout`'s element offset at flat batch index `bi` of `batch` (its leading dims).
pub(crate) fn batch_offset(batch: &[usize], layout: &Layout, bi: usize) -> isize {
    let (mut off, mut rem) = (layout.offset, bi);
    for d in (0..batch.len()).rev() {
        off += (rem % batch[d]) as i64 * layout.strides[d];
        rem /= batch[d];
    }
    off as isize
}

/// The `[..., rows, cols]` view `(buf, layout)` at batch index `bi`, elements of `size` bytes.
pub(crate) fn batch_view(
    bufs: &Bufs,
    batch: &[usize],
    (buf, layout): (BufId, &Layout),
    bi: usize,
    size: usize,
) -> View {
    let r = layout.strides.len();
    // SAFETY: the offset addresses an element of the buffer (views were checked at compile).
    let p = unsafe {
        bufs.ptr(buf)
            .offset(batch_offset(batch, layout, bi) * size as isize)
    };
    View {
        p,
        rs: layout.strides[r - 2] as isize,
        cs: layout.strides[r - 1] as isize,
    }
}

impl AttnPlan {
    fn batches(&self) -> usize {
        self.batch.iter().product()
    }

    fn view(&self, bufs: &Bufs, (buf, layout): (BufId, &Layout), bi: usize, size: usize) -> View {
        batch_view(bufs, &self.batch, (buf, layout), bi, size)
    }
}

struct Ptr(*mut u8);
// SAFETY: tasks write disjoint rows of the outputs and only read the operands.
unsafe impl Sync for Ptr {}
unsafe impl Send for Ptr {}

pub(crate) fn run(p: &AttnPlan, bufs: &Bufs) {
    let t = std::time::Instant::now();
    let threads = rayon::current_num_threads();
    let br = if p.batches() * p.l.div_ceil(BR_WIDE) >= 4 * threads {
        BR_WIDE
    } else {
        BR
    };
    let row_blocks = p.l.div_ceil(br);
    let tasks = p.batches() * row_blocks;
    let out = Ptr(bufs.ptr(p.out.0));
    let task = |t: usize| {
        let (bi, rb) = (t / row_blocks, t % row_blocks);
        let r0 = rb * br;
        let rows = br.min(p.l - r0);
        // SAFETY: rows r0..r0 + rows of batch bi are in range and written by this task only.
        unsafe { block(p, bufs, &out, bi, r0, rows) };
    };
    if p.batches() * p.l * p.s * (p.d + p.dv) >= PAR_MIN && tasks > 1 {
        (0..tasks)
            .into_par_iter()
            .for_each(crate::ftz::carried(task));
    } else {
        (0..tasks).for_each(task);
    }
    if crate::exec::trace() {
        crate::exec::trace_line(format_args!(
            "cpu-simd attn:  {:>9.1} us batch {:?} L {} S {} D {} Dv {} mask {:?} causal {} lse {}",
            t.elapsed().as_secs_f64() * 1e6,
            p.batch,
            p.l,
            p.s,
            p.d,
            p.dv,
            p.mask.as_ref().map(|m| m.0),
            p.causal,
            p.lse.is_some()
        ));
    }
}

/// [`block_with`] compiled for the CPU's vector level.
///
/// # Safety
/// As for [`block_with`].
unsafe fn block(p: &AttnPlan, bufs: &Bufs, out: &Ptr, bi: usize, r0: usize, rows: usize) {
    // SAFETY: forwarded; the level was detected at run time.
    unsafe {
        #[cfg(target_arch = "x86_64")]
        match isa_level() {
            2 => return block_avx512(p, bufs, out, bi, r0, rows),
            1 => return block_avx2(p, bufs, out, bi, r0, rows),
            _ => {}
        }
        block_with::<false, false>(p, bufs, out, bi, r0, rows)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn block_avx512(p: &AttnPlan, bufs: &Bufs, out: &Ptr, bi: usize, r0: usize, rows: usize) {
    // SAFETY: forwarded.
    unsafe { block_with::<true, true>(p, bufs, out, bi, r0, rows) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2(p: &AttnPlan, bufs: &Bufs, out: &Ptr, bi: usize, r0: usize, rows: usize) {
    // SAFETY: forwarded.
    unsafe { block_with::<true, false>(p, bufs, out, bi, r0, rows) }
}

/// One batch index and `rows` query rows from `r0`; with `TILES` (AVX-512 only) the products
/// and the softmax run on `attn_tile.rs`'s kernels, else on the `gemm` crate and loops LLVM
/// vectorizes.
///
/// # Safety
/// The plan's views address their buffers for every index; `out` holds the output; `TILES`
/// only where the CPU has AVX-512F and the caller is compiled for it.
#[inline(always)]
unsafe fn block_with<const FMA: bool, const TILES: bool>(
    p: &AttnPlan,
    bufs: &Bufs,
    out: &Ptr,
    bi: usize,
    r0: usize,
    rows: usize,
) {
    let q = p.view(bufs, (p.q.0, &p.q.1), bi, 4);
    let kt = p.view(bufs, (p.kt.0, &p.kt.1), bi, 4);
    let v = p.view(bufs, (p.v.0, &p.v.1), bi, 4);
    let mask = p.mask.as_ref().map(|(kind, buf, layout)| {
        let size = if matches!(kind, MaskKind::Add) { 4 } else { 1 };
        (*kind, p.view(bufs, (*buf, layout), bi, size))
    });
    let (dv, s) = (p.dv, p.s);
    let mut tile = vec![0f32; rows * BC];
    let mut acc = vec![0f32; rows * dv];
    let mut m = vec![f32::NEG_INFINITY; rows];
    let mut l = vec![0f32; rows];
    let mut alpha = vec![0f32; rows];
    // Key blocks copied to contiguous rows for the tile kernels, when they are strided.
    let mut kpack = vec![0f32; if TILES && kt.cs != 1 { p.d * BC } else { 0 }];
    let mut vpack = vec![0f32; if TILES && v.cs != 1 { BC * dv } else { 0 }];
    // The tile kernels' softmax applies the scale and an additive mask contiguous along the
    // keys itself; other masks are applied to the scores first.
    let fused_pre = TILES
        && match &mask {
            None => true,
            Some((MaskKind::Add, mv)) => mv.cs == 1,
            Some(_) => false,
        };
    // SAFETY (whole fn): every pointer below stays inside its operand's view.
    unsafe {
        let qp = (q.p as *const f32).offset(r0 as isize * q.rs);
        for c0 in (0..s).step_by(BC) {
            if p.causal && c0 > r0 + rows - 1 {
                // Every later key is past every row's diagonal.
                break;
            }
            let cols = BC.min(s - c0);
            if let Some((MaskKind::Keep(fill), mv)) = &mask {
                // A tile the mask hides entirely adds exp(-inf) = 0 to every row: skip it
                // (the causal mask's upper triangle).
                let hidden = *fill == f64::NEG_INFINITY
                    && (0..rows).all(|i| {
                        let mp = mv.p.offset((r0 + i) as isize * mv.rs + c0 as isize * mv.cs);
                        (0..cols).all(|j| *mp.offset(j as isize * mv.cs) == 0)
                    });
                if hidden {
                    continue;
                }
            }
            // tile[i][j] = q[r0 + i] · k[c0 + j]
            let kt_block = (kt.p as *const f32).offset(c0 as isize * kt.cs);
            if TILES {
                #[cfg(target_arch = "x86_64")]
                {
                    let src = Strided {
                        p: kt_block,
                        rs: kt.rs,
                        cs: kt.cs,
                    };
                    let (b, b_rs) = attn_tile::contiguous_rows(src, (p.d, cols), &mut kpack, BC);
                    let a = Strided {
                        p: qp,
                        rs: q.rs,
                        cs: q.cs,
                    };
                    attn_tile::product(
                        (rows, cols, p.d),
                        a,
                        b,
                        b_rs,
                        tile.as_mut_ptr(),
                        BC as isize,
                        false,
                    );
                }
            } else {
                gemm::gemm(
                    rows,
                    cols,
                    p.d,
                    tile.as_mut_ptr(),
                    1,
                    BC as isize,
                    false,
                    qp,
                    q.cs,
                    q.rs,
                    kt_block,
                    kt.cs,
                    kt.rs,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    Parallelism::None,
                );
            }
            for i in (0..rows).filter(|_| !fused_pre) {
                let row = &mut tile[i * BC..i * BC + cols];
                if let Some((f, divide)) = p.scale {
                    if divide {
                        row.iter_mut().for_each(|x| *x /= f);
                    } else {
                        row.iter_mut().for_each(|x| *x *= f);
                    }
                }
                if p.causal {
                    // Keys c0 + j with j >= visible lie past row r0 + i's diagonal.
                    let visible = (r0 + i + 1).saturating_sub(c0).min(cols);
                    row[visible..].fill(f32::NEG_INFINITY);
                }
                if let Some((kind, mv)) = &mask {
                    let base = (r0 + i) as isize * mv.rs + c0 as isize * mv.cs;
                    match kind {
                        MaskKind::Keep(fill) => {
                            let mp = mv.p.offset(base);
                            let fill = *fill as f32;
                            if mv.cs == 1 {
                                // Contiguous along the keys (the common case): a loop that
                                // vectorizes.
                                let keep = std::slice::from_raw_parts(mp, cols);
                                for (x, &k) in row.iter_mut().zip(keep) {
                                    *x = if k == 0 { fill } else { *x };
                                }
                            } else {
                                for (j, x) in row.iter_mut().enumerate() {
                                    if *mp.offset(j as isize * mv.cs) == 0 {
                                        *x = fill;
                                    }
                                }
                            }
                        }
                        MaskKind::Add => {
                            let mp = (mv.p as *const f32).offset(base);
                            if mv.cs == 1 {
                                let add = std::slice::from_raw_parts(mp, cols);
                                row.iter_mut().zip(add).for_each(|(x, &a)| *x += a);
                            } else {
                                for (j, x) in row.iter_mut().enumerate() {
                                    *x += *mp.offset(j as isize * mv.cs);
                                }
                            }
                        }
                    }
                }
            }
            if TILES {
                #[cfg(target_arch = "x86_64")]
                {
                    let pre = if fused_pre {
                        attn_tile::Pre {
                            scale: p.scale,
                            add: mask.as_ref().map(|(_, mv)| {
                                let base = r0 as isize * mv.rs + c0 as isize;
                                ((mv.p as *const f32).offset(base), mv.rs)
                            }),
                            causal: p.causal.then_some(r0 as isize + 1 - c0 as isize),
                        }
                    } else {
                        attn_tile::Pre {
                            scale: None,
                            add: None,
                            causal: None,
                        }
                    };
                    attn_tile::softmax_rows(
                        tile.as_mut_ptr(),
                        BC,
                        cols,
                        rows,
                        &pre,
                        &mut m,
                        &mut l,
                        &mut alpha,
                    );
                }
            } else {
                softmax_rows::<FMA>(&mut tile, cols, rows, &mut m, &mut l, &mut alpha);
            }
            for i in 0..rows {
                let a = alpha[i];
                if a != 1.0 {
                    acc[i * dv..(i + 1) * dv].iter_mut().for_each(|x| *x *= a);
                }
            }
            // acc += tile[:, :cols] @ v[c0..c0 + cols]
            let v_block = (v.p as *const f32).offset(c0 as isize * v.rs);
            if TILES {
                #[cfg(target_arch = "x86_64")]
                {
                    let src = Strided {
                        p: v_block,
                        rs: v.rs,
                        cs: v.cs,
                    };
                    let (b, b_rs) = attn_tile::contiguous_rows(src, (cols, dv), &mut vpack, dv);
                    let a = Strided {
                        p: tile.as_ptr(),
                        rs: BC as isize,
                        cs: 1,
                    };
                    attn_tile::product(
                        (rows, dv, cols),
                        a,
                        b,
                        b_rs,
                        acc.as_mut_ptr(),
                        dv as isize,
                        true,
                    );
                }
            } else {
                gemm::gemm(
                    rows,
                    dv,
                    cols,
                    acc.as_mut_ptr(),
                    1,
                    dv as isize,
                    true,
                    tile.as_ptr(),
                    1,
                    BC as isize,
                    v_block,
                    v.cs,
                    v.rs,
                    1.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    Parallelism::None,
                );
            }
        }
        let (ob, ors) = (
            batch_offset(&p.batch, &p.out.1, bi),
            p.out.1.strides[p.out.1.strides.len() - 2] as isize,
        );
        for (i, arow) in acc.chunks_exact(dv).enumerate() {
            let orow = std::slice::from_raw_parts_mut(
                (out.0 as *mut f32).offset(ob + (r0 + i) as isize * ors),
                dv,
            );
            let inv = if m[i] == f32::NEG_INFINITY {
                f32::NAN
            } else {
                l[i]
            };
            if TILES {
                #[cfg(target_arch = "x86_64")]
                attn_tile::divide_row(orow, arow, inv);
            } else {
                divide_row(orow, arow, inv);
            }
        }
        if let Some(lse) = p.lse {
            // -inf for a row that saw no key (log 0), as the decomposition gives it.
            let dst = (bufs.ptr(lse) as *mut f32).add(bi * p.l + r0);
            for i in 0..rows {
                *dst.add(i) = m[i] + l[i].ln();
            }
        }
    }
}

#[inline(always)]
fn softmax_rows<const FMA: bool>(
    tile: &mut [f32],
    cols: usize,
    rows: usize,
    m: &mut [f32],
    l: &mut [f32],
    alpha: &mut [f32],
) {
    for i in 0..rows {
        let row = &mut tile[i * BC..i * BC + cols];
        // Sixteen partial maxima, so the loop vectorizes (a single running maximum is a
        // chain of dependent scalar instructions).
        let mut lanes = [f32::NEG_INFINITY; 16];
        let mut chunks = row.chunks_exact(16);
        for c in &mut chunks {
            for (a, &x) in lanes.iter_mut().zip(c) {
                *a = a.max(x);
            }
        }
        let mx = chunks.remainder().iter().fold(
            lanes.iter().fold(f32::NEG_INFINITY, |a, &x| a.max(x)),
            |a, &x| a.max(x),
        );
        let m_new = m[i].max(mx);
        if m_new == f32::NEG_INFINITY {
            row.iter_mut().for_each(|x| *x = 0.0);
            alpha[i] = 1.0;
            continue;
        }
        alpha[i] = math::exp::<FMA>(m[i] - m_new);
        row.iter_mut()
            .for_each(|x| *x = math::exp::<FMA>(*x - m_new));
        // Sixteen partial sums, so the loop vectorizes.
        let mut lanes = [0.0f32; 16];
        let mut chunks = row.chunks_exact(16);
        for c in &mut chunks {
            for (a, &x) in lanes.iter_mut().zip(c) {
                *a += x;
            }
        }
        let sum = lanes.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>();
        l[i] = l[i] * alpha[i] + sum;
        m[i] = m_new;
    }
}

/// `out = acc / l`, in blocks of sixteen so that rows shorter than the compiler's unrolled
/// vector loop (a head dim of 32) still divide in vectors.
#[inline(always)]
fn divide_row(out: &mut [f32], acc: &[f32], l: f32) {
    let mut o = out.chunks_exact_mut(16);
    let mut a = acc.chunks_exact(16);
    for (o, a) in (&mut o).zip(&mut a) {
        for (x, &y) in o.iter_mut().zip(a) {
            *x = y / l;
        }
    }
    for (x, &y) in o.into_remainder().iter_mut().zip(a.remainder()) {
        *x = y / l;
    }
}
