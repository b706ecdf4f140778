//! Bad trace text gets a typed error naming the line and column, never a panic.

use thunder_core::Error;
use thunder_torch::parse_trace;

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
    // Unknown ops are `Error::Call` (tests/tests/call_errors.rs covers them).
    match parse_trace(&format!("{HEADER}  t0 = ltorch.nope(x)\n  return (t0,)\n")) {
        Err(e @ Error::Call { line: 3, .. }) => {
            assert!(e.to_string().contains("unknown op `ltorch.nope`"), "{e}")
        }
        other => panic!("expected Error::Call, got {other:?}"),
    }
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
        msg.contains("ltorch.matmul")
            && msg.contains("[2, 3] and [2, 3]")
            && msg.contains("3 != 2"),
        "{msg}"
    );
    let (line, _, msg) = parse_error("def computation(x):\n  t0 = ltorch.exp(x)\n  return (t0,)\n");
    assert_eq!(line, 1);
    assert!(
        msg.contains("parameter `x` has no type: give it as an input"),
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
