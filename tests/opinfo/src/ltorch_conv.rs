//! OpInfo rows for ltorch's convolution and pooling (`ltorch/conv.rs`).

use crate::families::*;
use crate::lit::*;
use crate::{Domain, Gen, OpInfo, Tol};

use crate::ltorch_ops::{e, f32t, s};

pub fn entries() -> Vec<OpInfo> {
    conv_pool()
}

fn conv_pool() -> Vec<OpInfo> {
    vec![
        OpInfo::new(
            "ltorch.conv1d",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "bias",
                        vec![
                            g.t(&[2, 2, 6], d),
                            g.t(&[3, 2, 3], d),
                            g.t(&[3], d),
                            int(1),
                            int(0),
                            int(1),
                            int(1),
                        ],
                    ),
                    s(
                        "stride 2, padding 1, dilation 2",
                        vec![
                            g.t(&[1, 2, 7], d),
                            g.t(&[2, 2, 2], d),
                            none(),
                            int(2),
                            int(1),
                            int(2),
                            int(1),
                        ],
                    ),
                    s(
                        "groups 2, same",
                        vec![
                            g.t(&[1, 4, 5], d),
                            g.t(&[2, 2, 3], d),
                            none(),
                            int(1),
                            string("same"),
                            int(1),
                            int(2),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "2-D weight",
                vec![
                    f32t(g, &[1, 2, 6]),
                    f32t(g, &[3, 2]),
                    none(),
                    int(1),
                    int(0),
                    int(1),
                    int(1),
                ],
                "argument 1 (weight) must be 3-D",
            )]
        })),
        OpInfo::new(
            "ltorch.conv2d",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "bias",
                        vec![
                            g.t(&[1, 2, 5, 5], d),
                            g.t(&[3, 2, 3, 3], d),
                            g.t(&[3], d),
                            int(1),
                            int(0),
                            int(1),
                            int(1),
                        ],
                    ),
                    s(
                        "stride [2, 1], padding 1",
                        vec![
                            g.t(&[2, 1, 4, 4], d),
                            g.t(&[2, 1, 3, 3], d),
                            none(),
                            ints(&[2, 1]),
                            int(1),
                            int(1),
                            int(1),
                        ],
                    ),
                    s(
                        "groups 2, unbatched",
                        vec![
                            g.t(&[2, 4, 4], d),
                            g.t(&[2, 1, 2, 2], d),
                            none(),
                            int(1),
                            string("valid"),
                            int(1),
                            int(2),
                        ],
                    ),
                    s(
                        "transposed input",
                        vec![
                            g.nc(&[1, 1, 4, 5], d),
                            g.t(&[1, 1, 2, 2], d),
                            none(),
                            int(1),
                            int(0),
                            int(1),
                            int(1),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "same with stride 2",
                vec![
                    f32t(g, &[1, 1, 4, 4]),
                    f32t(g, &[1, 1, 3, 3]),
                    none(),
                    int(2),
                    string("same"),
                    int(1),
                    int(1),
                ],
                "argument 4 (padding) \"same\" needs stride 1",
            )]
        })),
        OpInfo::new(
            "ltorch.conv3d",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "bias",
                        vec![
                            g.t(&[1, 2, 3, 4, 4], d),
                            g.t(&[2, 2, 2, 2, 2], d),
                            g.t(&[2], d),
                            int(1),
                            int(0),
                            int(1),
                            int(1),
                        ],
                    ),
                    s(
                        "stride 2, padding 1, groups 2",
                        vec![
                            g.t(&[2, 2, 3, 3, 3], d),
                            g.t(&[2, 1, 2, 2, 2], d),
                            none(),
                            int(2),
                            int(1),
                            int(1),
                            int(2),
                        ],
                    ),
                    s(
                        "transposed input",
                        vec![
                            g.nc(&[1, 1, 2, 3, 4], d),
                            g.t(&[1, 1, 1, 2, 2], d),
                            none(),
                            int(1),
                            int(0),
                            int(1),
                            int(1),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Accum)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "4-D weight",
                vec![
                    f32t(g, &[1, 1, 4, 4, 4]),
                    f32t(g, &[1, 1, 2, 2]),
                    none(),
                    int(1),
                    int(0),
                    int(1),
                    int(1),
                ],
                "argument 1 (weight) must be 5-D",
            )]
        })),
        OpInfo::new(
            "ltorch.max_pool2d",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "kernel 2",
                        vec![
                            g.distinct(&[1, 2, 4, 4], d),
                            int(2),
                            none(),
                            int(0),
                            int(1),
                            boolean(false),
                        ],
                    ),
                    s(
                        "kernel 3, stride 2, padding 1",
                        vec![
                            g.distinct(&[2, 1, 5, 5], d),
                            int(3),
                            int(2),
                            int(1),
                            int(1),
                            boolean(false),
                        ],
                    ),
                    s(
                        "dilation 2, unbatched",
                        vec![
                            g.distinct(&[1, 5, 5], d),
                            int(2),
                            int(1),
                            int(0),
                            int(2),
                            boolean(false),
                        ],
                    ),
                ]
            }),
        )
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "argument 5 (ceil_mode) = True is not supported",
                vec![
                    f32t(g, &[1, 1, 4, 4]),
                    int(2),
                    none(),
                    int(0),
                    int(1),
                    boolean(true),
                ],
                "argument 5 (ceil_mode) = True is not supported",
            )]
        })),
        OpInfo::new(
            "ltorch.avg_pool2d",
            NUMERIC,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "kernel 2",
                        vec![
                            g.t(&[1, 2, 4, 4], d),
                            int(2),
                            none(),
                            int(0),
                            boolean(false),
                            boolean(true),
                            none(),
                        ],
                    ),
                    s(
                        "padding 1, count_include_pad False",
                        vec![
                            g.t(&[1, 1, 5, 5], d),
                            int(3),
                            int(2),
                            int(1),
                            boolean(false),
                            boolean(false),
                            none(),
                        ],
                    ),
                    s(
                        "divisor_override 3",
                        vec![
                            g.t(&[1, 1, 4, 4], d),
                            ints(&[2, 2]),
                            ints(&[1, 2]),
                            int(0),
                            boolean(false),
                            boolean(true),
                            int(3),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Smooth)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "padding over half the kernel",
                vec![
                    f32t(g, &[1, 1, 4, 4]),
                    int(2),
                    none(),
                    int(2),
                    boolean(false),
                    boolean(true),
                    none(),
                ],
                "argument 3 (padding) [2, 2] must be at most half of kernel_size",
            )]
        })),
        OpInfo::new(
            "ltorch.adaptive_avg_pool2d",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s("to [2, 2]", vec![g.t(&[1, 2, 4, 4], d), ints(&[2, 2])]),
                    s("uneven windows", vec![g.t(&[2, 1, 5, 7], d), ints(&[3, 2])]),
                    s("unbatched, to 1", vec![g.t(&[2, 3, 3], d), int(1)]),
                ]
            }),
        )
        .tol(Tol::Smooth),
        OpInfo::new(
            "ltorch.batch_norm",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                let stats = |g: &mut Gen| (g.t(&[3], d), g.td(&[3], d, Domain::Pos));
                let (m0, v0) = stats(g);
                let (m1, v1) = stats(g);
                vec![
                    s(
                        "eval",
                        vec![
                            g.t(&[2, 3, 4], d),
                            m0,
                            v0,
                            g.t(&[3], d),
                            g.t(&[3], d),
                            boolean(false),
                            float(0.1),
                            float(1e-5),
                        ],
                    ),
                    s(
                        "training, running stats updated",
                        vec![
                            g.t(&[4, 3], d),
                            m1,
                            v1,
                            none(),
                            none(),
                            boolean(true),
                            float(0.1),
                            float(1e-5),
                        ],
                    ),
                    s(
                        "training, no running stats",
                        vec![
                            g.t(&[2, 3, 2, 2], d),
                            none(),
                            none(),
                            g.t(&[3], d),
                            none(),
                            boolean(true),
                            float(0.1),
                            float(1e-3),
                        ],
                    ),
                    s(
                        "transposed input",
                        vec![
                            g.nc(&[2, 3, 4], d),
                            none(),
                            none(),
                            none(),
                            none(),
                            boolean(true),
                            float(0.1),
                            float(1e-5),
                        ],
                    ),
                ]
            }),
        )
        .tol(Tol::Smooth)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "eval without running stats",
                vec![
                    f32t(g, &[2, 3]),
                    none(),
                    none(),
                    none(),
                    none(),
                    boolean(false),
                    float(0.1),
                    float(1e-5),
                ],
                "argument 1 (running_mean) and argument 2 (running_var) are needed when training=False",
            )]
        })),
        OpInfo::new(
            "ltorch.group_norm",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    s(
                        "2 groups, affine",
                        vec![
                            g.t(&[2, 4, 3], d),
                            int(2),
                            g.t(&[4], d),
                            g.t(&[4], d),
                            float(1e-5),
                        ],
                    ),
                    s(
                        "1 group, no affine",
                        vec![g.t(&[1, 3, 2, 2], d), int(1), none(), none(), float(1e-5)],
                    ),
                    s(
                        "transposed",
                        vec![g.nc(&[2, 4, 3], d), int(4), none(), none(), float(1e-5)],
                    ),
                ]
            }),
        )
        .tol(Tol::Smooth)
        .errors(Box::new(|g: &mut Gen| {
            vec![e(
                "groups do not divide channels",
                vec![f32t(g, &[2, 4, 3]), int(3), none(), none(), float(1e-5)],
                "argument 1 (num_groups = 3) must be >= 1 and divide the 4 channels",
            )]
        })),
    ]
}
