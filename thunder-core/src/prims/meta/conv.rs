//! Meta rule of `prims.convolution`.

use super::along_dims::int_arg;
use super::{expect_arity, ints_arg, tensor, Types};
use crate::dtype::DType;
use crate::error::{bail_op, Result};
use crate::ir::{Arg, ShapeDisplay, TensorType};
use thunder_abi::prims::Prim;

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
