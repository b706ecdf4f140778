//! Running `prims.convolution` (see `conv.rs` for the plan): blocked im2col and GEMM, with the
//! epilogue (bias, residual add, ReLU) applied to each output block while it is in cache.
//!
//! The output of one batch item and group is the `[C_out/G, S_out]` product of the group's
//! weights `[C_out/G, C_in/G * K]` and the column matrix `[C_in/G * K, S_out]`. The columns are
//! cut into blocks of whole output rows sized so a block's column matrix stays near the L2
//! cache; each task unrolls its block (or, for a 1x1 stride-1 unpadded convolution, reads the
//! input in place: the column matrix *is* the input), multiplies it with `gemm` on its own
//! thread, and finishes the block. When there are too few blocks to feed the threads (small
//! feature maps at batch 1), one block at a time is unrolled and its product is split over the
//! output channels instead.

use crate::conv::ConvPlan;
use crate::exec::{Bufs, Ptr};
use crate::gemm_run::{Product, View};
use crate::im2col::im2col;
use crate::ops::Real;
#[cfg(target_arch = "x86_64")]
use crate::packed_left::PackedA;
use rayon::prelude::*;

/// Bytes of column matrix a block aims at (about half a core's L2).
const BLOCK_BYTES: usize = 1 << 20;
/// Bytes of one depth block's column panels a block aims at on the packed path
/// (`packed_left.rs`), which packs each depth block's panels in turn rather than a whole
/// column matrix. Against blocks sized by [`BLOCK_BYTES`] over the whole depth, `conv_bench`
/// (static weights, two threads, AMD EPYC Zen 3, alternating in one process) ran ResNet-50's
/// classes at 56 x 56 1.07-1.45x faster by median (the 3x3 over 64 channels 1.45x, the 1x1
/// 64-64 1.21x; 1.04-1.14x by minimum), the smaller maps within noise: a whole 56 x 56 map
/// of 64 channels was one block, its panels 800 KB, past the 512 KB L2, and with one block
/// the threads split its rows and each packed the same panels.
const PANEL_BYTES: usize = 256 << 10;
/// Fewest columns in a block, so each GEMM stays wide enough for its micro-kernel.
const MIN_BLOCK_COLS: usize = 64;

/// What `run_typed` derives once from the plan.
struct Geo {
    c_out: usize,
    s_out: usize,
    groups: usize,
    cg_in: usize,
    cg_out: usize,
    k: usize,
    /// `C_in/G * K`: the reduction length.
    ck: usize,
    /// Output rows (all spatial dims but the last, flattened) and their width.
    rows: usize,
    width: usize,
    /// A 1x1, stride-1, unpadded convolution over a spatially contiguous input: the input's
    /// channel rows are the column matrix.
    direct: bool,
}

impl Geo {
    fn of(p: &ConvPlan) -> Geo {
        let c_out = p.out_shape[1];
        let oshape = &p.out_shape[2..];
        let s_out: usize = oshape.iter().product();
        let groups = p.geom.groups;
        let (cg_in, cg_out) = (p.a_shape[1] / groups, c_out / groups);
        let k: usize = p.w_shape[2..].iter().product();
        let last = oshape.len() - 1;
        let a = &p.a.1;
        // Spatial dims of the input flatten to one unit-stride run.
        let mut expect = 1i64;
        let mut flat = true;
        for d in (2..p.a_shape.len()).rev() {
            flat &= p.a_shape[d] == 1 || a.strides[d] == expect;
            expect *= p.a_shape[d] as i64;
        }
        let direct = flat
            && p.w_shape[2..].iter().all(|&x| x == 1)
            && p.geom.stride.iter().all(|&s| s == 1)
            && p.geom.padding.iter().all(|&x| x == 0);
        Geo {
            c_out,
            s_out,
            groups,
            cg_in,
            cg_out,
            k,
            ck: cg_in * k,
            rows: oshape[..last].iter().product(),
            width: oshape[last],
            direct,
        }
    }

    /// Output rows per column block: its column matrix about [`BLOCK_BYTES`], or on the
    /// packed path (`panel_depth`, the packing's depth block) the panels of one depth block
    /// about [`PANEL_BYTES`].
    fn rows_per_block(&self, size: usize, panel_depth: Option<usize>) -> usize {
        let (bytes, depth) = match panel_depth {
            Some(kc) => (PANEL_BYTES, self.ck.min(kc)),
            _ => (BLOCK_BYTES, self.ck),
        };
        let want = (bytes / (depth.max(1) * size)).max(MIN_BLOCK_COLS);
        (want / self.width.max(1)).clamp(1, self.rows.max(1))
    }

