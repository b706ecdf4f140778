//! `vjp_in_trace` + `split_forward_backward_vjp` (what the Python package's autograd uses):
//! the backward program, given cotangents for every output, returns the same gradients as
//! `value_and_grad` of `sum(out_i * cot_i)`; and arrays that borrow outside memory
//! (`Array::from_external`, the DLPack path) run without copies and release their owner.

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use thunder_core::autograd::{split_forward_backward_vjp, value_and_grad, vjp_in_trace};
use thunder_core::ir::TensorType;
use thunder_core::trace_ctx::trace_with;
use thunder_core::{compile_trace, Array, DType, Device, Tensor};
use thunder_tests::finite_differences::values;
use thunder_tests::interpreter_host;
use thunder_torch::prelude::*;

fn f(xs: &[Tensor]) -> Vec<Tensor> {
    let (x, w) = (&xs[0], &xs[1]);
    // Two outputs, one broadcast, one reduced.
    vec![(x * w).tanh(), (x + w).sum(Some(&[1]), false)]
}

#[test]
fn vjp_matches_value_and_grad_of_the_weighted_sum() {
    let host = interpreter_host();
    let x = values(&[3, 4], 1, -1.0, 1.0).with_requires_grad(true);
    let w = values(&[4], 2, -1.0, 1.0).with_requires_grad(true);
    let c0 = values(&[3, 4], 3, -1.0, 1.0);
    let c1 = values(&[3], 4, -1.0, 1.0);

    // The oracle: value_and_grad of sum(f0 * c0) + sum(f1 * c1), cotangents as plain inputs.
    let vg = value_and_grad(Some(host.clone()), |xs: &[Tensor]| {
        let o = f(&xs[..2]);
        let l = (&o[0] * &xs[2]).sum(None, false) + (&o[1] * &xs[3]).sum(None, false);
        vec![l]
    });
    let (_, want) = vg
        .call(&[x.clone(), w.clone(), c0.clone(), c1.clone()])
        .unwrap();

    let ty = |a: &Array| a.ty().clone();
    let mut inputs = vec![("x".to_string(), ty(&x)), ("w".to_string(), ty(&w))];
    inputs.push(("c0".into(), ty(&c0)));
    inputs.push(("c1".into(), ty(&c1)));
    let forward_len = Cell::new(0);
    let joint = trace_with(&inputs, HashSet::new(), "vjp", |xs| {
        let pairs = vec![(0, xs[2].clone()), (1, xs[3].clone())];
        let r = vjp_in_trace(&xs[..2], &[0, 1], |p| Ok(f(p)), &pairs)?;
        forward_len.set(r.forward_len);
        Ok(r.outputs.into_iter().chain(r.grads).collect())
    })
    .unwrap();
    let cots = joint.inputs[2..].to_vec();
    let (fwd, bwd, saved) =
        split_forward_backward_vjp(&joint, forward_len.get(), 2, &cots).unwrap();
    assert_eq!(fwd.inputs.len(), 2, "the forward takes no cotangents");
    assert_eq!(bwd.inputs.len(), saved.len() + 2);
    let (_, fwd) = compile_trace(&host, fwd).unwrap();
    let (_, bwd) = compile_trace(&host, bwd).unwrap();
    let mut outs = fwd.run(&[x.clone(), w.clone()]).unwrap();
    let mut residuals = outs.split_off(2);
    residuals.extend([c0, c1]);
    let got = bwd.run(&residuals).unwrap();
    assert_eq!(got.len(), 2);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.shape(), w.shape());
        for (a, b) in g.to_f64_vec().unwrap().iter().zip(w.to_f64_vec().unwrap()) {
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "got {a}, want {b}"
            );
        }
    }
}

#[test]
fn vjp_checks_cotangent_types() {
    let ty = TensorType::new(vec![3], DType::F32, Device::Cpu);
    let inputs = vec![
        ("x".to_string(), ty.clone()),
        (
            "c".to_string(),
            TensorType::new(vec![4], DType::F32, Device::Cpu),
        ),
    ];
    let err = trace_with(&inputs, HashSet::new(), "vjp", |xs| {
        let r = vjp_in_trace(
            &xs[..1],
            &[0],
            |p| Ok(vec![p[0].exp()]),
            &[(0, xs[1].clone())],
        )?;
        Ok(r.grads)
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("cotangent of output 0"), "{err}");
}

struct Owner(Arc<AtomicUsize>, #[allow(dead_code)] Vec<f32>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn external_arrays_are_read_in_place_and_release_their_owner() {
    let host = interpreter_host();
    let dropped = Arc::new(AtomicUsize::new(0));
    let mut data = vec![1.0f32, -2.0, 3.5, 0.0, 0.25, -0.5];
    let ptr = data.as_mut_ptr() as *mut u8;
    let ty = TensorType::new(vec![2, 3], DType::F32, Device::Cpu);
    let owner = Box::new(Owner(dropped.clone(), data));
    // SAFETY: the Vec's heap buffer (6 f32) moves with `owner` and is not written meanwhile.
    let x = unsafe { Array::from_external(ptr, ty, owner) };
    assert_eq!(x.as_ptr(), ptr as *const u8);
    let j = thunder_core::jit_with(host, |xs: &[Tensor]| vec![&xs[0] * 2.0]);
    let out = j.call(std::slice::from_ref(&x)).unwrap();
    assert_eq!(
        out[0].to_vec::<f32>().unwrap(),
        vec![2.0, -4.0, 7.0, 0.0, 0.5, -1.0]
    );
    assert_eq!(
        x.to_vec::<f32>().unwrap()[2],
        3.5,
        "inputs are never written"
    );
    let clone = x.clone();
    drop(x);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        0,
        "a clone still holds the memory"
    );
    drop(clone);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}
