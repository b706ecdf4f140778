//! Cross-entropy's op pair under autograd: `cross_entropy` with class indices goes through
//! `ltorch.cross_entropy_lse`, whose VJP records `ltorch.cross_entropy_bwd`. Gradients against
//! central finite differences in f64 and a naive f64 loop; the backward reads no `[N, C]`
//! value but the logits.

use thunder_core::autograd::value_and_grad;
use thunder_core::trace_ctx::sticky;
use thunder_core::{Array, Tensor};
use thunder_tests::finite_differences::{check_indexed, values, Op};
use thunder_tests::{interpreter_host, op};

fn targets(t: &[i64]) -> Array {
    Array::from_slice(t, &[t.len() as i64]).unwrap()
}

#[test]
fn the_pair_matches_finite_differences() {
    // Ignored rows (-100 and an index inside the classes), one row, one class, i32 targets.
    for (name, shape, t, ignore) in [
        ("kept rows", [3, 4], vec![2i64, 0, 3], -100),
        ("ignored rows", [4, 5], vec![1, -100, 4, -100], -100),
        ("ignore_index 2", [4, 3], vec![0, 2, 2, 1], 2),
        ("one row", [1, 6], vec![5], -100),
        ("one class", [3, 1], vec![0, 0, 0], -100),
    ] {
        check_indexed(
            &format!("cross_entropy, {name}"),
            std::sync::Arc::new(move |x: &[Tensor]| {
                sticky(thunder_torch::cross_entropy_with(&x[0], &x[1], ignore, 0.0))
            }) as Op,
            vec![values(&shape, 51, -2.0, 2.0)],
            vec![targets(&t)],
        );
    }
    let t32 = Array::from_slice(&[1i32, 3, 0], &[3]).unwrap();
    check_indexed(
        "cross_entropy, i32 targets",
        op!(|x| sticky(thunder_torch::cross_entropy(&x[0], &x[1]))),
        vec![values(&[3, 4], 52, -2.0, 2.0)],
        vec![t32],
    );
    // Both outputs get a cotangent: the lse's own term (softmax) is checked too.
    check_indexed(
        "cross_entropy_lse, loss and lse",
        op!(|x| sticky(
            thunder_torch::cross_entropy_lse(&x[0], &x[1], -100).and_then(|(loss, lse)| {
                thunder_torch::add(&thunder_torch::mul(&lse, 0.7)?, &loss)
            })
        )),
        vec![values(&[3, 5], 53, -2.0, 2.0)],
        vec![targets(&[4, -100, 1])],
    );
}

/// Every row ignored: the loss is NaN (0 / 0, as torch) and the gradient 0 everywhere.
#[test]
fn all_rows_ignored_give_nan_loss_and_zero_gradient() {
    let f = value_and_grad(Some(interpreter_host()), |x: &[Tensor]| {
        vec![sticky(thunder_torch::cross_entropy_with(
            &x[0], &x[1], -1, 0.0,
        ))]
    });
    let (loss, g) = f
        .call(&[
            values(&[2, 3], 54, -1.0, 1.0).with_requires_grad(true),
            targets(&[-1, -1]),
        ])
        .unwrap();
    assert!(loss[0].to_vec::<f64>().unwrap()[0].is_nan());
    assert_eq!(g[0].to_vec::<f64>().unwrap(), vec![0.0; 6]);
}

/// The forward under grad keeps `cross_entropy_lse` whole and the backward reads the logits,
/// the targets and one float per row: no other `[N, C]` value is saved.
#[test]
fn the_backward_reads_logits_targets_and_lse_only() {
    let (n, c) = (6, 11);
    let f = value_and_grad(Some(interpreter_host()), |x: &[Tensor]| {
        vec![sticky(thunder_torch::cross_entropy(&x[0], &x[1]))]
    });
    let t: Vec<i64> = (0..n).map(|i| (i * 5) % c).collect();
    let (_, g) = f
        .call(&[
            values(&[n, c], 55, -3.0, 3.0).with_requires_grad(true),
            targets(&t),
        ])
        .unwrap();
    assert_eq!(g[0].shape(), [n, c]);
    let traces = f.last_traces().unwrap();
    let fwd = traces.forward.final_trace();
    let bwd = traces.backward.final_trace();
    let fwd_text = thunder_core::text::print_trace(fwd);
    assert!(fwd_text.contains("ltorch.cross_entropy_lse"), "{fwd_text}");
    let saved: Vec<(Vec<i64>, bool)> = bwd
        .inputs
        .iter()
        .map(|&v| (bwd.ty(v).shape.clone(), fwd.inputs.contains(&v)))
        .collect();
    let wide: Vec<&(Vec<i64>, bool)> = saved.iter().filter(|(s, _)| s == &[n, c]).collect();
    assert_eq!(wide.len(), 1, "saved: {saved:?}");
    assert!(
        saved.iter().any(|(s, _)| s == &[n]),
        "no per-row value saved: {saved:?}"
    );
    let text = thunder_core::text::print_trace(bwd);
    assert!(text.contains("ltorch.cross_entropy_bwd"), "{text}");
}

/// The gradient against a naive f64 loop, with an ignored row, through the two ops called
/// directly.
#[test]
fn cross_entropy_bwd_matches_a_naive_loop() {
    let logits = values(&[3, 4], 56, -2.0, 2.0);
    let t = [3i64, -100, 1];
    let f = value_and_grad(Some(interpreter_host()), |x: &[Tensor]| {
        vec![sticky(
            thunder_torch::cross_entropy_lse(&x[0], &x[1], -100).map(|(loss, _)| loss),
        )]
    });
    let (loss, g) = f
        .call(&[logits.clone().with_requires_grad(true), targets(&t)])
        .unwrap();
    let l = logits.to_vec::<f64>().unwrap();
    let (mut want, mut want_grad) = (0.0, vec![0.0; 12]);
    for (r, &tr) in t.iter().enumerate() {
        if tr < 0 {
            continue;
        }
        let row = &l[r * 4..r * 4 + 4];
        let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
        want += (lse - row[tr as usize]) / 2.0;
        for k in 0..4 {
            want_grad[r * 4 + k] = ((row[k] - lse).exp() - f64::from(k == tr as usize)) / 2.0;
        }
    }
    assert!((loss[0].to_vec::<f64>().unwrap()[0] - want).abs() < 1e-12);
    for (a, b) in g[0].to_vec::<f64>().unwrap().iter().zip(&want_grad) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}