    /// Output rows per block and the number of blocks, for `units` batch items and groups
    /// over `threads`: blocks of [`Geo::rows_per_block`] at most, of equal size, and when
    /// there are fewer than four tasks a thread, as many as make the tasks a multiple of the
    /// threads (while each block keeps a row). ResNet-50's 56 x 56 maps took blocks of 18, 18,
    /// 18 and 2 rows, so at batch 1 one thread ran 36 rows while the other ran 20: its 1x1
    /// convolutions there ran 1.4-1.6x faster on two threads than on one. With fewer tasks
    /// than threads, `run_typed` splits each block over the output channels instead:
    /// splitting the rows of a single block in two ran ResNet-50's 1x1 convolutions with
    /// residuals 30-40% slower.
    fn blocks(
        &self,
        size: usize,
        units: usize,
        threads: usize,
        panel_depth: Option<usize>,
    ) -> (usize, usize) {
        let rows = self.rows.max(1);
        let mut blocks = rows.div_ceil(self.rows_per_block(size, panel_depth));
        let tasks = units * blocks;
        if tasks >= threads && tasks < 4 * threads && !tasks.is_multiple_of(threads) {
            blocks = tasks
                .next_multiple_of(threads)
                .div_ceil(units.max(1))
                .min(rows);
        }
        // A single unrolled block on the packed path: split its rows over the threads rather
        // than its output channels, where each thread would unroll the same columns. The 3x3
        // over 256 channels at 14 x 14 (ResNet-50 b1) ran faster so by minimum in 4 of 4
        // alternating runs (`conv_bench`, static weights, two threads, AMD EPYC Zen 3: 3-10%),
        // by median in 2 of 4; its 1x1s, which read their input in place and whose weights
        // each thread would then read whole, ran 0-10% slower, so they keep the split over
        // channels.
        static SPLIT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if tasks < threads
            && panel_depth.is_some()
            && self.k > 1
            && rows * self.width >= threads * MIN_BLOCK_COLS
            && crate::switches::on("THUNDER_CPU_SIMD_CONV_SPLIT_ROWS", &SPLIT)
        {
            blocks = threads.div_ceil(units.max(1)).min(rows);
        }
        let per_block = rows.div_ceil(blocks);
        (per_block, rows.div_ceil(per_block))
    }
}

