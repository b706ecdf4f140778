//! Reading host tensors into lanes and writing lanes back. Descriptors are DLPack-shaped, so
//! strides (in elements, possibly negative or zero) and a byte offset are honoured on both
//! sides; empty strides mean row-major, as in DLPack.

use crate::data::{bf16_bits, describe, f16_bits, lane_kind, Lanes};
use half::{bf16, f16};
use thunder_abi::{DTypeCode, DeviceKind, TensorDesc};

/// Checks that `desc` is a CPU tensor of exactly `dtype` and `shape`.
pub(crate) fn check_desc(
    desc: &TensorDesc<'_>,
    dtype: DTypeCode,
    shape: &[usize],
) -> Result<(), String> {
    let matches_shape = desc.shape.len() == shape.len()
        && desc
            .shape
            .iter()
            .zip(shape)
            .all(|(&got, &want)| got >= 0 && got as usize == want);
    if desc.dtype != dtype || !matches_shape {
        let got: Vec<String> = desc.shape.iter().map(i64::to_string).collect();
        return Err(format!(
            "expected {} but the descriptor is {}[{}]",
            describe(dtype, shape),
            desc.dtype.short_name(),
            got.join(", ")
        ));
    }
    if desc.device.kind != DeviceKind::Cpu {
        return Err(format!("expected a CPU tensor, got {:?}", desc.device));
    }
    if !desc.strides.is_empty() && desc.strides.len() != shape.len() {
        return Err(format!(
            "{} strides for a rank-{} tensor",
            desc.strides.len(),
            shape.len()
        ));
    }
    if desc.data.is_null() && shape.iter().product::<usize>() > 0 {
        return Err("null data pointer for a non-empty tensor".to_string());
    }
    Ok(())
}

/// A descriptor's shape and the byte stride of each of its dims.
type Layout = (Vec<usize>, Vec<isize>);

/// The descriptor's shape and the byte stride of each dim (0 for size-1 dims), checked so
/// that no element's offset overflows. `None` for an empty tensor.
fn byte_strides(desc: &TensorDesc<'_>) -> Result<Option<Layout>, String> {
    let shape: Vec<usize> = desc.shape.iter().map(|&d| d.max(0) as usize).collect();
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(None);
    }
    let strides: Vec<i64> = if desc.strides.is_empty() {
        let mut acc = 1i64;
        let mut s: Vec<i64> = shape
            .iter()
            .rev()
            .map(|&d| {
                let stride = acc;
                acc = acc.saturating_mul(d as i64);
                stride
            })
            .collect();
        s.reverse();
        s
    } else {
        desc.strides.to_vec()
    };
    let size = desc.dtype.size_bytes() as i64;
    let overflow = || "stride arithmetic overflows".to_string();
    // Each dim's extreme offset must fit before the odometer below adds them up unchecked.
    let mut extent = 0i64;
    for (&d, &s) in shape.iter().zip(&strides) {
        let span = (d as i64 - 1)
            .checked_mul(s)
            .and_then(|v| v.checked_mul(size));
        extent = span
            .and_then(|v| extent.checked_add(v.abs()))
            .ok_or_else(overflow)?;
    }
    isize::try_from(extent).map_err(|_| overflow())?;
    // Size-1 dims never step, so their (possibly huge) strides are never multiplied out.
    let byte_strides: Vec<isize> = shape
        .iter()
        .zip(&strides)
        .map(|(&d, &s)| if d == 1 { 0 } else { (s * size) as isize })
        .collect();
    Ok(Some((shape, byte_strides)))
}

/// Byte offsets, relative to the first element, of every element in row-major order.
fn byte_offsets(desc: &TensorDesc<'_>) -> Result<Vec<isize>, String> {
    let Some((shape, byte_strides)) = byte_strides(desc)? else {
        return Ok(Vec::new());
    };
    let n: usize = shape.iter().product();
    let mut offsets = Vec::with_capacity(n);
    let mut index = vec![0usize; shape.len()];
    let mut offset = 0isize;
    for _ in 0..n {
        offsets.push(offset);
        // Odometer: bump the last dim, carrying into earlier ones; the offset always stays the
        // offset of an element, so it never leaves the range checked above.
        for d in (0..shape.len()).rev() {
            if index[d] + 1 < shape[d] {
                index[d] += 1;
                offset += byte_strides[d];
                break;
            }
            offset -= byte_strides[d] * (shape[d] - 1) as isize;
            index[d] = 0;
        }
    }
    Ok(offsets)
}

/// Decodes a checked descriptor into lanes (row-major, contiguous).
pub(crate) fn read(desc: &TensorDesc<'_>) -> Result<Lanes, String> {
    decode(desc, &byte_offsets(desc)?)
}

/// Decodes only the elements at row-major `positions` of a checked descriptor: a gather
/// from a large input (an embedding table) reads the rows it takes, not the whole table.
pub(crate) fn read_elements(desc: &TensorDesc<'_>, positions: &[usize]) -> Result<Lanes, String> {
    let offsets = match byte_strides(desc)? {
        None if positions.is_empty() => Vec::new(),
        None => return Err("internal: element positions in an empty tensor".into()),
        Some((shape, strides)) => {
            let n: usize = shape.iter().product();
            let mut offsets = Vec::with_capacity(positions.len());
            for &p in positions {
                if p >= n {
                    return Err(format!("internal: element {p} of a tensor of {n}"));
                }
                let (mut flat, mut off) = (p, 0isize);
                for d in (0..shape.len()).rev() {
                    off += (flat % shape[d]) as isize * strides[d];
                    flat /= shape[d];
                }
                offsets.push(off);
            }
            offsets
        }
    };
    decode(desc, &offsets)
}

