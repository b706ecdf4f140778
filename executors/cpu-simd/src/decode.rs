//! One trace op as a typed [`Op`], checked against the trace's metadata. Claim and compile
//! both go through [`decode`], so an op is claimed exactly when compile can take it: the host
//! drops an executor from the whole trace when one of its regions fails to compile.

use crate::ops::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
use thunder_abi::prims::{FactoryPrim, IndexingPrim, Prim, PrimKind, ReductionPrim, ShapePrim};
use thunder_abi::{ArgView, DTypeCode, DeviceKind, OpView, PluginError, TraceView};

/// Element types this executor computes in; everything else is left to other executors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Ty {
    F32,
    F64,
    B8,
    I64,
}

impl Ty {
    pub(crate) fn of(dtype: DTypeCode) -> Option<Ty> {
        match dtype {
            DTypeCode::F32 => Some(Ty::F32),
            DTypeCode::F64 => Some(Ty::F64),
            DTypeCode::Bool => Some(Ty::B8),
            DTypeCode::I64 => Some(Ty::I64),
            _ => None,
        }
    }

    pub(crate) fn dtype(self) -> DTypeCode {
        match self {
            Ty::F32 => DTypeCode::F32,
            Ty::F64 => DTypeCode::F64,
            Ty::B8 => DTypeCode::Bool,
            Ty::I64 => DTypeCode::I64,
        }
    }

    pub(crate) fn is_float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }
}

/// A scalar literal operand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Lit {
    F(f64),
    I(i64),
    B(bool),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Operand {
    Val(u32),
    Lit(Lit),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Unary {
        op: UnaryOp,
        a: u32,
    },
    Binary {
        op: BinaryOp,
        a: Operand,
        b: Operand,
    },
    Compare {
        op: CompareOp,
        a: Operand,
        b: Operand,
    },
    Where {
        pred: u32,
        a: Operand,
        b: Operand,
    },
    Convert {
        a: u32,
    },
    Broadcast {
        a: u32,
        dims: Vec<usize>,
    },
    Reshape {
        a: u32,
    },
    Transpose {
        a: u32,
        perm: Vec<usize>,
    },
    /// Elements `start[d] + i * step[d]` of each dim.
    Slice {
        a: u32,
        start: Vec<usize>,
        step: Vec<usize>,
    },
    /// Rows `index[j]` of dim `dim` (an i64 `index`, checked when run).
    Take {
        a: u32,
        index: u32,
        dim: usize,
    },
    /// `a` with row `index[j]` of dim `dim` plus row `j` of `src`, for every `j` in order (an
    /// i64 `index`, checked when run).
    IndexAdd {
        a: u32,
        index: u32,
        src: u32,
        dim: usize,
    },
    /// `(low, high, interior)` padding per dim (low/high may be negative: a crop).
    Pad {
        a: u32,
        value: Lit,
        config: Vec<(i64, i64, i64)>,
    },
    /// The parts one after another along `dim` (each a strided copy into its place).
    Cat {
        parts: Vec<u32>,
        dim: usize,
    },
    Reduce {
        op: ReduceOp,
        a: u32,
        dims: Vec<usize>,
    },
    Matmul {
        a: u32,
        b: u32,
    },
    Full {
        value: Lit,
    },
    Iota {
        start: i64,
        step: i64,
    },
    Conv {
        a: u32,
        w: u32,
        bias: Option<u32>,
        geom: crate::conv::ConvGeometry,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decoded {
    pub(crate) prim: Prim,
    pub(crate) op: Op,
    pub(crate) out: u32,
    pub(crate) ty: Ty,
    pub(crate) shape: Vec<usize>,
}

/// Type and shape of a CPU value of a supported dtype.
pub(crate) fn value_meta(view: &TraceView, id: u32) -> Result<(Ty, Vec<usize>), String> {
    let (dtype, shape) = cpu_value(view, id)?;
    let ty = Ty::of(dtype)
        .ok_or_else(|| format!("value {id}: dtype {} is not supported", dtype.short_name()))?;
    Ok((ty, shape))
}

/// Dtype and shape of a CPU value of any dtype.
pub(crate) fn cpu_value(view: &TraceView, id: u32) -> Result<(DTypeCode, Vec<usize>), String> {
    let meta = view
        .values
        .get(id as usize)
        .ok_or_else(|| format!("value {id} is not in the trace"))?;
    if meta.device.kind != DeviceKind::Cpu {
        return Err(format!("value {id} is on {:?}, not the CPU", meta.device));
    }
    let shape = meta
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("value {id} has a negative dim"))?;
    Ok((meta.dtype, shape))
}

pub(crate) type R<T> = Result<T, String>;

/// A tensor argument (id, type, shape), or the literal given instead.
type TensorOrLit = Result<(u32, Ty, Vec<usize>), Lit>;

pub(crate) fn fail<T>(message: impl Into<String>) -> R<T> {
    Err(message.into())
}

/// Decodes `op`; the error names the prim.
pub(crate) fn decode(view: &TraceView, op: &OpView) -> Result<Decoded, PluginError> {
    let Some(prim) = Prim::from_id(&op.symbol) else {
        return Err(PluginError::unsupported(format!(
            "{}: not a prim (cpu-simd runs prims only)",
            op.symbol
        )));
    };
    decode_prim(view, prim, op).map_err(|m| PluginError::unsupported(format!("{}: {m}", prim.id())))
}

fn decode_prim(view: &TraceView, prim: Prim, op: &OpView) -> R<Decoded> {
    let &[out] = op.outputs.as_slice() else {
        return fail(format!("expected 1 output, got {}", op.outputs.len()));
    };
    let (ty, shape) = value_meta(view, out)?;
    let args = op.args.as_slice();
    let cx = Cx {
        view,
        args,
        ty,
        shape: &shape,
    };
    let not_here = |why: &str| fail(format!("not implemented in cpu-simd ({why})"));
    let op = match prim.kind() {
        PrimKind::Unary(p) => cx.unary(UnaryOp::of(p)),
        PrimKind::Binary(p) => match BinaryOp::of(p) {
            Some(op) => cx.binary(op),
            None => not_here("integer and b8 arithmetic"),
        },
        PrimKind::Predicate(_) => not_here("b8 out of a float test"),
        PrimKind::Compare(op) => cx.compare(op),
        PrimKind::Where(_) => cx.where_(),
        PrimKind::Convert(_) => cx.convert(),
        PrimKind::Shape(p) => match p {
            ShapePrim::BroadcastInDim => cx.broadcast(),
            ShapePrim::Reshape => cx.reshape(),
            ShapePrim::Transpose => cx.transpose(),
        },
        // Slices are views, pads and cats strided copies, takes a row gather and index_add a
        // row scatter-add; the other gathers and scatters stay with the interpreter.
        PrimKind::Indexing(p) => match p {
            IndexingPrim::Slice => cx.slice(),
            IndexingPrim::Pad => cx.pad(),
            IndexingPrim::Cat => cx.cat(),
            IndexingPrim::Take => cx.take(),
            IndexingPrim::IndexAdd => cx.index_add(),
            _ => not_here("scatter_add, take_along_axis and flip"),
        },
        PrimKind::Reduction(p) => match p {
            ReductionPrim::Sum => cx.reduce(ReduceOp::Sum),
            ReductionPrim::Amax => cx.reduce(ReduceOp::Amax),
            ReductionPrim::Amin => cx.reduce(ReduceOp::Amin),
            ReductionPrim::Prod
            | ReductionPrim::Argmax
            | ReductionPrim::Argmin
            | ReductionPrim::VarMean => not_here("index and two-pass reductions"),
        },
        PrimKind::Conv(_) => cx.convolution(),
        // Not fusable loops: scans, sorts, random streams.
        PrimKind::Scan(_) | PrimKind::Sort(_) | PrimKind::Random(_) => {
            not_here("not a fusable loop")
        }
        PrimKind::Matmul(_) => cx.matmul(),
        PrimKind::Factory(p) => match p {
            FactoryPrim::Full => cx.full(),
            FactoryPrim::Iota => cx.iota(),
        },
    }?;
    Ok(Decoded {
        prim,
        op,
        out,
        ty,
        shape,
    })
}

pub(crate) struct Cx<'a> {
    pub(crate) view: &'a TraceView,
    pub(crate) args: &'a [ArgView],
    /// The output's type and shape.
    pub(crate) ty: Ty,
    pub(crate) shape: &'a [usize],
}

