//! Elementwise kernels over lanes. Float math is done in f64 and int math in wrapping i64; the
//! program rounds or wraps every result to the output dtype afterwards, which is exact for
//! add/sub/mul/div/sqrt and within the last rounding for the transcendental functions.

use crate::data::{int_to_float, lane_kind, LaneKind, Lanes, Scalar};
use std::borrow::Cow;
use thunder_abi::DTypeCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Tanh,
    Sin,
    Cos,
    Erf,
    Reciprocal,
    Exp2,
    Expm1,
    Log1p,
    Log2,
    Log10,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Erfc,
    Erfinv,
    Lgamma,
    Digamma,
    Trigamma,
    Floor,
    Ceil,
    /// Half to even, like torch.
    Round,
    Trunc,
    /// The sign bit (set for -0 and negative NaNs); the only unary op with b8 lanes out.
    Signbit,
}

impl UnaryOp {
    pub(crate) fn supports(self, kind: LaneKind) -> bool {
        match kind {
            LaneKind::Float => true,
            LaneKind::Int => matches!(self, UnaryOp::Neg | UnaryOp::Abs),
            LaneKind::Bool => false,
        }
    }

    fn float(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sin => x.sin(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Erf => libm::erf(x),
            UnaryOp::Reciprocal => 1.0 / x,
            UnaryOp::Exp2 => x.exp2(),
            UnaryOp::Expm1 => x.exp_m1(),
            UnaryOp::Log1p => x.ln_1p(),
            UnaryOp::Log2 => x.log2(),
            UnaryOp::Log10 => x.log10(),
            UnaryOp::Tan => x.tan(),
            UnaryOp::Asin => x.asin(),
            UnaryOp::Acos => x.acos(),
            UnaryOp::Atan => x.atan(),
            UnaryOp::Sinh => x.sinh(),
            UnaryOp::Cosh => x.cosh(),
            UnaryOp::Asinh => x.asinh(),
            UnaryOp::Acosh => x.acosh(),
            UnaryOp::Atanh => x.atanh(),
            UnaryOp::Erfc => libm::erfc(x),
            UnaryOp::Erfinv => erfinv(x),
            UnaryOp::Lgamma => libm::lgamma(x),
            UnaryOp::Digamma => digamma(x),
            UnaryOp::Trigamma => crate::special::trigamma(x),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Round => x.round_ties_even(),
            UnaryOp::Trunc => x.trunc(),
            // `unary` gives b8 lanes for it; as a number it is 0 or 1.
            UnaryOp::Signbit => f64::from(u8::from(x.is_sign_negative())),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    /// Sign of the divisor (Python's `%`, torch.remainder).
    Remainder,
    /// Sign of the dividend (C's fmod).
    Fmod,
    /// torch's `div(rounding_mode="floor")`.
    FloorDivide,
    Atan2,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

impl BinaryOp {
    pub(crate) fn supports(self, kind: LaneKind) -> bool {
        use BinaryOp::*;
        match kind {
            // torch reads bool add and mul as logical or and and; max and min agree with them.
            LaneKind::Bool => matches!(
                self,
                Add | Mul | Maximum | Minimum | BitAnd | BitOr | BitXor
            ),
            LaneKind::Int => self != Atan2,
            LaneKind::Float => !matches!(self, BitAnd | BitOr | BitXor | Shl | Shr),
        }
    }

    fn float(self, x: f64, y: f64) -> f64 {
        match self {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Pow => x.powf(y),
            BinaryOp::Maximum => nan_max(x, y),
            BinaryOp::Minimum => -nan_max(-x, -y),
            BinaryOp::Remainder => {
                // As ATen: fmod, then moved into the divisor's sign.
                let m = x % y;
                if m != 0.0 && (y < 0.0) != (m < 0.0) {
                    m + y
                } else {
                    m
                }
            }
            BinaryOp::Fmod => x % y,
            BinaryOp::FloorDivide => div_floor(x, y),
            BinaryOp::Atan2 => x.atan2(y),
            // Refused for float lanes by `supports`.
            BinaryOp::BitAnd
            | BinaryOp::BitOr
            | BinaryOp::BitXor
            | BinaryOp::Shl
            | BinaryOp::Shr => f64::NAN,
        }
    }

    fn int(self, x: i64, y: i64) -> Result<i64, String> {
        Ok(match self {
            BinaryOp::Add => x.wrapping_add(y),
            BinaryOp::Sub => x.wrapping_sub(y),
            BinaryOp::Mul => x.wrapping_mul(y),
            BinaryOp::Div if y == 0 => return Err("integer division by zero".to_string()),
            // Truncates toward zero, like torch's integer `div(rounding_mode="trunc")`.
            BinaryOp::Div => x.wrapping_div(y),
            BinaryOp::Pow => int_pow(x, y)?,
            BinaryOp::Maximum => x.max(y),
            BinaryOp::Minimum => x.min(y),
            BinaryOp::Remainder | BinaryOp::Fmod | BinaryOp::FloorDivide if y == 0 => {
                return Err("integer division by zero".to_string())
            }
            BinaryOp::Remainder => {
                let m = x.wrapping_rem(y);
                if m != 0 && (m < 0) != (y < 0) {
                    m.wrapping_add(y)
                } else {
                    m
                }
            }
            BinaryOp::Fmod => x.wrapping_rem(y),
            BinaryOp::FloorDivide => {
                let q = x.wrapping_div(y);
                if (x < 0) != (y < 0) && x.wrapping_rem(y) != 0 {
                    q - 1
                } else {
                    q
                }
            }
            BinaryOp::Atan2 => return Err("not defined for integers".to_string()),
            BinaryOp::BitAnd => x & y,
            BinaryOp::BitOr => x | y,
            BinaryOp::BitXor => x ^ y,
            // As torch: a shift by a negative amount or by the width or more gives 0 (left)
            // or the sign fill (right). In i64 lanes a left shift by 8..63 of an i8 already
            // wraps to 0, and a right shift of a sign-extended lane fills with its sign.
            BinaryOp::Shl if !(0..64).contains(&y) => 0,
            BinaryOp::Shl => x.wrapping_shl(y as u32),
            BinaryOp::Shr if !(0..64).contains(&y) => x >> 63,
            BinaryOp::Shr => x >> y,
        })
    }

    fn bool(self, x: bool, y: bool) -> Result<bool, String> {
        match self {
            BinaryOp::Add | BinaryOp::Maximum => Ok(x || y),
            BinaryOp::Mul | BinaryOp::Minimum => Ok(x && y),
            BinaryOp::BitAnd => Ok(x & y),
            BinaryOp::BitOr => Ok(x | y),
            BinaryOp::BitXor => Ok(x ^ y),
            BinaryOp::Sub
            | BinaryOp::Div
            | BinaryOp::Pow
            | BinaryOp::Remainder
            | BinaryOp::Fmod
            | BinaryOp::FloorDivide
            | BinaryOp::Atan2
            | BinaryOp::Shl
            | BinaryOp::Shr => Err("not defined for b8".to_string()),
        }
    }
}

/// Inverse error function: Giles' single-precision approximation ("Approximating the erfinv
/// function", 2010), refined by Newton steps on `libm::erf` (on `ln(erfc)` towards +-1, where
/// `erf` is flat) in f64 until they stop moving, so the result is within a few f64 ulps.
pub(crate) fn erfinv(y: f64) -> f64 {
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
pub(crate) fn digamma(x: f64) -> f64 {
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
fn div_floor(x: f64, y: f64) -> f64 {
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
pub(crate) fn nan_max(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x > y || (x == y && y.is_sign_negative()) {
        x
    } else {
        y
    }
}

fn int_pow(base: i64, exp: i64) -> Result<i64, String> {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    fn eval<T: PartialOrd>(self, x: T, y: T) -> bool {
        match self {
            CompareOp::Eq => x == y,
            CompareOp::Ne => x != y,
            CompareOp::Lt => x < y,
            CompareOp::Le => x <= y,
            CompareOp::Gt => x > y,
            CompareOp::Ge => x >= y,
        }
    }
}

/// An operand at run time: a tensor's lanes or a literal repeated over them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Src<'a> {
    Tensor(&'a Lanes),
    Scalar(Scalar),
}

impl Src<'_> {
    pub(crate) fn kind(&self) -> LaneKind {
        match self {
            Src::Tensor(l) => l.kind(),
            Src::Scalar(s) => s.kind(),
        }
    }
}

/// A typed operand of `n` elements.
enum View<'a, T: Clone> {
    Slice(Cow<'a, [T]>),
    Splat(T),
}

impl<T: Copy> View<'_, T> {
    fn at(&self, i: usize) -> T {
        match self {
            View::Slice(s) => s[i],
            View::Splat(v) => *v,
        }
    }
}

fn checked<T: Clone>(view: View<'_, T>, n: usize) -> Result<View<'_, T>, String> {
    match &view {
        View::Slice(s) if s.len() != n => Err(format!(
            "internal: operand has {} elements, expected {n}",
            s.len()
        )),
        View::Slice(_) | View::Splat(_) => Ok(view),
    }
}

/// The operand in the f64 lane; ints and bools widen (comparisons against float literals).
fn floats<'a>(src: &Src<'a>, n: usize) -> Result<View<'a, f64>, String> {
    let view = match *src {
        Src::Tensor(Lanes::Float(v)) => View::Slice(Cow::Borrowed(v.as_slice())),
        Src::Tensor(Lanes::Int(v)) => View::Slice(v.iter().map(|&x| x as f64).collect()),
        Src::Tensor(Lanes::Bool(v)) => {
            View::Slice(v.iter().map(|&x| f64::from(u8::from(x))).collect())
        }
        Src::Scalar(Scalar::Float(x)) => View::Splat(x),
        Src::Scalar(Scalar::Int(x)) => View::Splat(x as f64),
        Src::Scalar(Scalar::Bool(x)) => View::Splat(f64::from(u8::from(x))),
    };
    checked(view, n)
}

fn ints<'a>(src: &Src<'a>, n: usize) -> Result<View<'a, i64>, String> {
    let view = match *src {
        Src::Tensor(Lanes::Int(v)) => View::Slice(Cow::Borrowed(v.as_slice())),
        Src::Tensor(Lanes::Bool(v)) => View::Slice(v.iter().map(|&x| i64::from(x)).collect()),
        Src::Scalar(Scalar::Int(x)) => View::Splat(x),
        Src::Scalar(Scalar::Bool(x)) => View::Splat(i64::from(x)),
        Src::Tensor(Lanes::Float(_)) | Src::Scalar(Scalar::Float(_)) => {
            return Err("internal: float operand in an integer op".to_string())
        }
    };
    checked(view, n)
}

fn bools<'a>(src: &Src<'a>, n: usize) -> Result<View<'a, bool>, String> {
    let view = match *src {
        Src::Tensor(Lanes::Bool(v)) => View::Slice(Cow::Borrowed(v.as_slice())),
        Src::Scalar(Scalar::Bool(x)) => View::Splat(x),
        Src::Tensor(Lanes::Int(_) | Lanes::Float(_))
        | Src::Scalar(Scalar::Int(_) | Scalar::Float(_)) => {
            return Err("internal: numeric operand in a b8 op".to_string())
        }
    };
    checked(view, n)
}

