//! Max pools written as ONNX import writes them (a pad, a row slice per kernel row shared by
//! that row's column slices, as the trace's cleanup leaves them, and a chain of maximums) run
//! as one window stage (`pool_match.rs`, `pool.rs`). Each case is checked bit for bit against
//! the window maximum computed here from its definition (NaN wins, -0 below +0, the pad's
//! value wherever a tap falls outside the input), with NaN, signed zeros and -inf among the
//! inputs; the region must hold one pool stage and no pad.

use super::{ints, Tb};
use crate::ops::nan_max;
use thunder_abi::{ArgView, DTypeCode};

#[derive(Clone, Copy, Debug)]
struct Case {
    planes: [usize; 2],
    hw: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    /// (low, high) per spatial dim.
    pad: [(usize, usize); 2],
    dilation: [usize; 2],
    fill: f64,
}

impl Case {
    fn out(&self) -> [usize; 2] {
        std::array::from_fn(|d| {
            let padded = self.hw[d] + self.pad[d].0 + self.pad[d].1;
            (padded - self.dilation[d] * (self.kernel[d] - 1) - 1) / self.stride[d] + 1
        })
    }

    fn padded(&self) -> [usize; 2] {
        std::array::from_fn(|d| self.hw[d] + self.pad[d].0 + self.pad[d].1)
    }
}

/// The pool's trace; returns (input, output, the maximum after the first kernel row).
fn build(t: &mut Tb, dt: DTypeCode, c: &Case) -> (u32, u32, u32) {
    let [n, ch] = c.planes.map(|v| v as i64);
    let [h, w] = c.hw.map(|v| v as i64);
    let [oh, ow] = c.out().map(|v| v as i64);
    let [hp, wp] = c.padded().map(|v| v as i64);
    let x = t.value(dt, &[n, ch, h, w]);
    let padded = c.pad.iter().any(|&(lo, hi)| lo + hi > 0);
    let p = if padded {
        let [(lh, hh), (lw, hw)] = c.pad.map(|(a, b)| (a as i64, b as i64));
        t.op(
            "pad",
            vec![
                ArgView::Value(x),
                ArgView::Float(c.fill),
                ints(&[0, 0, 0, 0, 0, 0, lh, hh, 0, lw, hw, 0]),
            ],
            dt,
            &[n, ch, hp, wp],
        )
    } else {
        x
    };
    let [sh, sw] = c.stride.map(|v| v as i64);
    let [dh, dw] = c.dilation.map(|v| v as i64);
    let mut acc = None;
    let mut first_row = None;
    for i in 0..c.kernel[0] as i64 {
        let r0 = i * dh;
        let row = t.op(
            "slice",
            vec![
                ArgView::Value(p),
                ints(&[0, 0, r0, 0]),
                ints(&[n, ch, r0 + (oh - 1) * sh + 1, wp]),
                ints(&[1, 1, sh, 1]),
            ],
            dt,
            &[n, ch, oh, wp],
        );
        for j in 0..c.kernel[1] as i64 {
            let c0 = j * dw;
            let tap = t.op(
                "slice",
                vec![
                    ArgView::Value(row),
                    ints(&[0, 0, 0, c0]),
                    ints(&[n, ch, oh, c0 + (ow - 1) * sw + 1]),
                    ints(&[1, 1, 1, sw]),
                ],
                dt,
                &[n, ch, oh, ow],
            );
            acc = Some(match acc {
                None => tap,
                Some(m) => t.op(
                    "maximum",
                    vec![ArgView::Value(m), ArgView::Value(tap)],
                    dt,
                    &[n, ch, oh, ow],
                ),
            });
        }
        if i == 0 {
            first_row = acc;
        }
    }
    let y = acc.expect("a kernel of at least one tap");
    (x, y, first_row.expect("a first kernel row"))
}

