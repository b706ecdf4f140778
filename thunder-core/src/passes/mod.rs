//! Trace-to-trace passes. Each is a value with a name; the name becomes the provenance line
//! of the trace it makes ("# Constructed by Dead Code Elimination").

mod converts;
mod cse;
mod dce;
mod index_add_into;
mod merged_cat;

pub use converts::{ConvertsBeforeBroadcasts, RoundTripConverts};
pub use cse::Cse;
pub use dce::Dce;
pub use index_add_into::IndexAddInto;
pub use merged_cat::MergedCats;

use crate::error::Result;
use crate::ir::{BoundSymbol, Trace, Value};
use std::collections::HashMap;

pub trait Pass {
    fn name(&self) -> &'static str;
    fn run(&self, trace: &Trace) -> Result<Trace>;
}

/// The passes run on every traced program before claiming, in order.
pub fn default_passes() -> Vec<Box<dyn Pass + Send + Sync>> {
    vec![
        Box::new(Dce),
        Box::new(ConvertsBeforeBroadcasts),
        Box::new(RoundTripConverts),
        Box::new(Cse),
        Box::new(MergedCats),
        Box::new(IndexAddInto),
        Box::new(Dce),
    ]
}

/// `trace` without the bound symbols for which `same_as` names earlier values equal to their
/// outputs: later uses (the trace's outputs too) read those values instead. `same_as` sees each
/// bound symbol with the renames so far applied, in order.
fn drop_equal(
    trace: &Trace,
    provenance: &str,
    mut same_as: impl FnMut(&BoundSymbol) -> Option<Vec<Value>>,
) -> Trace {
    let mut replace: HashMap<Value, Value> = HashMap::new();
    let mut out = trace.clone();
    out.bsyms.clear();
    for b in &trace.bsyms {
        let mut b = b.clone();
        if !replace.is_empty() {
            b.remap_values(&|v| *replace.get(&v).unwrap_or(&v));
        }
        match same_as(&b) {
            Some(earlier) => replace.extend(b.outputs.iter().copied().zip(earlier)),
            None => out.bsyms.push(b),
        }
    }
    for v in &mut out.outputs {
        *v = *replace.get(v).unwrap_or(v);
    }
    out.provenance = provenance.into();
    out
}
