//! Products whose left operand is packed once for all of its uses: a convolution's weights
//! (`[C_out, C_in/G * K]`, per group) against the column matrix of each block of output
//! positions (`conv_run.rs`), on AVX2 CPUs without AVX-512 (`prepack::enabled`), on
//! `prepack.rs`'s 6 x 16 register tile.
//!
//! On `matrixmultiply`, which packs both operands per call, every block of output positions
//! packed the whole weight again: a 3x3 convolution over 256 channels at 14 x 14 (ResNet-50
//! b1) cut its 196 positions into 7 blocks and packed its 2.4 MB weight 7 times. Here a static
//! weight is packed once per session (`prepack::PackedSlot`, from its second run), and only
//! the column block is packed per block, into the panels of [`NR`] columns the tile reads. A
//! weight packed per call stays on `matrixmultiply` (see `conv_run.rs`).

use crate::gemm_run::View;
use crate::prepack::{pack_a, Finish, KC, NR};
#[cfg(target_arch = "x86_64")]
use crate::prepack::{tile, MC, MR};
use rayon::prelude::*;

/// Whether a convolution with a static weight runs its products here once that weight is kept
/// packed (`conv_run.rs`, unless its weights are read in place by `conv_comajor`): f32 on the
/// CPUs `prepack` serves;
/// `THUNDER_CPU_SIMD_CONV_PACKED=0` leaves them to `matrixmultiply`, for A/B runs.
pub(crate) fn applies(p: &crate::conv::ConvPlan) -> bool {
    p.ty == crate::decode::Ty::F32 && applies_to_f32()
}

/// Whether f32 convolutions run their products here (see [`applies`]).
pub(crate) fn applies_to_f32() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    crate::prepack::enabled() && crate::switches::on("THUNDER_CPU_SIMD_CONV_PACKED", &ON)
}

/// `groups` matrices of `m x k`, each packed as `prepack`'s left blocks: for each block of
/// `kc` depth steps from `p0` (`p0 * m` floats into the group's `m * k`), one panel per row
/// tile of `prepack::row_tiles(m)`, the tile from row `first` starting `first * kc` into the
/// block.
pub(crate) struct PackedA {
    data: Vec<f32>,
    m: usize,
    k: usize,
    /// Depth steps per block (the last block may have fewer).
    kc: usize,
}

/// Depth steps per block for a convolution whose kernel has `taps` elements: whole input
/// channels of about [`KC`] (252 for a 3x3 kernel), so that each block unrolls its own
/// channels ([`Columns`]); one channel when its kernel is longer.
pub(crate) fn depth_block(taps: usize) -> usize {
    if taps >= KC {
        taps.max(1)
    } else {
        KC / taps.max(1) * taps.max(1)
    }
}

impl PackedA {
    /// Packs `a`'s rows as `groups` groups of `m` rows (group `g` from row `g * m`) of `k`
    /// columns, in blocks of `kc` depth steps, the blocks spread over the threads.
    ///
    /// # Safety
    /// `a` addresses `groups * m x k` readable elements.
    pub(crate) unsafe fn pack(
        a: View<f32>,
        (groups, m, k): (usize, usize, usize),
        kc: usize,
    ) -> PackedA {
        let kc = kc.max(1);
        let mut data = vec![0f32; groups * m * k];
        // One task per group and depth block: (group, p0, its floats).
        let mut blocks = Vec::new();
        let mut rest = data.as_mut_slice();
        for g in 0..groups {
            for p0 in (0..k).step_by(kc) {
                let (block, tail) = rest.split_at_mut(m * kc.min(k - p0));
                blocks.push((g, p0, block));
                rest = tail;
            }
        }
        // The view's pointer, as an address: shared with the threads, which only read it.
        let (base, rs, cs) = (a.ptr as usize, a.rs, a.cs);
        blocks.into_par_iter().for_each(|(g, p0, block)| {
            let a = View {
                ptr: base as *const f32,
                rs,
                cs,
            };
            // SAFETY: rows g * m .. (g + 1) * m, depth p0 .. p0 + kc lie inside `a`; the
            // block holds m * kc floats.
            unsafe { pack_a(a, (g * m, p0), (m, kc.min(k - p0)), block) };
        });
        PackedA { data, m, k, kc }
    }

