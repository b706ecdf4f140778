//! OpInfo rows for ltorch's reductions, normalizations, losses, attention and matmuls.

use crate::families::*;
use crate::lit::*;
use crate::ltorch_ops::{dim_range_error, e, f32t, id, s};
use crate::{Domain, Gen, OpInfo, Tol};
use thunder_core::DType;

pub(crate) fn reductions() -> Vec<OpInfo> {
    let mut t = vec![
        OpInfo::new("ltorch.sum", ALL, reduction(true, Domain::Any))
            .tol(Tol::Accum)
            .errors(reduction_errors(true)),
        OpInfo::new("ltorch.amax", ALL, reduction(true, Domain::Any))
            .errors(reduction_errors(true)),
        OpInfo::new("ltorch.amin", ALL, reduction(true, Domain::Any))
            .errors(reduction_errors(true)),
        OpInfo::new("ltorch.mean", FLOATS, reduction(true, Domain::Any))
            .tol(Tol::Accum)
            .errors(reduction_errors(true)),
        OpInfo::new("ltorch.all", ALL, reduction(true, Domain::Any)).errors(reduction_errors(true)),
        OpInfo::new("ltorch.any", ALL, reduction(true, Domain::Any)).errors(reduction_errors(true)),
    ];
    for name in ["var", "std", "var_mean"] {
        t.push(
            OpInfo::new(
                &id(name),
                FLOATS,
                Box::new(|g: &mut Gen, d| {
                    vec![
                        s(
                            "dim 1, correction 1",
                            vec![g.t(&[3, 4], d), ints(&[1]), int(1), boolean(false)],
                        ),
                        s(
                            "all dims, correction 0, keepdim",
                            vec![g.t(&[2, 3], d), none(), int(0), boolean(true)],
                        ),
                        s(
                            "transposed, dim 0",
                            vec![g.nc(&[3, 4], d), ints(&[0]), int(1), boolean(false)],
                        ),
                    ]
                }),
            )
            .tol(Tol::Smooth)
            .errors(Box::new(|g: &mut Gen| {
                vec![e(
                    "dim out of range",
                    vec![f32t(g, &[2, 3]), ints(&[2]), int(1), boolean(false)],
                    "out of range",
                )]
            })),
        );
    }
    t.push(
        OpInfo::new(
            "ltorch.norm",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "p 2, dim 1",
                        vec![g.t(&[3, 4], d), float(2.0), ints(&[1]), boolean(false)],
                    ),
                    s(
                        "p 1, all dims",
                        vec![g.t(&[2, 3], d), float(1.0), none(), boolean(false)],
                    ),
                    s(
                        "p inf, keepdim",
                        vec![
                            g.t(&[2, 3], d),
                            float(f64::INFINITY),
                            ints(&[0]),
                            boolean(true),
                        ],
                    ),
                    s(
                        "transposed",
                        vec![g.nc(&[3, 4], d), float(2.0), ints(&[0]), boolean(false)],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum),
    );
    t.push(
        OpInfo::new(
            "ltorch.prod",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "dim 1",
                        vec![g.td(&[2, 3], d, Domain::Unit), int(1), boolean(false)],
                    ),
                    s(
                        "everything",
                        vec![g.td(&[2, 3], d, Domain::Unit), none(), boolean(false)],
                    ),
                    s(
                        "0-d",
                        vec![g.td(&[], d, Domain::Unit), none(), boolean(false)],
                    ),
                    s(
                        "empty dim",
                        vec![g.td(&[2, 0], d, Domain::Unit), int(1), boolean(true)],
                    ),
                    s(
                        "transposed",
                        vec![g.ncd(&[3, 4], d, Domain::Unit), int(0), boolean(false)],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(dim_range_error(|g| {
            vec![f32t(g, &[2, 3]), int(2), boolean(false)]
        })),
    );
    for name in ["max", "min"] {
        t.push(
            OpInfo::new(
                &id(name),
                ALL,
                Box::new(|g: &mut Gen, d| {
                    vec![
                        s("everything", vec![g.t(&[2, 3], d), none(), boolean(false)]),
                        s(
                            "dim 1 (values and indices)",
                            vec![g.distinct(&[3, 4], d), int(1), boolean(false)],
                        ),
                        s(
                            "dim 0 keepdim",
                            vec![g.distinct(&[3, 2], d), int(0), boolean(true)],
                        ),
                    ]
                }),
            )
            .errors(dim_range_error(|g| {
                vec![f32t(g, &[2, 3]), int(2), boolean(false)]
            })),
        );
    }
    for name in ["argmax", "argmin"] {
        t.push(
            OpInfo::new(
                &id(name),
                NUMERIC,
                Box::new(|g: &mut Gen, d| {
                    vec![
                        s(
                            "dim 1",
                            vec![g.distinct(&[3, 4], d), int(1), boolean(false)],
                        ),
                        s(
                            "dim 0 keepdim",
                            vec![g.distinct(&[3, 2], d), int(0), boolean(true)],
                        ),
                        s(
                            "everything",
                            vec![g.distinct(&[2, 3], d), none(), boolean(false)],
                        ),
                    ]
                }),
            )
            .errors(dim_range_error(|g| {
                vec![f32t(g, &[2, 3]), int(2), boolean(false)]
            })),
        );
    }
    t.push(
        OpInfo::new(
            "ltorch.cumsum",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("dim 1", vec![g.t(&[2, 5], d), int(1), none()]),
                    s("0-d", vec![g.t(&[], d), int(0), none()]),
                    s("empty", vec![g.t(&[0], d), int(0), none()]),
                    s("transposed, dim 0", vec![g.nc(&[3, 4], d), int(0), none()]),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(dim_range_error(|g| vec![f32t(g, &[2, 3]), int(2), none()])),
    );
    t.push(
        OpInfo::new(
            "ltorch.topk",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "k 2 largest",
                        vec![
                            g.distinct(&[3, 5], d),
                            int(2),
                            int(-1),
                            boolean(true),
                            boolean(true),
                        ],
                    ),
                    s(
                        "k 1 smallest, dim 0",
                        vec![
                            g.distinct(&[4, 2], d),
                            int(1),
                            int(0),
                            boolean(false),
                            boolean(true),
                        ],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![
                e(
                    "k too large",
                    vec![f32t(g, &[3]), int(4), int(0), boolean(true), boolean(true)],
                    "argument 1 (k = 4) must be in [0, 3]",
                ),
                e(
                    "bool input",
                    vec![
                        g.t(&[3], DType::Bool),
                        int(1),
                        int(0),
                        boolean(true),
                        boolean(true),
                    ],
                    "argument 0 must not be b8",
                ),
            ]
        })),
    );
    t.push(
        OpInfo::new(
            "ltorch.sort",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "ascending",
                        vec![
                            g.distinct(&[3, 5], d),
                            int(-1),
                            boolean(false),
                            boolean(true),
                        ],
                    ),
                    s(
                        "descending, dim 0",
                        vec![g.distinct(&[4, 2], d), int(0), boolean(true), boolean(true)],
                    ),
                ]
            }),
        )
        .errors(dim_range_error(|g| {
            vec![f32t(g, &[2, 3]), int(2), boolean(false), boolean(true)]
        })),
    );
    t
}

