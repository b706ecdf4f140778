//! Gradients of the indexing, convolution, normalization, statistics and sorting ops, and of
//! every float row of the elementwise table, against central finite differences in f64 (the
//! harness is `thunder_tests::finite_differences`).

use std::sync::Arc;
use thunder_core::autograd::value_and_grad;
use thunder_core::{Array, Tensor};
use thunder_tests::finite_differences::{check, check_indexed, loss_fn, values, Op};
use thunder_tests::{interpreter_host, op};
use thunder_torch as ltorch;
use thunder_torch::prelude::*;

#[test]
fn products_extrema_statistics_scans_and_sorts() {
    let any = || values(&[3, 4], 21, -1.5, 1.5);
    check("prod dim", op!(|x| x[0].prod(Some(1), false)), vec![any()]);
    check(
        "prod all",
        op!(|x| x[0].prod(None, true)),
        vec![values(&[2, 3], 22, 0.5, 1.5)],
    );
    // Exactly one zero in row 0 and two in row 1: the cases `out / x` gets wrong.
    let zeros =
        Array::from_slice(&[1.5, 0.0, 2.0, 0.0, 0.0, 3.0, 1.0, -2.0, 0.5], &[3, 3]).unwrap();
    check(
        "prod with zeros",
        op!(|x| x[0].prod(Some(-1), false)),
        vec![zeros],
    );
    check("amin", op!(|x| x[0].amin(Some(&[0]), false)), vec![any()]);
    check(
        "max dim values",
        op!(|x| x[0].max_dim(1, true).0),
        vec![any()],
    );
    check(
        "min dim values",
        op!(|x| x[0].min_dim(0, false).0),
        vec![any()],
    );
    check("max", op!(|x| x[0].max()), vec![any()]);
    check(
        "var_mean (both outputs)",
        op!(|x| {
            let (var, mean) = x[0].var_mean(Some(&[1]), 1, false);
            &var + &(&mean * 3.0)
        }),
        vec![any()],
    );
    check(
        "var_mean correction 0, all dims",
        op!(|x| x[0].var_mean(None, 0, true).0),
        vec![any()],
    );
    check(
        "var_mean mean only",
        op!(|x| x[0].var_mean(Some(&[0]), 1, false).1),
        vec![any()],
    );
    check("cumsum", op!(|x| x[0].cumsum(1, None)), vec![any()]);
    check("cumsum dim 0", op!(|x| x[0].cumsum(-2, None)), vec![any()]);
    check(
        "topk values",
        op!(|x| x[0].topk(2, -1, true, true).0),
        vec![any()],
    );
    check(
        "topk smallest along dim 0",
        op!(|x| x[0].topk(2, 0, false, true).0),
        vec![any()],
    );
    check(
        "sort values",
        op!(|x| x[0].sort(1, false, true).0),
        vec![any()],
    );
    check(
        "sort descending dim 0",
        op!(|x| x[0].sort(0, true, false).0),
        vec![values(&[3, 2, 2], 23, -1.0, 1.0)],
    );
}

