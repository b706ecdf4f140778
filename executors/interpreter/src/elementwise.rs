//! Elementwise kernels over lanes, computed by the rows of the elementwise table
//! (`thunder_abi::prims::elementwise`): float math in f64 and int math in wrapping i64; the
//! program rounds or wraps every result to the output dtype afterwards, which is exact for
//! add/sub/mul/div/sqrt and within the last rounding for the transcendental functions.

use crate::data::{int_to_float, lane_kind, LaneKind, Lanes, Scalar};
use std::borrow::Cow;
use thunder_abi::prims::{BinaryPrim, ComparePrim, PredicatePrim, UnaryPrim};
use thunder_abi::DTypeCode;

/// Whether the table defines `op` on lanes of `kind` (the host's meta refuses the rest, so
/// this only guards against a host that sends what the contract forbids).
pub(crate) fn unary_supports(op: UnaryPrim, kind: LaneKind) -> bool {
    match kind {
        LaneKind::Float => true,
        LaneKind::Int => op.rule().supports_int(),
        LaneKind::Bool => false,
    }
}

pub(crate) fn binary_supports(op: BinaryPrim, kind: LaneKind) -> bool {
    let rule = op.rule();
    match kind {
        LaneKind::Float => rule.supports_float(),
        LaneKind::Int => rule.supports_int(),
        LaneKind::Bool => rule.supports_bool(),
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

pub(crate) fn unary(op: UnaryPrim, a: &Lanes) -> Result<Lanes, String> {
    let rule = op.rule();
    match (a, rule.int) {
        (Lanes::Float(v), _) => Ok(Lanes::Float(v.iter().map(|&x| (rule.float)(x)).collect())),
        (Lanes::Int(v), Some(int)) => Ok(Lanes::Int(v.iter().map(|&x| int(x)).collect())),
        (Lanes::Int(_), None) => {
            Err("not defined for integers (convert to a float dtype first)".to_string())
        }
        (Lanes::Bool(_), _) => Err("not defined for b8".to_string()),
    }
}

/// A float test with b8 lanes out.
pub(crate) fn predicate(op: PredicatePrim, a: &Lanes) -> Result<Lanes, String> {
    let test = op.float();
    match a {
        Lanes::Float(v) => Ok(Lanes::Bool(v.iter().map(|&x| test(x)).collect())),
        Lanes::Int(_) | Lanes::Bool(_) => Err("defined for float dtypes only".to_string()),
    }
}

/// `a op b` over `n` elements in the lane of the output dtype.
pub(crate) fn binary(
    op: BinaryPrim,
    a: Src<'_>,
    b: Src<'_>,
    out: LaneKind,
    n: usize,
) -> Result<Lanes, String> {
    let rule = op.rule();
    let undefined = |what: &str| Err(format!("not defined for {what}"));
    Ok(match out {
        LaneKind::Float => {
            let Some(f) = rule.float else {
                return undefined("floats");
            };
            let (a, b) = (floats(&a, n)?, floats(&b, n)?);
            Lanes::Float((0..n).map(|i| f(a.at(i), b.at(i))).collect())
        }
        LaneKind::Int => {
            let Some(f) = rule.int else {
                return undefined("integers");
            };
            let (a, b) = (ints(&a, n)?, ints(&b, n)?);
            Lanes::Int(
                (0..n)
                    .map(|i| f(a.at(i), b.at(i)))
                    .collect::<Result<_, _>>()?,
            )
        }
        LaneKind::Bool => {
            let Some(f) = rule.bool else {
                return undefined("b8");
            };
            let (a, b) = (bools(&a, n)?, bools(&b, n)?);
            Lanes::Bool((0..n).map(|i| f(a.at(i), b.at(i))).collect())
        }
    })
}

/// Compares in the widest lane of the two operands, so an int tensor against a float literal
/// compares numerically instead of truncating the literal.
pub(crate) fn compare(op: ComparePrim, a: Src<'_>, b: Src<'_>, n: usize) -> Result<Lanes, String> {
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
