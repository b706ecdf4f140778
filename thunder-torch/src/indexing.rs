//! Indexing and joining ops with torch's names and semantics: cat, stack, split, chunk,
//! narrow, slice (`x[:, a:b:c]`), index_select, gather, scatter_add, index_add, embedding,
//! flip and `F.pad` (constant mode). They decompose into the slice, pad, cat, flip, take,
//! take_along_axis, scatter_add and index_add prims.
//!
//! Tensor lists (cat, stack) are written as variadic tensor arguments after the dim,
//! `ltorch.cat(0, a, b)`, because trace arguments have no list-of-tensors kind.

use crate::{call, call1, CallArgs};
use thunder_core::clang;
use thunder_core::dtype::{self, DType};
use thunder_core::error::{bail_op, Error, Result};
use thunder_core::ir::{Arg, ShapeDisplay};
use thunder_core::prims::{prim1, Prim};
use thunder_core::tensor::Tensor;

fn v(t: &Tensor) -> Arg {
    Arg::Value(t.value())
}

/// The tensors from argument `from` on (the variadic tail of cat and stack).
fn tensors_from(c: &CallArgs, from: usize) -> Result<Vec<Tensor>> {
    if c.args.len() <= from {
        bail_op!(c.op, "expected at least one tensor after the dim");
    }
    (from..c.args.len()).map(|i| c.tensor(i)).collect()
}

/// torch accepts int32 and int64 indices, and no other dtype.
fn require_index(op: &str, index: &Tensor, what: &str, allowed: &[DType]) -> Result<()> {
    if !allowed.contains(&index.dtype()) {
        let names: Vec<&str> = allowed.iter().map(|d| d.short_name()).collect();
        bail_op!(
            op,
            "{what} must have dtype {}, got {}",
            names.join(" or "),
            index.dtype().short_name()
        );
    }
    Ok(())
}

const I32_I64: &[DType] = &[DType::I32, DType::I64];

pub(crate) fn cat_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    let dim = c.int(0)?;
    let all = tensors_from(c, 1)?;
    // As torch: 1-D empty tensors are skipped when the others have another rank (legacy).
    let ranked: Vec<&Tensor> = all
        .iter()
        .filter(|t| !(t.shape() == [0] && all.iter().any(|o| o.rank() != 1)))
        .collect();
    let Some(first) = ranked.first() else {
        // Only 1-D empties of other ranks cannot happen; all are 1-D empties then.
        return Ok(vec![all[0].clone()]);
    };
    if let Some(i) = ranked.iter().position(|t| t.rank() == 0) {
        bail_op!(
            c.op,
            "zero-dimensional tensor (at position {i}) cannot be concatenated"
        );
    }
    let dim = clang::canonical_dim(c.op, dim, first.rank())?;
    let result = all
        .iter()
        .map(|t| t.dtype())
        .reduce(dtype::promote_types)
        .unwrap_or(first.dtype());
    let parts = ranked
        .iter()
        .map(|t| clang::convert(t, result))
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![clang::cat(&parts, dim)?])
}

/// `torch.cat(tensors, dim)`.
pub fn cat(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let mut args = vec![Arg::Int(dim)];
    args.extend(tensors.iter().map(v));
    call1("ltorch.cat", args)
}

pub(crate) fn stack_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    let tensors = tensors_from(c, 1)?;
    let first = &tensors[0];
    for (i, t) in tensors.iter().enumerate() {
        if t.shape() != first.shape() {
            bail_op!(
                c.op,
                "expects each tensor to be equal size, but got {} at entry 0 and {} at entry {i}",
                ShapeDisplay(first.shape()),
                ShapeDisplay(t.shape())
            );
        }
    }
    let dim = clang::canonical_dim(c.op, c.int(0)?, first.rank() + 1)?;
    let result = tensors
        .iter()
        .map(|t| t.dtype())
        .reduce(dtype::promote_types)
        .unwrap_or(first.dtype());
    let mut shape = first.shape().to_vec();
    shape.insert(dim, 1);
    let parts = tensors
        .iter()
        .map(|t| clang::reshape(&clang::convert(t, result)?, shape.clone()))
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![clang::cat(&parts, dim)?])
}

