//! OpInfo rows for `cross_entropy_lse` and `cross_entropy_bwd`, the pair cross-entropy's
//! gradient goes through. The backward's `lse` is a free input here: its math is a function
//! of it whatever it holds.

use crate::families::FLOATS;
use crate::lit::*;
use crate::ltorch_ops::{e, f32t, s};
use crate::{Domain, Gen, OpInfo, SArg, Tol};
use thunder_core::DType;

fn lse_dtype(d: DType) -> DType {
    if d == DType::F64 {
        d
    } else {
        DType::F32
    }
}

/// (note, logits shape, targets, ignore_index, transposed logits): targets as values
/// (ignored rows included), or `None` for random classes.
type Case = (&'static str, [i64; 2], Option<&'static [f64]>, i64, bool);

const CASES: [Case; 8] = [
    ("class indices", [4, 5], None, -100, false),
    ("transposed logits", [3, 4], None, -100, true),
    (
        "ignored rows",
        [4, 6],
        Some(&[1.0, -100.0, 5.0, -100.0]),
        -100,
        false,
    ),
    (
        "ignore_index inside the classes",
        [4, 3],
        Some(&[0.0, 2.0, 2.0, 1.0]),
        2,
        false,
    ),
    ("all rows ignored", [2, 3], Some(&[-1.0, -1.0]), -1, false),
    ("one row", [1, 7], None, -100, false),
    ("one class", [3, 1], Some(&[0.0, 0.0, 0.0]), -100, false),
    ("i32 targets", [3, 4], Some(&[3.0, 0.0, 1.0]), -100, false),
];

fn logits(g: &mut Gen, case: &Case, d: DType, domain: Domain) -> SArg {
    if case.4 {
        g.ncd(&case.1, d, domain)
    } else {
        g.td(&case.1, d, domain)
    }
}

fn target(g: &mut Gen, case: &Case) -> SArg {
    let n = case.1[0];
    match case.2 {
        None => g.index(&[n], case.1[1]),
        Some(values) => {
            let dtype = if case.0 == "i32 targets" {
                DType::I32
            } else {
                DType::I64
            };
            g.values(values, &[n], dtype)
        }
    }
}

pub(crate) fn ce_pair() -> Vec<OpInfo> {
    vec![
        OpInfo::new(
            "ltorch.cross_entropy_lse",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                let mut v: Vec<_> = CASES
                    .iter()
                    .map(|c| {
                        let x = logits(g, c, d, Domain::Any);
                        s(c.0, vec![x, target(g, c), int(c.3)])
                    })
                    .collect();
                v.push(s(
                    "large logits",
                    vec![
                        g.values(&[1e4, 0.0, -1e4, -1e4, 1e4, 1e4], &[2, 3], d),
                        g.index(&[2], 3),
                        int(-100),
                    ],
                ));
                v
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![
                e(
                    "target batch mismatch",
                    vec![f32t(g, &[4, 5]), g.index(&[3], 5), int(-100)],
                    "targets must be integers of shape [4], got cpu i64[3]",
                ),
                e(
                    "3-D logits",
                    vec![f32t(g, &[2, 4, 5]), g.index(&[2], 5), int(-100)],
                    "expected logits of shape [N, C] with N, C > 0, got [2, 4, 5]",
                ),
                e(
                    "no classes",
                    vec![f32t(g, &[2, 0]), g.index(&[2], 1), int(-100)],
                    "with N, C > 0, got [2, 0]",
                ),
            ]
        })),
        OpInfo::new(
            "ltorch.cross_entropy_bwd",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                CASES
                    .iter()
                    .map(|c| {
                        // Logits in (-0.9, 0.9) against a log-sum-exp of at least 1 keep the
                        // probabilities below 1, as consistent inputs would.
                        let grad = g.t(&[], d);
                        let x = logits(g, c, d, Domain::Unit);
                        let t = target(g, c);
                        let lse = g.td(&[c.1[0]], lse_dtype(d), Domain::Ge1);
                        s(c.0, vec![grad, x, t, lse, int(c.3)])
                    })
                    .collect()
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![
                e(
                    "lse of the wrong shape",
                    vec![
                        f32t(g, &[]),
                        f32t(g, &[3, 4]),
                        g.index(&[3], 4),
                        f32t(g, &[4]),
                        int(-100),
                    ],
                    "lse must be f32 [3], got cpu f32[4]",
                ),
                e(
                    "grad_loss not 0-d",
                    vec![
                        f32t(g, &[3]),
                        f32t(g, &[3, 4]),
                        g.index(&[3], 4),
                        f32t(g, &[3]),
                        int(-100),
                    ],
                    "grad_loss must be a 0-d f32 tensor, got cpu f32[3]",
                ),
            ]
        })),
    ]
}
