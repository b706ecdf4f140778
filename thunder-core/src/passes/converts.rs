//! Round-trip converts: `convert(convert(x, wide), x.dtype)` is `x` when `wide` holds every
//! value of `x`'s dtype exactly (bf16 -> f32 -> bf16). Gradients of mixed-precision programs
//! are full of them (the VJP of a bf16 -> f32 convert is an f32 -> bf16 convert), and each
//! made a new value: a fuser wrote the same bf16 tensor twice, under two names.

use super::Pass;
use crate::dtype::embeds_exactly;
use crate::error::Result;
use crate::ir::{Arg, Trace, Value};
use std::collections::HashMap;

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
