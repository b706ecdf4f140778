//! Index-adds into a sum: `add(x, index_add(zeros, index, src, dim))` is
//! `index_add(x, index, src, dim)` when the zeros have `x`'s type and nothing else reads the
//! index-add. An embedding shared with the output layer (GPT-2's tied `wte`) gets its
//! gradient this way: the lookup's scatter into a fresh zero tensor, then the sum with the
//! output layer's gradient, two passes over a `[vocab, C]` tensor and a zero-fill that
//! starting the scatter from the other gradient does not need.
//!
//! The one difference is the sign of zero: an untouched `-0.0` of `x` stays `-0.0`, where
//! `-0.0 + 0.0` gave `+0.0`.

use super::Pass;
use crate::error::Result;
use crate::ir::{prim_symbol, Arg, BoundSymbol, Trace, Value};
use std::collections::HashMap;
use thunder_abi::prims::Prim;

pub struct IndexAddInto;

/// Whether `b` is `full(shape, 0, ...)` (an int or float zero of either sign).
fn is_zeros(b: &BoundSymbol) -> bool {
    b.sym.prim() == Some(Prim::Full)
        && match b.args.get(1) {
            Some(Arg::Int(i)) => *i == 0,
            Some(Arg::Float(z)) => *z == 0.0,
            _ => false,
        }
}

impl Pass for IndexAddInto {
    fn name(&self) -> &'static str {
        "Index-Adds Into Sums"
    }

    fn run(&self, trace: &Trace) -> Result<Trace> {
        let mut readers: HashMap<Value, usize> = HashMap::new();
        for b in &trace.bsyms {
            for v in b.input_values() {
                *readers.entry(v).or_default() += 1;
            }
        }
        let made_by: HashMap<Value, &BoundSymbol> = trace
            .bsyms
            .iter()
            .flat_map(|b| b.outputs.iter().map(move |&o| (o, b)))
            .collect();
        // The index_add of zeros that `v` is, when only one op reads it and it is not returned.
        let scatter_of_zeros = |v: Value| -> Option<&BoundSymbol> {
            let b = made_by.get(&v)?;
            let base = match (b.sym.prim(), b.args.first()) {
                (Some(Prim::IndexAdd), Some(Arg::Value(base))) => *base,
                _ => return None,
            };
            let only_reader = readers.get(&v) == Some(&1) && !trace.outputs.contains(&v);
            (only_reader && made_by.get(&base).is_some_and(|z| is_zeros(z))).then_some(*b)
        };
        let mut out = trace.clone();
        out.bsyms = trace
            .bsyms
            .iter()
            .map(|b| {
                let (Some(Prim::Add), [Arg::Value(x), Arg::Value(y)], [sum]) =
                    (b.sym.prim(), b.args.as_slice(), b.outputs.as_slice())
                else {
                    return b.clone();
                };
                let pick = [(*x, *y), (*y, *x)].into_iter().find_map(|(other, s)| {
                    let scatter = scatter_of_zeros(s)?;
                    (trace.ty(other) == trace.ty(*sum) && trace.ty(s) == trace.ty(*sum))
                        .then_some((other, scatter))
                });
                let Some((other, scatter)) = pick else {
                    return b.clone();
                };
                let mut args = scatter.args.clone();
                args[0] = Arg::Value(other);
                BoundSymbol {
                    sym: prim_symbol(Prim::IndexAdd),
                    args,
                    outputs: vec![*sum],
                    subsymbols: Vec::new(),
                }
            })
            .collect();
        out.provenance = self.name().into();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::TensorType;
    use crate::prims::prim1;
    use crate::trace_ctx::trace_with;
    use crate::{DType, Device, Tensor};
    use std::collections::HashSet;

    fn trace(return_scatter: bool, fill: f64) -> Trace {
        let ty = |s: &[i64], d| TensorType::new(s.to_vec(), d, Device::Cpu);
        let inputs = [
            ("x".to_string(), ty(&[6, 4], DType::F32)),
            ("i".to_string(), ty(&[3], DType::I64)),
            ("s".to_string(), ty(&[3, 4], DType::F32)),
        ];
        trace_with(&inputs, HashSet::new(), "test", |xs| {
            let v = |t: &Tensor| Arg::Value(t.value());
            let zeros = prim1(
                Prim::Full,
                vec![
                    Arg::Ints(vec![6, 4]),
                    Arg::Float(fill),
                    Arg::Device(Device::Cpu),
                    Arg::DType(DType::F32),
                ],
            )?;
            let scatter = prim1(
                Prim::IndexAdd,
                vec![v(&zeros), v(&xs[1]), v(&xs[2]), Arg::Int(0)],
            )?;
            let sum = prim1(Prim::Add, vec![v(&xs[0]), v(&scatter)])?;
            Ok(if return_scatter {
                vec![sum, scatter]
            } else {
                vec![sum]
            })
        })
        .expect("trace")
    }

    fn ids(t: &Trace) -> Vec<&str> {
        t.bsyms.iter().map(|b| b.sym.id).collect()
    }

    #[test]
    fn a_scatter_of_zeros_added_to_x_scatters_into_x() {
        let t = IndexAddInto.run(&trace(false, 0.0)).expect("pass");
        let last = t.bsyms.last().expect("ops");
        assert_eq!(last.sym.prim(), Some(Prim::IndexAdd), "{:?}", ids(&t));
        assert_eq!(last.args[0], Arg::Value(t.inputs[0]), "scatters into x");
        assert_eq!(last.outputs, t.outputs, "makes the sum");
    }

    #[test]
    fn a_scatter_read_elsewhere_or_of_other_values_is_left() {
        for (returned, fill) in [(true, 0.0), (false, 1.0)] {
            let before = trace(returned, fill);
            let t = IndexAddInto.run(&before).expect("pass");
            assert_eq!(ids(&t), ids(&before));
            assert_eq!(t.bsyms.last().and_then(|b| b.sym.prim()), Some(Prim::Add));
        }
    }
}
