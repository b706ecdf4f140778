//! `jit`: trace a closure on first call for each input signature, compile it through the
//! plugin host, cache the result, and run cached programs on later calls.

use crate::error::{Error, Result};
use crate::host::exec_trace::ExecutionTrace;
use crate::host::PluginHost;
use crate::ir::{TensorType, Trace};
use crate::passes::default_passes;
use crate::runtime::{compile_with_static, Array, CompiledProgram};
use crate::tensor::Tensor;
use crate::trace_ctx::trace_with;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// Every stage of one compiled signature, for users to read.
#[derive(Debug, Clone)]
pub struct Traces {
    pub initial: Trace,
    /// One trace per pass, in order.
    pub passes: Vec<Trace>,
    pub execution: ExecutionTrace,
}

impl Traces {
    /// The trace handed to claiming (after all passes).
    pub fn final_trace(&self) -> &Trace {
        self.passes.last().unwrap_or(&self.initial)
    }
}

/// Runs the default passes on a trace and compiles it.
pub fn compile_trace(host: &PluginHost, initial: Trace) -> Result<(Traces, CompiledProgram)> {
    compile_trace_with_static(host, initial, &[])
}

/// [`compile_trace`] with static inputs (positions in `initial.inputs`; see
/// [`crate::runtime::program::compile_with_static`] for what the caller promises).
pub fn compile_trace_with_static(
    host: &PluginHost,
    initial: Trace,
    static_inputs: &[usize],
) -> Result<(Traces, CompiledProgram)> {
    let start = std::time::Instant::now();
    // Each pass reads the last trace kept and its output is kept as is: no trace is cloned
    // (a deep clone of GPT-2's backward costs about as much as a pass).
    let mut passes: Vec<Trace> = Vec::new();
    for pass in default_passes() {
        let next = pass.run(passes.last().unwrap_or(&initial))?;
        passes.push(next);
    }
    let passes_s = start.elapsed().as_secs_f64();
    let (execution, mut program) =
        compile_with_static(host, passes.last().unwrap_or(&initial), static_inputs)?;
    program.record_earlier_stage("passes", passes_s);
    Ok((
        Traces {
            initial,
            passes,
            execution,
        },
        program,
    ))
}

struct Entry {
    key: Vec<TensorType>,
    program: CompiledProgram,
    traces: Arc<Traces>,
    /// `traces` with the execution trace of the program's run fallback, once a run failure
    /// replaced it, tagged with [`CompiledProgram::fallbacks`] when made.
    fallback_traces: Mutex<Option<(usize, Arc<Traces>)>>,
}

impl Entry {
    /// The traces of what runs now: as compiled, or as re-compiled after run failures.
    fn current_traces(&self) -> Arc<Traces> {
        let n = self.program.fallbacks();
        let Some(execution) = self.program.fallback_execution().filter(|_| n > 0) else {
            return self.traces.clone();
        };
        let Ok(mut cached) = self.fallback_traces.lock() else {
            return self.traces.clone();
        };
        match &*cached {
            Some((k, t)) if *k == n => t.clone(),
            _ => {
                let t = Arc::new(Traces {
                    execution: execution.clone(),
                    ..(*self.traces).clone()
                });
                *cached = Some((n, t.clone()));
                t
            }
        }
    }
}

pub type TracedFn = dyn Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync;

/// What a traced function may return: its outputs, or a `Result` of them (so code inside it
/// can use `?` with the `Result`-returning ltorch functions and autograd).
pub trait IntoTraceOutputs {
    fn into_outputs(self) -> Result<Vec<Tensor>>;
}

impl IntoTraceOutputs for Vec<Tensor> {
    fn into_outputs(self) -> Result<Vec<Tensor>> {
        Ok(self)
    }
}

impl IntoTraceOutputs for Result<Vec<Tensor>> {
    fn into_outputs(self) -> Result<Vec<Tensor>> {
        self
    }
}

pub(crate) fn boxed<O: IntoTraceOutputs>(
    f: impl Fn(&[Tensor]) -> O + Send + Sync + 'static,
) -> Box<TracedFn> {
    Box::new(move |xs: &[Tensor]| f(xs).into_outputs())
}

