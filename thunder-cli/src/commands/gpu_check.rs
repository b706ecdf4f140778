//! `thunder gpu-check`: the CUDA fuser's differential run and benchmarks, for the GPU machine
//! (scripts/gpu/check.sh runs it with PyTorch's numbers beside it).
//!
//! - **Differential**: every sample program runs through the cuda-fuser alone (so an op it does
//!   not claim is a failure, not a silent fallback) on CUDA, and through the interpreter on
//!   the CPU; outputs must agree within the dtype's tolerance.
//! - **Benchmarks**: the table (chain of 8 ops on 64M f32, cached-call host overhead,
//!   softmax and layer_norm over rows of 4096, first NVRTC compile and a cache hit).
//!
//! Output: a table, or with `--json` one JSON object; its keys are stable.

use super::gpu_common::{program, report, time_ms, ty, Sample};
use crate::host_args::HostArgs;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::time::Instant;
use thunder_core::ir::Trace;
use thunder_core::prims::{BinaryPrim, UnaryPrim};
use thunder_core::{Array, DType, Device, PluginHost};
use thunder_torch::parse_trace;

const DEV: Device = Device::Cuda(0);

/// The ltorch op of this name, or the prim itself where ltorch has none (trigamma).
fn layer_of(name: &str) -> &'static str {
    if thunder_core::ir::lookup_symbol(&format!("ltorch.{name}")).is_some() {
        "ltorch"
    } else {
        "prims"
    }
}

fn samples() -> Vec<Sample> {
    thunder_torch::register();
    // Every elementwise row of the table with a CUDA spelling (what cuda-fuser claims), plus
    // composites that fuse; a new row is sampled here with no edit.
    let mut unary: Vec<&str> = UnaryPrim::ALL
        .iter()
        .filter(|p| p.rule().cuda.is_some())
        .map(|p| p.name())
        .collect();
    unary.extend(["sigmoid", "relu", "silu"]);
    let mut binary: Vec<&str> = BinaryPrim::ALL
        .iter()
        .filter(|p| p.rule().float.is_some() && p.rule().cuda.is_some())
        .map(|p| p.name())
        .collect();
    binary.extend(["eq", "lt", "ge"]);
    let floats = [DType::F32, DType::F16, DType::BF16, DType::F64];
    let mut out = Vec::new();
    for &d in &floats {
        for shape in [&[3i64, 5][..], &[], &[0]] {
            for op in &unary {
                out.push(Sample {
                    name: format!("{op}/{}/{shape:?}", d.short_name()),
                    program: program(&[("x", ty(d, shape))], &format!("{}.{op}(x)", layer_of(op))),
                    dtype: d,
                });
            }
        }
        for op in &binary {
            out.push(Sample {
                name: format!("{op}/{}/broadcast", d.short_name()),
                program: program(
                    &[("a", ty(d, &[4, 1])), ("b", ty(d, &[1, 6]))],
                    &format!("{}.{op}(a, b)", layer_of(op)),
                ),
                dtype: d,
            });
            out.push(Sample {
                name: format!("{op}/{}/scalar-literal", d.short_name()),
                program: program(
                    &[("a", ty(d, &[7]))],
                    &format!("{}.{op}(a, 1.5)", layer_of(op)),
                ),
                dtype: d,
            });
        }
        let reductions = [
            ("sum-rows", "ltorch.sum(x, [1], False)"),
            ("sum-cols", "ltorch.sum(x, [0], False)"),
            ("sum-all", "ltorch.sum(x, None, False)"),
            ("amax-rows", "ltorch.amax(x, [1], False)"),
            ("mean-keepdim", "ltorch.mean(x, [1], True)"),
            ("softmax", "ltorch.softmax(x, -1)"),
            ("log_softmax", "ltorch.log_softmax(x, -1)"),
            ("softmax-dim0", "ltorch.softmax(x, 0)"),
        ];
        for (name, body) in reductions {
            for shape in [&[6i64, 300][..], &[5, 0]] {
                if shape[1] == 0 && name.contains("amax") {
                    continue;
                }
                out.push(Sample {
                    name: format!("{name}/{}/{shape:?}", d.short_name()),
                    program: program(&[("x", ty(d, shape))], body),
                    dtype: d,
                });
            }
        }
        out.push(Sample {
            name: format!("layer_norm/{}", d.short_name()),
            program: program(
                &[
                    ("x", ty(d, &[4, 768])),
                    ("w", ty(d, &[768])),
                    ("b", ty(d, &[768])),
                ],
                "ltorch.layer_norm(x, [768], w, b, 1e-05)",
            ),
            dtype: d,
        });
        out.push(Sample {
            name: format!("rms_norm/{}", d.short_name()),
            program: program(
                &[("x", ty(d, &[4, 512])), ("w", ty(d, &[512]))],
                "ltorch.rms_norm(x, [512], w, 1e-06)",
            ),
            dtype: d,
        });
        if d != DType::F64 {
            let products = [
                (
                    "matmul",
                    vec![("a", ty(d, &[64, 96])), ("b", ty(d, &[96, 48]))],
                    "ltorch.matmul(a, b)",
                ),
                (
                    "bmm",
                    vec![("a", ty(d, &[3, 33, 40])), ("b", ty(d, &[3, 40, 17]))],
                    "ltorch.bmm(a, b)",
                ),
                (
                    "linear-bias",
                    vec![
                        ("x", ty(d, &[2, 10, 64])),
                        ("w", ty(d, &[24, 64])),
                        ("b", ty(d, &[24])),
                    ],
                    "ltorch.linear(x, w, b)",
                ),
            ];
            for (name, inputs, body) in products {
                let inputs: Vec<(&str, String)> = inputs;
                out.push(Sample {
                    name: format!("{name}/{}", d.short_name()),
                    program: program(&inputs, body),
                    dtype: d,
                });
            }
        }
        out.push(Sample {
            name: format!("gelu-tanh/{}", d.short_name()),
            program: program(&[("x", ty(d, &[8, 33]))], "ltorch.gelu(x, \"tanh\")"),
            dtype: d,
        });
    }
    out
}

