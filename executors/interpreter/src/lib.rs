//! The reference interpreter: runs every prim in every dtype on the CPU, one op at a time.
//!
//! It is the executor of last resort and the yardstick other executors are tested against, so
//! it favours being obviously right over being fast: values are decoded into wide lanes (bool,
//! i64, f64), each op is computed there and its result rounded or wrapped to the output dtype,
//! which gives what a dtype-exact kernel gives up to its last rounding.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

mod along;
mod args;
mod conv;
mod data;
mod decode;
mod elementwise;
mod indexing;
mod kernels;
mod matmul;
mod memory;
mod program;
mod reduce;
mod rng;
mod shape;
mod sort;

#[cfg(test)]
mod tests;

use thunder_abi::claim::contiguous_runs;
use thunder_abi::export::{CompiledRegion, Executor};
use thunder_abi::prims::Prim;
use thunder_abi::{
    HostServices, OptionValue, PluginError, PluginInfo, RegionSpec, TraceView, ABI_VERSION,
};

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: "interpreter".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description: "reference interpreter: every prim, every dtype, CPU".into(),
        devices: vec!["cpu".into()].into(),
        symbols: Prim::ALL.iter().map(|p| p.id().into()).collect(),
    }
}

#[derive(Debug, Default)]
pub struct Interpreter;

impl Interpreter {
    /// The interpreter takes no options; an unknown one is refused rather than ignored, so a
    /// typo in plugins.toml does not pass silently.
    pub fn create(
        _services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        match options.first() {
            Some((key, _)) => Err(PluginError::invalid(format!(
                "interpreter: unknown option `{key}` (it takes none)"
            ))),
            None => Ok(Interpreter),
        }
    }
}

impl Executor for Interpreter {
    /// Every prim that `compile` accepts: CPU values only, and a dtype and arguments it can
    /// run. Checking here rather than failing later matters because the host drops an executor
    /// whose compile fails from the whole trace, not just from the region it failed on.
    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        Ok(contiguous_runs(view, |op| {
            !op.composite && program::accepts(view, op)
        }))
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        Ok(Box::new(program::Program::compile(view, region)?))
    }
}

thunder_abi::export_executor! {
    info: plugin_info,
    create: Interpreter::create,
}
