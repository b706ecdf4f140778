//! The backward's order, made friendly to fusers before residuals are recomputed: an op that
//! no fuser joins (a matmul, an attention kernel) is moved down past the elementwise work after
//! it that does not read it, up to the next such op or its first reader.
//!
//! A linear layer's VJP computes the input gradient `g @ W` and then the weight gradient
//! `x^T @ g`. The weight gradient sat between the recomputation of the layer's input (a GELU
//! or a layer norm, recomputed just before its first use, the weight gradient) and that op's
//! own backward, which reads the same recomputed intermediates: they landed in two fusion
//! regions on either side of the GEMM, so the first wrote every f32 intermediate to memory
//! for the second to read back (five [B, T, 4C] f32 tensors for GPT-2's tanh-GELU). With the
//! weight gradient after the GELU backward, both sit in one run of fusible ops.

use crate::ir::{BoundSymbol, Tag, Value};
use std::collections::HashSet;
use thunder_abi::prims::Prim;

/// Whether a fuser may join `b` to its neighbours: an elementwise, reduction, shape, factory or
/// slicing/padding/concatenation prim.
pub(super) fn fusible(b: &BoundSymbol) -> bool {
    let Some(p) = b.sym.prim() else {
        return false;
    };
    b.sym.tags.iter().any(|t| {
        matches!(
            t,
            Tag::Elementwise | Tag::Reduction | Tag::ShapeOp | Tag::Factory
        )
    }) || matches!(p, Prim::Slice | Prim::Pad | Prim::Cat | Prim::Flip)
}

/// `bsyms` reordered so that fusible work stays together (latest op first at each step):
/// 1. an op that is not fusible and whose readers in the run of fusible ops after it are only
///    shape ops laying its result out (a weight gradient and its transpose) moves, with those,
///    to the end of that run, ahead of the next op that is not fusible;
/// 2. a fusible op read only by ops that are not fusible (a GEMM operand's transpose) moves
///    down to just before the first of them.
///
/// A valid order stays valid: ops only move past ops that do not read them.
pub(super) fn sink_unfusible(mut bsyms: Vec<BoundSymbol>) -> Vec<BoundSymbol> {
    let reads =
        |b: &BoundSymbol, outs: &HashSet<Value>| b.input_values().any(|v| outs.contains(&v));
    for i in (0..bsyms.len()).rev() {
        if fusible(&bsyms[i]) {
            continue;
        }
        let end = bsyms[i + 1..]
            .iter()
            .position(|b| !fusible(b))
            .map_or(bsyms.len(), |j| i + 1 + j);
        let mut outs: HashSet<Value> = bsyms[i].outputs.iter().copied().collect();
        let mut block = vec![true];
        for b in &bsyms[i + 1..end] {
            let joins = reads(b, &outs);
            if joins {
                outs.extend(b.outputs.iter().copied());
            }
            block.push(joins);
        }
        // Only an op whose readers in the run merely lay its result out (a weight gradient's
        // transpose): one whose result feeds elementwise work stays where that work needs it.
        let layout_only = bsyms[i + 1..end]
            .iter()
            .zip(&block[1..])
            .all(|(b, &m)| !m || b.sym.tags.contains(&Tag::ShapeOp));
        if !layout_only || block.iter().all(|&m| m) {
            continue;
        }
        let run: Vec<BoundSymbol> = bsyms.drain(i..end).collect();
        let (moved, stay): (Vec<_>, Vec<_>) = run.into_iter().zip(block).partition(|(_, m)| *m);
        let reordered: Vec<BoundSymbol> = stay.into_iter().chain(moved).map(|(b, _)| b).collect();
        bsyms.splice(i..i, reordered);
    }
    // Which values a fusible op reads (moves do not change who reads what).
    let fused_reads: HashSet<Value> = bsyms
        .iter()
        .filter(|b| fusible(b))
        .flat_map(|b| b.input_values())
        .collect();
    for i in (0..bsyms.len()).rev() {
        if !fusible(&bsyms[i]) || bsyms[i].outputs.iter().any(|v| fused_reads.contains(v)) {
            continue;
        }
        let outs: HashSet<Value> = bsyms[i].outputs.iter().copied().collect();
        if let Some(first) = bsyms[i + 1..].iter().position(|b| reads(b, &outs)) {
            bsyms[i..=i + first].rotate_left(1);
        }
    }
    bsyms
}
