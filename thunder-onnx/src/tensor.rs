//! `TensorProto` to [`Array`]: raw little-endian data, the typed repeated fields, and external
//! data files (`location`, `offset`, `length` relative to the model's folder).

use crate::error::{OnnxError, Result};
use crate::proto::TensorProto;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use thunder_core::ir::TensorType;
use thunder_core::{Array, DType, Device};

/// `TensorProto.DataType` to a dtype; `None` for types thunder has no dtype for.
pub fn dtype_of(code: i32) -> Option<DType> {
    Some(match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        16 => DType::BF16,
        _ => return None,
    })
}

/// The name ONNX gives a `TensorProto.DataType` code, for messages.
pub fn onnx_type_name(code: i32) -> String {
    let name = match code {
        0 => "UNDEFINED",
        1 => "FLOAT",
        2 => "UINT8",
        3 => "INT8",
        4 => "UINT16",
        5 => "INT16",
        6 => "INT32",
        7 => "INT64",
        8 => "STRING",
        9 => "BOOL",
        10 => "FLOAT16",
        11 => "DOUBLE",
        12 => "UINT32",
        13 => "UINT64",
        14 => "COMPLEX64",
        15 => "COMPLEX128",
        16 => "BFLOAT16",
        _ => return format!("data type {code}"),
    };
    name.to_string()
}

fn shape_of(t: &TensorProto, what: &str) -> Result<Vec<i64>> {
    if let Some(d) = t.dims.iter().find(|&&d| d < 0) {
        return Err(OnnxError::model(
            what,
            format!("negative dimension {d} in {:?}", t.dims),
        ));
    }
    let mut n: u64 = 1;
    for &d in &t.dims {
        n = n
            .checked_mul(d as u64)
            .filter(|&n| n <= (1u64 << 40))
            .ok_or_else(|| OnnxError::model(what, format!("shape {:?} is too large", t.dims)))?;
    }
    Ok(t.dims.clone())
}

/// Reads a tensor's data, from the file next to `model_dir` when it is stored externally.
pub fn to_array(t: &TensorProto, model_dir: Option<&Path>, what: &str) -> Result<Array> {
    to_array_mapped(t, model_dir, what, &ExternalFiles::default())
}

/// External data files opened so far, memory-mapped once each and shared by their tensors
/// (and by the threads reading them).
#[derive(Default)]
pub struct ExternalFiles {
    maps: Mutex<HashMap<PathBuf, prost::bytes::Bytes>>,
}

/// As [`to_array`], with external data read from the mappings in `files`.
pub fn to_array_mapped(
    t: &TensorProto,
    model_dir: Option<&Path>,
    what: &str,
    files: &ExternalFiles,
) -> Result<Array> {
    let dtype = dtype_of(t.data_type).ok_or_else(|| {
        OnnxError::model(
            what,
            format!("{} tensors are not supported", onnx_type_name(t.data_type)),
        )
    })?;
    let shape = shape_of(t, what)?;
    let ty = TensorType::new(shape.clone(), dtype, Device::Cpu);
    let n = ty.numel();
    let fill = |len: usize, field: &str| -> Result<()> {
        if len == n {
            Ok(())
        } else {
            Err(OnnxError::model(
                what,
                format!("{field} holds {len} values for shape {shape:?} ({n} values)"),
            ))
        }
    };
    let array = if t.data_location == 1 {
        let bytes = read_external(t, model_dir, ty.size_bytes(), what, files)?;
        shared_array(&bytes, ty)
    } else if !t.raw_data.is_empty() || n == 0 {
        if t.raw_data.len() != ty.size_bytes() {
            return Err(OnnxError::model(
                what,
                format!(
                    "raw_data holds {} bytes, {} needs {}",
                    t.raw_data.len(),
                    ty,
                    ty.size_bytes()
                ),
            ));
        }
        shared_array(&t.raw_data, ty)
    } else {
        match dtype {
            DType::F32 => {
                fill(t.float_data.len(), "float_data")?;
                Array::from_slice(&t.float_data, &shape)
            }
            DType::F64 => {
                fill(t.double_data.len(), "double_data")?;
                Array::from_slice(&t.double_data, &shape)
            }
            DType::I64 => {
                fill(t.int64_data.len(), "int64_data")?;
                Array::from_slice(&t.int64_data, &shape)
            }
            DType::F16 | DType::BF16 => {
                fill(t.int32_data.len(), "int32_data")?;
                let bytes: Vec<u8> = t
                    .int32_data
                    .iter()
                    .flat_map(|&b| (b as u16).to_le_bytes())
                    .collect();
                Array::from_bytes(&bytes, ty)
            }
            _ => {
                fill(t.int32_data.len(), "int32_data")?;
                let v: Vec<f64> = t.int32_data.iter().map(|&x| x as f64).collect();
                Array::from_f64(&v, &shape, dtype)
            }
        }
    };
    array.map_err(|e| OnnxError::model(what, e.to_string()))
}

