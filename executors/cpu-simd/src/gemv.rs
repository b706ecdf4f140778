//! f32 products of one row (`[1, k] @ [k, n]`: a linear layer at batch 1, ResNet-50's
//! classifier) on AVX2 CPUs: a pass over the right operand at memory speed, with no packing.
//!
//! The `gemm` crate, which took them on AVX2 CPUs (`sgemm_avx2` takes products of at least
//! 64 rows), ran ResNet-50 b1's 2048 x 1000 classifier (8 MB of weight, read once) in
//! 0.76-1.13 ms on one thread (the region runs on a rayon worker, where the team of
//! `team.rs` is not used), ONNX Runtime in 0.48 (AMD EPYC Zen 3, two threads). Here, in column
//! panels over the threads: 0.44-0.55 ms.
//!
//! The right operand comes either way round: with its columns contiguous (a weight stored
//! `[n, k]` and transposed, as `Gemm(transB=1)` and `linear` read it), each output is a dot
//! product of two contiguous runs; with its rows contiguous, the output row is a sum of the
//! rows scaled by `a`'s elements, four rows at a time.

use crate::gemm_run::View;

/// Whether `[m, k] @ [k, n]` runs here: one row, against a right operand with its rows or its
/// columns contiguous, on a CPU with AVX2 and FMA. On AVX-512 CPUs only a right operand with
/// its columns contiguous (a weight stored `[n, k]`) comes here: `gemm_stream` takes the other
/// layout when it is large, and the `gemm` crate took this one, which on the device host's
/// Xeon (2 pinned cores, `scripts/gpu/xeon_where.sh`) ran ResNet-50 b1's 2048 x 1000
/// classifier in 0.59 ms against 0.32 here (ONNX Runtime: 0.36). `THUNDER_CPU_SIMD_GEMV=0`
/// leaves every one-row product where it went before, and `=1` brings both layouts here on
/// AVX-512 CPUs too, for A/B runs.
pub(crate) fn takes(m: usize, b: &View<f32>) -> bool {
    static SET: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let layout = match (
        crate::exec::isa_level(),
        crate::switches::forced("THUNDER_CPU_SIMD_GEMV", &SET),
    ) {
        (0, _) | (_, Some(false)) => false,
        (1, _) | (_, Some(true)) => b.rs == 1 || b.cs == 1,
        (_, None) => b.rs == 1,
    };
    m == 1 && layout
}

/// `dst[j] (+)= Σ_p a[p] · b(p, j)` for `j < n`, `p < k`, added to `dst` when `read_dst`.
///
/// # Safety
/// The CPU has AVX2 and FMA ([`takes`] checks it); `a` addresses `k` readable elements (its
/// row 0), `b` `k x n`, and `dst` `n` writable ones that no other thread touches.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn gemv(
    (n, k): (usize, usize),
    a: View<f32>,
    b: View<f32>,
    dst: *mut f32,
    read_dst: bool,
) {
    if n == 0 {
        return;
    }
    // The row as one contiguous run (a strided row is copied: k floats, against k x n).
    let copied: Vec<f32>;
    let a = if k == 0 {
        &[]
    } else if a.cs == 1 || k == 1 {
        // SAFETY: the caller's.
        unsafe { std::slice::from_raw_parts(a.ptr, k) }
    } else {
        // SAFETY: the caller's: element p of the row at p * cs.
        copied = (0..k)
            .map(|p| unsafe { *a.ptr.offset(p as isize * a.cs) })
            .collect();
        &copied
    };
    // SAFETY: `dst` holds n writable elements (the caller's).
    let out = unsafe { std::slice::from_raw_parts_mut(dst, n) };
    if !read_dst {
        out.fill(0.0);
    }
    // SAFETY: the CPU has AVX2 and FMA (`takes`); `b` is k x n.
    unsafe {
        if b.rs == 1 {
            dots(a, b.ptr, b.cs, out)
        } else {
            rows(a, b.ptr, b.rs, out)
        }
    }
}

