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
        Ok(super::drop_equal(trace, self.name(), |b| {
            let key = (b.sym.id, b.args.clone());
            match seen.get(&key) {
                Some(earlier) => Some(earlier.clone()),
                None => {
                    seen.insert(key, b.outputs.clone());
                    None
                }
            }
        }))
    }
}
