//! Every differentiable op's gradient against central finite differences in f64. The loss is
//! `sum(op(inputs) * w)` with a fixed random `w`, so every output element gets its own
//! cotangent.

use thunder_core::autograd::value_and_grad;
use thunder_core::{Array, DType, Tensor};
use thunder_tests::finite_differences::{check, values};
use thunder_tests::{interpreter_host, op};
use thunder_torch as ltorch;
use thunder_torch::prelude::*;

#[test]
fn unary_ops() {
    let pos = || values(&[2, 3], 1, 0.5, 2.0);
    let any = || values(&[2, 3], 2, -1.5, 1.5);
    check("neg", op!(|x| x[0].neg()), vec![any()]);
    check("abs", op!(|x| x[0].abs()), vec![any()]);
    check("exp", op!(|x| x[0].exp()), vec![any()]);
    check("log", op!(|x| x[0].log()), vec![pos()]);
    check("sqrt", op!(|x| x[0].sqrt()), vec![pos()]);
    check("rsqrt", op!(|x| x[0].rsqrt()), vec![pos()]);
    check("tanh", op!(|x| x[0].tanh()), vec![any()]);
    check("sin", op!(|x| x[0].sin()), vec![any()]);
    check("cos", op!(|x| x[0].cos()), vec![any()]);
    check("erf", op!(|x| x[0].erf()), vec![any()]);
    check("reciprocal", op!(|x| x[0].reciprocal()), vec![pos()]);
    let unit = || values(&[2, 3], 4, -0.9, 0.9);
    let ge1 = || values(&[2, 3], 5, 1.2, 3.0);
    check("exp2", op!(|x| x[0].exp2()), vec![any()]);
    check("expm1", op!(|x| x[0].expm1()), vec![any()]);
    check("log1p", op!(|x| x[0].log1p()), vec![pos()]);
    check("log2", op!(|x| x[0].log2()), vec![pos()]);
    check("log10", op!(|x| x[0].log10()), vec![pos()]);
    check("tan", op!(|x| x[0].tan()), vec![unit()]);
    check("asin", op!(|x| x[0].asin()), vec![unit()]);
    check("acos", op!(|x| x[0].acos()), vec![unit()]);
    check("atan", op!(|x| x[0].atan()), vec![any()]);
    check("sinh", op!(|x| x[0].sinh()), vec![any()]);
    check("cosh", op!(|x| x[0].cosh()), vec![any()]);
    check("asinh", op!(|x| x[0].asinh()), vec![any()]);
    check("acosh", op!(|x| x[0].acosh()), vec![ge1()]);
    check("atanh", op!(|x| x[0].atanh()), vec![unit()]);
    check("erfc", op!(|x| x[0].erfc()), vec![any()]);
    check("erfinv", op!(|x| x[0].erfinv()), vec![unit()]);
    check(
        "lgamma",
        op!(|x| x[0].lgamma()),
        vec![values(&[2, 3], 9, -2.7, 4.0)],
    );
    // Piecewise constant: zero gradient (inputs stay away from the steps).
    let steps = || values(&[2, 3], 6, 0.1, 0.4);
    check("floor", op!(|x| x[0].floor()), vec![steps()]);
    check("ceil", op!(|x| x[0].ceil()), vec![steps()]);
    check("round", op!(|x| x[0].round()), vec![steps()]);
    check("trunc", op!(|x| x[0].trunc()), vec![steps()]);
    check("sign", op!(|x| x[0].sign() * &x[0]), vec![any()]);
    check("relu", op!(|x| x[0].relu()), vec![any()]);
    check("gelu none", op!(|x| x[0].gelu("none")), vec![any()]);
    check("gelu tanh", op!(|x| x[0].gelu("tanh")), vec![any()]);
    check(
        "scalar input",
        op!(|x| x[0].exp() * 3.0),
        vec![values(&[], 3, -1.0, 1.0)],
    );
}

