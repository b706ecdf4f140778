//! Which ops the fuser claims: decided per op, so that any claimed run of ops compiles (the
//! planner can always start a new kernel at an op it accepts). Every prim gets an explicit
//! decision; elementwise math is claimed exactly when its row of the elementwise table has a
//! CUDA spelling, so the generated code can always express what was claimed.

use thunder_abi::prims::{
    CudaSpelling, Elementwise, FactoryPrim, IndexingPrim, Prim, PrimKind, ReductionPrim, ShapePrim,
};
use thunder_abi::{ArgView, DTypeCode, DeviceKind, OpView, TraceView};

/// An elementwise function with its CUDA spelling: made only from table rows that have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Math {
    pub op: Elementwise,
    /// Spelling on float operands (and on any operands for comparisons).
    pub cuda: CudaSpelling,
    /// Spelling on i32/i64 operands, where the row has one.
    pub cuda_int: Option<CudaSpelling>,
}

impl Math {
    pub fn of(prim: Prim) -> Option<Math> {
        let op = Elementwise::of(prim)?;
        let cuda_int = match op {
            Elementwise::Binary(p) => p.rule().cuda_int,
            Elementwise::Unary(_) | Elementwise::Predicate(_) | Elementwise::Compare(_) => None,
        };
        Some(Math {
            op,
            cuda: op.cuda()?,
            cuda_int,
        })
    }
}

/// Whether the fuser may claim `prim` at all (for some dtype and arguments): what the plugin
/// advertises as its symbols.
pub fn claimable(prim: Prim) -> bool {
    match prim.kind() {
        PrimKind::Unary(_) | PrimKind::Predicate(_) | PrimKind::Binary(_) => {
            Math::of(prim).is_some()
        }
        PrimKind::Compare(_) | PrimKind::Where(_) | PrimKind::Convert(_) => true,
        // Permutations are read through permuted strides by the kernels that consume them.
        PrimKind::Shape(p) => match p {
            ShapePrim::BroadcastInDim | ShapePrim::Reshape | ShapePrim::Transpose => true,
        },
        // Constants and index ramps (one-hots, causal masks) are computed where they are read.
        PrimKind::Factory(p) => match p {
            FactoryPrim::Full | FactoryPrim::Iota => true,
        },
        PrimKind::Reduction(p) => match p {
            ReductionPrim::Sum | ReductionPrim::Amax => true,
            ReductionPrim::Prod
            | ReductionPrim::Amin
            | ReductionPrim::Argmax
            | ReductionPrim::Argmin
            | ReductionPrim::VarMean => false,
        },
        // Slices and flips are read through a new base and strides by their consumers.
        PrimKind::Indexing(p) => match p {
            IndexingPrim::Slice | IndexingPrim::Flip => true,
            IndexingPrim::Pad
            | IndexingPrim::Cat
            | IndexingPrim::Take
            | IndexingPrim::TakeAlongAxis
            | IndexingPrim::ScatterAdd
            | IndexingPrim::IndexAdd => false,
        },
        PrimKind::Scan(_)
        | PrimKind::Sort(_)
        | PrimKind::Conv(_)
        | PrimKind::Random(_)
        | PrimKind::Matmul(_) => false,
    }
}

fn on_cuda(view: &TraceView, v: u32) -> Option<DTypeCode> {
    let meta = view.values.get(v as usize)?;
    (meta.device.kind == DeviceKind::Cuda).then_some(meta.dtype)
}

/// Whether the fuser can run `op` (a prim on CUDA tensors of dtypes it handles).
pub fn accepts(view: &TraceView, op: &OpView) -> bool {
    if op.composite {
        return false;
    }
    let Some(prim) = Prim::from_id(&op.symbol) else {
        return false;
    };
    if !claimable(prim) {
        return false;
    }
    let mut dtypes = Vec::new();
    for v in op.input_values().chain(op.outputs.iter().copied()) {
        match on_cuda(view, v) {
            Some(d) => dtypes.push(d),
            None => return false,
        }
    }
    if dtypes.is_empty() {
        return false;
    }
    let out = view.values[op.outputs[0] as usize].dtype;
    let first_in = op
        .input_values()
        .next()
        .map(|v| view.values[v as usize].dtype);
    match prim.kind() {
        PrimKind::Unary(_) | PrimKind::Predicate(_) | PrimKind::Binary(_) => {
            let Some(math) = Math::of(prim) else {
                return false;
            };
            first_in.is_some_and(DTypeCode::is_float)
                || (math.cuda_int.is_some()
                    && matches!(first_in, Some(DTypeCode::I32 | DTypeCode::I64)))
        }
        PrimKind::Compare(_) | PrimKind::Where(_) | PrimKind::Convert(_) | PrimKind::Shape(_) => {
            true
        }
        PrimKind::Factory(_) => !matches!(out, DTypeCode::U8 | DTypeCode::I8 | DTypeCode::I16),
        PrimKind::Reduction(_) => {
            out.is_float() && matches!(op.args.get(1), Some(ArgView::Ints(d)) if !d.is_empty())
        }
        // `claimable` let through only slice and flip.
        PrimKind::Indexing(_) => true,
        PrimKind::Scan(_)
        | PrimKind::Sort(_)
        | PrimKind::Conv(_)
        | PrimKind::Random(_)
        | PrimKind::Matmul(_) => false,
    }
}
