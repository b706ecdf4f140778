//! The elementwise operations and their per-element semantics, generic over f32 and f64.
//!
//! Results agree with the reference interpreter (which computes in f64 and rounds once):
//! add, sub, mul, div, sqrt, reciprocal and the comparisons are exact in the element type;
//! rsqrt, pow, sin and cos are computed in f64 and rounded once, like the interpreter; f32 exp,
//! log, tanh and erf use the vectorized approximations of `math.rs` (within 3 ulp).

use crate::math;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    Amax,
    Amin,
}

impl CompareOp {
    #[inline(always)]
    pub(crate) fn eval<T: PartialOrd>(self, x: T, y: T) -> bool {
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

/// IEEE maximum that propagates NaN and orders -0 below +0, like torch (and the interpreter).
#[inline(always)]
pub(crate) fn nan_max<T: Real>(x: T, y: T) -> T {
    if x.is_nan() || y.is_nan() {
        T::NAN
    } else if x > y || (x == y && y.is_sign_negative()) {
        x
    } else {
        y
    }
}

#[inline(always)]
pub(crate) fn nan_min<T: Real>(x: T, y: T) -> T {
    -nan_max(-x, -y)
}

/// f32 or f64: the element types the kernels are written for.
pub(crate) trait Real:
    Copy
    + PartialOrd
    + Send
    + Sync
    + 'static
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    const NAN: Self;
    fn is_nan(self) -> bool;
    fn is_sign_negative(self) -> bool;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    /// True when `v` is exactly representable, so an op with it can be done in this type
    /// with the interpreter's result.
    fn exact(v: f64) -> bool;
    fn unary<const FMA: bool>(op: UnaryOp, x: Self) -> Self;
}

impl Real for f32 {
    const NAN: f32 = f32::NAN;
    #[inline(always)]
    fn is_nan(self) -> bool {
        self.is_nan()
    }
    #[inline(always)]
    fn is_sign_negative(self) -> bool {
        self.is_sign_negative()
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn exact(v: f64) -> bool {
        v.is_nan() || f64::from(v as f32) == v
    }
    #[inline(always)]
    fn unary<const FMA: bool>(op: UnaryOp, x: f32) -> f32 {
        match op {
            UnaryOp::Neg => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exp => math::exp::<FMA>(x),
            UnaryOp::Log => math::log::<FMA>(x),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => (1.0 / f64::from(x).sqrt()) as f32,
            UnaryOp::Tanh => math::tanh::<FMA>(x),
            UnaryOp::Sin => f64::from(x).sin() as f32,
            UnaryOp::Cos => f64::from(x).cos() as f32,
            UnaryOp::Erf => math::erf::<FMA>(x),
            UnaryOp::Reciprocal => 1.0 / x,
        }
    }
}

impl Real for f64 {
    const NAN: f64 = f64::NAN;
    #[inline(always)]
    fn is_nan(self) -> bool {
        self.is_nan()
    }
    #[inline(always)]
    fn is_sign_negative(self) -> bool {
        self.is_sign_negative()
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn exact(_: f64) -> bool {
        true
    }
    /// f64 uses std (and libm for erf): the same functions as the interpreter, not vectorized.
    #[inline(always)]
    fn unary<const FMA: bool>(op: UnaryOp, x: f64) -> f64 {
        match op {
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
        }
    }
}

impl BinaryOp {
    /// `x op y` in `T`; pow goes through f64 like the interpreter.
    #[inline(always)]
    pub(crate) fn eval<T: Real>(self, x: T, y: T) -> T {
        match self {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Pow => T::from_f64(x.to_f64().powf(y.to_f64())),
            BinaryOp::Maximum => nan_max(x, y),
            BinaryOp::Minimum => nan_min(x, y),
        }
    }
}
