//! The data-movement prims run through the interpreter on cases ltorch does not reach (pad with
//! interior and negative padding together, strided slices of several dims, scatters into ints
//! and bools), checked against values worked out by hand.

use thunder_core::{compile_trace, Array};
use thunder_tests::interpreter_host;
use thunder_torch::parse_trace;

/// Runs `t0 = <line>` on `inputs` (named a, b, c, ...) and returns t0's values as f64.
fn run(line: &str, inputs: &[Array]) -> (Vec<i64>, Vec<f64>) {
    let names = ["a", "b", "c"];
    let mut text = format!("def computation({}):\n", names[..inputs.len()].join(", "));
    for (n, x) in names.iter().zip(inputs) {
        text += &format!("  # {n}: \"{}\"\n", x.ty());
    }
    text += &format!("  t0 = {line}\n  return (t0,)\n");
    let trace = parse_trace(&text).unwrap_or_else(|e| panic!("`{line}`: {e}"));
    let (_, compiled) =
        compile_trace(&interpreter_host(), trace).unwrap_or_else(|e| panic!("`{line}`: {e}"));
    let out = compiled
        .run(inputs)
        .unwrap_or_else(|e| panic!("`{line}`: {e}"));
    (
        out[0].shape().to_vec(),
        out[0].to_f64_vec().expect("host array"),
    )
}

fn iota(n: i64, shape: &[i64]) -> Array {
    let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
    Array::from_slice(&v, shape).unwrap()
}

#[test]
fn pad_with_interior_and_negative_low_and_high() {
    // [0, 1, 2] with interior 1 is [0, p, 1, p, 2]; low -1 drops the 0, high 2 adds two pads.
    let (shape, v) = run("prims.pad(a, -1.0, [-1, 2, 1])", &[iota(3, &[3])]);
    assert_eq!(shape, [6]);
    assert_eq!(v, [-1.0, 1.0, -1.0, 2.0, -1.0, -1.0]);
    // Negative high cuts into the interior padding and the data: [0, p, 1, p, 2] -> [0, p, 1].
    let (shape, v) = run("prims.pad(a, 9.0, [0, -2, 1])", &[iota(3, &[3])]);
    assert_eq!(shape, [3]);
    assert_eq!(v, [0.0, 9.0, 1.0]);
    // Two dims: rows get interior 1, columns low 1.
    let (shape, v) = run("prims.pad(a, 0.0, [0, 0, 1, 1, 0, 0])", &[iota(4, &[2, 2])]);
    assert_eq!(shape, [3, 3]);
    assert_eq!(v, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 3.0]);
}

#[test]
fn strided_slice_of_two_dims() {
    // Rows 1 and 3 of a 4x5 iota, columns 0, 2, 4.
    let (shape, v) = run(
        "prims.slice(a, [1, 0], [4, 5], [2, 2])",
        &[iota(20, &[4, 5])],
    );
    assert_eq!(shape, [2, 3]);
    assert_eq!(v, [5.0, 7.0, 9.0, 15.0, 17.0, 19.0]);
    // A stride beyond the dim takes just the first element (and does not overflow).
    let (shape, v) = run(
        "prims.slice(a, [1, 0], [4, 5], [9223372036854775807, 1])",
        &[iota(20, &[4, 5])],
    );
    assert_eq!(shape, [1, 5]);
    assert_eq!(v, [5.0, 6.0, 7.0, 8.0, 9.0]);
    let (shape, v) = run(
        "prims.slice(a, [2, 3], [2, 5], [1, 1])",
        &[iota(20, &[4, 5])],
    );
    assert_eq!(shape, [0, 2]);
    assert!(v.is_empty());
}

#[test]
fn cat_with_an_empty_part_and_flip() {
    let (shape, v) = run(
        "prims.cat(1, a, b, a)",
        &[iota(2, &[2, 1]), iota(0, &[2, 0])],
    );
    assert_eq!(shape, [2, 2]);
    assert_eq!(v, [0.0, 0.0, 1.0, 1.0]);
    let (_, v) = run("prims.flip(a, [0, 1])", &[iota(6, &[2, 3])]);
    assert_eq!(v, [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]);
}

#[test]
fn scatters_accumulate_repeats_in_the_lane_arithmetic() {
    // i8 wraps: 100 + 100 + 100 at row 0 of a zero i8 tensor is 300 mod 256 = 44.
    let a = Array::from_slice(&[0i8, 0], &[2]).unwrap();
    let src = Array::from_slice(&[100i8, 100, 100], &[3]).unwrap();
    let index = Array::from_slice(&[0i64, 0, 0], &[3]).unwrap();
    let (_, v) = run("prims.index_add(a, b, c, 0)", &[a, index, src]);
    assert_eq!(v, [44.0, 0.0]);
    // b8 accumulates as logical or.
    let a = Array::from_slice(&[false, false, true], &[3]).unwrap();
    let src = Array::from_slice(&[true, false], &[2]).unwrap();
    let index = Array::from_slice(&[1i64, 2], &[2]).unwrap();
    let (_, v) = run("prims.scatter_add(a, b, c, 0)", &[a, index, src]);
    assert_eq!(v, [0.0, 1.0, 1.0]);
    // take_along_axis along dim 0 of a 3x2 iota.
    let index = Array::from_slice(&[2i32, 0, 1, 1], &[2, 2]).unwrap();
    let (shape, v) = run("prims.take_along_axis(a, b, 0)", &[iota(6, &[3, 2]), index]);
    assert_eq!(shape, [2, 2]);
    assert_eq!(v, [4.0, 1.0, 2.0, 3.0]);
}
