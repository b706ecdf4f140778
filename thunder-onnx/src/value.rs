//! Values flowing through the graph while it is imported: host constants (initializers,
//! `Constant` nodes and folded shape arithmetic) and traced tensors.

use std::sync::Arc;
use thunder_core::{Array, DType, Tensor};

/// A value known at import time: its data and, for initializers, the name it has as a weight
/// input of the trace.
#[derive(Debug, Clone)]
pub struct Const {
    pub array: Arc<Array>,
    /// The weight-input name (an initializer's ONNX name, or a made-up one for a folded value).
    pub name: String,
}

#[derive(Debug, Clone)]
pub enum Val {
    Const(Const),
    Traced(Tensor),
}

impl Val {
    pub fn shape(&self) -> &[i64] {
        match self {
            Val::Const(c) => c.array.shape(),
            Val::Traced(t) => t.shape(),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            Val::Const(c) => c.array.dtype(),
            Val::Traced(t) => t.dtype(),
        }
    }

    pub fn as_const(&self) -> Option<&Const> {
        match self {
            Val::Const(c) => Some(c),
            Val::Traced(_) => None,
        }
    }
}

/// A small host array in f64 (integers up to 2^53 are exact; larger ones, such as Slice's
/// INT64_MAX "to the end", saturate on the way back, which is what they mean).
#[derive(Debug, Clone, PartialEq)]
pub struct HostArr {
    pub shape: Vec<i64>,
    pub dtype: DType,
    pub data: Vec<f64>,
}

impl HostArr {
    pub fn from_array(a: &Array) -> thunder_core::Result<HostArr> {
        Ok(HostArr {
            shape: a.shape().to_vec(),
            dtype: a.dtype(),
            data: a.to_f64_vec()?,
        })
    }

    pub fn to_array(&self) -> thunder_core::Result<Array> {
        Array::from_f64(&self.data, &self.shape, self.dtype)
    }

    pub fn ints(&self) -> Vec<i64> {
        self.data.iter().map(|&x| x as i64).collect()
    }

    pub fn ints_1d(values: &[i64]) -> HostArr {
        HostArr {
            shape: vec![values.len() as i64],
            dtype: DType::I64,
            data: values.iter().map(|&x| x as f64).collect(),
        }
    }
}
