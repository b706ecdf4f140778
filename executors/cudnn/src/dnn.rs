//! cuDNN: one handle per device, created on first use and kept for the process; a compiled
//! convolution holds its descriptors and the forward algorithm picked for its shape.
//!
//! Numerics: f16 and bf16 accumulate in f32 (compute type float, tensor cores allowed); f32
//! uses `CUDNN_FMA_MATH` (on Ampere and later `CUDNN_DEFAULT_MATH` would allow TF32); f64
//! accumulates in double. The FFT and non-fused Winograd algorithms, whose rounding is not a
//! plain dot product's, are picked only when no other algorithm fits.

use crate::shape::{packed_strides, Conv, DnnGeometry, Work};
use cudarc::cudnn::{result as dnn, sys};
use cudarc::driver::{result as cu, sys as cusys};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use thunder_abi::{DTypeCode, DeviceDesc, DeviceKind, HostServices};

pub use thunder_abi::export::catch_panic as guarded;

/// The driver and cuDNN 9, or why they cannot be used (checked once). Ok: cuDNN's version.
pub fn availability() -> Result<usize, String> {
    static STATE: OnceLock<Result<usize, String>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            guarded("loading cuDNN", || {
                // SAFETY: only probes whether the libraries can be opened.
                if !unsafe { cusys::is_culib_present() } {
                    return Err("no CUDA driver: libcuda.so was not found".into());
                }
                // SAFETY: as above.
                if !unsafe { sys::is_culib_present() } {
                    return Err("cuDNN (libcudnn.so.9) was not found on the library path".into());
                }
                cu::init().map_err(|e| format!("no CUDA driver: cuInit failed: {e:?}"))?;
                let n = cu::device::get_count().map_err(|e| format!("cuDeviceGetCount: {e:?}"))?;
                if n <= 0 {
                    return Err("the CUDA driver reports no devices".into());
                }
                let version = dnn::get_version();
                if !(90000..100000).contains(&version) {
                    return Err(format!(
                        "cuDNN {version} was found; this plugin is built for cuDNN 9"
                    ));
                }
                // No `cudnnCnnVersionCheck` here: on an H100 with PyTorch's cuDNN 9.19 wheel (one
                // install) it answered CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH when called
                // from this plugin, 0 when called through ctypes, and every convolution ran
                // (not understood). A broken install fails at the first compile instead
                // (cudnnCreate, the algorithm query), with cuDNN's status in the error.
                Ok(version)
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

/// A device's cuDNN handle. Its stream is set before every use, so uses are serialized by the
/// mutex it lives in.
pub struct Handle(sys::cudnnHandle_t);

// SAFETY: a cuDNN handle may move between threads; the mutex serializes its use.
unsafe impl Send for Handle {}

type SharedHandle = Arc<Mutex<Handle>>;

/// The device's handle, created on first use.
fn handle(ordinal: u32) -> Result<SharedHandle, String> {
    static HANDLES: OnceLock<Mutex<HashMap<u32, SharedHandle>>> = OnceLock::new();
    let mut map = HANDLES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(h) = map.get(&ordinal) {
        return Ok(h.clone());
    }
    make_current(ordinal)?;
    let h = dnn::create_handle().map_err(|e| format!("cudnnCreate on cuda:{ordinal}: {e:?}"))?;
    let shared = Arc::new(Mutex::new(Handle(h)));
    map.insert(ordinal, shared.clone());
    Ok(shared)
}

fn data_type(d: DTypeCode) -> Result<sys::cudnnDataType_t, String> {
    match d {
        DTypeCode::F16 => Ok(sys::cudnnDataType_t::CUDNN_DATA_HALF),
        DTypeCode::BF16 => Ok(sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16),
        DTypeCode::F32 => Ok(sys::cudnnDataType_t::CUDNN_DATA_FLOAT),
        DTypeCode::F64 => Ok(sys::cudnnDataType_t::CUDNN_DATA_DOUBLE),
        DTypeCode::Bool
        | DTypeCode::U8
        | DTypeCode::I8
        | DTypeCode::I16
        | DTypeCode::I32
        | DTypeCode::I64 => Err(format!("cuDNN does not convolve {}", d.short_name())),
    }
}

/// The accumulation type: double for f64, float for the rest.
fn compute_type(d: DTypeCode) -> sys::cudnnDataType_t {
    if d == DTypeCode::F64 {
        sys::cudnnDataType_t::CUDNN_DATA_DOUBLE
    } else {
        sys::cudnnDataType_t::CUDNN_DATA_FLOAT
    }
}

fn math_type(d: DTypeCode) -> sys::cudnnMathType_t {
    match d {
        DTypeCode::F16 | DTypeCode::BF16 => sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
        _ => sys::cudnnMathType_t::CUDNN_FMA_MATH,
    }
}

/// Whether the algorithm's rounding is a dot product's (no FFT, no transformed Winograd tiles
/// stored at the data type's precision).
fn algo_allowed(a: sys::cudnnConvolutionFwdAlgo_t) -> bool {
    use sys::cudnnConvolutionFwdAlgo_t as A;
    match a {
        A::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM
        | A::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
        | A::CUDNN_CONVOLUTION_FWD_ALGO_GEMM
        | A::CUDNN_CONVOLUTION_FWD_ALGO_DIRECT
        | A::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD => true,
        A::CUDNN_CONVOLUTION_FWD_ALGO_FFT
        | A::CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING
        | A::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED
        | A::CUDNN_CONVOLUTION_FWD_ALGO_COUNT => false,
    }
}

/// cuDNN's scaling factors: double for double tensors, float otherwise.
#[derive(Clone, Copy)]
enum Scale {
    F(f32),
    D(f64),
}

impl Scale {
    fn of(d: DTypeCode, v: f64) -> Scale {
        if d == DTypeCode::F64 {
            Scale::D(v)
        } else {
            Scale::F(v as f32)
        }
    }

    fn ptr(&self) -> *const c_void {
        match self {
            Scale::F(v) => v as *const f32 as *const c_void,
            Scale::D(v) => v as *const f64 as *const c_void,
        }
    }
}

struct TensorD(sys::cudnnTensorDescriptor_t);

impl TensorD {
    fn new(dtype: DTypeCode, dims: &[i32], strides: &[i32]) -> Result<TensorD, String> {
        let d = TensorD(
            dnn::create_tensor_descriptor()
                .map_err(|e| format!("cudnnCreateTensorDescriptor: {e:?}"))?,
        );
        // SAFETY: `d` was just created; dims and strides hold `dims.len()` ints.
        unsafe {
            dnn::set_tensornd_descriptor(
                d.0,
                data_type(dtype)?,
                dims.len() as c_int,
                dims.as_ptr(),
                strides.as_ptr(),
            )
        }
        .map_err(|e| format!("cudnnSetTensorNdDescriptor({dims:?}, strides {strides:?}): {e:?}"))?;
        Ok(d)
    }

    fn packed(dtype: DTypeCode, dims: &[i32]) -> Result<TensorD, String> {
        let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let strides: Vec<i32> = packed_strides(&shape).iter().map(|&s| s as i32).collect();
        TensorD::new(dtype, dims, &strides)
    }
}

impl Drop for TensorD {
    fn drop(&mut self) {
        // SAFETY: created by `TensorD::new`, destroyed once.
        let _ = unsafe { dnn::destroy_tensor_descriptor(self.0) };
    }
}

struct FilterD(sys::cudnnFilterDescriptor_t);

impl Drop for FilterD {
    fn drop(&mut self) {
        // SAFETY: created in `prepare`, destroyed once.
        let _ = unsafe { dnn::destroy_filter_descriptor(self.0) };
    }
}

struct ConvD(sys::cudnnConvolutionDescriptor_t);

impl Drop for ConvD {
    fn drop(&mut self) {
        // SAFETY: created in `prepare`, destroyed once.
        let _ = unsafe { dnn::destroy_convolution_descriptor(self.0) };
    }
}

struct Forward {
    x: TensorD,
    w: FilterD,
    conv: ConvD,
    algo: sys::cudnnConvolutionFwdAlgo_t,
    workspace: usize,
}

/// What one compiled convolution launches.
enum Plan {
    Nothing,
    /// Zeros (plus the bias): every window is empty.
    Fill {
        y: TensorD,
        bias: Option<TensorD>,
    },
    Convolve {
        forward: Forward,
        y: TensorD,
        bias: Option<TensorD>,
    },
}

/// The descriptors and algorithm of one convolution, reused by every call.
pub struct Prepared {
    pub conv: Conv,
    pub geometry: DnnGeometry,
    handle: Option<SharedHandle>,
    plan: Plan,
}

// SAFETY: the descriptors are host objects only read after `prepare`; the handle is behind a
// mutex.
unsafe impl Send for Prepared {}
unsafe impl Sync for Prepared {}

impl Prepared {
    /// The forward algorithm picked at compile time, if the convolution launches one.
    pub fn algorithm(&self) -> Option<(String, usize)> {
        match &self.plan {
            Plan::Convolve { forward, .. } => {
                Some((format!("{:?}", forward.algo), forward.workspace))
            }
            Plan::Nothing | Plan::Fill { .. } => None,
        }
    }
}

fn forward(
    h: sys::cudnnHandle_t,
    conv: &Conv,
    g: &DnnGeometry,
    y: &TensorD,
    workspace_limit: usize,
) -> Result<Forward, String> {
    let dtype = conv.dtype;
    let x = TensorD::packed(dtype, &g.x)?;
    let w = FilterD(
        dnn::create_filter_descriptor()
            .map_err(|e| format!("cudnnCreateFilterDescriptor: {e:?}"))?,
    );
    // SAFETY: `w` was just created; `g.w` holds its dims.
    unsafe {
        dnn::set_filternd_descriptor(
            w.0,
            data_type(dtype)?,
            sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
            g.w.len() as c_int,
            g.w.as_ptr(),
        )
    }
    .map_err(|e| format!("cudnnSetFilterNdDescriptor({:?}): {e:?}", g.w))?;
    let cd = ConvD(
        dnn::create_convolution_descriptor()
            .map_err(|e| format!("cudnnCreateConvolutionDescriptor: {e:?}"))?,
    );
    // SAFETY: `cd` was just created; the three arrays hold `padding.len()` ints.
    unsafe {
        dnn::set_convolutionnd_descriptor(
            cd.0,
            g.padding.len() as c_int,
            g.padding.as_ptr(),
            g.stride.as_ptr(),
            g.dilation.as_ptr(),
            sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
            compute_type(dtype),
        )
        .and_then(|_| dnn::set_convolution_group_count(cd.0, conv.groups as i32))
        .and_then(|_| dnn::set_convolution_math_type(cd.0, math_type(dtype)))
    }
    .map_err(|e| format!("convolution descriptor: {e:?}"))?;
    // cuDNN's own output shape must be ours.
    let mut dims = vec![0 as c_int; g.y.len()];
    // SAFETY: descriptors created above; `dims` holds `g.y.len()` ints.
    unsafe {
        sys::cudnnGetConvolutionNdForwardOutputDim(
            cd.0,
            x.0,
            w.0,
            dims.len() as c_int,
            dims.as_mut_ptr(),
        )
    }
    .result()
    .map_err(|e| format!("cudnnGetConvolutionNdForwardOutputDim: {e:?}"))?;
    if dims != g.y {
        return Err(format!(
            "cuDNN computes an output of {dims:?}, the trace says {:?}",
            g.y
        ));
    }
    const COUNT: usize = sys::cudnnConvolutionFwdAlgo_t::CUDNN_CONVOLUTION_FWD_ALGO_COUNT as usize;
    // SAFETY: plain old data, filled by cuDNN below.
    let mut perf: [sys::cudnnConvolutionFwdAlgoPerf_t; COUNT] = unsafe { std::mem::zeroed() };
    let mut returned: c_int = 0;
    // SAFETY: all descriptors are live; `perf` holds COUNT results.
    unsafe {
        dnn::get_convolution_forward_algorithm(
            h,
            x.0,
            w.0,
            cd.0,
            y.0,
            COUNT as c_int,
            &mut returned,
            perf.as_mut_ptr(),
        )
    }
    .map_err(|e| format!("cudnnGetConvolutionForwardAlgorithm_v7: {e:?}"))?;
    let candidates = &perf[..(returned.max(0) as usize).min(COUNT)];
    let mut tried = Vec::new();
    // The heuristic's order, dot-product algorithms first; FFT and non-fused Winograd only when
    // no other algorithm fits.
    let ranked = candidates
        .iter()
        .filter(|p| algo_allowed(p.algo))
        .chain(candidates.iter().filter(|p| !algo_allowed(p.algo)));
    for p in ranked {
        if p.status != sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS {
            continue;
        }
        // f32 keeps FMA math whatever the heuristic reports (no TF32); f16/bf16 take the math
        // type the algorithm was ranked with.
        let math = if matches!(dtype, DTypeCode::F16 | DTypeCode::BF16) {
            p.mathType
        } else {
            sys::cudnnMathType_t::CUDNN_FMA_MATH
        };
        // SAFETY: a live descriptor.
        unsafe { dnn::set_convolution_math_type(cd.0, math) }
            .map_err(|e| format!("cudnnSetConvolutionMathType: {e:?}"))?;
        // SAFETY: all descriptors are live.
        let bytes = match unsafe {
            dnn::get_convolution_forward_workspace_size(h, x.0, w.0, cd.0, y.0, p.algo)
        } {
            Ok(b) => b,
            Err(e) => {
                tried.push(format!("{:?}: {e:?}", p.algo));
                continue;
            }
        };
        if bytes > workspace_limit {
            tried.push(format!("{:?} needs {bytes} bytes of workspace", p.algo));
            continue;
        }
        return Ok(Forward {
            x,
            w,
            conv: cd,
            algo: p.algo,
            workspace: bytes,
        });
    }
    Err(format!(
        "no forward algorithm within {workspace_limit} bytes of workspace ({} candidates{}{})",
        candidates.len(),
        if tried.is_empty() { "" } else { ": " },
        tried.join("; ")
    ))
}

/// Builds the descriptors for `conv` on its device and picks the forward algorithm.
pub fn prepare(conv: Conv, workspace_limit: usize) -> Result<Prepared, String> {
    guarded("cuDNN", || {
        let geometry = conv.dnn()?;
        let work = conv.work();
        if work == Work::Nothing {
            return Ok(Prepared {
                conv,
                geometry,
                handle: None,
                plan: Plan::Nothing,
            });
        }
        make_current(conv.device)?;
        let shared = handle(conv.device)?;
        let guard = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let h = guard.0;
        let y = TensorD::packed(conv.dtype, &geometry.y)?;
        let bias = if conv.bias {
            Some(TensorD::packed(conv.dtype, &geometry.bias)?)
        } else {
            None
        };
        let plan = match work {
            Work::Fill => Plan::Fill { y, bias },
            _ => Plan::Convolve {
                forward: forward(h, &conv, &geometry, &y, workspace_limit)?,
                y,
                bias,
            },
        };
        drop(guard);
        Ok(Prepared {
            conv,
            geometry,
            handle: Some(shared),
            plan,
        })
    })
}

/// One operand at run time: its device address and, when it is not packed row-major, the
/// strides to read it with (see [`Conv::dnn_strides`]).
pub struct Operand {
    pub ptr: u64,
    pub strides: Option<Vec<i32>>,
}

/// Scratch memory from the host's pool, given back when dropped. The pool is stream-ordered
/// (every user queues on the device's one stream), so freeing right after the launches that
/// use it is safe.
struct Scratch {
    services: HostServices,
    device: DeviceDesc,
    ptr: *mut c_void,
    bytes: usize,
}

const ALIGN: usize = 256;

impl Scratch {
    fn new(
        services: HostServices,
        ordinal: u32,
        bytes: usize,
        what: &str,
    ) -> Result<Scratch, String> {
        let device = DeviceDesc {
            kind: DeviceKind::Cuda,
            index: ordinal,
        };
        let ptr = if bytes == 0 {
            std::ptr::null_mut()
        } else {
            (services.alloc)(device, bytes, ALIGN)
        };
        if bytes > 0 && ptr.is_null() {
            return Err(format!(
                "the host could not allocate {bytes} bytes on cuda:{ordinal} for the {what}"
            ));
        }
        Ok(Scratch {
            services,
            device,
            ptr,
            bytes,
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            (self.services.free)(self.device, self.ptr, self.bytes, ALIGN);
        }
    }
}

fn call(what: &str, status: sys::cudnnStatus_t) -> Result<(), String> {
    status.result().map_err(|e| format!("{what}: {e:?}"))
}

impl Prepared {
    /// Copies a strided operand into packed scratch memory (`cudnnTransformTensor`).
    fn pack(
        &self,
        h: sys::cudnnHandle_t,
        services: HostServices,
        dims: &[i32],
        op: &Operand,
        what: &str,
    ) -> Result<(u64, Option<Scratch>), String> {
        let Some(strides) = &op.strides else {
            return Ok((op.ptr, None));
        };
        let dtype = self.conv.dtype;
        let elements: usize = dims.iter().map(|&d| d.max(0) as usize).product();
        let scratch = Scratch::new(
            services,
            self.conv.device,
            elements * dtype.size_bytes(),
            &format!("packed copy of the strided {what}"),
        )?;
        let from = TensorD::new(dtype, dims, strides)?;
        let to = TensorD::packed(dtype, dims)?;
        let (one, zero) = (Scale::of(dtype, 1.0), Scale::of(dtype, 0.0));
        // SAFETY: `from` describes the operand's memory as the host laid it out, `to` the
        // scratch buffer of the same element count.
        call(&format!("cudnnTransformTensor of the {what}"), unsafe {
            sys::cudnnTransformTensor(
                h,
                one.ptr(),
                from.0,
                op.ptr as *const c_void,
                zero.ptr(),
                to.0,
                scratch.ptr,
            )
        })?;
        Ok((scratch.ptr as u64, Some(scratch)))
    }

    /// `y = conv(x, w) (+ bias)` on `stream`; pointers are device addresses, `y` packed.
    pub fn run(
        &self,
        services: HostServices,
        x: &Operand,
        w: &Operand,
        bias: Option<&Operand>,
        y: u64,
        stream: *mut c_void,
    ) -> Result<(), String> {
        let Some(shared) = &self.handle else {
            return Ok(());
        };
        let guard = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let h = guard.0;
        guarded("cuDNN", || {
            // SAFETY: the handle belongs to this device; the stream is the host's.
            call("cudnnSetStream", unsafe {
                sys::cudnnSetStream(h, stream as sys::cudaStream_t)
            })?;
            let dtype = self.conv.dtype;
            let (one, zero) = (Scale::of(dtype, 1.0), Scale::of(dtype, 0.0));
            let y_ptr = y as *mut c_void;
            let bias_desc = match &self.plan {
                Plan::Nothing => return Ok(()),
                Plan::Fill { y, bias } => {
                    let zeros = [0u8; 8];
                    // SAFETY: `y` describes the packed output; the value is a zero of every
                    // dtype's width.
                    call("cudnnSetTensor", unsafe {
                        sys::cudnnSetTensor(h, y.0, y_ptr, zeros.as_ptr() as *const c_void)
                    })?;
                    bias.as_ref().map(|b| (b, y))
                }
                Plan::Convolve { forward, y, bias } => {
                    let (x_ptr, _x_copy) = self.pack(h, services, &self.geometry.x, x, "input")?;
                    let (w_ptr, _w_copy) = self.pack(h, services, &self.geometry.w, w, "weight")?;
                    let ws = Scratch::new(
                        services,
                        self.conv.device,
                        forward.workspace,
                        "convolution workspace",
                    )?;
                    // SAFETY: the descriptors describe exactly these packed buffers (strided
                    // operands were packed above), the workspace holds what the algorithm
                    // asked for, and everything is queued on the host's stream.
                    call("cudnnConvolutionForward", unsafe {
                        sys::cudnnConvolutionForward(
                            h,
                            one.ptr(),
                            forward.x.0,
                            x_ptr as *const c_void,
                            forward.w.0,
                            w_ptr as *const c_void,
                            forward.conv.0,
                            forward.algo,
                            ws.ptr,
                            ws.bytes,
                            zero.ptr(),
                            y.0,
                            y_ptr,
                        )
                    })?;
                    bias.as_ref().map(|b| (b, y))
                }
            };
            if let (Some((bias_desc, y_desc)), Some(b)) = (bias_desc, bias) {
                let (b_ptr, _b_copy) = self.pack(h, services, &self.geometry.bias, b, "bias")?;
                // SAFETY: the bias descriptor is [1, C_out, 1, ...], broadcast over `y`.
                call("cudnnAddTensor (bias)", unsafe {
                    sys::cudnnAddTensor(
                        h,
                        one.ptr(),
                        bias_desc.0,
                        b_ptr as *const c_void,
                        one.ptr(),
                        y_desc.0,
                        y_ptr,
                    )
                })?;
            }
            Ok(())
        })
    }
}
