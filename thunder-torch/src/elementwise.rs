//! Elementwise ltorch ops: unary and binary arithmetic, comparisons, where, to, activations,
//! polygamma, and the selections masked_fill, tril and triu.

use crate::{call1, CallArgs};
use thunder_core::clang::{self, Operand, Promotion};
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Error, Result};
use thunder_core::ir::{Arg, ShapeDisplay};
use thunder_core::prims::Prim;
use thunder_core::tensor::Tensor;
use thunder_core::trace_ctx::sticky;

/// An ltorch op that is one prim with torch's promotion. One row of `unary_ops!`,
/// `rounding_ops!` or `binary_ops!` gives the op everything: its decomposition, its typed
/// function, its `Tensor` method and its ltorch table entry (through [`prim_ops`]); the OpInfo
/// tables read the rows too.
#[derive(Debug, Clone, Copy)]
pub struct PrimOp {
    pub id: &'static str,
    pub prim: Prim,
    pub form: PrimOpForm,
    pub rule: thunder_core::ir::Decomposition,
}

/// How an ltorch prim op treats dtypes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimOpForm {
    /// One operand, promoted as `Promotion` says.
    Unary(Promotion),
    /// floor/ceil/round/trunc: the identity on integers, refused for b8, as torch.
    Rounding,
    /// Two operands (tensors or numbers) that broadcast and promote.
    Binary(Promotion),
}

/// Every ltorch op that is one prim, in row order.
pub fn prim_ops() -> impl Iterator<Item = &'static PrimOp> {
    UNARY_OPS.iter().chain(ROUNDING_OPS).chain(BINARY_OPS)
}

macro_rules! unary_ops {
    ($($name:ident, $rule:ident, $prim:ident, $kind:ident;)*) => {
        $(
            pub(crate) fn $rule(c: &CallArgs) -> Result<Vec<Tensor>> {
                c.expect(1)?;
                Ok(vec![clang::unary(c.op, Prim::$prim, &c.tensor(0)?, Promotion::$kind)?])
            }

            pub fn $name(a: &Tensor) -> Result<Tensor> {
                call1(concat!("ltorch.", stringify!($name)), vec![Arg::Value(a.value())])
            }
        )*

        /// The one-prim unary ops as methods: `x.exp()`, `x.neg()`, ...
        pub trait UnaryMethods {
            $(
                fn $name(&self) -> Tensor;
            )*
        }

        impl UnaryMethods for Tensor {
            $(
                fn $name(&self) -> Tensor {
                    sticky($name(self))
                }
            )*
        }

        const UNARY_OPS: &[PrimOp] = &[$(PrimOp {
            id: concat!("ltorch.", stringify!($name)),
            prim: Prim::$prim,
            form: PrimOpForm::Unary(Promotion::$kind),
            rule: $rule,
        }),*];
    };
}

unary_ops! {
    neg, neg_rule, Neg, NoOpMath;
    abs, abs_rule, Abs, NoOpMath;
    exp, exp_rule, Exp, IntToFloat;
    log, log_rule, Log, IntToFloat;
    sqrt, sqrt_rule, Sqrt, IntToFloat;
    rsqrt, rsqrt_rule, Rsqrt, IntToFloat;
    tanh, tanh_rule, Tanh, IntToFloat;
    sin, sin_rule, Sin, IntToFloat;
    cos, cos_rule, Cos, IntToFloat;
    erf, erf_rule, Erf, IntToFloat;
    reciprocal, reciprocal_rule, Reciprocal, IntToFloat;
    exp2, exp2_rule, Exp2, IntToFloat;
    expm1, expm1_rule, Expm1, IntToFloat;
    log1p, log1p_rule, Log1p, IntToFloat;
    log2, log2_rule, Log2, IntToFloat;
    log10, log10_rule, Log10, IntToFloat;
    tan, tan_rule, Tan, IntToFloat;
    asin, asin_rule, Asin, IntToFloat;
    acos, acos_rule, Acos, IntToFloat;
    atan, atan_rule, Atan, IntToFloat;
    sinh, sinh_rule, Sinh, IntToFloat;
    cosh, cosh_rule, Cosh, IntToFloat;
    asinh, asinh_rule, Asinh, IntToFloat;
    acosh, acosh_rule, Acosh, IntToFloat;
    atanh, atanh_rule, Atanh, IntToFloat;
    erfc, erfc_rule, Erfc, IntToFloat;
    erfinv, erfinv_rule, Erfinv, IntToFloat;
    lgamma, lgamma_rule, Lgamma, IntToFloat;
    digamma, digamma_rule, Digamma, IntToFloat;
}

