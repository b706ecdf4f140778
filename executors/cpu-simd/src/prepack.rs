//! Products against a static weight (ABI 1.2's `compile_static`: the same buffer with the same
//! values on every run, an inference session's weights) keep that weight packed between runs,
//! on AVX2 CPUs without AVX-512, where f32 products otherwise run on `matrixmultiply`, which
//! packs both operands on every call.
//!
//! Packing the right operand is a pass over all of it per call: with few rows (GPT-2 over 128
//! tokens, each weight read once per call) it was 16-19% of a call's time in `perf` (AMD EPYC
//! Zen 3, `onnx_bench` GPT-2 b1 and a lone 128 x 768 x 3072 product). ONNX Runtime does the
//! same for constant weights (MLAS's pre-packed B). Kept packed, one thread, alternating in one
//! process: 128 x 768 x 3072 at 69-81 GFLOP/s against `matrixmultiply`'s 54-70, 128 x 768 x
//! 16384 73-78 against 49-53, 1024 x 768 x 3072 72-81 against 65-77.
//!
//! The kernel is the BLIS layout of our own AVX2 kernel before the twentieth session (see
//! `sgemm_avx2.rs`): the left operand packed per call into panels of [`MR`] rows, the weight
//! once into panels of [`NR`] columns per [`KC`] of depth, a 6 x 16 register tile. Sums over
//! the depth run in order, one fused multiply-add per step, blocks of [`KC`] added into the
//! output: results differ from `matrixmultiply`'s by rounding only.

use crate::gemm_run::View;
use crate::stages::GemmPlan;
use std::sync::{Arc, Mutex, PoisonError};

/// Rows of the register tile (the left panel's width).
pub(crate) const MR: usize = 6;
/// Columns of the register tile, two vectors; also the packed weight's panel width.
pub(crate) const NR: usize = 16;
/// Depth per block: a weight panel (`KC x NR`, 16 KB) stays in L1 while the row tiles pass.
pub(crate) const KC: usize = 256;
/// Rows per block at most: the packed left block (`MC x KC`, 192 KB) stays in L2. Blocks are
/// balanced (128 rows are one block of 128, not 120 and 8, which would stream the weight twice).
pub(crate) const MC: usize = 192;

/// Products of at most this many rows keep their weight packed: packing it per call is a
/// large share of their work. `prepack_bench` (two threads, alternating in one process, AMD EPYC
/// Zen 3), kept packing over packing per call, per round: 128 x 768 x 3072 1.09-1.98,
/// 128 x 768 x 50257 1.18-1.24, 128 x 3072 x 768 1.00-1.05. Per product: an unfolded batch
/// packs per product too.
const MAX_ROWS: usize = 512;

/// Products of up to [`MAX_ROWS_WIDE`] rows keep their weight packed too when both its sides
/// are at least [`WIDE`]. GPT-2 b8 (1024 rows, every weight at least 768 x 768) ran faster so
/// in 3 of 3 alternating `onnx_bench` rounds (2067 against 2237 ms, 2324 / 2405, 2214 / 2276)
/// with the thirtieth session's kernel; MiniLM b8 (1024 rows, weights 384 wide) won 2 of 4
/// and lost one by 30%, and in `prepack_bench` 1024 x 1536 x 384 stayed level with
/// `matrixmultiply` (0.93-1.10 a round), so narrow weights of many rows stay there.
const MAX_ROWS_WIDE: usize = 1024;
const WIDE: usize = 768;

/// Whether products against static weights keep them packed: f32 products on AVX2 without
/// AVX-512 (`sgemm_avx2`'s CPUs); `THUNDER_CPU_SIMD_PREPACK=0` turns it off, for A/B runs.
pub(crate) fn enabled() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        crate::sgemm_avx2::enabled() && crate::switches::once("THUNDER_CPU_SIMD_PREPACK", &ON)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether `g`, whose right operand is a static input, runs on a kept packed weight: an f32
/// product with every side at least 64 (those `sgemm_avx2` takes), whose weight is the same
/// for every batch, with at most [`MAX_ROWS`] rows, or [`MAX_ROWS_WIDE`] against a weight at
/// least [`WIDE`] on both sides. (A bias epilogue runs on the output as after any product.)
pub(crate) fn applies(g: &GemmPlan) -> bool {
    let r = g.batch.len() + 2;
    enabled()
        && g.ty == crate::decode::Ty::F32
        && !g.accumulate
        && g.m.min(g.n).min(g.k) >= 64
        && (g.m <= MAX_ROWS || (g.m <= MAX_ROWS_WIDE && g.k.min(g.n) >= WIDE))
        && g.batch
            .iter()
            .zip(&g.b.1.strides[..r - 2])
            .all(|(&size, &stride)| size == 1 || stride == 0)
}