/// An array over `bytes` without a copy when they are aligned for the dtype (the array keeps
/// the buffer alive); a copy otherwise. Protobuf does not align fields, so both happen.
fn shared_array(bytes: &prost::bytes::Bytes, ty: TensorType) -> thunder_core::Result<Array> {
    let align = ty.dtype.size_bytes().max(1);
    if bytes.is_empty() || !(bytes.as_ptr() as usize).is_multiple_of(align) {
        return Array::from_bytes(bytes, ty);
    }
    // SAFETY: `bytes` holds exactly `ty.size_bytes()` bytes (checked by the caller), aligned
    // for the dtype, row-major; `Bytes` is immutable and the clone moved into the array keeps
    // the memory alive as long as the array.
    Ok(unsafe { Array::from_external(bytes.as_ptr() as *mut u8, ty, Box::new(bytes.clone())) })
}

fn read_external(
    t: &TensorProto,
    model_dir: Option<&Path>,
    size: usize,
    what: &str,
    files: &ExternalFiles,
) -> Result<prost::bytes::Bytes> {
    let field = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.as_str())
    };
    let location = field("location")
        .ok_or_else(|| OnnxError::model(what, "external data without a `location`"))?;
    let number = |k: &str| -> Result<Option<u64>> {
        field(k)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    OnnxError::model(what, format!("external data `{k}` is `{v}`, not a number"))
                })
            })
            .transpose()
    };
    let offset = number("offset")?.unwrap_or(0);
    let length = number("length")?.unwrap_or(size as u64);
    if length != size as u64 {
        return Err(OnnxError::model(
            what,
            format!("external data length {length} bytes, the tensor needs {size}"),
        ));
    }
    let rel = Path::new(location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(OnnxError::model(
            what,
            format!("external data location `{location}` must be a path inside the model's folder"),
        ));
    }
    let path = model_dir.unwrap_or(Path::new(".")).join(rel);
    let io = |e: std::io::Error| OnnxError::File {
        path: path.clone(),
        message: format!("external data of tensor `{}`: {e}", t.name),
    };
    let mut maps = files.maps.lock().unwrap_or_else(PoisonError::into_inner);
    let map = match maps.get(&path) {
        Some(m) => m.clone(),
        None => {
            let file = std::fs::File::open(&path).map_err(io)?;
            let len = file.metadata().map_err(io)?.len();
            let map = if len == 0 {
                prost::bytes::Bytes::new()
            } else {
                // SAFETY: a private copy-on-write mapping, as for the model file (see
                // `OnnxModel::load`).
                let m = unsafe { memmap2::MmapOptions::new().map_copy(&file) }.map_err(io)?;
                prost::bytes::Bytes::from_owner(m)
            };
            maps.insert(path.clone(), map.clone());
            map
        }
    };
    drop(maps);
    let end = offset
        .checked_add(size as u64)
        .filter(|&e| e <= map.len() as u64);
    match end {
        Some(end) => Ok(map.slice(offset as usize..end as usize)),
        None => Err(OnnxError::File {
            path: path.clone(),
            message: format!(
                "external data of tensor `{}`: bytes {offset}..{} are past the file's end ({} bytes)",
                t.name,
                offset.saturating_add(size as u64),
                map.len()
            ),
        }),
    }
}
