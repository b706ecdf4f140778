//! Convolutions and pooling: conv1d, conv2d, conv3d, max_pool2d, avg_pool2d, adaptive_avg_pool2d.
//! Convolutions map to `prims.convolution`; pooling windows are strided slices of the padded
//! input (one per kernel offset), so no window prim is needed and gradients come from the
//! slice, pad, cat and take_along_axis rules.

use crate::elementwise::{
    add, div, floor_divide, ge, lt, mul, require_float, sub, to, upcast, where_,
};
use crate::{call1, matmul, CallArgs};
use thunder_core::clang;
use thunder_core::dtype::DType;
use thunder_core::error::{bail_op, Result};
use thunder_core::ir::Arg;
use thunder_core::prims::{prim1, Prim};
use thunder_core::tensor::Tensor;

fn value(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

/// An int or a list of `n` ints (torch's `_single` / `_pair`), each at least `min`.
fn per_dim(c: &CallArgs, i: usize, what: &str, n: usize, min: i64) -> Result<Vec<i64>> {
    let v = match c.args.get(i) {
        Some(Arg::Int(x)) => vec![*x; n],
        Some(Arg::Ints(v)) if v.len() == 1 => vec![v[0]; n],
        Some(Arg::Ints(v)) if v.len() == n => v.clone(),
        other => bail_op!(
            c.op,
            "argument {i} ({what}) must be an int or {n} ints, got {other:?}"
        ),
    };
    if let Some(bad) = v.iter().find(|&&x| x < min) {
        bail_op!(c.op, "argument {i} ({what}) must be >= {min}, got {bad}");
    }
    Ok(v)
}

/// `[N, C, *S]` as is, or an unbatched `[C, *S]` with a batch dim of 1 (and whether it was).
fn batched(c: &CallArgs, a: &Tensor, spatial: usize) -> Result<(Tensor, bool)> {
    if a.rank() == spatial + 2 {
        Ok((a.clone(), false))
    } else if a.rank() == spatial + 1 {
        let mut shape = vec![1];
        shape.extend_from_slice(a.shape());
        Ok((clang::reshape(a, shape)?, true))
    } else {
        bail_op!(
            c.op,
            "argument 0 (input) must be {}-D (unbatched) or {}-D (batched), got {}",
            spatial + 1,
            spatial + 2,
            a.ty()
        )
    }
}

fn unbatch(t: Tensor, was_unbatched: bool) -> Result<Tensor> {
    if was_unbatched {
        clang::reshape(&t, t.shape()[1..].to_vec())
    } else {
        Ok(t)
    }
}

/// `conv{1,2}d(input, weight, bias, stride, padding, dilation, groups)`; `padding` may be an
/// int, a list, or "valid" / "same" (stride 1; an odd total puts the extra zero on the high
/// side, as torch does).
fn conv_nd(c: &CallArgs, spatial: usize) -> Result<Vec<Tensor>> {
    c.expect(7)?;
    let (a, unbatched) = batched(c, &c.tensor(0)?, spatial)?;
    let w = c.tensor(1)?;
    if w.rank() != spatial + 2 {
        bail_op!(
            c.op,
            "argument 1 (weight) must be {}-D [C_out, C_in / groups, *kernel], got {}",
            spatial + 2,
            w.ty()
        );
    }
    let bias = c.opt_tensor(2)?;
    let stride = per_dim(c, 3, "stride", spatial, 1)?;
    let dilation = per_dim(c, 5, "dilation", spatial, 1)?;
    let groups = c.int(6)?;
    let (mut x, padding) = match c.args.get(4) {
        Some(Arg::Str(mode)) if mode == "valid" => (a, vec![0; spatial]),
        Some(Arg::Str(mode)) if mode == "same" => {
            if stride.iter().any(|&s| s != 1) {
                bail_op!(
                    c.op,
                    "argument 4 (padding) \"same\" needs stride 1, got stride {stride:?}"
                );
            }
            let mut config = vec![0i64; 6];
            let mut symmetric = Vec::with_capacity(spatial);
            for (d, k) in dilation.iter().zip(&w.shape()[2..]) {
                let total = d * (k - 1);
                symmetric.push(total / 2);
                config.extend([0, total - 2 * (total / 2), 0]);
            }
            (clang::pad(&a, Arg::Int(0), config)?, symmetric)
        }
        Some(Arg::Str(mode)) => bail_op!(
            c.op,
            "argument 4 (padding) must be \"valid\", \"same\", an int or {spatial} ints, got \"{mode}\""
        ),
        _ => (a, per_dim(c, 4, "padding", spatial, 0)?),
    };
    if x.dtype() != w.dtype() {
        bail_op!(
            c.op,
            "argument 0 (input) and argument 1 (weight) must have the same dtype, got {} and {}",
            x.dtype().short_name(),
            w.dtype().short_name()
        );
    }
    if x.rank() > 0 && groups >= 1 && x.shape()[1] != w.shape()[1] * groups {
        bail_op!(
            c.op,
            "argument 0 (input) {} has {} channels, but argument 1 (weight) {} with groups={groups} expects {}",
            x.ty(),
            x.shape()[1],
            w.ty(),
            w.shape()[1] * groups
        );
    }
    x = prim1(
        Prim::Convolution,
        vec![
            value(&x),
            value(&w),
            bias.as_ref().map_or(Arg::None, value),
            Arg::Ints(stride),
            Arg::Ints(padding),
            Arg::Ints(dilation),
            Arg::Int(groups),
        ],
    )?;
    Ok(vec![unbatch(x, unbatched)?])
}

pub(crate) fn conv1d_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    conv_nd(c, 1)
}