fn tolerance(d: DType) -> (f64, f64) {
    match d {
        DType::F16 => (2e-3, 2e-3),
        DType::BF16 => (1.6e-2, 1e-2),
        DType::F64 => (1e-12, 1e-12),
        _ => (2e-5, 2e-5),
    }
}

fn compare(got: &Array, want: &Array, d: DType) -> Result<()> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        bail!("got {}, want {}", got.ty(), want.ty());
    }
    let (rtol, atol) = tolerance(d);
    for (i, (g, w)) in got
        .to_f64_vec()?
        .into_iter()
        .zip(want.to_f64_vec()?)
        .enumerate()
    {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= atol + rtol * w.abs();
        if !ok {
            bail!("element {i}: got {g}, want {w}");
        }
    }
    Ok(())
}

fn run_on(host: &PluginHost, trace: &Trace, inputs: &[Array]) -> Result<(Vec<Array>, Vec<String>)> {
    let (traces, program) = thunder_core::compile_trace(host, trace.clone())?;
    let outs = program.run(inputs)?;
    let executors = traces
        .execution
        .steps
        .iter()
        .map(|s| s.executor.clone())
        .collect();
    Ok((outs, executors))
}

fn differential(fuser: &PluginHost, reference: &PluginHost) -> Result<Value> {
    let mut passed = 0;
    let mut failures = Vec::new();
    let all = samples();
    for (k, s) in all.iter().enumerate() {
        let outcome = (|| -> Result<()> {
            let trace = parse_trace(&s.program)?;
            let cpu = trace.on_device(Device::Cpu);
            let inputs: Vec<Array> = cpu
                .inputs
                .iter()
                .enumerate()
                .map(|(i, &v)| Array::random(&cpu.ty(v).shape, cpu.ty(v).dtype, (k * 7 + i) as u64))
                .collect::<thunder_core::Result<_>>()?;
            let (want, _) = run_on(reference, &cpu, &inputs)?;
            let on_gpu: Vec<Array> = inputs
                .iter()
                .map(|a| a.to(DEV))
                .collect::<thunder_core::Result<_>>()?;
            let (got, executors) = run_on(fuser, &trace, &on_gpu)?;
            if let Some(e) = executors
                .iter()
                .find(|e| *e != "cuda-fuser" && *e != "cublas")
            {
                bail!("a step ran on {e}");
            }
            for (g, w) in got.iter().zip(&want) {
                compare(&g.to(Device::Cpu)?, w, s.dtype)?;
            }
            Ok(())
        })();
        match outcome {
            Ok(()) => passed += 1,
            Err(e) => failures.push(json!({"sample": s.name, "error": format!("{e:#}")})),
        }
    }
    Ok(json!({"samples": all.len(), "passed": passed, "failures": failures}))
}

fn chain_program(n: i64, links: usize, scale: &str) -> String {
    let mut text = format!("def computation(x):\n  # x: \"{}\"\n", ty(DType::F32, &[n]));
    let mut prev = "x".to_string();
    for i in 0..links {
        let (op, c) = if i % 2 == 0 {
            ("mul", scale)
        } else {
            ("add", "0.1")
        };
        text.push_str(&format!("  t{i} = prims.{op}({prev}, {c})\n"));
        prev = format!("t{i}");
    }
    text.push_str(&format!("  return ({prev},)\n"));
    text
}

