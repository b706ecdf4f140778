//! Cats of merging reshapes: `cat(k, reshape(x_i, [..., n_i]))`, where each reshape merges
//! the trailing dims of `x_i` from `k` on into one, is `reshape(cat(k, x_i), ...)`: the same
//! elements in the same order. And a sum over leading dims of such a reshape is the reshape of
//! the sum: `sum(reshape(c, s), dims) = reshape(sum(c, dims), ...)` when no reduced dim is
//! merged.
//!
//! The gradient of attention's fused qkv projection is the case: `sdpa_bwd` gives dq, dk, dv
//! as [B, H, T, D]; each is transposed to [B, T, H, D] and merged to [B, T, C] before the cat
//! to [B, T, 3C] and the bias gradient's sum. A reshape of a transposed view is not a strided
//! view, so a fuser wrote each transpose to memory for the cat to read back (three kernels and
//! twice the traffic of the cat itself). Catted along H instead, every piece is a strided view,
//! the cat and the sum read dq, dk, dv in place, and the final reshapes are of contiguous
//! results, which cost nothing.

use super::Pass;
use crate::error::Result;
use crate::ir::{prim_symbol, Arg, BoundSymbol, Trace, Value, ValueInfo};
use std::collections::{HashMap, HashSet};
use thunder_abi::prims::Prim;

pub struct MergedCats;

impl Pass for MergedCats {
    fn name(&self) -> &'static str {
        "Cats of Merging Reshapes"
    }

    fn run(&self, trace: &Trace) -> Result<Trace> {
        let mut out = trace.clone();
        out.bsyms.clear();
        let mut names: HashSet<String> = trace.values.iter().map(|v| v.name.clone()).collect();
        let mut fresh = 0usize;
        // value -> the source of the reshape that made it
        let mut reshaped: HashMap<Value, Value> = HashMap::new();
        for b in &trace.bsyms {
            let rewritten = match b.sym.prim() {
                Some(Prim::Cat) => cat_of_merges(&out, b, &reshaped),
                Some(Prim::Sum) => sum_of_merge(&out, b, &reshaped),
                _ => None,
            };
            let Some((inner, reshape_args)) = rewritten else {
                if b.sym.prim() == Some(Prim::Reshape) {
                    if let (Some(Arg::Value(src)), [o]) = (b.args.first(), b.outputs.as_slice()) {
                        reshaped.insert(*o, *src);
                    }
                }
                out.bsyms.push(b.clone());
                continue;
            };
            // The rewritten op makes a new value; the final reshape keeps the old output, so
            // its readers are unchanged.
            let (inner_args, inner_ty) = inner;
            let name = loop {
                fresh += 1;
                let n = format!("{}_m{fresh}", trace.name(b.outputs[0]));
                if names.insert(n.clone()) {
                    break n;
                }
            };
            let v = Value(out.values.len() as u32);
            out.values.push(ValueInfo { name, ty: inner_ty });
            out.bsyms.push(BoundSymbol {
                sym: b.sym,
                args: inner_args,
                outputs: vec![v],
                subsymbols: Vec::new(),
            });
            let mut args = vec![Arg::Value(v)];
            args.extend(reshape_args);
            out.bsyms.push(BoundSymbol {
                sym: prim_symbol(Prim::Reshape),
                args,
                outputs: b.outputs.clone(),
                subsymbols: Vec::new(),
            });
            reshaped.insert(b.outputs[0], v);
        }
        out.provenance = self.name().into();
        Ok(out)
    }
}

/// The new op's arguments and output type, and the final reshape's arguments after its input.
type Rewrite = ((Vec<Arg>, crate::ir::TensorType), Vec<Arg>);

/// Whether `to` is `from` with its dims from `k` on merged into one (`to` has rank `k + 1`).
fn merges_tail(from: &[i64], to: &[i64], k: usize) -> bool {
    to.len() == k + 1
        && from.len() > k + 1
        && from[..k] == to[..k]
        && from[k..].iter().product::<i64>() == to[k]
}

