//! The device error flag read without stopping the host.
//!
//! Gathers, scatters, cross-entropy and integer division report a bad index or a division by
//! zero through a 16-byte flag (code, value). Reading it at once means waiting for the kernels:
//! one `cuStreamSynchronize` per run, which in a GPT-2 training step (embedding gathers and
//! scatters, cross-entropy) left the GPU idle while the host caught up after each wait.
//!
//! So the first run of each compiled op still waits and reports at once (a one-off run, a
//! test, a CLI call gets its error from the run that caused it), and later runs copy the flag
//! to pinned host memory behind their kernels; the next run of the op reads that copy and
//! reports an error found there, naming the op, as CUDA reports device faults asynchronously
//! (PyTorch's device-side asserts surface the same way, at a later call). `sync_checks = true`
//! or `THUNDER_CUDA_SYNC_CHECKS=1` makes every run wait and report at once.

use crate::run::cu;
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::sync::OnceLock;
use thunder_abi::{DeviceDesc, HostServices, LogLevel, PluginError};

const BYTES: usize = 16;

/// Whether `THUNDER_CUDA_SYNC_CHECKS` asks every run to wait for its flag (read once).
pub fn sync_checks_from_env() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("THUNDER_CUDA_SYNC_CHECKS")
            .map(|v| !matches!(v.trim(), "" | "0" | "false"))
            .unwrap_or(false)
    })
}

/// A compiled op's flag for runs that do not wait: the kernels' copy on the device, and the
/// pinned host word each run's copy lands in.
pub struct DeferredFlag {
    device_ptr: u64,
    host: *mut i64,
    services: HostServices,
    device: DeviceDesc,
    context: sys::CUcontext,
    stream: sys::CUstream,
}

// SAFETY: the pointers are a device block and a pinned host block owned by this value; the
// context and stream are process-wide handles the host keeps alive. Access goes through the
// op's mutex.
unsafe impl Send for DeferredFlag {}
unsafe impl Sync for DeferredFlag {}

impl DeferredFlag {
    /// Allocates both words (the context current, `stream` the host's stream of `device`).
    pub fn new(
        services: HostServices,
        device: DeviceDesc,
        context: *mut c_void,
        stream: *mut c_void,
    ) -> Result<Self, PluginError> {
        let device_ptr = (services.alloc)(device, BYTES, 256) as u64;
        if device_ptr == 0 {
            return Err(PluginError::internal(
                "cuda-kernels: out of device memory for an error flag",
            ));
        }
        // SAFETY: a plain pinned allocation (no flags); freed in Drop.
        let host = match unsafe { result::malloc_host(BYTES, 0) } {
            Ok(p) => p as *mut i64,
            Err(e) => {
                (services.free)(device, device_ptr as *mut c_void, BYTES, 256);
                return Err(PluginError::internal(format!(
                    "cuda-kernels: cuMemHostAlloc for an error flag: {e:?}"
                )));
            }
        };
        // SAFETY: `host` holds BYTES bytes, just allocated.
        unsafe { std::ptr::write_bytes(host as *mut u8, 0, BYTES) };
        Ok(DeferredFlag {
            device_ptr,
            host,
            services,
            device,
            context: context as sys::CUcontext,
            stream: stream as sys::CUstream,
        })
    }

    /// The (code, value) an earlier run's copy brought back, if any, cleared so that it is
    /// reported once. The stream is in order: once a nonzero copy has landed, every later copy
    /// comes from a later run, so clearing cannot lose or repeat an error.
    pub fn take_found(&self) -> Option<(i64, i64)> {
        // SAFETY: the pinned block holds two i64; the DMA engine may write it at any time, so
        // it is read (and cleared) with volatile accesses.
        unsafe {
            let code = std::ptr::read_volatile(self.host);
            if code == 0 {
                return None;
            }
            let value = std::ptr::read_volatile(self.host.add(1));
            std::ptr::write_volatile(self.host, 0);
            std::ptr::write_volatile(self.host.add(1), 0);
            Some((code, value))
        }
    }

    /// Before the kernels: clears the device word on the stream; returns it for the kernels.
    pub fn arm(&self) -> Result<u64, PluginError> {
        // SAFETY: BYTES bytes of device memory owned by this flag, on the host's stream.
        cu("cuMemsetD8Async", unsafe {
            result::memset_d8_async(self.device_ptr, 0, BYTES, self.stream)
        })?;
        Ok(self.device_ptr)
    }

    /// After the kernels: copies the device word to the pinned host word, without waiting.
    pub fn collect(&self) -> Result<(), PluginError> {
        // SAFETY: both blocks hold BYTES bytes and live until Drop, which waits for the stream
        // first; pinned memory makes the copy truly asynchronous.
        cu("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                self.host as *mut c_void,
                self.device_ptr,
                BYTES,
                self.stream,
            )
            .result()
        })
    }
}

impl Drop for DeferredFlag {
    fn drop(&mut self) {
        // SAFETY: the context and stream outlive every compiled op; the last copy into the
        // pinned word must land before the word is freed.
        let waited = unsafe {
            result::ctx::set_current(self.context)
                .and_then(|_| result::stream::synchronize(self.stream))
        };
        if let Some((code, value)) = self.take_found() {
            let message = format!(
                "cuda-kernels: the last run of an op set device error {code} (value {value}) \
                 that no later run reported"
            );
            (self.services.log)(
                LogLevel::Error,
                "cuda-kernels".into(),
                message.as_str().into(),
            );
        }
        if waited.is_ok() {
            // SAFETY: allocated by malloc_host in `new`; no copy is pending any more.
            let _ = unsafe { result::free_host(self.host as *mut c_void) };
        }
        (self.services.free)(self.device, self.device_ptr as *mut c_void, BYTES, 256);
    }
}
