//! Methods and operator overloads on [`Tensor`], torch style. They cannot return `Result`
//! (`a + b` has no room for one), so the first error of a trace is kept by the tracing context
//! and returned when the trace ends; later ops on its poisoned result record nothing.

use super::*;
use crate::clang::Operand;
use crate::dtype::DType;
use crate::trace_ctx::sticky;
use std::ops;

macro_rules! unary_methods {
    ($($name:ident),*) => {$(
        pub fn $name(&self) -> Tensor {
            sticky(super::$name(self))
        }
    )*};
}

macro_rules! binary_methods {
    ($($name:ident),*) => {$(
        pub fn $name(&self, other: impl Into<Operand>) -> Tensor {
            sticky(super::$name(self, other))
        }
    )*};
}

impl Tensor {
    // The one-prim ops (neg, exp, add, eq, floor, ...) get their methods from their rows in
    // `elementwise.rs`.
    unary_methods!(relu, sigmoid, silu, relu6, hardswish);
    unary_methods!(sign, signbit, isnan, isfinite, logical_not, bitwise_not);
    binary_methods!(bitwise_and, bitwise_or, bitwise_xor);
    binary_methods!(bitwise_left_shift, bitwise_right_shift);

    pub fn softplus(&self, beta: f64, threshold: f64) -> Tensor {
        sticky(super::softplus(self, beta, threshold))
    }

    pub fn leaky_relu(&self, negative_slope: f64) -> Tensor {
        sticky(super::leaky_relu(self, negative_slope))
    }

    pub fn clamp(&self, min: Option<Operand>, max: Option<Operand>) -> Tensor {
        sticky(super::clamp(self, min, max))
    }

    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Operand>) -> Tensor {
        sticky(super::masked_fill(self, mask, value))
    }

    pub fn var(&self, dims: Option<&[i64]>, correction: i64, keepdim: bool) -> Tensor {
        sticky(super::var(self, dims, correction, keepdim))
    }

    pub fn std(&self, dims: Option<&[i64]>, correction: i64, keepdim: bool) -> Tensor {
        sticky(super::std(self, dims, correction, keepdim))
    }

    pub fn flatten(&self, start_dim: i64, end_dim: i64) -> Tensor {
        sticky(super::flatten(self, start_dim, end_dim))
    }

    pub fn squeeze(&self, dims: Option<&[i64]>) -> Tensor {
        sticky(super::squeeze(self, dims))
    }

    pub fn gelu(&self, approximate: &str) -> Tensor {
        sticky(super::gelu(self, approximate))
    }

    pub fn log_softmax(&self, dim: i64) -> Tensor {
        sticky(super::log_softmax(self, dim))
    }

    /// `cross_entropy(self, target)` with class indices or probabilities, mean over the batch.
    pub fn cross_entropy(&self, target: &Tensor) -> Tensor {
        sticky(super::cross_entropy(self, target))
    }

    pub fn layer_norm(
        &self,
        normalized_shape: &[i64],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Tensor {
        sticky(super::layer_norm(self, normalized_shape, weight, bias, eps))
    }

    pub fn softmax(&self, dim: i64) -> Tensor {
        sticky(super::softmax(self, dim))
    }

    pub fn to_dtype(&self, dtype: DType) -> Tensor {
        sticky(super::to(self, dtype))
    }

    pub fn reshape(&self, shape: &[i64]) -> Tensor {
        sticky(super::reshape(self, shape))
    }

    /// torch's `view`: traced tensors have no storage to alias, so it is `reshape` (which
    /// accepts every shape `view` accepts, `-1` included).
    pub fn view(&self, shape: &[i64]) -> Tensor {
        self.reshape(shape)
    }

    pub fn transpose(&self, dim0: i64, dim1: i64) -> Tensor {
        sticky(super::transpose(self, dim0, dim1))
    }

    pub fn permute(&self, dims: &[i64]) -> Tensor {
        sticky(super::permute(self, dims))
    }

    /// Transpose of a matrix (a 0-d or 1-D tensor is returned as is, as in torch).
    pub fn t(&self) -> Tensor {
        if self.rank() < 2 {
            return self.clone();
        }
        self.transpose(0, 1)
    }

    pub fn unsqueeze(&self, dim: i64) -> Tensor {
        sticky(super::unsqueeze(self, dim))
    }

    pub fn expand(&self, shape: &[i64]) -> Tensor {
        sticky(super::expand(self, shape))
    }

    pub fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Tensor {
        sticky(super::sum(self, dims, keepdim))
    }

    pub fn amax(&self, dims: Option<&[i64]>, keepdim: bool) -> Tensor {
        sticky(super::amax(self, dims, keepdim))
    }

    pub fn prod(&self, dim: Option<i64>, keepdim: bool) -> Tensor {
        sticky(super::prod(self, dim, keepdim))
    }

    pub fn amin(&self, dims: Option<&[i64]>, keepdim: bool) -> Tensor {
        sticky(super::amin(self, dims, keepdim))
    }

    /// `torch.max(self)`; [`Tensor::max_dim`] is `torch.max(self, dim, keepdim)`.
    pub fn max(&self) -> Tensor {
        sticky(super::max(self))
    }

    pub fn max_dim(&self, dim: i64, keepdim: bool) -> (Tensor, Tensor) {
        reduction::sticky2(super::max_dim(self, dim, keepdim))
    }

    pub fn min(&self) -> Tensor {
        sticky(super::min(self))
    }

    pub fn min_dim(&self, dim: i64, keepdim: bool) -> (Tensor, Tensor) {
        reduction::sticky2(super::min_dim(self, dim, keepdim))
    }

    pub fn argmax(&self, dim: Option<i64>, keepdim: bool) -> Tensor {
        sticky(super::argmax(self, dim, keepdim))
    }

    pub fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Tensor {
        sticky(super::argmin(self, dim, keepdim))
    }

    pub fn var_mean(
        &self,
        dims: Option<&[i64]>,
        correction: i64,
        keepdim: bool,
    ) -> (Tensor, Tensor) {
        reduction::sticky2(super::var_mean(self, dims, correction, keepdim))
    }

    pub fn cumsum(&self, dim: i64, dtype: Option<DType>) -> Tensor {
        sticky(super::cumsum(self, dim, dtype))
    }

    pub fn topk(&self, k: i64, dim: i64, largest: bool, sorted: bool) -> (Tensor, Tensor) {
        reduction::sticky2(super::topk(self, k, dim, largest, sorted))
    }

    pub fn polygamma(&self, n: i64) -> Tensor {
        sticky(super::polygamma(n, self))
    }

    pub fn sort(&self, dim: i64, descending: bool, stable: bool) -> (Tensor, Tensor) {
        reduction::sticky2(super::sort(self, dim, descending, stable))
    }

    pub fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Tensor {
        sticky(super::mean(self, dims, keepdim))
    }

    /// `self @ w.T + bias`, as `torch.nn.functional.linear`.
    pub fn linear(&self, w: &Tensor, bias: Option<&Tensor>) -> Tensor {
        sticky(super::linear(self, w, bias))
    }

    pub fn matmul(&self, other: &Tensor) -> Tensor {
        sticky(super::matmul(self, other))
    }

    /// `torch.where(self, a, b)`.
    pub fn select(&self, a: impl Into<Operand>, b: impl Into<Operand>) -> Tensor {
        sticky(super::where_(self, a, b))
    }
}

