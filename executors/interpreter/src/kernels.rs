//! Decode and dispatch for the prims computed by a kernel of their own module rather than by the
//! lane-wise instructions (`along`: argmax, argmin, cumsum, var_mean; `sort`: topk, sort; `conv`;
//! `rng`: uniform, normal), including those with several outputs.

use crate::args::{arity, dims_arg, expect_out, invalid, unsupported, DecodeError, Env, SlotMeta};
use crate::conv::{self, ConvGeometry};
use crate::data::{describe, lane_kind, LaneKind, Lanes};
use crate::decode::Instr;
use crate::{along, rng, sort};
use thunder_abi::prims::{Prim, PrimKind, RandomPrim, ReductionPrim, SortPrim};
use thunder_abi::{ArgView, DTypeCode};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KernelInstr {
    ArgExtreme {
        a: usize,
        dim: usize,
        max: bool,
    },
    Cumsum {
        a: usize,
        dim: usize,
    },
    VarMean {
        a: usize,
        dims: Vec<usize>,
        correction: f64,
    },
    Sort {
        a: usize,
        dim: usize,
        /// Keep this many values after ordering (all of them for `sort`).
        k: usize,
        descending: bool,
    },
    Convolution {
        a: usize,
        w: usize,
        bias: Option<usize>,
        geom: ConvGeometry,
    },
    Random {
        normal: bool,
        a: f64,
        b: f64,
        seed: u64,
        offset: u64,
    },
}

/// Prims that always have more than one output.
pub(crate) fn is_multi_output(prim: Prim) -> bool {
    matches!(
        prim.kind(),
        PrimKind::Reduction(ReductionPrim::VarMean) | PrimKind::Sort(_)
    )
}

fn int(args: &[ArgView], i: usize, what: &str) -> Result<i64, DecodeError> {
    match args.get(i) {
        Some(ArgView::Int(v)) => Ok(*v),
        other => invalid(format!(
            "argument {i} ({what}) must be an int, got {other:?}"
        )),
    }
}

fn flag(args: &[ArgView], i: usize, what: &str) -> Result<bool, DecodeError> {
    match args.get(i) {
        Some(ArgView::Bool(v)) => Ok(*v),
        other => invalid(format!(
            "argument {i} ({what}) must be a bool, got {other:?}"
        )),
    }
}

fn dim(args: &[ArgView], i: usize, rank: usize) -> Result<usize, DecodeError> {
    let d = int(args, i, "dim")?;
    match usize::try_from(d) {
        Ok(d) if d < rank => Ok(d),
        _ => invalid(format!("dim {d} must be in [0, {rank})")),
    }
}

/// Single-output prims of this module.
pub(crate) fn decode_single(
    prim: Prim,
    args: &[ArgView],
    out: &SlotMeta,
    env: &Env,
) -> Result<Instr, DecodeError> {
    let instr = match prim.kind() {
        PrimKind::Reduction(p @ (ReductionPrim::Argmax | ReductionPrim::Argmin)) => {
            arity(args, 2)?;
            let (a, meta) = env.tensor(args, 0)?;
            let dim = dim(args, 1, meta.shape.len())?;
            if meta.shape[dim] == 0 {
                return invalid(format!(
                    "dim {dim} of {} has size 0",
                    describe(meta.dtype, &meta.shape)
                ));
            }
            let mut shape = meta.shape.clone();
            shape.remove(dim);
            expect_out(out, DTypeCode::I64, &shape)?;
            KernelInstr::ArgExtreme {
                a,
                dim,
                max: p == ReductionPrim::Argmax,
            }
        }
        PrimKind::Scan(_) => {
            arity(args, 2)?;
            let (a, meta) = env.tensor(args, 0)?;
            let dim = dim(args, 1, meta.shape.len())?;
            if meta.dtype == DTypeCode::Bool {
                return unsupported("not supported for b8 (the host converts to i64 first)");
            }
            expect_out(out, meta.dtype, &meta.shape)?;
            KernelInstr::Cumsum { a, dim }
        }
        PrimKind::Conv(_) => convolution(args, out, env)?,
        PrimKind::Random(p) => random(p, args, out)?,
        PrimKind::Reduction(ReductionPrim::VarMean) | PrimKind::Sort(_) => {
            return invalid("has 2 outputs, not 1")
        }
        PrimKind::Reduction(
            ReductionPrim::Sum | ReductionPrim::Amax | ReductionPrim::Prod | ReductionPrim::Amin,
        )
        | PrimKind::Unary(_)
        | PrimKind::Predicate(_)
        | PrimKind::Binary(_)
        | PrimKind::Compare(_)
        | PrimKind::Where(_)
        | PrimKind::Convert(_)
        | PrimKind::Shape(_)
        | PrimKind::Indexing(_)
        | PrimKind::Matmul(_)
        | PrimKind::Factory(_) => return invalid("internal: not a kernel prim"),
    };
    Ok(Instr::Kernel(instr))
}

