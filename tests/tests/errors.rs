//! Bad input gets a typed error naming the op, line, file or field, never a panic.

use thunder_core::text::parse_trace;
use thunder_core::{jit_with, Array, DType, Error};
use thunder_tests::interpreter_host;

fn op_error(
    f: impl Fn(&[thunder_core::Tensor]) -> Vec<thunder_core::Tensor> + Send + Sync + 'static,
    inputs: &[Array],
) -> (String, String) {
    let j = jit_with(interpreter_host(), f);
    match j.call(inputs) {
        Err(Error::Op { op, message }) => (op, message),
        other => panic!("expected an op error, got {other:?}"),
    }
}

fn arr(shape: &[i64]) -> Array {
    Array::random(shape, DType::F32, 0).unwrap()
}

#[test]
fn unbroadcastable_add_names_op_and_shapes() {
    let (op, msg) = op_error(|xs| vec![&xs[0] + &xs[1]], &[arr(&[2, 3]), arr(&[4])]);
    assert_eq!(op, "ltorch.add");
    assert!(msg.contains("[2, 3]") && msg.contains("[4]"), "{msg}");
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

fn parse_error(text: &str) -> (usize, usize, String) {
    match parse_trace(text) {
        Err(Error::Parse {
            line,
            column,
            message,
        }) => (line, column, message),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

const HEADER: &str = "def computation(x):\n  # x: \"cpu f32[2, 3]\"\n";

#[test]
fn syntax_error_names_line_and_column() {
    let (line, column, msg) =
        parse_error(&format!("{HEADER}  t0 = ltorch.add(x, )\n  return (t0,)\n"));
    assert_eq!((line, column), (3, 22), "{msg}");
    assert!(msg.contains("expected an argument"), "{msg}");
    let (line, column, _) = parse_error(&format!(
        "{HEADER}  t0 = ltorch.add(x, 1 $)\n  return (t0,)\n"
    ));
    assert_eq!((line, column), (3, 24));
}

#[test]
fn semantic_errors_in_text_name_the_line() {
    let (line, _, msg) = parse_error(&format!("{HEADER}  t0 = ltorch.nope(x)\n  return (t0,)\n"));
    assert_eq!(line, 3);
    assert!(msg.contains("unknown symbol `ltorch.nope`"), "{msg}");
    let (line, col, msg) = parse_error(&format!(
        "{HEADER}  t0 = ltorch.add(x, y)\n  return (t0,)\n"
    ));
    assert_eq!((line, col), (3, 22));
    assert!(msg.contains("unknown name `y`"), "{msg}");
    let (line, _, msg) = parse_error(&format!(
        "{HEADER}  t0 = ltorch.add(x, 1)  # t0: \"cpu f64[2, 3]\"\n  return (t0,)\n"
    ));
    assert_eq!(line, 3);
    assert!(msg.contains("annotation says"), "{msg}");
    let (line, _, msg) = parse_error(&format!(
        "{HEADER}  t0 = ltorch.matmul(x, x)\n  return (t0,)\n"
    ));
    assert_eq!(line, 3);
    assert!(
        msg.contains("ltorch.matmul") && msg.contains("[2, 3] @ [2, 3]"),
        "{msg}"
    );
    let (line, _, msg) = parse_error("def computation(x):\n  t0 = ltorch.exp(x)\n  return (t0,)\n");
    assert_eq!(line, 1);
    assert!(
        msg.contains("parameter `x` has no type annotation"),
        "{msg}"
    );
    let (_, _, msg) = parse_error(&format!("{HEADER}  t0 = ltorch.exp(x)\n"));
    assert!(msg.contains("no `return`"), "{msg}");
    let (line, _, msg) = parse_error(&format!("{HEADER}  x = ltorch.exp(x)\n  return (x,)\n"));
    assert_eq!(line, 3);
    assert!(msg.contains("already defined"), "{msg}");
}

#[test]
fn subsymbol_lines_must_match_the_decomposition() {
    let text = format!("{HEADER}  t0 = ltorch.exp(x)\n    # t0 = prims.log(x)\n  return (t0,)\n");
    let (line, _, msg) = parse_error(&text);
    assert_eq!(line, 4);
    assert!(msg.contains("expected `prims.exp`"), "{msg}");
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
