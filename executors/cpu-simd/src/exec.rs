//! Running a fused group: its compacted loop nest is cut into items (a row of the outer dims
//! and one tile of at most [`TILE`] elements along the last dim), items are split into chunks
//! run by rayon, and each item runs the register program once. The loop is compiled three
//! times (AVX-512, AVX2+FMA, plain) and picked at run time from what the CPU has.

use crate::decode::Ty;
use crate::group::{BufId, GroupPlan, Ins};
use crate::ops::ReduceOp;
use crate::tile::{exec_tile, RegFile};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Elements per register: 4 KiB of f32, so a program's live registers stay in L1/L2.
pub(crate) const TILE: usize = 4096;
/// Groups smaller than this run on the calling thread or the team (from [`TEAM_MIN`]):
/// waking rayon's workers costs more.
const PAR_MIN: usize = 1 << 17;
/// Groups from this size run in parallel chunks inside a region on a worker, where the other
/// workers linger (`on_worker::cheap_split`).
const LINGER_PAR_MIN: usize = 1 << 14;
/// The least work per chunk when a group is split across threads.
const CHUNK_MIN: usize = 1 << 14;
/// Groups from this size up to [`PAR_MIN`] run on the spinning team (`team.rs`), whose
/// hand-off costs about a microsecond where rayon's wake-ups cost tens.
const TEAM_MIN: usize = 1 << 11;
/// Groups at least this large store contiguous tiles with non-temporal stores: their outputs
/// are far larger than the caches, so writing around them saves the read-for-ownership traffic.
const STREAM_MIN: usize = 1 << 20;
/// Tile length and rows per block for groups with an access strided along the last dim (a
/// transpose): tiles of [`BLOCK_TILE`] are run for [`BLOCK_ROWS`] consecutive rows before the
/// next tile, so the cache lines a strided access touches in one row are reused by the next.
const BLOCK_TILE: usize = 256;
const BLOCK_ROWS: usize = 16;
/// The shortest rows a group runs as a register-resident chain (`chain.rs`) on: measured on
/// a bias add (AVX-512, 2 threads), rows of 64 run 1.7x faster as a chain than as the tile
/// path's several-rows tiles, rows of 32 twice as slow (one item and a padded tail per row).
const CHAIN_ROW_MIN: usize = 64;

/// The longest rows a group that folds its rows runs several to a tile: a loss's bias
/// gradient over 10 classes ran 1.5x faster so, while rows of 128 (an MLP layer's) ran
/// slower in tiles of 32 rows than row by row.
const FOLD_ROW_MAX: usize = 32;

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
    /// Whether contiguous stores go around the caches (see [`STREAM_MIN`]).
    pub(crate) stream: bool,
    /// Elements per tile (at most [`TILE`]) and rows per block (1: row by row).
    pub(crate) tile: usize,
    pub(crate) block: usize,
    /// For a blocked group that only copies one access to another: (source access,
    /// destination access, element size in bytes), run by `copy_block` instead of the tiles.
    pub(crate) copy: Option<(usize, usize, usize)>,
    /// The group as one f32 chain, run in vector registers (see `chain.rs`).
    pub(crate) chain: Option<&'a crate::chain::Chain>,
    /// Rows per tile when a tile spans several short rows (1: a tile is part of one row).
    pub(crate) rows: usize,
    /// Per access, whether consecutive rows of a 2-D nest follow each other in memory, so a
    /// tile of several rows loads or stores with one copy instead of one per row.
    pub(crate) rows_contig: Vec<bool>,
}

// SAFETY: as for `Bufs`; the accumulators of a parallel group are written at disjoint indices.
unsafe impl Sync for Ctx<'_> {}

/// Whether `THUNDER_CPU_SIMD_TRACE` is set: each group run then prints its loop nest, access
/// strides, instruction count and time to stderr (for profiling).
pub(crate) fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("THUNDER_CPU_SIMD_TRACE").is_some())
}

/// Writes one trace line to stderr in a single write. `eprintln!` on the unbuffered stderr
/// issues a write for every formatted piece (a group's line with its stride lists was about
/// 33 system calls, 45 us on a KVM guest), which inflated a traced GPT-2 block's region
/// totals by 1 ms a region against the sum of its stages.
pub(crate) fn trace_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut line = std::fmt::format(args);
    line.push('\n');
    // A trace line that cannot be written is dropped; the run goes on.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Whether short rows share tiles (`THUNDER_CPU_SIMD_ROWS=0` turns it off).