/// slice, pad (negative and interior too, through the prim's own rule), cat, stack, split,
/// chunk, narrow, flip, and the gathers and scatters with repeated indices.
#[test]
fn indexing_and_joining() {
    let a = || values(&[3, 4], 61, -1.5, 1.5);
    let b = || values(&[2, 4], 62, -1.5, 1.5);
    check(
        "slice",
        op!(|x| x[0].slice(1, Some(-3), None, 2)),
        vec![a()],
    );
    check("narrow", op!(|x| x[0].narrow(0, 1, 2)), vec![a()]);
    check("flip", op!(|x| x[0].flip(&[0, -1])), vec![a()]);
    check(
        "pad",
        op!(|x| ltorch::pad(&x[0], &[2, -1, 0, 1], 0.5).unwrap()),
        vec![a()],
    );
    check(
        "cat",
        op!(|x| ltorch::cat(&[x[0].clone(), x[1].clone(), x[0].clone()], 0).unwrap()),
        vec![a(), b()],
    );
    check(
        "stack",
        op!(|x| ltorch::stack(&[x[0].clone(), x[1].clone()], -1).unwrap()),
        vec![b(), values(&[2, 4], 63, -1.0, 1.0)],
    );
    // Every piece of split and chunk feeds the loss (weighted differently), so each piece's
    // gradient path is checked.
    check(
        "split",
        op!(|x| {
            let p = x[0].split(&[1, 0, 3][..], 1);
            ltorch::cat(&[p[2].clone(), &p[0] * 3.0], 1).unwrap()
        }),
        vec![a()],
    );
    check(
        "chunk",
        op!(|x| {
            let p = x[0].chunk(2, 0);
            &p[0] * &p[1].slice(0, Some(0), Some(1), 1)
        }),
        vec![values(&[3, 2], 64, -1.0, 1.0)],
    );
    // A piece with no cotangent (unused) gets zeros in the concatenated gradient.
    check(
        "split, a piece unused, negative dim",
        op!(|x| {
            let p = x[0].split(2, -1);
            &p[0] * &p[0]
        }),
        vec![a()],
    );
    check(
        "chunk of 3, the middle one unused",
        op!(|x| {
            let p = x[0].chunk(3, 0);
            ltorch::cat(&[&p[2] * 2.0, p[0].clone()], 0).unwrap()
        }),
        vec![a()],
    );
    let rows = Array::from_slice(&[2i64, 0, 2, 1], &[4]).unwrap();
    check_indexed(
        "index_select",
        op!(|x| x[0].index_select(0, &x[1])),
        vec![a()],
        vec![rows.clone()],
    );
    check_indexed(
        "embedding",
        op!(|x| ltorch::embedding(&x[1], &x[0], None).unwrap()),
        vec![a()],
        vec![rows.clone()],
    );
    check_indexed(
        "index_add",
        op!(|x| x[0].index_add(0, &x[2], &x[1], 2.0)),
        vec![a(), values(&[4, 4], 65, -1.0, 1.0)],
        vec![rows],
    );
    let cols = Array::from_slice(&[3i64, 0, 3, 1, 1, 1], &[3, 2]).unwrap();
    // src wider than the index: only its first two columns are scattered, the rest get zeros.
    check_indexed(
        "scatter_add (src larger than the index)",
        op!(|x| x[0].scatter_add(1, &x[2], &x[1])),
        vec![a(), values(&[3, 3], 68, -1.0, 1.0)],
        vec![cols.clone()],
    );
    check_indexed(
        "gather",
        op!(|x| x[0].gather(1, &x[1])),
        vec![a()],
        vec![cols.clone()],
    );
    check_indexed(
        "scatter_add",
        op!(|x| x[0].scatter_add(1, &x[2], &x[1])),
        vec![a(), values(&[3, 2], 66, -1.0, 1.0)],
        vec![cols],
    );
}

/// torch leaves the gradient of `padding_idx`'s row at zero, though the forward reads it.
#[test]
fn embedding_padding_idx_row_gets_no_gradient() {
    let host = interpreter_host();
    let weight = values(&[4, 3], 67, -1.0, 1.0);
    let idx = Array::from_slice(&[1i64, 3, 1, 0], &[4]).unwrap();
    let f = value_and_grad(Some(host), |x: &[Tensor]| {
        let e = ltorch::embedding(&x[1], &x[0], Some(-3)).unwrap();
        vec![e.sum(None, false)]
    });
    let (_, g) = f.call(&[weight.with_requires_grad(true), idx]).unwrap();
    // Row 1 (padding_idx -3 of 4) is read twice but gets nothing; rows 0 and 3 once each.
    let want = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0];
    assert_eq!(g[0].to_vec::<f64>().unwrap(), want);
}

