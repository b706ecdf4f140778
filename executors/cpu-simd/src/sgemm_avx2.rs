//! f32 products on AVX2 CPUs without AVX-512 run on the `matrixmultiply` crate's sgemm
//! (BLIS layout: both operands packed, a register tile of 8 x 8 or 6 x 16 per its FMA
//! kernel), single-threaded per call; threads stay `gemm_run`'s panels.
//!
//! Why not the `gemm` crate here, which runs everywhere else: on an AMD EPYC Zen 3 (AVX2, two
//! cores, 98 GFLOP/s a core measured with a register-only FMA loop) it ran sgemm 2048 at 53-75
//! GFLOP/s on one thread, `matrixmultiply` 67-83, and PyTorch (MKL) 88. A packed 6 x 16 kernel
//! of our own (this file until the twentieth session) measured the same as `matrixmultiply`
//! in the same process (`sgemm_bench` below), so the well-kept crate replaced it. On AVX-512
//! CPUs the `gemm` crate's `x86-v4` kernels stay (they ran at PyTorch's speed or better there).
//! `matrixmultiply` has an AVX-512 kernel of its own (16 x 16, one broadcast per FMA), but on
//! the device host's Xeon (`scripts/gpu/sgemm_avx512_ab.sh`, one pinned core) it ran sgemm
//! 2048 at 62 GFLOP/s against the `gemm` crate's 92 (medians), and every GPT-2 block product
//! 20-35% slower; the GPT-2 block itself, alternating, 10.8-14.4 ms against 11.1-12.6.

use crate::gemm_run::View;

/// `THUNDER_CPU_SIMD_SGEMM`, for A/B runs: `0` leaves every product to the `gemm` crate,
/// `avx512` sends them here on AVX-512 CPUs too (where `matrixmultiply` runs its own AVX-512
/// kernel), `large` keeps the size rule before the twenty-second session; anything else is
/// the default.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    Avx512,
    Large,
    Default,
}

fn mode() -> Mode {
    let read = || match std::env::var("THUNDER_CPU_SIMD_SGEMM").as_deref() {
        Ok("0") => Mode::Off,
        Ok("avx512") => Mode::Avx512,
        Ok("large") => Mode::Large,
        _ => Mode::Default,
    };
    // Read on every call under test, so that benchmarks can alternate it.
    if cfg!(test) {
        return read();
    }
    static MODE: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();
    *MODE.get_or_init(read)
}

/// Whether f32 products take this path: the CPU has AVX2 and FMA but not AVX-512 (see
/// [`Mode`] for the switches). Callers also check [`takes`].
pub(crate) fn enabled() -> bool {
    let level = crate::exec::isa_level();
    match mode() {
        Mode::Off => false,
        Mode::Avx512 => level >= 1,
        Mode::Large | Mode::Default => level == 1,
    }
}

/// Whether an `m x k @ k x n` product runs here rather than on the `gemm` crate: every one
/// whose sides are all at least 64 (`THUNDER_CPU_SIMD_SGEMM=large`: only those of at least
/// 256 x 1024 x 1024, the rule until the twenty-second session, for A/B runs).
///
/// One thread, in a loop on hot operands (`sgemm_bench` below, alternating in one process,
/// AMD EPYC Zen 3), the two crates trade places from run to run on products below 1024: the
/// crate's medians were 5-15% ahead in one run and as far behind in the next. In `thunder
/// bench`'s GPT-2 block, where every product is cut into two panels on a worker and reads
/// operands the stages before it wrote, `matrixmultiply` for all twelve products won 9 of 10
/// alternating rounds, by about 10% of the block's median (e.g. 13.2 against 16.1 ms,
/// 14.2 against 17.4). ONNX GPT-2 b1 and MiniLM b8 (`onnx_bench`, 3 rounds each) moved
/// within their noise. Products with a side below 64 (the MLP step's 10-wide layer: 24 against
/// 37 GFLOP/s at 256 x 10 x 128) stay on the crate. Convolutions' products (`conv_run.rs`,
/// the path that is neither implicit nor channel-major) take the same rule: ResNet-50 b1
/// (`onnx_bench`, 3 alternating rounds against `THUNDER_CPU_SIMD_SGEMM=0`) 75.6-77.0 ms
/// against 79.3-100.1; b8 510-549 against 512-817.
pub(crate) fn takes(m: usize, n: usize, k: usize) -> bool {
    if mode() == Mode::Large {
        return m >= 256 && n >= 1024 && k >= 1024;
    }
    m.min(n).min(k) >= 64
}

