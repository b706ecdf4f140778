//! `thunder bench`: times the CPU workloads of the performance targets on this machine, through
//! the configured executors, next to the machine's copy bandwidth (the floor of any
//! memory-bound loop). `--json` prints the results for `benches/peer/torch_peer.py
//! --thunder-bench FILE`, which times the same work in PyTorch and prints ratios.
//!
//! Every workload's program comes from `thunder_benches` (benches/src/lib.rs), shared with the
//! criterion benches. A workload is timed as: the first call of a fresh jitted function (trace,
//! compile, run), one untimed call that also sizes the timed loop (enough calls per sample for
//! about 2 ms), then samples until `--min-time` has passed and at least three were taken (or
//! exactly `--reps`). A warm call longer than three times `--min-time` is itself the one sample.
//! The value is the median per-call time of the samples (`best` is the fastest sample); the copy
//! floor is the best sample.

use super::machine;
use crate::host_args::HostArgs;
use anyhow::{anyhow, bail, ensure, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use thunder_benches as wl;
use thunder_core::autograd::{value_and_grad, ValueAndGrad};
use thunder_core::host::exec_trace::ExecutionTrace;
use thunder_core::runtime::pool;
use thunder_core::{jit_with, Array, Jitted, PluginHost, Tensor};

pub struct BenchOptions {
    pub json: bool,
    pub only: Vec<String>,
    pub skip: Vec<String>,
    pub reps: Option<usize>,
    pub min_time: f64,
    pub list: bool,
}

/// Seconds a timed sample should last at least (calls are batched up to it).
const SAMPLE_SECONDS: f64 = 2e-3;
/// The most samples taken without `--reps`.
const MAX_SAMPLES: usize = 200;

struct Workload {
    name: &'static str,
    description: &'static str,
    run: fn(&Ctx) -> Result<Row>,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "copy_64mb",
        description: "copy floor: memcpy of a 64 MiB f32 buffer (2^24 elements), best sample, \
                      one thread and all threads",
        run: copy_floor,
    },
    Workload {
        name: "alloc_64mb",
        description: "a fresh 64 MiB output: Array::zeros(f32[2^24]) from the runtime's pool, \
                      written in full, then dropped (THUNDER_POOL_CAP=0 shows it without the pool)",
        run: alloc_64mb,
    },
    Workload {
        name: "chain8_16m",
        description: "8-op chain: x = x*1.01+0.1 four times on f32[2^24]",
        run: chain8,
    },
    Workload {
        name: "tanh4_16m",
        description: "x = tanh(x*1.01+0.1) four times on f32[2^24]",
        run: tanh4,
    },
    Workload {
        name: "sgemm_2048",
        description: "sgemm: f32[2048,2048] @ f32[2048,2048]",
        run: sgemm,
    },
    Workload {
        name: "bgemm_2048",
        description: "bf16 GEMM: bf16[2048,2048] @ bf16[2048,2048] (f32 sums, one rounding)",
        run: bgemm,
    },
    Workload {
        name: "cached_call_64",
        description: "cached call: 10-op chain (x*1.01+0.1 five times) on f32[64], per call",
        run: cached_call,
    },
    Workload {
        name: "train_step_mlp",
        description: "MLP 64-128-128-10 train step, batch 256: value_and_grad then a jitted \
                      SGD (momentum 0.9) step",
        run: train_step,
    },
    Workload {
        name: "train_step_mlp_fused",
        description: "the same train step as one jitted program (forward, grads and SGD)",
        run: train_step_fused,
    },
    Workload {
        name: "mlp_bf16_layer",
        description: "bf16 MLP layer fwd+bwd: value_and_grad of mean(linear(gelu_tanh(linear(x, \
                      w1, b1)), w2, b2)), x bf16[512,768], hidden 3072, w.r.t. all five",
        run: mlp_bf16_layer,
    },
    Workload {
        name: "gpt2_block",
        description: "GPT-2 block fwd+bwd, B2 T128 C256 4 heads: value_and_grad of \
                      mean(block(x)^2) w.r.t. x and the 12 weights",
        run: gpt2_block,
    },
];

