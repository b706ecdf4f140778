//! The fused attention kernel against a naive f64 softmax attention, on the decomposition
//! `ltorch.scaled_dot_product_attention` leaves (built by hand here): no mask, a b8 mask with
//! a fully masked row, an additive mask, a divided scale, sizes that are not multiples of the
//! kernel's tiles; and a chain whose scores are read elsewhere, which must stay unfused.

use super::{assert_close, data, ints, services, Tb};
use crate::region::Region;
use thunder_abi::{ArgView, DTypeCode::Bool, DTypeCode::F32, RegionSpec};

#[derive(Clone, Copy)]
enum Mask {
    None,
    /// Keep where the mask input is above 0.3 (row 1 is masked entirely).
    Keep,
    Add,
    /// An additive mask read through a transpose: strided along the keys.
    AddTransposed,
}

struct Case {
    batch: Vec<i64>,
    l: i64,
    s: i64,
    d: i64,
    dv: i64,
    mask: Mask,
    /// Scores divided by `sqrt(d)` instead of multiplied by its inverse.
    divide: bool,
    /// Also return the scores (a residual): the chain must not fuse.
    expose_scores: bool,
}

fn shape(batch: &[i64], a: i64, b: i64) -> Vec<i64> {
    let mut s = batch.to_vec();
    s.extend([a, b]);
    s
}

fn v(id: u32) -> ArgView {
    ArgView::Value(id)
}

/// Builds the decomposition; returns (inputs in order, outputs).
fn build(t: &mut Tb, c: &Case) -> (Vec<u32>, Vec<u32>) {
    let r = c.batch.len() + 2;
    let sc = shape(&c.batch, c.l, c.s);
    let q = t.value(F32, &shape(&c.batch, c.l, c.d));
    let k = t.value(F32, &shape(&c.batch, c.s, c.d));
    let vv = t.value(F32, &shape(&c.batch, c.s, c.dv));
    let mut perm: Vec<i64> = (0..r as i64).collect();
    perm.swap(r - 2, r - 1);
    let kt = t.op(
        "transpose",
        vec![v(k), ints(&perm)],
        F32,
        &shape(&c.batch, c.d, c.s),
    );
    let raw = t.op("matmul", vec![v(q), v(kt)], F32, &sc);
    let scaled = if c.divide {
        t.op(
            "div",
            vec![v(raw), ArgView::Float((c.d as f64).sqrt())],
            F32,
            &sc,
        )
    } else {
        let f = 1.0 / (c.d as f64).sqrt();
        t.op(
            "mul",
            vec![v(raw), ArgView::Float(f as f32 as f64)],
            F32,
            &sc,
        )
    };
    let mut inputs = vec![q, k, vv];
    let bdims: Vec<i64> = vec![r as i64 - 2, r as i64 - 1];
    let x = match c.mask {
        Mask::None => scaled,
        Mask::Keep => {
            let m = t.value(F32, &[c.l, c.s]);
            inputs.push(m);
            let keep = t.op("gt", vec![v(m), ArgView::Float(0.3)], Bool, &[c.l, c.s]);
            let kb = t.op(
                "broadcast_in_dim",
                vec![v(keep), ints(&sc), ints(&bdims)],
                Bool,
                &sc,
            );
            t.op(
                "where",
                vec![v(kb), v(scaled), ArgView::Float(f64::NEG_INFINITY)],
                F32,
                &sc,
            )
        }
        Mask::Add => {
            let m = t.value(F32, &sc);
            inputs.push(m);
            t.op("add", vec![v(scaled), v(m)], F32, &sc)
        }
        Mask::AddTransposed => {
            let mut st = sc.clone();
            st.swap(r - 2, r - 1);
            let m = t.value(F32, &st);
            inputs.push(m);
            let mut perm: Vec<i64> = (0..r as i64).collect();
            perm.swap(r - 2, r - 1);
            let mt = t.op("transpose", vec![v(m), ints(&perm)], F32, &sc);
            t.op("add", vec![v(scaled), v(mt)], F32, &sc)
        }
    };
    let last = ints(&[r as i64 - 1]);
    let mut row = c.batch.clone();
    row.push(c.l);
    let mut row1 = row.clone();
    row1.push(1);
    let all: Vec<i64> = (0..r as i64).collect();
    let mx = t.op("amax", vec![v(x), last.clone()], F32, &row);
    let mr = t.op("reshape", vec![v(mx), ints(&row1)], F32, &row1);
    let mb = t.op(
        "broadcast_in_dim",
        vec![v(mr), ints(&sc), ints(&all)],
        F32,
        &sc,
    );
    let df = t.op("sub", vec![v(x), v(mb)], F32, &sc);
    let e = t.op("exp", vec![v(df)], F32, &sc);
    let z = t.op("sum", vec![v(e), last], F32, &row);
    let zr = t.op("reshape", vec![v(z), ints(&row1)], F32, &row1);
    let zb = t.op(
        "broadcast_in_dim",
        vec![v(zr), ints(&sc), ints(&all)],
        F32,
        &sc,
    );
    let p = t.op("div", vec![v(e), v(zb)], F32, &sc);
    let o = t.op(
        "matmul",
        vec![v(p), v(vv)],
        F32,
        &shape(&c.batch, c.l, c.dv),
    );
    let outputs = if c.expose_scores {
        vec![o, raw]
    } else {
        vec![o]
    };
    (inputs, outputs)
}

