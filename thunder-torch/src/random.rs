//! Random tensors and dropout from an explicit seed and offset.
//!
//! torch draws from a global generator that `torch.manual_seed(s)` resets and every call
//! advances. Traces are pure, so the generator state is an argument here: `seed` is the key
//! (torch's manual seed) and `offset` counts Philox blocks already used. A call that makes `n`
//! numbers uses `ceil(n / 2)` blocks (see `prims.uniform`), so a sequence of calls that should
//! not repeat numbers passes `offset`, `offset + ceil(n0 / 2)`, ... The numbers differ from
//! torch's CPU generator (a Mersenne twister); they are identical on every thunder executor.

use crate::elementwise::{mul, to, where_};
use crate::{call1, CallArgs};
use thunder_core::device::Device;
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Result};
use thunder_core::ir::Arg;
use thunder_core::prims::{prim1, Prim};
use thunder_core::tensor::Tensor;

/// `(shape, seed, offset, dtype, device)` of rand/randn; the dtype must be a float.
fn factory_args(c: &CallArgs) -> Result<(Vec<i64>, i64, i64, DType, Device)> {
    c.expect(5)?;
    let shape = c.ints(0)?;
    let (seed, offset) = (c.int(1)?, c.int(2)?);
    let dtype = c.dtype(3)?;
    if !dtype::is_float(dtype) {
        bail_op!(
            c.op,
            "argument 3 (dtype) must be a floating-point dtype, got {}",
            dtype.short_name()
        );
    }
    Ok((shape, seed, offset, dtype, c.device(4)?))
}

fn random(
    prim: Prim,
    shape: Vec<i64>,
    a: f64,
    b: f64,
    (seed, offset): (i64, i64),
    device: Device,
    dtype: DType,
) -> Result<Tensor> {
    prim1(
        prim,
        vec![
            Arg::Ints(shape),
            Arg::Float(a),
            Arg::Float(b),
            Arg::Int(seed),
            Arg::Int(offset),
            Arg::Device(device),
            Arg::DType(dtype),
        ],
    )
}

pub(crate) fn rand_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    let (shape, seed, offset, dtype, device) = factory_args(c)?;
    Ok(vec![random(
        Prim::Uniform,
        shape,
        0.0,
        1.0,
        (seed, offset),
        device,
        dtype,
    )?])
}

pub(crate) fn randn_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    let (shape, seed, offset, dtype, device) = factory_args(c)?;
    Ok(vec![random(
        Prim::Normal,
        shape,
        0.0,
        1.0,
        (seed, offset),
        device,
        dtype,
    )?])
}

fn factory_call(
    id: &str,
    shape: &[i64],
    seed: u64,
    offset: u64,
    dtype: DType,
    device: Device,
) -> Result<Tensor> {
    call1(
        id,
        vec![
            Arg::Ints(shape.to_vec()),
            // u64 carried in i64, two's complement.
            Arg::Int(seed as i64),
            Arg::Int(offset as i64),
            Arg::DType(dtype),
            Arg::Device(device),
        ],
    )
}

/// Uniform numbers in `[0, 1)` (`torch.rand`), from `seed` and `offset`.
pub fn rand(shape: &[i64], seed: u64, offset: u64, dtype: DType, device: Device) -> Result<Tensor> {
    factory_call("ltorch.rand", shape, seed, offset, dtype, device)
}

/// Standard normal numbers (`torch.randn`), from `seed` and `offset`.
pub fn randn(
    shape: &[i64],
    seed: u64,
    offset: u64,
    dtype: DType,
    device: Device,
) -> Result<Tensor> {
    factory_call("ltorch.randn", shape, seed, offset, dtype, device)
}

/// `dropout(input, p, training, seed, offset)`: each element is kept with probability `1 - p`
/// (where the uniform number of its position is `>= p`) and scaled by `1 / (1 - p)`, the rest
/// are zero; the identity when not training or `p == 0`, zeros when `p == 1`, as torch.
pub(crate) fn dropout_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let a = c.tensor(0)?;
    let p = match c.args.get(1) {
        Some(Arg::Float(p)) => *p,
        Some(Arg::Int(p)) => *p as f64,
        other => bail_op!(c.op, "argument 1 (p) must be a number, got {other:?}"),
    };
    if !(0.0..=1.0).contains(&p) {
        bail_op!(c.op, "argument 1 (p) must be in [0, 1], got {p}");
    }
    if !dtype::is_float(a.dtype()) {
        bail_op!(
            c.op,
            "argument 0 (input) must be floating point, got {}",
            a.dtype().short_name()
        );
    }
    let training = c.bool(2)?;
    let (seed, offset) = (c.int(3)?, c.int(4)?);
    if !training || p == 0.0 {
        return Ok(vec![a]);
    }
    if p == 1.0 {
        return Ok(vec![mul(&a, 0.0)?]);
    }
    let u = random(
        Prim::Uniform,
        a.shape().to_vec(),
        0.0,
        1.0,
        (seed, offset),
        a.device(),
        DType::F32,
    )?;
    let keep = prim1(Prim::Ge, vec![Arg::Value(u.value()), Arg::Float(p)])?;
    let scaled = mul(&a, 1.0 / (1.0 - p))?;
    Ok(vec![to(&where_(&keep, &scaled, 0.0)?, a.dtype())?])
}

pub fn dropout(input: &Tensor, p: f64, training: bool, seed: u64, offset: u64) -> Result<Tensor> {
    call1(
        "ltorch.dropout",
        vec![
            Arg::Value(input.value()),
            Arg::Float(p),
            Arg::Bool(training),
            Arg::Int(seed as i64),
            Arg::Int(offset as i64),
        ],
    )
}