/// `torch.stack(tensors, dim)`.
pub fn stack(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let mut args = vec![Arg::Int(dim)];
    args.extend(tensors.iter().map(v));
    call1("ltorch.stack", args)
}

/// Splits dim `dim` of `a` into consecutive pieces of the given sizes (which sum to its size).
fn split_by(a: &Tensor, dim: usize, sizes: &[i64]) -> Result<Vec<Tensor>> {
    let mut start = 0;
    sizes
        .iter()
        .map(|&n| {
            let piece = clang::slice_in_dim(a, dim, start, start + n, 1);
            start += n;
            piece
        })
        .collect()
}

fn nonzero_rank(op: &str, a: &Tensor) -> Result<()> {
    if a.rank() == 0 {
        bail_op!(
            op,
            "expects a tensor of at least one dimension, got a 0-d tensor"
        );
    }
    Ok(())
}

pub(crate) fn split_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    nonzero_rank(c.op, &a)?;
    let dim = clang::canonical_dim(c.op, c.int(2)?, a.rank())?;
    let size = a.shape()[dim];
    let sizes = match &c.args[1] {
        Arg::Int(s) => {
            let s = *s;
            if s < 0 || (s == 0 && size != 0) {
                bail_op!(
                    c.op,
                    "split_size must be positive (0 only for a dim of size 0), got {s} for dim {dim} of size {size}"
                );
            }
            if size == 0 {
                vec![0]
            } else {
                let n = (size - 1) / s + 1;
                (0..n).map(|i| s.min(size - i * s)).collect()
            }
        }
        Arg::Ints(sizes) => {
            if let Some(bad) = sizes.iter().find(|&&s| s < 0) {
                bail_op!(c.op, "split_sizes {sizes:?} has a negative size {bad}");
            }
            if sizes.iter().sum::<i64>() != size {
                bail_op!(
                    c.op,
                    "split_sizes {sizes:?} must sum exactly to {size} (dim {dim} of {})",
                    ShapeDisplay(a.shape())
                );
            }
            sizes.clone()
        }
        other => bail_op!(
            c.op,
            "argument 1 (split_size_or_sections) must be an int or a list of ints, got {other:?}"
        ),
    };
    split_by(&a, dim, &sizes)
}

/// What `split` cuts: pieces of one size (the last may be smaller), or the listed sizes.
#[derive(Debug, Clone)]
pub enum SplitSize {
    Size(i64),
    Sizes(Vec<i64>),
}

impl From<i64> for SplitSize {
    fn from(s: i64) -> Self {
        SplitSize::Size(s)
    }
}

impl From<&[i64]> for SplitSize {
    fn from(s: &[i64]) -> Self {
        SplitSize::Sizes(s.to_vec())
    }
}

impl<const N: usize> From<[i64; N]> for SplitSize {
    fn from(s: [i64; N]) -> Self {
        SplitSize::Sizes(s.to_vec())
    }
}

impl From<Vec<i64>> for SplitSize {
    fn from(s: Vec<i64>) -> Self {
        SplitSize::Sizes(s)
    }
}

/// `torch.split(a, split_size_or_sections, dim)`.
pub fn split(a: &Tensor, split: impl Into<SplitSize>, dim: i64) -> Result<Vec<Tensor>> {
    let sizes = match split.into() {
        SplitSize::Size(s) => Arg::Int(s),
        SplitSize::Sizes(s) => Arg::Ints(s),
    };
    call("ltorch.split", vec![v(a), sizes, Arg::Int(dim)])
}

pub(crate) fn chunk_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    nonzero_rank(c.op, &a)?;
    let chunks = c.int(1)?;
    if chunks <= 0 {
        bail_op!(c.op, "chunks must be greater than 0, got {chunks}");
    }
    let dim = clang::canonical_dim(c.op, c.int(2)?, a.rank())?;
    let size = a.shape()[dim];
    let each = if size == 0 {
        0
    } else {
        (size - 1) / chunks + 1
    };
    // As torch: an empty dim gives `chunks` empty pieces, otherwise ceil-sized pieces (maybe
    // fewer than `chunks`).
    let sizes: Vec<i64> = if each == 0 {
        vec![0; chunks as usize]
    } else {
        let n = (size - 1) / each + 1;
        (0..n).map(|i| each.min(size - i * each)).collect()
    };
    split_by(&a, dim, &sizes)
}

