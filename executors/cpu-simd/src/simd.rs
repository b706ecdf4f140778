//! f32 vectors of the dispatched width, for the register-resident chain loops (`chain.rs`).
//!
//! Every method is `#[inline(always)]` and only sound to call from a function compiled with
//! the vector's features (`chain::run_avx512`, `chain::run_avx2`): written with intrinsics
//! rather than as scalar code for LLVM to vectorize, so that no closure or helper compiled
//! without those features (which LLVM would not vectorize at this width) sits in the loop.
//! Each operation rounds exactly like its scalar counterpart in `math.rs` and `kernels.rs`,
//! so the chain path and the tile path give the same bits.

use crate::chain::Arith;
use std::arch::x86_64::*;

/// An f32 vector. Methods are `unsafe`: the caller runs with the vector's target features.
pub(crate) trait Vf32: Copy {
    const LANES: usize;
    unsafe fn splat(x: f32) -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn store(p: *mut f32, v: Self);
    /// A non-temporal store; `p` is aligned to the vector's size.
    unsafe fn stream(p: *mut f32, v: Self);
    unsafe fn add(a: Self, b: Self) -> Self;
    unsafe fn sub(a: Self, b: Self) -> Self;
    unsafe fn mul(a: Self, b: Self) -> Self;
    unsafe fn div(a: Self, b: Self) -> Self;
    /// `a / b` for finite, normal `b`, faithfully rounded (within an ulp of the correctly
    /// rounded quotient, nearly always equal to it): for a division inside a longer formula
    /// whose error bound allows it, where the division instruction would set the pace; a zero
    /// `a` gives a zero of the exact quotient's sign. Other `b` give some value (no trap), for
    /// lanes the caller then replaces.
    unsafe fn div_approx(a: Self, b: Self) -> Self;
    /// `a * b + c` with one rounding.
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    unsafe fn sqrt(a: Self) -> Self;
    /// Flips / clears the sign bit.
    unsafe fn neg(a: Self) -> Self;
    unsafe fn abs(a: Self) -> Self;
    /// `x.clamp(lo, hi)` as std computes it (a NaN `x` stays NaN).
    unsafe fn clamp(x: Self, lo: f32, hi: f32) -> Self;
    /// Per lane: `a >= b ? t : f` (false for NaN).
    unsafe fn select_ge(a: Self, b: Self, t: Self, f: Self) -> Self;
    /// `r.copysign(x)` for `r` whose sign bit is clear (+0.0, positive, or a positive NaN):
    /// ORs in `x`'s sign bit.
    unsafe fn or_sign(r: Self, x: Self) -> Self;
    /// `x.min(c)` for a `c` that is not NaN (a NaN `x` gives `c`, as in std).
    unsafe fn min_lit(x: Self, c: f32) -> Self;
    /// Per lane: `x` where `x` is NaN, else `y`.
    unsafe fn keep_nan(x: Self, y: Self) -> Self;
    /// `p * 2^n` for integral `n` in [-150, 128], rounded once: `math::exp`'s
    /// `p * pow2(n1) * pow2(n - n1)`, whose first product is exact, so the same bits.
    unsafe fn scale_pow2(p: Self, n: Self) -> Self;
    /// `acc[j] += v[j] as f64` for each lane `j`: the tile path's sum into contiguous f64
    /// accumulators (`tile::reduce_into`), the same bits (the widening is exact).
    unsafe fn sum_into_f64(acc: *mut f64, v: Self);
    /// `lanes[l] += chunk[l] as f64` for each chunk of 8 lanes of `v` in turn:
    /// `kernels::reduce_tile`'s eight running sums, the same bits.
    unsafe fn fold8_into_f64(lanes: *mut f64, v: Self);
}

/// `a[k] op b[k]` for every vector of a block, the op decided once for the block rather than
/// once per vector.
#[inline(always)]
pub(crate) unsafe fn arith_block<V: Vf32, const K: usize>(
    op: Arith,
    a: &[V; K],
    b: &[V; K],
) -> [V; K] {
    macro_rules! each {
        ($f:path) => {{
            let mut out = *a;
            for (o, y) in out.iter_mut().zip(b) {
                // SAFETY: forwarded from the caller.
                *o = unsafe { $f(*o, *y) };
            }
            out
        }};
    }
    match op {
        Arith::Add => each!(V::add),
        Arith::Sub => each!(V::sub),
        Arith::Mul => each!(V::mul),
        Arith::Div => each!(V::div),
    }
}

/// 16 lanes (AVX-512F).
#[derive(Clone, Copy)]
pub(crate) struct V512(pub(crate) __m512);

