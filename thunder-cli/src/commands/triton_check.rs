//! `thunder triton-check`: the Triton plugin's shipped kernels on the GPU machine
//! (scripts/gpu/triton_check.sh runs it and times PyTorch's attention beside it).
//!
//! - **Differential**: one sample per shipped package runs through the `triton` executor alone
//!   (so a package that does not claim its sample fails instead of falling back) on CUDA, and
//!   through the interpreter on the CPU; outputs must agree within the dtype's tolerance. The
//!   training samples run `ltorch.sdpa_fwd_lse` (out and lse compared) and `sdpa_fwd_lse`
//!   followed by `ltorch.sdpa_bwd` (dq, dk, dv compared), every op on the triton executor, with
//!   the largest error relative to the output's largest magnitude.
//! - **Benchmarks**: attention at B8 H12 T1024 D64 bf16 (causal and not) through the Triton
//!   kernels: inference, `sdpa_fwd_lse`, `sdpa_bwd`, and the two chained (a training step's
//!   attention); RMSNorm over rows of 4096 through the Triton kernel and through the cuda-fuser
//!   (its decomposition).
//!
//! Output: a table, or with `--json` one JSON object; its keys are stable.

use super::gpu_common::{program, report, time_ms, ty, Sample};
use crate::host_args::HostArgs;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use thunder_core::ir::Trace;
use thunder_core::{Array, DType, Device, PluginHost};
use thunder_torch::parse_trace;

const DEV: Device = Device::Cuda(0);

fn sdpa_program(d: DType, q: &[i64], k: &[i64], causal: bool, scale: &str) -> String {
    program(
        &[("q", ty(d, q)), ("k", ty(d, k)), ("v", ty(d, k))],
        &format!(
            "ltorch.scaled_dot_product_attention(q, k, v, None, {}, {scale})",
            if causal { "True" } else { "False" }
        ),
    )
}

/// A program of the named inputs whose body is `lines` (`lhs = call`), returning `outputs`.
fn program_lines(inputs: &[(&str, String)], lines: &[String], outputs: &str) -> String {
    let names: Vec<&str> = inputs.iter().map(|(n, _)| *n).collect();
    let mut text = format!("def computation({}):\n", names.join(", "));
    for (n, t) in inputs {
        text.push_str(&format!("  # {n}: \"{t}\"\n"));
    }
    for l in lines {
        text.push_str(&format!("  {l}\n"));
    }
    text.push_str(&format!("  return ({outputs},)\n"));
    text
}

fn attn_kwargs(causal: bool, scale: &str) -> String {
    format!(
        "is_causal={}, scale={scale}",
        if causal { "True" } else { "False" }
    )
}

/// `ltorch.sdpa_fwd_lse` alone: returns out and lse.
fn fwd_lse_program(d: DType, q: &[i64], k: &[i64], causal: bool, scale: &str) -> String {
    program_lines(
        &[("q", ty(d, q)), ("k", ty(d, k)), ("v", ty(d, k))],
        &[format!(
            "o, lse = ltorch.sdpa_fwd_lse(q, k, v, {})",
            attn_kwargs(causal, scale)
        )],
        "o, lse",
    )
}

/// The forward with lse, then the backward reading it: returns dq, dk, dv.
fn fwd_bwd_program(d: DType, q: &[i64], k: &[i64], causal: bool, scale: &str) -> String {
    let kw = attn_kwargs(causal, scale);
    program_lines(
        &[
            ("q", ty(d, q)),
            ("k", ty(d, k)),
            ("v", ty(d, k)),
            ("g", ty(d, q)),
        ],
        &[
            format!("o, lse = ltorch.sdpa_fwd_lse(q, k, v, {kw})"),
            format!("dq, dk, dv = ltorch.sdpa_bwd(g, q, k, v, o, lse, {kw})"),
        ],
        "dq, dk, dv",
    )
}

/// `ltorch.sdpa_bwd` alone (for timing; its inputs are random).
fn bwd_program(d: DType, q: &[i64], causal: bool) -> String {
    let lse = &q[..q.len() - 1];
    program_lines(
        &[
            ("g", ty(d, q)),
            ("q", ty(d, q)),
            ("k", ty(d, q)),
            ("v", ty(d, q)),
            ("o", ty(d, q)),
            ("lse", ty(DType::F32, lse)),
        ],
        &[format!(
            "dq, dk, dv = ltorch.sdpa_bwd(g, q, k, v, o, lse, {})",
            attn_kwargs(causal, "None")
        )],
        "dq, dk, dv",
    )
}

fn rms_program(d: DType, x: &[i64], eps: &str) -> String {
    let n = x[x.len() - 1];
    program(
        &[("x", ty(d, x)), ("w", ty(d, &[n]))],
        &format!("ltorch.rms_norm(x, [{n}], w, {eps})"),
    )
}

