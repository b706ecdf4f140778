//! OpInfo rows for random numbers: `prims.uniform`, `prims.normal` and the ltorch ops on them
//! (`rand`, `randn`, `dropout`). Their values are a contract (Philox4x32-10 from an explicit
//! seed and offset, documented in `thunder-abi/src/prims.rs`), not PyTorch's generator, so
//! `scripts/gen_opinfo_fixtures.py` computes the references with its own implementation of
//! that contract.

use crate::families::FLOATS;
use crate::lit::*;
use crate::{ErrorCase, Gen, OpInfo, Sample, Tol};
use thunder_core::DType;

pub fn entries() -> Vec<OpInfo> {
    let mut t = Vec::new();
    for (name, a, b) in [("uniform", -1.0, 2.0), ("normal", 0.5, 2.0)] {
        t.push(
            OpInfo::new(
                &format!("prims.{name}"),
                FLOATS,
                Box::new(move |_g: &mut Gen, d| {
                    let call = |shape: &[i64], seed: i64, offset: i64| {
                        vec![
                            ints(shape),
                            float(a),
                            float(b),
                            int(seed),
                            int(offset),
                            cpu(),
                            dtype(d),
                        ]
                    };
                    vec![
                        Sample::new("[2, 3]", call(&[2, 3], 42, 0)),
                        Sample::new("odd count, offset 7", call(&[5], 42, 7)),
                        Sample::new("0-d", call(&[], 3, 1)),
                        Sample::new("empty", call(&[0, 2], 3, 0)),
                        Sample::new("seed and offset with the top bit set", call(&[4], -2, -1)),
                    ]
                }),
            )
            .errors(Box::new(|_g: &mut Gen| {
                vec![ErrorCase::new(
                    "integer dtype",
                    vec![
                        ints(&[2]),
                        float(0.0),
                        float(1.0),
                        int(0),
                        int(0),
                        cpu(),
                        dtype(DType::I32),
                    ],
                    "argument 6 (dtype) must be a floating-point dtype",
                )]
            })),
        );
    }
    for name in ["rand", "randn"] {
        t.push(
            OpInfo::new(
                &format!("ltorch.{name}"),
                FLOATS,
                Box::new(|_g: &mut Gen, d| {
                    vec![
                        Sample::new(
                            "[2, 3]",
                            vec![ints(&[2, 3]), int(7), int(0), dtype(d), cpu()],
                        ),
                        Sample::new(
                            "offset 3",
                            vec![ints(&[3]), int(7), int(3), dtype(d), cpu()],
                        ),
                        Sample::new("empty", vec![ints(&[0]), int(7), int(0), dtype(d), cpu()]),
                    ]
                }),
            )
            .errors(Box::new(|_g: &mut Gen| {
                vec![ErrorCase::new(
                    "integer dtype",
                    vec![ints(&[2]), int(0), int(0), dtype(DType::I64), cpu()],
                    "argument 3 (dtype) must be a floating-point dtype",
                )]
            })),
        );
    }
    t.push(
        OpInfo::new(
            "ltorch.dropout",
            FLOATS,
            Box::new(|g: &mut Gen, d| {
                vec![
                    Sample::new(
                        "p 0.5",
                        vec![g.t(&[4, 5], d), float(0.5), boolean(true), int(11), int(0)],
                    ),
                    Sample::new(
                        "p 0.2, transposed",
                        vec![g.nc(&[3, 4], d), float(0.2), boolean(true), int(5), int(9)],
                    ),
                    Sample::new(
                        "not training",
                        vec![g.t(&[2, 3], d), float(0.5), boolean(false), int(1), int(0)],
                    ),
                    Sample::new(
                        "p 1",
                        vec![g.t(&[2, 3], d), float(1.0), boolean(true), int(1), int(0)],
                    ),
                    Sample::new(
                        "0-d",
                        vec![g.t(&[], d), float(0.5), boolean(true), int(2), int(0)],
                    ),
                ]
            }),
        )
        .tol(Tol::Smooth)
        .errors(Box::new(|g: &mut Gen| {
            vec![
                ErrorCase::new(
                    "p above 1",
                    vec![
                        g.t(&[2], DType::F32),
                        float(1.5),
                        boolean(true),
                        int(0),
                        int(0),
                    ],
                    "argument 1 (p) must be in [0, 1]",
                ),
                ErrorCase::new(
                    "integer input",
                    vec![
                        g.t(&[2], DType::I32),
                        float(0.5),
                        boolean(true),
                        int(0),
                        int(0),
                    ],
                    "argument 0 (input) must be floating point",
                ),
            ]
        })),
    );
    t
}
