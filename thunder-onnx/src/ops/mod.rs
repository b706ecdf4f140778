//! The op table: one row per ONNX op type of the default domain, naming its import rule.
//! `lookup` is what import and `examine` use, so an op is supported exactly when it has a row.

mod einsum;
mod elementwise;
mod fold;
mod lowering;
mod nn;
mod reduce;
mod shape;

use crate::error::Result;
use crate::node::NodeCtx;
use crate::value::Val;

pub type Rule = fn(&mut NodeCtx) -> Result<Vec<Val>>;

macro_rules! op_table {
    ($($name:literal => $rule:path),* $(,)?) => {
        /// Every supported op type of the `ai.onnx` domain.
        pub const OPS: &[(&str, Rule)] = &[$(($name, $rule)),*];
    };
}

op_table! {
    "Add" => elementwise::add,
    "Sub" => elementwise::sub,
    "Mul" => elementwise::mul,
    "Div" => elementwise::div,
    "Pow" => elementwise::pow,
    "Max" => elementwise::max,
    "Min" => elementwise::min,
    "Mod" => elementwise::modulo,
    "Equal" => elementwise::equal,
    "Less" => elementwise::less,
    "LessOrEqual" => elementwise::less_equal,
    "Greater" => elementwise::greater,
    "GreaterOrEqual" => elementwise::greater_equal,
    "And" => elementwise::and,
    "Or" => elementwise::or,
    "Xor" => elementwise::xor,
    "Not" => elementwise::not,
    "Where" => elementwise::where_,
    "Neg" => elementwise::neg,
    "Abs" => elementwise::abs,
    "Sqrt" => elementwise::sqrt,
    "Reciprocal" => elementwise::reciprocal,
    "Exp" => elementwise::exp,
    "Log" => elementwise::log,
    "Tanh" => elementwise::tanh,
    "Erf" => elementwise::erf,
    "Sin" => elementwise::sin,
    "Cos" => elementwise::cos,
    "Floor" => elementwise::floor,
    "Ceil" => elementwise::ceil,
    "Round" => elementwise::round,
    "Sign" => elementwise::sign,
    "Relu" => elementwise::relu,
    "Sigmoid" => elementwise::sigmoid,
    "Gelu" => elementwise::gelu,
    "LeakyRelu" => elementwise::leaky_relu,
    "HardSigmoid" => elementwise::hard_sigmoid,
    "HardSwish" => elementwise::hard_swish,
    "Softplus" => elementwise::softplus,
    "Clip" => elementwise::clip,
    "Cast" => elementwise::cast,
    "CastLike" => elementwise::cast_like,
    "Identity" => elementwise::identity,
    "Dropout" => elementwise::identity,
    "Constant" => shape::constant,
    "Shape" => shape::shape,
    "Size" => shape::size,
    "ConstantOfShape" => shape::constant_of_shape,
    "Range" => shape::range,
    "Reshape" => shape::reshape,
    "Flatten" => shape::flatten,
    "Transpose" => shape::transpose,
    "Squeeze" => shape::squeeze,
    "Unsqueeze" => shape::unsqueeze,
    "Concat" => shape::concat,
    "Slice" => shape::slice,
    "Split" => shape::split,
    "Expand" => shape::expand,
    "Gather" => shape::gather,
    "Trilu" => shape::trilu,
    "ReduceSum" => reduce::reduce_sum,
    "ReduceMean" => reduce::reduce_mean,
    "ReduceMax" => reduce::reduce_max,
    "ReduceMin" => reduce::reduce_min,
    "ReduceProd" => reduce::reduce_prod,
    "ReduceL2" => reduce::reduce_l2,
    "ArgMax" => reduce::argmax,
    "ArgMin" => reduce::argmin,
    "Softmax" => reduce::softmax,
    "LogSoftmax" => reduce::log_softmax,
    "MatMul" => nn::matmul,
    "Einsum" => einsum::einsum,
    "Gemm" => nn::gemm,
    "LayerNormalization" => nn::layer_norm,
    "BatchNormalization" => nn::batch_norm,
    "Conv" => nn::conv,
    "MaxPool" => nn::max_pool,
    "AveragePool" => nn::average_pool,
    "GlobalAveragePool" => nn::global_average_pool,
    "GlobalMaxPool" => nn::global_max_pool,
}

/// The rule for `op_type` in `domain` (`""` and `ai.onnx` are the default domain).
pub fn lookup(domain: &str, op_type: &str) -> Option<Rule> {
    if !(domain.is_empty() || domain == "ai.onnx") {
        return None;
    }
    OPS.iter().find(|(n, _)| *n == op_type).map(|(_, r)| *r)
}
