//! The core language: broadcasting, PyTorch's type promotion and dimension canonicalization on
//! top of prims. Errors the prim's meta already reports are left to it.

use crate::dtype::{self, Category, DType};
use crate::error::{bail_op, Error, OpErrorKind, Result};
use crate::ir::{Arg, ShapeDisplay};
use crate::prims::{prim1, Prim};
use crate::tensor::Tensor;

mod indexing;
pub use indexing::*;

/// An elementwise operand: a tensor or a Python-style number.
#[derive(Debug, Clone)]
pub enum Operand {
    Tensor(Tensor),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Operand {
    pub fn from_arg(op: &str, arg: &Arg) -> Result<Operand> {
        Ok(match arg {
            Arg::Value(v) => Operand::Tensor(crate::trace_ctx::tensor_of(*v)?),
            Arg::Int(i) => Operand::Int(*i),
            Arg::Float(x) => Operand::Float(*x),
            Arg::Bool(b) => Operand::Bool(*b),
            other => bail_op!(op, "expected a tensor or a number, got {other:?}"),
        })
    }

    pub fn to_arg(&self) -> Arg {
        match self {
            Operand::Tensor(t) => Arg::Value(t.value()),
            Operand::Int(i) => Arg::Int(*i),
            Operand::Float(x) => Arg::Float(*x),
            Operand::Bool(b) => Arg::Bool(*b),
        }
    }

    fn promotion_operand(&self) -> dtype::Operand {
        match self {
            Operand::Tensor(t) if t.rank() == 0 => dtype::Operand::ZeroDim(t.dtype()),
            Operand::Tensor(t) => dtype::Operand::Tensor(t.dtype()),
            Operand::Int(_) => dtype::Operand::Scalar(Category::Int),
            Operand::Float(_) => dtype::Operand::Scalar(Category::Float),
            Operand::Bool(_) => dtype::Operand::Scalar(Category::Bool),
        }
    }

    /// A number converted to the Python kind of `dtype` (what a prim accepts next to it).
    fn scalar_as(&self, dtype: DType) -> Arg {
        let as_f64 = match self {
            Operand::Int(i) => *i as f64,
            Operand::Float(x) => *x,
            Operand::Bool(b) => *b as i64 as f64,
            Operand::Tensor(t) => return Arg::Value(t.value()),
        };
        match dtype::category(dtype) {
            Category::Float => Arg::Float(as_f64),
            Category::Int => match self {
                Operand::Int(i) => Arg::Int(*i),
                Operand::Bool(b) => Arg::Int(*b as i64),
                _ => Arg::Int(as_f64 as i64),
            },
            Category::Bool => Arg::Bool(as_f64 != 0.0),
        }
    }
}

/// How an elementwise op's result dtype and computation dtype follow from promotion
/// (Thunder's ELEMENTWISE_TYPE_PROMOTION_KIND).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// Promoted dtype; f16/bf16 are computed in f32.
    Default,
    /// Promoted dtype, computed as is (exact ops: neg, abs, maximum, ...).
    NoOpMath,
    /// Integers and bools become the default float (f32); f16/bf16 computed in f32.
    IntToFloat,
    /// Bool result, computed in the promoted dtype.
    AlwaysBool,
}

/// (promoted, computation, result) dtypes.
fn promote(op: &str, operands: &[Operand], kind: Promotion) -> Result<(DType, DType, DType)> {
    let kinds: Vec<_> = operands.iter().map(Operand::promotion_operand).collect();
    let promoted =
        dtype::result_type(&kinds).ok_or_else(|| Error::op(op, "needs at least one operand"))?;
    let float_result = |d: DType| if dtype::is_float(d) { d } else { DType::F32 };
    let opmath = |d: DType| {
        if dtype::is_low_precision(d) {
            DType::F32
        } else {
            d
        }
    };
    Ok(match kind {
        Promotion::Default => (promoted, opmath(promoted), promoted),
        Promotion::NoOpMath => (promoted, promoted, promoted),
        Promotion::IntToFloat => {
            let r = float_result(promoted);
            (promoted, opmath(r), r)
        }
        Promotion::AlwaysBool => (promoted, promoted, DType::Bool),
    })
}

pub fn broadcast_shapes(op: &str, shapes: &[&[i64]]) -> Result<Vec<i64>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1i64; rank];
    for s in shapes {
        let offset = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[offset + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                let rule = format!(
                    "cannot be broadcast together (dim {} has sizes {} and {d})",
                    offset + i,
                    *o
                );
                if let [a, b] = shapes {
                    return Err(Error::op_kind(
                        op,
                        OpErrorKind::ShapeMismatch {
                            a: a.to_vec(),
                            b: b.to_vec(),
                            rule,
                        },
                    ));
                }
                let all: Vec<String> = shapes.iter().map(|s| ShapeDisplay(s).to_string()).collect();
                bail_op!(op, "shapes {} {rule}", all.join(" and "));
            }
        }
    }
    Ok(out)
}

