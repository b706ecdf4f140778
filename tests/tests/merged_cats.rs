//! `passes::MergedCats` on attention's qkv-gradient pattern: three [B, H, T, D] tensors
//! transposed, merged to [B, T, C], catted to [B, T, 3C] and summed over (B, T). The pass cats
//! the transposes along H and reshapes the results; the values are what the pattern means,
//! computed here by hand from the inputs.

use std::collections::HashSet;
use thunder_core::ir::{Arg, Trace};
use thunder_core::prims::prim1;
use thunder_core::trace_ctx::trace_with;
use thunder_core::{clang, compile_trace, Array};
use thunder_tests::finite_differences::values;
use thunder_tests::interpreter_host;

/// A prim-level trace (as a backward is) of `f` over inputs shaped like `inputs`.
fn prim_trace(
    inputs: &[Array],
    f: impl FnOnce(&[thunder_core::Tensor]) -> thunder_core::Result<Vec<thunder_core::Tensor>>,
) -> Trace {
    let named: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("x{i}"), a.ty().clone()))
        .collect();
    trace_with(&named, HashSet::new(), "test", f).expect("trace")
}

/// Runs `trace` on the interpreter (after the default passes) and returns the outputs and the
/// final trace's text.
fn run(trace: Trace, inputs: &[Array]) -> (Vec<Array>, String) {
    let (traces, program) = compile_trace(&interpreter_host(), trace).expect("compiles");
    let text = thunder_core::text::print_trace(traces.final_trace());
    (program.run(inputs).expect("runs"), text)
}

#[test]
fn a_cat_of_merged_heads_has_the_values_of_the_pattern() {
    let (b, h, t, d) = (2usize, 3usize, 4usize, 5usize);
    let shape = [b as i64, h as i64, t as i64, d as i64];
    let inputs: Vec<Array> = (0..3).map(|i| values(&shape, 40 + i, -1.0, 1.0)).collect();
    let trace = prim_trace(&inputs, |xs| {
        let mut cat_args = vec![Arg::Int(2)];
        for x in xs {
            let heads = clang::transpose(x, vec![0, 2, 1, 3])?;
            let merged = clang::reshape(&heads, vec![b as i64, t as i64, (h * d) as i64])?;
            cat_args.push(Arg::Value(merged.value()));
        }
        let cat = prim1(thunder_abi::prims::Prim::Cat, cat_args)?;
        let sum = prim1(
            thunder_abi::prims::Prim::Sum,
            vec![Arg::Value(cat.value()), Arg::Ints(vec![0, 1])],
        )?;
        Ok(vec![cat, sum])
    });
    let (out, text) = run(trace, &inputs);
    assert!(
        text.contains("prims.cat(2") && text.contains("f64[2, 4, 9, 5]"),
        "the pass cats the heads along H:\n{text}"
    );
    let x: Vec<Vec<f64>> = inputs
        .iter()
        .map(|a| a.to_f64_vec().expect("f64"))
        .collect();
    let c = h * d;
    let mut cat = vec![0f64; b * t * 3 * c];
    let mut sum = vec![0f64; 3 * c];
    for bi in 0..b {
        for ti in 0..t {
            for (j, xj) in x.iter().enumerate() {
                for hi in 0..h {
                    for di in 0..d {
                        let v = xj[((bi * h + hi) * t + ti) * d + di];
                        let col = j * c + hi * d + di;
                        cat[(bi * t + ti) * 3 * c + col] = v;
                        sum[col] += v;
                    }
                }
            }
        }
    }
    assert_eq!(out[0].ty().shape, [b as i64, t as i64, 3 * c as i64]);
    assert_eq!(out[0].to_f64_vec().expect("f64"), cat, "the cat");
    assert_eq!(out[1].ty().shape, [3 * c as i64]);
    for (got, want) in out[1].to_f64_vec().expect("f64").iter().zip(&sum) {
        assert!(
            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "{got} vs {want}"
        );
    }
}

/// Not a merge of trailing dims (the reshape splits them differently): left alone, still right.
#[test]
fn a_cat_of_other_reshapes_is_left_alone() {
    let x = values(&[2, 6], 50, -1.0, 1.0);
    let y = values(&[2, 6], 51, -1.0, 1.0);
    let inputs = [x.clone(), y.clone()];
    let trace = prim_trace(&inputs, |xs| {
        let a = clang::reshape(&xs[0], vec![3, 4])?;
        let b = clang::reshape(&xs[1], vec![3, 4])?;
        Ok(vec![clang::cat(&[a, b], 1)?])
    });
    let (out, text) = run(trace, &inputs);
    assert!(
        text.contains("f64[3, 8]") && !text.contains("_m1"),
        "{text}"
    );
    let (xv, yv) = (x.to_f64_vec().unwrap(), y.to_f64_vec().unwrap());
    let mut want = Vec::new();
    for r in 0..3 {
        want.extend_from_slice(&xv[r * 4..r * 4 + 4]);
        want.extend_from_slice(&yv[r * 4..r * 4 + 4]);
    }
    assert_eq!(out[0].to_f64_vec().unwrap(), want);
}
