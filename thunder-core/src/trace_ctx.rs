//! The tracing context: while a function is traced, proxies record bound symbols here.
//!
//! Contexts form a thread-local stack, so tracing may nest (the parser traces composites while
//! it builds a trace). Errors are sticky: the first error stops recording, later ops become
//! no-ops, and the error is returned by whoever finishes the trace.

use crate::error::{Error, Result};
use crate::ir::{
    Arg, BoundSymbol, CustomOp, Symbol, SymbolKind, TensorType, Trace, Value, ValueInfo,
};
use crate::prims::meta::prim_meta;
use crate::tensor::Tensor;
use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;
use thunder_abi::abi_stable::std_types::{RSlice, RStr};
use thunder_abi::{ArgView, ValueMeta};

struct Scope {
    bsyms: Vec<BoundSymbol>,
}

pub(crate) struct Builder {
    values: Vec<ValueInfo>,
    scopes: Vec<Scope>,
    reserved: HashSet<String>,
    next_name: u32,
    error: Option<Error>,
}

thread_local! {
    static STACK: RefCell<Vec<Builder>> = const { RefCell::new(Vec::new()) };
}

fn with_builder<R>(f: impl FnOnce(&mut Builder) -> Result<R>) -> Result<R> {
    STACK.with(|stack| {
        let mut stack = stack.borrow_mut();
        match stack.last_mut() {
            Some(b) => f(b),
            None => Err(Error::Usage(
                "a tensor op was called outside of a trace (Tensor proxies only live inside a jitted function)".into(),
            )),
        }
    })
}

impl Builder {
    fn fresh_name(&mut self) -> String {
        loop {
            let name = format!("t{}", self.next_name);
            self.next_name += 1;
            if !self.reserved.contains(&name) {
                return name;
            }
        }
    }

    fn new_value(&mut self, name: String, ty: TensorType) -> Value {
        let v = Value(self.values.len() as u32);
        self.values.push(ValueInfo { name, ty });
        v
    }

    fn ty(&self, v: Value) -> Result<&TensorType> {
        self.values
            .get(v.index())
            .map(|i| &i.ty)
            .ok_or_else(|| Error::Bug(format!("value {} is not in this trace", v.0)))
    }

    fn check_clean(&self) -> Result<()> {
        match self.error {
            // Ops after the first error are no-ops; this error is never the one reported.
            Some(_) => Err(Error::Bug("op recorded after an earlier error".into())),
            None => Ok(()),
        }
    }
}

/// Removes the builder from the stack even if the traced closure panics.
struct PopOnDrop;

impl Drop for PopOnDrop {
    fn drop(&mut self) {
        STACK.with(|s| s.borrow_mut().pop());
    }
}

/// Traces `body` on proxies of `inputs` (name, type) into a trace.
/// `reserved` names are never generated (the parser passes every name its text uses).
pub fn trace_with<F>(
    inputs: &[(String, TensorType)],
    reserved: HashSet<String>,
    provenance: &str,
    body: F,
) -> Result<Trace>
where
    F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
{
    let mut builder = Builder {
        values: Vec::new(),
        scopes: vec![Scope { bsyms: Vec::new() }],
        reserved,
        next_name: 0,
        error: None,
    };
    let mut proxies = Vec::with_capacity(inputs.len());
    let mut seen = HashSet::new();
    for (name, ty) in inputs {
        if !seen.insert(name.as_str()) {
            return Err(Error::Usage(format!("input name `{name}` is used twice")));
        }
        let v = builder.new_value(name.clone(), ty.clone());
        proxies.push(Tensor::new(v, Arc::new(ty.clone())));
    }
    let input_values: Vec<Value> = proxies.iter().map(Tensor::value).collect();
    STACK.with(|s| s.borrow_mut().push(builder));
    let guard = PopOnDrop;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&proxies)));
    let builder = STACK.with(|s| s.borrow_mut().pop());
    std::mem::forget(guard);
    let mut builder = builder.ok_or_else(|| Error::Bug("tracing context vanished".into()))?;
    let outputs = match result {
        Err(_) => return Err(Error::Usage("the traced function panicked".into())),
        Ok(r) => r,
    };
    if let Some(e) = builder.error.take() {
        return Err(e);
    }
    let outputs = outputs?;
    let mut output_values = Vec::with_capacity(outputs.len());
    for t in &outputs {
        if t.is_poisoned() {
            return Err(Error::Bug("poisoned output without an error".into()));
        }
        output_values.push(t.value());
    }
    let scope = builder
        .scopes
        .pop()
        .ok_or_else(|| Error::Bug("scope stack empty".into()))?;
    Ok(Trace {
        fn_name: "computation".into(),
        values: builder.values,
        inputs: input_values,
        bsyms: scope.bsyms,
        outputs: output_values,
        provenance: provenance.into(),
    })
}

