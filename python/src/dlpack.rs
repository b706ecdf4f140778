//! DLPack both ways, zero-copy: a `dltensor` capsule from torch becomes an [`Array`] that
//! borrows torch's memory (the capsule is marked used and its deleter runs when the last clone
//! of the array goes), and an [`Array`] becomes a capsule whose deleter drops the array.
//!
//! The structs are DLPack's unversioned C ABI (`dlpack.h`, v0.8), which
//! `torch.utils.dlpack` produces and consumes.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_void, CStr};
use thunder_core::ir::TensorType;
use thunder_core::{Array, DType, Device};

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

const KDL_CPU: i32 = 1;
const KDL_CUDA: i32 = 2;
const KDL_INT: u8 = 0;
const KDL_UINT: u8 = 1;
const KDL_FLOAT: u8 = 2;
const KDL_BFLOAT: u8 = 4;
const KDL_BOOL: u8 = 6;

const DLTENSOR: &CStr = c"dltensor";
const USED_DLTENSOR: &CStr = c"used_dltensor";

fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::Bool => (KDL_BOOL, 8),
        DType::U8 => (KDL_UINT, 8),
        DType::I8 => (KDL_INT, 8),
        DType::I16 => (KDL_INT, 16),
        DType::I32 => (KDL_INT, 32),
        DType::I64 => (KDL_INT, 64),
        DType::F16 => (KDL_FLOAT, 16),
        DType::BF16 => (KDL_BFLOAT, 16),
        DType::F32 => (KDL_FLOAT, 32),
        DType::F64 => (KDL_FLOAT, 64),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

fn from_dl_dtype(t: DLDataType) -> Option<DType> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code, t.bits) {
        (KDL_BOOL, 8) => DType::Bool,
        (KDL_UINT, 8) => DType::U8,
        (KDL_INT, 8) => DType::I8,
        (KDL_INT, 16) => DType::I16,
        (KDL_INT, 32) => DType::I32,
        (KDL_INT, 64) => DType::I64,
        (KDL_FLOAT, 16) => DType::F16,
        (KDL_BFLOAT, 16) => DType::BF16,
        (KDL_FLOAT, 32) => DType::F32,
        (KDL_FLOAT, 64) => DType::F64,
        _ => return None,
    })
}

/// Owns a consumed DLPack tensor: dropping it calls the producer's deleter.
struct Borrowed(*mut DLManagedTensor);

// SAFETY: DLPack deleters may be called from any thread (torch's frees a C++ reference).
unsafe impl Send for Borrowed {}
unsafe impl Sync for Borrowed {}

impl Drop for Borrowed {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a live `dltensor` capsule that we marked used, so we
        // own it and call its deleter exactly once.
        unsafe {
            if let Some(deleter) = (*self.0).deleter {
                deleter(self.0);
            }
        }
    }
}

/// Takes a `dltensor` capsule (as `torch.utils.dlpack.to_dlpack` makes) and wraps its memory.
/// `what` names the argument in errors. The tensor must be contiguous (the Python side calls
/// `.contiguous()` first), on the CPU or a CUDA device.
pub fn array_from_capsule(
    capsule: &Bound<'_, PyAny>,
    requires_grad: bool,
    what: &str,
) -> PyResult<Array> {
    let obj = capsule.as_ptr();
    // SAFETY: PyCapsule_IsValid accepts any object and checks the name.
    if unsafe { ffi::PyCapsule_IsValid(obj, DLTENSOR.as_ptr()) } != 1 {
        return Err(PyValueError::new_err(format!(
            "{what}: expected an unused DLPack capsule named \"dltensor\" (torch.utils.dlpack.to_dlpack), got {}",
            capsule.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        )));
    }
    // SAFETY: checked valid with this name just above.
    let managed =
        unsafe { ffi::PyCapsule_GetPointer(obj, DLTENSOR.as_ptr()) } as *mut DLManagedTensor;
    if managed.is_null() {
        return Err(PyValueError::new_err(format!(
            "{what}: empty DLPack capsule"
        )));
    }
    // SAFETY: a valid `dltensor` capsule holds a DLManagedTensor the producer keeps alive
    // until its deleter runs.
    let t = unsafe { &(*managed).dl_tensor };
    let device = match t.device.device_type {
        KDL_CPU => Device::Cpu,
        KDL_CUDA => Device::Cuda(t.device.device_id.max(0) as u32),
        other => {
            return Err(PyValueError::new_err(format!(
                "{what}: DLPack device type {other} is not supported (CPU = 1 and CUDA = 2 are)"
            )))
        }
    };
    let dtype = from_dl_dtype(t.dtype).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{what}: DLPack dtype (code {}, {} bits, {} lanes) is not supported",
            t.dtype.code, t.dtype.bits, t.dtype.lanes
        ))
    })?;
    let ndim = t.ndim.max(0) as usize;
    let shape: Vec<i64> = if ndim == 0 {
        Vec::new()
    } else {
        // SAFETY: DLPack guarantees `ndim` entries.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }.to_vec()
    };
    if !t.strides.is_null() && ndim > 0 && !shape.contains(&0) {
        // SAFETY: as for shape.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        let mut expected = 1i64;
        for d in (0..ndim).rev() {
            if shape[d] != 1 && strides[d] != expected {
                return Err(PyValueError::new_err(format!(
                    "{what}: strides {strides:?} of shape {shape:?} are not contiguous; call .contiguous() first"
                )));
            }
            expected *= shape[d];
        }
    }
    // SAFETY: byte_offset stays inside the producer's allocation.
    let ptr = unsafe { (t.data as *mut u8).add(t.byte_offset as usize) };
    // Mark the capsule consumed: from now on we call the deleter, not the capsule.
    // SAFETY: obj is a valid capsule.
    if unsafe { ffi::PyCapsule_SetName(obj, USED_DLTENSOR.as_ptr()) } != 0 {
        return Err(PyErr::fetch(capsule.py()));
    }
    let ty = TensorType {
        shape,
        dtype,
        device,
        requires_grad,
    };
    let owner = Box::new(Borrowed(managed));
    // SAFETY: contiguous memory of ty's size on `device`, kept alive by `owner`; the runtime
    // only reads its inputs.
    Ok(unsafe { Array::from_external(ptr, ty, owner) })
}