pub(crate) fn conv2d_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    conv_nd(c, 2)
}

pub(crate) fn conv3d_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    conv_nd(c, 3)
}

fn conv_args(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Vec<Arg> {
    vec![
        value(input),
        value(weight),
        bias.map_or(Arg::None, value),
        Arg::Ints(stride.to_vec()),
        Arg::Ints(padding.to_vec()),
        Arg::Ints(dilation.to_vec()),
        Arg::Int(groups),
    ]
}

/// `torch.nn.functional.conv1d` with numeric padding.
pub fn conv1d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    call1(
        "ltorch.conv1d",
        conv_args(input, weight, bias, stride, padding, dilation, groups),
    )
}

/// `torch.nn.functional.conv2d` with numeric padding.
pub fn conv2d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    call1(
        "ltorch.conv2d",
        conv_args(input, weight, bias, stride, padding, dilation, groups),
    )
}

/// `torch.nn.functional.conv3d` with numeric padding.
pub fn conv3d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    call1(
        "ltorch.conv3d",
        conv_args(input, weight, bias, stride, padding, dilation, groups),
    )
}

/// Pooling geometry shared by max_pool2d and avg_pool2d.
struct Pool {
    kernel: Vec<i64>,
    stride: Vec<i64>,
    padding: Vec<i64>,
    dilation: Vec<i64>,
    out: Vec<i64>,
}

fn pool_geometry(
    c: &CallArgs,
    x: &Tensor,
    stride_at: usize,
    padding_at: usize,
    dilation_at: Option<usize>,
    ceil_at: usize,
) -> Result<Pool> {
    let kernel = per_dim(c, 1, "kernel_size", 2, 1)?;
    let stride = match c.args.get(stride_at) {
        Some(Arg::None) => kernel.clone(),
        Some(Arg::Ints(v)) if v.is_empty() => kernel.clone(),
        _ => per_dim(c, stride_at, "stride", 2, 1)?,
    };
    let padding = per_dim(c, padding_at, "padding", 2, 0)?;
    let dilation = match dilation_at {
        Some(i) => per_dim(c, i, "dilation", 2, 1)?,
        None => vec![1, 1],
    };
    if c.bool(ceil_at)? {
        bail_op!(
            c.op,
            "argument {ceil_at} (ceil_mode) = True is not supported; use ceil_mode=False"
        );
    }
    let mut out = Vec::with_capacity(2);
    for d in 0..2 {
        if 2 * padding[d] > kernel[d] {
            bail_op!(
                c.op,
                "argument {padding_at} (padding) {padding:?} must be at most half of kernel_size {kernel:?}"
            );
        }
        let size = x.shape()[d + 2] + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1;
        if size < 0 {
            bail_op!(
                c.op,
                "input {} is too small for kernel_size {kernel:?} (padding {padding:?}, dilation {dilation:?}): the output would be empty",
                x.ty()
            );
        }
        out.push(size / stride[d] + 1);
    }
    Ok(Pool {
        kernel,
        stride,
        padding,
        dilation,
        out,
    })
}

