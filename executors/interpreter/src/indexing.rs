//! Data-movement prims: slice, pad, cat, flip, take, take_along_axis, scatter_add, index_add.
//!
//! Every one but the two accumulating ones is a gather: each output element names the input
//! element it copies (for `cat` in the concatenation of the inputs' lanes, for `pad` possibly
//! the padding value appended after the input). Index tensors are read at run time, so their
//! values are bounds-checked there and an index outside `[0, size)` is an error naming the
//! prim, never a wild read.

use crate::args::{arity, expect_out, invalid, DecodeError, Env, SlotMeta};
use crate::data::{describe, lane_kind, numel, LaneKind, Lanes, Scalar};
use crate::decode::Instr;
use crate::shape::row_major_strides;
use thunder_abi::prims::IndexingPrim;
use thunder_abi::ArgView;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IndexInstr {
    Slice {
        a: usize,
        start: Vec<usize>,
        strides: Vec<usize>,
    },
    Pad {
        a: usize,
        value: Scalar,
        /// `(low, high, interior)` per dim.
        config: Vec<(i64, i64, i64)>,
    },
    Cat {
        dim: usize,
        parts: Vec<usize>,
    },
    Flip {
        a: usize,
        dims: Vec<usize>,
    },
    Take {
        a: usize,
        index: usize,
        dim: usize,
    },
    TakeAlongAxis {
        a: usize,
        index: usize,
        dim: usize,
    },
    ScatterAdd {
        a: usize,
        index: usize,
        src: usize,
        dim: usize,
    },
    IndexAdd {
        a: usize,
        index: usize,
        src: usize,
        dim: usize,
    },
}

fn ints<'a>(args: &'a [ArgView], i: usize, what: &str) -> Result<&'a [i64], DecodeError> {
    match args.get(i) {
        Some(ArgView::Ints(v)) => Ok(v.as_slice()),
        other => invalid(format!(
            "argument {i} ({what}) must be a list of ints, got {other:?}"
        )),
    }
}

fn per_dim<'a>(
    args: &'a [ArgView],
    i: usize,
    what: &str,
    rank: usize,
) -> Result<&'a [i64], DecodeError> {
    let v = ints(args, i, what)?;
    if v.len() != rank {
        return invalid(format!("{what} {v:?} must have {rank} entries"));
    }
    Ok(v)
}

fn dim(args: &[ArgView], i: usize, rank: usize) -> Result<usize, DecodeError> {
    match args.get(i) {
        Some(ArgView::Int(d)) => match usize::try_from(*d) {
            Ok(d) if d < rank => Ok(d),
            _ => invalid(format!("dim {d} must be in [0, {rank})")),
        },
        other => invalid(format!("argument {i} (dim) must be an int, got {other:?}")),
    }
}

fn index_arg<'a>(
    args: &[ArgView],
    i: usize,
    env: &'a Env,
) -> Result<(usize, &'a SlotMeta), DecodeError> {
    let (slot, meta) = env.tensor(args, i)?;
    if lane_kind(meta.dtype) != LaneKind::Int {
        return invalid(format!(
            "index {} must have an integer dtype",
            describe(meta.dtype, &meta.shape)
        ));
    }
    Ok((slot, meta))
}

fn same_dtype(a: &SlotMeta, b: &SlotMeta, what: &str) -> Result<(), DecodeError> {
    if a.dtype != b.dtype {
        return invalid(format!(
            "{what} {} must have the input's dtype {}",
            describe(b.dtype, &b.shape),
            a.dtype.short_name()
        ));
    }
    Ok(())
}

/// `index` no larger than `limit` in every dim but `skip`, and of the same rank.
fn fits(index: &SlotMeta, limit: &SlotMeta, skip: Option<usize>) -> Result<(), DecodeError> {
    let ok = index.shape.len() == limit.shape.len()
        && (0..index.shape.len()).all(|d| Some(d) == skip || index.shape[d] <= limit.shape[d]);
    if !ok {
        return invalid(format!(
            "index {} does not fit {}",
            describe(index.dtype, &index.shape),
            describe(limit.dtype, &limit.shape)
        ));
    }
    Ok(())
}

