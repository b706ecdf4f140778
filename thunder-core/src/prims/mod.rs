//! Primitives: the [`Prim`] table lives in `thunder-abi` (executors match on it too); here are
//! the host's rules for each prim. `meta` checks inputs and computes output types.

pub mod meta;

pub use thunder_abi::prims::*;

use crate::error::Result;
use crate::ir::{prim_symbol, Arg};
use crate::tensor::Tensor;
use crate::trace_ctx::bind1;

/// Records a prim with one output in the current trace.
pub fn prim1(prim: Prim, args: Vec<Arg>) -> Result<Tensor> {
    bind1(prim_symbol(prim), args)
}
