//! `math.rs`'s f32 functions on whole vectors, operation for operation (the same constants,
//! the same fused multiply-adds in the same order). Exceptions, none of which changes a bit
//! except the first: a division may be `Vf32::div_approx` (on AVX-512, a reciprocal and a
//! correction), which is faithfully rounded rather than correctly rounded; exp's final
//! scaling by 2^n is one `Vf32::scale_pow2` (exact where the scalar code's two products are);
//! and erf's exp skips the clamp and NaN case its argument, in [-16, 0], never meets.
//! `tests/vmath.rs` checks each function against the correctly rounded result with
//! `math.rs`'s own bound, and against the scalar bits where the division is exact.

use crate::math::{
    ERF_L, ERF_S, EXP_HI, EXP_LO, EXP_P, LN2_HI, LN2_LO, MAGIC, TANH_CLAMP_FMA, TANH_P, TANH_Q,
};
use crate::simd::Vf32;

/// Horner's rule over coefficients from the highest degree down, as `math::poly`.
#[inline(always)]
unsafe fn poly<V: Vf32, const N: usize>(x: V, c: &[f32; N]) -> V {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let mut acc = V::splat(c[0]);
        for &k in &c[1..] {
            acc = V::fma(acc, x, V::splat(k));
        }
        acc
    }
}

/// `math::tanh::<true>` on every lane (within its 5 ulp; the same bits on AVX2).
///
/// # Safety
/// The CPU has `V`'s features and the caller is compiled with them.
#[inline(always)]
pub(crate) unsafe fn tanh<V: Vf32>(x: V) -> V {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let xc = V::clamp(x, -TANH_CLAMP_FMA, TANH_CLAMP_FMA);
        let s = V::mul(xc, xc);
        // Q(s) lies in [1, 248]: finite and normal, as `div_approx` needs (NaN: the lane
        // stays NaN).
        V::div_approx(V::mul(poly(s, &TANH_P), xc), poly(s, &TANH_Q))
    }
}

/// exp's core for an argument already in [EXP_LO, EXP_HI] (NaN: some NaN).
#[inline(always)]
unsafe fn exp_core<V: Vf32>(xc: V) -> V {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let magic = V::splat(MAGIC);
        let t = V::add(V::mul(xc, V::splat(std::f32::consts::LOG2_E)), magic);
        let n = V::sub(t, magic);
        let r = V::fma(n, V::splat(-LN2_LO), V::fma(n, V::splat(-LN2_HI), xc));
        let p = V::fma(V::mul(r, r), poly(r, &EXP_P), V::add(r, V::splat(1.0)));
        V::scale_pow2(p, n)
    }
}

/// `math::exp::<true>` on every lane (the same bits).
///
/// # Safety
/// As for [`tanh`].
#[inline(always)]
pub(crate) unsafe fn exp<V: Vf32>(x: V) -> V {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe { V::keep_nan(x, exp_core(V::clamp(x, EXP_LO, EXP_HI))) }
}

/// `math::erf::<true>` on every lane (the same bits).
///
/// # Safety
/// As for [`tanh`].
#[inline(always)]
pub(crate) unsafe fn erf<V: Vf32>(x: V) -> V {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let z = V::abs(x);
        let small = V::mul(x, poly(V::mul(x, x), &ERF_S));
        let zc = V::min_lit(z, 4.0);
        // -(zc^2) lies in [-16, 0]: inside exp's clamp, and never NaN (a NaN `z` gives 4).
        let e = exp_core(V::neg(V::mul(zc, zc)));
        let l = poly(V::sub(zc, V::splat(2.5)), &ERF_L);
        let large = V::sub(V::splat(1.0), V::mul(e, l));
        let large = V::select_ge(z, V::splat(4.0), V::splat(1.0), large);
        // `large` is positive (erf >= 0.84 from 1 on): `or_sign` is its copysign.
        V::select_ge(z, V::splat(1.0), V::or_sign(large, x), small)
    }
}
