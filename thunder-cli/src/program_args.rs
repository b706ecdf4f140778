//! What every subcommand that takes a program shares: `-i NAME=SPEC` inputs and `--device`.
//! A given input's dtype, shape and device stand in for a parameter's missing annotation; an
//! annotation that is present must agree with it.

use crate::inputs::parse_inputs;
use anyhow::{anyhow, Context, Result};
use std::collections::HashMap;
use std::path::Path;
use thunder_core::ir::{TensorType, Trace};
use thunder_core::{Array, Device};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct InputArgs {
    /// NAME=FILE.npy, or NAME=randn:f32[8,16] (also zeros:, ones:). Gives the parameter its
    /// dtype and shape when the program does not annotate it (and must agree where it does).
    #[arg(long = "input", short = 'i')]
    pub inputs: Vec<String>,
    /// Device (`cpu`, `cuda`, `cuda:N`): the program's tensors and inputs are moved there.
    #[arg(long)]
    pub device: Option<String>,
}

impl InputArgs {
    pub fn device(&self) -> Result<Option<Device>> {
        self.device
            .as_deref()
            .map(|text| {
                Device::parse(text).ok_or_else(|| {
                    anyhow!("--device: `{text}` is not a device (expected cpu, cuda or cuda:N)")
                })
            })
            .transpose()
    }

    /// The `-i` inputs, read (or generated), by name.
    pub fn arrays(&self) -> Result<Vec<(String, Array)>> {
        parse_inputs(&self.inputs)
    }

    /// Reads and parses `program`, typing unannotated parameters from the given inputs. The
    /// trace is on the CPU (where the inputs are read); callers move it with `--device`.
    pub fn load(&self, program: &Path) -> Result<(Trace, Vec<(String, Array)>)> {
        let given = self.arrays()?;
        let types: HashMap<String, TensorType> = given
            .iter()
            .map(|(n, a)| (n.clone(), a.ty().clone()))
            .collect();
        let text = std::fs::read_to_string(program)
            .with_context(|| format!("{}: cannot read", program.display()))?;
        let trace = thunder_torch::parse_trace_with(&text, &types)
            .with_context(|| format!("{}", program.display()))?;
        Ok((trace, given))
    }
}
