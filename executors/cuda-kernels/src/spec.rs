//! What one claimed op asks of the kernel library: [`decode`] reads an op of the trace view
//! into a [`Spec`] (operands, dims, literals), or says why the library does not run it. The
//! claim decision is exactly "decodes", so whatever is claimed can be compiled.

use thunder_abi::prims::{
    BinaryPrim, FactoryPrim, IndexingPrim, Prim, PrimKind, RandomPrim, ReductionPrim, SortPrim,
};
use thunder_abi::{ArgView, DTypeCode, DeviceKind, OpView, TraceView};

/// The longest row `sort`/`topk` sort in shared memory (a bitonic network of 2048 slots).
pub const MAX_SORT: i64 = 2048;

/// A tensor operand of the op: a trace value with its dtype and shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    pub value: u32,
    pub dtype: DTypeCode,
    pub shape: Vec<i64>,
}

impl Operand {
    pub fn numel(&self) -> i64 {
        self.shape.iter().map(|&d| d.max(0)).product()
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

/// A scalar literal of the trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lit {
    Int(i64),
    Float(f64),
    Bool(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    Sum,
    Prod,
    Max,
    Min,
    ArgMax,
    ArgMin,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    /// sum/prod/amax/amin over `dims`, argmax/argmin over one dim.
    Reduce {
        fold: Fold,
        a: Operand,
        dims: Vec<usize>,
        out: DTypeCode,
    },
    VarMean {
        a: Operand,
        dims: Vec<usize>,
        correction: f64,
    },
    Cumsum {
        a: Operand,
        dim: usize,
    },
    /// sort (k = the dim's size) and topk.
    Sort {
        a: Operand,
        dim: usize,
        k: i64,
        descending: bool,
    },
    /// take (index_select) when `along` is false, take_along_axis (gather) when true.
    Take {
        a: Operand,
        index: Operand,
        dim: usize,
        along: bool,
    },
    /// scatter_add when `scatter` is true, index_add when false. `deterministic`: one thread
    /// per output element sums its sources in index order (the interpreter's order, in f64)
    /// instead of atomic adds (the plugin's `deterministic` option).
    ScatterAdd {
        a: Operand,
        index: Operand,
        src: Operand,
        dim: usize,
        scatter: bool,
        deterministic: bool,
    },
    Pad {
        a: Operand,
        value: Lit,
        /// (low, high, interior) per dim.
        config: Vec<(i64, i64, i64)>,
        out_shape: Vec<i64>,
    },
    Full {
        shape: Vec<i64>,
        value: Lit,
        dtype: DTypeCode,
    },
    Iota {
        length: i64,
        start: i64,
        step: i64,
        dtype: DTypeCode,
    },
    Random {
        normal: bool,
        shape: Vec<i64>,
        /// (low, high) or (mean, std).
        p: (f64, f64),
        seed: u64,
        offset: u64,
        dtype: DTypeCode,
    },
    /// Matmul: ints (wrapping), and the float cases cuBLAS leaves.
    Matmul {
        a: Operand,
        b: Operand,
    },
    /// Integer convolution (cuDNN has none): `[N, C_in, *S]` by `[C_out, C_in / groups, *K]`,
    /// any number of spatial dims, wrapping in 64 bits as the interpreter.
    Conv {
        a: Operand,
        w: Operand,
        bias: Option<Operand>,
        stride: Vec<i64>,
        padding: Vec<i64>,
        dilation: Vec<i64>,
        groups: i64,
        out_shape: Vec<i64>,
    },
    /// `ltorch.cross_entropy_lse` ([`crate::ce`]): `logits` are what the kernels read (the
    /// 16-bit input of a joined convert, `rows` x `classes` with the classes last, or the op's
    /// own logits); `loss` the loss dtype.
    CrossEntropy {
        logits: Operand,
        target: Operand,
        rows: i64,
        classes: i64,
        ignore_index: i64,
        loss: DTypeCode,
    },
    /// `ltorch.cross_entropy_bwd`: `out` the gradient's dtype as the region writes it (the
    /// absorbed trailing convert's, or the op's).
    CrossEntropyBwd {
        grad: Operand,
        logits: Operand,
        target: Operand,
        lse: Operand,
        rows: i64,
        classes: i64,
        ignore_index: i64,
        out: DTypeCode,
    },
    /// A binary op whose integer rule can fail (floor_divide of every dtype; div, remainder,
    /// fmod and pow of integers): two equal-shape operands, either of which may be a literal.
    /// A zero divisor or a negative integer exponent is a device error.
    Divide {
        op: BinaryPrim,
        a: Result<Operand, Lit>,
        b: Result<Operand, Lit>,
        dtype: DTypeCode,
        shape: Vec<i64>,
    },
}

fn operand(view: &TraceView, arg: Option<&ArgView>) -> Result<Operand, String> {
    let v = arg
        .and_then(ArgView::as_value)
        .ok_or_else(|| format!("expected a tensor, got {arg:?}"))?;
    let meta = view
        .values
        .get(v as usize)
        .ok_or_else(|| format!("value {v} is not in the view"))?;
    if meta.device.kind != DeviceKind::Cuda {
        return Err(format!("t{v} is not on a CUDA device"));
    }
    Ok(Operand {
        value: v,
        dtype: meta.dtype,
        shape: meta.shape.to_vec(),
    })
}

fn int(args: &[ArgView], i: usize) -> Result<i64, String> {
    match args.get(i) {
        Some(ArgView::Int(v)) => Ok(*v),
        other => Err(format!("argument {i}: expected an int, got {other:?}")),
    }
}

fn flag(args: &[ArgView], i: usize) -> Result<bool, String> {
    match args.get(i) {
        Some(ArgView::Bool(v)) => Ok(*v),
        other => Err(format!("argument {i}: expected a bool, got {other:?}")),
    }
}

fn number(args: &[ArgView], i: usize) -> Result<f64, String> {
    match args.get(i) {
        Some(ArgView::Int(v)) => Ok(*v as f64),
        Some(ArgView::Float(v)) => Ok(*v),
        other => Err(format!("argument {i}: expected a number, got {other:?}")),
    }
}

fn lit(arg: Option<&ArgView>) -> Option<Lit> {
    match arg {
        Some(ArgView::Int(v)) => Some(Lit::Int(*v)),
        Some(ArgView::Float(v)) => Some(Lit::Float(*v)),
        Some(ArgView::Bool(v)) => Some(Lit::Bool(*v)),
        _ => None,
    }
}

fn dim(args: &[ArgView], i: usize, rank: usize) -> Result<usize, String> {
    let d = int(args, i)?;
    usize::try_from(d)
        .ok()
        .filter(|&d| d < rank)
        .ok_or_else(|| format!("dim {d} is not in [0, {rank})"))
}

fn dims(args: &[ArgView], i: usize, rank: usize) -> Result<Vec<usize>, String> {
    let Some(ArgView::Ints(ds)) = args.get(i) else {
        return Err(format!(
            "argument {i}: expected dims, got {:?}",
            args.get(i)
        ));
    };
    let mut out: Vec<usize> = Vec::with_capacity(ds.len());
    for &d in ds.iter() {
        match usize::try_from(d) {
            Ok(u) if u < rank && !out.contains(&u) => out.push(u),
            _ => return Err(format!("dims {ds:?} do not fit rank {rank}")),
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn shape_arg(args: &[ArgView], i: usize) -> Result<Vec<i64>, String> {
    match args.get(i) {
        Some(ArgView::Ints(s)) if s.iter().all(|&d| d >= 0) => Ok(s.to_vec()),
        other => Err(format!("argument {i}: expected a shape, got {other:?}")),
    }
}

fn cuda_dtype(args: &[ArgView], dev: usize, dt: usize) -> Result<DTypeCode, String> {
    match args.get(dev) {
        Some(ArgView::Device(d)) if d.kind == DeviceKind::Cuda => {}
        other => return Err(format!("argument {dev}: not a CUDA device: {other:?}")),
    }
    match args.get(dt) {
        Some(ArgView::DType(d)) => Ok(*d),
        other => Err(format!("argument {dt}: expected a dtype, got {other:?}")),
    }
}

fn is_int(d: DTypeCode) -> bool {
    !d.is_float() && d != DTypeCode::Bool
}

/// The op as a kernel-library job, or why it is not one.
pub fn decode(view: &TraceView, op: &OpView) -> Result<Spec, String> {
    if op.composite {
        return Err("a composite (its prims are claimed instead)".into());
    }
    let prim = Prim::from_id(&op.symbol).ok_or_else(|| format!("{} is not a prim", op.symbol))?;
    let args = op.args.as_slice();
    let out0 = op
        .outputs
        .first()
        .and_then(|&v| view.values.get(v as usize))
        .ok_or("no output")?;
    if out0.device.kind != DeviceKind::Cuda {
        return Err("the output is not on a CUDA device".into());
    }
    let a = || operand(view, args.first());
    match prim.kind() {
        PrimKind::Reduction(p) => {
            let a = a()?;
            let fold = match p {
                ReductionPrim::VarMean => {
                    if !a.dtype.is_float() {
                        return Err("var_mean of a non-float tensor".into());
                    }
                    let dims = dims(args, 1, a.rank())?;
                    return Ok(Spec::VarMean {
                        dims,
                        correction: number(args, 2)?,
                        a,
                    });
                }
                ReductionPrim::Sum => Fold::Sum,
                ReductionPrim::Prod => Fold::Prod,
                ReductionPrim::Amax => Fold::Max,
                ReductionPrim::Amin => Fold::Min,
                ReductionPrim::Argmax => Fold::ArgMax,
                ReductionPrim::Argmin => Fold::ArgMin,
            };
            let dims = if matches!(fold, Fold::ArgMax | Fold::ArgMin) {
                vec![dim(args, 1, a.rank())?]
            } else {
                dims(args, 1, a.rank())?
            };
            if matches!(fold, Fold::Sum | Fold::Prod) && a.dtype == DTypeCode::Bool {
                return Err("sum/prod of b8 is not defined (the interpreter refuses it)".into());
            }
            let reduced: i64 = dims.iter().map(|&d| a.shape[d]).product();
            let kept: i64 = (0..a.rank())
                .filter(|d| !dims.contains(d))
                .map(|d| a.shape[d])
                .product();
            let refused = match fold {
                Fold::Sum | Fold::Prod => false,
                Fold::Max | Fold::Min => reduced == 0 && kept > 0,
                Fold::ArgMax | Fold::ArgMin => reduced == 0,
            };
            if refused {
                return Err("the extreme of an empty dim is an error on every executor".into());
            }
            Ok(Spec::Reduce {
                fold,
                a,
                dims,
                out: out0.dtype,
            })
        }
        PrimKind::Scan(_) => {
            let a = a()?;
            if a.dtype == DTypeCode::Bool {
                return Err("cumsum of b8 (the host converts to i64 first)".into());
            }
            Ok(Spec::Cumsum {
                dim: dim(args, 1, a.rank())?,
                a,
            })
        }
        PrimKind::Sort(p) => {
            let a = a()?;
            let (dim, k, descending) = match p {
                SortPrim::Topk => {
                    let d = dim(args, 2, a.rank())?;
                    (d, int(args, 1)?, flag(args, 3)?)
                }
                SortPrim::Sort => {
                    let d = dim(args, 1, a.rank())?;
                    (d, a.shape[d], flag(args, 2)?)
                }
            };
            if a.shape[dim] > MAX_SORT {
                return Err(format!(
                    "rows of {} elements: the shared-memory sort takes at most {MAX_SORT}",
                    a.shape[dim]
                ));
            }
            if k < 0 || k > a.shape[dim] {
                return Err(format!("k {k} is not in [0, {}]", a.shape[dim]));
            }
            Ok(Spec::Sort {
                a,
                dim,
                k,
                descending,
            })
        }
        PrimKind::Indexing(p) => match p {
            IndexingPrim::Take | IndexingPrim::TakeAlongAxis => {
                let (a, index) = (a()?, operand(view, args.get(1))?);
                if !is_int(index.dtype) {
                    return Err("the index is not an integer tensor".into());
                }
                let dim = dim(args, 2, a.rank())?;
                let along = p == IndexingPrim::TakeAlongAxis;
                if (along && index.rank() != a.rank()) || (!along && index.rank() != 1) {
                    return Err("the index has the wrong rank".into());
                }
                Ok(Spec::Take {
                    a,
                    index,
                    dim,
                    along,
                })
            }
            IndexingPrim::ScatterAdd | IndexingPrim::IndexAdd => {
                let (a, index, src) = (
                    a()?,
                    operand(view, args.get(1))?,
                    operand(view, args.get(2))?,
                );
                if !is_int(index.dtype) || src.dtype != a.dtype {
                    return Err("index not integer or src of another dtype".into());
                }
                let dim = dim(args, 3, a.rank())?;
                let scatter = p == IndexingPrim::ScatterAdd;
                if (scatter && (index.rank() != a.rank() || src.rank() != a.rank()))
                    || (!scatter && (index.rank() != 1 || src.rank() != a.rank()))
                {
                    return Err("operands of the wrong rank".into());
                }
                Ok(Spec::ScatterAdd {
                    a,
                    index,
                    src,
                    dim,
                    scatter,
                    deterministic: false,
                })
            }
            IndexingPrim::Pad => {
                let a = a()?;
                let value = lit(args.get(1)).ok_or("the padding value is not a literal")?;
                let fits = match (value, a.dtype.is_float(), a.dtype == DTypeCode::Bool) {
                    (_, true, _) | (Lit::Bool(_), _, _) => true,
                    (Lit::Int(i), false, false) => wrap(i, a.dtype) == i,
                    (Lit::Float(_), false, _) | (Lit::Int(_), false, true) => false,
                };
                if !fits {
                    return Err(format!(
                        "padding value {value:?} does not fit {}",
                        a.dtype.short_name()
                    ));
                }
                let Some(ArgView::Ints(c)) = args.get(2) else {
                    return Err("argument 2: expected the padding config".into());
                };
                if c.len() != 3 * a.rank() {
                    return Err(format!("config {c:?} does not fit rank {}", a.rank()));
                }
                let config: Vec<(i64, i64, i64)> =
                    c.chunks(3).map(|t| (t[0], t[1], t[2])).collect();
                if config.iter().any(|t| t.2 < 0) {
                    return Err("negative interior padding".into());
                }
                Ok(Spec::Pad {
                    a,
                    value,
                    config,
                    out_shape: out0.shape.to_vec(),
                })
            }
            // cuda-fuser reads these through index expressions in the kernels that consume
            // them (and copies them where they stand alone).
            IndexingPrim::Slice | IndexingPrim::Flip | IndexingPrim::Cat => {
                Err("a layout prim: cuda-fuser's".into())
            }
        },
        PrimKind::Factory(p) => match p {
            FactoryPrim::Full => {
                let dtype = cuda_dtype(args, 2, 3)?;
                let value = lit(args.get(1)).ok_or("the fill value is not a literal")?;
                let value = cast_fill(value, dtype)?;
                Ok(Spec::Full {
                    shape: shape_arg(args, 0)?,
                    value,
                    dtype,
                })
            }
            FactoryPrim::Iota => {
                let dtype = cuda_dtype(args, 3, 4)?;
                if dtype == DTypeCode::Bool {
                    return Err("iota of b8".into());
                }
                let length = int(args, 0)?;
                if length < 0 {
                    return Err(format!("negative length {length}"));
                }
                Ok(Spec::Iota {
                    length,
                    start: int(args, 1)?,
                    step: int(args, 2)?,
                    dtype,
                })
            }
        },
        PrimKind::Random(p) => {
            let dtype = cuda_dtype(args, 5, 6)?;
            if !dtype.is_float() {
                return Err("random numbers of a non-float dtype".into());
            }
            Ok(Spec::Random {
                normal: p == RandomPrim::Normal,
                shape: shape_arg(args, 0)?,
                p: (number(args, 1)?, number(args, 2)?),
                seed: int(args, 3)? as u64,
                offset: int(args, 4)? as u64,
                dtype,
            })
        }
        PrimKind::Matmul(_) => {
            let (a, b) = (a()?, operand(view, args.get(1))?);
            // Floats are cuBLAS's where it claims them (it asks first); what it leaves (f64,
            // degenerate shapes) runs here, summed in f64 as the interpreter sums.
            if a.dtype == DTypeCode::Bool || b.dtype != a.dtype {
                return Err("b8 matmul is not defined; operands of one dtype".into());
            }
            let (ra, rb) = (a.rank(), b.rank());
            if ra < 2
                || ra != rb
                || a.shape[..ra - 2] != b.shape[..rb - 2]
                || a.shape[ra - 1] != b.shape[rb - 2]
            {
                return Err("shapes do not multiply".into());
            }
            Ok(Spec::Matmul { a, b })
        }
        PrimKind::Binary(
            op @ (BinaryPrim::FloorDivide
            | BinaryPrim::Div
            | BinaryPrim::Remainder
            | BinaryPrim::Fmod
            | BinaryPrim::Pow),
        ) => {
            let side = |i: usize| match args.get(i) {
                Some(ArgView::Value(_)) => operand(view, args.get(i)).map(Ok),
                other => lit(other)
                    .map(Err)
                    .ok_or_else(|| format!("argument {i}: {other:?}")),
            };
            let (x, y) = (side(0)?, side(1)?);
            let dtype = out0.dtype;
            if dtype == DTypeCode::Bool {
                return Err(format!("{} of b8", op.name()));
            }
            // Floats of these are cuda-fuser's elementwise math (it claims first); floor_divide
            // has no float spelling there, so it runs here in f64 as the interpreter.
            if dtype.is_float() && op != BinaryPrim::FloorDivide {
                return Err("float operands: cuda-fuser's".into());
            }
            for o in [&x, &y].into_iter().flatten() {
                if o.dtype != dtype || o.shape != out0.shape.as_slice() {
                    return Err("operands of another dtype or shape".into());
                }
            }
            for l in [&x, &y].into_iter().filter_map(|o| o.as_ref().err()) {
                if !dtype.is_float() && matches!(l, Lit::Float(_)) {
                    return Err("a float literal in an integer op".into());
                }
            }
            Ok(Spec::Divide {
                op,
                a: x,
                b: y,
                dtype,
                shape: out0.shape.to_vec(),
            })
        }
        // Elementwise math and casts are cuda-fuser's (the integer ops that can fail aside: a
        // zero divisor or a negative exponent must be an error, which needs the device error
        // flag this library has).
        PrimKind::Unary(_)
        | PrimKind::Predicate(_)
        | PrimKind::Binary(
            BinaryPrim::Add
            | BinaryPrim::Sub
            | BinaryPrim::Mul
            | BinaryPrim::Maximum
            | BinaryPrim::Minimum
            | BinaryPrim::Atan2
            | BinaryPrim::Hypot
            | BinaryPrim::BitwiseAnd
            | BinaryPrim::BitwiseOr
            | BinaryPrim::BitwiseXor
            | BinaryPrim::BitwiseLeftShift
            | BinaryPrim::BitwiseRightShift,
        )
        | PrimKind::Compare(_)
        | PrimKind::Where(_)
        | PrimKind::Convert(_) => Err("elementwise: cuda-fuser's".into()),
        PrimKind::Shape(_) => Err("a layout prim: cuda-fuser's".into()),
        PrimKind::Conv(_) => conv(view, args, &out0.shape),
    }
}

/// An integer convolution, checked as the interpreter checks it; floats are cuDNN's.
fn conv(view: &TraceView, args: &[ArgView], out_shape: &[i64]) -> Result<Spec, String> {
    let (a, w) = (operand(view, args.first())?, operand(view, args.get(1))?);
    if !is_int(a.dtype) {
        return Err("a float or b8 convolution: cudnn's (floats) or undefined (b8)".into());
    }
    let spatial = w.rank().saturating_sub(2);
    if spatial == 0 || a.rank() != spatial + 2 || a.dtype != w.dtype {
        return Err(format!(
            "input {:?} and weight {:?} are not [N, C_in, *S] and [C_out, C_in / groups, *K] of one dtype",
            a.shape, w.shape
        ));
    }
    let bias = match args.get(2) {
        Some(ArgView::None) => None,
        other => {
            let b = operand(view, other)?;
            if b.dtype != a.dtype || b.shape != [w.shape[0]] {
                return Err(format!(
                    "bias {:?} is not [{}] of the input's dtype",
                    b.shape, w.shape[0]
                ));
            }
            Some(b)
        }
    };
    let list = |i: usize, min: i64| match args.get(i) {
        Some(ArgView::Ints(v)) if v.len() == spatial && v.iter().all(|&x| x >= min) => {
            Ok(v.to_vec())
        }
        other => Err(format!(
            "argument {i}: expected {spatial} ints >= {min}, got {other:?}"
        )),
    };
    let (stride, padding, dilation) = (list(3, 1)?, list(4, 0)?, list(5, 1)?);
    let groups = int(args, 6)?;
    if groups < 1 || w.shape[0] % groups != 0 || a.shape[1] != w.shape[1] * groups {
        return Err(format!(
            "groups {groups} does not fit input {:?} and weight {:?}",
            a.shape, w.shape
        ));
    }
    let mut shape = vec![a.shape[0], w.shape[0]];
    for d in 0..spatial {
        let span = dilation[d] * (w.shape[d + 2] - 1).max(0) + 1;
        let padded = a.shape[d + 2] + 2 * padding[d];
        if w.shape[d + 2] == 0 || padded < span {
            return Err(format!("spatial dim {d}: the output would be empty"));
        }
        shape.push((padded - span) / stride[d] + 1);
    }
    if shape != out_shape {
        return Err(format!("output {out_shape:?}, expected {shape:?}"));
    }
    Ok(Spec::Conv {
        a,
        w,
        bias,
        stride,
        padding,
        dilation,
        groups,
        out_shape: shape,
    })
}

/// `full`'s fill value converted to `dtype` as the interpreter converts it.
fn cast_fill(v: Lit, dtype: DTypeCode) -> Result<Lit, String> {
    Ok(match (v, dtype.is_float(), dtype == DTypeCode::Bool) {
        (Lit::Float(f), false, true) => Lit::Bool(f != 0.0),
        (Lit::Int(i), false, true) => Lit::Bool(i != 0),
        (Lit::Bool(b), false, true) => Lit::Bool(b),
        (Lit::Float(f), false, false) => {
            let t = f.trunc();
            if !(t >= -(2f64.powi(63)) && t < 2f64.powi(63)) || wrap(t as i64, dtype) as f64 != t {
                return Err(format!(
                    "fill value {f} does not fit {}",
                    dtype.short_name()
                ));
            }
            Lit::Int(t as i64)
        }
        (Lit::Int(i), false, false) => {
            if wrap(i, dtype) != i {
                return Err(format!(
                    "fill value {i} does not fit {}",
                    dtype.short_name()
                ));
            }
            Lit::Int(i)
        }
        (Lit::Bool(b), false, false) => Lit::Int(i64::from(b)),
        (Lit::Int(i), true, _) => Lit::Int(i),
        (Lit::Float(f), true, _) => Lit::Float(f),
        (Lit::Bool(b), true, _) => Lit::Float(f64::from(u8::from(b))),
    })
}

/// `x` wrapped to an integer dtype's width.
pub fn wrap(x: i64, dtype: DTypeCode) -> i64 {
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

/// Whether the library claims `prim` for some dtype and arguments (its advertised symbols).
pub fn claimable(prim: Prim) -> bool {
    match prim.kind() {
        PrimKind::Reduction(_)
        | PrimKind::Scan(_)
        | PrimKind::Sort(_)
        | PrimKind::Random(_)
        | PrimKind::Matmul(_)
        | PrimKind::Factory(_) => true,
        PrimKind::Indexing(p) => match p {
            IndexingPrim::Take
            | IndexingPrim::TakeAlongAxis
            | IndexingPrim::ScatterAdd
            | IndexingPrim::IndexAdd
            | IndexingPrim::Pad => true,
            IndexingPrim::Slice | IndexingPrim::Flip | IndexingPrim::Cat => false,
        },
        PrimKind::Conv(_) => true,
        PrimKind::Binary(p) => matches!(
            p,
            BinaryPrim::FloorDivide
                | BinaryPrim::Div
                | BinaryPrim::Remainder
                | BinaryPrim::Fmod
                | BinaryPrim::Pow
        ),
        PrimKind::Unary(_)
        | PrimKind::Predicate(_)
        | PrimKind::Compare(_)
        | PrimKind::Where(_)
        | PrimKind::Convert(_)
        | PrimKind::Shape(_) => false,
    }
}