#[test]
fn digamma_gradient_is_trigamma() {
    // Both sides of the reflection point 1/2 of trigamma, and negative non-integers.
    check(
        "digamma",
        op!(|x| x[0].digamma()),
        vec![Array::from_slice(&[0.3, 0.7, 1.5, 4.0, 12.5, -0.4, -2.6], &[7]).unwrap()],
    );
}

#[test]
fn trigamma_gradient_is_a_named_error() {
    let vg = value_and_grad(Some(interpreter_host()), |xs: &[Tensor]| {
        vec![xs[0].polygamma(1).sum(None, false)]
    });
    let err = vg
        .call(&[values(&[3], 1, 0.5, 2.0).with_requires_grad(true)])
        .expect_err("trigamma has no gradient")
        .to_string();
    assert!(
        err.contains("prims.trigamma") && err.contains("polygamma(2, x)"),
        "{err}"
    );
}

#[test]
fn activations_norms_losses_and_masks() {
    // Values avoid the kinks of relu6 (0, 6), hardswish (-3, 3), leaky_relu and clamp (0, ±0.5).
    let a = || values(&[2, 3], 21, -1.4, 1.4);
    let w = || values(&[3], 22, 0.5, 1.5);
    check("sigmoid", op!(|x| x[0].sigmoid()), vec![a()]);
    check("silu", op!(|x| x[0].silu()), vec![a()]);
    check("softplus", op!(|x| x[0].softplus(2.0, 20.0)), vec![a()]);
    check("relu6", op!(|x| (&x[0] * 4.0).relu6()), vec![a()]);
    check("hardswish", op!(|x| x[0].hardswish()), vec![a()]);
    check("leaky_relu", op!(|x| x[0].leaky_relu(0.1)), vec![a()]);
    check(
        "clamp",
        op!(|x| x[0].clamp(Some((-0.55).into()), Some(0.45.into()))),
        vec![a()],
    );
    check(
        "rms_norm",
        op!(|x| thunder_core::trace_ctx::sticky(thunder_torch::rms_norm(
            &x[0],
            &[3],
            Some(&x[1]),
            Some(1e-6)
        ))),
        vec![a(), w()],
    );
    check(
        "mse_loss",
        op!(|x| thunder_core::trace_ctx::sticky(thunder_torch::mse_loss(&x[0], &x[1]))),
        vec![a(), values(&[2, 3], 23, -1.0, 1.0)],
    );
    check(
        "masked_fill",
        op!(|x| x[0].masked_fill(&x[0].gt(0.0), 0.5)),
        vec![a()],
    );
    check(
        "tril",
        op!(|x| thunder_core::trace_ctx::sticky(thunder_torch::tril(&x[0], 0))),
        vec![values(&[3, 3], 24, -1.0, 1.0)],
    );
    check("var", op!(|x| x[0].var(Some(&[1]), 1, false)), vec![a()]);
    check("std", op!(|x| x[0].std(None, 1, false)), vec![a()]);
    check(
        "flatten, squeeze",
        op!(|x| x[0].unsqueeze(0).flatten(1, 2).squeeze(None)),
        vec![a()],
    );
}

