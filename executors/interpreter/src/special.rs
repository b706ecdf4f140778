//! Special functions beyond libm.

/// The trigamma function `psi'(x)`, as ATen's `calc_trigamma` (so results agree with torch's
/// `polygamma(1, x)`): reflection below 1/2, six steps of the recurrence, then the asymptotic
/// series. Poles (0 and the negative integers) give +inf.
pub(crate) fn trigamma(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x <= 0.0 && x == x.trunc() {
        return f64::INFINITY;
    }
    let pi = std::f64::consts::PI;
    let (mut x, mut sign, mut result) = (x, 1.0, 0.0);
    if x < 0.5 {
        sign = -1.0;
        let s = (pi * x).sin();
        result -= pi * pi / (s * s);
        x = 1.0 - x;
    }
    for _ in 0..6 {
        result += 1.0 / (x * x);
        x += 1.0;
    }
    let ixx = 1.0 / (x * x);
    result +=
        (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x;
    sign * result
}
