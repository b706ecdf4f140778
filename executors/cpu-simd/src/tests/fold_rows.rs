//! Fused loops over short rows run several rows to a tile (`exec.rs`): a group that folds its
//! rows (a bias gradient) too when its rows are short, rows that follow each other in memory
//! load and store as one run, and a compare with a literal the type holds exactly (every
//! float literal, once rounded to the tensor's type) runs in that type (`tile.rs`). Against f64 loops, on odd shapes and IEEE corner values.

use super::{assert_close, data, ints, Tb};
use thunder_abi::{ArgView, DTypeCode::Bool, DTypeCode::F32};

/// `dz = where(x > 0, g, 0)` and its column sums `db` (a ReLU's backward and the bias
/// gradient before it) on `x, g: [shape]`, summed over every dim but the last.
fn relu_backward(shape: &[i64]) {
    let n: i64 = shape.iter().product();
    let c = shape[shape.len() - 1];
    let mut t = Tb::default();
    let x = t.value(F32, shape);
    let g = t.value(F32, shape);
    let v = ArgView::Value;
    let pos = t.op("gt", vec![v(x), ArgView::Float(0.0)], Bool, shape);
    let dz = t.op("where", vec![v(pos), v(g), ArgView::Float(0.0)], F32, shape);
    let dims: Vec<i64> = (0..shape.len() as i64 - 1).collect();
    let db = t.op("sum", vec![v(dz), ints(&dims)], F32, &[c]);
    let mut dx = data(n as usize, 21);
    // IEEE corners: NaN and -0.0 are not positive, a subnormal is (fused loops keep them).
    for (i, s) in [f32::NAN, -0.0, 1e-40, -1e-40, f32::INFINITY]
        .into_iter()
        .enumerate()
    {
        if let Some(e) = dx.get_mut(i * 3) {
            *e = s;
        }
    }
    let dg = data(n as usize, 22);
    let got = t.run(&[(x, dx.clone()), (g, dg.clone())], &[dz, db]);
    let want_dz: Vec<f64> = dx
        .iter()
        .zip(&dg)
        .map(|(&x, &g)| if x > 0.0 { g as f64 } else { 0.0 })
        .collect();
    let c = c as usize;
    let want_db: Vec<f64> = (0..c)
        .map(|j| want_dz.iter().skip(j).step_by(c).sum())
        .collect();
    let what = format!("shape {shape:?}");
    assert_close(&got[0], &want_dz, 0.0, 0.0, &format!("{what}: dz"));
    assert_close(&got[1], &want_db, 1e-6, 1e-6, &format!("{what}: db"));
}

/// Inside a region on a worker the others linger, and groups from 2^14 elements split among
/// them (`on_worker::cheap_split`): a bias gradient in private accumulators per chunk, as on
/// the calling thread's team.
#[test]
fn bias_gradients_in_a_region_on_a_worker() {
    assert!(!crate::on_worker::cheap_split(), "not outside a region");
    for shape in [&[256, 256][..], &[64, 1024], &[300, 64], &[100, 100]] {
        crate::on_worker::run(|| {
            if rayon::current_num_threads() > 1 {
                assert!(
                    crate::on_worker::cheap_split(),
                    "inside a region on a worker"
                );
            }
            relu_backward(shape)
        });
    }
}

#[test]
fn bias_gradients_over_short_rows() {
    // A loss's 10 classes over a batch; odd counts; a last tile of fewer rows (409 rows of 10
    // fill a tile); rows of 32 (the longest run several to a tile) and of 33 (row by row); a
    // 3-D input summed over two dims.
    for shape in [
        &[256, 10][..],
        &[37, 7],
        &[1000, 10],
        &[5, 32],
        &[300, 33],
        &[1, 3],
        &[4, 9, 10],
    ] {
        relu_backward(shape);
    }
}

/// A compare of an f32 tensor with a literal rounds the literal to f32 first (the prims'
/// contract, as the interpreter does) and compares in f32: the f32 nearest 0.1 is not above
/// it; NaN compares false.
#[test]
fn compare_with_a_literal_rounds_it_to_the_tensor_type() {
    let s = [3i64, 4];
    let mut t = Tb::default();
    let x = t.value(F32, &s);
    let v = ArgView::Value;
    let gt = t.op("gt", vec![v(x), ArgView::Float(0.1)], Bool, &s);
    let y = t.op(
        "where",
        vec![v(gt), ArgView::Float(1.0), ArgView::Float(0.0)],
        F32,
        &s,
    );
    let le = t.op("le", vec![ArgView::Float(0.1), v(x)], Bool, &s);
    let z = t.op(
        "where",
        vec![v(le), ArgView::Float(1.0), ArgView::Float(0.0)],
        F32,
        &s,
    );
    let dx: Vec<f32> = [0.1f32, 0.099_999_99, 0.100_000_01, f32::NAN]
        .into_iter()
        .cycle()
        .take(12)
        .collect();
    let got = t.run(&[(x, dx.clone())], &[y, z]);
    let want: Vec<f64> = dx
        .iter()
        .map(|&e| f64::from(u8::from(e > 0.1f32)))
        .collect();
    let want_le: Vec<f64> = dx
        .iter()
        .map(|&e| f64::from(u8::from(0.1f32 <= e)))
        .collect();
    assert_close(&got[0], &want, 0.0, 0.0, "x > 0.1");
    assert_close(&got[1], &want_le, 0.0, 0.0, "0.1 <= x");
}
