//! `thunder bench PROGRAM -i NAME=SPEC ... [--device D] [--grad] [--json]`: times one program
//! as `trtexec` times an engine. The first call (parse, passes, claims, compile, run) is timed
//! on its own; then warm-up calls, then timed calls (median, min, samples); then profiled
//! calls time each region, so the report says which executor's region takes the time. An ONNX
//! file is imported for the given inputs (parse = load + translate) and benched the same way.
//! `docs/bench-json.md` describes the `--json` output.

use crate::host_args::HostArgs;
use crate::inputs::match_inputs;
use crate::program_args::InputArgs;
use anyhow::{Context, Result};
use serde_json::{json, Value as Json};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use thunder_core::autograd::value_and_grad;
use thunder_core::host::exec_trace::ExecutionTrace;
use thunder_core::runtime::StepTime;
use thunder_core::{Array, Tensor};

pub struct ProgramBenchOptions {
    pub grad: bool,
    /// Write the execution traces to stderr (the report stays on stdout).
    pub print_traces: bool,
    pub json: bool,
    /// Timed samples (default: as many as fit in `min_time`, at least 5).
    pub reps: Option<usize>,
    pub min_time: f64,
}

/// Calls before timing starts: at least this many, and at least `WARMUP_SECONDS` of them.
const WARMUP_CALLS: usize = 3;
const WARMUP_SECONDS: f64 = 0.05;
const MIN_SAMPLES: usize = 5;
const MAX_SAMPLES: usize = 10_000;
/// Profiled calls (each region timed) for the breakdown.
const PROFILED_CALLS: usize = 5;

fn ms(seconds: f64) -> f64 {
    seconds * 1e3
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

struct Steady {
    warmup_calls: usize,
    median: f64,
    min: f64,
    samples: usize,
}

/// Warm-up, then one sample per call until `reps` samples or `min_time` seconds (and at
/// least `MIN_SAMPLES`).
fn steady(opts: &ProgramBenchOptions, mut call: impl FnMut() -> Result<()>) -> Result<Steady> {
    let start = Instant::now();
    let mut warmup_calls = 0;
    while warmup_calls < WARMUP_CALLS || start.elapsed().as_secs_f64() < WARMUP_SECONDS {
        call()?;
        warmup_calls += 1;
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    loop {
        let t = Instant::now();
        call()?;
        samples.push(t.elapsed().as_secs_f64());
        let done = match opts.reps {
            Some(n) => samples.len() >= n.max(1),
            None => {
                samples.len() >= MAX_SAMPLES
                    || (samples.len() >= MIN_SAMPLES
                        && start.elapsed().as_secs_f64() >= opts.min_time)
            }
        };
        if done {
            break;
        }
    }
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(Steady {
        warmup_calls,
        median: median(&mut samples),
        min,
        samples: samples.len(),
    })
}

/// One region of the breakdown: median time over the profiled calls.
struct RegionTime {
    pass: &'static str,
    region: usize,
    executor: String,
    ops: Vec<String>,
    median: f64,
}

/// Median time per region over `runs` (each a list of step times in region order).
fn regions(pass: &'static str, et: &ExecutionTrace, runs: &[Vec<StepTime>]) -> Vec<RegionTime> {
    et.steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let mut times: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.get(i).map(|s| s.seconds))
                .collect();
            RegionTime {
                pass,
                region: i,
                executor: step.executor.clone(),
                ops: step
                    .ops
                    .iter()
                    .map(|&o| et.trace.bsyms[o].sym.id.to_string())
                    .collect(),
                median: median(&mut times),
            }
        })
        .collect()
}

struct Report {
    first_total: f64,
    parse: f64,
    /// Passes, claims and compile (`None` under `--grad`, where one call does it all).
    compile: Option<f64>,
    first_run: Option<f64>,
    steady: Steady,
    regions: Vec<RegionTime>,
}