impl Cx<'_> {
    pub(crate) fn arity(&self, n: usize) -> R<()> {
        if self.args.len() != n {
            return fail(format!("expected {n} arguments, got {}", self.args.len()));
        }
        Ok(())
    }

    pub(crate) fn tensor(&self, i: usize) -> R<(u32, Ty, Vec<usize>)> {
        match self.args.get(i) {
            Some(ArgView::Value(v)) => {
                let (ty, shape) = value_meta(self.view, *v)?;
                Ok((*v, ty, shape))
            }
            other => fail(format!("argument {i} must be a tensor, got {other:?}")),
        }
    }

    fn operand(&self, i: usize) -> R<TensorOrLit> {
        match self.args.get(i) {
            Some(ArgView::Value(_)) => self.tensor(i).map(Ok),
            Some(ArgView::Int(v)) => Ok(Err(Lit::I(*v))),
            Some(ArgView::Float(v)) => Ok(Err(Lit::F(*v))),
            Some(ArgView::Bool(v)) => Ok(Err(Lit::B(*v))),
            other => fail(format!(
                "argument {i} must be a tensor or a number, got {other:?}"
            )),
        }
    }

    pub(crate) fn expect_out(&self, ty: Ty, shape: &[usize]) -> R<()> {
        if self.ty != ty || self.shape != shape {
            return fail(format!(
                "output is {:?}{:?} but the arguments give {ty:?}{shape:?}",
                self.ty, self.shape
            ));
        }
        Ok(())
    }

    fn unary(&self, op: UnaryOp) -> R<Op> {
        self.arity(1)?;
        let (a, ty, shape) = self.tensor(0)?;
        if !ty.is_float() {
            return fail(format!("{ty:?} is not a float type"));
        }
        self.expect_out(ty, &shape)?;
        Ok(Op::Unary { op, a })
    }

    /// Two operands, at most one literal; the tensors' common type and shape.
    fn operands(&self) -> R<(Operand, Operand, Ty, Vec<usize>)> {
        self.arity(2)?;
        let (a, b) = (self.operand(0)?, self.operand(1)?);
        let (ty, shape) = match (&a, &b) {
            (Ok((_, ta, sa)), Ok((_, tb, sb))) if ta != tb || sa != sb => {
                return fail("operands differ in type or shape")
            }
            (Ok((_, t, s)), _) | (_, Ok((_, t, s))) => (*t, s.clone()),
            (Err(_), Err(_)) => return fail("at least one operand must be a tensor"),
        };
        let lower = |o: TensorOrLit| match o {
            Ok((v, _, _)) => Operand::Val(v),
            Err(l) => Operand::Lit(l),
        };
        Ok((lower(a), lower(b), ty, shape))
    }

    fn binary(&self, op: BinaryOp) -> R<Op> {
        let (a, b, ty, shape) = self.operands()?;
        if !ty.is_float() {
            return fail(format!("{ty:?} arithmetic is left to other executors"));
        }
        self.expect_out(ty, &shape)?;
        Ok(Op::Binary {
            op,
            a: float_lit(a, ty),
            b: float_lit(b, ty),
        })
    }

    fn compare(&self, op: CompareOp) -> R<Op> {
        let (a, b, ty, shape) = self.operands()?;
        // Literals keep their kind so the kernel compares in the wider of the two, as the
        // reference interpreter does (an int tensor against 0.5 compares in f64).
        let lit_ok = |o: &Operand| match (o, ty) {
            (Operand::Val(_), _) => true,
            (Operand::Lit(Lit::B(_)), Ty::B8) => true,
            (Operand::Lit(_), Ty::B8) => false,
            (Operand::Lit(_), _) => true,
        };
        if !lit_ok(&a) || !lit_ok(&b) {
            return fail("a b8 tensor compares only with a bool literal");
        }
        let fix = |o: Operand| match (o, ty) {
            (Operand::Lit(l), Ty::F32 | Ty::F64) => float_lit(Operand::Lit(l), ty),
            (Operand::Lit(Lit::B(v)), Ty::I64) => Operand::Lit(Lit::I(i64::from(v))),
            (o, _) => o,
        };
        self.expect_out(Ty::B8, &shape)?;
        Ok(Op::Compare {
            op,
            a: fix(a),
            b: fix(b),
        })
    }

    fn where_(&self) -> R<Op> {
        self.arity(3)?;
        let (pred, pty, pshape) = self.tensor(0)?;
        if pty != Ty::B8 || pshape != self.shape {
            return fail("the condition must be b8 of the output's shape");
        }
        if !self.ty.is_float() {
            return fail(format!("where of {:?} is left to other executors", self.ty));
        }
        let branch = |i: usize| -> R<Operand> {
            match self.operand(i)? {
                Ok((v, ty, shape)) => {
                    self.expect_out(ty, &shape)?;
                    Ok(Operand::Val(v))
                }
                Err(l) => Ok(float_lit(Operand::Lit(l), self.ty)),
            }
        };
        Ok(Op::Where {
            pred,
            a: branch(1)?,
            b: branch(2)?,
        })
    }

    fn convert(&self) -> R<Op> {
        self.arity(2)?;
        let (a, from, shape) = self.tensor(0)?;
        match self.args.get(1) {
            Some(ArgView::DType(d)) if Ty::of(*d) == Some(self.ty) => {}
            other => {
                return fail(format!(
                    "argument 1 must be the output dtype, got {other:?}"
                ))
            }
        }
        let to = self.ty;
        let ok = from == to
            || matches!(
                (from, to),
                (Ty::F32 | Ty::F64 | Ty::B8 | Ty::I64, Ty::F32 | Ty::F64)
                    | (Ty::F32 | Ty::F64, Ty::B8)
            );
        if !ok {
            return fail(format!(
                "conversion {from:?} -> {to:?} is left to other executors"
            ));
        }
        self.expect_out(to, &shape)?;
        Ok(Op::Convert { a })
    }
}

/// A literal operand of a float op, rounded to the op's float type first (the prim contract, as
/// torch casts a Python scalar to the tensor's dtype). f32 arithmetic with it then gives the
/// reference interpreter's result bit for bit.
pub(crate) fn float_lit(o: Operand, ty: Ty) -> Operand {
    let v = match o {
        Operand::Lit(Lit::F(v)) => v,
        Operand::Lit(Lit::I(v)) => v as f64,
        Operand::Lit(Lit::B(v)) => f64::from(u8::from(v)),
        o => return o,
    };
    Operand::Lit(Lit::F(if ty == Ty::F32 { v as f32 as f64 } else { v }))
}
