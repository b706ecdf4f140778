//! A bf16 GEMM on AVX-512-BF16 (`vdpbf16ps`: sixteen f32 lanes, each adding two bf16
//! products a step), for `half_gemm.rs` where the CPU has it: twice the multiply-adds of an
//! f32 FMA per instruction and no widened copies. On an AMD EPYC Zen 5 (2 threads) the
//! widened-block path ran `[2048, 2048] @ [2048, 2048]` at 284 GFLOP/s, PyTorch's oneDNN
//! (which uses the same instruction) at 936.
//!
//! The right operand is packed per block of 64 columns as pairs along the depth (`b[p][j]`,
//! `b[p+1][j]` side by side, a zero past an odd depth), the layout the instruction reads;
//! rows of the left operand are read in place, each depth pair broadcast as one 32-bit
//! value. A 6 x 64 tile of f32 sums stays in 24 registers over the whole depth and is rounded
//! once to bf16 (ties to even) when stored. As in oneDNN, the instruction treats bf16
//! subnormal inputs as zero and flushes subnormal sums: values below 1.2e-38.
//!
//! Where the CPU has AMX (`amx.rs`), the whole 32 x 32 tiles of a full column block with a
//! depth of whole 32-element steps run on its tiles instead, from the same packed block.

use rayon::prelude::*;
use std::arch::x86_64::*;

/// Output columns per block: four vectors of sixteen.
pub(crate) const NB: usize = 64;
/// Output rows per register tile.
const MR: usize = 6;
/// Rows per task: a multiple of [`MR`]; the task's left rows (`ROWS x k` bf16) stay near L2.
const ROWS: usize = 192;
/// Bytes of left rows a task runs its packed block against.
const L2_LEFT: usize = 1 << 18;
/// Below this many multiply-adds a product runs on the calling thread.
const PAR_MIN: usize = 1 << 20;

/// Whether this CPU runs [`gemm`]: AVX-512-BF16, and AVX-512 not turned off by
/// `THUNDER_CPU_SIMD_ISA` (an AVX2 machine, emulated, gets the widened path);
/// `THUNDER_CPU_SIMD_BF16=0` turns it off alone, for A/B runs.
pub(crate) fn available() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        crate::exec::isa_level() >= 2
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512bf16")
            && std::env::var("THUNDER_CPU_SIMD_BF16").as_deref() != Ok("0")
    })
}

/// The operands of one product, as raw bf16 bits.
#[derive(Clone, Copy)]
pub(crate) struct Operands {
    /// `[m, k]`, row `i` at `a + i * lda`, contiguous along the depth.
    pub(crate) a: *const u16,
    pub(crate) lda: usize,
    /// `[k, n]`, element `(p, j)` at `b + p * brs + j * bcs`.
    pub(crate) b: *const u16,
    pub(crate) brs: usize,
    pub(crate) bcs: usize,
    /// `[m, n]` row-major, row stride `ldo`.
    pub(crate) out: *mut u16,
    pub(crate) ldo: usize,
}

// SAFETY: tasks read the operands and write disjoint tiles of the output.
unsafe impl Send for Operands {}
unsafe impl Sync for Operands {}

thread_local! {
    /// This thread's packed block (kept between calls: a fresh one is page faults per call).
    static PACKED: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Every block of one product, packed once and shared by its tasks (the caller's).
    static SHARED: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on `len` words of this thread's kept buffer `key` (grown when too short; its
/// contents are whatever the last use left), or on fresh ones while that one is in use.
fn with_kept<R>(
    key: &'static std::thread::LocalKey<std::cell::RefCell<Vec<u32>>>,
    len: usize,
    f: impl FnOnce(&mut [u32]) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            if kept.len() < len {
                kept.resize(len, 0);
            }
            f(&mut kept[..len])
        }
        Err(_) => f(&mut vec![0; len]),
    })
}

