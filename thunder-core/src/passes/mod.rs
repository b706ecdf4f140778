//! Trace-to-trace passes. Each is a value with a name; the name becomes the provenance line
//! of the trace it makes ("# Constructed by Dead Code Elimination").

mod converts;
mod cse;
mod dce;

pub use converts::RoundTripConverts;
pub use cse::Cse;
pub use dce::Dce;

use crate::error::Result;
use crate::ir::Trace;

pub trait Pass {
    fn name(&self) -> &'static str;
    fn run(&self, trace: &Trace) -> Result<Trace>;
}

/// The passes run on every traced program before claiming, in order.
pub fn default_passes() -> Vec<Box<dyn Pass + Send + Sync>> {
    vec![
        Box::new(Dce),
        Box::new(RoundTripConverts),
        Box::new(Cse),
        Box::new(Dce),
    ]
}