pub(crate) fn unary(op: UnaryOp, a: &Lanes) -> Result<Lanes, String> {
    match a {
        Lanes::Float(v) if op == UnaryOp::Signbit => Ok(Lanes::Bool(
            v.iter().map(|x| x.is_sign_negative()).collect(),
        )),
        Lanes::Float(v) => Ok(Lanes::Float(v.iter().map(|&x| op.float(x)).collect())),
        Lanes::Int(v) if op == UnaryOp::Neg => {
            Ok(Lanes::Int(v.iter().map(|x| x.wrapping_neg()).collect()))
        }
        Lanes::Int(v) if op == UnaryOp::Abs => {
            Ok(Lanes::Int(v.iter().map(|x| x.wrapping_abs()).collect()))
        }
        Lanes::Int(_) => {
            Err("not defined for integers (convert to a float dtype first)".to_string())
        }
        Lanes::Bool(_) => Err("not defined for b8".to_string()),
    }
}

/// `a op b` over `n` elements in the lane of the output dtype.
pub(crate) fn binary(
    op: BinaryOp,
    a: Src<'_>,
    b: Src<'_>,
    out: LaneKind,
    n: usize,
) -> Result<Lanes, String> {
    Ok(match out {
        LaneKind::Float => {
            let (a, b) = (floats(&a, n)?, floats(&b, n)?);
            Lanes::Float((0..n).map(|i| op.float(a.at(i), b.at(i))).collect())
        }
        LaneKind::Int => {
            let (a, b) = (ints(&a, n)?, ints(&b, n)?);
            Lanes::Int(
                (0..n)
                    .map(|i| op.int(a.at(i), b.at(i)))
                    .collect::<Result<_, _>>()?,
            )
        }
        LaneKind::Bool => {
            let (a, b) = (bools(&a, n)?, bools(&b, n)?);
            Lanes::Bool(
                (0..n)
                    .map(|i| op.bool(a.at(i), b.at(i)))
                    .collect::<Result<_, _>>()?,
            )
        }
    })
}

