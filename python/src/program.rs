//! A program recorded by the Python tracer (ltorch calls on numbered values), replayed through
//! thunder-core's tracer, transformed and compiled like any other trace.
//!
//! Spec format (built by `thunder_rs/_trace.py`):
//! - inputs: `(name, shape, dtype, device, requires_grad)`; input `i` is value `i`;
//! - ops: `(symbol, args, outputs, where)` with `args` tagged tuples (`("v", value)`,
//!   `("i", int)`, `("f", float)`, `("b", bool)`, `("n",)`, `("s", str)`, `("I", [int])`,
//!   `("d", dtype)`), `outputs` a list of `(value, shape, dtype)` as torch computed them, and
//!   `where` the user's source line, for errors;
//! - outputs: value numbers.

use crate::dlpack::{array_from_capsule, capsule_from_array};
use crate::host::host;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::cell::Cell;
use std::collections::HashSet;
use std::time::Instant;
use thunder_core::autograd::{split_forward_backward_vjp, vjp_in_trace};
use thunder_core::host::exec_trace::ExecutionTrace;
use thunder_core::ir::{Arg, TensorType};
use thunder_core::jit::{compile_trace, Traces};
use thunder_core::runtime::CompiledProgram;
use thunder_core::text::print_trace;
use thunder_core::trace_ctx::trace_with;
use thunder_core::{Array, DType, Device, Error, Tensor};

type Checked = (Vec<i64>, DType);

/// One recorded call, converted from Python.
struct Op {
    symbol: String,
    args: Vec<OpArg>,
    /// Value number, and torch's shape and dtype when recorded (checked on replay).
    outputs: Vec<(usize, Option<Checked>)>,
    site: String,
}

pub(crate) enum OpArg {
    Value(usize),
    Lit(Arg),
}

fn dtype_of(name: &str) -> PyResult<DType> {
    DType::from_short_name(name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown dtype `{name}`")))
}

pub(crate) fn parse_arg(a: &Bound<'_, PyAny>) -> PyResult<OpArg> {
    let tag: String = a.get_item(0)?.extract()?;
    let v = || a.get_item(1);
    Ok(match tag.as_str() {
        "v" => OpArg::Value(v()?.extract()?),
        "i" => OpArg::Lit(Arg::Int(v()?.extract()?)),
        "f" => OpArg::Lit(Arg::Float(v()?.extract()?)),
        "b" => OpArg::Lit(Arg::Bool(v()?.extract()?)),
        "n" => OpArg::Lit(Arg::None),
        "s" => OpArg::Lit(Arg::Str(v()?.extract()?)),
        "I" => OpArg::Lit(Arg::Ints(v()?.extract()?)),
        "d" => OpArg::Lit(Arg::DType(dtype_of(&v()?.extract::<String>()?)?)),
        "D" => {
            let s: String = v()?.extract()?;
            OpArg::Lit(Arg::Device(Device::parse(&s).ok_or_else(|| {
                PyValueError::new_err(format!("unknown device `{s}`"))
            })?))
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown argument tag `{other}`"
            )))
        }
    })
}

fn parse_ops(ops: &Bound<'_, PyList>) -> PyResult<Vec<Op>> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops.iter() {
        let symbol: String = op.get_item(0)?.extract()?;
        let args = op
            .get_item(1)?
            .try_iter()?
            .map(|a| parse_arg(&a?))
            .collect::<PyResult<Vec<_>>>()?;
        let mut outputs = Vec::new();
        for o in op.get_item(2)?.try_iter()? {
            let o = o?;
            let (v, shape, dt): (usize, Option<Vec<i64>>, Option<String>) = o.extract()?;
            let checked = match (shape, dt) {
                (Some(s), Some(d)) => Some((s, dtype_of(&d)?)),
                _ => None,
            };
            outputs.push((v, checked));
        }
        let site: String = op.get_item(3)?.extract()?;
        out.push(Op {
            symbol,
            args,
            outputs,
            site,
        });
    }
    Ok(out)
}

