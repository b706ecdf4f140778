//! Loading the driver, the primary context and stream of each device, and copies.

use crate::{CudaError as Error, Result};
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use thunder_abi::{DeviceDesc, DeviceKind, ExecContext};

/// What a device is, for `thunder plugins`/`examine` and for plugins choosing a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: u32,
    pub name: String,
    /// Compute capability, e.g. `(9, 0)` for an H100.
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
    /// The driver's CUDA version, e.g. 13000.
    pub driver_version: i32,
}

/// The primary context and the stream of one device. Both live for the whole process: the
/// primary context is retained once and never released, so device pointers handed out stay
/// valid until exit.
pub struct DeviceRuntime {
    pub info: DeviceInfo,
    pub context: sys::CUcontext,
    pub stream: sys::CUstream,
}

// SAFETY: CUcontext and CUstream are process-wide handles the driver allows from any thread
// (the context is made current on each thread before use).
unsafe impl Send for DeviceRuntime {}
unsafe impl Sync for DeviceRuntime {}

struct Driver {
    devices: Vec<OnceLock<Result<DeviceRuntime>>>,
    version: i32,
}

fn no_driver(reason: impl Into<String>) -> Error {
    Error::NoCudaDriver {
        reason: reason.into(),
    }
}

fn cuda_error(call: &str, e: result::DriverError) -> Error {
    Error::Cuda {
        call: call.to_string(),
        message: format!("{e:?}"),
    }
}

/// Runs a driver call, turning a panic of the loader (a missing library or symbol) into an error.
fn guarded<T>(call: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(no_driver(format!("{call}: {message}")))
        }
    }
}

fn driver() -> Result<&'static Driver> {
    static DRIVER: OnceLock<Result<Driver>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            guarded("cuInit", || {
                // SAFETY: only probes whether the library can be opened.
                if !unsafe { sys::is_culib_present() } {
                    return Err(no_driver(
                        "libcuda.so was not found (no NVIDIA driver on this machine, or it is \
                         not on the loader's path)",
                    ));
                }
                result::init().map_err(|e| no_driver(format!("cuInit failed: {e:?}")))?;
                let count =
                    result::device::get_count().map_err(|e| cuda_error("cuDeviceGetCount", e))?;
                let mut version = 0;
                // SAFETY: writes one int.
                unsafe { sys::cuDriverGetVersion(&mut version) }
                    .result()
                    .map_err(|e| cuda_error("cuDriverGetVersion", e))?;
                if count <= 0 {
                    return Err(no_driver("the CUDA driver reports no devices"));
                }
                Ok(Driver {
                    devices: (0..count).map(|_| OnceLock::new()).collect(),
                    version,
                })
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Number of CUDA devices, or why there are none to use.
pub fn device_count() -> Result<usize> {
    Ok(driver()?.devices.len())
}

pub fn device(ordinal: u32) -> Result<&'static DeviceRuntime> {
    let driver = driver()?;
    let slot = driver.devices.get(ordinal as usize).ok_or_else(|| {
        Error::Usage(format!(
            "cuda:{ordinal} does not exist: this machine has {} CUDA device(s)",
            driver.devices.len()
        ))
    })?;
    slot.get_or_init(|| guarded("cuDevicePrimaryCtxRetain", || open(ordinal, driver.version)))
        .as_ref()
        .map_err(Clone::clone)
}

fn open(ordinal: u32, driver_version: i32) -> Result<DeviceRuntime> {
    let dev = result::device::get(ordinal as i32).map_err(|e| cuda_error("cuDeviceGet", e))?;
    // SAFETY: `dev` is a valid device; the retained context is never released (see above).
    let context = unsafe { result::primary_ctx::retain(dev) }
        .map_err(|e| cuda_error("cuDevicePrimaryCtxRetain", e))?;
    // SAFETY: a context just retained.
    unsafe { result::ctx::set_current(context) }.map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
    // Non-blocking: work of other libraries on the legacy default stream does not serialize ours.
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
        .map_err(|e| cuda_error("cuStreamCreate", e))?;
    let attr = |a| {
        // SAFETY: `dev` is valid; reads one attribute.
        unsafe { result::device::get_attribute(dev, a) }
            .map_err(|e| cuda_error("cuDeviceGetAttribute", e))
    };
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let info = DeviceInfo {
        ordinal,
        name: result::device::get_name(dev).map_err(|e| cuda_error("cuDeviceGetName", e))?,
        compute_capability: (major, minor),
        // SAFETY: `dev` is valid.
        total_memory: unsafe { result::device::total_mem(dev) }
            .map_err(|e| cuda_error("cuDeviceTotalMem", e))?,
        driver_version,
    };
    tracing::info!(device = ordinal, name = %info.name, "CUDA device opened");
    Ok(DeviceRuntime {
        info,
        context,
        stream,
    })
}

/// Makes the device's primary context current on this thread and returns the runtime. While
/// another thread captures the device's stream into a graph, waits for it to finish first.
pub fn current(ordinal: u32) -> Result<&'static DeviceRuntime> {
    crate::graph::wait_for_captures(ordinal);
    let rt = device(ordinal)?;
    // SAFETY: a retained context.
    unsafe { result::ctx::set_current(rt.context) }
        .map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
    Ok(rt)
}

