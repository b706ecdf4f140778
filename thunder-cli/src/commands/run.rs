use crate::host_args::HostArgs;
use crate::inputs::match_inputs;
use crate::program_args::InputArgs;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::sync::Arc;
use thunder_core::autograd::value_and_grad;
use thunder_core::ir::Trace;
use thunder_core::runtime::npy::write_npy;
use thunder_core::{Array, Tensor};

fn write_outputs(out: &Path, prefix: &str, names: &[String], arrays: &[Array]) -> Result<()> {
    for (name, a) in names.iter().zip(arrays) {
        let path = out.join(format!("{prefix}{name}.npy"));
        write_npy(&path, a)?;
        println!("{}: {}", path.display(), a.ty());
    }
    Ok(())
}

/// Differentiates the program's first output with respect to `wrt` (default: every float input).
fn run_with_grad(
    host: thunder_core::PluginHost,
    trace: Trace,
    arrays: Vec<Array>,
    wrt: &[String],
    out: &Path,
    print_trace: bool,
) -> Result<()> {
    let names = trace.input_names();
    for w in wrt {
        if !names.contains(w) {
            bail!(
                "--wrt: unknown input `{w}`; the program's inputs are: {}",
                names.join(", ")
            );
        }
    }
    let marked: Vec<Array> = arrays
        .into_iter()
        .zip(&names)
        .map(|(a, n)| {
            let pick = if wrt.is_empty() {
                a.dtype().is_float()
            } else {
                wrt.contains(n)
            };
            a.with_requires_grad(pick)
        })
        .collect();
    let grad_names: Vec<String> = names
        .iter()
        .zip(&marked)
        .filter(|(_, a)| a.ty().requires_grad)
        .map(|(n, _)| n.clone())
        .collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let program = Arc::new(trace);
    let f = value_and_grad(Some(Arc::new(host)), move |xs: &[Tensor]| {
        thunder_core::trace_ctx::replay(&program, xs)
    })
    .with_input_names(&name_refs);
    let (outputs, grads) = f.call(&marked)?;
    let indices: Vec<String> = (0..outputs.len()).map(|i| i.to_string()).collect();
    write_outputs(out, "out_", &indices, &outputs)?;
    write_outputs(out, "grad_", &grad_names, &grads)?;
    if print_trace {
        if let Some(t) = f.last_traces() {
            print!(
                "{}{}",
                t.forward.execution.print(),
                t.backward.execution.print()
            );
        }
    }
    Ok(())
}

pub struct RunOptions<'a> {
    pub print_trace: bool,
    /// Differentiate with respect to these inputs (all float inputs when empty).
    pub grad: Option<&'a [String]>,
}

pub fn run(
    args: &HostArgs,
    program: &Path,
    io: &InputArgs,
    out: &Path,
    options: &RunOptions,
) -> Result<()> {
    if super::onnx::is_onnx(program) {
        return super::onnx::run(args, program, io, out, options);
    }
    let (print_trace, grad) = (options.print_trace, options.grad);
    let device = io.device()?;
    let (trace, given) = io.load(program)?;
    let params: Vec<_> = trace
        .inputs
        .iter()
        .map(|&v| (trace.name(v).to_string(), trace.ty(v).clone()))
        .collect();
    let mut arrays = match_inputs(&params, given)?;
    let trace = match device {
        Some(d) => {
            arrays = arrays
                .iter()
                .map(|a| a.to(d))
                .collect::<thunder_core::Result<Vec<_>>>()
                .with_context(|| format!("--device {d}: cannot move the inputs there"))?;
            trace.on_device(d)
        }
        None => trace,
    };
    let host = args.host()?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("{}: cannot create the output folder", out.display()))?;
    if let Some(wrt) = grad {
        return run_with_grad(host, trace, arrays, wrt, out, print_trace);
    }
    let (traces, compiled) = thunder_core::compile_trace(&host, trace)?;
    let outputs = compiled.run(&arrays)?;
    let indices: Vec<String> = (0..outputs.len()).map(|i| i.to_string()).collect();
    write_outputs(out, "out_", &indices, &outputs)?;
    if print_trace {
        print!("{}", traces.execution.print());
    }
    Ok(())
}
