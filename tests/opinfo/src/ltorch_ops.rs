//! OpInfo rows for the ltorch ops (`thunder-torch/src/lib.rs`, `ltorch_table!`), in
//! families. A row is the op's name, its dtypes, its sample generator (mostly a shared one)
//! and its error generator.

use crate::families::*;
use crate::lit::*;
use crate::{Domain, ErrorCase, ErrorFn, Gen, OpInfo, SArg, Sample, SampleFn, Tol};
use thunder_core::clang::Promotion;
use thunder_core::prims::{BinaryPrim, UnaryPrim};
use thunder_core::DType;
use thunder_torch::{prim_ops, PrimOp, PrimOpForm};

pub(crate) fn s(note: &str, args: Vec<SArg>) -> Sample {
    Sample::new(note, args)
}

pub(crate) fn e(note: &str, args: Vec<SArg>, expect: &str) -> ErrorCase {
    ErrorCase::new(note, args, expect)
}

pub(crate) fn f32t(g: &mut Gen, shape: &[i64]) -> SArg {
    g.t(shape, DType::F32)
}

pub(crate) fn id(name: &str) -> String {
    format!("ltorch.{name}")
}

/// Unary ops that are not one prim: `(name, dtypes, domain, tolerance)`. The one-prim ops come
/// from their rows (`thunder_torch::prim_ops`), see `prim_op_entries`.
const UNARY: &[(&str, &[DType], Domain, Tol)] = &[
    ("sign", ALL, Domain::Any, Tol::Default),
    ("signbit", ALL, Domain::Any, Tol::Default),
    ("isnan", ALL, Domain::Any, Tol::Default),
    ("isfinite", ALL, Domain::Any, Tol::Default),
    ("logical_not", ALL, Domain::Any, Tol::Default),
    ("bitwise_not", INTS_BOOL, Domain::Any, Tol::Default),
    ("relu", NUMERIC, Domain::Any, Tol::Default),
    ("sigmoid", ALL, Domain::Any, Tol::Default),
    ("silu", FLOATS, Domain::Any, Tol::Smooth),
    ("relu6", NUMERIC, Domain::Any, Tol::Default),
    ("hardswish", FLOATS, Domain::Any, Tol::Smooth),
    ("zeros_like", ALL, Domain::Any, Tol::Default),
    ("ones_like", ALL, Domain::Any, Tol::Default),
];

/// Binary ops that broadcast and promote and are not one prim: `(name, dtypes, rhs domain)`.
const BINARY: &[(&str, &[DType], Domain)] = &[
    ("bitwise_and", INTS_BOOL, Domain::Any),
    ("bitwise_or", INTS_BOOL, Domain::Any),
    ("bitwise_xor", INTS_BOOL, Domain::Any),
    ("bitwise_left_shift", INTS, Domain::Small),
    ("bitwise_right_shift", INTS, Domain::Small),
];

/// Ops whose f16/bf16 results round several times on the way (series, reflections).
const SMOOTH: &[&str] = &["ltorch.lgamma", "ltorch.digamma"];

/// The dtypes a one-prim ltorch op takes: what its promotion makes of them, and for a binary
/// op computed in its inputs' category, the lanes its prim's row defines.
fn prim_op_dtypes(op: &PrimOp) -> Vec<DType> {
    let lanes = |d: DType| match BinaryPrim::of(op.prim) {
        Some(b) => {
            let rule = b.rule();
            match d {
                DType::Bool => rule.supports_bool(),
                DType::F16 | DType::BF16 | DType::F32 | DType::F64 => rule.supports_float(),
                DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => rule.supports_int(),
            }
        }
        None => true,
    };
    let keep = |d: DType| match op.form {
        PrimOpForm::Unary(Promotion::IntToFloat) | PrimOpForm::Binary(Promotion::IntToFloat) => {
            true
        }
        PrimOpForm::Binary(Promotion::AlwaysBool) => true,
        PrimOpForm::Unary(_) => {
            d != DType::Bool && UnaryPrim::of(op.prim).is_some_and(|u| u.rule().supports_int())
                || thunder_core::dtype::is_float(d)
        }
        PrimOpForm::Rounding => d != DType::Bool,
        PrimOpForm::Binary(_) => lanes(d),
    };
    DType::ALL.into_iter().filter(|&d| keep(d)).collect()
}

