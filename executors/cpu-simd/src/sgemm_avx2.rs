//! Single-threaded f32 GEMM for AVX2 CPUs without AVX-512, in the BLIS layout: both operands
//! packed into panels (the left one 6 rows at a time, the right one 16 columns at a time),
//! cache blocks of [`KC`] depth by [`MC`] rows by [`NC`] columns, and a 6 x 16 register tile
//! (12 accumulators, two loads of the right panel and six broadcasts of the left one per depth
//! step: BLIS's Haswell kernel shape).
//!
//! Why not the `gemm` crate here, which runs everywhere else: on an AMD EPYC Zen 3 (AVX2, two
//! cores, 98 GFLOP/s a core measured with a register-only FMA loop) it ran sgemm 2048 at 53
//! GFLOP/s on one thread and 120 on two, where PyTorch (MKL) ran 88 and 142-154. On AVX-512
//! CPUs the crate's `x86-v4` kernels stay (they ran at PyTorch's speed or better there).
//!
//! Sums over the depth run in order, one fused multiply-add per step, blocks of [`KC`] added
//! into the output: results differ from the crate's by rounding only.

use crate::gemm_run::View;
use std::arch::x86_64::*;

/// Rows of the register tile (the left panel's width).
const MR: usize = 6;
/// Columns of the register tile: two vectors.
const NR: usize = 16;
/// Depth per block: a right panel (`KC x NR`, 16 KB) stays in L1 while the tiles of a row
/// block pass over it.
const KC: usize = 256;
/// Rows per block: the packed left block (`MC x KC`, 120 KB) stays in L2.
const MC: usize = 120;
/// Columns per block: the packed right block (`KC x NC`, 2 MB) stays in L3.
const NC: usize = 2048;

/// Whether f32 products take this path: the CPU has AVX2 and FMA but not AVX-512
/// (`THUNDER_CPU_SIMD_SGEMM=0` leaves them to the crate, for comparing the two). Callers
/// also check [`takes`].
pub(crate) fn enabled() -> bool {
    let read = || {
        crate::exec::isa_level() == 1
            && std::env::var("THUNDER_CPU_SIMD_SGEMM").as_deref() != Ok("0")
    };
    // Read on every call under test, so that benchmarks can alternate it.
    if cfg!(test) {
        return read();
    }
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(read)
}

/// Whether an `m x k @ k x n` product runs here rather than on the crate: large ones only.
/// One thread, `sgemm_bench` below, alternating (AMD EPYC Zen 3): 2048 x 2048 x 2048 at 75-78
/// GFLOP/s against the crate's 67-73; 256 x 768 x 256 and 256 x 3136 x 64 within the noise
/// of each other (63-93 both). Slower here: few rows, where packing the whole right operand
/// serves few tiles (64 x 3136 x 256: 50 against 57), and few columns, where this tile's lanes
/// run along them and idle on the ragged last panel (512 x 196 x 1024: 62-67 against 82-87;
/// 2048 x 49 x 512: 38-40 against 63).
pub(crate) fn takes(m: usize, n: usize, k: usize) -> bool {
    m >= 128 && n >= 512 && k >= 64
}

/// `dst[i * ld + j] = (dst[i * ld + j] if accumulate else 0) + Σ_p a(i, p) · b(p, j)` for
/// `i < m`, `j < n`, `p < k`.
///
/// # Safety
/// [`enabled`] is true (the CPU has AVX2 and FMA); `a` addresses `m x k` and `b` `k x n`
/// readable elements, `dst` `m` rows of `n` writable ones that no other thread touches.
pub(crate) unsafe fn gemm(
    (m, n, k): (usize, usize, usize),
    a: View<f32>,
    b: View<f32>,
    dst: *mut f32,
    ld: isize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                // SAFETY: row `i` of `dst` holds `n` writable elements.
                unsafe { std::ptr::write_bytes(dst.offset(i as isize * ld), 0, n) };
            }
        }
        return;
    }
    with_buffers(|apack, bpack| {
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                let add = accumulate || pc > 0;
                // SAFETY (this block): the blocks read lie inside `a` and `b`, the tiles
                // written inside `dst`; the buffers hold a packed block each.
                unsafe {
                    pack_b(b, (pc, jc), (kc, nc), bpack);
                    for ic in (0..m).step_by(MC) {
                        let mc = MC.min(m - ic);
                        pack_a(a, (ic, pc), (mc, kc), apack);
                        for jr in (0..nc).step_by(NR) {
                            let bp = bpack.as_ptr().add(jr * kc);
                            for ir in (0..mc).step_by(MR) {
                                let ap = apack.as_ptr().add(ir * kc);
                                let out = dst.offset((ic + ir) as isize * ld).add(jc + jr);
                                let (rows, cols) = (MR.min(mc - ir), NR.min(nc - jr));
                                tile(kc, ap, bp, out, ld, add, (rows, cols));
                            }
                        }
                    }
                }
            }
        }
    })
}

