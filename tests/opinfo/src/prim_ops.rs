//! OpInfo rows for the prims (`thunder-abi/src/prims.rs`). Prims neither broadcast nor
//! promote, so their binary samples pair equal shapes and dtypes; stride-0 inputs come from an
//! expand in front of the prim.

use crate::families::*;
use crate::lit::*;
use crate::{Domain, ErrorCase, ErrorFn, Gen, OpInfo, Sample, Tol};
use thunder_abi::prims::{BinaryPrim, ComparePrim, PredicatePrim, UnaryPrim};
use thunder_core::DType;

/// The dtypes a binary prim's row of the elementwise table defines it on.
fn binary_dtypes(p: BinaryPrim) -> Vec<DType> {
    let rule = p.rule();
    DType::ALL
        .into_iter()
        .filter(|&d| match d {
            DType::Bool => rule.supports_bool(),
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => rule.supports_float(),
            DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => rule.supports_int(),
        })
        .collect()
}

fn id(name: &str) -> String {
    format!("prims.{name}")
}

pub fn entries() -> Vec<OpInfo> {
    let mut t = Vec::new();
    // The elementwise prims come from the elementwise table: a new row is sampled here with
    // no edit, on the dtypes and inside the domain the row declares.
    for p in UnaryPrim::ALL.iter().filter(|p| p.rule().supports_int()) {
        t.push(
            OpInfo::new(p.id(), NUMERIC, unary(p.rule().domain)).errors(Box::new(|g: &mut Gen| {
                vec![ErrorCase::new(
                    "bool input",
                    vec![g.t(&[2], DType::Bool)],
                    "does not support dtype b8",
                )
                .of_kind("dtype")]
            })),
        );
    }
    for p in UnaryPrim::ALL.iter().filter(|p| !p.rule().supports_int()) {
        t.push(
            OpInfo::new(p.id(), FLOATS, unary(p.rule().domain)).errors(prim_float_unary_errors()),
        );
    }
    for p in PredicatePrim::ALL {
        t.push(
            OpInfo::new(p.id(), FLOATS, unary(Domain::Any))
                .errors(arity_error("expected 1 arguments")),
        );
    }
    for &p in BinaryPrim::ALL {
        let (da, db) = p.rule().domain;
        t.push(
            OpInfo::new(p.id(), &binary_dtypes(p), binary(da, db, false))
                .errors(prim_binary_errors()),
        );
    }
    for p in ComparePrim::ALL {
        t.push(
            OpInfo::new(p.id(), ALL, binary(Domain::Any, Domain::Any, false))
                .errors(prim_binary_errors()),
        );
    }
    t.push(
        OpInfo::new(
            "prims.where",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "2-D",
                        vec![g.t(&[2, 3], DType::Bool), g.t(&[2, 3], d), g.t(&[2, 3], d)],
                    ),
                    Sample::new("0-d", vec![g.t(&[], DType::Bool), g.t(&[], d), g.t(&[], d)]),
                    Sample::new(
                        "empty",
                        vec![g.t(&[0], DType::Bool), g.t(&[0], d), g.t(&[0], d)],
                    ),
                    Sample::new(
                        "transposed condition and branch",
                        vec![
                            g.nc(&[3, 4], DType::Bool),
                            g.nc(&[3, 4], d),
                            g.t(&[3, 4], d),
                        ],
                    ),
                    Sample::new(
                        "scalar branch",
                        vec![g.t(&[2, 3], DType::Bool), g.t(&[2, 3], d), scalar_like(d)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![ErrorCase::new(
                "non-bool condition",
                vec![
                    g.t(&[2], DType::F32),
                    g.t(&[2], DType::F32),
                    g.t(&[2], DType::F32),
                ],
                "condition must be b8",
            )]
        })),
    );
    t.push(
        OpInfo::new(
            "prims.convert_element_type",
            ALL,
            Box::new(|g: &mut Gen, d| {
                // Non-negative values: a negative float to u8 is undefined behaviour in C++,
                // so PyTorch's result is not a reference there.
                let mut s: Vec<Sample> = [
                    DType::F32,
                    DType::I64,
                    DType::Bool,
                    DType::F16,
                    DType::U8,
                    DType::BF16,
                ]
                .into_iter()
                .map(|to| {
                    Sample::new(
                        format!("to {}", to.short_name()),
                        vec![g.td(&[2, 3], d, Domain::Small), dtype(to)],
                    )
                })
                .collect();
                s.push(Sample::new(
                    "0-d to f64",
                    vec![g.t(&[], d), dtype(DType::F64)],
                ));
                s.push(Sample::new(
                    "empty to i32",
                    vec![g.t(&[0], d), dtype(DType::I32)],
                ));
                s.push(Sample::new(
                    "transposed to f32",
                    vec![g.nc(&[3, 4], d), dtype(DType::F32)],
                ));
                s
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![ErrorCase::new(
                "dtype argument is not a dtype",
                vec![g.t(&[2], DType::F32), int(3)],
                "argument 1 must be a dtype",
            )]
        })),
    );
    t.push(
        OpInfo::new(
            "prims.broadcast_in_dim",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "[3] to [2, 3]",
                        vec![g.t(&[3], d), ints(&[2, 3]), ints(&[1])],
                    ),
                    Sample::new(
                        "[2, 1] to [2, 4]",
                        vec![g.t(&[2, 1], d), ints(&[2, 4]), ints(&[0, 1])],
                    ),
                    Sample::new("0-d to [2]", vec![g.t(&[], d), ints(&[2]), ints(&[])]),
                    Sample::new("[1] to [0]", vec![g.t(&[1], d), ints(&[0]), ints(&[0])]),
                    Sample::new(
                        "transposed [3, 1] to [2, 3, 4]",
                        vec![g.nc(&[3, 1], d), ints(&[2, 3, 4]), ints(&[1, 2])],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![
                ErrorCase::new(
                    "size 2 to 3",
                    vec![g.t(&[2], DType::F32), ints(&[3]), ints(&[0])],
                    "cannot broadcast [2] to [3]",
                ),
                ErrorCase::new(
                    "too few dims",
                    vec![g.t(&[2, 3], DType::F32), ints(&[2, 3]), ints(&[0])],
                    "broadcast_dims [0] must name one output dim per input dim",
                ),
            ]
        })),
    );
    t.push(
        OpInfo::new(
            "prims.reshape",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new("[2, 3] to [3, 2]", vec![g.t(&[2, 3], d), ints(&[3, 2])]),
                    Sample::new("0-d to [1, 1]", vec![g.t(&[], d), ints(&[1, 1])]),
                    Sample::new("empty", vec![g.t(&[0], d), ints(&[0, 3])]),
                    Sample::new(
                        "transposed [3, 4] to [12]",
                        vec![g.nc(&[3, 4], d), ints(&[12])],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![
                ErrorCase::new(
                    "element count",
                    vec![g.t(&[2, 3], DType::F32), ints(&[4])],
                    "cannot reshape [2, 3]",
                ),
                ErrorCase::new(
                    "negative dim",
                    vec![g.t(&[2, 3], DType::F32), ints(&[-1, 6])],
                    "negative dimension",
                ),
            ]
        })),
    );
    t.push(
        OpInfo::new(
            "prims.transpose",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new("[2, 3]", vec![g.t(&[2, 3], d), ints(&[1, 0])]),
                    Sample::new("3-D", vec![g.t(&[2, 3, 4], d), ints(&[2, 0, 1])]),
                    Sample::new("0-d", vec![g.t(&[], d), ints(&[])]),
                    Sample::new("empty", vec![g.t(&[0, 2], d), ints(&[1, 0])]),
                    Sample::new(
                        "of a transposed view",
                        vec![g.nc(&[3, 4], d), ints(&[1, 0])],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![ErrorCase::new(
                "not a permutation",
                vec![g.t(&[2, 3], DType::F32), ints(&[0, 0])],
                "is not a permutation",
            )]
        })),
    );
    let mut idx = indexing();
    for info in &mut idx {
        if let Some(errors) = index_run_errors(&info.id) {
            info.errors = errors;
        }
    }
    t.extend(idx);
    t.extend(reductions());
    t.push(
        OpInfo::new(
            "prims.matmul",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new("[2, 3] @ [3, 4]", vec![g.t(&[2, 3], d), g.t(&[3, 4], d)]),
                    Sample::new("batched", vec![g.t(&[2, 2, 3], d), g.t(&[2, 3, 2], d)]),
                    Sample::new("k = 0", vec![g.t(&[2, 0], d), g.t(&[0, 3], d)]),
                    Sample::new("transposed lhs", vec![g.nc(&[3, 4], d), g.t(&[4, 2], d)]),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![
                ErrorCase::new(
                    "inner dims",
                    vec![g.t(&[2, 3], DType::F32), g.t(&[4, 5], DType::F32)],
                    "3 != 4",
                ),
                ErrorCase::new(
                    "rank 1",
                    vec![g.t(&[3], DType::F32), g.t(&[3], DType::F32)],
                    "rank >= 2",
                ),
            ]
        })),
    );
    t.push(
        OpInfo::new(
            "prims.full",
            ALL,
            Box::new(|_g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "[2, 3]",
                        vec![ints(&[2, 3]), scalar_like(d), cpu(), dtype(d)],
                    ),
                    Sample::new("0-d", vec![ints(&[]), scalar_like(d), cpu(), dtype(d)]),
                    Sample::new(
                        "empty",
                        vec![ints(&[0, 2]), scalar_like(d), cpu(), dtype(d)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|_g: &mut Gen| {
            vec![ErrorCase::new(
                "negative dim",
                vec![ints(&[-2]), float(1.0), cpu(), dtype(DType::F32)],
                "negative dimension",
            )]
        })),
    );
    t.push(
        OpInfo::new(
            "prims.iota",
            NUMERIC,
            Box::new(|_g: &mut Gen, d| {
                vec![
                    Sample::new("5 from 0", vec![int(5), int(0), int(1), cpu(), dtype(d)]),
                    Sample::new(
                        "4 from 1 step 2",
                        vec![int(4), int(1), int(2), cpu(), dtype(d)],
                    ),
                    Sample::new("empty", vec![int(0), int(0), int(1), cpu(), dtype(d)]),
                ]
            }),
        )
        .errors(Box::new(|_g: &mut Gen| {
            vec![ErrorCase::new(
                "negative length",
                vec![int(-1), int(0), int(1), cpu(), dtype(DType::I64)],
                "length must be >= 0",
            )]
        })),
    );
    t
}