/// One entry per one-prim ltorch op, from its row: a new row is sampled with no edit here.
fn prim_op_entries() -> Vec<OpInfo> {
    prim_ops()
        .map(|op| {
            let tol = if SMOOTH.contains(&op.id) {
                Tol::Smooth
            } else {
                Tol::Default
            };
            match op.form {
                PrimOpForm::Unary(_) | PrimOpForm::Rounding => {
                    let domain = UnaryPrim::of(op.prim).map_or(Domain::Any, |u| u.rule().domain);
                    OpInfo::new(op.id, &prim_op_dtypes(op), unary(domain))
                        .tol(tol)
                        .errors(unary_errors())
                }
                PrimOpForm::Binary(_) => {
                    let (da, db) = BinaryPrim::of(op.prim)
                        .map_or((Domain::Any, Domain::Any), |b| b.rule().domain);
                    let name = op.id.trim_start_matches("ltorch.");
                    OpInfo::new(op.id, &prim_op_dtypes(op), binary(da, db, true))
                        .tol(tol)
                        .errors(binary_errors(name))
                }
            }
        })
        .collect()
}

pub fn entries() -> Vec<OpInfo> {
    let mut t = prim_op_entries();
    for (name, dtypes, domain, tol) in UNARY {
        t.push(
            OpInfo::new(&id(name), dtypes, unary(*domain))
                .tol(*tol)
                .errors(unary_errors()),
        );
    }
    for (name, dtypes, db) in BINARY {
        let da = if name.contains("shift") {
            Domain::Small
        } else {
            Domain::Any
        };
        t.push(OpInfo::new(&id(name), dtypes, binary(da, *db, true)).errors(binary_errors(name)));
    }
    t.extend(elementwise_more());
    t.extend(shape_ops());
    t.extend(crate::ltorch_nn::reductions());
    t.extend(crate::ltorch_nn::nn_ops());
    t.extend(crate::ltorch_nn::flash_pair());
    t.extend(crate::ltorch_ce::ce_pair());
    t.extend(factories());
    t
}

/// Unary ltorch ops: a literal where the tensor goes.
fn unary_errors() -> ErrorFn {
    Box::new(|_g: &mut Gen| {
        vec![e(
            "a number instead of a tensor",
            vec![float(1.5)],
            "argument 0",
        )
        .of_kind("argument")]
    })
}

