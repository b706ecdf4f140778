//! Neural-network ops: MatMul, Gemm, normalisations, convolution and pooling.

use crate::error::Result;
use crate::node::NodeCtx;
use crate::value::Val;
use thunder_core::Tensor;
use thunder_torch as ltorch;

pub fn matmul(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let a = ctx.tensor(0)?;
    let b = ctx.tensor(1)?;
    // A batch of rows times a matrix (every Linear layer): one 2-d product on the flattened
    // rows, rather than the matrix broadcast to the batch.
    if a.rank() > 2 && b.rank() == 2 {
        let (k, n) = (b.shape()[0], b.shape()[1]);
        let rows: i64 = a.shape()[..a.rank() - 1].iter().product();
        let flat = ltorch::reshape(&a, &[rows, k])?;
        let y = ltorch::matmul(&flat, &b)?;
        if let Some(out) = ctx.node.output.first().filter(|o| !o.is_empty()) {
            ctx.weights.flat_products.insert(out.clone(), y.clone());
        }
        let mut shape = a.shape()[..a.rank() - 1].to_vec();
        shape.push(n);
        return Ok(vec![Val::Traced(ltorch::reshape(&y, &shape)?)]);
    }
    Ok(vec![Val::Traced(ltorch::matmul(&a, &b)?)])
}

/// `alpha * A' B' + beta * C`; `linear` when B is transposed and the scales are 1.
pub fn gemm(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let (alpha, beta) = (ctx.attr_f("alpha", 1.0), ctx.attr_f("beta", 1.0));
    let (ta, tb) = (ctx.attr_i("transA", 0) == 1, ctx.attr_i("transB", 0) == 1);
    let mut a = ctx.tensor(0)?;
    let b = ctx.tensor(1)?;
    let c = if ctx.has_input(2) {
        Some(ctx.tensor(2)?)
    } else {
        None
    };
    if ta {
        a = ltorch::permute(&a, &[1, 0])?;
    }
    let plain = alpha == 1.0 && beta == 1.0;
    if tb
        && plain
        && c.as_ref()
            .is_none_or(|c| c.rank() == 1 && c.shape()[0] == b.shape()[0])
    {
        return Ok(vec![Val::Traced(ltorch::linear(&a, &b, c.as_ref())?)]);
    }
    let b = if tb { ltorch::permute(&b, &[1, 0])? } else { b };
    let mut y = ltorch::matmul(&a, &b)?;
    if alpha != 1.0 {
        y = ltorch::mul(&y, alpha)?;
    }
    if let Some(c) = c {
        let c = if beta != 1.0 {
            ltorch::mul(&c, beta)?
        } else {
            c
        };
        y = ltorch::add(&y, &c)?;
    }
    Ok(vec![Val::Traced(y)])
}

/// Rejects requests for a node's optional extra outputs (training statistics).
fn only_first_output(ctx: &NodeCtx) -> Result<()> {
    if ctx.node.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(ctx.unsupported(
            "only the first output (the optional statistics outputs are not produced)",
        ));
    }
    Ok(())
}

pub fn layer_norm(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    only_first_output(ctx)?;
    let shape = ctx.shape(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", -1), shape.len())? as usize;
    let eps = ctx.attr_f("epsilon", 1e-5);
    let x = ctx.tensor(0)?;
    let w = ctx.tensor(1)?;
    let b = if ctx.has_input(2) {
        Some(ctx.tensor(2)?)
    } else {
        None
    };
    let y = ltorch::layer_norm(&x, &shape[axis..], Some(&w), b.as_ref(), eps)?;
    Ok(vec![Val::Traced(y)])
}

pub fn batch_norm(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    only_first_output(ctx)?;
    if ctx.attr_i("training_mode", 0) != 0 {
        return Err(ctx.unsupported("training_mode=1"));
    }
    let eps = ctx.attr_f("epsilon", 1e-5);
    let t = (0..5)
        .map(|i| ctx.tensor(i))
        .collect::<Result<Vec<Tensor>>>()?;
    let out = ltorch::batch_norm(
        &t[0],
        Some(&t[3]),
        Some(&t[4]),
        Some(&t[1]),
        Some(&t[2]),
        false,
        0.1,
        eps,
    )?;
    Ok(vec![Val::Traced(out.output)])
}

/// Spatial geometry shared by Conv and the pools: kernel, strides, dilations and the pads
/// split into (begin, end) per spatial dim, with `auto_pad` resolved.
struct Window {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    begin: Vec<i64>,
    end: Vec<i64>,
}

fn window(ctx: &NodeCtx, spatial: &[i64], kernel: Vec<i64>) -> Result<Window> {
    let n = spatial.len();
    let strides = ctx.attr_ints("strides").unwrap_or_else(|| vec![1; n]);
    let dilations = ctx.attr_ints("dilations").unwrap_or_else(|| vec![1; n]);
    if kernel.len() != n || strides.len() != n || dilations.len() != n {
        return Err(ctx.err(format!(
            "kernel, strides and dilations must have {n} values"
        )));
    }
    let auto_pad = ctx.attr_s("auto_pad", "NOTSET");
    let (begin, end) = match auto_pad.as_str() {
        "NOTSET" => {
            let pads = ctx.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * n]);
            if pads.len() != 2 * n {
                return Err(ctx.err(format!("pads must have {} values, got {pads:?}", 2 * n)));
            }
            (pads[..n].to_vec(), pads[n..].to_vec())
        }
        "VALID" => (vec![0; n], vec![0; n]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut b = vec![0; n];
            let mut e = vec![0; n];
            for i in 0..n {
                let out = (spatial[i] + strides[i] - 1) / strides[i];
                let total = ((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
                    - spatial[i])
                    .max(0);
                let small = total / 2;
                (b[i], e[i]) = if auto_pad == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
            }
            (b, e)
        }
        other => {
            return Err(ctx.err(format!(
                "auto_pad `{other}` is not NOTSET, VALID, SAME_UPPER or SAME_LOWER"
            )))
        }
    };
    Ok(Window {
        kernel,
        strides,
        dilations,
        begin,
        end,
    })
}

