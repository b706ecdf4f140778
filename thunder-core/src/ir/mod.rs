//! The trace IR: values, arguments, symbols, bound symbols and traces.

mod bsym;
mod call_args;
mod retarget;
pub mod signature;
mod symbol;
mod trace;

pub use bsym::BoundSymbol;
pub use call_args::CallArgs;
pub use signature::{CallError, Given, Signature};
pub use symbol::{
    lookup_symbol, prim_symbol, register_custom_op, register_library, symbol_ids, CompositeVjp,
    CustomMetaFn, CustomOp, Decomposition, Symbol, SymbolKind, Tag,
};
pub use trace::{Trace, ValueInfo};

use crate::device::Device;
use crate::dtype::DType;

/// A value in a trace: an index into [`Trace::values`]. Side tables are keyed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(pub u32);

impl Value {
    /// Marks the result of an op that failed while tracing; it never reaches a trace.
    pub const POISON: Value = Value(u32::MAX);

    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Metadata of a tensor proxy: exact static shape, dtype, device, requires_grad.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub shape: Vec<i64>,
    pub dtype: DType,
    pub device: Device,
    pub requires_grad: bool,
}

impl TensorType {
    pub fn new(shape: Vec<i64>, dtype: DType, device: Device) -> Self {
        TensorType {
            shape,
            dtype,
            device,
            requires_grad: false,
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn size_bytes(&self) -> usize {
        self.numel() * self.dtype.size_bytes()
    }
}

impl std::fmt::Display for TensorType {
    /// `cpu f32[8, 16]`, the form used in trace annotations.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}{}",
            self.device,
            self.dtype.short_name(),
            ShapeDisplay(&self.shape)
        )?;
        if self.requires_grad {
            write!(f, " requires_grad")?;
        }
        Ok(())
    }
}

/// Prints a shape as `[2, 3]` (and `[]` for a scalar).
pub struct ShapeDisplay<'a>(pub &'a [i64]);

impl std::fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

/// A positional argument of a bound symbol: a value or a literal.
#[derive(Debug, Clone)]
pub enum Arg {
    Value(Value),
    Int(i64),
    Float(f64),
    Bool(bool),
    Ints(Vec<i64>),
    DType(DType),
    Device(Device),
    Str(String),
    None,
}

impl PartialEq for Arg {
    /// Floats compare by bits so that CSE and round trips treat `nan` and `-0.0` exactly.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Arg::Value(a), Arg::Value(b)) => a == b,
            (Arg::Int(a), Arg::Int(b)) => a == b,
            (Arg::Float(a), Arg::Float(b)) => a.to_bits() == b.to_bits(),
            (Arg::Bool(a), Arg::Bool(b)) => a == b,
            (Arg::Ints(a), Arg::Ints(b)) => a == b,
            (Arg::DType(a), Arg::DType(b)) => a == b,
            (Arg::Device(a), Arg::Device(b)) => a == b,
            (Arg::Str(a), Arg::Str(b)) => a == b,
            (Arg::None, Arg::None) => true,
            _ => false,
        }
    }
}

impl Eq for Arg {}

impl std::hash::Hash for Arg {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Arg::Value(v) => v.hash(state),
            Arg::Int(i) => i.hash(state),
            Arg::Float(x) => x.to_bits().hash(state),
            Arg::Bool(b) => b.hash(state),
            Arg::Ints(v) => v.hash(state),
            Arg::DType(d) => d.hash(state),
            Arg::Device(d) => d.hash(state),
            Arg::Str(s) => s.hash(state),
            Arg::None => {}
        }
    }
}

impl Arg {
    pub fn as_value(&self) -> Option<Value> {
        match self {
            Arg::Value(v) => Some(*v),
            _ => None,
        }
    }
}

impl From<f64> for Arg {
    fn from(x: f64) -> Self {
        Arg::Float(x)
    }
}
impl From<i64> for Arg {
    fn from(x: i64) -> Self {
        Arg::Int(x)
    }
}
impl From<bool> for Arg {
    fn from(x: bool) -> Self {
        Arg::Bool(x)
    }
}