impl V512 {
    /// The 16 lanes as f64: lanes 0-7, then 8-15.
    #[inline(always)]
    unsafe fn widen(self) -> (__m512d, __m512d) {
        let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(self.0));
        let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(
            _mm512_castps_pd(self.0),
        )));
        (lo, hi)
    }
}

impl Vf32 for V512 {
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        V512(_mm512_set1_ps(x))
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: forwarded from the caller.
        V512(unsafe { _mm512_loadu_ps(p) })
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        // SAFETY: forwarded from the caller.
        unsafe { _mm512_storeu_ps(p, v.0) }
    }
    #[inline(always)]
    unsafe fn stream(p: *mut f32, v: Self) {
        // SAFETY: forwarded from the caller.
        unsafe { _mm512_stream_ps(p, v.0) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        V512(_mm512_add_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        V512(_mm512_sub_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        V512(_mm512_mul_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn div(a: Self, b: Self) -> Self {
        V512(_mm512_div_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn div_approx(a: Self, b: Self) -> Self {
        // A 16-lane division issues once per ~10 cycles on current Intel cores, most of a
        // tanh's time; instead: r ~ 1/b within 2^-14, y0 = a r, and one correction
        // y = y0 - r (b y0 - a), whose relative error is ~2^-28 before its final rounding.
        // Written with `b y0 - a` rather than `a - b y0` so that a zero `a` keeps its sign:
        // for a = -0.0, e = -0.0 - -0.0 = +0.0 and y0 - r e = -0.0 - +0.0 = -0.0.
        let r = _mm512_rcp14_ps(b.0);
        let y0 = _mm512_mul_ps(a.0, r);
        let e = _mm512_fmsub_ps(b.0, y0, a.0);
        V512(_mm512_fnmadd_ps(e, r, y0))
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        V512(_mm512_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn sqrt(a: Self) -> Self {
        V512(_mm512_sqrt_ps(a.0))
    }
    #[inline(always)]
    unsafe fn neg(a: Self) -> Self {
        V512(_mm512_castsi512_ps(_mm512_xor_si512(
            _mm512_castps_si512(a.0),
            _mm512_set1_epi32(i32::MIN),
        )))
    }
    #[inline(always)]
    unsafe fn abs(a: Self) -> Self {
        V512(_mm512_castsi512_ps(_mm512_and_si512(
            _mm512_castps_si512(a.0),
            _mm512_set1_epi32(i32::MAX),
        )))
    }
    #[inline(always)]
    unsafe fn clamp(x: Self, lo: f32, hi: f32) -> Self {
        // maxps/minps return their second operand when either is NaN: `x` goes second.
        let m = _mm512_max_ps(_mm512_set1_ps(lo), x.0);
        V512(_mm512_min_ps(_mm512_set1_ps(hi), m))
    }
    #[inline(always)]
    unsafe fn select_ge(a: Self, b: Self, t: Self, f: Self) -> Self {
        let m = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(a.0, b.0);
        V512(_mm512_mask_blend_ps(m, f.0, t.0))
    }
    #[inline(always)]
    unsafe fn or_sign(r: Self, x: Self) -> Self {
        // One ternary-logic op: r | (x & sign), truth table 0xF8 for (A, B, C) = (r, x, sign).
        V512(_mm512_castsi512_ps(_mm512_ternarylogic_epi32::<0xF8>(
            _mm512_castps_si512(r.0),
            _mm512_castps_si512(x.0),
            _mm512_set1_epi32(i32::MIN),
        )))
    }
    #[inline(always)]
    unsafe fn min_lit(x: Self, c: f32) -> Self {
        // minps returns its second operand when either is NaN: `c` goes second.
        V512(_mm512_min_ps(x.0, _mm512_set1_ps(c)))
    }
    #[inline(always)]
    unsafe fn keep_nan(x: Self, y: Self) -> Self {
        let m = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x.0, x.0);
        V512(_mm512_mask_blend_ps(m, y.0, x.0))
    }
    #[inline(always)]
    unsafe fn scale_pow2(p: Self, n: Self) -> Self {
        // vscalefps: p * 2^floor(n), one rounding (to a subnormal or inf where it must).
        V512(_mm512_scalef_ps(p.0, n.0))
    }
    #[inline(always)]
    unsafe fn sum_into_f64(acc: *mut f64, v: Self) {
        let (lo, hi) = v.widen();
        // SAFETY: forwarded from the caller: 16 accumulators from `acc`.
        unsafe {
            _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), lo));
            _mm512_storeu_pd(acc.add(8), _mm512_add_pd(_mm512_loadu_pd(acc.add(8)), hi));
        }
    }
    #[inline(always)]
    unsafe fn fold8_into_f64(lanes: *mut f64, v: Self) {
        let (lo, hi) = v.widen();
        // SAFETY: forwarded from the caller: 8 accumulators from `lanes`.
        unsafe {
            let s = _mm512_add_pd(_mm512_loadu_pd(lanes), lo);
            _mm512_storeu_pd(lanes, _mm512_add_pd(s, hi));
        }
    }
}

/// 8 lanes (AVX2 with FMA).
#[derive(Clone, Copy)]
pub(crate) struct V256(__m256);

impl Vf32 for V256 {
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        V256(_mm256_set1_ps(x))
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: forwarded from the caller.
        V256(unsafe { _mm256_loadu_ps(p) })
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        // SAFETY: forwarded from the caller.
        unsafe { _mm256_storeu_ps(p, v.0) }
    }
    #[inline(always)]
    unsafe fn stream(p: *mut f32, v: Self) {
        // SAFETY: forwarded from the caller.
        unsafe { _mm256_stream_ps(p, v.0) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        V256(_mm256_add_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        V256(_mm256_sub_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        V256(_mm256_mul_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn div(a: Self, b: Self) -> Self {
        V256(_mm256_div_ps(a.0, b.0))
    }
    /// The exact division: AVX2's 12-bit reciprocal would leave ~2^-24 after one correction,
    /// and an 8-lane division is half as slow per element as a 16-lane one.
    #[inline(always)]
    unsafe fn div_approx(a: Self, b: Self) -> Self {
        V256(_mm256_div_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        V256(_mm256_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn sqrt(a: Self) -> Self {
        V256(_mm256_sqrt_ps(a.0))
    }
    #[inline(always)]
    unsafe fn neg(a: Self) -> Self {
        V256(_mm256_xor_ps(a.0, _mm256_set1_ps(-0.0)))
    }
    #[inline(always)]
    unsafe fn abs(a: Self) -> Self {
        V256(_mm256_andnot_ps(_mm256_set1_ps(-0.0), a.0))
    }
    #[inline(always)]
    unsafe fn clamp(x: Self, lo: f32, hi: f32) -> Self {
        // As for V512: `x` second, so a NaN passes through.
        let m = _mm256_max_ps(_mm256_set1_ps(lo), x.0);
        V256(_mm256_min_ps(_mm256_set1_ps(hi), m))
    }
    #[inline(always)]
    unsafe fn select_ge(a: Self, b: Self, t: Self, f: Self) -> Self {
        let m = _mm256_cmp_ps::<_CMP_GE_OQ>(a.0, b.0);
        V256(_mm256_blendv_ps(f.0, t.0, m))
    }
    #[inline(always)]
    unsafe fn or_sign(r: Self, x: Self) -> Self {
        V256(_mm256_or_ps(r.0, _mm256_and_ps(x.0, _mm256_set1_ps(-0.0))))
    }
    #[inline(always)]
    unsafe fn min_lit(x: Self, c: f32) -> Self {
        // As for V512: `c` second.
        V256(_mm256_min_ps(x.0, _mm256_set1_ps(c)))
    }
    #[inline(always)]
    unsafe fn keep_nan(x: Self, y: Self) -> Self {
        let m = _mm256_cmp_ps::<_CMP_UNORD_Q>(x.0, x.0);
        V256(_mm256_blendv_ps(y.0, x.0, m))
    }
    #[inline(always)]
    unsafe fn scale_pow2(p: Self, n: Self) -> Self {
        // As `math::pow2` twice: n1 = n >> 1 and n - n1 each give a normal power of two.
        let ni = _mm256_cvtps_epi32(n.0);
        let n1 = _mm256_srai_epi32::<1>(ni);
        let n2 = _mm256_sub_epi32(ni, n1);
        let bias = _mm256_set1_epi32(127);
        let f1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n1, bias)));
        let f2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n2, bias)));
        V256(_mm256_mul_ps(_mm256_mul_ps(p.0, f1), f2))
    }
    #[inline(always)]
    unsafe fn sum_into_f64(acc: *mut f64, v: Self) {
        let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v.0));
        let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v.0));
        // SAFETY: forwarded from the caller: 8 accumulators from `acc`.
        unsafe {
            _mm256_storeu_pd(acc, _mm256_add_pd(_mm256_loadu_pd(acc), lo));
            _mm256_storeu_pd(acc.add(4), _mm256_add_pd(_mm256_loadu_pd(acc.add(4)), hi));
        }
    }
    #[inline(always)]
    unsafe fn fold8_into_f64(lanes: *mut f64, v: Self) {
        // SAFETY: forwarded from the caller; one chunk of 8 is `sum_into_f64`.
        unsafe { Self::sum_into_f64(lanes, v) }
    }
}
