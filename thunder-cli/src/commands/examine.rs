//! `thunder examine PROGRAM [--input NAME=SPEC ...]`, after Thunder's `examine`: which executor
//! claims each op, the ops nobody can run and why, then (given inputs) the program run on the
//! configured executors and on the interpreter alone, compared output by output.

use super::compare::{compare, tolerances};
use super::partition::op_line;
use crate::host_args::HostArgs;
use crate::inputs::{match_inputs, parse_inputs};
use crate::program_args::InputArgs;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use thunder_core::host::partition::partition;
use thunder_core::host::ExecutorEntry;
use thunder_core::ir::{BoundSymbol, ShapeDisplay, Trace};
use thunder_core::{Device, Error, PluginHost};

/// The executor every other is compared against.
const REFERENCE: &str = "interpreter";

/// Why an executor is not asked to claim (only meaningful when `!is_active()`).
fn inactive_reason(e: &ExecutorEntry) -> String {
    match (&e.available, e.enabled) {
        (Err(reason), _) if reason.starts_with("disabled") => reason.clone(),
        (Err(reason), false) => format!("disabled: {reason}"),
        (Err(reason), true) => format!("unavailable: {reason}"),
        (Ok(()), false) => {
            "disabled: not in the executor list (--executors / THUNDER_EXECUTORS)".into()
        }
        (Ok(()), true) => "not created".into(),
    }
}

/// Every bound symbol of the trace, with the subsymbols of composites, depth first.
fn all_bsyms<'a>(bsyms: &'a [BoundSymbol], out: &mut Vec<&'a BoundSymbol>) {
    for b in bsyms {
        out.push(b);
        all_bsyms(&b.subsymbols, out);
    }
}

/// `(x: cpu f32[2, 3], 2.0) -> cpu f32[2, 3]`: what an executor was offered.
fn signature(trace: &Trace, b: &BoundSymbol) -> String {
    let args: Vec<String> = b
        .args
        .iter()
        .map(|a| match a.as_value() {
            Some(v) => format!("{}: {}", trace.name(v), trace.ty(v)),
            None => thunder_core::text::format_arg(trace, a),
        })
        .collect();
    let outs: Vec<String> = b.outputs.iter().map(|&v| trace.ty(v).to_string()).collect();
    format!("({}) -> {}", args.join(", "), outs.join(", "))
}

/// The ops of `message` (the host's "no executor can run ..." list) found in `trace`, so they
/// can be described from the trace itself rather than from text.
fn unclaimed_ops<'a>(trace: &'a Trace, message: &str) -> Vec<&'a BoundSymbol> {
    let mut all = Vec::new();
    all_bsyms(&trace.bsyms, &mut all);
    all.into_iter()
        .filter(|b| message.contains(&format!("{} (`{}`)", b.sym.id, op_line(trace, b))))
        .collect()
}

/// Prints, per unsupported symbol, why no executor claimed it.
fn report_unsupported(host: &PluginHost, trace: &Trace, message: &str) {
    println!("unsupported ops (no executor claims them):");
    let ops = unclaimed_ops(trace, message);
    if ops.is_empty() {
        // Not expected: the host names ops by their printed line. Show what it said.
        for op in message.split("; ") {
            println!("  {op}");
        }
        return;
    }
    let mut by_symbol: BTreeMap<&str, Vec<&BoundSymbol>> = BTreeMap::new();
    for b in ops {
        by_symbol.entry(b.sym.id).or_default().push(b);
    }
    for (symbol, ops) in &by_symbol {
        println!("  {symbol:<32} x{}", ops.len());
        // Up to three distinct signatures: what the executors were offered.
        let mut shown: Vec<String> = Vec::new();
        for b in ops {
            let sig = signature(trace, b);
            if shown.len() < 3 && !shown.contains(&sig) {
                shown.push(sig);
                println!("    e.g. {}", op_line(trace, b));
            }
        }
        let implementers: Vec<&ExecutorEntry> = host
            .entries()
            .iter()
            .filter(|e| e.symbols.iter().any(|s| s == symbol))
            .collect();
        if implementers.is_empty() {
            let loaded: Vec<&str> = host.entries().iter().map(|e| e.name.as_str()).collect();
            println!(
                "    no implementation: no loaded executor lists {symbol} (loaded: {})",
                if loaded.is_empty() {
                    "none".to_string()
                } else {
                    loaded.join(", ")
                }
            );
        }
        for e in implementers {
            if e.is_active() {
                println!(
                    "    {}: lists it but did not claim it for {} (its checker refused these dtypes, devices or shapes)",
                    e.name,
                    shown.join(" or ")
                );
            } else {
                println!("    {}: {}", e.name, inactive_reason(e));
            }
        }
    }
}

