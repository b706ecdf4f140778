//! Rewrites of converts.
//!
//! - Round trips: `convert(convert(x, wide), x.dtype)` is `x` when `wide` holds every value of
//!   `x`'s dtype exactly (bf16 -> f32 -> bf16). Gradients of mixed-precision programs are full
//!   of them (the VJP of a bf16 -> f32 convert is an f32 -> bf16 convert), and each made a new
//!   value: a fuser wrote the same bf16 tensor twice, under two names.
//! - Converts of broadcasts: `convert(broadcast_in_dim(x))` is `broadcast_in_dim(convert(x))`
//!   (a convert acts on each element alone), and the second converts `x`'s elements once
//!   rather than each as many times as it is repeated. A bf16 `linear`'s bias is broadcast to
//!   the batch and then widened for the add: the widening wrote `[512, 3072]` f32 elements for
//!   a `[3072]` bias (0.54 ms of a 54 ms bf16 MLP layer step on an AMD EPYC Zen 4).

use super::Pass;
use crate::dtype::embeds_exactly;
use crate::error::Result;
use crate::ir::{Arg, BoundSymbol, Trace, Value, ValueInfo};
use crate::prims::Prim;
use std::collections::{HashMap, HashSet};

pub struct RoundTripConverts;

const CONVERT: &str = "prims.convert_element_type";

/// The converted value and target dtype of a convert bound symbol.
fn convert_of(b: &crate::ir::BoundSymbol) -> Option<(Value, crate::DType)> {
    if b.sym.id != CONVERT {
        return None;
    }
    match b.args.as_slice() {
        [Arg::Value(v), Arg::DType(d)] => Some((*v, *d)),
        _ => None,
    }
}

impl Pass for RoundTripConverts {
    fn name(&self) -> &'static str {
        "Round-Trip Convert Elimination"
    }

    fn run(&self, trace: &Trace) -> Result<Trace> {
        // value -> its source, for values made by a convert
        let mut converted_from: HashMap<Value, Value> = HashMap::new();
        Ok(super::drop_equal(trace, self.name(), |b| {
            let (Some((src, to)), [result]) = (convert_of(b), b.outputs.as_slice()) else {
                return None;
            };
            if let Some(&origin) = converted_from.get(&src) {
                let (origin_ty, result_ty) = (trace.ty(origin), trace.ty(*result));
                if origin_ty.dtype == to
                    && embeds_exactly(to, trace.ty(src).dtype)
                    && origin_ty.shape == result_ty.shape
                    && origin_ty.device == result_ty.device
                {
                    return Some(vec![origin]);
                }
            }
            converted_from.insert(*result, src);
            None
        }))
    }
}

pub struct ConvertsBeforeBroadcasts;

