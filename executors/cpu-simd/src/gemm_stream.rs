//! An f32 GEMM for products with few rows against a large, row-major right operand (a
//! `linear` over a short batch of tokens: `[128, 768] @ [768, 3072]`): each block of the right
//! operand is read from memory once, as the first row group runs, with its rows prefetched
//! ahead and copied into a packed block that the other row groups read from cache.
//!
//! Why not the `gemm` crate for these: it packs each block of the right operand in a pass of
//! its own before multiplying, and with a weight that is not in cache that pass waits on
//! memory with no arithmetic to overlap (our reading of the numbers below; the packing was
//! not timed on its own). On an AMD EPYC Zen 5 (2 threads), 24 GPT-2 MLP products
//! (`[128, 768] @ [768, 3072]` and back, each weight read once) took 37.2-39.7 ms through the
//! crate against ONNX Runtime's 33.4-34.3 ms, whose weights are packed once when the model is
//! loaded; with weights in cache the crate ran them at 470 GFLOP/s. With this kernel they take
//! 34.0-34.2 ms, and GPT-2 small's products over 128 tokens run at 403-440 GFLOP/s against
//! the crate's 357-389 (the vocabulary projection: 440 against 389).
//!
//! The kernel keeps a 6 x 64 tile of the output in 24 AVX-512 registers; a ragged last
//! column block is masked, never padded in memory. Sums run over the depth in order in
//! blocks of [`KC`], each block's sum added to the output.

use crate::gemm_run::View;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Output columns per block: four AVX-512 vectors.
const NB: usize = 64;
/// Depth per block: the packed block (`KC x NB` f32, 128 KiB) stays in a core's L2.
const KC: usize = 512;
/// Output rows per register tile.
const MR: usize = 6;
/// How many rows of the right operand ahead the first row group prefetches.
const PF_ROWS: usize = 64;
/// Most output rows: with more, every block of the right operand is reused by enough row
/// groups that the crate's separate packing pass costs little. At 1,024 rows (MiniLM and
/// GPT-2 at batch 8) this kernel was within 3% of the crate on most products and 10% slower
/// on `[1024, 768] @ [768, 768]`; it keeps no block of the left operand in cache.
const MAX_M: usize = 512;

/// The smallest right operand (bytes) a whole product streams: one a core's L2 could hold is
/// likely in cache already (a training step's products read what the stages before them
/// wrote), and there the `gemm` crate's packed kernels ran faster. On the device host's Xeon
/// (AVX-512, 2 pinned cores; `scripts/gpu/xeon_block_gemm.sh`), the four GPT-2 block products
/// that streamed (right operands of 0.25-1 MiB) ran at 133-182 GFLOP/s against 186-209 on
/// the crate, threaded with hot operands, and `thunder bench`'s block took 8.0-8.7 ms a call
/// without streaming against 8.4-10.3 with it (5 alternating rounds, 4 won). GPT-2 small's
/// weights over 128 tokens, the kernel's case, are 2.25 MiB (`[768, 768]`) and more.
pub(crate) const MIN_RIGHT_BYTES: usize = 2 << 20;

/// Whether a whole `k x n` right operand is large enough to stream ([`MIN_RIGHT_BYTES`]).
pub(crate) fn pays(n: usize, k: usize) -> bool {
    n.saturating_mul(k).saturating_mul(4) >= MIN_RIGHT_BYTES
}

/// Whether [`gemm`] takes this product on this CPU (`THUNDER_CPU_SIMD_STREAM=0` leaves every
/// product to the crate, for A/B runs).
pub(crate) fn applies(m: usize, n: usize, k: usize, b_cs: isize) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    crate::exec::isa_level() >= 2
        && (1..=MAX_M).contains(&m)
        && n >= NB
        && k >= 64
        && b_cs == 1
        && crate::switches::once("THUNDER_CPU_SIMD_STREAM", &ON)
}

/// `dst[m, n] (+)= a[m, k] @ b[k, n]`, `b` row `p` at `b + p * b_rs` (contiguous), `dst`
/// row-major with row stride `ld`, added to when `read_dst`.
///
/// # Safety
/// [`applies`] said yes; the views address `m x k`, `k x n` readable and `m x n` writable
/// elements that no other thread writes meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm(
    (m, n, k): (usize, usize, usize),
    a: View<f32>,
    b: *const f32,
    b_rs: isize,
    dst: *mut f32,
    ld: isize,
    read_dst: bool,
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded; `applies` checked the CPU's level.
    unsafe {
        gemm_avx512((m, n, k), a, b, b_rs, dst, ld, read_dst)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ((m, n, k), a, b, b_rs, dst, ld, read_dst);
}