/// Records the first error of a trace and hands back a poisoned tensor, so operator
/// overloads can keep an infallible signature.
pub fn sticky(result: Result<Tensor>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => {
            let _ = with_builder(|b| {
                if b.error.is_none() {
                    b.error = Some(e);
                }
                Ok(())
            });
            Tensor::poisoned()
        }
    }
}

fn arg_types(b: &Builder, args: &[Arg]) -> Result<Vec<Option<TensorType>>> {
    args.iter()
        .map(|a| match a {
            Arg::Value(v) => b.ty(*v).cloned().map(Some),
            _ => Ok(None),
        })
        .collect()
}

/// [`bind`] of a one-output symbol.
pub fn bind1(sym: &'static Symbol, args: Vec<Arg>) -> Result<Tensor> {
    bind(sym, args)?
        .pop()
        .ok_or_else(|| Error::Bug(format!("{} returned no output", sym.id)))
}

/// Binds a symbol: a prim runs its meta; a composite traces its decomposition in a new scope,
/// whose bound symbols become the subsymbols; a plugin's op runs the plugin's meta and, if it
/// has a decomposition, is recorded like a composite.
pub fn bind(sym: &'static Symbol, args: Vec<Arg>) -> Result<Vec<Tensor>> {
    if args
        .iter()
        .any(|a| matches!(a, Arg::Value(v) if *v == Value::POISON))
    {
        return Err(Error::Bug("poisoned input".into()));
    }
    match sym.kind {
        SymbolKind::Prim(prim) => {
            let out_types = with_builder(|b| {
                b.check_clean()?;
                prim_meta(prim, &args, &arg_types(b, &args)?)
            })?;
            bind_leaf(sym, args, out_types)
        }
        SymbolKind::Composite(decompose) => bind_decomposed(sym, args, |args| {
            decompose(&crate::ir::CallArgs { op: sym.id, args })
        }),
        SymbolKind::Custom(op) => {
            let out_types = with_builder(|b| {
                b.check_clean()?;
                custom_meta(sym.id, op, &args, &arg_types(b, &args)?)
            })?;
            let Some(decomposition) = &op.decomposition else {
                return bind_leaf(sym, args, out_types);
            };
            bind_decomposed(sym, args, |args| {
                let tensors = args
                    .iter()
                    .filter_map(Arg::as_value)
                    .map(tensor_of)
                    .collect::<Result<Vec<_>>>()?;
                let outs = replay(decomposition, &tensors)?;
                let computed: Vec<&TensorType> = outs.iter().map(Tensor::ty).collect();
                let declared: Vec<&TensorType> = out_types.iter().collect();
                if computed != declared {
                    return Err(Error::op(
                        sym.id,
                        format!("the decomposition from plugin `{}` computes {computed:?} but the op's meta says {declared:?}", op.plugin),
                    ));
                }
                Ok(outs)
            })
        }
    }
}