/// The VJP of `split` and `chunk` (the dim is argument 2 of both): the pieces' cotangents
/// concatenated back along the dim (zeros for a piece with none), so each is written once into
/// its place. Differentiating the decomposition instead pads every piece to the full size and
/// adds the padded copies.
pub(crate) fn pieces_vjp(
    args: &[Arg],
    outs: &[Tensor],
    cots: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    let mut grads = vec![None; args.len()];
    if cots.iter().all(Option::is_none) {
        return Ok(grads);
    }
    let (Some(Arg::Int(dim)), Some(first)) = (args.get(2), outs.first()) else {
        return Err(Error::Bug("split/chunk VJP: bad arguments".into()));
    };
    let dim = clang::canonical_dim("split/chunk VJP", *dim, first.rank())?;
    let parts = outs
        .iter()
        .zip(cots)
        .map(|(out, cot)| match cot {
            Some(g) => Ok(g.clone()),
            None => clang::full(
                out.shape().to_vec(),
                Arg::Float(0.0),
                out.device(),
                out.dtype(),
            ),
        })
        .collect::<Result<Vec<_>>>()?;
    grads[0] = Some(clang::cat(&parts, dim)?);
    Ok(grads)
}

/// `torch.chunk(a, chunks, dim)`.
pub fn chunk(a: &Tensor, chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
    call("ltorch.chunk", vec![v(a), Arg::Int(chunks), Arg::Int(dim)])
}

pub(crate) fn narrow_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    nonzero_rank(c.op, &a)?;
    let dim = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let (start, length) = (c.int(2)?, c.int(3)?);
    let size = a.shape()[dim];
    if start < -size || start > size {
        bail_op!(
            c.op,
            "start ({start}) out of range for dim {dim} of size {size} (expected [{}, {size}])",
            -size
        );
    }
    let start = if start < 0 { start + size } else { start };
    if length < 0 || length > size - start {
        bail_op!(
            c.op,
            "start ({start}) + length ({length}) exceeds dimension size ({size}) or length is negative"
        );
    }
    Ok(vec![clang::slice_in_dim(
        &a,
        dim,
        start,
        start + length,
        1,
    )?])
}

/// `torch.narrow(a, dim, start, length)`.
pub fn narrow(a: &Tensor, dim: i64, start: i64, length: i64) -> Result<Tensor> {
    call1(
        "ltorch.narrow",
        vec![v(a), Arg::Int(dim), Arg::Int(start), Arg::Int(length)],
    )
}

fn opt_int(c: &CallArgs, i: usize) -> Result<Option<i64>> {
    match c.args.get(i) {
        Some(Arg::None) => Ok(None),
        _ => c.int(i).map(Some),
    }
}

pub(crate) fn slice_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let a = c.tensor(0)?;
    if a.rank() == 0 {
        bail_op!(c.op, "cannot be applied to a 0-dim tensor");
    }
    let dim = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let step = c.int(4)?;
    if step <= 0 {
        bail_op!(c.op, "step must be positive, got {step}");
    }
    let size = a.shape()[dim];
    // As Python slicing: negative bounds count from the end, then clamp to [0, size].
    let norm = |x: i64| (if x < 0 { x + size } else { x }).clamp(0, size);
    let start = opt_int(c, 2)?.map_or(0, norm);
    let end = opt_int(c, 3)?.map_or(size, norm).max(start);
    Ok(vec![clang::slice_in_dim(&a, dim, start, end, step)?])
}

/// `a[..., start:end:step]` along `dim` (`None` bounds are the ends, negative ones count from
/// the end, out-of-range ones clamp), as torch's `aten.slice`.
pub fn slice(
    a: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    let opt = |x: Option<i64>| x.map_or(Arg::None, Arg::Int);
    call1(
        "ltorch.slice",
        vec![v(a), Arg::Int(dim), opt(start), opt(end), Arg::Int(step)],
    )
}

