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
use super::{BinaryPrim, ComparePrim, PredicatePrim, Prim, PrimKind, UnaryPrim};

/// How the CUDA code generator spells a prim on f32/f64 operands (f16/bf16 are computed in
/// f32). In templates `{a}` and `{b}` are the operands, `{f}` is `f` for f32 and empty for f64
/// (the math library's suffix) and `{one}` is 1 of the operand type. A row without a spelling
/// (`cuda: None`) cannot be claimed by the fuser: there is no way to express it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaSpelling {
    /// A math-library function: `exp(a)` in f64, `expf(a)` in f32.
    Fn(&'static str),
    /// An expression template, the same for f32 and f64.
    Expr(&'static str),
    /// Different templates for f32 and f64.
    Split {
        f32: &'static str,
        f64: &'static str,
    },
    /// A device function defined by `source` (for both `name` on double and `name`f on float),
    /// which the code generator includes in the kernels that call it.
    Device {
        name: &'static str,
        source: &'static str,
    },
}

impl CudaSpelling {
    /// The expression for `operands`.
    pub fn render(self, double: bool, operands: &[&str]) -> String {
        let template = match self {
            CudaSpelling::Fn(name) | CudaSpelling::Device { name, .. } => {
                let suffix = if double { "" } else { "f" };
                return format!("{name}{suffix}({})", operands.join(", "));
            }
            CudaSpelling::Expr(t) => t,
            CudaSpelling::Split { f32, f64 } => {
                if double {
                    f64
                } else {
                    f32
                }
            }
        };
        let out = template
            .replace("{f}", if double { "" } else { "f" })
            .replace("{one}", if double { "1.0" } else { "1.0f" });
        substitute(out, operands)
    }

    /// The expression on integer operands of C type `ctype`.
    pub fn render_int(self, ctype: &str, operands: &[&str]) -> String {
        let template = match self {
            CudaSpelling::Fn(name) | CudaSpelling::Device { name, .. } => {
                return format!("{name}({})", operands.join(", "))
            }
            CudaSpelling::Expr(t) | CudaSpelling::Split { f64: t, .. } => t,
        };
        substitute(template.replace("{t}", ctype), operands)
    }
}

fn substitute(mut out: String, operands: &[&str]) -> String {
    for (name, value) in ["{a}", "{b}"].iter().zip(operands) {
        out = out.replace(name, value);
    }
    out
}

/// An elementwise prim with a row in this table: one or two operands, computed lane by lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elementwise {
    Unary(UnaryPrim),
    Predicate(PredicatePrim),
    Binary(BinaryPrim),
    Compare(ComparePrim),
}

impl Elementwise {
    pub const fn of(prim: Prim) -> Option<Elementwise> {
        match prim.kind() {
            PrimKind::Unary(p) => Some(Elementwise::Unary(p)),
            PrimKind::Predicate(p) => Some(Elementwise::Predicate(p)),
            PrimKind::Binary(p) => Some(Elementwise::Binary(p)),
            PrimKind::Compare(p) => Some(Elementwise::Compare(p)),
            PrimKind::Where(_)
            | PrimKind::Convert(_)
            | PrimKind::Shape(_)
            | PrimKind::Indexing(_)
            | PrimKind::Reduction(_)
            | PrimKind::Scan(_)
            | PrimKind::Sort(_)
            | PrimKind::Conv(_)
            | PrimKind::Random(_)
            | PrimKind::Matmul(_)
            | PrimKind::Factory(_) => None,
        }
    }

    pub const fn prim(self) -> Prim {
        match self {
            Elementwise::Unary(p) => p.prim(),
            Elementwise::Predicate(p) => p.prim(),
            Elementwise::Binary(p) => p.prim(),
            Elementwise::Compare(p) => p.prim(),
        }
    }

    pub const fn arity(self) -> usize {
        match self {
            Elementwise::Unary(_) | Elementwise::Predicate(_) => 1,
            Elementwise::Binary(_) | Elementwise::Compare(_) => 2,
        }
    }

    /// True when the output is b8 whatever the operands.
    pub const fn bool_out(self) -> bool {
        matches!(self, Elementwise::Predicate(_) | Elementwise::Compare(_))
    }

    /// The CUDA spelling on float operands, if the row has one.
    pub const fn cuda(self) -> Option<CudaSpelling> {
        match self {
            Elementwise::Unary(p) => p.rule().cuda,
            Elementwise::Predicate(p) => Some(p.cuda()),
            Elementwise::Binary(p) => p.rule().cuda,
            Elementwise::Compare(p) => Some(p.cuda()),
        }
    }