#[test]
fn attention_losses_and_norms() {
    use thunder_core::trace_ctx::sticky;
    let q = || values(&[2, 3, 4], 31, -1.0, 1.0);
    let k = || values(&[2, 5, 4], 32, -1.0, 1.0);
    let v = || values(&[2, 5, 3], 33, -1.0, 1.0);
    check(
        "sdpa",
        op!(|x| sticky(thunder_torch::scaled_dot_product_attention(
            &x[0], &x[1], &x[2], None, false, None
        ))),
        vec![q(), k(), v()],
    );
    check(
        "sdpa causal",
        op!(|x| sticky(thunder_torch::scaled_dot_product_attention(
            &x[0],
            &x[1],
            &x[2],
            None,
            true,
            Some(0.7)
        ))),
        vec![
            q(),
            values(&[2, 3, 4], 34, -1.0, 1.0),
            values(&[2, 3, 2], 35, -1.0, 1.0),
        ],
    );
    // Both outputs of the flash forward get a cotangent: the lse's own term is checked too.
    check(
        "sdpa_fwd_lse, out and lse",
        op!(|x| sticky(
            thunder_torch::sdpa_fwd_lse(&x[0], &x[1], &x[2], true, None).and_then(|(o, lse)| {
                let lse = thunder_torch::unsqueeze(&thunder_torch::mul(&lse, 0.7)?, -1)?;
                thunder_torch::add(&o, &lse)
            })
        )),
        vec![
            values(&[2, 3, 4], 37, -1.0, 1.0),
            values(&[2, 5, 4], 38, -1.0, 1.0),
            values(&[2, 5, 3], 39, -1.0, 1.0),
        ],
    );
    check(
        "bmm",
        op!(|x| sticky(thunder_torch::bmm(&x[0], &x[1]))),
        vec![q(), values(&[2, 4, 2], 36, -1.0, 1.0)],
    );
    check(
        "norm 2",
        op!(|x| sticky(thunder_torch::norm(&x[0], 2.0, Some(&[1]), false))),
        vec![q()],
    );
    check(
        "norm 1",
        op!(|x| sticky(thunder_torch::norm(&x[0], 1.0, None, false))),
        vec![q()],
    );
    check(
        "unflatten",
        op!(|x| sticky(thunder_torch::unflatten(&x[0], 2, &[2, 2]))),
        vec![q()],
    );
}

/// cross_entropy with ignore_index and label smoothing, and nll_loss, against closed forms.
#[test]
fn class_index_losses_with_ignore_and_smoothing() {
    let host = interpreter_host();
    let logits = values(&[3, 4], 41, -2.0, 2.0);
    let target = Array::from_slice(&[2i64, -100, 0], &[3]).unwrap();
    let f = value_and_grad(
        Some(host),
        |x: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            let ce = thunder_torch::cross_entropy_with(&x[0], &x[1], -100, 0.1)?;
            Ok(vec![ce])
        },
    );
    let (loss, g) = f
        .call(&[logits.clone().with_requires_grad(true), target])
        .unwrap();
    let l = logits.to_vec::<f64>().unwrap();
    let (mut want, mut want_grad) = (0.0, vec![0.0; 12]);
    for (r, t) in [(0usize, 2usize), (2, 0)] {
        let row = &l[r * 4..r * 4 + 4];
        let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
        let logp: Vec<f64> = row.iter().map(|v| v - lse).collect();
        want += (0.9 * -logp[t] + 0.1 * -(logp.iter().sum::<f64>() / 4.0)) / 2.0;
        for c in 0..4 {
            let target_prob = 0.9 * if c == t { 1.0 } else { 0.0 } + 0.1 / 4.0;
            want_grad[r * 4 + c] = (logp[c].exp() - target_prob) / 2.0;
        }
    }
    assert!((loss[0].to_vec::<f64>().unwrap()[0] - want).abs() < 1e-12);
    for (a, b) in g[0].to_vec::<f64>().unwrap().iter().zip(&want_grad) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

