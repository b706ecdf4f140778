//! thunder-core: the library users depend on. A tensor program written against the ltorch
//! [`Tensor`] API is traced into a [`ir::Trace`], transformed by passes, partitioned among
//! executor plugins and run.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod autograd;
pub mod clang;
/// The host's CUDA runtime (its own crate, `thunder-cuda-runtime`).
pub use thunder_cuda_runtime as cuda;
pub mod device;
pub mod dtype;
pub mod error;
pub mod host;
pub mod ir;
pub mod jit;
pub mod passes;
pub mod prims;
pub mod runtime;
pub mod tensor;
mod tensor_ops;
pub mod text;
pub mod trace_ctx;

pub use device::Device;
pub use dtype::DType;
pub use error::{Error, OpErrorKind, Result};
pub use host::PluginHost;
pub use jit::{compile_trace, compile_trace_with_static, jit, jit_with, Jitted, Traces};
pub use runtime::Array;
pub use tensor::Tensor;