/// Replays the recorded ops on the trace's proxies; checks every output against torch's.
fn replay(ops: &[Op], inputs: &[Tensor], outputs: &[usize]) -> thunder_core::Result<Vec<Tensor>> {
    let mut values: Vec<Option<Tensor>> = inputs.iter().cloned().map(Some).collect();
    let get = |values: &Vec<Option<Tensor>>, v: usize, op: &Op| {
        values.get(v).cloned().flatten().ok_or_else(|| {
            Error::Bug(format!(
                "{}: value {v} used before it is defined ({})",
                op.symbol, op.site
            ))
        })
    };
    for op in ops {
        let mut args = Vec::with_capacity(op.args.len());
        for a in &op.args {
            args.push(match a {
                OpArg::Value(v) => Arg::Value(get(&values, *v, op)?.value()),
                OpArg::Lit(l) => l.clone(),
            });
        }
        let outs = thunder_torch::call(&op.symbol, args)
            .map_err(|e| Error::Usage(format!("{} (called at {}): {e}", op.symbol, op.site)))?;
        if outs.len() != op.outputs.len() {
            return Err(Error::Bug(format!(
                "{} (at {}): thunder-rs gave {} outputs, torch {}",
                op.symbol,
                op.site,
                outs.len(),
                op.outputs.len()
            )));
        }
        for (t, (v, checked)) in outs.into_iter().zip(&op.outputs) {
            if let Some((shape, dtype)) = checked
                .as_ref()
                .filter(|(s, d)| t.shape() != s.as_slice() || t.dtype() != *d)
            {
                return Err(Error::Bug(format!(
                    "{} (at {}): thunder-rs computed {} {:?}, torch {} {:?}",
                    op.symbol,
                    op.site,
                    t.dtype().short_name(),
                    t.shape(),
                    dtype.short_name(),
                    shape
                )));
            }
            if values.len() <= *v {
                values.resize(*v + 1, None);
            }
            values[*v] = Some(t);
        }
    }
    outputs
        .iter()
        .map(|&v| {
            values
                .get(v)
                .cloned()
                .flatten()
                .ok_or_else(|| Error::Bug(format!("output value {v} is never defined")))
        })
        .collect()
}

