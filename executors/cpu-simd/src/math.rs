//! Branch-free f32 exp, log, tanh and erf that LLVM vectorizes when inlined into a loop
//! compiled for AVX2/AVX-512 (see `exec.rs`): every special case is a select, not a branch.
//! `FMA` picks fused multiply-adds where the dispatched CPU has them; without it a fused
//! multiply-add would be a library call, so the scalar fallback multiplies and adds.
//!
//! Accuracy against the correctly rounded result (std's f64 functions, rounded to f32) is
//! checked in `tests/math.rs`: exp and log within 1 ulp, erf within 3 ulp (relative error
//! below 4e-7), tanh within 5 ulp (6 without fused multiply-adds).

// Coefficients are written as the fits printed them; the compiler rounds them to f32. The erf
// fit's leading coefficient is near 2/sqrt(pi) by nature, not a typo of the constant.
#![allow(clippy::excessive_precision, clippy::approx_constant)]

#[inline(always)]
pub(crate) fn fma<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Horner's rule over coefficients from the highest degree down.
#[inline(always)]
fn poly<const FMA: bool, const N: usize>(x: f32, c: &[f32; N]) -> f32 {
    let mut acc = c[0];
    for &k in &c[1..] {
        acc = fma::<FMA>(acc, x, k);
    }
    acc
}

/// 2^k for k in [-126, 127], built from the exponent bits.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

/// 1.5 * 2^23: adding it rounds an f32 below 2^22 to an integer (ties to even).
pub(crate) const MAGIC: f32 = 12_582_912.0;
/// Cody-Waite: ln 2 split so that n * LN2_HI is exact.
pub(crate) const LN2_HI: f32 = 0.693_359_4;
pub(crate) const LN2_LO: f32 = -2.121_944_4e-4;
/// exp(r) = 1 + r + r^2 P(r) on |r| <= ln2/2 (Cephes expf).
pub(crate) const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    5.000_000_1e-1,
];
/// exp's clamp: n stays in [-150, 128].
pub(crate) const EXP_LO: f32 = -104.0;
pub(crate) const EXP_HI: f32 = 89.0;

#[inline(always)]
pub(crate) fn exp<const FMA: bool>(x: f32) -> f32 {
    // Clamping keeps n in [-150, 128], so the two power-of-two factors below stay normal and
    // the product overflows to inf or underflows through the subnormals with one rounding.
    let xc = x.clamp(EXP_LO, EXP_HI);
    let t = xc * std::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    // n as an integer, read from the low mantissa bits of `t` (exact for |n| < 2^22): an `as`
    // cast would saturate and map NaN to 0, which LLVM does not vectorize. For NaN the value
    // is garbage and the result is replaced below.
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = fma::<FMA>(n, -LN2_LO, fma::<FMA>(n, -LN2_HI, xc));
    let p = fma::<FMA>(r * r, poly::<FMA, 6>(r, &EXP_P), r + 1.0);
    let n1 = ni >> 1;
    let y = p * pow2(n1) * pow2(ni.wrapping_sub(n1));
    if x.is_nan() {
        x
    } else {
        y
    }
}

#[inline(always)]
pub(crate) fn log<const FMA: bool>(x: f32) -> f32 {
    // Subnormals are scaled into the normal range first.
    let small = x < f32::MIN_POSITIVE;
    let xs = if small { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 126 - if small { 23 } else { 0 };
    // Mantissa in [0.5, 1), then moved to [sqrt(0.5), sqrt(2)) so that log's argument is near 1.
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let low = m < std::f32::consts::FRAC_1_SQRT_2;
    e -= i32::from(low);
    let f = if low { m + m - 1.0 } else { m - 1.0 };
    let ef = e as f32;
    // log(1 + f) = f - f^2/2 + f^3 P(f) (Cephes logf).
    const P: [f32; 9] = [
        7.037_683_6e-2,
        -1.151_461_e-1,
        1.167_699_9e-1,
        -1.242_014_1e-1,
        1.424_932_3e-1,
        -1.666_805_8e-1,
        2.000_071_4e-1,
        -2.499_999_4e-1,
        3.333_333e-1,
    ];
    let z = f * f;
    let mut y = f * z * poly::<FMA, 9>(f, &P);
    y = fma::<FMA>(ef, -2.121_944_4e-4, y);
    y = fma::<FMA>(z, -0.5, y);
    let r = fma::<FMA>(ef, 0.693_359_4, f + y);
    if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        x
    } else {
        r
    }
}

