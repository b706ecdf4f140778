//! Loops over one tile of registers, one per instruction kind. Each is `#[inline(always)]` so
//! it is compiled inside the dispatched tile loop (`exec.rs`) with that loop's target features,
//! and each takes its operation as a closure chosen outside the loop so LLVM vectorizes a loop
//! body with no branches on the op.

use crate::ops::{nan_max, BinaryOp, CompareOp, Real, ReduceOp, UnaryOp};

/// A source operand over a tile: a register's elements or one value for all of them.
#[derive(Clone, Copy)]
pub(crate) enum In<'a, T> {
    S(&'a [T]),
    C(T),
}

#[inline(always)]
fn map<T: Copy, U>(d: &mut [U], a: &[T], f: impl Fn(T) -> U) {
    for (o, &x) in d.iter_mut().zip(a) {
        *o = f(x);
    }
}

#[inline(always)]
fn zip<T: Copy, U: Copy>(d: &mut [U], a: In<'_, T>, b: In<'_, T>, f: impl Fn(T, T) -> U) {
    match (a, b) {
        (In::S(x), In::S(y)) => {
            for ((o, &x), &y) in d.iter_mut().zip(x).zip(y) {
                *o = f(x, y);
            }
        }
        (In::S(x), In::C(c)) => map(d, x, |x| f(x, c)),
        (In::C(c), In::S(y)) => map(d, y, |y| f(c, y)),
        (In::C(c), In::C(e)) => d.fill(f(c, e)),
    }
}

macro_rules! each_unary {
    ($op:expr, $d:expr, $a:expr, $T:ty, $F:ident; $($v:ident),*) => {
        match $op {
            $(UnaryOp::$v => map($d, $a, |x: $T| <$T>::unary::<$F>(UnaryOp::$v, x)),)*
            UnaryOp::Table(p) => {
                let f = p.rule().float;
                map($d, $a, |x: $T| <$T>::from_f64(f(x.to_f64())))
            }
        }
    };
}

#[inline(always)]
pub(crate) fn unary<T: Real, const FMA: bool>(op: UnaryOp, d: &mut [T], a: &[T]) {
    each_unary!(op, d, a, T, FMA; Neg, Abs, Exp, Log, Sqrt, Rsqrt, Tanh, Sin, Cos, Erf, Reciprocal)
}

#[inline(always)]
pub(crate) fn binary<T: Real>(op: BinaryOp, d: &mut [T], a: In<'_, T>, b: In<'_, T>) {
    match op {
        BinaryOp::Add => zip(d, a, b, |x, y| x + y),
        BinaryOp::Sub => zip(d, a, b, |x, y| x - y),
        BinaryOp::Mul => zip(d, a, b, |x, y| x * y),
        BinaryOp::Div => zip(d, a, b, |x, y| x / y),
        BinaryOp::Pow => zip(d, a, b, |x, y| BinaryOp::Pow.eval(x, y)),
        BinaryOp::Maximum => zip(d, a, b, |x, y| BinaryOp::Maximum.eval(x, y)),
        BinaryOp::Minimum => zip(d, a, b, |x, y| BinaryOp::Minimum.eval(x, y)),
        BinaryOp::Table(_) => zip(d, a, b, |x, y| op.eval(x, y)),
    }
}

/// `x op lit` (or `lit op x`) computed in f64 and rounded once: for f32 with a literal f32
/// cannot hold exactly, this is the interpreter's result where f32 arithmetic would differ.
#[inline(always)]
pub(crate) fn binary_wide<T: Real>(op: BinaryOp, d: &mut [T], x: &[T], lit: f64, lit_first: bool) {
    macro_rules! arms {
        ($($v:ident => $e:expr),*) => {
            match op {
                $(BinaryOp::$v => if lit_first {
                    map(d, x, |x| T::from_f64($e(lit, x.to_f64())))
                } else {
                    map(d, x, |x| T::from_f64($e(x.to_f64(), lit)))
                },)*
                BinaryOp::Table(row) => {
                    let f = row.f();
                    if lit_first {
                        map(d, x, |x| T::from_f64(f(lit, x.to_f64())))
                    } else {
                        map(d, x, |x| T::from_f64(f(x.to_f64(), lit)))
                    }
                }
            }
        };
    }
    arms!(
        Add => |x: f64, y: f64| x + y,
        Sub => |x: f64, y: f64| x - y,
        Mul => |x: f64, y: f64| x * y,
        Div => |x: f64, y: f64| x / y,
        Pow => |x: f64, y: f64| x.powf(y),
        Maximum => |x: f64, y: f64| nan_max(x, y),
        Minimum => |x: f64, y: f64| -nan_max(-x, -y)
    )
}

