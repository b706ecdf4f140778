//! 3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray,
//! "Fast Algorithms for Convolutional Neural Networks", 2015), as cuDNN, oneDNN and
//! NNPACK offer it: each 2 x 2 block of outputs comes from a 4 x 4 input tile with 16
//! products instead of 36, so the sums over the input channels, which are all of a
//! convolution's multiply-adds, shrink 2.25 times at the price of transforms that cost a few
//! additions per element.
//!
//! Per tile `d` (4 x 4, channel `c`) and weight `g` (3 x 3, output channel `k`, channel `c`):
//! `V = Bᵀ d B`, `U = G g Gᵀ`, then for each of the 16 positions `ξ` of a 4 x 4 tile a product
//! `M[ξ] = U[ξ] V[ξ]` over the channels (`[K, C] x [C, tiles]`), and the outputs `Y = Aᵀ M A`.
//! The products run on `conv_comajor::product` (output channels along the lanes, `U` read in
//! place in the `[16][C][K]` order it is transformed into, so a static weight is transformed
//! once and kept, as `prepack::PackedSlot` keeps packed weights).
//!
//! Rounding: the transforms of F(2x2, 3x3) have entries 0, ±1 and ±1/2, so the result differs
//! from the direct sum by a few roundings of sums about as large as the direct one's terms
//! (`tests/conv.rs`'s `winograd_tiles_cover_every_edge` checks it against an f64 reference
//! with the convolution tests' tolerance; ResNet-50 stays within 1e-6 of ONNX Runtime).

use crate::conv::ConvPlan;
use crate::exec::{Bufs, Ptr};
use rayon::prelude::*;

/// `U = G g Gᵀ` for every (input, output) channel pair, laid out `[16][C][K]`.
pub(crate) struct Weights {
    u: Vec<f32>,
}

/// Whether the plan is a 2-D 3x3 convolution with stride 1, no dilation and one group, f32,
/// on a CPU where `conv_comajor` runs, with at least [`MIN_CHANNELS`] channels each side
/// (below that the transforms' passes over memory cost more than the products save) and
/// [`MIN_TILES`] tiles.
/// `THUNDER_CPU_SIMD_WINOGRAD=0` turns it off.
pub(crate) fn applies(p: &ConvPlan) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    p.ty == crate::decode::Ty::F32
        && p.a_shape.len() == 4
        && p.w_shape[2..] == [3, 3]
        && p.geom.stride == [1, 1]
        && p.geom.dilation == [1, 1]
        && p.geom.groups == 1
        && p.a_shape[1] >= MIN_CHANNELS
        && p.w_shape[0] >= MIN_CHANNELS
        && p.out_shape[0] * p.out_shape[2].div_ceil(2) * p.out_shape[3].div_ceil(2) >= MIN_TILES
        && crate::conv_comajor::enabled()
        && crate::switches::on("THUNDER_CPU_SIMD_WINOGRAD", &ON)
}

/// See [`applies`].
const MIN_CHANNELS: usize = 16;
/// Fewest tiles a call: with fewer, the products read the transformed weight (16/9 the
/// size of the direct one) for too few columns to win back its traffic. ResNet-50's 3x3
/// over 512 channels at 7 x 7 (16 tiles at batch 1) ran 1.5x faster warm this way (AMD EPYC
/// Zen 4, `conv_bench`, two threads) but no faster in the whole model, where its 16.8 MB of
/// transformed weight comes from memory on every call.
const MIN_TILES: usize = 32;

/// The weight as a `K x 9C` matrix (its key for a kept transform), when its input channels
/// and kernel elements flatten to one stride.
fn weight_view(p: &ConvPlan, bufs: &Bufs) -> Option<crate::gemm_run::View<f32>> {
    let s = &p.w.1.strides;
    (s[1] == 3 * s[2] && s[2] == 3 * s[3]).then(|| crate::gemm_run::View {
        // SAFETY: the weight's layout addresses its elements (checked at compile time).
        ptr: unsafe { (bufs.ptr(p.w.0) as *const f32).offset(p.w.1.offset as isize) },
        rs: s[0] as isize,
        cs: s[3] as isize,
    })
}

