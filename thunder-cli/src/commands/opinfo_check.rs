//! `thunder opinfo-check --device cuda:0`: every OpInfo sample (the ~10k the CPU executors are
//! checked on against PyTorch) run on a device by the configured executors and compared with
//! the interpreter on the CPU, with the OpInfo entry's tolerances. The report says, per sample,
//! whether it agreed, differed, or could not compile (and then why: the op nobody on that
//! device claims), and which executors ran it. Nothing falls back to the host silently: a
//! region claimed by a CPU executor is counted as a host fallback.

use super::compare::compare_within;
use super::opinfo_grads;
use crate::host_args::HostArgs;
use anyhow::{anyhow, Result};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use thunder_core::{Array, Device, Error, PluginHost};
use thunder_opinfo::{build, sample_key, table, OpInfo, SArg};

pub struct OpinfoCheckOptions<'a> {
    pub device: &'a str,
    /// Only these op ids (all when empty).
    pub only: &'a [String],
    pub json: bool,
    /// The gradient fixtures to differentiate on the device too (`None`: no gradient samples).
    pub grads: Option<&'a Path>,
    /// Whether to run the OpInfo samples (false: the gradient samples alone).
    pub samples: bool,
}

/// What became of one sample.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Agree,
    Differ(String),
    /// No executor on the device claims an op (the message names it).
    Unclaimed(String),
    /// Compiled, then failed to run, or another error.
    Failed(String),
}

