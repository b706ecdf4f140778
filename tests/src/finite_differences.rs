//! The finite-difference gradient check shared by the `grad_finite_differences*` tests: every
//! differentiable op's gradient against central finite differences in f64. The loss is
//! `sum(op(inputs) * w)` with a fixed random `w`, so every output element gets its own
//! cotangent.

use crate::interpreter_host;
use std::sync::Arc;
use thunder_core::autograd::value_and_grad;
use thunder_core::{jit_with, Array, Tensor};
use thunder_torch::prelude::*;

pub type Op = Arc<dyn Fn(&[Tensor]) -> Tensor + Send + Sync>;

pub fn values(shape: &[i64], seed: u64, lo: f64, hi: f64) -> Array {
    // Deterministic values in [lo, hi], spread so no two are equal (no ties for max/min).
    let n: i64 = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let u = ((i as u64 * 7919 + seed * 104_729) % 1000) as f64 / 1000.0;
            lo + (hi - lo) * (0.05 + 0.9 * u) + i as f64 * 1e-4
        })
        .collect();
    Array::from_slice(&v, shape).unwrap()
}

pub fn loss_fn(op: Op, n_inputs: usize) -> impl Fn(&[Tensor]) -> Vec<Tensor> + Send + Sync {
    move |xs: &[Tensor]| {
        let out = op(&xs[..n_inputs]);
        vec![(&out * &xs[n_inputs]).sum(None, false)]
    }
}

pub fn check(name: &str, op: Op, inputs: Vec<Array>) {
    let host = interpreter_host();
    let n = inputs.len();
    let probe = jit_with(host.clone(), {
        let op = op.clone();
        move |xs: &[Tensor]| vec![op(xs)]
    });
    let out_shape = probe
        .call(&inputs)
        .unwrap_or_else(|e| panic!("{name}: {e}"))[0]
        .shape()
        .to_vec();
    let w = values(&out_shape, 99, -1.0, 1.0);
    let forward = jit_with(host.clone(), loss_fn(op.clone(), n));
    let vg = value_and_grad(Some(host), loss_fn(op, n));
    let mut args: Vec<Array> = inputs
        .iter()
        .map(|a| a.clone().with_requires_grad(true))
        .collect();
    args.push(w.clone());
    let (_, grads) = vg.call(&args).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(grads.len(), n, "{name}");
    let eps = 1e-6;
    for (k, input) in inputs.iter().enumerate() {
        let base = input.to_vec::<f64>().unwrap();
        let g = grads[k].to_vec::<f64>().unwrap();
        assert_eq!(grads[k].shape(), input.shape(), "{name}: grad {k} shape");
        for i in 0..base.len() {
            let eval = |delta: f64| -> f64 {
                let mut v = base.clone();
                v[i] += delta;
                let mut a: Vec<Array> = inputs.clone();
                a[k] = Array::from_slice(&v, input.shape()).unwrap();
                a.push(w.clone());
                forward.call(&a).unwrap()[0].to_vec::<f64>().unwrap()[0]
            };
            let fd = (eval(eps) - eval(-eps)) / (2.0 * eps);
            assert!(
                (fd - g[i]).abs() <= 1e-5 + 1e-5 * fd.abs(),
                "{name}: d/d input{k}[{i}]: autograd {} vs finite difference {fd}",
                g[i]
            );
        }
    }
}

/// An [`Op`] from a closure over the inputs.
#[macro_export]
macro_rules! op {
    (|$xs:ident| $body:expr) => {
        std::sync::Arc::new(|$xs: &[thunder_core::Tensor]| $body) as $crate::finite_differences::Op
    };
}

/// Like `check`, with integer `consts` (indices) passed after the differentiable inputs: the
/// op sees `inputs ++ consts`, and only `inputs` are perturbed and get gradients.
pub fn check_indexed(name: &str, op: Op, inputs: Vec<Array>, consts: Vec<Array>) {
    let host = interpreter_host();
    let n = inputs.len();
    // Program inputs: the differentiable ones, the cotangent weights, then the constants.
    let loss = {
        let op = op.clone();
        move |xs: &[Tensor]| {
            let mut ins: Vec<Tensor> = xs[..n].to_vec();
            ins.extend_from_slice(&xs[n + 1..]);
            vec![(&op(&ins) * &xs[n]).sum(None, false)]
        }
    };
    let mut probe_in = inputs.clone();
    probe_in.extend(consts.iter().cloned());
    let probe = jit_with(host.clone(), move |xs: &[Tensor]| vec![op(xs)]);
    let out_shape = probe
        .call(&probe_in)
        .unwrap_or_else(|e| panic!("{name}: {e}"))[0]
        .shape()
        .to_vec();
    let w = values(&out_shape, 99, -1.0, 1.0);
    let forward = jit_with(host.clone(), loss.clone());
    let vg = value_and_grad(Some(host), loss);
    let with = |ins: Vec<Array>| -> Vec<Array> {
        let mut a = ins;
        a.push(w.clone());
        a.extend(consts.iter().cloned());
        a
    };
    let (_, grads) = vg
        .call(&with(
            inputs
                .iter()
                .map(|a| a.clone().with_requires_grad(true))
                .collect(),
        ))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(grads.len(), n, "{name}");
    let eps = 1e-6;
    for (k, input) in inputs.iter().enumerate() {
        let base = input.to_vec::<f64>().unwrap();
        let g = grads[k].to_vec::<f64>().unwrap();
        assert_eq!(grads[k].shape(), input.shape(), "{name}: grad {k} shape");
        for i in 0..base.len() {
            let eval = |delta: f64| -> f64 {
                let mut v = base.clone();
                v[i] += delta;
                let mut a = inputs.clone();
                a[k] = Array::from_slice(&v, input.shape()).unwrap();
                forward.call(&with(a)).unwrap()[0].to_vec::<f64>().unwrap()[0]
            };
            let fd = (eval(eps) - eval(-eps)) / (2.0 * eps);
            assert!(
                (fd - g[i]).abs() <= 1e-5 + 1e-5 * fd.abs(),
                "{name}: d/d input{k}[{i}]: autograd {} vs finite difference {fd}",
                g[i]
            );
        }
    }
}