fn cat_of_merges(
    out: &Trace,
    b: &BoundSymbol,
    reshaped: &HashMap<Value, Value>,
) -> Option<Rewrite> {
    let (Some(Arg::Int(dim)), [y]) = (b.args.first(), b.outputs.as_slice()) else {
        return None;
    };
    let y_ty = out.ty(*y).clone();
    let k = usize::try_from(*dim).ok()?;
    if k + 1 != y_ty.rank() {
        return None;
    }
    let pieces: Vec<Value> = b.args[1..]
        .iter()
        .map(|a| match a {
            Arg::Value(v) => reshaped.get(v).copied(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let first = out.ty(*pieces.first()?).shape.clone();
    let mut along = 0i64;
    for (&x, a) in pieces.iter().zip(&b.args[1..]) {
        let Arg::Value(p) = a else { return None };
        let (x_shape, p_shape) = (&out.ty(x).shape, &out.ty(*p).shape);
        if !merges_tail(x_shape, p_shape, k) || x_shape[k + 1..] != first[k + 1..] {
            return None;
        }
        along += x_shape[k];
    }
    let mut shape = first;
    shape[k] = along;
    let mut ty = y_ty.clone();
    ty.shape = shape;
    let mut args = vec![Arg::Int(*dim)];
    args.extend(pieces.into_iter().map(Arg::Value));
    Some(((args, ty), vec![Arg::Ints(y_ty.shape)]))
}

fn sum_of_merge(out: &Trace, b: &BoundSymbol, reshaped: &HashMap<Value, Value>) -> Option<Rewrite> {
    let (Some(Arg::Value(y)), Some(Arg::Ints(dims)), [s]) =
        (b.args.first(), b.args.get(1), b.outputs.as_slice())
    else {
        return None;
    };
    if b.args.len() != 2 {
        return None;
    }
    let c = *reshaped.get(y)?;
    let (c_ty, y_shape) = (out.ty(c).clone(), out.ty(*y).shape.clone());
    let k = y_shape.len().checked_sub(1)?;
    if !merges_tail(&c_ty.shape, &y_shape, k)
        || dims
            .iter()
            .any(|&d| usize::try_from(d).map_or(true, |d| d >= k))
    {
        return None;
    }
    let mut ty = c_ty;
    ty.dtype = out.ty(*s).dtype;
    ty.shape = ty
        .shape
        .iter()
        .enumerate()
        .filter(|(i, _)| !dims.contains(&(*i as i64)))
        .map(|(_, &n)| n)
        .collect();
    let s_shape = out.ty(*s).shape.clone();
    Some((
        (vec![Arg::Value(c), Arg::Ints(dims.clone())], ty),
        vec![Arg::Ints(s_shape)],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::TensorType;
    use crate::prims::prim1;
    use crate::trace_ctx::trace_with;
    use crate::{clang, DType, Device};

    /// The backward of attention's qkv projection: three [B, H, T, D] gradients transposed,
    /// merged to [B, T, C], catted and summed over (B, T).
    fn qkv_grad(b: i64, h: i64, t: i64, d: i64) -> Trace {
        let ty = TensorType::new(vec![b, h, t, d], DType::BF16, Device::Cpu);
        let inputs: Vec<(String, TensorType)> = ["dq", "dk", "dv"]
            .iter()
            .map(|n| (n.to_string(), ty.clone()))
            .collect();
        trace_with(&inputs, HashSet::new(), "test", |xs| {
            let v = |t: &crate::Tensor| Arg::Value(t.value());
            let mut cat_args = vec![Arg::Int(2)];
            for x in xs {
                let heads = clang::transpose(x, vec![0, 2, 1, 3])?;
                cat_args.push(v(&clang::reshape(&heads, vec![b, t, h * d])?));
            }
            let cat = prim1(Prim::Cat, cat_args)?;
            let sum = prim1(Prim::Sum, vec![v(&cat), Arg::Ints(vec![0, 1])])?;
            Ok(vec![cat, sum])
        })
        .expect("trace")
    }

    #[test]
    fn a_cat_of_merged_heads_cats_the_heads() {
        let t = MergedCats.run(&qkv_grad(2, 3, 4, 5)).expect("pass");
        let ids: Vec<&str> = t.bsyms.iter().map(|b| b.sym.id).collect();
        let cat = t
            .bsyms
            .iter()
            .find(|b| b.sym.prim() == Some(Prim::Cat))
            .expect("a cat");
        assert_eq!(t.ty(cat.outputs[0]).shape, [2, 4, 9, 5], "{ids:?}");
        assert!(
            cat.input_values().all(|v| t.ty(v).shape == [2, 4, 3, 5]),
            "the cat reads the transposes"
        );
        let sum = t
            .bsyms
            .iter()
            .find(|b| b.sym.prim() == Some(Prim::Sum))
            .expect("a sum");
        assert_eq!(
            sum.input_values().next(),
            Some(cat.outputs[0]),
            "the sum reads the cat"
        );
        assert_eq!(t.ty(sum.outputs[0]).shape, [9, 5]);
        assert_eq!(t.ty(t.outputs[0]).shape, [2, 4, 45]);
        assert_eq!(t.ty(t.outputs[1]).shape, [45]);
    }
}