pub(crate) fn run_typed<T: Real + Default>(p: &ConvPlan, bufs: &Bufs) {
    let g = Geo::of(p);
    let n = p.out_shape[0];
    let out = Ptr(bufs.ptr(p.out) as *mut T);
    if n * g.c_out * g.s_out == 0 {
        return;
    }
    if g.ck == 0 {
        // No inputs to sum: every output is the epilogue of zero.
        for b in 0..n {
            // SAFETY: the output holds N * C_out * S_out elements.
            unsafe {
                for i in 0..g.c_out * g.s_out {
                    *out.get().add(b * g.c_out * g.s_out + i) = T::default();
                }
                epilogue(p, bufs, &g, out, b, 0..g.c_out, 0, g.s_out);
            }
        }
        return;
    }
    // SAFETY (this block and the calls below): every layout addresses elements inside its
    // buffer (checked when the region was compiled against the buffers' sizes); the output
    // holds N * C_out * S_out elements; tasks write disjoint output blocks.
    #[cfg(target_arch = "x86_64")]
    if crate::winograd::applies(p) {
        // T is f32 (`applies` checks the plan's type).
        let finish = |b: usize, chans: std::ops::Range<usize>, s0: usize, cols: usize| unsafe {
            epilogue(p, bufs, &g, out, b, chans, s0, cols)
        };
        return unsafe { crate::winograd::run(p, bufs, p.winograd.as_deref(), &finish) };
    }
    let (wbuf, wlayout) = &p.w;
    let packed;
    let (weights, w_rs, w_cs): (*const T, isize, isize) = match weight_matrix(p) {
        Some((rs, cs)) => (
            unsafe { (bufs.ptr(*wbuf) as *const T).offset(wlayout.offset as isize) },
            rs,
            cs,
        ),
        None => {
            packed = unsafe { packed_weights::<T>(p, bufs) };
            (packed.as_ptr(), g.ck as isize, 1)
        }
    };
    let weights = Ptr(weights as *mut T);
    // f32 weights with their output channels contiguous: the product with the channels
    // along the lanes (`conv_comajor.rs`), reading them in place.
    #[cfg(target_arch = "x86_64")]
    let co_major = w_rs == 1
        && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && crate::conv_comajor::enabled()
        && (g.direct || (g.k > 1 && g.s_out >= IMPLICIT_MIN_POSITIONS));
    // Otherwise, f32 on AVX2 without AVX-512, a static weight kept packed between runs (from
    // the second run: `prepack::PackedSlot`), against which each column block runs
    // (`packed_left.rs`), on row tiles that the threads split between them. A weight packed
    // per call stays on `matrixmultiply`, which packs it per block into cache: packed whole
    // and then read back, ResNet-50's 3x3 over 512 channels at 7 x 7 (9.4 MB of weight) took
    // 6.4 ms against 3.6 (`conv_bench`, two threads, AMD EPYC Zen 3), though the layers with
    // small weights ran 3-20% faster.
    #[cfg(target_arch = "x86_64")]
    let left = match &p.packed {
        Some(slot) if !co_major && crate::packed_left::applies(p) => {
            let view = View {
                ptr: weights.get() as *const f32,
                rs: w_rs,
                cs: w_cs,
            };
            let kc = crate::packed_left::depth_block(g.k);
            // SAFETY: `view` addresses the C_out x C_in/G * K weight matrix.
            unsafe {
                slot.for_run_with(view, g.c_out, g.ck, || {
                    PackedA::pack(view, (g.groups, g.cg_out, g.ck), kc)
                })
            }
        }
        _ => None,
    };
    #[cfg(target_arch = "x86_64")]
    let tiles: Vec<(usize, usize)> = match &left {
        Some(left) => crate::prepack::row_tiles(left.rows()).collect(),
        None => Vec::new(),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let tiles: Vec<(usize, usize)> = Vec::new();
    let tile_starts: Vec<usize> = tiles.iter().map(|t| t.0).collect();
    // The packed path unrolls each block straight into its panels (`Unrolled`), the others
    // into a column matrix.
    let unroll_to_col = !g.direct && tiles.is_empty();
    let threads = rayon::current_num_threads();
    let panel_depth = (!tiles.is_empty()).then(|| crate::packed_left::depth_block(g.k));
    let (per_block, blocks) =
        g.blocks(std::mem::size_of::<T>(), n * g.groups, threads, panel_depth);
    let tasks = n * g.groups * blocks;
    #[cfg(target_arch = "x86_64")]
    if co_major && !g.direct && implicit_applies(p) {
        // SAFETY: as above; T is f32 (checked with `co_major`).
        return unsafe {
            run_implicit(
                p,
                bufs,
                &g,
                weights.get() as *const f32,
                w_cs,
                per_block,
                blocks,
            )
        };
    }
    // The largest block's column matrix (nothing for the direct path, which reads in place,
    // or the packed one).
    let max_col = if unroll_to_col {
        g.ck * per_block * g.width
    } else {
        0
    };
    let task = |t: usize, col: &mut [T], m_range: std::ops::Range<usize>, par: bool| {
        let (b, rest) = (t / (g.groups * blocks), t % (g.groups * blocks));
        let (gi, blk) = (rest / blocks, rest % blocks);
        let r0 = blk * per_block;
        let r1 = (r0 + per_block).min(g.rows);
        let (s0, cols) = (r0 * g.width, (r1 - r0) * g.width);
        // The column matrix of this block: the input itself, or unrolled into `col`.
        let (rhs, rhs_rs): (Ptr<T>, isize) = if g.direct {
            let a = &p.a.1;
            let off = a.offset + b as i64 * a.strides[0] + (gi * g.cg_in) as i64 * a.strides[1];
            // SAFETY: see above; the direct path's columns are the input's spatial run.
            let base = unsafe { (bufs.ptr(p.a.0) as *const T).offset(off as isize) };
            (
                Ptr(unsafe { base.add(s0) } as *mut T),
                a.strides[1] as isize,
            )
        } else if !unroll_to_col {
            (Ptr(std::ptr::null_mut()), 0)
        } else {
            let col = &mut col[..g.ck * cols];
            if par {
                unroll_parallel(p, bufs, &g, b, gi * g.cg_in, r0, r1, col);
            } else {
                // SAFETY: see above.
                unsafe { im2col(p, bufs, b, gi * g.cg_in, g.cg_in, r0, r1, col) };
            }
            (Ptr(col.as_mut_ptr()), cols as isize)
        };
        let run_rows = |m: std::ops::Range<usize>| {
            let oc0 = gi * g.cg_out + m.start;
            // SAFETY: see above; rows `m` of this block are written by this call only.
            unsafe {
                #[cfg(target_arch = "x86_64")]
                if let Some(left) = &left {
                    // The tiles from row `m.start` (`split_rows` cuts between tiles) of this
                    // group; T is f32 (`packed_left::applies`).
                    let (from, to) = (
                        tiles.partition_point(|t| t.0 < m.start),
                        tiles.partition_point(|t| t.0 < m.end),
                    );
                    let (tiles, ld) = (&tiles[from..to], g.s_out as isize);
                    let group_out =
                        out.get().add((b * g.c_out + gi * g.cg_out) * g.s_out + s0) as *mut f32;
                    let finish = tile_finish(p, bufs, b, gi * g.cg_out, s0);
                    if g.direct {
                        let input = View {
                            ptr: rhs.get() as *const f32,
                            rs: rhs_rs,
                            cs: 1,
                        };
                        crate::packed_left::gemm(
                            left,
                            gi,
                            tiles,
                            cols,
                            &input,
                            group_out,
                            ld,
                            finish.as_ref(),
                        );
                    } else {
                        let unrolled = Unrolled {
                            p,
                            bufs,
                            b,
                            c0: gi * g.cg_in,
                            rows: r0..r1,
                            taps: g.k,
                        };
                        crate::packed_left::gemm(
                            left,
                            gi,
                            tiles,
                            cols,
                            &unrolled,
                            group_out,
                            ld,
                            finish.as_ref(),
                        );
                    }
                    if finish.is_none() {
                        epilogue(p, bufs, &g, out, b, oc0..oc0 + m.len(), s0, cols);
                    }
                    return;
                }
                let dst = out.get().add((b * g.c_out + oc0) * g.s_out + s0);
                #[cfg(target_arch = "x86_64")]
                if co_major {
                    // T is f32 (checked with `co_major`).
                    crate::conv_comajor::product(
                        (m.len(), cols, g.ck),
                        rhs.get() as *const f32,
                        rhs_rs,
                        weights.get().offset(oc0 as isize * w_rs) as *const f32,
                        w_cs,
                        dst as *mut f32,
                        g.s_out as isize,
                    );
                    epilogue(p, bufs, &g, out, b, oc0..oc0 + m.len(), s0, cols);
                    return;
                }
                // A single-threaded panel as the GEMM stages run theirs, on the kernel
                // `gemm_run` picks (on AVX2, `matrixmultiply`'s for f32 with every side >= 64:
                // `sgemm_avx2.rs`), but never the few-row streaming kernel, which convolutions
                // have not been measured on.
                Product {
                    m: m.len(),
                    n: cols,
                    k: g.ck,
                    a: View {
                        ptr: weights.get().offset(oc0 as isize * w_rs) as *const T,
                        rs: w_rs,
                        cs: w_cs,
                    },
                    b: View {
                        ptr: rhs.get() as *const T,
                        rs: rhs_rs,
                        cs: 1,
                    },
                    dst,
                    ld: g.s_out as isize,
                    read_dst: false,
                    packed: None,
                }
                .run_serial_in(false);
                epilogue(p, bufs, &g, out, b, oc0..oc0 + m.len(), s0, cols);
            }
        };
        if par {
            split_rows(m_range, threads, &tile_starts, run_rows);
        } else {
            run_rows(m_range);
        }
    };
    match spread(&g, n, tasks, threads) {
        Spread::Serial => with_col(max_col, |col| {
            (0..tasks).for_each(|t| task(t, col, 0..g.cg_out, false))
        }),
        Spread::Tasks => (0..tasks)
            .into_par_iter()
            .for_each(crate::ftz::carried(|t| {
                with_col(max_col, |col| task(t, col, 0..g.cg_out, false))
            })),
        Spread::Channels => with_col(max_col, |col| {
            (0..tasks).for_each(|t| task(t, col, 0..g.cg_out, true))
        }),
    }
}

/// How a convolution's tasks (batch item, group, block of output rows) share the threads.
enum Spread {
    /// All on the calling thread: one thread, or too little work to share.
    Serial,
    /// Each task on a thread of its own: enough tasks, or a multiple of the threads.
    Tasks,
    /// One task after another, each split over its output channels ([`split_channels`]).
    Channels,
}

fn spread(g: &Geo, n: usize, tasks: usize, threads: usize) -> Spread {
    let macs = g.cg_out * g.s_out * g.ck * n * g.groups;
    if threads <= 1 || macs < (1 << 22) {
        Spread::Serial
    } else if tasks >= 2 * threads || tasks.is_multiple_of(threads) {
        Spread::Tasks
    } else {
        Spread::Channels
    }
}

/// Runs `run_rows` over the output channels `m_range` in chunks over the threads: multiples of
/// 16 channels (the micro-kernels' height or width on AVX-512), or, with `tile_starts` (the
/// first rows of `packed_left`'s row tiles), runs of whole tiles, one per thread (each chunk
/// packs the block's columns for itself).
fn split_rows(
    m_range: std::ops::Range<usize>,
    threads: usize,
    tile_starts: &[usize],
    run_rows: impl Fn(std::ops::Range<usize>) + Sync,
) {
    let mut starts: Vec<usize> = if tile_starts.is_empty() {
        let chunks = (threads * 2).min(m_range.len().div_ceil(16)).max(1);
        let step = m_range.len().div_ceil(chunks).next_multiple_of(16);
        m_range.clone().step_by(step).collect()
    } else {
        let inside: Vec<usize> = tile_starts
            .iter()
            .copied()
            .filter(|s| m_range.contains(s))
            .collect();
        let per_chunk = inside.len().div_ceil(threads.max(1)).max(1);
        inside.into_iter().step_by(per_chunk).collect()
    };
    starts.push(m_range.end);
    let ranges: Vec<std::ops::Range<usize>> = starts.windows(2).map(|w| w[0]..w[1]).collect();
    ranges
        .into_par_iter()
        .for_each(crate::ftz::carried(&run_rows));
}

/// Fewest output positions a convolution with output-channel-contiguous weights and a kernel
/// of more than one element needs to run on `conv_comajor` (below it, the crate): in
/// ResNet-50 b1 (2 threads, AMD EPYC Zen 5) its 3x3s at 56 x 56 and 28 x 28 ran 0.87-0.90x
/// the crate's time there, at 14 x 14 (196 positions) 1.03x, at 7 x 7 1.18-1.21x.
#[cfg(target_arch = "x86_64")]
const IMPLICIT_MIN_POSITIONS: usize = 400;

/// Whether a convolution that `conv_comajor` takes with a kernel wider than one element
/// (so already with enough output positions) reads its columns in place from a
/// zero-bordered copy of its input: when it is 2-D (`THUNDER_CPU_SIMD_CONV_IMPLICIT=0` keeps
/// the column matrix).
#[cfg(target_arch = "x86_64")]
fn implicit_applies(p: &ConvPlan) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    p.a_shape.len() == 4 && crate::switches::on("THUNDER_CPU_SIMD_CONV_IMPLICIT", &ON)
}

