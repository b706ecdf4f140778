//! What `gpu-check` and `triton-check` share: sample programs on `cuda:0`, device timing, and
//! the report they print.

use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::time::Instant;
use thunder_core::cuda::DeviceInfo;
use thunder_core::DType;

/// One differential sample: a one-op program on `cuda:0` and the dtype its tolerance is for.
pub struct Sample {
    pub name: String,
    pub program: String,
    pub dtype: DType,
}

/// A tensor type on `cuda:0` in trace text, e.g. `cuda:0 f32[4, 8]`.
pub fn ty(dtype: DType, shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("cuda:0 {}[{}]", dtype.short_name(), dims.join(", "))
}

/// A program of the named inputs returning `body`'s value.
pub fn program(inputs: &[(&str, String)], body: &str) -> String {
    let names: Vec<&str> = inputs.iter().map(|(n, _)| *n).collect();
    let mut text = format!("def computation({}):\n", names.join(", "));
    for (n, t) in inputs {
        text.push_str(&format!("  # {n}: \"{t}\"\n"));
    }
    text.push_str(&format!("  t0 = {body}\n  return (t0,)\n"));
    text
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Median milliseconds of `f` followed by a device synchronize, after one warm-up call.
pub fn time_ms(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    thunder_core::cuda::synchronize(0)?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        thunder_core::cuda::synchronize(0)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(times))
}

/// Prints the report (JSON, or a table) and fails when a differential sample failed.
pub fn report(
    info: &DeviceInfo,
    differential: Value,
    benchmarks: Value,
    json_out: bool,
) -> Result<()> {
    let report = json!({
        "device": {"name": info.name, "compute_capability": [info.compute_capability.0, info.compute_capability.1],
                   "driver_version": info.driver_version},
        "differential": differential,
        "benchmarks": benchmarks,
    });
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "device: {} (sm_{}{})",
            info.name, info.compute_capability.0, info.compute_capability.1
        );
        println!(
            "differential: {}/{} samples agree with the interpreter",
            report["differential"]["passed"], report["differential"]["samples"]
        );
        if let Some(f) = report["differential"]["failures"].as_array() {
            for x in f {
                println!("  FAIL {}: {}", x["sample"], x["error"]);
            }
        }
        if let Some(b) = report["benchmarks"].as_object() {
            for (k, v) in b {
                println!("{k:28} {v}");
            }
        }
    }
    let failed = report["differential"]["failures"]
        .as_array()
        .map_or(0, Vec::len);
    if failed > 0 {
        bail!("{failed} differential samples failed");
    }
    Ok(())
}