fn benchmarks(fuser: &PluginHost) -> Result<Value> {
    let n64m: i64 = 64 << 20;
    let mut rows = serde_json::Map::new();
    // Chain of 8 ops over 64M f32: one read and one write of 256 MiB.
    let trace = parse_trace(&chain_program(n64m, 8, "1.01"))?;
    let (_, chain) = thunder_core::compile_trace(fuser, trace)?;
    let x = Array::random(&[n64m], DType::F32, 1)?.to(DEV)?;
    let ms = time_ms(20, || {
        chain
            .run(std::slice::from_ref(&x))
            .map(drop)
            .map_err(Into::into)
    })?;
    rows.insert(
        "chain8_64m_f32".into(),
        json!({"ms": ms, "gb_per_s": 2.0 * 4.0 * n64m as f64 / ms / 1e6}),
    );
    // Host overhead of a cached call: 10 ops on 64 elements, calls queued without waiting.
    let trace = parse_trace(&chain_program(64, 10, "1.01"))?;
    let (_, small) = thunder_core::compile_trace(fuser, trace)?;
    let x64 = Array::random(&[64], DType::F32, 2)?.to(DEV)?;
    small.run(std::slice::from_ref(&x64))?;
    let calls = 2000;
    let t = Instant::now();
    for _ in 0..calls {
        small.run(std::slice::from_ref(&x64))?;
    }
    let host_us = t.elapsed().as_secs_f64() * 1e6 / calls as f64;
    thunder_core::cuda::synchronize(0)?;
    rows.insert("cached_call_64_us".into(), json!({"us": host_us}));
    // Row kernels over rows of 4096 (64M f32).
    let rows_n = n64m / 4096;
    for (name, body, extra) in [
        ("softmax_4096", "ltorch.softmax(x, -1)", false),
        (
            "layer_norm_4096",
            "ltorch.layer_norm(x, [4096], w, b, 1e-05)",
            true,
        ),
    ] {
        let mut inputs = vec![("x", ty(DType::F32, &[rows_n, 4096]))];
        if extra {
            inputs.push(("w", ty(DType::F32, &[4096])));
            inputs.push(("b", ty(DType::F32, &[4096])));
        }
        let (_, prog) = thunder_core::compile_trace(fuser, parse_trace(&program(&inputs, body))?)?;
        let mut args = vec![Array::random(&[rows_n, 4096], DType::F32, 3)?.to(DEV)?];
        if extra {
            args.push(Array::random(&[4096], DType::F32, 4)?.to(DEV)?);
            args.push(Array::random(&[4096], DType::F32, 5)?.to(DEV)?);
        }
        let ms = time_ms(20, || prog.run(&args).map(drop).map_err(Into::into))?;
        rows.insert(
            name.into(),
            json!({"ms": ms, "gb_per_s": 2.0 * 4.0 * n64m as f64 / ms / 1e6}),
        );
    }
    // Products through cuBLASLt: bf16 8192^2 and f32 4096^2 (TF32 off unless configured).
    for (name, d, n) in [
        ("matmul_bf16_8192", DType::BF16, 8192i64),
        ("matmul_f32_4096", DType::F32, 4096),
    ] {
        let text = program(
            &[("a", ty(d, &[n, n])), ("b", ty(d, &[n, n]))],
            "ltorch.matmul(a, b)",
        );
        let (_, prog) = thunder_core::compile_trace(fuser, parse_trace(&text)?)?;
        let args = vec![
            Array::random(&[n, n], d, 6)?.to(DEV)?,
            Array::random(&[n, n], d, 7)?.to(DEV)?,
        ];
        let ms = time_ms(20, || prog.run(&args).map(drop).map_err(Into::into))?;
        rows.insert(
            name.into(),
            json!({"ms": ms, "tflop_per_s": 2.0 * (n as f64).powi(3) / ms / 1e9}),
        );
    }
    // First compile of a region never seen (a constant unique to this run keeps it out of the
    // disk cache), then the same region again (memory cache hit).
    let fresh = format!("1.{}", std::process::id());
    let text = chain_program(4096, 6, &fresh);
    let t = Instant::now();
    thunder_core::compile_trace(fuser, parse_trace(&text)?)?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    thunder_core::compile_trace(fuser, parse_trace(&text)?)?;
    let hit_ms = t.elapsed().as_secs_f64() * 1e3;
    rows.insert(
        "compile_new_region".into(),
        json!({"first_ms": first_ms, "cache_hit_ms": hit_ms}),
    );
    Ok(Value::Object(rows))
}

pub fn run(args: &HostArgs, json_out: bool, skip_bench: bool) -> Result<()> {
    let info = thunder_core::cuda::device_info(0).context("gpu-check needs cuda:0")?;
    let mut fuser = args.host()?;
    fuser
        .restrict_to(&["cublas", "cuda-fuser"])
        .map_err(|e| anyhow!("{e}: are the cublas and cuda-fuser plugins built and listed?"))?;
    let mut reference = args.host()?;
    reference.restrict_to(&["interpreter"])?;
    let diff = differential(&fuser, &reference)?;
    let bench = if skip_bench {
        Value::Null
    } else {
        benchmarks(&fuser)?
    };
    report(&info, diff, bench, json_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU machine is the wrong place to find a typo: every sample parses and traces here.
    #[test]
    fn every_sample_program_parses() {
        let all = samples();
        assert!(all.len() > 300, "{}", all.len());
        for s in &all {
            parse_trace(&s.program).unwrap_or_else(|e| panic!("{}: {e}\n{}", s.name, s.program));
        }
        parse_trace(&chain_program(64, 10, "1.01")).expect("chain parses");
    }
}
