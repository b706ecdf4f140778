//! What the fuser claims: maximal runs of ops it supports, less the reshapes that only hand a
//! result out of the run.
//!
//! A reshape of a value computed in the run whose output is read only outside it (a GEMM's
//! `[B, T, N] -> [B*T, N]` operand, the qkv gradient's `[B, T, 3, H, D] -> [B, T, 3C]`) would
//! be a kernel of its own inside the region: the value is written by the kernel computing it,
//! and the region must return the reshape as a separate buffer, so the kernel copies it. Claimed
//! as a region of its own instead, it is a reshape of an intermediate, which the runtime runs
//! as an alias of its input's buffer: the run writes the value once, the copy is gone. The same
//! holds for a reshape of a value from outside the run that the run does not read (GPT-2's
//! saved `[B*T, V]` logits reshaped for the loss gradient, claimed beside the scalar seed of
//! the backward: an 824 MB copy kernel).

use std::collections::{HashMap, HashSet};
use thunder_abi::claim::contiguous_runs;
use thunder_abi::prims::Prim;
use thunder_abi::{OpView, TraceView};

/// The runs of ops `supported` accepts, each exit reshape moved into a region of its own.
pub fn runs(view: &TraceView, supported: impl FnMut(&OpView) -> bool) -> Vec<Vec<u32>> {
    // Built once per claim: a backward has thousands of ops and hundreds of runs.
    let mut readers: HashMap<u32, Vec<u32>> = HashMap::new();
    for (j, op) in view.ops.iter().enumerate() {
        for v in op.input_values() {
            readers.entry(v).or_default().push(j as u32);
        }
    }
    let mut out = Vec::new();
    for run in contiguous_runs(view, supported) {
        let mut kept: HashSet<u32> = run.iter().copied().collect();
        let mut exits = Vec::new();
        // Latest first: peeling a reshape makes a reshape feeding only it an exit too.
        for &i in run.iter().rev() {
            if kept.len() > 1 && is_exit_reshape(view, &kept, &readers, i) {
                kept.remove(&i);
                exits.push(i);
            }
        }
        out.push(run.into_iter().filter(|i| kept.contains(i)).collect());
        exits.sort_unstable();
        out.extend(exits.into_iter().map(|i| vec![i]));
    }
    out
}

/// Whether op `i` of the run `kept` is a reshape whose result only ops outside the run (or
/// the trace's outputs) read, whether the run computes its input or not.
fn is_exit_reshape(
    view: &TraceView,
    kept: &HashSet<u32>,
    readers: &HashMap<u32, Vec<u32>>,
    i: u32,
) -> bool {
    let op = &view.ops[i as usize];
    if op.symbol.as_str() != Prim::Reshape.id() {
        return false;
    }
    let [out] = op.outputs.as_slice() else {
        return false;
    };
    let read_in_run = readers
        .get(out)
        .is_some_and(|rs| rs.iter().any(|r| kept.contains(r)));
    !read_in_run
}
