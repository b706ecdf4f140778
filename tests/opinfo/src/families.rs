//! Sample and error generators shared by families of ops, so that most table rows are one
//! line. Each generator covers, per dtype: a plain 2-D case, a 0-d `()` case, an empty `(0,)`
//! case, a non-contiguous (transposed) input, a stride-0 (expanded) input, and, for ltorch,
//! broadcasting and Python-scalar operands.

use crate::lit::*;
use crate::{Domain, ErrorCase, ErrorFn, Gen, SArg, Sample, SampleFn};
use thunder_core::DType;

pub const ALL: &[DType] = &DType::ALL;
pub const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];
pub const NUMERIC: &[DType] = &[
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];
pub const INTS: &[DType] = &[DType::U8, DType::I8, DType::I16, DType::I32, DType::I64];
pub const INTS_BOOL: &[DType] = &[
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
];

pub fn is_float(d: DType) -> bool {
    FLOATS.contains(&d)
}

/// A Python-scalar operand of the same category as `d` (so promotion keeps `d`).
pub fn scalar_like(d: DType) -> SArg {
    match d {
        DType::Bool => boolean(true),
        _ if is_float(d) => float(1.5),
        _ => int(2),
    }
}

/// One-operand elementwise ops.
pub fn unary(domain: Domain) -> SampleFn {
    Box::new(move |g: &mut Gen, d: DType| {
        let mut s = vec![
            Sample::new("2-D", vec![g.td(&[2, 3], d, domain)]),
            Sample::new("0-d", vec![g.td(&[], d, domain)]),
            Sample::new("empty", vec![g.td(&[0], d, domain)]),
            Sample::new(
                "transposed (non-contiguous)",
                vec![g.ncd(&[3, 4], d, domain)],
            ),
            Sample::new(
                "expanded (stride 0)",
                vec![g.bcd(&[1, 3], &[2, 3], d, domain)],
            ),
            Sample::new("3-D", vec![g.td(&[2, 1, 4], d, domain)]),
        ];
        if is_float(d) {
            s.push(Sample::new(
                "special values (nan, ±0, ±inf)",
                vec![g.values(&SPECIAL, &[6], d)],
            ));
        }
        s
    })
}

/// Values where implementations tend to differ: NaN, signed zeros, infinities, a tiny one.
const SPECIAL: [f64; 6] = [f64::NAN, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, 1e-3];

/// Two-operand elementwise ops. `broadcast`: the op broadcasts and takes Python scalars
/// (ltorch); prims take equal shapes and at most one scalar literal.
pub fn binary(da: Domain, db: Domain, broadcast: bool) -> SampleFn {
    Box::new(move |g: &mut Gen, d: DType| {
        let mut s = vec![
            Sample::new("2-D", vec![g.td(&[2, 3], d, da), g.td(&[2, 3], d, db)]),
            Sample::new("0-d", vec![g.td(&[], d, da), g.td(&[], d, db)]),
            Sample::new("empty", vec![g.td(&[0], d, da), g.td(&[0], d, db)]),
            Sample::new(
                "transposed lhs (non-contiguous)",
                vec![g.ncd(&[3, 4], d, da), g.td(&[3, 4], d, db)],
            ),
            Sample::new(
                "expanded rhs (stride 0)",
                vec![g.td(&[2, 3], d, da), g.bcd(&[2, 1], &[2, 3], d, db)],
            ),
        ];
        if broadcast {
            s.push(Sample::new(
                "broadcast [2, 3] with [3]",
                vec![g.td(&[2, 3], d, da), g.td(&[3], d, db)],
            ));
            s.push(Sample::new(
                "broadcast [4, 1] with [1, 3]",
                vec![g.td(&[4, 1], d, da), g.td(&[1, 3], d, db)],
            ));
            s.push(Sample::new(
                "dimensioned with 0-d",
                vec![g.td(&[2, 3], d, da), g.td(&[], d, db)],
            ));
        }
        // 1.5, 2 or True: a valid divisor, exponent and shift amount too.
        s.push(Sample::new(
            "tensor with a scalar",
            vec![g.td(&[2, 3], d, da), scalar_like(d)],
        ));
        s
    })
}