thread_local! {
    /// This thread's packed block (kept between calls: a fresh one is page faults per call).
    static PACKED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_avx512(
    (m, n, k): (usize, usize, usize),
    a: View<f32>,
    b: *const f32,
    b_rs: isize,
    dst: *mut f32,
    ld: isize,
    read_dst: bool,
) {
    let run = |packed: &mut [f32]| {
        let packed = packed.as_mut_ptr();
        for j0 in (0..n).step_by(NB) {
            let cols = NB.min(n - j0);
            let masks: [__mmask16; 4] = std::array::from_fn(|c| {
                let lanes = cols.saturating_sub(16 * c).min(16);
                ((1u32 << lanes) - 1) as __mmask16
            });
            for k0 in (0..k).step_by(KC) {
                let kc = KC.min(k - k0);
                let add = read_dst || k0 > 0;
                let block = Block {
                    a: View {
                        ptr: a.ptr.wrapping_offset(k0 as isize * a.cs),
                        ..a
                    },
                    src: b.wrapping_offset(k0 as isize * b_rs + j0 as isize),
                    b_rs,
                    packed,
                    kc,
                    masks,
                    add,
                };
                let mut i0 = 0;
                while i0 < m {
                    let rows = MR.min(m - i0);
                    let out = dst.wrapping_offset(i0 as isize * ld + j0 as isize);
                    let first = i0 == 0;
                    // SAFETY: forwarded from the caller; the packed block holds KC x NB.
                    unsafe {
                        match rows {
                            6 => tile::<6>(&block, i0, first, out, ld),
                            5 => tile::<5>(&block, i0, first, out, ld),
                            4 => tile::<4>(&block, i0, first, out, ld),
                            3 => tile::<3>(&block, i0, first, out, ld),
                            2 => tile::<2>(&block, i0, first, out, ld),
                            _ => tile::<1>(&block, i0, first, out, ld),
                        }
                    }
                    i0 += rows;
                }
            }
        }
    };
    PACKED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            if kept.len() < KC * NB {
                kept.resize(KC * NB, 0.0);
            }
            run(&mut kept)
        }
        Err(_) => run(&mut vec![0.0; KC * NB]),
    })
}

/// One block of the right operand (`kc` rows by up to [`NB`] columns) against every row.
#[cfg(target_arch = "x86_64")]
struct Block {
    /// The left operand at this block's first depth index.
    a: View<f32>,
    /// The block in the right operand.
    src: *const f32,
    b_rs: isize,
    /// `kc x NB`, written by the first row group.
    packed: *mut f32,
    kc: usize,
    /// Lanes of each of the four column vectors inside the output.
    masks: [__mmask16; 4],
    /// Add the block's sums to the output (else they overwrite it).
    add: bool,
}

/// Output rows `i0..i0 + R` of the block: from the right operand itself (prefetching ahead,
/// and packing what it reads) when `first`, else from the packed block.
///
/// # Safety
/// As for [`gemm`]; `out` is the tile's first output element.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn tile<const R: usize>(blk: &Block, i0: usize, first: bool, out: *mut f32, ld: isize) {
    // SAFETY (whole fn): every read is inside the caller's views or the packed block (masked
    // lanes are never touched), every write inside this tile of the output; prefetches never
    // fault.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); 4]; R];
        let arow: [*const f32; R] =
            std::array::from_fn(|r| blk.a.ptr.wrapping_offset((i0 + r) as isize * blk.a.rs));
        for p in 0..blk.kc {
            let pk = blk.packed.add(p * NB);
            let bv: [__m512; 4] = if first {
                let row = blk.src.offset(p as isize * blk.b_rs);
                let ahead = blk.src.wrapping_offset((p + PF_ROWS) as isize * blk.b_rs) as *const i8;
                // A row's 256 bytes span five cache lines when the operand is not 64-byte
                // aligned: the fifth is the line of the last byte.
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(4 * NB - 1));
                std::array::from_fn(|c| {
                    if blk.masks[c] != 0 {
                        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * c));
                    }
                    let v = _mm512_maskz_loadu_ps(blk.masks[c], row.add(16 * c));
                    _mm512_storeu_ps(pk.add(16 * c), v);
                    v
                })
            } else {
                std::array::from_fn(|c| _mm512_loadu_ps(pk.add(16 * c)))
            };
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*arow[r].offset(p as isize * blk.a.cs));
                for (s, &y) in acc.iter_mut().zip(&bv) {
                    *s = _mm512_fmadd_ps(x, y, *s);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let o = out.offset(r as isize * ld);
            for (c, &s) in acc.iter().enumerate() {
                let p = o.add(16 * c);
                let v = if blk.add {
                    _mm512_add_ps(_mm512_maskz_loadu_ps(blk.masks[c], p), s)
                } else {
                    s
                };
                _mm512_mask_storeu_ps(p, blk.masks[c], v);
            }
        }
    }
}
