//! A batched product summed over its batch dims, run as one GEMM (folded into `k`) or as
//! per-batch products added into one output, against a naive f64 sum of products.

use super::{assert_close, data, ints, Tb};
use thunder_abi::{ArgView, DTypeCode::F32};

/// `sum(matmul(transpose(x) or x, g), batch dims)` for `x: [batch.., t, c]` (transposed to
/// `[batch.., c, t]`) or `x: [batch.., c, t]` as given, and `g: [batch.., t, n]`.
fn case(batch: &[i64], (c, t, n): (i64, i64, i64), transpose: bool) {
    let mut tb = Tb::default();
    let with = |a: i64, b: i64| {
        let mut s = batch.to_vec();
        s.extend([a, b]);
        s
    };
    let r = batch.len() + 2;
    let x = tb.value(F32, &if transpose { with(t, c) } else { with(c, t) });
    let g = tb.value(F32, &with(t, n));
    let a = if transpose {
        let mut perm: Vec<i64> = (0..r as i64).collect();
        perm.swap(r - 2, r - 1);
        tb.op(
            "transpose",
            vec![ArgView::Value(x), ints(&perm)],
            F32,
            &with(c, t),
        )
    } else {
        x
    };
    let mm = tb.op(
        "matmul",
        vec![ArgView::Value(a), ArgView::Value(g)],
        F32,
        &with(c, n),
    );
    let dims: Vec<i64> = (0..batch.len() as i64).collect();
    let s = tb.op("sum", vec![ArgView::Value(mm), ints(&dims)], F32, &[c, n]);
    let nb = batch.iter().product::<i64>() as usize;
    let (c, t, n) = (c as usize, t as usize, n as usize);
    let (dx, dg) = (data(nb * c * t, 5), data(nb * t * n, 6));
    let got = tb.run(&[(x, dx.clone()), (g, dg.clone())], &[s]);
    let mut want = vec![0.0f64; c * n];
    for b in 0..nb {
        for i in 0..c {
            for p in 0..t {
                let xv = if transpose {
                    dx[(b * t + p) * c + i]
                } else {
                    dx[(b * c + i) * t + p]
                } as f64;
                for j in 0..n {
                    want[i * n + j] += xv * dg[(b * t + p) * n + j] as f64;
                }
            }
        }
    }
    let what = format!("batch {batch:?} c {c} t {t} n {n} transpose {transpose}");
    assert_close(&got[0], &want, 1e-5, 1e-5, &what);
}

#[test]
fn summed_batches_fold_into_one_gemm() {
    // xᵀ g over (batch, t): the weight gradient of a linear layer, folded into k.
    case(&[3], (5, 7, 6), true);
    case(&[2, 3], (4, 9, 5), true);
    case(&[2], (64, 70, 33), true);
}

#[test]
fn summed_batches_that_do_not_fold_are_added_up() {
    // x as given: its batch stride is not k's extent times k's stride.
    case(&[3], (5, 7, 6), false);
    case(&[2, 2], (3, 4, 5), false);
    // Nothing to sum: zeros; and a single batch.
    case(&[0], (3, 4, 5), true);
    case(&[1], (3, 4, 5), false);
}