/// Binary ops that broadcast: shapes that cannot broadcast, and too few arguments.
pub fn binary_errors(op: &'static str) -> ErrorFn {
    // Integer-only ops get integer operands, so that the shapes are what is wrong.
    let d = if op.starts_with("bitwise") {
        DType::I32
    } else {
        DType::F32
    };
    Box::new(move |g: &mut Gen| {
        vec![
            ErrorCase::new(
                "shapes that do not broadcast",
                vec![g.t(&[2, 3], d), g.t(&[4], d)],
                "shapes [2, 3] and [4] cannot be broadcast together",
            )
            .of_kind("shape mismatch"),
            ErrorCase::new(
                "one argument",
                vec![g.t(&[2, 3], DType::F32)],
                "expected 2 arguments, got 1",
            )
            .of_kind("arity"),
        ]
    })
}

/// Binary prims: unequal shapes and unequal dtypes (prims neither broadcast nor promote).
pub fn prim_binary_errors() -> ErrorFn {
    Box::new(|g: &mut Gen| {
        vec![
            ErrorCase::new(
                "unequal shapes",
                vec![g.t(&[2, 3], DType::F32), g.t(&[3], DType::F32)],
                "prims do not broadcast",
            )
            .of_kind("shape mismatch"),
            ErrorCase::new(
                "unequal dtypes",
                vec![g.t(&[2, 3], DType::F32), g.t(&[2, 3], DType::F64)],
                "prims do not promote",
            )
            .of_kind("dtype mismatch"),
        ]
    })
}

/// Unary prims that take floats only.
pub fn prim_float_unary_errors() -> ErrorFn {
    Box::new(|g: &mut Gen| {
        vec![
            ErrorCase::new(
                "integer input",
                vec![g.t(&[2], DType::I32)],
                "does not support dtype i32",
            )
            .of_kind("dtype"),
            ErrorCase::new("no arguments", vec![], "expected 1 arguments").of_kind("arity"),
        ]
    })
}

/// Reductions `op(a, dims, keepdim)` (ltorch) or `op(a, dims)` (prims).
pub fn reduction(keepdim_arg: bool, domain: Domain) -> SampleFn {
    Box::new(move |g: &mut Gen, d: DType| {
        let k = |v: bool| {
            if keepdim_arg {
                vec![boolean(v)]
            } else {
                vec![]
            }
        };
        let mk = |note: &str, a: SArg, dims: SArg, keep: bool| {
            let mut args = vec![a, dims];
            args.extend(k(keep));
            Sample::new(note, args)
        };
        let mut s = vec![
            mk("dim 1", g.td(&[2, 3], d, domain), ints(&[1]), false),
            mk(
                "dims [0, 2]",
                g.td(&[2, 3, 4], d, domain),
                ints(&[0, 2]),
                false,
            ),
            mk("0-d, no dims", g.td(&[], d, domain), ints(&[]), false),
            mk(
                "transposed (non-contiguous), dim 0",
                g.ncd(&[3, 4], d, domain),
                ints(&[0]),
                false,
            ),
            mk(
                "expanded (stride 0), dim 1",
                g.bcd(&[3, 1], &[3, 4], d, domain),
                ints(&[1]),
                false,
            ),
            mk("empty rows", g.td(&[0, 3], d, domain), ints(&[1]), false),
        ];
        if keepdim_arg {
            s.push(mk(
                "keepdim, negative dim",
                g.td(&[2, 3], d, domain),
                ints(&[-1]),
                true,
            ));
            s.push(mk(
                "all dims (None)",
                g.td(&[2, 3], d, domain),
                none(),
                false,
            ));
        }
        s
    })
}

/// Reductions: a dim out of range and a repeated dim.
pub fn reduction_errors(keepdim_arg: bool) -> ErrorFn {
    Box::new(move |g: &mut Gen| {
        let tail = |v: Vec<SArg>| {
            let mut v = v;
            if keepdim_arg {
                v.push(boolean(false));
            }
            v
        };
        vec![
            ErrorCase::new(
                "dim out of range",
                tail(vec![g.t(&[2, 3], DType::F32), ints(&[2])]),
                if keepdim_arg {
                    "out of range"
                } else {
                    "must be distinct and in [0, 2)"
                },
            ),
            ErrorCase::new(
                "repeated dim",
                tail(vec![g.t(&[2, 3], DType::F32), ints(&[1, 1])]),
                if keepdim_arg {
                    "dim 1 appears multiple times in the list of dims"
                } else {
                    "dims [1, 1] must be distinct"
                },
            ),
        ]
    })
}

/// Ops with no error cases beyond arity: calling them with no arguments.
pub fn arity_error(expect: &'static str) -> ErrorFn {
    Box::new(move |_g: &mut Gen| {
        vec![ErrorCase::new("no arguments", vec![], expect).of_kind("arity")]
    })
}