fn err(e: Error) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// Seconds spent in each stage of building a program, in order.
type Timings = Vec<(&'static str, f64)>;

fn timed<T>(timings: &mut Timings, stage: &'static str, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let r = f();
    timings.push((stage, t0.elapsed().as_secs_f64()));
    r
}

fn print_traces(t: &Traces) -> Vec<String> {
    let mut v = vec![print_trace(&t.initial)];
    v.extend(t.passes.iter().map(print_trace));
    v.push(ExecutionTrace::print(&t.execution));
    v
}

/// A compiled signature: a forward program and, when some input requires grad, the backward
/// program of its vector-Jacobian product.
#[pyclass(module = "thunder_rs._native", frozen)]
pub struct Program {
    forward: CompiledProgram,
    backward: Option<CompiledProgram>,
    n_outputs: usize,
    input_types: Vec<TensorType>,
    /// Kept unprinted: printing a large model's traces costs more than compiling it, and
    /// only `traces()` needs the text.
    joint: Option<thunder_core::ir::Trace>,
    forward_traces: Traces,
    backward_traces: Option<Traces>,
    timings: Timings,
}

/// What the forward saved for the backward.
#[pyclass(module = "thunder_rs._native", frozen)]
pub struct Saved(Vec<Array>);

#[pymethods]
impl Program {
    /// Traces and compiles. `grad`: build the backward too (only if some input requires grad);
    /// it then takes one cotangent per output listed in `cotangent_outputs`.
    #[new]
    /// `cuda_graphs`: replay as CUDA graphs (`None`: as the plugin host's config says).
    #[pyo3(signature = (inputs, ops, outputs, grad_outputs=None, cuda_graphs=None))]
    fn new(
        py: Python<'_>,
        inputs: Vec<(String, Vec<i64>, String, String, bool)>,
        ops: &Bound<'_, PyList>,
        outputs: Vec<usize>,
        grad_outputs: Option<Vec<usize>>,
        cuda_graphs: Option<bool>,
    ) -> PyResult<Program> {
        let ops = parse_ops(ops)?;
        let mut typed = Vec::with_capacity(inputs.len());
        for (name, shape, dt, dev, rg) in inputs {
            let device = Device::parse(&dev).ok_or_else(|| {
                PyValueError::new_err(format!("input {name}: unknown device `{dev}`"))
            })?;
            let mut ty = TensorType::new(shape, dtype_of(&dt)?, device);
            ty.requires_grad = rg;
            typed.push((name, ty));
        }
        let input_types: Vec<TensorType> = typed.iter().map(|(_, t)| t.clone()).collect();
        let host = host().map_err(err)?;
        let built = py.detach(move || {
            let n_in = typed.len();
            let wrt: Vec<usize> = (0..n_in).filter(|&i| typed[i].1.requires_grad).collect();
            match grad_outputs.filter(|_| !wrt.is_empty()) {
                None => {
                    let mut timings = Timings::new();
                    let trace = timed(&mut timings, "replay", || {
                        trace_with(&typed, HashSet::new(), "Python tracing", |xs| {
                            replay(&ops, xs, &outputs)
                        })
                    })
                    .map_err(err)?;
                    let (traces, program) = timed(&mut timings, "passes + claim + compile", || {
                        compile_trace(&host, trace)
                    })
                    .map_err(err)?;
                    Ok(Program {
                        forward: program,
                        backward: None,
                        n_outputs: outputs.len(),
                        input_types,
                        joint: None,
                        forward_traces: traces,
                        backward_traces: None,
                        timings,
                    })
                }
                Some(grad_outputs) => build_grad(
                    &host,
                    typed,
                    &ops,
                    &outputs,
                    &grad_outputs,
                    &wrt,
                    input_types,
                ),
            }
        });
        let mut program: Program = built?;
        if let Some(b) = program.backward.as_mut() {
            // The residuals: the backward frees them (the Python side drops them after it).
            program.forward.keep_outputs_in_graph(program.n_outputs);
            // The gradients: torch accumulates them into `.grad` (taking the tensor when it can)
            // and `zero_grad` drops them before the next backward. A gradient still held then
            // makes that backward run region by region, as any held output does; copying the
            // small ones out of every replay (the biases' and norms', 99 of GPT-2's 148) cost
            // 0.13 ms a step on an H100.
            b.keep_outputs_in_graph(0);
        }
        if let Some(on) = cuda_graphs {
            program.forward.set_cuda_graphs(on);
            if let Some(b) = program.backward.as_mut() {
                b.set_cuda_graphs(on);
            }
        }
        Ok(program)
    }

    /// Runs the forward on `dltensor` capsules; returns the outputs' capsules and, with a
    /// backward, what it needs. `stream`: the caller's current CUDA stream (a `CUstream`, as
    /// `torch.cuda.current_stream().cuda_stream`): the run is ordered after the work pending
    /// on it and the stream after the run, with no host wait. Without one, the host waits for
    /// the run.
    #[pyo3(signature = (capsules, stream=None))]
    fn forward(
        &self,
        py: Python<'_>,
        capsules: &Bound<'_, PyList>,
        stream: Option<usize>,
    ) -> PyResult<(Vec<Py<PyAny>>, Option<Saved>)> {
        if capsules.len() != self.input_types.len() {
            return Err(PyValueError::new_err(format!(
                "expected {} inputs, got {}",
                self.input_types.len(),
                capsules.len()
            )));
        }
        let mut arrays = Vec::with_capacity(capsules.len());
        for (i, c) in capsules.iter().enumerate() {
            let ty = &self.input_types[i];
            let a = array_from_capsule(&c, ty.requires_grad, "input")?;
            if a.ty() != ty {
                return Err(PyValueError::new_err(format!(
                    "input {i}: expected {ty}, got {}",
                    a.ty()
                )));
            }
            arrays.push(a);
        }
        let mut outs = py
            .detach(|| {
                self.enter(stream)?;
                let outs = self.forward.run(&arrays)?;
                self.leave(stream)?;
                Ok(outs)
            })
            .map_err(err)?;
        drop(arrays);
        let saved = self
            .backward
            .as_ref()
            .map(|_| Saved(outs.split_off(self.n_outputs)));
        let caps = outs
            .into_iter()
            .map(|a| capsule_from_array(py, a, stream))
            .collect::<PyResult<Vec<_>>>()?;
        Ok((caps, saved))
    }

    /// Runs the backward on the saved values and the cotangents (capsules); returns one
    /// gradient capsule per input that requires grad. `stream` as for `forward`.
    #[pyo3(signature = (saved, cotangents, stream=None))]
    fn backward(
        &self,
        py: Python<'_>,
        saved: &Saved,
        cotangents: &Bound<'_, PyList>,
        stream: Option<usize>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let bw = self
            .backward
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("this program has no backward"))?;
        let mut arrays = saved.0.clone();
        for c in cotangents.iter() {
            arrays.push(array_from_capsule(&c, false, "cotangent")?);
        }
        let grads = py
            .detach(|| {
                self.enter(stream)?;
                let grads = bw.run(&arrays)?;
                self.leave(stream)?;
                Ok(grads)
            })
            .map_err(err)?;
        grads
            .into_iter()
            .map(|a| capsule_from_array(py, a, stream))
            .collect()
    }

    /// Printed traces: the initial trace, one per pass, and the execution trace (for a
    /// differentiated program: the joint trace's forward stages, then the backward's).
    fn traces(&self) -> Vec<String> {
        let mut v: Vec<String> = self.joint.iter().map(print_trace).collect();
        v.extend(print_traces(&self.forward_traces));
        if let Some(b) = &self.backward_traces {
            v.extend(print_traces(b));
        }
        v
    }

    /// Runs the forward once on `capsules`, timing each region call: `[(executor, region,
    /// seconds)]`, region numbers as in the execution trace. For finding where a call's time
    /// goes; the outputs are dropped.
    /// `wait=False`: CUDA regions are not waited for, so each time is the host's cost of the
    /// region call alone.
    #[pyo3(signature = (capsules, wait=true))]
    fn profile_forward(
        &self,
        py: Python<'_>,
        capsules: &Bound<'_, PyList>,
        wait: bool,
    ) -> PyResult<Vec<(String, usize, f64)>> {
        let mut arrays = Vec::with_capacity(capsules.len());
        for (i, c) in capsules.iter().enumerate() {
            let ty = self.input_types.get(i).ok_or_else(|| {
                PyValueError::new_err(format!("expected {} inputs", self.input_types.len()))
            })?;
            arrays.push(array_from_capsule(&c, ty.requires_grad, "input")?);
        }
        let (_, steps) = py
            .detach(|| self.forward.run_timed(&arrays, wait))
            .map_err(err)?;
        Ok(steps
            .into_iter()
            .map(|s| (s.executor, s.region, s.seconds))
            .collect())
    }

    /// Runs the backward once on `saved` and `cotangents` (capsules), timing each region call
    /// as `profile_forward` does.
    #[pyo3(signature = (saved, cotangents, wait=true))]
    fn profile_backward(
        &self,
        py: Python<'_>,
        saved: &Saved,
        cotangents: &Bound<'_, PyList>,
        wait: bool,
    ) -> PyResult<Vec<(String, usize, f64)>> {
        let bw = self
            .backward
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("this program has no backward"))?;
        let mut arrays = saved.0.clone();
        for c in cotangents.iter() {
            arrays.push(array_from_capsule(&c, false, "cotangent")?);
        }
        let (_, steps) = py.detach(|| bw.run_timed(&arrays, wait)).map_err(err)?;
        Ok(steps
            .into_iter()
            .map(|s| (s.executor, s.region, s.seconds))
            .collect())
    }

    /// Seconds spent building this program, by stage: `[(stage, seconds)]`.
    fn timings(&self) -> Vec<(&'static str, f64)> {
        self.timings.clone()
    }

    /// Seconds spent inside each side's "passes + claim + compile", finer:
    /// `[(side, stage, seconds)]` with side `forward` or `backward` and stages `passes`,
    /// `executors`, `claim`, `compile NAME (N regions)` and `compile, elapsed (T threads)`.
    fn build_stages(&self) -> Vec<(&'static str, String, f64)> {
        let sides = std::iter::once(("forward", &self.forward))
            .chain(self.backward.as_ref().map(|b| ("backward", b)));
        sides
            .flat_map(|(side, p)| {
                p.build_stages()
                    .iter()
                    .map(move |(stage, s)| (side, stage.clone(), *s))
            })
            .collect()
    }

    /// What CUDA-graph replay did for each side: `[(side, captures, graph_runs, eager_runs,
    /// off)]`, for the sides that replay (every value on one CUDA device, replay on).
    fn graph_stats(&self) -> Vec<(&'static str, u64, u64, u64, bool)> {
        std::iter::once(("forward", &self.forward))
            .chain(self.backward.as_ref().map(|b| ("backward", b)))
            .filter_map(|(side, p)| {
                p.graph_stats()
                    .map(|g| (side, g.captures, g.graph_runs, g.eager_runs, g.off))
            })
            .collect()
    }

    #[getter]
    fn has_backward(&self) -> bool {
        self.backward.is_some()
    }
}