/// Runs `f` on this thread's kept packing buffers (grown to a full block each; a fresh pair
/// while they are in use).
fn with_buffers<R>(f: impl FnOnce(&mut [f32], &mut [f32]) -> R) -> R {
    thread_local! {
        static BUFS: std::cell::RefCell<(Vec<f32>, Vec<f32>)> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    let (a_len, b_len) = (MC.next_multiple_of(MR) * KC, NC.next_multiple_of(NR) * KC);
    BUFS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            let (a, b) = &mut *kept;
            a.resize(a_len.max(a.len()), 0.0);
            b.resize(b_len.max(b.len()), 0.0);
            f(a, b)
        }
        Err(_) => f(&mut vec![0.0; a_len], &mut vec![0.0; b_len]),
    })
}

/// Packs `a`'s rows `i0..i0 + mc`, depth `p0..p0 + kc` into panels of [`MR`] rows: panel `r`
/// holds, for each depth step, its rows' elements side by side (rows past `mc` zero).
///
/// # Safety
/// The block lies inside `a`; `out` holds `mc.next_multiple_of(MR) * kc` floats.
unsafe fn pack_a(
    a: View<f32>,
    (i0, p0): (usize, usize),
    (mc, kc): (usize, usize),
    out: &mut [f32],
) {
    for (r, panel) in out[..mc.next_multiple_of(MR) * kc]
        .chunks_exact_mut(MR * kc)
        .enumerate()
    {
        for row in 0..MR {
            let i = r * MR + row;
            if i >= mc {
                for p in 0..kc {
                    panel[p * MR + row] = 0.0;
                }
                continue;
            }
            let src = a
                .ptr
                .wrapping_offset((i0 + i) as isize * a.rs + p0 as isize * a.cs);
            for p in 0..kc {
                // SAFETY: element (i0 + i, p0 + p) of `a`.
                panel[p * MR + row] = unsafe { *src.offset(p as isize * a.cs) };
            }
        }
    }
}

/// Packs `b`'s depth `p0..p0 + kc`, columns `j0..j0 + nc` into panels of [`NR`] columns:
/// panel `c` holds, for each depth step, its columns' elements side by side (columns past
/// `nc` zero).
///
/// # Safety
/// The block lies inside `b`; `out` holds `nc.next_multiple_of(NR) * kc` floats.
unsafe fn pack_b(
    b: View<f32>,
    (p0, j0): (usize, usize),
    (kc, nc): (usize, usize),
    out: &mut [f32],
) {
    for (c, panel) in out[..nc.next_multiple_of(NR) * kc]
        .chunks_exact_mut(NR * kc)
        .enumerate()
    {
        let cols = NR.min(nc - c * NR);
        for p in 0..kc {
            let src = b
                .ptr
                .wrapping_offset((p0 + p) as isize * b.rs + (j0 + c * NR) as isize * b.cs);
            let row = &mut panel[p * NR..p * NR + NR];
            if b.cs == 1 {
                // SAFETY: elements (p0 + p, j0 + c * NR ..+ cols) of `b`, contiguous.
                row[..cols].copy_from_slice(unsafe { std::slice::from_raw_parts(src, cols) });
            } else {
                for (j, x) in row[..cols].iter_mut().enumerate() {
                    // SAFETY: element (p0 + p, j0 + c * NR + j) of `b`.
                    *x = unsafe { *src.offset(j as isize * b.cs) };
                }
            }
            row[cols..].fill(0.0);
        }
    }
}

