//! Meta rules of the index-producing reductions, var_mean, scans and sorts. Each message names
//! the prim and the offending argument.

use super::{expect_arity, ints_arg, tensor, Types};
use crate::dtype::{self, DType};
use crate::error::{bail_op, Error, Result};
use crate::ir::{Arg, ShapeDisplay, TensorType};
use thunder_abi::prims::{Prim, SortPrim};

fn int_arg(op: &str, args: &[Arg], i: usize, what: &str) -> Result<i64> {
    match args.get(i) {
        Some(Arg::Int(v)) => Ok(*v),
        other => Err(Error::op(
            op,
            format!("argument {i} ({what}) must be an int, got {other:?}"),
        )),
    }
}

fn bool_arg(op: &str, args: &[Arg], i: usize, what: &str) -> Result<bool> {
    match args.get(i) {
        Some(Arg::Bool(v)) => Ok(*v),
        other => Err(Error::op(
            op,
            format!("argument {i} ({what}) must be True or False, got {other:?}"),
        )),
    }
}

/// A dim of `a` in `[0, rank)`: prims take canonical dims (ltorch wraps negative ones).
fn dim_in_range(op: &str, a: &TensorType, dim: i64) -> Result<usize> {
    if dim < 0 || dim as usize >= a.rank() {
        bail_op!(
            op,
            "dim {dim} is out of range for {} (expected a dim in [0, {}))",
            ShapeDisplay(&a.shape),
            a.rank()
        );
    }
    Ok(dim as usize)
}

fn without_dim(a: &TensorType, dim: usize) -> Vec<i64> {
    let mut shape = a.shape.clone();
    shape.remove(dim);
    shape
}

/// `argmax(a, dim)`, `argmin(a, dim)`: i64 out, `dim` removed.
pub(super) fn arg_reduction(prim: Prim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 2)?;
    let a = tensor(op, types, 0)?;
    let dim = dim_in_range(op, a, int_arg(op, args, 1, "dim")?)?;
    if a.shape[dim] == 0 {
        bail_op!(
            op,
            "dim {dim} of {} has size 0 (the index of the extremum of nothing is undefined)",
            ShapeDisplay(&a.shape)
        );
    }
    Ok(TensorType::new(without_dim(a, dim), DType::I64, a.device))
}

/// `var_mean(a, dims, correction)`: (variance, mean), both of `a`'s float dtype.
pub(super) fn var_mean(prim: Prim, args: &[Arg], types: Types) -> Result<Vec<TensorType>> {
    let op = prim.id();
    expect_arity(op, args, 3)?;
    let a = tensor(op, types, 0)?;
    if !dtype::is_float(a.dtype) {
        bail_op!(
            op,
            "argument 0 must be floating point, got {}",
            a.dtype.short_name()
        );
    }
    let dims = ints_arg(op, args, 1, "dims")?;
    let mut reduced = vec![false; a.rank()];
    for &d in dims {
        if d < 0 || d as usize >= a.rank() || reduced[d as usize] {
            bail_op!(
                op,
                "dims {dims:?} must be distinct and in [0, {})",
                a.rank()
            );
        }
        reduced[d as usize] = true;
    }
    match args.get(2) {
        Some(Arg::Int(_) | Arg::Float(_)) => {}
        other => bail_op!(
            op,
            "argument 2 (correction) must be a number, got {other:?}"
        ),
    }
    let shape: Vec<i64> = a
        .shape
        .iter()
        .zip(&reduced)
        .filter(|(_, &r)| !r)
        .map(|(&d, _)| d)
        .collect();
    let t = TensorType::new(shape, a.dtype, a.device);
    Ok(vec![t.clone(), t])
}

/// `cumsum(a, dim)`: same type as `a`.
pub(super) fn scan(prim: Prim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 2)?;
    let a = tensor(op, types, 0)?;
    dim_in_range(op, a, int_arg(op, args, 1, "dim")?)?;
    if a.dtype == DType::Bool {
        bail_op!(op, "does not support dtype b8");
    }
    Ok(a.clone())
}

