//! Meta functions: for each prim, check the arguments and compute the output types. The match
//! is exhaustive so a new prim does not compile until it has a shape rule.

use crate::device::Device;
use crate::dtype::{self, DType};
use crate::error::{bail_op, Error, OpErrorKind, Result};
use crate::ir::{Arg, ShapeDisplay, TensorType};
use thunder_abi::prims::{
    FactoryPrim, Prim, PrimClass, PrimKind, ReductionPrim, ShapePrim, UnaryPrim,
};

mod along_dims;
mod conv;
mod indexing;
mod random;

type Types<'a> = &'a [Option<TensorType>];

pub fn prim_meta(prim: Prim, args: &[Arg], types: Types) -> Result<Vec<TensorType>> {
    let op = prim.id();
    let out = match prim.kind() {
        PrimKind::Unary(u) => unary(u, args, types)?,
        PrimKind::Predicate(p) => {
            // Float only: ltorch answers for ints and bools without a prim.
            let mut t = float_operand(p.id(), args, types)?;
            t.dtype = DType::Bool;
            t
        }
        PrimKind::Binary(b) => {
            let rule = b.rule();
            let lanes = Lanes {
                float: rule.supports_float(),
                int: rule.supports_int(),
                bool: rule.supports_bool(),
            };
            binary(prim, lanes, args, types)?
        }
        // Comparisons are defined on every dtype.
        PrimKind::Compare(_) => binary(prim, Lanes::ALL, args, types)?,
        PrimKind::Where(_) => where_meta(op, args, types)?,
        PrimKind::Convert(_) => {
            expect_arity(op, args, 2)?;
            let mut t = tensor(op, types, 0)?.clone();
            t.dtype = dtype_arg(op, args, 1)?;
            t
        }
        PrimKind::Shape(p) => shape_op(p, args, types)?,
        PrimKind::Indexing(p) => indexing::meta(p, args, types)?,
        PrimKind::Reduction(r) => match r {
            ReductionPrim::Argmax | ReductionPrim::Argmin => {
                along_dims::arg_reduction(prim, args, types)?
            }
            ReductionPrim::VarMean => return along_dims::var_mean(prim, args, types),
            ReductionPrim::Sum
            | ReductionPrim::Amax
            | ReductionPrim::Prod
            | ReductionPrim::Amin => reduction(prim, args, types)?,
        },
        PrimKind::Scan(_) => along_dims::scan(prim, args, types)?,
        PrimKind::Sort(p) => return along_dims::sort(p, args, types),
        PrimKind::Conv(_) => conv::convolution(prim, args, types)?,
        PrimKind::Random(_) => random::random(prim, args)?,
        PrimKind::Matmul(_) => matmul(op, args, types)?,
        PrimKind::Factory(f) => match f {
            FactoryPrim::Iota => iota(op, args)?,
            FactoryPrim::Full => full(op, args)?,
        },
    };
    Ok(vec![TensorType {
        requires_grad: false,
        ..out
    }])
}

fn expect_arity(op: &str, args: &[Arg], n: usize) -> Result<()> {
    if args.len() != n {
        return Err(Error::op_kind(
            op,
            OpErrorKind::Arity {
                expected: n,
                got: args.len(),
            },
        ));
    }
    Ok(())
}

fn tensor<'a>(op: &str, types: &'a [Option<TensorType>], i: usize) -> Result<&'a TensorType> {
    match types.get(i) {
        Some(Some(t)) => Ok(t),
        other => Err(Error::op_kind(
            op,
            OpErrorKind::Argument {
                index: i,
                expected: "a tensor".into(),
                got: match other {
                    None => Some("nothing (too few arguments)".into()),
                    Some(_) => None,
                },
            },
        )),
    }
}

fn ints_arg<'a>(op: &str, args: &'a [Arg], i: usize, what: &str) -> Result<&'a [i64]> {
    match args.get(i) {
        Some(Arg::Ints(v)) => Ok(v),
        other => Err(Error::op(
            op,
            format!("argument {i} ({what}) must be a list of ints, got {other:?}"),
        )),
    }
}

fn dtype_arg(op: &str, args: &[Arg], i: usize) -> Result<DType> {
    match args.get(i) {
        Some(Arg::DType(d)) => Ok(*d),
        other => Err(Error::op(
            op,
            format!("argument {i} must be a dtype, got {other:?}"),
        )),
    }
}