fn elementwise_more() -> Vec<OpInfo> {
    vec![
        OpInfo::new(
            "ltorch.where",
            ALL,
            Box::new(|g: &mut Gen, d| {
                let c = DType::Bool;
                vec![
                    s(
                        "2-D",
                        vec![g.t(&[2, 3], c), g.t(&[2, 3], d), g.t(&[2, 3], d)],
                    ),
                    s("0-d", vec![g.t(&[], c), g.t(&[], d), g.t(&[], d)]),
                    s("empty", vec![g.t(&[0], c), g.t(&[0], d), g.t(&[0], d)]),
                    s(
                        "broadcast",
                        vec![g.t(&[2, 1], c), g.t(&[3], d), g.t(&[2, 3], d)],
                    ),
                    s(
                        "transposed branch",
                        vec![g.t(&[3, 4], c), g.nc(&[3, 4], d), g.t(&[3, 4], d)],
                    ),
                    s(
                        "scalar branch",
                        vec![g.t(&[2, 3], c), g.t(&[2, 3], d), scalar_like(d)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "shapes do not broadcast",
                vec![g.t(&[2], DType::Bool), f32t(g, &[3]), f32t(g, &[3])],
                "shapes [2] and [3] and [3] cannot be broadcast",
            )]
        })),
        OpInfo::new(
            "ltorch.to",
            ALL,
            Box::new(|g: &mut Gen, d| {
                let mut v: Vec<Sample> = [
                    DType::Bool,
                    DType::U8,
                    DType::I32,
                    DType::I64,
                    DType::F16,
                    DType::BF16,
                    DType::F32,
                    DType::F64,
                ]
                .into_iter()
                .map(|to| {
                    s(
                        &format!("to {}", to.short_name()),
                        vec![g.td(&[2, 3], d, Domain::Small), dtype(to)],
                    )
                })
                .collect();
                v.push(s("0-d", vec![g.t(&[], d), dtype(DType::F32)]));
                v.push(s("empty", vec![g.t(&[0], d), dtype(DType::I64)]));
                v.push(s(
                    "transposed",
                    vec![g.ncd(&[3, 4], d, Domain::Small), dtype(DType::F64)],
                ));
                v
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "not a dtype",
                vec![f32t(g, &[2]), string("f32")],
                "argument 1 must be a dtype",
            )]
        })),
        OpInfo::new("ltorch.gelu", FLOATS, gelu_samples())
            .tol(Tol::Smooth)
            .errors(Box::new(|g: &mut Gen| {
                vec![e(
                    "unknown approximation",
                    vec![
                        f32t(g, &[2]),
                        string("approximate must be \"none\" or \"tanh\", got \"fast\""),
                    ],
                    "fast",
                )]
            })),
        OpInfo::new(
            "ltorch.softplus",
            FLOATS,
            with_unary_tail(Domain::Any, |_| vec![float(1.0), float(20.0)]),
        )
        .tol(Tol::Smooth),
        OpInfo::new(
            "ltorch.leaky_relu",
            FLOATS,
            with_unary_tail(Domain::Any, |_| vec![float(0.01)]),
        ),
        OpInfo::new(
            "ltorch.clamp",
            NUMERIC,
            with_unary_tail(Domain::Any, |_| vec![int(-1), int(1)]),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "bounds do not broadcast",
                vec![f32t(g, &[2, 3]), f32t(g, &[4]), none()],
                "shapes [2, 3] and [4] cannot be broadcast",
            )]
        })),
        OpInfo::new(
            "ltorch.masked_fill",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "2-D",
                        vec![g.t(&[2, 3], d), g.t(&[2, 3], DType::Bool), scalar_like(d)],
                    ),
                    s(
                        "broadcast mask",
                        vec![g.t(&[2, 3], d), g.t(&[3], DType::Bool), scalar_like(d)],
                    ),
                    s(
                        "empty",
                        vec![g.t(&[0, 3], d), g.t(&[0, 3], DType::Bool), scalar_like(d)],
                    ),
                    s(
                        "transposed",
                        vec![g.nc(&[3, 4], d), g.t(&[3, 4], DType::Bool), scalar_like(d)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "float mask",
                vec![f32t(g, &[2]), f32t(g, &[2]), float(0.0)],
                "mask must be b8, got f32",
            )]
        })),
        OpInfo::new(
            "ltorch.full_like",
            ALL,
            with_unary_tail(Domain::Any, |d| vec![scalar_like(d)]),
        ),
        polygamma(),
        tri("tril"),
        tri("triu"),
    ]
}

/// `op(a, tail...)`: the unary family's shapes with extra literal arguments.
fn with_unary_tail(domain: Domain, tail: fn(DType) -> Vec<SArg>) -> SampleFn {
    let base = unary(domain);
    Box::new(move |g: &mut Gen, d| {
        base(g, d)
            .into_iter()
            .map(|mut smp| {
                smp.args.extend(tail(d));
                smp
            })
            .collect()
    })
}

/// gelu: the unary shapes with `approximate="none"`, then again with `"tanh"`.
fn gelu_samples() -> SampleFn {
    let base = unary(Domain::Any);
    Box::new(move |g: &mut Gen, d| {
        let mut v = Vec::new();
        for approx in ["none", "tanh"] {
            for mut smp in base(g, d) {
                smp.args.push(string(approx));
                smp.note = format!("{}, approximate={approx}", smp.note);
                v.push(smp);
            }
        }
        v
    })
}

/// polygamma(n, a): orders 0 and 1 (the ones with prims).
fn polygamma() -> OpInfo {
    let base = unary(Domain::Pos);
    OpInfo::new(
        "ltorch.polygamma",
        ALL,
        Box::new(move |g: &mut Gen, d| {
            let mut v = Vec::new();
            for n in [0, 1] {
                for mut smp in base(g, d) {
                    smp.args.insert(0, int(n));
                    smp.note = format!("n = {n}, {}", smp.note);
                    v.push(smp);
                }
            }
            v
        }),
    )
    .tol(Tol::Smooth)
    .errors(Box::new(|g: &mut Gen| {
        vec![e(
            "order 2",
            vec![int(2), f32t(g, &[2])],
            "argument 0 (n = 2) must be 0 or 1",
        )]
    }))
}