/// Names of the workloads whose floor is the copy bandwidth.
const BANDWIDTH_BOUND: [&str; 2] = ["chain8_16m", "tanh4_16m"];

struct Ctx {
    host: Arc<PluginHost>,
    reps: Option<usize>,
    min_time: f64,
    /// The copy floor in ms, when measured (it runs first).
    floor_ms: std::cell::Cell<Option<f64>>,
}

/// One workload's result.
#[derive(Default)]
struct Row {
    name: &'static str,
    description: &'static str,
    unit: &'static str,
    value: f64,
    best: f64,
    /// The copy floor in this row's unit, for bandwidth-bound rows.
    floor: Option<f64>,
    first_call_ms: Option<f64>,
    samples: usize,
    calls_per_sample: usize,
    /// Regions per executor in the programs it ran.
    executors: BTreeMap<String, usize>,
    /// System allocations of the pool during the timed loop (0 in a steady state).
    pool_misses: u64,
    /// Workload-specific numbers (GFLOP/s, GB/s, ...).
    extra: serde_json::Map<String, Value>,
}

impl Row {
    fn to_json(&self) -> Value {
        let mut v = json!({
            "name": self.name,
            "description": self.description,
            "unit": self.unit,
            "value": self.value,
            "best": self.best,
            "samples": self.samples,
            "calls_per_sample": self.calls_per_sample,
        });
        let obj = v.as_object_mut().expect("a json object");
        if let Some(floor) = self.floor {
            obj.insert("floor".into(), json!(floor));
            obj.insert("vs_floor".into(), json!(self.value / floor));
        }
        if let Some(ms) = self.first_call_ms {
            obj.insert("first_call_ms".into(), json!(ms));
        }
        if !self.executors.is_empty() {
            obj.insert("executors".into(), json!(self.executors));
            obj.insert("pool_misses_steady".into(), json!(self.pool_misses));
        }
        obj.extend(self.extra.clone());
        v
    }
}

/// Per-call times of a timed loop.
struct Timing {
    /// Median over samples, seconds per call.
    median: f64,
    best: f64,
    samples: usize,
    calls: usize,
    pool_misses: u64,
}

impl Ctx {
    /// Times `f` (already called once, untimed or as the first call) as the module says.
    fn time(&self, mut f: impl FnMut() -> Result<()>) -> Result<Timing> {
        let misses = pool::stats().misses;
        let start = Instant::now();
        f()?;
        let one = start.elapsed().as_secs_f64();
        if self.reps.is_none() && one >= 3.0 * self.min_time {
            return Ok(Timing {
                median: one,
                best: one,
                samples: 1,
                calls: 1,
                pool_misses: pool::stats().misses - misses,
            });
        }
        let misses = pool::stats().misses;
        let calls = ((SAMPLE_SECONDS / one.max(1e-9)).ceil() as usize).clamp(1, 100_000);
        let mut samples = Vec::new();
        let start = Instant::now();
        loop {
            let t = Instant::now();
            for _ in 0..calls {
                f()?;
            }
            samples.push(t.elapsed().as_secs_f64() / calls as f64);
            let elapsed = start.elapsed().as_secs_f64();
            let done = match self.reps {
                Some(n) => samples.len() >= n.max(1),
                None => {
                    samples.len() >= MAX_SAMPLES
                        || (elapsed >= self.min_time
                            && (samples.len() >= 3 || elapsed >= 3.0 * self.min_time))
                }
            };
            if done {
                break;
            }
        }
        let pool_misses = pool::stats().misses - misses;
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median = if n % 2 == 1 {
            samples[n / 2]
        } else {
            (samples[n / 2 - 1] + samples[n / 2]) / 2.0
        };
        Ok(Timing {
            median,
            best: samples[0],
            samples: n,
            calls,
            pool_misses,
        })
    }

