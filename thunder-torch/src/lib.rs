//! ltorch, the torch language of thunder-rs: user-facing ops with torch names, signatures and
//! semantics. Every op is a composite symbol whose decomposition (clang and other ltorch ops)
//! is traced into its subsymbols. thunder-core knows none of them: this crate registers its
//! table with core's symbol registry ([`register`]; every function here does it on first use),
//! and the trace parser, printer and autograd find each op's signature and own VJP there.
//!
//! The table below is the one place that lists the ops: `ltorch.<name>` maps to its
//! decomposition function in the module that owns it and its declared signature; [`OWN_VJPS`]
//! names the few composites with their own gradient rule.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

mod activations;
mod attention;
mod conv;
mod cross_entropy;
mod declaration;
mod einsum;
mod elementwise;
mod factory;
mod indexing;
mod linalg;
mod nn;
mod norm;
pub mod optim;
mod ordering;
mod random;
mod reduction;
mod shape;
mod tensor_api;
mod vjp;

pub use activations::*;
pub use attention::*;
pub use conv::*;
pub use cross_entropy::{cross_entropy_bwd, cross_entropy_lse};
pub use einsum::{einsum, einsum_of, EinsumError};
pub use elementwise::*;
pub use factory::*;
pub use indexing::*;
pub use linalg::*;
pub use nn::*;
pub use norm::*;
pub use ordering::*;
pub use random::*;
pub use reduction::*;
pub use shape::*;
pub use tensor_api::{IndexingMethods, TensorMethods};
pub use thunder_core::ir::{CallArgs, CallError, Given, Signature};

use std::sync::{Once, OnceLock};
use thunder_core::error::{Error, Result};
use thunder_core::ir::{lookup_symbol, register_library, Arg, CompositeVjp, Symbol, SymbolKind};
use thunder_core::tensor::Tensor;
use thunder_core::trace_ctx::bind;

/// The methods on [`Tensor`] (`x.softmax(-1)`, `x.exp()`, ...): `use thunder_torch::prelude::*`.
pub mod prelude {
    pub use crate::{BinaryMethods, IndexingMethods, RoundingMethods, TensorMethods, UnaryMethods};
    pub use thunder_core::Tensor;
}

/// Composites with their own rule: differentiating through their decomposition would not give
/// torch's gradient (relu is `maximum(x, 0)`, whose tie rule would send half the cotangent
/// through at 0; torch sends none), or would be wasteful (embedding's one-hot, attention's saved
/// T x T probabilities, split's padded copies of each piece's gradient, softmax's and
/// log_softmax's gradient through their row maximum, which is zero).
pub const OWN_VJPS: &[(&str, CompositeVjp)] = &[
    ("ltorch.relu", vjp::relu),
    ("ltorch.softmax", vjp::softmax),
    ("ltorch.log_softmax", vjp::log_softmax),
    ("ltorch.embedding", indexing::embedding_vjp),
    ("ltorch.sdpa_fwd_lse", attention::sdpa_fwd_lse_vjp),
    ("ltorch.split", indexing::pieces_vjp),
    ("ltorch.chunk", indexing::pieces_vjp),
    (
        "ltorch.cross_entropy_lse",
        cross_entropy::cross_entropy_lse_vjp,
    ),
];

/// Adds the ltorch ops to thunder-core's symbol registry, once per process. Every function of
/// this crate calls it; a program that parses trace text before calling any (the CLI, a test)
/// calls it first.
pub fn register() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        if let Err(e) = register_library(symbols()) {
            // Only a prim or a plugin op taking an ltorch id can cause it: a bug, not input.
            tracing::error!("registering the ltorch ops: {e}");
        }
    });
}

/// Parses trace text written in the torch language (`ltorch.*` calls, prims, plugin ops):
/// [`thunder_core::text::parse_trace`] with the ltorch ops registered first.
pub fn parse_trace(text: &str) -> Result<thunder_core::ir::Trace> {
    register();
    thunder_core::text::parse_trace(text)
}

/// [`parse_trace`] with the inputs' types given rather than annotated.
pub fn parse_trace_with(
    text: &str,
    given: &std::collections::HashMap<String, thunder_core::ir::TensorType>,
) -> Result<thunder_core::ir::Trace> {
    register();
    thunder_core::text::parse_trace_with(text, given)
}

