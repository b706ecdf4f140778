//! Vector-Jacobian products, one rule per prim (an exhaustive match, so a new prim must decide
//! its rule), plus rules for composites whose decomposition would give a different gradient
//! than torch's.
//!
//! A rule gets the prim's arguments, its output and the cotangent of the output, and returns
//! one cotangent per argument (`None` for literals and non-differentiable arguments).

use crate::dtype;
use crate::error::{Error, Result};
use crate::ir::Arg;
use crate::prims::{prim1, Prim};
use crate::tensor::Tensor;
use crate::trace_ctx::tensor_of;
use thunder_abi::prims::IndexingPrim;

mod indexing;

mod along_dims;
mod conv;
pub use along_dims::multi_output_vjp;

fn v(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

fn p2(p: Prim, a: Arg, b: Arg) -> Result<Tensor> {
    prim1(p, vec![a, b])
}

fn mul(a: &Tensor, b: Arg) -> Result<Tensor> {
    p2(Prim::Mul, v(a), b)
}

fn div(a: &Tensor, b: Arg) -> Result<Tensor> {
    p2(Prim::Div, v(a), b)
}

fn neg(a: &Tensor) -> Result<Tensor> {
    prim1(Prim::Neg, vec![v(a)])
}

/// A comparison turned into 0/1 of the float dtype `like`.
fn mask(p: Prim, a: Arg, b: Arg, like: &Tensor) -> Result<Tensor> {
    crate::clang::convert(&p2(p, a, b)?, like.dtype())
}

/// The tensor behind an argument, if it is a differentiable (floating-point) tensor.
fn diff_tensor(arg: &Arg) -> Result<Option<Tensor>> {
    match arg {
        Arg::Value(val) => {
            let t = tensor_of(*val)?;
            Ok(dtype::is_float(t.dtype()).then_some(t))
        }
        _ => Ok(None),
    }
}

fn scalar_f64(arg: &Arg) -> Option<f64> {
    match arg {
        Arg::Float(x) => Some(*x),
        Arg::Int(i) => Some(*i as f64),
        Arg::Bool(b) => Some(*b as i64 as f64),
        _ => None,
    }
}

fn ints(arg: &Arg, prim: Prim) -> Result<Vec<i64>> {
    match arg {
        Arg::Ints(v) => Ok(v.clone()),
        other => Err(Error::Bug(format!(
            "{}: expected ints, got {other:?}",
            prim.id()
        ))),
    }
}

/// Sums `g` (shaped like the broadcast output) back to the shape of the broadcast input.
fn unbroadcast(g: &Tensor, input_shape: &[i64], bdims: &[i64]) -> Result<Tensor> {
    let out_shape = g.shape().to_vec();
    let mut reduce: Vec<i64> = Vec::new();
    for d in 0..out_shape.len() as i64 {
        match bdims.iter().position(|&b| b == d) {
            None => reduce.push(d),
            Some(i) if input_shape[i] == 1 && out_shape[d as usize] != 1 => reduce.push(d),
            Some(_) => {}
        }
    }
    let summed = if reduce.is_empty() {
        g.clone()
    } else {
        prim1(Prim::Sum, vec![v(g), Arg::Ints(reduce)])?
    };
    crate::clang::reshape(&summed, input_shape.to_vec())
}

/// Broadcasts a reduced tensor back over the reduced `dims` of `shape`.
fn unreduce(g: &Tensor, shape: &[i64], dims: &[i64]) -> Result<Tensor> {
    let kept: Vec<i64> = (0..shape.len() as i64)
        .filter(|d| !dims.contains(d))
        .collect();
    crate::clang::broadcast_in_dim(g, shape.to_vec(), kept)
}

fn swap_last_two(t: &Tensor) -> Result<Tensor> {
    let r = t.rank() as i64;
    let mut perm: Vec<i64> = (0..r).collect();
    perm.swap((r - 1) as usize, (r - 2) as usize);
    crate::clang::transpose(t, perm)
}

/// Cotangents of the arguments of `prim(args) = out`, given the cotangent `g` of `out`.
pub fn prim_vjp(prim: Prim, args: &[Arg], out: &Tensor, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let a = args.first().map(diff_tensor).transpose()?.flatten();
    let b = args.get(1).map(diff_tensor).transpose()?.flatten();
    let x = || {
        a.clone()
            .ok_or_else(|| Error::Bug(format!("{}: no differentiable input", prim.id())))
    };
    let one = |t: Result<Tensor>| -> Result<Vec<Option<Tensor>>> { Ok(vec![Some(t?)]) };
    match prim {
        Prim::Neg => one(neg(g)),
        Prim::Abs => {
            let x = x()?;
            let sign = p2(
                Prim::Sub,
                v(&mask(Prim::Gt, v(&x), Arg::Float(0.0), &x)?),
                v(&mask(Prim::Lt, v(&x), Arg::Float(0.0), &x)?),
            )?;
            one(p2(Prim::Mul, v(g), v(&sign)))
        }
        Prim::Exp => one(p2(Prim::Mul, v(g), v(out))),
        Prim::Log => one(p2(Prim::Div, v(g), v(&x()?))),
        Prim::Sqrt => one(p2(Prim::Div, v(g), v(&mul(out, Arg::Float(2.0))?))),
        Prim::Rsqrt => {
            let cube = p2(Prim::Mul, v(&p2(Prim::Mul, v(out), v(out))?), v(out))?;
            one(mul(&p2(Prim::Mul, v(g), v(&cube))?, Arg::Float(-0.5)))
        }
        Prim::Tanh => {
            let d = p2(
                Prim::Sub,
                Arg::Float(1.0),
                v(&p2(Prim::Mul, v(out), v(out))?),
            )?;
            one(p2(Prim::Mul, v(g), v(&d)))
        }
        Prim::Sin => one(p2(Prim::Mul, v(g), v(&prim1(Prim::Cos, vec![v(&x()?)])?))),
        Prim::Cos => one(neg(&p2(
            Prim::Mul,
            v(g),
            v(&prim1(Prim::Sin, vec![v(&x()?)])?),
        )?)),
        Prim::Erf => {
            let x = x()?;
            let e = prim1(Prim::Exp, vec![v(&neg(&p2(Prim::Mul, v(&x), v(&x))?)?)])?;
            one(mul(
                &p2(Prim::Mul, v(g), v(&e))?,
                Arg::Float(std::f64::consts::FRAC_2_SQRT_PI),
            ))
        }
        Prim::Reciprocal => one(neg(&p2(
            Prim::Mul,
            v(g),
            v(&p2(Prim::Mul, v(out), v(out))?),
        )?)),
        Prim::Exp2 => one(mul(
            &p2(Prim::Mul, v(g), v(out))?,
            Arg::Float(std::f64::consts::LN_2),
        )),
        Prim::Expm1 => one(p2(
            Prim::Mul,
            v(g),
            v(&p2(Prim::Add, v(out), Arg::Float(1.0))?),
        )),
        Prim::Log1p => one(p2(
            Prim::Div,
            v(g),
            v(&p2(Prim::Add, v(&x()?), Arg::Float(1.0))?),
        )),
        Prim::Log2 => one(p2(
            Prim::Div,
            v(g),
            v(&mul(&x()?, Arg::Float(std::f64::consts::LN_2))?),
        )),
        Prim::Log10 => one(p2(
            Prim::Div,
            v(g),
            v(&mul(&x()?, Arg::Float(std::f64::consts::LN_10))?),
        )),
        // tan' = 1 + tan^2
        Prim::Tan => {
            let d = p2(
                Prim::Add,
                v(&p2(Prim::Mul, v(out), v(out))?),
                Arg::Float(1.0),
            )?;
            one(p2(Prim::Mul, v(g), v(&d)))
        }
        // asin' = 1 / sqrt(1 - x^2), acos' = -asin'
        Prim::Asin | Prim::Acos => {
            let x = x()?;
            let one_minus_sq = p2(Prim::Sub, Arg::Float(1.0), v(&p2(Prim::Mul, v(&x), v(&x))?))?;
            let d = p2(
                Prim::Mul,
                v(g),
                v(&prim1(Prim::Rsqrt, vec![v(&one_minus_sq)])?),
            )?;
            one(if prim == Prim::Asin { Ok(d) } else { neg(&d) })
        }
        Prim::Atan => {
            let x = x()?;
            let d = p2(Prim::Add, v(&p2(Prim::Mul, v(&x), v(&x))?), Arg::Float(1.0))?;
            one(p2(Prim::Div, v(g), v(&d)))
        }
        Prim::Sinh => one(p2(Prim::Mul, v(g), v(&prim1(Prim::Cosh, vec![v(&x()?)])?))),
        Prim::Cosh => one(p2(Prim::Mul, v(g), v(&prim1(Prim::Sinh, vec![v(&x()?)])?))),
        // asinh' = 1 / sqrt(x^2 + 1), acosh' = 1 / sqrt(x^2 - 1)
        Prim::Asinh | Prim::Acosh => {
            let x = x()?;
            let c = if prim == Prim::Asinh { 1.0 } else { -1.0 };
            let d = p2(Prim::Add, v(&p2(Prim::Mul, v(&x), v(&x))?), Arg::Float(c))?;
            one(p2(Prim::Mul, v(g), v(&prim1(Prim::Rsqrt, vec![v(&d)])?)))
        }
        Prim::Atanh => {
            let x = x()?;
            let d = p2(Prim::Sub, Arg::Float(1.0), v(&p2(Prim::Mul, v(&x), v(&x))?))?;
            one(p2(Prim::Div, v(g), v(&d)))
        }
        Prim::Erfc => {
            let x = x()?;
            let e = prim1(Prim::Exp, vec![v(&neg(&p2(Prim::Mul, v(&x), v(&x))?)?)])?;
            one(mul(
                &p2(Prim::Mul, v(g), v(&e))?,
                Arg::Float(-std::f64::consts::FRAC_2_SQRT_PI),
            ))
        }
        // erfinv' = sqrt(pi) / 2 * exp(erfinv(x)^2)
        Prim::Erfinv => {
            let e = prim1(Prim::Exp, vec![v(&p2(Prim::Mul, v(out), v(out))?)])?;
            one(mul(
                &p2(Prim::Mul, v(g), v(&e))?,
                Arg::Float(std::f64::consts::PI.sqrt() / 2.0),
            ))
        }
        // Piecewise constant: torch's gradient is zero.
        Prim::Floor | Prim::Ceil | Prim::Round | Prim::Trunc => {
            let x = x()?;
            one(crate::clang::full(
                x.shape().to_vec(),
                Arg::Float(0.0),
                x.device(),
                x.dtype(),
            ))
        }
        Prim::Signbit => Ok(vec![None]),
        Prim::Lgamma => one(p2(
            Prim::Mul,
            v(g),
            v(&prim1(Prim::Digamma, vec![v(&x()?)])?),
        )),
        Prim::Digamma => one(p2(
            Prim::Mul,
            v(g),
            v(&prim1(Prim::Trigamma, vec![v(&x()?)])?),
        )),
        // Its derivative is polygamma(2, x), which is not a prim.
        Prim::Trigamma => Err(Error::op(
            prim.id(),
            "gradient is not implemented (it needs polygamma(2, x), which is not a prim)",
        )),
        Prim::Add => Ok(vec![a.map(|_| g.clone()), b.map(|_| g.clone())]),
        Prim::Sub => Ok(vec![a.map(|_| g.clone()), b.map(|_| neg(g)).transpose()?]),
        Prim::Mul => Ok(vec![
            a.as_ref().map(|_| mul(g, args[1].clone())).transpose()?,
            b.as_ref().map(|_| mul(g, args[0].clone())).transpose()?,
        ]),
        Prim::Div => Ok(vec![
            a.as_ref().map(|_| div(g, args[1].clone())).transpose()?,
            b.as_ref()
                .map(|_| -> Result<Tensor> {
                    neg(&div(&p2(Prim::Mul, v(g), v(out))?, args[1].clone())?)
                })
                .transpose()?,
        ]),
        Prim::Pow => {
            // As torch: d/da is 0 where the exponent is 0 (a^0 is constant), and d/db is 0
            // where the base is 0 and the exponent non-negative (0^b is constant), instead of
            // the NaN and -inf the plain formulas give there.
            let zero_where = |cond: Tensor, value: Tensor| {
                prim1(Prim::Where, vec![v(&cond), Arg::Float(0.0), v(&value)])
            };
            let ga = match &a {
                None => None,
                Some(base) => {
                    let exp_minus_one = match scalar_f64(&args[1]) {
                        Some(e) => Arg::Float(e - 1.0),
                        None => v(&p2(Prim::Sub, args[1].clone(), Arg::Float(1.0))?),
                    };
                    let d = p2(
                        Prim::Mul,
                        args[1].clone(),
                        v(&p2(Prim::Pow, v(base), exp_minus_one)?),
                    )?;
                    let d = match scalar_f64(&args[1]) {
                        Some(0.0) => crate::clang::full(
                            base.shape().to_vec(),
                            Arg::Float(0.0),
                            base.device(),
                            base.dtype(),
                        )?,
                        Some(_) => d,
                        None => zero_where(p2(Prim::Eq, args[1].clone(), Arg::Float(0.0))?, d)?,
                    };
                    Some(p2(Prim::Mul, v(g), v(&d))?)
                }
            };
            let gb = match &b {
                None => None,
                Some(exponent) => {
                    let log_base = match scalar_f64(&args[0]) {
                        Some(base) => Arg::Float(base.ln()),
                        None => v(&prim1(Prim::Log, vec![args[0].clone()])?),
                    };
                    let d = p2(Prim::Mul, v(out), log_base)?;
                    let exponent_ok = p2(Prim::Ge, v(exponent), Arg::Float(0.0))?;
                    let d = match scalar_f64(&args[0]) {
                        Some(0.0) => zero_where(exponent_ok, d)?,
                        Some(_) => d,
                        None => {
                            let base_zero = p2(Prim::Eq, args[0].clone(), Arg::Float(0.0))?;
                            zero_where(p2(Prim::Mul, v(&base_zero), v(&exponent_ok))?, d)?
                        }
                    };
                    Some(p2(Prim::Mul, v(g), v(&d))?)
                }
            };
            Ok(vec![ga, gb])
        }
        Prim::Maximum | Prim::Minimum => {
            // Like torch: the cotangent goes to the larger (smaller) operand, split evenly on ties.
            let (win_a, win_b) = if prim == Prim::Maximum {
                (Prim::Gt, Prim::Lt)
            } else {
                (Prim::Lt, Prim::Gt)
            };
            let share = |win: Prim| -> Result<Tensor> {
                let wins = mask(win, args[0].clone(), args[1].clone(), g)?;
                let ties = mask(Prim::Eq, args[0].clone(), args[1].clone(), g)?;
                let weight = p2(Prim::Add, v(&wins), v(&mul(&ties, Arg::Float(0.5))?))?;
                p2(Prim::Mul, v(g), v(&weight))
            };
            Ok(vec![
                a.as_ref().map(|_| share(win_a)).transpose()?,
                b.as_ref().map(|_| share(win_b)).transpose()?,
            ])
        }
        Prim::Eq | Prim::Ne | Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge => Ok(vec![None, None]),
        // Integer-only: nothing to differentiate.
        Prim::BitwiseAnd
        | Prim::BitwiseOr
        | Prim::BitwiseXor
        | Prim::BitwiseLeftShift
        | Prim::BitwiseRightShift => Ok(vec![None, None]),
        // As torch: a - b * q, with q = floor(a / b) (remainder) or trunc(a / b) (fmod)
        // held constant, so d/da = g and d/db = -g * q.
        Prim::Remainder | Prim::Fmod => {
            let gb = match &b {
                None => None,
                Some(_) => {
                    let q = if prim == Prim::Remainder {
                        p2(Prim::FloorDivide, args[0].clone(), args[1].clone())?
                    } else {
                        prim1(
                            Prim::Trunc,
                            vec![v(&p2(Prim::Div, args[0].clone(), args[1].clone())?)],
                        )?
                    };
                    Some(neg(&p2(Prim::Mul, v(g), v(&q))?)?)
                }
            };
            Ok(vec![a.map(|_| g.clone()), gb])
        }
        // Piecewise constant: zero, as torch's div(rounding_mode="floor").
        Prim::FloorDivide => {
            let zeros = |t: &Tensor| {
                crate::clang::full(t.shape().to_vec(), Arg::Float(0.0), t.device(), t.dtype())
            };
            Ok(vec![
                a.as_ref().map(zeros).transpose()?,
                b.as_ref().map(zeros).transpose()?,
            ])
        }
        // atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2).
        Prim::Atan2 => {
            let sq = |arg: &Arg| -> Result<Arg> {
                Ok(match scalar_f64(arg) {
                    Some(s) => Arg::Float(s * s),
                    None => v(&p2(Prim::Mul, arg.clone(), arg.clone())?),
                })
            };
            let denom = p2(Prim::Add, sq(&args[0])?, sq(&args[1])?)?;
            let gd = p2(Prim::Div, v(g), v(&denom))?;
            Ok(vec![
                a.as_ref()
                    .map(|_| p2(Prim::Mul, v(&gd), args[1].clone()))
                    .transpose()?,
                b.as_ref()
                    .map(|_| neg(&p2(Prim::Mul, v(&gd), args[0].clone())?))
                    .transpose()?,
            ])
        }
        // d/da = a / out, d/db = b / out (NaN at a = b = 0, as torch).
        Prim::Hypot => {
            let gd = p2(Prim::Div, v(g), v(out))?;
            Ok(vec![
                a.as_ref()
                    .map(|_| p2(Prim::Mul, v(&gd), args[0].clone()))
                    .transpose()?,
                b.as_ref()
                    .map(|_| p2(Prim::Mul, v(&gd), args[1].clone()))
                    .transpose()?,
            ])
        }
        Prim::Where => {
            let branch = |i: usize, keep_first: bool| -> Result<Option<Tensor>> {
                if diff_tensor(&args[i])?.is_none() {
                    return Ok(None);
                }
                let (t, f) = if keep_first {
                    (v(g), Arg::Float(0.0))
                } else {
                    (Arg::Float(0.0), v(g))
                };
                Ok(Some(prim1(Prim::Where, vec![args[0].clone(), t, f])?))
            };
            Ok(vec![None, branch(1, true)?, branch(2, false)?])
        }
        Prim::ConvertElementType => Ok(vec![
            a.map(|x| crate::clang::convert(g, x.dtype())).transpose()?,
            None,
        ]),
        Prim::BroadcastInDim => {
            let x = x()?;
            one(unbroadcast(g, x.shape(), &ints(&args[2], prim)?))
        }
        Prim::Reshape => one(crate::clang::reshape(g, x()?.shape().to_vec())),
        Prim::Transpose => {
            let perm = ints(&args[1], prim)?;
            let mut inverse = vec![0i64; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p as usize] = i as i64;
            }
            one(crate::clang::transpose(g, inverse))
        }
        Prim::Sum => one(unreduce(g, x()?.shape(), &ints(&args[1], prim)?)),
        Prim::Amax | Prim::Amin => {
            // Like torch, the cotangent is shared evenly among the positions of the maximum.
            let x = x()?;
            let dims = ints(&args[1], prim)?;
            let hits = mask(Prim::Eq, v(&x), v(&unreduce(out, x.shape(), &dims)?), &x)?;
            let count = prim1(Prim::Sum, vec![v(&hits), Arg::Ints(dims.clone())])?;
            let share = unreduce(&p2(Prim::Div, v(g), v(&count))?, x.shape(), &dims)?;
            one(p2(Prim::Mul, v(&share), v(&hits)))
        }
        Prim::Prod => {
            let x = x()?;
            let dims = ints(&args[1], prim)?;
            Ok(vec![Some(along_dims::prod(&x, &dims, out, g)?), None])
        }
        Prim::Cumsum => match &args[1] {
            Arg::Int(dim) => Ok(vec![Some(along_dims::cumsum(*dim, g)?), None]),
            other => Err(Error::Bug(format!("prims.cumsum: dim {other:?}"))),
        },
        // Integer indices: nothing to differentiate.
        Prim::Argmax | Prim::Argmin => Ok(vec![None, None]),
        // Random numbers do not depend on differentiable inputs.
        Prim::Uniform | Prim::Normal => Ok(vec![None; args.len()]),
        Prim::Convolution => conv::convolution(args, g),
        Prim::VarMean | Prim::Topk | Prim::Sort => Err(Error::Bug(format!(
            "{} has several outputs; its rule is multi_output_vjp",
            prim.id()
        ))),
        Prim::Matmul => Ok(vec![
            a.as_ref()
                .map(|_| -> Result<Tensor> {
                    p2(
                        Prim::Matmul,
                        v(g),
                        v(&swap_last_two(&tensor_of(
                            args[1]
                                .as_value()
                                .ok_or_else(|| Error::Bug("matmul rhs".into()))?,
                        )?)?),
                    )
                })
                .transpose()?,
            b.as_ref()
                .map(|_| -> Result<Tensor> {
                    p2(
                        Prim::Matmul,
                        v(&swap_last_two(&tensor_of(
                            args[0]
                                .as_value()
                                .ok_or_else(|| Error::Bug("matmul lhs".into()))?,
                        )?)?),
                        v(g),
                    )
                })
                .transpose()?,
        ]),
        Prim::Slice
        | Prim::Pad
        | Prim::Cat
        | Prim::Flip
        | Prim::Take
        | Prim::TakeAlongAxis
        | Prim::ScatterAdd
        | Prim::IndexAdd => match IndexingPrim::of(prim) {
            Some(p) => indexing::vjp(p, args, g),
            None => Err(Error::Bug(format!("{} is not an indexing prim", prim.id()))),
        },
        Prim::Full | Prim::Iota => Ok(vec![None; args.len()]),
    }
}