fn indexing() -> Vec<OpInfo> {
    vec![
        OpInfo::new(
            "prims.slice",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "rows 1..3, every other column",
                        vec![g.t(&[4, 5], d), ints(&[1, 0]), ints(&[3, 5]), ints(&[1, 2])],
                    ),
                    Sample::new(
                        "empty result",
                        vec![g.t(&[4], d), ints(&[2]), ints(&[2]), ints(&[1])],
                    ),
                    Sample::new("0-d", vec![g.t(&[], d), ints(&[]), ints(&[]), ints(&[])]),
                    Sample::new(
                        "transposed",
                        vec![
                            g.nc(&[3, 4], d),
                            ints(&[0, 1]),
                            ints(&[3, 4]),
                            ints(&[2, 1]),
                        ],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![ErrorCase::new(
                "end past the size",
                vec![g.t(&[4], DType::F32), ints(&[0]), ints(&[5]), ints(&[1])],
                "end (5) <= 4",
            )]
        })),
        OpInfo::new(
            "prims.pad",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "low, high and interior",
                        vec![g.t(&[2, 3], d), scalar_like(d), ints(&[1, 0, 0, 0, 2, 1])],
                    ),
                    Sample::new(
                        "negative low",
                        vec![g.t(&[4], d), scalar_like(d), ints(&[-1, 1, 0])],
                    ),
                    Sample::new(
                        "empty input",
                        vec![g.t(&[0], d), scalar_like(d), ints(&[1, 1, 0])],
                    ),
                    Sample::new(
                        "transposed",
                        vec![g.nc(&[3, 2], d), scalar_like(d), ints(&[0, 1, 0, 1, 0, 0])],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![ErrorCase::new(
                "config of the wrong length",
                vec![g.t(&[2, 3], DType::F32), float(0.0), ints(&[1, 1, 0])],
                "config [1, 1, 0] must hold (low, high, interior) for each of the 2 dims",
            )]
        })),
        OpInfo::new(
            "prims.cat",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new("dim 0", vec![int(0), g.t(&[2, 3], d), g.t(&[1, 3], d)]),
                    Sample::new(
                        "dim 1, with an empty part",
                        vec![int(1), g.t(&[2, 3], d), g.t(&[2, 0], d), g.t(&[2, 1], d)],
                    ),
                    Sample::new("one tensor", vec![int(0), g.t(&[3], d)]),
                    Sample::new(
                        "transposed part",
                        vec![int(0), g.nc(&[3, 4], d), g.t(&[1, 4], d)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![ErrorCase::new(
                "sizes differ off the dim",
                vec![int(0), g.t(&[2, 3], DType::F32), g.t(&[2, 4], DType::F32)],
                "tensor 1 has shape [2, 4] but tensor 0 has [2, 3]",
            )]
        })),
        OpInfo::new(
            "prims.flip",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new("both dims", vec![g.t(&[2, 3], d), ints(&[0, 1])]),
                    Sample::new("0-d", vec![g.t(&[], d), ints(&[])]),
                    Sample::new("empty", vec![g.t(&[0], d), ints(&[0])]),
                    Sample::new("transposed, dim 1", vec![g.nc(&[3, 4], d), ints(&[1])]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![ErrorCase::new(
                "dim out of range",
                vec![g.t(&[2, 3], DType::F32), ints(&[2])],
                "dims [2] must be distinct and in [0, 2)",
            )]
        })),
        OpInfo::new(
            "prims.take",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new("rows", vec![g.t(&[4, 3], d), g.index(&[5], 4), int(0)]),
                    Sample::new("columns", vec![g.t(&[2, 3], d), g.index(&[2], 3), int(1)]),
                    Sample::new("empty index", vec![g.t(&[4], d), g.index(&[0], 4), int(0)]),
                    Sample::new(
                        "transposed source",
                        vec![g.nc(&[3, 4], d), g.index(&[3], 4), int(1)],
                    ),
                ]
            }),
        ),
        OpInfo::new(
            "prims.take_along_axis",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new("dim 1", vec![g.t(&[2, 4], d), g.index(&[2, 3], 4), int(1)]),
                    Sample::new("dim 0", vec![g.t(&[3, 2], d), g.index(&[2, 2], 3), int(0)]),
                    Sample::new(
                        "transposed source",
                        vec![g.nc(&[3, 4], d), g.index(&[3, 2], 4), int(1)],
                    ),
                ]
            }),
        ),
        OpInfo::new(
            "prims.scatter_add",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "dim 1",
                        vec![
                            g.t(&[2, 4], d),
                            g.index(&[2, 3], 4),
                            g.t(&[2, 3], d),
                            int(1),
                        ],
                    ),
                    Sample::new(
                        "dim 0",
                        vec![
                            g.t(&[3, 2], d),
                            g.index(&[4, 2], 3),
                            g.t(&[4, 2], d),
                            int(0),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum),
        OpInfo::new(
            "prims.index_add",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "dim 0",
                        vec![g.t(&[4, 3], d), g.index(&[5], 4), g.t(&[5, 3], d), int(0)],
                    ),
                    Sample::new(
                        "dim 1",
                        vec![g.t(&[2, 3], d), g.index(&[2], 3), g.t(&[2, 2], d), int(1)],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum),
    ]
}

