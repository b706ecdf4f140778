//! cuBLASLt: one handle and one workspace per device, created on first use and kept for the
//! process; a compiled product holds its descriptors and the algorithm picked for its shape.

use crate::lt_api::{api, check};
use crate::shape::{Gemm, LtMatrix};
use cudarc::cublaslt::sys as ltsys;
use cudarc::driver::{result as cu, sys as cusys};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

pub use thunder_abi::export::catch_panic as guarded;

/// The driver and cuBLASLt, or why they cannot be used (checked once).
pub fn availability() -> Result<i32, String> {
    static STATE: OnceLock<Result<i32, String>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            guarded("loading CUDA", || {
                // SAFETY: only probes whether the libraries can be opened.
                if !unsafe { cusys::is_culib_present() } {
                    return Err("no CUDA driver: libcuda.so was not found".into());
                }
                api()?;
                cu::init().map_err(|e| format!("no CUDA driver: cuInit failed: {e:?}"))?;
                let n = cu::device::get_count().map_err(|e| format!("cuDeviceGetCount: {e:?}"))?;
                if n <= 0 {
                    return Err("the CUDA driver reports no devices".into());
                }
                Ok(n)
            })
        })
        .clone()
}

pub fn make_current(ordinal: u32) -> Result<(), String> {
    let dev = cu::device::get(ordinal as i32).map_err(|e| format!("cuDeviceGet: {e:?}"))?;
    // SAFETY: a valid device; the primary context stays retained for the process (as the host
    // keeps it).
    let ctx = unsafe { cu::primary_ctx::retain(dev) }.map_err(|e| format!("retain: {e:?}"))?;
    // SAFETY: a retained context.
    unsafe { cu::ctx::set_current(ctx) }.map_err(|e| format!("cuCtxSetCurrent: {e:?}"))
}

struct DeviceState {
    handle: ltsys::cublasLtHandle_t,
    workspace: u64,
    workspace_bytes: usize,
}

// SAFETY: a cuBLASLt handle may be used from any thread (calls are serialized per region).
unsafe impl Send for DeviceState {}

fn devices() -> &'static Mutex<HashMap<u32, DeviceState>> {
    static D: OnceLock<Mutex<HashMap<u32, DeviceState>>> = OnceLock::new();
    D.get_or_init(Default::default)
}

/// The device's handle and workspace, created on first use.
fn device_state(ordinal: u32, workspace_bytes: usize) -> Result<(usize, u64, usize), String> {
    let mut map = devices().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(s) = map.get(&ordinal) {
        return Ok((s.handle as usize, s.workspace, s.workspace_bytes));
    }
    make_current(ordinal)?;
    let mut handle: ltsys::cublasLtHandle_t = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check("cublasLtCreate", unsafe { (api()?.create)(&mut handle) })?;
    // SAFETY: the device's context is current.
    let workspace = unsafe { cu::malloc_sync(workspace_bytes.max(1)) }
        .map_err(|e| format!("workspace cuMemAlloc({workspace_bytes}): {e:?}"))?;
    map.insert(
        ordinal,
        DeviceState {
            handle,
            workspace,
            workspace_bytes,
        },
    );
    Ok((handle as usize, workspace, workspace_bytes))
}

fn data_type(d: thunder_abi::DTypeCode) -> ltsys::cudaDataType {
    match d {
        thunder_abi::DTypeCode::F16 => ltsys::cudaDataType::CUDA_R_16F,
        thunder_abi::DTypeCode::BF16 => ltsys::cudaDataType::CUDA_R_16BF,
        _ => ltsys::cudaDataType::CUDA_R_32F,
    }
}

/// The descriptors of one product, reused by every call, and what its calls need besides:
/// the device's handle and workspace and the algorithm, found at compile once cuBLASLt is
/// initialised, else at the first call (see [`prepare`] and [`warm_up`]).
pub struct Prepared {
    pub gemm: Gemm,
    ordinal: u32,
    tf32: bool,
    workspace_bytes: usize,
    ds: Descriptors,
    /// Found at compile or at the first call. The bias pointer is an attribute of the
    /// descriptor, so the lock also keeps calls one at a time.
    ready: Mutex<Option<Ready>>,
}

