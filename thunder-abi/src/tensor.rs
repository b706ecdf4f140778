//! DLPack-shaped tensor descriptors: what a plugin's `run` receives.

use abi_stable::{std_types::RSlice, StableAbi};
use std::ffi::c_void;

/// Element types, by stable name. `code` values are part of the ABI and never reused.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DTypeCode {
    Bool = 0,
    U8 = 1,
    I8 = 2,
    I16 = 3,
    I32 = 4,
    I64 = 5,
    F16 = 6,
    BF16 = 7,
    F32 = 8,
    F64 = 9,
}

impl DTypeCode {
    pub const ALL: [DTypeCode; 10] = [
        DTypeCode::Bool,
        DTypeCode::U8,
        DTypeCode::I8,
        DTypeCode::I16,
        DTypeCode::I32,
        DTypeCode::I64,
        DTypeCode::F16,
        DTypeCode::BF16,
        DTypeCode::F32,
        DTypeCode::F64,
    ];

    pub const fn size_bytes(self) -> usize {
        match self {
            DTypeCode::Bool | DTypeCode::U8 | DTypeCode::I8 => 1,
            DTypeCode::I16 | DTypeCode::F16 | DTypeCode::BF16 => 2,
            DTypeCode::I32 | DTypeCode::F32 => 4,
            DTypeCode::I64 | DTypeCode::F64 => 8,
        }
    }

    /// The short name used in printed traces (`f32`, `bf16`, `b8`).
    pub const fn short_name(self) -> &'static str {
        match self {
            DTypeCode::Bool => "b8",
            DTypeCode::U8 => "u8",
            DTypeCode::I8 => "i8",
            DTypeCode::I16 => "i16",
            DTypeCode::I32 => "i32",
            DTypeCode::I64 => "i64",
            DTypeCode::F16 => "f16",
            DTypeCode::BF16 => "bf16",
            DTypeCode::F32 => "f32",
            DTypeCode::F64 => "f64",
        }
    }

    pub fn from_short_name(name: &str) -> Option<DTypeCode> {
        DTypeCode::ALL.into_iter().find(|d| d.short_name() == name)
    }

    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DTypeCode::F16 | DTypeCode::BF16 | DTypeCode::F32 | DTypeCode::F64
        )
    }
}

/// Device kinds use DLPack's codes.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    Cpu = 1,
    Cuda = 2,
}

#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceDesc {
    pub kind: DeviceKind,
    pub index: u32,
}

impl DeviceDesc {
    pub const CPU: DeviceDesc = DeviceDesc {
        kind: DeviceKind::Cpu,
        index: 0,
    };
}

/// One tensor handed to `run`: DLPack's fields. Strides are in elements, as in DLPack.
/// The memory behind `data` is owned by the host and valid for the duration of the call.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct TensorDesc<'a> {
    pub data: *mut c_void,
    pub byte_offset: u64,
    pub device: DeviceDesc,
    pub dtype: DTypeCode,
    pub shape: RSlice<'a, i64>,
    pub strides: RSlice<'a, i64>,
}

impl TensorDesc<'_> {
    pub fn numel(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }

    /// True when the strides are the row-major strides of the shape (size-1 dims ignored).
    /// An empty tensor is contiguous whatever its strides: it has no elements to lay out (the
    /// host may give a `[5, 0]` tensor torch's strides `[1, 1]`).
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1i64;
        for (&dim, &stride) in self.shape.iter().zip(self.strides.iter()).rev() {
            if dim != 1 && stride != expected {
                return false;
            }
            expected *= dim;
        }
        true
    }

    /// Start of the tensor's first element.
    pub fn base_ptr(&self) -> *mut u8 {
        // The offset is applied with wrapping arithmetic: null pointers of empty tensors stay
        // valid to compute with and are never dereferenced.
        (self.data as *mut u8).wrapping_add(self.byte_offset as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc<'a>(shape: &'a [i64], strides: &'a [i64]) -> TensorDesc<'a> {
        TensorDesc {
            data: std::ptr::null_mut(),
            byte_offset: 0,
            device: DeviceDesc::CPU,
            dtype: DTypeCode::F32,
            shape: RSlice::from_slice(shape),
            strides: RSlice::from_slice(strides),
        }
    }

    #[test]
    fn contiguity_ignores_size_one_dims_and_empty_tensors() {
        assert!(desc(&[2, 3], &[3, 1]).is_contiguous());
        assert!(!desc(&[2, 3], &[1, 2]).is_contiguous());
        assert!(desc(&[2, 1, 3], &[3, 99, 1]).is_contiguous());
        assert!(desc(&[], &[]).is_contiguous());
        // torch gives a [5, 0] tensor strides [1, 1]; with no elements any layout will do.
        assert!(desc(&[5, 0], &[1, 1]).is_contiguous());
        assert!(desc(&[0], &[7]).is_contiguous());
    }
}
