//! Elementwise ops: arithmetic, comparisons and logic (folded on the host when every input is
//! a small constant), math functions, activations and casts.

use super::fold::{cast_value, map_n};
use crate::error::Result;
use crate::node::NodeCtx;
use crate::tensor::{dtype_of, onnx_type_name};
use crate::value::Val;
use thunder_core::clang::Operand;
use thunder_core::{DType, Tensor};
use thunder_torch as ltorch;

type Traced = fn(Operand, Operand) -> thunder_core::Result<Tensor>;

/// A binary op: folded on the host, else traced with constants of one element as literals.
fn binary(
    ctx: &mut NodeCtx,
    host: fn(f64, f64) -> f64,
    bool_out: bool,
    traced: Traced,
) -> Result<Vec<Val>> {
    let dtype = if bool_out {
        DType::Bool
    } else {
        ctx.input(0)?.dtype()
    };
    if ctx.all_const() {
        let (a, b) = (ctx.host(0)?, ctx.host(1)?);
        let out =
            map_n(&[&a, &b], dtype, |x| cast_value(host(x[0], x[1]), dtype)).ok_or_else(|| {
                ctx.err(format!(
                    "shapes {:?} and {:?} do not broadcast",
                    a.shape, b.shape
                ))
            })?;
        return Ok(vec![ctx.folded(out, 0)?]);
    }
    let (ra, rb) = (ctx.rank(0)?, ctx.rank(1)?);
    let a = ctx.operand(0, rb)?;
    let b = ctx.operand(1, ra)?;
    // Not every input is a small constant, so at least one operand is a tensor.
    Ok(vec![Val::Traced(traced(a, b)?)])
}

/// Add; a bias added to a MatMul of flattened rows is added to the 2-d product, before the
/// reshape back to the batch's shape. The product then has the add as its only reader, with
/// the bias broadcast along its last dim: the pattern cpu-simd runs as the GEMM's epilogue
/// (each output panel gets its bias while in cache) rather than as a pass of its own over
/// the output (every Linear layer of BERT and GPT-2). Same operations, same results.
pub fn add(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    if let Some(y) = bias_of_product(ctx)? {
        return Ok(vec![Val::Traced(y)]);
    }
    binary(ctx, |a, b| a + b, false, ltorch::add)
}

/// `product + bias` in 2-d, reshaped, when one input is a flattened MatMul's output and the
/// other a vector as long as its last dim, of the same float type.
fn bias_of_product(ctx: &mut NodeCtx) -> Result<Option<Tensor>> {
    for (p, q) in [(0, 1), (1, 0)] {
        let Some(prod) = ctx
            .node
            .input
            .get(p)
            .and_then(|name| ctx.weights.flat_products.get(name))
            .cloned()
        else {
            continue;
        };
        let n = prod.shape()[prod.rank() - 1];
        let dtype = ctx.input(q)?.dtype();
        if ctx.shape(q)? != [n] || dtype != prod.dtype() || !dtype.is_float() {
            continue;
        }
        let shape = ctx.shape(p)?;
        let bias = ctx.tensor(q)?;
        // The operands in the node's order (addition commutes bit for bit anyway).
        let y = if p == 0 {
            ltorch::add(&prod, &bias)?
        } else {
            ltorch::add(&bias, &prod)?
        };
        return Ok(Some(ltorch::reshape(&y, &shape)?));
    }
    Ok(None)
}

macro_rules! binaries {
    ($($name:ident, $host:expr, $bool_out:expr, $traced:expr;)*) => {$(
        pub fn $name(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
            binary(ctx, $host, $bool_out, $traced)
        }
    )*};
}

binaries! {
    sub, |a, b| a - b, false, ltorch::sub;
    mul, |a, b| a * b, false, ltorch::mul;
    equal, |a, b| (a == b) as i64 as f64, true, ltorch::eq;
    less, |a, b| (a < b) as i64 as f64, true, ltorch::lt;
    less_equal, |a, b| (a <= b) as i64 as f64, true, ltorch::le;
    greater, |a, b| (a > b) as i64 as f64, true, ltorch::gt;
    greater_equal, |a, b| (a >= b) as i64 as f64, true, ltorch::ge;
    and, |a, b| (a != 0.0 && b != 0.0) as i64 as f64, true, ltorch::bitwise_and;
    or, |a, b| (a != 0.0 || b != 0.0) as i64 as f64, true, ltorch::bitwise_or;
    xor, |a, b| ((a != 0.0) != (b != 0.0)) as i64 as f64, true, ltorch::bitwise_xor;
}