/// One or more samples per shipped package (`executors/triton/kernels/`).
pub fn samples() -> Vec<Sample> {
    let mut out = Vec::new();
    for d in [DType::F16, DType::BF16] {
        for hd in [64, 128] {
            for causal in [false, true] {
                let name = format!(
                    "sdpa_{}_d{hd}{}",
                    d.short_name(),
                    if causal { "_causal" } else { "" }
                );
                out.push(Sample {
                    program: sdpa_program(d, &[2, 3, 256, hd], &[2, 3, 256, hd], causal, "None"),
                    name: name.clone(),
                    dtype: d,
                });
                // Fewer queries than keys, and an explicit scale.
                out.push(Sample {
                    program: sdpa_program(d, &[1, 2, 128, hd], &[1, 2, 384, hd], causal, "0.3"),
                    name: format!("{name}_l128_s384"),
                    dtype: d,
                });
            }
        }
    }
    out.extend(training_samples());
    for d in [DType::F16, DType::BF16, DType::F32] {
        for (shape, eps) in [
            (vec![4i64, 768], "None"),
            (vec![3, 1000], "1e-05"),
            (vec![2, 5, 4096], "1e-06"),
        ] {
            out.push(Sample {
                name: format!("rms_norm_{}_{}", d.short_name(), shape[shape.len() - 1]),
                program: rms_program(d, &shape, eps),
                dtype: d,
            });
        }
    }
    out
}

/// Samples of the training packages (`sdpa_fwd_lse_*`, `sdpa_bwd_*`): their names start with
/// `train_`, and they are compared relative to each output's largest magnitude.
fn training_samples() -> Vec<Sample> {
    let mut out = Vec::new();
    for d in [DType::F16, DType::BF16] {
        for hd in [64, 128] {
            for causal in [false, true] {
                let tail = format!(
                    "{}_d{hd}{}",
                    d.short_name(),
                    if causal { "_causal" } else { "" }
                );
                let (q, k) = ([2, 3, 256, hd], [2, 3, 256, hd]);
                // Fewer queries than keys with an explicit scale; more queries than keys.
                let (q2, k2) = ([1, 2, 128, hd], [1, 2, 384, hd]);
                let (q3, k3) = ([1, 2, 384, hd], [1, 2, 128, hd]);
                out.push(Sample {
                    name: format!("train_fwd_lse_{tail}"),
                    program: fwd_lse_program(d, &q, &k, causal, "None"),
                    dtype: d,
                });
                out.push(Sample {
                    name: format!("train_fwd_lse_{tail}_l128_s384"),
                    program: fwd_lse_program(d, &q2, &k2, causal, "0.3"),
                    dtype: d,
                });
                out.push(Sample {
                    name: format!("train_fwd_bwd_{tail}"),
                    program: fwd_bwd_program(d, &q, &k, causal, "None"),
                    dtype: d,
                });
                out.push(Sample {
                    name: format!("train_fwd_bwd_{tail}_l128_s384"),
                    program: fwd_bwd_program(d, &q2, &k2, causal, "0.3"),
                    dtype: d,
                });
                out.push(Sample {
                    name: format!("train_fwd_bwd_{tail}_l384_s128"),
                    program: fwd_bwd_program(d, &q3, &k3, causal, "None"),
                    dtype: d,
                });
            }
        }
    }
    out
}

/// Largest |got - want| over the largest |want| (at least 1), for attention's training
/// outputs: gradients grow with the sizes, and both sides round P to the input dtype.
fn max_scaled_error(got: &Array, want: &Array, d: DType) -> Result<f64> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        bail!("got {}, want {}", got.ty(), want.ty());
    }
    let (g, w) = (got.to_f64_vec()?, want.to_f64_vec()?);
    let scale = w.iter().fold(1f64, |m, x| m.max(x.abs()));
    let err = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs())
        .fold(0f64, f64::max);
    let tol = if d == DType::BF16 { 4e-2 } else { 1e-2 };
    // A NaN anywhere fails too.
    if g.iter().any(|x| x.is_nan()) || err / scale > tol {
        bail!("max |err| {err:.3e} over max |want| {scale:.3e} exceeds {tol}");
    }
    Ok(err / scale)
}

