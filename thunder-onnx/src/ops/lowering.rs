//! A CPU lowering of 2-d max pooling onto ops the CPU executors run fast: the maximum of the
//! strided slices of the padded input, one per kernel tap. Without it, pooling runs as
//! `prims.take_along_axis` in the interpreter, which no CPU executor claims yet. (Convolution
//! needs no lowering: cpu-simd runs `prims.convolution` as im2col and GEMM.)

use crate::error::Result;
use thunder_core::clang::Operand;
use thunder_core::Tensor;
use thunder_torch as ltorch;

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
