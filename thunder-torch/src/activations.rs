//! Activations and clamps built from existing ops: sigmoid, silu, softplus, relu6, hardswish,
//! leaky_relu, clamp. Each computes in f32 for f16/bf16 and rounds once, as torch's kernels do.

use crate::elementwise::{add, div, exp, log, maximum, minimum, mul, neg, to, upcast};
use crate::{call1, CallArgs};
use thunder_core::clang::Operand;
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Error, Result};
use thunder_core::ir::Arg;
use thunder_core::tensor::Tensor;

/// Activations take floats; ints and bools become the default float (f32), as torch does.
fn float_input(a: &Tensor) -> Result<Tensor> {
    if dtype::is_float(a.dtype()) {
        upcast(a)
    } else {
        to(a, DType::F32)
    }
}

fn result_dtype(a: &Tensor) -> DType {
    if dtype::is_float(a.dtype()) {
        a.dtype()
    } else {
        DType::F32
    }
}

fn sigmoid_of(x: &Tensor) -> Result<Tensor> {
    div(1.0, add(&exp(&neg(x)?)?, 1.0)?)
}

pub(crate) fn sigmoid_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    Ok(vec![to(&sigmoid_of(&float_input(&a)?)?, result_dtype(&a))?])
}

pub(crate) fn silu_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    require_float_activation(c.op, &a)?;
    let x = upcast(&a)?;
    Ok(vec![to(&mul(&x, &sigmoid_of(&x)?)?, a.dtype())?])
}

fn require_float_activation(op: &str, a: &Tensor) -> Result<()> {
    if !dtype::is_float(a.dtype()) {
        bail_op!(
            op,
            "expected a floating-point tensor, got {}",
            a.dtype().short_name()
        );
    }
    Ok(())
}

/// `softplus(x, beta, threshold) = log(1 + exp(beta x)) / beta`, and `x` where `beta x > threshold`.
pub(crate) fn softplus_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    require_float_activation(c.op, &a)?;
    let beta = float_arg(c, 1)?;
    let threshold = float_arg(c, 2)?;
    let x = upcast(&a)?;
    let bx = mul(&x, beta)?;
    let soft = div(&log(&add(&exp(&bx)?, 1.0)?)?, beta)?;
    let linear = crate::elementwise::gt(&bx, threshold)?;
    Ok(vec![to(
        &crate::elementwise::where_(&linear, &x, &soft)?,
        a.dtype(),
    )?])
}

fn float_arg(c: &CallArgs, i: usize) -> Result<f64> {
    match c.args.get(i) {
        Some(Arg::Float(x)) => Ok(*x),
        Some(Arg::Int(x)) => Ok(*x as f64),
        other => bail_op!(c.op, "argument {i} must be a number, got {other:?}"),
    }
}

/// Clamps to `[lo, hi]` (either may be absent); NaN stays NaN, as in torch.
fn clamp_impl(op: &str, a: &Tensor, lo: Option<Operand>, hi: Option<Operand>) -> Result<Tensor> {
    if lo.is_none() && hi.is_none() {
        bail_op!(op, "at least one of min and max must be given");
    }
    // Bounds compare by value, as torch does: an int bound outside the dtype's range is clipped
    // to it (clamping u8 below at -1 changes nothing).
    let clip = |o: Operand| match (o, dtype::int_range(a.dtype())) {
        (Operand::Int(i), Some((min, max))) => Operand::Int(i.clamp(min, max)),
        (o, _) => o,
    };
    let (lo, hi) = (lo.map(clip), hi.map(clip));
    let mut y = a.clone();
    if let Some(lo) = lo {
        y = maximum(&y, lo)?;
    }
    if let Some(hi) = hi {
        y = minimum(&y, hi)?;
    }
    Ok(y)
}

fn bound(c: &CallArgs, i: usize) -> Result<Option<Operand>> {
    match c.args.get(i) {
        Some(Arg::None) => Ok(None),
        Some(_) => c.operand(i).map(Some),
        None => bail_op!(c.op, "missing argument {i}"),
    }
}

pub(crate) fn clamp_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    if a.dtype() == DType::Bool {
        return Err(Error::dtype(c.op, DType::Bool, ""));
    }
    Ok(vec![clamp_impl(c.op, &a, bound(c, 1)?, bound(c, 2)?)?])
}

pub(crate) fn relu6_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    if a.dtype() == DType::Bool {
        return Err(Error::dtype(c.op, DType::Bool, ""));
    }
    Ok(vec![clamp_impl(
        c.op,
        &a,
        Some(Operand::Int(0)),
        Some(Operand::Int(6)),
    )?])
}

pub(crate) fn hardswish_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    let a = c.tensor(0)?;
    require_float_activation(c.op, &a)?;
    let x = upcast(&a)?;
    let gate = clamp_impl(
        c.op,
        &add(&x, 3.0)?,
        Some(Operand::Float(0.0)),
        Some(Operand::Float(6.0)),
    )?;
    Ok(vec![to(&div(&mul(&x, &gate)?, 6.0)?, a.dtype())?])
}

pub(crate) fn leaky_relu_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    require_float_activation(c.op, &a)?;
    let slope = float_arg(c, 1)?;
    let x = upcast(&a)?;
    let positive = crate::elementwise::gt(&x, 0.0)?;
    Ok(vec![to(
        &crate::elementwise::where_(&positive, &x, mul(&x, slope)?)?,
        a.dtype(),
    )?])
}

macro_rules! unary_api {
    ($($name:ident),*) => {$(
        pub fn $name(a: &Tensor) -> Result<Tensor> {
            call1(concat!("ltorch.", stringify!($name)), vec![Arg::Value(a.value())])
        }
    )*};
}

unary_api!(sigmoid, silu, relu6, hardswish);

pub fn softplus(a: &Tensor, beta: f64, threshold: f64) -> Result<Tensor> {
    call1(
        "ltorch.softplus",
        vec![
            Arg::Value(a.value()),
            Arg::Float(beta),
            Arg::Float(threshold),
        ],
    )
}

pub fn leaky_relu(a: &Tensor, negative_slope: f64) -> Result<Tensor> {
    call1(
        "ltorch.leaky_relu",
        vec![Arg::Value(a.value()), Arg::Float(negative_slope)],
    )
}

/// `clamp(a, min, max)`; either bound may be `None`.
pub fn clamp(a: &Tensor, min: Option<Operand>, max: Option<Operand>) -> Result<Tensor> {
    let b = |o: Option<Operand>| o.map_or(Arg::None, |o| o.to_arg());
    call1("ltorch.clamp", vec![Arg::Value(a.value()), b(min), b(max)])
}
