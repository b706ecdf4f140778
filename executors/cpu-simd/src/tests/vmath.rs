//! The vector functions of `vmath.rs` on each instruction set the CPU has: within `math.rs`'s
//! bounds of the correctly rounded result (f64 references), and the scalar function's bits
//! wherever no division is approximated (all of exp and erf; tanh on AVX2).

use super::math::{erf_samples, exp_samples, tanh_samples, ulp_distance};
use crate::math;
use crate::simd::{Vf32, V256, V512};
use crate::vmath;

#[derive(Clone, Copy, Debug)]
enum F {
    Tanh,
    Exp,
    Erf,
}

/// `f` over `xs` (whose length is a multiple of the lanes).
#[inline(always)]
unsafe fn all<V: Vf32>(f: F, xs: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; xs.len()];
    for (o, x) in out
        .chunks_exact_mut(V::LANES)
        .zip(xs.chunks_exact(V::LANES))
    {
        // SAFETY: both chunks hold `LANES` elements; the caller has `V`'s features.
        unsafe {
            let v = V::load(x.as_ptr());
            let y = match f {
                F::Tanh => vmath::tanh(v),
                F::Exp => vmath::exp(v),
                F::Erf => vmath::erf(v),
            };
            V::store(o.as_mut_ptr(), y);
        }
    }
    out
}

#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn on_avx512(f: F, xs: &[f32]) -> Vec<f32> {
    // SAFETY: the features are enabled here.
    unsafe { all::<V512>(f, xs) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn on_avx2(f: F, xs: &[f32]) -> Vec<f32> {
    // SAFETY: the features are enabled here.
    unsafe { all::<V256>(f, xs) }
}

/// Special values every function meets: signed zeros, infinities, NaN, subnormals, the
/// extremes of f32, the thresholds of each function's cases, and where tanh is 5 ulp off.
const SPECIAL: [f32; 30] = [
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    1e-45,
    -1e-45,
    1e-40,
    -1e-40,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    f32::MAX,
    f32::MIN,
    9.1,
    -9.1,
    9.099_999,
    7.905_311,
    8.037_809,
    -8.037_809,
    8.037_808,
    4.104_947,
    4e-4,
    1.0,
    -1.0,
    0.999_999_94,
    4.0,
    3.999_999_8,
    -104.0,
    89.0,
    88.72,
];

fn padded(mut xs: Vec<f32>) -> Vec<f32> {
    xs.extend(SPECIAL);
    while !xs.len().is_multiple_of(16) {
        xs.push(0.5);
    }
    xs
}

/// A scalar function, its f64 reference and its bound in ulp.
type Scalar = (fn(f32) -> f32, fn(f64) -> f64, u32);

fn scalar(f: F) -> Scalar {
    match f {
        F::Tanh => (math::tanh::<true>, f64::tanh, 5),
        F::Exp => (math::exp::<true>, f64::exp, 1),
        F::Erf => (math::erf::<true>, libm::erf, 3),
    }
}

fn check(isa: &str, f: F, xs: &[f32], got: &[f32], same_bits: bool) {
    let (s, reference, bound) = scalar(f);
    let mut worst = (0, 0f32);
    for (&x, &y) in xs.iter().zip(got) {
        let u = ulp_distance(y, reference(f64::from(x)) as f32);
        if u > worst.0 {
            worst = (u, x);
        }
        if same_bits {
            let s = s(x);
            assert!(
                y.to_bits() == s.to_bits() || (y.is_nan() && s.is_nan()),
                "{isa}: {f:?}({x}) = {y}, scalar {s}"
            );
        }
    }
    println!("{isa}: {f:?} within {} ulp (worst at {})", worst.0, worst.1);
    assert!(
        worst.0 <= bound,
        "{isa}: {f:?} {} ulp at {}",
        worst.0,
        worst.1
    );
}

/// Exact values the bound alone would let slip: signs of zero, the saturation points, NaN.
fn check_special(isa: &str, f: F, xs: &[f32], got: &[f32]) {
    for (&x, &y) in xs.iter().zip(got) {
        let want = match f {
            _ if x.is_nan() => {
                assert!(y.is_nan(), "{isa}: {f:?}(NaN) = {y}");
                continue;
            }
            // tanh(+-0) = +-0, erf(+-0) = +-0; below 1e-4 tanh(x) rounds to x, and the
            // rational gives it exactly, subnormals included.
            F::Tanh if x.abs() < 1e-4 => x,
            F::Erf if x == 0.0 => x,
            F::Tanh if x.abs() >= math::TANH_CLAMP_FMA => 1f32.copysign(x),
            F::Erf if x.abs() >= 4.0 => 1f32.copysign(x),
            F::Exp if x == f32::NEG_INFINITY => 0.0,
            F::Exp if x >= 89.0 => f32::INFINITY,
            _ => continue,
        };
        assert_eq!(y.to_bits(), want.to_bits(), "{isa}: {f:?}({x}) = {y}");
    }
}

fn each_isa(f: F, xs: Vec<f32>) {
    let xs = padded(xs);
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features.
        let got = unsafe { on_avx2(f, &xs) };
        check("avx2", f, &xs, &got, true);
        check_special("avx2", f, &xs, &got);
    }
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has the features.
        let got = unsafe { on_avx512(f, &xs) };
        check("avx512", f, &xs, &got, !matches!(f, F::Tanh));
        check_special("avx512", f, &xs, &got);
    }
}

#[test]
fn vector_tanh_within_5_ulp_on_each_isa() {
    each_isa(F::Tanh, tanh_samples());
}

#[test]
fn vector_exp_within_1_ulp_and_scalar_bits_on_each_isa() {
    each_isa(F::Exp, exp_samples());
}

#[test]
fn vector_erf_within_3_ulp_and_scalar_bits_on_each_isa() {
    each_isa(F::Erf, erf_samples());
}

/// One of `on_avx2`, `on_avx512`.
type OnIsa = unsafe fn(F, &[f32]) -> Vec<f32>;

/// The vector tanh on every f32 of [2^-126, 10] on each instruction set (as `math.rs`'s
/// `tanh_exhaustive`; AVX-512 divides approximately, so it is not covered by the scalar
/// check). Slow: `cargo test --release -p thunder-cpu-simd -- --ignored tanh_exhaustive`.
#[test]
#[ignore]
fn vector_tanh_exhaustive() {
    let (lo, hi) = (f32::MIN_POSITIVE.to_bits(), 10f32.to_bits());
    let chunk = 1u32 << 20;
    let isas: [(&str, bool, OnIsa); 2] = [
        (
            "avx2",
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            on_avx2,
        ),
        ("avx512", is_x86_feature_detected!("avx512f"), on_avx512),
    ];
    for (isa, _, run) in isas.into_iter().filter(|i| i.1) {
        let mut worst = (0, 0f32);
        for start in (lo..=hi).step_by(chunk as usize) {
            let xs: Vec<f32> = (start..start.saturating_add(chunk))
                .map(|b| f32::from_bits(b.min(hi)))
                .collect();
            // SAFETY: the CPU has the features (filtered above).
            let got = unsafe { run(F::Tanh, &xs) };
            for (&x, &y) in xs.iter().zip(&got) {
                let u = ulp_distance(y, f64::from(x).tanh() as f32);
                if u > worst.0 {
                    worst = (u, x);
                }
            }
        }
        println!("{isa}: tanh within {} ulp (worst at {})", worst.0, worst.1);
        assert!(worst.0 <= 5, "{isa}: tanh {} ulp at {}", worst.0, worst.1);
    }
}