// Rounding: identity on integers (as torch), refused for b8 (torch has no kernel for it).
macro_rules! rounding_ops {
    ($($name:ident, $rule:ident, $prim:ident;)*) => {
        $(
        pub(crate) fn $rule(c: &CallArgs) -> Result<Vec<Tensor>> {
            c.expect(1)?;
            let a = c.tensor(0)?;
            if a.dtype() == DType::Bool {
                bail_op!(c.op, "argument a: does not support dtype b8");
            }
            if !dtype::is_float(a.dtype()) {
                return Ok(vec![a]);
            }
            Ok(vec![clang::unary(c.op, Prim::$prim, &a, Promotion::NoOpMath)?])
        }

        pub fn $name(a: &Tensor) -> Result<Tensor> {
            call1(concat!("ltorch.", stringify!($name)), vec![Arg::Value(a.value())])
        }
        )*

        /// Rounding as methods: `x.floor()`, `x.round()`, ...
        pub trait RoundingMethods {
            $(
                fn $name(&self) -> Tensor;
            )*
        }

        impl RoundingMethods for Tensor {
            $(
                fn $name(&self) -> Tensor {
                    sticky($name(self))
                }
            )*
        }

        const ROUNDING_OPS: &[PrimOp] = &[$(PrimOp {
            id: concat!("ltorch.", stringify!($name)),
            prim: Prim::$prim,
            form: PrimOpForm::Rounding,
            rule: $rule,
        }),*];
    };
}

rounding_ops! {
    floor, floor_rule, Floor;
    ceil, ceil_rule, Ceil;
    round, round_rule, Round;
    trunc, trunc_rule, Trunc;
}

/// A zero literal of `a`'s kind.
fn zero_like_literal(a: &Tensor) -> Operand {
    match a.dtype() {
        DType::Bool => Operand::Bool(false),
        d if dtype::is_float(d) => Operand::Float(0.0),
        _ => Operand::Int(0),
    }
}

fn compare_literal(op: &str, prim: Prim, a: &Tensor, b: Operand) -> Result<Tensor> {
    clang::elementwise(
        op,
        prim,
        &[Operand::Tensor(a.clone()), b],
        Promotion::AlwaysBool,
    )
}

fn bool_full(a: &Tensor, value: bool) -> Result<Tensor> {
    clang::full(
        a.shape().to_vec(),
        Arg::Bool(value),
        a.device(),
        DType::Bool,
    )
}

/// `(a > 0) - (a < 0)` in `a`'s dtype; like torch, NaN gives 0 and -0 gives +0.
pub(crate) fn sign_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    if a.dtype() == DType::Bool {
        return Ok(vec![a]);
    }
    let side = |p: Prim| -> Result<Tensor> {
        clang::convert(
            &compare_literal(c.op, p, &a, zero_like_literal(&a))?,
            a.dtype(),
        )
    };
    let (pos, neg) = (side(Prim::Gt)?, side(Prim::Lt)?);
    Ok(vec![clang::elementwise(
        c.op,
        Prim::Sub,
        &[Operand::Tensor(pos), Operand::Tensor(neg)],
        Promotion::NoOpMath,
    )?])
}

pub(crate) fn signbit_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    Ok(vec![match a.dtype() {
        DType::Bool => bool_full(&a, false)?,
        d if dtype::is_float(d) => clang::unary(c.op, Prim::Signbit, &a, Promotion::AlwaysBool)?,
        _ => compare_literal(c.op, Prim::Lt, &a, Operand::Int(0))?,
    }])
}

/// `a != a`; false for integers and b8.
pub(crate) fn isnan_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    if !dtype::is_float(a.dtype()) {
        return Ok(vec![bool_full(&a, false)?]);
    }
    Ok(vec![compare_literal(
        c.op,
        Prim::Ne,
        &a,
        Operand::Tensor(a.clone()),
    )?])
}