/// A weight packed for [`gemm`]: for each block of [`KC`] depth steps from `p0`, the panels of
/// [`NR`] columns side by side (`p0 * npad` floats in), each `kc x NR` (columns past `n` zero).
pub(crate) struct PackedB {
    data: Vec<f32>,
    npad: usize,
}

/// What identifies the weight a packing was made from: its view and a sample of its values.
/// The host promises the same buffer and values on every run (ABI 1.2); the sample is a cheap
/// check that catches a caller who breaks the promise by rewriting the weight wholesale.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Key {
    ptr: usize,
    rs: isize,
    cs: isize,
    k: usize,
    n: usize,
    sample: u64,
}

/// Elements of the weight read for [`Key::sample`]: each is a likely cache miss on a weight
/// of megabytes, so a few (about a microsecond a product).
const SAMPLES: usize = 16;

impl Key {
    /// # Safety
    /// `b` addresses `k x n` readable elements.
    unsafe fn of(b: View<f32>, k: usize, n: usize) -> Key {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for s in 0..SAMPLES {
            // Spread over the rows and the columns (a prime step through the columns).
            let p = s * k / SAMPLES;
            let j = (s * 7919) % n;
            // SAFETY: p < k, j < n.
            let bits = unsafe { *b.ptr.offset(p as isize * b.rs + j as isize * b.cs) }.to_bits();
            h = (h ^ u64::from(bits)).wrapping_mul(0x0100_0000_01b3);
        }
        Key {
            ptr: b.ptr as usize,
            rs: b.rs,
            cs: b.cs,
            k,
            n,
            sample: h,
        }
    }
}

/// A stage's kept packing of a static operand (`P`: a product's weight, [`PackedB`], or a
/// convolution's, `packed_left::PackedA`), made on the second run that sees the same operand
/// (same [`Key`]), and made again the same way whenever the key changes.
///
/// Not on the first run: a weight used once (`thunder run model.onnx`, one call) would pay
/// for a packing it can never win back. Packing GPT-2 small's weights added about 0.3 s to its
/// first call and half a gigabyte of memory (AMD EPYC Zen 3, two threads), more than a call
/// gains from it (about 40 ms). The first run packs per call, as products without the promise do.
pub(crate) struct PackedSlot<P = PackedB> {
    state: Mutex<SlotState<P>>,
}

struct SlotState<P> {
    /// The key of the last run's operand, while it is not packed yet.
    seen: Option<Key>,
    kept: Option<(Key, Arc<P>)>,
}

impl<P> Default for PackedSlot<P> {
    fn default() -> Self {
        PackedSlot {
            state: Mutex::new(SlotState {
                seen: None,
                kept: None,
            }),
        }
    }
}

impl<P> std::fmt::Debug for PackedSlot<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let packed = self
            .state
            .lock()
            .map(|k| k.kept.is_some())
            .unwrap_or_default();
        write!(f, "PackedSlot {{ packed: {packed} }}")
    }
}