#[test]
fn convolutions_and_pooling() {
    let conv1 = |stride: i64, padding: i64, dilation: i64, groups: i64| -> Op {
        Arc::new(move |x: &[Tensor]| {
            let r = ltorch::conv1d(
                &x[0],
                &x[1],
                Some(&x[2]),
                &[stride],
                &[padding],
                &[dilation],
                groups,
            );
            thunder_core::trace_ctx::sticky(r)
        })
    };
    let x = || values(&[2, 4, 7], 31, -1.0, 1.0);
    check(
        "conv1d",
        conv1(1, 0, 1, 1),
        vec![
            x(),
            values(&[3, 4, 3], 32, -1.0, 1.0),
            values(&[3], 33, -1.0, 1.0),
        ],
    );
    check(
        "conv1d stride 2 padding 1 groups 2",
        conv1(2, 1, 1, 2),
        vec![
            x(),
            values(&[6, 2, 3], 34, -1.0, 1.0),
            values(&[6], 35, -1.0, 1.0),
        ],
    );
    check(
        "conv1d dilation 2 stride 3 (dropped tail)",
        conv1(3, 2, 2, 4),
        vec![
            x(),
            values(&[4, 1, 2], 36, -1.0, 1.0),
            values(&[4], 37, -1.0, 1.0),
        ],
    );
    let conv2: Op = Arc::new(|x: &[Tensor]| {
        thunder_core::trace_ctx::sticky(ltorch::conv2d(
            &x[0],
            &x[1],
            None,
            &[2, 1],
            &[1, 0],
            &[1, 2],
            1,
        ))
    });
    check(
        "conv2d stride/padding/dilation per dim",
        conv2,
        vec![
            values(&[1, 2, 5, 6], 38, -1.0, 1.0),
            values(&[3, 2, 3, 2], 39, -1.0, 1.0),
        ],
    );
    let img = || values(&[1, 2, 5, 6], 40, -1.0, 1.0);
    check(
        "max_pool2d 3x3 stride 2 padding 1",
        op!(|x| thunder_core::trace_ctx::sticky(ltorch::max_pool2d(
            &x[0],
            &[3, 3],
            Some(&[2, 2]),
            &[1, 1],
            &[1, 1]
        ))),
        vec![img()],
    );
    check(
        "avg_pool2d padding not counted",
        op!(|x| thunder_core::trace_ctx::sticky(ltorch::avg_pool2d(
            &x[0],
            &[3, 2],
            Some(&[2, 1]),
            &[1, 1],
            false
        ))),
        vec![img()],
    );
    check(
        "adaptive_avg_pool2d",
        op!(|x| thunder_core::trace_ctx::sticky(ltorch::adaptive_avg_pool2d(&x[0], &[3, 4]))),
        vec![img()],
    );
}

#[test]
fn batch_and_group_norm() {
    let x = || values(&[4, 3, 5], 41, -1.5, 1.5);
    let per_c = |seed| values(&[3], seed, 0.5, 1.5);
    check(
        "batch_norm training (input, weight, bias)",
        op!(|x| {
            let r = ltorch::batch_norm(
                &x[0],
                Some(&x[3]),
                Some(&x[4]),
                Some(&x[1]),
                Some(&x[2]),
                true,
                0.1,
                1e-5,
            );
            thunder_core::trace_ctx::sticky(r.map(|r| r.output))
        }),
        vec![x(), per_c(42), per_c(43), per_c(44), per_c(45)],
    );
    check(
        "batch_norm eval",
        op!(|x| {
            let r = ltorch::batch_norm(
                &x[0],
                Some(&x[1]),
                Some(&x[2]),
                None,
                None,
                false,
                0.1,
                1e-5,
            );
            thunder_core::trace_ctx::sticky(r.map(|r| r.output))
        }),
        vec![x(), per_c(46), per_c(47)],
    );
    check(
        "batch_norm running-stat update",
        op!(|x| {
            let r =
                ltorch::batch_norm(&x[0], Some(&x[1]), Some(&x[2]), None, None, true, 0.3, 1e-5);
            thunder_core::trace_ctx::sticky(r.and_then(|r| {
                let (m, v) = (
                    r.running_mean.unwrap_or(r.output.clone()),
                    r.running_var.unwrap_or(r.output),
                );
                ltorch::add(&m, &v)
            }))
        }),
        vec![x(), per_c(48), per_c(49)],
    );
    check(
        "group_norm",
        op!(|x| thunder_core::trace_ctx::sticky(ltorch::group_norm(
            &x[0],
            2,
            Some(&x[1]),
            Some(&x[2]),
            1e-5
        ))),
        vec![
            values(&[2, 4, 3], 50, -1.5, 1.5),
            values(&[4], 51, 0.5, 1.5),
            values(&[4], 52, -1.0, 1.0),
        ],
    );
}