    fn row(&self, w: &Workload, unit: &'static str, scale: f64, t: &Timing) -> Row {
        Row {
            name: w.name,
            description: w.description,
            unit,
            value: t.median * scale,
            best: t.best * scale,
            samples: t.samples,
            calls_per_sample: t.calls,
            pool_misses: t.pool_misses,
            ..Row::default()
        }
    }
}

fn workload(name: &str) -> &'static Workload {
    WORKLOADS
        .iter()
        .find(|w| w.name == name)
        .expect("a known workload")
}

fn elapsed_ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// Regions per executor of execution traces.
fn executors_of<'a>(
    traces: impl IntoIterator<Item = &'a ExecutionTrace>,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for t in traces {
        for step in &t.steps {
            *counts.entry(step.executor.clone()).or_insert(0) += 1;
        }
    }
    counts
}

fn jitted_executors(f: &Jitted) -> BTreeMap<String, usize> {
    f.last_traces()
        .map(|t| executors_of([&t.execution]))
        .unwrap_or_default()
}

fn vag_executors(f: &ValueAndGrad) -> BTreeMap<String, usize> {
    f.last_traces()
        .map(|t| executors_of([&t.forward.execution, &t.backward.execution]))
        .unwrap_or_default()
}

/// `f32[n]` with values spread over [-1, 1) (cheap to make at 2^24 elements).
fn ramp(n: i64) -> Result<Array> {
    let values: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    Ok(Array::from_slice(&values, &[n])?)
}

/// Checks `got` against `want(input)` at up to 4096 evenly spread elements.
fn check_elementwise(
    what: &str,
    input: &Array,
    got: &Array,
    want: impl Fn(f64) -> f64,
) -> Result<()> {
    let x = input.to_vec::<f32>()?;
    let y = got.to_vec::<f32>()?;
    ensure!(
        x.len() == y.len(),
        "{what}: {} outputs for {} inputs",
        y.len(),
        x.len()
    );
    let step = (x.len() / 4096).max(1);
    for i in (0..x.len()).step_by(step) {
        let w = want(x[i] as f64);
        let g = y[i] as f64;
        ensure!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{what}: wrong output at {i}: got {g}, want {w}"
        );
    }
    Ok(())
}

fn copy_floor(ctx: &Ctx) -> Result<Row> {
    let w = workload("copy_64mb");
    let n = wl::BIG_NUMEL as usize;
    let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut dst = vec![1.0f32; n];
    dst.copy_from_slice(&src);
    let one = ctx.time(|| {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
        Ok(())
    })?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = n.div_ceil(threads);
    let all = ctx.time(|| {
        std::thread::scope(|s| {
            for (d, c) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                s.spawn(move || d.copy_from_slice(black_box(c)));
            }
        });
        black_box(&mut dst);
        Ok(())
    })?;
    let floor_ms = one.best.min(all.best) * 1e3;
    ctx.floor_ms.set(Some(floor_ms));
    let bytes = (n * 4) as f64;
    let mut row = ctx.row(w, "ms", 1e3, &one);
    row.value = floor_ms;
    row.best = floor_ms;
    row.samples = one.samples + all.samples;
    for (key, t) in [("one_thread", &one), ("all_threads", &all)] {
        row.extra.insert(
            key.into(),
            json!({
                "best_ms": t.best * 1e3,
                "median_ms": t.median * 1e3,
                // Read plus written bytes per second.
                "gb_per_s": 2.0 * bytes / t.best / 1e9,
            }),
        );
    }
    row.extra.insert("threads".into(), json!(threads));
    row.extra.insert(
        "gb_per_s".into(),
        json!(2.0 * bytes / (floor_ms / 1e3) / 1e9),
    );
    Ok(row)
}

