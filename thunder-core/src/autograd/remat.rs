//! Residuals that are views: a value the backward reads that the forward made with a shape
//! prim (transpose, reshape, broadcast_in_dim) of another forward value is recomputed in the
//! backward, just before its first use, instead of saved, and its source is saved in its
//! place. Next to its use the view fuses into the consumer (a GEMM reads a transposed operand
//! in place); all views at the start of the backward made one region that copied them all.
//!
//! The source is never larger (a broadcast's source is smaller, the others the same size), and
//! when it is a forward input (a weight) saving it costs nothing, while a saved view is a
//! forward output, which an executor must materialize: every `linear` on a 3-D input saved its
//! weight transposed and broadcast, a full copy of the weight per call (GPT-2 small's tied
//! 50304x768 embedding alone took a third of the forward on the CPU).

use crate::ir::{BoundSymbol, Tag, Trace, Value};
use std::collections::{HashMap, HashSet};

/// The forward's bound symbols that the backward (`backward`, already pruned) should
/// recompute, in forward order: shape ops whose outputs the backward reads and the forward
/// does not return among its first `n_outputs` outputs, followed back through chains of them.
pub(super) fn views_to_recompute(
    joint: &Trace,
    forward_len: usize,
    n_outputs: usize,
    backward: &[BoundSymbol],
    backward_outputs: &[Value],
) -> Vec<BoundSymbol> {
    let forward = &joint.bsyms[..forward_len];
    let returned: HashSet<Value> = joint.outputs[..n_outputs].iter().copied().collect();
    // value -> the forward shape op making it from one tensor
    let mut producer: HashMap<Value, usize> = HashMap::new();
    for (i, b) in forward.iter().enumerate() {
        if b.sym.tags.contains(&Tag::ShapeOp)
            && b.outputs.len() == 1
            && b.input_values().count() == 1
        {
            producer.insert(b.outputs[0], i);
        }
    }
    if producer.is_empty() {
        return Vec::new();
    }
    let mut work: Vec<Value> = backward
        .iter()
        .flat_map(|b| b.input_values())
        .chain(backward_outputs.iter().copied())
        .collect();
    let mut chosen: HashSet<usize> = HashSet::new();
    while let Some(v) = work.pop() {
        if returned.contains(&v) {
            continue;
        }
        if let Some(&i) = producer.get(&v) {
            if chosen.insert(i) {
                work.extend(forward[i].input_values());
            }
        }
    }
    let mut idx: Vec<usize> = chosen.into_iter().collect();
    idx.sort_unstable();
    idx.into_iter().map(|i| forward[i].clone()).collect()
}

/// `backward` with the `recompute` bound symbols (in forward order) inserted each just before
/// the first bound symbol reading its output (its own recomputed sources before it).
pub(super) fn insert_before_use(
    backward: Vec<BoundSymbol>,
    recompute: Vec<BoundSymbol>,
) -> Vec<BoundSymbol> {
    if recompute.is_empty() {
        return backward;
    }
    let by_output: HashMap<Value, usize> = recompute
        .iter()
        .enumerate()
        .map(|(i, b)| (b.outputs[0], i))
        .collect();
    let mut pending: Vec<Option<BoundSymbol>> = recompute.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(backward.len() + pending.len());
    fn emit(
        i: usize,
        pending: &mut [Option<BoundSymbol>],
        by_output: &HashMap<Value, usize>,
        out: &mut Vec<BoundSymbol>,
    ) {
        let Some(b) = pending[i].take() else {
            return;
        };
        for v in b.input_values() {
            if let Some(&j) = by_output.get(&v) {
                emit(j, pending, by_output, out);
            }
        }
        out.push(b);
    }
    for b in backward {
        for v in b.input_values() {
            if let Some(&i) = by_output.get(&v) {
                emit(i, &mut pending, &by_output, &mut out);
            }
        }
        out.push(b);
    }
    // Views only the backward's outputs read.
    for i in 0..pending.len() {
        emit(i, &mut pending, &by_output, &mut out);
    }
    out
}