/// `out = round_bf16(a @ b)` with f32 sums.
///
/// # Safety
/// [`available`] said yes; the operands address `m x k`, `k x n` readable and `m x n`
/// writable elements that nothing else writes meanwhile.
pub(crate) unsafe fn gemm((m, n, k): (usize, usize, usize), x: Operands) {
    if m == 0 || n == 0 {
        return;
    }
    // A task runs one packed block of the right operand against a group of left rows: as
    // many chunks of [`ROWS`] as stay within 256 KiB (a quarter of L2). With one group, each task
    // packs its block; with more, every block is packed once up front and shared, rather
    // than once per group (a 512 x 768 x 3072 product packed its right operand three times:
    // 5.2 ms, against 2.5 packing it once).
    let group = ((L2_LEFT / (2 * k.max(1))).max(ROWS) / ROWS) * ROWS;
    let (col_blocks, row_groups) = (n.div_ceil(NB), m.div_ceil(group));
    let block_words = k.div_ceil(2) * NB;
    let cols_of = |cb: usize| (cb * NB, ((cb + 1) * NB).min(n));
    let par = m * n * k >= PAR_MIN && rayon::current_num_threads() > 1;
    if row_groups == 1 {
        let task = |cb: usize| {
            with_kept(&PACKED, block_words, |packed| {
                // SAFETY: forwarded; the block's rows and columns are inside the product.
                unsafe {
                    pack_block(x, k, cols_of(cb), packed);
                    run_block(x, k, (0, m), cols_of(cb), packed.as_ptr());
                }
            })
        };
        if par && col_blocks > 1 {
            (0..col_blocks)
                .into_par_iter()
                .for_each(crate::ftz::carried(task));
        } else {
            (0..col_blocks).for_each(task);
        }
        return;
    }
    with_kept(&SHARED, col_blocks * block_words, |shared| {
        let pack = |(cb, dst): (usize, &mut [u32])| {
            // SAFETY: forwarded; the block's columns are inside the operand.
            unsafe { pack_block(x, k, cols_of(cb), dst) }
        };
        if par {
            shared
                .par_chunks_mut(block_words)
                .enumerate()
                .for_each(pack);
        } else {
            shared.chunks_mut(block_words).enumerate().for_each(pack);
        }
        let shared = &*shared;
        // Row-group major: consecutive tasks of a thread reuse its group of left rows.
        let task = |t: usize| {
            let (rg, cb) = (t / col_blocks, t % col_blocks);
            let rows = (rg * group, ((rg + 1) * group).min(m));
            // SAFETY: forwarded; block `cb` is packed.
            unsafe { run_block(x, k, rows, cols_of(cb), shared[cb * block_words..].as_ptr()) }
        };
        let tasks = col_blocks * row_groups;
        if par {
            (0..tasks)
                .into_par_iter()
                .for_each(crate::ftz::carried(task));
        } else {
            (0..tasks).for_each(task);
        }
    });
}

/// Packs output columns `cols` (at most [`NB`]) of the right operand into `packed`
/// (`ceil(k / 2) x NB` words): word `(pp, jj)` holds `b[2pp][c0 + jj]` in its low half and
/// `b[2pp + 1][..]` above.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn pack_block(x: Operands, k: usize, (c0, c1): (usize, usize), packed: &mut [u32]) {
    let pairs = k.div_ceil(2);
    let cols = c1 - c0;
    if cols < NB {
        // A partial block leaves columns past its end unwritten: zeros, not stale operands
        // (their lanes are masked off on store either way).
        packed[..pairs * NB].fill(0);
    }
    // SAFETY (whole fn): reads inside the operand.
    unsafe {
        if x.bcs == 1 && cols == NB {
            pack_rows(x, k, c0, packed);
        } else {
            // Walk the operand along its shorter stride (a column of a row-major operand is
            // a cache line a row, all in one L1 set when rows are 4 KiB apart).
            let word = |pp: usize, jj: usize| {
                let col = x.b.add((c0 + jj) * x.bcs);
                let lo = u32::from(*col.add(2 * pp * x.brs));
                let hi = if 2 * pp + 1 < k {
                    u32::from(*col.add((2 * pp + 1) * x.brs))
                } else {
                    0
                };
                lo | hi << 16
            };
            if x.bcs <= x.brs {
                for pp in 0..pairs {
                    for jj in 0..cols {
                        packed[pp * NB + jj] = word(pp, jj);
                    }
                }
            } else {
                for jj in 0..cols {
                    for pp in 0..pairs {
                        packed[pp * NB + jj] = word(pp, jj);
                    }
                }
            }
        }
    }
}

/// Rows `rows` of output columns `cols` (at most [`NB`]) from their packed block.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn run_block(
    x: Operands,
    k: usize,
    (r0, r1): (usize, usize),
    (c0, c1): (usize, usize),
    packed: *const u32,
) {
    let cols = c1 - c0;
    let masks: [__mmask16; 4] = std::array::from_fn(|c| {
        let lanes = cols.saturating_sub(16 * c).min(16);
        ((1u32 << lanes) - 1) as __mmask16
    });
    let t = Tile {
        x,
        k,
        packed,
        c0,
        masks,
    };
    let mut i = r0;
    // SAFETY: reads inside the operands and the packed block, writes inside rows r0..r1 and
    // columns c0..c1 of the output.
    unsafe {
        // Whole 32 x 32 tiles on AMX where the CPU has it (a full block, a depth of whole
        // AMX steps); the rows left over take the kernel below.
        if cols == NB
            && k > 0
            && k.is_multiple_of(crate::amx::DEPTH)
            && r1 - r0 >= crate::amx::TILE
            && crate::amx::available()
        {
            crate::amx::configure();
            while i + crate::amx::TILE <= r1 {
                for half in 0..2 {
                    let c = c0 + crate::amx::TILE * half;
                    crate::amx::tile_32x32(
                        x.a.add(i * x.lda),
                        x.lda,
                        packed.add(crate::amx::TILE * half),
                        k,
                        x.out.add(i * x.ldo + c),
                        x.ldo,
                    );
                }
                i += crate::amx::TILE;
            }
            crate::amx::release();
        }
        while i < r1 {
            let r = MR.min(r1 - i);
            match r {
                6 => tile::<6>(&t, i),
                5 => tile::<5>(&t, i),
                4 => tile::<4>(&t, i),
                3 => tile::<3>(&t, i),
                2 => tile::<2>(&t, i),
                _ => tile::<1>(&t, i),
            }
            i += r;
        }
    }
}