#[derive(Clone, Copy)]
struct Ready {
    handle: usize,
    workspace: u64,
    workspace_bytes: usize,
    algo: ltsys::cublasLtMatmulAlgo_t,
}

// SAFETY: the descriptors are plain host objects; `ready`'s lock serializes their use.
unsafe impl Send for Prepared {}
unsafe impl Sync for Prepared {}

fn set_attr<T>(
    desc: ltsys::cublasLtMatmulDesc_t,
    attr: ltsys::cublasLtMatmulDescAttributes_t,
    value: &T,
) -> Result<(), String> {
    // SAFETY: `value` is the attribute's C type, read during the call.
    let status = unsafe {
        (api()?.matmul_desc_set_attribute)(
            desc,
            attr,
            value as *const T as *const c_void,
            std::mem::size_of::<T>(),
        )
    };
    check(&format!("cublasLtMatmulDescSetAttribute({attr:?})"), status)
}

fn layout(
    dtype: thunder_abi::DTypeCode,
    m: LtMatrix,
) -> Result<ltsys::cublasLtMatrixLayout_t, String> {
    let api = api()?;
    let mut l: ltsys::cublasLtMatrixLayout_t = std::ptr::null_mut();
    // SAFETY: writes one layout handle.
    let status = unsafe {
        (api.matrix_layout_create)(&mut l, data_type(dtype), m.rows, m.cols, m.ld as i64)
    };
    check("cublasLtMatrixLayoutCreate", status)?;
    if m.batch > 1 {
        let count = m.batch as i32;
        let stride = m.stride as i64;
        // SAFETY: attribute types per the cuBLASLt docs (int32 count, int64 stride).
        let status = unsafe {
            (api.matrix_layout_set_attribute)(
                l,
                ltsys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                &count as *const i32 as *const c_void,
                4,
            )
        };
        check("cublasLtMatrixLayoutSetAttribute(batch count)", status)?;
        // SAFETY: as above.
        let status = unsafe {
            (api.matrix_layout_set_attribute)(
                l,
                ltsys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                &stride as *const i64 as *const c_void,
                8,
            )
        };
        check("cublasLtMatrixLayoutSetAttribute(batch stride)", status)?;
    }
    Ok(l)
}

/// What the heuristic's answer depends on: the product (shapes, layouts, dtype, epilogue), the
/// device, the compute type and the workspace it may use.
#[derive(Clone, Copy, PartialEq, Eq)]
struct AlgoKey {
    gemm: Gemm,
    ordinal: u32,
    tf32: bool,
    workspace_bytes: usize,
}

/// Algorithms the heuristic picked in this process. A GPT-2 step has 144 products but a dozen
/// distinct ones (every layer repeats the same shapes), and each heuristic query is a
/// translation-time cost; a few dozen entries are searched in order.
fn algos() -> &'static Mutex<Vec<(AlgoKey, ltsys::cublasLtMatmulAlgo_t)>> {
    static ALGOS: OnceLock<Mutex<Vec<(AlgoKey, ltsys::cublasLtMatmulAlgo_t)>>> = OnceLock::new();
    ALGOS.get_or_init(|| Mutex::new(Vec::new()))
}

fn known_algo(key: &AlgoKey) -> Option<ltsys::cublasLtMatmulAlgo_t> {
    let algos = algos().lock().unwrap_or_else(PoisonError::into_inner);
    algos.iter().find(|(k, _)| k == key).map(|(_, a)| *a)
}

fn remember_algo(key: AlgoKey, algo: ltsys::cublasLtMatmulAlgo_t) {
    let mut algos = algos().lock().unwrap_or_else(PoisonError::into_inner);
    if !algos.iter().any(|(k, _)| *k == key) {
        algos.push((key, algo));
    }
}

