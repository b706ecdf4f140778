//! Errors for calls in trace text that do not fit their op: each error's kind and its words
//! (did-you-mean, the signature, the parameter named), and where it points.

use std::collections::HashMap;
use thunder_core::ir::TensorType;
use thunder_core::text::print_trace;
use thunder_core::{DType, Device, Error};
use thunder_torch::CallError;
use thunder_torch::{parse_trace, parse_trace_with};

fn program(body: &str) -> String {
    format!("def computation(x):\n  # x: \"cpu f32[2, 3]\"\n{body}\n  return (y,)\n")
}

/// The `Error::Call` of `body`, with its line and column.
fn call_error(body: &str) -> (usize, usize, CallError) {
    match parse_trace(&program(body)) {
        Err(Error::Call {
            line,
            column,
            error,
        }) => (line, column, *error),
        other => panic!("expected Error::Call for {body:?}, got {other:?}"),
    }
}

#[test]
fn an_unknown_op_suggests_the_closest() {
    let (line, column, e) = call_error("  y = ltorch.softmx(x, dim=-1)");
    assert_eq!((line, column), (3, 7));
    assert_eq!(
        e,
        CallError::UnknownOp {
            name: "ltorch.softmx".into(),
            suggestion: Some("ltorch.softmax".into())
        }
    );
    assert_eq!(
        e.to_string(),
        "unknown op `ltorch.softmx` (did you mean `ltorch.softmax`?)"
    );
    // Nothing close: no suggestion.
    let (_, _, e) = call_error("  y = ltorch.zzzzzz(x)");
    assert!(
        matches!(
            e,
            CallError::UnknownOp {
                suggestion: None,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn an_unknown_keyword_suggests_the_parameter_and_shows_the_signature() {
    let (line, column, e) = call_error("  y = ltorch.sum(x, dim=1, keepdims=True)");
    assert_eq!((line, column), (3, 28), "points at the keyword");
    let CallError::UnknownKeyword {
        op,
        keyword,
        suggestion,
        signature,
    } = &e
    else {
        panic!("expected UnknownKeyword, got {e:?}")
    };
    assert_eq!((op.as_str(), keyword.as_str()), ("sum", "keepdims"));
    assert_eq!(suggestion.as_deref(), Some("keepdim"));
    assert_eq!(
        signature,
        "input: Tensor, dim: list[int]? = None, keepdim: bool = False"
    );
    assert_eq!(
        e.to_string(),
        "sum() got an unexpected keyword argument `keepdims` (did you mean `keepdim`?); its \
         signature is sum(input: Tensor, dim: list[int]? = None, keepdim: bool = False)"
    );
}

#[test]
fn wrong_arity_prints_the_signature() {
    // Too many positional arguments (keyword-only parameters cannot be given by position
    // unless every parameter is).
    let (_, _, e) = call_error("  y = ltorch.mean(x, None, False, None)");
    assert!(
        matches!(e, CallError::TooManyPositional { max: 3, got: 4, .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "mean() takes 3 positional arguments but 4 were given; its signature is \
         mean(input: Tensor, dim: list[int]? = None, keepdim: bool = False)"
    );
    // A required parameter left out.
    let (_, _, e) = call_error("  y = ltorch.softmax(x)");
    assert_eq!(
        e.to_string(),
        "softmax() missing required argument `dim`; its signature is \
         softmax(input: Tensor, dim: int)"
    );
    assert!(matches!(e, CallError::Missing { ref param, .. } if param == "dim"));
    // The same parameter twice.
    let (_, _, e) = call_error("  y = ltorch.softmax(x, -1, dim=0)");
    assert_eq!(
        e.to_string(),
        "softmax() got multiple values for argument `dim`"
    );
}

#[test]
fn an_argument_of_the_wrong_kind_names_the_parameter() {
    let (line, column, e) = call_error("  y = ltorch.softmax(x, dim='last')");
    assert_eq!((line, column), (3, 29), "points at the value");
    assert_eq!(
        e,
        CallError::WrongKind {
            op: "softmax".into(),
            param: "dim".into(),
            expected: "an int (int)".into(),
            got: "the string \"last\"".into(),
        }
    );
    assert_eq!(
        e.to_string(),
        "softmax(): argument `dim` must be an int (int), got the string \"last\""
    );
    // Positional: the column of the argument, and a tensor where a number belongs.
    let (_, column, e) = call_error("  y = ltorch.leaky_relu(x, x)");
    assert_eq!(column, 28);
    assert_eq!(
        e.to_string(),
        "leaky_relu(): argument `negative_slope` must be a float (float), got a tensor"
    );
}

#[test]
fn prims_take_no_keywords() {
    let (_, _, e) = call_error("  y = prims.neg(a=x)");
    assert_eq!(
        e.to_string(),
        "prims.neg() takes no keyword arguments (prims are called positionally)"
    );
}

#[test]
fn a_positional_argument_after_a_keyword_is_a_syntax_error() {
    match parse_trace(&program("  y = ltorch.softmax(input=x, -1)")) {
        Err(Error::Parse {
            line,
            column,
            message,
        }) => {
            assert_eq!((line, column), (3, 31));
            assert_eq!(message, "positional argument follows keyword argument");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn an_unknown_name_suggests_a_defined_one() {
    match parse_trace(&program(
        "  t = ltorch.exp(x)\n  y = ltorch.add(t, other=tt)",
    )) {
        Err(Error::Parse { message, .. }) => {
            assert_eq!(message, "unknown name `tt` (did you mean `t`?)")
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

fn f32_input(shape: &[i64]) -> HashMap<String, TensorType> {
    HashMap::from([(
        "x".to_string(),
        TensorType::new(shape.to_vec(), DType::F32, Device::Cpu),
    )])
}

#[test]
fn unannotated_parameters_take_the_given_types() {
    let text = "def f(x):\n  y = ltorch.softmax(x, dim=-1)\n  return y\n";
    let trace = parse_trace_with(text, &f32_input(&[2, 3])).expect("parses");
    let printed = print_trace(&trace);
    assert!(printed.contains("# x: \"cpu f32[2, 3]\""), "{printed}");
    // Without the input, the error says both ways to give the type.
    match parse_trace(text) {
        Err(Error::Parse {
            line,
            column,
            message,
        }) => {
            assert_eq!((line, column), (1, 7));
            assert_eq!(
                message,
                "parameter `x` has no type: give it as an input (`-i x=FILE.npy`) or annotate \
                 it (`# x: \"cpu f32[2, 3]\"`)"
            );
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn an_annotation_that_disagrees_with_the_input_names_both_types() {
    let text = "def f(x):\n  # x: \"cpu f32[2, 3]\"\n  y = ltorch.exp(x)\n  return y\n";
    match parse_trace_with(text, &f32_input(&[4])) {
        Err(e @ Error::Input { .. }) => assert_eq!(
            e.to_string(),
            "input `x`: the program's annotation says \"cpu f32[2, 3]\" but the given input is \
             \"cpu f32[4]\""
        ),
        other => panic!("expected Error::Input, got {other:?}"),
    }
    // Agreeing is fine.
    assert!(parse_trace_with(text, &f32_input(&[2, 3])).is_ok());
}

/// Keyword calls print canonically (keyword-only parameters by keyword, defaults spelled
/// out) and the printed text parses back to the same trace, also in the old positional form.
#[test]
fn keyword_calls_print_canonically_and_round_trip() {
    let text = "def f(x):\n  a = ltorch.var(x, 1)\n  b = ltorch.cat([x, x], dim=1)\n  \
                c = ltorch.full([2], 7)\n  d = ltorch.gelu(x, approximate='tanh')\n  \
                return (a, b, c, d)\n";
    let trace = parse_trace_with(text, &f32_input(&[2, 3])).expect("parses");
    let printed = print_trace(&trace);
    for line in [
        "a = ltorch.var(x, [1], correction=1, keepdim=False)",
        "b = ltorch.cat([x, x], 1)",
        "c = ltorch.full([2], 7, device=devices.cpu, dtype=None)",
        "d = ltorch.gelu(x, \"tanh\")",
    ] {
        assert!(printed.contains(line), "{line} not in\n{printed}");
    }
    let again = parse_trace(&printed).expect("printed text parses");
    assert_eq!(print_trace(&again), printed);
    // The positional spelling of older traces still parses to the same calls.
    let old = "def f(x):\n  # x: \"cpu f32[2, 3]\"\n  a = ltorch.var(x, [1], 1, False)\n  \
               b = ltorch.cat(1, x, x)\n  return (a, b)\n";
    let old_printed = print_trace(&parse_trace(old).expect("old form parses"));
    assert!(old_printed.contains("a = ltorch.var(x, [1], correction=1, keepdim=False)"));
    assert!(old_printed.contains("b = ltorch.cat([x, x], 1)"));
}