/// The convolution on `conv_comajor`'s implicit product: the input copied once into a
/// zero-bordered `[N, C_in, H + 2 p_h, W + 2 p_w]` buffer, then each task (batch item, group
/// and block of output rows) multiplies its positions against the weights read in place
/// (`w`, output channels contiguous, depth rows `w_cs` apart), split over the output channels
/// when there are too few tasks for the threads, as `run_typed` does.
///
/// # Safety
/// As for `run_typed`; the CPU has AVX-512F (`conv_comajor::enabled`).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn run_implicit(
    p: &ConvPlan,
    bufs: &Bufs,
    g: &Geo,
    w: *const f32,
    w_cs: isize,
    per_block: usize,
    blocks: usize,
) {
    use crate::conv_comajor::{product_implicit, Implicit};
    let n = p.out_shape[0];
    let (c_in, h, wd) = (p.a_shape[1], p.a_shape[2], p.a_shape[3]);
    let (ph, pw) = (p.geom.padding[0], p.geom.padding[1]);
    let (hp, wp) = (h + 2 * ph, wd + 2 * pw);
    let plane = hp * wp;
    let (kh, kw) = (p.w_shape[2], p.w_shape[3]);
    let (dh, dw) = (p.geom.dilation[0] as isize, p.geom.dilation[1] as isize);
    let (sh, sw) = (p.geom.stride[0] as isize, p.geom.stride[1] as isize);
    // Column `ci * K + i * kw + j` of the weight matrix reads channel `ci`, kernel row `i`,
    // column `j`.
    let off: Vec<isize> = (0..g.ck)
        .map(|q| {
            let (ci, kk) = (q / g.k, q % g.k);
            (ci * plane) as isize + (kk / kw) as isize * dh * wp as isize + (kk % kw) as isize * dw
        })
        .collect();
    debug_assert_eq!(g.k, kh * kw);
    let out = Ptr(bufs.ptr(p.out) as *mut f32);
    let w = Ptr(w as *mut f32);
    with_padded(n * c_in * plane, |padded| {
        // SAFETY: the input's layout addresses N x C_in x H x W elements.
        unsafe { pad_input(p, bufs, (hp, wp), padded) };
        let padded = Ptr(padded.as_mut_ptr());
        let threads = rayon::current_num_threads();
        let tasks = n * g.groups * blocks;
        let task = |t: usize, m_range: std::ops::Range<usize>, par: bool| {
            let (b, rest) = (t / (g.groups * blocks), t % (g.groups * blocks));
            let (gi, blk) = (rest / blocks, rest % blocks);
            let r0 = blk * per_block;
            let r1 = (r0 + per_block).min(g.rows);
            let (s0, cols) = (r0 * g.width, (r1 - r0) * g.width);
            let pos: Vec<isize> = (s0..s0 + cols)
                .map(|s| (s / g.width) as isize * sh * wp as isize + (s % g.width) as isize * sw)
                .collect();
            // SAFETY: this batch item's and group's channels of the padded input.
            let x = Ptr(unsafe { padded.get().add((b * c_in + gi * g.cg_in) * plane) });
            let run_rows = |m: std::ops::Range<usize>| {
                let oc0 = gi * g.cg_out + m.start;
                // SAFETY: as for `run_typed`; rows `m` of this block are this call's alone,
                // and every position's window lies inside the padded planes.
                unsafe {
                    let dst = out.get().add((b * g.c_out + oc0) * g.s_out + s0);
                    product_implicit(
                        m.len(),
                        Implicit {
                            x: x.get(),
                            pos: &pos,
                            off: &off,
                            runs: false,
                        },
                        w.get().add(oc0),
                        w_cs,
                        dst,
                        g.s_out as isize,
                    );
                    epilogue(p, bufs, g, out, b, oc0..oc0 + m.len(), s0, cols);
                }
            };
            if par {
                split_rows(m_range, threads, &[], run_rows);
            } else {
                run_rows(m_range);
            }
        };
        match spread(g, n, tasks, threads) {
            Spread::Serial => (0..tasks).for_each(|t| task(t, 0..g.cg_out, false)),
            Spread::Tasks => (0..tasks)
                .into_par_iter()
                .for_each(crate::ftz::carried(|t| task(t, 0..g.cg_out, false))),
            Spread::Channels => (0..tasks).for_each(|t| task(t, 0..g.cg_out, true)),
        }
    });
}