/// Records `sym` with fresh outputs of the given types and no subsymbols.
fn bind_leaf(
    sym: &'static Symbol,
    args: Vec<Arg>,
    out_types: Vec<TensorType>,
) -> Result<Vec<Tensor>> {
    with_builder(|b| {
        let mut outputs = Vec::with_capacity(out_types.len());
        let mut tensors = Vec::with_capacity(out_types.len());
        for ty in out_types {
            let name = b.fresh_name();
            let ty = Arc::new(ty);
            let v = b.new_value(name, (*ty).clone());
            outputs.push(v);
            tensors.push(Tensor::new(v, ty));
        }
        current_scope(b)?.bsyms.push(BoundSymbol {
            sym,
            args,
            outputs,
            subsymbols: Vec::new(),
        });
        Ok(tensors)
    })
}

/// Records `sym` with the bound symbols `decompose` records as its subsymbols.
fn bind_decomposed(
    sym: &'static Symbol,
    args: Vec<Arg>,
    decompose: impl FnOnce(&[Arg]) -> Result<Vec<Tensor>>,
) -> Result<Vec<Tensor>> {
    let first_new_value = with_builder(|b| {
        b.check_clean()?;
        b.scopes.push(Scope { bsyms: Vec::new() });
        Ok(b.values.len() as u32)
    })?;
    let result = decompose(&args);
    with_builder(|b| {
        let scope = b
            .scopes
            .pop()
            .ok_or_else(|| Error::Bug("scope stack empty".into()))?;
        if let Some(e) = b.error.take() {
            return Err(e.within(sym.id));
        }
        let outputs = result.map_err(|e| e.within(sym.id))?;
        if outputs.iter().any(Tensor::is_poisoned) {
            return Err(Error::Bug(format!(
                "{}: poisoned output without an error",
                sym.id
            )));
        }
        let parent = current_scope(b)?;
        // A decomposition that hands back a value made before it started (e.g. a reshape to
        // the same shape) is not recorded: its output would redefine a name.
        if outputs.iter().any(|t| t.value().0 < first_new_value) {
            parent.bsyms.extend(scope.bsyms);
        } else {
            parent.bsyms.push(BoundSymbol {
                sym,
                args,
                outputs: outputs.iter().map(Tensor::value).collect(),
                subsymbols: scope.bsyms,
            });
        }
        Ok(outputs)
    })
}

/// Calls a plugin op's meta across the ABI.
fn custom_meta(
    id: &str,
    op: &CustomOp,
    args: &[Arg],
    types: &[Option<TensorType>],
) -> Result<Vec<TensorType>> {
    let mut values = Vec::new();
    let views: Vec<ArgView> = args
        .iter()
        .zip(types)
        .map(|(a, t)| match t {
            Some(t) => {
                values.push(ValueMeta {
                    shape: t.shape.clone().into(),
                    dtype: t.dtype,
                    device: t.device.to_desc(),
                    requires_grad: t.requires_grad,
                });
                ArgView::Value(values.len() as u32 - 1)
            }
            None => crate::host::view::arg_view(a),
        })
        .collect();
    let out = (op.meta)(
        RStr::from(id),
        RSlice::from_slice(&views),
        RSlice::from_slice(&values),
    )
    .into_result()
    .map_err(|e| {
        Error::op(
            id,
            format!("{} (meta of plugin `{}`)", e.message, op.plugin),
        )
    })?;
    Ok(out
        .into_iter()
        .map(|m| {
            TensorType::new(
                m.shape.into_vec(),
                m.dtype,
                crate::device::Device::from_desc(m.device),
            )
        })
        .collect())
}

fn current_scope(b: &mut Builder) -> Result<&mut Scope> {
    b.scopes
        .last_mut()
        .ok_or_else(|| Error::Bug("scope stack empty".into()))
}