/// Transforms the plan's weight: `U[ξ][c][k]`.
///
/// # Safety
/// The weight's layout addresses `[K, C, 3, 3]` f32 elements of its buffer.
unsafe fn transform_weights(p: &ConvPlan, bufs: &Bufs) -> Weights {
    let (kk, cc) = (p.w_shape[0], p.w_shape[1]);
    let l = &p.w.1;
    let base = bufs.ptr(p.w.0) as *const f32;
    let mut u = vec![0f32; 16 * cc * kk];
    // Output channels innermost: each of the 16 rows written for a channel `c` is one
    // contiguous run of `U`.
    for c in 0..cc {
        for k in 0..kk {
            let mut g = [[0f32; 3]; 3];
            for (a, row) in g.iter_mut().enumerate() {
                for (b, v) in row.iter_mut().enumerate() {
                    let at = l.offset
                        + k as i64 * l.strides[0]
                        + c as i64 * l.strides[1]
                        + a as i64 * l.strides[2]
                        + b as i64 * l.strides[3];
                    // SAFETY: element (k, c, a, b) of the weight (the caller's).
                    *v = unsafe { *base.offset(at as isize) };
                }
            }
            // t = g Gᵀ (3 x 4), then G t (4 x 4).
            let t: [[f32; 4]; 3] = std::array::from_fn(|a| filter_row(g[a]));
            for j in 0..4 {
                let col = filter_row([t[0][j], t[1][j], t[2][j]]);
                for (i, &v) in col.iter().enumerate() {
                    u[((i * 4 + j) * cc + c) * kk + k] = v;
                }
            }
        }
    }
    Weights { u }
}

/// `G x` for a 3-vector: `[x0, (x0 + x1 + x2) / 2, (x0 - x1 + x2) / 2, x2]`.
#[inline(always)]
fn filter_row(x: [f32; 3]) -> [f32; 4] {
    [
        x[0],
        0.5 * (x[0] + x[1] + x[2]),
        0.5 * (x[0] - x[1] + x[2]),
        x[2],
    ]
}

/// Tiles a block aims at: its `V` and `M` (16 values a tile for each input and each output
/// channel) about [`BLOCK_BYTES`].
const BLOCK_BYTES: usize = 1 << 20;
/// Fewest tiles a block of its own on a thread: below that, the products read the whole
/// transformed weight for too few columns, so one block's products split their output
/// channels over the threads instead.
const MIN_BLOCK_TILES: usize = 48;

/// Runs the convolution. `finish(b, channels, s0, cols)` applies the plan's epilogue to
/// batch item `b`'s channels over output positions `s0..s0 + cols`.
///
/// # Safety
/// [`applies`] holds; every layout addresses its elements inside its buffer; the output
/// holds `N * K * Ho * Wo` floats that no one else touches meanwhile.
pub(crate) unsafe fn run(
    p: &ConvPlan,
    bufs: &Bufs,
    kept: Option<&crate::prepack::PackedSlot<Weights>>,
    finish: &(dyn Fn(usize, std::ops::Range<usize>, usize, usize) + Sync),
) {
    let fresh;
    let weights = match (kept, weight_view(p, bufs)) {
        (Some(slot), Some(view)) => {
            let (kk, c9) = (p.w_shape[0], 9 * p.w_shape[1]);
            // SAFETY: the view addresses the K x 9C weight (the caller's).
            unsafe { slot.for_run_with(view, kk, c9, || transform_weights(p, bufs)) }
        }
        _ => None,
    };
    let u: &[f32] = match &weights {
        Some(w) => &w.u,
        None => {
            // SAFETY: forwarded.
            fresh = unsafe { transform_weights(p, bufs) };
            &fresh.u
        }
    };
    let geo = Tiles::of(p);
    let threads = rayon::current_num_threads();
    let per_tile_bytes = 16 * 4 * geo.c.max(geo.k);
    let rows_per_block = (BLOCK_BYTES / (per_tile_bytes * geo.tw)).clamp(1, geo.th);
    let blocks_per_item = geo.th.div_ceil(rows_per_block);
    let blocks = geo.n * blocks_per_item;
    let block = |i: usize| {
        let (b, r) = (i / blocks_per_item, i % blocks_per_item);
        let r0 = r * rows_per_block;
        (b, r0..(r0 + rows_per_block).min(geo.th))
    };
    let x = Ptr(bufs.ptr(p.a.0) as *mut f32);
    let out = Ptr(bufs.ptr(p.out) as *mut f32);
    let u = Ptr(u.as_ptr() as *mut f32);
    let tiles_per_thread = geo.n * geo.th * geo.tw / threads.max(1);
    if threads <= 1 || (blocks >= threads && tiles_per_thread >= MIN_BLOCK_TILES) {
        // Each block on a thread of its own, all output channels.
        let one = |i: usize| {
            let (b, rows) = block(i);
            with_scratch(&geo, rows.len(), |v, m| {
                // SAFETY: forwarded; this block's outputs are its own.
                unsafe {
                    geo.input_block(x, b, rows.clone(), v.as_mut_ptr(), 0..geo.c);
                    geo.products(u, v.as_ptr(), m.as_mut_ptr(), rows.len() * geo.tw, 0..geo.k);
                    geo.output_block(m.as_ptr(), out, b, rows.clone(), 0..geo.k);
                }
                let (s0, s1) = geo.out_rows(&rows);
                finish(b, 0..geo.k, s0, s1 - s0);
            })
        };
        if threads <= 1 {
            (0..blocks).for_each(one);
        } else {
            (0..blocks)
                .into_par_iter()
                .for_each(crate::ftz::carried(one));
        }
        return;
    }
    // Few tiles: one block at a time, its transforms split over the input or output
    // channels and its products over the output channels.
    let parts = threads.min(geo.k.div_ceil(16));
    let part = |n: usize, i: usize| {
        let per = n.div_ceil(16).div_ceil(parts) * 16;
        (i * per).min(n)..((i + 1) * per).min(n)
    };
    for i in 0..blocks {
        let (b, rows) = block(i);
        let cols = rows.len() * geo.tw;
        with_scratch(&geo, rows.len(), |vbuf, mbuf| {
            let (vp, mp) = (Ptr(vbuf.as_mut_ptr()), Ptr(mbuf.as_mut_ptr()));
            (0..parts).into_par_iter().for_each(|t| {
                // SAFETY: each part writes its own input channels of `V`.
                unsafe { geo.input_block(x, b, rows.clone(), vp.get(), part(geo.c, t)) };
            });
            (0..parts).into_par_iter().for_each(|t| {
                let ks = part(geo.k, t);
                if ks.is_empty() {
                    return;
                }
                // SAFETY: each part reads all of `V` and writes its own output channels of
                // `M` and of the output.
                unsafe {
                    geo.products(u, vp.get(), mp.get(), cols, ks.clone());
                    geo.output_block(mp.get(), out, b, rows.clone(), ks.clone());
                }
                let (s0, s1) = geo.out_rows(&rows);
                finish(b, ks, s0, s1 - s0);
            });
        });
    }
}