#[test]
fn binary_ops_with_broadcasting() {
    let a = || values(&[2, 3], 4, 0.5, 2.0);
    let b = || values(&[3], 5, 0.5, 2.0);
    check("add", op!(|x| &x[0] + &x[1]), vec![a(), b()]);
    check("sub", op!(|x| &x[0] - &x[1]), vec![a(), b()]);
    check("mul", op!(|x| &x[0] * &x[1]), vec![a(), b()]);
    check("div", op!(|x| &x[0] / &x[1]), vec![a(), b()]);
    check("pow", op!(|x| x[0].pow(&x[1])), vec![a(), b()]);
    check("pow scalar exponent", op!(|x| x[0].pow(2.5)), vec![a()]);
    check("rsub scalar", op!(|x| 2.0 - &x[0]), vec![a()]);
    check("maximum", op!(|x| x[0].maximum(&x[1])), vec![a(), b()]);
    check("minimum", op!(|x| x[0].minimum(&x[1])), vec![a(), b()]);
    // Inputs keep a / b away from integers (the steps of remainder and fmod).
    let wide = || values(&[2, 3], 7, -3.0, 3.0);
    let negb = || values(&[3], 8, -1.9, -0.7);
    check(
        "remainder",
        op!(|x| x[0].remainder(&x[1])),
        vec![wide(), b()],
    );
    check(
        "remainder neg",
        op!(|x| x[0].remainder(&x[1])),
        vec![wide(), negb()],
    );
    check(
        "remainder literal b",
        op!(|x| x[0].remainder(0.7)),
        vec![wide()],
    );
    check(
        "remainder literal a",
        op!(|x| ltorch::remainder(2.5, &x[0]).unwrap()),
        vec![negb()],
    );
    check("fmod", op!(|x| x[0].fmod(&x[1])), vec![wide(), b()]);
    check("fmod neg", op!(|x| x[0].fmod(&x[1])), vec![wide(), negb()]);
    check(
        "floor_divide",
        op!(|x| x[0].floor_divide(&x[1]) * &x[0]),
        vec![wide(), b()],
    );
    check("atan2", op!(|x| x[0].atan2(&x[1])), vec![wide(), negb()]);
    check(
        "atan2 literal a",
        op!(|x| ltorch::atan2(-1.5, &x[0]).unwrap()),
        vec![wide()],
    );
    check("atan2 literal b", op!(|x| x[0].atan2(0.5)), vec![wide()]);
    check(
        "where",
        op!(|x| x[0].gt(1.0).select(&x[0], &x[1])),
        vec![a(), b()],
    );
    check(
        "0-d with 2-D",
        op!(|x| &x[0] * &x[1]),
        vec![values(&[], 6, 0.5, 1.5), a()],
    );
}

#[test]
fn shapes_reductions_and_matmul() {
    let x = || values(&[2, 3, 4], 7, -1.0, 1.0);
    check("reshape", op!(|x| x[0].reshape(&[6, 4])), vec![x()]);
    check("permute", op!(|x| x[0].permute(&[2, 0, 1])), vec![x()]);
    check("transpose", op!(|x| x[0].transpose(0, 2)), vec![x()]);
    check(
        "expand",
        op!(|x| x[0].unsqueeze(0).expand(&[2, 2, 3, 4])),
        vec![x()],
    );
    check("sum", op!(|x| x[0].sum(Some(&[1]), true)), vec![x()]);
    check("mean", op!(|x| x[0].mean(Some(&[0, 2]), false)), vec![x()]);
    check("amax", op!(|x| x[0].amax(Some(&[2]), false)), vec![x()]);
    check("softmax", op!(|x| x[0].softmax(-1)), vec![x()]);
    check("log_softmax", op!(|x| x[0].log_softmax(1)), vec![x()]);
    // Their own VJPs on a 0-d input (the gradient of a constant, 0) and over a leading dim.
    let scalar = || values(&[], 17, -1.0, 1.0);
    check("softmax 0-d", op!(|x| x[0].softmax(0)), vec![scalar()]);
    check(
        "log_softmax 0-d",
        op!(|x| x[0].log_softmax(-1)),
        vec![scalar()],
    );
    check("softmax over dim 0", op!(|x| x[0].softmax(0)), vec![x()]);
    check(
        "layer_norm",
        op!(|x| x[0].layer_norm(&[4], Some(&x[1]), Some(&x[2]), 1e-5)),
        vec![x(), values(&[4], 13, 0.5, 1.5), values(&[4], 14, -1.0, 1.0)],
    );
    check(
        "cross_entropy with probabilities",
        op!(|x| x[0].cross_entropy(&x[1].softmax(1))),
        vec![
            values(&[3, 4], 15, -2.0, 2.0),
            values(&[3, 4], 16, -1.0, 1.0),
        ],
    );
    let m = || values(&[3, 4], 8, -1.0, 1.0);
    check(
        "matmul",
        op!(|x| x[0].matmul(&x[1])),
        vec![x(), values(&[4, 5], 9, -1.0, 1.0)],
    );
    check(
        "matmul 1-D",
        op!(|x| x[0].matmul(&x[1])),
        vec![values(&[3], 10, -1.0, 1.0), m()],
    );
    check(
        "linear",
        op!(|x| x[0].linear(&x[1], Some(&x[2]))),
        vec![
            x(),
            values(&[5, 4], 11, -1.0, 1.0),
            values(&[5], 12, -1.0, 1.0),
        ],
    );
}