/// `topk(a, k, dim, largest, sorted)` and `sort(a, dim, descending, stable)`:
/// (values of `a`'s dtype, i64 indices).
pub(super) fn sort(prim: SortPrim, args: &[Arg], types: Types) -> Result<Vec<TensorType>> {
    let op = prim.id();
    let a = tensor(op, types, 0)?;
    let shape = match prim {
        SortPrim::Topk => {
            expect_arity(op, args, 5)?;
            let k = int_arg(op, args, 1, "k")?;
            let dim = dim_in_range(op, a, int_arg(op, args, 2, "dim")?)?;
            bool_arg(op, args, 3, "largest")?;
            bool_arg(op, args, 4, "sorted")?;
            if k < 0 || k > a.shape[dim] {
                bail_op!(
                    op,
                    "k ({k}) must be in [0, {}], the size of dim {dim} of {}",
                    a.shape[dim],
                    ShapeDisplay(&a.shape)
                );
            }
            let mut shape = a.shape.clone();
            shape[dim] = k;
            shape
        }
        SortPrim::Sort => {
            expect_arity(op, args, 4)?;
            dim_in_range(op, a, int_arg(op, args, 1, "dim")?)?;
            bool_arg(op, args, 2, "descending")?;
            bool_arg(op, args, 3, "stable")?;
            a.shape.clone()
        }
    };
    Ok(vec![
        TensorType::new(shape.clone(), a.dtype, a.device),
        TensorType::new(shape, DType::I64, a.device),
    ])
}

/// `convolution(a, weight, bias, stride, padding, dilation, groups)`: `a` is `[N, C_in, *S]`,
/// `weight` `[C_out, C_in / groups, *K]`, `bias` `[C_out]` or None; floats of one dtype.
pub(super) fn convolution(prim: Prim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 7)?;
    let a = tensor(op, types, 0)?;
    let w = tensor(op, types, 1)?;
    let spatial = w.rank().saturating_sub(2);
    if spatial == 0 || a.rank() != spatial + 2 {
        bail_op!(
            op,
            "input {} and weight {} must be [N, C_in, *spatial] and [C_out, C_in / groups, *kernel] with one or more spatial dims",
            ShapeDisplay(&a.shape),
            ShapeDisplay(&w.shape)
        );
    }
    if a.dtype == DType::Bool || a.dtype != w.dtype {
        bail_op!(
            op,
            "input and weight must share a numeric (non-b8) dtype, got {} and {}",
            a.dtype.short_name(),
            w.dtype.short_name()
        );
    }
    if a.device != w.device {
        bail_op!(
            op,
            "input and weight are on different devices: {} and {}",
            a.device,
            w.device
        );
    }
    let list = |i: usize, what: &str, min: i64| -> Result<Vec<i64>> {
        let v = ints_arg(op, args, i, what)?;
        if v.len() != spatial || v.iter().any(|&x| x < min) {
            bail_op!(
                op,
                "argument {i} ({what}) must be {spatial} ints >= {min}, got {v:?}"
            );
        }
        Ok(v.to_vec())
    };
    let stride = list(3, "stride", 1)?;
    let padding = list(4, "padding", 0)?;
    let dilation = list(5, "dilation", 1)?;
    let groups = int_arg(op, args, 6, "groups")?;
    let (c_in, c_out) = (a.shape[1], w.shape[0]);
    if groups < 1 || c_out % groups != 0 {
        bail_op!(
            op,
            "groups ({groups}) must be >= 1 and divide the weight's output channels ({c_out})"
        );
    }
    if c_in != w.shape[1] * groups {
        bail_op!(
            op,
            "input channels ({c_in}, dim 1 of input {}) must equal weight dim 1 ({}) * groups ({groups})",
            ShapeDisplay(&a.shape),
            w.shape[1]
        );
    }
    match (types.get(2), args.get(2)) {
        (Some(Some(b)), _) => {
            if b.shape != [c_out] || b.dtype != a.dtype || b.device != a.device {
                bail_op!(
                    op,
                    "bias must be {}[{c_out}] on {}, got {} {}",
                    a.dtype.short_name(),
                    a.device,
                    b.dtype.short_name(),
                    ShapeDisplay(&b.shape)
                );
            }
        }
        (_, Some(Arg::None)) => {}
        (_, other) => bail_op!(
            op,
            "argument 2 (bias) must be a tensor or None, got {other:?}"
        ),
    }
    let mut shape = vec![a.shape[0], c_out];
    for d in 0..spatial {
        let span = dilation[d] * (w.shape[d + 2] - 1) + 1;
        let padded = a.shape[d + 2] + 2 * padding[d];
        if w.shape[d + 2] == 0 || padded < span {
            bail_op!(
                op,
                "spatial dim {d}: the padded input size ({padded}) is smaller than the dilated kernel ({span}); the output would be empty"
            );
        }
        shape.push((padded - span) / stride[d] + 1);
    }
    Ok(TensorType::new(shape, a.dtype, a.device))
}

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