pub(crate) fn nn_ops() -> Vec<OpInfo> {
    vec![
        OpInfo::new(
            "ltorch.softmax",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("last dim", vec![g.t(&[2, 3], d), int(-1)]),
                    s("dim 0", vec![g.t(&[3, 4], d), int(0)]),
                    s("0-d", vec![g.t(&[], d), int(0)]),
                    s("transposed", vec![g.nc(&[3, 4], d), int(1)]),
                    s(
                        "large logits",
                        vec![
                            g.values(&[1e4, 0.0, -1e4, 1e4, 1e4, -1e4], &[2, 3], d),
                            int(-1),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Smooth)
        .errors(dim_range_error(|g| vec![f32t(g, &[2, 3]), int(5)])),
        OpInfo::new(
            "ltorch.log_softmax",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("last dim", vec![g.t(&[2, 5], d), int(-1)]),
                    s("transposed", vec![g.nc(&[3, 4], d), int(1)]),
                    s(
                        "large logits",
                        vec![
                            g.values(&[1e4, 0.0, -1e4, 1e4, 1e4, -1e4], &[2, 3], d),
                            int(-1),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Smooth)
        .errors(dim_range_error(|g| vec![f32t(g, &[2, 3]), int(2)])),
        OpInfo::new(
            "ltorch.layer_norm",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "weight and bias",
                        vec![
                            g.t(&[3, 8], d),
                            ints(&[8]),
                            g.t(&[8], d),
                            g.t(&[8], d),
                            float(1e-5),
                        ],
                    ),
                    s(
                        "two dims, no affine",
                        vec![
                            g.t(&[2, 3, 4], d),
                            ints(&[3, 4]),
                            none(),
                            none(),
                            float(1e-5),
                        ],
                    ),
                    s(
                        "transposed",
                        vec![
                            g.nc(&[4, 3], d),
                            ints(&[3]),
                            g.t(&[3], d),
                            none(),
                            float(1e-5),
                        ],
                    ),
                    s(
                        "large values",
                        vec![
                            g.values(&[1e4, -1e4, 5e3, 0.0, 1e4, 1e4, -1e4, 2.0], &[2, 4], d),
                            ints(&[4]),
                            none(),
                            none(),
                            float(1e-5),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Smooth)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "normalized_shape mismatch",
                vec![f32t(g, &[2, 3]), ints(&[4]), none(), none(), float(1e-5)],
                "[4]",
            )]
        })),
        OpInfo::new(
            "ltorch.rms_norm",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "weight",
                        vec![g.t(&[2, 8], d), ints(&[8]), g.t(&[8], d), float(1e-6)],
                    ),
                    s(
                        "no weight, default eps",
                        vec![g.t(&[2, 3, 4], d), ints(&[3, 4]), none(), none()],
                    ),
                    s(
                        "transposed",
                        vec![g.nc(&[4, 3], d), ints(&[3]), none(), float(1e-6)],
                    ),
                ]
            }),
        )
        .tol(Tol::Smooth)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "normalized_shape mismatch",
                vec![f32t(g, &[2, 3]), ints(&[4]), none(), none()],
                "[4]",
            )]
        })),
        OpInfo::new(
            "ltorch.cross_entropy",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("class indices", vec![g.t(&[4, 5], d), g.index(&[4], 5)]),
                    s(
                        "transposed logits",
                        vec![g.nc(&[3, 4], d), g.index(&[3], 4)],
                    ),
                    s(
                        "large logits",
                        vec![
                            g.values(&[1e4, 0.0, -1e4, -1e4, 1e4, 1e4], &[2, 3], d),
                            g.index(&[2], 3),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "target batch mismatch",
                vec![f32t(g, &[4, 5]), g.index(&[3], 5)],
                "targets must be integers of shape [4], got cpu i64[3]",
            )]
        })),
        OpInfo::new(
            "ltorch.nll_loss",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("mean", vec![g.t(&[4, 5], d), g.index(&[4], 5), int(-100)]),
                    s(
                        "ignore_index 1",
                        vec![g.t(&[6, 3], d), g.index(&[6], 3), int(1)],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum),
        OpInfo::new(
            "ltorch.mse_loss",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("2-D", vec![g.t(&[3, 4], d), g.t(&[3, 4], d)]),
                    s("0-d", vec![g.t(&[], d), g.t(&[], d)]),
                    s("transposed", vec![g.nc(&[3, 4], d), g.t(&[3, 4], d)]),
                ]
            }),
        )
        .tol(Tol::Accum),
        OpInfo::new(
            "ltorch.scaled_dot_product_attention",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "no mask",
                        vec![
                            g.t(&[2, 3, 4], d),
                            g.t(&[2, 5, 4], d),
                            g.t(&[2, 5, 6], d),
                            none(),
                            boolean(false),
                            none(),
                        ],
                    ),
                    s(
                        "causal, scale",
                        vec![
                            g.t(&[1, 4, 4], d),
                            g.t(&[1, 4, 4], d),
                            g.t(&[1, 4, 2], d),
                            none(),
                            boolean(true),
                            float(0.5),
                        ],
                    ),
                    s(
                        "bool mask",
                        vec![
                            g.t(&[1, 2, 4], d),
                            g.t(&[1, 3, 4], d),
                            g.t(&[1, 3, 4], d),
                            g.values(&[1.0, 0.0, 1.0, 1.0, 1.0, 0.0], &[2, 3], DType::Bool),
                            boolean(false),
                            none(),
                        ],
                    ),
                    s(
                        "transposed key",
                        vec![
                            g.t(&[1, 3, 4], d),
                            g.nc(&[1, 3, 4], d),
                            g.t(&[1, 3, 4], d),
                            none(),
                            boolean(false),
                            none(),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum),
        linalg("matmul", NUMERIC),
        OpInfo::new(
            "ltorch.linear",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "with bias",
                        vec![g.t(&[2, 3], d), g.t(&[4, 3], d), g.t(&[4], d)],
                    ),
                    s(
                        "no bias, batched input",
                        vec![g.t(&[2, 2, 3], d), g.t(&[4, 3], d), none()],
                    ),
                    s(
                        "transposed weight",
                        vec![g.t(&[2, 3], d), g.nc(&[4, 3], d), none()],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "in features",
                vec![f32t(g, &[2, 3]), f32t(g, &[5, 4]), none()],
                "3 != 4",
            )]
        })),
        linalg("bmm", NUMERIC),
        einsum(),
    ]
}