/// A convolution's tiling: `th x tw` tiles of 2 x 2 outputs per batch item.
struct Tiles {
    n: usize,
    c: usize,
    k: usize,
    h: usize,
    w: usize,
    ho: usize,
    wo: usize,
    ph: usize,
    pw: usize,
    th: usize,
    tw: usize,
    /// The input's strides (elements).
    xs: [i64; 4],
    x_off: i64,
}

impl Tiles {
    fn of(p: &ConvPlan) -> Tiles {
        let (ho, wo) = (p.out_shape[2], p.out_shape[3]);
        let s = &p.a.1.strides;
        Tiles {
            n: p.a_shape[0],
            c: p.a_shape[1],
            k: p.w_shape[0],
            h: p.a_shape[2],
            w: p.a_shape[3],
            ho,
            wo,
            ph: p.geom.padding[0],
            pw: p.geom.padding[1],
            th: ho.div_ceil(2),
            tw: wo.div_ceil(2),
            xs: [s[0], s[1], s[2], s[3]],
            x_off: p.a.1.offset,
        }
    }

    /// Output positions `s0..s1` (flat in the `Ho x Wo` map) of tile rows `rows`.
    fn out_rows(&self, rows: &std::ops::Range<usize>) -> (usize, usize) {
        (
            2 * rows.start * self.wo,
            (2 * rows.end).min(self.ho) * self.wo,
        )
    }

