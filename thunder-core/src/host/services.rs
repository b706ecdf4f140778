//! Host services handed to plugins: memory per device and logging.

use crate::runtime::pool::{self, POOL_ALIGN};
use std::alloc::Layout;
use std::ffi::c_void;
use thunder_abi::abi_stable::std_types::RStr;
use thunder_abi::{DeviceDesc, DeviceKind, HostServices, LogLevel};

/// Allocates host memory; zero-byte requests get a dangling, aligned, non-null pointer.
///
/// Alignments up to [`POOL_ALIGN`] come from the runtime's caching pool
/// ([`crate::runtime::pool`]): a freed block is reused by the next request of its size class.
/// Their contents are initialized but arbitrary (zero only when new). Larger alignments go
/// straight to the system allocator.
pub fn cpu_alloc(bytes: usize, align: usize) -> *mut u8 {
    let align = align.max(1).next_power_of_two();
    if bytes == 0 {
        return align.max(POOL_ALIGN) as *mut u8;
    }
    if align <= POOL_ALIGN {
        return pool::alloc(bytes);
    }
    match Layout::from_size_align(bytes, align) {
        // SAFETY: the layout has a non-zero size.
        Ok(layout) => unsafe { std::alloc::alloc(layout) },
        Err(_) => std::ptr::null_mut(),
    }
}

/// Frees memory from [`cpu_alloc`] with the same size and alignment.
///
/// # Safety
/// `ptr` must come from `cpu_alloc(bytes, align)` and not be freed twice.
pub unsafe fn cpu_free(ptr: *mut u8, bytes: usize, align: usize) {
    let align = align.max(1).next_power_of_two();
    if bytes == 0 || ptr.is_null() {
        return;
    }
    if align <= POOL_ALIGN {
        // SAFETY: cpu_alloc took it from the pool with this size.
        return unsafe { pool::free(ptr, bytes) };
    }
    if let Ok(layout) = Layout::from_size_align(bytes, align) {
        // SAFETY: guaranteed by the caller.
        unsafe { std::alloc::dealloc(ptr, layout) }
    }
}

extern "C" fn alloc(device: DeviceDesc, bytes: usize, align: usize) -> *mut c_void {
    match device.kind {
        DeviceKind::Cpu => cpu_alloc(bytes, align) as *mut c_void,
        // The alignment of cuMemAlloc blocks (256 bytes) covers every dtype and vector width.
        DeviceKind::Cuda if align <= 256 => match crate::cuda::alloc(device.index, bytes) {
            Ok(0) => 256 as *mut c_void,
            Ok(ptr) => ptr as *mut c_void,
            Err(e) => {
                tracing::warn!("device allocation of {bytes} bytes failed: {e}");
                std::ptr::null_mut()
            }
        },
        DeviceKind::Cuda => std::ptr::null_mut(),
    }
}

extern "C" fn free(device: DeviceDesc, ptr: *mut c_void, bytes: usize, align: usize) {
    match device.kind {
        // SAFETY: the ABI contract says plugins free only what `alloc` gave them.
        DeviceKind::Cpu => unsafe { cpu_free(ptr as *mut u8, bytes, align) },
        DeviceKind::Cuda => crate::cuda::free(device.index, ptr as u64, bytes),
    }
}

extern "C" fn log(level: LogLevel, plugin: RStr<'_>, message: RStr<'_>) {
    let (plugin, message) = (plugin.as_str(), message.as_str());
    match level {
        LogLevel::Error => tracing::error!(plugin, "{message}"),
        LogLevel::Warn => tracing::warn!(plugin, "{message}"),
        LogLevel::Info => tracing::info!(plugin, "{message}"),
        LogLevel::Debug => tracing::debug!(plugin, "{message}"),
        LogLevel::Trace => tracing::trace!(plugin, "{message}"),
    }
}

pub fn host_services() -> HostServices {
    HostServices { alloc, free, log }
}
