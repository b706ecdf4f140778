//! Accuracy of the vectorized f32 functions against std's f64 functions rounded to f32 (the
//! correctly rounded result up to f64's own error), in ulp, on both the FMA and plain paths.

use crate::math;

pub(super) fn ulp_distance(a: f32, b: f32) -> u32 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u32::MAX
        };
    }
    if a == b {
        return 0;
    }
    // Map the floats onto a monotonic integer line.
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 {
            i32::MIN - i
        } else {
            i
        }
    };
    (key(a) as i64 - key(b) as i64).unsigned_abs() as u32
}

/// Every f32 in [lo, hi] stepping `step` ulps, plus the special values.
pub(super) fn samples(lo: f32, hi: f32, n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..=n)
        .map(|i| lo + (hi - lo) * (i as f32 / n as f32))
        .collect();
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e-40,
    ]);
    v
}

fn max_ulp(f: impl Fn(f32) -> f32, reference: impl Fn(f64) -> f64, xs: &[f32]) -> (u32, f32) {
    xs.iter()
        .map(|&x| (ulp_distance(f(x), reference(f64::from(x)) as f32), x))
        .max_by_key(|&(u, _)| u)
        .unwrap_or((0, 0.0))
}

/// exp's range and beyond, plus the subnormal results near its low end.
pub(super) fn exp_samples() -> Vec<f32> {
    let mut xs = samples(-104.0, 89.0, 400_000);
    xs.extend(samples(-104.0, -87.0, 20_000));
    xs.extend(samples(-1e-3, 1e-3, 2_000));
    xs.extend([-200.0, 200.0, -1e30, 1e30]);
    xs
}

#[test]
fn exp_is_within_1_ulp() {
    let xs = exp_samples();
    for (u, x) in [
        max_ulp(math::exp::<true>, f64::exp, &xs),
        max_ulp(math::exp::<false>, f64::exp, &xs),
    ] {
        assert!(u <= 1, "exp: {u} ulp at {x}");
    }
}

#[test]
fn log_is_within_1_ulp() {
    let mut xs = samples(0.0, 100.0, 200_000);
    xs.extend(samples(1e-38, 1e-30, 10_000));
    xs.extend(samples(0.5, 2.0, 200_000));
    xs.extend([-1.0, f32::MAX, 1e-45]);
    for (u, x) in [
        max_ulp(math::log::<true>, f64::ln, &xs),
        max_ulp(math::log::<false>, f64::ln, &xs),
    ] {
        assert!(u <= 1, "log: {u} ulp at {x}");
    }
}

/// Every 61st f32 of [2^-126, 12] and its negative, plus an even grid and the special values:
/// the rational fit's error peaks near 3.7 and 5.9, between the points an even grid samples.
pub(super) fn tanh_samples() -> Vec<f32> {
    let mut xs = samples(-12.0, 12.0, 1000);
    let (lo, hi) = (f32::MIN_POSITIVE.to_bits(), 12f32.to_bits());
    xs.extend(
        (lo..hi)
            .step_by(61)
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)]),
    );
    xs
}

#[test]
fn tanh_is_within_5_ulp_with_fma_and_6_without() {
    let xs = tanh_samples();
    let (u, x) = max_ulp(math::tanh::<true>, f64::tanh, &xs);
    println!("tanh with FMA: {u} ulp at {x}");
    assert!(u <= 5, "tanh with FMA: {u} ulp at {x}");
    let (u, x) = max_ulp(math::tanh::<false>, f64::tanh, &xs);
    println!("tanh without FMA: {u} ulp at {x}");
    assert!(u <= 6, "tanh without FMA: {u} ulp at {x}");
}

/// tanh is odd bit for bit, and exactly +-1 from its clamp on (below 1 just below it: the
/// clamp is the least f32 where the rational reaches 1), on both paths.
#[test]
fn tanh_is_odd_and_saturates_at_its_clamp() {
    for x in tanh_samples().into_iter().filter(|x| !x.is_nan()) {
        for f in [math::tanh::<true>, math::tanh::<false>] {
            assert_eq!(f(-x).to_bits(), (-f(x)).to_bits(), "tanh(-{x})");
        }
    }
    for (f, c) in [
        (math::tanh::<true> as fn(f32) -> f32, math::TANH_CLAMP_FMA),
        (math::tanh::<false>, math::TANH_CLAMP),
    ] {
        let below = f32::from_bits(c.to_bits() - 1);
        assert!(f(below) < 1.0, "tanh({below}) = {}", f(below));
        assert!(f(7.9) < 1.0, "tanh(7.9) = {}", f(7.9));
        for x in [c, 8.1, 9.0, 9.1, 20.0, 1e30, f32::MAX, f32::INFINITY] {
            assert_eq!(f(x), 1.0, "tanh({x})");
            assert_eq!(f(-x), -1.0, "tanh(-{x})");
        }
    }
}