/// Copies the input (`[N, C_in, H, W]`, any strides) into `dst` as contiguous planes of
/// `hp x wp` with the padding zeroed. Inputs whose rows are contiguous are copied a plane at a
/// time, the planes split over the threads: `prims.pad`'s general copy (`movement::pad`)
/// found each row's source through a division per dimension, and on a 3x3 convolution over
/// 256 channels at 14 x 14 (16-float rows) that was 7% of the convolution's samples (AMD
/// EPYC Zen 4, `conv_bench`, two threads). Other inputs take that general copy.
///
/// # Safety
/// As for `run_typed`; `dst` holds `N * C_in * hp * wp` floats.
#[cfg(target_arch = "x86_64")]
unsafe fn pad_input(p: &ConvPlan, bufs: &Bufs, (hp, wp): (usize, usize), dst: &mut [f32]) {
    let (ph, pw) = (p.geom.padding[0], p.geom.padding[1]);
    let (c, h, w) = (p.a_shape[1], p.a_shape[2], p.a_shape[3]);
    let a = &p.a.1;
    if a.strides[3] != 1 {
        let view = crate::movement::PadShape {
            src: a,
            in_shape: &p.a_shape,
            out_shape: &[p.a_shape[0], c, hp, wp],
            config: &[
                (0, 0, 0),
                (0, 0, 0),
                (ph as i64, ph as i64, 0),
                (pw as i64, pw as i64, 0),
            ],
        };
        // SAFETY: the input's layout addresses N x C_in x H x W elements of its buffer,
        // `dst` holds the padded shape and is this call's own buffer.
        unsafe {
            crate::movement::pad::<f32>(
                &view,
                bufs.ptr(p.a.0),
                dst.as_mut_ptr() as *mut u8,
                Some(0.0),
            )
        };
        return;
    }
    let src = Ptr(bufs.ptr(p.a.0) as *mut f32);
    let plane = hp * wp;
    let fill = |i: usize, out: &mut [f32]| {
        let (b, ci) = (i / c, i % c);
        let at = a.offset + b as i64 * a.strides[0] + ci as i64 * a.strides[1];
        out[..ph * wp].fill(0.0);
        out[(ph + h) * wp..].fill(0.0);
        for y in 0..h {
            let row = &mut out[(ph + y) * wp..(ph + y + 1) * wp];
            row[..pw].fill(0.0);
            row[pw + w..].fill(0.0);
            // SAFETY: row `y` of plane `(b, ci)` is inside the input's layout (the caller's
            // contract), `w` contiguous floats.
            let from = unsafe {
                std::slice::from_raw_parts(
                    src.get().offset((at + y as i64 * a.strides[2]) as isize),
                    w,
                )
            };
            row[pw..pw + w].copy_from_slice(from);
        }
    };
    if dst.len() >= PAD_PAR_FLOATS && rayon::current_num_threads() > 1 {
        dst.par_chunks_mut(plane)
            .enumerate()
            .for_each(|(i, out)| fill(i, out));
    } else {
        dst.chunks_mut(plane)
            .enumerate()
            .for_each(|(i, out)| fill(i, out));
    }
}