fn einsum() -> OpInfo {
    OpInfo::new(
        "ltorch.einsum",
        NUMERIC,
        Box::new(|g: &mut Gen, d| {
            let eq = |e: &str, shapes: &[&[i64]], g: &mut Gen| {
                let mut args = vec![string(e)];
                args.extend(shapes.iter().map(|sh| g.t(sh, d)));
                args
            };
            vec![
                s(
                    "batched product",
                    eq("bhid,bhjd->bhij", &[&[2, 3, 4, 5], &[2, 3, 6, 5]], g),
                ),
                s("matrix product", eq("ij,jk->ik", &[&[3, 4], &[4, 5]], g)),
                s("transpose", eq("ij->ji", &[&[3, 4]], g)),
                s("sum of a dim", eq("ijk->ik", &[&[2, 3, 4]], g)),
                s("implicit output", eq("ij,jk", &[&[2, 3], &[3, 4]], g)),
                s(
                    "ellipsis",
                    eq("...ij,...jk->...ik", &[&[2, 2, 3], &[2, 3, 4]], g),
                ),
                s("outer", eq("i,j->ij", &[&[3], &[4]], g)),
                s(
                    "three operands",
                    eq("ij,jk,kl->il", &[&[2, 3], &[3, 4], &[4, 2]], g),
                ),
                s("empty rows", eq("ij,jk->ik", &[&[0, 3], &[3, 4]], g)),
                s("spaces", eq(" ij , jk -> ik ", &[&[2, 3], &[3, 2]], g)),
            ]
        }),
    )
    .tol(Tol::Accum)
    .errors(Box::new(|g: &mut Gen| {
        vec![
            e(
                "diagonal",
                vec![string("ii->i"), f32t(g, &[3, 3])],
                "a label repeated within operand",
            ),
            e(
                "operand count",
                vec![string("ij,jk->ik"), f32t(g, &[2, 3])],
                "has 2 operands, 1 were given",
            ),
            e(
                "label sizes",
                vec![string("ij,jk->ik"), f32t(g, &[2, 3]), f32t(g, &[4, 2])],
                "label `j` is 3 in one operand and 4 in the other",
            ),
        ]
    }))
}