/// Compares in the widest lane of the two operands, so an int tensor against a float literal
/// compares numerically instead of truncating the literal.
pub(crate) fn compare(op: CompareOp, a: Src<'_>, b: Src<'_>, n: usize) -> Result<Lanes, String> {
    let out = match a.kind().max(b.kind()) {
        LaneKind::Float => {
            let (a, b) = (floats(&a, n)?, floats(&b, n)?);
            (0..n).map(|i| op.eval(a.at(i), b.at(i))).collect()
        }
        LaneKind::Int => {
            let (a, b) = (ints(&a, n)?, ints(&b, n)?);
            (0..n).map(|i| op.eval(a.at(i), b.at(i))).collect()
        }
        LaneKind::Bool => {
            let (a, b) = (bools(&a, n)?, bools(&b, n)?);
            (0..n).map(|i| op.eval(a.at(i), b.at(i))).collect()
        }
    };
    Ok(Lanes::Bool(out))
}

pub(crate) fn where_(pred: &Lanes, a: Src<'_>, b: Src<'_>, out: LaneKind) -> Result<Lanes, String> {
    let Lanes::Bool(pred) = pred else {
        return Err("internal: condition is not b8".to_string());
    };
    let n = pred.len();
    Ok(match out {
        LaneKind::Float => {
            let (a, b) = (floats(&a, n)?, floats(&b, n)?);
            Lanes::Float(
                pred.iter()
                    .enumerate()
                    .map(|(i, &p)| if p { a.at(i) } else { b.at(i) })
                    .collect(),
            )
        }
        LaneKind::Int => {
            let (a, b) = (ints(&a, n)?, ints(&b, n)?);
            Lanes::Int(
                pred.iter()
                    .enumerate()
                    .map(|(i, &p)| if p { a.at(i) } else { b.at(i) })
                    .collect(),
            )
        }
        LaneKind::Bool => {
            let (a, b) = (bools(&a, n)?, bools(&b, n)?);
            Lanes::Bool(
                pred.iter()
                    .enumerate()
                    .map(|(i, &p)| if p { a.at(i) } else { b.at(i) })
                    .collect(),
            )
        }
    })
}