fn alloc_64mb(ctx: &Ctx) -> Result<Row> {
    let w = workload("alloc_64mb");
    let ty = thunder_core::ir::TensorType::new(
        vec![wl::BIG_NUMEL],
        thunder_core::DType::F32,
        thunder_core::Device::Cpu,
    );
    let misses = pool::stats().misses;
    let t = ctx.time(|| {
        black_box(Array::zeros(ty.clone())?);
        Ok(())
    })?;
    let mut row = ctx.row(w, "ms", 1e3, &t);
    row.extra
        .insert("pool_misses".into(), json!(pool::stats().misses - misses));
    Ok(row)
}

/// A one-input elementwise workload on `f32[2^24]`: first call, steady state, a check.
fn big_elementwise(
    ctx: &Ctx,
    name: &str,
    f: fn(&[Tensor]) -> Vec<Tensor>,
    want: impl Fn(f64) -> f64,
) -> Result<Row> {
    let w = workload(name);
    let x = ramp(wl::BIG_NUMEL)?;
    let inputs = vec![x.clone()];
    let jitted = jit_with(ctx.host.clone(), f);
    let start = Instant::now();
    let out = jitted.call(&inputs)?;
    let first = elapsed_ms(start);
    check_elementwise(name, &x, &out[0], want)?;
    drop(out);
    let t = ctx.time(|| jitted.call(&inputs).map(drop).map_err(Into::into))?;
    let mut row = ctx.row(w, "ms", 1e3, &t);
    row.first_call_ms = Some(first);
    row.floor = ctx.floor_ms.get();
    row.executors = jitted_executors(&jitted);
    Ok(row)
}

fn chain8(ctx: &Ctx) -> Result<Row> {
    let (m, a) = (wl::CHAIN_MUL as f32, wl::CHAIN_ADD as f32);
    big_elementwise(ctx, "chain8_16m", wl::chain8, |x| {
        let mut x = x as f32;
        for _ in 0..wl::CHAIN8_REPEATS {
            x = x * m + a;
        }
        x as f64
    })
}

fn tanh4(ctx: &Ctx) -> Result<Row> {
    big_elementwise(ctx, "tanh4_16m", wl::tanh4, |x| {
        let mut x = x;
        for _ in 0..wl::TANH_REPEATS {
            x = (x * wl::CHAIN_MUL + wl::CHAIN_ADD).tanh();
        }
        x
    })
}

fn sgemm(ctx: &Ctx) -> Result<Row> {
    gemm_rate(ctx, "sgemm_2048", thunder_core::DType::F32, 1e-4)
}

fn bgemm(ctx: &Ctx) -> Result<Row> {
    // One bf16 rounding of the output (2^-8 relative) on top of f32 sums.
    gemm_rate(ctx, "bgemm_2048", thunder_core::DType::BF16, 8e-3)
}

/// A square product of `dtype`, checked at a few entries against a dot product in f64 within
/// `rtol` of the sum of the products' magnitudes, and timed as a rate.
fn gemm_rate(ctx: &Ctx, name: &str, dtype: thunder_core::DType, rtol: f64) -> Result<Row> {
    let w = workload(name);
    let n = wl::SGEMM_N;
    let a = Array::random(&[n, n], dtype, 1)?;
    let b = Array::random(&[n, n], dtype, 2)?;
    let inputs = vec![a.clone(), b.clone()];
    let jitted = jit_with(ctx.host.clone(), wl::matmul2);
    let start = Instant::now();
    let out = jitted.call(&inputs)?;
    let first = elapsed_ms(start);
    let (av, bv, cv) = (a.to_f64_vec()?, b.to_f64_vec()?, out[0].to_f64_vec()?);
    let nu = n as usize;
    for (i, j) in [(0, 0), (17, 1999), (nu - 1, nu - 1), (1024, 3)] {
        let (mut dot, mut mag) = (0.0f64, 0.0f64);
        for k in 0..nu {
            let p = av[i * nu + k] * bv[k * nu + j];
            dot += p;
            mag += p.abs();
        }
        let got = cv[i * nu + j];
        ensure!(
            (got - dot).abs() <= rtol * mag.max(1.0),
            "{name}: wrong output at ({i}, {j}): got {got}, want {dot}"
        );
    }
    drop(out);
    let t = ctx.time(|| jitted.call(&inputs).map(drop).map_err(Into::into))?;
    let flop = 2.0 * (n as f64).powi(3);
    let mut row = ctx.row(w, "GFLOP/s", 1.0, &t);
    // Rates: higher is better, so the best sample is the fastest one.
    row.value = flop / t.median / 1e9;
    row.best = flop / t.best / 1e9;
    row.first_call_ms = Some(first);
    row.executors = jitted_executors(&jitted);
    row.extra.insert("ms".into(), json!(t.median * 1e3));
    Ok(row)
}