/// Starts cuBLASLt's one-time initialisation for `cuda:ordinal` on a thread of its own, once
/// per device in the process: the handle, the workspace, and a first heuristic query. In a
/// fresh process that first query took 75-130 ms on an H100, and so
/// did a first product run with an algorithm kept from an earlier process; after it, a query
/// takes 0.1-0.3 ms (`scripts/gpu/cublaslt_first_use.py`). Products compiled meanwhile only
/// build descriptors, and their first call waits for what is left of it, so the rest of the
/// translation (the backward's passes, claims and kernels) overlaps it.
pub fn warm_up(ordinal: u32, workspace_bytes: usize) {
    static STARTED: OnceLock<Mutex<Vec<u32>>> = OnceLock::new();
    {
        let mut started = STARTED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if started.contains(&ordinal) {
            return;
        }
        started.push(ordinal);
    }
    // Without a thread, the first call initialises cuBLASLt itself.
    let _ = std::thread::Builder::new()
        .name(format!("cublaslt-warm-up-{ordinal}"))
        .spawn(move || {
            // Failures here show again, with their reason, at the first call that needs it.
            let warmed = guarded("cuBLASLt warm-up", || {
                make_current(ordinal)?;
                device_state(ordinal, workspace_bytes)?;
                first_query(ordinal)
            });
            if warmed.is_ok() {
                INITIALISED.store(true, Ordering::Release);
            }
        });
}

/// One heuristic query for a small bf16 product on the device's handle.
fn first_query(ordinal: u32) -> Result<(), String> {
    let (handle, _, _) = device_state(ordinal, 0)?;
    let square = crate::layout::Operand::row_major(64, 64);
    let g = Gemm {
        m: 64,
        n: 64,
        k: 64,
        batch: 1,
        dtype: thunder_abi::DTypeCode::BF16,
        lhs: square,
        rhs: square,
        out: square,
        bias: false,
        gelu: false,
    };
    Descriptors::new(g, false)?.heuristic(handle, 0).map(|_| ())
}

/// Whether cuBLASLt has answered a heuristic query in this process: from then on a compile
/// asks for its algorithm itself (0.1-0.3 ms), so a product with none fails at compile and
/// falls to the next executor; before, the first call asks.
static INITIALISED: AtomicBool = AtomicBool::new(false);

/// Heuristic queries one at a time: the warm-up's and a first call's may share a handle.
static QUERIES: Mutex<()> = Mutex::new(());

/// A product's descriptors (destroyed with it).
struct Descriptors {
    desc: ltsys::cublasLtMatmulDesc_t,
    a: ltsys::cublasLtMatrixLayout_t,
    b: ltsys::cublasLtMatrixLayout_t,
    d: ltsys::cublasLtMatrixLayout_t,
}

impl Descriptors {
    fn new(g: Gemm, tf32: bool) -> Result<Descriptors, String> {
        let compute = if g.dtype == thunder_abi::DTypeCode::F32 && tf32 {
            ltsys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            ltsys::cublasComputeType_t::CUBLAS_COMPUTE_32F
        };
        let api = api()?;
        let mut desc: ltsys::cublasLtMatmulDesc_t = std::ptr::null_mut();
        // SAFETY: writes one descriptor handle.
        let status = unsafe {
            (api.matmul_desc_create)(&mut desc, compute, ltsys::cudaDataType::CUDA_R_32F)
        };
        check("cublasLtMatmulDescCreate", status)?;
        // Owned from here: dropped (destroyed) on any error below.
        let mut ds = Descriptors {
            desc,
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            d: std::ptr::null_mut(),
        };
        let call = g.lt_call();
        for (attr, on) in [
            (
                ltsys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                call.transa,
            ),
            (
                ltsys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                call.transb,
            ),
        ] {
            if on {
                // cublasOperation_t CUBLAS_OP_T (an int32 attribute).
                set_attr(desc, attr, &1i32)?;
            }
        }
        let epilogue = match (g.bias, g.gelu) {
            (true, true) => Some(ltsys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS),
            (true, false) => Some(ltsys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS),
            (false, true) => Some(ltsys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU),
            (false, false) => None,
        };
        if let Some(e) = epilogue {
            set_attr(
                desc,
                ltsys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
                &e,
            )?;
        }
        // See shape.rs: Lt's A is our right operand, Lt's B our left one.
        ds.a = layout(g.dtype, call.a)?;
        ds.b = layout(g.dtype, call.b)?;
        ds.d = layout(g.dtype, call.d)?;
        Ok(ds)
    }