fn rows_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::switches::once("THUNDER_CPU_SIMD_ROWS", &ON)
}

/// Whether single-chain groups run in vector registers (`THUNDER_CPU_SIMD_CHAIN=0` turns it
/// off, for comparing with the tile path).
fn chain_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::switches::once("THUNDER_CPU_SIMD_CHAIN", &ON)
}

pub(crate) fn run_group(plan: &GroupPlan, bufs: &Bufs) {
    if trace() {
        let t = std::time::Instant::now();
        run_group_inner(plan, bufs);
        crate::exec::trace_line(format_args!(
            "cpu-simd group: {:>9.1} us shape {:?} access strides {:?} red strides {:?} ins {} par {}",
            t.elapsed().as_secs_f64() * 1e6,
            plan.shape,
            plan.access_strides,
            plan.red_strides,
            plan.ins.len(),
            plan.parallel
        ));
    } else {
        run_group_inner(plan, bufs);
    }
}

fn run_group_inner(plan: &GroupPlan, bufs: &Bufs) {
    let mut accs: Vec<Vec<f64>> = plan
        .reductions
        .iter()
        .map(|r| {
            let init = match r.op {
                ReduceOp::Sum => 0.0,
                ReduceOp::Amax => f64::NEG_INFINITY,
                ReduceOp::Amin => f64::INFINITY,
            };
            vec![init; r.out_numel]
        })
        .collect();
    if plan.numel > 0 {
        if let Some(copy) = crate::row_copy::row_copy_of(plan) {
            crate::row_copy::run(plan, bufs, copy);
            return;
        }
        let r = plan.shape.len();
        let ctx = Ctx {
            plan,
            base: plan.bufs.iter().map(|&b| bufs.ptr(b)).collect(),
            last: plan.access_strides.iter().map(|s| s[r - 1]).collect(),
            accs: accs.iter_mut().map(|a| a.as_mut_ptr()).collect(),
            red_last: plan.red_strides.iter().map(|s| s[r - 1]).collect(),
            stream: plan.numel >= STREAM_MIN,
            tile: TILE,
            block: 1,
            copy: None,
            chain: None,
            rows: 1,
            // Filled below when tiles span rows (an allocation per run costs the smallest
            // groups a measurable share).
            rows_contig: Vec::new(),
        };
        let last = plan.shape[r - 1];
        let mut ctx = ctx;
        // Blocking reorders the items, which only a group without reductions may do freely.
        if r >= 2 && plan.reductions.is_empty() && ctx.last.iter().any(|&s| s.unsigned_abs() > 16) {
            ctx.tile = BLOCK_TILE;
            ctx.block = BLOCK_ROWS;
            if let [Ins::Load { ty, dst, acc: a }, Ins::Store { src, acc: b, .. }] = plan.ins[..] {
                if src == dst && a != b {
                    let size = match ty {
                        Ty::B8 => 1,
                        Ty::F32 => 4,
                        Ty::F64 | Ty::I64 => 8,
                    };
                    ctx.copy = Some((a, b, size));
                }
            }
        }
        // Short rows keep the tile path's several-rows-per-tile items below: a chain runs
        // item by item, and a padded tail per short row would cost more than it saves.
        if ctx.copy.is_none()
            && ctx.block == 1
            && (r == 1 || last >= CHAIN_ROW_MIN)
            && isa_level() >= 1
            && chain_enabled()
        {
            let mut fresh = false;
            ctx.chain = plan
                .chain
                .get_or_init(|| {
                    fresh = true;
                    crate::chain::chain_of(plan, &ctx.last)
                })
                .as_ref();
            // Once per group: printed on every run, the line's formatting and write were
            // most of a small group's traced time.
            if fresh && trace() {
                if let Some(c) = &ctx.chain {
                    crate::exec::trace_line(format_args!("cpu-simd group runs as a chain: {c:?}"));
                }
            }
        }
        // Short rows: one tile covers several rows, so the per-instruction cost of a tile is
        // paid once per `TILE` elements rather than once per row. With reductions (a softmax
        // or a loss over a few classes) only on a plain matrix none of whose reductions folds
        // the rows, so that any split of the rows between threads folds each output element
        // on one thread; or on a group that folds its rows (a bias gradient) with rows of at
        // most [`FOLD_ROW_MAX`]: such a group runs on one thread or in chunks of private
        // accumulators, and its rows are folded in order either way.
        // Groups too small for rayon's workers but with some work run on the team
        // (`team.rs`), as parallel chunks or private-accumulator chunks like rayon's.
        let team = plan.numel >= TEAM_MIN && plan.numel < PAR_MIN && crate::team::usable();
        // Inside a region on a worker the others linger, so rayon splits as cheaply as the
        // team (which a worker cannot use) from a smaller size.
        let par_min = if crate::on_worker::cheap_split() {
            LINGER_PAR_MIN
        } else {
            PAR_MIN
        };
        let threads = if team {
            crate::team::threads()
        } else {
            rayon::current_num_threads()
        };
        let rows_fold = plan.reductions.is_empty()
            || (r == 2 && plan.parallel)
            || (!plan.parallel && last <= FOLD_ROW_MAX);
        if r >= 2
            && rows_fold
            && ctx.block == 1
            && ctx.copy.is_none()
            && ctx.chain.is_none()
            && last * 2 <= TILE
            && rows_enabled()
        {
            ctx.rows = TILE / last;
            if team {
                // A tile per thread at least, so the rows can be shared.
                ctx.rows = ctx.rows.min((plan.numel / last).div_ceil(threads));
            }
            ctx.rows_contig = plan
                .access_strides
                .iter()
                .map(|st| r == 2 && st[1] == 1 && st[0] == last as i64)
                .collect();
        }
        let items = if ctx.rows > 1 {
            (plan.numel / last).div_ceil(ctx.rows)
        } else {
            (plan.numel / last) * last.div_ceil(ctx.tile)
        };
        // With reductions, a chunk must own whole leading-dim slices so no two threads fold
        // into one output element.
        let granule = if plan.reductions.is_empty() || r == 1 || ctx.rows > 1 {
            1
        } else {
            items / plan.shape[0]
        };
        let units = items / granule;
        let chunks = if team && plan.parallel {
            // Two chunks per thread: a late helper leaves the caller half of its share.
            units.min(threads * 2)
        } else if plan.parallel && threads > 1 && plan.numel >= par_min {
            units
                .min(plan.numel / CHUNK_MIN.min(par_min / 2))
                .clamp(1, threads * 4)
        } else {
            1
        };
        let range = |c: usize| (c * units / chunks) * granule..((c + 1) * units / chunks) * granule;
        let private = private_chunks(plan, &accs, units, threads, team, par_min);
        if private > 1 {
            // Each chunk folds its rows into accumulators of its own; they are combined in
            // chunk order, so the result depends only on the size and the thread count.
            let range =
                |c: usize| (c * units / private) * granule..((c + 1) * units / private) * granule;
            let part = |c: usize| {
                let _ieee = crate::ftz::FlushGuard::ieee();
                let mut mine = accs.clone();
                let own = ctx.with_accs(mine.iter_mut().map(|a| a.as_mut_ptr()).collect());
                run_chunk(&own, range(c));
                mine
            };
            let parts: Vec<Vec<Vec<f64>>> = if team {
                let slots: Vec<Mutex<Vec<Vec<f64>>>> =
                    (0..private).map(|_| Mutex::new(Vec::new())).collect();
                crate::team::run(private, &|c| {
                    *slots[c].lock().unwrap_or_else(PoisonError::into_inner) = part(c)
                });
                slots
                    .into_iter()
                    .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
                    .collect()
            } else {
                (0..private).into_par_iter().map(part).collect()
            };
            for part in parts {
                for ((acc, red), p) in accs.iter_mut().zip(&plan.reductions).zip(part) {
                    for (a, x) in acc.iter_mut().zip(p) {
                        *a = crate::kernels::combine(red.op, *a, x);
                    }
                }
            }
        } else if chunks == 1 {
            run_chunk(&ctx, 0..items);
        } else if team {
            crate::team::run(chunks, &|c| {
                let _ieee = crate::ftz::FlushGuard::ieee();
                run_chunk(&ctx, range(c))
            });
        } else {
            (0..chunks).into_par_iter().for_each(|c| {
                // Workers flush subnormals for the products; fused loops keep IEEE
                // semantics (`ftz.rs`).
                let _ieee = crate::ftz::FlushGuard::ieee();
                run_chunk(&ctx, range(c))
            });
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

/// How many chunks a group that may not split its rows between threads (a reduction folds its
/// leading dim: a bias gradient, a layer norm's weight gradient) runs as, each with private
/// accumulators: 1 (on one thread) when the group is small or its outputs are not small next
/// to its work.
fn private_chunks(
    plan: &GroupPlan,
    accs: &[Vec<f64>],
    units: usize,
    threads: usize,
    team: bool,
    par_min: usize,
) -> usize {
    let acc_len: usize = accs.iter().map(Vec::len).sum();
    if plan.parallel || accs.is_empty() || threads < 2 || (plan.numel < par_min && !team) {
        return 1;
    }
    if acc_len * threads * 8 > plan.numel {
        return 1;
    }
    units.min(threads)
}

impl Ctx<'_> {
    /// This run with other accumulators.
    fn with_accs(&self, accs: Vec<*mut f64>) -> Ctx<'_> {
        Ctx {
            plan: self.plan,
            base: self.base.clone(),
            last: self.last.clone(),
            accs,
            red_last: self.red_last.clone(),
            stream: self.stream,
            tile: self.tile,
            block: self.block,
            copy: self.copy,
            chain: self.chain,
            rows: self.rows,
            rows_contig: self.rows_contig.clone(),
        }
    }
}

fn run_chunk(ctx: &Ctx<'_>, items: Range<usize>) {
    let [n32, n64, nb, ni] = ctx.plan.regs;
    // The register files are kept per thread between runs: allocating and zeroing them per
    // group (16 KiB per f32 register) cost microseconds on every small group. Registers are
    // always written before they are read within a tile, so old contents do not matter.
    // (Taken here, outside the dispatched loops: a closure inside them would be compiled
    // without their target features.)
    thread_local! {
        static REGS: std::cell::RefCell<RegFile> = const {
            std::cell::RefCell::new(RegFile {
                f32: Vec::new(),
                f64: Vec::new(),
                b8: Vec::new(),
                i64: Vec::new(),
            })
        };
    }
    fn grow<T: Copy + Default>(v: &mut Vec<T>, n: usize) {
        if v.len() < n {
            v.resize(n, T::default());
        }
    }
    REGS.with(|cell| {
        let mut fresh;
        let mut cached = cell.try_borrow_mut();
        let regs: &mut RegFile = match cached.as_deref_mut() {
            Ok(r) => r,
            Err(_) => {
                fresh = RegFile {
                    f32: Vec::new(),
                    f64: Vec::new(),
                    b8: Vec::new(),
                    i64: Vec::new(),
                };
                &mut fresh
            }
        };
        if ctx.chain.is_none() || isa_level() == 0 {
            grow(&mut regs.f32, n32 * TILE);
            grow(&mut regs.f64, n64 * TILE);
            grow(&mut regs.b8, nb * TILE);
            grow(&mut regs.i64, ni * TILE);
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: the level says the CPU has these features.
            match isa_level() {
                2 => return unsafe { run_avx512(ctx, items, regs) },
                1 => return unsafe { run_avx2(ctx, items, regs) },
                _ => {}
            }
        }
        run_items::<false>(ctx, items, regs)
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run_avx512(ctx: &Ctx<'_>, items: Range<usize>, regs: &mut RegFile) {
    run_items::<true>(ctx, items, regs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2(ctx: &Ctx<'_>, items: Range<usize>, regs: &mut RegFile) {
    run_items::<true>(ctx, items, regs)
}

#[inline(always)]
fn run_items<const FMA: bool>(ctx: &Ctx<'_>, items: Range<usize>, regs: &mut RegFile) {
    if ctx.rows > 1 {
        run_rows::<FMA>(ctx, items, regs);
    } else {
        run_items_with::<FMA>(ctx, items, regs);
    }
}

/// Items of `ctx.rows` whole rows each: per access, the offset of each row of the item.
#[inline(always)]
fn run_rows<const FMA: bool>(ctx: &Ctx<'_>, items: Range<usize>, regs: &mut RegFile) {
    let plan = ctx.plan;
    let r = plan.shape.len();
    let last = plan.shape[r - 1];
    let rows = plan.numel / last;
    let (na, nr) = (ctx.base.len(), ctx.accs.len());
    let per = ctx.rows;
    let mut offs = vec![0i64; na * per];
    let mut red_offs = vec![0i64; nr * per];
    for item in items {
        let row0 = item * per;
        let n = per.min(rows - row0);
        if r == 2 {
            // One dim of rows: no odometer.
            for q in 0..n {
                let i = (row0 + q) as i64;
                for a in 0..na {
                    offs[a * per + q] = plan.offsets[a] + i * plan.access_strides[a][0];
                }
                for k in 0..nr {
                    red_offs[k * per + q] = i * plan.red_strides[k][0];
                }
            }
            // SAFETY: as below.
            unsafe { crate::tile::exec_rows::<FMA>(ctx, regs, &offs, &red_offs, per, n, last) };
            continue;
        }
        for q in 0..n {
            let mut rem = row0 + q;
            for a in 0..na {
                offs[a * per + q] = plan.offsets[a];
            }
            for k in 0..nr {
                red_offs[k * per + q] = 0;
            }
            for d in (0..r - 1).rev() {
                let i = (rem % plan.shape[d]) as i64;
                rem /= plan.shape[d];
                for a in 0..na {
                    offs[a * per + q] += i * plan.access_strides[a][d];
                }
                for k in 0..nr {
                    red_offs[k * per + q] += i * plan.red_strides[k][d];
                }
            }
        }
        // SAFETY: as in `run_items_with`; each row's offsets address that row's elements.
        unsafe { crate::tile::exec_rows::<FMA>(ctx, regs, &offs, &red_offs, per, n, last) };
    }
    if FMA && ctx.stream {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE is part of x86_64.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        };
    }
}

#[inline(always)]
fn run_items_with<const FMA: bool>(ctx: &Ctx<'_>, items: Range<usize>, regs: &mut RegFile) {
    let plan = ctx.plan;
    let r = plan.shape.len();
    let last = plan.shape[r - 1];
    let (tl, block) = (ctx.tile, ctx.block);
    let tiles = last.div_ceil(tl);
    let rows = plan.numel / last;
    let (na, nr) = (ctx.base.len(), ctx.accs.len());
    let (mut row_off, mut row_red) = (vec![0i64; na], vec![0i64; nr]);
    let (mut offs, mut red_offs) = (vec![0i64; na], vec![0i64; nr]);
    let mut cur = usize::MAX;
    let (first, end) = (items.start, items.end);
    for item in items {
        if let Some(copy) = ctx.copy {
            // A plain copy: the items of one (block, tile) are done together by `copy_block`,
            // the first item of the range or of a block's tile standing for the rest in range.
            let (b, w) = (item / (block * tiles), item % (block * tiles));
            let rb = block.min(rows - b * block);
            let k = w % rb;
            if k == 0 || item == first {
                let n = (rb - k).min(end - item);
                copy_block(ctx, copy, b * block + k, n, w / rb);
            }
            continue;
        }
        let (row, t) = if block > 1 {
            // Items in block order: for each block of rows, each tile over the block's rows.
            let (b, w) = (item / (block * tiles), item % (block * tiles));
            let rb = block.min(rows - b * block);
            (b * block + w % rb, w / rb)
        } else {
            (item / tiles, item % tiles)
        };
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
        let j0 = (t * tl) as i64;
        let len = tl.min(last - t * tl);
        for a in 0..na {
            offs[a] = row_off[a] + j0 * ctx.last[a];
        }
        for k in 0..nr {
            red_offs[k] = row_red[k] + j0 * ctx.red_last[k];
        }
        #[cfg(target_arch = "x86_64")]
        if let (true, Some(chain)) = (FMA, ctx.chain) {
            let at = crate::chain::Offs {
                acc: &offs,
                red: &red_offs,
            };
            // SAFETY: `chain` is only set when the CPU has AVX2 and FMA; offsets as below
            // (a reduction's accumulator offset addresses one accumulator per element).
            unsafe { crate::chain::run(ctx, chain, &at, len) };
            continue;
        }
        // SAFETY: offsets come from layouts checked against the buffers' sizes at compile
        // time, and registers from the allocator, which keeps a destination apart from its
        // sources.
        unsafe { exec_tile::<FMA>(ctx, regs, &offs, &red_offs, len) };
    }
    if FMA && ctx.stream {
        // Non-temporal stores are weakly ordered: fence them before the chunk is reported done.
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE is part of x86_64.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        };
    }
}

/// Copies `bytes` bytes to `dst` with 32-byte non-temporal stores for the aligned middle.
///
/// # Safety
/// The CPU has AVX; both ranges are valid and do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
pub(crate) unsafe fn stream_copy(dst: *mut u8, src: *const u8, bytes: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    // SAFETY (whole fn): forwarded from the caller; the aligned part lies inside `dst`.
    unsafe {
        let head = (dst.align_offset(32)).min(bytes);
        std::ptr::copy_nonoverlapping(src, dst, head);
        let body = (bytes - head) & !31;
        let mut i = head;
        while i < head + body {
            let v = _mm256_loadu_si256(src.add(i) as *const __m256i);
            _mm256_stream_si256(dst.add(i) as *mut __m256i, v);
            i += 32;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), bytes - i);
    }
}

/// Copies tile `t` of rows `row0..row0 + n` of a copy group column by column across the rows,
/// so a transposed source is read along its contiguous dim while the destination lines stay
/// in L1.
fn copy_block(ctx: &Ctx<'_>, (a, b, size): (usize, usize, usize), row0: usize, n: usize, t: usize) {
    let plan = ctx.plan;
    let r = plan.shape.len();
    let last = plan.shape[r - 1];
    let j0 = t * ctx.tile;
    let len = ctx.tile.min(last - j0);
    let mut offs = [(0i64, 0i64); BLOCK_ROWS];
    for (k, o) in offs.iter_mut().enumerate().take(n) {
        let (mut oa, mut ob, mut rem) = (plan.offsets[a], plan.offsets[b], row0 + k);
        for d in (0..r - 1).rev() {
            let i = (rem % plan.shape[d]) as i64;
            rem /= plan.shape[d];
            oa += i * plan.access_strides[a][d];
            ob += i * plan.access_strides[b][d];
        }
        *o = (oa + j0 as i64 * ctx.last[a], ob + j0 as i64 * ctx.last[b]);
    }
    let (sa, sb) = (ctx.last[a] as isize, ctx.last[b] as isize);
    let (pa, pb) = (ctx.base[a], ctx.base[b]);
    // Destination rows a multiple of 4 KiB apart share L1 sets, and column by column they
    // would evict each other: then each row is written 16 columns at a time instead.
    let rows_alias = (plan.access_strides[b][r - 2] * size as i64) % 4096 == 0;
    #[inline(always)]
    fn run<T: Copy>(
        pa: *mut u8,
        pb: *mut u8,
        offs: &[(i64, i64)],
        (sa, sb): (isize, isize),
        len: usize,
        rows_alias: bool,
    ) {
        let (pa, pb) = (pa as *const T, pb as *mut T);
        // SAFETY (both loops): the offsets address elements of the group's buffers, as in
        // `run_items`.
        if rows_alias {
            for jb in (0..len).step_by(16) {
                for &(oa, ob) in offs {
                    for j in jb as isize..(jb + 16).min(len) as isize {
                        unsafe {
                            *pb.offset(ob as isize + j * sb) = *pa.offset(oa as isize + j * sa)
                        };
                    }
                }
            }
        } else {
            for j in 0..len as isize {
                for &(oa, ob) in offs {
                    unsafe { *pb.offset(ob as isize + j * sb) = *pa.offset(oa as isize + j * sa) };
                }
            }
        }
    }
    let offs = &offs[..n];
    match size {
        1 => run::<u8>(pa, pb, offs, (sa, sb), len, rows_alias),
        4 => run::<u32>(pa, pb, offs, (sa, sb), len, rows_alias),
        _ => run::<u64>(pa, pb, offs, (sa, sb), len, rows_alias),
    }
}

/// A raw pointer shared by the tasks of one stage (each writes disjoint elements, or only
/// reads).
#[derive(Clone, Copy)]
pub(crate) struct Ptr<T>(pub(crate) *mut T);
// SAFETY: tasks write disjoint elements and only read the inputs; the buffers outlive the
// stage (see `Bufs`).
unsafe impl<T> Sync for Ptr<T> {}
unsafe impl<T> Send for Ptr<T> {}

impl<T> Ptr<T> {
    /// The pointer (a method, so closures capture the `Sync` wrapper, not the raw field).
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}