/// The sample (`kernel`, parsed) run by the interpreter on the CPU in f32 (the program's f16/bf16 annotations read
/// as f32, the same input values), each output rounded once to the kernel's output dtype: run in
/// the low-precision dtype, the decomposition rounds the scores to bf16 before the softmax and
/// is itself the less accurate side (5% off at S 384, D 128), which the kernel, keeping f32
/// scores and accumulators, is not.
fn f32_reference(
    reference: &PluginHost,
    s: &Sample,
    kernel: &Trace,
    inputs: &[Array],
) -> Result<Vec<Array>> {
    let trace = parse_trace(&f32_program(s))?.on_device(Device::Cpu);
    let as_f32 = |a: &Array| -> thunder_core::Result<Array> {
        match a.dtype() {
            DType::F16 | DType::BF16 => Array::from_f64(&a.to_f64_vec()?, a.shape(), DType::F32),
            _ => Ok(a.clone()),
        }
    };
    let wide: Vec<Array> = inputs
        .iter()
        .map(as_f32)
        .collect::<thunder_core::Result<_>>()?;
    let (_, prog) = thunder_core::compile_trace(reference, trace)?;
    let want = prog.run(&wide)?;
    let kernel_dtypes: Vec<DType> = kernel.outputs.iter().map(|&v| kernel.ty(v).dtype).collect();
    want.into_iter()
        .zip(kernel_dtypes)
        .map(|(w, d)| Ok(Array::from_f64(&w.to_f64_vec()?, w.shape(), d)?))
        .collect()
}

/// The sample's program with its f16/bf16 tensors read as f32.
fn f32_program(s: &Sample) -> String {
    let name = s.dtype.short_name();
    s.program.replace(&format!(" {name}["), " f32[")
}

/// The kernel's tolerance for outputs of dtype `d`, against the f32 reference rounded to `d`.
fn tolerance(d: DType) -> (f64, f64) {
    match d {
        DType::F16 => (1e-2, 1e-2),
        DType::BF16 => (3e-2, 3e-2),
        _ => (2e-5, 2e-5),
    }
}

fn max_error(got: &Array, want: &Array, d: DType) -> Result<f64> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        bail!("got {}, want {}", got.ty(), want.ty());
    }
    let (rtol, atol) = tolerance(d);
    let mut worst = 0f64;
    for (i, (g, w)) in got
        .to_f64_vec()?
        .into_iter()
        .zip(want.to_f64_vec()?)
        .enumerate()
    {
        let err = (g - w).abs();
        if !(g == w || err <= atol + rtol * w.abs()) {
            bail!("element {i}: got {g}, want {w}");
        }
        worst = worst.max(err);
    }
    Ok(worst)
}

fn differential(triton: &PluginHost, reference: &PluginHost) -> Result<Value> {
    let mut passed = 0;
    let mut failures = Vec::new();
    let all = samples();
    for (k, s) in all.iter().enumerate() {
        let outcome = (|| -> Result<f64> {
            let trace = parse_trace(&s.program)?;
            let inputs: Vec<Array> = trace
                .inputs
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    Array::random(&trace.ty(v).shape, trace.ty(v).dtype, (k * 7 + i) as u64)
                })
                .collect::<thunder_core::Result<_>>()?;
            let want = f32_reference(reference, s, &trace, &inputs)?;
            let on_gpu: Vec<Array> = inputs
                .iter()
                .map(|a| a.to(DEV))
                .collect::<thunder_core::Result<_>>()?;
            let calls = s.program.matches(" = ltorch.").count();
            let (traces, prog) = thunder_core::compile_trace(triton, trace)?;
            let ran = traces
                .execution
                .steps
                .iter()
                .filter(|step| step.executor == "triton")
                .count();
            if ran < calls {
                bail!("the triton executor ran {ran} of its {calls} ops");
            }
            let got = prog.run(&on_gpu)?;
            let mut worst = 0f64;
            for (g, w) in got.iter().zip(&want) {
                let g = g.to(Device::Cpu)?;
                worst = worst.max(if s.name.starts_with("train_") {
                    max_scaled_error(&g, w, s.dtype)?
                } else {
                    max_error(&g, w, s.dtype)?
                });
            }
            Ok(worst)
        })();
        match outcome {
            Ok(_) => passed += 1,
            Err(e) => failures.push(json!({"sample": s.name, "error": format!("{e:#}")})),
        }
    }
    Ok(json!({"samples": all.len(), "passed": passed, "failures": failures}))
}

fn time_program(host: &PluginHost, text: &str, seed: u64) -> Result<(f64, Vec<String>)> {
    let trace = parse_trace(text)?;
    let args: Vec<Array> = trace
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            Array::random(&trace.ty(v).shape, trace.ty(v).dtype, seed + i as u64)?.to(DEV)
        })
        .collect::<thunder_core::Result<_>>()?;
    let (traces, prog) = thunder_core::compile_trace(host, trace)?;
    let executors = traces
        .execution
        .steps
        .iter()
        .map(|s| s.executor.clone())
        .collect();
    let ms = time_ms(20, || {
        prog.run(&args)?;
        Ok(())
    })?;
    Ok((ms, executors))
}