pub fn run(
    args: &HostArgs,
    program: &Path,
    io: &InputArgs,
    opts: &ProgramBenchOptions,
) -> Result<()> {
    let device = io.device()?;
    if super::onnx::is_onnx(program) {
        if opts.grad {
            anyhow::bail!(
                "{}: --grad is not supported for ONNX models",
                program.display()
            );
        }
        let start = Instant::now();
        let b = super::onnx::prepare_bench(args, program, io)?;
        let (spec, arrays) = (b.spec, b.arrays);
        let report = forward_report(
            start,
            b.load_and_translate,
            spec.timings.compile.as_secs_f64(),
            &spec.traces.execution,
            |a| spec.program.run(a),
            |a| spec.program.run_profiled(a),
            &arrays,
            opts,
        )?;
        return emit(program, device, opts, &report);
    }
    let host = args.host()?;
    let start = Instant::now();
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
    let parse = start.elapsed().as_secs_f64();
    let report = if opts.grad {
        bench_grad(host, trace, arrays, parse, start, opts)?
    } else {
        let t = Instant::now();
        let (traces, compiled) = thunder_core::compile_trace(&host, trace)?;
        let compile = t.elapsed().as_secs_f64();
        forward_report(
            start,
            parse,
            compile,
            &traces.execution,
            |a| compiled.run(a),
            |a| compiled.run_profiled(a),
            &arrays,
            opts,
        )?
    };
    emit(program, device, opts, &report)
}

fn emit(
    program: &Path,
    device: Option<thunder_core::Device>,
    opts: &ProgramBenchOptions,
    report: &Report,
) -> Result<()> {
    let device_name = device.map_or("cpu".to_string(), |d| d.to_string());
    if opts.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&to_json(program, &device_name, opts.grad, report))?
        );
    } else {
        print_report(program, &device_name, opts.grad, report);
    }
    Ok(())
}

/// The first run, the steady state and the per-region profile of a compiled forward program
/// (a trace program's, or an ONNX model's specialisation).
#[allow(clippy::too_many_arguments)]
fn forward_report(
    start: Instant,
    parse: f64,
    compile: f64,
    execution: &ExecutionTrace,
    run: impl Fn(&[Array]) -> thunder_core::Result<Vec<Array>>,
    run_profiled: impl Fn(&[Array]) -> thunder_core::Result<(Vec<Array>, Vec<StepTime>)>,
    arrays: &[Array],
    opts: &ProgramBenchOptions,
) -> Result<Report> {
    let t = Instant::now();
    run(arrays)?;
    let first_run = t.elapsed().as_secs_f64();
    let first_total = start.elapsed().as_secs_f64();
    if opts.print_traces {
        eprintln!("{}", ExecutionTrace::print(execution));
    }
    let steady = steady(opts, || run(arrays).map(|_| ()).map_err(Into::into))?;
    let runs = (0..PROFILED_CALLS)
        .map(|_| run_profiled(arrays).map(|(_, s)| s))
        .collect::<thunder_core::Result<Vec<_>>>()?;
    Ok(Report {
        first_total,
        parse,
        compile: Some(compile),
        first_run: Some(first_run),
        steady,
        regions: regions("forward", execution, &runs),
    })
}