/// Renames a value of the trace being built (the parser gives values their written names).
pub(crate) fn rename_value(v: Value, name: &str) -> Result<()> {
    with_builder(|b| {
        let info = b
            .values
            .get_mut(v.index())
            .ok_or_else(|| Error::Bug(format!("value {} is not in this trace", v.0)))?;
        info.name = name.to_string();
        Ok(())
    })
}

/// The bound symbols recorded so far in the current scope (the parser inspects the last one).
pub(crate) fn with_last_bsym<R>(f: impl FnOnce(Option<&mut BoundSymbol>) -> R) -> Result<R> {
    with_builder(|b| Ok(f(current_scope(b)?.bsyms.last_mut())))
}

pub(crate) fn scope_len() -> Result<usize> {
    with_builder(|b| Ok(current_scope(b)?.bsyms.len()))
}

/// A proxy for a value of the trace being built.
pub fn tensor_of(v: Value) -> Result<Tensor> {
    with_builder(|b| Ok(Tensor::new(v, Arc::new(b.ty(v)?.clone()))))
}

/// Takes the trace's recorded error, if any (autograd checks it after running user code).
pub(crate) fn take_error() -> Result<Option<Error>> {
    with_builder(|b| Ok(b.error.take()))
}

/// Replaces the current scope's bound symbols from `start` on by their decomposition down to
/// prims, keeping the composites for which `keep` holds, and returns the new list.
pub(crate) fn flatten_scope_from(
    start: usize,
    keep: &dyn Fn(&Symbol) -> bool,
) -> Result<Vec<BoundSymbol>> {
    fn flatten(b: BoundSymbol, keep: &dyn Fn(&Symbol) -> bool, out: &mut Vec<BoundSymbol>) {
        if b.sym.is_composite() && !keep(b.sym) {
            for sub in b.subsymbols {
                flatten(sub, keep, out);
            }
        } else {
            out.push(b);
        }
    }
    with_builder(|b| {
        let scope = current_scope(b)?;
        if start > scope.bsyms.len() {
            return Err(Error::Bug(format!(
                "flatten from {start} past the end of the scope"
            )));
        }
        let tail: Vec<BoundSymbol> = scope.bsyms.drain(start..).collect();
        let mut flat = Vec::new();
        for bsym in tail {
            flatten(bsym, keep, &mut flat);
        }
        scope.bsyms.extend(flat.iter().cloned());
        Ok(flat)
    })
}

/// Records `trace` again in the current trace, on `inputs` (one per trace input).
pub fn replay(trace: &Trace, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    if inputs.len() != trace.inputs.len() {
        return Err(Error::Usage(format!(
            "replay: {} inputs for a trace of {}",
            inputs.len(),
            trace.inputs.len()
        )));
    }
    let mut env: std::collections::HashMap<Value, Tensor> = trace
        .inputs
        .iter()
        .copied()
        .zip(inputs.iter().cloned())
        .collect();
    for b in &trace.bsyms {
        let mut args = Vec::with_capacity(b.args.len());
        for a in &b.args {
            args.push(match a {
                Arg::Value(v) => Arg::Value(
                    env.get(v)
                        .ok_or_else(|| {
                            Error::Bug(format!("replay: value {} used before definition", v.0))
                        })?
                        .value(),
                ),
                other => other.clone(),
            });
        }
        let outs = bind(b.sym, args)?;
        for (&old, new) in b.outputs.iter().zip(outs) {
            env.insert(old, new);
        }
    }
    trace
        .outputs
        .iter()
        .map(|v| {
            env.get(v)
                .cloned()
                .ok_or_else(|| Error::Bug(format!("replay: output {} never defined", v.0)))
        })
        .collect()
}

pub(crate) fn value_name(v: Value) -> Result<String> {
    with_builder(|b| {
        b.values
            .get(v.index())
            .map(|i| i.name.clone())
            .ok_or_else(|| Error::Bug(format!("value {} is not in this trace", v.0)))
    })
}