/// Pads asymmetric windows explicitly (with `fill`); returns the input and symmetric pads.
fn symmetric(x: Tensor, w: &Window, fill: f64) -> Result<(Tensor, Vec<i64>)> {
    if w.begin == w.end {
        return Ok((x, w.begin.clone()));
    }
    let mut pad = Vec::new();
    for i in (0..w.begin.len()).rev() {
        pad.push(w.begin[i]);
        pad.push(w.end[i]);
    }
    let x = ltorch::pad(&x, &pad, fill)?;
    Ok((x, vec![0; w.begin.len()]))
}

pub fn conv(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let xs = ctx.shape(0)?;
    let ws = ctx.shape(1)?;
    if xs.len() < 3 || xs.len() > 5 {
        return Err(ctx.unsupported(format!(
            "{}-d input (Conv takes 1 to 3 spatial dims)",
            xs.len()
        )));
    }
    let kernel = ctx
        .attr_ints("kernel_shape")
        .unwrap_or_else(|| ws[2..].to_vec());
    let w = window(ctx, &xs[2..], kernel)?;
    let groups = ctx.attr_i("group", 1);
    let x = ctx.tensor(0)?;
    let weight = ctx.tensor(1)?;
    let bias = if ctx.has_input(2) {
        Some(ctx.tensor(2)?)
    } else {
        None
    };
    let (x, pads) = symmetric(x, &w, 0.0)?;
    let f = match xs.len() {
        3 => ltorch::conv1d,
        4 => ltorch::conv2d,
        _ => ltorch::conv3d,
    };
    let y = f(
        &x,
        &weight,
        bias.as_ref(),
        &w.strides,
        &pads,
        &w.dilations,
        groups,
    )?;
    Ok(vec![Val::Traced(y)])
}

fn pool_window(ctx: &NodeCtx) -> Result<Window> {
    let xs = ctx.shape(0)?;
    if xs.len() != 4 {
        return Err(ctx.unsupported(format!("{}-d input (only 2-d pooling over NCHW)", xs.len())));
    }
    if ctx.attr_i("ceil_mode", 0) != 0 {
        return Err(ctx.unsupported("ceil_mode=1"));
    }
    let kernel = ctx
        .attr_ints("kernel_shape")
        .ok_or_else(|| ctx.err("attribute `kernel_shape` is required"))?;
    window(ctx, &xs[2..], kernel)
}

pub fn max_pool(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    if ctx.node.output.len() > 1 && !ctx.node.output[1].is_empty() {
        return Err(ctx.unsupported("the Indices output"));
    }
    let w = pool_window(ctx)?;
    let x = ctx.tensor(0)?;
    let (x, pads) = symmetric(x, &w, f64::NEG_INFINITY)?;
    if x.dtype().is_float() {
        let y = super::lowering::max_pool2d_slices(&x, &w.kernel, &w.strides, &pads, &w.dilations)?;
        return Ok(vec![Val::Traced(y)]);
    }
    let y = ltorch::max_pool2d(&x, &w.kernel, Some(&w.strides), &pads, &w.dilations)?;
    Ok(vec![Val::Traced(y)])
}

pub fn average_pool(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let w = pool_window(ctx)?;
    if w.dilations.iter().any(|&d| d != 1) {
        return Err(ctx.unsupported("dilations other than 1"));
    }
    let include = ctx.attr_i("count_include_pad", 0) == 1;
    if w.begin != w.end && !include {
        return Err(ctx.unsupported("asymmetric pads with count_include_pad=0"));
    }
    let x = ctx.tensor(0)?;
    let (x, pads) = symmetric(x, &w, 0.0)?;
    let y = ltorch::avg_pool2d(&x, &w.kernel, Some(&w.strides), &pads, include)?;
    Ok(vec![Val::Traced(y)])
}

fn spatial_dims(ctx: &NodeCtx) -> Result<Vec<i64>> {
    let rank = ctx.rank(0)?;
    if rank < 3 {
        return Err(ctx.err(format!(
            "input of rank {rank}, expected N, C and spatial dims"
        )));
    }
    Ok((2..rank as i64).collect())
}

pub fn global_average_pool(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let dims = spatial_dims(ctx)?;
    let x = ctx.tensor(0)?;
    Ok(vec![Val::Traced(ltorch::mean(&x, Some(&dims), true)?)])
}

pub fn global_max_pool(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let dims = spatial_dims(ctx)?;
    let x = ctx.tensor(0)?;
    Ok(vec![Val::Traced(ltorch::amax(&x, Some(&dims), true)?)])
}