/// Runs the program on the configured executors and on the interpreter alone and compares the
/// outputs. Inputs not given are generated with randn from the program's annotations.
fn check_consistency(
    args: &HostArgs,
    host: &PluginHost,
    trace: &Trace,
    specs: &[String],
    device: Option<Device>,
) -> Result<()> {
    let params: Vec<_> = trace
        .inputs
        .iter()
        .map(|&v| (trace.name(v).to_string(), trace.ty(v).clone()))
        .collect();
    let given: HashSet<&str> = specs
        .iter()
        .filter_map(|s| s.split_once('=').map(|(n, _)| n))
        .collect();
    let mut specs = specs.to_vec();
    let mut generated = Vec::new();
    for (name, ty) in &params {
        if given.contains(name.as_str()) {
            continue;
        }
        if ty.device != Device::Cpu {
            bail!("input `{name}` is on {}: only cpu inputs can be generated; pass --input {name}=FILE.npy", ty.device);
        }
        let spec = format!("randn:{}{}", ty.dtype.short_name(), ShapeDisplay(&ty.shape));
        generated.push(format!("{name}={spec}"));
        specs.push(format!("{name}={spec}"));
    }
    let arrays = match_inputs(&params, parse_inputs(&specs)?)?;

    let reference_args = HostArgs {
        config: args.config.clone(),
        plugin_dirs: args.plugin_dirs.clone(),
        executors: vec![REFERENCE.to_string()],
    };
    let reference = reference_args
        .host()
        .with_context(|| format!("the reference run needs the `{REFERENCE}` executor"))?;
    if let Some(e) = reference.entries().iter().find(|e| e.name == REFERENCE) {
        if !e.is_active() {
            bail!(
                "the reference run needs the `{REFERENCE}` executor, which is {}",
                inactive_reason(e)
            );
        }
    }
    // With a device, the configured executors run the program there and the interpreter runs
    // it on the CPU, on the same values.
    let (on_device, device_arrays) = match device {
        Some(d) => (
            trace.on_device(d),
            arrays
                .iter()
                .map(|a| a.to(d))
                .collect::<thunder_core::Result<Vec<_>>>()
                .with_context(|| format!("--device {d}: cannot move the inputs there"))?,
        ),
        None => (trace.clone(), arrays.clone()),
    };
    let (traces, program) = thunder_core::compile_trace(host, on_device)?;
    let got = program.run(&device_arrays)?;
    let cpu_trace = trace.on_device(Device::Cpu);
    let cpu_arrays = arrays
        .iter()
        .map(|a| a.to(Device::Cpu))
        .collect::<thunder_core::Result<Vec<_>>>()?;
    let (_, reference_program) = thunder_core::compile_trace(&reference, cpu_trace)?;
    let want = reference_program.run(&cpu_arrays)?;

    println!();
    println!(
        "consistency: {} vs {REFERENCE} alone",
        traces.execution.executors_used().join(", ")
    );
    if !generated.is_empty() {
        println!(
            "  generated inputs (seeded by name): {}",
            generated.join(", ")
        );
    }
    println!(
        "  {:<16} {:<24} {:>10} {:>10}  verdict",
        "output", "type", "max abs", "max rel"
    );
    let mut failures = 0;
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let d = compare(g, w)?;
        let (rtol, atol) = tolerances(w.dtype());
        let verdict = if d.mismatched == 0 {
            "ok".to_string()
        } else {
            failures += 1;
            format!(
                "MISMATCH: {} of {} elements outside rtol={rtol:e}, atol={atol:e}",
                d.mismatched,
                w.numel()
            )
        };
        let name = format!("{k} ({})", trace.name(trace.outputs[k]));
        println!(
            "  {name:<16} {:<24} {:>10.3e} {:>10.3e}  {verdict}",
            w.ty().to_string(),
            d.max_abs,
            d.max_rel
        );
    }
    if failures > 0 {
        bail!(
            "{failures} of {} outputs differ from the {REFERENCE} beyond tolerance",
            want.len()
        );
    }
    println!(
        "all {} outputs match the {REFERENCE} within tolerance",
        want.len()
    );
    Ok(())
}