#[inline(always)]
pub(crate) fn compare<T: Copy + PartialOrd>(
    op: CompareOp,
    d: &mut [u8],
    a: In<'_, T>,
    b: In<'_, T>,
) {
    match op {
        CompareOp::Eq => zip(d, a, b, |x, y| u8::from(x == y)),
        CompareOp::Ne => zip(d, a, b, |x, y| u8::from(x != y)),
        CompareOp::Lt => zip(d, a, b, |x, y| u8::from(x < y)),
        CompareOp::Le => zip(d, a, b, |x, y| u8::from(x <= y)),
        CompareOp::Gt => zip(d, a, b, |x, y| u8::from(x > y)),
        CompareOp::Ge => zip(d, a, b, |x, y| u8::from(x >= y)),
    }
}

/// Compares a tensor with an f64 literal in f64, like the interpreter (exact for f32 and for
/// i64 up to 2^53, and what the interpreter does beyond).
#[inline(always)]
pub(crate) fn compare_wide<T: Copy>(
    op: CompareOp,
    d: &mut [u8],
    x: &[T],
    to_f64: impl Fn(T) -> f64,
    lit: f64,
    lit_first: bool,
) {
    macro_rules! arms {
        ($($v:ident),*) => {
            match op {
                $(CompareOp::$v => if lit_first {
                    map(d, x, |x| u8::from(CompareOp::$v.eval(lit, to_f64(x))))
                } else {
                    map(d, x, |x| u8::from(CompareOp::$v.eval(to_f64(x), lit)))
                },)*
            }
        };
    }
    arms!(Eq, Ne, Lt, Le, Gt, Ge)
}

#[inline(always)]
pub(crate) fn where_<T: Copy>(d: &mut [T], pred: &[u8], a: In<'_, T>, b: In<'_, T>) {
    match (a, b) {
        (In::S(x), In::S(y)) => {
            for (((o, &p), &x), &y) in d.iter_mut().zip(pred).zip(x).zip(y) {
                *o = if p != 0 { x } else { y };
            }
        }
        (In::S(x), In::C(c)) => {
            for ((o, &p), &x) in d.iter_mut().zip(pred).zip(x) {
                *o = if p != 0 { x } else { c };
            }
        }
        (In::C(c), In::S(y)) => {
            for ((o, &p), &y) in d.iter_mut().zip(pred).zip(y) {
                *o = if p != 0 { c } else { y };
            }
        }
        (In::C(c), In::C(e)) => map(d, pred, |p| if p != 0 { c } else { e }),
    }
}

#[inline(always)]
pub(crate) fn convert<T: Copy, U>(d: &mut [U], a: &[T], f: impl Fn(T) -> U) {
    map(d, a, f);
}

/// The fold of a tile into one f64: 8 independent lanes so the loop vectorizes, f64 so that a
/// long f32 sum keeps the interpreter's accuracy.
#[inline(always)]
pub(crate) fn reduce_tile<T: Real>(op: ReduceOp, a: &[T]) -> f64 {
    let chunks = a.chunks_exact(8);
    let rest = chunks.remainder();
    match op {
        ReduceOp::Sum => {
            let mut s = [0f64; 8];
            for c in chunks {
                for l in 0..8 {
                    s[l] += c[l].to_f64();
                }
            }
            let tail: f64 = rest.iter().map(|x| x.to_f64()).sum();
            s.iter().sum::<f64>() + tail
        }
        ReduceOp::Amax => {
            let mut m = [f64::NEG_INFINITY; 8];
            for c in chunks {
                for l in 0..8 {
                    m[l] = nan_max(m[l], c[l].to_f64());
                }
            }
            let tail = rest
                .iter()
                .fold(f64::NEG_INFINITY, |m, x| nan_max(m, x.to_f64()));
            m.iter().fold(tail, |acc, &x| nan_max(acc, x))
        }
        ReduceOp::Amin => {
            let mut m = [f64::INFINITY; 8];
            for c in chunks {
                for l in 0..8 {
                    m[l] = nan_min(m[l], c[l].to_f64());
                }
            }
            let tail = rest
                .iter()
                .fold(f64::INFINITY, |m, x| nan_min(m, x.to_f64()));
            m.iter().fold(tail, |acc, &x| nan_min(acc, x))
        }
    }
}

/// The minimum, NaN-propagating with -0 below +0, as the mirror image of `nan_max`.
#[inline(always)]
fn nan_min(x: f64, y: f64) -> f64 {
    -nan_max(-x, -y)
}

#[inline(always)]
pub(crate) fn combine(op: ReduceOp, acc: f64, x: f64) -> f64 {
    match op {
        ReduceOp::Sum => acc + x,
        ReduceOp::Amax => nan_max(acc, x),
        ReduceOp::Amin => nan_min(acc, x),
    }
}
