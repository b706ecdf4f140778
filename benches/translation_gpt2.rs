//! Translation time of a GPT-2-small-shaped training program: forward + backward.
//!
//! Run with `cargo build --release -p thunder-interpreter && cargo bench -p thunder-benches
//! --bench translation_gpt2`. Results land in
//! `target/criterion/translation_gpt2/<bench>/new/estimates.json` (`mean.point_estimate`, ns).
//!
//! The model (see `thunder_benches::gpt2_loss`): 12 layers, C = 768, T = 1024, 12 heads,
//! vocab 50257, batch 1, f32, every weight an input with `requires_grad`, LM loss by
//! cross-entropy. Nothing is run at that size, so no weights are allocated; only translation is
//! timed. Before timing, the same program at a tiny size (`GPT2_TINY`) is run once through
//! `value_and_grad` on the interpreter and its loss printed, as a check that every op claims,
//! compiles and runs, forward and backward.
//!
//! - `translation_gpt2/joint_trace`: `ValueAndGrad::joint_trace`: tracing the forward,
//!   flattening it, and recording the backward in the same trace.
//! - `translation_gpt2/split_and_compile`: `split_forward_backward`, then `compile_trace` of
//!   the forward and of the backward trace (passes, claiming, the interpreter's compile).
//! - `translation_gpt2/total`: both, i.e. what `value_and_grad` does on a new signature before
//!   its first run.
//!
//! Every bench drops what it built (traces, programs) outside the timed region.
//!
//! Target: at most 0.5 s for `total`. Lightning Thunder takes 33–36 s on the same work
//! (translating GPT-2 small's forward and backward).

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, SamplingMode};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thunder_benches::{
    gpt2_input_names, gpt2_input_types, gpt2_inputs, gpt2_loss, interpreter_host, Gpt2Config,
    GPT2_SMALL, GPT2_TINY,
};
use thunder_core::autograd::{split_forward_backward, value_and_grad, ValueAndGrad};
use thunder_core::ir::Trace;
use thunder_core::{PluginHost, Tensor};

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
}

/// Split, then compile forward and backward; returns the traces and compiled programs (criterion
/// drops a routine's output outside the timed region).
fn split_and_compile(
    host: &PluginHost,
    joint: &Trace,
    forward_len: usize,
    n_outputs: usize,
) -> impl Sized {
    let (fwd, bwd, _) = split_forward_backward(joint, forward_len, n_outputs).expect("split");
    let fwd = thunder_core::compile_trace(host, fwd).expect("compile_trace forward");
    let bwd = thunder_core::compile_trace(host, bwd).expect("compile_trace backward");
    (fwd, bwd)
}

fn gpt2_value_and_grad(host: &Arc<PluginHost>, cfg: Gpt2Config) -> ValueAndGrad {
    let names = gpt2_input_names(&cfg);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    value_and_grad(Some(host.clone()), move |xs: &[Tensor]| gpt2_loss(&cfg, xs))
        .with_input_names(&names)
}

/// Runs the tiny GPT-2 forward and backward once; prints the loss and the gradients' norm.
fn check_tiny(host: &Arc<PluginHost>) {
    let cfg = GPT2_TINY;
    let vag = gpt2_value_and_grad(host, cfg);
    let inputs = gpt2_inputs(&cfg, 0, 0.1);
    let (loss, grads) = vag.call(&inputs).expect("tiny GPT-2 forward and backward");
    let loss = loss[0].to_vec::<f32>().expect("f32 loss")[0];
    let grad_norm = grads
        .iter()
        .flat_map(|g| g.to_f64_vec().expect("host array"))
        .map(|x| x * x)
        .sum::<f64>()
        .sqrt();
    eprintln!(
        "translation_gpt2: check at {cfg:?}: loss {loss:.6} (ln vocab = {:.6}), {} gradients, \
         global gradient norm {grad_norm:.6}",
        (cfg.vocab as f64).ln(),
        grads.len()
    );
}

fn translation_gpt2(c: &mut Criterion) {
    let host = interpreter_host();
    check_tiny(&host);
    let types = gpt2_input_types(&GPT2_SMALL);
    let vag = gpt2_value_and_grad(&host, GPT2_SMALL);

    // Once, untimed by criterion: sizes of the traces, and a rough timing of each stage.
    let start = Instant::now();
    let (joint, forward_len, n_outputs) = vag.joint_trace(&types).expect("joint trace of GPT-2");
    let t_joint = start.elapsed();
    let start = Instant::now();
    let (fwd, bwd, saved) = split_forward_backward(&joint, forward_len, n_outputs).expect("split");
    let t_split = start.elapsed();
    let (fwd_syms, fwd_prims) = (fwd.bsyms.len(), fwd.count_prims());
    let (bwd_syms, bwd_prims) = (bwd.bsyms.len(), bwd.count_prims());
    let start = Instant::now();
    let (fwd_traces, _) = thunder_core::compile_trace(&host, fwd).expect("compile forward");
    let t_fwd = start.elapsed();
    let start = Instant::now();
    let (bwd_traces, _) = thunder_core::compile_trace(&host, bwd).expect("compile backward");
    let t_bwd = start.elapsed();
    eprintln!(
        "translation_gpt2: {} inputs; joint trace {} bound symbols (forward part {forward_len}), {} prims",
        types.len(),
        joint.bsyms.len(),
        joint.count_prims()
    );
    eprintln!(
        "translation_gpt2: forward {fwd_syms} bound symbols ({fwd_prims} prims), {} after passes; \
         backward {bwd_syms} bound symbols ({bwd_prims} prims), {} after passes; {} saved residuals",
        fwd_traces.final_trace().bsyms.len(),
        bwd_traces.final_trace().bsyms.len(),
        saved.len()
    );
    eprintln!(
        "translation_gpt2: execution traces: forward {} prims in {} steps, backward {} prims in {} steps",
        fwd_traces.execution.trace.bsyms.len(),
        fwd_traces.execution.steps.len(),
        bwd_traces.execution.trace.bsyms.len(),
        bwd_traces.execution.steps.len()
    );
    eprintln!(
        "translation_gpt2: one pass: joint_trace {t_joint:.1?}, split {t_split:.1?}, \
         compile forward {t_fwd:.1?}, compile backward {t_bwd:.1?}"
    );

    let mut group = c.benchmark_group("translation_gpt2");
    // Each iteration takes a good fraction of a second: one iteration per sample.
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function("joint_trace", |b| {
        b.iter_with_large_drop(|| vag.joint_trace(black_box(&types)).expect("joint trace"))
    });
    group.bench_function("split_and_compile", |b| {
        b.iter_batched(
            || joint.clone(),
            |j| split_and_compile(&host, &j, forward_len, n_outputs),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("total", |b| {
        b.iter_with_large_drop(|| {
            let (j, f, n) = vag.joint_trace(black_box(&types)).expect("joint trace");
            split_and_compile(&host, &j, f, n)
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = translation_gpt2
}
criterion_main!(benches);
