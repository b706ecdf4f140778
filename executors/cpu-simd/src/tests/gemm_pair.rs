//! Independent products run side by side (`gemm_pair.rs`): which products are paired (moved
//! up, moved down, or left where they are when a stage between them or a dependency forbids
//! it), and that every output still matches a naive f64 product.

use super::{assert_close, data, Tb};
use thunder_abi::{ArgView, DTypeCode::F32};

fn v(id: u32) -> ArgView {
    ArgView::Value(id)
}

/// `a[m, k] @ b[k, n]` in f64.
fn naive(a: &[f32], b: &[f32], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p] as f64;
            for j in 0..n {
                out[i * n + j] += x * b[p * n + j] as f64;
            }
        }
    }
    out
}

fn exp(x: &[f32]) -> Vec<f32> {
    x.iter().map(|v| v.exp()).collect()
}

const S: i64 = 256;
const SU: usize = S as usize;

/// The program's region: how many pairs it planned, then its outputs against `want`.
fn check(t: &Tb, inputs: &[(u32, Vec<f32>)], outs: &[u32], want: &[Vec<f64>], pairs: usize) {
    let ids: Vec<u32> = inputs.iter().map(|(id, _)| *id).collect();
    assert_eq!(t.compile(&ids, outs).gemm_pairs(), pairs, "pairs planned");
    let got = t.run(inputs, outs);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        // Sums of 256 products of values in [-e, e]: a few ulp of the largest partial sums.
        assert_close(g, w, 1e-4, 1e-4, &format!("output {k}"));
    }
}

#[test]
fn a_later_product_that_reads_nothing_between_moves_up() {
    let mut t = Tb::default();
    let sq = [S, S];
    let (x, w1, w2) = (t.value(F32, &sq), t.value(F32, &sq), t.value(F32, &sq));
    let p1 = t.op("matmul", vec![v(x), v(w1)], F32, &sq);
    let e = t.op("exp", vec![v(x)], F32, &sq);
    let p2 = t.op("matmul", vec![v(x), v(w2)], F32, &sq);
    let (xd, w1d, w2d) = (data(SU * SU, 1), data(SU * SU, 2), data(SU * SU, 3));
    let want = vec![
        naive(&xd, &w1d, (SU, SU, SU)),
        exp(&xd).iter().map(|&v| v as f64).collect(),
        naive(&xd, &w2d, (SU, SU, SU)),
    ];
    let inputs = [(x, xd), (w1, w1d), (w2, w2d)];
    check(&t, &inputs, &[p1, e, p2], &want, 1);
}

#[test]
fn an_earlier_product_moves_down_to_one_that_reads_the_stage_between() {
    let mut t = Tb::default();
    let sq = [S, S];
    let (x, w1, w2) = (t.value(F32, &sq), t.value(F32, &sq), t.value(F32, &sq));
    let p1 = t.op("matmul", vec![v(x), v(w1)], F32, &sq);
    let e = t.op("exp", vec![v(x)], F32, &sq);
    let p2 = t.op("matmul", vec![v(e), v(w2)], F32, &sq);
    let (xd, w1d, w2d) = (data(SU * SU, 4), data(SU * SU, 5), data(SU * SU, 6));
    let want = vec![
        naive(&xd, &w1d, (SU, SU, SU)),
        naive(&exp(&xd), &w2d, (SU, SU, SU)),
    ];
    let inputs = [(x, xd), (w1, w1d), (w2, w2d)];
    check(&t, &inputs, &[p1, p2], &want, 1);
}

#[test]
fn a_product_of_a_product_is_not_paired_with_it() {
    let mut t = Tb::default();
    let sq = [S, S];
    let (x, w1, w2) = (t.value(F32, &sq), t.value(F32, &sq), t.value(F32, &sq));
    let p1 = t.op("matmul", vec![v(x), v(w1)], F32, &sq);
    let p2 = t.op("matmul", vec![v(p1), v(w2)], F32, &sq);
    let (xd, w1d, w2d) = (data(SU * SU, 7), data(SU * SU, 8), data(SU * SU, 9));
    let first = naive(&xd, &w1d, (SU, SU, SU));
    let first32: Vec<f32> = first.iter().map(|&v| v as f32).collect();
    let want = [first, naive(&first32, &w2d, (SU, SU, SU))];
    let inputs = [(x, xd), (w1, w1d), (w2, w2d)];
    // The second product reads the first's rounded output: a looser bound.
    let ids: Vec<u32> = inputs.iter().map(|(id, _)| *id).collect();
    assert_eq!(t.compile(&ids, &[p1, p2]).gemm_pairs(), 0);
    let got = t.run(&inputs, &[p1, p2]);
    assert_close(&got[0], &want[0], 1e-4, 1e-4, "first product");
    assert_close(&got[1], &want[1], 1e-3, 1e-3, "second product");
}

