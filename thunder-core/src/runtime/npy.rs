//! `.npy` files in and out, through the `npyz` crate.

use super::array::{Array, Element};
use crate::dtype::DType;
use crate::error::{Error, Result};
use half::f16;
use std::path::Path;

fn file_err(path: &Path, message: impl Into<String>) -> Error {
    Error::File {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

pub fn read_npy(path: &Path) -> Result<Array> {
    let bytes = std::fs::read(path).map_err(|e| file_err(path, format!("cannot read: {e}")))?;
    let npy = npyz::NpyFile::new(&bytes[..])
        .map_err(|e| file_err(path, format!("not a valid .npy file: {e}")))?;
    if npy.order() == npyz::Order::Fortran && npy.shape().len() > 1 {
        return Err(file_err(
            path,
            "Fortran-ordered arrays are not supported; save with np.ascontiguousarray",
        ));
    }
    let shape: Vec<i64> = npy.shape().iter().map(|&d| d as i64).collect();
    let descr = npy.dtype().descr();
    let code = descr
        .trim_matches('\'')
        .trim_start_matches(['<', '>', '|', '=']);
    fn take<T: Element + npyz::Deserialize>(
        npy: npyz::NpyFile<&[u8]>,
        shape: &[i64],
        path: &Path,
    ) -> Result<Array> {
        let v: Vec<T> = npy
            .into_vec()
            .map_err(|e| file_err(path, format!("corrupt data: {e}")))?;
        Array::from_slice(&v, shape).map_err(|e| file_err(path, e.to_string()))
    }
    match code {
        "b1" => take::<bool>(npy, &shape, path),
        "u1" => take::<u8>(npy, &shape, path),
        "i1" => take::<i8>(npy, &shape, path),
        "i2" => take::<i16>(npy, &shape, path),
        "i4" => take::<i32>(npy, &shape, path),
        "i8" => take::<i64>(npy, &shape, path),
        "f2" => take::<f16>(npy, &shape, path),
        "f4" => take::<f32>(npy, &shape, path),
        "f8" => take::<f64>(npy, &shape, path),
        _ => Err(file_err(
            path,
            format!(
                "unsupported dtype `{descr}` (expected one of b1, u1, i1, i2, i4, i8, f2, f4, f8)"
            ),
        )),
    }
}

pub fn write_npy(path: &Path, a: &Array) -> Result<()> {
    use npyz::WriterBuilder;
    let shape: Vec<u64> = a.shape().iter().map(|&d| d as u64).collect();
    let file =
        std::fs::File::create(path).map_err(|e| file_err(path, format!("cannot create: {e}")))?;
    let mut file = std::io::BufWriter::new(file);
    fn put<T: Element + npyz::AutoSerialize>(
        a: &Array,
        shape: &[u64],
        w: &mut impl std::io::Write,
    ) -> Result<std::io::Result<()>> {
        let data = a.to_vec::<T>()?;
        let result = (|| {
            let mut writer = npyz::WriteOptions::new()
                .default_dtype()
                .shape(shape)
                .writer(w)
                .begin_nd()?;
            writer.extend(data)?;
            writer.finish()
        })();
        Ok(result)
    }
    let io = match a.dtype() {
        DType::Bool => put::<bool>(a, &shape, &mut file)?,
        DType::U8 => put::<u8>(a, &shape, &mut file)?,
        DType::I8 => put::<i8>(a, &shape, &mut file)?,
        DType::I16 => put::<i16>(a, &shape, &mut file)?,
        DType::I32 => put::<i32>(a, &shape, &mut file)?,
        DType::I64 => put::<i64>(a, &shape, &mut file)?,
        DType::F16 => put::<f16>(a, &shape, &mut file)?,
        DType::F32 => put::<f32>(a, &shape, &mut file)?,
        DType::F64 => put::<f64>(a, &shape, &mut file)?,
        DType::BF16 => {
            return Err(file_err(
                path,
                "bf16 has no .npy dtype; convert the output to f32 first",
            ))
        }
    };
    io.map_err(|e| file_err(path, format!("cannot write: {e}")))
}