fn linalg(name: &'static str, dtypes: &[DType]) -> OpInfo {
    OpInfo::new(
        &id(name),
        dtypes,
        Box::new(move |g: &mut Gen, d| {
            let mut v = vec![
                s("batched", vec![g.t(&[2, 3, 4], d), g.t(&[2, 4, 5], d)]),
                s(
                    "transposed lhs",
                    vec![g.nc(&[2, 3, 4], d), g.t(&[2, 4, 2], d)],
                ),
                s("k = 0", vec![g.t(&[1, 2, 0], d), g.t(&[1, 0, 3], d)]),
            ];
            if name == "matmul" {
                v.push(s("2-D", vec![g.t(&[2, 3], d), g.t(&[3, 4], d)]));
                v.push(s("vector @ matrix", vec![g.t(&[3], d), g.t(&[3, 4], d)]));
                v.push(s(
                    "broadcast batch",
                    vec![g.t(&[2, 1, 2, 3], d), g.t(&[3, 3, 2], d)],
                ));
            }
            v
        }),
    )
    .tol(Tol::Accum)
    .errors(Box::new(|g: &mut Gen| {
        vec![e(
            "inner dims",
            vec![f32t(g, &[2, 2, 3]), f32t(g, &[2, 4, 5])],
            "3 != 4",
        )]
    }))
}

