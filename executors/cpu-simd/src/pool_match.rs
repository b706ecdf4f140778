//! Finding a max pool in a region: the decomposition that ONNX import
//! (`thunder_onnx::ops::lowering::max_pool2d_slices`) and pooling written by hand leave,
//!
//! ```text
//! xp = pad(x, v, [(0, 0, 0).., (lh, hh, 0), (lw, hw, 0)])   # optional; v a float literal
//! t  = slice(xp, [0.., dh, dw], [1.., sh, sw])              # per tap, one slice or a chain
//! y  = maximum(maximum(t_00, t_01), ...)                    # any tree of maximums
//! ```
//!
//! is run by one window stage (`pool.rs`) that reads `x` in place: no padded copy, and each
//! input row is read once per output row instead of once per tap. The taps must form a grid
//! (`{dh} x {dw}`), which every max pool's kernel window does. A maximum is commutative and
//! associative here (`ops::nan_max`: NaN wins, -0 below +0), so the stage's order of
//! evaluation gives the chain's bits. A chain whose intermediates (or padded input) are read
//! outside it is left to the ordinary stages.

use crate::decode::{Decoded, Lit, Op, Operand, Ty};
use crate::fusion::Uses;
use crate::ops::BinaryOp;
use std::collections::{BTreeSet, HashSet};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PoolMatch {
    /// Positions (in the region's op list) of every op the stage replaces.
    pub(crate) ops: HashSet<usize>,
    /// Position of the last maximum, where the stage is scheduled.
    pub(crate) at: usize,
    /// The pooled value (the pad's input, or the sliced value when nothing pads it).
    pub(crate) x: u32,
    /// The pad's value (`None`: no pad, every tap lies inside `x`).
    pub(crate) fill: Option<f64>,
    /// The pad's low border on the two last dims.
    pub(crate) low: [usize; 2],
    pub(crate) stride: [usize; 2],
    /// Tap offsets (in padded coordinates) along the two last dims.
    pub(crate) dh: Vec<usize>,
    pub(crate) dw: Vec<usize>,
}

/// Whether max pools run as window stages (`THUNDER_CPU_SIMD_POOL=0` leaves them to the
/// pad and fused loops, for comparing the two). Read once.
pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    crate::switches::once("THUNDER_CPU_SIMD_POOL", &ON)
}

/// Every max pool in `ops` (a region's decoded ops in order) whose intermediates only feed
/// it; `outputs` are the values read outside the region's prims, `taken` the ops other
/// fusions run.
pub(crate) fn find(ops: &[Decoded], outputs: &[u32], taken: &HashSet<usize>) -> Vec<PoolMatch> {
    let uses = Uses::of(ops);
    let mut claimed: HashSet<usize> = HashSet::new();
    let mut found = Vec::new();
    // From the last op back, so the largest tree is seen first and claims its inner nodes.
    for at in (0..ops.len()).rev() {
        if claimed.contains(&at) || taken.contains(&at) {
            continue;
        }
        if let Some(m) = match_at(ops, &uses, outputs, taken, at) {
            claimed.extend(m.ops.iter().copied());
            found.push(m);
        }
    }
    found
}

fn max_operands(d: &Decoded) -> Option<(u32, u32)> {
    match d.op {
        Op::Binary {
            op: BinaryOp::Maximum,
            a: Operand::Val(a),
            b: Operand::Val(b),
        } if a != b => Some((a, b)),
        _ => None,
    }
}

/// A tap: where its slices start and how they step, relative to `base`.
struct Tap {
    base: u32,
    start: Vec<usize>,
    step: Vec<usize>,
}