/// Indices out of range: only the values say so, so running must refuse them.
pub(crate) fn index_run_errors(id: &str) -> Option<ErrorFn> {
    let id = id.to_string();
    let f32t = |g: &mut Gen, shape: &[i64]| g.t(shape, DType::F32);
    let idx = |g: &mut Gen, v: &[f64], shape: &[i64]| g.values(v, shape, DType::I64);
    Some(match id.as_str() {
        "prims.take" => Box::new(move |g: &mut Gen| {
            vec![ErrorCase::at_run(
                "index 7 of 4",
                vec![f32t(g, &[4]), idx(g, &[1.0, 7.0], &[2]), int(0)],
                "prims.take: index 7 is out of bounds",
            )]
        }),
        "prims.take_along_axis" => Box::new(move |g: &mut Gen| {
            vec![ErrorCase::at_run(
                "index 9 of 4",
                vec![f32t(g, &[2, 4]), idx(g, &[0.0, 9.0], &[2, 1]), int(1)],
                "prims.take_along_axis: index 9 is out of bounds",
            )]
        }),
        "prims.scatter_add" => Box::new(move |g: &mut Gen| {
            vec![ErrorCase::at_run(
                "index 5 of 4",
                vec![
                    f32t(g, &[2, 4]),
                    idx(g, &[5.0, 0.0], &[2, 1]),
                    f32t(g, &[2, 1]),
                    int(1),
                ],
                "prims.scatter_add: index 5 is out of bounds",
            )]
        }),
        "prims.index_add" => Box::new(move |g: &mut Gen| {
            vec![ErrorCase::at_run(
                "negative index",
                vec![
                    f32t(g, &[4, 3]),
                    idx(g, &[-1.0], &[1]),
                    f32t(g, &[1, 3]),
                    int(0),
                ],
                "prims.index_add: index -1 is out of bounds",
            )]
        }),
        _ => return None,
    })
}

