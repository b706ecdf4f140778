//! Running a fused group: its compacted loop nest is cut into items (a row of the outer dims
//! and one tile of at most [`TILE`] elements along the last dim), items are split into chunks
//! run by rayon, and each item runs the register program once. The loop is compiled three
//! times (AVX-512, AVX2+FMA, plain) and picked at run time from what the CPU has.

use crate::decode::Ty;
use crate::group::{BufId, GroupPlan};
use crate::ops::ReduceOp;
use crate::tile::{exec_tile, RegFile};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::OnceLock;

/// Elements per register: 4 KiB of f32, so a program's live registers stay in L1/L2.
pub(crate) const TILE: usize = 1024;
/// Groups smaller than this run on the calling thread: waking workers costs more.
const PAR_MIN: usize = 1 << 15;
/// The least work per chunk when a group is split across threads.
const CHUNK_MIN: usize = 1 << 14;

/// Base pointers of every buffer of one run. The host keeps inputs and outputs alive for the
/// call and the region owns the scratch, so they outlive every chunk.
pub(crate) struct Bufs {
    pub(crate) inputs: Vec<*mut u8>,
    pub(crate) outputs: Vec<*mut u8>,
    pub(crate) scratch: Vec<*mut u8>,
}

// SAFETY: chunks only write disjoint elements (see `GroupPlan::parallel`) and read buffers no
// chunk writes, so sharing the pointers between threads is sound.
unsafe impl Sync for Bufs {}
unsafe impl Send for Bufs {}

impl Bufs {
    pub(crate) fn ptr(&self, b: BufId) -> *mut u8 {
        let p = match b {
            BufId::Input(i) => self.inputs.get(i),
            BufId::Output(i) => self.outputs.get(i),
            BufId::Scratch(i) => self.scratch.get(i),
        };
        p.copied().unwrap_or(std::ptr::null_mut())
    }
}

/// The instruction set level the loops are compiled for: 2 AVX-512, 1 AVX2+FMA, 0 plain.
/// `THUNDER_CPU_SIMD_ISA=scalar|avx2` lowers it (for testing the fallbacks).
pub(crate) fn isa_level() -> u8 {
    static LEVEL: OnceLock<u8> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        let detected = if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
        {
            2
        } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            1
        } else {
            0
        };
        #[cfg(not(target_arch = "x86_64"))]
        let detected = 0;
        match std::env::var("THUNDER_CPU_SIMD_ISA").as_deref() {
            Ok("scalar") => 0,
            Ok("avx2") => detected.min(1),
            _ => detected,
        }
    })
}

/// One group's run: its plan and, per access and reduction, the base pointer and the stride
/// along the last (tiled) dim.
pub(crate) struct Ctx<'a> {
    pub(crate) plan: &'a GroupPlan,
    pub(crate) base: Vec<*mut u8>,
    pub(crate) last: Vec<i64>,
    pub(crate) accs: Vec<*mut f64>,
    pub(crate) red_last: Vec<i64>,
}

// SAFETY: as for `Bufs`; the accumulators of a parallel group are written at disjoint indices.
unsafe impl Sync for Ctx<'_> {}