/// Pow: a float tensor to a constant power of 1, 2, 3, 4 or 0.5 is products (or a square
/// root) rather than `pow` (GPT-2's tanh-GELU cubes its input; ONNX Runtime also multiplies
/// for 2 and 3); anything else is `pow`.
pub fn pow(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    if !ctx.all_const() && ctx.input(0)?.dtype().is_float() {
        if let (Val::Traced(x), Some(c)) = (ctx.input(0)?.clone(), ctx.input(1)?.as_const()) {
            if c.array.numel() == 1 && c.array.shape().len() <= x.rank() {
                let e = c.array.to_f64_vec().map_err(|e| ctx.err(e.to_string()))?[0];
                let y = match e {
                    1.0 => Some(x.clone()),
                    2.0 => Some(ltorch::mul(&x, &x)?),
                    3.0 => Some(ltorch::mul(&ltorch::mul(&x, &x)?, &x)?),
                    4.0 => {
                        let sq = ltorch::mul(&x, &x)?;
                        Some(ltorch::mul(&sq, &sq)?)
                    }
                    0.5 => Some(ltorch::sqrt(&x)?),
                    _ => None,
                };
                if let Some(y) = y {
                    return Ok(vec![Val::Traced(y)]);
                }
            }
        }
    }
    binary(ctx, f64::powf, false, ltorch::pow)
}

/// ONNX Div: true division for floats, truncating division for integers.
pub fn div(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    if ctx.input(0)?.dtype().is_float() {
        return binary(ctx, |a, b| a / b, false, ltorch::div);
    }
    let dtype = ctx.input(0)?.dtype();
    if ctx.all_const() {
        return binary(ctx, |a, b| (a / b).trunc(), false, ltorch::div);
    }
    let out = binary(ctx, |a, b| a / b, false, ltorch::div)?;
    let Some(Val::Traced(q)) = out.into_iter().next() else {
        return Err(ctx.err("integer division produced no tensor"));
    };
    Ok(vec![Val::Traced(ltorch::to(&ltorch::trunc(&q)?, dtype)?)])
}

/// Mod: `fmod=1` is C's fmod (sign of the dividend), else Python's remainder.
pub fn modulo(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    if ctx.attr_i("fmod", 0) == 1 {
        binary(ctx, |a, b| a % b, false, ltorch::fmod)
    } else {
        binary(
            ctx,
            |a, b| a - b * (a / b).floor(),
            false,
            ltorch::remainder,
        )
    }
}

/// Variadic Max / Min, folded left.
fn variadic(ctx: &mut NodeCtx, host: fn(f64, f64) -> f64, traced: Traced) -> Result<Vec<Val>> {
    if ctx.n_inputs() == 1 {
        return Ok(vec![ctx.input(0)?.clone()]);
    }
    let inputs = ctx.inputs.clone();
    let mut acc = ctx.input(0)?.clone();
    for v in inputs.into_iter().skip(1) {
        let v = v.ok_or_else(|| ctx.err("an input is empty"))?;
        let saved = std::mem::replace(&mut ctx.inputs, vec![Some(acc), Some(v)]);
        let out = binary(ctx, host, false, traced);
        ctx.inputs = saved;
        acc = out?
            .into_iter()
            .next()
            .ok_or_else(|| ctx.err("no result"))?;
    }
    Ok(vec![acc])
}

pub fn max(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    variadic(ctx, f64::max, ltorch::maximum)
}

pub fn min(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    variadic(ctx, f64::min, ltorch::minimum)
}

pub fn where_(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let dtype = ctx.input(1)?.dtype();
    if ctx.all_const() {
        let (c, a, b) = (ctx.host(0)?, ctx.host(1)?, ctx.host(2)?);
        let out = map_n(
            &[&c, &a, &b],
            dtype,
            |x| if x[0] != 0.0 { x[1] } else { x[2] },
        )
        .ok_or_else(|| ctx.err("the shapes do not broadcast"))?;
        return Ok(vec![ctx.folded(out, 0)?]);
    }
    let rank = (0..3).map(|i| ctx.rank(i)).collect::<Result<Vec<_>>>()?;
    let top = rank.iter().copied().max().unwrap_or(0);
    let cond = ctx.tensor(0)?;
    let a = ctx.operand(1, top)?;
    let b = ctx.operand(2, top)?;
    let out = ltorch::where_(&cond, a, b)?;
    // Literals on both sides give torch's default dtype; ONNX keeps the operands'.
    let out = if out.dtype() != dtype {
        ltorch::to(&out, dtype)?
    } else {
        out
    };
    Ok(vec![Val::Traced(out)])
}

