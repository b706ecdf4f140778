//! bf16 products on AMX tiles (Intel Sapphire Rapids on: `tdpbf16ps`, a 16 x 16 f32 tile
//! adding a 16 x 32 by 32 x 16 bf16 product in one instruction), for the whole 32 x 32 tiles of
//! `bf16_gemm.rs`'s column blocks; the rest of a product stays on its AVX-512-BF16 kernel.
//!
//! Stable Rust has neither AMX intrinsics nor AMX target features, so the tile instructions
//! are inline assembly (the assembler takes them whatever the function's features), the CPU
//! is asked through CPUID and XCR0, and Linux must grant the process the tile state
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`) before the first tile instruction.
//! Nothing else in the process touches the tile registers, so they keep their values between
//! `asm!` blocks.
//!
//! The right operand is `bf16_gemm`'s packed block, whose layout (depth pairs side by side,
//! 64 columns a row of 256 bytes) is the one `tdpbf16ps` reads for its second source: a
//! 16-pair x 16-column tile is a 16-row, 64-byte-wide window of the block. The left operand's
//! rows are read in place, 32 bf16 of depth a tile row.
//!
//! On the GPU machine's host (an Intel Xeon with AMX, 16 cores; `scripts/gpu/amx_check.sh`,
//! `docs/gpu-wave/2026-11-27-s15/amx`): bf16 `[2048, 2048] @ [2048, 2048]` 150.8 -> 1315.7
//! GFLOP/s on 2 threads (PyTorch's torch.mm 1579.6) and 886.0 -> 5663.2 on 16 (PyTorch 3856.7);
//! the bf16 MLP layer forward and backward 118.3 -> 32.2 ms on 2 threads, 25.8 -> 11.5 on 16.

use std::arch::asm;
use std::arch::x86_64::*;

/// Output rows and columns of one AMX step: 2 x 2 tiles of 16 x 16.
pub(crate) const TILE: usize = 32;
/// Depth of one `tdpbf16ps`: 32 bf16 (16 pairs); [`tile_32x32`] takes whole steps of it.
pub(crate) const DEPTH: usize = 32;

/// Whether this CPU and OS run [`tile_32x32`]: AMX-TILE and AMX-BF16 in CPUID, the tile state
/// enabled in XCR0, Linux's permission granted, AVX-512-BF16 (the path the edges take, and
/// the rounding of the results), and `THUNDER_CPU_SIMD_AMX=0` not set (for A/B runs).
pub(crate) fn available() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("THUNDER_CPU_SIMD_AMX").as_deref() != Ok("0")
            && crate::bf16_gemm::available()
            && cpu_has_amx_bf16()
            && os_grants_tiles()
    })
}

/// CPUID leaf 7: AMX-BF16 (EDX bit 22) and AMX-TILE (bit 24); XCR0: XTILECFG and XTILEDATA
/// (bits 17 and 18) enabled by the OS.
fn cpu_has_amx_bf16() -> bool {
    // CPUID exists on every x86_64 CPU; leaf 7 is asked only where leaf 0 lists it.
    if __cpuid(0).eax < 7 {
        return false;
    }
    let leaf7 = __cpuid_count(7, 0);
    let cpu = leaf7.edx & (1 << 22) != 0 && leaf7.edx & (1 << 24) != 0;
    cpu && is_x86_feature_detected!("xsave") && {
        // SAFETY: XGETBV is enabled where the OS uses XSAVE (OSXSAVE, which the detection of
        // `xsave` as usable implies).
        let xcr0 = unsafe { xcr0() };
        xcr0 & (3 << 17) == 3 << 17
    }
}

#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    // SAFETY: forwarded (the caller checked XSAVE).
    unsafe { _xgetbv(0) }
}

/// Asks Linux for the tile data state (a process-wide permission, once).
#[cfg(target_os = "linux")]
fn os_grants_tiles() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: a plain system call with integer arguments; a kernel without AMX support
    // answers with an error, which is a "no".
    let rc = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        )
    };
    rc == 0
}

#[cfg(not(target_os = "linux"))]
fn os_grants_tiles() -> bool {
    false
}

/// The tile configuration (`ldtilecfg`'s 64 bytes, palette 1): eight tiles of 16 rows of 64
/// bytes. Tiles 0-3: the 2 x 2 f32 sums; 4, 5: two 16-row slices of the left operand; 6, 7:
/// two 16-column slices of the packed right operand.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

const CONFIG: TileConfig = TileConfig {
    palette: 1,
    start_row: 0,
    reserved: [0; 14],
    colsb: [64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0],
    rows: [16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0],
};

/// Loads [`CONFIG`] on this thread (before a run of [`tile_32x32`]).
///
/// # Safety
/// [`available`] said yes.
pub(crate) unsafe fn configure() {
    // SAFETY: forwarded; the configuration is valid for palette 1.
    unsafe {
        asm!("ldtilecfg [{cfg}]", cfg = in(reg) &CONFIG as *const TileConfig, options(nostack, readonly))
    };
}

/// Releases this thread's tile state (after a run of [`tile_32x32`]).
///
/// # Safety
/// [`available`] said yes.
pub(crate) unsafe fn release() {
    // SAFETY: forwarded.
    unsafe { asm!("tilerelease", options(nostack, nomem)) };
}

/// `out[0..32][0..32] = round_bf16(a[0..32][0..k] @ b)`, where `a` points at the first of 32
/// rows `lda` elements apart, `packed` at the first of this tile's 32 columns in a packed
/// block (`ceil(k / 2)` rows of 64 words), and `out` at the output's first element, rows
/// `ldo` apart.
///
/// # Safety
/// [`available`] said yes and [`configure`] ran on this thread; `k` is a multiple of 32; the
/// 32 rows of `k` elements, the packed rows and the 32 x 32 outputs are inside their buffers.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
pub(crate) unsafe fn tile_32x32(
    a: *const u16,
    lda: usize,
    packed: *const u32,
    k: usize,
    out: *mut u16,
    ldo: usize,
) {
    let a_stride = 2 * lda;
    let b_stride = 4 * crate::bf16_gemm::NB;
    // SAFETY (whole fn): forwarded; every load is a 16-row window of its operand.
    unsafe {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack, nomem)
        );
        let mut p = 0;
        while p < k {
            let a0 = a.add(p);
            let a1 = a0.add(16 * lda);
            let b0 = packed.add(p / 2 * crate::bf16_gemm::NB);
            let b1 = b0.add(16);
            asm!(
                "tileloadd tmm4, [{a0} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tileloadd tmm5, [{a1} + {sa}*1]",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                a0 = in(reg) a0,
                a1 = in(reg) a1,
                b0 = in(reg) b0,
                b1 = in(reg) b1,
                sa = in(reg) a_stride,
                sb = in(reg) b_stride,
                options(nostack, readonly),
            );
            p += DEPTH;
        }
        // Each sum tile to f32 rows here, then rounded to bf16 (ties to even) into the output.
        let mut sums = [[0f32; 16]; 64];
        let s = sums.as_mut_ptr();
        asm!(
            "tilestored [{s0} + {st}*1], tmm0",
            "tilestored [{s1} + {st}*1], tmm1",
            "tilestored [{s2} + {st}*1], tmm2",
            "tilestored [{s3} + {st}*1], tmm3",
            s0 = in(reg) s,
            s1 = in(reg) s.add(16),
            s2 = in(reg) s.add(32),
            s3 = in(reg) s.add(48),
            st = in(reg) 64usize,
            options(nostack),
        );
        for (t, tile) in sums.chunks_exact(16).enumerate() {
            let (rows, cols) = (16 * (t / 2), 16 * (t % 2));
            for (r, row) in tile.iter().enumerate() {
                let h: __m256i =
                    std::mem::transmute(_mm512_cvtneps_pbh(_mm512_loadu_ps(row.as_ptr())));
                _mm256_storeu_si256(out.add((rows + r) * ldo + cols) as *mut __m256i, h);
            }
        }
    }
}
