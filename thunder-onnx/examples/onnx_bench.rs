//! Times an ONNX model on thunder-rs for benches/peer/onnx_peer.py: the first call (load,
//! translate, compile, run) and then the median of repeated calls, as one JSON line.
//!
//! cargo run --release -p thunder-onnx --example onnx_bench -- MODEL.onnx REPS NAME=FILE.npy...
//! Plugins come from THUNDER_CONFIG / ./plugins.toml, as for `thunder run`; RAYON_NUM_THREADS
//! sets the CPU executors' threads; ONNX_BENCH_DEVICE=cuda:0 runs on a GPU (inputs are copied
//! there on every call, as a caller holding host arrays would; outputs stay there);
//! ONNX_BENCH_TRACE=FILE writes the execution trace (what each executor claimed) there.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use thunder_core::runtime::npy::read_npy;
use thunder_onnx::{OnnxModel, OnnxSession};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model_path, reps, inputs @ ..] = args.as_slice() else {
        return Err("usage: onnx_bench MODEL.onnx REPS NAME=FILE.npy...".into());
    };
    let reps: usize = reps.parse()?;
    let mut named = HashMap::new();
    for spec in inputs {
        let (name, file) = spec.split_once('=').ok_or("inputs are NAME=FILE.npy")?;
        named.insert(name.to_string(), read_npy(Path::new(file))?);
    }
    let t0 = Instant::now();
    let model = OnnxModel::load(Path::new(model_path))?;
    let load = t0.elapsed();
    let host = Arc::new(thunder_core::PluginHost::from_env()?);
    let device = match std::env::var("ONNX_BENCH_DEVICE") {
        Ok(d) => thunder_core::Device::parse(&d)
            .ok_or_else(|| format!("ONNX_BENCH_DEVICE={d}: expected cpu or cuda:N"))?,
        Err(_) => thunder_core::Device::Cpu,
    };
    let session = OnnxSession::new(model, host).with_device(device);
    let t1 = Instant::now();
    let outputs = session.run_named(named.clone())?;
    let first = t1.elapsed() + load;
    let spec = session.last().ok_or("no specialisation")?;
    if let Ok(file) = std::env::var("ONNX_BENCH_TRACE") {
        std::fs::write(&file, spec.traces.execution.print())?;
    }
    let mut times = Vec::with_capacity(reps);
    let cpu0 = process_cpu_seconds();
    for _ in 0..reps {
        let t = Instant::now();
        session.run_named(named.clone())?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // CPU time of the whole process per call: on a shared machine it varies less than the
    // latency (a descheduled thread adds wall time, not CPU time).
    let cpu_ms = match (cpu0, process_cpu_seconds()) {
        (Some(a), Some(b)) if reps > 0 => (b - a) / reps as f64 * 1e3,
        _ => f64::NAN,
    };
    // The call after the first, apart: a CPU session packs its weights there (prepack.rs).
    let second = times.first().copied().unwrap_or(f64::NAN);
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    let min = times.first().copied().unwrap_or(f64::NAN);
    let dir = std::env::var("ONNX_BENCH_OUT").ok();
    if let Some(dir) = dir {
        for (name, a) in &outputs {
            let safe: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            thunder_core::runtime::npy::write_npy(
                &Path::new(&dir).join(format!("{safe}.npy")),
                &a.to(thunder_core::Device::Cpu)?,
            )?;
        }
    }
    println!(
        "{{\"load_ms\": {:.2}, \"translate_ms\": {:.2}, \"compile_ms\": {:.2}, \"first_call_ms\": {:.2}, \"second_call_ms\": {second:.2}, \"median_ms\": {median:.3}, \"min_ms\": {min:.3}, \"cpu_ms\": {cpu_ms:.3}, \"reps\": {reps}}}",
        load.as_secs_f64() * 1e3,
        spec.timings.translate.as_secs_f64() * 1e3,
        spec.timings.compile.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3,
    );
    Ok(())
}

/// User plus system CPU seconds of this process so far, from `/proc/self/stat` (Linux; `None`
/// elsewhere). Clock ticks are taken as 1/100 s, the value on every Linux this runs on.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
