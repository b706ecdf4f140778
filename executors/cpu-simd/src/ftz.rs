//! Flush-to-zero and denormals-are-zero while cpu-simd computes.
//!
//! Why: an x86 core takes a microcode assist (around a hundred cycles) for every subnormal
//! operand or result of an SSE/AVX instruction. Softmax probabilities far below the row's
//! maximum, and their gradients, are often subnormal; one training test spent 4-5x longer in its
//! gradient GEMMs because of them. With MXCSR's FTZ (results) and DAZ (operands) bits set,
//! those values are zero and the assists disappear. The cost is that values below 2^-126
//! (about 1.2e-38 in f32, 2.2e-308 in f64) read and come out as zero, so a result can differ
//! from the interpreter's (which keeps IEEE subnormals) by less than that: below every
//! tolerance any test or user applies, and what oneDNN and MKL-based frameworks do by default.
//!
//! The bits are per thread. Every rayon worker sets them once when it starts (this crate owns
//! the global pool of its own copy of rayon: a `cdylib` links its own), and the host's thread
//! that runs a region sets them for the run and restores its own state afterwards
//! ([`FlushGuard`]), so the host's arithmetic is untouched and a region gives the same result
//! on the calling thread and on the workers. `THUNDER_CPU_SIMD_FTZ=0` keeps IEEE subnormals
//! everywhere (for A/B runs and bit-level comparisons).

use std::sync::OnceLock;

/// MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6).
#[cfg(target_arch = "x86_64")]
const FTZ_DAZ: u32 = (1 << 15) | (1 << 6);

/// Whether subnormals are flushed (`THUNDER_CPU_SIMD_FTZ=0` turns it off).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("THUNDER_CPU_SIMD_FTZ").as_deref() != Ok("0"))
}

#[cfg(target_arch = "x86_64")]
fn read_csr() -> u32 {
    let mut csr: u32 = 0;
    // SAFETY: stmxcsr stores the 32-bit control register to the given address.
    unsafe {
        std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags));
    }
    csr
}

#[cfg(target_arch = "x86_64")]
fn write_csr(csr: u32) {
    // SAFETY: ldmxcsr loads a control word read by `read_csr` with only the FTZ/DAZ bits
    // changed (both exist on every x86_64 CPU), so no reserved bit is set.
    unsafe {
        std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, readonly, preserves_flags));
    }
}

/// Sets FTZ and DAZ on the current thread.
fn set_on_this_thread() {
    #[cfg(target_arch = "x86_64")]
    write_csr(read_csr() | FTZ_DAZ);
}

/// Builds rayon's global pool with workers that flush subnormals, once. Called before any
/// region runs (at compile); if something built the pool first (only possible where this crate
/// is linked as an rlib beside other rayon users), the workers keep their state.
pub(crate) fn init_pool() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        if !enabled() {
            return;
        }
        let _ = rayon::ThreadPoolBuilder::new()
            .start_handler(|_| set_on_this_thread())
            .build_global();
    });
}

/// FTZ and DAZ on the current thread until dropped, then the thread's own MXCSR again.
pub(crate) struct FlushGuard {
    #[cfg(target_arch = "x86_64")]
    saved: Option<u32>,
}

impl FlushGuard {
    pub(crate) fn new() -> FlushGuard {
        #[cfg(target_arch = "x86_64")]
        {
            if !enabled() {
                return FlushGuard { saved: None };
            }
            let saved = read_csr();
            if saved & FTZ_DAZ != FTZ_DAZ {
                write_csr(saved | FTZ_DAZ);
                return FlushGuard { saved: Some(saved) };
            }
            FlushGuard { saved: None }
        }
        #[cfg(not(target_arch = "x86_64"))]
        FlushGuard {}
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if let Some(saved) = self.saved {
            write_csr(saved);
        }
    }
}