fn reductions() -> Vec<OpInfo> {
    let mut t = vec![
        OpInfo::new("prims.sum", NUMERIC, reduction(false, Domain::Any))
            .tol(Tol::Accum)
            .errors(reduction_errors(false)),
        OpInfo::new("prims.prod", NUMERIC, reduction(false, Domain::Any))
            .tol(Tol::Accum)
            .errors(reduction_errors(false)),
        OpInfo::new("prims.amax", ALL, reduction(false, Domain::Any))
            .errors(reduction_errors(false)),
        OpInfo::new("prims.amin", ALL, reduction(false, Domain::Any))
            .errors(reduction_errors(false)),
    ];
    for name in ["argmax", "argmin"] {
        t.push(
            OpInfo::new(
                &id(name),
                ALL,
                Box::new(|g: &mut Gen, d| {
                    vec![
                        Sample::new("dim 1", vec![g.distinct(&[2, 3], d), int(1)]),
                        Sample::new("dim 0", vec![g.distinct(&[3, 2], d), int(0)]),
                        Sample::new("empty rows", vec![g.distinct(&[0, 3], d), int(1)]),
                    ]
                }),
            )
            .errors(Box::new(|g: &mut Gen| {
                vec![ErrorCase::new(
                    "dim out of range",
                    vec![g.t(&[2, 3], DType::F32), int(2)],
                    "out of range",
                )]
            })),
        );
    }
    t.push(
        OpInfo::new(
            "prims.var_mean",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "dim 1, correction 1",
                        vec![g.t(&[3, 4], d), ints(&[1]), int(1)],
                    ),
                    Sample::new(
                        "all dims, correction 0",
                        vec![g.t(&[2, 3], d), ints(&[0, 1]), int(0)],
                    ),
                    Sample::new("transposed", vec![g.nc(&[3, 4], d), ints(&[0]), int(1)]),
                ]
            }),
        )
        .tol(Tol::Smooth),
    );
    t.push(
        OpInfo::new(
            "prims.cumsum",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new("dim 1", vec![g.t(&[2, 4], d), int(1)]),
                    Sample::new("empty", vec![g.t(&[0], d), int(0)]),
                    Sample::new("transposed, dim 0", vec![g.nc(&[3, 4], d), int(0)]),
                ]
            }),
        )
        .tol(Tol::Accum),
    );
    t.push(OpInfo::new(
        "prims.topk",
        ALL,
        Box::new(|g: &mut Gen, d| {
            vec![
                Sample::new(
                    "k 2 largest",
                    vec![
                        g.distinct(&[2, 5], d),
                        int(2),
                        int(1),
                        boolean(true),
                        boolean(true),
                    ],
                ),
                Sample::new(
                    "k 3 smallest, dim 0",
                    vec![
                        g.distinct(&[4, 2], d),
                        int(3),
                        int(0),
                        boolean(false),
                        boolean(true),
                    ],
                ),
                Sample::new(
                    "k 0",
                    vec![
                        g.distinct(&[3], d),
                        int(0),
                        int(0),
                        boolean(true),
                        boolean(true),
                    ],
                ),
            ]
        }),
    ));
    t.push(OpInfo::new(
        "prims.sort",
        ALL,
        Box::new(|g: &mut Gen, d| {
            vec![
                Sample::new(
                    "ascending",
                    vec![
                        g.distinct(&[2, 5], d),
                        int(1),
                        boolean(false),
                        boolean(true),
                    ],
                ),
                Sample::new(
                    "descending, dim 0",
                    vec![g.distinct(&[4, 2], d), int(0), boolean(true), boolean(true)],
                ),
                Sample::new(
                    "empty",
                    vec![g.distinct(&[0], d), int(0), boolean(false), boolean(true)],
                ),
            ]
        }),
    ));
    t.push(
        OpInfo::new(
            "prims.convolution",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "1-D with bias",
                        vec![
                            g.t(&[1, 2, 5], d),
                            g.t(&[3, 2, 2], d),
                            g.t(&[3], d),
                            ints(&[1]),
                            ints(&[0]),
                            ints(&[1]),
                            int(1),
                        ],
                    ),
                    Sample::new(
                        "2-D, stride 2, padding 1, groups 2",
                        vec![
                            g.t(&[2, 2, 4, 4], d),
                            g.t(&[2, 1, 3, 3], d),
                            none(),
                            ints(&[2, 1]),
                            ints(&[1, 1]),
                            ints(&[1, 1]),
                            int(2),
                        ],
                    ),
                    Sample::new(
                        "1-D dilation 2",
                        vec![
                            g.t(&[1, 1, 6], d),
                            g.t(&[1, 1, 2], d),
                            none(),
                            ints(&[1]),
                            ints(&[0]),
                            ints(&[2]),
                            int(1),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum),
    );
    t
}