fn cached_call(ctx: &Ctx) -> Result<Row> {
    let w = workload("cached_call_64");
    let x = wl::chain_input();
    let inputs = vec![x.clone()];
    let jitted = jit_with(ctx.host.clone(), wl::elementwise_chain);
    let start = Instant::now();
    let out = jitted.call(&inputs)?;
    let first = elapsed_ms(start);
    check_elementwise("cached_call_64", &x, &out[0], |v| {
        wl::elementwise_chain_reference(v as f32) as f64
    })?;
    let t = ctx.time(|| {
        jitted
            .call(black_box(&inputs))
            .map(drop)
            .map_err(Into::into)
    })?;
    let mut row = ctx.row(w, "us", 1e6, &t);
    row.first_call_ms = Some(first);
    row.executors = jitted_executors(&jitted);
    Ok(row)
}

fn train_step(ctx: &Ctx) -> Result<Row> {
    let w = workload("train_step_mlp");
    let (x, y) = wl::train_batch(1);
    let loss_and_grad = value_and_grad(Some(ctx.host.clone()), wl::train_loss);
    let sgd = jit_with(ctx.host.clone(), wl::sgd_update);
    let mut params = wl::train_params(0, true);
    let mut bufs = wl::zero_buffers(&params);
    let start = Instant::now();
    let (loss0, p, b) = wl::train_step_two_programs(&loss_and_grad, &sgd, params, bufs, &x, &y)?;
    let first = elapsed_ms(start);
    (params, bufs) = (p, b);
    let t = ctx.time(|| {
        let (_, p, b) = wl::train_step_two_programs(
            &loss_and_grad,
            &sgd,
            std::mem::take(&mut params),
            std::mem::take(&mut bufs),
            &x,
            &y,
        )?;
        (params, bufs) = (p, b);
        Ok(())
    })?;
    let mut row = ctx.row(w, "us", 1e6, &t);
    row.first_call_ms = Some(first);
    let mut executors = vag_executors(&loss_and_grad);
    for (k, v) in jitted_executors(&sgd) {
        *executors.entry(k).or_insert(0) += v;
    }
    row.executors = executors;
    row.extra
        .insert("first_loss".into(), json!(loss0.to_vec::<f32>()?[0]));
    Ok(row)
}

fn train_step_fused(ctx: &Ctx) -> Result<Row> {
    let w = workload("train_step_mlp_fused");
    let (x, y) = wl::train_batch(1);
    let jitted = jit_with(ctx.host.clone(), wl::fused_train_step);
    let params = wl::train_params(0, false);
    let mut state: Vec<Array> = params
        .iter()
        .cloned()
        .chain(wl::zero_buffers(&params))
        .collect();
    let step = |state: &mut Vec<Array>| -> Result<Array> {
        let mut inputs = std::mem::take(state);
        inputs.extend([x.clone(), y.clone()]);
        let mut out = jitted.call(&inputs)?;
        *state = out.split_off(1);
        Ok(out.remove(0))
    };
    let start = Instant::now();
    let loss0 = step(&mut state)?;
    let first = elapsed_ms(start);
    let t = ctx.time(|| step(&mut state).map(drop))?;
    let mut row = ctx.row(w, "us", 1e6, &t);
    row.first_call_ms = Some(first);
    row.executors = jitted_executors(&jitted);
    row.extra
        .insert("first_loss".into(), json!(loss0.to_vec::<f32>()?[0]));
    Ok(row)
}