    /// The value on integer operands (wrapping i64; the caller wraps to the dtype) or, with
    /// `bools`, on b8 operands given as 0/1; `None` where the row does not define the prim
    /// there or its int rule fails (division by zero).
    pub fn eval_int(self, operands: &[i64], bools: bool) -> Option<i64> {
        match (self, operands) {
            (Elementwise::Unary(p), &[x]) if !bools => p.rule().int.map(|f| f(x)),
            (Elementwise::Binary(p), &[x, y]) if bools => {
                p.rule().bool.map(|f| i64::from(f(x != 0, y != 0)))
            }
            (Elementwise::Binary(p), &[x, y]) => p.rule().int.and_then(|f| f(x, y).ok()),
            (Elementwise::Compare(p), &[x, y]) => Some(i64::from(p.eval(x, y))),
            _ => None,
        }
    }

    /// The value on float operands (`operands.len() == arity()`), b8 results as 0 or 1;
    /// `None` where the row does not define the prim on floats (the bitwise ops).
    pub fn eval_float(self, operands: &[f64]) -> Option<f64> {
        let flag = |b: bool| f64::from(u8::from(b));
        match (self, operands) {
            (Elementwise::Unary(p), &[x]) => Some((p.rule().float)(x)),
            (Elementwise::Predicate(p), &[x]) => Some(flag((p.float())(x))),
            (Elementwise::Binary(p), &[x, y]) => p.rule().float.map(|f| f(x, y)),
            (Elementwise::Compare(p), &[x, y]) => Some(flag(p.eval(x, y))),
            _ => None,
        }
    }
}

/// Where a function is real and finite: what test inputs are drawn from, so every sample
/// checks the function rather than NaN against NaN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Everywhere.
    Any,
    /// Positive numbers (log, sqrt, lgamma).
    Pos,
    /// Inside (-1, 1) (asin, atanh, erfinv).
    Unit,
    /// At least 1 (acosh).
    Ge1,
    /// Anything but 0 (divisors).
    NonZero,
    /// Small non-negative numbers (exponents, shift amounts).
    Small,
}

/// The semantics of a one-operand prim with output of the input's dtype.
#[derive(Debug, Clone, Copy)]
pub struct UnaryRule {
    pub float: fn(f64) -> f64,
    /// `None`: integer dtypes are refused (convert to a float dtype first).
    pub int: Option<fn(i64) -> i64>,
    pub cuda: Option<CudaSpelling>,
    /// Spelling on integer operands (`{t}` is the C type), wrapping as torch does.
    pub cuda_int: Option<CudaSpelling>,
    pub domain: Domain,
}

/// Integer semantics of a binary prim; an `Err` is a run-time error of the prim.
pub type IntBinaryFn = fn(i64, i64) -> Result<i64, String>;

/// The semantics of a two-operand prim with output of the operands' (equal) dtype.
#[derive(Debug, Clone, Copy)]
pub struct BinaryRule {
    /// `None`: float dtypes are refused (the bitwise ops).
    pub float: Option<fn(f64, f64) -> f64>,
    /// `None`: integer dtypes are refused. An `Err` is a run-time error of the prim
    /// (integer division by zero, a negative integer power).
    pub int: Option<IntBinaryFn>,
    /// `None`: bool is refused. torch reads bool add and mul as logical or and and.
    pub bool: Option<fn(bool, bool) -> bool>,
    /// Spelling on float operands.
    pub cuda: Option<CudaSpelling>,
    /// Where the left and right operands make the function real and finite.
    pub domain: (Domain, Domain),
    /// Spelling on integer and bool operands (`{t}` is the C type): wraps in two's complement
    /// as torch does (signed overflow is undefined in C++, unsigned is not); on bool operands
    /// it gives the row's bool semantics (`+` is or, `*` is and). `None` where the int rule can
    /// fail at run time (division by zero), which generated code cannot report.
    pub cuda_int: Option<CudaSpelling>,
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

/// `special::digamma` in CUDA C++ (Cephes, as ATen), in double.
const DIGAMMA_CU: &str = r#"__device__ double thunder_digamma(double x) {
  const double A[7] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                       7.57575757575757575758E-3, -4.16666666666666666667E-3,
                       3.96825396825396825397E-3, -8.33333333333333333333E-3,
                       8.33333333333333333333E-2};
  const double PI = 3.14159265358979323846;
  double reflection = 0.0;
  if (x == 0.0) return copysign(__longlong_as_double(0x7ff0000000000000LL), -x);
  if (x < 0.0) {
    if (x == trunc(x)) return __longlong_as_double(0x7ff8000000000000LL);
    reflection = PI / tan(PI * (x - trunc(x)));
    x = 1.0 - x;
  }
  if (isnan(x)) return x;
  double result = 0.0;
  while (x < 10.0) { result -= 1.0 / x; x += 1.0; }
  if (x == 10.0) return result + 2.25175258906672110764 - reflection;
  double y = 0.0;
  if (x < 1.0e17) {
    double z = 1.0 / (x * x);
    double acc = 0.0;
    for (int i = 0; i < 7; ++i) acc = acc * z + A[i];
    y = z * acc;
  }
  return result + log(x) - 0.5 / x - y - reflection;
}
__device__ float thunder_digammaf(float x) { return (float)thunder_digamma((double)x); }
"#;