pub(crate) fn decode(
    prim: IndexingPrim,
    args: &[ArgView],
    out: &SlotMeta,
    env: &Env,
) -> Result<Instr, DecodeError> {
    let instr = match prim {
        IndexingPrim::Slice => {
            arity(args, 4)?;
            let (a, meta) = env.tensor(args, 0)?;
            let rank = meta.shape.len();
            let (start, end, strides) = (
                per_dim(args, 1, "start", rank)?,
                per_dim(args, 2, "end", rank)?,
                per_dim(args, 3, "strides", rank)?,
            );
            let mut shape = Vec::with_capacity(rank);
            for d in 0..rank {
                let (s, e, st) = (start[d], end[d], strides[d]);
                if st < 1 || s < 0 || s > e || e > meta.shape[d] as i64 {
                    return invalid(format!(
                        "start {start:?}, end {end:?}, strides {strides:?} do not fit {}",
                        describe(meta.dtype, &meta.shape)
                    ));
                }
                shape.push(if e == s {
                    0
                } else {
                    ((e - s - 1) / st + 1) as usize
                });
            }
            expect_out(out, meta.dtype, &shape)?;
            IndexInstr::Slice {
                a,
                start: start.iter().map(|&s| s as usize).collect(),
                strides: strides.iter().map(|&s| s as usize).collect(),
            }
        }
        IndexingPrim::Pad => {
            arity(args, 3)?;
            let (a, meta) = env.tensor(args, 0)?;
            let value = match env.operand(args, 1)? {
                crate::args::TensorOrScalar::Scalar(s) => {
                    s.operand_of(meta.dtype).or_else(invalid)?
                }
                crate::args::TensorOrScalar::Tensor(..) => {
                    return invalid("the padding value must be a number")
                }
            };
            let config = per_dim(args, 2, "config", 3 * meta.shape.len())?;
            let mut shape = Vec::with_capacity(meta.shape.len());
            let mut triples = Vec::with_capacity(meta.shape.len());
            for (c, &size) in config.chunks(3).zip(&meta.shape) {
                let (lo, hi, interior) = (c[0], c[1], c[2]);
                let size = size as i128;
                let n = i128::from(lo)
                    + i128::from(hi)
                    + size
                    + (size - 1).max(0) * i128::from(interior);
                if interior < 0 || n < 0 || n > i128::from(i64::MAX) {
                    return invalid(format!(
                        "config {config:?} does not fit {}",
                        describe(meta.dtype, &meta.shape)
                    ));
                }
                shape.push(n as usize);
                triples.push((lo, hi, interior));
            }
            expect_out(out, meta.dtype, &shape)?;
            IndexInstr::Pad {
                a,
                value,
                config: triples,
            }
        }
        IndexingPrim::Cat => {
            if args.len() < 2 {
                return invalid("expects a dim and at least one tensor");
            }
            let (_, first) = env.tensor(args, 1)?;
            let dim = dim(args, 0, first.shape.len())?;
            let mut shape = first.shape.clone();
            shape[dim] = 0;
            let mut parts = Vec::with_capacity(args.len() - 1);
            for i in 1..args.len() {
                let (slot, meta) = env.tensor(args, i)?;
                same_dtype(first, meta, "tensor")?;
                let ok = meta.shape.len() == first.shape.len()
                    && (0..meta.shape.len()).all(|d| d == dim || meta.shape[d] == first.shape[d]);
                if !ok {
                    return invalid(format!(
                        "cannot concatenate {} and {} along dim {dim}",
                        describe(first.dtype, &first.shape),
                        describe(meta.dtype, &meta.shape)
                    ));
                }
                shape[dim] += meta.shape[dim];
                parts.push(slot);
            }
            expect_out(out, first.dtype, &shape)?;
            IndexInstr::Cat { dim, parts }
        }
        IndexingPrim::Flip => {
            arity(args, 2)?;
            let (a, meta) = env.tensor(args, 0)?;
            let dims = crate::args::dims_arg(args, 1, "dims", meta.shape.len())?;
            expect_out(out, meta.dtype, &meta.shape)?;
            IndexInstr::Flip { a, dims }
        }
        IndexingPrim::Take | IndexingPrim::TakeAlongAxis => {
            arity(args, 3)?;
            let (a, meta) = env.tensor(args, 0)?;
            let (index, imeta) = index_arg(args, 1, env)?;
            let dim = dim(args, 2, meta.shape.len())?;
            if prim == IndexingPrim::Take {
                let [len] = imeta.shape[..] else {
                    return invalid(format!(
                        "index {} must be 1-D",
                        describe(imeta.dtype, &imeta.shape)
                    ));
                };
                let mut shape = meta.shape.clone();
                shape[dim] = len;
                expect_out(out, meta.dtype, &shape)?;
                IndexInstr::Take { a, index, dim }
            } else {
                fits(imeta, meta, Some(dim))?;
                expect_out(out, meta.dtype, &imeta.shape)?;
                IndexInstr::TakeAlongAxis { a, index, dim }
            }
        }
        IndexingPrim::ScatterAdd | IndexingPrim::IndexAdd => {
            arity(args, 4)?;
            let (a, meta) = env.tensor(args, 0)?;
            let (index, imeta) = index_arg(args, 1, env)?;
            let (src, smeta) = env.tensor(args, 2)?;
            same_dtype(meta, smeta, "src")?;
            let dim = dim(args, 3, meta.shape.len())?;
            if prim == IndexingPrim::ScatterAdd {
                fits(imeta, smeta, None)?;
                fits(imeta, meta, Some(dim))?;
            } else {
                let mut expected = meta.shape.clone();
                expected[dim] = match imeta.shape[..] {
                    [len] => len,
                    _ => return invalid("index must be 1-D"),
                };
                if smeta.shape != expected {
                    return invalid(format!(
                        "src {} must have shape {expected:?}",
                        describe(smeta.dtype, &smeta.shape)
                    ));
                }
            }
            expect_out(out, meta.dtype, &meta.shape)?;
            if prim == IndexingPrim::ScatterAdd {
                IndexInstr::ScatterAdd { a, index, src, dim }
            } else {
                IndexInstr::IndexAdd { a, index, src, dim }
            }
        }
    };
    Ok(Instr::Indexing(instr))
}