impl<P> PackedSlot<P> {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState<P>> {
        // Nothing panics while the lock is held in a way that leaves the state half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The packing of the operand `b` (`k x n`) for this run: the kept one when its key
    /// matches, a new one from `pack` when the last run saw the same operand unpacked, else
    /// none (this run packs per call, and a kept packing of another operand is dropped).
    ///
    /// # Safety
    /// `b` addresses `k x n` readable elements.
    pub(crate) unsafe fn for_run_with(
        &self,
        b: View<f32>,
        k: usize,
        n: usize,
        pack: impl FnOnce() -> P,
    ) -> Option<Arc<P>> {
        // SAFETY: forwarded from the caller.
        let key = unsafe { Key::of(b, k, n) };
        let mut state = self.lock();
        if let Some((_, p)) = state.kept.as_ref().filter(|(kept, _)| *kept == key) {
            return Some(p.clone());
        }
        state.kept = None;
        if state.seen != Some(key) {
            state.seen = Some(key);
            return None;
        }
        state.seen = None;
        let packed = Arc::new(pack());
        state.kept = Some((key, packed.clone()));
        Some(packed)
    }

    /// Whether a packing is kept (for tests).
    #[cfg(test)]
    pub(crate) fn is_packed(&self) -> bool {
        self.lock().kept.is_some()
    }
}

impl PackedSlot<PackedB> {
    /// [`Self::for_run_with`] a product's weight, packed by [`pack`].
    ///
    /// # Safety
    /// `b` addresses `k x n` readable elements.
    pub(crate) unsafe fn for_run(&self, b: View<f32>, k: usize, n: usize) -> Option<Arc<PackedB>> {
        // SAFETY: forwarded from the caller (both reads of `b`).
        unsafe { self.for_run_with(b, k, n, || pack(b, k, n)) }
    }

    /// The packing of the weight `b` (`k x n`), kept from an earlier call when its key
    /// matches, else made now (for tests and the bench, which want it on the first call): a
    /// second [`Self::for_run`] packs what the first one only saw.
    ///
    /// # Safety
    /// `b` addresses `k x n` readable elements.
    #[cfg(test)]
    pub(crate) unsafe fn get(&self, b: View<f32>, k: usize, n: usize) -> Arc<PackedB> {
        // SAFETY: forwarded from the caller.
        unsafe { self.for_run(b, k, n).or_else(|| self.for_run(b, k, n)) }
            .expect("the second sight of a weight packs it")
    }
}

/// Packs the whole weight (see [`PackedB`]), its panels spread over the threads: this runs in
/// a session's first call, once per weight (GPT-2 small's 124 million floats took 0.6 s on
/// one thread, element by element, and 0.1 s this way on two threads: AMD EPYC Zen 3).
///
/// # Safety
/// `b` addresses `k x n` readable elements.
unsafe fn pack(b: View<f32>, k: usize, n: usize) -> PackedB {
    use rayon::prelude::*;
    let npad = n.next_multiple_of(NR);
    let mut data = vec![0f32; k * npad];
    // The views' pointer, as an address: shared with the threads, which only read through it.
    let base = b.ptr as usize;
    for p0 in (0..k).step_by(KC) {
        let kc = KC.min(k - p0);
        let block = &mut data[p0 * npad..(p0 + kc) * npad];
        block
            .par_chunks_exact_mut(NR * kc)
            .enumerate()
            .for_each(|(c, panel)| {
                let cols = NR.min(n - c * NR);
                for p in 0..kc {
                    let src = (base as *const f32)
                        .wrapping_offset((p0 + p) as isize * b.rs + (c * NR) as isize * b.cs);
                    let row = &mut panel[p * NR..p * NR + cols];
                    if b.cs == 1 {
                        // SAFETY: elements (p0 + p, c * NR ..+ cols) of `b`, contiguous.
                        row.copy_from_slice(unsafe { std::slice::from_raw_parts(src, cols) });
                    } else {
                        for (j, x) in row.iter_mut().enumerate() {
                            // SAFETY: element (p0 + p, c * NR + j) of `b`.
                            *x = unsafe { *src.offset(j as isize * b.cs) };
                        }
                    }
                }
            });
    }
    PackedB { data, npad }
}

/// Columns `col0..` of a packed weight, as a product panel reads them (`col0` a multiple of
/// [`NR`]); the caller keeps the [`PackedB`] alive while it is used.
#[derive(Clone, Copy)]
pub(crate) struct PackedCols {
    data: *const f32,
    npad: usize,
    col0: usize,
}

impl PackedB {
    pub(crate) fn cols(&self) -> PackedCols {
        PackedCols {
            data: self.data.as_ptr(),
            npad: self.npad,
            col0: 0,
        }
    }
}

impl PackedCols {
    /// The same weight from column `col0 + c0` on; `c0` is a multiple of [`NR`].
    pub(crate) fn from(self, c0: usize) -> PackedCols {
        debug_assert_eq!(c0 % NR, 0);
        PackedCols {
            col0: self.col0 + c0,
            ..self
        }
    }
}

/// `dst[i * ld + j] = (dst[i * ld + j] if accumulate else 0) + Σ_p a(i, p) · w(p, col0 + j)`
/// for `i < m`, `j < n`, `p < k`, where `w` is the packed weight.
///
/// # Safety
/// The CPU has AVX2 and FMA ([`enabled`]); `a` addresses `m x k` readable elements; `w` is a
/// live packing of `k` rows and at least `col0 + n` columns; `dst` addresses `m` rows of `n`
/// writable elements that no other thread touches.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn gemm(
    (m, n, k): (usize, usize, usize),
    a: View<f32>,
    w: PackedCols,
    dst: *mut f32,
    ld: isize,
    accumulate: bool,
) {
    if m == 0 || n == 0 || k == 0 {
        // `applies` admits only products with every side at least 64.
        return;
    }
    let blocks = m.div_ceil(MC);
    let mcb = m.div_ceil(blocks).next_multiple_of(MR);
    with_buffer(mcb * KC, |apack| {
        for p0 in (0..k).step_by(KC) {
            let kc = KC.min(k - p0);
            let add = accumulate || p0 > 0;
            for ic in (0..m).step_by(mcb) {
                let mc = mcb.min(m - ic);
                // SAFETY (this block): the rows and depth read lie inside `a`; the panels
                // inside the packing (column `col0 + jr` of a block is in panel
                // `(col0 + jr) / NR`); the tiles written inside `dst`.
                unsafe {
                    pack_a(a, (ic, p0), (mc, kc), apack);
                    for jr in (0..n).step_by(NR) {
                        let panel = (w.col0 + jr) / NR;
                        let wp = w.data.add(p0 * w.npad + panel * NR * kc);
                        for (ir, rows) in row_tiles(mc) {
                            let ap = apack.as_ptr().add(ir * kc);
                            let out = dst.offset((ic + ir) as isize * ld).add(jr);
                            tile(kc, ap, wp, out, ld, add, (rows, NR.min(n - jr)), None);
                        }
                    }
                }
            }
        }
    })
}