fn match_at(
    ops: &[Decoded],
    uses: &Uses,
    outputs: &[u32],
    taken: &HashSet<usize>,
    at: usize,
) -> Option<PoolMatch> {
    let root = &ops[at];
    let (a, b) = max_operands(root)?;
    let rank = root.shape.len();
    if rank < 2 || !matches!(root.ty, Ty::F32 | Ty::F64) {
        return None;
    }
    let mut replaced: HashSet<usize> = HashSet::from([at]);
    // The tree of maximums: an operand made by another maximum that only this one reads is an
    // inner node; anything else is a leaf (a tap).
    let mut leaves = Vec::new();
    let mut stack = vec![(a, at), (b, at)];
    while let Some((v, reader)) = stack.pop() {
        let inner = uses
            .producer
            .get(&v)
            .filter(|_| uses.sole(v, outputs, taken) == Some(reader))
            .filter(|&&j| !taken.contains(&j))
            .and_then(|&j| max_operands(&ops[j]).map(|ab| (j, ab)));
        match inner {
            Some((j, (x, y))) => {
                replaced.insert(j);
                stack.push((x, j));
                stack.push((y, j));
            }
            None => leaves.push((v, reader)),
        }
    }
    let taps: Vec<Tap> = leaves
        .iter()
        .map(|&(v, _)| tap_of(ops, uses, outputs, taken, v, rank, &mut replaced))
        .collect::<Option<_>>()?;
    // Every slice taken in is read by the pool's ops alone.
    let closed = replaced.iter().all(|&j| {
        uses.reads_of(ops[j].out)
            .iter()
            .all(|r| replaced.contains(r))
            || j == at
    });
    if !closed {
        return None;
    }
    let base = taps[0].base;
    let step = taps[0].step.clone();
    let plane_dims_whole = |t: &Tap| {
        t.start[..rank - 2].iter().all(|&s| s == 0) && t.step[..rank - 2].iter().all(|&s| s == 1)
    };
    if taps.len() < 2
        || !taps
            .iter()
            .all(|t| t.base == base && t.step == step && plane_dims_whole(t))
    {
        return None;
    }
    let dh: BTreeSet<usize> = taps.iter().map(|t| t.start[rank - 2]).collect();
    let dw: BTreeSet<usize> = taps.iter().map(|t| t.start[rank - 1]).collect();
    let grid: HashSet<(usize, usize)> = taps
        .iter()
        .map(|t| (t.start[rank - 2], t.start[rank - 1]))
        .collect();
    if grid.len() != dh.len() * dw.len() {
        return None;
    }
    let stride = [step[rank - 2], step[rank - 1]];
    let (dh, dw): (Vec<usize>, Vec<usize>) = (dh.into_iter().collect(), dw.into_iter().collect());
    // The pad folds in when only the taps read it.
    let pad = uses.producer.get(&base).copied().and_then(|j| {
        let Op::Pad { a, value, config } = &ops[j].op else {
            return None;
        };
        let fill = match value {
            Lit::F(f) => *f,
            Lit::I(i) => *i as f64,
            Lit::B(_) => return None,
        };
        if config.len() != rank {
            return None;
        }
        let reads = uses.reads_of(base);
        let planes_unpadded = config[..rank - 2].iter().all(|&c| c == (0, 0, 0));
        let spatial = &config[rank - 2..];
        let borders = spatial
            .iter()
            .all(|&(lo, hi, int)| lo >= 0 && hi >= 0 && int == 0);
        let only_taps = reads.iter().all(|r| replaced.contains(r))
            && !outputs.contains(&base)
            && !taken.contains(&j);
        (planes_unpadded && borders && only_taps)
            .then(|| (j, *a, fill, [spatial[0].0 as usize, spatial[1].0 as usize]))
    });
    let (x, fill, low) = match pad {
        Some((j, a, fill, low)) => {
            replaced.insert(j);
            (a, Some(fill), low)
        }
        None => (base, None, [0, 0]),
    };
    Some(PoolMatch {
        ops: replaced,
        at,
        x,
        fill,
        low,
        stride,
        dh,
        dw,
    })
}

/// Follows the slices below leaf `v` (each read only by the op above it), composing them.
#[allow(clippy::too_many_arguments)]
fn tap_of(
    ops: &[Decoded],
    uses: &Uses,
    outputs: &[u32],
    taken: &HashSet<usize>,
    v: u32,
    rank: usize,
    replaced: &mut HashSet<usize>,
) -> Option<Tap> {
    // Leaf index i maps to `start + i * step` of the current value.
    let mut cur = v;
    let (mut start, mut step) = (vec![0usize; rank], vec![1usize; rank]);
    let mut slices = Vec::new();
    loop {
        // A slice may be shared between taps (the trace's cleanup merges the row slice the
        // taps of one kernel row take first); `match_at` checks that only the pool reads it.
        let sliced = uses
            .producer
            .get(&cur)
            .filter(|_| !outputs.contains(&cur))
            .filter(|&&j| !taken.contains(&j))
            .and_then(|&j| match &ops[j].op {
                Op::Slice { a, start, step } if start.len() == rank => Some((j, *a, start, step)),
                _ => None,
            });
        let Some((j, a, s_start, s_step)) = sliced else {
            break;
        };
        for d in 0..rank {
            start[d] = s_start[d] + start[d] * s_step[d];
            step[d] *= s_step[d];
        }
        slices.push(j);
        cur = a;
    }
    replaced.extend(slices);
    Some(Tap {
        base: cur,
        start,
        step,
    })
}