    /// Rows of each group.
    pub(crate) fn rows(&self) -> usize {
        self.m
    }
}

/// `dst[i * ld + j] = Σ_p a(i, p) · b(p, j)` for group `g` of `a`, the rows `i` of the row
/// tiles `tiles` (a run of `prepack::row_tiles(m)`, rows counted from the group's first), `j < n`,
/// `p < k`, each then finished by `finish` (its rows and columns `dst`'s) as the last depth
/// block stores it. Each block of depth packs `b`'s rows into panels of [`NR`] columns
/// ([`Columns`]; a panel in L1 while the packed row tiles pass, a block of at most [`MC`] rows
/// of them in L2).
///
/// # Safety
/// The CPU has AVX2 and FMA (`prepack::enabled`); `b` has `k x n` readable elements;
/// `dst` addresses the tiles' rows (stride `ld`) of `n` writable elements that no other thread
/// touches; `finish`'s bias and residual hold those rows and columns.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm(
    a: &PackedA,
    g: usize,
    tiles: &[(usize, usize)],
    n: usize,
    b: &impl Columns,
    dst: *mut f32,
    ld: isize,
    finish: Option<&Finish>,
) {
    let (m, k) = (a.m, a.k);
    let rows: usize = tiles.iter().map(|t| t.1).sum();
    if rows == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for &(first, r) in tiles {
            for i in first..first + r {
                // SAFETY: row i of the tiles, n elements (the caller's), and its finish's.
                let row = unsafe { std::slice::from_raw_parts_mut(dst.offset(i as isize * ld), n) };
                for (j, x) in row.iter_mut().enumerate() {
                    *x = match finish {
                        // SAFETY: the caller's.
                        Some(f) => unsafe { f.apply(0.0, i, j) },
                        None => 0.0,
                    };
                }
            }
        }
        return;
    }
    // Blocks of whole tiles of about equal rows: at most MC, give or take a tile (256 rows
    // are two blocks of 132 and 124, not 126, 126 and 4).
    let per_block = rows.div_ceil(rows.div_ceil(MC)) + MR - 1;
    let npad = n.next_multiple_of(NR);
    crate::prepack::with_buffer(a.kc * npad, |panels| {
        for p0 in (0..k).step_by(a.kc) {
            let kc = a.kc.min(k - p0);
            let last = p0 + kc == k;
            // SAFETY: depth p0 .. p0 + kc of `b`; `panels` holds kc * npad floats.
            unsafe { b.pack(p0, kc, n, &mut panels[..kc * npad]) };
            // SAFETY: this group's depth block inside the packing.
            let block = unsafe { a.data.as_ptr().add(g * m * k + p0 * m) };
            let mut start = 0;
            while start < tiles.len() {
                let (mut end, mut block_rows) = (start, 0);
                while end < tiles.len() && (end == start || block_rows + tiles[end].1 <= per_block)
                {
                    block_rows += tiles[end].1;
                    end += 1;
                }
                for jr in (0..n).step_by(NR) {
                    let wp = panels[jr * kc..].as_ptr();
                    for &(first, r) in &tiles[start..end] {
                        let finish = finish.filter(|_| last).map(|f| f.at(first, jr));
                        if jr + NR < n {
                            // SAFETY: addresses only (a prefetch does not fault).
                            unsafe { prefetch_next(dst, ld, (first, r), jr + NR, finish.as_ref()) };
                        }
                        // SAFETY: the tile's panel inside the block, its rows inside `dst`
                        // and its finish's.
                        unsafe {
                            tile(
                                kc,
                                block.add(first * kc),
                                wp,
                                dst.offset(first as isize * ld).add(jr),
                                ld,
                                p0 > 0,
                                (r, NR.min(n - jr)),
                                finish.as_ref(),
                            )
                        };
                    }
                }
                start = end;
            }
        }
    })
}

