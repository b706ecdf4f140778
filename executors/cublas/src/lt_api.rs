//! The cuBLASLt entry points this plugin calls, resolved from one library that it picks itself.
//!
//! cudarc opens `libcublasLt.so` by its first matching name, which on a machine with the CUDA
//! toolkit on the loader's path is the toolkit's copy even when the process (PyTorch) has
//! already mapped its own `libcublasLt.so.13`: a second load of a library of hundreds of MB,
//! about 70 ms of every fresh process's first compile on an H100 host
//! (`scripts/gpu/lib_load_times.py`). A copy already mapped in the process is used when there
//! is one; otherwise the first of cudarc's names that opens.

use cudarc::cublaslt::sys::{
    cublasComputeType_t, cublasLtHandle_t, cublasLtMatmulAlgo_t, cublasLtMatmulDescAttributes_t,
    cublasLtMatmulDesc_t, cublasLtMatmulHeuristicResult_t, cublasLtMatmulPreferenceAttributes_t,
    cublasLtMatmulPreference_t, cublasLtMatrixLayoutAttribute_t, cublasLtMatrixLayout_t,
    cublasStatus_t, cudaDataType, cudaDataType_t, cudaStream_t,
};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

type Status = cublasStatus_t;

/// The versioned names a process's own cuBLASLt is mapped under (PyTorch's wheels ship these).
const MAPPED_NAMES: [&str; 2] = ["libcublasLt.so.13", "libcublasLt.so.12"];

#[allow(clippy::type_complexity)]
pub struct LtApi {
    /// Where the entry points come from; kept open for the process.
    _lib: libloading::Library,
    pub create: unsafe extern "C" fn(*mut cublasLtHandle_t) -> Status,
    pub matmul_desc_create: unsafe extern "C" fn(
        *mut cublasLtMatmulDesc_t,
        cublasComputeType_t,
        cudaDataType_t,
    ) -> Status,
    pub matmul_desc_set_attribute: unsafe extern "C" fn(
        cublasLtMatmulDesc_t,
        cublasLtMatmulDescAttributes_t,
        *const c_void,
        usize,
    ) -> Status,
    pub matmul_desc_destroy: unsafe extern "C" fn(cublasLtMatmulDesc_t) -> Status,
    pub matrix_layout_create:
        unsafe extern "C" fn(*mut cublasLtMatrixLayout_t, cudaDataType, u64, u64, i64) -> Status,
    pub matrix_layout_set_attribute: unsafe extern "C" fn(
        cublasLtMatrixLayout_t,
        cublasLtMatrixLayoutAttribute_t,
        *const c_void,
        usize,
    ) -> Status,
    pub matrix_layout_destroy: unsafe extern "C" fn(cublasLtMatrixLayout_t) -> Status,
    pub preference_create: unsafe extern "C" fn(*mut cublasLtMatmulPreference_t) -> Status,
    pub preference_set_attribute: unsafe extern "C" fn(
        cublasLtMatmulPreference_t,
        cublasLtMatmulPreferenceAttributes_t,
        *const c_void,
        usize,
    ) -> Status,
    pub preference_destroy: unsafe extern "C" fn(cublasLtMatmulPreference_t) -> Status,
    pub algo_get_heuristic: unsafe extern "C" fn(
        cublasLtHandle_t,
        cublasLtMatmulDesc_t,
        cublasLtMatrixLayout_t,
        cublasLtMatrixLayout_t,
        cublasLtMatrixLayout_t,
        cublasLtMatrixLayout_t,
        cublasLtMatmulPreference_t,
        c_int,
        *mut cublasLtMatmulHeuristicResult_t,
        *mut c_int,
    ) -> Status,
    pub matmul: unsafe extern "C" fn(
        cublasLtHandle_t,
        cublasLtMatmulDesc_t,
        *const c_void,
        *const c_void,
        cublasLtMatrixLayout_t,
        *const c_void,
        cublasLtMatrixLayout_t,
        *const c_void,
        *const c_void,
        cublasLtMatrixLayout_t,
        *mut c_void,
        cublasLtMatrixLayout_t,
        *const cublasLtMatmulAlgo_t,
        *mut c_void,
        usize,
        cudaStream_t,
    ) -> Status,
}

/// A copy of cuBLASLt the process has already mapped, under one of [`MAPPED_NAMES`].
fn already_mapped() -> Option<libloading::Library> {
    use libloading::os::unix::{Library, RTLD_LAZY};
    // <dlfcn.h>'s RTLD_NOLOAD on Linux (glibc and musl): open only what is already loaded.
    const RTLD_NOLOAD: c_int = 0x4;
    MAPPED_NAMES.iter().find_map(|&name| {
        // SAFETY: RTLD_NOLOAD maps nothing new and runs no initializer; it only returns a
        // reference to a library that is already loaded.
        unsafe { Library::open(Some(name), RTLD_NOLOAD | RTLD_LAZY) }
            .ok()
            .map(Into::into)
    })
}

/// The first of cudarc's names for cuBLASLt that opens, as cudarc itself would pick.
fn first_that_opens() -> Option<libloading::Library> {
    cudarc::get_lib_name_candidates("cublasLt")
        .into_iter()
        .find_map(|name| {
            // SAFETY: opening cuBLASLt runs its initializers, as cudarc's own load would.
            unsafe { libloading::Library::new(&name) }.ok()
        })
}

fn symbol<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, String> {
    // SAFETY: each `T` is the entry point's C signature as cuBLASLt's header declares it
    // (copied from cudarc's bindings of the same header).
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("cuBLASLt has no {name}: {e}"))
}

fn load() -> Result<LtApi, String> {
    let lib = already_mapped()
        .or_else(first_that_opens)
        .ok_or_else(|| "cuBLASLt (libcublasLt.so) was not found".to_string())?;
    Ok(LtApi {
        create: symbol(&lib, "cublasLtCreate")?,
        matmul_desc_create: symbol(&lib, "cublasLtMatmulDescCreate")?,
        matmul_desc_set_attribute: symbol(&lib, "cublasLtMatmulDescSetAttribute")?,
        matmul_desc_destroy: symbol(&lib, "cublasLtMatmulDescDestroy")?,
        matrix_layout_create: symbol(&lib, "cublasLtMatrixLayoutCreate")?,
        matrix_layout_set_attribute: symbol(&lib, "cublasLtMatrixLayoutSetAttribute")?,
        matrix_layout_destroy: symbol(&lib, "cublasLtMatrixLayoutDestroy")?,
        preference_create: symbol(&lib, "cublasLtMatmulPreferenceCreate")?,
        preference_set_attribute: symbol(&lib, "cublasLtMatmulPreferenceSetAttribute")?,
        preference_destroy: symbol(&lib, "cublasLtMatmulPreferenceDestroy")?,
        algo_get_heuristic: symbol(&lib, "cublasLtMatmulAlgoGetHeuristic")?,
        matmul: symbol(&lib, "cublasLtMatmul")?,
        _lib: lib,
    })
}

/// cuBLASLt's entry points, loaded once (or why they cannot be).
pub fn api() -> Result<&'static LtApi, String> {
    static API: OnceLock<Result<LtApi, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// `Ok` for `CUBLAS_STATUS_SUCCESS`, else an error naming the call and the status.
pub fn check(call: &str, status: Status) -> Result<(), String> {
    if status == cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(format!("{call}: {status:?}"))
    }
}
