//! `OnnxSession`: a model with a cache of compiled specialisations, one per set of concrete
//! input types (symbolic dims such as batch and sequence are fixed by the inputs given), in
//! the spirit of the jit cache. Each entry records how long import and compilation took.

use crate::error::{OnnxError, Result};
use crate::import::{import, Imported};
use crate::model::{Dim, OnnxModel};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};
use thunder_core::ir::TensorType;
use thunder_core::runtime::CompiledProgram;
use thunder_core::{compile_trace_with_static, Array, Device, PluginHost, Traces};

/// How long one specialisation took to make.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    /// ONNX graph to trace (folding included).
    pub translate: Duration,
    /// Passes, claiming and compiling by the executors.
    pub compile: Duration,
}

/// One compiled specialisation.
pub struct Specialization {
    pub key: Vec<TensorType>,
    pub imported: Imported,
    pub traces: Traces,
    pub program: CompiledProgram,
    pub timings: Timings,
}

pub struct OnnxSession {
    model: OnnxModel,
    /// The model as CPU specialisations import it: its convolution weights laid out for the
    /// CPU executors once (`conv_layout.rs`), on the first CPU specialisation.
    cpu_model: OnceLock<OnnxModel>,
    host: Arc<PluginHost>,
    /// Where the program runs: weights are copied there once per specialisation, inputs on
    /// each call; outputs stay there.
    device: Device,
    cache: RwLock<Vec<Arc<Specialization>>>,
    last: Mutex<Option<Arc<Specialization>>>,
}

impl OnnxSession {
    pub fn new(model: OnnxModel, host: Arc<PluginHost>) -> Self {
        OnnxSession {
            model,
            cpu_model: OnceLock::new(),
            host,
            device: Device::Cpu,
            cache: RwLock::new(Vec::new()),
            last: Mutex::new(None),
        }
    }

    /// The same session running on `device` (`cuda:0`): the graph is imported as on the CPU
    /// (constant folding reads host arrays), then the trace and its weights move there.
    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn model(&self) -> &OnnxModel {
        &self.model
    }

    /// How many specialisations are cached.
    pub fn cached(&self) -> usize {
        self.cache.read().map_or(0, |c| c.len())
    }

    /// The specialisation the last `run` used.
    pub fn last(&self) -> Option<Arc<Specialization>> {
        self.last.lock().ok().and_then(|l| l.clone())
    }

