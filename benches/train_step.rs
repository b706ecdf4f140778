//! One training step of a small MLP on the interpreter plugin, measured two ways.
//!
//! Run with `cargo build --release -p thunder-interpreter && cargo bench -p thunder-benches
//! --bench train_step`. Results land in `target/criterion/train_step/<bench>/new/estimates.json`
//! (`mean.point_estimate`, ns), which `peer/torch_peer.py --thunder-json` compares with the
//! same step in PyTorch eager.
//!
//! The step: MLP 64 → 128 → 128 → 10 with ReLU (`torch.nn.Linear` init), batch 256, f32,
//! mean cross-entropy against class indices, SGD with lr 0.01 and momentum 0.9. Every
//! iteration is a real step: its new parameters and momentum buffers feed the next one (on
//! the same batch), as in a training loop.
//!
//! - `train_step/fused_jit_step`: one jitted program doing forward, gradients
//!   (`value_and_grad_in_trace`) and the SGD update; one `Jitted::call` per step.
//! - `train_step/value_and_grad_then_sgd`: `ValueAndGrad::call` (forward program, then
//!   backward program) and then a jitted SGD step, as the `thunder demo` training loop does:
//!   three program runs per step.
//!
//! Before timing, each way runs a few steps and prints its loss (it should fall); nothing is
//! asserted about it, nor about timings.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::time::Duration;
use thunder_benches::{
    fused_train_step, interpreter_host, sgd_update, train_batch, train_loss, train_params,
    train_step_two_programs, zero_buffers,
};
use thunder_core::Array;

/// Steps run (and losses printed) before timing.
const CHECK_STEPS: usize = 5;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
}

fn scalar(a: &Array) -> f32 {
    a.to_vec::<f32>().expect("f32 loss")[0]
}

/// One fused step on `state = params (6) ++ bufs (6)`; returns `loss, new params, new bufs`.
fn fused_once(jitted: &thunder_core::Jitted, state: &[Array], x: &Array, y: &Array) -> Vec<Array> {
    let mut inputs = state.to_vec();
    inputs.extend([x.clone(), y.clone()]);
    jitted.call(&inputs).expect("fused step")
}

/// One `value_and_grad` + SGD step; returns `(loss, params, bufs)`.
fn two_program_once(
    loss_and_grad: &thunder_core::autograd::ValueAndGrad,
    sgd: &thunder_core::Jitted,
    params: Vec<Array>,
    bufs: Vec<Array>,
    x: &Array,
    y: &Array,
) -> (Array, Vec<Array>, Vec<Array>) {
    train_step_two_programs(loss_and_grad, sgd, params, bufs, x, y).expect("train step")
}

fn train_step(c: &mut Criterion) {
    let host = interpreter_host();
    let (x, y) = train_batch(1);

    // (a) One program per step.
    let fused = thunder_core::jit_with(host.clone(), fused_train_step);
    let params = train_params(0, false);
    let mut fused_state: Vec<Array> = params
        .iter()
        .cloned()
        .chain(zero_buffers(&params))
        .collect();
    let mut losses = Vec::new();
    for _ in 0..CHECK_STEPS {
        let mut out = fused_once(&fused, &fused_state, &x, &y);
        fused_state = out.split_off(1);
        losses.push(scalar(&out[0]));
    }
    let traces = fused.last_traces().expect("traces of the fused step");
    eprintln!(
        "train_step: fused step program has {} prims after passes; loss over {CHECK_STEPS} steps: {losses:?}",
        traces.final_trace().count_prims()
    );

    // (b) value_and_grad, then a jitted SGD step.
    let loss_and_grad = thunder_core::autograd::value_and_grad(Some(host.clone()), train_loss);
    let sgd = thunder_core::jit_with(host, sgd_update);
    let mut params = train_params(0, true);
    let mut bufs = zero_buffers(&params);
    let mut losses = Vec::new();
    for _ in 0..CHECK_STEPS {
        let (loss, p, b) = two_program_once(&loss_and_grad, &sgd, params, bufs, &x, &y);
        losses.push(scalar(&loss));
        (params, bufs) = (p, b);
    }
    let grad_traces = loss_and_grad.last_traces().expect("value_and_grad traces");
    eprintln!(
        "train_step: value_and_grad forward {} + backward {} prims, sgd {} prims; loss over {CHECK_STEPS} steps: {losses:?}",
        grad_traces.forward.final_trace().count_prims(),
        grad_traces.backward.final_trace().count_prims(),
        sgd.last_traces()
            .expect("sgd traces")
            .final_trace()
            .count_prims()
    );

    let mut group = c.benchmark_group("train_step");
    group.bench_function("fused_jit_step", |b| {
        b.iter(|| {
            let mut out = fused_once(&fused, black_box(&fused_state), &x, &y);
            fused_state = out.split_off(1);
            out
        })
    });
    group.bench_function("value_and_grad_then_sgd", |b| {
        b.iter(|| {
            let (loss, p, bu) = two_program_once(
                &loss_and_grad,
                &sgd,
                std::mem::take(&mut params),
                std::mem::take(&mut bufs),
                black_box(&x),
                &y,
            );
            (params, bufs) = (p, bu);
            loss
        })
    });
    group.finish();
    eprintln!(
        "train_step: cache misses: fused {}, value_and_grad {}, sgd {}",
        fused.cache_misses(),
        loss_and_grad.cache_misses(),
        sgd.cache_misses()
    );
}

criterion_group! {
    name = benches;
    config = config();
    targets = train_step
}
criterion_main!(benches);
