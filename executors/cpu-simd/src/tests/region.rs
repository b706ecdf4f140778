//! Regions compiled and run end to end against naive f64 references: GEMM on odd sizes
//! (including 0 and 1), transposed and batched operands, and fused loops large enough to take
//! the threaded path.

use super::{assert_close, data, ints, Tb};
use thunder_abi::{ArgView, DTypeCode::F32};

fn naive_matmul(a: &[f32], b: &[f32], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
    let mut out = vec![0.0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                out[i * n + j] += a[i * k + p] as f64 * b[p * n + j] as f64;
            }
        }
    }
    out
}

const SIZES: &[(usize, usize, usize)] = &[
    (0, 3, 2),
    (2, 0, 3),
    (2, 3, 0),
    (1, 1, 1),
    (1, 7, 1),
    (5, 1, 9),
    (17, 33, 9),
    (64, 65, 63),
    (130, 70, 129),
];

#[test]
fn gemm_matches_naive_on_odd_sizes() {
    for &(m, k, n) in SIZES {
        let mut t = Tb::default();
        let (a, b) = (
            t.value(F32, &[m as i64, k as i64]),
            t.value(F32, &[k as i64, n as i64]),
        );
        let c = t.op(
            "matmul",
            vec![ArgView::Value(a), ArgView::Value(b)],
            F32,
            &[m as i64, n as i64],
        );
        let (da, db) = (data(m * k, 1), data(k * n, 2));
        let got = t.run(&[(a, da.clone()), (b, db.clone())], &[c]);
        assert_close(
            &got[0],
            &naive_matmul(&da, &db, (m, k, n)),
            1e-5,
            1e-5,
            &format!("{m}x{k}x{n}"),
        );
    }
}

#[test]
fn gemm_reads_a_transposed_weight_without_a_copy() {
    for &(m, k, n) in SIZES {
        let mut t = Tb::default();
        let x = t.value(F32, &[m as i64, k as i64]);
        let w = t.value(F32, &[n as i64, k as i64]);
        let wt = t.op(
            "transpose",
            vec![ArgView::Value(w), ints(&[1, 0])],
            F32,
            &[k as i64, n as i64],
        );
        let y = t.op(
            "matmul",
            vec![ArgView::Value(x), ArgView::Value(wt)],
            F32,
            &[m as i64, n as i64],
        );
        let (dx, dw) = (data(m * k, 3), data(n * k, 4));
        let got = t.run(&[(x, dx.clone()), (w, dw.clone())], &[y]);
        let mut wt_data = vec![0.0f32; k * n];
        for i in 0..n {
            for p in 0..k {
                wt_data[p * n + i] = dw[i * k + p];
            }
        }
        assert_close(
            &got[0],
            &naive_matmul(&dx, &wt_data, (m, k, n)),
            1e-5,
            1e-5,
            &format!("{m}x{k}x{n}"),
        );
    }
}

#[test]
fn batched_gemm() {
    let (bt, m, k, n) = (3usize, 4usize, 5usize, 6usize);
    let mut t = Tb::default();
    let a = t.value(F32, &[bt as i64, m as i64, k as i64]);
    let b = t.value(F32, &[bt as i64, k as i64, n as i64]);
    let c = t.op(
        "matmul",
        vec![ArgView::Value(a), ArgView::Value(b)],
        F32,
        &[bt as i64, m as i64, n as i64],
    );
    let (da, db) = (data(bt * m * k, 5), data(bt * k * n, 6));
    let got = t.run(&[(a, da.clone()), (b, db.clone())], &[c]);
    let want: Vec<f64> = (0..bt)
        .flat_map(|i| {
            naive_matmul(
                &da[i * m * k..][..m * k],
                &db[i * k * n..][..k * n],
                (m, k, n),
            )
        })
        .collect();
    assert_close(&got[0], &want, 1e-5, 1e-5, "batched");
}

/// softmax over rows, as ltorch decomposes it: amax, reshape, broadcast, sub, exp, sum, div.
#[test]
fn fused_softmax_rows_on_threads() {
    let (r, c) = (300i64, 1000i64);
    let mut t = Tb::default();
    let x = t.value(F32, &[r, c]);
    let m = t.op("amax", vec![ArgView::Value(x), ints(&[1])], F32, &[r]);
    let m1 = t.op(
        "reshape",
        vec![ArgView::Value(m), ints(&[r, 1])],
        F32,
        &[r, 1],
    );
    let mb = t.op(
        "broadcast_in_dim",
        vec![ArgView::Value(m1), ints(&[r, c]), ints(&[0, 1])],
        F32,
        &[r, c],
    );
    let d = t.op(
        "sub",
        vec![ArgView::Value(x), ArgView::Value(mb)],
        F32,
        &[r, c],
    );
    let e = t.op("exp", vec![ArgView::Value(d)], F32, &[r, c]);
    let s = t.op("sum", vec![ArgView::Value(e), ints(&[1])], F32, &[r]);
    let s1 = t.op(
        "reshape",
        vec![ArgView::Value(s), ints(&[r, 1])],
        F32,
        &[r, 1],
    );
    let sb = t.op(
        "broadcast_in_dim",
        vec![ArgView::Value(s1), ints(&[r, c]), ints(&[0, 1])],
        F32,
        &[r, c],
    );
    let y = t.op(
        "div",
        vec![ArgView::Value(e), ArgView::Value(sb)],
        F32,
        &[r, c],
    );
    let dx: Vec<f32> = data((r * c) as usize, 7).iter().map(|v| v * 10.0).collect();
    let got = t.run(&[(x, dx.clone())], &[y, s]);
    let mut want = Vec::new();
    let mut sums = Vec::new();
    for row in dx.chunks(c as usize) {
        let mx = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
        let ex: Vec<f64> = row
            .iter()
            .map(|&v| ((v as f64 - mx) as f32 as f64).exp())
            .collect();
        let sum: f64 = ex.iter().sum();
        sums.push(sum);
        want.extend(ex.iter().map(|v| v / sum));
    }
    assert_close(&got[0], &want, 1e-5, 1e-7, "softmax");
    assert_close(&got[1], &sums, 1e-5, 0.0, "row sums");
}

