//! `thunder run model.onnx` and `thunder examine model.onnx`: ONNX files go through
//! thunder-onnx (graph inputs by name, initializers loaded from the file and its external
//! data, outputs written as `out_<name>.npy`). `run` and `examine` hand a path here when
//! [`is_onnx`] says so.

use super::run::RunOptions;
use crate::host_args::HostArgs;
use crate::inputs::parse_inputs;
use crate::program_args::InputArgs;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use thunder_core::ir::TensorType;
use thunder_core::runtime::npy::write_npy;
use thunder_core::{Array, Device};
use thunder_onnx::{Dim, OnnxModel, OnnxSession};

/// The one place that decides a program is an ONNX file: its `.onnx` extension.
pub fn is_onnx(program: &Path) -> bool {
    program
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// An output name made safe for a file name (`/` and the like become `_`).
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn load(program: &Path) -> Result<(OnnxModel, f64)> {
    let t0 = Instant::now();
    let model = OnnxModel::load(program)?;
    Ok((model, t0.elapsed().as_secs_f64() * 1e3))
}

/// A session on `--device` (the CPU when none is given).
fn session(args: &HostArgs, model: OnnxModel, io: &InputArgs) -> Result<OnnxSession> {
    let device = io.device()?.unwrap_or(Device::Cpu);
    Ok(OnnxSession::new(model, Arc::new(args.host()?)).with_device(device))
}

pub fn run(
    args: &HostArgs,
    program: &Path,
    io: &InputArgs,
    out: &Path,
    options: &RunOptions,
) -> Result<()> {
    if options.grad.is_some() {
        bail!(
            "{}: --grad is not supported for ONNX models",
            program.display()
        );
    }
    let (model, load_ms) = load(program)?;
    let given: HashMap<String, Array> = io.arrays()?.into_iter().collect();
    let session = session(args, model, io)?;
    let t0 = Instant::now();
    let outputs = session
        .run_named(given)
        .with_context(|| program.display().to_string())?;
    let first_ms = t0.elapsed().as_secs_f64() * 1e3;
    std::fs::create_dir_all(out)
        .with_context(|| format!("{}: cannot create the output folder", out.display()))?;
    for (name, a) in &outputs {
        let path = out.join(format!("out_{}.npy", file_safe(name)));
        write_npy(&path, &a.to(Device::Cpu)?)?;
        println!("{}: {}", path.display(), a.ty());
    }
    if let Some(s) = session.last() {
        let t = s.timings;
        eprintln!(
            "{}: load {load_ms:.1} ms, translate {:.1} ms, compile {:.1} ms, first call {first_ms:.1} ms",
            program.display(),
            t.translate.as_secs_f64() * 1e3,
            t.compile.as_secs_f64() * 1e3,
        );
        if options.print_trace {
            print!("{}", s.traces.execution.print());
        }
    }
    Ok(())
}

/// Input types for examining: the given inputs, else the declared shapes with every symbolic
/// dim set to 1 (None when some input has no declared shape).
fn example_types(model: &OnnxModel, inputs: &[String]) -> Result<Option<Vec<TensorType>>> {
    let mut given: HashMap<String, Array> = parse_inputs(inputs)?.into_iter().collect();
    let mut types = Vec::new();
    for spec in &model.inputs {
        if let Some(a) = given.remove(&spec.name) {
            types.push(a.ty().clone());
            continue;
        }
        let Some(dims) = &spec.dims else {
            return Ok(None);
        };
        let shape = dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n,
                Dim::Symbolic(_) => 1,
            })
            .collect();
        types.push(TensorType::new(shape, spec.dtype, Device::Cpu));
    }
    if let Some(extra) = given.keys().next() {
        bail!("unknown input `{extra}`");
    }
    Ok(Some(types))
}

pub fn examine(args: &HostArgs, program: &Path, io: &InputArgs) -> Result<()> {
    let inputs = &io.inputs;
    let (model, load_ms) = load(program)?;
    let mut opsets: Vec<String> = model
        .opsets
        .iter()
        .map(|(d, v)| format!("{}={v}", if d.is_empty() { "ai.onnx" } else { d }))
        .collect();
    opsets.sort();
    println!(
        "{}: {} (loaded in {load_ms:.1} ms)",
        program.display(),
        model.producer.trim()
    );
    println!("  opsets: {}", opsets.join(", "));
    for spec in &model.inputs {
        println!("  input  {spec}");
    }
    println!("  outputs: {}", model.output_names.join(", "));
    println!(
        "  {} initializers, {} nodes",
        model.initializers.len(),
        model.graph.node.len()
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &model.graph.node {
        *counts.entry(n.op_type.as_str()).or_default() += 1;
    }
    let ops: Vec<String> = counts.iter().map(|(k, v)| format!("{k} x{v}")).collect();
    println!("  ops: {}", ops.join(", "));
    if model.batch_norms_folded > 0 {
        println!(
            "  {} BatchNormalization nodes folded into their Conv at load",
            model.batch_norms_folded
        );
    }
    let unsupported = thunder_onnx::unsupported_nodes(&model);
    if !unsupported.is_empty() {
        println!("{} unsupported nodes:", unsupported.len());
        for n in &unsupported {
            println!("  {n}");
        }
        bail!(
            "{}: {} nodes have no importer rule",
            program.display(),
            unsupported.len()
        );
    }
    println!("every node has an importer rule");
    let Some(types) = example_types(&model, inputs)? else {
        println!("(pass --input for every input to import and compile it)");
        return Ok(());
    };
    let session = session(args, model, io)?;
    let s = session
        .specialize(&types)
        .map_err(|e| anyhow!("{}: {e}", program.display()))?;
    let shown: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    println!(
        "imported for ({}): translate {:.1} ms, compile {:.1} ms, {} weight inputs",
        shown.join(", "),
        s.timings.translate.as_secs_f64() * 1e3,
        s.timings.compile.as_secs_f64() * 1e3,
        s.imported.weights.len()
    );
    print!("{}", s.traces.execution.print());
    Ok(())
}

/// An ONNX model specialised for `thunder bench`: its compiled program and all its inputs (the
/// graph's, then the weights), on the session's device.
pub struct OnnxBench {
    pub spec: Arc<thunder_onnx::Specialization>,
    pub arrays: Vec<Array>,
    /// Seconds to load the file and import the graph.
    pub load_and_translate: f64,
}

pub fn prepare_bench(args: &HostArgs, program: &Path, io: &InputArgs) -> Result<OnnxBench> {
    let (model, load_ms) = load(program)?;
    let given: HashMap<String, Array> = io.arrays()?.into_iter().collect();
    let session = session(args, model, io)?;
    let in_program = |e: thunder_onnx::OnnxError| anyhow!("{}: {e}", program.display());
    let inputs = session.ordered_inputs(given).map_err(in_program)?;
    let (spec, arrays) = session.prepare(&inputs).map_err(in_program)?;
    Ok(OnnxBench {
        load_and_translate: load_ms / 1e3 + spec.timings.translate.as_secs_f64(),
        spec,
        arrays,
    })
}