/// Padded inputs at least this large are copied on every thread.
#[cfg(target_arch = "x86_64")]
const PAD_PAR_FLOATS: usize = 1 << 15;

/// Runs `f` on this thread's kept buffer of `n` floats for a padded input or for [`Unrolled`]'s
/// channel (grown when too small; `pad_input` and im2col write every element before it is
/// read), or a fresh one while it is in use.
#[cfg(target_arch = "x86_64")]
fn with_padded<R>(n: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    thread_local! {
        static PADDED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    PADDED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            if kept.len() < n {
                kept.resize(n, 0.0);
            }
            f(&mut kept[..n])
        }
        Err(_) => f(&mut vec![0.0; n]),
    })
}

/// A block's column matrix (batch item `b`, the group's input channels from `c0`, output
/// rows `rows`) unrolled straight into `packed_left`'s panels, one input channel at a time
/// through a small buffer (`taps` rows of the block's columns: 14 KB for a 3x3 kernel over
/// seven rows of 56), instead of into a whole row-major matrix that is then packed again.
#[cfg(target_arch = "x86_64")]
struct Unrolled<'a> {
    p: &'a ConvPlan,
    bufs: &'a Bufs,
    b: usize,
    c0: usize,
    rows: std::ops::Range<usize>,
    taps: usize,
}

#[cfg(target_arch = "x86_64")]
impl crate::packed_left::Columns for Unrolled<'_> {
    unsafe fn pack(&self, p0: usize, kc: usize, n: usize, out: &mut [f32]) {
        let taps = self.taps.max(1);
        with_padded(taps * n, |channel| {
            for c in p0 / taps..(p0 + kc).div_ceil(taps) {
                // SAFETY: as for `run_typed`; `channel` holds taps x n floats.
                unsafe {
                    im2col(
                        self.p,
                        self.bufs,
                        self.b,
                        self.c0 + c,
                        1,
                        self.rows.start,
                        self.rows.end,
                        channel,
                    )
                };
                for (tap, row) in channel.chunks_exact(n).enumerate() {
                    let q = c * taps + tap;
                    if (p0..p0 + kc).contains(&q) {
                        crate::packed_left::scatter_row(row, q - p0, kc, out);
                    }
                }
            }
        })
    }
}

