//! CPU lowerings of 2-d convolution and max pooling onto ops the CPU executors run fast:
//! convolution as im2col (one strided slice of the padded input per kernel tap, stacked) and
//! one matrix product; max pooling as the maximum of the strided slices. Without these, both
//! run as `prims.convolution` / `prims.take_along_axis` in the interpreter, because no CPU
//! executor claims them yet (ResNet-50 ran 40x slower than ONNX Runtime that way). When a CPU
//! executor claims `prims.convolution`, `conv` in nn.rs can go back to `ltorch.conv2d` alone.

use crate::error::Result;
use thunder_core::clang::Operand;
use thunder_core::{ltorch, Tensor};

/// The `kh x kw` strided windows of `x` ([N, C, H, W], already padded), each [N, C, OH, OW].
fn taps(x: &Tensor, kernel: &[i64], strides: &[i64], dilations: &[i64]) -> Result<Vec<Tensor>> {
    let (h, w) = (x.shape()[2], x.shape()[3]);
    let oh = (h - dilations[0] * (kernel[0] - 1) - 1) / strides[0] + 1;
    let ow = (w - dilations[1] * (kernel[1] - 1) - 1) / strides[1] + 1;
    let mut out = Vec::new();
    for i in 0..kernel[0] {
        for j in 0..kernel[1] {
            let (r0, c0) = (i * dilations[0], j * dilations[1]);
            let mut t = x.clone();
            if !(r0 == 0 && oh == h && strides[0] == 1) {
                t = ltorch::slice(
                    &t,
                    2,
                    Some(r0),
                    Some(r0 + (oh - 1) * strides[0] + 1),
                    strides[0],
                )?;
            }
            if !(c0 == 0 && ow == w && strides[1] == 1) {
                t = ltorch::slice(
                    &t,
                    3,
                    Some(c0),
                    Some(c0 + (ow - 1) * strides[1] + 1),
                    strides[1],
                )?;
            }
            out.push(t);
        }
    }
    Ok(out)
}

fn padded(x: &Tensor, pads: &[i64], fill: f64) -> Result<Tensor> {
    if pads.iter().all(|&p| p == 0) {
        return Ok(x.clone());
    }
    Ok(ltorch::pad(x, &[pads[1], pads[1], pads[0], pads[0]], fill)?)
}

/// `conv2d` with one group as im2col + matmul: [O, C*kh*kw] @ [N, C*kh*kw, OH*OW].
pub fn conv2d_im2col(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    strides: &[i64],
    pads: &[i64],
    dilations: &[i64],
) -> Result<Tensor> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let (o, kh, kw) = (weight.shape()[0], weight.shape()[2], weight.shape()[3]);
    let xp = padded(x, pads, 0.0)?;
    let taps = taps(&xp, &[kh, kw], strides, dilations)?;
    let (oh, ow) = (taps[0].shape()[2], taps[0].shape()[3]);
    let cols = if taps.len() == 1 {
        ltorch::reshape(&taps[0], &[n, c, oh * ow])?
    } else {
        let stacked = ltorch::stack(&taps, 2)?; // [N, C, K, OH, OW]
        ltorch::reshape(&stacked, &[n, c * kh * kw, oh * ow])?
    };
    let w2 = ltorch::reshape(weight, &[o, c * kh * kw])?;
    let y = if n == 1 {
        let cols2 = ltorch::reshape(&cols, &[c * kh * kw, oh * ow])?;
        ltorch::matmul(&w2, &cols2)?
    } else {
        ltorch::matmul(&w2, &cols)?
    };
    let mut y = ltorch::reshape(&y, &[n, o, oh, ow])?;
    if let Some(b) = bias {
        y = ltorch::add(&y, ltorch::reshape(b, &[1, o, 1, 1])?)?;
    }
    Ok(y)
}

/// `max_pool2d` as the maximum of the kernel's strided windows of the (-inf padded) input.
pub fn max_pool2d_slices(
    x: &Tensor,
    kernel: &[i64],
    strides: &[i64],
    pads: &[i64],
    dilations: &[i64],
) -> Result<Tensor> {
    let xp = padded(x, pads, f64::NEG_INFINITY)?;
    let taps = taps(&xp, kernel, strides, dilations)?;
    let mut acc = taps[0].clone();
    for t in &taps[1..] {
        acc = ltorch::maximum(&acc, Operand::Tensor(t.clone()))?;
    }
    Ok(acc)
}