/// tanh as an odd rational function, `x P(x^2) / Q(x^2)` with P and Q of degree 4 in x^2 and
/// P(0) = Q(0) = 1: a minimax fit of tanh(x) / x's relative error on [0, 8] (0.11 ulp in
/// exact arithmetic; `scripts/tanh_fit.py`), whose f32 coefficients were then moved by an ulp
/// or two each while that lowered the worst error of the f32 evaluation over every f32 of
/// [0.25, 8]. 8 multiply-adds and one division, one multiply-add fewer than the degree 6 / 3
/// fit of Eigen, XLA and MLAS (`generic_fast_tanh_float`) used before, and about half the work
/// of `1 - 2 / (e^2|x| + 1)` with a polynomial for small |x|. Every coefficient is positive,
/// so Horner's rule never cancels. Over every f32 of [2^-126, 10] (`tanh_exhaustive` and,
/// on each ISA, `vector_tanh_exhaustive`, run on demand; `tests/math.rs` checks every 61st):
/// within 5 ulp with fused multiply-adds (39 f32 at 5, 6806 at 4; Eigen's fit: 43 at 5,
/// 166 412 at 4) and 6 without (Eigen's: 7).
///
/// Evaluated on x clamped to [-C, C], with no other case: the rational is odd and every
/// rounding is symmetric in the sign, so `tanh(-x) = -tanh(x)` bit for bit, -0.0 stays -0.0
/// and a NaN passes the clamp (as `minps`/`maxps` with x second pass it) and stays NaN. `C`
/// is the least f32 at which the rational, evaluated in f32, is exactly 1 (8.037809 with
/// fused multiply-adds, 7.966406 without), below which it stays below 1; from 7.96 on tanh
/// rounds to within 4 ulp of 1, so the clamp gives 1 exactly for every larger |x|
/// (infinities included) with no select. Below |x| = 1e-4 both polynomials round to 1 and tanh(x) = x
/// exactly, subnormals included.
#[inline(always)]
pub(crate) fn tanh<const FMA: bool>(x: f32) -> f32 {
    let c = if FMA { TANH_CLAMP_FMA } else { TANH_CLAMP };
    // std's clamp keeps a NaN and -0.0, as `Vf32::clamp` does.
    let xc = x.clamp(-c, c);
    let s = xc * xc;
    poly::<FMA, 5>(s, &TANH_P) * xc / poly::<FMA, 5>(s, &TANH_Q)
}

/// tanh's numerator and denominator in x^2, from the highest degree (shared with `vmath.rs`).
pub(crate) const TANH_P: [f32; 5] = [
    1.529_297_2e-8,
    2.193_952e-5,
    3.574_337_3e-3,
    0.134_468_18,
    1.0,
];
pub(crate) const TANH_Q: [f32; 5] = [
    8.547_912_7e-7,
    3.415_758_3e-4,
    2.617_489_7e-2,
    0.467_801_5,
    1.0,
];
/// tanh's clamp: the least f32 whose rational is exactly 1.0 evaluated without fused
/// multiply-adds, and with them (`vmath::tanh` always has them).
pub(crate) const TANH_CLAMP: f32 = 7.966_406;
pub(crate) const TANH_CLAMP_FMA: f32 = 8.037_809;

/// |x| < 1: x P(x^2), a Chebyshev fit of erf(x)/x in x^2 (max error 1.2e-9).
pub(crate) const ERF_S: [f32; 7] = [
    7.875_875e-5,
    -8.016_864_3e-4,
    5.189_087_4e-3,
    -2.685_421_2e-2,
    1.128_359_5e-1,
    -3.761_262_7e-1,
    1.128_379_2,
];
/// 1 <= |x| < 4: 1 - exp(-x^2) Q(|x| - 2.5), Q a Chebyshev fit of erfc(x) e^(x^2) centred
/// on [1, 4] (max error 1e-8); beyond 4 erf is 1 in f32.
pub(crate) const ERF_L: [f32; 12] = [
    -4.123_142_8e-7,
    1.669_836_8e-6,
    -3.834_632_2e-6,
    1.436_468_2e-5,
    -5.932_730_3e-5,
    2.129_504_7e-4,
    -7.333_448_8e-4,
    2.466e-3,
    -8.001_617e-3,
    2.493_819_9e-2,
    -7.434_734_5e-2,
    2.108_063_6e-1,
];

#[inline(always)]
pub(crate) fn erf<const FMA: bool>(x: f32) -> f32 {
    let z = x.abs();
    let small = x * poly::<FMA, 7>(x * x, &ERF_S);
    let zc = z.min(4.0);
    let large = 1.0 - exp::<FMA>(-(zc * zc)) * poly::<FMA, 12>(zc - 2.5, &ERF_L);
    let large = if z >= 4.0 { 1.0 } else { large };
    // NaN fails `z >= 1` and takes the small branch, which propagates it.
    if z >= 1.0 {
        large.copysign(x)
    } else {
        small
    }
}
