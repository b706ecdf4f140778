use super::load_program;
use crate::host_args::HostArgs;
use crate::inputs::{match_inputs, parse_inputs};
use anyhow::{Context, Result};
use std::path::Path;
use thunder_core::runtime::npy::write_npy;

pub fn run(
    args: &HostArgs,
    program: &Path,
    inputs: &[String],
    out: &Path,
    print_trace: bool,
) -> Result<()> {
    let trace = load_program(program)?;
    let params: Vec<_> = trace
        .inputs
        .iter()
        .map(|&v| (trace.name(v).to_string(), trace.ty(v).clone()))
        .collect();
    let arrays = match_inputs(&params, parse_inputs(inputs)?)?;
    let host = args.host()?;
    let (traces, compiled) = thunder_core::compile_trace(&host, trace)?;
    let outputs = compiled.run(&arrays)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("{}: cannot create the output folder", out.display()))?;
    for (i, a) in outputs.iter().enumerate() {
        let path = out.join(format!("out_{i}.npy"));
        write_npy(&path, a)?;
        println!("{}: {}", path.display(), a.ty());
    }
    if print_trace {
        print!("{}", traces.execution.print());
    }
    Ok(())
}
