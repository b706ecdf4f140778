//! What the NVRTC-based CUDA plugins (`cuda-fuser`, `cuda-kernels`) share, in one place: the
//! driver/NVRTC probe and device helpers ([`device`]) and the NVRTC compiler with its caches
//! ([`nvrtc`]). A plain library (no plugin entry point), so each plugin links its own copy.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

pub mod cross_entropy;
pub mod device;
pub mod nvrtc;