macro_rules! binary_overloads {
    ($($trait:ident, $method:ident, $func:ident;)*) => {$(
        impl<R: Into<Operand>> ops::$trait<R> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                sticky(super::$func(self, rhs))
            }
        }
        impl<R: Into<Operand>> ops::$trait<R> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                sticky(super::$func(&self, rhs))
            }
        }
        impl ops::$trait<&Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                sticky(super::$func(self, rhs))
            }
        }
        impl ops::$trait<Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                sticky(super::$func(self, rhs))
            }
        }
        impl ops::$trait<&Tensor> for i64 {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                sticky(super::$func(self, rhs))
            }
        }
        impl ops::$trait<Tensor> for i64 {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                sticky(super::$func(self, rhs))
            }
        }
    )*};
}

binary_overloads! {
    Add, add, add;
    Sub, sub, sub;
    Mul, mul, mul;
    Div, div, div;
}

impl ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        sticky(super::neg(self))
    }
}

impl ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        sticky(super::neg(&self))
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

/// Indexing and joining methods (`cat` and `stack` are functions, as in torch).
impl Tensor {
    /// `torch.split`: pieces of one size (`2i64`) or of the listed sizes (`&[1, 3][..]`).
    pub fn split(&self, split: impl Into<SplitSize>, dim: i64) -> Vec<Tensor> {
        sticky_vec(super::split(self, split, dim))
    }

    pub fn chunk(&self, chunks: i64, dim: i64) -> Vec<Tensor> {
        sticky_vec(super::chunk(self, chunks, dim))
    }

    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Tensor {
        sticky(super::narrow(self, dim, start, length))
    }

    /// `self[..., start:end:step]` along `dim`, with Python's slice bounds.
    pub fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Tensor {
        sticky(super::slice(self, dim, start, end, step))
    }

    pub fn index_select(&self, dim: i64, index: &Tensor) -> Tensor {
        sticky(super::index_select(self, dim, index))
    }

    pub fn gather(&self, dim: i64, index: &Tensor) -> Tensor {
        sticky(super::gather(self, dim, index))
    }

    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Tensor {
        sticky(super::scatter_add(self, dim, index, src))
    }

    pub fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        alpha: impl Into<Operand>,
    ) -> Tensor {
        sticky(super::index_add(self, dim, index, source, alpha))
    }

    pub fn flip(&self, dims: &[i64]) -> Tensor {
        sticky(super::flip(self, dims))
    }
}