pub(crate) fn index_select_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let index = c.tensor(2)?;
    require_index(c.op, &index, "index (argument 2)", I32_I64)?;
    if index.rank() > 1 {
        bail_op!(
            c.op,
            "index (argument 2) must be 0-d or 1-D, got shape {}",
            ShapeDisplay(index.shape())
        );
    }
    let dim = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    // A 0-d input is taken as [1] and a 0-d index as [1], as torch does.
    let x = clang::reshape(
        &a,
        if a.rank() == 0 {
            vec![1]
        } else {
            a.shape().to_vec()
        },
    )?;
    let idx = clang::reshape(&index, vec![index.numel() as i64])?;
    let out = clang::take(&x, &idx, dim)?;
    let shape = if a.rank() == 0 {
        Vec::new()
    } else {
        out.shape().to_vec()
    };
    Ok(vec![clang::reshape(&out, shape)?])
}

/// `torch.index_select(a, dim, index)`.
pub fn index_select(a: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    call1("ltorch.index_select", vec![v(a), Arg::Int(dim), v(index)])
}

/// A 0-d tensor as [1], for prims that want a dim to index.
fn at_least_1d(t: &Tensor) -> Result<Tensor> {
    if t.rank() == 0 {
        clang::reshape(t, vec![1])
    } else {
        Ok(t.clone())
    }
}

fn same_rank(op: &str, a: &Tensor, index: &Tensor) -> Result<()> {
    if a.rank() != index.rank() {
        bail_op!(
            op,
            "index (argument 2) must have as many dims as the input: {} vs {}",
            ShapeDisplay(index.shape()),
            ShapeDisplay(a.shape())
        );
    }
    Ok(())
}

pub(crate) fn gather_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let a = c.tensor(0)?;
    let index = c.tensor(2)?;
    require_index(c.op, &index, "index (argument 2)", I32_I64)?;
    same_rank(c.op, &a, &index)?;
    let dim = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let out = clang::take_along_axis(&at_least_1d(&a)?, &at_least_1d(&index)?, dim)?;
    Ok(vec![clang::reshape(&out, index.shape().to_vec())?])
}

/// `torch.gather(a, dim, index)`.
pub fn gather(a: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    call1("ltorch.gather", vec![v(a), Arg::Int(dim), v(index)])
}

pub(crate) fn scatter_add_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    let index = c.tensor(2)?;
    let src = c.tensor(3)?;
    require_index(c.op, &index, "index (argument 2)", I32_I64)?;
    same_rank(c.op, &a, &index)?;
    let dim = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let out = clang::scatter_add(
        &at_least_1d(&a)?,
        &at_least_1d(&index)?,
        &at_least_1d(&src)?,
        dim,
    )?;
    Ok(vec![clang::reshape(&out, a.shape().to_vec())?])
}

/// `torch.scatter_add(a, dim, index, src)`.
pub fn scatter_add(a: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    call1(
        "ltorch.scatter_add",
        vec![v(a), Arg::Int(dim), v(index), v(src)],
    )
}

pub(crate) fn index_add_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(5)?;
    let a = c.tensor(0)?;
    let index = c.tensor(2)?;
    let source = c.tensor(3)?;
    require_index(c.op, &index, "index (argument 2)", I32_I64)?;
    if index.rank() > 1 {
        bail_op!(
            c.op,
            "index (argument 2) must be 0-d or 1-D, got shape {}",
            ShapeDisplay(index.shape())
        );
    }
    let dim = clang::canonical_dim(c.op, c.int(1)?, a.rank())?;
    let alpha = c.number(4)?;
    let source = match alpha {
        Arg::Int(1) => source,
        Arg::Float(1.0) => source,
        Arg::Float(_) if !dtype::is_float(a.dtype()) => bail_op!(
            c.op,
            "alpha (argument 4) must not be a floating point number for {} input",
            a.dtype().short_name()
        ),
        alpha => clang::convert(
            &crate::mul(&source, clang::Operand::from_arg(c.op, &alpha)?)?,
            source.dtype(),
        )?,
    };
    let x = at_least_1d(&a)?;
    let idx = clang::reshape(&index, vec![index.numel() as i64])?;
    let src = if source.rank() == 0 {
        clang::reshape(&source, vec![1])?
    } else {
        source
    };
    let out = clang::index_add(&x, &idx, &src, dim)?;
    Ok(vec![clang::reshape(&out, a.shape().to_vec())?])
}