/// The window maximum over kernel rows `rows` (all of them: `0..kernel[0]`).
fn reference(c: &Case, x: &[f64], rows: std::ops::Range<usize>) -> Vec<f64> {
    let [h, w] = c.hw;
    let [oh, ow] = c.out();
    let mut out = Vec::new();
    for plane in 0..c.planes[0] * c.planes[1] {
        for i in 0..oh {
            for j in 0..ow {
                let mut m: Option<f64> = None;
                for ki in rows.clone() {
                    for kj in 0..c.kernel[1] {
                        let y = (i * c.stride[0] + ki * c.dilation[0]) as i64 - c.pad[0].0 as i64;
                        let xx = (j * c.stride[1] + kj * c.dilation[1]) as i64 - c.pad[1].0 as i64;
                        let inside = y >= 0 && xx >= 0 && (y as usize) < h && (xx as usize) < w;
                        let v = match inside {
                            true => x[(plane * h + y as usize) * w + xx as usize],
                            false => c.fill,
                        };
                        m = Some(m.map_or(v, |m| nan_max(m, v)));
                    }
                }
                out.push(m.expect("a tap"));
            }
        }
    }
    out
}

/// Values in [-1, 1) with NaN, both zeros and -inf planted.
fn input(c: &Case, seed: u64) -> Vec<f64> {
    let n = c.planes[0] * c.planes[1] * c.hw[0] * c.hw[1];
    let mut x: Vec<f64> = super::data(n, seed).into_iter().map(f64::from).collect();
    for (k, v) in [f64::NAN, -0.0, 0.0, f64::NEG_INFINITY, -0.0]
        .into_iter()
        .enumerate()
    {
        let at = (k * 7919 + 13) % n.max(1);
        if n > 0 {
            x[at] = v;
        }
    }
    // The first two rows of the first plane alternate -0 and +0 (windows of both zeros give
    // +0 in any order); those of the second plane are -0 (windows give -0).
    let [h, w] = c.hw;
    for plane in 0..(c.planes[0] * c.planes[1]).min(2) {
        for k in 0..2.min(h) * w {
            x[plane * h * w + k] = if plane == 0 && k % 2 == 1 { 0.0 } else { -0.0 };
        }
    }
    x
}

fn same_bits(got: f64, want: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits()
}

fn check(c: Case) {
    let xs = input(&c, 5);
    let want = reference(&c, &xs, 0..c.kernel[0]);
    for dt in [DTypeCode::F32, DTypeCode::F64] {
        let mut t = Tb::default();
        let (x, y, _) = build(&mut t, dt, &c);
        let padded = c.pad.iter().any(|&(lo, hi)| lo + hi > 0);
        assert_eq!(
            t.compile(&[x], &[y]).pool_and_pad_stages(),
            (1, 0),
            "{c:?} {dt:?}: one pool stage, no pad (padded: {padded})"
        );
        let got: Vec<f64> = match dt {
            DTypeCode::F32 => {
                let xs32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
                let out = t.try_run_as(dt, &[(x, xs32)], &[y]).expect("run");
                out[0].iter().map(|&v| f64::from(v)).collect()
            }
            _ => t.try_run_as(dt, &[(x, xs.clone())], &[y]).expect("run")[0].clone(),
        };
        assert_eq!(got.len(), want.len(), "{c:?} {dt:?}: length");
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            // f32 inputs are the f64 values rounded, and a maximum picks one of them.
            let w = if dt == DTypeCode::F32 {
                f64::from(w as f32)
            } else {
                w
            };
            assert!(
                same_bits(g, w),
                "{c:?} {dt:?}: element {k}: {g} against {w}"
            );
        }
    }
}

const RESNET: Case = Case {
    planes: [2, 3],
    hw: [17, 37],
    kernel: [3, 3],
    stride: [2, 2],
    pad: [(1, 1), (1, 1)],
    dilation: [1, 1],
    fill: f64::NEG_INFINITY,
};

#[test]
fn resnet_pool_3x3_stride_2_with_a_border() {
    check(RESNET);
    // At ResNet-50's own size: 112 x 112 into 56 x 56, planes split over the threads.
    check(Case {
        planes: [1, 8],
        hw: [112, 112],
        ..RESNET
    });
}

