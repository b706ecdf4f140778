pub mod bench;
pub mod compare;
pub mod demo;
pub mod examine;
pub mod gpu_check;
pub mod gpu_common;
pub mod opinfo_check;
pub mod opinfo_grads;
pub mod ops;
pub mod partition;
pub mod plugins;
pub mod run;
pub mod trace;
pub mod triton_check;

use anyhow::{Context, Result};
use std::path::Path;
use thunder_core::ir::Trace;

/// Reads and parses a program file; parse errors keep their line and column.
pub fn load_program(path: &Path) -> Result<Trace> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    thunder_core::text::parse_trace(&text).with_context(|| format!("{}", path.display()))
}