    /// The heuristic's first algorithm for these descriptors on `handle`, allowed
    /// `workspace_bytes`.
    fn heuristic(
        &self,
        handle: usize,
        workspace_bytes: usize,
    ) -> Result<ltsys::cublasLtMatmulAlgo_t, String> {
        let api = api()?;
        let mut pref: ltsys::cublasLtMatmulPreference_t = std::ptr::null_mut();
        // SAFETY: writes one preference handle.
        check("cublasLtMatmulPreferenceCreate", unsafe {
            (api.preference_create)(&mut pref)
        })?;
        let ws = workspace_bytes as u64;
        // SAFETY: a u64 attribute.
        let status = unsafe {
            (api.preference_set_attribute)(
                pref,
                ltsys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &ws as *const u64 as *const c_void,
                8,
            )
        };
        let mut found = 0;
        let _one_at_a_time = QUERIES.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: plain C data, written by the call below.
        let mut heuristic: ltsys::cublasLtMatmulHeuristicResult_t = unsafe { std::mem::zeroed() };
        let asked =
            check("cublasLtMatmulPreferenceSetAttribute(workspace)", status).and_then(|_| {
                // SAFETY: every descriptor was created by `new`; room for the one result.
                let status = unsafe {
                    (api.algo_get_heuristic)(
                        handle as ltsys::cublasLtHandle_t,
                        self.desc,
                        self.a,
                        self.b,
                        self.d,
                        self.d,
                        pref,
                        1,
                        &mut heuristic,
                        &mut found,
                    )
                };
                check("cublasLtMatmulAlgoGetHeuristic", status)
            });
        // SAFETY: created above, used only by the heuristic query.
        let _ = unsafe { (api.preference_destroy)(pref) };
        asked.and_then(|_| {
            (found > 0)
                .then_some(heuristic.algo)
                .ok_or_else(|| "no algorithm returned".to_string())
        })
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        // Created through the loaded library, which outlives every descriptor.
        let Ok(api) = api() else { return };
        // SAFETY: each was created by `Descriptors::new` and is used by no one else; null ones
        // (a `new` that failed half-way) are skipped.
        unsafe {
            for l in [self.a, self.b, self.d]
                .into_iter()
                .filter(|l| !l.is_null())
            {
                let _ = (api.matrix_layout_destroy)(l);
            }
            if !self.desc.is_null() {
                let _ = (api.matmul_desc_destroy)(self.desc);
            }
        }
    }
}

/// Builds the descriptors for `g` on `cuda:ordinal`, and finds the handle, the workspace and
/// the algorithm (the heuristic once per distinct product in the process) once cuBLASLt is
/// initialised; until then ([`warm_up`] does that on another thread) the first call finds
/// them, and a product without an algorithm fails there rather than at compile.
pub fn prepare(
    g: Gemm,
    ordinal: u32,
    tf32: bool,
    workspace_bytes: usize,
) -> Result<Prepared, String> {
    guarded("cuBLASLt", || {
        let prepared = Prepared {
            gemm: g,
            ordinal,
            tf32,
            workspace_bytes,
            ds: Descriptors::new(g, tf32)?,
            ready: Mutex::new(None),
        };
        if INITIALISED.load(Ordering::Acquire) {
            // The heuristic reads the current device; compiles may run on any host thread.
            make_current(ordinal)?;
            let ready = prepared.first_call()?;
            *prepared
                .ready
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(ready);
        }
        Ok(prepared)
    })
}

