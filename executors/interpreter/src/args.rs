//! Reading an op's positional arguments for `decode`: typed access to literals and to the
//! tensors defined so far in the region, with the errors compile reports.

use crate::data::{describe, Scalar};
use std::collections::HashMap;
use thunder_abi::{ArgView, DTypeCode, PluginError};

/// Dtype and shape of a value slot, fixed at compile time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SlotMeta {
    pub(crate) dtype: DTypeCode,
    pub(crate) shape: Vec<usize>,
}

/// Why an op cannot be compiled: something this interpreter does not do, or a malformed op.
#[derive(Debug)]
pub(crate) enum DecodeError {
    Unsupported(String),
    Invalid(String),
}

impl DecodeError {
    pub(crate) fn into_plugin(self, prim: &str) -> PluginError {
        match self {
            DecodeError::Unsupported(m) => PluginError::unsupported(format!("{prim}: {m}")),
            DecodeError::Invalid(m) => PluginError::invalid(format!("{prim}: {m}")),
        }
    }
}

pub(crate) fn invalid<T>(message: impl Into<String>) -> Result<T, DecodeError> {
    Err(DecodeError::Invalid(message.into()))
}

pub(crate) fn unsupported<T>(message: impl Into<String>) -> Result<T, DecodeError> {
    Err(DecodeError::Unsupported(message.into()))
}

/// The values defined so far in a region: trace value id to slot, and each slot's metadata.
#[derive(Default)]
pub(crate) struct Env {
    pub(crate) slots: HashMap<u32, usize>,
    pub(crate) metas: Vec<SlotMeta>,
}

impl Env {
    pub(crate) fn tensor(
        &self,
        args: &[ArgView],
        i: usize,
    ) -> Result<(usize, &SlotMeta), DecodeError> {
        match args.get(i) {
            Some(ArgView::Value(v)) => match self.slots.get(v) {
                Some(&slot) => Ok((slot, &self.metas[slot])),
                None => invalid(format!(
                    "argument {i} reads value {v}, which the region has not defined yet"
                )),
            },
            other => invalid(format!("argument {i} must be a tensor, got {other:?}")),
        }
    }

    pub(crate) fn operand(
        &self,
        args: &[ArgView],
        i: usize,
    ) -> Result<TensorOrScalar<'_>, DecodeError> {
        match args.get(i) {
            Some(ArgView::Value(_)) => self
                .tensor(args, i)
                .map(|(slot, meta)| TensorOrScalar::Tensor(slot, meta)),
            Some(ArgView::Int(v)) => Ok(TensorOrScalar::Scalar(Scalar::Int(*v))),
            Some(ArgView::Float(v)) => Ok(TensorOrScalar::Scalar(Scalar::Float(*v))),
            Some(ArgView::Bool(v)) => Ok(TensorOrScalar::Scalar(Scalar::Bool(*v))),
            other => invalid(format!(
                "argument {i} must be a tensor or a number, got {other:?}"
            )),
        }
    }
}

pub(crate) enum TensorOrScalar<'a> {
    Tensor(usize, &'a SlotMeta),
    Scalar(Scalar),
}

pub(crate) fn arity(args: &[ArgView], n: usize) -> Result<(), DecodeError> {
    if args.len() != n {
        return invalid(format!("expected {n} arguments, got {}", args.len()));
    }
    Ok(())
}

pub(crate) fn expect_out(
    out: &SlotMeta,
    dtype: DTypeCode,
    shape: &[usize],
) -> Result<(), DecodeError> {
    if out.dtype != dtype || out.shape != shape {
        return invalid(format!(
            "the trace declares output {} but the arguments give {}",
            describe(out.dtype, &out.shape),
            describe(dtype, shape)
        ));
    }
    Ok(())
}

fn ints<'a>(args: &'a [ArgView], i: usize, what: &str) -> Result<&'a [i64], DecodeError> {
    match args.get(i) {
        Some(ArgView::Ints(v)) => Ok(v.as_slice()),
        other => invalid(format!(
            "argument {i} ({what}) must be a list of ints, got {other:?}"
        )),
    }
}

pub(crate) fn shape_arg(args: &[ArgView], i: usize) -> Result<Vec<usize>, DecodeError> {
    let shape = ints(args, i, "shape")?;
    shape
        .iter()
        .map(|&d| {
            usize::try_from(d).or_else(|_| invalid(format!("shape {shape:?} has a negative dim")))
        })
        .collect()
}

/// Distinct dims in `[0, rank)`; negative dims are refused rather than wrapped, since prims
/// are emitted with canonical dims and a negative one means a bug upstream.
pub(crate) fn dims_arg(
    args: &[ArgView],
    i: usize,
    what: &str,
    rank: usize,
) -> Result<Vec<usize>, DecodeError> {
    let dims = ints(args, i, what)?;
    let mut seen = vec![false; rank];
    dims.iter()
        .map(
            |&d| match usize::try_from(d).ok().filter(|&d| d < rank && !seen[d]) {
                Some(d) => {
                    seen[d] = true;
                    Ok(d)
                }
                None => invalid(format!(
                    "{what} {dims:?} must be distinct and in [0, {rank})"
                )),
            },
        )
        .collect()
}
