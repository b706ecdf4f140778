//! Every gradient case of `tests/fixtures/grads` (made by `scripts/gen_grad_fixtures.py` with
//! PyTorch): the op's program is parsed and replayed inside a `value_and_grad` closure whose
//! loss is `sum(out * cot)` (the cotangent `cot` is an extra input without grad), and the
//! gradients are compared with PyTorch's `autograd.grad(out, inputs, cot)` in dtype, shape and
//! value.

use std::collections::BTreeMap;
use thunder_core::autograd::value_and_grad;
use thunder_core::{Array, Tensor};
use thunder_tests::{close, fixture_cases, interpreter_host, repo_root};
use thunder_torch::prelude::*;

/// The number of cases `scripts/gen_grad_fixtures.py` generates; the test fails if fewer ran.
const EXPECTED_CASES: usize = 346;

/// Cases where we deliberately differ from PyTorch, with the reason. The test checks that each
/// still differs, so the list cannot go stale.
const KNOWN_DEVIATIONS: &[(&str, &str)] = &[];

/// Runs one case; returns its mismatches (empty when every gradient matches).
fn run_case(
    program: &str,
    inputs: Vec<Array>,
    requires_grad: &[bool],
    cot: Array,
    expected: &[Array],
    rtol: f64,
    atol: f64,
) -> Vec<String> {
    let trace = match thunder_torch::parse_trace(program) {
        Ok(t) => t,
        Err(e) => return vec![format!("parse error: {e}")],
    };
    let n = inputs.len();
    let vg = value_and_grad(
        Some(interpreter_host()),
        move |xs: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            let outs = thunder_core::trace_ctx::replay(&trace, &xs[..n])?;
            Ok(vec![(&outs[0] * &xs[n]).sum(None, false)])
        },
    );
    let mut args: Vec<Array> = inputs
        .into_iter()
        .zip(requires_grad)
        .map(|(a, &r)| a.with_requires_grad(r))
        .collect();
    args.push(cot);
    let grads = match vg.call(&args) {
        Ok((_, g)) => g,
        Err(e) => return vec![format!("error: {e}")],
    };
    if grads.len() != expected.len() {
        return vec![format!(
            "{} gradients, PyTorch gives {}",
            grads.len(),
            expected.len()
        )];
    }
    let wrt: Vec<usize> = (0..n).filter(|&i| requires_grad[i]).collect();
    let mut failures = Vec::new();
    for ((a, e), k) in grads.iter().zip(expected).zip(wrt) {
        if a.dtype() != e.dtype() || a.shape() != e.shape() {
            failures.push(format!(
                "grad of input {k} is {}, PyTorch gives {}",
                a.ty(),
                e.ty()
            ));
            continue;
        }
        let (av, ev) = (
            a.to_f64_vec().expect("host array"),
            e.to_f64_vec().expect("host array"),
        );
        let bad: Vec<usize> = (0..av.len())
            .filter(|&i| !close(av[i], ev[i], rtol, atol, false))
            .collect();
        if let Some(&i) = bad.first() {
            failures.push(format!(
                "grad of input {k}: {} of {} elements differ, first at {i}: got {} expected {} (rtol {rtol}, atol {atol}); got {:?} expected {:?}",
                bad.len(),
                av.len(),
                av[i],
                ev[i],
                av,
                ev
            ));
        }
    }
    failures
}

#[test]
fn every_gradient_matches_pytorch() {
    let dir = repo_root().join("tests/fixtures/grads");
    let manifest = fixture_cases(&dir);
    let mut failures = Vec::new();
    let mut per_op: BTreeMap<String, usize> = BTreeMap::new();
    for case in &manifest {
        let s = |k: &str| case.str(k);
        let (op, program, id) = (case.op.clone(), case.program.clone(), case.id.clone());
        let inputs: Vec<Array> = case.arrays("inputs");
        let requires_grad: Vec<bool> = case.json["requires_grad"]
            .as_array()
            .expect("requires_grad")
            .iter()
            .map(|v| v.as_bool().expect("requires_grad flag"))
            .collect();
        assert_eq!(requires_grad.len(), inputs.len(), "{id}: requires_grad");
        let cot = case.array(&s("cot"));
        let expected: Vec<Array> = case.arrays("grads");
        let (rtol, atol) = (
            case.json["rtol"].as_f64().expect("rtol"),
            case.json["atol"].as_f64().expect("atol"),
        );
        for f in run_case(&program, inputs, &requires_grad, cot, &expected, rtol, atol) {
            failures.push(format!("{id}: {f}"));
        }
        *per_op.entry(op).or_default() += 1;
    }
    let mut stale = Vec::new();
    for (key, why) in KNOWN_DEVIATIONS {
        let before = failures.len();
        failures.retain(|f| !f.starts_with(&format!("{key} ")));
        if failures.len() == before {
            stale.push(format!(
                "{key} is listed as a known deviation ({why}) but now matches PyTorch"
            ));
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
    assert!(
        failures.is_empty(),
        "{} gradient mismatches with PyTorch over {} cases:\n{}",
        failures.len(),
        manifest.len(),
        failures
            .iter()
            .take(60)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    let ran: usize = per_op.values().sum();
    assert!(
        ran >= EXPECTED_CASES,
        "only {ran} gradient cases ran, expected at least {EXPECTED_CASES}"
    );
    assert!(
        per_op.len() >= 33,
        "only {} ops covered: {per_op:?}",
        per_op.len()
    );
}
