//! What the fuser claims: maximal runs of ops it supports, less the reshapes that only hand a
//! result out of the run.
//!
//! A reshape of a value computed in the run whose output is read only outside it (a GEMM's
//! `[B, T, N] -> [B*T, N]` operand, the qkv gradient's `[B, T, 3, H, D] -> [B, T, 3C]`) would
//! be a kernel of its own inside the region: the value is written by the kernel computing it,
//! and the region must return the reshape as a separate buffer, so the kernel copies it. Claimed
//! as a region of its own instead, it is a reshape of an intermediate, which the runtime runs
//! as an alias of its input's buffer: the run writes the value once, the copy is gone.

use std::collections::{HashMap, HashSet};
use thunder_abi::claim::contiguous_runs;
use thunder_abi::prims::Prim;
use thunder_abi::{OpView, TraceView};

/// The runs of ops `supported` accepts, each exit reshape moved into a region of its own.
pub fn runs(view: &TraceView, supported: impl FnMut(&OpView) -> bool) -> Vec<Vec<u32>> {
    // Built once per claim: a backward has thousands of ops and hundreds of runs.
    let mut readers: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut producer: HashMap<u32, u32> = HashMap::new();
    for (j, op) in view.ops.iter().enumerate() {
        for v in op.input_values() {
            readers.entry(v).or_default().push(j as u32);
        }
        for &o in op.outputs.iter() {
            producer.insert(o, j as u32);
        }
    }
    let mut out = Vec::new();
    for run in contiguous_runs(view, supported) {
        let mut kept: HashSet<u32> = run.iter().copied().collect();
        let mut exits = Vec::new();
        // Latest first: peeling a reshape makes a reshape feeding only it an exit too.
        for &i in run.iter().rev() {
            if kept.len() > 1 && is_exit_reshape(view, &kept, (&readers, &producer), i) {
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

/// Whether op `i` of the run `kept` reshapes a value the run computes and only ops outside
/// the run (or the trace's outputs) read the result.
fn is_exit_reshape(
    view: &TraceView,
    kept: &HashSet<u32>,
    (readers, producer): (&HashMap<u32, Vec<u32>>, &HashMap<u32, u32>),
    i: u32,
) -> bool {
    let op = &view.ops[i as usize];
    if op.symbol.as_str() != Prim::Reshape.id() {
        return false;
    }
    let (Some(src), [out]) = (op.input_values().next(), op.outputs.as_slice()) else {
        return false;
    };
    let made_in_run = producer.get(&src).is_some_and(|p| kept.contains(p));
    let read_in_run = readers
        .get(out)
        .is_some_and(|rs| rs.iter().any(|r| kept.contains(r)));
    made_in_run && !read_in_run
}