    /// `V[ξ][c][t]` for input channels `chans` and the tiles of rows `rows` of batch item `b`
    /// (`t` counts the block's tiles row by row), into `v` (`16 x C x tiles`; a pointer, as
    /// the threads of one block write their own channels of it).
    ///
    /// Per channel and tile row: the four input rows the tiles read, zero-bordered, split into
    /// their even and odd columns; `Bᵀ d` on those (rows `d0 - d2`, `d1 + d2`, `d2 - d1`,
    /// `d1 - d3`), then `· B` along each tile's columns, which with the even and odd columns
    /// apart is the same four combinations of contiguous runs: every loop a vector loop.
    ///
    /// # Safety
    /// The input's layout addresses its `[N, C, H, W]` elements; `v` holds `16 x C x tiles`
    /// floats whose channels `chans` no one else touches meanwhile; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn input_block(
        &self,
        x: Ptr<f32>,
        b: usize,
        rows: std::ops::Range<usize>,
        v: *mut f32,
        chans: std::ops::Range<usize>,
    ) {
        let (tw, cols) = (self.tw, rows.len() * self.tw);
        // Even and odd columns of a padded row: `2 (tw + 1)` columns, the input's row at
        // columns `pw..pw + W`.
        let n2 = tw + 1;
        let wp = 2 * n2;
        let take = self.w.min(wp - self.pw);
        let mut padded = vec![0f32; wp];
        // Per input row i: its even columns, then its odd ones (`2 n2` floats).
        let mut eo = vec![0f32; 4 * wp];
        let mut r = vec![0f32; wp];
        for c in chans {
            for (ri, ty) in rows.clone().enumerate() {
                for i in 0..4 {
                    let y = (2 * ty + i) as isize - self.ph as isize;
                    let (e, o) = eo[i * wp..(i + 1) * wp].split_at_mut(n2);
                    if y < 0 || y >= self.h as isize {
                        e.fill(0.0);
                        o.fill(0.0);
                        continue;
                    }
                    let at = self.x_off
                        + b as i64 * self.xs[0]
                        + c as i64 * self.xs[1]
                        + y as i64 * self.xs[2];
                    let src = x.get().offset(at as isize);
                    let dst = &mut padded[self.pw..self.pw + take];
                    if self.xs[3] == 1 {
                        // SAFETY: row (b, c, y) of the input, `take <= W` elements.
                        dst.copy_from_slice(unsafe { std::slice::from_raw_parts(src, take) });
                    } else {
                        for (j, slot) in dst.iter_mut().enumerate() {
                            // SAFETY: element (b, c, y, j) of the input.
                            *slot = unsafe { *src.offset(j as isize * self.xs[3] as isize) };
                        }
                    }
                    for ((e, o), pair) in e.iter_mut().zip(o.iter_mut()).zip(padded.chunks_exact(2))
                    {
                        *e = pair[0];
                        *o = pair[1];
                    }
                }
                let row = |i: usize| &eo[i * wp..(i + 1) * wp];
                let d = [row(0), row(1), row(2), row(3)];
                let t0 = ri * tw;
                for (i, &(x, y, sub)) in B_T.iter().enumerate() {
                    combine(&mut r, d[x], d[y], sub);
                    let (e, o) = r.split_at(n2);
                    // A tile's four columns: even, odd, next even, next odd.
                    let cols4 = [&e[..tw], &o[..tw], &e[1..], &o[1..]];
                    for (jx, &(x, y, sub)) in B_T.iter().enumerate() {
                        let at = ((i * 4 + jx) * self.c + c) * cols + t0;
                        // SAFETY: run (ξ, c) of this tile row, inside `v` (the caller's).
                        let dst = unsafe { std::slice::from_raw_parts_mut(v.add(at), tw) };
                        combine(dst, cols4[x], cols4[y], sub);
                    }
                }
            }
        }
    }

    /// `M[ξ][k][t] = Σ_c U[ξ][c][k] V[ξ][c][t]` for output channels `ks`.
    ///
    /// # Safety
    /// `u` holds `16 x C x K` floats, `v` `16 x C x cols`, `m` `16 x K x cols` whose output
    /// channels `ks` no one else touches meanwhile.
    unsafe fn products(
        &self,
        u: Ptr<f32>,
        v: *const f32,
        m: *mut f32,
        cols: usize,
        ks: std::ops::Range<usize>,
    ) {
        for xi in 0..16 {
            // SAFETY: forwarded; `conv_comajor::enabled` holds ([`applies`]).
            unsafe {
                crate::conv_comajor::product(
                    (ks.len(), cols, self.c),
                    v.add(xi * self.c * cols),
                    cols as isize,
                    u.get().add(xi * self.c * self.k + ks.start),
                    self.k as isize,
                    m.add((xi * self.k + ks.start) * cols),
                    cols as isize,
                );
            }
        }
    }

    /// `Y = Aᵀ M A` for output channels `ks` of the tiles of rows `rows` of batch item `b`,
    /// written to the output (`[N, K, Ho, Wo]`, contiguous): `Aᵀ` over each tile's rows
    /// (`m0 + m1 + m2`, `m1 - m2 - m3` for each of its columns), then along its columns, over
    /// the tile row's tiles at once; the two output columns of each tile are interleaved
    /// into the output rows.
    ///
    /// # Safety
    /// `m` holds `16 x K x tiles` floats, output channels `ks` written; the output holds
    /// `N x K x Ho x Wo` floats, these channels' this call's alone; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn output_block(
        &self,
        m: *const f32,
        out: Ptr<f32>,
        b: usize,
        rows: std::ops::Range<usize>,
        ks: std::ops::Range<usize>,
    ) {
        let (tw, cols) = (self.tw, rows.len() * self.tw);
        // `acc[a * 4 + j]`: row `a` of `Aᵀ M`, column `j`, over the tiles.
        let mut acc = vec![0f32; 8 * tw];
        let (mut y0, mut y1) = (vec![0f32; tw], vec![0f32; tw]);
        for k in ks {
            let plane = (b * self.k + k) * self.ho * self.wo;
            for (ri, ty) in rows.clone().enumerate() {
                let t0 = ri * tw;
                // SAFETY: row (ξ, k) of this tile row, inside `m` (the caller's).
                let mrow = |xi: usize| unsafe {
                    std::slice::from_raw_parts(m.add((xi * self.k + k) * cols + t0), tw)
                };
                for j in 0..4 {
                    let (m0, m1, m2, m3) = (mrow(j), mrow(4 + j), mrow(8 + j), mrow(12 + j));
                    let (lo, hi) = acc.split_at_mut(4 * tw);
                    let (r0, r1) = (&mut lo[j * tw..][..tw], &mut hi[j * tw..][..tw]);
                    a_t(r0, r1, [m0, m1, m2, m3]);
                }
                for a in 0..2 {
                    let y = 2 * ty + a;
                    if y >= self.ho {
                        break;
                    }
                    let q = |j: usize| &acc[(a * 4 + j) * tw..][..tw];
                    let (q0, q1, q2, q3) = (q(0), q(1), q(2), q(3));
                    a_t(&mut y0, &mut y1, [q0, q1, q2, q3]);
                    // SAFETY: row y of this output plane.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(out.get().add(plane + y * self.wo), self.wo)
                    };
                    let pairs = self.wo / 2;
                    for ((pair, &a), &b) in dst[..2 * pairs].chunks_exact_mut(2).zip(&y0).zip(&y1) {
                        pair[0] = a;
                        pair[1] = b;
                    }
                    if self.wo % 2 == 1 {
                        dst[self.wo - 1] = y0[pairs];
                    }
                }
            }
        }
    }
}