fn check_shape(op: &str, shape: &[i64]) -> Result<()> {
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        bail_op!(
            op,
            "shape {} has a negative dimension {d}",
            ShapeDisplay(shape)
        );
    }
    Ok(())
}

/// Elementwise prims neither broadcast nor move data between devices.
fn check_same_shape_and_device(op: &str, a: &TensorType, b: &TensorType) -> Result<()> {
    if a.shape != b.shape {
        return Err(Error::op_kind(
            op,
            OpErrorKind::ShapeMismatch {
                a: a.shape.clone(),
                b: b.shape.clone(),
                rule: "must be equal (prims do not broadcast)".into(),
            },
        ));
    }
    if a.device != b.device {
        bail_op!(
            op,
            "tensors are on different devices: {} and {}",
            a.device,
            b.device
        );
    }
    Ok(())
}

fn unary(prim: UnaryPrim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 1)?;
    let a = tensor(op, types, 0)?;
    // The lanes each prim is defined on come from the elementwise table.
    let int_ok = a.dtype != DType::Bool && prim.rule().supports_int();
    if !dtype::is_float(a.dtype) && !int_ok {
        return Err(refuse_dtype(op, a.dtype));
    }
    Ok(a.clone())
}

fn refuse_dtype(op: &str, dtype: DType) -> Error {
    Error::dtype(op, dtype, "")
}

/// The one float tensor operand of a predicate.
fn float_operand(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 1)?;
    let a = tensor(op, types, 0)?;
    if !dtype::is_float(a.dtype) {
        return Err(refuse_dtype(op, a.dtype));
    }
    Ok(a.clone())
}

/// Scalar literal operand check: its kind must fit the tensor dtype (clang converts it).
fn scalar_fits(op: &str, arg: &Arg, dtype: DType) -> Result<()> {
    let ok = match arg {
        Arg::Float(_) => dtype::is_float(dtype),
        Arg::Int(i) => match dtype::int_range(dtype) {
            Some((lo, hi)) => (lo..=hi).contains(i),
            None => dtype != DType::Bool,
        },
        Arg::Bool(_) => true,
        other => bail_op!(op, "operand must be a tensor or a number, got {other:?}"),
    };
    if !ok {
        bail_op!(
            op,
            "scalar {arg:?} does not fit tensor dtype {}",
            dtype.short_name()
        );
    }
    Ok(())
}

/// The kinds of dtype an elementwise prim is defined on (from the elementwise table).
#[derive(Clone, Copy)]
struct Lanes {
    float: bool,
    int: bool,
    bool: bool,
}

impl Lanes {
    const ALL: Lanes = Lanes {
        float: true,
        int: true,
        bool: true,
    };
}

fn binary(prim: Prim, lanes: Lanes, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 2)?;
    let t = match (&types[0], &types[1]) {
        (Some(a), Some(b)) => {
            check_same_shape_and_device(op, a, b)?;
            if a.dtype != b.dtype {
                return Err(Error::op_kind(
                    op,
                    OpErrorKind::DTypeMismatch {
                        a: a.dtype,
                        b: b.dtype,
                        rule: "must be equal (prims do not promote)".into(),
                    },
                ));
            }
            a
        }
        (Some(a), None) => {
            scalar_fits(op, &args[1], a.dtype)?;
            a
        }
        (None, Some(b)) => {
            scalar_fits(op, &args[0], b.dtype)?;
            b
        }
        (None, None) => bail_op!(op, "at least one operand must be a tensor"),
    };
    let Lanes {
        float: float_ok,
        int: int_ok,
        bool: bool_ok,
    } = lanes;
    let refuse = |allowed: &str| {
        Err(Error::op_kind(
            op,
            OpErrorKind::DType {
                got: t.dtype,
                allowed: allowed.into(),
            },
        ))
    };
    if t.dtype == DType::Bool && !bool_ok {
        return refuse("");
    }
    if dtype::is_float(t.dtype) && !float_ok {
        return refuse("integers and b8 only");
    }
    if !dtype::is_float(t.dtype) && t.dtype != DType::Bool && !int_ok {
        return refuse("floats only");
    }
    if prim == Prim::Pow && !dtype::is_float(t.dtype) && matches!(args[1], Arg::Int(e) if e < 0) {
        bail_op!(op, "integers to negative integer powers are not allowed");
    }
    let mut out = t.clone();
    if prim.class() == PrimClass::Compare {
        out.dtype = DType::Bool;
    }
    Ok(out)
}

