//! Building the ABI's trace view from a list of bound symbols.

use crate::ir::{Arg, BoundSymbol, Trace};
use thunder_abi::abi_stable::std_types::{RString, RVec};
use thunder_abi::{ArgView, OpView, TraceView, ValueMeta};

pub fn arg_view(arg: &Arg) -> ArgView {
    match arg {
        Arg::Value(v) => ArgView::Value(v.0),
        Arg::Int(i) => ArgView::Int(*i),
        Arg::Float(x) => ArgView::Float(*x),
        Arg::Bool(b) => ArgView::Bool(*b),
        Arg::Ints(v) => ArgView::Ints(v.clone().into()),
        Arg::DType(d) => ArgView::DType(*d),
        Arg::Device(d) => ArgView::Device(d.to_desc()),
        Arg::Str(s) => ArgView::Str(RString::from(s.as_str())),
        Arg::None => ArgView::None,
    }
}

pub fn op_view(b: &BoundSymbol) -> OpView {
    OpView {
        symbol: RString::from(b.sym.id),
        args: b.args.iter().map(arg_view).collect(),
        outputs: b.outputs.iter().map(|v| v.0).collect(),
        claimed: false,
        composite: b.sym.is_composite(),
    }
}

pub fn value_metas(trace: &Trace) -> RVec<ValueMeta> {
    trace
        .values
        .iter()
        .map(|v| ValueMeta {
            shape: v.ty.shape.clone().into(),
            dtype: v.ty.dtype,
            device: v.ty.device.to_desc(),
            requires_grad: v.ty.requires_grad,
        })
        .collect()
}

pub fn trace_view(trace: &Trace, bsyms: &[BoundSymbol]) -> TraceView {
    TraceView {
        values: value_metas(trace),
        ops: bsyms.iter().map(op_view).collect(),
        inputs: trace.inputs.iter().map(|v| v.0).collect(),
        outputs: trace.outputs.iter().map(|v| v.0).collect(),
    }
}