#[test]
fn stride_1_unpadded_stride_3_and_dilated_pools() {
    // Stride 1, output rows of 40.
    check(Case {
        hw: [9, 40],
        stride: [1, 1],
        ..RESNET
    });
    // No pad: the slices read the input itself.
    check(Case {
        hw: [8, 50],
        kernel: [2, 2],
        pad: [(0, 0), (0, 0)],
        ..RESNET
    });
    // A stride the stage has no special case for.
    check(Case {
        hw: [10, 61],
        stride: [3, 3],
        ..RESNET
    });
    // Dilated, uneven strides, asymmetric pads and a finite pad value (which a window
    // entirely in the border returns).
    check(Case {
        hw: [12, 45],
        kernel: [2, 3],
        stride: [1, 2],
        pad: [(2, 1), (0, 2)],
        dilation: [2, 2],
        fill: -1e30,
        ..RESNET
    });
}

#[test]
fn small_and_empty_pools() {
    // Output rows shorter than a vector.
    check(Case {
        hw: [5, 5],
        ..RESNET
    });
    // Windows entirely inside the border give the pad's value.
    check(Case {
        hw: [3, 3],
        kernel: [2, 2],
        stride: [1, 1],
        pad: [(2, 2), (2, 2)],
        fill: -7.5,
        ..RESNET
    });
    // A pad value above most inputs: border rows and columns raise their windows to it.
    check(Case {
        hw: [9, 35],
        fill: 0.25,
        ..RESNET
    });
    // No planes: nothing to write.
    check(Case {
        planes: [0, 3],
        ..RESNET
    });
}

/// A maximum inside the chain that the region also returns keeps its value: the window
/// stage does not take the chain (a smaller tree of one kernel row may still run as one).
#[test]
fn a_chain_read_outside_keeps_its_intermediates() {
    let c = RESNET;
    let xs = input(&c, 9);
    let mut t = Tb::default();
    let (x, y, row0) = build(&mut t, DTypeCode::F32, &c);
    let xs32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    let out = t
        .try_run_as(DTypeCode::F32, &[(x, xs32)], &[y, row0])
        .expect("run");
    for (got, want) in out
        .iter()
        .zip([reference(&c, &xs, 0..3), reference(&c, &xs, 0..1)])
    {
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                same_bits(f64::from(g), f64::from(w as f32)),
                "element {k}: {g} against {w}"
            );
        }
    }
}

/// Maximums that are not a window grid stay ordinary ops: two different inputs, and two
/// slices of one input at taps (0, 0) and (1, 1) (a diagonal, not `{0, 1} x {0, 1}`).
#[test]
fn maximums_that_are_not_a_pool_are_left_alone() {
    let dt = DTypeCode::F32;
    let mut t = Tb::default();
    let a = t.value(dt, &[2, 5, 6]);
    let b = t.value(dt, &[2, 5, 6]);
    let ab = t.op(
        "maximum",
        vec![ArgView::Value(a), ArgView::Value(b)],
        dt,
        &[2, 5, 6],
    );
    let tap = |t: &mut Tb, d: i64| {
        t.op(
            "slice",
            vec![
                ArgView::Value(a),
                ints(&[0, d, d]),
                ints(&[2, d + 4, d + 5]),
                ints(&[1, 1, 1]),
            ],
            dt,
            &[2, 4, 5],
        )
    };
    let (t0, t1) = (tap(&mut t, 0), tap(&mut t, 1));
    let diag = t.op(
        "maximum",
        vec![ArgView::Value(t0), ArgView::Value(t1)],
        dt,
        &[2, 4, 5],
    );
    assert_eq!(
        t.compile(&[a, b], &[ab, diag]).pool_and_pad_stages(),
        (0, 0)
    );
    let (xa, xb) = (super::data(60, 3), super::data(60, 4));
    let got = t.run(&[(a, xa.clone()), (b, xb.clone())], &[ab, diag]);
    let want_ab: Vec<f64> = xa
        .iter()
        .zip(&xb)
        .map(|(&p, &q)| f64::from(p.max(q)))
        .collect();
    let want_diag: Vec<f64> = (0..2)
        .flat_map(|n| (0..4).flat_map(move |i| (0..5).map(move |j| (n, i, j))))
        .map(|(n, i, j)| f64::from(xa[(n * 5 + i) * 6 + j].max(xa[(n * 5 + i + 1) * 6 + j + 1])))
        .collect();
    super::assert_close(&got[0], &want_ab, 0.0, 0.0, "maximum of two inputs");
    super::assert_close(&got[1], &want_diag, 0.0, 0.0, "diagonal taps");
}