fn where_meta(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 3)?;
    let pred = tensor(op, types, 0)?;
    if pred.dtype != DType::Bool {
        bail_op!(op, "condition must be b8, got {}", pred.dtype.short_name());
    }
    let mut dtype = None;
    for t in types[1..3].iter().flatten() {
        check_same_shape_and_device(op, pred, t)?;
        if dtype.is_some_and(|d| d != t.dtype) {
            bail_op!(op, "branch dtypes must be equal");
        }
        dtype = Some(t.dtype);
    }
    let Some(dtype) = dtype else {
        bail_op!(op, "at least one branch must be a tensor");
    };
    for (ty, arg) in types[1..3].iter().zip(&args[1..3]) {
        if ty.is_none() {
            scalar_fits(op, arg, dtype)?;
        }
    }
    Ok(TensorType::new(pred.shape.clone(), dtype, pred.device))
}

fn shape_op(prim: ShapePrim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    let a = tensor(op, types, 0)?;
    match prim {
        ShapePrim::BroadcastInDim => {
            expect_arity(op, args, 3)?;
            let shape = ints_arg(op, args, 1, "shape")?;
            let dims = ints_arg(op, args, 2, "broadcast_dims")?;
            check_shape(op, shape)?;
            if dims.len() != a.rank() {
                bail_op!(
                    op,
                    "broadcast_dims {dims:?} must name one output dim per input dim ({})",
                    a.rank()
                );
            }
            let mut last: i64 = -1;
            for (i, &d) in dims.iter().enumerate() {
                if d <= last || d >= shape.len() as i64 {
                    bail_op!(
                        op,
                        "broadcast_dims {dims:?} must be increasing and below the output rank {}",
                        shape.len()
                    );
                }
                last = d;
                let (from, to) = (a.shape[i], shape[d as usize]);
                if from != 1 && from != to {
                    bail_op!(
                        op,
                        "cannot broadcast {} to {}: dim {i} has size {from}, expected 1 or {to}",
                        ShapeDisplay(&a.shape),
                        ShapeDisplay(shape)
                    );
                }
            }
            Ok(TensorType::new(shape.to_vec(), a.dtype, a.device))
        }
        ShapePrim::Reshape => {
            expect_arity(op, args, 2)?;
            let shape = ints_arg(op, args, 1, "shape")?;
            check_shape(op, shape)?;
            let n: i64 = shape.iter().product();
            if n as usize != a.numel() {
                bail_op!(
                    op,
                    "cannot reshape {} ({} elements) to {} ({n} elements)",
                    ShapeDisplay(&a.shape),
                    a.numel(),
                    ShapeDisplay(shape)
                );
            }
            Ok(TensorType::new(shape.to_vec(), a.dtype, a.device))
        }
        ShapePrim::Transpose => {
            expect_arity(op, args, 2)?;
            let perm = ints_arg(op, args, 1, "permutation")?;
            let mut seen = vec![false; a.rank()];
            if perm.len() != a.rank() {
                bail_op!(op, "permutation {perm:?} must have {} entries", a.rank());
            }
            for &p in perm {
                if p < 0 || p as usize >= a.rank() || seen[p as usize] {
                    bail_op!(op, "{perm:?} is not a permutation of 0..{}", a.rank());
                }
                seen[p as usize] = true;
            }
            let shape = perm.iter().map(|&p| a.shape[p as usize]).collect();
            Ok(TensorType::new(shape, a.dtype, a.device))
        }
    }
}