/// Reports, per symbol, which executor runs it and what no executor can run (and why); with
/// inputs (or `random_inputs`), also checks the outputs against the interpreter alone.
pub fn run(args: &HostArgs, program: &Path, io: &InputArgs, random_inputs: bool) -> Result<()> {
    if super::onnx::is_onnx(program) {
        return super::onnx::examine(args, program, io);
    }
    let device = io.device()?;
    let inputs = &io.inputs;
    let (initial, _) = io.load(program)?;
    // Claiming sees the trace after the passes, as `thunder run` does, on the asked device.
    let mut trace = match device {
        Some(d) => initial.on_device(d),
        None => initial.clone(),
    };
    for pass in thunder_core::passes::default_passes() {
        trace = pass.run(&trace)?;
    }
    let host = args.host()?;
    let active: Vec<&str> = host
        .entries()
        .iter()
        .filter(|e| e.is_active())
        .map(|e| e.name.as_str())
        .collect();
    println!(
        "executors asked, in order: {}",
        if active.is_empty() {
            "none".into()
        } else {
            active.join(", ")
        }
    );
    for e in host.entries().iter().filter(|e| !e.is_active()) {
        println!("not asked: {}: {}", e.name, inactive_reason(e));
    }
    match partition(&host, &trace, &HashSet::new()) {
        Ok(part) => {
            let mut by_symbol: BTreeMap<(String, String), usize> = BTreeMap::new();
            for r in &part.regions {
                for &i in &r.ops {
                    let key = (
                        part.bsyms[i].sym.id.to_string(),
                        host.entries()[r.executor].name.clone(),
                    );
                    *by_symbol.entry(key).or_default() += 1;
                }
            }
            for ((sym, exec), n) in &by_symbol {
                println!("  {sym:<32} x{n:<4} -> {exec}");
            }
            for r in &part.rejections {
                println!("  rejected claim by {}: {}", r.executor, r.reason);
            }
            println!("{} regions; every op is supported.", part.regions.len());
        }
        Err(Error::Unclaimed { ops }) => {
            report_unsupported(&host, &trace, &ops);
            bail!("the program has unsupported ops")
        }
        Err(e) => return Err(e.into()),
    }
    if !inputs.is_empty() || random_inputs {
        check_consistency(args, &host, &initial, inputs, device)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::compare::Diff;
    use thunder_core::Array;

    #[test]
    fn differences_follow_torch_testing() {
        let a = Array::from_slice(&[1.0f32, 2.0, 0.0, f32::NAN], &[4]).unwrap();
        let same = compare(&a, &a).expect("host arrays");
        assert_eq!(
            same,
            Diff {
                max_abs: 0.0,
                max_rel: 0.0,
                mismatched: 0
            }
        );
        let b = Array::from_slice(&[1.0f32, 2.5, 0.0, f32::NAN], &[4]).unwrap();
        let d = compare(&a, &b).expect("host arrays");
        assert_eq!((d.max_abs, d.mismatched), (0.5, 1));
        assert!((d.max_rel - 0.2).abs() < 1e-12);
        let c = Array::from_slice(&[1.0f32, 2.0, 1e-6, 0.0], &[4]).unwrap();
        let d = compare(&c, &a).expect("host arrays");
        // 1e-6 against 0 is within atol; 0 against NaN is not.
        assert_eq!(
            (d.max_abs, d.max_rel, d.mismatched),
            (f64::INFINITY, f64::INFINITY, 1)
        );
        let inf = Array::from_slice(&[f32::INFINITY, 1.0], &[2]).unwrap();
        let one = Array::from_slice(&[f32::INFINITY, f32::INFINITY], &[2]).unwrap();
        assert_eq!(compare(&inf, &one).expect("host arrays").mismatched, 1);
        let i = Array::from_slice(&[1i64, 2], &[2]).unwrap();
        let j = Array::from_slice(&[1i64, 3], &[2]).unwrap();
        assert_eq!(compare(&i, &j).expect("host arrays").mismatched, 1);
    }
}
