//! cpu-simd's fused attention for training (`ltorch.sdpa_fwd_lse` and `ltorch.sdpa_bwd` claimed
//! whole) against the reference interpreter running their decompositions: the two ops alone on
//! shapes that exercise the kernels' tiles and threads, and a causal self-attention layer's
//! value and gradient, whose forward must save no L x S value and whose two attention ops must
//! each be one cpu-simd op.

use std::sync::Arc;
use thunder_core::autograd::value_and_grad;
use thunder_core::host::exec_trace::ExecutionTrace;
use thunder_core::{Array, DType, PluginHost, Tensor};
use thunder_tests::{close, default_cpu_host, interpreter_host};
use thunder_torch::prelude::*;

/// Values in [-scale, scale), deterministic in `seed`.
fn values(shape: &[i64], seed: u64, scale: f64) -> Array {
    let a = Array::random(shape, DType::F64, seed).expect("random");
    let v: Vec<f32> = a
        .to_f64_vec()
        .expect("host array")
        .iter()
        .map(|x| (x.tanh() * scale) as f32)
        .collect();
    Array::from_slice(&v, shape).expect("array")
}

/// The symbols cpu-simd ran as ops of its regions.
fn simd_symbols(exec: &ExecutionTrace) -> Vec<String> {
    exec.steps
        .iter()
        .filter(|s| s.executor == "cpu-simd")
        .flat_map(|s| {
            s.ops
                .iter()
                .map(|&i| exec.trace.bsyms[i].sym.id.to_string())
        })
        .collect()
}

fn assert_close(what: &str, got: &Array, want: &Array, rtol: f64, atol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_f64_vec().expect("g"), want.to_f64_vec().expect("w"));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            close(*a, *b, rtol, atol, false),
            "{what}: element {i}: cpu-simd {a}, interpreter {b}"
        );
    }
}

fn run(host: &Arc<PluginHost>, program: &str, inputs: &[Array]) -> (ExecutionTrace, Vec<Array>) {
    let trace = thunder_torch::parse_trace(program).expect("parse");
    let (traces, compiled) = thunder_core::compile_trace(host, trace).expect("compile");
    let out = compiled.run(inputs).expect("run");
    (traces.execution, out)
}

