//! The CUDA driver and NVRTC as this plugin sees them: whether they are usable here, device
//! properties, loading modules and launching.
//!
//! Both libraries are loaded at run time by `cudarc`, whose loader panics when a library or
//! symbol is missing; every first touch goes through [`guarded`] so that becomes a reason
//! string instead (the plugin then reports itself unavailable).

use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::sync::OnceLock;

/// What compiling for and launching on a device needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceProps {
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    /// Shared memory a block may have when its kernel opts in (bytes).
    pub max_shared_optin: i32,
}

#[derive(Debug, Clone)]
pub struct Runtime {
    pub driver_version: i32,
    pub nvrtc_version: (i32, i32),
    pub device_count: i32,
}

pub use thunder_abi::export::catch_panic as guarded;

/// The driver and NVRTC, or why they cannot be used (checked once).
pub fn runtime() -> Result<&'static Runtime, String> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            guarded("loading CUDA", || {
                // SAFETY: only probes whether the libraries can be opened.
                if !unsafe { sys::is_culib_present() } {
                    return Err("no CUDA driver: libcuda.so was not found".into());
                }
                // SAFETY: as above.
                if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                    return Err("NVRTC (libnvrtc.so) was not found".into());
                }
                result::init().map_err(|e| format!("no CUDA driver: cuInit failed: {e:?}"))?;
                let device_count = result::device::get_count()
                    .map_err(|e| format!("cuDeviceGetCount failed: {e:?}"))?;
                if device_count <= 0 {
                    return Err("the CUDA driver reports no devices".into());
                }
                let mut driver_version = 0;
                // SAFETY: writes one int.
                unsafe { sys::cuDriverGetVersion(&mut driver_version) }
                    .result()
                    .map_err(|e| format!("cuDriverGetVersion failed: {e:?}"))?;
                let (mut major, mut minor) = (0, 0);
                // SAFETY: writes two ints.
                let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
                if status != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
                    return Err(format!("nvrtcVersion failed: {status:?}"));
                }
                Ok(Runtime {
                    driver_version,
                    nvrtc_version: (major, minor),
                    device_count,
                })
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

pub fn props(ordinal: u32) -> Result<DeviceProps, String> {
    guarded("device properties", || {
        let dev = result::device::get(ordinal as i32)
            .map_err(|e| format!("cuDeviceGet({ordinal}) failed: {e:?}"))?;
        let attr = |a| {
            // SAFETY: `dev` is valid; reads one attribute.
            unsafe { result::device::get_attribute(dev, a) }
                .map_err(|e| format!("cuDeviceGetAttribute failed: {e:?}"))
        };
        use sys::CUdevice_attribute::*;
        Ok(DeviceProps {
            compute_capability: (
                attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            max_shared_optin: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        })
    })
}

/// Makes the device's primary context current (the host's context; retaining it again only
/// bumps its reference count, and it is never released, as the host never releases it).
pub fn make_current(ordinal: u32) -> Result<(), String> {
    guarded("cuCtxSetCurrent", || {
        let dev = result::device::get(ordinal as i32)
            .map_err(|e| format!("cuDeviceGet({ordinal}) failed: {e:?}"))?;
        // SAFETY: a valid device; the context stays retained for the process.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(|e| format!("cuDevicePrimaryCtxRetain failed: {e:?}"))?;
        // SAFETY: a retained context.
        unsafe { result::ctx::set_current(ctx) }
            .map_err(|e| format!("cuCtxSetCurrent failed: {e:?}"))
    })
}

/// A loaded kernel function. The module is never unloaded: compiled regions hold kernels for
/// as long as the process may run them.
#[derive(Debug, Clone, Copy)]
pub struct Function {
    pub func: sys::CUfunction,
}

// SAFETY: CUfunction handles may be used from any thread with their context current.
unsafe impl Send for Function {}
unsafe impl Sync for Function {}

/// [`load`], once per image, kernel name and device in the process: the same kernel in every
/// layer of a model (the same source, so the same image) shares one module. Each load was a
/// `cuModuleLoadData` at translation, hundreds for a GPT-2 step. Functions carry no state
/// between launches (no module globals; the one attribute set, [`allow_shared`], follows from
/// the source, which is the same), so sharing one is safe.
pub fn load_once(ordinal: u32, image: &[u8], name: &str) -> Result<Function, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};
    // Keyed by the image itself (tens of KB each, a few dozen distinct), not a hash of it.
    type Loaded = Mutex<HashMap<(u32, String, Vec<u8>), Function>>;
    static LOADED: OnceLock<Loaded> = OnceLock::new();
    let key = (ordinal, name.to_string(), image.to_vec());
    let loaded = LOADED.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(f) = loaded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(*f);
    }
    let f = load(image, name)?;
    loaded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, f);
    Ok(f)
}

pub fn load(image: &[u8], name: &str) -> Result<Function, String> {
    guarded("cuModuleLoadData", || {
        // The image must be NUL-terminated when it is PTX; a cubin ignores the extra byte.
        let mut bytes = image.to_vec();
        bytes.push(0);
        // SAFETY: a cubin or NUL-terminated PTX image from NVRTC; the context is current.
        let module = unsafe { result::module::load_data(bytes.as_ptr() as *const c_void) }
            .map_err(|e| format!("cuModuleLoadData failed: {e:?}"))?;
        let cname = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: `module` was just loaded.
        let func = unsafe { result::module::get_function(module, cname) }
            .map_err(|e| format!("cuModuleGetFunction({name}) failed: {e:?}"))?;
        Ok(Function { func })
    })
}

/// Lets `f` have `bytes` of dynamic shared memory a block (beyond the 48 KiB every kernel may
/// have without asking). Setting the same value again, for a function shared by several
/// regions, changes nothing.
pub fn allow_shared(f: Function, bytes: u32) -> Result<(), String> {
    if bytes <= 48 * 1024 {
        return Ok(());
    }
    guarded("cuFuncSetAttribute", || {
        let value = i32::try_from(bytes).map_err(|e| e.to_string())?;
        // SAFETY: a loaded function; the attribute takes an int.
        unsafe {
            result::function::set_function_attribute(
                f.func,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                value,
            )
        }
        .map_err(|e| format!("cuFuncSetAttribute(max dynamic shared = {bytes}) failed: {e:?}"))
    })
}

/// Launches `f` on `stream` with device-pointer arguments.
pub fn launch(
    f: Function,
    grid: u32,
    block: u32,
    stream: *mut c_void,
    pointers: &[u64],
) -> Result<(), String> {
    launch_with_shared(f, grid, block, 0, stream, pointers)
}

/// [`launch`] with `shared` bytes of dynamic shared memory a block.
pub fn launch_with_shared(
    f: Function,
    grid: u32,
    block: u32,
    shared: u32,
    stream: *mut c_void,
    pointers: &[u64],
) -> Result<(), String> {
    let mut values: Vec<u64> = pointers.to_vec();
    let mut params: Vec<*mut c_void> = values
        .iter_mut()
        .map(|p| p as *mut u64 as *mut c_void)
        .collect();
    guarded("cuLaunchKernel", || {
        // SAFETY: the kernel takes exactly these pointer parameters (generated together), and
        // each points at memory of the size the kernel indexes (checked by the caller).
        unsafe {
            result::launch_kernel(
                f.func,
                (grid, 1, 1),
                (block, 1, 1),
                shared,
                stream as sys::CUstream,
                &mut params,
            )
        }
        .map_err(|e| format!("cuLaunchKernel failed: {e:?}"))
    })
}