/// Runs `f` on a column buffer of `n` elements: this thread's kept buffer (grown when too
/// small, never cleared: im2col writes every element it hands on) or, while that one is in
/// use, a fresh one. A buffer made per convolution cost a zero-fill (and fresh pages) of up to
/// a megabyte per block on every call.
fn with_col<T: Real + Default, R>(n: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    thread_local! {
        static COL: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let words = (n * std::mem::size_of::<T>()).div_ceil(8);
    COL.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            if kept.len() < words {
                kept.resize(words, 0.0);
            }
            // SAFETY: the buffer holds at least `n * size_of::<T>()` initialised bytes,
            // aligned for f64 (at least T's alignment, T being f32 or f64), and every bit
            // pattern is a valid T.
            let col = unsafe { std::slice::from_raw_parts_mut(kept.as_mut_ptr() as *mut T, n) };
            f(col)
        }
        Err(_) => f(&mut vec![T::default(); n]),
    })
}

/// Unrolls a block with its channels split over the threads (each chunk of channels fills
/// its own rows of `col`).
#[allow(clippy::too_many_arguments)]
fn unroll_parallel<T: Real + Default>(
    p: &ConvPlan,
    bufs: &Bufs,
    g: &Geo,
    b: usize,
    c0: usize,
    r0: usize,
    r1: usize,
    col: &mut [T],
) {
    let per_channel = g.k * (r1 - r0) * g.width;
    let chunk = g.cg_in.div_ceil(rayon::current_num_threads() * 2).max(1);
    col.par_chunks_mut(chunk * per_channel.max(1))
        .enumerate()
        .for_each(|(i, part)| {
            let channels = part.len() / per_channel.max(1);
            // SAFETY: as for `run_typed`; `part` holds exactly these channels' rows.
            unsafe { im2col(p, bufs, b, c0 + i * chunk, channels, r0, r1, part) };
        });
}

/// Adds the bias and the residual and applies the ReLU, as the plan's epilogue says, to
/// output channels `chans` of batch item `b`, columns `s0..s0 + cols`.
///
/// # Safety
/// As for `run_typed`; the caller owns these output elements.
#[allow(clippy::too_many_arguments)]
unsafe fn epilogue<T: Real + Default>(
    p: &ConvPlan,
    bufs: &Bufs,
    g: &Geo,
    out: Ptr<T>,
    b: usize,
    chans: std::ops::Range<usize>,
    s0: usize,
    cols: usize,
) {
    let epi = &p.epilogue;
    if p.bias.is_none() && epi.residual.is_none() && !epi.relu {
        return;
    }
    let spatial = &p.out_shape[2..];
    for c in chans {
        let row =
            std::slice::from_raw_parts_mut(out.get().add((b * g.c_out + c) * g.s_out + s0), cols);
        let bias = p.bias.as_ref().map(|(buf, layout)| {
            *(bufs.ptr(*buf) as *const T)
                .offset((layout.offset + c as i64 * layout.strides[0]) as isize)
        });
        let residual = epi.residual.as_ref().map(|(buf, layout)| {
            let base = (bufs.ptr(*buf) as *const T).offset(
                (layout.offset + b as i64 * layout.strides[0] + c as i64 * layout.strides[1])
                    as isize,
            );
            (base, layout)
        });
        match residual {
            // The common case (bias, an unstrided residual, ReLU) in one vectorised pass.
            None => fused_dispatch(row, bias, None, epi.relu),
            Some((base, _)) if epi.residual_flat => {
                let src = std::slice::from_raw_parts(base.add(s0), cols);
                fused_dispatch(row, bias, Some(src), epi.relu)
            }
            Some((base, layout)) => {
                fused_dispatch(row, bias, None, false);
                for (j, x) in row.iter_mut().enumerate() {
                    let (mut rem, mut off) = (s0 + j, 0i64);
                    for d in (0..spatial.len()).rev() {
                        off += (rem % spatial[d]) as i64 * layout.strides[d + 2];
                        rem /= spatial[d];
                    }
                    *x = *x + *base.offset(off as isize);
                }
                fused_dispatch(row, None, None, epi.relu)
            }
        }
    }
}

/// The plan's epilogue (bias, residual, ReLU) as the packed path's tiles apply it in their
/// stores (`prepack::Finish`), for output channels from `c0` of batch item `b`, columns
/// from `s0`: whenever there is one and its residual, if any, has its spatial dims in one
/// unit-stride run. A second pass over each output block, after its product, read it back
/// from L2 or memory: ResNet-50's 1x1 convolutions at 56 x 56 write 800 KB blocks.
/// `THUNDER_CPU_SIMD_CONV_FUSED=0` keeps that pass, for A/B runs.
///
/// # Safety
/// As for `run_typed`; T is f32.
#[cfg(target_arch = "x86_64")]
unsafe fn tile_finish(
    p: &ConvPlan,
    bufs: &Bufs,
    b: usize,
    c0: usize,
    s0: usize,
) -> Option<crate::prepack::Finish> {
    let epi = &p.epilogue;
    let any = p.bias.is_some() || epi.residual.is_some() || epi.relu;
    if !any || (epi.residual.is_some() && !epi.residual_flat) || !fuse_epilogue() {
        return None;
    }
    let (bias, bias_step) = match &p.bias {
        Some((buf, layout)) => (
            // SAFETY: channel c0 of the bias (the caller's).
            unsafe {
                (bufs.ptr(*buf) as *const f32)
                    .offset((layout.offset + c0 as i64 * layout.strides[0]) as isize)
            },
            layout.strides[0] as isize,
        ),
        None => (std::ptr::null(), 0),
    };
    let (res, res_ld) = match &epi.residual {
        Some((buf, layout)) => (
            // SAFETY: element (b, c0, s0) of the residual, of the output's shape.
            unsafe {
                (bufs.ptr(*buf) as *const f32).offset(
                    (layout.offset + b as i64 * layout.strides[0] + c0 as i64 * layout.strides[1])
                        as isize
                        + s0 as isize,
                )
            },
            layout.strides[1] as isize,
        ),
        None => (std::ptr::null(), 0),
    };
    Some(crate::prepack::Finish {
        bias,
        bias_step,
        res,
        res_ld,
        relu: epi.relu,
    })
}