fn gpt2_block(ctx: &Ctx) -> Result<Row> {
    let w = workload("gpt2_block");
    let cfg = wl::GPT2_BLOCK;
    let vag = value_and_grad(Some(ctx.host.clone()), move |xs: &[Tensor]| {
        wl::gpt2_block_loss(&cfg, xs)
    })
    .with_input_names(&wl::gpt2_block_input_names());
    let inputs = wl::gpt2_block_inputs(&cfg, 0, 0.02);
    let start = Instant::now();
    let (loss, grads) = vag.call(&inputs)?;
    let first = elapsed_ms(start);
    ensure!(
        grads.len() == inputs.len(),
        "gpt2_block: {} gradients for {} inputs",
        grads.len(),
        inputs.len()
    );
    let loss = loss[0].to_vec::<f32>()?[0];
    ensure!(loss.is_finite(), "gpt2_block: loss {loss}");
    let t = ctx.time(|| vag.call(&inputs).map(drop).map_err(Into::into))?;
    let mut row = ctx.row(w, "ms", 1e3, &t);
    row.first_call_ms = Some(first);
    row.executors = vag_executors(&vag);
    row.extra.insert("loss".into(), json!(loss));
    Ok(row)
}

fn mlp_bf16_layer(ctx: &Ctx) -> Result<Row> {
    let w = workload("mlp_bf16_layer");
    let vag = value_and_grad(Some(ctx.host.clone()), wl::mlp_bf16_loss);
    let inputs = wl::mlp_bf16_inputs(0)?;
    let start = Instant::now();
    let (loss, grads) = vag.call(&inputs)?;
    let first = elapsed_ms(start);
    ensure!(
        grads.len() == inputs.len(),
        "mlp_bf16_layer: {} gradients for {} inputs",
        grads.len(),
        inputs.len()
    );
    let loss = loss[0].to_f64_vec()?[0];
    ensure!(loss.is_finite(), "mlp_bf16_layer: loss {loss}");
    let t = ctx.time(|| vag.call(&inputs).map(drop).map_err(Into::into))?;
    let mut row = ctx.row(w, "ms", 1e3, &t);
    row.first_call_ms = Some(first);
    row.executors = vag_executors(&vag);
    row.extra.insert("loss".into(), json!(loss));
    Ok(row)
}

fn selected(opts: &BenchOptions) -> Result<Vec<&'static Workload>> {
    for name in opts.only.iter().chain(&opts.skip) {
        if !WORKLOADS.iter().any(|w| w.name == name) {
            let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
            bail!("unknown workload `{name}`; pick from {}", names.join(", "));
        }
    }
    let mut picked: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| opts.only.is_empty() || opts.only.iter().any(|n| n == w.name))
        .filter(|w| !opts.skip.iter().any(|n| n == w.name))
        .collect();
    // Bandwidth-bound rows need the floor: measure it first.
    let needs_floor = picked.iter().any(|w| BANDWIDTH_BOUND.contains(&w.name));
    if needs_floor && !picked.iter().any(|w| w.name == "copy_64mb") {
        picked.insert(0, workload("copy_64mb"));
    }
    Ok(picked)
}