/// `special::trigamma` in CUDA C++ (as ATen's calc_trigamma), in double.
const TRIGAMMA_CU: &str = r#"__device__ double thunder_trigamma(double x) {
  const double PI = 3.14159265358979323846;
  if (isnan(x)) return x;
  if (x <= 0.0 && x == trunc(x)) return __longlong_as_double(0x7ff0000000000000LL);
  double sign = 1.0, result = 0.0;
  if (x < 0.5) {
    sign = -1.0;
    double s = sin(PI * x);
    result -= PI * PI / (s * s);
    x = 1.0 - x;
  }
  for (int i = 0; i < 6; ++i) { result += 1.0 / (x * x); x += 1.0; }
  double ixx = 1.0 / (x * x);
  result += (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x;
  return sign * result;
}
__device__ float thunder_trigammaf(float x) { return (float)thunder_trigamma((double)x); }
"#;

const fn float_only(float: fn(f64) -> f64, cuda: Option<CudaSpelling>) -> UnaryRule {
    on(Domain::Any, float, cuda)
}

const fn on(domain: Domain, float: fn(f64) -> f64, cuda: Option<CudaSpelling>) -> UnaryRule {
    UnaryRule {
        float,
        int: None,
        cuda,
        cuda_int: None,
        domain,
    }
}