fn bench_grad(
    host: thunder_core::PluginHost,
    trace: thunder_core::ir::Trace,
    arrays: Vec<Array>,
    parse: f64,
    start: Instant,
    opts: &ProgramBenchOptions,
) -> Result<Report> {
    let names = trace.input_names();
    let marked: Vec<Array> = arrays
        .into_iter()
        .map(|a| {
            let float = a.dtype().is_float();
            a.with_requires_grad(float)
        })
        .collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let program = Arc::new(trace);
    let f = value_and_grad(Some(Arc::new(host)), move |xs: &[Tensor]| {
        thunder_core::trace_ctx::replay(&program, xs)
    })
    .with_input_names(&name_refs);
    f.call(&marked)?;
    let first_total = start.elapsed().as_secs_f64();
    let steady = steady(opts, || f.call(&marked).map(|_| ()).map_err(Into::into))?;
    let mut fwd_runs = Vec::new();
    let mut bwd_runs = Vec::new();
    for _ in 0..PROFILED_CALLS {
        let (_, _, fwd, bwd) = f.call_profiled(&marked)?;
        fwd_runs.push(fwd);
        bwd_runs.push(bwd);
    }
    let traces = f
        .last_traces()
        .ok_or_else(|| anyhow::anyhow!("the grad call kept no traces"))?;
    if opts.print_traces {
        eprintln!("{}", ExecutionTrace::print(&traces.forward.execution));
        eprintln!("{}", ExecutionTrace::print(&traces.backward.execution));
    }
    let mut regions = regions("forward", &traces.forward.execution, &fwd_runs);
    regions.extend(self::regions(
        "backward",
        &traces.backward.execution,
        &bwd_runs,
    ));
    Ok(Report {
        first_total,
        parse,
        compile: None,
        first_run: None,
        steady,
        regions,
    })
}

/// `ltorch.matmul, ltorch.add (+3 more)`: a region's ops, shortened.
fn ops_summary(ops: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = ops
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ops.len() > SHOWN {
        s.push_str(&format!(" (+{} more)", ops.len() - SHOWN));
    }
    s
}

fn print_report(program: &Path, device: &str, grad: bool, r: &Report) {
    let what = if grad { "value and grad" } else { "forward" };
    println!("{} on {device} ({what})", program.display());
    match (r.compile, r.first_run) {
        (Some(c), Some(run)) => println!(
            "first call   {:>10.3} ms  (parse {:.3} ms, passes + claims + compile {:.3} ms, run {:.3} ms)",
            ms(r.first_total),
            ms(r.parse),
            ms(c),
            ms(run)
        ),
        _ => println!(
            "first call   {:>10.3} ms  (parse {:.3} ms; trace, grad transform, passes, claims, compile and run {:.3} ms)",
            ms(r.first_total),
            ms(r.parse),
            ms(r.first_total - r.parse)
        ),
    }
    let s = &r.steady;
    println!(
        "steady state {:>10.3} ms median, {:.3} ms min, {} samples after {} warm-up calls",
        ms(s.median),
        ms(s.min),
        s.samples,
        s.warmup_calls
    );
    let total: f64 = r.regions.iter().map(|x| x.median).sum();
    println!(
        "regions (median of {PROFILED_CALLS} profiled calls; {:.3} ms in all):",
        ms(total)
    );
    println!(
        "  {:<9} {:<8} {:<14} {:>10} {:>7}  ops",
        "pass", "region", "executor", "ms", "share"
    );
    for x in &r.regions {
        println!(
            "  {:<9} {:<8} {:<14} {:>10.3} {:>6.1}%  {}",
            x.pass,
            format!("region{}", x.region),
            x.executor,
            ms(x.median),
            100.0 * x.median / total.max(f64::MIN_POSITIVE),
            ops_summary(&x.ops)
        );
    }
}

fn to_json(program: &Path, device: &str, grad: bool, r: &Report) -> Json {
    let total: f64 = r.regions.iter().map(|x| x.median).sum();
    json!({
        "program": program.display().to_string(),
        "device": device,
        "grad": grad,
        "first_call": {
            "total_ms": ms(r.first_total),
            "parse_ms": ms(r.parse),
            "compile_ms": r.compile.map(ms),
            "run_ms": r.first_run.map(ms),
        },
        "steady": {
            "warmup_calls": r.steady.warmup_calls,
            "median_ms": ms(r.steady.median),
            "min_ms": ms(r.steady.min),
            "samples": r.steady.samples,
        },
        "regions": r.regions.iter().map(|x| json!({
            "pass": x.pass,
            "region": x.region,
            "executor": x.executor,
            "ops": x.ops,
            "median_ms": ms(x.median),
            "share": x.median / total.max(f64::MIN_POSITIVE),
        })).collect::<Vec<_>>(),
    })
}