/// `dst[i * ld + j] = (dst[i * ld + j] if accumulate else 0) + Σ_p a(i, p) · b(p, j)` for
/// `i < m`, `j < n`, `p < k`.
///
/// # Safety
/// `a` addresses `m x k` and `b` `k x n` readable elements, `dst` `m` rows of `n` writable
/// ones that no other thread touches.
pub(crate) unsafe fn gemm(
    (m, n, k): (usize, usize, usize),
    a: View<f32>,
    b: View<f32>,
    dst: *mut f32,
    ld: isize,
    accumulate: bool,
) {
    // SAFETY: forwarded from the caller. With beta = 0 the crate writes `dst` without reading
    // it (and zeroes it when k = 0).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.ptr,
            a.rs,
            a.cs,
            b.ptr,
            b.rs,
            b.cs,
            if accumulate { 1.0 } else { 0.0 },
            dst,
            ld,
            1,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::gemm;
    use crate::gemm_run::View;

    /// `a` is `m x k`, `b` `k x n`, stored row-major or (`t`) transposed.
    fn check(m: usize, n: usize, k: usize, ta: bool, tb: bool, accumulate: bool) {
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

/// `matrixmultiply` against the `gemm` crate, in one process, rounds alternating; ignored by default:
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
        // (m, n, k, a transposed, b transposed): square and convolution-like shapes, then the
        // GPT-2 block's products (`thunder bench`'s `gpt2_block`) whole and halved, as
        // `gemm_run` hands them to each of two threads.
        for &(m, n, k, ta, tb) in &[
            (2048, 2048, 2048, false, false),
            (1024, 1024, 1024, false, false),
            (512, 512, 512, false, false),
            (512, 2048, 512, false, true),
            (256, 768, 256, false, false),
            (256, 256, 1024, false, true),
            (256, 3136, 64, false, false),
            (64, 3136, 256, false, false),
            (512, 196, 1024, false, false),
            (2048, 49, 512, false, false),
            (256, 768, 256, false, true),
            (128, 768, 256, false, true),
            (256, 1024, 256, false, true),
            (128, 1024, 256, false, true),
            (256, 256, 1024, false, false),
            (128, 256, 1024, false, false),
            (1024, 256, 256, true, false),
            (1024, 128, 256, true, false),
            (768, 256, 256, true, false),
            (768, 128, 256, true, false),
            (256, 256, 256, false, false),
            (128, 1536, 768, false, false),
            (128, 768, 3072, false, false),
            (128, 25128, 768, false, false),
            (256, 128, 64, false, false),
            (256, 128, 128, false, true),
            (256, 10, 128, false, false),
            (64, 128, 256, true, false),
            (128, 10, 256, true, false),
            (256, 128, 10, false, true),
            (64, 64, 64, false, false),
            (32, 32, 32, false, false),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.1).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect();
            let mut c = vec![0f32; m * n];
            let (a_rs, a_cs) = if ta { (1, m as isize) } else { (k as isize, 1) };
            let (b_rs, b_cs) = if tb { (1, k as isize) } else { (n as isize, 1) };
            let reps = (1e8 / (2 * m * n * k) as f64).ceil() as usize;
            let on_matrixmultiply = |c: &mut Vec<f32>| {
                for _ in 0..reps {
                    // SAFETY: the vectors hold the operands' elements.
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
                            c.as_mut_ptr(),
                            n as isize,
                            false,
                        )
                    }
                }
            };
            let on_gemm = |c: &mut Vec<f32>| {
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
                            a_cs,
                            a_rs,
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
                x.push(time(&mut || on_matrixmultiply(&mut c)));
                y.push(time(&mut || on_gemm(&mut c)));
            }
            x.sort_by(f64::total_cmp);
            y.sort_by(f64::total_cmp);
            let gf = |t: f64| (2 * m * n * k * reps) as f64 / t / 1e9;
            eprintln!(
                "{m}x{n}x{k}{}{}: matrixmultiply {:6.1} GFLOP/s (median {:6.1}), gemm {:6.1} (median {:6.1})",
                if ta { " a transposed" } else { "" },
                if tb { " b transposed" } else { "" },
                gf(x[0]),
                gf(x[3]),
                gf(y[0]),
                gf(y[3])
            );
        }
    }
}