/// Values of `a` as `to`; the caller's normalize then rounds floats and wraps ints.
pub(crate) fn convert(a: &Lanes, to: DTypeCode) -> Lanes {
    match (a, lane_kind(to)) {
        (Lanes::Float(v), LaneKind::Float) => Lanes::Float(v.clone()),
        // `as` truncates toward zero, saturates at the i64 range and maps NaN to 0.
        (Lanes::Float(v), LaneKind::Int) => Lanes::Int(v.iter().map(|&x| x as i64).collect()),
        (Lanes::Float(v), LaneKind::Bool) => Lanes::Bool(v.iter().map(|&x| x != 0.0).collect()),
        (Lanes::Int(v), LaneKind::Float) => {
            Lanes::Float(v.iter().map(|&x| int_to_float(x, to)).collect())
        }
        (Lanes::Int(v), LaneKind::Int) => Lanes::Int(v.clone()),
        (Lanes::Int(v), LaneKind::Bool) => Lanes::Bool(v.iter().map(|&x| x != 0).collect()),
        (Lanes::Bool(v), LaneKind::Float) => {
            Lanes::Float(v.iter().map(|&x| f64::from(u8::from(x))).collect())
        }
        (Lanes::Bool(v), LaneKind::Int) => Lanes::Int(v.iter().map(|&x| i64::from(x)).collect()),
        (Lanes::Bool(v), LaneKind::Bool) => Lanes::Bool(v.clone()),
    }
}
