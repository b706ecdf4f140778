//! `math.rs`'s f32 functions on whole vectors, operation for operation (the same constants,
//! the same fused multiply-adds in the same order). One exception: a division may be
//! `Vf32::div_approx` (on AVX-512, a reciprocal and a correction), which is faithfully rounded
//! rather than correctly rounded; `tests/vmath.rs` checks each function against the
//! correctly rounded result with `math.rs`'s own bound, and against the scalar bits where the
//! division is exact.

use crate::math::{TANH_BIG, TANH_CLAMP, TANH_P, TANH_Q, TANH_SMALL};
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
        let z = V::abs(x);
        let xc = V::clamp(x, -TANH_CLAMP, TANH_CLAMP);
        let s = V::mul(xc, xc);
        // Q(s) lies in [0.0049, 0.0129]: finite and normal, as `div_approx` needs.
        let r = V::div_approx(V::mul(poly(s, &TANH_P), xc), poly(s, &TANH_Q));
        let r = V::select_ge(z, V::splat(TANH_BIG), V::one_signed(x), r);
        V::select_ge(z, V::splat(TANH_SMALL), r, x)
    }
}