fn tri(name: &'static str) -> OpInfo {
    OpInfo::new(
        &id(name),
        ALL,
        Box::new(|g: &mut Gen, d| {
            vec![
                s("diagonal 0", vec![g.t(&[3, 4], d), int(0)]),
                s("diagonal 1", vec![g.t(&[4, 3], d), int(1)]),
                s("diagonal -1, batched", vec![g.t(&[2, 3, 3], d), int(-1)]),
                s("empty", vec![g.t(&[0, 3], d), int(0)]),
                s("transposed", vec![g.nc(&[3, 4], d), int(0)]),
            ]
        }),
    )
    .errors(Box::new(|g: &mut Gen| {
        vec![e(
            "1-D input",
            vec![f32t(g, &[3]), int(0)],
            "expected a tensor with at least 2 dims, got [3]",
        )]
    }))
}

fn shape_ops() -> Vec<OpInfo> {
    vec![
        OpInfo::new(
            "ltorch.reshape",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("[2, 3] to [3, -1]", vec![g.t(&[2, 3], d), ints(&[3, -1])]),
                    s("0-d to [1]", vec![g.t(&[], d), ints(&[1])]),
                    s("empty", vec![g.t(&[0, 3], d), ints(&[3, 0])]),
                    s("transposed to [-1]", vec![g.nc(&[3, 4], d), ints(&[-1])]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![
                e(
                    "element count",
                    vec![f32t(g, &[2, 3]), ints(&[4])],
                    "6 elements",
                ),
                e(
                    "two -1",
                    vec![f32t(g, &[2, 3]), ints(&[-1, -1])],
                    "only one dimension can be inferred",
                ),
            ]
        })),
        OpInfo::new(
            "ltorch.transpose",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("[2, 3]", vec![g.t(&[2, 3], d), int(0), int(1)]),
                    s(
                        "3-D, negative dims",
                        vec![g.t(&[2, 3, 4], d), int(-1), int(0)],
                    ),
                    s("0-d", vec![g.t(&[], d), int(0), int(-1)]),
                    s(
                        "of a transposed view",
                        vec![g.nc(&[3, 4], d), int(0), int(1)],
                    ),
                ]
            }),
        )
        .errors(dim_range_error(|g| vec![f32t(g, &[2, 3]), int(0), int(2)])),
        OpInfo::new(
            "ltorch.permute",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("3-D", vec![g.t(&[2, 3, 2], d), ints(&[1, 0, 2])]),
                    s("negative dims", vec![g.t(&[2, 3, 4], d), ints(&[-1, 0, 1])]),
                    s("0-d", vec![g.t(&[], d), ints(&[])]),
                    s("transposed", vec![g.nc(&[3, 4], d), ints(&[1, 0])]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "repeated dim",
                vec![f32t(g, &[2, 3]), ints(&[0, 0])],
                "[0, 0] is not a permutation",
            )]
        })),
        OpInfo::new(
            "ltorch.unsqueeze",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("dim 0", vec![g.t(&[2, 3], d), int(0)]),
                    s("dim -1", vec![g.t(&[2, 3], d), int(-1)]),
                    s("0-d", vec![g.t(&[], d), int(0)]),
                    s("transposed", vec![g.nc(&[3, 4], d), int(1)]),
                ]
            }),
        )
        .errors(dim_range_error(|g| vec![f32t(g, &[2, 3]), int(3)])),
        OpInfo::new(
            "ltorch.expand",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("[3] to [2, 3]", vec![g.t(&[3], d), ints(&[2, 3])]),
                    s("-1 keeps a dim", vec![g.t(&[2, 1], d), ints(&[-1, 4])]),
                    s("0-d", vec![g.t(&[], d), ints(&[2])]),
                    s("to empty", vec![g.t(&[1], d), ints(&[0])]),
                    s("transposed", vec![g.nc(&[3, 1], d), ints(&[2, 3, 1])]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "size 2 to 3",
                vec![f32t(g, &[2]), ints(&[3])],
                "cannot broadcast [2] to [3]",
            )]
        })),
        OpInfo::new(
            "ltorch.flatten",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("all dims", vec![g.t(&[2, 3, 4], d), int(0), int(-1)]),
                    s("middle", vec![g.t(&[2, 3, 4], d), int(1), int(2)]),
                    s("0-d", vec![g.t(&[], d), int(0), int(-1)]),
                    s("transposed", vec![g.nc(&[3, 4], d), int(0), int(1)]),
                ]
            }),
        )
        .errors(dim_range_error(|g| vec![f32t(g, &[2, 3]), int(0), int(5)])),
        OpInfo::new(
            "ltorch.squeeze",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("all size-1 dims", vec![g.t(&[1, 3, 1], d), none()]),
                    s("one dim", vec![g.t(&[1, 3, 1], d), ints(&[2])]),
                    s("0-d", vec![g.t(&[], d), none()]),
                    s("empty", vec![g.t(&[0, 1], d), ints(&[1])]),
                ]
            }),
        )
        .errors(dim_range_error(|g| vec![f32t(g, &[1, 3]), ints(&[2])])),
        OpInfo::new(
            "ltorch.t",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("2-D", vec![g.t(&[2, 3], d)]),
                    s("1-D", vec![g.t(&[3], d)]),
                    s("0-d", vec![g.t(&[], d)]),
                    s("transposed", vec![g.nc(&[3, 4], d)]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "3-D input",
                vec![f32t(g, &[2, 3, 4])],
                "expects a tensor with <= 2 dims, got 3 dims",
            )]
        })),
        OpInfo::new(
            "ltorch.unflatten",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "dim 1 to [3, 4]",
                        vec![g.t(&[2, 12], d), int(1), ints(&[3, 4])],
                    ),
                    s("with -1", vec![g.t(&[6], d), int(0), ints(&[-1, 2])]),
                    s("transposed", vec![g.nc(&[4, 3], d), int(0), ints(&[2, 2])]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "sizes do not multiply",
                vec![f32t(g, &[2, 12]), int(1), ints(&[5, 2])],
                "sizes [5, 2] do not multiply to dim 1's size 12",
            )]
        })),
    ]
}