/// `abs(a) < inf`; true for integers and b8.
pub(crate) fn isfinite_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    if !dtype::is_float(a.dtype()) {
        return Ok(vec![bool_full(&a, true)?]);
    }
    let abs = clang::unary(c.op, Prim::Abs, &a, Promotion::NoOpMath)?;
    Ok(vec![compare_literal(
        c.op,
        Prim::Lt,
        &abs,
        Operand::Float(f64::INFINITY),
    )?])
}

/// `a == 0`, b8 out (NaN counts as true, so it gives false).
pub(crate) fn logical_not_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    Ok(vec![compare_literal(
        c.op,
        Prim::Eq,
        &a,
        zero_like_literal(&a),
    )?])
}

/// Integers: `-a - 1` in wrapping two's complement, which is `~a` at every width; b8: logical
/// not.
pub(crate) fn bitwise_not_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    match a.dtype() {
        DType::Bool => Ok(vec![compare_literal(
            c.op,
            Prim::Eq,
            &a,
            Operand::Bool(false),
        )?]),
        d if dtype::is_float(d) => bail_op!(
            c.op,
            "argument a must be an integer or b8 tensor, got {}",
            d.short_name()
        ),
        _ => {
            let neg = clang::unary(c.op, Prim::Neg, &a, Promotion::NoOpMath)?;
            Ok(vec![clang::elementwise(
                c.op,
                Prim::Sub,
                &[Operand::Tensor(neg), Operand::Int(1)],
                Promotion::NoOpMath,
            )?])
        }
    }
}