/// Prims with several outputs.
pub(crate) fn decode_multi(
    prim: Prim,
    args: &[ArgView],
    outs: &[SlotMeta],
    env: &Env,
) -> Result<Instr, DecodeError> {
    let [out0, out1] = outs else {
        return invalid(format!("expected 2 outputs, got {}", outs.len()));
    };
    let instr = match prim.kind() {
        PrimKind::Reduction(ReductionPrim::VarMean) => {
            arity(args, 3)?;
            let (a, meta) = env.tensor(args, 0)?;
            if lane_kind(meta.dtype) != LaneKind::Float {
                return unsupported(format!(
                    "not supported for {} (floats only)",
                    meta.dtype.short_name()
                ));
            }
            let dims = dims_arg(args, 1, "dims", meta.shape.len())?;
            let correction = match args.get(2) {
                Some(ArgView::Int(c)) => *c as f64,
                Some(ArgView::Float(c)) => *c,
                other => {
                    return invalid(format!(
                        "argument 2 (correction) must be a number, got {other:?}"
                    ))
                }
            };
            let shape: Vec<usize> = (0..meta.shape.len())
                .filter(|d| !dims.contains(d))
                .map(|d| meta.shape[d])
                .collect();
            expect_out(out0, meta.dtype, &shape)?;
            expect_out(out1, meta.dtype, &shape)?;
            KernelInstr::VarMean {
                a,
                dims,
                correction,
            }
        }
        PrimKind::Sort(p) => {
            let (a, meta) = env.tensor(args, 0)?;
            let rank = meta.shape.len();
            let (dim, k, descending) = if p == SortPrim::Topk {
                arity(args, 5)?;
                let k = int(args, 1, "k")?;
                let dim = dim(args, 2, rank)?;
                let largest = flag(args, 3, "largest")?;
                flag(args, 4, "sorted")?;
                match usize::try_from(k) {
                    Ok(k) if k <= meta.shape[dim] => (dim, k, largest),
                    _ => return invalid(format!("k ({k}) must be in [0, {}]", meta.shape[dim])),
                }
            } else {
                arity(args, 4)?;
                let dim = dim(args, 1, rank)?;
                let descending = flag(args, 2, "descending")?;
                flag(args, 3, "stable")?;
                (dim, meta.shape[dim], descending)
            };
            let mut shape = meta.shape.clone();
            shape[dim] = k;
            expect_out(out0, meta.dtype, &shape)?;
            expect_out(out1, DTypeCode::I64, &shape)?;
            KernelInstr::Sort {
                a,
                dim,
                k,
                descending,
            }
        }
        PrimKind::Reduction(_)
        | PrimKind::Scan(_)
        | PrimKind::Conv(_)
        | PrimKind::Random(_)
        | PrimKind::Unary(_)
        | PrimKind::Predicate(_)
        | PrimKind::Binary(_)
        | PrimKind::Compare(_)
        | PrimKind::Where(_)
        | PrimKind::Convert(_)
        | PrimKind::Shape(_)
        | PrimKind::Indexing(_)
        | PrimKind::Matmul(_)
        | PrimKind::Factory(_) => return invalid(format!("expected 1 output, got {}", outs.len())),
    };
    Ok(Instr::Kernel(instr))
}

impl KernelInstr {
    pub(crate) fn reads(&self) -> Vec<usize> {
        match self {
            KernelInstr::ArgExtreme { a, .. }
            | KernelInstr::Cumsum { a, .. }
            | KernelInstr::VarMean { a, .. }
            | KernelInstr::Sort { a, .. } => vec![*a],
            KernelInstr::Convolution { a, w, bias, .. } => {
                [Some(*a), Some(*w), *bias].into_iter().flatten().collect()
            }
            KernelInstr::Random { .. } => Vec::new(),
        }
    }

    pub(crate) fn exec<'a>(
        &self,
        lanes: &dyn Fn(usize) -> Result<&'a Lanes, String>,
        shape: &dyn Fn(usize) -> &'a [usize],
        outs: &[&SlotMeta],
    ) -> Result<Vec<Lanes>, String> {
        match self {
            KernelInstr::ArgExtreme { a, dim, max } => {
                Ok(vec![along::arg_extreme(lanes(*a)?, shape(*a), *dim, *max)])
            }
            KernelInstr::Cumsum { a, dim } => Ok(vec![along::cumsum(lanes(*a)?, shape(*a), *dim)]),
            KernelInstr::VarMean {
                a,
                dims,
                correction,
            } => along::var_mean(lanes(*a)?, shape(*a), dims, *correction),
            KernelInstr::Sort {
                a,
                dim,
                k,
                descending,
            } => Ok(sort::sort(lanes(*a)?, shape(*a), *dim, *k, *descending)),
            KernelInstr::Random {
                normal,
                a,
                b,
                seed,
                offset,
            } => {
                let out = outs.first().ok_or("internal: no output")?;
                let n = out.shape.iter().product();
                let values = if *normal {
                    rng::normal(n, *a, *b, *seed, *offset)
                } else {
                    rng::uniform(n, *a, *b, *seed, *offset)
                };
                Ok(vec![Lanes::Float(values)])
            }
            KernelInstr::Convolution { a, w, bias, geom } => {
                let out = outs.first().ok_or("internal: no output")?;
                let bias = bias.map(lanes).transpose()?;
                Ok(vec![conv::convolution(
                    lanes(*a)?,
                    shape(*a),
                    lanes(*w)?,
                    shape(*w),
                    bias,
                    &out.shape,
                    geom,
                )?])
            }
        }
    }
}