/// The pad and slice prims' own rules with what ltorch never emits: interior padding together
/// with negative low/high, and strides in every dim.
#[test]
fn pad_and_slice_prims_with_interior_negative_and_strides() {
    use thunder_core::ir::Arg;
    use thunder_core::prims::{prim1, Prim};
    let x = || values(&[3, 4], 69, -1.0, 1.0);
    check(
        "prims.pad interior + negative",
        op!(|x| prim1(
            Prim::Pad,
            vec![
                Arg::Value(x[0].value()),
                Arg::Float(0.5),
                Arg::Ints(vec![-1, 2, 1, 1, -2, 2]),
            ],
        )
        .unwrap()),
        vec![x()],
    );
    check(
        "prims.slice strided",
        op!(|x| prim1(
            Prim::Slice,
            vec![
                Arg::Value(x[0].value()),
                Arg::Ints(vec![1, 0]),
                Arg::Ints(vec![3, 4]),
                Arg::Ints(vec![2, 3]),
            ],
        )
        .unwrap()),
        vec![x()],
    );
}

#[test]
fn dropout_gradient_is_the_scaled_mask() {
    check(
        "dropout",
        op!(|x| thunder_core::trace_ctx::sticky(ltorch::dropout(&x[0], 0.4, true, 3, 0))),
        vec![values(&[4, 5], 60, -1.0, 1.0)],
    );
}

/// Every row of the elementwise table that is defined on floats, called as the prim itself,
/// on values inside the row's domain: a new elementwise prim has its VJP checked here with no
/// edit (its values come from the row too).
#[test]
fn every_float_prim_of_the_elementwise_table() {
    use thunder_abi::prims::{BinaryPrim, Domain, Prim, UnaryPrim};
    use thunder_core::ir::Arg;
    use thunder_core::prims::prim1;
    fn inside(domain: Domain, seed: u64) -> Array {
        let (lo, hi) = match domain {
            Domain::Any => (-1.5, 1.5),
            Domain::Pos | Domain::NonZero => (0.5, 2.0),
            Domain::Unit => (-0.9, 0.9),
            Domain::Ge1 => (1.2, 3.0),
            Domain::Small => (0.5, 2.5),
        };
        values(&[2, 3], seed, lo, hi)
    }
    fn call(p: Prim, xs: &[Tensor]) -> Tensor {
        let args = xs.iter().map(|x| Arg::Value(x.value())).collect();
        prim1(p, args).unwrap_or_else(|e| panic!("{}: {e}", p.id()))
    }
    // A row whose VJP refuses to differentiate (an error, never a wrong gradient) is listed
    // here; any other refusal fails the test.
    const WITHOUT_GRADIENT: &[&str] = &["prims.trigamma"];
    let mut rows: Vec<(Prim, Vec<Array>)> = UnaryPrim::ALL
        .iter()
        .map(|p| (p.prim(), vec![inside(p.rule().domain, 11)]))
        .collect();
    for p in BinaryPrim::ALL.iter().filter(|p| p.rule().supports_float()) {
        let (da, db) = p.rule().domain;
        rows.push((p.prim(), vec![inside(da, 12), inside(db, 13)]));
    }
    let mut checked = 0;
    for (prim, inputs) in rows {
        let op: Op = Arc::new(move |x: &[Tensor]| call(prim, x));
        let probe = value_and_grad(Some(interpreter_host()), loss_fn(op.clone(), inputs.len()));
        let mut args: Vec<Array> = inputs
            .iter()
            .map(|a| a.clone().with_requires_grad(true))
            .collect();
        args.push(values(&[2, 3], 99, -1.0, 1.0));
        if let Err(e) = probe.call(&args) {
            assert!(
                WITHOUT_GRADIENT.contains(&prim.id()),
                "{}: no gradient: {e}",
                prim.id()
            );
            continue;
        }
        check(prim.id(), op, inputs);
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} rows checked");
}

/// split's gradient is one concatenation of the pieces' cotangents, not a padded copy of each
/// piece summed (which wrote and read the input's size once per piece).
#[test]
fn split_gradient_is_a_concatenation() {
    let f = value_and_grad(Some(interpreter_host()), |x: &[Tensor]| {
        let p = x[0].split(4, 1);
        vec![ltorch::sum(&(&(&p[0] * &p[1]) + &p[2]), None, false).unwrap()]
    });
    f.call(&[values(&[2, 12], 66, -1.0, 1.0).with_requires_grad(true)])
        .unwrap();
    let t = f.last_traces().unwrap();
    let text = thunder_core::text::print_trace(t.backward.final_trace());
    assert!(text.contains("prims.cat"), "{text}");
    assert!(!text.contains("prims.pad"), "{text}");
}