/// Whether the packed path finishes its tiles with the epilogue (see [`tile_finish`]).
#[cfg(target_arch = "x86_64")]
fn fuse_epilogue() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    crate::switches::on("THUNDER_CPU_SIMD_CONV_FUSED", &ON)
}

/// `row = relu?((row + bias?) + residual?)`, in that order (so results match the separate
/// ops bit for bit), compiled for AVX-512 where the CPU has it.
fn fused_dispatch<T: Real>(row: &mut [T], bias: Option<T>, res: Option<&[T]>, relu: bool) {
    #[cfg(target_arch = "x86_64")]
    if crate::exec::isa_level() >= 2 {
        // SAFETY: the level says the CPU has these features.
        return unsafe { fused_avx512(row, bias, res, relu) };
    }
    fused(row, bias, res, relu)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn fused_avx512<T: Real>(row: &mut [T], bias: Option<T>, res: Option<&[T]>, relu: bool) {
    fused(row, bias, res, relu)
}

#[inline(always)]
fn fused<T: Real>(row: &mut [T], bias: Option<T>, res: Option<&[T]>, relu: bool) {
    match (bias, res, relu) {
        (Some(v), Some(r), true) => pass::<T, true, true, true>(row, v, r),
        (Some(v), Some(r), false) => pass::<T, true, true, false>(row, v, r),
        (Some(v), None, true) => pass::<T, true, false, true>(row, v, &[]),
        (Some(v), None, false) => pass::<T, true, false, false>(row, v, &[]),
        (None, Some(r), true) => pass::<T, false, true, true>(row, T::from_f64(0.0), r),
        (None, Some(r), false) => pass::<T, false, true, false>(row, T::from_f64(0.0), r),
        (None, None, true) => pass::<T, false, false, true>(row, T::from_f64(0.0), &[]),
        (None, None, false) => {}
    }
}

#[inline(always)]
fn pass<T: Real, const BIAS: bool, const RES: bool, const RELU: bool>(
    row: &mut [T],
    bias: T,
    res: &[T],
) {
    let step = |x: T, r: T| {
        let mut y = x;
        if BIAS {
            y = y + bias;
        }
        if RES {
            y = y + r;
        }
        // `prims.maximum(x, 0.0)`: NaN stays NaN, -0.0 and negatives become +0.0.
        if RELU && y <= T::from_f64(0.0) {
            T::from_f64(0.0)
        } else {
            y
        }
    };
    if RES {
        row.iter_mut().zip(res).for_each(|(x, &r)| *x = step(*x, r));
    } else {
        row.iter_mut().for_each(|x| *x = step(*x, *x));
    }
}

/// The row and column strides of the weights read as the `[C_out, C_in/G * K]` matrix the
/// GEMM takes, when their layout is one: row-major (`[C_out, C_in/G, *K]` as stored by
/// PyTorch and ONNX) or with `(C_in/G, *K)` as one run of any stride, such as weights stored
/// `[C_in, *K, C_out]` and transposed back (TensorFlow-style layouts). Anything else is
/// packed on every call.
fn weight_matrix(p: &ConvPlan) -> Option<(isize, isize)> {
    let (shape, strides) = (&p.w_shape, &p.w.1.strides);
    // Walking out from the innermost non-unit dim, each must step over the ones inside it.
    let outward = || (1..shape.len()).rev().filter(|&d| shape[d] != 1);
    let inner = outward().next().map_or(1, |d| strides[d]);
    let mut expect = inner;
    for d in outward() {
        if strides[d] != expect {
            return None;
        }
        expect *= shape[d] as i64;
    }
    Some((strides[0] as isize, inner as isize))
}

/// The weights as a contiguous `[C_out, C_in/G * K]` matrix.
///
/// # Safety
/// As for `run_typed`.
unsafe fn packed_weights<T: Real + Default>(p: &ConvPlan, bufs: &Bufs) -> Vec<T> {
    let (buf, layout) = &p.w;
    let base = bufs.ptr(*buf) as *const T;
    let total: usize = p.w_shape.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut index = vec![0usize; p.w_shape.len()];
    for _ in 0..total {
        let off: i64 = layout.offset
            + index
                .iter()
                .zip(&layout.strides)
                .map(|(&i, &s)| i as i64 * s)
                .sum::<i64>();
        out.push(*base.offset(off as isize));
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < p.w_shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}