pub(crate) fn dim_range_error(args: fn(&mut Gen) -> Vec<SArg>) -> ErrorFn {
    // torch's wording, from clang::canonical_dim.
    Box::new(move |g: &mut Gen| vec![e("dim out of range", args(g), "dimension out of range")])
}

fn factories() -> Vec<OpInfo> {
    vec![
        OpInfo::new(
            "ltorch.full",
            ALL,
            Box::new(|_g: &mut Gen, d| {
                vec![
                    s(
                        "[2, 3]",
                        vec![ints(&[2, 3]), scalar_like(d), cpu(), dtype(d)],
                    ),
                    s("0-d", vec![ints(&[]), scalar_like(d), cpu(), dtype(d)]),
                    s("empty", vec![ints(&[0]), scalar_like(d), cpu(), dtype(d)]),
                ]
            }),
        )
        .errors(Box::new(|_g: &mut Gen| {
            vec![e(
                "negative size",
                vec![ints(&[-1]), float(0.0), cpu(), dtype(DType::F32)],
                "shape [-1] has a negative dimension",
            )]
        })),
        ones_zeros("zeros"),
        ones_zeros("ones"),
        OpInfo::new(
            "ltorch.arange",
            NUMERIC,
            Box::new(|_g: &mut Gen, d| {
                vec![
                    s("0..5", vec![int(0), int(5), int(1), cpu(), dtype(d)]),
                    s("1..8 step 3", vec![int(1), int(8), int(3), cpu(), dtype(d)]),
                    s("empty", vec![int(3), int(3), int(1), cpu(), dtype(d)]),
                ]
            }),
        )
        .errors(Box::new(|_g: &mut Gen| {
            vec![e(
                "step 0",
                vec![int(0), int(5), int(0), cpu(), dtype(DType::I64)],
                "step must be nonzero",
            )]
        })),
    ]
}

fn ones_zeros(name: &'static str) -> OpInfo {
    OpInfo::new(
        &id(name),
        ALL,
        Box::new(|_g: &mut Gen, d| {
            vec![
                s("[2, 3]", vec![ints(&[2, 3]), cpu(), dtype(d)]),
                s("0-d", vec![ints(&[]), cpu(), dtype(d)]),
                s("empty", vec![ints(&[2, 0]), cpu(), dtype(d)]),
            ]
        }),
    )
    .errors(Box::new(|_g: &mut Gen| {
        vec![e(
            "negative size",
            vec![ints(&[-2]), cpu(), dtype(DType::F32)],
            "shape [-2] has a negative dimension",
        )]
    }))
}
