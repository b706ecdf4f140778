//! Plans checked for meaning without a GPU: each program is planned for CUDA tensors, the plan
//! is evaluated by `emulate` on the host, and the result must match the reference interpreter
//! running the same program on the CPU.

mod common;

use thunder_cuda_fuser::support;
use thunder_torch::parse_trace;

fn check(name: &str, text: &str, rtol: f64) {
    let trace = parse_trace(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let view = common::flat_view(&trace);
    for op in view.ops.iter() {
        assert!(
            support::accepts(&view, op),
            "{name}: {} not accepted",
            op.symbol
        );
    }
    common::emulate_against_interpreter(name, &trace, rtol, 11);
}

fn prog(inputs: &[(&str, &str)], body: &[&str], outs: &str) -> String {
    let names: Vec<&str> = inputs.iter().map(|(n, _)| *n).collect();
    let mut t = format!("def computation({}):\n", names.join(", "));
    for (n, ty) in inputs {
        t.push_str(&format!("  # {n}: \"cuda:0 {ty}\"\n"));
    }
    for line in body {
        t.push_str(&format!("  {line}\n"));
    }
    t.push_str(&format!("  return ({outs},)\n"));
    t
}

#[test]
fn softmax_log_softmax_and_norms_over_rows_and_columns() {
    for (name, body) in [
        ("softmax-last", "y = ltorch.softmax(x, -1)"),
        ("softmax-first", "y = ltorch.softmax(x, 0)"),
        ("log_softmax", "y = ltorch.log_softmax(x, 1)"),
        ("mean-keepdim", "y = ltorch.mean(x, [1], True)"),
        ("sum-all", "y = ltorch.sum(x, None, False)"),
        ("amax-cols", "y = ltorch.amax(x, [0], False)"),
        ("amin-rows", "y = ltorch.amin(x, [1], False)"),
        ("amin-cols", "y = ltorch.amin(x, [0], True)"),
    ] {
        check(name, &prog(&[("x", "f32[5, 37]")], &[body], "y"), 1e-6);
    }
    check(
        "layer_norm",
        &prog(
            &[("x", "f32[6, 64]"), ("w", "f32[64]"), ("b", "f32[64]")],
            &["y = ltorch.layer_norm(x, [64], w, b, 1e-05)"],
            "y",
        ),
        1e-6,
    );
    check(
        "rms_norm-bf16",
        &prog(
            &[("x", "bf16[3, 32]"), ("w", "bf16[32]")],
            &["y = ltorch.rms_norm(x, [32], w, 1e-06)"],
            "y",
        ),
        1e-2,
    );
    check(
        "softmax-3d-middle",
        &prog(&[("x", "f64[2, 7, 3]")], &["y = ltorch.softmax(x, 1)"], "y"),
        1e-12,
    );
}

#[test]
fn broadcasts_intermediates_and_several_outputs() {
    check(
        "bias-gelu-f16",
        &prog(
            &[("x", "f16[4, 16]"), ("b", "f16[16]")],
            &["t = ltorch.add(x, b)", "y = ltorch.gelu(t, \"tanh\")"],
            "y, t",
        ),
        2e-3,
    );
    check(
        "outer-where",
        &prog(
            &[("a", "f32[4, 1]"), ("b", "f32[1, 5]")],
            &["m = ltorch.gt(a, b)", "y = ltorch.where(m, a, b)"],
            "y, m",
        ),
        0.0,
    );
    check(
        "row-stat-reused-after-reshape",
        &prog(
            &[("x", "f32[2, 3, 8]")],
            &[
                "s = ltorch.sum(x, [2], False)",
                "r = ltorch.reshape(s, [6])",
                "y = ltorch.mul(r, 2.0)",
            ],
            "y, s",
        ),
        1e-6,
    );
    check(
        "scalar-and-empty",
        &prog(
            &[("a", "f32[]"), ("e", "f64[0, 3]")],
            &["y = ltorch.exp(a)", "z = ltorch.sum(e, [0], False)"],
            "y, z",
        ),
        1e-6,
    );
}

#[test]
fn one_hots_and_masks_from_iota_need_no_memory() {
    // cross_entropy builds its one-hot from iota; tril its mask. Targets are drawn in [-5, 5]:
    // use ignore_index -100 off and label smoothing on so every row counts.
    check(
        "cross_entropy",
        &prog(
            &[("a", "f32[6, 11]"), ("t", "i64[6]")],
            &["y = ltorch.cross_entropy(a, t, 3, 0.1)"],
            "y",
        ),
        1e-5,
    );
    check(
        "tril-then-softmax",
        &prog(
            &[("x", "f32[5, 5]")],
            &["m = ltorch.tril(x, 0)", "y = ltorch.softmax(m, -1)"],
            "y",
        ),
        1e-6,
    );
    check(
        "full-and-arange",
        &prog(
            &[("x", "f64[4, 3]")],
            &[
                "z = ltorch.full([4, 3], 2.5, devices.cuda0, dtypes.f64)",
                "y = ltorch.mul(x, z)",
            ],
            "y",
        ),
        1e-12,
    );
}

/// Every elementwise prim the fuser claims, read from the elementwise table, so a new row is
/// checked here with no edit: planned inside a fused chain (the op's output is scaled and
/// summed over rows, or selected with, so it lives in registers), emulated and compared with
/// the interpreter, on every dtype family the row has a spelling for.
#[test]
fn every_claimed_elementwise_prim_of_the_table_fuses_and_agrees() {
    use thunder_abi::prims::{BinaryPrim, PredicatePrim, Prim, UnaryPrim};
    use thunder_abi::DTypeCode;
    let mut covered = Vec::new();
    let unary = UnaryPrim::ALL.iter().map(|p| p.prim());
    let predicate = PredicatePrim::ALL.iter().map(|p| p.prim());
    let binary = BinaryPrim::ALL.iter().map(|p| p.prim());
    for prim in unary.chain(predicate).chain(binary) {
        for (dtype, code) in [
            ("f32", DTypeCode::F32),
            ("f64", DTypeCode::F64),
            ("i32", DTypeCode::I32),
            ("i8", DTypeCode::I8),
            ("b8", DTypeCode::Bool),
        ] {
            let Some(math) = support::Math::for_operands(prim, code) else {
                continue;
            };
            let call = match math.op.arity() {
                1 => format!("t = {}(x)", prim.id()),
                _ => format!("t = {}(x, w)", prim.id()),
            };
            // Float results are reduced in the same kernel; int and bool ones are selected.
            let body = if math.op.bool_out() || !code.is_float() {
                vec![
                    call,
                    "m = ltorch.ne(x, w)".to_string(),
                    "y = ltorch.where(m, t, t)".to_string(),
                ]
            } else {
                vec![
                    call,
                    "s = ltorch.mul(t, 0.5)".to_string(),
                    "y = ltorch.sum(s, [1], False)".to_string(),
                ]
            };
            let body: Vec<&str> = body.iter().map(String::as_str).collect();
            let text = prog(
                &[
                    ("x", &format!("{dtype}[3, 17]")),
                    ("w", &format!("{dtype}[3, 17]")),
                ],
                &body,
                "y",
            );
            let rtol = if dtype == "f32" { 1e-5 } else { 1e-12 };
            check(&format!("{}-{dtype}", prim.id()), &text, rtol);
            covered.push((prim, dtype));
        }
    }
    for p in [
        Prim::Erf,
        Prim::Erfc,
        Prim::Erfinv,
        Prim::Lgamma,
        Prim::Signbit,
        Prim::Hypot,
    ] {
        assert!(covered.contains(&(p, "f32")), "{} not covered", p.id());
    }
    for p in [
        Prim::Neg,
        Prim::Maximum,
        Prim::BitwiseXor,
        Prim::BitwiseLeftShift,
    ] {
        assert!(covered.contains(&(p, "i8")), "{} on i8 not covered", p.id());
    }
    assert!(covered.contains(&(Prim::Add, "b8")), "bool add not covered");
}

/// Backward passes are full of transposes: they are read through permuted strides by the
/// kernel that consumes them, or copied when they stand alone.
#[test]
fn transposes_fuse_into_their_readers_or_are_copied() {
    check(
        "transpose-alone",
        &prog(
            &[("x", "f32[3, 5]")],
            &["y = prims.transpose(x, [1, 0])"],
            "y",
        ),
        0.0,
    );
    check(
        "square-transpose-of-a-computed-value",
        &prog(
            &[("x", "f32[4, 4]")],
            &[
                "e = ltorch.exp(x)",
                "y = prims.transpose(e, [1, 0])",
                "z = ltorch.add(y, e)",
            ],
            "z, y",
        ),
        1e-6,
    );
    check(
        "permute-3d-then-mul",
        &prog(
            &[("x", "f64[2, 3, 4]"), ("w", "f64[4, 2, 3]")],
            &["t = prims.transpose(x, [2, 0, 1])", "y = ltorch.mul(t, w)"],
            "y",
        ),
        1e-12,
    );
    check(
        "transpose-then-row-sum",
        &prog(
            &[("x", "f32[6, 5]")],
            &[
                "t = prims.transpose(x, [1, 0])",
                "y = ltorch.sum(t, [1], False)",
            ],
            "y",
        ),
        1e-6,
    );
    check(
        "transpose-then-reshape",
        &prog(
            &[("x", "f32[3, 4]")],
            &[
                "t = prims.transpose(x, [1, 0])",
                "y = ltorch.reshape(t, [12])",
            ],
            "y",
        ),
        0.0,
    );
    check(
        "empty-and-0d-transposes",
        &prog(
            &[("a", "f32[0, 3]"), ("s", "f32[]")],
            &[
                "y = prims.transpose(a, [1, 0])",
                "z = prims.transpose(s, [])",
            ],
            "y, z",
        ),
        0.0,
    );
}

/// Slices (with steps) and flips are read at a new base and strides by the kernels that
/// consume them: the qkv split of attention, the crops of pooling backward passes.
#[test]
fn slices_and_flips_are_read_in_place() {
    check(
        "qkv-split-then-mul",
        &prog(
            &[("x", "f32[2, 3, 12]")],
            &[
                "q, k, v = ltorch.split(x, [4, 4, 4], 2)",
                "y = ltorch.mul(q, k)",
                "z = ltorch.add(y, v)",
            ],
            "z",
        ),
        1e-6,
    );
    check(
        "strided-slice-alone",
        &prog(
            &[("x", "f64[7, 9]")],
            &["y = prims.slice(x, [1, 2], [7, 9], [2, 3])"],
            "y",
        ),
        0.0,
    );
    check(
        "flip-then-add",
        &prog(
            &[("x", "f32[3, 5]")],
            &["f = prims.flip(x, [0, 1])", "y = ltorch.add(f, x)"],
            "y",
        ),
        1e-6,
    );
    check(
        "slice-of-a-transpose-then-row-sum",
        &prog(
            &[("x", "f32[6, 8]")],
            &[
                "t = prims.transpose(x, [1, 0])",
                "s = prims.slice(t, [1, 0], [7, 6], [2, 1])",
                "y = ltorch.sum(s, [1], False)",
            ],
            "y",
        ),
        1e-6,
    );
    check(
        "row-slice-then-reshape",
        &prog(
            &[("x", "f32[4, 6]")],
            &[
                "s = prims.slice(x, [1, 0], [3, 6], [1, 1])",
                "y = ltorch.reshape(s, [12])",
            ],
            "y",
        ),
        0.0,
    );
    check(
        "slice-of-a-computed-value",
        &prog(
            &[("x", "f32[5, 5]")],
            &[
                "e = ltorch.exp(x)",
                "s = prims.slice(e, [0, 1], [5, 4], [1, 1])",
                "f = prims.flip(e, [1])",
                "g = prims.slice(f, [0, 0], [5, 3], [1, 1])",
                "y = ltorch.add(s, g)",
            ],
            "y",
        ),
        1e-6,
    );
    check(
        "empty-slice-and-flip",
        &prog(
            &[("x", "f32[4, 3]"), ("e", "f32[0, 3]")],
            &[
                "s = prims.slice(x, [4, 0], [4, 3], [1, 1])",
                "f = prims.flip(e, [0])",
            ],
            "s, f",
        ),
        0.0,
    );
}

/// Pads (the gradient of a slice or a split) are guarded loads: a kernel of their own, read
/// by their consumers from memory.
#[test]
fn pads_are_guarded_loads() {
    check(
        "pad-low-high",
        &prog(
            &[("x", "f32[3, 4]")],
            &["y = prims.pad(x, 0.5, [1, 2, 0, 0, 3, 0])"],
            "y",
        ),
        0.0,
    );
    check(
        "crop-and-pad-of-a-computed-value",
        &prog(
            &[("x", "f64[4, 5]")],
            &[
                "e = ltorch.exp(x)",
                "p = prims.pad(e, -1.0, [-1, 2, 0, 1, -2, 0])",
                "y = ltorch.mul(p, 2.0)",
            ],
            "y",
        ),
        1e-12,
    );
    check(
        "split-backward",
        &prog(
            &[("a", "f32[2, 3, 4]"), ("b", "f32[2, 3, 4]")],
            &[
                "pa = prims.pad(a, 0.0, [0, 0, 0, 0, 0, 0, 0, 4, 0])",
                "pb = prims.pad(b, 0.0, [0, 0, 0, 0, 0, 0, 4, 0, 0])",
                "y = ltorch.add(pa, pb)",
            ],
            "y",
        ),
        1e-6,
    );
    check(
        "pad-of-a-transpose-int",
        &prog(
            &[("x", "i32[3, 2]")],
            &[
                "t = prims.transpose(x, [1, 0])",
                "y = prims.pad(t, 7, [1, 1, 0, 0, 1, 0])",
            ],
            "y",
        ),
        0.0,
    );
    check(
        "empty-pad",
        &prog(
            &[("x", "f32[0, 3]")],
            &["y = prims.pad(x, 1.0, [1, 0, 0, 0, 0, 0])"],
            "y",
        ),
        0.0,
    );
}

/// Concatenations read each part inside its range along the dim (guarded loads chosen by
/// `where`s): the CNN's pooling backward and models that join heads.
#[test]
fn concatenations_choose_each_part_in_its_range() {
    check(
        "cat-dim0-three-parts",
        &prog(
            &[("a", "f32[2, 3]"), ("b", "f32[1, 3]"), ("c", "f32[4, 3]")],
            &["y = prims.cat(0, a, b, c)"],
            "y",
        ),
        0.0,
    );
    check(
        "cat-last-dim-of-computed-and-transposed",
        &prog(
            &[("a", "f64[3, 2]"), ("b", "f64[4, 3]")],
            &[
                "e = ltorch.exp(a)",
                "t = prims.transpose(b, [1, 0])",
                "y = prims.cat(1, e, t)",
                "z = ltorch.mul(y, 3.0)",
            ],
            "z",
        ),
        1e-12,
    );
    check(
        "cat-with-an-empty-part-int",
        &prog(
            &[("a", "i32[2, 0]"), ("b", "i32[2, 5]")],
            &["y = prims.cat(1, a, b)"],
            "y",
        ),
        0.0,
    );
}