/// Runs `f` on this thread's kept packing buffer, of at least `len` floats (a fresh one while
/// it is in use): this file's left blocks and `packed_left`'s column panels.
#[cfg(target_arch = "x86_64")]
pub(crate) fn with_buffer<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            if kept.len() < len {
                kept.resize(len, 0.0);
            }
            f(&mut kept)
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

/// The row tiles of a block of `mc` rows, as `(first row, rows)`: tiles of [`MR`] rows, except
/// that a remainder of one to three rows joins the last full tile and the two are split into
/// tiles of three to five. A depth step of a tile of `r` rows takes about `max(r, 4)` cycles
/// (`2r` multiply-adds, two a cycle, each chain waiting four cycles on its last), so 128 rows
/// as 21 tiles of six and one of two cost 130 cycles a step, as 20 of six and two of four 128.
pub(crate) fn row_tiles(mc: usize) -> impl Iterator<Item = (usize, usize)> {
    let (full, rem) = (mc / MR, mc % MR);
    let (plain, tail): (usize, [usize; 2]) = match rem {
        0 => (full, [0, 0]),
        1..=3 if full > 0 => (full - 1, [(MR + rem).div_ceil(2), (MR + rem) / 2]),
        _ => (full, [rem, 0]),
    };
    (0..plain)
        .map(|t| (t * MR, MR))
        .chain(
            tail.into_iter()
                .filter(|&rows| rows > 0)
                .scan(plain * MR, |start, rows| {
                    let tile = (*start, rows);
                    *start += rows;
                    Some(tile)
                }),
        )
}