impl Prepared {
    /// `out = lhs @ rhs (+ bias)` on `stream`; pointers are device addresses.
    pub fn run(
        &self,
        lhs: u64,
        rhs: u64,
        bias: Option<u64>,
        out: u64,
        stream: *mut c_void,
    ) -> Result<(), String> {
        let mut ready = self.ready.lock().unwrap_or_else(PoisonError::into_inner);
        let r = match *ready {
            Some(r) => r,
            None => {
                let r = guarded("cuBLASLt", || self.first_call())?;
                *ready = Some(r);
                r
            }
        };
        if let Some(b) = bias {
            let p = b as *const c_void;
            set_attr(
                self.ds.desc,
                ltsys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                &p,
            )?;
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        guarded("cublasLtMatmul", || {
            let api = api()?;
            // SAFETY: the layouts describe exactly these contiguous buffers (checked by the
            // caller), the workspace belongs to this device, the stream is the host's.
            let status = unsafe {
                (api.matmul)(
                    r.handle as ltsys::cublasLtHandle_t,
                    self.ds.desc,
                    &alpha as *const f32 as *const c_void,
                    rhs as *const c_void,
                    self.ds.a,
                    lhs as *const c_void,
                    self.ds.b,
                    &beta as *const f32 as *const c_void,
                    out as *const c_void,
                    self.ds.d,
                    out as *mut c_void,
                    self.ds.d,
                    &r.algo,
                    r.workspace as *mut c_void,
                    r.workspace_bytes,
                    stream as ltsys::cudaStream_t,
                )
            };
            check(&format!("cublasLtMatmul for {:?}", self.gemm), status)
        })
    }

    /// The device's handle and workspace, and the algorithm for this product: the process's
    /// memo, else the heuristic's answer.
    fn first_call(&self) -> Result<Ready, String> {
        let (handle, workspace, workspace_bytes) =
            device_state(self.ordinal, self.workspace_bytes)?;
        let key = AlgoKey {
            gemm: self.gemm,
            ordinal: self.ordinal,
            tf32: self.tf32,
            workspace_bytes,
        };
        let algo = match known_algo(&key) {
            Some(a) => a,
            None => {
                let algo = self
                    .ds
                    .heuristic(handle, workspace_bytes)
                    .map_err(|e| format!("no cuBLASLt algorithm for {:?}: {e}", self.gemm))?;
                remember_algo(key, algo);
                algo
            }
        };
        Ok(Ready {
            handle,
            workspace,
            workspace_bytes,
            algo,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Operand;
    use thunder_abi::DTypeCode;

    fn gemm(m: u64) -> Gemm {
        Gemm {
            m,
            n: 8,
            k: 4,
            batch: 1,
            dtype: DTypeCode::BF16,
            lhs: Operand::row_major(m, 4),
            rhs: Operand::row_major(4, 8),
            out: Operand::row_major(m, 8),
            bias: false,
            gelu: false,
        }
    }

    fn algo(tag: u64) -> ltsys::cublasLtMatmulAlgo_t {
        ltsys::cublasLtMatmulAlgo_t { data: [tag; 8] }
    }

    /// A product's algorithm is found again for the same product, device, compute type and
    /// workspace only: any of them differing asks the heuristic again.
    #[test]
    fn an_algorithm_is_reused_only_for_the_same_product_and_settings() {
        let key = |m, ordinal, tf32, workspace_bytes| AlgoKey {
            gemm: gemm(m),
            ordinal,
            tf32,
            workspace_bytes,
        };
        remember_algo(key(1001, 0, false, 1 << 20), algo(7));
        assert_eq!(known_algo(&key(1001, 0, false, 1 << 20)), Some(algo(7)));
        for other in [
            key(1002, 0, false, 1 << 20),
            key(1001, 1, false, 1 << 20),
            key(1001, 0, true, 1 << 20),
            key(1001, 0, false, 1 << 21),
        ] {
            assert_eq!(known_algo(&other), None);
        }
        // The first answer stays.
        remember_algo(key(1001, 0, false, 1 << 20), algo(9));
        assert_eq!(known_algo(&key(1001, 0, false, 1 << 20)), Some(algo(7)));
    }
}