fn benchmarks(triton: &PluginHost, fuser: &PluginHost) -> Value {
    // Each row stands alone: one that fails (say, the fuser cannot take the decomposition)
    // records its error and the others still run.
    let row = |r: Result<Value>| r.unwrap_or_else(|e| json!({"error": format!("{e:#}")}));
    let mut rows = serde_json::Map::new();
    let shape = [8i64, 12, 1024, 64];
    for causal in [false, true] {
        let text = sdpa_program(DType::BF16, &shape, &shape, causal, "None");
        let name = format!(
            "sdpa_b8h12t1024d64_bf16{}",
            if causal { "_causal" } else { "" }
        );
        // FLOPs of the two matmuls (halved when causal), as PyTorch's benchmarks count them.
        let flops = 4.0 * 8.0 * 12.0 * 1024.0 * 1024.0 * 64.0 / if causal { 2.0 } else { 1.0 };
        let r = time_program(triton, &text, 11).map(|(ms, executors)| {
            json!({"ms": ms, "tflops": flops / (ms * 1e-3) / 1e12, "executors": executors})
        });
        rows.insert(name, row(r));
        // Training: the forward saving lse, the backward alone (2.5x the forward's FLOPs, as
        // FlashAttention counts them), and the two chained.
        let tail = format!("b8h12t1024d64_bf16{}", if causal { "_causal" } else { "" });
        for (kind, text, f) in [
            (
                "sdpa_fwd_lse",
                fwd_lse_program(DType::BF16, &shape, &shape, causal, "None"),
                flops,
            ),
            (
                "sdpa_bwd",
                bwd_program(DType::BF16, &shape, causal),
                2.5 * flops,
            ),
            (
                "attn_fwd_bwd",
                fwd_bwd_program(DType::BF16, &shape, &shape, causal, "None"),
                3.5 * flops,
            ),
        ] {
            let r = time_program(triton, &text, 31).map(|(ms, executors)| {
                json!({"ms": ms, "tflops": f / (ms * 1e-3) / 1e12, "executors": executors})
            });
            rows.insert(format!("{kind}_{tail}"), row(r));
        }
    }
    let text = rms_program(DType::BF16, &[8192, 4096], "1e-06");
    let bytes = 2.0 * 8192.0 * 4096.0 * 2.0;
    let r = time_program(triton, &text, 21).map(|(ms, executors)| {
        json!({"ms": ms, "gbps": bytes / (ms * 1e-3) / 1e9, "executors": executors})
    });
    rows.insert("rms_norm_8192x4096_bf16".into(), row(r));
    let r = time_program(fuser, &text, 21).map(|(ms, executors)| {
        json!({"ms": ms, "gbps": bytes / (ms * 1e-3) / 1e9, "executors": executors})
    });
    rows.insert("rms_norm_8192x4096_bf16_cuda_fuser".into(), row(r));
    Value::Object(rows)
}

pub fn run(args: &HostArgs, json_out: bool, skip_bench: bool) -> Result<()> {
    let info = thunder_core::cuda::device_info(0).context("triton-check needs cuda:0")?;
    let mut triton = args.host()?;
    triton
        .restrict_to(&["triton"])
        .map_err(|e| anyhow!("{e}: is the triton plugin built and listed?"))?;
    let mut reference = args.host()?;
    reference.restrict_to(&["interpreter"])?;
    let diff = differential(&triton, &reference)?;
    let bench = if skip_bench {
        Value::Null
    } else {
        let mut fuser = args.host()?;
        fuser
            .restrict_to(&["cublas", "cuda-fuser"])
            .map_err(|e| anyhow!("{e}: are the cublas and cuda-fuser plugins built?"))?;
        benchmarks(&triton, &fuser)
    };
    report(&info, diff, bench, json_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU machine is the wrong place to find a typo: every sample parses here.
    #[test]
    fn every_sample_program_parses() {
        let all = samples();
        assert_eq!(all.len(), 16 + 40 + 9);
        for s in &all {
            parse_trace(&s.program).unwrap_or_else(|e| panic!("{}: {e}\n{}", s.name, s.program));
        }
    }

    /// The f32 reference reads every f16/bf16 input as f32 and nothing else changes.
    #[test]
    fn the_reference_programs_are_the_samples_in_f32() {
        for s in samples() {
            let (low, wide) = (
                parse_trace(&s.program).unwrap(),
                parse_trace(&f32_program(&s)).unwrap(),
            );
            assert_eq!(low.inputs.len(), wide.inputs.len(), "{}", s.name);
            for (&a, &b) in low.inputs.iter().zip(&wide.inputs) {
                let (a, b) = (low.ty(a), wide.ty(b));
                assert_eq!(a.shape, b.shape, "{}", s.name);
                let want = if a.dtype == s.dtype {
                    DType::F32
                } else {
                    a.dtype
                };
                assert_eq!(b.dtype, want, "{}", s.name);
            }
        }
    }
}