/// `torch.index_add(a, dim, index, source, alpha=alpha)`.
pub fn index_add(
    a: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: impl Into<clang::Operand>,
) -> Result<Tensor> {
    let alpha = alpha.into().to_arg();
    call1(
        "ltorch.index_add",
        vec![v(a), Arg::Int(dim), v(index), v(source), alpha],
    )
}

pub(crate) fn embedding_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let input = c.tensor(0)?;
    let weight = c.tensor(1)?;
    require_index(c.op, &input, "input (argument 0)", I32_I64)?;
    if weight.rank() != 2 {
        bail_op!(
            c.op,
            "weight (argument 1) must be 2-D, got shape {}",
            ShapeDisplay(weight.shape())
        );
    }
    embedding_padding_idx(c.op, &c.args[2], &weight)?;
    let flat = clang::reshape(&input, vec![input.numel() as i64])?;
    let rows = clang::take(&weight, &flat, 0)?;
    let mut shape = input.shape().to_vec();
    shape.push(weight.shape()[1]);
    Ok(vec![clang::reshape(&rows, shape)?])
}

/// The canonical padding row, if any (negative counts from the end, as torch).
fn embedding_padding_idx(op: &str, arg: &Arg, weight: &Tensor) -> Result<Option<i64>> {
    let n = weight.shape().first().copied().unwrap_or(0);
    match arg {
        Arg::None => Ok(None),
        Arg::Int(p) if (-n..n).contains(p) => Ok(Some(if *p < 0 { p + n } else { *p })),
        Arg::Int(p) => bail_op!(
            op,
            "padding_idx (argument 2) must be within num_embeddings ({n}), got {p}"
        ),
        other => bail_op!(
            op,
            "padding_idx (argument 2) must be an int or None, got {other:?}"
        ),
    }
}

/// `F.embedding(input, weight, padding_idx)`: rows of `weight` picked by `input`; the row
/// `padding_idx` gets no gradient.
pub fn embedding(input: &Tensor, weight: &Tensor, padding_idx: Option<i64>) -> Result<Tensor> {
    call1(
        "ltorch.embedding",
        vec![v(input), v(weight), padding_idx.map_or(Arg::None, Arg::Int)],
    )
}

/// The gradient of `ltorch.embedding`: the cotangent rows scatter-added into zeros, except
/// those that came from `padding_idx` (torch keeps that row's gradient at zero).
pub(crate) fn embedding_vjp(
    args: &[Arg],
    _outs: &[Tensor],
    cots: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>> {
    let Some(Some(g)) = cots.first() else {
        return Ok(vec![None; args.len()]);
    };
    let tensor = |i: usize| {
        args.get(i)
            .and_then(Arg::as_value)
            .ok_or_else(|| Error::Bug("ltorch.embedding: bad arguments".into()))
            .and_then(thunder_core::trace_ctx::tensor_of)
    };
    let (input, weight) = (tensor(0)?, tensor(1)?);
    if !dtype::is_float(weight.dtype()) {
        return Ok(vec![None, None, None]);
    }
    let padding = embedding_padding_idx("ltorch.embedding", &args[2], &weight)?;
    let (n, d) = (input.numel() as i64, weight.shape()[1]);
    let flat = clang::reshape(&input, vec![n])?;
    let mut rows = clang::reshape(g, vec![n, d])?;
    if let Some(p) = padding {
        let keep = prim1(Prim::Ne, vec![v(&flat), Arg::Int(p)])?;
        let keep = clang::broadcast_in_dim(&keep, vec![n, d], vec![0])?;
        rows = prim1(Prim::Where, vec![v(&keep), v(&rows), Arg::Float(0.0)])?;
    }
    let zeros = clang::full(
        weight.shape().to_vec(),
        Arg::Float(0.0),
        weight.device(),
        g.dtype(),
    )?;
    Ok(vec![
        None,
        Some(clang::index_add(&zeros, &flat, &rows, 0)?),
        None,
    ])
}

pub(crate) fn flip_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let a = c.tensor(0)?;
    let mut dims = Vec::new();
    for d in c.ints(1)? {
        let d = clang::canonical_dim(c.op, d, a.rank())? as i64;
        if dims.contains(&d) {
            bail_op!(c.op, "dims {:?} has duplicates", c.ints(1)?);
        }
        dims.push(d);
    }
    if a.rank() == 0 {
        return Ok(vec![a]);
    }
    Ok(vec![clang::flip(&a, dims)?])
}