impl UnaryPrim {
    /// The row of the table for this prim.
    pub const fn rule(self) -> UnaryRule {
        use CudaSpelling::{Expr, Fn};
        use UnaryPrim as P;
        match self {
            P::Neg => UnaryRule {
                float: |x| -x,
                int: Some(i64::wrapping_neg),
                cuda: Some(Expr("(-{a})")),
                cuda_int: Some(Expr("(({t})(0ULL - (unsigned long long)({a})))")),
                domain: Domain::Any,
            },
            P::Abs => UnaryRule {
                float: f64::abs,
                int: Some(i64::wrapping_abs),
                cuda: Some(Fn("fabs")),
                cuda_int: Some(Expr(
                    "(({a}) < 0 ? ({t})(0ULL - (unsigned long long)({a})) : ({a}))",
                )),
                domain: Domain::Any,
            },
            P::Exp => float_only(f64::exp, Some(Fn("exp"))),
            P::Exp2 => float_only(f64::exp2, Some(Fn("exp2"))),
            P::Expm1 => float_only(f64::exp_m1, Some(Fn("expm1"))),
            P::Log => on(Domain::Pos, f64::ln, Some(Fn("log"))),
            P::Log1p => on(Domain::Pos, f64::ln_1p, Some(Fn("log1p"))),
            P::Log2 => on(Domain::Pos, f64::log2, Some(Fn("log2"))),
            P::Log10 => on(Domain::Pos, f64::log10, Some(Fn("log10"))),
            P::Sqrt => on(Domain::Pos, f64::sqrt, Some(Fn("sqrt"))),
            P::Rsqrt => on(
                Domain::Pos,
                |x| 1.0 / x.sqrt(),
                Some(Expr("({one} / sqrt{f}({a}))")),
            ),
            P::Tanh => float_only(f64::tanh, Some(Fn("tanh"))),
            P::Sin => float_only(f64::sin, Some(Fn("sin"))),
            P::Cos => float_only(f64::cos, Some(Fn("cos"))),
            // Finite away from its poles at odd multiples of pi / 2.
            P::Tan => on(Domain::Unit, f64::tan, Some(Fn("tan"))),
            P::Asin => on(Domain::Unit, f64::asin, Some(Fn("asin"))),
            P::Acos => on(Domain::Unit, f64::acos, Some(Fn("acos"))),
            P::Atan => float_only(f64::atan, Some(Fn("atan"))),
            P::Sinh => float_only(f64::sinh, Some(Fn("sinh"))),
            P::Cosh => float_only(f64::cosh, Some(Fn("cosh"))),
            P::Asinh => float_only(f64::asinh, Some(Fn("asinh"))),
            P::Acosh => on(Domain::Ge1, f64::acosh, Some(Fn("acosh"))),
            P::Atanh => on(Domain::Unit, f64::atanh, Some(Fn("atanh"))),
            P::Erf => float_only(libm::erf, Some(Fn("erf"))),
            P::Erfc => float_only(libm::erfc, Some(Fn("erfc"))),
            P::Erfinv => on(Domain::Unit, erfinv, Some(Fn("erfinv"))),
            P::Lgamma => on(Domain::Pos, libm::lgamma, Some(Fn("lgamma"))),
            // CUDA's math library has neither: device functions with this crate's algorithms
            // (computed in double, as the reference computes in f64).
            P::Digamma => on(
                Domain::Pos,
                digamma,
                Some(CudaSpelling::Device {
                    name: "thunder_digamma",
                    source: DIGAMMA_CU,
                }),
            ),
            P::Trigamma => on(
                Domain::Pos,
                trigamma,
                Some(CudaSpelling::Device {
                    name: "thunder_trigamma",
                    source: TRIGAMMA_CU,
                }),
            ),
            P::Reciprocal => on(Domain::NonZero, |x| 1.0 / x, Some(Expr("({one} / {a})"))),
            P::Floor => float_only(f64::floor, Some(Fn("floor"))),
            P::Ceil => float_only(f64::ceil, Some(Fn("ceil"))),
            // Half to even, like torch; CUDA's rint rounds the same way.
            P::Round => float_only(f64::round_ties_even, Some(Fn("rint"))),
            P::Trunc => float_only(f64::trunc, Some(Fn("trunc"))),
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

    pub const fn cuda(self) -> CudaSpelling {
        match self {
            PredicatePrim::Signbit => CudaSpelling::Split {
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
        use CudaSpelling::{Expr, Fn};
        match self {
            P::Add => BinaryRule {
                float: Some(|x, y| x + y),
                int: Some(|x, y| Ok(x.wrapping_add(y))),
                bool: Some(|x, y| x || y),
                cuda: Some(Expr("({a} + {b})")),
                domain: (Domain::Any, Domain::Any),
                cuda_int: Some(Expr(
                    "(({t})((unsigned long long)({a}) + (unsigned long long)({b})))",
                )),
            },
            P::Sub => BinaryRule {
                float: Some(|x, y| x - y),
                int: Some(|x, y| Ok(x.wrapping_sub(y))),
                bool: None,
                cuda: Some(Expr("({a} - {b})")),
                domain: (Domain::Any, Domain::Any),
                cuda_int: Some(Expr(
                    "(({t})((unsigned long long)({a}) - (unsigned long long)({b})))",
                )),
            },
            P::Mul => BinaryRule {
                float: Some(|x, y| x * y),
                int: Some(|x, y| Ok(x.wrapping_mul(y))),
                bool: Some(|x, y| x && y),
                cuda: Some(Expr("({a} * {b})")),
                domain: (Domain::Any, Domain::Any),
                cuda_int: Some(Expr(
                    "(({t})((unsigned long long)({a}) * (unsigned long long)({b})))",
                )),
            },
            P::Div => BinaryRule {
                float: Some(|x, y| x / y),
                // Truncates toward zero, like torch's integer `div(rounding_mode="trunc")`.
                int: Some(|x, y| nonzero(y).map(|()| x.wrapping_div(y))),
                bool: None,
                cuda: Some(Expr("({a} / {b})")),
                domain: (Domain::Any, Domain::NonZero),
                cuda_int: None,
            },
            P::Pow => BinaryRule {
                float: Some(f64::powf),
                int: Some(int_pow),
                bool: None,
                cuda: Some(Fn("pow")),
                domain: (Domain::Pos, Domain::Small),
                cuda_int: None,
            },
            P::Maximum => BinaryRule {
                float: Some(nan_max),
                int: Some(|x, y| Ok(x.max(y))),
                bool: Some(|x, y| x || y),
                cuda: Some(Expr("nan_max({a}, {b})")),
                domain: (Domain::Any, Domain::Any),
                cuda_int: Some(Expr(
                    "(({a}) > ({b}) ? ({a}) : ({b}))",
                )),
            },
            P::Minimum => BinaryRule {
                float: Some(|x, y| -nan_max(-x, -y)),
                int: Some(|x, y| Ok(x.min(y))),
                bool: Some(|x, y| x && y),
                cuda: Some(Expr("nan_min({a}, {b})")),
                domain: (Domain::Any, Domain::Any),
                cuda_int: Some(Expr(
                    "(({a}) < ({b}) ? ({a}) : ({b}))",
                )),
            },
            P::Remainder => BinaryRule {
                float: Some(remainder_float),
                int: Some(remainder_int),
                bool: None,
                cuda: Some(Expr("py_rem({a}, {b})")),
                domain: (Domain::Any, Domain::NonZero),
                cuda_int: None,
            },
            // The sign of the dividend (C's fmod).
            P::Fmod => BinaryRule {
                float: Some(|x, y| x % y),
                int: Some(|x, y| nonzero(y).map(|()| x.wrapping_rem(y))),
                bool: None,
                cuda: Some(Fn("fmod")),
                domain: (Domain::Any, Domain::NonZero),
                cuda_int: None,
            },
            // torch's `div(rounding_mode="floor")`.
            P::FloorDivide => BinaryRule {
                float: Some(div_floor),
                int: Some(floor_divide_int),
                bool: None,
                cuda: None,
                domain: (Domain::Any, Domain::NonZero),
                cuda_int: None,
            },
            P::Atan2 => BinaryRule {
                float: Some(f64::atan2),
                int: None,
                bool: None,
                cuda: Some(Fn("atan2")),
                domain: (Domain::Any, Domain::Any),
                cuda_int: None,
            },
            // sqrt(a^2 + b^2) without overflow or underflow in the squares.
            P::Hypot => BinaryRule {
                float: Some(f64::hypot),
                int: None,
                bool: None,
                cuda: Some(Fn("hypot")),
                domain: (Domain::Any, Domain::Any),
                cuda_int: None,
            },
            P::BitwiseAnd => BinaryRule {
                float: None,
                int: Some(|x, y| Ok(x & y)),
                bool: Some(|x, y| x & y),
                cuda: None,
                domain: (Domain::Any, Domain::Any),
                cuda_int: Some(Expr(
                    "(({t})(({a}) & ({b})))",
                )),
            },
            P::BitwiseOr => BinaryRule {
                float: None,
                int: Some(|x, y| Ok(x | y)),
                bool: Some(|x, y| x | y),
                cuda: None,
                domain: (Domain::Any, Domain::Any),
                cuda_int: Some(Expr(
                    "(({t})(({a}) | ({b})))",
                )),
            },
            P::BitwiseXor => BinaryRule {
                float: None,
                int: Some(|x, y| Ok(x ^ y)),
                bool: Some(|x, y| x ^ y),
                cuda: None,
                domain: (Domain::Any, Domain::Any),
                cuda_int: Some(Expr(
                    "(({t})(({a}) ^ ({b})))",
                )),
            },
            P::BitwiseLeftShift => BinaryRule {
                float: None,
                int: Some(shift_left),
                bool: None,
                cuda: None,
                domain: (Domain::Small, Domain::Small),
                cuda_int: Some(Expr(
                    "((({b}) < 0 || ({b}) >= 64) ? ({t})0 : ({t})((unsigned long long)({a}) << ({b})))",
                )),
            },
            P::BitwiseRightShift => BinaryRule {
                float: None,
                int: Some(shift_right),
                bool: None,
                cuda: None,
                domain: (Domain::Small, Domain::Small),
                cuda_int: Some(Expr(
                    "((({b}) < 0 || ({b}) >= 64) ? ({t})(({a}) < 0 ? -1 : 0) : ({t})((long long)({a}) >> ({b})))",
                )),
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

    pub const fn cuda(self) -> CudaSpelling {
        CudaSpelling::Expr(match self {
            ComparePrim::Eq => "({a} == {b})",
            ComparePrim::Ne => "({a} != {b})",
            ComparePrim::Lt => "({a} < {b})",
            ComparePrim::Le => "({a} <= {b})",
            ComparePrim::Gt => "({a} > {b})",
            ComparePrim::Ge => "({a} >= {b})",
        })
    }
}