/// Every f32 of [2^-126, 10] (about 1.1e9; beyond 10 the clamp gives 1, and tanh(-x) =
/// -tanh(x) bit for bit): the bounds hold everywhere, not only on the samples. Slow, so run
/// on demand: `cargo test --release -p thunder-cpu-simd -- --ignored tanh_exhaustive`.
#[test]
#[ignore]
fn tanh_exhaustive() {
    let (lo, hi) = (f32::MIN_POSITIVE.to_bits(), 10f32.to_bits());
    let worst = |f: fn(f32) -> f32| {
        (lo..=hi)
            .map(|b| {
                let x = f32::from_bits(b);
                (ulp_distance(f(x), f64::from(x).tanh() as f32), x)
            })
            .max_by_key(|&(u, _)| u)
            .unwrap_or((0, 0.0))
    };
    let (u, x) = worst(math::tanh::<true>);
    println!("tanh with FMA: {u} ulp at {x}");
    assert!(u <= 5, "tanh with FMA: {u} ulp at {x}");
    let (u, x) = worst(math::tanh::<false>);
    println!("tanh without FMA: {u} ulp at {x}");
    assert!(u <= 6, "tanh without FMA: {u} ulp at {x}");
}

/// erf's two cases and their seams, small arguments, and every 997th f32 of [2^-126, 5]
/// with its negative.
pub(super) fn erf_samples() -> Vec<f32> {
    let mut xs = samples(-6.0, 6.0, 400_000);
    xs.extend(samples(-1.2, 1.2, 200_000));
    xs.extend(samples(-1e-3, 1e-3, 10_000));
    let (lo, hi) = (f32::MIN_POSITIVE.to_bits(), 5f32.to_bits());
    xs.extend(
        (lo..hi)
            .step_by(997)
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)]),
    );
    xs
}

#[test]
fn erf_is_within_3_ulp() {
    let xs = erf_samples();
    for (u, x) in [
        max_ulp(math::erf::<true>, libm::erf, &xs),
        max_ulp(math::erf::<false>, libm::erf, &xs),
    ] {
        assert!(u <= 3, "erf: {u} ulp at {x}");
    }
}

#[test]
fn special_values() {
    assert_eq!(math::exp::<true>(f32::NEG_INFINITY), 0.0);
    assert_eq!(math::exp::<true>(f32::INFINITY), f32::INFINITY);
    assert!(math::exp::<true>(f32::NAN).is_nan());
    assert_eq!(math::log::<true>(0.0), f32::NEG_INFINITY);
    assert!(math::log::<true>(-1.0).is_nan());
    assert_eq!(math::tanh::<true>(f32::INFINITY), 1.0);
    assert_eq!(math::tanh::<true>(f32::NEG_INFINITY), -1.0);
    assert!(math::tanh::<true>(f32::NAN).is_nan());
    assert_eq!(math::tanh::<true>(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(math::tanh::<true>(9.1), 1.0);
    assert_eq!(math::tanh::<true>(-1e30), -1.0);
    assert_eq!(math::tanh::<false>(f32::NEG_INFINITY), -1.0);
    assert!(math::tanh::<false>(f32::NAN).is_nan());
    assert_eq!(math::tanh::<false>(-0.0).to_bits(), (-0.0f32).to_bits());
    // Tiny and subnormal |x|: tanh(x) rounds to x, and P(x^2) and Q(x^2) round to 1.
    for x in [1e-45f32, -1e-40, 3e-39, f32::MIN_POSITIVE, -1e-20, 9.9e-5] {
        assert_eq!(math::tanh::<true>(x), x, "tanh({x})");
        assert_eq!(math::tanh::<false>(x), x, "tanh({x})");
    }
    assert_eq!(math::erf::<true>(f32::NEG_INFINITY), -1.0);
    assert!(math::erf::<true>(f32::NAN).is_nan());
    assert_eq!(math::erf::<true>(-0.0).to_bits(), (-0.0f32).to_bits());
}
