//! Which ops the fuser claims: decided per op, so that any claimed run of ops compiles (the
//! planner can always start a new kernel at an op it accepts). Every prim gets an explicit
//! decision; elementwise math is claimed exactly when its row of the elementwise table has a
//! CUDA spelling, so the generated code can always express what was claimed.

use thunder_abi::prims::{
    CudaSpelling, Elementwise, FactoryPrim, IndexingPrim, Prim, PrimKind, ReductionPrim, ShapePrim,
};
use thunder_abi::{ArgView, DTypeCode, DeviceKind, OpView, TraceView};

/// An elementwise function with the CUDA spelling for its operands' dtype: made only from a
/// table row that has one, so generated code can always express a claimed op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Math {
    pub op: Elementwise,
    pub spelling: CudaSpelling,
    /// The integer spelling (`{t}`, the C type, to fill in), not the float one.
    pub int: bool,
    /// The operands are b8 (the row's bool semantics).
    pub bools: bool,
}

impl Math {
    /// `prim` on operands of `dtype`, if the row defines it there and has a spelling.
    pub fn for_operands(prim: Prim, dtype: DTypeCode) -> Option<Math> {
        let op = Elementwise::of(prim)?;
        if dtype.is_float() {
            return Some(Math {
                op,
                spelling: op.cuda()?,
                int: false,
                bools: false,
            });
        }
        let is_bool = dtype == DTypeCode::Bool;
        let (defined, spelling) = match op {
            // The C comparison operators, on any type.
            Elementwise::Compare(p) => {
                return Some(Math {
                    op,
                    spelling: p.cuda(),
                    int: false,
                    bools: is_bool,
                })
            }
            Elementwise::Binary(p) => {
                let rule = p.rule();
                let defined = if is_bool {
                    rule.supports_bool()
                } else {
                    rule.supports_int()
                };
                (defined, rule.cuda_int)
            }
            Elementwise::Unary(p) => (!is_bool && p.rule().supports_int(), p.rule().cuda_int),
            Elementwise::Predicate(_) => (false, None),
        };
        defined.then_some(())?;
        Some(Math {
            op,
            spelling: spelling?,
            int: true,
            bools: is_bool,
        })
    }

    /// Whether some dtype has a spelling.
    fn exists(prim: Prim) -> bool {
        [DTypeCode::F32, DTypeCode::I64, DTypeCode::Bool]
            .into_iter()
            .any(|d| Math::for_operands(prim, d).is_some())
    }
}

/// Whether the fuser may claim `prim` at all (for some dtype and arguments): what the plugin
/// advertises as its symbols.
pub fn claimable(prim: Prim) -> bool {
    match prim.kind() {
        PrimKind::Unary(_) | PrimKind::Predicate(_) | PrimKind::Binary(_) => Math::exists(prim),
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
            ReductionPrim::Sum | ReductionPrim::Amax | ReductionPrim::Amin => true,
            ReductionPrim::Prod
            | ReductionPrim::Argmax
            | ReductionPrim::Argmin
            | ReductionPrim::VarMean => false,
        },
        // Slices and flips are read through a new base and strides by their consumers; pads
        // (without interior padding) are guarded loads.
        PrimKind::Indexing(p) => match p {
            IndexingPrim::Slice | IndexingPrim::Flip | IndexingPrim::Pad | IndexingPrim::Cat => {
                true
            }
            IndexingPrim::Take
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
        // Exactly the operand dtypes the row has a spelling for.
        PrimKind::Unary(_) | PrimKind::Predicate(_) | PrimKind::Binary(_) => {
            first_in.is_some_and(|d| Math::for_operands(prim, d).is_some())
        }
        PrimKind::Compare(_) | PrimKind::Where(_) | PrimKind::Convert(_) | PrimKind::Shape(_) => {
            true
        }
        PrimKind::Factory(_) => !matches!(out, DTypeCode::U8 | DTypeCode::I8 | DTypeCode::I16),
        PrimKind::Reduction(_) => {
            out.is_float() && matches!(op.args.get(1), Some(ArgView::Ints(d)) if !d.is_empty())
        }
        // `claimable` let through only slice, flip and pad; interior padding is not claimed.
        PrimKind::Indexing(p) => match p {
            IndexingPrim::Pad => matches!(
                op.args.get(2),
                Some(ArgView::Ints(c)) if c.chunks(3).all(|c| c.get(2) == Some(&0))
            ),
            IndexingPrim::Slice
            | IndexingPrim::Flip
            | IndexingPrim::Cat
            | IndexingPrim::Take
            | IndexingPrim::TakeAlongAxis
            | IndexingPrim::ScatterAdd
            | IndexingPrim::IndexAdd => true,
        },
        PrimKind::Scan(_)
        | PrimKind::Sort(_)
        | PrimKind::Conv(_)
        | PrimKind::Random(_)
        | PrimKind::Matmul(_) => false,
    }
}