/// One `rows x cols` tile (at most [`MR`] x [`NR`]) of the output over `kc` depth steps of
/// packed panels, stored or (`add`) added to `out`.
///
/// # Safety
/// The CPU has AVX2 and FMA; `ap` and `bp` hold `kc` steps of packed panels; `out` addresses
/// `rows` rows (stride `ld`) of `cols` writable floats.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile(
    kc: usize,
    ap: *const f32,
    bp: *const f32,
    out: *mut f32,
    ld: isize,
    add: bool,
    (rows, cols): (usize, usize),
) {
    // SAFETY (whole fn): reads inside the panels, writes inside the tile (a whole one in
    // place, a ragged one through `edge`).
    unsafe {
        // The output rows into cache while the depth loop runs (each tile's rows are cold:
        // a 2048 x 2048 output is 16 MB).
        for r in 0..rows {
            let o = out.offset(r as isize * ld) as *const i8;
            _mm_prefetch::<_MM_HINT_T0>(o);
            _mm_prefetch::<_MM_HINT_T0>(o.wrapping_add(4 * cols - 4));
        }
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        for p in 0..kc {
            let b0 = _mm256_loadu_ps(bp.add(p * NR));
            let b1 = _mm256_loadu_ps(bp.add(p * NR + 8));
            let arow = ap.add(p * MR);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*arow.add(r));
                acc[0] = _mm256_fmadd_ps(av, b0, acc[0]);
                acc[1] = _mm256_fmadd_ps(av, b1, acc[1]);
            }
        }
        if rows == MR && cols == NR {
            for (r, acc) in acc.iter().enumerate() {
                let o = out.offset(r as isize * ld);
                for (c, &v) in acc.iter().enumerate() {
                    let p = o.add(8 * c);
                    let v = if add {
                        _mm256_add_ps(_mm256_loadu_ps(p), v)
                    } else {
                        v
                    };
                    _mm256_storeu_ps(p, v);
                }
            }
            return;
        }
        let mut edge = [0f32; MR * NR];
        for (r, acc) in acc.iter().enumerate() {
            for (c, &v) in acc.iter().enumerate() {
                _mm256_storeu_ps(edge.as_mut_ptr().add(r * NR + 8 * c), v);
            }
        }
        for r in 0..rows {
            let o = out.offset(r as isize * ld);
            for c in 0..cols {
                let v = edge[r * NR + c];
                *o.add(c) = if add { *o.add(c) + v } else { v };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::gemm;
    use crate::gemm_run::View;

    /// `a` is `m x k`, `b` `k x n`, stored row-major or (`t`) transposed.
    fn check(m: usize, n: usize, k: usize, ta: bool, tb: bool, accumulate: bool) {
        if !super::enabled() {
            return;
        }
        let val = |i: usize| ((i * 7919 % 1009) as f32 - 504.0) / 256.0;
        let a: Vec<f32> = (0..m * k).map(val).collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i + 17)).collect();
        let (a_rs, a_cs) = if ta { (1, m as isize) } else { (k as isize, 1) };
        let (b_rs, b_cs) = if tb { (1, k as isize) } else { (n as isize, 1) };
        let ld = n + 3;
        let init: Vec<f32> = (0..m * ld).map(|i| val(i + 5)).collect();
        let mut dst = init.clone();
        // SAFETY: the views address the vectors above; `dst` holds m rows of `ld`.
        unsafe {
            gemm(
                (m, n, k),
                View {
                    ptr: a.as_ptr(),
                    rs: a_rs,
                    cs: a_cs,
                },
                View {
                    ptr: b.as_ptr(),
                    rs: b_rs,
                    cs: b_cs,
                },
                dst.as_mut_ptr(),
                ld as isize,
                accumulate,
            )
        };
        for i in 0..m {
            for j in 0..ld {
                let got = dst[i * ld + j];
                if j >= n {
                    assert_eq!(got, init[i * ld + j], "({i}, {j}) past the row was written");
                    continue;
                }
                let mut want = if accumulate {
                    init[i * ld + j] as f64
                } else {
                    0.0
                };
                let mut size = want.abs();
                for p in 0..k {
                    let term = a[(i as isize * a_rs + p as isize * a_cs) as usize] as f64
                        * b[(p as isize * b_rs + j as isize * b_cs) as usize] as f64;
                    want += term;
                    size += term.abs();
                }
                // f32 rounding of a sum in order: about sqrt(k) steps of half an ulp of its
                // running size.
                let tol = 4.0 * (k as f64 + 1.0).sqrt() * f32::EPSILON as f64 * size;
                assert!(
                    (got as f64 - want).abs() <= tol,
                    "{m}x{n}x{k} ta {ta} tb {tb} acc {accumulate}: ({i}, {j}) {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn products_match_an_f64_reference() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (6, 16, 1),
            (7, 17, 3),
            (5, 15, 300),
            (130, 40, 513),
            (12, 2100, 20),
            (64, 64, 64),
        ] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                for accumulate in [false, true] {
                    check(m, n, k, ta, tb, accumulate);
                }
            }
        }
    }

    #[test]
    fn an_empty_depth_zeroes_or_keeps_the_output() {
        check(3, 20, 0, false, false, false);
        check(3, 20, 0, false, false, true);
        check(0, 20, 5, false, false, false);
    }
}

