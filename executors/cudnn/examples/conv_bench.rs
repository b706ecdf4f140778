//! Times one convolution on `cuda:0` through the configured executors (run on a GPU machine):
//!
//! ```sh
//! conv_bench plugins.toml [dtype=f16] [N C H W C_out K] [reps=200]
//! ```
//!
//! Prints the execution trace's executors, then the median of five samples of `reps` calls
//! queued back to back and synchronized once (milliseconds per call) and TFLOP/s.

use std::path::PathBuf;
use std::time::Instant;
use thunder_core::host::config::Config;
use thunder_core::{Array, DType, Device, PluginHost};
use thunder_torch::parse_trace;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = args
        .first()
        .ok_or("usage: conv_bench CONFIG [dtype N C H W C_out K reps]")?;
    let dtype = args.get(1).map(String::as_str).unwrap_or("f16");
    let num = |i: usize, default: i64| -> Result<i64, Box<dyn std::error::Error>> {
        Ok(match args.get(i) {
            Some(s) => s.parse()?,
            None => default,
        })
    };
    let (n, c, h, w, co, k) = (
        num(2, 32)?,
        num(3, 64)?,
        num(4, 56)?,
        num(5, 56)?,
        num(6, 64)?,
        num(7, 3)?,
    );
    let reps = num(8, 200)? as usize;
    let dt = DType::from_short_name(dtype).ok_or("unknown dtype")?;
    let p = k / 2;
    let text = format!(
        "def computation(x, wt):\n  # x: \"cuda:0 {dtype}[{n}, {c}, {h}, {w}]\"\n  # wt: \"cuda:0 {dtype}[{co}, {c}, {k}, {k}]\"\n  t0 = prims.convolution(x, wt, None, [1, 1], [{p}, {p}], [1, 1], 1)\n  return (t0,)\n"
    );
    let host = PluginHost::load(&Config::load(&PathBuf::from(config))?, &[]);
    let (traces, program) = thunder_core::compile_trace(&host, parse_trace(&text)?)?;
    println!("executors: {:?}", traces.execution.executors_used());
    let dev = Device::Cuda(0);
    let x = Array::random(&[n, c, h, w], dt, 1)?.to(dev)?;
    let wt = Array::random(&[co, c, k, k], dt, 2)?.to(dev)?;
    let inputs = [x, wt];
    program.run(&inputs)?;
    thunder_core::cuda::synchronize(0)?;
    let mut samples = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            drop(program.run(&inputs)?);
        }
        thunder_core::cuda::synchronize(0)?;
        samples.push(t.elapsed().as_secs_f64() * 1e3 / reps as f64);
    }
    samples.sort_by(f64::total_cmp);
    let ms = samples[samples.len() / 2];
    let ho = h + 2 * p - k + 1;
    let wo = w + 2 * p - k + 1;
    let flops = 2.0 * (n * co * ho * wo * c * k * k) as f64;
    println!(
        "thunder conv2d {dtype} N{n} C{c} H{h} W{w} Cout{co} K{k}: {ms:.4} ms/call ({:.1} TFLOP/s), samples {samples:.4?}",
        flops / ms / 1e9
    );
    Ok(())
}