impl Pass for ConvertsBeforeBroadcasts {
    fn name(&self) -> &'static str {
        "Converts Before Broadcasts"
    }

    fn run(&self, trace: &Trace) -> Result<Trace> {
        let mut out = trace.clone();
        out.bsyms.clear();
        let mut names: HashSet<String> = trace.values.iter().map(|v| v.name.clone()).collect();
        // value -> the broadcast that made it (its source, shape and dims arguments)
        let mut broadcasts: HashMap<Value, &BoundSymbol> = HashMap::new();
        for b in &trace.bsyms {
            if b.sym.prim() == Some(Prim::BroadcastInDim) && b.outputs.len() == 1 {
                broadcasts.insert(b.outputs[0], b);
            }
            let source = convert_of(b)
                .and_then(|(v, to)| Some((broadcasts.get(&v)?, to)))
                .and_then(|(bcast, to)| match bcast.args.first() {
                    Some(Arg::Value(src)) => Some((*src, *bcast, to)),
                    _ => None,
                });
            let Some((src, bcast, to)) = source.filter(|&(src, _, _)| {
                let numel = |v: Value| trace.ty(v).shape.iter().product::<i64>();
                b.outputs.len() == 1 && numel(src) < numel(b.outputs[0])
            }) else {
                out.bsyms.push(b.clone());
                continue;
            };
            // convert(src) as a new value, then the broadcast of it as the old output.
            let name = (1..)
                .map(|i| format!("{}_c{i}", trace.name(src)))
                .find(|n| names.insert(n.clone()))
                .unwrap_or_default();
            let mut ty = trace.ty(src).clone();
            ty.dtype = to;
            let converted = Value(out.values.len() as u32);
            out.values.push(ValueInfo { name, ty });
            out.bsyms.push(BoundSymbol {
                sym: b.sym,
                args: vec![Arg::Value(src), Arg::DType(to)],
                outputs: vec![converted],
                subsymbols: Vec::new(),
            });
            let mut args = bcast.args.clone();
            args[0] = Arg::Value(converted);
            out.bsyms.push(BoundSymbol {
                sym: bcast.sym,
                args,
                outputs: b.outputs.clone(),
                subsymbols: Vec::new(),
            });
        }
        out.provenance = self.name().into();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clang;
    use crate::dtype::embeds_exactly;
    use crate::ir::TensorType;
    use crate::trace_ctx::trace_with;
    use crate::{DType, Device};
    use std::collections::HashSet;

    fn round_trip(from: DType, wide: DType) -> Trace {
        let x = TensorType::new(vec![4], from, Device::Cpu);
        trace_with(&[("x".into(), x)], HashSet::new(), "test", |xs| {
            let w = clang::convert(&xs[0], wide)?;
            let back = clang::convert(&w, from)?;
            Ok(vec![back, w])
        })
        .expect("trace")
    }

    #[test]
    fn an_exact_round_trip_is_its_source() {
        let t = RoundTripConverts
            .run(&round_trip(DType::BF16, DType::F32))
            .expect("pass");
        assert_eq!(t.outputs[0], t.inputs[0], "bf16 -> f32 -> bf16 is x");
        // The widening stays: it is returned.
        assert_eq!(t.bsyms.len(), 1);
    }

    #[test]
    fn a_lossy_round_trip_stays() {
        for (from, wide) in [
            (DType::F32, DType::BF16),
            (DType::I32, DType::F32),
            (DType::F16, DType::BF16),
            (DType::F32, DType::I64),
        ] {
            let t = RoundTripConverts
                .run(&round_trip(from, wide))
                .expect("pass");
            assert_ne!(
                t.outputs[0], t.inputs[0],
                "{from:?} -> {wide:?} -> {from:?}"
            );
            assert_eq!(t.bsyms.len(), 2);
        }
    }

    /// `x` (`[3]`, `from`) broadcast to `[4, 3]`, then converted to `to`; and the broadcast
    /// itself when `keep` (another reader).
    fn widened_bias(from: DType, to: DType, keep: bool) -> Trace {
        let x = TensorType::new(vec![3], from, Device::Cpu);
        trace_with(&[("x".into(), x)], HashSet::new(), "test", |xs| {
            let b = clang::broadcast_in_dim(&xs[0], vec![4, 3], vec![1])?;
            let w = clang::convert(&b, to)?;
            Ok(if keep { vec![w, b] } else { vec![w] })
        })
        .expect("trace")
    }

    fn prims(t: &Trace) -> Vec<Option<Prim>> {
        t.bsyms.iter().map(|b| b.sym.prim()).collect()
    }

    #[test]
    fn a_convert_of_a_broadcast_converts_the_source() {
        let before = widened_bias(DType::BF16, DType::F32, false);
        let t = ConvertsBeforeBroadcasts.run(&before).expect("pass");
        let t = super::super::Dce.run(&t).expect("dce");
        assert_eq!(
            prims(&t),
            [Some(Prim::ConvertElementType), Some(Prim::BroadcastInDim)]
        );
        let (convert, bcast) = (&t.bsyms[0], &t.bsyms[1]);
        assert_eq!(convert.args[0], Arg::Value(t.inputs[0]));
        assert_eq!(convert.args[1], Arg::DType(DType::F32));
        let c = convert.outputs[0];
        assert_eq!(t.ty(c).shape, vec![3]);
        assert_eq!(t.ty(c).dtype, DType::F32);
        assert_eq!(bcast.args[0], Arg::Value(c));
        assert_eq!(bcast.args[1..], before.bsyms[0].args[1..]);
        // The program's output is the same value, of the same type.
        assert_eq!(t.outputs, before.outputs);
        assert_eq!(t.ty(t.outputs[0]), before.ty(before.outputs[0]));
    }

    #[test]
    fn a_broadcast_read_elsewhere_stays_beside_the_new_one() {
        let t = ConvertsBeforeBroadcasts
            .run(&widened_bias(DType::F32, DType::F64, true))
            .expect("pass");
        let t = super::super::Dce.run(&t).expect("dce");
        assert_eq!(
            prims(&t),
            [
                Some(Prim::BroadcastInDim),
                Some(Prim::ConvertElementType),
                Some(Prim::BroadcastInDim)
            ]
        );
    }

    #[test]
    fn a_broadcast_that_does_not_grow_is_left_alone() {
        let x = TensorType::new(vec![3], DType::BF16, Device::Cpu);
        let before = trace_with(&[("x".into(), x)], HashSet::new(), "test", |xs| {
            let b = clang::broadcast_in_dim(&xs[0], vec![1, 3], vec![1])?;
            Ok(vec![clang::convert(&b, DType::F32)?])
        })
        .expect("trace");
        let t = ConvertsBeforeBroadcasts.run(&before).expect("pass");
        assert_eq!(prims(&t), prims(&before));
        assert_eq!(t.bsyms[1].args[0], Arg::Value(t.bsyms[0].outputs[0]));
    }

    #[test]
    fn a_round_trip_through_a_broadcast_leaves_the_broadcast() {
        let x = TensorType::new(vec![3], DType::BF16, Device::Cpu);
        let before = trace_with(&[("x".into(), x)], HashSet::new(), "test", |xs| {
            let w = clang::convert(&xs[0], DType::F32)?;
            let b = clang::broadcast_in_dim(&w, vec![4, 3], vec![1])?;
            Ok(vec![clang::convert(&b, DType::BF16)?])
        })
        .expect("trace");
        let mut t = before;
        for pass in crate::passes::default_passes() {
            t = pass.run(&t).expect("pass");
        }
        assert_eq!(prims(&t), [Some(Prim::BroadcastInDim)]);
        assert_eq!(t.bsyms[0].args[0], Arg::Value(t.inputs[0]));
        assert_eq!(t.ty(t.outputs[0]).dtype, DType::BF16);
    }

    #[test]
    fn exact_embeddings() {
        use DType::*;
        for (n, w) in [
            (BF16, F32),
            (F16, F64),
            (F32, F64),
            (Bool, BF16),
            (U8, BF16),
            (I8, F16),
            (I16, F32),
            (I32, F64),
            (U8, I16),
            (I32, I64),
        ] {
            assert!(embeds_exactly(n, w), "{n:?} in {w:?}");
        }
        for (n, w) in [
            (F32, BF16),
            (BF16, F16),
            (F16, BF16),
            (I16, F16),
            (I32, F32),
            (I64, F64),
            (U8, I8),
            (I8, U8),
            (F16, I64),
        ] {
            assert!(!embeds_exactly(n, w), "{n:?} not in {w:?}");
        }
    }
}
