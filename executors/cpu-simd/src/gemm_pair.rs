//! Two independent products run side by side, each on its share of the threads.
//!
//! A linear layer's backward is two products of the same size that read the same output
//! gradient and nothing of each other: the input gradient `dy @ w` and the weight gradient
//! `dyᵀ @ x`. Run one after the other, each is cut into one panel per thread, and each panel
//! packs the operand every panel reads once more, then all meet at a join. Run side by side,
//! each product keeps one thread (or its half of them) for its whole length: no repeated
//! packing, one join for the two.
//!
//! The later product may move up to the earlier one, or the earlier down to the later, over
//! the stages between them when it touches nothing those stages write and writes nothing
//! they read; the two must not touch each other's outputs either. The buffers (`BufId`) each
//! stage reads and writes decide, and a stage whose buffers are not known here is never
//! crossed.
//!
//! Measured on the 2-core Zen 3 guest (`thunder bench --only gpt2_block`, 8 rounds
//! alternating with `THUNDER_CPU_SIMD_PAIR=0`): the block's two pairs (the MLP's second
//! layer, the attention projection) took its median to 14.28 ms against 14.93, faster in all
//! 8 rounds; traced, the MLP pair ran in 2.15-2.23 ms against 2.26-2.52 for its two products
//! one after the other. MiniLM b8 (its query and key projections paired; 6 rounds of
//! `onnx_bench`): 208.9 against 206.7 ms, inside the noise.

use crate::group::{BufId, GroupPlan, Ins};
use crate::stages::{GemmPlan, Stage};

/// Products smaller than this many multiply-adds are not paired: below it `gemm_run` runs a
/// product on the calling thread or on the spinning team, whose hand-off a pair's join would
/// only make dearer.
const PAIR_MIN: usize = crate::gemm_run::PAR_MIN;

/// The larger product of a pair may have at most this many times the smaller's work, so that
/// neither thread waits long for the other.
const PAIR_RATIO: usize = 2;

/// How many stages ahead a partner is looked for.
const WINDOW: usize = 12;

/// Buffers a stage reads and writes.
struct Touches {
    reads: Vec<BufId>,
    writes: Vec<BufId>,
}

impl Touches {
    /// Whether running `self` and `other` in either order (or at once) could differ.
    fn conflict(&self, other: &Touches) -> bool {
        let hits = |w: &[BufId], xs: &[BufId]| w.iter().any(|b| xs.contains(b));
        hits(&self.writes, &other.reads)
            || hits(&self.writes, &other.writes)
            || hits(&other.writes, &self.reads)
    }
}

fn gemm_touches(g: &GemmPlan) -> Touches {
    let mut reads = vec![g.a.0, g.b.0];
    if let Some(e) = &g.epilogue {
        reads.push(e.bias.0);
        reads.extend(e.residual.as_ref().map(|r| r.0));
    }
    Touches {
        reads,
        writes: vec![g.out],
    }
}

fn group_touches(g: &GroupPlan) -> Touches {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for ins in &g.ins {
        match *ins {
            Ins::Load { acc, .. } => reads.push(g.bufs[acc]),
            Ins::Store { acc, .. } => writes.push(g.bufs[acc]),
            _ => {}
        }
    }
    writes.extend(g.reductions.iter().map(|r| r.out));
    Touches { reads, writes }
}

/// What a stage reads and writes, where it is known here (`None`: a barrier).
fn touches(stage: &Stage) -> Option<Touches> {
    match stage {
        Stage::Gemm(g) => Some(gemm_touches(g)),
        Stage::Ready(g) => Some(group_touches(g)),
        _ => None,
    }
}

/// Multiply-adds of a product stage that may be paired (`None` for any other stage).
fn pairable(stage: &Stage) -> Option<usize> {
    match stage {
        // Summed batches add into one output in order; keep them whole.
        Stage::Gemm(g) if !g.accumulate => {
            let work = g.batch.iter().product::<usize>() * g.m * g.n * g.k;
            (work >= PAIR_MIN).then_some(work)
        }
        _ => None,
    }
}

/// The stages with independent products of similar size brought together as
/// [`Stage::GemmPair`]s, at the first one's place (the second moved up) or at the second's
/// (the first moved down). Stages must be lowered (`Stage::finish`) already.
pub(crate) fn pair_products(stages: Vec<Stage>) -> Vec<Stage> {
    if !enabled() {
        return stages;
    }
    let mut slots: Vec<Option<Stage>> = stages.into_iter().map(Some).collect();
    for i in 0..slots.len() {
        let Some(Place { partner, down }) =
            slots[i].as_ref().and_then(|s| find_partner(&slots, i, s))
        else {
            continue;
        };
        match (slots[i].take(), slots[partner].take()) {
            (Some(Stage::Gemm(a)), Some(Stage::Gemm(b))) => {
                slots[if down { partner } else { i }] = Some(Stage::GemmPair(Box::new((a, b))));
            }
            // `find_partner` pairs product stages only; anything else stays where it was.
            (x, y) => (slots[i], slots[partner]) = (x, y),
        }
    }
    slots.into_iter().flatten().collect()
}

/// Where a product's partner is and which of the two moves.
struct Place {
    partner: usize,
    /// The first product moves down to the partner (else the partner moves up).
    down: bool,
}

/// The first product within [`WINDOW`] stages after `i` that `first` can be run beside: the
/// two touch nothing of each other, and one of them touches nothing of the stages between.
fn find_partner(slots: &[Option<Stage>], i: usize, first: &Stage) -> Option<Place> {
    let work = pairable(first)?;
    let first_touches = touches(first)?;
    let mut between: Vec<Touches> = Vec::new();
    for (j, slot) in slots.iter().enumerate().skip(i + 1).take(WINDOW) {
        let Some(stage) = slot else { continue };
        let t = touches(stage)?;
        if let Some(other) = pairable(stage) {
            let balanced = other.max(work) <= PAIR_RATIO * other.min(work);
            if balanced && !t.conflict(&first_touches) {
                let free = |x: &Touches| between.iter().all(|b| !x.conflict(b));
                if free(&t) {
                    return Some(Place {
                        partner: j,
                        down: false,
                    });
                }
                if free(&first_touches) {
                    return Some(Place {
                        partner: j,
                        down: true,
                    });
                }
            }
        }
        between.push(t);
    }
    None
}

/// Whether products are paired (`THUNDER_CPU_SIMD_PAIR=0` turns it off, for A/B runs). Read
/// once, when regions are compiled.
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    crate::switches::once("THUNDER_CPU_SIMD_PAIR", &ON)
}

/// Runs both products at once, each on half the threads (one each on two).
pub(crate) fn run(pair: &(GemmPlan, GemmPlan), bufs: &crate::exec::Bufs) {
    let (a, b) = pair;
    let first = crate::ftz::carried(|()| crate::gemm_run::run_shared(a, bufs, 2));
    let second = crate::ftz::carried(|()| crate::gemm_run::run_shared(b, bufs, 2));
    rayon::join(|| first(()), || second(()));
}
