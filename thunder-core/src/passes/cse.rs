//! Common-subexpression elimination: a bound symbol with the same symbol and arguments as an
//! earlier one is dropped and its outputs replaced by the earlier outputs. Every symbol we have
//! is pure (RNG takes explicit seeds), so equal calls give equal results.

use super::Pass;
use crate::error::Result;
use crate::ir::{Arg, Trace, Value};
use std::collections::HashMap;

pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "Common Subexpression Elimination"
    }

    fn run(&self, trace: &Trace) -> Result<Trace> {
        let mut seen: HashMap<(&'static str, Vec<Arg>), Vec<Value>> = HashMap::new();
        let mut replace: HashMap<Value, Value> = HashMap::new();
        let mut out = trace.clone();
        out.bsyms.clear();
        for b in &trace.bsyms {
            let mut b = b.clone();
            if !replace.is_empty() {
                b.remap_values(&|v| *replace.get(&v).unwrap_or(&v));
            }
            let key = (b.sym.id, b.args.clone());
            match seen.get(&key) {
                Some(earlier) => {
                    for (&dup, &orig) in b.outputs.iter().zip(earlier) {
                        replace.insert(dup, orig);
                    }
                }
                None => {
                    seen.insert(key, b.outputs.clone());
                    out.bsyms.push(b);
                }
            }
        }
        for v in &mut out.outputs {
            *v = *replace.get(v).unwrap_or(v);
        }
        out.provenance = self.name().into();
        Ok(out)
    }
}
