//! The elementwise operations and their per-element semantics, generic over f32 and f64.
//!
//! Results agree with the reference interpreter (which computes in f64 and rounds once):
//! add, sub, mul, div, sqrt, reciprocal and the comparisons are exact in the element type;
//! rsqrt, pow, sin and cos are computed in f64 and rounded once, like the interpreter; f32 exp,
//! log, tanh and erf use the vectorized approximations of `math.rs` (within 5 ulp).

use crate::math;
use thunder_abi::prims::{BinaryPrim, UnaryPrim};

/// Comparisons are the table's own: generic over the element type already.
pub(crate) use thunder_abi::prims::ComparePrim as CompareOp;

/// A unary op as this executor runs it: the ones with their own (vectorizable) kernels, and
/// every other float prim of the elementwise table, computed by its row in f64 and rounded once
/// (the interpreter's result exactly).
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
    Table(UnaryPrim),
}

impl UnaryOp {
    /// The kernel for `prim`: its own where this executor has one, else the table's row.
    pub(crate) fn of(prim: UnaryPrim) -> UnaryOp {
        const OWN: [(UnaryPrim, UnaryOp); 11] = [
            (UnaryPrim::Neg, UnaryOp::Neg),
            (UnaryPrim::Abs, UnaryOp::Abs),
            (UnaryPrim::Exp, UnaryOp::Exp),
            (UnaryPrim::Log, UnaryOp::Log),
            (UnaryPrim::Sqrt, UnaryOp::Sqrt),
            (UnaryPrim::Rsqrt, UnaryOp::Rsqrt),
            (UnaryPrim::Tanh, UnaryOp::Tanh),
            (UnaryPrim::Sin, UnaryOp::Sin),
            (UnaryPrim::Cos, UnaryOp::Cos),
            (UnaryPrim::Erf, UnaryOp::Erf),
            (UnaryPrim::Reciprocal, UnaryOp::Reciprocal),
        ];
        OWN.iter()
            .find(|(p, _)| *p == prim)
            .map_or(UnaryOp::Table(prim), |&(_, op)| op)
    }
}

/// A binary op as this executor runs it: its own kernels, and every other prim the table
/// defines on floats, computed by its row in f64 and rounded once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    /// A float prim of the table without its own kernel here.
    Table(FloatRow),
}

/// A binary prim with the float function of its table row (only prims the table defines on
/// floats have one, so no kernel can meet an undefined row).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FloatRow {
    prim: BinaryPrim,
    f: fn(f64, f64) -> f64,
}

impl FloatRow {
    #[inline(always)]
    pub(crate) fn f(self) -> fn(f64, f64) -> f64 {
        self.f
    }
}

impl PartialEq for FloatRow {
    fn eq(&self, other: &Self) -> bool {
        self.prim == other.prim
    }
}

impl Eq for FloatRow {}

impl BinaryOp {
    /// The kernel for `prim` on floats, or `None` when the table does not define it there.
    pub(crate) fn of(prim: BinaryPrim) -> Option<BinaryOp> {
        const OWN: [(BinaryPrim, BinaryOp); 7] = [
            (BinaryPrim::Add, BinaryOp::Add),
            (BinaryPrim::Sub, BinaryOp::Sub),
            (BinaryPrim::Mul, BinaryOp::Mul),
            (BinaryPrim::Div, BinaryOp::Div),
            (BinaryPrim::Pow, BinaryOp::Pow),
            (BinaryPrim::Maximum, BinaryOp::Maximum),
            (BinaryPrim::Minimum, BinaryOp::Minimum),
        ];
        match OWN.iter().find(|(p, _)| *p == prim) {
            Some(&(_, op)) => Some(op),
            None => prim
                .rule()
                .float
                .map(|f| BinaryOp::Table(FloatRow { prim, f })),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    Amax,
    Amin,
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
            UnaryOp::Table(p) => ((p.rule().float)(f64::from(x))) as f32,
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
            UnaryOp::Table(p) => (p.rule().float)(x),
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
            BinaryOp::Table(row) => T::from_f64((row.f())(x.to_f64(), y.to_f64())),
        }
    }
}