impl Program {
    /// The CUDA devices of the inputs, each once.
    fn cuda_devices(&self) -> Vec<u32> {
        let mut seen = Vec::new();
        for t in &self.input_types {
            if let Device::Cuda(i) = t.device {
                if !seen.contains(&i) {
                    seen.push(i);
                }
            }
        }
        seen
    }

    /// Before a run: thunder's stream waits for the caller's `stream` (its pending writes to
    /// the inputs). Nothing to do on the CPU or without a stream (the caller synchronized).
    fn enter(&self, stream: Option<usize>) -> thunder_core::Result<()> {
        if let Some(s) = stream {
            for i in self.cuda_devices() {
                thunder_core::cuda::wait_for_external(i, s as *mut std::ffi::c_void)?;
            }
        }
        Ok(())
    }

    /// After a run: the caller's `stream` waits for thunder's; without a stream the host
    /// waits, so that torch may read the outputs on any stream.
    fn leave(&self, stream: Option<usize>) -> thunder_core::Result<()> {
        for i in self.cuda_devices() {
            match stream {
                Some(s) => thunder_core::cuda::external_waits(i, s as *mut std::ffi::c_void)?,
                None => thunder_core::cuda::synchronize(i)?,
            }
        }
        Ok(())
    }
}

fn build_grad(
    host: &thunder_core::PluginHost,
    mut typed: Vec<(String, TensorType)>,
    ops: &[Op],
    outputs: &[usize],
    grad_outputs: &[usize],
    wrt: &[usize],
    input_types: Vec<TensorType>,
) -> PyResult<Program> {
    let n_in = typed.len();
    let device = typed.first().map_or(Device::Cpu, |(_, t)| t.device);
    // One cotangent input per differentiable output, typed as torch computed that output.
    let mut out_types = Vec::new();
    for &i in grad_outputs {
        let v = *outputs
            .get(i)
            .ok_or_else(|| PyValueError::new_err(format!("grad output {i} out of range")))?;
        let ty = if v < n_in {
            typed[v].1.clone()
        } else {
            let (shape, dtype) = ops
                .iter()
                .flat_map(|o| &o.outputs)
                .find(|(w, _)| *w == v)
                .and_then(|(_, c)| c.as_ref())
                .ok_or_else(|| {
                    PyValueError::new_err(format!("output value {v} has no recorded type"))
                })?;
            TensorType::new(shape.clone(), *dtype, device)
        };
        out_types.push(ty);
    }
    for (k, ty) in out_types.into_iter().enumerate() {
        typed.push((
            format!("cotangent{k}"),
            TensorType {
                requires_grad: false,
                ..ty
            },
        ));
    }
    let mut timings = Timings::new();
    let forward_len = Cell::new(0);
    let t0 = Instant::now();
    let joint = trace_with(&typed, HashSet::new(), "Grad transform (joint)", |xs| {
        let (primals, cots) = xs.split_at(n_in);
        let pairs: Vec<(usize, Tensor)> = grad_outputs
            .iter()
            .copied()
            .zip(cots.iter().cloned())
            .collect();
        let r = vjp_in_trace(primals, wrt, |p| replay(ops, p, outputs), &pairs)?;
        forward_len.set(r.forward_len);
        Ok(r.outputs.into_iter().chain(r.grads).collect())
    })
    .map_err(err)?;
    timings.push(("replay + vjp (joint trace)", t0.elapsed().as_secs_f64()));
    let cot_values: Vec<_> = joint.inputs[n_in..].to_vec();
    let (fwd, bwd, _) = timed(&mut timings, "split forward/backward", || {
        split_forward_backward_vjp(&joint, forward_len.get(), outputs.len(), &cot_values)
    })
    .map_err(err)?;
    let (fwd_traces, forward) = timed(&mut timings, "forward: passes + claim + compile", || {
        compile_trace(host, fwd)
    })
    .map_err(err)?;
    let (bwd_traces, backward) = timed(&mut timings, "backward: passes + claim + compile", || {
        compile_trace(host, bwd)
    })
    .map_err(err)?;
    Ok(Program {
        forward,
        backward: Some(backward),
        n_outputs: outputs.len(),
        input_types,
        joint: Some(joint),
        forward_traces: fwd_traces,
        backward_traces: Some(bwd_traces),
        timings,
    })
}
