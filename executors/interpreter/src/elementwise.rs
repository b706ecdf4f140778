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
}

impl BinaryOp {
    pub(crate) fn supports(self, kind: LaneKind) -> bool {
        // torch reads bool add and mul as logical or and and; max and min agree with them.
        kind != LaneKind::Bool
            || matches!(
                self,
                BinaryOp::Add | BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum
            )
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
        })
    }

    fn bool(self, x: bool, y: bool) -> Result<bool, String> {
        match self {
            BinaryOp::Add | BinaryOp::Maximum => Ok(x || y),
            BinaryOp::Mul | BinaryOp::Minimum => Ok(x && y),
            BinaryOp::Sub | BinaryOp::Div | BinaryOp::Pow => Err("not defined for b8".to_string()),
        }
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
