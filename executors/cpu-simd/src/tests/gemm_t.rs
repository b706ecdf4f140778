//! Products read only by a transpose of their last two dims, computed transposed into the
//! transpose's output (one GEMM stage, no copy), against naive f64 products: 2-D, batched, a
//! weight gradient summed over its batch, and a product read elsewhere too (left as it was).

use super::{assert_close, data, ints, Tb};
use crate::region::Region;
use thunder_abi::{ArgView, DTypeCode::F32, RegionSpec};

fn v(id: u32) -> ArgView {
    ArgView::Value(id)
}

fn with(batch: &[i64], a: i64, b: i64) -> Vec<i64> {
    let mut s = batch.to_vec();
    s.extend([a, b]);
    s
}

fn swap_last(r: usize) -> ArgView {
    let mut perm: Vec<i64> = (0..r as i64).collect();
    perm.swap(r - 2, r - 1);
    ints(&perm)
}

/// `[nb, m, k] @ [nb, k, n]` in f64, transposed to `[nb, n, m]` (summed over nb when `sum`).
fn naive_t(
    a: &[f32],
    b: &[f32],
    (nb, m, k, n): (usize, usize, usize, usize),
    sum: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; if sum { n * m } else { nb * n * m }];
    for bi in 0..nb {
        let o = if sum { 0 } else { bi * n * m };
        for i in 0..m {
            for j in 0..n {
                out[o + j * m + i] += (0..k)
                    .map(|p| a[bi * m * k + i * k + p] as f64 * b[bi * k * n + p * n + j] as f64)
                    .sum::<f64>();
            }
        }
    }
    out
}

/// `transpose(matmul(a, b))`, or `transpose(sum(matmul(a, b), batch))` when `sum`; with
/// `also` the product is a region output too (so it must not run transposed).
fn check(batch: &[i64], (m, k, n): (i64, i64, i64), sum: bool, also: bool) {
    let what = format!("batch {batch:?} m {m} k {k} n {n} sum {sum} also {also}");
    let r = batch.len() + 2;
    let mut t = Tb::default();
    let a = t.value(F32, &with(batch, m, k));
    let b = t.value(F32, &with(batch, k, n));
    let p = t.op("matmul", vec![v(a), v(b)], F32, &with(batch, m, n));
    let (src, out_batch): (u32, &[i64]) = if sum {
        let dims: Vec<i64> = (0..batch.len() as i64).collect();
        (t.op("sum", vec![v(p), ints(&dims)], F32, &[m, n]), &[])
    } else {
        (p, batch)
    };
    let rr = if sum { 2 } else { r };
    let tr = t.op(
        "transpose",
        vec![v(src), swap_last(rr)],
        F32,
        &with(out_batch, n, m),
    );
    let outputs = if also { vec![tr, p] } else { vec![tr] };
    let view = t.view(&[a, b], &outputs);
    let spec = RegionSpec {
        ops: (0..view.ops.len() as u32).collect(),
        inputs: vec![a, b].into(),
        outputs: outputs.clone().into(),
    };
    let region = Region::compile(&view, &spec, super::services(), &[]).expect("compile");
    if !also {
        assert_eq!(region.stage_counts(), (1, 0), "{what}: one GEMM, no copy");
    }
    let nb = batch.iter().product::<i64>() as usize;
    let (m, k, n) = (m as usize, k as usize, n as usize);
    let (da, db) = (data(nb * m * k, 1), data(nb * k * n, 2));
    let got = t.run(&[(a, da.clone()), (b, db.clone())], &outputs);
    let want = naive_t(&da, &db, (nb, m, k, n), sum);
    assert_close(&got[0], &want, 1e-5, 1e-5, &what);
}

#[test]
fn transposed_products_match_naive() {
    check(&[], (17, 33, 9), false, false);
    check(&[], (1, 5, 1), false, false);
    check(&[3], (8, 4, 12), false, false);
    check(&[2, 2], (5, 7, 3), false, false);
    // Weight gradients: summed over the batch, then transposed.
    check(&[2], (64, 130, 96), true, false);
    check(&[2, 3], (9, 5, 7), true, false);
    check(&[], (256, 300, 130), false, false);
    // The product is needed as it is too: computed once, then transposed.
    check(&[2], (6, 4, 5), false, true);
}

/// A region output that reshapes a product only it reads (a model's `[B*T, vocab]` logits
/// returned as `[B, T, vocab]`): the product is computed into the output's buffer, one GEMM
/// stage and no copy; read by anything else too, the product keeps its own buffer.
#[test]
fn a_reshaped_product_output_is_written_in_place() {
    for also_summed in [false, true] {
        let mut t = Tb::default();
        let (m, k, n) = (6i64, 5i64, 7i64);
        let a = t.value(F32, &[m, k]);
        let b = t.value(F32, &[k, n]);
        let p = t.op("matmul", vec![v(a), v(b)], F32, &[m, n]);
        let out = t.op("reshape", vec![v(p), ints(&[2, 3, n])], F32, &[2, 3, n]);
        let mut outputs = vec![out];
        if also_summed {
            outputs.push(t.op("sum", vec![v(p), ints(&[0])], F32, &[n]));
        }
        let view = t.view(&[a, b], &outputs);
        let spec = RegionSpec {
            ops: (0..view.ops.len() as u32).collect(),
            inputs: vec![a, b].into(),
            outputs: outputs.clone().into(),
        };
        let region = Region::compile(&view, &spec, super::services(), &[]).expect("compile");
        if !also_summed {
            assert_eq!(region.stage_counts(), (1, 0), "one GEMM, no copy");
        }
        let (ad, bd) = (data((m * k) as usize, 1), data((k * n) as usize, 2));
        let got = t.run(&[(a, ad.clone()), (b, bd.clone())], &outputs);
        let want = naive_t(&ad, &bd, (1, m as usize, k as usize, n as usize), false);
        // `naive_t` gives the product transposed: read it back row-major.
        let want: Vec<f64> = (0..(m * n) as usize)
            .map(|e| want[(e % n as usize) * m as usize + e / n as usize])
            .collect();
        assert_close(&got[0], &want, 1e-5, 1e-6, "reshaped product");
        if also_summed {
            let sums: Vec<f64> = (0..n as usize)
                .map(|j| (0..m as usize).map(|i| want[i * n as usize + j]).sum())
                .collect();
            assert_close(&got[1], &sums, 1e-5, 1e-5, "its column sums");
        }
    }
}
