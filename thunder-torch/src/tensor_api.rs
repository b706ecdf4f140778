//! Torch-named methods on [`Tensor`]. They cannot return `Result` (a method chain has no room
//! for one), so the first error of a trace is kept by the tracing context and returned when the
//! trace ends; later ops on its poisoned result record nothing.

use crate::*;
use thunder_core::clang::Operand;
use thunder_core::dtype::DType;
use thunder_core::trace_ctx::sticky;

/// A trait of methods and its impl for [`Tensor`], from one list of methods with bodies (the
/// methods cannot be inherent: `Tensor` belongs to thunder-core).
macro_rules! tensor_methods {
    (
        $(#[$tmeta:meta])* $trait:ident;
        $( $(#[$meta:meta])* fn $name:ident(&$this:ident $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty $body:block )*
    ) => {
        $(#[$tmeta])*
        pub trait $trait {
            $( $(#[$meta])* fn $name(&$this $(, $arg: $ty)*) -> $ret; )*
        }

        impl $trait for Tensor {
            $( fn $name(&$this $(, $arg: $ty)*) -> $ret $body )*
        }
    };
}

tensor_methods! {
    /// Torch-named methods on [`Tensor`]; the one-prim ops (neg, exp, add, eq, floor, ...) get
    /// theirs from their rows in `elementwise.rs` ([`crate::UnaryMethods`] and the others).
    TensorMethods;
    fn relu(&self) -> Tensor {
        sticky(crate::relu(self))
    }

    fn sigmoid(&self) -> Tensor {
        sticky(crate::sigmoid(self))
    }

    fn silu(&self) -> Tensor {
        sticky(crate::silu(self))
    }

    fn relu6(&self) -> Tensor {
        sticky(crate::relu6(self))
    }

    fn hardswish(&self) -> Tensor {
        sticky(crate::hardswish(self))
    }
    fn sign(&self) -> Tensor {
        sticky(crate::sign(self))
    }

    fn signbit(&self) -> Tensor {
        sticky(crate::signbit(self))
    }

    fn isnan(&self) -> Tensor {
        sticky(crate::isnan(self))
    }

    fn isfinite(&self) -> Tensor {
        sticky(crate::isfinite(self))
    }

    fn logical_not(&self) -> Tensor {
        sticky(crate::logical_not(self))
    }

    fn bitwise_not(&self) -> Tensor {
        sticky(crate::bitwise_not(self))
    }
    fn bitwise_and(&self, other: impl Into<Operand>) -> Tensor {
        sticky(crate::bitwise_and(self, other))
    }

    fn bitwise_or(&self, other: impl Into<Operand>) -> Tensor {
        sticky(crate::bitwise_or(self, other))
    }

    fn bitwise_xor(&self, other: impl Into<Operand>) -> Tensor {
        sticky(crate::bitwise_xor(self, other))
    }
    fn bitwise_left_shift(&self, other: impl Into<Operand>) -> Tensor {
        sticky(crate::bitwise_left_shift(self, other))
    }

    fn bitwise_right_shift(&self, other: impl Into<Operand>) -> Tensor {
        sticky(crate::bitwise_right_shift(self, other))
    }

    fn softplus(&self, beta: f64, threshold: f64) -> Tensor {
        sticky(crate::softplus(self, beta, threshold))
    }

    fn leaky_relu(&self, negative_slope: f64) -> Tensor {
        sticky(crate::leaky_relu(self, negative_slope))
    }

    fn clamp(&self, min: Option<Operand>, max: Option<Operand>) -> Tensor {
        sticky(crate::clamp(self, min, max))
    }

    fn masked_fill(&self, mask: &Tensor, value: impl Into<Operand>) -> Tensor {
        sticky(crate::masked_fill(self, mask, value))
    }

    fn var(&self, dims: Option<&[i64]>, correction: i64, keepdim: bool) -> Tensor {
        sticky(crate::var(self, dims, correction, keepdim))
    }

    fn std(&self, dims: Option<&[i64]>, correction: i64, keepdim: bool) -> Tensor {
        sticky(crate::std(self, dims, correction, keepdim))
    }

    fn flatten(&self, start_dim: i64, end_dim: i64) -> Tensor {
        sticky(crate::flatten(self, start_dim, end_dim))
    }

    fn squeeze(&self, dims: Option<&[i64]>) -> Tensor {
        sticky(crate::squeeze(self, dims))
    }

    fn gelu(&self, approximate: &str) -> Tensor {
        sticky(crate::gelu(self, approximate))
    }

    fn log_softmax(&self, dim: i64) -> Tensor {
        sticky(crate::log_softmax(self, dim))
    }

    /// `cross_entropy(self, target)` with class indices or probabilities, mean over the batch.
    fn cross_entropy(&self, target: &Tensor) -> Tensor {
        sticky(crate::cross_entropy(self, target))
    }

    fn layer_norm(
        &self,
        normalized_shape: &[i64],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Tensor {
        sticky(crate::layer_norm(self, normalized_shape, weight, bias, eps))
    }

    fn softmax(&self, dim: i64) -> Tensor {
        sticky(crate::softmax(self, dim))
    }

    fn to_dtype(&self, dtype: DType) -> Tensor {
        sticky(crate::to(self, dtype))
    }

    fn reshape(&self, shape: &[i64]) -> Tensor {
        sticky(crate::reshape(self, shape))
    }

    /// torch's `view`: traced tensors have no storage to alias, so it is `reshape` (which
    /// accepts every shape `view` accepts, `-1` included).
    fn view(&self, shape: &[i64]) -> Tensor {
        self.reshape(shape)
    }

    fn transpose(&self, dim0: i64, dim1: i64) -> Tensor {
        sticky(crate::transpose(self, dim0, dim1))
    }

    fn permute(&self, dims: &[i64]) -> Tensor {
        sticky(crate::permute(self, dims))
    }

    /// Transpose of a matrix (a 0-d or 1-D tensor is returned as is, as in torch).
    fn t(&self) -> Tensor {
        if self.rank() < 2 {
            return self.clone();
        }
        self.transpose(0, 1)
    }

    fn unsqueeze(&self, dim: i64) -> Tensor {
        sticky(crate::unsqueeze(self, dim))
    }

    fn expand(&self, shape: &[i64]) -> Tensor {
        sticky(crate::expand(self, shape))
    }

    fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Tensor {
        sticky(crate::sum(self, dims, keepdim))
    }

    fn amax(&self, dims: Option<&[i64]>, keepdim: bool) -> Tensor {
        sticky(crate::amax(self, dims, keepdim))
    }

    fn prod(&self, dim: Option<i64>, keepdim: bool) -> Tensor {
        sticky(crate::prod(self, dim, keepdim))
    }

    fn amin(&self, dims: Option<&[i64]>, keepdim: bool) -> Tensor {
        sticky(crate::amin(self, dims, keepdim))
    }

    /// `torch.max(self)`; [`Tensor::max_dim`] is `torch.max(self, dim, keepdim)`.
    fn max(&self) -> Tensor {
        sticky(crate::max(self))
    }

    fn max_dim(&self, dim: i64, keepdim: bool) -> (Tensor, Tensor) {
        reduction::sticky2(crate::max_dim(self, dim, keepdim))
    }

    fn min(&self) -> Tensor {
        sticky(crate::min(self))
    }

    fn min_dim(&self, dim: i64, keepdim: bool) -> (Tensor, Tensor) {
        reduction::sticky2(crate::min_dim(self, dim, keepdim))
    }

    fn argmax(&self, dim: Option<i64>, keepdim: bool) -> Tensor {
        sticky(crate::argmax(self, dim, keepdim))
    }

    fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Tensor {
        sticky(crate::argmin(self, dim, keepdim))
    }

    fn var_mean(
        &self,
        dims: Option<&[i64]>,
        correction: i64,
        keepdim: bool,
    ) -> (Tensor, Tensor) {
        reduction::sticky2(crate::var_mean(self, dims, correction, keepdim))
    }

    fn cumsum(&self, dim: i64, dtype: Option<DType>) -> Tensor {
        sticky(crate::cumsum(self, dim, dtype))
    }

    fn topk(&self, k: i64, dim: i64, largest: bool, sorted: bool) -> (Tensor, Tensor) {
        reduction::sticky2(crate::topk(self, k, dim, largest, sorted))
    }

    fn polygamma(&self, n: i64) -> Tensor {
        sticky(crate::polygamma(n, self))
    }

    fn sort(&self, dim: i64, descending: bool, stable: bool) -> (Tensor, Tensor) {
        reduction::sticky2(crate::sort(self, dim, descending, stable))
    }

    fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Tensor {
        sticky(crate::mean(self, dims, keepdim))
    }

    /// `self @ w.T + bias`, as `torch.nn.functional.linear`.
    fn linear(&self, w: &Tensor, bias: Option<&Tensor>) -> Tensor {
        sticky(crate::linear(self, w, bias))
    }

    fn matmul(&self, other: &Tensor) -> Tensor {
        sticky(crate::matmul(self, other))
    }

    /// `torch.where(self, a, b)`.
    fn select(&self, a: impl Into<Operand>, b: impl Into<Operand>) -> Tensor {
        sticky(crate::where_(self, a, b))
    }
}

/// A multi-output op's results, or (after recording its error) one poisoned tensor: the
/// number of pieces is unknown when the op failed, and the trace fails anyway.
fn sticky_vec(result: Result<Vec<Tensor>>) -> Vec<Tensor> {
    match result {
        Ok(v) => v,
        Err(e) => vec![sticky(Err(e))],
    }
}

tensor_methods! {
    /// Indexing and joining methods (`cat` and `stack` are functions, as in torch).
    IndexingMethods;
    /// `torch.split`: pieces of one size (`2i64`) or of the listed sizes (`&[1, 3][..]`).
    fn split(&self, split: impl Into<SplitSize>, dim: i64) -> Vec<Tensor> {
        sticky_vec(crate::split(self, split, dim))
    }

    fn chunk(&self, chunks: i64, dim: i64) -> Vec<Tensor> {
        sticky_vec(crate::chunk(self, chunks, dim))
    }

    fn narrow(&self, dim: i64, start: i64, length: i64) -> Tensor {
        sticky(crate::narrow(self, dim, start, length))
    }

    /// `self[..., start:end:step]` along `dim`, with Python's slice bounds.
    fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Tensor {
        sticky(crate::slice(self, dim, start, end, step))
    }

    fn index_select(&self, dim: i64, index: &Tensor) -> Tensor {
        sticky(crate::index_select(self, dim, index))
    }

    fn gather(&self, dim: i64, index: &Tensor) -> Tensor {
        sticky(crate::gather(self, dim, index))
    }

    fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Tensor {
        sticky(crate::scatter_add(self, dim, index, src))
    }

    fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        alpha: impl Into<Operand>,
    ) -> Tensor {
        sticky(crate::index_add(self, dim, index, source, alpha))
    }

    fn flip(&self, dims: &[i64]) -> Tensor {
        sticky(crate::flip(self, dims))
    }
}
