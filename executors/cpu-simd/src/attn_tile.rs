//! The fused attention's inner work (`attn.rs`) on AVX-512: the two products of a key block
//! (`q kᵀ` into the score tile, `p v` into the accumulator) on register tiles of our own,
//! and the online softmax's row passes written with intrinsics.
//!
//! Why not the `gemm` crate, which the AVX2 and scalar paths keep: these products are small
//! (MiniLM's heads: `[128, 32] @ [32, 128]` and `[128, 128] @ [128, 32]`), so each call's
//! dispatch and its packing of both operands cost as much as the multiply-adds. Here the left
//! operand is read in place (broadcast one element at a time), the right operand's rows are
//! read in place where they are contiguous (`v`, and `kᵀ` when the keys are) and otherwise
//! copied once per key block into a small packed block, and a ragged last column vector is
//! masked, never padded. The softmax passes, which LLVM left partly scalar (the scale, the
//! additive mask, the row maximum and the exponentials), are explicit 16-lane loops with
//! `vmath::exp` (the same bits as `math::exp`).
//!
//! Sums over the depth run in order, one fused multiply-add per step, so results differ from
//! the crate's by rounding only (`tests/attn.rs` checks against an f64 reference).

use crate::math;
use crate::simd::{Vf32, V512};
use crate::vmath;
use std::arch::x86_64::*;

/// Depth per block of [`product`].
pub(crate) const KC: usize = 256;

/// A strided matrix: element `(i, p)` at `p + i * rs + p * cs` (elements).
#[derive(Clone, Copy)]
pub(crate) struct Strided {
    pub(crate) p: *const f32,
    pub(crate) rs: isize,
    pub(crate) cs: isize,
}

/// One product's operands for the register tiles.
#[derive(Clone, Copy)]
struct Args {
    a: Strided,
    /// Row `p` of the right operand (contiguous) at `b + p * b_rs`, offset to the column
    /// group.
    b: *const f32,
    b_rs: isize,
    k: usize,
    /// The output at the column group, row stride `ld`.
    out: *mut f32,
    ld: isize,
    add: bool,
    /// Lanes of the group's last vector inside the output.
    last: __mmask16,
}

/// `out[i][j] (+)= Σ_p a(i, p) · b[p][j]` for `i < m`, `j < n`, summed over `p` in order.
/// `b`'s rows are contiguous (`n` elements from `b + p * b_rs`), `out` row-major with row
/// stride `ld`; `add` adds to what `out` holds.
///
/// # Safety
/// The CPU has AVX-512F; the operands address `m x k`, `k x n` readable and `m x n`
/// writable elements.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn product(
    (m, n, k): (usize, usize, usize),
    a: Strided,
    b: *const f32,
    b_rs: isize,
    out: *mut f32,
    ld: isize,
    add: bool,
) {
    // Column groups of up to four vectors, so a tile holds at most 24 accumulators.
    for j0 in (0..n).step_by(64) {
        let cols = (n - j0).min(64);
        let tail = cols - 16 * ((cols - 1) / 16);
        // Depth blocks, each block's sums added to the output: a block of the right operand
        // stays in cache across the row tiles, and no sum runs longer than KC terms in f32.
        // (Tried as the convolutions' GEMM: their 4,608-term sums, in one run, missed the
        // tests' f64 reference by 3e-4 relative; blocked they passed, and `conv_bench` ran
        // 2-16% faster a class than on the `gemm` crate, but ResNet-50 as a whole did not
        // change, so the convolutions stay on the crate.)
        for k0 in (0..k.max(1)).step_by(KC) {
            let x = Args {
                a: Strided {
                    p: a.p.wrapping_offset(k0 as isize * a.cs),
                    ..a
                },
                b: b.wrapping_offset(k0 as isize * b_rs).wrapping_add(j0),
                b_rs,
                k: KC.min(k - k0),
                out: out.wrapping_add(j0),
                ld,
                add: add || k0 > 0,
                last: ((1u32 << tail) - 1) as __mmask16,
            };
            // SAFETY: forwarded; every tile stays inside the m x cols group.
            unsafe {
                match cols.div_ceil(16) {
                    1 => rows_narrow::<1>(&x, m),
                    2 => rows_narrow::<2>(&x, m),
                    3 => rows_wide::<3>(&x, m),
                    _ => rows_wide::<4>(&x, m),
                }
            }
        }
    }
}

