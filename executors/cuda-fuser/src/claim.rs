//! What the fuser claims: maximal runs of ops it supports, less the reshapes that only hand a
//! result out of the run.
//!
//! A reshape of a value computed in the run whose output is read only outside it (a GEMM's
//! `[B, T, N] -> [B*T, N]` operand, the qkv gradient's `[B, T, 3, H, D] -> [B, T, 3C]`) would
//! be a kernel of its own inside the region: the value is written by the kernel computing it,
//! and the region must return the reshape as a separate buffer, so the kernel copies it. Claimed
//! as a region of its own instead, it is a reshape of an intermediate, which the runtime runs
//! as an alias of its input's buffer: the run writes the value once, the copy is gone.

use thunder_abi::claim::contiguous_runs;
use thunder_abi::prims::Prim;
use thunder_abi::{OpView, TraceView};

/// The runs of ops `supported` accepts, each exit reshape moved into a region of its own.
pub fn runs(view: &TraceView, supported: impl FnMut(&OpView) -> bool) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    for run in contiguous_runs(view, supported) {
        // Until none is left: peeling a reshape makes its source's reshape an exit too.
        let mut kept = run.clone();
        let mut exits = Vec::new();
        while let Some(at) = kept.iter().position(|&i| is_exit_reshape(view, &kept, i)) {
            if kept.len() == 1 {
                break;
            }
            exits.push(kept.remove(at));
        }
        out.push(kept);
        exits.sort_unstable();
        out.extend(exits.into_iter().map(|i| vec![i]));
    }
    out
}

/// Whether op `i` of `run` reshapes a value the run computes and only ops outside the run (or
/// the trace's outputs) read the result.
fn is_exit_reshape(view: &TraceView, run: &[u32], i: u32) -> bool {
    let op = &view.ops[i as usize];
    if op.symbol.as_str() != Prim::Reshape.id() {
        return false;
    }
    let (Some(src), [out]) = (op.input_values().next(), op.outputs.as_slice()) else {
        return false;
    };
    let in_run = |j: &u32| run.contains(j);
    let made_in_run = run
        .iter()
        .any(|&j| view.ops[j as usize].outputs.contains(&src));
    let read_in_run = view
        .ops
        .iter()
        .enumerate()
        .any(|(j, o)| in_run(&(j as u32)) && o.input_values().any(|v| v == *out));
    made_in_run && !read_in_run
}
