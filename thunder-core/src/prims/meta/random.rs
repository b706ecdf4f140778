//! Meta rules of the counter-based random prims, uniform and normal.

use super::along_dims::int_arg;
use super::{expect_arity, ints_arg};
use crate::dtype::{self};
use crate::error::{bail_op, Result};
use crate::ir::{Arg, TensorType};
use thunder_abi::prims::Prim;

/// `uniform(shape, low, high, seed, offset, device, dtype)` and `normal(shape, mean, std, seed,
/// offset, device, dtype)`: a float tensor of `shape`.
pub(super) fn random(prim: Prim, args: &[Arg]) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 7)?;
    let shape = ints_arg(op, args, 0, "shape")?;
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        bail_op!(
            op,
            "argument 0 (shape) {shape:?} has a negative dimension {d}"
        );
    }
    let (a, b) = if prim == Prim::Uniform {
        ("low", "high")
    } else {
        ("mean", "std")
    };
    let mut bounds = [0.0; 2];
    for (slot, (i, what)) in bounds.iter_mut().zip([(1, a), (2, b)]) {
        *slot = match args.get(i) {
            Some(Arg::Float(x)) => *x,
            Some(Arg::Int(x)) => *x as f64,
            other => bail_op!(op, "argument {i} ({what}) must be a number, got {other:?}"),
        };
        if !slot.is_finite() {
            bail_op!(op, "argument {i} ({what}) must be finite, got {slot}");
        }
    }
    if prim == Prim::Uniform && bounds[0] > bounds[1] {
        bail_op!(
            op,
            "argument 1 (low = {}) must not exceed argument 2 (high = {})",
            bounds[0],
            bounds[1]
        );
    }
    if prim == Prim::Normal && bounds[1] < 0.0 {
        bail_op!(op, "argument 2 (std) must be >= 0, got {}", bounds[1]);
    }
    int_arg(op, args, 3, "seed")?;
    int_arg(op, args, 4, "offset")?;
    let device = match args.get(5) {
        Some(Arg::Device(d)) => *d,
        other => bail_op!(op, "argument 5 (device) must be a device, got {other:?}"),
    };
    let dtype = match args.get(6) {
        Some(Arg::DType(d)) if dtype::is_float(*d) => *d,
        Some(Arg::DType(d)) => bail_op!(
            op,
            "argument 6 (dtype) must be a floating-point dtype, got {}",
            d.short_name()
        ),
        other => bail_op!(
            op,
            "argument 6 (dtype) must be a floating-point dtype, got {other:?}"
        ),
    };
    Ok(TensorType::new(shape.to_vec(), dtype, device))
}