fn fmt_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn fmt_executors(e: &BTreeMap<String, usize>) -> String {
    e.iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_table(rows: &[Row], machine: &Value, executors: &[String]) {
    println!(
        "thunder bench on {} ({} threads; {}); executors: {}",
        machine["cpu"].as_str().unwrap_or("?"),
        machine["threads"],
        machine["isa"]
            .as_array()
            .map(|isa| isa
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "))
            .unwrap_or_default(),
        executors.join(", ")
    );
    println!(
        "{:<22} {:>11} {:<8} {:>11} {:>9} {:>8} {:>12} {:>5}  regions",
        "workload", "median", "unit", "best", "floor", "x floor", "first call", "miss"
    );
    for r in rows {
        let (floor, ratio) = match r.floor {
            Some(f) => (fmt_value(f), format!("{:.2}", r.value / f)),
            None => (String::new(), String::new()),
        };
        let first = r
            .first_call_ms
            .map(|ms| format!("{} ms", fmt_value(ms)))
            .unwrap_or_default();
        let misses = if r.executors.is_empty() {
            String::new()
        } else {
            r.pool_misses.to_string()
        };
        println!(
            "{:<22} {:>11} {:<8} {:>11} {:>9} {:>8} {:>12} {:>5}  {}",
            r.name,
            fmt_value(r.value),
            r.unit,
            fmt_value(r.best),
            floor,
            ratio,
            first,
            misses,
            fmt_executors(&r.executors)
        );
    }
    if let Some(copy) = rows.iter().find(|r| r.name == "copy_64mb") {
        let part = |k: &str| {
            let v = &copy.extra[k];
            format!(
                "{:.3} ms ({:.1} GB/s)",
                v["best_ms"].as_f64().unwrap_or(f64::NAN),
                v["gb_per_s"].as_f64().unwrap_or(f64::NAN)
            )
        };
        println!(
            "copy floor: one thread {}, {} threads {}; GB/s counts bytes read plus written",
            part("one_thread"),
            copy.extra["threads"],
            part("all_threads")
        );
    }
    println!(
        "median/best: per call (GFLOP/s: rate of the median/fastest sample); miss: pool \
         allocations from the system during the timed calls; regions: regions per executor"
    );
}

pub fn run(args: &HostArgs, opts: &BenchOptions) -> Result<()> {
    if opts.list {
        for w in WORKLOADS {
            println!("{:<22} {}", w.name, w.description);
        }
        return Ok(());
    }
    ensure!(
        opts.min_time.is_finite() && opts.min_time >= 0.0,
        "--min-time must be a number of seconds"
    );
    let picked = selected(opts)?;
    let host = Arc::new(args.host()?);
    let executors: Vec<String> = host
        .entries()
        .iter()
        .filter(|e| e.is_active())
        .map(|e| e.name.clone())
        .collect();
    if executors.is_empty() {
        return Err(anyhow!(
            "no executor is active (see `thunder plugins`; build them with `cargo build --release`)"
        ));
    }
    let machine = json!({
        "cpu": machine::cpu_name(),
        "isa": machine::cpu_isa(),
        "threads": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    });
    let ctx = Ctx {
        host,
        reps: opts.reps,
        min_time: opts.min_time,
        floor_ms: std::cell::Cell::new(None),
    };
    let mut rows = Vec::new();
    for w in picked {
        eprintln!("bench: {} ...", w.name);
        let start = Instant::now();
        let row = (w.run)(&ctx).map_err(|e| anyhow!("{}: {e:#}", w.name))?;
        eprintln!(
            "bench: {}: {} {} ({:.1} s)",
            w.name,
            fmt_value(row.value),
            row.unit,
            start.elapsed().as_secs_f64()
        );
        rows.push(row);
    }
    let stats = pool::stats();
    if opts.json {
        let out = json!({
            "thunder_bench": 1,
            "machine": machine,
            "executors": executors,
            "results": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
            "pool": {
                "in_use_bytes": stats.in_use_bytes,
                "cached_bytes": stats.cached_bytes,
                "cap_bytes": stats.cap_bytes,
                "hits": stats.hits,
                "misses": stats.misses,
                "releases": stats.releases,
            },
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&rows, &machine, &executors);
        println!(
            "pool: {} hits, {} misses, {} MiB cached (cap {} MiB)",
            stats.hits,
            stats.misses,
            stats.cached_bytes >> 20,
            stats.cap_bytes >> 20
        );
    }
    Ok(())
}