// Bitwise ops take integers and b8; shifts need an integer result (b8 operands promote with
// an integer one, as in torch). The error names the argument.
macro_rules! bitwise_ops {
    ($($name:ident, $rule:ident, $prim:ident, $bool_ok:expr;)*) => {$(
        pub(crate) fn $rule(c: &CallArgs) -> Result<Vec<Tensor>> {
            c.expect(2)?;
            let operands = [c.operand(0)?, c.operand(1)?];
            let dtype_of = |o: &Operand| match o {
                Operand::Tensor(t) => t.dtype(),
                Operand::Float(_) => DType::F64,
                Operand::Int(_) => DType::I64,
                Operand::Bool(_) => DType::Bool,
            };
            let got = |o: &Operand| match o {
                Operand::Tensor(t) => format!("a {} tensor", t.dtype().short_name()),
                _ => format!("{o:?}"),
            };
            for (name, o) in ["a", "b"].iter().zip(&operands) {
                if dtype::is_float(dtype_of(o)) {
                    bail_op!(
                        c.op,
                        "argument {name} must be an integer or b8 tensor or number, got {}",
                        got(o)
                    );
                }
            }
            if !$bool_ok && operands.iter().all(|o| dtype_of(o) == DType::Bool) {
                bail_op!(
                    c.op,
                    "arguments a and b are both b8 ({} and {}); shifts need an integer operand",
                    got(&operands[0]),
                    got(&operands[1])
                );
            }
            Ok(vec![clang::elementwise(c.op, Prim::$prim, &operands, Promotion::NoOpMath)?])
        }

        pub fn $name(a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Tensor> {
            call1(concat!("ltorch.", stringify!($name)), vec![a.into().to_arg(), b.into().to_arg()])
        }
    )*};
}

bitwise_ops! {
    bitwise_and, bitwise_and_rule, BitwiseAnd, true;
    bitwise_or, bitwise_or_rule, BitwiseOr, true;
    bitwise_xor, bitwise_xor_rule, BitwiseXor, true;
    bitwise_left_shift, bitwise_left_shift_rule, BitwiseLeftShift, false;
    bitwise_right_shift, bitwise_right_shift_rule, BitwiseRightShift, false;
}

macro_rules! unary_fns {
    ($($name:ident),*) => {$(
        pub fn $name(a: &Tensor) -> Result<Tensor> {
            call1(concat!("ltorch.", stringify!($name)), vec![Arg::Value(a.value())])
        }
    )*};
}

unary_fns!(sign, signbit, isnan, isfinite, logical_not, bitwise_not);

macro_rules! binary_ops {
    ($($name:ident, $rule:ident, $prim:ident, $kind:ident;)*) => {
        $(
            pub(crate) fn $rule(c: &CallArgs) -> Result<Vec<Tensor>> {
                c.expect(2)?;
                let operands = [c.operand(0)?, c.operand(1)?];
                Ok(vec![clang::elementwise(c.op, Prim::$prim, &operands, Promotion::$kind)?])
            }

            pub fn $name(a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Tensor> {
                call1(concat!("ltorch.", stringify!($name)), vec![a.into().to_arg(), b.into().to_arg()])
            }
        )*

        /// The one-prim binary ops as methods: `x.add(&y)`, `x.pow(2.0)`, `x.lt(0.0)`, ...
        pub trait BinaryMethods {
            $(
                fn $name(&self, other: impl Into<Operand>) -> Tensor;
            )*
        }

        impl BinaryMethods for Tensor {
            $(
                fn $name(&self, other: impl Into<Operand>) -> Tensor {
                    sticky($name(self, other))
                }
            )*
        }

        const BINARY_OPS: &[PrimOp] = &[$(PrimOp {
            id: concat!("ltorch.", stringify!($name)),
            prim: Prim::$prim,
            form: PrimOpForm::Binary(Promotion::$kind),
            rule: $rule,
        }),*];
    };
}

binary_ops! {
    add, add_rule, Add, Default;
    sub, sub_rule, Sub, Default;
    mul, mul_rule, Mul, Default;
    div, div_rule, Div, IntToFloat;
    pow, pow_rule, Pow, Default;
    maximum, maximum_rule, Maximum, NoOpMath;
    minimum, minimum_rule, Minimum, NoOpMath;
    remainder, remainder_rule, Remainder, Default;
    fmod, fmod_rule, Fmod, Default;
    floor_divide, floor_divide_rule, FloorDivide, Default;
    atan2, atan2_rule, Atan2, IntToFloat;
    hypot, hypot_rule, Hypot, Default;
    eq, eq_rule, Eq, AlwaysBool;
    ne, ne_rule, Ne, AlwaysBool;
    lt, lt_rule, Lt, AlwaysBool;
    le, le_rule, Le, AlwaysBool;
    gt, gt_rule, Gt, AlwaysBool;
    ge, ge_rule, Ge, AlwaysBool;
}

pub(crate) fn where_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    Ok(vec![clang::where_(
        c.op,
        &c.tensor(0)?,
        &c.operand(1)?,
        &c.operand(2)?,
    )?])
}

pub fn where_(cond: &Tensor, a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Tensor> {
    call1(
        "ltorch.where",
        vec![
            Arg::Value(cond.value()),
            a.into().to_arg(),
            b.into().to_arg(),
        ],
    )
}

pub(crate) fn to_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    Ok(vec![clang::convert(&c.tensor(0)?, c.dtype(1)?)?])
}

pub fn to(a: &Tensor, dtype: DType) -> Result<Tensor> {
    call1("ltorch.to", vec![Arg::Value(a.value()), Arg::DType(dtype)])
}

pub(crate) fn relu_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    if a.dtype() == DType::Bool {
        return Err(Error::dtype(c.op, DType::Bool, ""));
    }
    // maximum keeps NaN, as torch.relu does.
    Ok(vec![maximum(&a, 0i64)?])
}

pub fn relu(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.relu", vec![Arg::Value(a.value())])
}

pub(crate) fn require_float(op: &str, a: &Tensor) -> Result<()> {
    if !dtype::is_float(a.dtype()) {
        return Err(Error::dtype(op, a.dtype(), "floats only"));
    }
    Ok(())
}

/// Upcasts f16/bf16 to f32, so a composite rounds once at the end as torch's kernels do.
pub(crate) fn upcast(a: &Tensor) -> Result<Tensor> {
    if dtype::is_low_precision(a.dtype()) {
        to(a, DType::F32)
    } else {
        Ok(a.clone())
    }
}

pub(crate) fn gelu_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    require_float(c.op, &a)?;
    let x = upcast(&a)?;
    let inner = match c.str(1)? {
        "none" => erf(&mul(&x, std::f64::consts::FRAC_1_SQRT_2)?)?,
        "tanh" => {
            let cube = mul(&mul(&x, &x)?, &x)?;
            let arg = mul(
                &add(&x, mul(&cube, 0.044715)?)?,
                (2.0 / std::f64::consts::PI).sqrt(),
            )?;
            tanh(&arg)?
        }
        other => bail_op!(
            c.op,
            "approximate must be \"none\" or \"tanh\", got \"{other}\""
        ),
    };
    let y = mul(&mul(&x, 0.5)?, add(&inner, 1.0)?)?;
    Ok(vec![to(&y, a.dtype())?])
}

