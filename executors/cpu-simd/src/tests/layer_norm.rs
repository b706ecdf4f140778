//! `ltorch.layer_norm` claimed whole, against a naive f64 layer norm written from the definition
//! (`(x - mean) / sqrt(var + eps) * w + b`, biased variance): one and two normalized dims, with
//! and without weight and bias, rows that are not a multiple of the accumulator lanes, enough
//! rows for the threaded path, an input that is a strided view made in the same region, an empty
//! input, and what must be left to the decomposition (f64, a broadcast weight, no normalized dims).

use super::{assert_close, data, ints, services, Tb};
use crate::region::Region;
use thunder_abi::{ArgView, DTypeCode, OpView, RegionSpec};

fn v(id: u32) -> ArgView {
    ArgView::Value(id)
}

impl Tb {
    #[allow(clippy::too_many_arguments)]
    fn layer_norm(
        &mut self,
        x: u32,
        norm: &[i64],
        w: Option<u32>,
        b: Option<u32>,
        eps: f64,
        dtype: DTypeCode,
        shape: &[i64],
    ) -> u32 {
        let out = self.value(dtype, shape);
        self.ops.push(OpView {
            symbol: crate::layer_norm::SYMBOL.into(),
            args: vec![
                v(x),
                ints(norm),
                w.map_or(ArgView::None, v),
                b.map_or(ArgView::None, v),
                ArgView::Float(eps),
            ]
            .into(),
            outputs: vec![out].into(),
            claimed: false,
            composite: true,
        });
        out
    }
}

/// The f64 reference over rows of `n` elements.
fn reference(x: &[f32], n: usize, w: Option<&[f32]>, b: Option<&[f32]>, eps: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        for (i, &v) in row.iter().enumerate() {
            let mut y = (v as f64 - mean) * rstd;
            if let Some(w) = w {
                y *= w[i] as f64;
            }
            if let Some(b) = b {
                y += b[i] as f64;
            }
            out.push(y);
        }
    }
    out
}

fn check(shape: &[i64], norm: &[i64], weight: bool, bias: bool, offset: f32) {
    let mut t = Tb::default();
    let x = t.value(DTypeCode::F32, shape);
    let w = weight.then(|| t.value(DTypeCode::F32, norm));
    let b = bias.then(|| t.value(DTypeCode::F32, norm));
    let y = t.layer_norm(x, norm, w, b, 1e-5, DTypeCode::F32, shape);
    let total = shape.iter().product::<i64>() as usize;
    let n = norm.iter().product::<i64>() as usize;
    // An offset far from zero checks that the variance is not taken as E[x²] - E[x]².
    let xd: Vec<f32> = data(total, 3).iter().map(|v| v + offset).collect();
    let (wd, bd) = (data(n, 4), data(n, 5));
    let mut inputs = vec![(x, xd.clone())];
    inputs.extend(w.map(|w| (w, wd.clone())));
    inputs.extend(b.map(|b| (b, bd.clone())));
    let got = t.run(&inputs, &[y]);
    let want = reference(
        &xd,
        n,
        weight.then_some(&wd[..]),
        bias.then_some(&bd[..]),
        1e-5,
    );
    let what = format!("layer_norm {shape:?} over {norm:?} weight {weight} bias {bias}");
    assert_close(&got[0], &want, 1e-5, 1e-5, &what);
}

#[test]
fn layer_norm_matches_the_definition() {
    check(&[3, 5, 7], &[7], true, true, 0.0);
    check(&[2, 3, 4], &[3, 4], true, false, 0.0);
    check(&[4, 33], &[33], false, true, 0.0);
    check(&[1, 16], &[16], false, false, 0.0);
    check(&[5], &[5], true, true, 0.0);
    check(&[6, 40], &[40], true, true, 1000.0);
}

#[test]
fn layer_norm_threads_over_row_blocks() {
    // 64 x 600 = 38,400 elements: above PAR_MIN, rows split over the threads.
    check(&[64, 600], &[600], true, true, 0.5);
    check(&[2, 32, 768], &[768], true, true, 0.0);
}

#[test]
fn layer_norm_reads_a_transposed_input() {
    // x is [5, 6] stored as [6, 5]; the kernel gathers the strided view.
    let mut t = Tb::default();
    let stored = t.value(DTypeCode::F32, &[6, 5]);
    let x = t.op(
        "transpose",
        vec![v(stored), ints(&[1, 0])],
        DTypeCode::F32,
        &[5, 6],
    );
    let w = t.value(DTypeCode::F32, &[6]);
    let y = t.layer_norm(x, &[6], Some(w), None, 1e-3, DTypeCode::F32, &[5, 6]);
    let (sd, wd) = (data(30, 7), data(6, 8));
    let got = t.run(&[(stored, sd.clone()), (w, wd.clone())], &[y]);
    let xd: Vec<f32> = (0..5)
        .flat_map(|i| (0..6).map(move |j| (i, j)))
        .map(|(i, j)| sd[j * 5 + i])
        .collect();
    let want = reference(&xd, 6, Some(&wd), None, 1e-3);
    assert_close(&got[0], &want, 1e-5, 1e-5, "layer_norm of a transpose");
}

#[test]
fn layer_norm_of_nothing_writes_nothing() {
    let mut t = Tb::default();
    let x = t.value(DTypeCode::F32, &[0, 4]);
    let y = t.layer_norm(x, &[4], None, None, 1e-5, DTypeCode::F32, &[0, 4]);
    let got = t.run(&[(x, Vec::new())], &[y]);
    assert!(got[0].is_empty());
}

/// Claimed only where the kernel runs it exactly as the decomposition would.
#[test]
fn layer_norm_claims_only_what_it_runs() {
    let claimed = |dtype: DTypeCode, shape: &[i64], norm: &[i64], wshape: &[i64]| {
        let mut t = Tb::default();
        let x = t.value(dtype, shape);
        let w = t.value(dtype, wshape);
        let y = t.layer_norm(x, norm, Some(w), None, 1e-5, dtype, shape);
        let view = t.view(&[x, w], &[y]);
        let ok = crate::accepts(&view, &view.ops[0]);
        if ok {
            let spec = RegionSpec {
                ops: vec![0].into(),
                inputs: vec![x, w].into(),
                outputs: vec![y].into(),
            };
            assert!(Region::compile(&view, &spec, services(), &[]).is_ok());
        }
        ok
    };
    assert!(claimed(DTypeCode::F32, &[2, 8], &[8], &[8]));
    assert!(!claimed(DTypeCode::F64, &[2, 8], &[8], &[8]));
    // A weight that would broadcast is the decomposition's business.
    assert!(!claimed(DTypeCode::F32, &[2, 8], &[8], &[1]));
    // normalized_shape must be the trailing dims.
    assert!(!claimed(DTypeCode::F32, &[2, 8], &[2], &[2]));
    assert!(!claimed(DTypeCode::F32, &[], &[], &[]));
}
