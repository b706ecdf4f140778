//! OpInfo rows for ltorch's indexing ops (`ltorch/indexing.rs`).

use crate::families::*;
use crate::lit::*;
use crate::{ErrorCase, Gen, OpInfo, Tol};
use thunder_core::DType;

use crate::ltorch_ops::{e, f32t, s};

pub fn entries() -> Vec<OpInfo> {
    let mut t = indexing();
    for info in &mut t {
        let run = run_errors(&info.id);
        if !run.is_empty() {
            let meta = std::mem::replace(&mut info.errors, Box::new(|_| Vec::new()));
            info.errors = Box::new(move |g: &mut Gen| {
                let mut cases = meta(g);
                cases.extend(run.iter().map(|f| f(g)));
                cases
            });
        }
    }
    t
}

type RunCase = Box<dyn Fn(&mut Gen) -> ErrorCase + Send + Sync>;

/// Indices out of range: only the values say so, so running must refuse them.
fn run_errors(id: &str) -> Vec<RunCase> {
    let idx = |g: &mut Gen, v: &[f64], shape: &[i64]| g.values(v, shape, DType::I64);
    let case: RunCase = match id {
        "ltorch.index_select" => Box::new(move |g: &mut Gen| {
            ErrorCase::at_run(
                "index 7 of 4",
                vec![f32t(g, &[4, 2]), int(0), idx(g, &[7.0], &[1])],
                "prims.take: index 7 is out of bounds",
            )
        }),
        "ltorch.gather" => Box::new(move |g: &mut Gen| {
            ErrorCase::at_run(
                "index 9 of 4",
                vec![f32t(g, &[2, 4]), int(1), idx(g, &[9.0, 0.0], &[2, 1])],
                "prims.take_along_axis: index 9 is out of bounds",
            )
        }),
        "ltorch.scatter_add" => Box::new(move |g: &mut Gen| {
            ErrorCase::at_run(
                "index 5 of 4",
                vec![
                    f32t(g, &[2, 4]),
                    int(1),
                    idx(g, &[5.0, 0.0], &[2, 1]),
                    f32t(g, &[2, 1]),
                ],
                "prims.scatter_add: index 5 is out of bounds",
            )
        }),
        "ltorch.index_add" => Box::new(move |g: &mut Gen| {
            ErrorCase::at_run(
                "index 6 of 4",
                vec![
                    f32t(g, &[4, 3]),
                    int(0),
                    idx(g, &[6.0], &[1]),
                    f32t(g, &[1, 3]),
                    int(1),
                ],
                "prims.index_add: index 6 is out of bounds",
            )
        }),
        "ltorch.embedding" => Box::new(move |g: &mut Gen| {
            ErrorCase::at_run(
                "index 9 of 5 rows",
                vec![idx(g, &[1.0, 9.0], &[2]), f32t(g, &[5, 4]), none()],
                "prims.take: index 9 is out of bounds",
            )
        }),
        _ => return Vec::new(),
    };
    vec![case]
}