/// GELU; `approximate` is `"none"` (erf) or `"tanh"`.
pub fn gelu(a: &Tensor, approximate: &str) -> Result<Tensor> {
    call1(
        "ltorch.gelu",
        vec![Arg::Value(a.value()), Arg::Str(approximate.into())],
    )
}

/// `where(mask, value, a)`, keeping `a`'s dtype.
pub(crate) fn masked_fill_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let (a, mask) = (c.tensor(0)?, c.tensor(1)?);
    if mask.dtype() != DType::Bool {
        bail_op!(c.op, "mask must be b8, got {}", mask.dtype().short_name());
    }
    let value = c.operand(2)?;
    let value = match value {
        Operand::Tensor(t) if t.rank() != 0 => bail_op!(
            c.op,
            "value must be a number or a 0-d tensor, got {}",
            ShapeDisplay(t.shape())
        ),
        Operand::Tensor(t) => Operand::Tensor(clang::convert(&t, a.dtype())?),
        Operand::Float(x) if !dtype::is_float(a.dtype()) => Operand::Int(x as i64),
        other => other,
    };
    let out = clang::where_(c.op, &mask, &value, &Operand::Tensor(a.clone()))?;
    Ok(vec![clang::convert(&out, a.dtype())?])
}

pub fn masked_fill(a: &Tensor, mask: &Tensor, value: impl Into<Operand>) -> Result<Tensor> {
    call1(
        "ltorch.masked_fill",
        vec![
            Arg::Value(a.value()),
            Arg::Value(mask.value()),
            value.into().to_arg(),
        ],
    )
}

/// Keeps elements on and below (`lower`) or above the `diagonal`-th diagonal of the last two dims.
fn triangle(c: &CallArgs, lower: bool) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    let k = c.int(1)?;
    if a.rank() < 2 {
        bail_op!(
            c.op,
            "expected a tensor with at least 2 dims, got {}",
            ShapeDisplay(a.shape())
        );
    }
    let (rows, cols) = (a.shape()[a.rank() - 2], a.shape()[a.rank() - 1]);
    let (row, col) = clang::index_grid(rows, cols, a.device())?;
    // col - row <= k keeps the lower triangle; col - row >= k the upper.
    let diff = sub(&col, &row)?;
    let keep = if lower {
        crate::elementwise::le(&diff, k)?
    } else {
        crate::elementwise::ge(&diff, k)?
    };
    let zero = if dtype::is_float(a.dtype()) {
        Operand::Float(0.0)
    } else if a.dtype() == DType::Bool {
        Operand::Bool(false)
    } else {
        Operand::Int(0)
    };
    let out = clang::where_(c.op, &keep, &Operand::Tensor(a.clone()), &zero)?;
    Ok(vec![clang::convert(&out, a.dtype())?])
}

pub(crate) fn tril_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    triangle(c, true)
}

pub(crate) fn triu_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    triangle(c, false)
}

pub fn tril(a: &Tensor, diagonal: i64) -> Result<Tensor> {
    call1(
        "ltorch.tril",
        vec![Arg::Value(a.value()), Arg::Int(diagonal)],
    )
}

pub fn triu(a: &Tensor, diagonal: i64) -> Result<Tensor> {
    call1(
        "ltorch.triu",
        vec![Arg::Value(a.value()), Arg::Int(diagonal)],
    )
}

/// `torch.polygamma(n, a)` for `n` 0 (digamma) and 1 (trigamma), the orders with prims.
pub(crate) fn polygamma_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let prim = match c.int(0)? {
        0 => Prim::Digamma,
        1 => Prim::Trigamma,
        n => bail_op!(
            c.op,
            "argument 0 (n = {n}) must be 0 or 1 (higher orders are not implemented)"
        ),
    };
    Ok(vec![clang::unary(
        c.op,
        prim,
        &c.tensor(1)?,
        clang::Promotion::IntToFloat,
    )?])
}

pub fn polygamma(n: i64, a: &Tensor) -> Result<Tensor> {
    call1("ltorch.polygamma", vec![Arg::Int(n), Arg::Value(a.value())])
}