/// The coordinates of flat (row-major) position `flat` of `shape`, written into `coord`.
fn unravel(mut flat: usize, shape: &[usize], coord: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        let size = shape[d].max(1);
        coord[d] = flat % size;
        flat /= size;
    }
}

fn dot(coord: &[usize], strides: &[usize]) -> usize {
    coord.iter().zip(strides).map(|(c, s)| c * s).sum()
}

/// Index value `i` checked against `size`: torch refuses negative indices here too.
fn checked(i: i64, size: usize, dim: usize) -> Result<usize, String> {
    match usize::try_from(i) {
        Ok(u) if u < size => Ok(u),
        _ => Err(format!(
            "index {i} is out of bounds for dim {dim} with size {size}"
        )),
    }
}

fn index_values(l: &Lanes) -> Result<&[i64], String> {
    match l {
        Lanes::Int(v) => Ok(v),
        other => Err(format!("internal: index lanes are {:?}", other.kind())),
    }
}

/// The lanes of `parts` one after another (all of one kind).
fn concat(parts: &[&Lanes]) -> Result<Lanes, String> {
    let mismatch = || "internal: cat of lanes of different kinds".to_string();
    Ok(match parts.first() {
        Some(Lanes::Bool(_)) => Lanes::Bool(
            parts
                .iter()
                .map(|p| match p {
                    Lanes::Bool(v) => Ok(v.as_slice()),
                    _ => Err(mismatch()),
                })
                .collect::<Result<Vec<_>, _>>()?
                .concat(),
        ),
        Some(Lanes::Int(_)) => Lanes::Int(
            parts
                .iter()
                .map(|p| match p {
                    Lanes::Int(v) => Ok(v.as_slice()),
                    _ => Err(mismatch()),
                })
                .collect::<Result<Vec<_>, _>>()?
                .concat(),
        ),
        Some(Lanes::Float(_)) => Lanes::Float(
            parts
                .iter()
                .map(|p| match p {
                    Lanes::Float(v) => Ok(v.as_slice()),
                    _ => Err(mismatch()),
                })
                .collect::<Result<Vec<_>, _>>()?
                .concat(),
        ),
        None => return Err("internal: cat of nothing".into()),
    })
}