/// Packs `a`'s rows `i0..i0 + mc`, depth `p0..p0 + kc` into one panel per row tile (see
/// [`row_tiles`]), the panel of a tile of `rows` rows from `first` starting at `first * kc`:
/// for each depth step, its rows' elements side by side.
///
/// # Safety
/// The block lies inside `a`; `out` holds `mc * kc` floats.
pub(crate) unsafe fn pack_a(
    a: View<f32>,
    (i0, p0): (usize, usize),
    (mc, kc): (usize, usize),
    out: &mut [f32],
) {
    for (first, rows) in row_tiles(mc) {
        let panel = &mut out[first * kc..(first + rows) * kc];
        for row in 0..rows {
            let src = a
                .ptr
                .wrapping_offset((i0 + first + row) as isize * a.rs + p0 as isize * a.cs);
            for (p, x) in panel.iter_mut().skip(row).step_by(rows).enumerate() {
                // SAFETY: element (i0 + first + row, p0 + p) of `a`, p < kc.
                *x = unsafe { *src.offset(p as isize * a.cs) };
            }
        }
    }
}

/// What a tile's store applies to each of its elements `x` before it leaves the registers:
/// `relu?((x + bias[row]?) + res[row, col]?)`, in the order of the separate ops it replaces
/// (a convolution's epilogue, `conv_run.rs`), so that results match theirs bit for bit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Finish {
    /// The first row's bias, the next row's `bias_step` further on (null: no bias).
    pub(crate) bias: *const f32,
    pub(crate) bias_step: isize,
    /// The first element of a value of the output's shape, added elementwise, and its row
    /// stride (null: none); its columns are contiguous.
    pub(crate) res: *const f32,
    pub(crate) res_ld: isize,
    /// `maximum(x, 0.0)` last: NaN stays NaN, -0.0 and negatives become +0.0.
    pub(crate) relu: bool,
}

impl Finish {
    /// The same, from row `row` and column `col` on (a null pointer stays null).
    pub(crate) fn at(&self, row: usize, col: usize) -> Finish {
        let moved = |p: *const f32, by: isize| {
            if p.is_null() {
                p
            } else {
                p.wrapping_offset(by)
            }
        };
        Finish {
            bias: moved(self.bias, row as isize * self.bias_step),
            res: moved(self.res, row as isize * self.res_ld + col as isize),
            ..*self
        }
    }

    /// Element `(r, c)` finished.
    ///
    /// # Safety
    /// The bias and residual hold row `r` (and its column `c`) when they are not null.
    pub(crate) unsafe fn apply(&self, x: f32, r: usize, c: usize) -> f32 {
        let mut y = x;
        // SAFETY: the caller's.
        unsafe {
            if !self.bias.is_null() {
                y += *self.bias.offset(r as isize * self.bias_step);
            }
            if !self.res.is_null() {
                y += *self.res.offset(r as isize * self.res_ld + c as isize);
            }
        }
        if self.relu && y <= 0.0 {
            0.0
        } else {
            y
        }
    }
}

/// One `rows x cols` tile (at most [`MR`] x [`NR`]) of the output over `kc` depth steps of
/// packed panels, stored or (`add`) added to `out`, then finished (`finish`, its rows and
/// columns the tile's).
///
/// # Safety
/// As [`tile_of`], with `rows` the panel's rows (1 to [`MR`]).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn tile(
    kc: usize,
    ap: *const f32,
    wp: *const f32,
    out: *mut f32,
    ld: isize,
    add: bool,
    (rows, cols): (usize, usize),
    finish: Option<&Finish>,
) {
    // Read once even under test: this runs per tile, too often for reading the environment.
    static NARROW: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if cols <= NR / 2 && crate::switches::once("THUNDER_CPU_SIMD_NARROW", &NARROW) {
        // SAFETY: forwarded from the caller.
        return unsafe {
            if cols <= NR / 4 {
                narrow_of::<4, 2>(kc, ap, wp, out, ld, add, (rows, cols), finish)
            } else {
                narrow_of::<8, 1>(kc, ap, wp, out, ld, add, (rows, cols), finish)
            }
        };
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        match rows {
            6 => tile_of::<6>(kc, ap, wp, out, ld, add, cols, finish),
            5 => tile_of::<5>(kc, ap, wp, out, ld, add, cols, finish),
            4 => tile_of::<4>(kc, ap, wp, out, ld, add, cols, finish),
            3 => tile_of::<3>(kc, ap, wp, out, ld, add, cols, finish),
            2 => tile_of::<2>(kc, ap, wp, out, ld, add, cols, finish),
            _ => tile_of::<1>(kc, ap, wp, out, ld, add, cols, finish),
        }
    }
}

