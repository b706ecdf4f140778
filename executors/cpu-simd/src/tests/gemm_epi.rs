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
    /// `maximum(h, 0.0)` (`h` without it).
    r: u32,
}

/// `relu(linear(x, w, b))` on `x: [batch.., m, k]`, `w: [n, k]`, `b: [n]`.
fn linear(batch: &[i64], (m, k, n): (i64, i64, i64)) -> Linear {
    let mut l = bias_linear(batch, (m, k, n));
    let mut shape = batch.to_vec();
    shape.extend([m, n]);
    l.r = l.t.op(
        "maximum",
        vec![ArgView::Value(l.h), ArgView::Float(0.0)],
        F32,
        &shape,
    );
    l
}

/// `linear(x, w, b)` alone (`r` is `h`).
fn bias_linear(batch: &[i64], dims: (i64, i64, i64)) -> Linear {
    bias_linear_after(Tb::default(), batch, dims)
}

/// [`bias_linear`] after the ops already in `t`.
fn bias_linear_after(mut t: Tb, batch: &[i64], (m, k, n): (i64, i64, i64)) -> Linear {
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
    Linear {
        t,
        x,
        w,
        b,
        mm,
        h,
        r: h,
    }
}

fn stage_counts(l: &Linear, outputs: &[u32]) -> (usize, usize) {
    let inputs = [l.x, l.w, l.b];
    let spec = RegionSpec {
        ops: (0..l.t.view(&inputs, outputs).ops.len() as u32).collect(),
        inputs: inputs.to_vec().into(),
        outputs: outputs.to_vec().into(),
    };
    Region::compile(&l.t.view(&inputs, outputs), &spec, services(), &[])
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

/// How a residual added after the bias reaches the product's rows.
#[derive(Clone, Copy, Debug)]
enum Res {
    /// An input of the output's shape.
    Plain,
    /// The transpose of an `[n, m]` input (columns `m` apart).
    Transposed,
    /// An input of shape `[2, m / 2, n]`, added to the product reshaped to that shape (as an
    /// importer writes a `[batch, seq, n]` linear as a `[tokens, n]` product).
    Viewed,
    /// `[b1, b0, m, n]` with its batch dims swapped: no `[rows, n]` view, so the epilogue
    /// stops at the bias and the add runs after the product.
    Swapped,
}

/// `relu?((x @ w^T + b) + residual)`; checks the stage count and the bits against the plain
/// product with the ops applied here.
fn check_residual(batch: &[i64], (m, k, n): (i64, i64, i64), res: Res, relu: bool) {
    let with = |a: i64, b: i64| {
        let mut s = batch.to_vec();
        s.extend([a, b]);
        s
    };
    let out_shape = with(m, n);
    // The residual and its view come before the product, as a transformer's stream does.
    let mut t = Tb::default();
    let (z, z_shape, zv) = match res {
        Res::Plain => {
            let z = t.value(F32, &out_shape);
            (z, out_shape.clone(), z)
        }
        Res::Viewed => {
            let z = t.value(F32, &[2, m / 2, n]);
            (z, vec![2, m / 2, n], z)
        }
        Res::Transposed => {
            assert!(batch.is_empty());
            let z = t.value(F32, &[n, m]);
            let v = t.op(
                "transpose",
                vec![ArgView::Value(z), ints(&[1, 0])],
                F32,
                &[m, n],
            );
            (z, vec![n, m], v)
        }
        Res::Swapped => {
            let [b0, b1] = batch[..] else {
                panic!("two batch dims")
            };
            let z = t.value(F32, &[b1, b0, m, n]);
            let v = t.op(
                "transpose",
                vec![ArgView::Value(z), ints(&[1, 0, 2, 3])],
                F32,
                &out_shape,
            );
            (z, vec![b1, b0, m, n], v)
        }
    };
    let mut l = bias_linear_after(t, batch, (m, k, n));
    let (h, out_shape) = match res {
        Res::Viewed => {
            let s = vec![2, m / 2, n];
            let v =
                l.t.op("reshape", vec![ArgView::Value(l.h), ints(&s)], F32, &s);
            (v, s)
        }
        _ => (l.h, out_shape),
    };
    let s = l.t.op(
        "add",
        vec![ArgView::Value(zv), ArgView::Value(h)],
        F32,
        &out_shape,
    );
    let out = if relu {
        l.t.op(
            "maximum",
            vec![ArgView::Value(s), ArgView::Float(0.0)],
            F32,
            &out_shape,
        )
    } else {
        s
    };
    let rows = batch.iter().product::<i64>() as usize * m as usize;
    let (ku, nu) = (k as usize, n as usize);
    let dz = data(z_shape.iter().product::<i64>() as usize, 14);
    let (dx, dw, db) = (data(rows * ku, 11), data(nu * ku, 12), data(nu, 13));
    let inputs = [(l.x, dx), (l.w, dw), (l.b, db.clone()), (z, dz.clone())];
    // The product alone, from a region of the linear's ops only.
    let bare = bias_linear(batch, (m, k, n));
    let bare_inputs: Vec<(u32, Vec<f32>)> = [bare.x, bare.w, bare.b]
        .into_iter()
        .zip(inputs.iter().map(|i| i.1.clone()))
        .collect();
    let plain = bare.t.run(&bare_inputs, &[bare.mm]).remove(0);
    // The residual's element for output element `i`, through the view.
    let z_at = |i: usize| -> f32 {
        let (r, c) = (i / nu, i % nu);
        match res {
            Res::Plain | Res::Viewed => dz[i],
            Res::Transposed => dz[c * rows + r],
            Res::Swapped => {
                let (b0, b1, mu) = (batch[0] as usize, batch[1] as usize, m as usize);
                let (bi, row) = (r / mu, r % mu);
                let (i0, i1) = (bi / b1, bi % b1);
                dz[((i1 * b0 + i0) * mu + row) * nu + c]
            }
        }
    };
    let want: Vec<f32> = plain
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let y = (p + db[i % nu]) + z_at(i);
            if relu && y <= 0.0 {
                0.0
            } else {
                y
            }
        })
        .collect();
    let what = format!("batch {batch:?} m {m} k {k} n {n} {res:?} relu {relu}");
    let ins = [l.x, l.w, l.b, z];
    let spec = RegionSpec {
        ops: (0..l.t.view(&ins, &[out]).ops.len() as u32).collect(),
        inputs: ins.to_vec().into(),
        outputs: vec![out].into(),
    };
    let counts = Region::compile(&l.t.view(&ins, &[out]), &spec, services(), &[])
        .expect("compile")
        .stage_counts();
    let want_counts = match res {
        Res::Swapped => (2, 1),
        Res::Plain | Res::Transposed | Res::Viewed => (1, 0),
    };
    assert_eq!(counts, want_counts, "{what}: stages");
    let got = l.t.run(&inputs, &[out]).remove(0);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn a_residual_add_runs_on_the_product_bit_for_bit() {
    for relu in [false, true] {
        check_residual(&[], (5, 3, 7), Res::Plain, relu);
        check_residual(&[2, 3], (4, 6, 9), Res::Plain, relu);
        check_residual(&[], (9, 5, 4), Res::Transposed, relu);
        check_residual(&[], (10, 5, 4), Res::Viewed, relu);
        check_residual(&[], (512, 256, 384), Res::Viewed, relu);
        check_residual(&[2, 3], (4, 6, 9), Res::Swapped, relu);
        // Threaded column and row panels, each finding its rows of the residual.
        check_residual(&[], (256, 256, 300), Res::Plain, relu);
        check_residual(&[], (600, 256, 128), Res::Transposed, relu);
        // On the team.
        check_residual(&[], (40, 128, 256), Res::Plain, relu);
    }
}