impl Outcome {
    fn tag(&self) -> &'static str {
        match self {
            Outcome::Agree => "agree",
            Outcome::Differ(_) => "differ",
            Outcome::Unclaimed(_) => "unclaimed",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// `f` over `work` on all cores, results in order.
fn par_map<T: Sync, R: Send>(work: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = work.len().div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = work
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// Counts over (outcome tag, detail, executors) rows: per tag, per executor, host fallbacks,
/// and the ops no device executor claims.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<&'static str, usize>,
    by_executor: BTreeMap<String, usize>,
    unclaimed_ops: BTreeMap<String, usize>,
    host_fallbacks: usize,
}

impl Tally {
    fn add(&mut self, device: Device, tag: &'static str, detail: &str, executors: &[String]) {
        if device != Device::Cpu
            && executors
                .iter()
                .any(|e| HOST_EXECUTORS.contains(&e.as_str()))
        {
            self.host_fallbacks += 1;
        }
        for e in executors {
            *self.by_executor.entry(e.clone()).or_default() += 1;
        }
        *self.counts.entry(tag).or_default() += 1;
        if tag == "unclaimed" {
            // `prims.slice (`t3 = ...`); prims.cat (...)`: count the op names.
            for name in detail.split("; ").filter_map(|s| s.split(' ').next()) {
                *self.unclaimed_ops.entry(name.to_string()).or_default() += 1;
            }
        }
    }

    fn total(&self) -> usize {
        self.counts.values().sum()
    }

    fn agree(&self) -> usize {
        self.counts.get("agree").copied().unwrap_or(0)
    }

    /// The counts under `header` (which names agree/total).
    fn print(&self, header: &str, device: Device) {
        println!("{header}");
        for (tag, n) in &self.counts {
            println!("  {tag:<10} {n}");
        }
        println!(
            "  with a region on a host executor: {}",
            self.host_fallbacks
        );
        for (e, n) in &self.by_executor {
            println!("  ran on {e}: {n}");
        }
        if !self.unclaimed_ops.is_empty() {
            println!("no executor on {device} can run (stopped by each):");
            for (op, n) in &self.unclaimed_ops {
                println!("  {op:<32} {n}");
            }
        }
    }
}

/// The executors that only run on the host: a region of theirs in a device program is a copy
/// to the host and back.
const HOST_EXECUTORS: &[&str] = &["interpreter", "cpu-simd"];

fn run_on(
    host: &PluginHost,
    trace: &thunder_core::ir::Trace,
    inputs: &[Array],
) -> thunder_core::Result<(Vec<Array>, Vec<String>)> {
    let (traces, program) = thunder_core::compile_trace(host, trace.clone())?;
    Ok((program.run(inputs)?, traces.execution.executors_used()))
}

/// One sample: `None` when the interpreter on the CPU refuses it (not a case the op supports),
/// else its outcome on `device` and the executors that ran it.
fn check_sample(
    host: &PluginHost,
    reference: &PluginHost,
    device: Device,
    info: &OpInfo,
    args: &[SArg],
) -> Option<(Outcome, Vec<String>)> {
    let built = build(&info.id, args).ok()?;
    let (want, _) = run_on(reference, &built.trace, &built.inputs).ok()?;
    let moved: thunder_core::Result<Vec<Array>> =
        built.inputs.iter().map(|a| a.to(device)).collect();
    let (got, executors) =
        match moved.and_then(|inputs| run_on(host, &built.trace.on_device(device), &inputs)) {
            Err(Error::Unclaimed { ops }) => return Some((Outcome::Unclaimed(ops), Vec::new())),
            Err(e) => return Some((Outcome::Failed(e.to_string()), Vec::new())),
            Ok(r) => r,
        };
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let (rtol, atol) = info.tol.for_dtype(w.dtype());
        let d = match g
            .to(Device::Cpu)
            .map_err(anyhow::Error::from)
            .and_then(|g| compare_within(&g, w, rtol, atol))
        {
            Ok(d) => d,
            Err(e) => return Some((Outcome::Failed(e.to_string()), executors)),
        };
        if d.mismatched > 0 {
            let message = format!(
                "output {k}: {} of {} elements off (max abs {:.3e}, max rel {:.3e}) by {}",
                d.mismatched,
                w.numel(),
                d.max_abs,
                d.max_rel,
                executors.join("+")
            );
            return Some((Outcome::Differ(message), executors));
        }
    }
    Some((Outcome::Agree, executors))
}

pub fn run(args: &HostArgs, opts: &OpinfoCheckOptions) -> Result<()> {
    let device = Device::parse(opts.device).ok_or_else(|| {
        anyhow!(
            "--device: `{}` is not a device (expected cpu, cuda or cuda:N)",
            opts.device
        )
    })?;
    // A device that cannot hold a tensor (no driver) fails every sample the same way: say it once.
    Array::from_slice(&[0.0f32], &[1])?
        .to(device)
        .map_err(|e| anyhow!("--device {device}: {e}"))?;
    let host = Arc::new(args.host()?);
    let mut reference = args.host()?;
    reference
        .restrict_to(&["interpreter"])
        .map_err(|e| anyhow!("the reference run needs the interpreter: {e}"))?;
    let reference = Arc::new(reference);

    // Every sample as (key, op, tolerances, outcome), computed on all cores: a device run
    // compiles a kernel per sample, and compilers (NVRTC) take tens of milliseconds each.
    let mut work = Vec::new();
    for info in table() {
        if !opts.samples || (!opts.only.is_empty() && !opts.only.contains(&info.id)) {
            continue;
        }
        for &dtype in &info.dtypes {
            for (index, sample) in info.samples(dtype).into_iter().enumerate() {
                work.push((sample_key(&info.id, dtype, index), info, sample));
            }
        }
    }
    let results = par_map(&work, |(key, info, sample)| {
        check_sample(&host, &reference, device, info, &sample.args)
            .map(|(o, e)| (key.clone(), o, e))
    });

    let mut rows = Vec::new();
    let mut tally = Tally::default();
    for (key, outcome, executors) in results.into_iter().flatten() {
        let detail = match &outcome {
            Outcome::Agree => String::new(),
            Outcome::Differ(m) | Outcome::Unclaimed(m) | Outcome::Failed(m) => m.clone(),
        };
        tally.add(device, outcome.tag(), &detail, &executors);
        if matches!(outcome, Outcome::Differ(_) | Outcome::Failed(_)) && !opts.json {
            println!("{key}: {}: {detail}", outcome.tag());
        }
        rows.push(json!({"sample": key, "outcome": outcome.tag(), "executors": executors, "detail": detail}));
    }

    // The gradient samples: each fixture case differentiated on the device.
    let grads = match opts.grads {
        Some(dir) => {
            let cases = opinfo_grads::load_cases(dir)?;
            let results = par_map(&cases, |case| {
                opinfo_grads::check_case(&host, &reference, device, case)
                    .map(|(tag, detail, executors)| (case.key.clone(), tag, detail, executors))
            });
            let mut grad_rows = Vec::new();
            let mut grad_tally = Tally::default();
            for (key, tag, detail, executors) in results.into_iter().flatten() {
                grad_tally.add(device, tag, &detail, &executors);
                if matches!(tag, "differ" | "failed") && !opts.json {
                    println!("grad {key}: {tag}: {detail}");
                }
                grad_rows.push(
                    json!({"case": key, "outcome": tag, "executors": executors, "detail": detail}),
                );
            }
            Some((grad_tally, grad_rows))
        }
        None => None,
    };

    let (total, agree) = (tally.total(), tally.agree());
    let (grad_total, grad_agree) = grads
        .as_ref()
        .map_or((0, 0), |(t, _)| (t.total(), t.agree()));
    if opts.json {
        let grads_json = grads.as_ref().map(|(t, r)| {
            json!({
                "cases": t.total(),
                "counts": t.counts,
                "host_fallbacks": t.host_fallbacks,
                "executors": t.by_executor,
                "unclaimed_ops": t.unclaimed_ops,
                "rows": r,
            })
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "device": device.to_string(),
                "samples": total,
                "counts": tally.counts,
                "host_fallbacks": tally.host_fallbacks,
                "executors": tally.by_executor,
                "unclaimed_ops": tally.unclaimed_ops,
                "rows": rows,
                "grads": grads_json,
            }))?
        );
    } else {
        if opts.samples {
            tally.print(
                &format!("opinfo-check on {device}: {agree}/{total} samples agree"),
                device,
            );
        }
        match &grads {
            Some((t, _)) => t.print(
                &format!("gradient samples on {device}: {grad_agree}/{grad_total} agree"),
                device,
            ),
            None => println!("gradient samples: not run (no --grads fixtures)"),
        }
    }
    if agree == total && grad_agree == grad_total {
        Ok(())
    } else {
        Err(anyhow!(
            "{} of {total} samples and {} of {grad_total} gradient samples did not agree on {device}",
            total - agree,
            grad_total - grad_agree
        ))
    }
}