#[test]
fn column_and_total_sums() {
    let (r, c) = (3000i64, 50i64);
    let mut t = Tb::default();
    let x = t.value(F32, &[r, c]);
    let cols = t.op("sum", vec![ArgView::Value(x), ints(&[0])], F32, &[c]);
    let all = t.op("sum", vec![ArgView::Value(x), ints(&[0, 1])], F32, &[]);
    let dx = data((r * c) as usize, 8);
    let got = t.run(&[(x, dx.clone())], &[cols, all]);
    let want_cols: Vec<f64> = (0..c as usize)
        .map(|j| (0..r as usize).map(|i| dx[i * c as usize + j] as f64).sum())
        .collect();
    let want_all: f64 = dx.iter().map(|&v| v as f64).sum();
    assert_close(&got[0], &want_cols, 1e-6, 1e-6, "column sums");
    assert_close(&got[1], &[want_all], 1e-6, 1e-6, "total");
}

/// A fused loop with a fold over its rows (a bias gradient: column sums) beside a fold along
/// them (row maxima), large enough that its rows are split between threads, each folding into
/// accumulators of its own: against f64 loops, on an odd row count.
#[test]
fn column_sums_fused_with_row_maxima_split_between_threads() {
    let (r, c) = (517i64, 301i64);
    let mut t = Tb::default();
    let x = t.value(F32, &[r, c]);
    let y = t.value(F32, &[r, c]);
    let p = t.op(
        "mul",
        vec![ArgView::Value(x), ArgView::Value(y)],
        F32,
        &[r, c],
    );
    let cols = t.op("sum", vec![ArgView::Value(p), ints(&[0])], F32, &[c]);
    let rows = t.op("amax", vec![ArgView::Value(p), ints(&[1])], F32, &[r]);
    let (dx, dy) = (data((r * c) as usize, 11), data((r * c) as usize, 12));
    let got = t.run(&[(x, dx.clone()), (y, dy.clone())], &[p, cols, rows]);
    let (r, c) = (r as usize, c as usize);
    let prod: Vec<f64> = dx.iter().zip(&dy).map(|(&a, &b)| (a * b) as f64).collect();
    let want_cols: Vec<f64> = (0..c)
        .map(|j| (0..r).map(|i| prod[i * c + j]).sum())
        .collect();
    let want_rows: Vec<f64> = (0..r)
        .map(|i| {
            prod[i * c..(i + 1) * c]
                .iter()
                .copied()
                .fold(f64::MIN, f64::max)
        })
        .collect();
    assert_close(&got[0], &prod, 0.0, 0.0, "products");
    assert_close(&got[1], &want_cols, 1e-6, 1e-6, "column sums");
    assert_close(&got[2], &want_rows, 0.0, 0.0, "row maxima");
}

/// Row sums and maxima over short rows (a loss over 11 classes), which run many rows per tile
/// with an accumulator per row, on threads, with a last tile of fewer rows: against f64 loops.
#[test]
fn short_row_reductions_many_rows_per_tile() {
    let (r, c) = (13001i64, 11i64);
    let mut t = Tb::default();
    let x = t.value(F32, &[r, c]);
    let y = t.value(F32, &[r, c]);
    let p = t.op(
        "mul",
        vec![ArgView::Value(x), ArgView::Value(y)],
        F32,
        &[r, c],
    );
    let sums = t.op("sum", vec![ArgView::Value(p), ints(&[1])], F32, &[r]);
    let maxs = t.op("amax", vec![ArgView::Value(p), ints(&[1])], F32, &[r]);
    let (dx, dy) = (data((r * c) as usize, 13), data((r * c) as usize, 14));
    let got = t.run(&[(x, dx.clone()), (y, dy.clone())], &[p, sums, maxs]);
    let c = c as usize;
    let prod: Vec<f64> = dx.iter().zip(&dy).map(|(&a, &b)| (a * b) as f64).collect();
    let rows = || prod.chunks(c);
    let want_sums: Vec<f64> = rows().map(|row| row.iter().sum()).collect();
    let want_maxs: Vec<f64> = rows()
        .map(|row| row.iter().copied().fold(f64::MIN, f64::max))
        .collect();
    assert_close(&got[0], &prod, 0.0, 0.0, "products");
    assert_close(&got[1], &want_sums, 1e-6, 1e-6, "row sums");
    assert_close(&got[2], &want_maxs, 0.0, 0.0, "row maxima");
}