/// Cross-entropy with class indices: the index input is an integer and gets no gradient.
#[test]
fn cross_entropy_with_class_indices() {
    let host = interpreter_host();
    let logits = values(&[3, 4], 17, -2.0, 2.0);
    let target = Array::from_slice(&[2i64, 0, 3], &[3]).unwrap();
    let f = value_and_grad(Some(host.clone()), |x: &[Tensor]| {
        vec![x[0].cross_entropy(&x[1])]
    });
    let (loss, g) = f
        .call(&[logits.clone().with_requires_grad(true), target.clone()])
        .unwrap();
    // Reference computed here from the definition: mean over rows of logsumexp - logit[target].
    let l = logits.to_vec::<f64>().unwrap();
    let mut want = 0.0;
    let mut want_grad = vec![0.0; 12];
    for (r, &t) in [2usize, 0, 3].iter().enumerate() {
        let row = &l[r * 4..r * 4 + 4];
        let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
        want += (lse - row[t]) / 3.0;
        for c in 0..4 {
            want_grad[r * 4 + c] = ((row[c] - lse).exp() - if c == t { 1.0 } else { 0.0 }) / 3.0;
        }
    }
    assert!((loss[0].to_vec::<f64>().unwrap()[0] - want).abs() < 1e-12);
    for (a, b) in g[0].to_vec::<f64>().unwrap().iter().zip(&want_grad) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

/// Finite differences cannot see through an f32 rounding, so the convert rule is checked
/// exactly: the gradient of `sum(x.to(f32) * 3)` is 3 everywhere, returned in x's dtype.
#[test]
fn convert_element_type_returns_the_input_dtype() {
    // `grad` is `value_and_grad` without the values.
    let f = thunder_core::autograd::grad(Some(interpreter_host()), |x: &[Tensor]| {
        vec![(x[0].to_dtype(DType::F32) * 3.0).sum(None, false)]
    });
    let g = f
        .call(&[values(&[2, 2], 1, -1.0, 1.0).with_requires_grad(true)])
        .unwrap();
    assert_eq!(g[0].dtype(), DType::F64);
    assert_eq!(g[0].to_vec::<f64>().unwrap(), vec![3.0; 4]);
}

#[test]
fn grad_errors() {
    let host = interpreter_host();
    let f = value_and_grad(Some(host.clone()), |x: &[Tensor]| {
        vec![x[0].sum(None, false).to_dtype(DType::F64)]
    });
    let ints = Array::from_slice(&[1i64, 2], &[2])
        .unwrap()
        .with_requires_grad(true);
    let err = f.call(&[ints]).unwrap_err().to_string();
    assert!(
        err.contains("cannot differentiate with respect to input 0 (`x0`)") && err.contains("i64"),
        "{err}"
    );

    let non_scalar = value_and_grad(Some(host.clone()), |x: &[Tensor]| vec![x[0].exp()]);
    let err = non_scalar
        .call(&[values(&[2], 1, 0.0, 1.0).with_requires_grad(true)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("must be a floating-point scalar") && err.contains("[2]"),
        "{err}"
    );

    let none = value_and_grad(Some(host), |x: &[Tensor]| vec![x[0].sum(None, false)]);
    let err = none
        .call(&[values(&[2], 1, 0.0, 1.0)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("no input requires grad"), "{err}");
}

/// The forward saves exactly what the backward reads: every backward input is used.
#[test]
fn forward_saves_only_what_backward_reads() {
    let f = value_and_grad(Some(interpreter_host()), |x: &[Tensor]| {
        vec![x[0]
            .linear(&x[1], None)
            .relu()
            .log_softmax(1)
            .mean(None, false)]
    });
    let (out, grads) = f
        .call(&[
            values(&[4, 3], 1, -1.0, 1.0),
            values(&[5, 3], 2, -1.0, 1.0).with_requires_grad(true),
        ])
        .unwrap();
    assert_eq!((out.len(), grads.len()), (1, 1));
    let t = f.last_traces().unwrap();
    let bwd = t.backward.final_trace();
    for &input in &bwd.inputs {
        assert!(
            bwd.bsyms
                .iter()
                .any(|b| b.input_values().any(|v| v == input)),
            "backward input {} is never read",
            bwd.name(input)
        );
    }
    let fwd = t.forward.final_trace();
    assert_eq!(
        fwd.outputs.len(),
        1 + bwd.inputs.len(),
        "forward returns the loss and the saved values"
    );
}

/// pow at base 0: a^0 and 0^b (b >= 0) are constant there, so torch's gradients are 0, not the
/// NaN and -inf of the plain formulas.
#[test]
fn pow_gradient_at_zero_base_matches_torch() {
    let f = value_and_grad(Some(interpreter_host()), |x: &[Tensor]| {
        vec![x[0].pow(&x[1]).sum(None, false)]
    });
    let a = Array::from_slice(&[0.0f64, 0.0, 2.0], &[3])
        .unwrap()
        .with_requires_grad(true);
    let b = Array::from_slice(&[2.0f64, 0.0, 0.0], &[3])
        .unwrap()
        .with_requires_grad(true);
    let (_, g) = f.call(&[a, b]).unwrap();
    assert_eq!(g[0].to_vec::<f64>().unwrap(), vec![0.0, 0.0, 0.0]);
    assert_eq!(g[1].to_vec::<f64>().unwrap(), vec![0.0, 0.0, 2f64.ln()]);
    // A scalar exponent of 0, and a scalar base of 0 with exponents of both signs.
    let f = value_and_grad(
        Some(interpreter_host()),
        |x: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            let zero_base = thunder_torch::pow(0.0, &x[1])?;
            Ok(vec![(x[0].pow(0.0) + zero_base).sum(None, false)])
        },
    );
    let a = Array::from_slice(&[0.0f64, 3.0], &[2])
        .unwrap()
        .with_requires_grad(true);
    let b = Array::from_slice(&[2.0f64, 0.0], &[2])
        .unwrap()
        .with_requires_grad(true);
    let (_, g) = f.call(&[a, b]).unwrap();
    assert_eq!(g[0].to_vec::<f64>().unwrap(), vec![0.0, 0.0]);
    assert_eq!(g[1].to_vec::<f64>().unwrap(), vec![0.0, 0.0]);
}

/// Attention's forward under grad saves q, k, v, the output and the log-sum-exp, never an
/// L x S matrix: the backward recomputes the probabilities inside `ltorch.sdpa_bwd`.
#[test]
fn attention_saves_the_log_sum_exp_not_the_probabilities() {
    let (l, s) = (6, 7);
    let f = value_and_grad(Some(interpreter_host()), move |x: &[Tensor]| {
        vec![
            thunder_torch::scaled_dot_product_attention(&x[0], &x[1], &x[2], None, true, None)
                .and_then(|o| thunder_torch::sum(&o, None, false))
                .unwrap_or_else(|e| panic!("{e}")),
        ]
    });
    let input = |shape: &[i64], seed| values(shape, seed, -1.0, 1.0).with_requires_grad(true);
    f.call(&[
        input(&[2, l, 4], 41),
        input(&[2, s, 4], 42),
        input(&[2, s, 3], 43),
    ])
    .unwrap();
    let t = f.last_traces().unwrap();
    let bwd = t.backward.final_trace();
    let saved: Vec<Vec<i64>> = bwd
        .inputs
        .iter()
        .map(|&v| bwd.ty(v).shape.clone())
        .collect();
    assert!(
        saved.iter().all(|shape| !shape.ends_with(&[l, s])),
        "a saved value is L x S: {saved:?}"
    );
    assert!(
        saved.contains(&vec![2, l]),
        "the lse is not saved: {saved:?}"
    );
    let text = thunder_core::text::print_trace(bwd);
    assert!(text.contains("ltorch.sdpa_bwd"), "{text}");
}
