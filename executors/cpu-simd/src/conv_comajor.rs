//! A convolution's product with the output channels along the vector lanes, for f32 weights
//! stored with their output channels contiguous (`[C_in/G, *K, C_out]`, transposed back in
//! the trace: how the ONNX session lays out a CPU model's convolution weights at load, as ONNX
//! Runtime packs them once there).
//!
//! The `gemm` crate multiplies `W [C_out, C_in/G * K] @ col [C_in/G * K, S]` with the output
//! positions along its lanes: it packs the weights on every call (ResNet-50 reads 100 MB of
//! them a forward, and the packing pass was 11% of its samples), and at 7 x 7 maps (49
//! positions) its 64-wide tiles leave lanes idle (9%). Here the output's transpose
//! `colᵀ [S, C_in/G * K] @ Wᵀ [C_in/G * K, C_out]` runs on register tiles of up to 6
//! positions by 64 channels (or 12 by 32), the shape of `attn_tile`'s: the weights' rows are
//! read in place (no packing), the positions are broadcast one at a time (any count, no idle
//! lanes), and ResNet's output channel counts are whole vectors. Each chunk of positions is
//! then transposed into the NCHW output in 16 x 16 blocks.
//!
//! The tiles read position `s` at depth `p` at `x + pos[s] + off[p]` ([`Implicit`]): for a
//! column matrix that is `s + p * rs` ([`product`]); 2-D convolutions with a kernel wider
//! than one element do not unroll their column matrix at all ([`product_implicit`]): the
//! input is copied once into zero-bordered planes and the offsets walk a position's window.
//! (`attn_tile`'s kernel computes `p * cs` instead of reading a table; it stays its own so
//! the attention's inner loop is not touched.)
//!
//! Measured (AMD EPYC Zen 5, `conv_bench` with `CONV_BENCH_CHANNELS_LAST=1` and
//! `CONV_BENCH_AB=THUNDER_CPU_SIMD_CONV_COMAJOR=0`, 2 threads, warm): ResNet-50's 3x3s ran
//! 0.81-0.92x the crate's time on the same weights, its stem 0.91x. Cold (one thread, 256 MB
//! streamed before each call) the 3x3s with large weights were slower than on the crate,
//! which is why the ONNX session lays out only weights up to 1 MB and `conv_run` sends only
//! large maps here.
//!
//! Sums over the depth run in blocks of `attn_tile`'s depth, in order, one fused multiply-add
//! a step: results differ from the crate's by rounding only (`tests/conv.rs` checks both
//! against an f64 reference).

use crate::attn_tile;
use std::arch::x86_64::*;
use std::sync::OnceLock;

/// Floats of one chunk's transposed output: positions are taken in chunks whose `[positions,
/// C_out]` product stays in L2 until it is transposed out (at least 64 positions, so that
/// a 7 x 7 map's 49 are one chunk and its weights are read once).
const CHUNK_FLOATS: usize = 1 << 16;

/// Whether products with output-channel-contiguous weights take this path
/// (`THUNDER_CPU_SIMD_CONV_COMAJOR=0` leaves them to the crate, for comparing the two).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::switches::on("THUNDER_CPU_SIMD_CONV_COMAJOR", &ON) && crate::exec::isa_level() >= 2
}

/// `dst[c * ld + s] = Σ_p w[p * w_rs + c] · col[p * col_rs + s]` for `c < co`, `s < cols`,
/// `p < ck`.
///
/// # Safety
/// [`enabled`] is true (the CPU has AVX-512F); `col` addresses `ck x cols` elements (columns
/// contiguous), `w` `ck x co` (output channels contiguous), `dst` `co` rows of `cols`
/// writable elements that no other thread touches meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn product(
    (co, cols, ck): (usize, usize, usize),
    col: *const f32,
    col_rs: isize,
    w: *const f32,
    w_rs: isize,
    dst: *mut f32,
    ld: isize,
) {
    let pos: Vec<isize> = (0..cols as isize).collect();
    let off: Vec<isize> = (0..ck as isize).map(|p| p * col_rs).collect();
    let a = Implicit {
        x: col,
        pos: &pos,
        off: &off,
        runs: true,
    };
    // SAFETY: forwarded from the caller: position `s`, depth `p` is `col[p * col_rs + s]`.
    unsafe { product_implicit(co, a, w, w_rs, dst, ld) }
}

/// Output channels per block (one column group of the tiles).
const COLS: usize = 64;