/// `torch.flip(a, dims)`.
pub fn flip(a: &Tensor, dims: &[i64]) -> Result<Tensor> {
    call1("ltorch.flip", vec![v(a), Arg::Ints(dims.to_vec())])
}

/// The padding value as a literal of `dtype`, converted as torch's fill does (a float fill of
/// an integer tensor truncates; of a bool tensor, nonzero is true).
fn fill_literal(op: &str, value: &Arg, dtype: DType) -> Result<Arg> {
    let x = match value {
        Arg::Float(x) => *x,
        Arg::Int(i) => *i as f64,
        Arg::Bool(b) => f64::from(u8::from(*b)),
        other => bail_op!(op, "value (argument 3) must be a number, got {other:?}"),
    };
    Ok(match (dtype::category(dtype), value) {
        (dtype::Category::Float, _) => Arg::Float(x),
        (dtype::Category::Bool, _) => Arg::Bool(x != 0.0),
        (dtype::Category::Int, Arg::Int(i)) => Arg::Int(dtype::wrap_int(*i, dtype)),
        (dtype::Category::Int, _) => {
            let t = x.trunc();
            match dtype::int_range(dtype) {
                Some((lo, hi)) if t >= lo as f64 && t <= hi as f64 => Arg::Int(t as i64),
                _ => bail_op!(
                    op,
                    "value (argument 3) {x} does not fit dtype {}",
                    dtype.short_name()
                ),
            }
        }
    })
}

pub(crate) fn pad_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(4)?;
    let a = c.tensor(0)?;
    let pad = c.ints(1)?;
    let mode = c.str(2)?;
    if mode != "constant" {
        bail_op!(
            c.op,
            "mode (argument 2) \"{mode}\" is not supported (only \"constant\")"
        );
    }
    if pad.len() % 2 != 0 || pad.len() / 2 > a.rank() {
        bail_op!(
            c.op,
            "pad (argument 1) {pad:?} must have an even length of at most twice the rank ({})",
            a.rank()
        );
    }
    // `value=None` (torch's default) pads with zeros.
    let value = match &c.args[3] {
        Arg::None => fill_literal(c.op, &Arg::Int(0), a.dtype())?,
        v => fill_literal(c.op, v, a.dtype())?,
    };
    // torch lists (left, right) pairs from the last dim backwards.
    let mut config = vec![0i64; 3 * a.rank()];
    for (i, pair) in pad.chunks(2).enumerate() {
        let d = a.rank() - 1 - i;
        config[3 * d] = pair[0];
        config[3 * d + 1] = pair[1];
    }
    for d in 0..a.rank() {
        let n =
            i128::from(a.shape()[d]) + i128::from(config[3 * d]) + i128::from(config[3 * d + 1]);
        if n < 0 {
            bail_op!(
                c.op,
                "pad (argument 1) {pad:?} would make dim {d} of {} negative ({n})",
                ShapeDisplay(a.shape())
            );
        }
    }
    Ok(vec![clang::pad(&a, value, config)?])
}

/// `F.pad(a, pad, mode="constant", value)`.
pub fn pad(a: &Tensor, pad: &[i64], value: impl Into<clang::Operand>) -> Result<Tensor> {
    call1(
        "ltorch.pad",
        vec![
            v(a),
            Arg::Ints(pad.to_vec()),
            Arg::Str("constant".into()),
            value.into().to_arg(),
        ],
    )
}