/// A unary op: folded when `host` is given and the input is a small constant.
fn unary(
    ctx: &mut NodeCtx,
    host: Option<fn(f64) -> f64>,
    traced: impl Fn(&Tensor) -> thunder_core::Result<Tensor>,
) -> Result<Vec<Val>> {
    if let (Some(f), true) = (host, ctx.all_const()) {
        let a = ctx.host(0)?;
        let dtype = a.dtype;
        let out = map_n(&[&a], dtype, |x| cast_value(f(x[0]), dtype))
            .ok_or_else(|| ctx.err("cannot fold"))?;
        return Ok(vec![ctx.folded(out, 0)?]);
    }
    let a = ctx.tensor(0)?;
    Ok(vec![Val::Traced(traced(&a)?)])
}

macro_rules! unaries {
    ($($name:ident, $host:expr, $traced:expr;)*) => {$(
        pub fn $name(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
            unary(ctx, $host, $traced)
        }
    )*};
}

unaries! {
    neg, Some(|x: f64| -x), ltorch::neg;
    abs, Some(f64::abs), ltorch::abs;
    sqrt, Some(f64::sqrt), ltorch::sqrt;
    reciprocal, Some(|x: f64| 1.0 / x), ltorch::reciprocal;
    exp, None, ltorch::exp;
    log, None, ltorch::log;
    tanh, None, ltorch::tanh;
    erf, None, ltorch::erf;
    sin, None, ltorch::sin;
    cos, None, ltorch::cos;
    floor, Some(f64::floor), ltorch::floor;
    ceil, Some(f64::ceil), ltorch::ceil;
    round, Some(|x: f64| x.round_ties_even()), ltorch::round;
    sign, Some(|x: f64| if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { 0.0 }), ltorch::sign;
    not, Some(|x: f64| (x == 0.0) as i64 as f64), ltorch::logical_not;
    relu, None, ltorch::relu;
    sigmoid, None, ltorch::sigmoid;
    hard_swish, None, ltorch::hardswish;
}

pub fn gelu(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let approximate = ctx.attr_s("approximate", "none");
    if approximate != "none" && approximate != "tanh" {
        return Err(ctx.err(format!(
            "approximate must be none or tanh, got `{approximate}`"
        )));
    }
    unary(ctx, None, |a| ltorch::gelu(a, &approximate))
}

pub fn leaky_relu(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let alpha = ctx.attr_f("alpha", 0.01);
    unary(ctx, None, |a| ltorch::leaky_relu(a, alpha))
}

pub fn softplus(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    unary(ctx, None, |a| ltorch::softplus(a, 1.0, 20.0))
}

pub fn hard_sigmoid(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let (alpha, beta) = (ctx.attr_f("alpha", 0.2), ctx.attr_f("beta", 0.5));
    unary(ctx, None, |a| {
        let y = ltorch::add(ltorch::mul(a, alpha)?, beta)?;
        ltorch::clamp(&y, Some(Operand::Float(0.0)), Some(Operand::Float(1.0)))
    })
}

/// Clip: bounds from inputs 1 and 2 (opset 11+) or the `min`/`max` attributes.
pub fn clip(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let rank = ctx.rank(0)?;
    let bound = |ctx: &mut NodeCtx, i: usize, attr: &str| -> Result<Option<Operand>> {
        if ctx.opset() < 11 {
            return Ok(ctx
                .has_attr(attr)
                .then(|| Operand::Float(ctx.attr_f(attr, 0.0))));
        }
        if !ctx.has_input(i) {
            return Ok(None);
        }
        ctx.operand(i, rank).map(Some)
    };
    let lo = bound(ctx, 1, "min")?;
    let hi = bound(ctx, 2, "max")?;
    let a = ctx.tensor(0)?;
    Ok(vec![Val::Traced(ltorch::clamp(&a, lo, hi)?)])
}

fn cast_to(ctx: &mut NodeCtx, dtype: DType) -> Result<Vec<Val>> {
    if ctx.all_const() {
        let mut a = ctx.host(0)?;
        a.data.iter_mut().for_each(|x| *x = cast_value(*x, dtype));
        a.dtype = dtype;
        return Ok(vec![ctx.folded(a, 0)?]);
    }
    let a = ctx.tensor(0)?;
    if a.dtype() == dtype {
        return Ok(vec![Val::Traced(a)]);
    }
    Ok(vec![Val::Traced(ltorch::to(&a, dtype)?)])
}

pub fn cast(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let to = ctx.attr_i("to", 0) as i32;
    let dtype =
        dtype_of(to).ok_or_else(|| ctx.unsupported(format!("cast to {}", onnx_type_name(to))))?;
    cast_to(ctx, dtype)
}

pub fn cast_like(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    let dtype = ctx.input(1)?.dtype();
    cast_to(ctx, dtype)
}

pub fn identity(ctx: &mut NodeCtx) -> Result<Vec<Val>> {
    Ok(vec![ctx.input(0)?.clone()])
}
