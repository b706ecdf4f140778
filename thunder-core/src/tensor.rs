//! `Tensor`: the proxy a traced function computes with. It holds only metadata; every op on it
//! records a bound symbol in the current trace.

use crate::device::Device;
use crate::dtype::DType;
use crate::ir::{TensorType, Value};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct Tensor {
    value: Value,
    ty: Arc<TensorType>,
}

impl Tensor {
    pub(crate) fn new(value: Value, ty: Arc<TensorType>) -> Self {
        Tensor { value, ty }
    }

    pub(crate) fn poisoned() -> Self {
        Tensor {
            value: Value::POISON,
            ty: Arc::new(TensorType::new(Vec::new(), DType::F32, Device::Cpu)),
        }
    }

    pub fn is_poisoned(&self) -> bool {
        self.value == Value::POISON
    }

    pub fn value(&self) -> Value {
        self.value
    }

    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    pub fn shape(&self) -> &[i64] {
        &self.ty.shape
    }

    pub fn rank(&self) -> usize {
        self.ty.shape.len()
    }

    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }

    pub fn device(&self) -> Device {
        self.ty.device
    }

    pub fn numel(&self) -> usize {
        self.ty.numel()
    }

    pub fn requires_grad(&self) -> bool {
        self.ty.requires_grad
    }
}