/// Decodes the elements at byte `offsets` (from the first element) into lanes.
fn decode(desc: &TensorDesc<'_>, offsets: &[isize]) -> Result<Lanes, String> {
    let base = desc.base_ptr() as *const u8;
    // SAFETY: the host guarantees that `data` with the descriptor's offset, shape and strides
    // addresses valid elements for the duration of the call; `check_desc` rejected null data
    // for non-empty tensors, and unaligned reads make no alignment assumption.
    let at = |off: isize| base.wrapping_offset(off);
    unsafe {
        Ok(match desc.dtype {
            DTypeCode::Bool => Lanes::Bool(offsets.iter().map(|&o| at(o).read() != 0).collect()),
            DTypeCode::U8 => Lanes::Int(offsets.iter().map(|&o| i64::from(at(o).read())).collect()),
            DTypeCode::I8 => Lanes::Int(
                offsets
                    .iter()
                    .map(|&o| i64::from(load::<i8>(at(o))))
                    .collect(),
            ),
            DTypeCode::I16 => Lanes::Int(
                offsets
                    .iter()
                    .map(|&o| i64::from(load::<i16>(at(o))))
                    .collect(),
            ),
            DTypeCode::I32 => Lanes::Int(
                offsets
                    .iter()
                    .map(|&o| i64::from(load::<i32>(at(o))))
                    .collect(),
            ),
            DTypeCode::I64 => Lanes::Int(offsets.iter().map(|&o| load::<i64>(at(o))).collect()),
            DTypeCode::F16 => Lanes::Float(
                offsets
                    .iter()
                    .map(|&o| f16::from_bits(load::<u16>(at(o))).to_f64())
                    .collect(),
            ),
            DTypeCode::BF16 => Lanes::Float(
                offsets
                    .iter()
                    .map(|&o| bf16::from_bits(load::<u16>(at(o))).to_f64())
                    .collect(),
            ),
            DTypeCode::F32 => Lanes::Float(
                offsets
                    .iter()
                    .map(|&o| f64::from(load::<f32>(at(o))))
                    .collect(),
            ),
            DTypeCode::F64 => Lanes::Float(offsets.iter().map(|&o| load::<f64>(at(o))).collect()),
        })
    }
}

unsafe fn load<T: Copy>(p: *const u8) -> T {
    // SAFETY: forwarded from `read`.
    unsafe { std::ptr::read_unaligned(p as *const T) }
}

unsafe fn store<T: Copy>(p: *mut u8, value: T) {
    // SAFETY: forwarded from `write`.
    unsafe { std::ptr::write_unaligned(p as *mut T, value) }
}

/// Encodes normalized lanes into a checked descriptor of the lanes' dtype.
pub(crate) fn write(desc: &TensorDesc<'_>, lanes: &Lanes) -> Result<(), String> {
    let offsets = byte_offsets(desc)?;
    if offsets.len() != lanes.len() || lane_kind(desc.dtype) != lanes.kind() {
        return Err(format!(
            "internal: {} {:?} values for a {} output of {} elements",
            lanes.len(),
            lanes.kind(),
            desc.dtype.short_name(),
            offsets.len()
        ));
    }
    let base = desc.base_ptr();
    let at = |off: isize| base.wrapping_offset(off);
    // SAFETY: as in `read`; the host owns the output memory and lent it for writing.
    unsafe {
        match (lanes, desc.dtype) {
            (Lanes::Bool(v), _) => offsets
                .iter()
                .zip(v)
                .for_each(|(&o, &x)| store(at(o), u8::from(x))),
            (Lanes::Int(v), DTypeCode::U8) => offsets
                .iter()
                .zip(v)
                .for_each(|(&o, &x)| store(at(o), x as u8)),
            (Lanes::Int(v), DTypeCode::I8) => offsets
                .iter()
                .zip(v)
                .for_each(|(&o, &x)| store(at(o), x as i8)),
            (Lanes::Int(v), DTypeCode::I16) => offsets
                .iter()
                .zip(v)
                .for_each(|(&o, &x)| store(at(o), x as i16)),
            (Lanes::Int(v), DTypeCode::I32) => offsets
                .iter()
                .zip(v)
                .for_each(|(&o, &x)| store(at(o), x as i32)),
            (Lanes::Int(v), _) => offsets.iter().zip(v).for_each(|(&o, &x)| store(at(o), x)),
            (Lanes::Float(v), DTypeCode::F16) => offsets
                .iter()
                .zip(v)
                .for_each(|(&o, &x)| store(at(o), f16_bits(x))),
            (Lanes::Float(v), DTypeCode::BF16) => offsets
                .iter()
                .zip(v)
                .for_each(|(&o, &x)| store(at(o), bf16_bits(x))),
            (Lanes::Float(v), DTypeCode::F32) => offsets
                .iter()
                .zip(v)
                .for_each(|(&o, &x)| store(at(o), x as f32)),
            (Lanes::Float(v), _) => offsets.iter().zip(v).for_each(|(&o, &x)| store(at(o), x)),
        }
    }
    Ok(())
}