/// One strided slice of the padded `[N, C, H, W]` input per kernel offset, in row-major
/// kernel order.
fn windows(padded: &Tensor, p: &Pool) -> Result<Vec<Tensor>> {
    let (n, ch) = (padded.shape()[0], padded.shape()[1]);
    let mut out = Vec::new();
    for kh in 0..p.kernel[0] {
        for kw in 0..p.kernel[1] {
            let (h0, w0) = (kh * p.dilation[0], kw * p.dilation[1]);
            out.push(clang::slice(
                padded,
                vec![0, 0, h0, w0],
                vec![
                    n,
                    ch,
                    h0 + (p.out[0] - 1) * p.stride[0] + 1,
                    w0 + (p.out[1] - 1) * p.stride[1] + 1,
                ],
                vec![1, 1, p.stride[0], p.stride[1]],
            )?);
        }
    }
    Ok(out)
}

fn pad_hw(x: &Tensor, p: &Pool, fill: Arg) -> Result<Tensor> {
    let config = vec![
        0,
        0,
        0,
        0,
        0,
        0,
        p.padding[0],
        p.padding[0],
        0,
        p.padding[1],
        p.padding[1],
        0,
    ];
    clang::pad(x, fill, config)
}

/// `max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)`: the windows are
/// stacked, the first maximum of each is found (argmax: NaN wins) and read back, so the
/// gradient goes to that one element, as torch's.
pub(crate) fn max_pool2d_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(6)?;
    let a = c.tensor(0)?;
    // Padding never wins: -inf for floats, the dtype's minimum for integers.
    let fill = match thunder_core::dtype::int_range(a.dtype()) {
        _ if a.dtype() == DType::Bool => {
            bail_op!(c.op, "argument 0 (input) must not be b8 (as torch)")
        }
        Some((lo, _)) => Arg::Int(lo),
        None => Arg::Float(f64::NEG_INFINITY),
    };
    let (x, unbatched) = batched(c, &a, 2)?;
    let p = pool_geometry(c, &x, 2, 3, Some(4), 5)?;
    let padded = pad_hw(&x, &p, fill)?;
    let mut stacked_shape = vec![1];
    stacked_shape.extend_from_slice(&[x.shape()[0], x.shape()[1], p.out[0], p.out[1]]);
    let parts = windows(&padded, &p)?
        .iter()
        .map(|w| clang::reshape(w, stacked_shape.clone()))
        .collect::<Result<Vec<_>>>()?;
    let stacked = clang::cat(&parts, 0)?;
    let index = prim1(Prim::Argmax, vec![value(&stacked), Arg::Int(0)])?;
    let index = clang::reshape(&index, stacked_shape.clone())?;
    let picked = clang::take_along_axis(&stacked, &index, 0)?;
    let out = clang::reshape(&picked, stacked_shape[1..].to_vec())?;
    Ok(vec![unbatch(out, unbatched)?])
}

pub fn max_pool2d(
    input: &Tensor,
    kernel_size: &[i64],
    stride: Option<&[i64]>,
    padding: &[i64],
    dilation: &[i64],
) -> Result<Tensor> {
    call1(
        "ltorch.max_pool2d",
        vec![
            value(input),
            Arg::Ints(kernel_size.to_vec()),
            stride.map_or(Arg::None, |s| Arg::Ints(s.to_vec())),
            Arg::Ints(padding.to_vec()),
            Arg::Ints(dilation.to_vec()),
            Arg::Bool(false),
        ],
    )
}