/// Packs a full block of 64 columns of a row-major right operand: two rows' 64 elements
/// interleaved into 64 words with two-source permutes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn pack_rows(x: Operands, k: usize, c0: usize, packed: &mut [u32]) {
    // Word j of the first output: element j of each source (second source's indices from 32).
    let lo_idx: [i16; 32] = std::array::from_fn(|e| (e / 2 + 32 * (e % 2)) as i16);
    let hi_idx: [i16; 32] = std::array::from_fn(|e| (16 + e / 2 + 32 * (e % 2)) as i16);
    // SAFETY (whole fn): rows 0..k of columns c0..c0 + 64 are inside the operand; the packed
    // block holds ceil(k / 2) x 64 words.
    unsafe {
        let (lo_idx, hi_idx) = (
            _mm512_loadu_si512(lo_idx.as_ptr() as *const _),
            _mm512_loadu_si512(hi_idx.as_ptr() as *const _),
        );
        let zero = _mm512_setzero_si512();
        let out = packed.as_mut_ptr();
        for pp in 0..k.div_ceil(2) {
            let row = |p: usize, half: usize| {
                if p < k {
                    _mm512_loadu_si512(x.b.add(p * x.brs + c0 + 32 * half) as *const _)
                } else {
                    zero
                }
            };
            for half in 0..2 {
                let (r0, r1) = (row(2 * pp, half), row(2 * pp + 1, half));
                let dst = out.add(pp * NB + 32 * half);
                _mm512_storeu_si512(dst as *mut _, _mm512_permutex2var_epi16(r0, lo_idx, r1));
                _mm512_storeu_si512(
                    dst.add(16) as *mut _,
                    _mm512_permutex2var_epi16(r0, hi_idx, r1),
                );
            }
        }
    }
}

struct Tile {
    x: Operands,
    k: usize,
    packed: *const u32,
    c0: usize,
    /// Lanes of each of the four column vectors inside the output.
    masks: [__mmask16; 4],
}

/// Output rows `i0..i0 + R` of the block, summed over the whole depth in registers.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn tile<const R: usize>(t: &Tile, i0: usize) {
    let (k, x) = (t.k, t.x);
    let pairs = k.div_ceil(2);
    // SAFETY (whole fn): each row's reads stay inside its k elements (an odd last element is
    // read alone), the packed block holds ceil(k / 2) x NB words, writes are masked to the
    // block's columns.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); 4]; R];
        let rows: [*const u16; R] = std::array::from_fn(|r| x.a.add((i0 + r) * x.lda));
        // One broadcast at a time: 24 sums, 4 packed vectors and the broadcast fit the 32
        // registers (six broadcasts held at once spilled sums to the stack).
        for pp in 0..pairs {
            let pk = t.packed.add(pp * NB);
            let bv: [__m512bh; 4] = std::array::from_fn(|c| {
                std::mem::transmute(_mm512_loadu_si512(pk.add(16 * c) as *const _))
            });
            for (acc, row) in acc.iter_mut().zip(&rows) {
                let word = if 2 * pp + 1 < k {
                    (row.add(2 * pp) as *const u32).read_unaligned()
                } else {
                    // An odd depth's last element, paired with a zero.
                    u32::from(*row.add(2 * pp))
                };
                let a: __m512bh = std::mem::transmute(_mm512_set1_epi32(word as i32));
                for (s, &b) in acc.iter_mut().zip(&bv) {
                    *s = _mm512_dpbf16_ps(*s, a, b);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let o = x.out.add((i0 + r) * x.ldo + t.c0);
            for (c, &s) in acc.iter().enumerate() {
                if t.masks[c] != 0 {
                    let h: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(s));
                    _mm256_mask_storeu_epi16(o.add(16 * c) as *mut i16, t.masks[c], h);
                }
            }
        }
    }
}