/// A tile of `rows x cols` with `cols` at most `C` (`C * U` = 8), the rows along the lanes:
/// per depth step one (masked) load of the left panel's `rows` elements, `C` broadcasts of the
/// weight panel's first columns, `C` multiply-adds, the steps split over `U` sums by parity
/// so their chains overlap. A ragged last panel of a few columns (a 7 x 7 map's 49 output
/// positions are three panels and one column) took [`tile_of`]'s whole step, `max(rows, 4)`
/// cycles, for those columns; here it takes about `C / 2`. Sums over the depth run in `U`
/// interleaved parts, so they differ from [`tile_of`]'s by rounding.
///
/// # Safety
/// As [`tile_of`], with `rows` (1 to [`MR`]) the panel's rows and `cols` at most `C`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn narrow_of<const C: usize, const U: usize>(
    kc: usize,
    ap: *const f32,
    wp: *const f32,
    out: *mut f32,
    ld: isize,
    add: bool,
    (rows, cols): (usize, usize),
    finish: Option<&Finish>,
) {
    use std::arch::x86_64::*;
    // SAFETY (whole fn): masked loads read only the panel's `rows` elements of a step (the
    // masked-off lanes do not fault), broadcasts the weight panel's columns; writes inside
    // the tile.
    unsafe {
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows as i32), lane);
        let mut acc = [[_mm256_setzero_ps(); U]; C];
        let step = |acc: &mut [[__m256; U]; C], p: usize, u: usize| {
            let a = _mm256_maskload_ps(ap.add(p * rows), mask);
            for (c, acc) in acc.iter_mut().enumerate() {
                let b = _mm256_broadcast_ss(&*wp.add(p * NR + c));
                acc[u] = _mm256_fmadd_ps(a, b, acc[u]);
            }
        };
        let whole = kc / U * U;
        for p in (0..whole).step_by(U) {
            for u in 0..U {
                step(&mut acc, p + u, u);
            }
        }
        for p in whole..kc {
            step(&mut acc, p, 0);
        }
        let mut sums = [[0f32; 8]; C];
        for (sum, acc) in sums.iter_mut().zip(&acc) {
            let mut v = acc[0];
            for part in &acc[1..] {
                v = _mm256_add_ps(v, *part);
            }
            _mm256_storeu_ps(sum.as_mut_ptr(), v);
        }
        store_elements(out, ld, (rows, cols), add, finish, |r, c| sums[c][r]);
    }
}

/// Stores a `rows x cols` tile element by element, `value(r, c)` at row `r` (rows `ld` apart)
/// and column `c` of `out`: added to what is there when `add`, then finished (`finish`, its
/// rows and columns the tile's). The ragged edges of [`tile_of`] and [`narrow_of`].
///
/// # Safety
/// `out` addresses the tile's elements; `finish`'s bias and residual hold its rows and columns.
unsafe fn store_elements(
    out: *mut f32,
    ld: isize,
    (rows, cols): (usize, usize),
    add: bool,
    finish: Option<&Finish>,
    value: impl Fn(usize, usize) -> f32,
) {
    for r in 0..rows {
        // SAFETY: the caller's.
        unsafe {
            let o = out.offset(r as isize * ld);
            for c in 0..cols {
                let v = if add {
                    *o.add(c) + value(r, c)
                } else {
                    value(r, c)
                };
                *o.add(c) = match finish {
                    Some(f) => f.apply(v, r, c),
                    None => v,
                };
            }
        }
    }
}

