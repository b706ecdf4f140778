//! `value_and_grad(f)`: a jitted function that returns `f`'s outputs and the gradients of its
//! first output with respect to the inputs marked `requires_grad`. Each input signature is
//! traced once into a joint trace, split into forward and backward traces, and both are
//! compiled through the same passes and claiming as any other program.

use super::{split_forward_backward, value_and_grad_in_trace};
use crate::error::{Error, Result};
use crate::host::PluginHost;
use crate::ir::{TensorType, Trace};
use crate::jit::{
    boxed, compile_trace, default_host, input_names, same_signature, HostCell, IntoTraceOutputs,
    TracedFn, Traces,
};
use crate::runtime::{Array, CompiledProgram, StepTime};
use crate::tensor::Tensor;
use crate::trace_ctx::trace_with;
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// Every stage of one differentiated signature.
#[derive(Debug, Clone)]
pub struct GradTraces {
    /// Forward and backward in one trace, as the grad transform built it.
    pub joint: Trace,
    pub forward: Traces,
    pub backward: Traces,
    /// Names of the inputs the gradients are taken with respect to.
    pub wrt: Vec<String>,
}

struct Entry {
    key: Vec<TensorType>,
    n_outputs: usize,
    forward: CompiledProgram,
    backward: CompiledProgram,
    traces: Arc<GradTraces>,
}

pub struct ValueAndGrad {
    f: Box<TracedFn>,
    host: HostCell,
    names: Option<Vec<String>>,
    cache: RwLock<Vec<Arc<Entry>>>,
    last: Mutex<Option<Arc<GradTraces>>>,
    misses: AtomicU64,
}

/// `value_and_grad(f)` with a given plugin host (`None`: the default host, loaded on first use).
pub fn value_and_grad<O: IntoTraceOutputs>(
    host: Option<Arc<PluginHost>>,
    f: impl Fn(&[Tensor]) -> O + Send + Sync + 'static,
) -> ValueAndGrad {
    let cell = OnceLock::new();
    if let Some(h) = host {
        let _ = cell.set(Ok(h));
    }
    ValueAndGrad {
        f: boxed(f),
        host: cell,
        names: None,
        cache: RwLock::new(Vec::new()),
        last: Mutex::new(None),
        misses: AtomicU64::new(0),
    }
}

impl ValueAndGrad {
    pub fn with_input_names(mut self, names: &[&str]) -> Self {
        self.names = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Builds the joint trace for these input types; returns it with its split point and the
    /// number of function outputs.
    pub fn joint_trace(&self, types: &[TensorType]) -> Result<(Trace, usize, usize)> {
        let wrt: Vec<usize> = types
            .iter()
            .enumerate()
            .filter(|(_, t)| t.requires_grad)
            .map(|(i, _)| i)
            .collect();
        if wrt.is_empty() {
            return Err(Error::Usage(
                "value_and_grad: no input requires grad; mark the inputs to differentiate with Array::with_requires_grad(true)".into(),
            ));
        }
        let names = input_names(&self.names, types.len())?;
        let inputs: Vec<(String, TensorType)> =
            names.into_iter().zip(types.iter().cloned()).collect();
        let forward_len = Cell::new(0);
        let n_outputs = Cell::new(0);
        let mut joint = trace_with(
            &inputs,
            HashSet::new(),
            "Grad transform (joint)",
            |proxies| {
                let r = value_and_grad_in_trace(proxies, &wrt, |xs| (self.f)(xs))?;
                forward_len.set(r.forward_len);
                n_outputs.set(r.outputs.len());
                Ok(r.outputs.into_iter().chain(r.grads).collect())
            },
        )?;
        joint.provenance = "Grad transform (joint)".into();
        Ok((joint, forward_len.get(), n_outputs.get()))
    }

    fn build(&self, inputs: &[Array]) -> Result<Arc<Entry>> {
        let types: Vec<TensorType> = inputs.iter().map(|a| a.ty().clone()).collect();
        let (joint, forward_len, n_outputs) = self.joint_trace(&types)?;
        let (fwd, bwd, _) = split_forward_backward(&joint, forward_len, n_outputs)?;
        let host = default_host(&self.host)?;
        let (fwd_traces, forward) = compile_trace(host, fwd)?;
        let (bwd_traces, backward) = compile_trace(host, bwd)?;
        let wrt = joint
            .inputs
            .iter()
            .filter(|&&v| joint.ty(v).requires_grad)
            .map(|&v| joint.name(v).to_string())
            .collect();
        let traces = Arc::new(GradTraces {
            joint,
            forward: fwd_traces,
            backward: bwd_traces,
            wrt,
        });
        Ok(Arc::new(Entry {
            key: types,
            n_outputs,
            forward,
            backward,
            traces,
        }))
    }

    /// Returns `(outputs, gradients)`, one gradient per `requires_grad` input, in input order.
    pub fn call(&self, inputs: &[Array]) -> Result<(Vec<Array>, Vec<Array>)> {
        let entry = self.entry(inputs)?;
        let mut outs = entry.forward.run(inputs)?;
        let saved = outs.split_off(entry.n_outputs);
        let grads = entry.backward.run(&saved)?;
        Ok((outs, grads))
    }

    /// Like [`call`](Self::call), timing each region of the forward and of the backward
    /// program (for `thunder bench --grad`): `(outputs, gradients, forward, backward)`.
    #[allow(clippy::type_complexity)]
    pub fn call_profiled(
        &self,
        inputs: &[Array],
    ) -> Result<(Vec<Array>, Vec<Array>, Vec<StepTime>, Vec<StepTime>)> {
        let entry = self.entry(inputs)?;
        let (mut outs, fwd) = entry.forward.run_profiled(inputs)?;
        let saved = outs.split_off(entry.n_outputs);
        let (grads, bwd) = entry.backward.run_profiled(&saved)?;
        Ok((outs, grads, fwd, bwd))
    }

    fn entry(&self, inputs: &[Array]) -> Result<Arc<Entry>> {
        let found = self
            .cache
            .read()
            .ok()
            .and_then(|c| c.iter().find(|e| same_signature(&e.key, inputs)).cloned());
        let entry = match found {
            Some(e) => e,
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                let e = self.build(inputs)?;
                if let Ok(mut c) = self.cache.write() {
                    c.push(e.clone());
                }
                e
            }
        };
        if let Ok(mut last) = self.last.lock() {
            *last = Some(entry.traces.clone());
        }
        Ok(entry)
    }

    pub fn last_traces(&self) -> Option<Arc<GradTraces>> {
        self.last.lock().ok().and_then(|l| l.clone())
    }

    pub fn cache_misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }
}

/// `grad(f)`: like [`value_and_grad`], returning only the gradients.
pub struct Grad(pub ValueAndGrad);

pub fn grad<O: IntoTraceOutputs>(
    host: Option<Arc<PluginHost>>,
    f: impl Fn(&[Tensor]) -> O + Send + Sync + 'static,
) -> Grad {
    Grad(value_and_grad(host, f))
}

impl Grad {
    pub fn call(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        self.0.call(inputs).map(|(_, grads)| grads)
    }
}