/// Against the `gemm` crate, in one process, rounds alternating; ignored by default:
/// `RAYON_NUM_THREADS=1 cargo test --release -p thunder-cpu-simd sgemm_bench -- --ignored
/// --nocapture` (one thread: the product is a single-threaded call either way).
#[cfg(test)]
mod bench {
    use super::gemm;
    use crate::gemm_run::View;

    fn time(f: &mut dyn FnMut()) -> f64 {
        let t = std::time::Instant::now();
        f();
        t.elapsed().as_secs_f64()
    }

    #[test]
    #[ignore = "a benchmark: run it by name with --ignored --nocapture"]
    fn sgemm_bench() {
        if !super::enabled() {
            eprintln!("sgemm_avx2 is off on this CPU");
            return;
        }
        for &(m, n, k, tb) in &[
            (2048, 2048, 2048, false),
            (256, 768, 256, false),
            (256, 256, 1024, true),
            (256, 3136, 64, false),
            (64, 3136, 256, false),
            (512, 196, 1024, false),
            (2048, 49, 512, false),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.1).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect();
            let mut c = vec![0f32; m * n];
            let (b_rs, b_cs) = if tb { (1, k as isize) } else { (n as isize, 1) };
            let reps = (4e8 / (2 * m * n * k) as f64).ceil() as usize;
            let ours = |c: &mut Vec<f32>| {
                for _ in 0..reps {
                    // SAFETY: the vectors hold the operands' elements.
                    unsafe {
                        gemm(
                            (m, n, k),
                            View {
                                ptr: a.as_ptr(),
                                rs: k as isize,
                                cs: 1,
                            },
                            View {
                                ptr: b.as_ptr(),
                                rs: b_rs,
                                cs: b_cs,
                            },
                            c.as_mut_ptr(),
                            n as isize,
                            false,
                        )
                    }
                }
            };
            let theirs = |c: &mut Vec<f32>| {
                for _ in 0..reps {
                    // SAFETY: as above.
                    unsafe {
                        gemm::gemm(
                            m,
                            n,
                            k,
                            c.as_mut_ptr(),
                            1,
                            n as isize,
                            false,
                            a.as_ptr(),
                            1,
                            k as isize,
                            b.as_ptr(),
                            b_cs,
                            b_rs,
                            0.0,
                            1.0,
                            false,
                            false,
                            false,
                            gemm::Parallelism::None,
                        )
                    }
                }
            };
            let (mut x, mut y) = (Vec::new(), Vec::new());
            for _ in 0..7 {
                x.push(time(&mut || ours(&mut c)));
                y.push(time(&mut || theirs(&mut c)));
            }
            x.sort_by(f64::total_cmp);
            y.sort_by(f64::total_cmp);
            let gf = |t: f64| (2 * m * n * k * reps) as f64 / t / 1e9;
            eprintln!(
                "{m}x{n}x{k}{}: ours {:6.1} GFLOP/s (median {:6.1}), crate {:6.1} (median {:6.1})",
                if tb { " b transposed" } else { "" },
                gf(x[0]),
                gf(x[3]),
                gf(y[0]),
                gf(y[3])
            );
        }
    }
}
