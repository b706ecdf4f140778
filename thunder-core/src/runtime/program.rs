//! Compiling a trace into a program of region calls, and running it.

use super::array::Array;
use crate::error::{Error, Result};
use crate::host::exec_trace::{ExecStep, ExecutionTrace};
use crate::host::partition::partition;
use crate::host::PluginHost;
use crate::ir::{ShapeDisplay, TensorType, Trace, Value};
use std::collections::{HashMap, HashSet};
use thunder_abi::abi_stable::std_types::RSlice;
use thunder_abi::{CompiledBox, ExecContext, TensorDesc};

struct Step {
    executor: String,
    region: usize,
    compiled: CompiledBox,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    frees: Vec<usize>,
}

/// A program ready to run: every value has a dense slot with its static type and strides.
pub struct CompiledProgram {
    slot_types: Vec<TensorType>,
    slot_strides: Vec<Vec<i64>>,
    input_names: Vec<String>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    steps: Vec<Step>,
}

fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    strides
}

/// Partitions and compiles `trace`. An executor whose compile fails is reported and left out,
/// and the trace is partitioned again without it, so its regions fall to the next executor.
pub fn compile(host: &PluginHost, trace: &Trace) -> Result<(ExecutionTrace, CompiledProgram)> {
    let mut excluded: HashSet<usize> = HashSet::new();
    'attempt: loop {
        let part = partition(host, trace, &excluded)?;
        let mut compiled = Vec::with_capacity(part.regions.len());
        for region in &part.regions {
            let entry = &host.entries()[region.executor];
            let exec = entry.executor.as_ref().ok_or_else(|| {
                Error::Bug(format!(
                    "executor {} claimed without being created",
                    entry.name
                ))
            })?;
            match exec.compile(&part.view, &region.spec()).into_result() {
                Ok(c) => compiled.push(c),
                Err(e) => {
                    tracing::warn!(executor = %entry.name, "compile failed, falling back to the next executor: {e}");
                    excluded.insert(region.executor);
                    continue 'attempt;
                }
            }
        }
        let mut exec_trace = ExecutionTrace {
            trace: Trace {
                bsyms: part.bsyms,
                provenance: "Claim".into(),
                ..trace.clone()
            },
            steps: part
                .regions
                .iter()
                .map(|r| ExecStep {
                    executor: host.entries()[r.executor].name.clone(),
                    ops: r.ops.clone(),
                    inputs: r.inputs.clone(),
                    outputs: r.outputs.clone(),
                    frees: Vec::new(),
                })
                .collect(),
        };
        exec_trace.delete_last_used();
        let program = CompiledProgram::new(&exec_trace, compiled);
        return Ok((exec_trace, program));
    }
}

impl CompiledProgram {
    fn new(et: &ExecutionTrace, compiled: Vec<CompiledBox>) -> CompiledProgram {
        let t = &et.trace;
        let mut slot_of: HashMap<Value, usize> = HashMap::new();
        let mut slot_types = Vec::new();
        let mut slot = |v: Value| -> usize {
            *slot_of.entry(v).or_insert_with(|| {
                slot_types.push(t.ty(v).clone());
                slot_types.len() - 1
            })
        };
        let inputs: Vec<usize> = t.inputs.iter().map(|&v| slot(v)).collect();
        let mut steps = Vec::with_capacity(et.steps.len());
        for (region, (s, c)) in et.steps.iter().zip(compiled).enumerate() {
            steps.push(Step {
                executor: s.executor.clone(),
                region,
                compiled: c,
                inputs: s.inputs.iter().map(|&v| slot(v)).collect(),
                outputs: s.outputs.iter().map(|&v| slot(v)).collect(),
                frees: s.frees.iter().map(|&v| slot(v)).collect(),
            });
        }
        let outputs = t.outputs.iter().map(|&v| slot(v)).collect();
        let slot_strides = slot_types
            .iter()
            .map(|ty| contiguous_strides(&ty.shape))
            .collect();
        CompiledProgram {
            slot_types,
            slot_strides,
            input_names: t.input_names(),
            inputs,
            outputs,
            steps,
        }
    }

    pub fn input_types(&self) -> Vec<TensorType> {
        self.inputs
            .iter()
            .map(|&s| self.slot_types[s].clone())
            .collect()
    }

    fn desc<'a>(&'a self, slot: usize, a: &Array) -> TensorDesc<'a> {
        let ty = &self.slot_types[slot];
        TensorDesc {
            data: a.data_ptr() as *mut std::ffi::c_void,
            byte_offset: 0,
            device: ty.device.to_desc(),
            dtype: ty.dtype,
            shape: RSlice::from_slice(&ty.shape),
            strides: RSlice::from_slice(&self.slot_strides[slot]),
        }
    }

    /// Runs the program. Inputs must match the traced types exactly.
    pub fn run(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::Usage(format!(
                "expected {} inputs ({}), got {}",
                self.inputs.len(),
                self.input_names.join(", "),
                inputs.len()
            )));
        }
        let mut slots: Vec<Option<Array>> = vec![None; self.slot_types.len()];
        for ((&s, a), name) in self.inputs.iter().zip(inputs).zip(&self.input_names) {
            let want = &self.slot_types[s];
            let got = a.ty();
            if want.shape != got.shape || want.dtype != got.dtype || want.device != got.device {
                return Err(Error::Input {
                    name: name.clone(),
                    message: format!(
                        "expected {} {}{}, got {} {}{}",
                        want.device,
                        want.dtype.short_name(),
                        ShapeDisplay(&want.shape),
                        got.device,
                        got.dtype.short_name(),
                        ShapeDisplay(&got.shape)
                    ),
                });
            }
            slots[s] = Some(a.clone());
        }
        for step in &self.steps {
            let mut in_descs = Vec::with_capacity(step.inputs.len());
            for &s in &step.inputs {
                let a = slots[s]
                    .as_ref()
                    .ok_or_else(|| Error::Bug(format!("slot {s} read before it was written")))?;
                in_descs.push(self.desc(s, a));
            }
            let mut outs = Vec::with_capacity(step.outputs.len());
            for &s in &step.outputs {
                outs.push(Array::zeros(self.slot_types[s].clone())?);
            }
            let out_descs: Vec<TensorDesc> = step
                .outputs
                .iter()
                .zip(&outs)
                .map(|(&s, a)| self.desc(s, a))
                .collect();
            step.compiled
                .run(
                    RSlice::from_slice(&in_descs),
                    RSlice::from_slice(&out_descs),
                    ExecContext::CPU,
                )
                .into_result()
                .map_err(|e| Error::Plugin {
                    plugin: step.executor.clone(),
                    message: format!("region{} failed in run: {e}", step.region),
                })?;
            for (&s, a) in step.outputs.iter().zip(outs) {
                slots[s] = Some(a);
            }
            for &s in &step.frees {
                slots[s] = None;
            }
        }
        self.outputs
            .iter()
            .map(|&s| {
                slots[s]
                    .clone()
                    .ok_or_else(|| Error::Bug(format!("output slot {s} never written")))
            })
            .collect()
    }
}