/// (batch dims, L, S, E, Ev, causal)
type Shape = (&'static [i64], i64, i64, i64, i64, bool);

const SHAPES: &[Shape] = &[
    (&[2, 3], 40, 150, 16, 8, false),
    (&[2, 3], 40, 150, 16, 8, true),
    (&[2], 150, 40, 8, 12, true),
    (&[], 65, 129, 5, 7, true),
    // The threaded paths: many batch indices, and one with long rows.
    (&[2, 4], 128, 128, 64, 64, true),
    (&[1], 300, 260, 32, 16, false),
];

fn ty(batch: &[i64], dims: &[i64]) -> String {
    let all: Vec<String> = batch.iter().chain(dims).map(i64::to_string).collect();
    format!("\"cpu f32[{}]\"", all.join(", "))
}

#[test]
fn sdpa_ops_run_whole_and_match_the_decomposition() {
    let (simd, interp) = (default_cpu_host(), interpreter_host());
    for (seed, &(b, l, s, e, ev, causal)) in SHAPES.iter().enumerate() {
        let what = format!("batch {b:?} L {l} S {s} E {e} Ev {ev} causal {causal}");
        let causal_py = if causal { "True" } else { "False" };
        let fwd = format!(
            "def computation(q, k, v):\n  # q: {}\n  # k: {}\n  # v: {}\n  \
             o, lse = ltorch.sdpa_fwd_lse(q, k, v, is_causal={causal_py})\n  return (o, lse)\n",
            ty(b, &[l, e]),
            ty(b, &[s, e]),
            ty(b, &[s, ev])
        );
        let seed = 100 * seed as u64;
        let qkv = vec![
            values(&[b, &[l, e]].concat(), seed + 1, 2.0),
            values(&[b, &[s, e]].concat(), seed + 2, 2.0),
            values(&[b, &[s, ev]].concat(), seed + 3, 1.0),
        ];
        let (exec, got) = run(&simd, &fwd, &qkv);
        assert_eq!(
            simd_symbols(&exec),
            vec!["ltorch.sdpa_fwd_lse"],
            "{what}: cpu-simd runs the forward whole"
        );
        let (_, want) = run(&interp, &fwd, &qkv);
        assert_close(&format!("{what}: out"), &got[0], &want[0], 1e-4, 1e-5);
        assert_close(&format!("{what}: lse"), &got[1], &want[1], 1e-5, 1e-5);

        let bwd = format!(
            "def computation(g, q, k, v, o, lse):\n  # g: {}\n  # q: {}\n  # k: {}\n  # v: {}\n  \
             # o: {}\n  # lse: {}\n  \
             dq, dk, dv = ltorch.sdpa_bwd(g, q, k, v, o, lse, is_causal={causal_py})\n  \
             return (dq, dk, dv)\n",
            ty(b, &[l, ev]),
            ty(b, &[l, e]),
            ty(b, &[s, e]),
            ty(b, &[s, ev]),
            ty(b, &[l, ev]),
            ty(b, &[l])
        );
        let mut ins = vec![values(&[b, &[l, ev]].concat(), seed + 4, 1.0)];
        ins.extend(qkv.iter().cloned());
        ins.extend(want.iter().cloned());
        let (exec, got) = run(&simd, &bwd, &ins);
        assert_eq!(
            simd_symbols(&exec),
            vec!["ltorch.sdpa_bwd"],
            "{what}: cpu-simd runs the backward whole"
        );
        let (_, want) = run(&interp, &bwd, &ins);
        for (k, name) in ["dq", "dk", "dv"].iter().enumerate() {
            assert_close(&format!("{what}: {name}"), &got[k], &want[k], 1e-4, 1e-5);
        }
    }
}

/// Causal self-attention over `x: [B, T, C]` with `h` heads (q, k, v split from one
/// projection, as nanoGPT), squared and summed to a loss.
fn attention_loss(x: &[Tensor], h: i64) -> Vec<Tensor> {
    let (b, t, c) = (x[0].shape()[0], x[0].shape()[1], x[0].shape()[2]);
    let qkv = thunder_torch::split(&x[0].linear(&x[1], None), c, 2).expect("split");
    let heads = |u: &Tensor| u.reshape(&[b, t, h, c / h]).transpose(1, 2);
    let (q, k, v) = (heads(&qkv[0]), heads(&qkv[1]), heads(&qkv[2]));
    let y = thunder_torch::scaled_dot_product_attention(&q, &k, &v, None, true, None)
        .expect("sdpa")
        .transpose(1, 2)
        .reshape(&[b, t, c]);
    vec![(&y * &y).sum(None, false)]
}

#[test]
fn attention_training_runs_fused_and_saves_nothing_t_by_t() {
    let (b, t, c, h) = (2, 70, 32, 4);
    let inputs = vec![
        values(&[b, t, c], 7, 1.0).with_requires_grad(true),
        values(&[3 * c, c], 8, 0.3).with_requires_grad(true),
    ];
    let simd = value_and_grad(Some(default_cpu_host()), move |x: &[Tensor]| {
        attention_loss(x, h)
    });
    let interp = value_and_grad(Some(interpreter_host()), move |x: &[Tensor]| {
        attention_loss(x, h)
    });
    let (loss, grads) = simd.call(&inputs).expect("cpu-simd");
    let (want_loss, want_grads) = interp.call(&inputs).expect("interpreter");
    assert_close("loss", &loss[0], &want_loss[0], 1e-5, 1e-5);
    for (k, (g, w)) in grads.iter().zip(&want_grads).enumerate() {
        assert_close(&format!("grad {k}"), g, w, 1e-4, 1e-5);
    }
    let traces = simd.last_traces().expect("traces");
    let fwd = simd_symbols(&traces.forward.execution);
    let bwd = simd_symbols(&traces.backward.execution);
    assert_eq!(
        fwd.iter().filter(|s| s.starts_with("ltorch.sdpa")).count(),
        1,
        "forward: {fwd:?}"
    );
    assert!(fwd.contains(&"ltorch.sdpa_fwd_lse".to_string()), "{fwd:?}");
    assert!(bwd.contains(&"ltorch.sdpa_bwd".to_string()), "{bwd:?}");
    let saved = traces.backward.final_trace();
    for &v in &saved.inputs {
        let shape = &saved.ty(v).shape;
        assert!(
            !shape.ends_with(&[t, t]),
            "a saved value is T x T: {shape:?}"
        );
    }
}