fn reduction(prim: Prim, args: &[Arg], types: Types) -> Result<TensorType> {
    let op = prim.id();
    expect_arity(op, args, 2)?;
    let a = tensor(op, types, 0)?;
    let dims = ints_arg(op, args, 1, "dims")?;
    let mut reduced = vec![false; a.rank()];
    for &d in dims {
        if d < 0 || d as usize >= a.rank() || reduced[d as usize] {
            bail_op!(
                op,
                "dims {dims:?} must be distinct and in [0, {})",
                a.rank()
            );
        }
        reduced[d as usize] = true;
        if matches!(prim, Prim::Amax | Prim::Amin) && a.shape[d as usize] == 0 {
            bail_op!(
                op,
                "cannot reduce over dim {d} of size 0 (the extremum of nothing is undefined)"
            );
        }
    }
    if matches!(prim, Prim::Sum | Prim::Prod) && a.dtype == DType::Bool {
        return Err(Error::dtype(op, DType::Bool, ""));
    }
    let shape = a
        .shape
        .iter()
        .zip(&reduced)
        .filter(|(_, &r)| !r)
        .map(|(&d, _)| d)
        .collect();
    Ok(TensorType::new(shape, a.dtype, a.device))
}

fn matmul(op: &str, args: &[Arg], types: Types) -> Result<TensorType> {
    expect_arity(op, args, 2)?;
    let a = tensor(op, types, 0)?;
    let b = tensor(op, types, 1)?;
    let (sa, sb) = (ShapeDisplay(&a.shape), ShapeDisplay(&b.shape));
    if a.rank() < 2 || b.rank() < 2 {
        bail_op!(op, "expects tensors of rank >= 2, got {sa} and {sb}");
    }
    if a.dtype != b.dtype {
        bail_op!(
            op,
            "dtypes {} and {} must be equal",
            a.dtype.short_name(),
            b.dtype.short_name()
        );
    }
    if a.dtype == DType::Bool {
        return Err(Error::dtype(op, DType::Bool, ""));
    }
    if a.device != b.device {
        bail_op!(
            op,
            "tensors are on different devices: {} and {}",
            a.device,
            b.device
        );
    }
    let (ra, rb) = (a.rank(), b.rank());
    if a.shape[..ra - 2] != b.shape[..rb - 2] {
        bail_op!(op, "batch dims of {sa} and {sb} must be equal");
    }
    if a.shape[ra - 1] != b.shape[rb - 2] {
        return Err(Error::op_kind(
            op,
            OpErrorKind::ShapeMismatch {
                a: a.shape.clone(),
                b: b.shape.clone(),
                rule: format!(
                    "do not match as matmul operands (inner dims {} != {})",
                    a.shape[ra - 1],
                    b.shape[rb - 2]
                ),
            },
        ));
    }
    let mut shape = a.shape[..ra - 1].to_vec();
    shape.push(b.shape[rb - 1]);
    Ok(TensorType::new(shape, a.dtype, a.device))
}

fn full(op: &str, args: &[Arg]) -> Result<TensorType> {
    expect_arity(op, args, 4)?;
    let shape = ints_arg(op, args, 0, "shape")?;
    check_shape(op, shape)?;
    let device = match &args[2] {
        Arg::Device(d) => *d,
        other => bail_op!(op, "argument 2 must be a device, got {other:?}"),
    };
    let dtype = dtype_arg(op, args, 3)?;
    scalar_fits(op, &args[1], dtype).or_else(|e| match (&args[1], dtype) {
        // `full` converts its fill value like torch does: an int fill for a bool tensor is fine.
        (Arg::Int(_), DType::Bool) => Ok(()),
        _ => Err(e),
    })?;
    let _: Device = device;
    Ok(TensorType::new(shape.to_vec(), dtype, device))
}

fn iota(op: &str, args: &[Arg]) -> Result<TensorType> {
    expect_arity(op, args, 5)?;
    let int = |i: usize, what: &str| match &args[i] {
        Arg::Int(v) => Ok(*v),
        other => Err(Error::op(
            op,
            format!("argument {i} ({what}) must be an int, got {other:?}"),
        )),
    };
    let length = int(0, "length")?;
    int(1, "start")?;
    int(2, "step")?;
    if length < 0 {
        bail_op!(op, "length must be >= 0, got {length}");
    }
    let device = match &args[3] {
        Arg::Device(d) => *d,
        other => bail_op!(op, "argument 3 must be a device, got {other:?}"),
    };
    let dtype = dtype_arg(op, args, 4)?;
    if dtype == DType::Bool {
        return Err(Error::dtype(op, DType::Bool, ""));
    }
    Ok(TensorType::new(vec![length], dtype, device))
}