fn indexing() -> Vec<OpInfo> {
    vec![
        OpInfo::new(
            "ltorch.cat",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("dim 0", vec![int(0), g.t(&[2, 3], d), g.t(&[1, 3], d)]),
                    s(
                        "dim -1, with an empty part",
                        vec![int(-1), g.t(&[2, 3], d), g.t(&[2, 0], d), g.t(&[2, 1], d)],
                    ),
                    s(
                        "transposed part",
                        vec![int(0), g.nc(&[3, 4], d), g.t(&[2, 4], d)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "sizes differ off the dim",
                vec![int(0), f32t(g, &[2, 3]), f32t(g, &[2, 4])],
                "tensor 1 has shape [2, 4] but tensor 0 has [2, 3]",
            )]
        })),
        OpInfo::new(
            "ltorch.stack",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("dim 0", vec![int(0), g.t(&[2, 3], d), g.t(&[2, 3], d)]),
                    s(
                        "dim -1",
                        vec![int(-1), g.t(&[3], d), g.t(&[3], d), g.t(&[3], d)],
                    ),
                    s("0-d", vec![int(0), g.t(&[], d), g.t(&[], d)]),
                    s(
                        "transposed",
                        vec![int(1), g.nc(&[3, 4], d), g.t(&[3, 4], d)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "unequal shapes",
                vec![int(0), f32t(g, &[2, 3]), f32t(g, &[3, 2])],
                "got [2, 3] at entry 0 and [3, 2] at entry 1",
            )]
        })),
        OpInfo::new(
            "ltorch.split",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("size 2", vec![g.t(&[5, 2], d), int(2), int(0)]),
                    s("sections", vec![g.t(&[2, 6], d), ints(&[1, 3, 2]), int(1)]),
                    s("transposed", vec![g.nc(&[3, 4], d), int(2), int(1)]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "sections do not add up",
                vec![f32t(g, &[2, 6]), ints(&[1, 2]), int(1)],
                "split_sizes [1, 2] must sum exactly to 6",
            )]
        })),
        OpInfo::new(
            "ltorch.chunk",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("3 chunks", vec![g.t(&[6, 2], d), int(3), int(0)]),
                    s("uneven", vec![g.t(&[2, 5], d), int(2), int(-1)]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "0 chunks",
                vec![f32t(g, &[4]), int(0), int(0)],
                "chunks must be greater than 0, got 0",
            )]
        })),
        OpInfo::new(
            "ltorch.narrow",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("dim 1", vec![g.t(&[2, 5], d), int(1), int(1), int(3)]),
                    s(
                        "negative start",
                        vec![g.t(&[4], d), int(0), int(-2), int(2)],
                    ),
                    s("empty", vec![g.t(&[4], d), int(0), int(1), int(0)]),
                    s("transposed", vec![g.nc(&[3, 4], d), int(0), int(1), int(2)]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "past the end",
                vec![f32t(g, &[4]), int(0), int(2), int(3)],
                "start (2) + length (3) exceeds dimension size (4)",
            )]
        })),
        OpInfo::new(
            "ltorch.slice",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("1:3", vec![g.t(&[4, 3], d), int(0), int(1), int(3), int(1)]),
                    s(
                        "::2 on dim -1",
                        vec![g.t(&[2, 5], d), int(-1), none(), none(), int(2)],
                    ),
                    s(
                        "negative and clamped bounds",
                        vec![g.t(&[5], d), int(0), int(-3), int(100), int(1)],
                    ),
                    s(
                        "transposed",
                        vec![g.nc(&[3, 4], d), int(1), int(0), int(3), int(2)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "step 0",
                vec![f32t(g, &[4]), int(0), none(), none(), int(0)],
                "step must be positive, got 0",
            )]
        })),
        OpInfo::new(
            "ltorch.index_select",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("rows", vec![g.t(&[4, 3], d), int(0), g.index(&[5], 4)]),
                    s("columns", vec![g.t(&[2, 3], d), int(-1), g.index(&[2], 3)]),
                    s("empty index", vec![g.t(&[4], d), int(0), g.index(&[0], 4)]),
                    s(
                        "transposed source",
                        vec![g.nc(&[3, 4], d), int(1), g.index(&[3], 4)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "float index",
                vec![f32t(g, &[4]), int(0), f32t(g, &[2])],
                "index (argument 2) must have dtype i32 or i64, got f32",
            )]
        })),
        OpInfo::new(
            "ltorch.gather",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("dim 1", vec![g.t(&[2, 4], d), int(1), g.index(&[2, 3], 4)]),
                    s("dim 0", vec![g.t(&[3, 2], d), int(0), g.index(&[2, 2], 3)]),
                    s(
                        "transposed source",
                        vec![g.nc(&[3, 4], d), int(1), g.index(&[3, 2], 4)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "index rank",
                vec![f32t(g, &[2, 4]), int(1), g.index(&[2], 4)],
                "index (argument 2) must have as many dims as the input",
            )]
        })),
        OpInfo::new(
            "ltorch.scatter_add",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "dim 1",
                        vec![
                            g.t(&[2, 4], d),
                            int(1),
                            g.index(&[2, 3], 4),
                            g.t(&[2, 3], d),
                        ],
                    ),
                    s(
                        "dim 0",
                        vec![
                            g.t(&[3, 2], d),
                            int(0),
                            g.index(&[4, 2], 3),
                            g.t(&[4, 2], d),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "src dtype",
                vec![
                    f32t(g, &[2, 4]),
                    int(1),
                    g.index(&[2, 3], 4),
                    g.t(&[2, 3], DType::F64),
                ],
                "src has dtype f64 but the input has f32",
            )]
        })),
        OpInfo::new(
            "ltorch.index_add",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "dim 0",
                        vec![
                            g.t(&[4, 3], d),
                            int(0),
                            g.index(&[5], 4),
                            g.t(&[5, 3], d),
                            int(1),
                        ],
                    ),
                    s(
                        "dim 1, alpha 2",
                        vec![
                            g.t(&[2, 3], d),
                            int(1),
                            g.index(&[2], 3),
                            g.t(&[2, 2], d),
                            int(2),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum),
        OpInfo::new(
            "ltorch.embedding",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "2-D indices",
                        vec![g.index(&[2, 3], 5), g.t(&[5, 4], d), none()],
                    ),
                    s(
                        "padding_idx",
                        vec![g.index(&[4], 3), g.t(&[3, 2], d), int(0)],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "1-D weight",
                vec![g.index(&[2], 3), f32t(g, &[3]), none()],
                "weight (argument 1) must be 2-D, got shape [3]",
            )]
        })),
        OpInfo::new(
            "ltorch.flip",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("both dims", vec![g.t(&[2, 3], d), ints(&[0, 1])]),
                    s("negative dim", vec![g.t(&[2, 3], d), ints(&[-1])]),
                    s("0-d", vec![g.t(&[], d), ints(&[])]),
                    s("transposed", vec![g.nc(&[3, 4], d), ints(&[0])]),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "repeated dim",
                vec![f32t(g, &[2, 3]), ints(&[0, 0])],
                "duplicates",
            )]
        })),
        OpInfo::new(
            "ltorch.pad",
            ALL,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "last dim",
                        vec![
                            g.t(&[2, 3], d),
                            ints(&[1, 2]),
                            string("constant"),
                            scalar_like(d),
                        ],
                    ),
                    s(
                        "two dims",
                        vec![
                            g.t(&[2, 3], d),
                            ints(&[0, 1, 1, 0]),
                            string("constant"),
                            scalar_like(d),
                        ],
                    ),
                    s(
                        "negative (crop)",
                        vec![
                            g.t(&[4], d),
                            ints(&[-1, 1]),
                            string("constant"),
                            scalar_like(d),
                        ],
                    ),
                    s(
                        "transposed",
                        vec![
                            g.nc(&[3, 4], d),
                            ints(&[1, 1]),
                            string("constant"),
                            scalar_like(d),
                        ],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "odd pad list",
                vec![f32t(g, &[2, 3]), ints(&[1]), string("constant"), float(0.0)],
                "pad (argument 1) [1] must have an even length",
            )]
        })),
    ]
}
