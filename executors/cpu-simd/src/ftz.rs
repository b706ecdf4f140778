//! Flush-to-zero and denormals-are-zero in the products: GEMMs, convolutions and attention.
//!
//! Why: an x86 core takes a microcode assist (around a hundred cycles) for every subnormal
//! operand or result of an SSE/AVX instruction. Softmax probabilities far below the row's
//! maximum, and their gradients, are often subnormal; one training test spent 4-5x longer in its
//! gradient GEMMs because of them. With MXCSR's FTZ (results) and DAZ (operands) bits set,
//! those values are zero and the assists disappear. In a sum of products that changes the
//! result by less than 2^-126 (about 1.2e-38) per term in f32 (2.2e-308 in f64), below any
//! tolerance a test or a user applies; oneDNN and MKL-based frameworks do the same.
//!
//! The fused elementwise loops keep IEEE subnormals: there the flush would change results
//! outright (`sign` or `logical_not` of a subnormal, a subnormal quotient), and the loops must
//! agree with the interpreter and PyTorch.
//!
//! The bits are per thread. The host's thread sets them only while it runs a product stage
//! ([`FlushGuard`] restores its own state afterwards); the pieces of every parallel loop run
//! in the state of the thread that started the loop ([`carried`]), and a fused loop's chunk
//! clears them for its duration. Every rayon worker also sets them when it starts (this crate
//! owns the global pool of its own copy of rayon: a `cdylib` links its own), for the `gemm`
//! crate's own threads in the f16 products, where no subnormal f32 arises. So a region gives
//! the same result on the calling thread and on the workers, and the host's arithmetic is
//! untouched.
//! `THUNDER_CPU_SIMD_FTZ=0` keeps IEEE subnormals everywhere (for A/B runs).

use std::sync::OnceLock;

/// MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6).
#[cfg(target_arch = "x86_64")]
const FTZ_DAZ: u32 = (1 << 15) | (1 << 6);

/// Whether subnormals are flushed (`THUNDER_CPU_SIMD_FTZ=0` turns it off).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::switches::once("THUNDER_CPU_SIMD_FTZ", &ON)
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

/// The bits [`FlushGuard::with_bits`] takes to flush.
#[cfg(target_arch = "x86_64")]
const FLUSH_BITS: u32 = FTZ_DAZ;
#[cfg(not(target_arch = "x86_64"))]
const FLUSH_BITS: u32 = 0;

/// This thread's flush bits (for [`FlushGuard::with_bits`] on another).
pub(crate) fn current_bits() -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        read_csr() & FTZ_DAZ
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// A parallel loop's body that runs in this thread's flush state on whichever thread takes
/// a piece of it.
///
/// Why not rely on the workers' own state: a worker that waits inside a region (a `join` of
/// one of its loops, or a region handed to it by `on_worker.rs` in its caller's state) takes
/// queued work from other loops and regions, and would run it in the waiting region's state.
/// So a product's pieces flush (the stage set that on the thread that starts the loop) and a
/// pooling or summing loop's pieces keep IEEE subnormals wherever they run. Costs one
/// `stmxcsr` a piece, and an `ldmxcsr` only where the state differs.
pub(crate) fn carried<T, R>(body: impl Fn(T) -> R + Sync + Send) -> impl Fn(T) -> R + Sync + Send {
    let bits = current_bits();
    move |piece| {
        let _state = FlushGuard::with_bits(bits);
        body(piece)
    }
}

/// Sets FTZ and DAZ on the current thread.
fn set_on_this_thread() {
    #[cfg(target_arch = "x86_64")]
    write_csr(read_csr() | FTZ_DAZ);
}

/// Sets FTZ and DAZ on a worker thread as it starts (unless turned off), as rayon's workers.
pub(crate) fn worker_start() {
    if enabled() {
        set_on_this_thread();
    }
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

/// The current thread's FTZ and DAZ set (`flush`) or cleared until dropped, then the thread's
/// own MXCSR again.
pub(crate) struct FlushGuard {
    #[cfg(target_arch = "x86_64")]
    saved: Option<u32>,
}

impl FlushGuard {
    /// Flushing for a product stage (a no-op when `THUNDER_CPU_SIMD_FTZ=0`).
    pub(crate) fn flush() -> FlushGuard {
        if !enabled() {
            return FlushGuard {
                #[cfg(target_arch = "x86_64")]
                saved: None,
            };
        }
        FlushGuard::set(true)
    }

    /// The flush bits of [`current_bits`] from another thread, on this one.
    pub(crate) fn with_bits(bits: u32) -> FlushGuard {
        #[cfg(target_arch = "x86_64")]
        {
            let saved = read_csr();
            let want = (saved & !FTZ_DAZ) | (bits & FTZ_DAZ);
            if want == saved {
                return FlushGuard { saved: None };
            }
            write_csr(want);
            FlushGuard { saved: Some(saved) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = bits;
            FlushGuard {}
        }
    }

    /// IEEE subnormals for a fused loop's chunk.
    pub(crate) fn ieee() -> FlushGuard {
        FlushGuard::set(false)
    }

    fn set(flush: bool) -> FlushGuard {
        FlushGuard::with_bits(if flush { FLUSH_BITS } else { 0 })
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