/// Brings the rows of the tile at `(first, r)` and column `col` (the next panel's) of `dst`,
/// and of `finish`'s residual, into L2 while this panel's tiles run: a tile's output rows
/// are a whole map apart, a pattern the hardware prefetchers miss, and a 64-deep tile runs
/// too briefly for its own prefetch to cover memory's latency. `conv_bench` (static weights,
/// two threads, AMD EPYC Zen 3, alternating in one process) ran ResNet-50's 1x1 64-256 at
/// 56 x 56 1.19x (plain) and 1.31x (with residual) faster with it, most classes 2-9%.
#[cfg(target_arch = "x86_64")]
unsafe fn prefetch_next(
    dst: *mut f32,
    ld: isize,
    (first, r): (usize, usize),
    col: usize,
    finish: Option<&Finish>,
) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
    for i in first..first + r {
        let o = dst.wrapping_offset(i as isize * ld).wrapping_add(col) as *const i8;
        // SAFETY: a prefetch of any address is harmless.
        unsafe {
            _mm_prefetch::<_MM_HINT_T1>(o);
            _mm_prefetch::<_MM_HINT_T1>(o.wrapping_add(4 * NR - 4));
        }
        if let Some(f) = finish.filter(|f| !f.res.is_null()) {
            let o = f
                .res
                .wrapping_offset((i - first) as isize * f.res_ld)
                .wrapping_add(NR) as *const i8;
            // SAFETY: as above.
            unsafe {
                _mm_prefetch::<_MM_HINT_T1>(o);
                _mm_prefetch::<_MM_HINT_T1>(o.wrapping_add(4 * NR - 4));
            }
        }
    }
}

/// A `k x n` right operand as [`gemm`] reads it: packed one block of depth at a time into
/// panels of [`NR`] columns side by side, each `kc x NR` (the columns past `n` zero).
pub(crate) trait Columns {
    /// Packs depth `p0..p0 + kc` into `out` (`kc * n.next_multiple_of(NR)` floats).
    ///
    /// # Safety
    /// The operand's depth `p0..p0 + kc` and columns `..n` are readable.
    unsafe fn pack(&self, p0: usize, kc: usize, n: usize, out: &mut [f32]);
}

/// A matrix in memory: each panel row is a copy of (or a gather from) a row of it.
impl Columns for View<f32> {
    unsafe fn pack(&self, p0: usize, kc: usize, n: usize, out: &mut [f32]) {
        static ROWS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if self.cs == 1 && kc > 64 && crate::switches::on("THUNDER_CPU_SIMD_PACK_ROWS", &ROWS) {
            // Row by row, each row's columns front to back, the rows `PACK_AHEAD` on fetched
            // meanwhile. Panel by panel, a 1x1 convolution's input (its channel rows a whole
            // map apart) was read 64 bytes a row down `kc` rows, a pattern the prefetchers
            // did not follow: the copy was 38% of the 1x1 256-64 at 56 x 56's samples, and
            // row by row it ran 8-28% faster (`conv_bench`, static weights, one and two
            // threads, alternating in one process, AMD EPYC Zen 3; 256-128 7-18%). With a
            // depth of 64 (the 1x1 64-64) panel by panel stayed 3-13% faster.
            for p in 0..kc {
                if p + PACK_AHEAD < kc {
                    let ahead = self
                        .ptr
                        .wrapping_offset((p0 + p + PACK_AHEAD) as isize * self.rs);
                    prefetch_run(ahead, n);
                }
                // SAFETY: row p0 + p, columns ..n (contiguous), the caller's.
                let row = unsafe {
                    std::slice::from_raw_parts(self.ptr.offset((p0 + p) as isize * self.rs), n)
                };
                scatter_row(row, p, kc, out);
            }
            return;
        }
        for (c, panel) in out.chunks_exact_mut(NR * kc).enumerate() {
            let cols = NR.min(n - c * NR);
            for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
                let src = self
                    .ptr
                    .wrapping_offset((p0 + p) as isize * self.rs + (c * NR) as isize * self.cs);
                if self.cs == 1 && cols == NR {
                    // SAFETY: elements (p0 + p, c * NR ..+ NR), contiguous. As an array:
                    // see `scatter_row`.
                    if let Some(row) = row.first_chunk_mut::<NR>() {
                        *row = unsafe { std::ptr::read_unaligned(src as *const [f32; NR]) };
                    }
                    continue;
                } else if self.cs == 1 {
                    // SAFETY: elements (p0 + p, c * NR ..+ cols), contiguous.
                    row[..cols].copy_from_slice(unsafe { std::slice::from_raw_parts(src, cols) });
                } else {
                    for (j, x) in row[..cols].iter_mut().enumerate() {
                        // SAFETY: element (p0 + p, c * NR + j).
                        *x = unsafe { *src.offset(j as isize * self.cs) };
                    }
                }
                row[cols..].fill(0.0);
            }
        }
    }
}

