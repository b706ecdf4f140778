//! Host overhead of a cached call, and first-call translation time.
//!
//! Run with `cargo build --release -p thunder-interpreter && cargo bench -p thunder-benches
//! --bench cached_call`. Results land in `target/criterion/<group>/<bench>/new/estimates.json`
//! (`mean.point_estimate`, ns), which `peer/torch_peer.py --thunder-json` reads.
//!
//! Groups and benches:
//! - `cached_call/jit_call_64xf32_10ops`: `Jitted::call` on an input signature already in the
//!   cache: signature lookup, then the compiled program's run (output allocation, one region
//!   call through the plugin ABI, 10 elementwise ops on 64 f32 elements). The arithmetic is a
//!   few hundred nanoseconds at most, so this is almost all host overhead.
//! - `cached_call/program_run_64xf32_10ops`: `CompiledProgram::run` of the same program,
//!   without the jit's cache lookup, to split the two.
//! - `translation/trace_mlp12`: tracing a 12-block `linear + gelu + softmax` MLP
//!   (`Jitted::trace`).
//! - `translation/compile_trace_mlp12`: `thunder_core::compile_trace` of that trace: passes
//!   (DCE, CSE, DCE), claiming, partitioning and the plugin's compile.
//! - `translation/first_call_mlp12`: a fresh `Jitted`'s first call: trace + compile_trace + one
//!   run on 4x16 inputs, i.e. what a user waits for on a new signature.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use std::time::Duration;
use thunder_benches::{
    chain_input, elementwise_chain, elementwise_chain_reference, interpreter_host, mlp,
    mlp_input_types, mlp_inputs,
};

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

fn cached_call(c: &mut Criterion) {
    let host = interpreter_host();
    let jitted = thunder_core::jit_with(host.clone(), elementwise_chain);
    let x = chain_input();
    let inputs = vec![x.clone()];

    // First call traces and compiles; check the result once so the bench times a correct
    // program (a correctness check outside the timed loop, not a timed assertion).
    let out = jitted.call(&inputs).expect("first call");
    let got = out[0].to_vec::<f32>().expect("f32 output");
    let want: Vec<f32> = x
        .to_vec::<f32>()
        .expect("f32 input")
        .into_iter()
        .map(elementwise_chain_reference)
        .collect();
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "wrong output: got {g}, want {w}"
        );
    }
    let traces = jitted.last_traces().expect("traces of the first call");
    let prims = traces.final_trace().count_prims();
    eprintln!("cached_call: final trace has {prims} prims");

    // The same program, compiled once more, for a run without the jit's cache lookup.
    let (_, program) = thunder_core::compile_trace(&host, traces.initial.clone())
        .expect("compile_trace of the chain");

    let mut group = c.benchmark_group("cached_call");
    group.bench_function("jit_call_64xf32_10ops", |b| {
        b.iter(|| jitted.call(black_box(&inputs)).expect("cached call"))
    });
    group.bench_function("program_run_64xf32_10ops", |b| {
        b.iter(|| program.run(black_box(&inputs)).expect("program run"))
    });
    group.finish();
    assert_eq!(
        jitted.cache_misses(),
        1,
        "the timed calls must all hit the cache"
    );
}

fn translation(c: &mut Criterion) {
    let host = interpreter_host();
    let types = mlp_input_types();
    let jitted = thunder_core::jit_with(host.clone(), mlp);
    let trace = jitted.trace(&types).expect("trace of the MLP");
    eprintln!(
        "translation: MLP of {} inputs traces to {} top-level symbols, {} prims",
        types.len(),
        trace.bsyms.len(),
        trace.count_prims()
    );
    let inputs = mlp_inputs();

    let mut group = c.benchmark_group("translation");
    // Each iteration is up to a millisecond: 50 samples fit the 3 s measurement time.
    group.sample_size(50);
    group.bench_function("trace_mlp12", |b| {
        b.iter(|| jitted.trace(black_box(&types)).expect("trace"))
    });
    group.bench_function("compile_trace_mlp12", |b| {
        b.iter_batched(
            || trace.clone(),
            |t| thunder_core::compile_trace(&host, t).expect("compile_trace"),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("first_call_mlp12", |b| {
        b.iter_batched(
            || thunder_core::jit_with(host.clone(), mlp),
            |j| {
                let out = j.call(black_box(&inputs)).expect("first call");
                (j, out)
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = cached_call, translation
}
criterion_main!(benches);