/// `Bᵀ`'s rows as `x[i] ± x[j]`: `(i, j, subtract)` for `x0 - x2`, `x1 + x2`, `x2 - x1`,
/// `x1 - x3`, applied along the tile's rows and then along its columns.
const B_T: [(usize, usize, bool); 4] = [(0, 2, true), (1, 2, false), (2, 1, true), (1, 3, true)];

/// `dst = a - b` (`sub`) or `a + b`, element by element.
#[inline(always)]
fn combine(dst: &mut [f32], a: &[f32], b: &[f32], sub: bool) {
    for ((d, &a), &b) in dst.iter_mut().zip(a).zip(b) {
        *d = if sub { a - b } else { a + b };
    }
}

/// `Aᵀ x` over runs: `y0 = x0 + x1 + x2`, `y1 = x1 - x2 - x3`, element by element.
#[inline(always)]
fn a_t(y0: &mut [f32], y1: &mut [f32], [x0, x1, x2, x3]: [&[f32]; 4]) {
    for (((y0, y1), (&x0, &x1)), (&x2, &x3)) in y0
        .iter_mut()
        .zip(y1.iter_mut())
        .zip(x0.iter().zip(x1))
        .zip(x2.iter().zip(x3))
    {
        *y0 = x0 + x1 + x2;
        *y1 = x1 - x2 - x3;
    }
}

/// Runs `f` on this thread's kept `V` and `M` buffers for blocks of `rows` tile rows.
fn with_scratch<R>(geo: &Tiles, rows: usize, f: impl FnOnce(&mut [f32], &mut [f32]) -> R) -> R {
    thread_local! {
        static KEPT: std::cell::RefCell<(Vec<f32>, Vec<f32>)> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    let cols = rows * geo.tw;
    let (nv, nm) = (16 * geo.c * cols, 16 * geo.k * cols);
    KEPT.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            let (v, m) = &mut *kept;
            if v.len() < nv {
                v.resize(nv, 0.0);
            }
            if m.len() < nm {
                m.resize(nm, 0.0);
            }
            f(&mut v[..nv], &mut m[..nm])
        }
        Err(_) => f(&mut vec![0.0; nv], &mut vec![0.0; nm]),
    })
}