/// `out[targets[i]] += src[i]` in the lane's arithmetic (wrapping for ints, or for bools).
fn accumulate(out: &mut Lanes, src: &Lanes, targets: &[usize]) -> Result<(), String> {
    fn add<T: Copy>(
        out: &mut [T],
        src: &[T],
        targets: &[usize],
        f: impl Fn(T, T) -> T,
    ) -> Result<(), String> {
        for (&t, &s) in targets.iter().zip(src) {
            let slot = out
                .get_mut(t)
                .ok_or_else(|| format!("internal: target {t} out of range"))?;
            *slot = f(*slot, s);
        }
        Ok(())
    }
    match (out, src) {
        (Lanes::Float(o), Lanes::Float(s)) => add(o, s, targets, |a, b| a + b),
        (Lanes::Int(o), Lanes::Int(s)) => add(o, s, targets, i64::wrapping_add),
        (Lanes::Bool(o), Lanes::Bool(s)) => add(o, s, targets, |a, b| a || b),
        _ => Err("internal: src and input lanes differ".into()),
    }
}

impl IndexInstr {
    /// For `take`: the slot it gathers from (and nothing else reads from it here).
    pub(crate) fn take_source(&self) -> Option<(usize, usize)> {
        match self {
            IndexInstr::Take { a, index, .. } => Some((*a, *index)),
            _ => None,
        }
    }