/// softmax(mask(q kᵀ / sqrt(d))) v in f64, NaN for a row with every key masked.
fn reference(c: &Case, ins: &[Vec<f32>]) -> Vec<f64> {
    let (l, s, d, dv) = (c.l as usize, c.s as usize, c.d as usize, c.dv as usize);
    let nb: usize = c.batch.iter().product::<i64>() as usize;
    let mut out = vec![0.0; nb * l * dv];
    let scale = 1.0 / (d as f64).sqrt();
    for b in 0..nb {
        for i in 0..l {
            let mut sc: Vec<f64> = (0..s)
                .map(|j| {
                    let dot: f64 = (0..d)
                        .map(|p| {
                            ins[0][(b * l + i) * d + p] as f64 * ins[1][(b * s + j) * d + p] as f64
                        })
                        .sum();
                    dot * scale
                })
                .collect();
            for (j, x) in sc.iter_mut().enumerate() {
                match c.mask {
                    Mask::None => {}
                    Mask::Keep if ins[3][i * s + j] > 0.3 => {}
                    Mask::Keep => *x = f64::NEG_INFINITY,
                    Mask::Add => *x += ins[3][(b * l + i) * s + j] as f64,
                    Mask::AddTransposed => *x += ins[3][(b * s + j) * l + i] as f64,
                }
            }
            let m = sc.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(x));
            let e: Vec<f64> = sc.iter().map(|&x| (x - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for n in 0..dv {
                let acc: f64 = (0..s)
                    .map(|j| e[j] / z * ins[2][(b * s + j) * dv + n] as f64)
                    .sum();
                out[(b * l + i) * dv + n] = if m == f64::NEG_INFINITY {
                    f64::NAN
                } else {
                    acc
                };
            }
        }
    }
    out
}

fn check(c: Case) {
    let mut t = Tb::default();
    let (inputs, outputs) = build(&mut t, &c);
    let what = format!(
        "batch {:?} L {} S {} D {} Dv {} divide {}",
        c.batch, c.l, c.s, c.d, c.dv, c.divide
    );
    let view = t.view(&inputs, &outputs);
    let spec = RegionSpec {
        ops: (0..view.ops.len() as u32).collect(),
        inputs: inputs.clone().into(),
        outputs: outputs.clone().into(),
    };
    let region = Region::compile(&view, &spec, services(), &[]).expect("compile");
    let want_fused = usize::from(!c.expose_scores);
    assert_eq!(
        region.attention_stages(),
        want_fused,
        "{what}: fused stages"
    );
    let mut ins: Vec<Vec<f32>> = inputs
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let n: i64 = view.values[id as usize].shape.iter().product();
            data(n as usize, 11 + i as u64)
        })
        .collect();
    if let Mask::Keep = c.mask {
        // Row 1 keeps nothing (NaN out, as the decomposition gives); the rest keep ~35%.
        let s = c.s as usize;
        ins[3][s..2 * s].iter_mut().for_each(|x| *x = -1.0);
    }
    let got = t.run(
        &inputs.iter().copied().zip(ins.clone()).collect::<Vec<_>>(),
        &outputs,
    );
    assert_close(&got[0], &reference(&c, &ins), 2e-5, 2e-6, &what);
}

fn case(batch: &[i64], (l, s, d, dv): (i64, i64, i64, i64), mask: Mask) -> Case {
    Case {
        batch: batch.to_vec(),
        l,
        s,
        d,
        dv,
        mask,
        divide: false,
        expose_scores: false,
    }
}

#[test]
fn fused_attention_matches_naive() {
    check(case(&[2, 3], (40, 150, 16, 8), Mask::None));
    check(case(&[2], (33, 257, 8, 12), Mask::Keep));
    check(case(&[3], (5, 7, 4, 4), Mask::Add));
    check(case(&[2], (6, 9, 4, 4), Mask::AddTransposed));
    // Enough batches for the wide row tasks, with a head dim of 32.
    check(case(&[2, 8], (130, 140, 32, 32), Mask::Add));
    check(case(&[], (1, 1, 3, 2), Mask::None));
    // Large enough to take the threaded path.
    check(case(&[2, 4], (128, 128, 64, 64), Mask::Keep));
    check(Case {
        divide: true,
        ..case(&[1, 2], (17, 300, 8, 8), Mask::None)
    });
}

#[test]
fn attention_with_a_saved_intermediate_is_not_fused() {
    check(Case {
        expose_scores: true,
        ..case(&[2], (9, 20, 4, 4), Mask::Keep)
    });
}
