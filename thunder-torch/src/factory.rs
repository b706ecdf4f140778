//! Tensor factories: full, zeros, ones, arange and the `*_like` ones.

use crate::{call1, CallArgs};
use thunder_core::clang;
use thunder_core::device::Device;
use thunder_core::dtype::{self, Category, DType};
use thunder_core::error::Result;
use thunder_core::ir::Arg;
use thunder_core::tensor::Tensor;

/// A fill value converted to the kind of `dtype`, as torch.full converts it.
fn fill_as(fill: &Arg, dtype: DType) -> Arg {
    let x = match fill {
        Arg::Int(i) => *i as f64,
        Arg::Float(x) => *x,
        Arg::Bool(b) => *b as i64 as f64,
        other => return other.clone(),
    };
    match dtype::category(dtype) {
        Category::Float => Arg::Float(x),
        Category::Int => match fill {
            Arg::Int(i) => Arg::Int(*i),
            _ => Arg::Int(x as i64),
        },
        Category::Bool => Arg::Bool(x != 0.0),
    }
}

pub(crate) fn full_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    // No dtype: torch's, from the fill value (bool, i64 for ints, f32 for floats).
    let dtype = match (&c.args[3], c.number(1)?) {
        (Arg::None, Arg::Bool(_)) => DType::Bool,
        (Arg::None, Arg::Int(_)) => DType::I64,
        (Arg::None, _) => DType::F32,
        _ => c.dtype(3)?,
    };
    Ok(vec![clang::full(
        c.ints(0)?,
        fill_as(&c.number(1)?, dtype),
        c.device(2)?,
        dtype,
    )?])
}

pub fn full(shape: &[i64], fill: impl Into<Arg>, device: Device, dtype: DType) -> Result<Tensor> {
    call1(
        "ltorch.full",
        vec![
            Arg::Ints(shape.to_vec()),
            fill.into(),
            Arg::Device(device),
            Arg::DType(dtype),
        ],
    )
}

fn filled(c: &CallArgs, value: i64) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let dtype = c.dtype(2)?;
    Ok(vec![clang::full(
        c.ints(0)?,
        fill_as(&Arg::Int(value), dtype),
        c.device(1)?,
        dtype,
    )?])
}

pub(crate) fn zeros_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    filled(c, 0)
}

pub(crate) fn ones_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    filled(c, 1)
}

pub fn zeros(shape: &[i64], device: Device, dtype: DType) -> Result<Tensor> {
    call1(
        "ltorch.zeros",
        vec![
            Arg::Ints(shape.to_vec()),
            Arg::Device(device),
            Arg::DType(dtype),
        ],
    )
}

pub fn ones(shape: &[i64], device: Device, dtype: DType) -> Result<Tensor> {
    call1(
        "ltorch.ones",
        vec![
            Arg::Ints(shape.to_vec()),
            Arg::Device(device),
            Arg::DType(dtype),
        ],
    )
}

/// `arange(start, end, step, device, dtype)`: integers from `start` below `end`.
pub(crate) fn arange_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let (start, end, step) = (c.int(0)?, c.int(1)?, c.int(2)?);
    if step == 0 {
        return Err(thunder_core::error::Error::op(c.op, "step must be nonzero"));
    }
    let length = ((end - start + step - step.signum()) / step).max(0);
    let out = thunder_core::prims::prim1(
        thunder_core::prims::Prim::Iota,
        vec![
            Arg::Int(length),
            Arg::Int(start),
            Arg::Int(step),
            Arg::Device(c.device(3)?),
            Arg::DType(c.dtype(4)?),
        ],
    )?;
    Ok(vec![out])
}

pub fn arange(start: i64, end: i64, step: i64, device: Device, dtype: DType) -> Result<Tensor> {
    call1(
        "ltorch.arange",
        vec![
            Arg::Int(start),
            Arg::Int(end),
            Arg::Int(step),
            Arg::Device(device),
            Arg::DType(dtype),
        ],
    )
}

fn like(c: &CallArgs, fill: Arg) -> Result<Vec<Tensor>> {
    let a = c.tensor(0)?;
    let fill = match (&fill, dtype::category(a.dtype())) {
        (Arg::Float(x), dtype::Category::Int) => Arg::Int(*x as i64),
        (Arg::Float(x), dtype::Category::Bool) => Arg::Bool(*x != 0.0),
        (Arg::Int(i), dtype::Category::Bool) => Arg::Bool(*i != 0),
        (Arg::Int(i), dtype::Category::Float) => Arg::Float(*i as f64),
        (Arg::Bool(b), dtype::Category::Float) => Arg::Float(*b as i64 as f64),
        (Arg::Bool(b), dtype::Category::Int) => Arg::Int(*b as i64),
        _ => fill,
    };
    Ok(vec![clang::full(
        a.shape().to_vec(),
        fill,
        a.device(),
        a.dtype(),
    )?])
}

pub(crate) fn zeros_like_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    like(c, Arg::Int(0))
}

pub(crate) fn ones_like_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(1)?;
    like(c, Arg::Int(1))
}

pub(crate) fn full_like_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    like(c, c.number(1)?)
}

pub fn zeros_like(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.zeros_like", vec![Arg::Value(a.value())])
}

pub fn ones_like(a: &Tensor) -> Result<Tensor> {
    call1("ltorch.ones_like", vec![Arg::Value(a.value())])
}

pub fn full_like(a: &Tensor, fill: impl Into<Arg>) -> Result<Tensor> {
    call1("ltorch.full_like", vec![Arg::Value(a.value()), fill.into()])
}