/// Every row of a group of one or two vectors, twelve rows a tile.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows_narrow<const NV: usize>(x: &Args, m: usize) {
    let mut i0 = 0;
    while i0 < m {
        let r = (m - i0).min(12);
        // SAFETY: rows i0..i0 + r are inside the product.
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

/// Every row of a group of three or four vectors, six rows a tile.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows_wide<const NV: usize>(x: &Args, m: usize) {
    let mut i0 = 0;
    while i0 < m {
        let r = (m - i0).min(6);
        // SAFETY: rows i0..i0 + r are inside the product.
        unsafe {
            match r {
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

/// Output rows `i0..i0 + R` of one column group, kept in `R x NV` registers over the depth.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tile<const R: usize, const NV: usize>(x: &Args, i0: usize) {
    let mask = |c: usize| if c + 1 == NV { x.last } else { 0xffff };
    // SAFETY (whole fn): reads stay inside the operands (the last vector masked), writes
    // inside this tile.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); NV]; R];
        let arow: [*const f32; R] =
            std::array::from_fn(|r| x.a.p.wrapping_offset((i0 + r) as isize * x.a.rs));
        for p in 0..x.k {
            let brow = x.b.offset(p as isize * x.b_rs);
            let bv: [__m512; NV] =
                std::array::from_fn(|c| _mm512_maskz_loadu_ps(mask(c), brow.add(16 * c)));
            for (acc, row) in acc.iter_mut().zip(&arow) {
                let av = _mm512_set1_ps(*row.offset(p as isize * x.a.cs));
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

/// Copies `kt`'s `d x cols` block into `dst` (row stride `ld`), so that [`product`] reads
/// contiguous rows: `kᵀ` is usually a transposed view of `k`, contiguous along the head dim,
/// and then its 16 x 16 blocks are transposed in registers (element by element, the copy
/// took about a third of the score product's time on MiniLM's heads).
///
/// # Safety
/// The CPU has AVX-512F; `kt` addresses `d x cols` elements; `dst` holds `d * ld` with
/// `cols <= ld`.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn pack(kt: Strided, d: usize, cols: usize, dst: &mut [f32], ld: usize) {
    assert!(
        cols <= ld && dst.len() >= d * ld,
        "attention pack: {d} x {cols} into {ld}"
    );
    let (d16, c16) = if kt.rs == 1 {
        (d - d % 16, cols - cols % 16)
    } else {
        (0, 0)
    };
    // SAFETY (whole fn): reads inside `kt`'s block, writes inside `dst` (checked above).
    unsafe {
        let out = dst.as_mut_ptr();
        for j0 in (0..c16).step_by(16) {
            for p0 in (0..d16).step_by(16) {
                // Row r: key j0 + r's head-dim elements p0..p0 + 16.
                let rows: [__m512; 16] = std::array::from_fn(|r| {
                    _mm512_loadu_ps(kt.p.offset((j0 + r) as isize * kt.cs + p0 as isize))
                });
                for (c, v) in transpose16(rows).into_iter().enumerate() {
                    _mm512_storeu_ps(out.add((p0 + c) * ld + j0), v);
                }
            }
        }
        // What the blocks left: the last columns, and the last head-dim rows.
        for j in 0..cols {
            let first = if j < c16 { d16 } else { 0 };
            let src = kt.p.offset(j as isize * kt.cs);
            for p in first..d {
                *out.add(p * ld + j) = *src.offset(p as isize * kt.rs);
            }
        }
    }
}

/// `src`'s `rows x cols` block as contiguous rows for [`product`]: in place when its columns
/// are contiguous, else copied by [`pack`] into `buf` (row stride `ld`). Returns the rows'
/// start and stride.
///
/// # Safety
/// As for [`pack`].
pub(crate) unsafe fn contiguous_rows(
    src: Strided,
    (rows, cols): (usize, usize),
    buf: &mut [f32],
    ld: usize,
) -> (*const f32, isize) {
    if src.cs == 1 {
        return (src.p, src.rs);
    }
    // SAFETY: forwarded.
    unsafe { pack(src, rows, cols, buf, ld) };
    (buf.as_ptr(), ld as isize)
}

/// The transpose of a 16 x 16 block held as 16 row vectors: element `c` of output `r` is
/// element `r` of input `c`.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    // Interleave pairs of rows, then pairs of pairs, then 128-bit lanes twice.
    let t: [__m512; 16] = std::array::from_fn(|i| {
        let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(a, b)
        } else {
            _mm512_unpackhi_ps(a, b)
        }
    });
    let u: [__m512; 16] = std::array::from_fn(|i| {
        let base = i / 4 * 4;
        let (a, b) = (t[base + (i % 4) / 2], t[base + 2 + (i % 4) / 2]);
        if i % 2 == 0 {
            _mm512_shuffle_ps::<0x44>(a, b)
        } else {
            _mm512_shuffle_ps::<0xEE>(a, b)
        }
    });
    let w: [__m512; 16] = std::array::from_fn(|i| {
        let base = i / 8 * 8;
        let (a, b) = (u[base + i % 4], u[base + 4 + i % 4]);
        if i % 8 < 4 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xDD>(a, b)
        }
    });
    std::array::from_fn(|i| {
        let (a, b) = (w[i % 8], w[8 + i % 8]);
        if i < 8 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xDD>(a, b)
        }
    })
}

/// `out = acc / l` (correctly rounded, as the scalar division).
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn divide_row(out: &mut [f32], acc: &[f32], l: f32) {
    let n = out.len().min(acc.len());
    let lv = _mm512_set1_ps(l);
    for c in (0..n).step_by(16) {
        let lanes = ((1u32 << (n - c).min(16)) - 1) as __mmask16;
        // SAFETY: the masked lanes stay inside both slices.
        unsafe {
            let a = _mm512_maskz_loadu_ps(lanes, acc.as_ptr().add(c));
            _mm512_mask_storeu_ps(out.as_mut_ptr().add(c), lanes, _mm512_div_ps(a, lv));
        }
    }
}

/// What [`softmax_rows`] applies to the raw scores before the softmax, in the decomposition's
/// order: the scale, then the additive mask, then the causal mask.
pub(crate) struct Pre {
    /// Multiply by `.0`, or divide by it when `.1`.
    pub(crate) scale: Option<(f32, bool)>,
    /// Row 0 of the additive mask at this key block, contiguous along the keys, and its row
    /// stride.
    pub(crate) add: Option<(*const f32, isize)>,
    /// `r0 + 1 - c0`: row `i` sees that many keys of the block plus `i` (clamped to the
    /// block).
    pub(crate) causal: Option<isize>,
}

/// The online softmax's step over a key block of `cols` scores a row (row stride `ld`):
/// per row the scores are prepared (`pre`), the running maximum `m` and sum `l` updated,
/// `alpha` set to the factor the row's accumulator must be rescaled by, and the scores
/// replaced by `exp(score - m)`. A row with no finite score so far becomes zeros.
///
/// # Safety
/// The CPU has AVX-512F; `tile` holds `rows` rows of `cols` scores; the mask addresses them.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_rows(
    tile: *mut f32,
    ld: usize,
    cols: usize,
    rows: usize,
    pre: &Pre,
    m: &mut [f32],
    l: &mut [f32],
    alpha: &mut [f32],
) {
    let nv = cols.div_ceil(16);
    let full = |c: usize, width: usize| -> __mmask16 {
        let lanes = width.saturating_sub(16 * c).min(16);
        ((1u32 << lanes) - 1) as __mmask16
    };
    // SAFETY (whole fn): every access is inside the row's `cols` scores (masked).
    unsafe {
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        for i in 0..rows {
            let row = tile.add(i * ld);
            let visible = pre
                .causal
                .map_or(cols, |v| (v + i as isize).clamp(0, cols as isize) as usize);
            let mut mx = ninf;
            for c in 0..nv {
                let lanes = full(c, cols);
                let p = row.add(16 * c);
                let mut x = _mm512_maskz_loadu_ps(lanes, p);
                if let Some((f, divide)) = pre.scale {
                    x = if divide {
                        _mm512_div_ps(x, _mm512_set1_ps(f))
                    } else {
                        _mm512_mul_ps(x, _mm512_set1_ps(f))
                    };
                }
                if let Some((mp, rs)) = pre.add {
                    let a = _mm512_maskz_loadu_ps(lanes, mp.offset(i as isize * rs).add(16 * c));
                    x = _mm512_add_ps(x, a);
                }
                // Keys past the row's diagonal, and lanes past the block, are -inf.
                x = _mm512_mask_blend_ps(full(c, visible), ninf, x);
                _mm512_mask_storeu_ps(p, lanes, x);
                mx = _mm512_max_ps(mx, x);
            }
            let m_new = m[i].max(_mm512_reduce_max_ps(mx));
            if m_new == f32::NEG_INFINITY {
                for c in 0..nv {
                    _mm512_mask_storeu_ps(row.add(16 * c), full(c, cols), _mm512_setzero_ps());
                }
                alpha[i] = 1.0;
                continue;
            }
            alpha[i] = math::exp::<true>(m[i] - m_new);
            let mv = V512::splat(m_new);
            let mut sum = _mm512_setzero_ps();
            for c in 0..nv {
                let lanes = full(c, cols);
                let p = row.add(16 * c);
                // Lanes past the block hold -inf (above): their exponentials are 0.
                let x = V512(_mm512_mask_loadu_ps(ninf, lanes, p));
                let e = vmath::exp(V512::sub(x, mv)).0;
                _mm512_mask_storeu_ps(p, lanes, e);
                sum = _mm512_add_ps(sum, e);
            }
            l[i] = l[i] * alpha[i] + _mm512_reduce_add_ps(sum);
            m[i] = m_new;
        }
    }
}
