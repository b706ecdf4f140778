//! What each elementwise prim computes: one row per prim, read by every layer that computes
//! or checks one (the host's dtype rules, the interpreter, cpu-simd's scalar path, cuda-fuser's
//! code generator and its host emulator), so they cannot disagree.
//!
//! Semantics are executable: float lanes are computed in f64 and rounded once to the output
//! dtype by the caller; integer lanes in wrapping i64 and wrapped to the output dtype by the
//! caller; bool lanes as bool. A lane kind whose function is `None` is refused by the prim's
//! meta, so an executor never sees it. Vectorized kernels (cpu-simd's f32 `exp`, CUDA's
//! `expf`) are approximations of these functions and are tested against them.

use super::special::{digamma, div_floor, erfinv, int_pow, nan_max, trigamma};
use super::{BinaryPrim, ComparePrim, PredicatePrim, UnaryPrim};

/// How the CUDA code generator spells a prim on f32/f64 operands (f16/bf16 are computed in
/// f32). In templates `{a}` and `{b}` are the operands, `{f}` is `f` for f32 and empty for f64
/// (the math library's suffix) and `{one}` is 1 of the operand type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cuda {
    /// A math-library function: `exp(a)` in f64, `expf(a)` in f32.
    Fn(&'static str),
    /// An expression template, the same for f32 and f64.
    Expr(&'static str),
    /// Different templates for f32 and f64.
    Split {
        f32: &'static str,
        f64: &'static str,
    },
    /// No CUDA spelling: the fuser cannot claim the prim (it has no way to express it).
    None,
}

impl Cuda {
    /// The expression for `operands`, or `None` when the prim has no CUDA spelling.
    pub fn render(self, double: bool, operands: &[&str]) -> Option<String> {
        let template = match self {
            Cuda::Fn(name) => {
                let suffix = if double { "" } else { "f" };
                return Some(format!("{name}{suffix}({})", operands.join(", ")));
            }
            Cuda::Expr(t) => t,
            Cuda::Split { f32, f64 } => {
                if double {
                    f64
                } else {
                    f32
                }
            }
            Cuda::None => return None,
        };
        let mut out = template
            .replace("{f}", if double { "" } else { "f" })
            .replace("{one}", if double { "1.0" } else { "1.0f" });
        for (name, value) in ["{a}", "{b}"].iter().zip(operands) {
            out = out.replace(name, value);
        }
        Some(out)
    }
}

/// The semantics of a one-operand prim with output of the input's dtype.
#[derive(Debug, Clone, Copy)]
pub struct UnaryRule {
    pub float: fn(f64) -> f64,
    /// `None`: integer dtypes are refused (convert to a float dtype first).
    pub int: Option<fn(i64) -> i64>,
    pub cuda: Cuda,
}

/// The semantics of a two-operand prim with output of the operands' (equal) dtype.
#[derive(Debug, Clone, Copy)]
pub struct BinaryRule {
    /// `None`: float dtypes are refused (the bitwise ops).
    pub float: Option<fn(f64, f64) -> f64>,
    /// `None`: integer dtypes are refused. An `Err` is a run-time error of the prim
    /// (integer division by zero, a negative integer power).
    pub int: Option<fn(i64, i64) -> Result<i64, String>>,
    /// `None`: bool is refused. torch reads bool add and mul as logical or and and.
    pub bool: Option<fn(bool, bool) -> bool>,
    /// Spelling on float operands.
    pub cuda: Cuda,
}

impl UnaryRule {
    pub fn supports_int(&self) -> bool {
        self.int.is_some()
    }
}

impl BinaryRule {
    pub fn supports_float(&self) -> bool {
        self.float.is_some()
    }
    pub fn supports_int(&self) -> bool {
        self.int.is_some()
    }
    pub fn supports_bool(&self) -> bool {
        self.bool.is_some()
    }
}

const fn float_only(float: fn(f64) -> f64, cuda: Cuda) -> UnaryRule {
    UnaryRule {
        float,
        int: None,
        cuda,
    }
}

impl UnaryPrim {
    /// The row of the table for this prim.
    pub const fn rule(self) -> UnaryRule {
        use Cuda::{Expr, Fn};
        use UnaryPrim as P;
        match self {
            P::Neg => UnaryRule {
                float: |x| -x,
                int: Some(i64::wrapping_neg),
                cuda: Expr("(-{a})"),
            },
            P::Abs => UnaryRule {
                float: f64::abs,
                int: Some(i64::wrapping_abs),
                cuda: Fn("fabs"),
            },
            P::Exp => float_only(f64::exp, Fn("exp")),
            P::Exp2 => float_only(f64::exp2, Fn("exp2")),
            P::Expm1 => float_only(f64::exp_m1, Fn("expm1")),
            P::Log => float_only(f64::ln, Fn("log")),
            P::Log1p => float_only(f64::ln_1p, Fn("log1p")),
            P::Log2 => float_only(f64::log2, Fn("log2")),
            P::Log10 => float_only(f64::log10, Fn("log10")),
            P::Sqrt => float_only(f64::sqrt, Fn("sqrt")),
            P::Rsqrt => float_only(|x| 1.0 / x.sqrt(), Expr("({one} / sqrt{f}({a}))")),
            P::Tanh => float_only(f64::tanh, Fn("tanh")),
            P::Sin => float_only(f64::sin, Fn("sin")),
            P::Cos => float_only(f64::cos, Fn("cos")),
            P::Tan => float_only(f64::tan, Fn("tan")),
            P::Asin => float_only(f64::asin, Fn("asin")),
            P::Acos => float_only(f64::acos, Fn("acos")),
            P::Atan => float_only(f64::atan, Fn("atan")),
            P::Sinh => float_only(f64::sinh, Fn("sinh")),
            P::Cosh => float_only(f64::cosh, Fn("cosh")),
            P::Asinh => float_only(f64::asinh, Fn("asinh")),
            P::Acosh => float_only(f64::acosh, Fn("acosh")),
            P::Atanh => float_only(f64::atanh, Fn("atanh")),
            P::Erf => float_only(libm::erf, Fn("erf")),
            P::Erfc => float_only(libm::erfc, Fn("erfc")),
            P::Erfinv => float_only(erfinv, Fn("erfinv")),
            P::Lgamma => float_only(libm::lgamma, Fn("lgamma")),
            // CUDA's math library has neither; the fuser leaves them to other executors.
            P::Digamma => float_only(digamma, Cuda::None),
            P::Trigamma => float_only(trigamma, Cuda::None),
            P::Reciprocal => float_only(|x| 1.0 / x, Expr("({one} / {a})")),
            P::Floor => float_only(f64::floor, Fn("floor")),
            P::Ceil => float_only(f64::ceil, Fn("ceil")),
            // Half to even, like torch; CUDA's rint rounds the same way.
            P::Round => float_only(f64::round_ties_even, Fn("rint")),
            P::Trunc => float_only(f64::trunc, Fn("trunc")),
        }
    }
}

impl PredicatePrim {
    /// The test on a float lane (predicates refuse other dtypes).
    pub const fn float(self) -> fn(f64) -> bool {
        match self {
            // Set for -0 and negative NaNs.
            PredicatePrim::Signbit => f64::is_sign_negative,
        }
    }

    pub const fn cuda(self) -> Cuda {
        match self {
            PredicatePrim::Signbit => Cuda::Split {
                f32: "(__float_as_int({a}) < 0)",
                f64: "(__double_as_longlong({a}) < 0)",
            },
        }
    }
}

fn remainder_float(x: f64, y: f64) -> f64 {
    // As ATen: fmod, then moved into the divisor's sign (Python's `%`).
    let m = x % y;
    if m != 0.0 && (y < 0.0) != (m < 0.0) {
        m + y
    } else {
        m
    }
}

fn nonzero(y: i64) -> Result<(), String> {
    if y == 0 {
        Err("integer division by zero".to_string())
    } else {
        Ok(())
    }
}

fn remainder_int(x: i64, y: i64) -> Result<i64, String> {
    nonzero(y)?;
    let m = x.wrapping_rem(y);
    Ok(if m != 0 && (m < 0) != (y < 0) {
        m.wrapping_add(y)
    } else {
        m
    })
}

fn floor_divide_int(x: i64, y: i64) -> Result<i64, String> {
    nonzero(y)?;
    let q = x.wrapping_div(y);
    Ok(if (x < 0) != (y < 0) && x.wrapping_rem(y) != 0 {
        q - 1
    } else {
        q
    })
}

/// As torch: a shift by a negative amount or by the width or more gives 0 (left) or the sign
/// fill (right). In i64 lanes a left shift by 8..63 of an i8 already wraps to 0, and a right
/// shift of a sign-extended lane fills with its sign.
fn shift_left(x: i64, y: i64) -> Result<i64, String> {
    Ok(if (0..64).contains(&y) {
        x.wrapping_shl(y as u32)
    } else {
        0
    })
}

fn shift_right(x: i64, y: i64) -> Result<i64, String> {
    Ok(if (0..64).contains(&y) {
        x >> y
    } else {
        x >> 63
    })
}

impl BinaryPrim {
    /// The row of the table for this prim.
    pub const fn rule(self) -> BinaryRule {
        use BinaryPrim as P;
        use Cuda::{Expr, Fn};
        match self {
            P::Add => BinaryRule {
                float: Some(|x, y| x + y),
                int: Some(|x, y| Ok(x.wrapping_add(y))),
                bool: Some(|x, y| x || y),
                cuda: Expr("({a} + {b})"),
            },
            P::Sub => BinaryRule {
                float: Some(|x, y| x - y),
                int: Some(|x, y| Ok(x.wrapping_sub(y))),
                bool: None,
                cuda: Expr("({a} - {b})"),
            },
            P::Mul => BinaryRule {
                float: Some(|x, y| x * y),
                int: Some(|x, y| Ok(x.wrapping_mul(y))),
                bool: Some(|x, y| x && y),
                cuda: Expr("({a} * {b})"),
            },
            P::Div => BinaryRule {
                float: Some(|x, y| x / y),
                // Truncates toward zero, like torch's integer `div(rounding_mode="trunc")`.
                int: Some(|x, y| nonzero(y).map(|()| x.wrapping_div(y))),
                bool: None,
                cuda: Expr("({a} / {b})"),
            },
            P::Pow => BinaryRule {
                float: Some(f64::powf),
                int: Some(int_pow),
                bool: None,
                cuda: Fn("pow"),
            },
            P::Maximum => BinaryRule {
                float: Some(nan_max),
                int: Some(|x, y| Ok(x.max(y))),
                bool: Some(|x, y| x || y),
                cuda: Expr("nan_max({a}, {b})"),
            },
            P::Minimum => BinaryRule {
                float: Some(|x, y| -nan_max(-x, -y)),
                int: Some(|x, y| Ok(x.min(y))),
                bool: Some(|x, y| x && y),
                cuda: Expr("nan_min({a}, {b})"),
            },
            P::Remainder => BinaryRule {
                float: Some(remainder_float),
                int: Some(remainder_int),
                bool: None,
                cuda: Expr("py_rem({a}, {b})"),
            },
            // The sign of the dividend (C's fmod).
            P::Fmod => BinaryRule {
                float: Some(|x, y| x % y),
                int: Some(|x, y| nonzero(y).map(|()| x.wrapping_rem(y))),
                bool: None,
                cuda: Fn("fmod"),
            },
            // torch's `div(rounding_mode="floor")`.
            P::FloorDivide => BinaryRule {
                float: Some(div_floor),
                int: Some(floor_divide_int),
                bool: None,
                cuda: Cuda::None,
            },
            P::Atan2 => BinaryRule {
                float: Some(f64::atan2),
                int: None,
                bool: None,
                cuda: Fn("atan2"),
            },
            P::BitwiseAnd => BinaryRule {
                float: None,
                int: Some(|x, y| Ok(x & y)),
                bool: Some(|x, y| x & y),
                cuda: Cuda::None,
            },
            P::BitwiseOr => BinaryRule {
                float: None,
                int: Some(|x, y| Ok(x | y)),
                bool: Some(|x, y| x | y),
                cuda: Cuda::None,
            },
            P::BitwiseXor => BinaryRule {
                float: None,
                int: Some(|x, y| Ok(x ^ y)),
                bool: Some(|x, y| x ^ y),
                cuda: Cuda::None,
            },
            P::BitwiseLeftShift => BinaryRule {
                float: None,
                int: Some(shift_left),
                bool: None,
                cuda: Cuda::None,
            },
            P::BitwiseRightShift => BinaryRule {
                float: None,
                int: Some(shift_right),
                bool: None,
                cuda: Cuda::None,
            },
        }
    }
}

impl ComparePrim {
    /// Compares in any ordered type: executors compare in the wider lane of the two operands,
    /// so an int tensor against a float literal compares numerically.
    #[inline]
    pub fn eval<T: PartialOrd>(self, x: T, y: T) -> bool {
        match self {
            ComparePrim::Eq => x == y,
            ComparePrim::Ne => x != y,
            ComparePrim::Lt => x < y,
            ComparePrim::Le => x <= y,
            ComparePrim::Gt => x > y,
            ComparePrim::Ge => x >= y,
        }
    }

    /// The C operator, for generated code.
    pub const fn c_operator(self) -> &'static str {
        match self {
            ComparePrim::Eq => "==",
            ComparePrim::Ne => "!=",
            ComparePrim::Lt => "<",
            ComparePrim::Le => "<=",
            ComparePrim::Gt => ">",
            ComparePrim::Ge => ">=",
        }
    }
}
