//! VJP rules of the data-movement prims. Each moves the cotangent back the way the prim moved
//! the data: slice pads it with zeros, pad slices it, cat splits it, flip flips it, and the
//! gathers scatter-add it into zeros (and back). Index arguments get no cotangent.

use super::{diff_tensor, ints};
use crate::clang;
use crate::error::{Error, Result};
use crate::ir::Arg;
use crate::prims::Prim;
use crate::tensor::Tensor;
use crate::trace_ctx::tensor_of;
use thunder_abi::prims::IndexingPrim;

fn dim_of(arg: &Arg, prim: Prim) -> Result<usize> {
    match arg {
        Arg::Int(d) if *d >= 0 => Ok(*d as usize),
        other => Err(Error::Bug(format!(
            "{}: expected a dim, got {other:?}",
            prim.id()
        ))),
    }
}

fn value_of(arg: &Arg, prim: Prim) -> Result<Tensor> {
    let v = arg
        .as_value()
        .ok_or_else(|| Error::Bug(format!("{}: expected a tensor, got {arg:?}", prim.id())))?;
    tensor_of(v)
}

fn zeros_like(t: &Tensor, g: &Tensor) -> Result<Tensor> {
    clang::full(t.shape().to_vec(), Arg::Float(0.0), t.device(), g.dtype())
}

pub(super) fn vjp(p: IndexingPrim, args: &[Arg], g: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let prim = p.prim();
    let input = args.first().map(diff_tensor).transpose()?.flatten();
    match p {
        // Zeros around and between the taken elements: interior = stride - 1.
        IndexingPrim::Slice => {
            let Some(x) = input else {
                return Ok(vec![None; args.len()]);
            };
            let (start, strides) = (ints(&args[1], prim)?, ints(&args[3], prim)?);
            let mut config = Vec::with_capacity(3 * x.rank());
            for d in 0..x.rank() {
                let (n, size, lo, st) = (g.shape()[d], x.shape()[d], start[d], strides[d]);
                let covered = if n > 0 { (n - 1) * st + 1 } else { 0 };
                config.extend([lo, size - lo - covered, if n > 0 { st - 1 } else { 0 }]);
            }
            Ok(vec![
                Some(clang::pad(g, Arg::Float(0.0), config)?),
                None,
                None,
                None,
            ])
        }
        // Undo negative low/high padding with zeros first, then take every (interior + 1)-th
        // element from the first one the input landed on.
        IndexingPrim::Pad => {
            let Some(x) = input else {
                return Ok(vec![None; args.len()]);
            };
            let config = ints(&args[2], prim)?;
            let mut grow = Vec::with_capacity(config.len());
            let (mut start, mut end, mut strides) = (Vec::new(), Vec::new(), Vec::new());
            for (d, c) in config.chunks(3).enumerate() {
                let (lo, hi, interior, size) = (c[0], c[1], c[2], x.shape()[d]);
                grow.extend([(-lo).max(0), (-hi).max(0), 0]);
                let s = lo.max(0);
                start.push(s);
                end.push(if size > 0 {
                    s + (size - 1) * (interior + 1) + 1
                } else {
                    s
                });
                strides.push(interior + 1);
            }
            let grown = clang::pad(g, Arg::Float(0.0), grow)?;
            Ok(vec![
                Some(clang::slice(&grown, start, end, strides)?),
                None,
                None,
            ])
        }
        IndexingPrim::Cat => {
            let dim = dim_of(&args[0], prim)?;
            let mut cots = vec![None];
            let mut offset = 0;
            for arg in &args[1..] {
                let t = value_of(arg, prim)?;
                let n = t.shape()[dim];
                cots.push(match diff_tensor(arg)? {
                    Some(_) => Some(clang::slice_in_dim(g, dim, offset, offset + n, 1)?),
                    None => None,
                });
                offset += n;
            }
            Ok(cots)
        }
        IndexingPrim::Flip => Ok(vec![
            input
                .map(|_| clang::flip(g, ints(&args[1], prim)?))
                .transpose()?,
            None,
        ]),
        IndexingPrim::Take | IndexingPrim::TakeAlongAxis => {
            let Some(x) = input else {
                return Ok(vec![None; args.len()]);
            };
            let index = value_of(&args[1], prim)?;
            let dim = dim_of(&args[2], prim)?;
            let zeros = zeros_like(&x, g)?;
            let gx = if prim == Prim::Take {
                clang::index_add(&zeros, &index, g, dim)?
            } else {
                clang::scatter_add(&zeros, &index, g, dim)?
            };
            Ok(vec![Some(gx), None, None])
        }
        IndexingPrim::ScatterAdd | IndexingPrim::IndexAdd => {
            let index = value_of(&args[1], prim)?;
            let dim = dim_of(&args[3], prim)?;
            let gsrc = match diff_tensor(&args[2])? {
                None => None,
                Some(_) if prim == Prim::IndexAdd => Some(clang::take(g, &index, dim)?),
                Some(src) => {
                    // Only the first index.shape elements of src are scattered; the rest get
                    // zeros.
                    let taken = clang::take_along_axis(g, &index, dim)?;
                    let mut config = Vec::with_capacity(3 * src.rank());
                    for (&s, &i) in src.shape().iter().zip(index.shape()) {
                        config.extend([0, s - i, 0]);
                    }
                    Some(clang::pad(&taken, Arg::Float(0.0), config)?)
                }
            };
            Ok(vec![input.map(|_| g.clone()), None, gsrc, None])
        }
    }
}
