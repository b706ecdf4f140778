//! Decoded tensor data. Every dtype lives in one of three lanes (bool, i64, f64) that hold all
//! of its values exactly, so kernels are written once per lane rather than once per dtype. The
//! invariant kept after every op is that lane values are exactly representable in the value's
//! dtype: floats are rounded to it and ints wrapped to its width ([`Lanes::normalize`]).

use half::{bf16, f16};
use thunder_abi::DTypeCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LaneKind {
    Bool,
    Int,
    Float,
}

pub(crate) fn lane_kind(dtype: DTypeCode) -> LaneKind {
    match dtype {
        DTypeCode::Bool => LaneKind::Bool,
        DTypeCode::U8 | DTypeCode::I8 | DTypeCode::I16 | DTypeCode::I32 | DTypeCode::I64 => {
            LaneKind::Int
        }
        DTypeCode::F16 | DTypeCode::BF16 | DTypeCode::F32 | DTypeCode::F64 => LaneKind::Float,
    }
}

/// Rounds to the nearest value of `dtype` (ties to even), as a dtype-exact kernel would.
pub(crate) fn round_float(x: f64, dtype: DTypeCode) -> f64 {
    match dtype {
        DTypeCode::F64 => x,
        DTypeCode::F32 => x as f32 as f64,
        // half's own f64 conversions drop the low mantissa bits before rounding (and go through
        // f32 when built with f16c), which misrounds values just above a tie.
        DTypeCode::F16 => round_binary(x, 10, -14, 15),
        DTypeCode::BF16 => round_binary(x, 7, -126, 127),
        DTypeCode::Bool
        | DTypeCode::U8
        | DTypeCode::I8
        | DTypeCode::I16
        | DTypeCode::I32
        | DTypeCode::I64 => x,
    }
}