/// `avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
/// divisor_override)`: the sum of the windows of the zero-padded input over the kernel area,
/// the count of real (unpadded) elements, or `divisor_override`.
pub(crate) fn avg_pool2d_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(7)?;
    let a = c.tensor(0)?;
    if a.dtype() == DType::Bool {
        bail_op!(c.op, "argument 0 (input) must not be b8 (as torch)");
    }
    let (x, unbatched) = batched(c, &a, 2)?;
    let p = pool_geometry(c, &x, 2, 3, None, 4)?;
    let count_include_pad = c.bool(5)?;
    let divisor_override = match c.args.get(6) {
        Some(Arg::None) => None,
        Some(Arg::Int(d)) if *d != 0 => Some(*d),
        other => bail_op!(
            c.op,
            "argument 6 (divisor_override) must be a non-zero int or None, got {other:?}"
        ),
    };
    // Integers sum exactly in i64 and are divided in f64, then truncated like torch's integer
    // kernel (exact while the window sums stay below 2^53).
    let is_int = !thunder_core::dtype::is_float(a.dtype());
    let xf = if is_int {
        clang::convert(&x, DType::I64)?
    } else {
        upcast(&x)?
    };
    let sum_windows = |t: &Tensor| -> Result<Tensor> {
        let mut acc: Option<Tensor> = None;
        for w in windows(&pad_hw(t, &p, Arg::Int(0))?, &p)? {
            acc = Some(match acc {
                Some(s) => add(&s, &w)?,
                None => w,
            });
        }
        acc.ok_or_else(|| thunder_core::error::Error::op(c.op, "kernel_size has no elements"))
    };
    let mut total = sum_windows(&xf)?;
    if is_int {
        total = clang::convert(&total, DType::F64)?;
    }
    let out = match divisor_override {
        Some(d) => div(&total, d as f64)?,
        None if count_include_pad || p.padding.iter().all(|&q| q == 0) => {
            div(&total, (p.kernel[0] * p.kernel[1]) as f64)?
        }
        None => {
            // Only the real elements count: the same windows over ones, zero-padded.
            let ones = clang::full(
                vec![1, 1, x.shape()[2], x.shape()[3]],
                Arg::Float(1.0),
                x.device(),
                total.dtype(),
            )?;
            div(&total, &sum_windows(&ones)?)?
        }
    };
    let out = if is_int { crate::trunc(&out)? } else { out };
    Ok(vec![unbatch(to(&out, a.dtype())?, unbatched)?])
}

pub fn avg_pool2d(
    input: &Tensor,
    kernel_size: &[i64],
    stride: Option<&[i64]>,
    padding: &[i64],
    count_include_pad: bool,
) -> Result<Tensor> {
    call1(
        "ltorch.avg_pool2d",
        vec![
            value(input),
            Arg::Ints(kernel_size.to_vec()),
            stride.map_or(Arg::None, |s| Arg::Ints(s.to_vec())),
            Arg::Ints(padding.to_vec()),
            Arg::Bool(false),
            Arg::Bool(count_include_pad),
            Arg::None,
        ],
    )
}

/// `[out, size]` averaging matrix of adaptive pooling: row `i` averages
/// `[floor(i * size / out), ceil((i + 1) * size / out))`, as torch's windows.
fn adaptive_matrix(size: i64, out: i64, like: &Tensor) -> Result<Tensor> {
    let device = like.device();
    let i = clang::reshape(&clang::iota(out, device)?, vec![out, 1])?;
    let j = clang::reshape(&clang::iota(size, device)?, vec![1, size])?;
    let start = floor_divide(&mul(&i, size)?, out)?;
    let end = floor_divide(&add(&mul(&add(&i, 1)?, size)?, out - 1)?, out)?;
    let inside = mul(&ge(&j, &start)?, &lt(&j, &end)?)?;
    let width = to(&sub(&end, &start)?, like.dtype())?;
    div(&where_(&to(&inside, DType::Bool)?, 1.0, 0.0)?, &width).and_then(|m| to(&m, like.dtype()))
}

/// `adaptive_avg_pool2d(input, output_size)`: separable, so two matmuls with averaging
/// matrices (`P_h @ x @ P_w^T`).
pub(crate) fn adaptive_avg_pool2d_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    require_float(c.op, &a)?;
    let (x, unbatched) = batched(c, &a, 2)?;
    let out = per_dim(c, 1, "output_size", 2, 0)?;
    let (h, w) = (x.shape()[2], x.shape()[3]);
    if (h == 0 || w == 0) && out.iter().any(|&o| o > 0) {
        bail_op!(
            c.op,
            "argument 0 (input) {} has an empty spatial dim",
            a.ty()
        );
    }
    let xf = upcast(&x)?;
    let ph = adaptive_matrix(h, out[0], &xf)?;
    let pw = adaptive_matrix(w, out[1], &xf)?;
    let y = matmul(&matmul(&ph, &xf)?, &clang::transpose(&pw, vec![1, 0])?)?;
    Ok(vec![unbatch(to(&y, a.dtype())?, unbatched)?])
}

pub fn adaptive_avg_pool2d(input: &Tensor, output_size: &[i64]) -> Result<Tensor> {
    call1(
        "ltorch.adaptive_avg_pool2d",
        vec![value(input), Arg::Ints(output_size.to_vec())],
    )
}
