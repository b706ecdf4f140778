//! The CUDA device runtime of the host (thunder-core re-exports it as `thunder_core::cuda`).
//!
//! `cudarc` loads `libcuda` at run time (`dynamic-loading`), so thunder builds and runs on
//! machines without CUDA; there every entry point here returns [`CudaError::NoCudaDriver`] with the
//! reason, and nothing panics.
//!
//! Per device the runtime keeps the process-wide **primary context** (the one the CUDA runtime
//! API, PyTorch and cuBLAS also use, so handles interoperate), **one stream** that every region
//! of every program on that device is enqueued on, and a **stream-ordered caching allocator**
//! ([`pool`]): because all work of a device is ordered on its one stream, a block freed by one
//! step can be handed to the next step at once, without a device synchronization.
//!
//! Plugins see the raw `CUcontext`, `CUstream` and device pointers through the ABI's
//! `ExecContext` and `TensorDesc`, and allocate through `HostServices::alloc`, which lands in
//! the same pool.

mod driver;
mod external;
mod graph;
mod pool;

pub use driver::{device_count, device_info, synchronize, DeviceInfo};
pub use external::{external_waits, wait_for_external};
pub use pool::{empty_cache, stats, DevicePoolStats};

pub use driver::{copy_d2d, copy_d2h, copy_h2d, exec_context, memset_zero};
pub use graph::{begin_capture, Capture, CudaGraph};
pub use pool::{alloc, free, GraphMemory};

/// Why a CUDA call could not be made or failed; thunder-core turns each into its own error of
/// the same name and words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CudaError {
    /// No usable driver on this machine (no libcuda, no device, a failed init).
    #[error("no CUDA driver: {reason}")]
    NoCudaDriver { reason: String },

    /// A CUDA driver call failed.
    #[error("CUDA {call} failed: {message}")]
    Cuda { call: String, message: String },

    /// A request that cannot be met (a device that does not exist, out of memory).
    #[error("{0}")]
    Usage(String),
}

pub type Result<T, E = CudaError> = std::result::Result<T, E>;