/// Rows ahead of the one being packed that [`Columns::pack`] fetches into cache.
const PACK_AHEAD: usize = 4;

/// Fetches the `n` floats from `src` towards L1, a prefetch per cache line.
fn prefetch_run(src: *const f32, n: usize) {
    #[cfg(target_arch = "x86_64")]
    for j in (0..n).step_by(16) {
        // SAFETY: a prefetch of any address is harmless.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                src.wrapping_add(j) as *const i8,
            )
        };
    }
    #[cfg(target_arch = "x86_64")]
    if n > 0 {
        // The last line, when the run does not start on a line.
        // SAFETY: as above.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                src.wrapping_add(n - 1) as *const i8,
            )
        };
    }
}

/// Copies row `q` of a block's rows, `row` (`n` floats), into the panels of a packed block
/// (`out`, `kc` rows; see [`Columns`]).
pub(crate) fn scatter_row(row: &[f32], q: usize, kc: usize, out: &mut [f32]) {
    let mut chunks = row.chunks_exact(NR);
    for (c, chunk) in (&mut chunks).enumerate() {
        // As fixed-size arrays: a slice copy of unknown length was a call to `memmove` per
        // 16 floats, 15% of a 3x3 convolution's time at 56 x 56 (`perf`, AMD EPYC Zen 3).
        if let (Some(dst), Some(src)) = (
            out[(c * kc + q) * NR..].first_chunk_mut::<NR>(),
            chunk.first_chunk::<NR>(),
        ) {
            *dst = *src;
        }
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let c = row.len() / NR;
        let dst = &mut out[(c * kc + q) * NR..][..NR];
        dst[..tail.len()].copy_from_slice(tail);
        dst[tail.len()..].fill(0.0);
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::prepack::row_tiles;

    /// How `check` finishes the products: bias, residual (with a NaN in it), ReLU.
    const FINISHES: [(bool, bool, bool); 4] = [
        (false, false, false),
        (true, false, false),
        (true, true, true),
        (false, true, true),
    ];

    /// `groups` stacked `m x k` left matrices (row-major or transposed) against a `k x n` right
    /// one, every run of whole tiles, each finish of [`FINISHES`]: each output against an f64
    /// sum.
    fn check(groups: usize, m: usize, n: usize, k: usize, kc: usize, transposed: bool) {
        for finish in FINISHES {
            check_finished(groups, (m, n, k), kc, transposed, finish);
        }
    }

    fn check_finished(
        groups: usize,
        (m, n, k): (usize, usize, usize),
        kc: usize,
        transposed: bool,
        (with_bias, with_res, relu): (bool, bool, bool),
    ) {
        if !crate::prepack::enabled() {
            eprintln!("packed_left needs AVX2 without AVX-512; skipped");
            return;
        }
        let val = |i: usize| ((i * 7919 % 1009) as f32 - 504.0) / 256.0;
        let rows = groups * m;
        let a: Vec<f32> = (0..rows * k).map(val).collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i + 17)).collect();
        let (rs, cs) = if transposed {
            (1, rows as isize)
        } else {
            (k as isize, 1)
        };
        let av = View {
            ptr: a.as_ptr(),
            rs,
            cs,
        };
        // SAFETY: `av` addresses rows x k elements of `a`.
        let packed = unsafe { PackedA::pack(av, (groups, m, k), kc) };
        let tiles: Vec<(usize, usize)> = row_tiles(m).collect();
        let ld = n + 3;
        // Bias every other element (step 2); the residual's rows `n + 5` apart, large enough
        // to turn some sums negative, one element NaN.
        let bias: Vec<f32> = (0..2 * groups * m).map(|i| val(i + 5) * 8.0).collect();
        let res_ld = n + 5;
        let mut res: Vec<f32> = (0..groups * m * res_ld)
            .map(|i| val(i + 3) * 16.0)
            .collect();
        if let Some(x) = res.get_mut(res_ld + 1) {
            *x = f32::NAN;
        }
        for g in 0..groups {
            let finish = Finish {
                bias: if with_bias {
                    bias[2 * g * m..].as_ptr()
                } else {
                    std::ptr::null()
                },
                bias_step: 2,
                res: if with_res {
                    res[g * m * res_ld..].as_ptr()
                } else {
                    std::ptr::null()
                },
                res_ld: res_ld as isize,
                relu,
            };
            let finish = (with_bias || with_res || relu).then_some(finish);
            // Every split of the tiles into two runs (as the threads take them).
            for cut in 0..=tiles.len() {
                let mut dst = vec![f32::NAN; m * ld];
                for run in [&tiles[..cut], &tiles[cut..]] {
                    // SAFETY: `b` is k x n; `dst` holds m rows of `ld`.
                    unsafe {
                        gemm(
                            &packed,
                            g,
                            run,
                            n,
                            &View {
                                ptr: b.as_ptr(),
                                rs: n as isize,
                                cs: 1,
                            },
                            dst.as_mut_ptr(),
                            ld as isize,
                            finish.as_ref(),
                        )
                    };
                }
                for i in 0..m {
                    for j in 0..ld {
                        let got = dst[i * ld + j];
                        if j >= n {
                            assert!(got.is_nan(), "({i}, {j}) past the row was written");
                            continue;
                        }
                        let (mut want, mut size) = (0f64, 0f64);
                        for p in 0..k {
                            let ai = (g * m + i) as isize * rs + p as isize * cs;
                            let term = a[ai as usize] as f64 * b[p * n + j] as f64;
                            want += term;
                            size += term.abs();
                        }
                        if with_bias {
                            want += bias[2 * (g * m + i)] as f64;
                            size += bias[2 * (g * m + i)].abs() as f64;
                        }
                        if with_res {
                            let r = res[(g * m + i) * res_ld + j] as f64;
                            want += r;
                            size += r.abs();
                        }
                        if relu && want <= 0.0 {
                            want = 0.0;
                        }
                        let what = format!(
                            "g{g} {m}x{n}x{k} kc {kc} t {transposed} cut {cut} \
                             finish {with_bias} {with_res} {relu}: ({i}, {j}) {got} vs {want}"
                        );
                        if want.is_nan() {
                            assert!(got.is_nan(), "{what}");
                            continue;
                        }
                        let tol = 4.0 * (k as f64 + 3.0).sqrt() * f32::EPSILON as f64 * size;
                        assert!((got as f64 - want).abs() <= tol, "{what}");
                        assert!(
                            !relu || got.is_sign_positive(),
                            "{what}: negative past ReLU"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn products_match_an_f64_reference() {
        for &(groups, m, n, k) in &[
            (1, 1, 1, 1),
            (1, 6, 16, 1),
            (1, 7, 17, 3),
            (2, 13, 33, 300),
            (1, 64, 49, 576),
            (1, 200, 40, 513),
            (3, 10, 20, 20),
        ] {
            for transposed in [false, true] {
                // Depth blocks of KC, of whole 3x3 channels (252), and short ones.
                for kc in [KC, depth_block(9), 7] {
                    check(groups, m, n, k, kc, transposed);
                }
            }
        }
    }

    #[test]
    fn an_empty_depth_zeroes_the_output() {
        check(1, 5, 20, 0, KC, false);
        check(2, 5, 0, 4, KC, false);
    }
}