/// `out[j] += a · b[j * ld ..][..k]`, four outputs at a time (then one at a time).
///
/// # Safety
/// The CPU has AVX2 and FMA; `b` holds `out.len()` runs of `a.len()` floats, `ld` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots(a: &[f32], b: *const f32, ld: isize, out: &mut [f32]) {
    let mut chunks = out.chunks_exact_mut(4);
    let mut j = 0;
    // SAFETY (whole fn): runs j .. j + C of `b` lie inside it (the caller's).
    unsafe {
        for chunk in &mut chunks {
            let sums = dot_group::<4>(a, std::array::from_fn(|c| b.offset((j + c) as isize * ld)));
            chunk.iter_mut().zip(sums).for_each(|(x, s)| *x += s);
            j += 4;
        }
        for x in chunks.into_remainder() {
            let [s] = dot_group::<1>(a, [b.offset(j as isize * ld)]);
            *x += s;
            j += 1;
        }
    }
}

/// `a · col` for each of `C` runs, each over two 8-lane sums, then the tail past the last 16.
///
/// # Safety
/// The CPU has AVX2 and FMA; each run holds `a.len()` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dot_group<const C: usize>(a: &[f32], cols: [*const f32; C]) -> [f32; C] {
    use std::arch::x86_64::*;
    let body = a.len() / 16 * 16;
    let hsum = |v: __m256| {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
    };
    // SAFETY (whole fn): reads inside `a` and the runs.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 2]; C];
        for p in (0..body).step_by(16) {
            let a0 = _mm256_loadu_ps(a.as_ptr().add(p));
            let a1 = _mm256_loadu_ps(a.as_ptr().add(p + 8));
            for (acc, col) in acc.iter_mut().zip(&cols) {
                acc[0] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(col.add(p)), acc[0]);
                acc[1] = _mm256_fmadd_ps(a1, _mm256_loadu_ps(col.add(p + 8)), acc[1]);
            }
        }
        std::array::from_fn(|c| {
            let mut s = hsum(_mm256_add_ps(acc[c][0], acc[c][1]));
            for (p, &ap) in a.iter().enumerate().skip(body) {
                s += ap * *cols[c].add(p);
            }
            s
        })
    }
}

/// `out += Σ_p a[p] · b[p * ld ..][..n]`, four rows of `b` per pass over `out` (which stays
/// in L1 for the widths of a layer: 4 KB for 1000 outputs).
///
/// # Safety
/// The CPU has AVX2 and FMA; `b` holds `a.len()` runs of `out.len()` floats, `ld` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows(a: &[f32], b: *const f32, ld: isize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let n = out.len();
    let body = n / 8 * 8;
    // SAFETY (whole fn): reads inside the rows of `b`, writes inside `out`.
    unsafe {
        let o = out.as_mut_ptr();
        let mut groups = a.chunks_exact(4);
        let mut p = 0;
        for w in &mut groups {
            let r: [*const f32; 4] = std::array::from_fn(|i| b.offset((p + i) as isize * ld));
            let s: [__m256; 4] = std::array::from_fn(|i| _mm256_set1_ps(w[i]));
            for j in (0..body).step_by(8) {
                // The rows summed first, then added: ((r0 + r1) + (r2 + r3)) + out.
                let t0 = _mm256_fmadd_ps(s[1], _mm256_loadu_ps(r[1].add(j)), {
                    _mm256_mul_ps(s[0], _mm256_loadu_ps(r[0].add(j)))
                });
                let t1 = _mm256_fmadd_ps(s[3], _mm256_loadu_ps(r[3].add(j)), {
                    _mm256_mul_ps(s[2], _mm256_loadu_ps(r[2].add(j)))
                });
                let sum = _mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_loadu_ps(o.add(j)));
                _mm256_storeu_ps(o.add(j), sum);
            }
            for j in body..n {
                let t = (w[0] * *r[0].add(j) + w[1] * *r[1].add(j))
                    + (w[2] * *r[2].add(j) + w[3] * *r[3].add(j));
                *o.add(j) += t;
            }
            p += 4;
        }
        for &ap in groups.remainder() {
            let r = b.offset(p as isize * ld);
            let s = _mm256_set1_ps(ap);
            for j in (0..body).step_by(8) {
                let sum = _mm256_fmadd_ps(s, _mm256_loadu_ps(r.add(j)), _mm256_loadu_ps(o.add(j)));
                _mm256_storeu_ps(o.add(j), sum);
            }
            for j in body..n {
                *o.add(j) += ap * *r.add(j);
            }
            p += 1;
        }
    }
}