/// Broadcasts `t` to `shape` (right-aligned, numpy rules), or returns it if already there.
pub fn expand_to(t: &Tensor, shape: &[i64]) -> Result<Tensor> {
    if t.shape() == shape {
        return Ok(t.clone());
    }
    let offset = shape.len() as i64 - t.rank() as i64;
    if offset < 0 {
        bail_op!(
            Prim::BroadcastInDim.id(),
            "cannot broadcast {} to the smaller rank {}",
            ShapeDisplay(t.shape()),
            shape.len()
        );
    }
    let dims = (0..t.rank() as i64).map(|i| i + offset).collect();
    broadcast_in_dim(t, shape.to_vec(), dims)
}

pub fn broadcast_in_dim(t: &Tensor, shape: Vec<i64>, dims: Vec<i64>) -> Result<Tensor> {
    prim1(
        Prim::BroadcastInDim,
        vec![Arg::Value(t.value()), Arg::Ints(shape), Arg::Ints(dims)],
    )
}

pub fn convert(t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype() == dtype {
        return Ok(t.clone());
    }
    prim1(
        Prim::ConvertElementType,
        vec![Arg::Value(t.value()), Arg::DType(dtype)],
    )
}

pub fn reshape(t: &Tensor, shape: Vec<i64>) -> Result<Tensor> {
    if t.shape() == shape.as_slice() {
        return Ok(t.clone());
    }
    prim1(Prim::Reshape, vec![Arg::Value(t.value()), Arg::Ints(shape)])
}

pub fn transpose(t: &Tensor, perm: Vec<i64>) -> Result<Tensor> {
    if perm.iter().enumerate().all(|(i, &p)| p == i as i64) && perm.len() == t.rank() {
        return Ok(t.clone());
    }
    prim1(
        Prim::Transpose,
        vec![Arg::Value(t.value()), Arg::Ints(perm)],
    )
}

/// Canonicalizes a possibly negative dim against `rank` (a 0-d tensor accepts 0 and -1).
pub fn canonical_dim(op: &str, dim: i64, rank: usize) -> Result<usize> {
    let r = rank.max(1) as i64;
    if dim < -r || dim >= r {
        return Err(Error::op_kind(op, OpErrorKind::Dim { dim, rank }));
    }
    Ok(if dim < 0 {
        (dim + r) as usize
    } else {
        dim as usize
    })
}

/// Elementwise op on already promoted operands: broadcasts, converts, applies, converts back.
pub fn elementwise(op: &str, prim: Prim, operands: &[Operand], kind: Promotion) -> Result<Tensor> {
    let (promoted, compute, result) = promote(op, operands, kind)?;
    let shapes: Vec<&[i64]> = operands
        .iter()
        .filter_map(|o| match o {
            Operand::Tensor(t) => Some(t.shape()),
            _ => None,
        })
        .collect();
    if shapes.is_empty() {
        bail_op!(op, "at least one operand must be a tensor");
    }
    let shape = broadcast_shapes(op, &shapes)?;
    let mut args = Vec::with_capacity(operands.len());
    for o in operands {
        args.push(match o {
            // Like torch, tensors are cast to the common dtype first (a 0-d f32 operand of an
            // f16 op is rounded to f16), then widened for the computation.
            Operand::Tensor(t) => {
                let common = if dtype::is_float(promoted) {
                    convert(t, promoted)?
                } else {
                    t.clone()
                };
                Arg::Value(convert(&expand_to(&common, &shape)?, compute)?.value())
            }
            number => match (number.scalar_as(compute), kind) {
                // Like torch, arithmetic casts an int scalar to the tensor's dtype (u8 + 300
                // adds 44); comparisons keep its value.
                (Arg::Int(i), Promotion::Default | Promotion::NoOpMath) => {
                    Arg::Int(dtype::wrap_int(i, compute))
                }
                (other, _) => other,
            },
        });
    }
    let out = prim1(prim, args)?;
    if kind == Promotion::AlwaysBool {
        return Ok(out);
    }
    convert(&out, result)
}

pub fn unary(op: &str, prim: Prim, a: &Tensor, kind: Promotion) -> Result<Tensor> {
    elementwise(op, prim, &[Operand::Tensor(a.clone())], kind)
}

