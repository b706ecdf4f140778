//! Dead-code elimination: drops bound symbols none of whose outputs are used.

use super::Pass;
use crate::error::Result;
use crate::ir::Trace;

pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "Dead Code Elimination"
    }

    fn run(&self, trace: &Trace) -> Result<Trace> {
        let mut live = vec![false; trace.values.len()];
        for &v in &trace.outputs {
            live[v.index()] = true;
        }
        let mut keep = vec![false; trace.bsyms.len()];
        for (i, b) in trace.bsyms.iter().enumerate().rev() {
            if b.outputs.iter().any(|v| live[v.index()]) {
                keep[i] = true;
                for v in b.input_values() {
                    live[v.index()] = true;
                }
            }
        }
        let mut out = trace.clone();
        out.bsyms = trace
            .bsyms
            .iter()
            .zip(&keep)
            .filter(|(_, &k)| k)
            .map(|(b, _)| b.clone())
            .collect();
        out.provenance = self.name().into();
        Ok(out)
    }
}
