//! What the host gives a plugin: memory, logging, and the device context of each run.

use crate::tensor::DeviceDesc;
use abi_stable::{std_types::RStr, StableAbi};
use std::ffi::c_void;

#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
    Trace = 4,
}

/// Host services, passed once when the executor is created. Memory for every device is taken
/// from (and returned to) the host, so it is pooled and accounted in one place.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct HostServices {
    /// Returns null when the device has no memory left or is unknown. Memory a region's `run`
    /// takes must be freed before `run` returns, or taken on an earlier run: a run may be
    /// captured into a CUDA graph, and what a capture allocates belongs to that graph.
    pub alloc: extern "C" fn(device: DeviceDesc, bytes: usize, align: usize) -> *mut c_void,
    /// Frees a pointer returned by `alloc` with the same size and alignment.
    pub free: extern "C" fn(device: DeviceDesc, ptr: *mut c_void, bytes: usize, align: usize),
    pub log: extern "C" fn(level: LogLevel, plugin: RStr<'_>, message: RStr<'_>),
}

/// Per-run device context: raw handles owned by the host. For CPU both are null; for CUDA they
/// are the primary `CUcontext` and the `CUstream` to enqueue on.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct ExecContext {
    pub device: DeviceDesc,
    pub context: *mut c_void,
    pub stream: *mut c_void,
}

impl ExecContext {
    pub const CPU: ExecContext = ExecContext {
        device: DeviceDesc::CPU,
        context: std::ptr::null_mut(),
        stream: std::ptr::null_mut(),
    };
}