pub(crate) fn run_group(plan: &GroupPlan, bufs: &Bufs) {
    let mut accs: Vec<Vec<f64>> = plan
        .reductions
        .iter()
        .map(|r| {
            let init = match r.op {
                ReduceOp::Sum => 0.0,
                ReduceOp::Amax => f64::NEG_INFINITY,
            };
            vec![init; r.out_numel]
        })
        .collect();
    if plan.numel > 0 {
        let r = plan.shape.len();
        let ctx = Ctx {
            plan,
            base: plan.bufs.iter().map(|&b| bufs.ptr(b)).collect(),
            last: plan.access_strides.iter().map(|s| s[r - 1]).collect(),
            accs: accs.iter_mut().map(|a| a.as_mut_ptr()).collect(),
            red_last: plan.red_strides.iter().map(|s| s[r - 1]).collect(),
        };
        let last = plan.shape[r - 1];
        let items = (plan.numel / last) * last.div_ceil(TILE);
        // With reductions, a chunk must own whole leading-dim slices so no two threads fold
        // into one output element.
        let granule = if plan.reductions.is_empty() || r == 1 {
            1
        } else {
            items / plan.shape[0]
        };
        let units = items / granule;
        let threads = rayon::current_num_threads();
        let chunks = if plan.parallel && threads > 1 && plan.numel >= PAR_MIN {
            units.min(plan.numel / CHUNK_MIN).clamp(1, threads * 4)
        } else {
            1
        };
        let range = |c: usize| (c * units / chunks) * granule..((c + 1) * units / chunks) * granule;
        if chunks == 1 {
            run_chunk(&ctx, 0..items);
        } else {
            (0..chunks)
                .into_par_iter()
                .for_each(|c| run_chunk(&ctx, range(c)));
        }
    }
    for (red, acc) in plan.reductions.iter().zip(&accs) {
        let out = bufs.ptr(red.out);
        // SAFETY: the output buffer holds `out_numel` elements of `ty` (checked at run start).
        unsafe {
            match red.ty {
                Ty::F32 => {
                    let o = out as *mut f32;
                    for (k, &v) in acc.iter().enumerate() {
                        *o.add(k) = v as f32;
                    }
                }
                Ty::F64 => std::ptr::copy_nonoverlapping(acc.as_ptr(), out as *mut f64, acc.len()),
                Ty::B8 | Ty::I64 => {}
            }
        }
    }
}

fn run_chunk(ctx: &Ctx<'_>, items: Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the level says the CPU has these features.
        match isa_level() {
            2 => return unsafe { run_avx512(ctx, items) },
            1 => return unsafe { run_avx2(ctx, items) },
            _ => {}
        }
    }
    run_items::<false>(ctx, items)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run_avx512(ctx: &Ctx<'_>, items: Range<usize>) {
    run_items::<true>(ctx, items)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2(ctx: &Ctx<'_>, items: Range<usize>) {
    run_items::<true>(ctx, items)
}

#[inline(always)]
fn run_items<const FMA: bool>(ctx: &Ctx<'_>, items: Range<usize>) {
    let plan = ctx.plan;
    let r = plan.shape.len();
    let last = plan.shape[r - 1];
    let tiles = last.div_ceil(TILE);
    let [n32, n64, nb, ni] = plan.regs;
    let mut regs = RegFile {
        f32: vec![0.0; n32 * TILE],
        f64: vec![0.0; n64 * TILE],
        b8: vec![0; nb * TILE],
        i64: vec![0; ni * TILE],
    };
    let (na, nr) = (ctx.base.len(), ctx.accs.len());
    let (mut row_off, mut row_red) = (vec![0i64; na], vec![0i64; nr]);
    let (mut offs, mut red_offs) = (vec![0i64; na], vec![0i64; nr]);
    let mut cur = usize::MAX;
    for item in items {
        let (row, t) = (item / tiles, item % tiles);
        if row != cur {
            cur = row;
            row_off.copy_from_slice(&plan.offsets);
            row_red.iter_mut().for_each(|o| *o = 0);
            let mut rem = row;
            for d in (0..r - 1).rev() {
                let i = (rem % plan.shape[d]) as i64;
                rem /= plan.shape[d];
                for (o, s) in row_off.iter_mut().zip(&plan.access_strides) {
                    *o += i * s[d];
                }
                for (o, s) in row_red.iter_mut().zip(&plan.red_strides) {
                    *o += i * s[d];
                }
            }
        }
        let j0 = (t * TILE) as i64;
        let len = TILE.min(last - t * TILE);
        for a in 0..na {
            offs[a] = row_off[a] + j0 * ctx.last[a];
        }
        for k in 0..nr {
            red_offs[k] = row_red[k] + j0 * ctx.red_last[k];
        }
        // SAFETY: offsets come from layouts checked against the buffers' sizes at compile
        // time, and registers from the allocator, which keeps a destination apart from its
        // sources.
        unsafe { exec_tile::<FMA>(ctx, &mut regs, &offs, &red_offs, len) };
    }
}