/// `where(pred, a, b)` with broadcasting and promotion of the branches.
pub fn where_(op: &str, pred: &Tensor, a: &Operand, b: &Operand) -> Result<Tensor> {
    if pred.dtype() != DType::Bool {
        bail_op!(
            op,
            "condition must be b8, got {}",
            pred.dtype().short_name()
        );
    }
    let (_, _, dtype) = promote(op, &[a.clone(), b.clone()], Promotion::NoOpMath)?;
    let mut shapes: Vec<&[i64]> = vec![pred.shape()];
    for o in [a, b] {
        if let Operand::Tensor(t) = o {
            shapes.push(t.shape());
        }
    }
    let shape = broadcast_shapes(op, &shapes)?;
    let pred = expand_to(pred, &shape)?;
    let branch = |o: &Operand| -> Result<Arg> {
        Ok(match o {
            Operand::Tensor(t) => Arg::Value(convert(&expand_to(t, &shape)?, dtype)?.value()),
            number => number.scalar_as(dtype),
        })
    };
    if !matches!(a, Operand::Tensor(_)) && !matches!(b, Operand::Tensor(_)) {
        // Both branches are numbers: materialize one so the prim sees a tensor of the dtype.
        let filled = full(shape.clone(), a.scalar_as(dtype), pred.device(), dtype)?;
        return prim1(
            Prim::Where,
            vec![
                Arg::Value(pred.value()),
                Arg::Value(filled.value()),
                branch(b)?,
            ],
        );
    }
    prim1(
        Prim::Where,
        vec![Arg::Value(pred.value()), branch(a)?, branch(b)?],
    )
}

pub fn full(
    shape: Vec<i64>,
    fill: Arg,
    device: crate::device::Device,
    dtype: DType,
) -> Result<Tensor> {
    prim1(
        Prim::Full,
        vec![
            Arg::Ints(shape),
            fill,
            Arg::Device(device),
            Arg::DType(dtype),
        ],
    )
}

/// `[0, 1, ..., n - 1]` as i64 on `device` (one-hots, triangular and causal masks).
pub fn iota(n: i64, device: crate::device::Device) -> Result<Tensor> {
    prim1(
        Prim::Iota,
        vec![
            Arg::Int(n),
            Arg::Int(0),
            Arg::Int(1),
            Arg::Device(device),
            Arg::DType(DType::I64),
        ],
    )
}

/// Row indices `[rows, 1]` and column indices `[1, cols]`, which broadcast to a grid for
/// triangular and causal masks.
pub fn index_grid(rows: i64, cols: i64, device: crate::device::Device) -> Result<(Tensor, Tensor)> {
    Ok((
        reshape(&iota(rows, device)?, vec![rows, 1])?,
        reshape(&iota(cols, device)?, vec![1, cols])?,
    ))
}

/// Canonical, sorted, distinct reduction dims; `None` means every dim.
pub fn reduction_dims(op: &str, dims: Option<&[i64]>, rank: usize) -> Result<Vec<i64>> {
    let Some(dims) = dims else {
        return Ok((0..rank as i64).collect());
    };
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let c = canonical_dim(op, d, rank)?;
        if rank == 0 {
            continue;
        }
        if out.contains(&(c as i64)) {
            bail_op!(op, "dim {d} appears multiple times in the list of dims");
        }
        out.push(c as i64);
    }
    out.sort_unstable();
    Ok(out)
}

/// Reduces with `prim` over canonical `dims`, keeping them as size-1 dims if asked.
pub fn reduce(prim: Prim, a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    let out = prim1(prim, vec![Arg::Value(a.value()), Arg::Ints(dims.to_vec())])?;
    if !keepdim {
        return Ok(out);
    }
    let kept: Vec<i64> = a
        .shape()
        .iter()
        .enumerate()
        .map(|(i, &d)| if dims.contains(&(i as i64)) { 1 } else { d })
        .collect();
    reshape(&out, kept)
}

impl From<&Tensor> for Operand {
    fn from(t: &Tensor) -> Self {
        Operand::Tensor(t.clone())
    }
}
impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Self {
        Operand::Tensor(t)
    }
}
impl From<f64> for Operand {
    fn from(x: f64) -> Self {
        Operand::Float(x)
    }
}
impl From<f32> for Operand {
    fn from(x: f32) -> Self {
        Operand::Float(x as f64)
    }
}
impl From<i64> for Operand {
    fn from(x: i64) -> Self {
        Operand::Int(x)
    }
}
impl From<i32> for Operand {
    fn from(x: i32) -> Self {
        Operand::Int(x as i64)
    }
}
impl From<bool> for Operand {
    fn from(x: bool) -> Self {
        Operand::Bool(x)
    }
}
