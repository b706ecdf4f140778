//! The torch language: user-facing ops with torch names and semantics. Every op is a composite
//! symbol whose decomposition (clang and other ltorch ops) is traced into its subsymbols.
//!
//! The table below is the one place that lists the ops: `ltorch.<name>` maps to its
//! decomposition function in the module that owns it.

mod activations;
mod args;
mod conv;
mod elementwise;
mod factory;
mod indexing;
mod linalg;
mod nn;
mod norm;
mod ordering;
mod random;
mod reduction;
mod shape;
mod tensor_api;

pub use activations::*;
pub use args::CallArgs;
pub use conv::*;
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

use crate::error::{Error, Result};
use crate::ir::{lookup_symbol, Arg, Symbol, SymbolKind};
use crate::tensor::Tensor;
use crate::trace_ctx::bind;
use std::sync::OnceLock;

macro_rules! ltorch_table {
    ($( $name:literal => $decomposition:path ),* $(,)?) => {
        /// Every ltorch symbol: the table's rows, then the one-prim ops' rows.
        pub fn symbols() -> &'static [Symbol] {
            static SYMBOLS: OnceLock<Vec<Symbol>> = OnceLock::new();
            SYMBOLS.get_or_init(|| {
                let mut symbols = vec![$(
                    Symbol {
                        id: concat!("ltorch.", $name),
                        kind: SymbolKind::Composite($decomposition),
                        tags: &[],
                    },
                )*];
                // The one-prim ops declare themselves, one row each (`elementwise.rs`).
                symbols.extend(elementwise::prim_ops().map(|op| Symbol {
                    id: op.id,
                    kind: SymbolKind::Composite(op.rule),
                    tags: &[],
                }));
                symbols
            })
        }
    };
}

ltorch_table! {
    "sign" => elementwise::sign_rule,
    "signbit" => elementwise::signbit_rule,
    "isnan" => elementwise::isnan_rule,
    "isfinite" => elementwise::isfinite_rule,
    "logical_not" => elementwise::logical_not_rule,
    "bitwise_not" => elementwise::bitwise_not_rule,
    "bitwise_and" => elementwise::bitwise_and_rule,
    "bitwise_or" => elementwise::bitwise_or_rule,
    "bitwise_xor" => elementwise::bitwise_xor_rule,
    "bitwise_left_shift" => elementwise::bitwise_left_shift_rule,
    "bitwise_right_shift" => elementwise::bitwise_right_shift_rule,
    "where" => elementwise::where_rule,
    "to" => elementwise::to_rule,
    "relu" => elementwise::relu_rule,
    "gelu" => elementwise::gelu_rule,
    "reshape" => shape::reshape_rule,
    "transpose" => shape::transpose_rule,
    "permute" => shape::permute_rule,
    "unsqueeze" => shape::unsqueeze_rule,
    "expand" => shape::expand_rule,
    "cat" => indexing::cat_rule,
    "stack" => indexing::stack_rule,
    "split" => indexing::split_rule,
    "chunk" => indexing::chunk_rule,
    "narrow" => indexing::narrow_rule,
    "slice" => indexing::slice_rule,
    "index_select" => indexing::index_select_rule,
    "gather" => indexing::gather_rule,
    "scatter_add" => indexing::scatter_add_rule,
    "index_add" => indexing::index_add_rule,
    "embedding" => indexing::embedding_rule,
    "flip" => indexing::flip_rule,
    "pad" => indexing::pad_rule,
    "sum" => reduction::sum_rule,
    "amax" => reduction::amax_rule,
    "prod" => reduction::prod_rule,
    "amin" => reduction::amin_rule,
    "max" => reduction::max_rule,
    "min" => reduction::min_rule,
    "argmax" => reduction::argmax_rule,
    "argmin" => reduction::argmin_rule,
    "var_mean" => reduction::var_mean_rule,
    "cumsum" => ordering::cumsum_rule,
    "topk" => ordering::topk_rule,
    "sort" => ordering::sort_rule,
    "polygamma" => elementwise::polygamma_rule,
    "conv1d" => conv::conv1d_rule,
    "conv2d" => conv::conv2d_rule,
    "conv3d" => conv::conv3d_rule,
    "max_pool2d" => conv::max_pool2d_rule,
    "avg_pool2d" => conv::avg_pool2d_rule,
    "adaptive_avg_pool2d" => conv::adaptive_avg_pool2d_rule,
    "batch_norm" => norm::batch_norm_rule,
    "group_norm" => norm::group_norm_rule,
    "rand" => random::rand_rule,
    "randn" => random::randn_rule,
    "dropout" => random::dropout_rule,
    "mean" => reduction::mean_rule,
    "softmax" => reduction::softmax_rule,
    "log_softmax" => nn::log_softmax_rule,
    "cross_entropy" => nn::cross_entropy_rule,
    "layer_norm" => nn::layer_norm_rule,
    "rms_norm" => norm::rms_norm_rule,
    "mse_loss" => nn::mse_loss_rule,
    "sigmoid" => activations::sigmoid_rule,
    "silu" => activations::silu_rule,
    "softplus" => activations::softplus_rule,
    "relu6" => activations::relu6_rule,
    "hardswish" => activations::hardswish_rule,
    "leaky_relu" => activations::leaky_relu_rule,
    "clamp" => activations::clamp_rule,
    "masked_fill" => elementwise::masked_fill_rule,
    "tril" => elementwise::tril_rule,
    "triu" => elementwise::triu_rule,
    "var" => reduction::var_rule,
    "std" => reduction::std_rule,
    "all" => reduction::all_rule,
    "any" => reduction::any_rule,
    "zeros_like" => factory::zeros_like_rule,
    "ones_like" => factory::ones_like_rule,
    "full_like" => factory::full_like_rule,
    "flatten" => shape::flatten_rule,
    "squeeze" => shape::squeeze_rule,
    "t" => shape::t_rule,
    "bmm" => linalg::bmm_rule,
    "unflatten" => shape::unflatten_rule,
    "norm" => reduction::norm_rule,
    "nll_loss" => nn::nll_loss_rule,
    "scaled_dot_product_attention" => nn::sdpa_rule,
    "matmul" => linalg::matmul_rule,
    "linear" => linalg::linear_rule,
    "full" => factory::full_rule,
    "zeros" => factory::zeros_rule,
    "ones" => factory::ones_rule,
    "arange" => factory::arange_rule,
}

/// Binds the ltorch symbol `id` (e.g. `ltorch.add`) to `args` in the current trace.
pub fn call(id: &str, args: Vec<Arg>) -> Result<Vec<Tensor>> {
    let sym = lookup_symbol(id).ok_or_else(|| Error::Bug(format!("unknown symbol {id}")))?;
    bind(sym, args)
}

/// Calls an op a plugin declared (e.g. `mylib.fused_rms_norm`) on tensors and literals.
pub fn custom(id: &str, args: Vec<Arg>) -> Result<Vec<Tensor>> {
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