macro_rules! ltorch_table {
    ($( $name:literal => $decomposition:path, $signature:literal ),* $(,)?) => {
        /// Every ltorch symbol: the table's rows, then the one-prim ops' rows, each with its
        /// signature and (in [`OWN_VJPS`]) its own VJP.
        pub fn symbols() -> &'static [Symbol] {
            static SYMBOLS: OnceLock<Vec<Symbol>> = OnceLock::new();
            SYMBOLS.get_or_init(|| {
                let rows = [$( (concat!("ltorch.", $name), $decomposition as thunder_core::ir::Decomposition) ),*];
                // The one-prim ops declare themselves, one row each (`elementwise.rs`).
                rows.into_iter()
                    .chain(elementwise::prim_ops().map(|op| (op.id, op.rule)))
                    .map(|(id, rule)| Symbol {
                        id,
                        kind: SymbolKind::Composite(rule),
                        tags: &[],
                        signature: signature(id),
                        vjp: OWN_VJPS.iter().find(|(v, _)| *v == id).map(|(_, f)| *f),
                    })
                    .collect()
            })
        }

        /// Every ltorch op's declared signature, by symbol id: the table's rows, then the
        /// one-prim ops' (`input`, or `input, other` for binary ones).
        fn declarations() -> Vec<(&'static str, &'static str)> {
            let mut out = vec![$( (concat!("ltorch.", $name), $signature) ),*];
            out.extend(elementwise::prim_ops().map(|op| (op.id, prim_op_signature(op))));
            out
        }
    };
}

fn prim_op_signature(op: &PrimOp) -> &'static str {
    match op.form {
        PrimOpForm::Binary(_) if op.id == "ltorch.pow" => {
            "input: Tensor|number, exponent: Tensor|number"
        }
        PrimOpForm::Binary(_) => "input: Tensor|number, other: Tensor|number",
        PrimOpForm::Unary(_) | PrimOpForm::Rounding => "input: Tensor",
    }
}

/// The signature of the ltorch op `id` (`ltorch.softmax`), as declared in the op table.
pub fn signature(id: &str) -> Option<&'static Signature> {
    signatures().iter().find(|s| s.op == id)
}

/// Every ltorch op's signature, in table order. A declaration that does not parse is a bug
/// in the table; it is logged and its op is left without a signature (called positionally).
pub fn signatures() -> &'static [Signature] {
    static SIGS: OnceLock<Vec<Signature>> = OnceLock::new();
    SIGS.get_or_init(|| {
        declarations()
            .into_iter()
            .filter_map(|(id, text)| match declaration::parse_signature(id, text) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::error!("{e}");
                    None
                }
            })
            .collect()
    })
}

