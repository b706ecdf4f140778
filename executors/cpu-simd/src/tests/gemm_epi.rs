//! A product's bias add and ReLU run as its epilogue (`gemm_epi.rs`): one GEMM stage and no
//! fused loop, and bit for bit the results of the product followed by the separate ops.

use super::{data, ints, services, Tb};
use crate::region::Region;
use thunder_abi::{ArgView, DTypeCode::F32, RegionSpec};

struct Linear {
    t: Tb,
    x: u32,
    w: u32,
    b: u32,
    /// `x @ transpose(w)`.
    mm: u32,
    /// `mm + broadcast(b)`.
    h: u32,
    /// `maximum(h, 0.0)`.
    r: u32,
}

/// `relu(linear(x, w, b))` on `x: [batch.., m, k]`, `w: [n, k]`, `b: [n]`.
fn linear(batch: &[i64], (m, k, n): (i64, i64, i64)) -> Linear {
    let mut t = Tb::default();
    let with = |a: i64, b: i64| {
        let mut s = batch.to_vec();
        s.extend([a, b]);
        s
    };
    let r = batch.len() + 2;
    let x = t.value(F32, &with(m, k));
    let w = t.value(F32, &[n, k]);
    let b = t.value(F32, &[n]);
    let wt = t.op(
        "transpose",
        vec![ArgView::Value(w), ints(&[1, 0])],
        F32,
        &[k, n],
    );
    let wb = if batch.is_empty() {
        wt
    } else {
        let dims: Vec<i64> = (r as i64 - 2..r as i64).collect();
        t.op(
            "broadcast_in_dim",
            vec![ArgView::Value(wt), ints(&with(k, n)), ints(&dims)],
            F32,
            &with(k, n),
        )
    };
    let mm = t.op(
        "matmul",
        vec![ArgView::Value(x), ArgView::Value(wb)],
        F32,
        &with(m, n),
    );
    let bb = t.op(
        "broadcast_in_dim",
        vec![ArgView::Value(b), ints(&with(m, n)), ints(&[r as i64 - 1])],
        F32,
        &with(m, n),
    );
    let h = t.op(
        "add",
        vec![ArgView::Value(mm), ArgView::Value(bb)],
        F32,
        &with(m, n),
    );
    let relu = t.op(
        "maximum",
        vec![ArgView::Value(h), ArgView::Float(0.0)],
        F32,
        &with(m, n),
    );
    Linear {
        t,
        x,
        w,
        b,
        mm,
        h,
        r: relu,
    }
}

fn stage_counts(l: &Linear, outputs: &[u32]) -> (usize, usize) {
    let inputs = [l.x, l.w, l.b];
    let spec = RegionSpec {
        ops: (0..l.t.view(&inputs, outputs).ops.len() as u32).collect(),
        inputs: inputs.to_vec().into(),
        outputs: outputs.to_vec().into(),
    };
    Region::compile(&l.t.view(&inputs, outputs), &spec, services())
        .expect("compile")
        .stage_counts()
}

/// Checks the fused outputs against the plain product's, with the bias and ReLU applied here.
fn check(batch: &[i64], (m, k, n): (i64, i64, i64)) {
    let l = linear(batch, (m, k, n));
    let rows = batch.iter().product::<i64>() as usize * m as usize;
    let (k, n) = (k as usize, n as usize);
    let mut dx = data(rows * k, 11);
    // A NaN row: the ReLU keeps NaN, as prims.maximum does.
    dx[0] = f32::NAN;
    let (dw, db) = (data(n * k, 12), data(n, 13));
    let inputs = [(l.x, dx), (l.w, dw), (l.b, db.clone())];
    let plain = l.t.run(&inputs, &[l.mm]).remove(0);
    let bias: Vec<f32> = plain
        .iter()
        .enumerate()
        .map(|(i, &v)| v + db[i % n])
        .collect();
    let relu: Vec<f32> = bias
        .iter()
        .map(|&v| if v <= 0.0 { 0.0 } else { v })
        .collect();
    let what = format!("batch {batch:?} m {m} k {k} n {n}");
    let same = |got: &[f32], want: &[f32], which: &str| {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{what} {which}: element {i}: got {g}, want {w}"
            );
        }
    };
    assert!(relu[..n].iter().all(|v| v.is_nan()), "{what}: the NaN row");
    // Bias and ReLU fused: one GEMM stage, no loop.
    assert_eq!(stage_counts(&l, &[l.r]), (1, 0), "{what}: relu(linear)");
    same(&l.t.run(&inputs, &[l.r])[0], &relu, "relu(linear)");
    // The pre-ReLU value read outside: the epilogue stops at the bias, the ReLU is a loop.
    assert_eq!(
        stage_counts(&l, &[l.h, l.r]),
        (2, 1),
        "{what}: linear and relu"
    );
    let got = l.t.run(&inputs, &[l.h, l.r]);
    same(&got[0], &bias, "linear");
    same(&got[1], &relu, "relu after linear");
}

#[test]
fn bias_and_relu_run_on_the_product_bit_for_bit() {
    check(&[], (5, 3, 7));
    check(&[], (64, 33, 10));
    check(&[2, 3], (4, 6, 9));
    // On the team (2^18 to 2^24 multiply-adds): row panels, and column panels (each taking
    // its own part of the bias) when the rows are too few.
    check(&[], (256, 128, 128));
    check(&[], (200, 64, 130));
    check(&[], (40, 128, 256));
    // Threaded: 2^24 multiply-adds and more, cut into column and row panels.
    check(&[], (256, 256, 300));
    check(&[], (600, 256, 128));
}

#[test]
fn a_product_read_elsewhere_keeps_its_own_output() {
    let l = linear(&[], (8, 4, 6));
    // The product itself is an output: no epilogue, the bias add and ReLU are a loop.
    assert_eq!(stage_counts(&l, &[l.mm, l.r]), (2, 1));
    let inputs = [(l.x, data(32, 1)), (l.w, data(24, 2)), (l.b, data(6, 3))];
    let got = l.t.run(&inputs, &[l.mm, l.r]);
    let db = data(6, 3);
    for (i, (&p, &r)) in got[0].iter().zip(&got[1]).enumerate() {
        let h = p + db[i % 6];
        assert_eq!(r.to_bits(), if h <= 0.0 { 0.0f32 } else { h }.to_bits());
    }
}
