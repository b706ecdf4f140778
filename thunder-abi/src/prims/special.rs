//! Special functions and the scalar helpers the elementwise table is written with.
//! Every executor computes these prims through the table, so they are defined once, here.

/// Inverse error function: Giles' single-precision approximation ("Approximating the erfinv
/// function", 2010), refined by Newton steps on `libm::erf` (on `ln(erfc)` towards +-1, where
/// `erf` is flat) in f64 until they stop moving, so the result is within a few f64 ulps.
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y == 1.0 {
        return f64::INFINITY;
    }
    if y == -1.0 {
        return f64::NEG_INFINITY;
    }
    if y == 0.0 {
        return y; // keeps -0
    }
    // Solve for |y| and restore the sign (erfinv is odd).
    let (sign, y) = (y.signum(), y.abs());
    let w = -((1.0 - y) * (1.0 + y)).ln();
    let mut x = if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ] {
            p = c + p * w;
        }
        p * y
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ] {
            p = c + p * w;
        }
        p * y
    };
    // Newton steps. Past 0.5 they solve ln(erfc(x)) = ln(1 - y) instead (1 - y is exact there,
    // and the log is close to linear in the tail, where the approximation above is weakest).
    for _ in 0..12 {
        let pdf = std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp();
        let step = if y > 0.5 {
            let c = libm::erfc(x);
            if c <= 0.0 || pdf <= 0.0 {
                break;
            }
            ((1.0 - y).ln() - c.ln()) * c / pdf
        } else {
            (libm::erf(x) - y) / pdf
        };
        if !step.is_finite() {
            break;
        }
        x -= step;
        if step.abs() <= 1e-17 * x.abs() {
            break;
        }
    }
    sign * x
}

/// The digamma function, as ATen's `calc_digamma` (Cephes): reflection below 0, the
/// recurrence up to 10, then the asymptotic series. `+-0` give `-+inf`, negative integers NaN.
#[allow(clippy::excessive_precision)] // Cephes' constants, as ATen writes them
pub fn digamma(x: f64) -> f64 {
    const PSI_10: f64 = 2.251_752_589_066_721_107_64;
    const A: [f64; 7] = [
        8.333_333_333_333_333_333_33E-2,
        -2.109_279_609_279_609_279_61E-2,
        7.575_757_575_757_575_757_58E-3,
        -4.166_666_666_666_666_666_67E-3,
        3.968_253_968_253_968_253_97E-3,
        -8.333_333_333_333_333_333_33E-3,
        8.333_333_333_333_333_333_33E-2,
    ];
    if x == 0.0 {
        return f64::INFINITY.copysign(-x);
    }
    if x < 0.0 {
        if x == x.trunc() {
            return f64::NAN;
        }
        // tan(pi * frac(x)) is more accurate than tan(pi * x).
        let r = x - x.trunc();
        return digamma(1.0 - x) - std::f64::consts::PI / (std::f64::consts::PI * r).tan();
    }
    if x.is_nan() {
        return x;
    }
    let (mut x, mut result) = (x, 0.0);
    while x < 10.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    if x == 10.0 {
        return result + PSI_10;
    }
    let y = if x < 1.0e17 {
        let z = 1.0 / (x * x);
        z * A.iter().fold(0.0, |acc, &a| acc * z + a)
    } else {
        0.0
    };
    result + x.ln() - 0.5 / x - y
}

/// torch's float floor division (`c10::div_floor_floating`): exact where `floor(x / y)` would
/// round first (`floor_divide(1, 0.1)` is 9, not 10).
pub fn div_floor(x: f64, y: f64) -> f64 {
    if y == 0.0 {
        return x / y;
    }
    let m = x % y;
    let mut div = (x - m) / y;
    if m != 0.0 && (y < 0.0) != (m < 0.0) {
        div -= 1.0;
    }
    if div != 0.0 {
        let mut f = div.floor();
        if div - f > 0.5 {
            f += 1.0;
        }
        f
    } else {
        0.0f64.copysign(x / y)
    }
}

/// IEEE maximum that propagates NaN (unlike `f64::max`) and orders -0 below +0, like torch.
pub fn nan_max(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x > y || (x == y && y.is_sign_negative()) {
        x
    } else {
        y
    }
}

pub fn int_pow(base: i64, exp: i64) -> Result<i64, String> {
    if exp < 0 {
        return Err(format!("integer to the negative power {exp}"));
    }
    // Square-and-multiply in wrapping i64 is exact modulo 2^64, hence modulo every narrower width.
    let (mut result, mut base, mut exp) = (1i64, base, exp as u64);
    while exp > 0 {
        if exp & 1 == 1 {
            result = result.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    Ok(result)
}

/// The trigamma function `psi'(x)`, as ATen's `calc_trigamma` (so results agree with torch's
/// `polygamma(1, x)`): reflection below 1/2, six steps of the recurrence, then the asymptotic
/// series. Poles (0 and the negative integers) give +inf.
pub fn trigamma(x: f64) -> f64 {
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