/// Default names of traced inputs: `x0, x1, ...`, or the given ones.
pub(crate) fn input_names(names: &Option<Vec<String>>, n: usize) -> Result<Vec<String>> {
    match names {
        Some(given) if given.len() == n => Ok(given.clone()),
        Some(given) => Err(Error::Usage(format!(
            "{} input names given for {n} inputs",
            given.len()
        ))),
        None => Ok((0..n).map(|i| format!("x{i}")).collect()),
    }
}

/// A jitted function. Calls are thread-safe.
pub struct Jitted {
    f: Box<TracedFn>,
    host: HostCell,
    names: Option<Vec<String>>,
    cache: RwLock<Vec<Arc<Entry>>>,
    last: Mutex<Option<Arc<Traces>>>,
    misses: AtomicU64,
    hits: AtomicU64,
}

/// Jits `f` with the default plugin host ([`PluginHost::from_env`], loaded on first call).
pub fn jit<O: IntoTraceOutputs>(f: impl Fn(&[Tensor]) -> O + Send + Sync + 'static) -> Jitted {
    Jitted {
        f: boxed(f),
        host: OnceLock::new(),
        names: None,
        cache: RwLock::new(Vec::new()),
        last: Mutex::new(None),
        misses: AtomicU64::new(0),
        hits: AtomicU64::new(0),
    }
}

/// Jits `f` with a given plugin host.
pub fn jit_with<O: IntoTraceOutputs>(
    host: Arc<PluginHost>,
    f: impl Fn(&[Tensor]) -> O + Send + Sync + 'static,
) -> Jitted {
    let j = jit(f);
    let _ = j.host.set(Ok(host));
    j
}

pub(crate) type HostCell = OnceLock<std::result::Result<Arc<PluginHost>, Error>>;

pub(crate) fn default_host(cell: &HostCell) -> Result<&Arc<PluginHost>> {
    cell.get_or_init(|| PluginHost::from_env().map(Arc::new))
        .as_ref()
        .map_err(Clone::clone)
}

pub(crate) fn same_signature(key: &[TensorType], inputs: &[Array]) -> bool {
    key.len() == inputs.len() && key.iter().zip(inputs).all(|(k, a)| k == a.ty())
}

impl Jitted {
    /// Names the inputs in printed traces (default `x0, x1, ...`).
    pub fn with_input_names(mut self, names: &[&str]) -> Jitted {
        self.names = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }

    fn host(&self) -> Result<&Arc<PluginHost>> {
        default_host(&self.host)
    }

    fn lookup(&self, inputs: &[Array]) -> Option<Arc<Entry>> {
        let cache = self.cache.read().ok()?;
        cache
            .iter()
            .find(|e| same_signature(&e.key, inputs))
            .cloned()
    }

    /// Traces `f` for inputs of these types (no compilation).
    pub fn trace(&self, types: &[TensorType]) -> Result<Trace> {
        let names = input_names(&self.names, types.len())?;
        let inputs: Vec<(String, TensorType)> =
            names.into_iter().zip(types.iter().cloned()).collect();
        trace_with(&inputs, HashSet::new(), "Tracing", |proxies| {
            (self.f)(proxies)
        })
    }

    pub fn call(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        let entry = match self.lookup(inputs) {
            Some(e) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                e
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                let types: Vec<TensorType> = inputs.iter().map(|a| a.ty().clone()).collect();
                let trace = self.trace(&types)?;
                let (traces, program) = compile_trace(self.host()?, trace)?;
                let entry = Arc::new(Entry {
                    key: types,
                    program,
                    traces: Arc::new(traces),
                    fallback_traces: Mutex::new(None),
                });
                if let Ok(mut cache) = self.cache.write() {
                    cache.push(entry.clone());
                }
                entry
            }
        };
        let result = entry.program.run(inputs);
        // After the run: a run failure may have replaced the program (`run_fallback`).
        let traces = entry.current_traces();
        if let Ok(mut last) = self.last.lock() {
            if !last.as_ref().is_some_and(|l| Arc::ptr_eq(l, &traces)) {
                *last = Some(traces);
            }
        }
        result
    }

    /// The traces of the last call's signature; after a run fallback, its execution trace is
    /// the one the program runs now, with notes saying what failed.
    pub fn last_traces(&self) -> Option<Arc<Traces>> {
        self.last.lock().ok().and_then(|l| l.clone())
    }

    /// How many calls traced and compiled (cache misses).
    pub fn cache_misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    pub fn cache_hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
}
