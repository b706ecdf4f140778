//! Elementwise ltorch ops: unary and binary arithmetic, comparisons, where, to, activations.

use super::{call1, CallArgs};
use crate::clang::{self, Operand, Promotion};
use crate::dtype::{self, DType};
use crate::error::{bail_op, Result};
use crate::ir::Arg;
use crate::prims::Prim;
use crate::tensor::Tensor;

macro_rules! unary_ops {
    ($($name:ident, $rule:ident, $prim:ident, $kind:ident;)*) => {$(
        pub(crate) fn $rule(c: &CallArgs) -> Result<Vec<Tensor>> {
            c.expect(1)?;
            Ok(vec![clang::unary(c.op, Prim::$prim, &c.tensor(0)?, Promotion::$kind)?])
        }

        pub fn $name(a: &Tensor) -> Result<Tensor> {
            call1(concat!("ltorch.", stringify!($name)), vec![Arg::Value(a.value())])
        }
    )*};
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
}

macro_rules! binary_ops {
    ($($name:ident, $rule:ident, $prim:ident, $kind:ident;)*) => {$(
        pub(crate) fn $rule(c: &CallArgs) -> Result<Vec<Tensor>> {
            c.expect(2)?;
            let operands = [c.operand(0)?, c.operand(1)?];
            Ok(vec![clang::elementwise(c.op, Prim::$prim, &operands, Promotion::$kind)?])
        }

        pub fn $name(a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Tensor> {
            call1(concat!("ltorch.", stringify!($name)), vec![a.into().to_arg(), b.into().to_arg()])
        }
    )*};
}

binary_ops! {
    add, add_rule, Add, Default;
    sub, sub_rule, Sub, Default;
    mul, mul_rule, Mul, Default;
    div, div_rule, Div, IntToFloat;
    pow, pow_rule, Pow, Default;
    maximum, maximum_rule, Maximum, NoOpMath;
    minimum, minimum_rule, Minimum, NoOpMath;
    eq, eq_rule, Eq, AlwaysBool;
    ne, ne_rule, Ne, AlwaysBool;
    lt, lt_rule, Lt, AlwaysBool;
    le, le_rule, Le, AlwaysBool;
    gt, gt_rule, Gt, AlwaysBool;
    ge, ge_rule, Ge, AlwaysBool;
}

impl From<&Tensor> for Operand {
    fn from(t: &Tensor) -> Self {
        Operand::Tensor(t.clone())
    }
}
impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Self {
        Operand::Tensor(t)
    }
}
impl From<f64> for Operand {
    fn from(x: f64) -> Self {
        Operand::Float(x)
    }
}
impl From<f32> for Operand {
    fn from(x: f32) -> Self {
        Operand::Float(x as f64)
    }
}
impl From<i64> for Operand {
    fn from(x: i64) -> Self {
        Operand::Int(x)
    }
}
impl From<i32> for Operand {
    fn from(x: i32) -> Self {
        Operand::Int(x as i64)
    }
}
impl From<bool> for Operand {
    fn from(x: bool) -> Self {
        Operand::Bool(x)
    }
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
        bail_op!(c.op, "does not support dtype b8");
    }
    // maximum keeps NaN, as torch.relu does.
    Ok(vec![maximum(&a, 0i64)?])
}

pub fn relu(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.relu", vec![Arg::Value(a.value())])
}

pub(crate) fn require_float(op: &str, a: &Tensor) -> Result<()> {
    if !dtype::is_float(a.dtype()) {
        bail_op!(
            op,
            "expected a floating-point tensor, got {}",
            a.dtype().short_name()
        );
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