/// Asks for `rows` runs of `len` floats, `rs` apart, into L2.
///
/// # Safety
/// None beyond the CPU having SSE (a prefetch reads nothing and never faults).
#[inline(always)]
unsafe fn prefetch_rows(p: *const f32, rs: isize, rows: usize, len: usize) {
    for r in 0..rows {
        let row = p.wrapping_offset(r as isize * rs) as *const i8;
        for l in (0..len * 4).step_by(64) {
            // SAFETY: a prefetch reads nothing.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(l)) };
        }
    }
}

/// `dst[c * ld + s] = src[s * co + c]`: a `[p, co]` row-major block into `co` rows of `p`
/// positions, 16 x 16 blocks transposed in registers, the ragged edges element by element.
///
/// # Safety
/// The CPU has AVX-512F; `dst` addresses `co` rows of `p` writable elements.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn transpose_out(src: &[f32], (p, co): (usize, usize), dst: *mut f32, ld: isize) {
    let (p16, c16) = (p - p % 16, co - co % 16);
    // SAFETY (whole fn): reads inside `src` (`p * co` floats), writes inside `dst`'s rows.
    unsafe {
        let s = src.as_ptr();
        for c0 in (0..c16).step_by(16) {
            for s0 in (0..p16).step_by(16) {
                let rows: [__m512; 16] =
                    std::array::from_fn(|r| _mm512_loadu_ps(s.add((s0 + r) * co + c0)));
                for (c, v) in attn_tile::transpose16(rows).into_iter().enumerate() {
                    _mm512_storeu_ps(dst.offset((c0 + c) as isize * ld).add(s0), v);
                }
            }
        }
        for c in 0..co {
            let first = if c < c16 { p16 } else { 0 };
            let row = dst.offset(c as isize * ld);
            for j in first..p {
                *row.add(j) = *s.add(j * co + c);
            }
        }
    }
}

/// An operand read in place through offsets: element `(s, p)` (output position `s`, depth
/// `p`) at `x + pos[s] + off[p]`. For a 2-D convolution over a zero-bordered input, `pos` is
/// each output position's top-left input element and `off` each (channel, kernel row,
/// kernel column)'s offset from it: the column matrix, never written out.
#[derive(Clone, Copy)]
pub(crate) struct Implicit<'a> {
    pub(crate) x: *const f32,
    pub(crate) pos: &'a [isize],
    pub(crate) off: &'a [isize],
    /// Each depth's positions are one contiguous run (a column matrix): prefetched a depth
    /// block ahead. From memory, reading them a position at a time across a block's rows
    /// was latency-bound (cold, 1x1s at 56 x 56 ran 1.3x slower without).
    pub(crate) runs: bool,
}

/// [`product`] with the column matrix read in place: `dst[c * ld + s] = Σ_p w[p * w_rs + c]
/// · x[pos[s] + off[p]]` for `c < co`, `s < pos.len()`, `p < off.len()`.
///
/// # Safety
/// As for [`product`], with every `x + pos[s] + off[p]` readable.
pub(crate) unsafe fn product_implicit(
    co: usize,
    a: Implicit<'_>,
    w: *const f32,
    w_rs: isize,
    dst: *mut f32,
    ld: isize,
) {
    let (cols, ck) = (a.pos.len(), a.off.len());
    with_scratch(co, cols, |scratch, chunk| {
        for s0 in (0..cols).step_by(chunk) {
            let p = chunk.min(cols - s0);
            let wblock =
                |k0: usize, j0: usize| w.wrapping_offset(k0 as isize * w_rs).wrapping_add(j0);
            let kc_at = |k0: usize| attn_tile::KC.min(ck - k0);
            let a_rows = |k0: usize| {
                if a.runs {
                    let first = a.x.wrapping_offset(a.pos[s0] + a.off[k0]);
                    let rs = a.off.get(k0 + 1).map_or(0, |&o| o - a.off[k0]);
                    prefetch_rows(first, rs, kc_at(k0), p);
                }
            };
            // SAFETY: forwarded from the caller; every block is inside the operands and
            // `scratch` holds `p * co` floats.
            unsafe {
                a_rows(0);
                prefetch_rows(wblock(0, 0), w_rs, kc_at(0), COLS.min(co));
                for k0 in (0..ck).step_by(attn_tile::KC) {
                    let kc = kc_at(k0);
                    for j0 in (0..co).step_by(COLS) {
                        let n = COLS.min(co - j0);
                        // The next block's weights into L2 while this one runs.
                        if j0 + COLS < co {
                            prefetch_rows(
                                wblock(k0, j0 + COLS),
                                w_rs,
                                kc,
                                COLS.min(co - j0 - COLS),
                            );
                        } else if k0 + kc < ck {
                            a_rows(k0 + kc);
                            prefetch_rows(wblock(k0 + kc, 0), w_rs, kc_at(k0 + kc), COLS.min(co));
                        }
                        let blk = Block {
                            x: a.x,
                            pos: &a.pos[s0..s0 + p],
                            off: &a.off[k0..k0 + kc],
                            b: wblock(k0, j0),
                            b_rs: w_rs,
                            out: scratch.as_mut_ptr().add(j0),
                            ld: co as isize,
                            add: k0 > 0,
                            last: ((1u32 << (n - 16 * ((n - 1) / 16))) - 1) as __mmask16,
                        };
                        match n.div_ceil(16) {
                            1 => rows::<1>(&blk),
                            2 => rows::<2>(&blk),
                            3 => rows::<3>(&blk),
                            _ => rows::<4>(&blk),
                        }
                    }
                }
                transpose_out(&scratch[..p * co], (p, co), dst.add(s0), ld);
            }
        }
    })
}