/// `sdpa_fwd_lse` and `sdpa_bwd`, the pair attention's gradient goes through. The backward's
/// `out` and `lse` are free inputs here: its math is a function of them whatever they hold.
pub(crate) fn flash_pair() -> Vec<OpInfo> {
    let lse_dtype = |d: DType| if d == DType::F64 { d } else { DType::F32 };
    // (note, q shape, k shape, value's last dim, causal)
    type Shape = (&'static str, [i64; 3], [i64; 3], i64, bool);
    let shapes: [Shape; 3] = [
        ("L != S, Ev != E", [2, 3, 4], [2, 5, 4], 6, false),
        ("causal, more keys", [1, 4, 4], [1, 6, 4], 2, true),
        ("one key", [1, 2, 4], [1, 1, 4], 4, false),
    ];
    vec![
        OpInfo::new(
            "ltorch.sdpa_fwd_lse",
            FLOATS,
            Box::new(move |g: &mut Gen, d| {
                let mut v: Vec<_> = shapes
                    .iter()
                    .map(|(note, q, k, ev, causal)| {
                        s(
                            note,
                            vec![
                                g.t(q, d),
                                g.t(k, d),
                                g.t(&[k[0], k[1], *ev], d),
                                boolean(*causal),
                                none(),
                            ],
                        )
                    })
                    .collect();
                v.push(s(
                    "4-D, scale, transposed key",
                    vec![
                        g.t(&[1, 2, 3, 4], d),
                        g.nc(&[1, 2, 3, 4], d),
                        g.t(&[1, 2, 3, 4], d),
                        boolean(true),
                        float(0.5),
                    ],
                ));
                v
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "batch dims differ",
                vec![
                    f32t(g, &[2, 3, 4]),
                    f32t(g, &[1, 3, 4]),
                    f32t(g, &[1, 3, 4]),
                    boolean(false),
                    none(),
                ],
                "same batch dims",
            )]
        })),
        OpInfo::new(
            "ltorch.sdpa_bwd",
            FLOATS,
            Box::new(move |g: &mut Gen, d| {
                shapes
                    .iter()
                    .map(|(note, q, k, ev, causal)| {
                        let out = [q[0], q[1], *ev];
                        s(
                            note,
                            vec![
                                g.t(&out, d),
                                // Scores of at most 1.6 against a log-sum-exp of at least 1
                                // keep the probabilities near 1, as consistent inputs would:
                                // random ones make dS a cancelling sum no tolerance fits.
                                g.td(q, d, Domain::Unit),
                                g.td(k, d, Domain::Unit),
                                g.t(&[k[0], k[1], *ev], d),
                                g.t(&out, d),
                                g.td(&q[..2], lse_dtype(d), Domain::Ge1),
                                boolean(*causal),
                                none(),
                            ],
                        )
                    })
                    .collect()
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "lse of the wrong shape",
                vec![
                    f32t(g, &[1, 3, 4]),
                    f32t(g, &[1, 3, 4]),
                    f32t(g, &[1, 3, 4]),
                    f32t(g, &[1, 3, 4]),
                    f32t(g, &[1, 3, 4]),
                    f32t(g, &[1, 4]),
                    boolean(false),
                    none(),
                ],
                "lse must be f32 [1, 3]",
            )]
        })),
    ]
}