/// What an exported capsule keeps alive.
struct Exported {
    array: Option<Array>,
    shape: Vec<i64>,
    strides: Vec<i64>,
    /// The consumer's CUDA stream (device, `CUstream`) when the array was handed over on one:
    /// before the memory goes back to thunder's pool, thunder's stream waits for the work the
    /// consumer enqueued on it, which may still read the array.
    consumer: Option<(u32, usize)>,
}

impl Drop for Exported {
    fn drop(&mut self) {
        if let (Some((device, stream)), Some(_)) = (self.consumer, &self.array) {
            if let Err(e) = thunder_core::cuda::wait_for_external(device, stream as *mut c_void) {
                // The stream is gone (a user stream destroyed first): wait for the device.
                tracing::warn!("releasing an output: {e}; synchronizing cuda:{device}");
                let _ = thunder_core::cuda::synchronize(device);
            }
        }
        drop(self.array.take());
    }
}

unsafe extern "C" fn delete_exported(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: made by `capsule_from_array` with Box::into_raw, deleted once.
    unsafe {
        let m = Box::from_raw(m);
        drop(Box::from_raw(m.manager_ctx as *mut Exported));
    }
}

unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // A capsule never consumed still owns its tensor; a consumer renames it.
    // SAFETY: called by Python with the capsule being destroyed.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()) as *mut DLManagedTensor;
            delete_exported(m);
        } else {
            ffi::PyErr_Clear();
        }
    }
}

/// Hands `array` to Python as a `dltensor` capsule (for `torch.utils.dlpack.from_dlpack`),
/// without copying. `stream`: the consumer's CUDA stream, for a CUDA array (see [`Exported`]).
pub fn capsule_from_array(
    py: Python<'_>,
    array: Array,
    stream: Option<usize>,
) -> PyResult<Py<PyAny>> {
    let shape = array.shape().to_vec();
    let mut strides = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1].max(1);
    }
    let device = match array.device() {
        Device::Cpu => DLDevice {
            device_type: KDL_CPU,
            device_id: 0,
        },
        Device::Cuda(i) => DLDevice {
            device_type: KDL_CUDA,
            device_id: i as i32,
        },
    };
    let dtype = dl_dtype(array.dtype());
    let data = array.as_ptr() as *mut c_void;
    let consumer = match (array.device(), stream) {
        (Device::Cuda(i), Some(s)) => Some((i, s)),
        _ => None,
    };
    let mut ctx = Box::new(Exported {
        array: Some(array),
        shape,
        strides,
        consumer,
    });
    let ndim = ctx.shape.len() as i32;
    let managed = Box::new(DLManagedTensor {
        dl_tensor: DLTensor {
            data,
            device,
            ndim,
            dtype,
            shape: ctx.shape.as_mut_ptr(),
            strides: ctx.strides.as_mut_ptr(),
            byte_offset: 0,
        },
        manager_ctx: Box::into_raw(ctx) as *mut c_void,
        deleter: Some(delete_exported),
    });
    let raw = Box::into_raw(managed);
    // SAFETY: raw is a valid DLManagedTensor; the destructor frees it unless consumed.
    let cap = unsafe {
        ffi::PyCapsule_New(
            raw as *mut c_void,
            DLTENSOR.as_ptr(),
            Some(capsule_destructor),
        )
    };
    if cap.is_null() {
        // SAFETY: not handed out; free it here.
        unsafe { delete_exported(raw) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: PyCapsule_New returned a new reference.
    Ok(unsafe { Py::from_owned_ptr(py, cap) })
}
