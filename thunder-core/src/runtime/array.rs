//! `Array`: a concrete, contiguous tensor owned by the host. Plugins read and write arrays
//! through DLPack-shaped descriptors; the host allocates them.

use crate::cuda;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ir::{ShapeDisplay, TensorType};
use crate::runtime::pool;
use half::{bf16, f16};
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Weak};

/// Storage: host memory from the caching pool, or device memory from the CUDA runtime's pool
/// (then `ptr` holds the device address and is never dereferenced on the host).
struct Buffer {
    ptr: *mut u8,
    bytes: usize,
    device: Device,
    /// Memory owned elsewhere (a DLPack tensor from Python, say): dropping this releases it,
    /// and the pools never see the pointer.
    external: Option<Box<dyn Send + Sync>>,
}

// SAFETY: the buffer is plain memory; writes happen only while a run owns it exclusively,
// before it is shared.
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.external.is_some() {
            return;
        }
        match self.device {
            // SAFETY: allocated by pool::alloc with this size.
            Device::Cpu => unsafe { pool::free(self.ptr, self.bytes) },
            Device::Cuda(ordinal) => cuda::free(ordinal, self.ptr as u64, self.bytes),
        }
    }
}

/// See [`Array::watch`].
pub(crate) struct Watch(Weak<Buffer>);

impl Watch {
    pub(crate) fn alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}

#[derive(Clone)]
pub struct Array {
    buf: Arc<Buffer>,
    ty: TensorType,
}

/// Rust types that are a dtype's element.
pub trait Element: Copy + 'static {
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(x: f64) -> Self;
}

macro_rules! element {
    ($($t:ty => $d:ident, |$x:ident| $to:expr, |$y:ident| $from:expr;)*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 { let $x = self; $to }
            fn from_f64($y: f64) -> Self { $from }
        }
    )*};
}

element! {
    bool => Bool, |x| x as u8 as f64, |y| y != 0.0;
    u8 => U8, |x| x as f64, |y| y as u8;
    i8 => I8, |x| x as f64, |y| y as i8;
    i16 => I16, |x| x as f64, |y| y as i16;
    i32 => I32, |x| x as f64, |y| y as i32;
    i64 => I64, |x| x as f64, |y| y as i64;
    f16 => F16, |x| x.to_f64(), |y| f16::from_f64(y);
    bf16 => BF16, |x| x.to_f64(), |y| bf16::from_f64(y);
    f32 => F32, |x| x as f64, |y| y as f32;
    f64 => F64, |x| x, |y| y;
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Array({})", self.ty)
    }
}

impl Array {
    /// Zero-filled storage for `ty` on the CPU (from the runtime's caching pool).
    pub fn zeros(ty: TensorType) -> Result<Array> {
        let a = Array::reused(ty)?;
        if let Device::Cuda(ordinal) = a.ty.device {
            cuda::memset_zero(ordinal, a.buf.ptr as u64, a.buf.bytes)?;
            return Ok(a);
        }
        // SAFETY: the buffer is `bytes` long (or dangling with bytes == 0) and not shared yet.
        unsafe { std::ptr::write_bytes(a.buf.ptr, 0, a.buf.bytes) };
        Ok(a)
    }