    /// Checks input types against the graph's declared inputs (dtype, rank, fixed dims, and
    /// one value per symbolic dim name).
    pub fn check_inputs(&self, types: &[TensorType]) -> Result<()> {
        let specs = &self.model.inputs;
        if types.len() != specs.len() {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            return Err(OnnxError::model(
                self.model.path.display().to_string(),
                format!(
                    "{} inputs given; the graph's inputs are: {}",
                    types.len(),
                    names.join(", ")
                ),
            ));
        }
        let mut symbols: HashMap<&str, (i64, &str)> = HashMap::new();
        for (spec, ty) in specs.iter().zip(types) {
            let bad = |message: String| OnnxError::Input {
                name: spec.name.clone(),
                message,
            };
            if ty.dtype != spec.dtype {
                return Err(bad(format!("expected {spec}, got {ty}")));
            }
            let Some(dims) = &spec.dims else { continue };
            if dims.len() != ty.shape.len() {
                return Err(bad(format!("expected {spec}, got {ty}")));
            }
            for (d, &n) in dims.iter().zip(&ty.shape) {
                match d {
                    Dim::Fixed(m) if *m != n => {
                        return Err(bad(format!("expected {spec}, got {ty}")));
                    }
                    Dim::Symbolic(s) => {
                        if let Some((m, other)) = symbols.insert(s, (n, &spec.name)) {
                            if m != n {
                                return Err(bad(format!(
                                    "dimension `{s}` is {n} here but {m} in input `{other}`"
                                )));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The compiled specialisation for these input types, made on first use.
    pub fn specialize(&self, types: &[TensorType]) -> Result<Arc<Specialization>> {
        if let Ok(cache) = self.cache.read() {
            if let Some(s) = cache.iter().find(|s| s.key == types) {
                return Ok(s.clone());
            }
        }
        self.check_inputs(types)?;
        let t0 = Instant::now();
        let model = if self.device == Device::Cpu && crate::conv_layout::enabled() {
            self.cpu_model.get_or_init(|| {
                let mut m = self.model.clone();
                let n = crate::conv_layout::channels_last_conv_weights(&mut m);
                tracing::debug!(
                    weights = n,
                    "convolution weights stored with output channels last"
                );
                m
            })
        } else {
            &self.model
        };
        let mut imported = import(model, types)?;
        if self.device != Device::Cpu {
            imported.trace = imported.trace.on_device(self.device);
            imported.weights = imported
                .weights
                .iter()
                .map(|w| w.to(self.device).map(Arc::new))
                .collect::<thunder_core::Result<Vec<_>>>()?;
        }
        let translate = t0.elapsed();
        let t1 = Instant::now();
        // The weights are the trace's last inputs, passed as the same arrays on every call
        // and held by the specialisation as long as its program: static inputs.
        let n = imported.trace.inputs.len();
        let weights: Vec<usize> = (n - imported.weights.len().min(n)..n).collect();
        let (traces, program) =
            compile_trace_with_static(&self.host, imported.trace.clone(), &weights)?;
        let timings = Timings {
            translate,
            compile: t1.elapsed(),
        };
        tracing::info!(
            model = %self.model.path.display(),
            translate_ms = translate.as_secs_f64() * 1e3,
            compile_ms = timings.compile.as_secs_f64() * 1e3,
            "specialised ONNX model"
        );
        let s = Arc::new(Specialization {
            key: types.to_vec(),
            imported,
            traces,
            program,
            timings,
        });
        if let Ok(mut cache) = self.cache.write() {
            cache.push(s.clone());
        }
        Ok(s)
    }

    /// The specialisation for the graph's inputs (in the graph's order, on any device) and every
    /// input its program takes: those inputs copied to the session's device, then the weights.
    pub fn prepare(&self, inputs: &[Array]) -> Result<(Arc<Specialization>, Vec<Array>)> {
        let types: Vec<TensorType> = inputs
            .iter()
            .map(|a| TensorType::new(a.shape().to_vec(), a.dtype(), Device::Cpu))
            .collect();
        let s = self.specialize(&types)?;
        let mut all: Vec<Array> = inputs
            .iter()
            .map(|a| a.to(self.device))
            .collect::<thunder_core::Result<Vec<_>>>()?;
        all.extend(s.imported.weights.iter().map(|w| (**w).clone()));
        Ok((s, all))
    }

    /// Runs the model on the graph's inputs, in the graph's order (on any device: they are
    /// copied to the session's); outputs in the graph's output order, on the session's device.
    pub fn run(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        let (s, all) = self.prepare(inputs)?;
        let out = s.program.run(&all)?;
        if let Ok(mut last) = self.last.lock() {
            *last = Some(s);
        }
        Ok(out)
    }

    /// Named inputs in the graph's order; a missing or unknown name is an error naming it.
    pub fn ordered_inputs(&self, mut named: HashMap<String, Array>) -> Result<Vec<Array>> {
        let mut inputs = Vec::new();
        for spec in &self.model.inputs {
            let a = named.remove(&spec.name).ok_or_else(|| OnnxError::Input {
                name: spec.name.clone(),
                message: format!("missing (expected {spec})"),
            })?;
            inputs.push(a);
        }
        if let Some(extra) = named.keys().next() {
            let names: Vec<&str> = self.model.inputs.iter().map(|s| s.name.as_str()).collect();
            return Err(OnnxError::Input {
                name: extra.clone(),
                message: format!(
                    "not an input of the graph; its inputs are: {}",
                    names.join(", ")
                ),
            });
        }
        Ok(inputs)
    }

    /// Runs on named inputs; returns the outputs with the graph's output names.
    pub fn run_named(&self, named: HashMap<String, Array>) -> Result<Vec<(String, Array)>> {
        let out = self.run(&self.ordered_inputs(named)?)?;
        Ok(self.model.output_names.iter().cloned().zip(out).collect())
    }
}
