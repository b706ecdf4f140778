//! The read-only trace view a plugin claims from and compiles.
//!
//! Values are numbered; each op lists its arguments (values or literals) and output values in
//! trace order, which is a topological order.

use crate::tensor::{DTypeCode, DeviceDesc};
use abi_stable::{
    std_types::{RString, RVec},
    StableAbi,
};

#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct ValueMeta {
    pub shape: RVec<i64>,
    pub dtype: DTypeCode,
    pub device: DeviceDesc,
    pub requires_grad: bool,
}

/// One positional argument of an op.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub enum ArgView {
    /// A tensor value, by index into [`TraceView::values`].
    Value(u32),
    Int(i64),
    Float(f64),
    Bool(bool),
    Ints(RVec<i64>),
    DType(DTypeCode),
    Device(DeviceDesc),
    Str(RString),
    None,
}

#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct OpView {
    /// Stable symbol id such as `prims.add` or `ltorch.softmax`.
    pub symbol: RString,
    pub args: RVec<ArgView>,
    pub outputs: RVec<u32>,
    /// Already claimed by a higher-priority executor in this round.
    pub claimed: bool,
    /// True for composite symbols, which are decomposed if nobody claims them whole.
    pub composite: bool,
}

#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct TraceView {
    pub values: RVec<ValueMeta>,
    pub ops: RVec<OpView>,
    pub inputs: RVec<u32>,
    pub outputs: RVec<u32>,
}

impl ArgView {
    pub fn as_value(&self) -> Option<u32> {
        match self {
            ArgView::Value(v) => Some(*v),
            _ => None,
        }
    }
}

impl OpView {
    pub fn input_values(&self) -> impl Iterator<Item = u32> + '_ {
        self.args.iter().filter_map(ArgView::as_value)
    }
}