pub fn device_info(ordinal: u32) -> Result<DeviceInfo> {
    Ok(device(ordinal)?.info.clone())
}

/// The context and stream a plugin enqueues a region's work on.
pub fn exec_context(ordinal: u32) -> Result<ExecContext> {
    let rt = current(ordinal)?;
    Ok(ExecContext {
        device: DeviceDesc {
            kind: DeviceKind::Cuda,
            index: ordinal,
        },
        context: rt.context as *mut c_void,
        stream: rt.stream as *mut c_void,
    })
}

/// Copies host bytes into device memory and waits, so `src` may be dropped after.
pub fn copy_h2d(ordinal: u32, dst: u64, src: &[u8]) -> Result<()> {
    if src.is_empty() {
        return Ok(());
    }
    let rt = current(ordinal)?;
    // SAFETY: `dst` holds at least `src.len()` bytes (the caller allocated it for them); the
    // stream is synchronized before `src` can go away.
    unsafe {
        result::memcpy_htod_async(dst, src, rt.stream)
            .map_err(|e| cuda_error("cuMemcpyHtoDAsync", e))?;
        result::stream::synchronize(rt.stream).map_err(|e| cuda_error("cuStreamSynchronize", e))
    }
}

/// Copies device bytes to the host after all work queued on the device's stream.
pub fn copy_d2h(ordinal: u32, dst: &mut [u8], src: u64) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let rt = current(ordinal)?;
    // SAFETY: `src` holds at least `dst.len()` bytes; the stream is synchronized before return.
    unsafe {
        result::memcpy_dtoh_async(dst, src, rt.stream)
            .map_err(|e| cuda_error("cuMemcpyDtoHAsync", e))?;
        result::stream::synchronize(rt.stream).map_err(|e| cuda_error("cuStreamSynchronize", e))
    }
}

/// Copies `bytes` bytes between two device buffers of `ordinal`, in stream order, without
/// waiting.
pub fn copy_d2d(ordinal: u32, dst: u64, src: u64, bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let rt = current(ordinal)?;
    // SAFETY: both buffers hold `bytes` bytes and outlive the copy (the pool hands a block on
    // only in stream order).
    unsafe { result::memcpy_dtod_async(dst, src, bytes, rt.stream) }
        .map_err(|e| cuda_error("cuMemcpyDtoDAsync", e))
}

/// Zeroes `bytes` bytes at `dst`, in stream order.
pub fn memset_zero(ordinal: u32, dst: u64, bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let rt = current(ordinal)?;
    // SAFETY: `dst` holds `bytes` bytes.
    unsafe { result::memset_d8_async(dst, 0, bytes, rt.stream) }
        .map_err(|e| cuda_error("cuMemsetD8Async", e))
}

pub fn cuda_call_error(call: &str, e: result::DriverError) -> Error {
    cuda_error(call, e)
}

/// Waits for all work queued on the device's stream (for timing and before host reads).
pub fn synchronize(ordinal: u32) -> Result<()> {
    let rt = current(ordinal)?;
    // SAFETY: the device's own stream.
    unsafe { result::stream::synchronize(rt.stream) }
        .map_err(|e| cuda_error("cuStreamSynchronize", e))
}