/// A bias broadcast, a tanh chain and a comparison mask over an odd-sized tensor that takes
/// the threaded path and ends in a partial tile.
#[test]
fn fused_elementwise_with_broadcast_and_mask() {
    let (r, c) = (97i64, 1031i64);
    let mut t = Tb::default();
    let x = t.value(F32, &[r, c]);
    let b = t.value(F32, &[c]);
    let bb = t.op(
        "broadcast_in_dim",
        vec![ArgView::Value(b), ints(&[r, c]), ints(&[1])],
        F32,
        &[r, c],
    );
    let s = t.op(
        "add",
        vec![ArgView::Value(x), ArgView::Value(bb)],
        F32,
        &[r, c],
    );
    let m = t.op(
        "mul",
        vec![ArgView::Value(s), ArgView::Float(1.01)],
        F32,
        &[r, c],
    );
    let h = t.op("tanh", vec![ArgView::Value(m)], F32, &[r, c]);
    let pos = t.op(
        "gt",
        vec![ArgView::Value(h), ArgView::Float(0.0)],
        thunder_abi::DTypeCode::Bool,
        &[r, c],
    );
    let y = t.op(
        "where",
        vec![ArgView::Value(pos), ArgView::Value(h), ArgView::Float(0.5)],
        F32,
        &[r, c],
    );
    let (dx, db) = (data((r * c) as usize, 9), data(c as usize, 10));
    let got = t.run(&[(x, dx.clone()), (b, db.clone())], &[y]);
    let want: Vec<f64> = dx
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let s = (v + db[i % c as usize]) as f64;
            let h = ((s * 1.01) as f32 as f64).tanh();
            if h > 0.0 {
                h
            } else {
                0.5
            }
        })
        .collect();
    assert_close(&got[0], &want, 4e-7, 1e-7, "bias + tanh + where");
}

#[test]
fn claims_what_it_compiles_and_nothing_else() {
    let mut t = Tb::default();
    let x = t.value(F32, &[4]);
    let i = t.value(thunder_abi::DTypeCode::I32, &[4]);
    t.op("exp", vec![ArgView::Value(x)], F32, &[4]);
    // i32 arithmetic is left to the interpreter.
    t.op(
        "add",
        vec![ArgView::Value(i), ArgView::Value(i)],
        thunder_abi::DTypeCode::I32,
        &[4],
    );
    t.op("neg", vec![ArgView::Value(x)], F32, &[4]);
    let view = t.view(&[x, i], &[]);
    let exec = crate::CpuSimd::create(super::services(), &[]).expect("create");
    let claims = thunder_abi::export::Executor::claim(&exec, &view).expect("claim");
    assert_eq!(claims, vec![vec![0], vec![2]]);
}

/// A chain of ops with literals (the register-resident path of `chain.rs`) with an
/// intermediate output, on sizes with a partial block, one tile, threads and streaming
/// stores: bit for bit f32 arithmetic, as the tile path computes it.
#[test]
fn literal_chain_is_exact_f32_arithmetic() {
    for n in [1usize, 63, 65, 4097, 300_007, (1 << 20) + 9] {
        let mut t = Tb::default();
        let x = t.value(F32, &[n as i64]);
        let mut cur = x;
        let mut mid = x;
        let steps: [(&str, bool, f64); 7] = [
            ("mul", false, 1.01),
            ("add", false, 0.1),
            ("sub", true, 2.0),
            ("neg", false, 0.0),
            ("div", false, 3.0),
            ("abs", false, 0.0),
            ("mul", true, -0.7),
        ];
        for (k, &(op, first, c)) in steps.iter().enumerate() {
            let args = match (op, first) {
                ("neg" | "abs", _) => vec![ArgView::Value(cur)],
                (_, true) => vec![ArgView::Float(c), ArgView::Value(cur)],
                (_, false) => vec![ArgView::Value(cur), ArgView::Float(c)],
            };
            cur = t.op(op, args, F32, &[n as i64]);
            if k == 3 {
                mid = cur;
            }
        }
        let dx = data(n, 11);
        let got = t.run(&[(x, dx.clone())], &[mid, cur]);
        for (i, &v) in dx.iter().enumerate() {
            let a = -(2.0f32 - (v * 1.01f32 + 0.1f32));
            let b = -0.7f32 * (a / 3.0f32).abs();
            assert_eq!(got[0][i].to_bits(), a.to_bits(), "n {n} mid at {i}");
            assert_eq!(got[1][i].to_bits(), b.to_bits(), "n {n} out at {i}");
        }
    }
}