fn convolution(args: &[ArgView], out: &SlotMeta, env: &Env) -> Result<KernelInstr, DecodeError> {
    arity(args, 7)?;
    let (a, ma) = env.tensor(args, 0)?;
    let (w, mw) = env.tensor(args, 1)?;
    let spatial = mw.shape.len().saturating_sub(2);
    if spatial == 0 || ma.shape.len() != spatial + 2 || ma.dtype != mw.dtype {
        return invalid(format!(
            "input {} and weight {} must be [N, C_in, *S] and [C_out, C_in / groups, *K] of one dtype",
            describe(ma.dtype, &ma.shape),
            describe(mw.dtype, &mw.shape)
        ));
    }
    if lane_kind(ma.dtype) == LaneKind::Bool {
        return unsupported("not supported for b8");
    }
    let bias = match args.get(2) {
        Some(ArgView::None) => None,
        _ => {
            let (b, mb) = env.tensor(args, 2)?;
            if mb.dtype != ma.dtype || mb.shape != [mw.shape[0]] {
                return invalid(format!(
                    "bias {} must be {}",
                    describe(mb.dtype, &mb.shape),
                    describe(ma.dtype, &[mw.shape[0]])
                ));
            }
            Some(b)
        }
    };
    let list = |i: usize, what: &str, min: i64| -> Result<Vec<usize>, DecodeError> {
        match args.get(i) {
            Some(ArgView::Ints(v)) if v.len() == spatial && v.iter().all(|&x| x >= min) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            other => invalid(format!(
                "argument {i} ({what}) must be {spatial} ints >= {min}, got {other:?}"
            )),
        }
    };
    let (stride, padding, dilation) = (
        list(3, "stride", 1)?,
        list(4, "padding", 0)?,
        list(5, "dilation", 1)?,
    );
    let groups = int(args, 6, "groups")?;
    let groups = match usize::try_from(groups) {
        Ok(g) if g >= 1 && mw.shape[0] % g == 0 && ma.shape[1] == mw.shape[1] * g => g,
        _ => {
            return invalid(format!(
                "groups {groups} does not fit input {} and weight {}",
                describe(ma.dtype, &ma.shape),
                describe(mw.dtype, &mw.shape)
            ))
        }
    };
    let mut shape = vec![ma.shape[0], mw.shape[0]];
    for d in 0..spatial {
        let span = dilation[d] * mw.shape[d + 2].saturating_sub(1) + 1;
        let padded = ma.shape[d + 2] + 2 * padding[d];
        if mw.shape[d + 2] == 0 || padded < span {
            return invalid(format!("spatial dim {d}: the output would be empty"));
        }
        shape.push((padded - span) / stride[d] + 1);
    }
    expect_out(out, ma.dtype, &shape)?;
    Ok(KernelInstr::Convolution {
        a,
        w,
        bias,
        geom: ConvGeometry {
            stride,
            padding,
            dilation,
            groups,
        },
    })
}

fn random(prim: RandomPrim, args: &[ArgView], out: &SlotMeta) -> Result<KernelInstr, DecodeError> {
    arity(args, 7)?;
    let shape = crate::args::shape_arg(args, 0)?;
    let number = |i: usize| match args.get(i) {
        Some(ArgView::Float(x)) if x.is_finite() => Ok(*x),
        Some(ArgView::Int(x)) => Ok(*x as f64),
        other => invalid(format!(
            "argument {i} must be a finite number, got {other:?}"
        )),
    };
    let (a, b) = (number(1)?, number(2)?);
    // Seeds and offsets are u64 carried in i64 (two's complement).
    let (seed, offset) = (int(args, 3, "seed")? as u64, int(args, 4, "offset")? as u64);
    match args.get(5) {
        Some(ArgView::Device(d)) if d.kind == thunder_abi::DeviceKind::Cpu => {}
        Some(ArgView::Device(d)) => return unsupported(format!("runs on CPU only, not {d:?}")),
        other => return invalid(format!("argument 5 must be a device, got {other:?}")),
    }
    let Some(ArgView::DType(dtype)) = args.get(6) else {
        return invalid(format!("argument 6 must be a dtype, got {:?}", args.get(6)));
    };
    if lane_kind(*dtype) != LaneKind::Float {
        return invalid(format!("dtype {} is not a float dtype", dtype.short_name()));
    }
    expect_out(out, *dtype, &shape)?;
    Ok(KernelInstr::Random {
        normal: prim == RandomPrim::Normal,
        a,
        b,
        seed,
        offset,
    })
}