    /// For `take`: the row-major positions in its source of the elements it gathers.
    pub(crate) fn take_positions<'a>(
        &self,
        lanes: &dyn Fn(usize) -> Result<&'a Lanes, String>,
        shape: &dyn Fn(usize) -> &'a [usize],
        out: &SlotMeta,
    ) -> Result<Vec<usize>, String> {
        let IndexInstr::Take { a, index, dim } = self else {
            return Err("internal: take_positions of another instruction".into());
        };
        let n = numel(&out.shape);
        let mut coord = vec![0usize; out.shape.len()];
        let in_shape = shape(*a);
        let in_strides = row_major_strides(in_shape);
        let idx = index_values(lanes(*index)?)?;
        (0..n)
            .map(|i| {
                unravel(i, &out.shape, &mut coord);
                coord[*dim] = checked(idx[coord[*dim]], in_shape[*dim], *dim)?;
                Ok(dot(&coord, &in_strides))
            })
            .collect()
    }

    pub(crate) fn reads(&self) -> Vec<usize> {
        match self {
            IndexInstr::Slice { a, .. }
            | IndexInstr::Pad { a, .. }
            | IndexInstr::Flip { a, .. } => {
                vec![*a]
            }
            IndexInstr::Cat { parts, .. } => parts.clone(),
            IndexInstr::Take { a, index, .. } | IndexInstr::TakeAlongAxis { a, index, .. } => {
                vec![*a, *index]
            }
            IndexInstr::ScatterAdd { a, index, src, .. }
            | IndexInstr::IndexAdd { a, index, src, .. } => vec![*a, *index, *src],
        }
    }

    pub(crate) fn exec<'a>(
        &self,
        lanes: &dyn Fn(usize) -> Result<&'a Lanes, String>,
        shape: &dyn Fn(usize) -> &'a [usize],
        out: &SlotMeta,
    ) -> Result<Lanes, String> {
        let n = numel(&out.shape);
        let rank = out.shape.len();
        let mut coord = vec![0usize; rank];
        match self {
            IndexInstr::Slice { a, start, strides } => {
                let in_strides = row_major_strides(shape(*a));
                let index: Vec<usize> = (0..n)
                    .map(|i| {
                        unravel(i, &out.shape, &mut coord);
                        (0..rank)
                            .map(|d| (start[d] + coord[d] * strides[d]) * in_strides[d])
                            .sum()
                    })
                    .collect();
                lanes(*a)?.gather(&index)
            }
            IndexInstr::Pad { a, value, config } => {
                let in_shape = shape(*a);
                let in_strides = row_major_strides(in_shape);
                let source = concat(&[lanes(*a)?, &Lanes::splat(*value, 1)])?;
                let fill = numel(in_shape);
                let index: Vec<usize> = (0..n)
                    .map(|i| {
                        unravel(i, &out.shape, &mut coord);
                        let mut offset = 0;
                        for d in 0..rank {
                            let (lo, _, interior) = config[d];
                            // Output position p holds input element (p - low) / (interior + 1)
                            // when that divides evenly and lands inside the input.
                            // In i128: decode only bounded the output size, not low.
                            let p = coord[d] as i128 - i128::from(lo);
                            let step = i128::from(interior) + 1;
                            if p < 0 || p % step != 0 || p / step >= in_shape[d] as i128 {
                                return fill;
                            }
                            offset += (p / step) as usize * in_strides[d];
                        }
                        offset
                    })
                    .collect();
                source.gather(&index)
            }
            IndexInstr::Cat { dim, parts } => {
                let sources: Vec<&Lanes> =
                    parts.iter().map(|&p| lanes(p)).collect::<Result<_, _>>()?;
                let source = concat(&sources)?;
                // Where each part starts in `source` and along `dim` of the output.
                let mut bases = Vec::with_capacity(parts.len());
                let (mut base, mut along) = (0usize, 0usize);
                for &p in parts {
                    let (part_shape, len) = (shape(p), shape(p)[*dim]);
                    bases.push((base, along, len, row_major_strides(part_shape)));
                    base += numel(part_shape);
                    along += len;
                }
                let index = (0..n)
                    .map(|i| {
                        unravel(i, &out.shape, &mut coord);
                        let c = coord[*dim];
                        let (base, start, _, strides) = bases
                            .iter()
                            .find(|(_, start, len, _)| *start <= c && c < start + len)
                            .ok_or_else(|| format!("internal: cat position {c} in no part"))?;
                        coord[*dim] = c - start;
                        Ok(base + dot(&coord, strides))
                    })
                    .collect::<Result<Vec<usize>, String>>()?;
                source.gather(&index)
            }
            IndexInstr::Flip { a, dims } => {
                let in_strides = row_major_strides(&out.shape);
                let index: Vec<usize> = (0..n)
                    .map(|i| {
                        unravel(i, &out.shape, &mut coord);
                        for &d in dims {
                            coord[d] = out.shape[d] - 1 - coord[d];
                        }
                        dot(&coord, &in_strides)
                    })
                    .collect();
                lanes(*a)?.gather(&index)
            }
            IndexInstr::Take { a, .. } => {
                let positions = self.take_positions(lanes, shape, out)?;
                lanes(*a)?.gather(&positions)
            }
            IndexInstr::TakeAlongAxis { a, index, dim } => {
                let in_shape = shape(*a);
                let in_strides = row_major_strides(in_shape);
                let idx = index_values(lanes(*index)?)?;
                let positions = (0..n)
                    .map(|i| {
                        unravel(i, &out.shape, &mut coord);
                        coord[*dim] = checked(idx[i], in_shape[*dim], *dim)?;
                        Ok(dot(&coord, &in_strides))
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                lanes(*a)?.gather(&positions)
            }
            IndexInstr::ScatterAdd { a, index, src, dim } => {
                // Element `c` of index (and of src, which may be larger) goes to the input
                // position `c` with `c[dim] = index[c]`.
                let out_strides = row_major_strides(&out.shape);
                let (ishape, sshape) = (shape(*index), shape(*src));
                let src_strides = row_major_strides(sshape);
                let idx = index_values(lanes(*index)?)?;
                let mut coord = vec![0usize; ishape.len()];
                let mut picks = Vec::with_capacity(idx.len());
                let mut targets = Vec::with_capacity(idx.len());
                for (i, &v) in idx.iter().enumerate() {
                    unravel(i, ishape, &mut coord);
                    picks.push(dot(&coord, &src_strides));
                    coord[*dim] = checked(v, out.shape[*dim], *dim)?;
                    targets.push(dot(&coord, &out_strides));
                }
                let mut result = lanes(*a)?.clone();
                accumulate(&mut result, &lanes(*src)?.gather(&picks)?, &targets)?;
                Ok(result)
            }
            IndexInstr::IndexAdd { a, index, src, dim } => {
                let out_strides = row_major_strides(&out.shape);
                let sshape = shape(*src);
                let idx = index_values(lanes(*index)?)?;
                let size = out.shape[*dim];
                // Check every index first so nothing is half-applied on error.
                let rows = idx
                    .iter()
                    .map(|&v| checked(v, size, *dim))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut coord = vec![0usize; sshape.len()];
                let targets: Vec<usize> = (0..numel(sshape))
                    .map(|i| {
                        unravel(i, sshape, &mut coord);
                        coord[*dim] = rows[coord[*dim]];
                        dot(&coord, &out_strides)
                    })
                    .collect();
                let mut result = lanes(*a)?.clone();
                accumulate(&mut result, lanes(*src)?, &targets)?;
                Ok(result)
            }
        }
    }
}
