//! The jit traces once per input signature (shape, dtype, device, requires_grad) and serves
//! later calls from its cache.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use thunder_core::{jit_with, Array, DType};
use thunder_tests::interpreter_host;
use thunder_torch::prelude::*;

#[test]
fn traces_once_per_signature() {
    let traced = Arc::new(AtomicUsize::new(0));
    let counter = traced.clone();
    let f = jit_with(interpreter_host(), move |xs| {
        counter.fetch_add(1, Ordering::SeqCst);
        vec![&xs[0] * 2.0 + 1.0]
    });
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, -4.0, 0.5, 0.0], &[2, 3]).unwrap();
    let out = f.call(std::slice::from_ref(&x)).unwrap();
    assert_eq!(
        out[0].to_vec::<f32>().unwrap(),
        vec![3.0, 5.0, 7.0, -7.0, 2.0, 1.0]
    );
    assert_eq!(
        (
            traced.load(Ordering::SeqCst),
            f.cache_misses(),
            f.cache_hits()
        ),
        (1, 1, 0)
    );

    for _ in 0..3 {
        f.call(std::slice::from_ref(&x)).unwrap();
    }
    assert_eq!(
        (
            traced.load(Ordering::SeqCst),
            f.cache_misses(),
            f.cache_hits()
        ),
        (1, 1, 3)
    );

    // Each change of signature traces again.
    let other_shape = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let other_dtype = Array::from_slice(&[1.0f64, 2.0], &[2]).unwrap();
    let with_grad = x.clone().with_requires_grad(true);
    assert_eq!(
        f.call(&[other_shape]).unwrap()[0].to_vec::<f32>().unwrap(),
        vec![3.0, 5.0]
    );
    assert_eq!(
        f.call(&[other_dtype]).unwrap()[0].to_vec::<f64>().unwrap(),
        vec![3.0, 5.0]
    );
    f.call(&[with_grad]).unwrap();
    assert_eq!(traced.load(Ordering::SeqCst), 4);

    // The first signature is still cached.
    f.call(&[x]).unwrap();
    assert_eq!(
        (
            traced.load(Ordering::SeqCst),
            f.cache_misses(),
            f.cache_hits()
        ),
        (4, 4, 4)
    );
}

#[test]
fn last_traces_show_every_stage() {
    let f = jit_with(interpreter_host(), |xs| {
        vec![(&xs[0] - &xs[1]).exp().sum(None, false)]
    })
    .with_input_names(&["a", "b"]);
    let a = Array::random(&[3, 4], DType::F32, 1).unwrap();
    let b = Array::random(&[4], DType::F32, 2).unwrap();
    f.call(&[a, b]).unwrap();
    let t = f.last_traces().expect("traces");
    let initial = thunder_core::text::print_trace(&t.initial);
    assert!(
        initial.starts_with("# Constructed by Tracing\ndef computation(a, b):"),
        "{initial}"
    );
    assert!(
        initial.contains("ltorch.sub(a, b)") && initial.contains("ltorch.sum("),
        "{initial}"
    );
    // dce, converts before broadcasts, round-trip converts, cse, merged cats, index-adds into
    // sums, dce
    assert_eq!(t.passes.len(), 7);
    assert_eq!(t.final_trace().provenance, "Dead Code Elimination");
    let exec = t.execution.print();
    assert!(
        exec.contains("interpreter.region0(") && exec.contains("prims.exp("),
        "{exec}"
    );
}

#[test]
fn scalar_and_empty_inputs_run() {
    let f = jit_with(interpreter_host(), |xs| {
        vec![&xs[0] * &xs[1], xs[1].sum(None, false)]
    });
    let s = Array::scalar(3.0f32).unwrap();
    let e = Array::from_slice::<f32>(&[], &[0]).unwrap();
    let out = f.call(&[s, e]).unwrap();
    assert_eq!(out[0].shape(), &[0]);
    assert_eq!(out[1].shape(), &[] as &[i64]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![0.0]);
}