ltorch_table! {
    "sign" => elementwise::sign_rule, "input: Tensor",
    "signbit" => elementwise::signbit_rule, "input: Tensor",
    "isnan" => elementwise::isnan_rule, "input: Tensor",
    "isfinite" => elementwise::isfinite_rule, "input: Tensor",
    "logical_not" => elementwise::logical_not_rule, "input: Tensor",
    "bitwise_not" => elementwise::bitwise_not_rule, "input: Tensor",
    "bitwise_and" => elementwise::bitwise_and_rule, "input: Tensor|number, other: Tensor|number",
    "bitwise_or" => elementwise::bitwise_or_rule, "input: Tensor|number, other: Tensor|number",
    "bitwise_xor" => elementwise::bitwise_xor_rule, "input: Tensor|number, other: Tensor|number",
    "bitwise_left_shift" => elementwise::bitwise_left_shift_rule, "input: Tensor|number, other: Tensor|number",
    "bitwise_right_shift" => elementwise::bitwise_right_shift_rule, "input: Tensor|number, other: Tensor|number",
    "where" => elementwise::where_rule, "condition: Tensor, input: Tensor|number, other: Tensor|number",
    "to" => elementwise::to_rule, "input: Tensor, dtype: dtype",
    "relu" => elementwise::relu_rule, "input: Tensor",
    "gelu" => elementwise::gelu_rule, "input: Tensor, approximate: str = \"none\"",
    "reshape" => shape::reshape_rule, "input: Tensor, shape: list[int]",
    "transpose" => shape::transpose_rule, "input: Tensor, dim0: int, dim1: int",
    "permute" => shape::permute_rule, "input: Tensor, dims: list[int]",
    "unsqueeze" => shape::unsqueeze_rule, "input: Tensor, dim: int",
    "expand" => shape::expand_rule, "input: Tensor, size: list[int]",
    "cat" => indexing::cat_rule, "tensors: list[Tensor], dim: int = 0",
    "einsum" => einsum::einsum_rule, "equation: str, operands: list[Tensor]",
    "stack" => indexing::stack_rule, "tensors: list[Tensor], dim: int = 0",
    "split" => indexing::split_rule, "tensor: Tensor, split_size_or_sections: int|list[int], dim: int = 0",
    "chunk" => indexing::chunk_rule, "input: Tensor, chunks: int, dim: int = 0",
    "narrow" => indexing::narrow_rule, "input: Tensor, dim: int, start: int, length: int",
    "slice" => indexing::slice_rule, "input: Tensor, dim: int = 0, start: int? = None, end: int? = None, step: int = 1",
    "index_select" => indexing::index_select_rule, "input: Tensor, dim: int, index: Tensor",
    "gather" => indexing::gather_rule, "input: Tensor, dim: int, index: Tensor",
    "scatter_add" => indexing::scatter_add_rule, "input: Tensor, dim: int, index: Tensor, src: Tensor",
    "index_add" => indexing::index_add_rule, "input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: number = 1",
    "embedding" => indexing::embedding_rule, "input: Tensor, weight: Tensor, padding_idx: int? = None",
    "flip" => indexing::flip_rule, "input: Tensor, dims: list[int]",
    "pad" => indexing::pad_rule, "input: Tensor, pad: list[int], mode: str = \"constant\", value: number? = None",
    "sum" => reduction::sum_rule, "input: Tensor, dim: list[int]? = None, keepdim: bool = False",
    "amax" => reduction::amax_rule, "input: Tensor, dim: list[int]? = None, keepdim: bool = False",
    "prod" => reduction::prod_rule, "input: Tensor, dim: int? = None, keepdim: bool = False",
    "amin" => reduction::amin_rule, "input: Tensor, dim: list[int]? = None, keepdim: bool = False",
    "max" => reduction::max_rule, "input: Tensor, dim: int? = None, keepdim: bool = False",
    "min" => reduction::min_rule, "input: Tensor, dim: int? = None, keepdim: bool = False",
    "argmax" => reduction::argmax_rule, "input: Tensor, dim: int? = None, keepdim: bool = False",
    "argmin" => reduction::argmin_rule, "input: Tensor, dim: int? = None, keepdim: bool = False",
    "var_mean" => reduction::var_mean_rule, "input: Tensor, dim: list[int]? = None, *, correction: number = 1, keepdim: bool = False",
    "cumsum" => ordering::cumsum_rule, "input: Tensor, dim: int, *, dtype: dtype? = None",
    "topk" => ordering::topk_rule, "input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True",
    "sort" => ordering::sort_rule, "input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False",
    "polygamma" => elementwise::polygamma_rule, "n: int, input: Tensor",
    "conv1d" => conv::conv1d_rule, "input: Tensor, weight: Tensor, bias: Tensor? = None, stride: int|list[int] = 1, padding: int|list[int]|str = 0, dilation: int|list[int] = 1, groups: int = 1",
    "conv2d" => conv::conv2d_rule, "input: Tensor, weight: Tensor, bias: Tensor? = None, stride: int|list[int] = 1, padding: int|list[int]|str = 0, dilation: int|list[int] = 1, groups: int = 1",
    "conv3d" => conv::conv3d_rule, "input: Tensor, weight: Tensor, bias: Tensor? = None, stride: int|list[int] = 1, padding: int|list[int]|str = 0, dilation: int|list[int] = 1, groups: int = 1",
    "max_pool2d" => conv::max_pool2d_rule, "input: Tensor, kernel_size: int|list[int], stride: int|list[int]? = None, padding: int|list[int] = 0, dilation: int|list[int] = 1, ceil_mode: bool = False",
    "avg_pool2d" => conv::avg_pool2d_rule, "input: Tensor, kernel_size: int|list[int], stride: int|list[int]? = None, padding: int|list[int] = 0, ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int? = None",
    "adaptive_avg_pool2d" => conv::adaptive_avg_pool2d_rule, "input: Tensor, output_size: int|list[int]",
    "batch_norm" => norm::batch_norm_rule, "input: Tensor, running_mean: Tensor?, running_var: Tensor?, weight: Tensor? = None, bias: Tensor? = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-05",
    "group_norm" => norm::group_norm_rule, "input: Tensor, num_groups: int, weight: Tensor? = None, bias: Tensor? = None, eps: float = 1e-05",
    "rand" => random::rand_rule, "size: list[int], *, seed: int, offset: int = 0, dtype: dtype = dtypes.f32, device: device = devices.cpu",
    "randn" => random::randn_rule, "size: list[int], *, seed: int, offset: int = 0, dtype: dtype = dtypes.f32, device: device = devices.cpu",
    "dropout" => random::dropout_rule, "input: Tensor, p: float = 0.5, training: bool = True, *, seed: int, offset: int = 0",
    "mean" => reduction::mean_rule, "input: Tensor, dim: list[int]? = None, keepdim: bool = False",
    "softmax" => reduction::softmax_rule, "input: Tensor, dim: int",
    "log_softmax" => nn::log_softmax_rule, "input: Tensor, dim: int",
    "cross_entropy" => nn::cross_entropy_rule, "input: Tensor, target: Tensor, *, ignore_index: int = -100, label_smoothing: float = 0.0",
    "cross_entropy_lse" => cross_entropy::cross_entropy_lse_rule, "input: Tensor, target: Tensor, *, ignore_index: int = -100",
    "cross_entropy_bwd" => cross_entropy::cross_entropy_bwd_rule, "grad_loss: Tensor, input: Tensor, target: Tensor, logsumexp: Tensor, *, ignore_index: int = -100",
    "layer_norm" => nn::layer_norm_rule, "input: Tensor, normalized_shape: list[int], weight: Tensor? = None, bias: Tensor? = None, eps: float = 1e-05",
    "rms_norm" => norm::rms_norm_rule, "input: Tensor, normalized_shape: list[int], weight: Tensor? = None, eps: float? = None",
    "mse_loss" => nn::mse_loss_rule, "input: Tensor, target: Tensor",
    "sigmoid" => activations::sigmoid_rule, "input: Tensor",
    "silu" => activations::silu_rule, "input: Tensor",
    "softplus" => activations::softplus_rule, "input: Tensor, beta: float = 1.0, threshold: float = 20.0",
    "relu6" => activations::relu6_rule, "input: Tensor",
    "hardswish" => activations::hardswish_rule, "input: Tensor",
    "leaky_relu" => activations::leaky_relu_rule, "input: Tensor, negative_slope: float = 0.01",
    "clamp" => activations::clamp_rule, "input: Tensor, min: Tensor|number? = None, max: Tensor|number? = None",
    "masked_fill" => elementwise::masked_fill_rule, "input: Tensor, mask: Tensor, value: Tensor|number",
    "tril" => elementwise::tril_rule, "input: Tensor, diagonal: int = 0",
    "triu" => elementwise::triu_rule, "input: Tensor, diagonal: int = 0",
    "var" => reduction::var_rule, "input: Tensor, dim: list[int]? = None, *, correction: number = 1, keepdim: bool = False",
    "std" => reduction::std_rule, "input: Tensor, dim: list[int]? = None, *, correction: number = 1, keepdim: bool = False",
    "all" => reduction::all_rule, "input: Tensor, dim: list[int]? = None, keepdim: bool = False",
    "any" => reduction::any_rule, "input: Tensor, dim: list[int]? = None, keepdim: bool = False",
    "zeros_like" => factory::zeros_like_rule, "input: Tensor",
    "ones_like" => factory::ones_like_rule, "input: Tensor",
    "full_like" => factory::full_like_rule, "input: Tensor, fill_value: number",
    "flatten" => shape::flatten_rule, "input: Tensor, start_dim: int = 0, end_dim: int = -1",
    "squeeze" => shape::squeeze_rule, "input: Tensor, dim: list[int]? = None",
    "t" => shape::t_rule, "input: Tensor",
    "bmm" => linalg::bmm_rule, "input: Tensor, mat2: Tensor",
    "unflatten" => shape::unflatten_rule, "input: Tensor, dim: int, sizes: list[int]",
    "norm" => reduction::norm_rule, "input: Tensor, p: number = 2.0, dim: list[int]? = None, keepdim: bool = False",
    "nll_loss" => nn::nll_loss_rule, "input: Tensor, target: Tensor, *, ignore_index: int = -100",
    "scaled_dot_product_attention" => attention::sdpa_rule, "query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor? = None, *, is_causal: bool = False, scale: float? = None",
    "sdpa_fwd_lse" => attention::sdpa_fwd_lse_rule, "query: Tensor, key: Tensor, value: Tensor, *, is_causal: bool = False, scale: float? = None",
    "sdpa_bwd" => attention::sdpa_bwd_rule, "grad_out: Tensor, query: Tensor, key: Tensor, value: Tensor, out: Tensor, logsumexp: Tensor, *, is_causal: bool = False, scale: float? = None",
    "matmul" => linalg::matmul_rule, "input: Tensor, other: Tensor",
    "linear" => linalg::linear_rule, "input: Tensor, weight: Tensor, bias: Tensor? = None",
    "full" => factory::full_rule, "size: list[int], fill_value: number, *, device: device = devices.cpu, dtype: dtype? = None",
    "zeros" => factory::zeros_rule, "size: list[int], *, device: device = devices.cpu, dtype: dtype = dtypes.f32",
    "ones" => factory::ones_rule, "size: list[int], *, device: device = devices.cpu, dtype: dtype = dtypes.f32",
    "arange" => factory::arange_rule, "start: int, end: int, step: int = 1, *, device: device = devices.cpu, dtype: dtype = dtypes.i64",
}

