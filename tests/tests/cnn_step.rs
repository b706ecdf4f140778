//! A small CNN training step (conv2d, batch_norm in training mode, relu, max_pool2d, grouped
//! strided conv2d, group_norm, adaptive_avg_pool2d, linear, cross_entropy) against PyTorch:
//! the loss, every parameter's gradient and batch_norm's updated running statistics
//! (`scripts/gen_cnn_fixture.py` -> `tests/fixtures/cnn/step.safetensors`).

use thunder_core::autograd::value_and_grad;
use thunder_core::trace_ctx::sticky;
use thunder_core::{Array, Tensor};
use thunder_tests::{close, interpreter_host, load_fixture_array, repo_root};
use thunder_torch as ltorch;
use thunder_torch::prelude::*;

const NAMES: [&str; 13] = [
    "x", "y", "w1", "b1", "g1", "be1", "rm", "rv", "w2", "g2", "be2", "w3", "b3",
];
const PARAMS: [&str; 9] = ["w1", "b1", "g1", "be1", "w2", "g2", "be2", "w3", "b3"];

fn step(xs: &[Tensor]) -> Vec<Tensor> {
    let p = |name: &str| &xs[NAMES.iter().position(|n| *n == name).expect("name")];
    let h = sticky(ltorch::conv2d(
        p("x"),
        p("w1"),
        Some(p("b1")),
        &[1],
        &[1],
        &[1],
        1,
    ));
    let bn = ltorch::batch_norm(
        &h,
        Some(p("rm")),
        Some(p("rv")),
        Some(p("g1")),
        Some(p("be1")),
        true,
        0.1,
        1e-5,
    );
    let (h, rm, rv) = match bn {
        Ok(bn) => (
            bn.output,
            bn.running_mean.expect("running_mean"),
            bn.running_var.expect("running_var"),
        ),
        Err(e) => {
            let poisoned = sticky(Err(e));
            (poisoned.clone(), poisoned.clone(), poisoned)
        }
    };
    let h = sticky(ltorch::max_pool2d(&h.relu(), &[2], None, &[0], &[1]));
    let h = sticky(ltorch::conv2d(&h, p("w2"), None, &[2], &[1], &[1], 2));
    let h = sticky(ltorch::group_norm(
        &h,
        4,
        Some(p("g2")),
        Some(p("be2")),
        1e-5,
    ));
    let h = sticky(ltorch::adaptive_avg_pool2d(&h, &[1, 1])).reshape(&[4, 8]);
    let loss = h.linear(p("w3"), Some(p("b3"))).cross_entropy(p("y"));
    vec![loss, rm, rv]
}

#[test]
fn cnn_training_step_matches_pytorch() {
    let bytes =
        std::fs::read(repo_root().join("tests/fixtures/cnn/step.safetensors")).expect("fixture");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors");
    let get = |n: &str| load_fixture_array(&st, n);
    let inputs: Vec<Array> = NAMES
        .iter()
        .map(|n| get(n).with_requires_grad(PARAMS.contains(n)))
        .collect();
    let vg = value_and_grad(Some(interpreter_host()), step);
    let (outs, grads) = vg.call(&inputs).expect("step");
    let check = |what: &str, got: &Array, want: &Array| {
        assert_eq!(got.shape(), want.shape(), "{what} shape");
        let (g, w) = (
            got.to_f64_vec().expect("host array"),
            want.to_f64_vec().expect("host array"),
        );
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                close(*a, *b, 1e-9, 1e-11, false),
                "{what}[{i}]: {a} vs PyTorch {b}"
            );
        }
    };
    check("loss", &outs[0], &get("loss"));
    check("running_mean", &outs[1], &get("rm_new"));
    check("running_var", &outs[2], &get("rv_new"));
    assert_eq!(grads.len(), PARAMS.len());
    for (name, grad) in PARAMS.iter().zip(&grads) {
        check(&format!("grad {name}"), grad, &get(&format!("grad_{name}")));
    }
}
