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
use crate::prepack::{pack_a, KC, NR};
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
    let read = || std::env::var("THUNDER_CPU_SIMD_CONV_PACKED").as_deref() != Ok("0");
    // Read on every call under test, so that `conv_bench` can alternate it.
    if cfg!(test) {
        return crate::prepack::enabled() && read();
    }
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    crate::prepack::enabled() && *ON.get_or_init(read)
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
/// `p < k`. Each block of depth packs `b`'s rows into panels of [`NR`] columns ([`Columns`]; a
/// panel in L1 while the packed row tiles pass, a block of at most [`MC`] rows of them in L2).
///
/// # Safety
/// The CPU has AVX2 and FMA (`prepack::enabled`); `b` has `k x n` readable elements;
/// `dst` addresses the tiles' rows (stride `ld`) of `n` writable elements that no other thread
/// touches.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn gemm(
    a: &PackedA,
    g: usize,
    tiles: &[(usize, usize)],
    n: usize,
    b: &impl Columns,
    dst: *mut f32,
    ld: isize,
) {
    let (m, k) = (a.m, a.k);
    let rows: usize = tiles.iter().map(|t| t.1).sum();
    if rows == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for &(first, r) in tiles {
            for i in first..first + r {
                // SAFETY: row i of the tiles, n elements (the caller's).
                unsafe { std::slice::from_raw_parts_mut(dst.offset(i as isize * ld), n).fill(0.0) };
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
                        // SAFETY: the tile's panel inside the block, its rows inside `dst`.
                        unsafe {
                            tile(
                                kc,
                                block.add(first * kc),
                                wp,
                                dst.offset(first as isize * ld).add(jr),
                                ld,
                                p0 > 0,
                                (r, NR.min(n - jr)),
                            )
                        };
                    }
                }
                start = end;
            }
        }
    })
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
        for (c, panel) in out.chunks_exact_mut(NR * kc).enumerate() {
            let cols = NR.min(n - c * NR);
            for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
                let src = self
                    .ptr
                    .wrapping_offset((p0 + p) as isize * self.rs + (c * NR) as isize * self.cs);
                if self.cs == 1 {
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

/// Copies row `q` of a block's rows, `row` (`n` floats), into the panels of a packed block
/// (`out`, `kc` rows; see [`Columns`]).
pub(crate) fn scatter_row(row: &[f32], q: usize, kc: usize, out: &mut [f32]) {
    for (c, chunk) in row.chunks(NR).enumerate() {
        let dst = &mut out[(c * kc + q) * NR..][..NR];
        dst[..chunk.len()].copy_from_slice(chunk);
        dst[chunk.len()..].fill(0.0);
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::prepack::row_tiles;

    /// `groups` stacked `m x k` left matrices (row-major or transposed) against a `k x n` right
    /// one, every run of whole tiles: each output against an f64 sum.
    fn check(groups: usize, m: usize, n: usize, k: usize, kc: usize, transposed: bool) {
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
        for g in 0..groups {
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
                        let tol = 4.0 * (k as f64 + 1.0).sqrt() * f32::EPSILON as f64 * size;
                        assert!(
                            (got as f64 - want).abs() <= tol,
                            "g{g} {m}x{n}x{k} kc {kc} t {transposed} cut {cut}: ({i}, {j}) {got} vs {want}"
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