/// Binds the ltorch symbol `id` (e.g. `ltorch.add`) to `args` in the current trace.
pub fn call(id: &str, args: Vec<Arg>) -> Result<Vec<Tensor>> {
    register();
    let sym = lookup_symbol(id).ok_or_else(|| Error::Bug(format!("unknown symbol {id}")))?;
    bind(sym, args)
}

/// Calls an op a plugin declared (e.g. `mylib.fused_rms_norm`) on tensors and literals.
pub fn custom(id: &str, args: Vec<Arg>) -> Result<Vec<Tensor>> {
    register();
    match lookup_symbol(id) {
        Some(sym) if matches!(sym.kind, SymbolKind::Custom(_)) => bind(sym, args),
        Some(_) => Err(Error::Usage(format!(
            "`{id}` is a built-in op, not a plugin's; call it through its ltorch function"
        ))),
        None => Err(Error::Usage(format!(
            "unknown op `{id}`: no loaded plugin declares it (see `thunder plugins`)"
        ))),
    }
}

/// Binds a one-output ltorch op.
pub(crate) fn call1(id: &str, args: Vec<Arg>) -> Result<Tensor> {
    call(id, args)?
        .pop()
        .ok_or_else(|| Error::Bug(format!("{id} returned no output")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ltorch_op_declares_a_signature_that_parses() {
        let sigs = signatures();
        for sym in symbols() {
            assert!(
                sym.signature.is_some() && sigs.iter().any(|s| s.op == sym.id),
                "{} has no (parsable) signature",
                sym.id
            );
        }
        assert_eq!(sigs.len(), symbols().len());
    }

    #[test]
    fn registering_makes_the_ops_known_to_core_with_their_rules() {
        register();
        register();
        let relu = lookup_symbol("ltorch.relu").expect("registered");
        assert!(relu.vjp.is_some() && relu.signature.is_some());
        assert!(lookup_symbol("ltorch.softmax").is_some_and(|s| s.vjp.is_some()));
        assert!(lookup_symbol("ltorch.layer_norm").is_some_and(|s| s.vjp.is_none()));
        assert_eq!(
            thunder_core::ir::symbol_ids()
                .iter()
                .filter(|id| id.starts_with("ltorch."))
                .count(),
            symbols().len()
        );
    }
}