#[test]
fn products_of_unequal_work_are_not_paired() {
    let mut t = Tb::default();
    let (x, w1) = (t.value(F32, &[S, S]), t.value(F32, &[S, S]));
    let (y, w2) = (t.value(F32, &[4 * S, S]), t.value(F32, &[S, S]));
    let p1 = t.op("matmul", vec![v(x), v(w1)], F32, &[S, S]);
    let p2 = t.op("matmul", vec![v(y), v(w2)], F32, &[4 * S, S]);
    let (xd, w1d) = (data(SU * SU, 10), data(SU * SU, 11));
    let (yd, w2d) = (data(4 * SU * SU, 12), data(SU * SU, 13));
    let want = vec![
        naive(&xd, &w1d, (SU, SU, SU)),
        naive(&yd, &w2d, (4 * SU, SU, SU)),
    ];
    let inputs = [(x, xd), (w1, w1d), (y, yd), (w2, w2d)];
    check(&t, &inputs, &[p1, p2], &want, 0);
}

#[test]
fn products_of_the_sizes_below_the_threshold_are_not_paired() {
    let mut t = Tb::default();
    let sq = [128, 128];
    let (x, w1, w2) = (t.value(F32, &sq), t.value(F32, &sq), t.value(F32, &sq));
    let p1 = t.op("matmul", vec![v(x), v(w1)], F32, &sq);
    let p2 = t.op("matmul", vec![v(x), v(w2)], F32, &sq);
    let (xd, w1d, w2d) = (
        data(128 * 128, 14),
        data(128 * 128, 15),
        data(128 * 128, 16),
    );
    let want = vec![
        naive(&xd, &w1d, (128, 128, 128)),
        naive(&xd, &w2d, (128, 128, 128)),
    ];
    let inputs = [(x, xd), (w1, w1d), (w2, w2d)];
    check(&t, &inputs, &[p1, p2], &want, 0);
}

/// One fused group between the products reads the first's output and writes the second's
/// input: neither may move past it, though the two products share no buffer.
#[test]
fn a_group_that_reads_one_and_feeds_the_other_keeps_both_in_place() {
    let mut t = Tb::default();
    let sq = [S, S];
    let (x, w1, w2) = (t.value(F32, &sq), t.value(F32, &sq), t.value(F32, &sq));
    let p1 = t.op("matmul", vec![v(x), v(w1)], F32, &sq);
    let d = t.op("add", vec![v(p1), v(x)], F32, &sq);
    let e = t.op("exp", vec![v(x)], F32, &sq);
    let p2 = t.op("matmul", vec![v(e), v(w2)], F32, &sq);
    let (xd, w1d, w2d) = (data(SU * SU, 17), data(SU * SU, 18), data(SU * SU, 19));
    let first = naive(&xd, &w1d, (SU, SU, SU));
    let sum: Vec<f64> = first.iter().zip(&xd).map(|(a, &b)| a + b as f64).collect();
    let want = [sum, naive(&exp(&xd), &w2d, (SU, SU, SU))];
    let inputs = [(x, xd), (w1, w1d), (w2, w2d)];
    let ids: Vec<u32> = inputs.iter().map(|(id, _)| *id).collect();
    let region = t.compile(&ids, &[d, p2]);
    // With `d` and `e` in one group the products stay apart; in two, `e`'s group may come
    // first and the products pair. Either way the outputs must hold.
    let (_, groups) = region.stage_counts();
    if groups == 1 {
        assert_eq!(region.gemm_pairs(), 0, "one group between: no pair");
    }
    let got = t.run(&inputs, &[d, p2]);
    assert_close(&got[0], &want[0], 1e-4, 1e-4, "p1 + x");
    assert_close(&got[1], &want[1], 1e-4, 1e-4, "exp(x) @ w2");
}