/// One `R x cols` tile (`R` at most [`MR`], `cols` at most [`NR`]) of the output over `kc`
/// depth steps of packed panels, stored or (`add`) added to `out`. The depth loop is unrolled
/// four times: `prepack_bench`-style runs, alternating in one process, put that 4-8% ahead of
/// the plain loop on 128-row products (AMD EPYC Zen 3), though the loop body had no spills.
///
/// # Safety
/// The CPU has AVX2 and FMA; `ap` holds `kc` steps of an `R`-row panel and `wp` of a weight
/// panel; `out` addresses `R` rows (stride `ld`) of `cols` writable floats; `finish`'s bias
/// and residual hold the tile's rows and columns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_of<const R: usize>(
    kc: usize,
    ap: *const f32,
    wp: *const f32,
    out: *mut f32,
    ld: isize,
    add: bool,
    cols: usize,
    finish: Option<&Finish>,
) {
    use std::arch::x86_64::*;
    // SAFETY (whole fn): reads inside the panels, writes inside the tile (a whole one in
    // place, a ragged one through `edge`).
    unsafe {
        // The output rows into cache while the depth loop runs (a tile's rows are cold: the
        // output of a 1024-row product is megabytes).
        for r in 0..R {
            let o = out.offset(r as isize * ld) as *const i8;
            _mm_prefetch::<_MM_HINT_T0>(o);
            _mm_prefetch::<_MM_HINT_T0>(o.wrapping_add(4 * cols - 4));
        }
        // So are the residual's (a convolution's residual, rows of a whole map apart): read
        // in the store without this, ResNet-50's 1x1 64-256 at 56 x 56 ran 1.8x slower.
        if let Some(f) = finish.filter(|f| !f.res.is_null()) {
            for r in 0..R {
                let o = f.res.offset(r as isize * f.res_ld) as *const i8;
                _mm_prefetch::<_MM_HINT_T0>(o);
                _mm_prefetch::<_MM_HINT_T0>(o.wrapping_add(4 * cols - 4));
            }
        }
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let step = |acc: &mut [[__m256; 2]; R], p: usize| {
            let b0 = _mm256_loadu_ps(wp.add(p * NR));
            let b1 = _mm256_loadu_ps(wp.add(p * NR + 8));
            let arow = ap.add(p * R);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*arow.add(r));
                acc[0] = _mm256_fmadd_ps(av, b0, acc[0]);
                acc[1] = _mm256_fmadd_ps(av, b1, acc[1]);
            }
        };
        let unrolled = kc / 4 * 4;
        for p in (0..unrolled).step_by(4) {
            step(&mut acc, p);
            step(&mut acc, p + 1);
            step(&mut acc, p + 2);
            step(&mut acc, p + 3);
        }
        for p in unrolled..kc {
            step(&mut acc, p);
        }
        if cols == NR {
            let zero = _mm256_setzero_ps();
            for (r, acc) in acc.iter().enumerate() {
                let o = out.offset(r as isize * ld);
                for (c, &v) in acc.iter().enumerate() {
                    let p = o.add(8 * c);
                    let mut v = if add {
                        _mm256_add_ps(_mm256_loadu_ps(p), v)
                    } else {
                        v
                    };
                    if let Some(f) = finish {
                        if !f.bias.is_null() {
                            let b = _mm256_broadcast_ss(&*f.bias.offset(r as isize * f.bias_step));
                            v = _mm256_add_ps(v, b);
                        }
                        if !f.res.is_null() {
                            let src = f.res.offset(r as isize * f.res_ld).add(8 * c);
                            v = _mm256_add_ps(v, _mm256_loadu_ps(src));
                        }
                        if f.relu {
                            // Ordered compare: NaN is not <= 0 and stays; -0.0 is, and
                            // becomes +0.0.
                            let le = _mm256_cmp_ps::<_CMP_LE_OQ>(v, zero);
                            v = _mm256_andnot_ps(le, v);
                        }
                    }
                    _mm256_storeu_ps(p, v);
                }
            }
            return;
        }
        let mut edge = [0f32; MR * NR];
        for (r, acc) in acc.iter().enumerate() {
            for (c, &v) in acc.iter().enumerate() {
                _mm256_storeu_ps(edge.as_mut_ptr().add(r * NR + 8 * c), v);
            }
        }
        store_elements(out, ld, (R, cols), add, finish, |r, c| edge[r * NR + c]);
    }
}
