//! The vector functions of `vmath.rs` on each instruction set the CPU has: within `math.rs`'s
//! bounds of the correctly rounded result, and the scalar function's bits where their
//! division is exact (AVX2).

use super::math::{tanh_samples, ulp_distance};
use crate::math;
use crate::simd::{Vf32, V256, V512};
use crate::vmath;

/// `vmath::tanh` over `xs` (whose length is a multiple of the lanes).
#[inline(always)]
unsafe fn tanh_all<V: Vf32>(xs: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; xs.len()];
    for (o, x) in out
        .chunks_exact_mut(V::LANES)
        .zip(xs.chunks_exact(V::LANES))
    {
        // SAFETY: both chunks hold `LANES` elements; the caller has `V`'s features.
        unsafe { V::store(o.as_mut_ptr(), vmath::tanh(V::load(x.as_ptr()))) };
    }
    out
}

#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tanh_avx512(xs: &[f32]) -> Vec<f32> {
    // SAFETY: the features are enabled here.
    unsafe { tanh_all::<V512>(xs) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn tanh_avx2(xs: &[f32]) -> Vec<f32> {
    // SAFETY: the features are enabled here.
    unsafe { tanh_all::<V256>(xs) }
}

/// The samples of `math.rs`'s tanh test, padded to whole vectors, with the special values.
fn inputs() -> Vec<f32> {
    let mut xs = tanh_samples();
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        9.1,
        -9.1,
        7.905_311,
        4e-4,
        -4e-4,
        1e-30,
    ]);
    while !xs.len().is_multiple_of(16) {
        xs.push(0.5);
    }
    xs
}

fn check(name: &str, xs: &[f32], got: &[f32], same_bits: bool) {
    let mut worst = (0, 0f32);
    for (&x, &y) in xs.iter().zip(got) {
        let u = ulp_distance(y, f64::from(x).tanh() as f32);
        if u > worst.0 {
            worst = (u, x);
        }
        if same_bits {
            let s = math::tanh::<true>(x);
            assert!(
                y.to_bits() == s.to_bits() || (y.is_nan() && s.is_nan()),
                "{name}: tanh({x}) = {y}, scalar {s}"
            );
        }
    }
    assert!(worst.0 <= 5, "{name}: tanh {} ulp at {}", worst.0, worst.1);
    for (&x, &y) in xs.iter().zip(got) {
        match x {
            x if x.is_nan() => assert!(y.is_nan(), "{name}: tanh(NaN) = {y}"),
            x if x.abs() >= 9.1 => assert_eq!(y, 1f32.copysign(x), "{name}: tanh({x})"),
            x if x.abs() < 4e-4 => assert_eq!(y.to_bits(), x.to_bits(), "{name}: tanh({x})"),
            _ => {}
        }
    }
}

#[test]
fn vector_tanh_within_5_ulp_on_each_isa() {
    let xs = inputs();
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features.
        check("avx2", &xs, &unsafe { tanh_avx2(&xs) }, true);
    }
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has the features.
        check("avx512", &xs, &unsafe { tanh_avx512(&xs) }, false);
    }
}
