//! Bad input gets a typed error naming the op, line, file or field, never a panic.

use thunder_core::{jit_with, Array, DType, Error, OpErrorKind};
use thunder_tests::interpreter_host;
use thunder_torch::parse_trace;
use thunder_torch::prelude::*;

/// The error of tracing `f` on `inputs`: the op the program called, and the error.
fn traced_error(
    f: impl Fn(&[thunder_core::Tensor]) -> Vec<thunder_core::Tensor> + Send + Sync + 'static,
    inputs: &[Array],
) -> (String, Error) {
    let j = jit_with(interpreter_host(), f);
    match j.call(inputs) {
        Err(e) if e.op_name().is_some() => (e.op_name().unwrap_or_default().to_string(), e),
        other => panic!("expected an op error, got {other:?}"),
    }
}

/// The op the program called and the error's message below it (path and kind).
fn op_error(
    f: impl Fn(&[thunder_core::Tensor]) -> Vec<thunder_core::Tensor> + Send + Sync + 'static,
    inputs: &[Array],
) -> (String, String) {
    let (op, e) = traced_error(f, inputs);
    (op, e.op_message().unwrap_or_default())
}

fn arr(shape: &[i64]) -> Array {
    Array::random(shape, DType::F32, 0).unwrap()
}

#[test]
fn unbroadcastable_add_names_op_and_shapes() {
    let (op, e) = traced_error(|xs| vec![&xs[0] + &xs[1]], &[arr(&[2, 3]), arr(&[4])]);
    assert_eq!(op, "ltorch.add");
    match e.op_kind_of() {
        Some(OpErrorKind::ShapeMismatch { a, b, .. }) => {
            assert_eq!((a.as_slice(), b.as_slice()), (&[2, 3][..], &[4][..]))
        }
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
    assert!(e.to_string().contains("[2, 3] and [4]"), "{e}");
}

/// Errors inside a decomposition keep the op the program called and the path to the check.
#[test]
fn errors_carry_the_path_through_decompositions_and_their_kind() {
    let (op, e) = traced_error(
        |xs| vec![xs[0].linear(&xs[1], None)],
        &[arr(&[2, 3]), arr(&[5, 4])],
    );
    assert_eq!(op, "ltorch.linear");
    match &e {
        Error::Op { path, kind, .. } => {
            assert_eq!(path, &["ltorch.matmul".to_string()]);
            assert_eq!(kind.tag(), "shape mismatch", "{e}");
        }
        other => panic!("{other:?}"),
    }
    let (op, e) = traced_error(|xs| vec![xs[0].softmax(5)], &[arr(&[2, 3])]);
    assert_eq!(op, "ltorch.softmax");
    assert_eq!(
        e.op_kind_of(),
        Some(&OpErrorKind::Dim { dim: 5, rank: 2 }),
        "{e}"
    );
    let (_, e) = traced_error(
        |xs| vec![thunder_torch::add(&xs[0], &xs[1]).unwrap().matmul(&xs[2])],
        &[arr(&[2, 3]), arr(&[2, 3]), arr(&[4, 4])],
    );
    assert_eq!(
        e.op_kind_of().map(|k| k.tag()),
        Some("shape mismatch"),
        "{e}"
    );
}

#[test]
fn matmul_inner_dims_name_op_and_shapes() {
    let (op, msg) = op_error(
        |xs| vec![xs[0].matmul(&xs[1])],
        &[arr(&[2, 3]), arr(&[4, 5])],
    );
    assert_eq!(op, "ltorch.matmul");
    assert!(
        msg.contains("[2, 3]") && msg.contains("[4, 5]") && msg.contains("3 != 4"),
        "{msg}"
    );
}

#[test]
fn nested_errors_show_the_path() {
    let (op, msg) = op_error(
        |xs| vec![xs[0].linear(&xs[1], None)],
        &[arr(&[2, 3]), arr(&[5, 4])],
    );
    assert_eq!(op, "ltorch.linear");
    assert!(msg.starts_with("ltorch.matmul:"), "{msg}");
}

#[test]
fn reshape_to_other_element_count() {
    let (op, msg) = op_error(|xs| vec![xs[0].reshape(&[4])], &[arr(&[2, 3])]);
    assert_eq!(op, "ltorch.reshape");
    assert!(msg.contains("6 elements") && msg.contains("[4]"), "{msg}");
}

#[test]
fn first_error_wins_and_later_ops_are_ignored() {
    let (op, _) = op_error(
        |xs| vec![(&xs[0] + &xs[1]).exp().softmax(7)],
        &[arr(&[2]), arr(&[3])],
    );
    assert_eq!(op, "ltorch.add");
}

#[test]
fn panicking_closure_is_an_error() {
    let j = jit_with(
        interpreter_host(),
        |_: &[thunder_core::Tensor]| -> Vec<thunder_core::Tensor> { panic!("user bug") },
    );
    let err = j.call(&[arr(&[1])]).unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
}

#[test]
fn wrong_input_type_to_a_compiled_program() {
    let t = parse_trace(
        "def computation(x):\n  # x: \"cpu f32[2]\"\n  y = ltorch.exp(x)\n  return (y,)\n",
    )
    .unwrap();
    let (_, p) = thunder_core::compile_trace(&interpreter_host(), t).unwrap();
    let bad = Array::from_slice(&[1.0f64, 2.0], &[2]).unwrap();
    match p.run(&[bad]) {
        Err(Error::Input { name, message }) => {
            assert_eq!(name, "x");
            assert!(
                message.contains("f32[2]") && message.contains("f64[2]"),
                "{message}"
            );
        }
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn unsupported_dtype_is_an_op_error() {
    let (op, msg) = op_error(
        |xs| vec![xs[0].to_dtype(DType::I32).softmax(0)],
        &[arr(&[3])],
    );
    assert_eq!(op, "ltorch.softmax");
    assert!(
        msg.contains("floating-point") && msg.contains("i32"),
        "{msg}"
    );
}

#[test]
fn bitwise_ops_on_floats_name_the_op_and_the_argument() {
    let ints = Array::from_slice(&[1i64, 2], &[2]).unwrap();
    let (op, msg) = op_error(|xs| vec![xs[0].bitwise_and(&xs[1])], &[ints, arr(&[2])]);
    assert_eq!(op, "ltorch.bitwise_and");
    assert!(msg.contains("argument b") && msg.contains("f32"), "{msg}");
    let (op, msg) = op_error(|xs| vec![xs[0].bitwise_not()], &[arr(&[2])]);
    assert_eq!(op, "ltorch.bitwise_not");
    assert!(msg.contains("argument a") && msg.contains("f32"), "{msg}");
    let (op, msg) = op_error(|xs| vec![xs[0].bitwise_left_shift(2.5)], &[arr(&[2])]);
    assert_eq!(op, "ltorch.bitwise_left_shift");
    assert!(msg.contains("argument a"), "{msg}");
    let bools = Array::from_slice(&[true, false], &[2]).unwrap();
    let (op, msg) = op_error(
        |xs| vec![xs[0].bitwise_right_shift(&xs[0])],
        std::slice::from_ref(&bools),
    );
    assert_eq!(op, "ltorch.bitwise_right_shift");
    assert!(msg.contains("b8"), "{msg}");
    let (op, msg) = op_error(|xs| vec![xs[0].floor()], &[bools]);
    assert_eq!(op, "ltorch.floor");
    assert!(msg.contains("argument a") && msg.contains("b8"), "{msg}");
}

/// `(op, message)` of the first error of `f` on `inputs`, which must name `op` and contain
/// every one of `parts`.
fn expect_op_error(
    f: impl Fn(&[thunder_core::Tensor]) -> Vec<thunder_core::Tensor> + Send + Sync + 'static,
    inputs: &[Array],
    op: &str,
    parts: &[&str],
) {
    let (got_op, msg) = op_error(f, inputs);
    assert_eq!(got_op, op, "{msg}");
    for p in parts {
        assert!(msg.contains(p), "{op}: `{msg}` does not mention `{p}`");
    }
}

#[test]
fn reductions_scans_and_sorts_name_the_op_and_the_argument() {
    let x = || arr(&[2, 3]);
    expect_op_error(
        |xs| vec![xs[0].argmax(Some(2), false)],
        &[x()],
        "ltorch.argmax",
        &["dimension out of range", "got 2"],
    );
    expect_op_error(
        |xs| vec![xs[0].cumsum(-3, None)],
        &[x()],
        "ltorch.cumsum",
        &["dimension out of range", "got -3"],
    );
    expect_op_error(
        |xs| vec![xs[0].sort(5, false, false).0],
        &[x()],
        "ltorch.sort",
        &["got 5"],
    );
    expect_op_error(
        |xs| vec![xs[0].topk(4, -1, true, true).0],
        &[x()],
        "ltorch.topk",
        &["argument 1 (k = 4)", "[0, 3]"],
    );
    expect_op_error(
        |xs| vec![xs[0].topk(-1, 0, true, true).1],
        &[x()],
        "ltorch.topk",
        &["k = -1"],
    );
    expect_op_error(
        |xs| vec![xs[0].prod(Some(7), false)],
        &[x()],
        "ltorch.prod",
        &["got 7"],
    );
    expect_op_error(
        |xs| vec![xs[0].amin(Some(&[0, 0]), false)],
        &[x()],
        "ltorch.amin",
        &["dim 0 appears multiple times"],
    );
    let ints = Array::random(&[2, 3], DType::I64, 0).unwrap();
    expect_op_error(
        |xs| vec![xs[0].var_mean(None, 1, false).0],
        &[ints],
        "ltorch.var_mean",
        &["argument 0", "floating point", "i64"],
    );
    let bools = Array::random(&[2, 3], DType::Bool, 0).unwrap();
    expect_op_error(
        |xs| vec![xs[0].argmin(None, false)],
        &[bools],
        "ltorch.argmin",
        &["argument 0", "b8"],
    );
    let empty = arr(&[2, 0]);
    expect_op_error(
        |xs| vec![xs[0].max()],
        std::slice::from_ref(&empty),
        "ltorch.max",
        &["argument 0", "empty"],
    );
    expect_op_error(
        |xs| vec![xs[0].argmax(Some(1), false)],
        std::slice::from_ref(&empty),
        "ltorch.argmax",
        &["argument 0", "empty"],
    );
    expect_op_error(
        |xs| vec![xs[0].min_dim(1, false).1],
        std::slice::from_ref(&empty),
        "ltorch.min",
        &["dim 1", "size 0"],
    );
    expect_op_error(
        |xs| vec![xs[0].amin(Some(&[1]), false)],
        &[empty],
        "ltorch.amin",
        &["prims.amin", "dim 1 of size 0"],
    );
}

#[test]
fn prim_level_errors_of_sorts_and_index_reductions_name_the_argument() {
    for (line, needle) in [
        (
            "t0, t1 = prims.topk(a, 5, 1, True, True)",
            "k (5) must be in [0, 3]",
        ),
        (
            "t0, t1 = prims.sort(a, 2, False, False)",
            "dim 2 is out of range",
        ),
        ("t0 = prims.argmax(a, -1)", "dim -1 is out of range"),
        (
            "t0 = prims.cumsum(a, 1.5)",
            "argument 1 (dim) must be an int",
        ),
        (
            "t0, t1 = prims.var_mean(a, [0], None)",
            "argument 2 (correction)",
        ),
        (
            "t0, t1 = prims.topk(a, 1, 0, 1, True)",
            "argument 3 (largest)",
        ),
    ] {
        let text =
            format!("def computation(a):\n  # a: \"cpu f32[2, 3]\"\n  {line}\n  return (t0,)\n");
        let err = parse_trace(&text).unwrap_err().to_string();
        assert!(err.contains(needle), "`{line}`: {err}");
    }
}

#[test]
fn indexing_and_joining_name_the_op_and_the_argument() {
    use thunder_torch as ltorch;
    let x = || arr(&[2, 3]);
    let idx = |v: &[i64]| Array::from_slice(v, &[v.len() as i64]).unwrap();
    expect_op_error(
        |xs| vec![thunder_core::trace_ctx::sticky(ltorch::cat(&xs[..2], 0))],
        &[x(), arr(&[2, 4])],
        "ltorch.cat",
        &[
            "prims.cat",
            "tensor 1 has shape [2, 4]",
            "[2, 3]",
            "except in dim 0",
        ],
    );
    expect_op_error(
        |xs| vec![thunder_core::trace_ctx::sticky(ltorch::cat(&xs[..2], 2))],
        &[x(), x()],
        "ltorch.cat",
        &["dimension out of range", "got 2"],
    );
    expect_op_error(
        |xs| vec![thunder_core::trace_ctx::sticky(ltorch::cat(&xs[..2], 0))],
        &[arr(&[]), arr(&[])],
        "ltorch.cat",
        &["zero-dimensional", "position 0"],
    );
    expect_op_error(
        |xs| vec![thunder_core::trace_ctx::sticky(ltorch::stack(&xs[..2], 0))],
        &[x(), arr(&[3, 2])],
        "ltorch.stack",
        &["equal size", "[3, 2]", "entry 1"],
    );
    expect_op_error(
        |xs| vec![xs[0].index_select(0, &xs[1])],
        &[x(), arr(&[2])],
        "ltorch.index_select",
        &["index (argument 2)", "i32 or i64", "f32"],
    );
    expect_op_error(
        |xs| vec![xs[0].index_select(0, &xs[1])],
        &[x(), Array::from_slice(&[0i16], &[1]).unwrap()],
        "ltorch.index_select",
        &["index (argument 2)", "i16"],
    );
    expect_op_error(
        |xs| vec![xs[0].gather(1, &xs[1])],
        &[x(), idx(&[0, 1])],
        "ltorch.gather",
        &["index (argument 2)", "as many dims", "[2]", "[2, 3]"],
    );
    expect_op_error(
        |xs| vec![xs[0].gather(5, &xs[1])],
        &[x(), Array::from_slice(&[0i64, 1], &[1, 2]).unwrap()],
        "ltorch.gather",
        &["dimension out of range", "got 5"],
    );
    expect_op_error(
        |xs| vec![xs[0].narrow(1, 2, 3)],
        &[x()],
        "ltorch.narrow",
        &["start (2) + length (3) exceeds dimension size (3)"],
    );
    expect_op_error(
        |xs| vec![xs[0].slice(0, None, None, 0)],
        &[x()],
        "ltorch.slice",
        &["step must be positive", "0"],
    );
    expect_op_error(
        |xs| xs[0].split(&[1, 1][..], 1),
        &[x()],
        "ltorch.split",
        &["split_sizes [1, 1]", "sum exactly to 3"],
    );
    expect_op_error(
        |xs| xs[0].chunk(0, 0),
        &[x()],
        "ltorch.chunk",
        &["chunks must be greater than 0"],
    );
    expect_op_error(
        |xs| {
            vec![thunder_core::trace_ctx::sticky(ltorch::embedding(
                &xs[1], &xs[0], None,
            ))]
        },
        &[arr(&[4]), idx(&[0])],
        "ltorch.embedding",
        &["weight (argument 1)", "2-D", "[4]"],
    );
    expect_op_error(
        |xs| {
            vec![thunder_core::trace_ctx::sticky(ltorch::embedding(
                &xs[1],
                &xs[0],
                Some(4),
            ))]
        },
        &[arr(&[4, 2]), idx(&[0])],
        "ltorch.embedding",
        &["padding_idx (argument 2)", "got 4"],
    );
    expect_op_error(
        |xs| {
            vec![thunder_core::trace_ctx::sticky(ltorch::pad(
                &xs[0],
                &[1, 1, 1],
                0.0,
            ))]
        },
        &[x()],
        "ltorch.pad",
        &["pad (argument 1) [1, 1, 1]", "even length"],
    );
    expect_op_error(
        |xs| {
            vec![thunder_core::trace_ctx::sticky(ltorch::pad(
                &xs[0],
                &[-2, -2],
                0.0,
            ))]
        },
        &[x()],
        "ltorch.pad",
        &["pad (argument 1)", "dim 1", "negative (-1)"],
    );
    expect_op_error(
        |xs| vec![xs[0].flip(&[1, -1])],
        &[x()],
        "ltorch.flip",
        &["dims [1, -1] has duplicates"],
    );
    expect_op_error(
        |xs| vec![xs[0].index_add(1, &xs[1], &xs[2], 1)],
        &[x(), idx(&[0, 2]), arr(&[2, 3])],
        "ltorch.index_add",
        &["prims.index_add", "src has shape [2, 3]", "[2, 2]"],
    );
    expect_op_error(
        |xs| vec![xs[0].scatter_add(1, &xs[1], &xs[2])],
        &[
            x(),
            Array::from_slice(&[0i64, 1], &[1, 2]).unwrap(),
            Array::random(&[1, 2], DType::F64, 0).unwrap(),
        ],
        "ltorch.scatter_add",
        &["prims.scatter_add", "src has dtype f64", "f32"],
    );
}

#[test]
fn indexing_prims_check_their_arguments() {
    for (line, needle) in [
        (
            "t0 = prims.slice(a, [0, 0], [3, 3], [1, 1])",
            "prims.slice: start [0, 0] / end [3, 3] out of range for [2, 3]: dim 0",
        ),
        (
            "t0 = prims.slice(a, [0, 0], [2, 3], [1, 0])",
            "prims.slice: strides [1, 0]: dim 1 has stride 0",
        ),
        (
            "t0 = prims.slice(a, [0], [2], [1])",
            "start [0] must have one entry per dim (2)",
        ),
        (
            "t0 = prims.pad(a, 0.0, [1, 1, 0])",
            "prims.pad: config [1, 1, 0] must hold (low, high, interior) for each of the 2 dims",
        ),
        (
            "t0 = prims.pad(a, 0.0, [0, 0, -1, 0, 0, 0])",
            "dim 0 has interior padding -1",
        ),
        (
            "t0 = prims.pad(a, 0.0, [0, 0, 0, -2, -2, 0])",
            "dim 1 of [2, 3] with (low, high, interior) = (-2, -2, 0) would have size -1",
        ),
        (
            "t0 = prims.pad(a, a, [0, 0, 0, 0, 0, 0])",
            "padding value (argument 1)",
        ),
        (
            "t0 = prims.pad(a, 0.0, [0, 0, 9223372036854775807, 0, 0, 0])",
            "would have size 9223372036854775809",
        ),
        (
            "t0 = prims.cat(2, a, a)",
            "prims.cat: dim 2 is out of range for [2, 3]",
        ),
        ("t0 = prims.cat(0)", "expects a dim and at least one tensor"),
        (
            "t0 = prims.flip(a, [0, 0])",
            "prims.flip: dims [0, 0] must be distinct",
        ),
        (
            "t0 = prims.take(a, a, 0)",
            "prims.take: index (argument 1) must have an integer dtype, got f32",
        ),
        ("t0 = prims.take(a, a, 3)", "index (argument 1)"),
        (
            "t0 = prims.take_along_axis(a, a, 0)",
            "index (argument 1) must have an integer dtype",
        ),
        (
            "t0 = prims.index_add(a, a, a, 0)",
            "prims.index_add: index (argument 1) must have an integer dtype",
        ),
    ] {
        let text =
            format!("def computation(a):\n  # a: \"cpu f32[2, 3]\"\n  {line}\n  return (t0,)\n");
        let err = parse_trace(&text).unwrap_err().to_string();
        assert!(err.contains(needle), "`{line}`: {err}");
    }
}

/// Index values are only known at run time: the interpreter checks every one and fails with
/// the prim's name rather than reading out of bounds.
#[test]
fn out_of_range_indices_are_run_time_errors_naming_the_prim() {
    let f32_in = "# x: \"cpu f32[3, 2]\"";
    for (body, index, needle) in [
        (
            "t0 = ltorch.index_select(x, 0, i)",
            Array::from_slice(&[0i64, 3], &[2]).unwrap(),
            "prims.take: index 3 is out of bounds for dim 0 with size 3",
        ),
        (
            "t0 = ltorch.index_select(x, 1, i)",
            Array::from_slice(&[-1i32], &[1]).unwrap(),
            "prims.take: index -1 is out of bounds for dim 1 with size 2",
        ),
        (
            "t0 = ltorch.gather(x, 1, i)",
            Array::from_slice(&[0i64, 2], &[1, 2]).unwrap(),
            "prims.take_along_axis: index 2 is out of bounds for dim 1 with size 2",
        ),
        (
            "t0 = ltorch.embedding(i, x, None)",
            Array::from_slice(&[1i64, 7], &[2]).unwrap(),
            "prims.take: index 7 is out of bounds for dim 0 with size 3",
        ),
        (
            "t0 = ltorch.scatter_add(x, 0, i, x)",
            Array::from_slice(&[5i64, 0], &[1, 2]).unwrap(),
            "prims.scatter_add: index 5 is out of bounds for dim 0 with size 3",
        ),
        (
            "t0 = ltorch.index_add(x, 0, i, x, 1)",
            Array::from_slice(&[0i64, 1, -4], &[3]).unwrap(),
            "prims.index_add: index -4 is out of bounds for dim 0 with size 3",
        ),
    ] {
        let text = format!(
            "def computation(x, i):\n  {f32_in}\n  # i: \"{}\"\n  {body}\n  return (t0,)\n",
            index.ty()
        );
        let trace = parse_trace(&text).unwrap_or_else(|e| panic!("`{body}`: {e}"));
        let (_, compiled) = thunder_core::compile_trace(&interpreter_host(), trace)
            .unwrap_or_else(|e| panic!("`{body}`: {e}"));
        let x = Array::random(&[3, 2], DType::F32, 0).unwrap();
        let err = compiled.run(&[x, index]).unwrap_err().to_string();
        assert!(err.contains(needle), "`{body}`: {err}");
    }
}

#[test]
fn convolution_and_pooling_errors_name_the_op_and_the_argument() {
    let conv = |stride: i64, groups: i64| {
        move |xs: &[thunder_core::Tensor]| {
            vec![thunder_core::trace_ctx::sticky(thunder_torch::conv2d(
                &xs[0],
                &xs[1],
                None,
                &[stride],
                &[0],
                &[1],
                groups,
            ))]
        }
    };
    expect_op_error(
        conv(1, 1),
        &[arr(&[1, 3, 5, 5]), arr(&[4, 2, 3, 3])],
        "ltorch.conv2d",
        &[
            "argument 0 (input)",
            "3 channels",
            "argument 1 (weight)",
            "expects 2",
        ],
    );
    expect_op_error(
        conv(1, 3),
        &[arr(&[1, 6, 5, 5]), arr(&[4, 2, 3, 3])],
        "ltorch.conv2d",
        &["prims.convolution", "groups (3)", "output channels (4)"],
    );
    expect_op_error(
        conv(0, 1),
        &[arr(&[1, 2, 5, 5]), arr(&[4, 2, 3, 3])],
        "ltorch.conv2d",
        &["argument 3 (stride)", ">= 1"],
    );
    expect_op_error(
        conv(1, 1),
        &[arr(&[1, 2, 2, 2]), arr(&[4, 2, 3, 3])],
        "ltorch.conv2d",
        &["prims.convolution", "smaller than the dilated kernel"],
    );
    expect_op_error(
        conv(1, 1),
        &[arr(&[2, 5, 5]), arr(&[4, 2, 3])],
        "ltorch.conv2d",
        &["argument 1 (weight) must be 4-D"],
    );
    expect_op_error(
        conv(1, 1),
        &[arr(&[5, 5]), arr(&[4, 2, 3, 3])],
        "ltorch.conv2d",
        &["argument 0 (input) must be 3-D (unbatched) or 4-D"],
    );
    let pool = |kernel: i64, padding: i64| {
        move |xs: &[thunder_core::Tensor]| {
            vec![thunder_core::trace_ctx::sticky(thunder_torch::max_pool2d(
                &xs[0],
                &[kernel],
                None,
                &[padding],
                &[1],
            ))]
        }
    };
    expect_op_error(
        pool(2, 2),
        &[arr(&[1, 1, 4, 4])],
        "ltorch.max_pool2d",
        &["argument 3 (padding)", "half of kernel_size"],
    );
    expect_op_error(
        pool(5, 0),
        &[arr(&[1, 1, 4, 4])],
        "ltorch.max_pool2d",
        &["too small for kernel_size"],
    );
    expect_op_error(
        pool(0, 0),
        &[arr(&[1, 1, 4, 4])],
        "ltorch.max_pool2d",
        &["argument 1 (kernel_size)", ">= 1"],
    );
    let text = "def computation(a):\n  # a: \"cpu f32[1, 1, 4, 4]\"\n  t0 = ltorch.avg_pool2d(a, [2, 2], None, [0, 0], True, True, None)\n  return (t0,)\n";
    let err = parse_trace(text).unwrap_err().to_string();
    assert!(
        err.contains("ltorch.avg_pool2d") && err.contains("argument 4 (ceil_mode)"),
        "{err}"
    );
}

#[test]
fn normalization_errors_name_the_op_and_the_argument() {
    let bn = |training: bool| {
        move |xs: &[thunder_core::Tensor]| {
            let r = thunder_torch::batch_norm(
                &xs[0],
                xs.get(1),
                xs.get(2),
                None,
                None,
                training,
                0.1,
                1e-5,
            );
            vec![thunder_core::trace_ctx::sticky(r.map(|r| r.output))]
        }
    };
    expect_op_error(
        bn(true),
        &[arr(&[4, 3]), arr(&[2]), arr(&[3])],
        "ltorch.batch_norm",
        &["argument 1 (running_mean)", "[3]"],
    );
    expect_op_error(
        bn(false),
        &[arr(&[4, 3])],
        "ltorch.batch_norm",
        &["training=False"],
    );
    expect_op_error(
        bn(true),
        &[arr(&[1, 3])],
        "ltorch.batch_norm",
        &["more than 1 value per channel"],
    );
    expect_op_error(
        bn(true),
        &[arr(&[3])],
        "ltorch.batch_norm",
        &["argument 0 (input)", "rank >= 2"],
    );
    let gn = |groups: i64| {
        move |xs: &[thunder_core::Tensor]| {
            vec![thunder_core::trace_ctx::sticky(thunder_torch::group_norm(
                &xs[0], groups, None, None, 1e-5,
            ))]
        }
    };
    expect_op_error(
        gn(4),
        &[arr(&[2, 6, 3])],
        "ltorch.group_norm",
        &["argument 1 (num_groups = 4)", "6 channels"],
    );
    expect_op_error(
        gn(0),
        &[arr(&[2, 6, 3])],
        "ltorch.group_norm",
        &["num_groups = 0"],
    );
}