/// Runs `f` on this thread's kept scratch of `chunk * co` floats and the chunk of positions
/// it holds (a fresh buffer while that one is in use).
fn with_scratch<R>(co: usize, cols: usize, f: impl FnOnce(&mut [f32], usize) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<f32>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    let chunk = (CHUNK_FLOATS / co.max(1))
        .max(64)
        .next_multiple_of(16)
        .min(cols)
        .max(1);
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            if kept.len() < chunk * co {
                kept.resize(chunk * co, 0.0);
            }
            f(&mut kept, chunk)
        }
        Err(_) => f(&mut vec![0.0; chunk * co], chunk),
    })
}

/// One block of [`product_implicit`]: positions `pos` against a column group of up to 64
/// output channels over a depth block `off`, into `out` (row stride `ld`, one row a
/// position), added to it when `add`.
struct Block<'a> {
    x: *const f32,
    pos: &'a [isize],
    off: &'a [isize],
    b: *const f32,
    b_rs: isize,
    out: *mut f32,
    ld: isize,
    add: bool,
    /// Lanes of the group's last vector inside the output.
    last: __mmask16,
}

/// Every position of a block, in tiles of 6 (three or four vectors of channels: at most 24
/// accumulators) or 12 (one or two).
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows<const NV: usize>(x: &Block<'_>) {
    let most = if NV > 2 { 6 } else { 12 };
    let m = x.pos.len();
    let mut i0 = 0;
    while i0 < m {
        let r = (m - i0).min(most);
        // SAFETY: positions i0..i0 + r are inside the block.
        unsafe {
            match r {
                12 => tile::<12, NV>(x, i0),
                11 => tile::<11, NV>(x, i0),
                10 => tile::<10, NV>(x, i0),
                9 => tile::<9, NV>(x, i0),
                8 => tile::<8, NV>(x, i0),
                7 => tile::<7, NV>(x, i0),
                6 => tile::<6, NV>(x, i0),
                5 => tile::<5, NV>(x, i0),
                4 => tile::<4, NV>(x, i0),
                3 => tile::<3, NV>(x, i0),
                2 => tile::<2, NV>(x, i0),
                _ => tile::<1, NV>(x, i0),
            }
        }
        i0 += r;
    }
}

/// Positions `i0..i0 + R` of a block, kept in `R x NV` registers over its depth.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tile<const R: usize, const NV: usize>(x: &Block<'_>, i0: usize) {
    let mask = |c: usize| if c + 1 == NV { x.last } else { 0xffff };
    // SAFETY (whole fn): reads stay inside the operands (the last vector masked), writes
    // inside this tile of `out`.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); NV]; R];
        let arow: [*const f32; R] = std::array::from_fn(|r| x.x.offset(x.pos[i0 + r]));
        for (p, &o) in x.off.iter().enumerate() {
            let brow = x.b.offset(p as isize * x.b_rs);
            let bv: [__m512; NV] =
                std::array::from_fn(|c| _mm512_maskz_loadu_ps(mask(c), brow.add(16 * c)));
            for (acc, row) in acc.iter_mut().zip(&arow) {
                let av = _mm512_set1_ps(*row.offset(o));
                for (s, &y) in acc.iter_mut().zip(&bv) {
                    *s = _mm512_fmadd_ps(av, y, *s);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let o = x.out.offset((i0 + r) as isize * x.ld);
            for (c, &s) in acc.iter().enumerate() {
                let p = o.add(16 * c);
                let v = if x.add {
                    _mm512_add_ps(_mm512_maskz_loadu_ps(mask(c), p), s)
                } else {
                    s
                };
                _mm512_mask_storeu_ps(p, mask(c), v);
            }
        }
    }
}
