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
//!
//! Except views that an op kept whole (not a prim: attention's pair, cross-entropy's) reads in
//! the forward on a GPU: the executors there materialize those anyway, so they are saved as
//! they are. On the CPU, cpu-simd's attention reads q, k and v through their strides, so the
//! forward never writes them; saving them made it write all three (three copies of
//! `[B, H, T, D]`, 0.14 ms of a 14 ms GPT-2 block on a Zen 3) where their source, the qkv
//! projection, is in memory anyway and costs the same bytes.

use crate::device::Device;
use crate::ir::{Arg, BoundSymbol, SymbolKind, Tag, Trace, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use thunder_abi::prims::{Prim, PrimClass};

/// Whether `b` only views one tensor, with no more bytes than its outputs: a shape prim, or a
/// composite of shape prims and slices whose outputs together are as large as its input (a
/// `split`: recomputing it saves its source, the same bytes as its parts).
fn is_view(trace: &Trace, b: &BoundSymbol) -> bool {
    fn slices_and_shapes(b: &BoundSymbol) -> bool {
        if b.subsymbols.is_empty() {
            b.sym.tags.contains(&Tag::ShapeOp) || b.sym.prim() == Some(Prim::Slice)
        } else {
            b.subsymbols.iter().all(slices_and_shapes)
        }
    }
    let mut ins = b.input_values();
    let (Some(src), None) = (ins.next(), ins.next()) else {
        return false;
    };
    if b.sym.tags.contains(&Tag::ShapeOp) {
        return true;
    }
    let numel = |v: Value| trace.ty(v).shape.iter().product::<i64>();
    !b.subsymbols.is_empty()
        && b.subsymbols.iter().all(slices_and_shapes)
        && b.outputs.iter().map(|&o| numel(o)).sum::<i64>() == numel(src)
}

/// The forward's bound symbols that the backward (`backward`, already pruned) should
/// recompute, in forward order: views ([`is_view`]) whose outputs the backward reads and the
/// forward does not return among its first `n_outputs` outputs, followed back through chains
/// of them.
pub(super) fn views_to_recompute(
    joint: &Trace,
    forward_len: usize,
    n_outputs: usize,
    backward: &[BoundSymbol],
    backward_outputs: &[Value],
) -> Vec<BoundSymbol> {
    let forward = &joint.bsyms[..forward_len];
    let returned: HashSet<Value> = joint.outputs[..n_outputs].iter().copied().collect();
    // value -> the forward view making it from one tensor
    let mut producer: HashMap<Value, usize> = HashMap::new();
    for (i, b) in forward.iter().enumerate() {
        if is_view(joint, b) {
            for &o in &b.outputs {
                producer.insert(o, i);
            }
        }
    }
    if producer.is_empty() {
        return Vec::new();
    }
    // Views an op kept whole reads on a GPU (attention's q, k, v after their head
    // transposes): the executors there materialize those in the forward anyway, so saving them
    // costs no copy, while recomputing them wrote their sources too and copied them again in
    // the backward. CPU values are left to the rule above (see the module doc).
    let materialized: HashSet<Value> = forward
        .iter()
        .filter(|b| !matches!(b.sym.kind, SymbolKind::Prim(_)))
        .flat_map(|b| b.input_values())
        .filter(|&v| joint.ty(v).device != Device::Cpu)
        .collect();
    let mut work: Vec<Value> = backward
        .iter()
        .flat_map(|b| b.input_values())
        .chain(backward_outputs.iter().copied())
        .collect();
    let mut chosen: HashSet<usize> = HashSet::new();
    while let Some(v) = work.pop() {
        if returned.contains(&v) || materialized.contains(&v) {
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
        .flat_map(|(i, b)| b.outputs.iter().map(move |&o| (o, i)))
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

/// Whether the backward may recompute `b` from its inputs: a one-output prim that is
/// elementwise (converts included), a shape op, or a deterministic factory (iota, full).
/// Random prims are never recomputed: a second draw would differ from the forward's.
fn recomputable(b: &BoundSymbol) -> bool {
    let Some(p) = b.sym.prim() else {
        return false;
    };
    b.outputs.len() == 1
        && (b.sym.tags.contains(&Tag::Elementwise)
            || b.sym.tags.contains(&Tag::ShapeOp)
            || p.class() == PrimClass::Factory)
}

/// Forward values that every executor writes to memory whether saved or not: those an op no
/// fuser joins reads (attention's q, k, v), and those read past such an op after them (a
/// residual stream read again after the block's GEMMs): fusion regions do not span a GEMM.
fn written_anyway(forward: &[BoundSymbol]) -> HashSet<Value> {
    let unfused: Vec<bool> = forward
        .iter()
        .map(|b| !super::schedule::fusible(b))
        .collect();
    let mut made_at: HashMap<Value, usize> = HashMap::new();
    let mut out = HashSet::new();
    // Index of the latest op no fuser joins at or before each position.
    let mut last_unfused: Option<usize> = None;
    for (i, b) in forward.iter().enumerate() {
        for v in b.input_values() {
            let crosses = made_at
                .get(&v)
                .is_some_and(|&at| last_unfused.is_some_and(|u| u > at));
            if unfused[i] || crosses {
                out.insert(v);
            }
        }
        if unfused[i] {
            last_unfused = Some(i);
        }
        for &o in &b.outputs {
            made_at.insert(o, i);
        }
    }
    out
}

/// The forward's cheap bound symbols (elementwise, shape and factory prims) that the backward
/// should recompute instead of reading their outputs as residuals, in forward order.
///
/// Greedy, latest residual first, until nothing changes: a residual made by such a prim is
/// recomputed from what its chain of such prims starts from when the values of that frontier
/// not already kept cost fewer bytes than it does (or none at all). Inputs of the trace and the
/// values the forward returns cost nothing: they are alive anyway. So an f32 chain (a GELU's
/// tanh, a layer norm's centered input, the exp of a softmax over the vocabulary) collapses
/// onto the bf16 GEMM output it started from, and the backward's fusions recompute it next to
/// where they read it, as the forward's did.
///
/// A tie goes to the frontier when every value on it is made by an op no fuser joins (a GEMM)
/// and the residual is not written anyway ([`written_anyway`]): the frontier is in memory
/// regardless, while the residual, made inside a fusion, is a second write. A linear layer's
/// biased output before its GELU is the case: saving it made the forward's GELU kernel write
/// both it and the activation. Not when the chain also reads another kept residual: its
/// recomputation would then be shared with that residual's readers, and a fuser would write
/// it between their regions.
pub(super) fn elementwise_to_recompute(
    joint: &Trace,
    forward_len: usize,
    n_outputs: usize,
    backward: &[BoundSymbol],
    backward_outputs: &[Value],
) -> Vec<BoundSymbol> {
    let forward = &joint.bsyms[..forward_len];
    let mut producer: HashMap<Value, usize> = HashMap::new();
    for (i, b) in forward.iter().enumerate() {
        for &o in &b.outputs {
            producer.insert(o, i);
        }
    }
    let free: HashSet<Value> = joint
        .inputs
        .iter()
        .chain(&joint.outputs[..n_outputs])
        .copied()
        .collect();
    // The residuals as the backward stands: forward values it reads before making them.
    let mut made: HashSet<Value> = HashSet::new();
    let mut kept: BTreeMap<usize, Vec<Value>> = BTreeMap::new();
    let keep = |v: Value, kept: &mut BTreeMap<usize, Vec<Value>>| {
        if let Some(&i) = producer.get(&v) {
            let slot = kept.entry(i).or_default();
            if !slot.contains(&v) {
                slot.push(v);
            }
        }
    };
    for b in backward {
        for v in b.input_values() {
            if !made.contains(&v) && !free.contains(&v) {
                keep(v, &mut kept);
            }
        }
        made.extend(b.outputs.iter().copied());
    }
    for &v in backward_outputs {
        if !made.contains(&v) && !free.contains(&v) {
            keep(v, &mut kept);
        }
    }
    let bytes = |v: Value| joint.ty(v).size_bytes();
    let written_anyway = written_anyway(forward);
    let mut chosen: BTreeSet<usize> = BTreeSet::new();
    loop {
        let mut changed = false;
        let candidates: Vec<(usize, Value)> = kept
            .iter()
            .rev()
            .flat_map(|(&i, vs)| vs.iter().map(move |&v| (i, v)))
            .collect();
        for (i, v) in candidates {
            if chosen.contains(&i) || !recomputable(&forward[i]) {
                continue;
            }
            let is_kept = |u: Value, kept: &BTreeMap<usize, Vec<Value>>| {
                producer
                    .get(&u)
                    .is_some_and(|j| kept.get(j).is_some_and(|vs| vs.contains(&u)))
            };
            // Walk back through recomputable prims to what is kept, free or must be saved.
            let budget = bytes(v);
            let mut closure: Vec<usize> = Vec::new();
            let mut frontier: Vec<Value> = Vec::new();
            let mut cost = 0usize;
            let mut seen: HashSet<Value> = HashSet::new();
            let mut stack = vec![v];
            let mut affordable = true;
            let mut reads_kept = false;
            while let Some(u) = stack.pop() {
                if !seen.insert(u) || free.contains(&u) {
                    continue;
                }
                if u != v && is_kept(u, &kept) {
                    reads_kept = true;
                    continue;
                }
                let Some(&j) = producer.get(&u) else { continue };
                if chosen.contains(&j) {
                    continue;
                }
                // A value at most half the residual's size is worth keeping instead of walking
                // past it (a layer norm's bf16 input rather than the residual stream behind it).
                let cheap_to_keep = u != v && bytes(u) * 2 <= budget;
                if recomputable(&forward[j]) && !cheap_to_keep {
                    closure.push(j);
                    stack.extend(forward[j].input_values());
                } else {
                    frontier.push(u);
                    cost += bytes(u);
                    if cost > budget {
                        affordable = false;
                        break;
                    }
                }
            }
            let tie_goes_to_frontier = !reads_kept
                && !written_anyway.contains(&v)
                && frontier.iter().all(|u| {
                    producer
                        .get(u)
                        .is_some_and(|&j| !super::schedule::fusible(&forward[j]))
                });
            if !affordable || (cost == budget && !tie_goes_to_frontier) {
                continue;
            }
            if let Some(vs) = kept.get_mut(&i) {
                vs.retain(|&u| u != v);
                if vs.is_empty() {
                    kept.remove(&i);
                }
            }
            chosen.extend(closure);
            for u in frontier {
                keep(u, &mut kept);
            }
            changed = true;
        }
        if !changed {
            break;
        }
    }
    chosen.into_iter().map(|i| forward[i].clone()).collect()
}

/// On the CPU, an output `c0` of an op kept whole (attention's) that the forward reads only
/// through a chain of transposes and reshapes `c0 -> c1 -> ... -> ck`, each the only reader of
/// the one before (the heads' merge `[B, H, T, D] -> [B, T, H, D] -> [B, T, C]`), is saved as
/// `ck` and rebuilt in the backward by the inverse chain, instead of saved as it is.
///
/// cpu-simd's attention writes `c0` straight into the merged layout, so `ck` is the only copy
/// of it the forward makes; a saved `c0` was a second, contiguous copy, and the backward then
/// merged the heads again for the output projection's weight gradient. The backward's
/// attention reads the rebuilt `c0` through its strides. `backward` has the views recomputed
/// already ([`views_to_recompute`]); those that remake `c1..ck` from `c0` are dropped.
pub(super) fn save_merged_outputs(
    joint: &Trace,
    forward_len: usize,
    n_outputs: usize,
    backward: Vec<BoundSymbol>,
) -> Vec<BoundSymbol> {
    let forward = &joint.bsyms[..forward_len];
    let returned: HashSet<Value> = joint.outputs[..n_outputs].iter().copied().collect();
    let mut readers: HashMap<Value, Vec<usize>> = HashMap::new();
    for (i, b) in forward.iter().enumerate() {
        for v in b.input_values() {
            readers.entry(v).or_default().push(i);
        }
    }
    let merge_step = |b: &BoundSymbol| {
        matches!(b.sym.prim(), Some(Prim::Transpose | Prim::Reshape)) && b.outputs.len() == 1
    };
    let mut chains: Vec<Vec<usize>> = Vec::new();
    for b in forward.iter().filter(|b| b.sym.prim().is_none()) {
        for &c0 in &b.outputs {
            if joint.ty(c0).device != Device::Cpu || returned.contains(&c0) {
                continue;
            }
            let (mut cur, mut chain) = (c0, Vec::new());
            while let Some(&[j]) = readers.get(&cur).map(Vec::as_slice) {
                if !merge_step(&forward[j]) || returned.contains(&cur) {
                    break;
                }
                chain.push(j);
                cur = forward[j].outputs[0];
            }
            let transposes = chain
                .iter()
                .any(|&j| forward[j].sym.prim() == Some(Prim::Transpose));
            if transposes {
                chains.push(chain);
            }
        }
    }
    let mut backward = backward;
    for chain in chains {
        let Some(c0) = forward[chain[0]].input_values().next() else {
            continue;
        };
        let remade: HashSet<Value> = chain.iter().map(|&j| forward[j].outputs[0]).collect();
        let kept: Vec<BoundSymbol> = backward
            .iter()
            .filter(|b| !b.outputs.iter().any(|o| remade.contains(o)))
            .cloned()
            .collect();
        if !kept.iter().any(|b| b.input_values().any(|v| v == c0)) {
            continue;
        }
        // c_{i-1} from c_i, last step first.
        let inverse: Vec<BoundSymbol> = chain
            .iter()
            .rev()
            .map(|&j| {
                let step = &forward[j];
                let src = step.input_values().next()?;
                let arg = match step.sym.prim() {
                    Some(Prim::Transpose) => {
                        let Some(Arg::Ints(perm)) = step.args.get(1) else {
                            return None;
                        };
                        let mut inv = vec![0i64; perm.len()];
                        for (i, &p) in perm.iter().enumerate() {
                            *inv.get_mut(usize::try_from(p).ok()?)? = i as i64;
                        }
                        Arg::Ints(inv)
                    }
                    _ => Arg::Ints(joint.ty(src).shape.clone()),
                };
                Some(BoundSymbol {
                    sym: step.sym,
                    args: vec![Arg::Value(step.outputs[0]), arg],
                    outputs: vec![src],
                    subsymbols: Vec::new(),
                })
            })
            .collect::<Option<_>>()
            .unwrap_or_default();
        if inverse.len() == chain.len() {
            backward = insert_before_use(kept, inverse);
        }
    }
    backward
}