    /// Storage for `ty` straight from the caching pool, not cleared: zeros if the block is new
    /// to the pool, else whatever its last owner wrote (always initialized bytes, never another
    /// live array's). For buffers that are written in full before anyone reads them: the
    /// runtime's outputs of a region (plugins write every element of their outputs, as the ABI
    /// requires) and arrays filled by copying.
    pub(crate) fn reused(ty: TensorType) -> Result<Array> {
        let bytes = ty.size_bytes();
        if let Device::Cuda(ordinal) = ty.device {
            let ptr = cuda::alloc(ordinal, bytes)? as *mut u8;
            return Ok(Array {
                buf: Arc::new(Buffer {
                    ptr,
                    bytes,
                    device: ty.device,
                    external: None,
                }),
                ty,
            });
        }
        let ptr = pool::alloc(bytes);
        if ptr.is_null() {
            return Err(Error::Usage(format!(
                "out of memory allocating {bytes} bytes for {ty}"
            )));
        }
        Ok(Array {
            buf: Arc::new(Buffer {
                ptr,
                bytes,
                device: Device::Cpu,
                external: None,
            }),
            ty,
        })
    }

    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Array> {
        let ty = TensorType::new(shape.to_vec(), T::DTYPE, Device::Cpu);
        if shape.iter().any(|&d| d < 0) || ty.numel() != data.len() {
            return Err(Error::Usage(format!(
                "{} values do not fill shape {}",
                data.len(),
                ShapeDisplay(shape)
            )));
        }
        let a = Array::reused(ty)?;
        // SAFETY: same byte length, non-overlapping; this fills the whole buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr() as *const u8, a.buf.ptr, a.buf.bytes)
        };
        Ok(a)
    }

    pub fn scalar<T: Element>(x: T) -> Result<Array> {
        Array::from_slice(&[x], &[])
    }

    /// Values drawn from N(0, 1) (floats) or uniformly from [-5, 5] (ints, bools as 0/1).
    pub fn random(shape: &[i64], dtype: DType, seed: u64) -> Result<Array> {
        let ty = TensorType::new(shape.to_vec(), dtype, Device::Cpu);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let values: Vec<f64> = (0..ty.numel())
            .map(|_| match crate::dtype::category(dtype) {
                crate::dtype::Category::Float => rng.sample(rand_distr::StandardNormal),
                crate::dtype::Category::Int if dtype == DType::U8 => rng.gen_range(0..=10) as f64,
                crate::dtype::Category::Int => rng.gen_range(-5..=5) as f64,
                crate::dtype::Category::Bool => rng.gen_range(0..=1) as f64,
            })
            .collect();
        Array::from_f64(&values, shape, dtype)
    }

    /// Builds an array of `dtype` from f64 values (rounded or truncated like a cast).
    pub fn from_f64(values: &[f64], shape: &[i64], dtype: DType) -> Result<Array> {
        fn conv<T: Element>(v: &[f64], shape: &[i64]) -> Result<Array> {
            Array::from_slice(
                &v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>(),
                shape,
            )
        }
        match dtype {
            DType::Bool => conv::<bool>(values, shape),
            DType::U8 => conv::<u8>(values, shape),
            DType::I8 => conv::<i8>(values, shape),
            DType::I16 => conv::<i16>(values, shape),
            DType::I32 => conv::<i32>(values, shape),
            DType::I64 => conv::<i64>(values, shape),
            DType::F16 => conv::<f16>(values, shape),
            DType::BF16 => conv::<bf16>(values, shape),
            DType::F32 => conv::<f32>(values, shape),
            DType::F64 => conv::<f64>(values, shape),
        }
    }

    /// Builds an array from raw little-endian bytes of `ty`.
    pub fn from_bytes(bytes: &[u8], ty: TensorType) -> Result<Array> {
        if bytes.len() != ty.size_bytes() {
            return Err(Error::Usage(format!(
                "{} bytes do not hold {ty} ({} bytes)",
                bytes.len(),
                ty.size_bytes()
            )));
        }
        let a = Array::reused(ty)?;
        // SAFETY: same length, non-overlapping; this fills the whole buffer.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), a.buf.ptr, bytes.len()) };
        Ok(a)
    }

    /// Wraps memory owned by someone else, without copying: `owner` is dropped (and so the
    /// memory released) when the last clone of the array goes.
    ///
    /// # Safety
    /// `ptr` must point to `ty.size_bytes()` bytes of contiguous, row-major memory on
    /// `ty.device` that stay valid and are not written by anyone else while `owner` lives.
    pub unsafe fn from_external(
        ptr: *mut u8,
        ty: TensorType,
        owner: Box<dyn Send + Sync>,
    ) -> Array {
        Array {
            buf: Arc::new(Buffer {
                ptr,
                bytes: ty.size_bytes(),
                device: ty.device,
                external: Some(owner),
            }),
            ty,
        }
    }

    /// The address of the first element (a device address for arrays on CUDA), for handing the
    /// memory to another library, e.g. through DLPack; valid while this array or a clone lives.
    pub fn as_ptr(&self) -> *const u8 {
        self.buf.ptr
    }

    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    pub fn shape(&self) -> &[i64] {
        &self.ty.shape
    }

    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }

    pub fn numel(&self) -> usize {
        self.ty.numel()
    }

    /// Marks the array as requiring grad (it is part of the jit cache key).
    pub fn with_requires_grad(mut self, requires_grad: bool) -> Array {
        self.ty.requires_grad = requires_grad;
        self
    }

    /// The raw bytes of a host array; a device array must be copied with [`Array::to`] first.
    pub fn bytes(&self) -> Result<&[u8]> {
        if self.ty.device != Device::Cpu {
            return Err(Error::Usage(format!(
                "the bytes of an array on {} are not readable from the host: copy it with \
                 .to(Device::Cpu) first",
                self.ty.device
            )));
        }
        if self.buf.bytes == 0 {
            return Ok(&[]);
        }
        // SAFETY: the buffer is `bytes` long and lives as long as self.
        Ok(unsafe { std::slice::from_raw_parts(self.buf.ptr, self.buf.bytes) })
    }

    pub fn device(&self) -> Device {
        self.ty.device
    }

    /// The array on `device`: itself if it is there already, else a copy (host to device,
    /// device to host, or through the host between two devices). Device copies wait for the
    /// device's stream, so the result is ready to read.
    pub fn to(&self, device: Device) -> Result<Array> {
        if device == self.ty.device {
            return Ok(self.clone());
        }
        let mut ty = self.ty.clone();
        ty.device = device;
        match (self.ty.device, device) {
            (Device::Cpu, Device::Cuda(ordinal)) => {
                let a = Array::reused(ty)?;
                cuda::copy_h2d(ordinal, a.buf.ptr as u64, self.bytes()?)?;
                Ok(a)
            }
            (Device::Cuda(ordinal), Device::Cpu) => {
                let a = Array::reused(ty)?;
                let dst = if a.buf.bytes == 0 {
                    &mut [][..]
                } else {
                    // SAFETY: a fresh host buffer of `bytes` bytes, not shared yet.
                    unsafe { std::slice::from_raw_parts_mut(a.buf.ptr, a.buf.bytes) }
                };
                cuda::copy_d2h(ordinal, dst, self.buf.ptr as u64)?;
                Ok(a)
            }
            (Device::Cuda(_), Device::Cuda(_)) => self.to(Device::Cpu)?.to(device),
            (Device::Cpu, Device::Cpu) => Ok(self.clone()),
        }
    }

    /// The same buffer as another type of the same byte size, device and dtype (a reshape:
    /// arrays are contiguous). Arrays are never written once made, so sharing is safe.
    pub(crate) fn aliased(&self, ty: TensorType) -> Result<Array> {
        if ty.size_bytes() != self.ty.size_bytes()
            || ty.device != self.ty.device
            || ty.dtype != self.ty.dtype
        {
            return Err(Error::Bug(format!(
                "aliasing {} as {}: not the same bytes",
                self.ty, ty
            )));
        }
        Ok(Array {
            buf: self.buf.clone(),
            ty,
        })
    }

    pub(crate) fn data_ptr(&self) -> *mut u8 {
        self.buf.ptr
    }

    /// A handle that tells whether this array's buffer is still held (by a clone of it or an
    /// alias of it), without holding it.
    pub(crate) fn watch(&self) -> Watch {
        Watch(Arc::downgrade(&self.buf))
    }

    /// The elements, copied to the host (from a device array too, as torch's `tolist`).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.ty.device != Device::Cpu {
            return self.to(Device::Cpu)?.to_vec();
        }
        if T::DTYPE != self.ty.dtype {
            return Err(Error::Usage(format!(
                "to_vec::<{}>() on an array of dtype {}",
                T::DTYPE.short_name(),
                self.ty.dtype.short_name()
            )));
        }
        let n = self.numel();
        let mut out = Vec::with_capacity(n);
        let p = self.buf.ptr as *const T;
        for i in 0..n {
            // SAFETY: dtype checked; i < numel; the buffer is aligned to 64 bytes (pool blocks).
            out.push(unsafe { p.add(i).read() });
        }
        Ok(out)
    }

    /// Every element as f64, whatever the dtype (copied to the host for a device array, which
    /// is where this can fail).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        fn conv<T: Element>(a: &Array) -> Result<Vec<f64>> {
            Ok(a.to_vec::<T>()?.into_iter().map(T::to_f64).collect())
        }
        match self.ty.dtype {
            DType::Bool => conv::<bool>(self),
            DType::U8 => conv::<u8>(self),
            DType::I8 => conv::<i8>(self),
            DType::I16 => conv::<i16>(self),
            DType::I32 => conv::<i32>(self),
            DType::I64 => conv::<i64>(self),
            DType::F16 => conv::<f16>(self),
            DType::BF16 => conv::<bf16>(self),
            DType::F32 => conv::<f32>(self),
            DType::F64 => conv::<f64>(self),
        }
    }
}