fn pow2(k: i32) -> f64 {
    // Only called with exponents well inside f64's normal range.
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Correct rounding of `x` to a binary format with `mant_bits` stored mantissa bits, smallest
/// normal exponent `min_exp` and largest exponent `max_exp` (subnormals and overflow included).
fn round_binary(x: f64, mant_bits: i32, min_exp: i32, max_exp: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let exp = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let quantum = pow2(exp.max(min_exp) - mant_bits);
    // Dividing by a power of two is exact here, so the only rounding is round_ties_even.
    let rounded = (x / quantum).round_ties_even() * quantum;
    let max_finite = (2.0 - pow2(-mant_bits)) * pow2(max_exp);
    if rounded.abs() > max_finite {
        f64::INFINITY.copysign(x)
    } else {
        rounded
    }
}

/// The value of `x` in a float dtype, rounded once (going through f64 first would round twice
/// for integers beyond 2^53).
pub(crate) fn int_to_float(x: i64, dtype: DTypeCode) -> f64 {
    let magnitude = x.unsigned_abs();
    let bits = 64 - magnitude.leading_zeros() as i32;
    match dtype {
        DTypeCode::F32 => x as f32 as f64,
        DTypeCode::BF16 if bits > 53 => {
            let shift = bits - 8;
            let kept = magnitude >> shift;
            let rest = magnitude & ((1u64 << shift) - 1);
            let half = 1u64 << (shift - 1);
            let kept = if rest > half || (rest == half && kept & 1 == 1) {
                kept + 1
            } else {
                kept
            };
            let value = kept as f64 * pow2(shift);
            if x < 0 {
                -value
            } else {
                value
            }
        }
        // f16 overflows long before 2^53 and f64 rounds once, so these are exact.
        _ => round_float(x as f64, dtype),
    }
}

/// Wraps an integer to the width of `dtype` (two's complement, u8 modulo 256).
pub(crate) fn wrap_int(x: i64, dtype: DTypeCode) -> i64 {
    match dtype {
        DTypeCode::U8 => x as u8 as i64,
        DTypeCode::I8 => x as i8 as i64,
        DTypeCode::I16 => x as i16 as i64,
        DTypeCode::I32 => x as i32 as i64,
        DTypeCode::I64
        | DTypeCode::Bool
        | DTypeCode::F16
        | DTypeCode::BF16
        | DTypeCode::F32
        | DTypeCode::F64 => x,
    }
}

/// A literal operand, or one element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub(crate) fn kind(self) -> LaneKind {
        match self {
            Scalar::Bool(_) => LaneKind::Bool,
            Scalar::Int(_) => LaneKind::Int,
            Scalar::Float(_) => LaneKind::Float,
        }
    }

    /// The scalar as an operand of a `dtype` tensor. A number beside a float tensor is first
    /// rounded to its dtype (the prim contract, as torch casts a Python scalar to the tensor's
    /// dtype); a float never meets an int tensor and an int must fit the width (the host
    /// promotes before that).
    pub(crate) fn operand_of(self, dtype: DTypeCode) -> Result<Scalar, String> {
        let name = dtype.short_name();
        match (self, lane_kind(dtype)) {
            (Scalar::Float(v), LaneKind::Float) => Ok(Scalar::Float(round_float(v, dtype))),
            (Scalar::Int(v), LaneKind::Float) => Ok(Scalar::Float(int_to_float(v, dtype))),
            (Scalar::Bool(v), LaneKind::Float) => Ok(Scalar::Float(f64::from(u8::from(v)))),
            (Scalar::Int(v), LaneKind::Int) if wrap_int(v, dtype) == v => Ok(Scalar::Int(v)),
            (Scalar::Int(v), LaneKind::Int) => Err(format!("scalar {v} does not fit {name}")),
            (Scalar::Bool(v), LaneKind::Int) => Ok(Scalar::Int(i64::from(v))),
            (Scalar::Bool(v), LaneKind::Bool) => Ok(Scalar::Bool(v)),
            (Scalar::Float(v), LaneKind::Int | LaneKind::Bool) => {
                Err(format!("float scalar {v} with a {name} tensor"))
            }
            (Scalar::Int(v), LaneKind::Bool) => Err(format!("int scalar {v} with a b8 tensor")),
        }
    }

    /// The scalar converted to `dtype` the way `full` converts its fill value.
    pub(crate) fn cast_to(self, dtype: DTypeCode) -> Result<Scalar, String> {
        match (self, lane_kind(dtype)) {
            (Scalar::Float(v), LaneKind::Int) => {
                let t = v.trunc();
                // Exact in f64: the bounds are powers of two and narrower widths compare back.
                let in_i64 = t >= -pow2(63) && t < pow2(63);
                if in_i64 && wrap_int(t as i64, dtype) as f64 == t {
                    Ok(Scalar::Int(t as i64))
                } else {
                    Err(format!(
                        "fill value {v} does not fit {}",
                        dtype.short_name()
                    ))
                }
            }
            (Scalar::Float(v), LaneKind::Bool) => Ok(Scalar::Bool(v != 0.0)),
            (Scalar::Int(v), LaneKind::Bool) => Ok(Scalar::Bool(v != 0)),
            (Scalar::Int(v), LaneKind::Float) => Ok(Scalar::Float(int_to_float(v, dtype))),
            _ => self.operand_of(dtype),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lanes {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl Lanes {
    pub(crate) fn len(&self) -> usize {
        match self {
            Lanes::Bool(v) => v.len(),
            Lanes::Int(v) => v.len(),
            Lanes::Float(v) => v.len(),
        }
    }

    pub(crate) fn kind(&self) -> LaneKind {
        match self {
            Lanes::Bool(_) => LaneKind::Bool,
            Lanes::Int(_) => LaneKind::Int,
            Lanes::Float(_) => LaneKind::Float,
        }
    }

    pub(crate) fn splat(value: Scalar, n: usize) -> Lanes {
        match value {
            Scalar::Bool(v) => Lanes::Bool(vec![v; n]),
            Scalar::Int(v) => Lanes::Int(vec![v; n]),
            Scalar::Float(v) => Lanes::Float(vec![v; n]),
        }
    }

    /// Element `index[i]` of `self` becomes element `i` of the result.
    pub(crate) fn gather(&self, index: &[usize]) -> Result<Lanes, String> {
        fn pick<T: Copy>(v: &[T], index: &[usize]) -> Result<Vec<T>, String> {
            index
                .iter()
                .map(|&i| {
                    v.get(i)
                        .copied()
                        .ok_or_else(|| format!("internal: index {i} out of {} elements", v.len()))
                })
                .collect()
        }
        Ok(match self {
            Lanes::Bool(v) => Lanes::Bool(pick(v, index)?),
            Lanes::Int(v) => Lanes::Int(pick(v, index)?),
            Lanes::Float(v) => Lanes::Float(pick(v, index)?),
        })
    }

    /// Restores the invariant that every value is representable in `dtype`.
    pub(crate) fn normalize(&mut self, dtype: DTypeCode) {
        match self {
            Lanes::Float(v) if dtype != DTypeCode::F64 => {
                v.iter_mut().for_each(|x| *x = round_float(*x, dtype));
            }
            Lanes::Int(v) if dtype != DTypeCode::I64 => {
                v.iter_mut().for_each(|x| *x = wrap_int(*x, dtype));
            }
            Lanes::Bool(_) | Lanes::Int(_) | Lanes::Float(_) => {}
        }
    }
}

pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// `f16[2, 3]`, for messages.
pub(crate) fn describe(dtype: DTypeCode, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("{}[{}]", dtype.short_name(), dims.join(", "))
}

pub(crate) fn f16_bits(x: f64) -> u16 {
    // `x` is already representable, so half's conversion is exact.
    f16::from_f64(x).to_bits()
}

pub(crate) fn bf16_bits(x: f64) -> u16 {
    bf16::from_f64(x).to_bits()
}
