//! The CUDA driver as this plugin sees it: whether it is usable here, device properties,
//! loading cubins and launching Triton kernels.
//!
//! The driver is loaded at run time by `cudarc`, whose loader panics when the library or a
//! symbol is missing; every first touch goes through [`guarded`] so that becomes a reason
//! string instead (the plugin then reports itself unavailable).
//!
//! NOT YET RUN ON A GPU: this module is written against Triton's own launcher
//! (`backends/nvidia/driver.c`: `loadBinary` and `_launch`) and checked on CPU only.

use crate::bind::LaunchPlan;
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceProps {
    /// major*10 + minor, as Triton's `target.arch`.
    pub arch: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`.
    pub max_shared_optin: u32,
}

#[derive(Debug, Clone)]
pub struct Runtime {
    /// As `cuDriverGetVersion`: 12040 for CUDA 12.4.
    pub driver_version: i32,
    pub devices: Vec<DeviceProps>,
}

pub use thunder_abi::export::catch_panic as guarded;

/// The driver and its devices, or why they cannot be used (checked once).
pub fn runtime() -> Result<&'static Runtime, String> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            guarded("loading CUDA", || {
                // SAFETY: only probes whether the library can be opened.
                if !unsafe { sys::is_culib_present() } {
                    return Err("no CUDA driver: libcuda.so was not found".into());
                }
                result::init().map_err(|e| format!("no CUDA driver: cuInit failed: {e:?}"))?;
                let count = result::device::get_count()
                    .map_err(|e| format!("cuDeviceGetCount failed: {e:?}"))?;
                if count <= 0 {
                    return Err("the CUDA driver reports no devices".into());
                }
                let mut driver_version = 0;
                // SAFETY: writes one int.
                unsafe { sys::cuDriverGetVersion(&mut driver_version) }
                    .result()
                    .map_err(|e| format!("cuDriverGetVersion failed: {e:?}"))?;
                let devices = (0..count).map(props).collect::<Result<Vec<_>, _>>()?;
                Ok(Runtime {
                    driver_version,
                    devices,
                })
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn props(ordinal: i32) -> Result<DeviceProps, String> {
    let dev = result::device::get(ordinal)
        .map_err(|e| format!("cuDeviceGet({ordinal}) failed: {e:?}"))?;
    let attr = |a| {
        // SAFETY: `dev` is valid; reads one attribute.
        unsafe { result::device::get_attribute(dev, a) }
            .map_err(|e| format!("cuDeviceGetAttribute failed: {e:?}"))
    };
    use sys::CUdevice_attribute::*;
    let major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok(DeviceProps {
        arch: (major * 10 + minor).max(0) as u32,
        max_shared_optin: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0)
            as u32,
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

/// A loaded kernel. The module is never unloaded: compiled regions hold kernels for as long
/// as the process may run them.
#[derive(Debug, Clone, Copy)]
pub struct Function {
    pub func: sys::CUfunction,
}

// SAFETY: CUfunction handles may be used from any thread with their context current.
unsafe impl Send for Function {}
unsafe impl Sync for Function {}

/// Loads a cubin and prepares it the way Triton's `loadBinary` does: a kernel asking for
/// more than 48 KiB of dynamic shared memory prefers shared memory over L1 and opts in with
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` (Triton first tries the oversized
/// shared-memory mode of newer drivers; that is for more than 228 KiB, which sm_90 lacks).
/// [`load`] of the cubin at `path`, once per file, kernel, launch and device in the process:
/// every layer's attention shares the package's modules (each was a file read and a
/// `cuModuleLoadData` at translation). The function attributes `load` sets are the same for
/// every use of the same launch.
pub fn load_file_once(
    ordinal: u32,
    path: &std::path::Path,
    name: &str,
    shared: u32,
    block: u32,
    props: DeviceProps,
) -> Result<Function, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};
    type Key = (u32, std::path::PathBuf, String, u32, u32);
    static LOADED: OnceLock<Mutex<HashMap<Key, Function>>> = OnceLock::new();
    let key = (ordinal, path.to_path_buf(), name.to_string(), shared, block);
    let loaded = LOADED.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(f) = loaded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(*f);
    }
    let image = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f = load(&image, name, shared, block, props)?;
    loaded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, f);
    Ok(f)
}

pub fn load(
    image: &[u8],
    name: &str,
    shared: u32,
    block: u32,
    props: DeviceProps,
) -> Result<Function, String> {
    guarded("cuModuleLoadData", || {
        if shared > props.max_shared_optin {
            return Err(format!(
                "{name} needs {shared} bytes of shared memory; this device allows {}",
                props.max_shared_optin
            ));
        }
        // SAFETY: an ELF cubin (checked when the package was loaded); the context is current.
        let module = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
            .map_err(|e| format!("cuModuleLoadData failed: {e:?}"))?;
        let cname = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: `module` was just loaded.
        let func = unsafe { result::module::get_function(module, cname) }
            .map_err(|e| format!("cuModuleGetFunction({name}) failed: {e:?}"))?;
        use sys::CUfunction_attribute::*;
        // A kernel whose registers allow fewer threads than num_warps*32 would fail every
        // launch with a bare "too many resources"; say why once, here.
        // SAFETY: `func` is a valid function of a loaded module.
        let max_threads = unsafe {
            result::function::get_function_attribute(func, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        }
        .map_err(|e| format!("cuFuncGetAttribute failed: {e:?}"))?;
        if (max_threads as i64) < i64::from(block) {
            return Err(format!(
                "{name} allows at most {max_threads} threads per block on this device, but its metadata launches {block} (num_warps * 32)"
            ));
        }
        if shared > 48 * 1024 {
            // SAFETY: as above.
            unsafe {
                result::function::set_function_cache_config(
                    func,
                    sys::CUfunc_cache_enum::CU_FUNC_CACHE_PREFER_SHARED,
                )
            }
            .map_err(|e| format!("cuFuncSetCacheConfig failed: {e:?}"))?;
            // SAFETY: `func` is a valid function of a loaded module.
            let static_shared = unsafe {
                result::function::get_function_attribute(func, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
            }
            .map_err(|e| format!("cuFuncGetAttribute failed: {e:?}"))?;
            // As Triton: allow everything the device offers beyond the static part.
            let dynamic = props.max_shared_optin as i32 - static_shared;
            // SAFETY: as above.
            unsafe {
                result::function::set_function_attribute(
                    func,
                    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic,
                )
            }
            .map_err(|e| {
                format!(
                    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {dynamic}) failed: {e:?}"
                )
            })?;
        }
        Ok(Function { func })
    })
}

/// Launches `f` with `plan`'s grid and block and the parameter slots of
/// [`crate::bind::param_slots`].
pub fn launch(
    f: Function,
    plan: &LaunchPlan,
    stream: *mut c_void,
    mut slots: Vec<[u8; 8]>,
) -> Result<(), String> {
    let mut params: Vec<*mut c_void> = slots
        .iter_mut()
        .map(|s| s.as_mut_ptr() as *mut c_void)
        .collect();
    guarded("cuLaunchKernel", || {
        // SAFETY: the parameter list matches the kernel's (checked against the PTX and the
        // signature when the package loaded), and every tensor parameter points at memory of
        // the shape the constraints admitted.
        unsafe {
            result::launch_kernel(
                f.func,
                (plan.grid[0], plan.grid[1], plan.grid[2]),
                (plan.block, 1, 1),
                plan.shared,
                stream as sys::CUstream,
                &mut params,
            )
        }
        .map_err(|e| format!("cuLaunchKernel failed: {e:?}"))
    })
}
