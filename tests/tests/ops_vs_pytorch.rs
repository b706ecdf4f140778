//! Every op case of `tests/fixtures/ops` (made by `scripts/gen_op_fixtures.py` with PyTorch):
//! the program is parsed, compiled through the interpreter plugin, run on the stored inputs,
//! and compared with PyTorch's outputs in dtype, shape and value.

use std::collections::HashMap;
use thunder_core::Array;
use thunder_tests::{close, fixture_cases, interpreter_host, repo_root};

/// Cases where we deliberately differ from PyTorch, with the reason. The test checks that each
/// still differs, so the list cannot go stale.
const KNOWN_DEVIATIONS: &[(&str, &str)] = &[
    (
        "polygamma/c24",
        "trigamma at a negative integer (a pole) is +inf; PyTorch's reflection divides by sin(pi * x), which is ~1e-16 there, and returns ~6.6e32",
    ),
    (
        "gelu/c9",
        "gelu(+inf) is +inf (0.5 * inf * (1 + erf(inf))); PyTorch's CPU kernel returns NaN",
    ),
    (
        "pow/c54",
        "pow of a bool tensor by a bool is refused by prims.pow (no bool arithmetic beyond add/mul); PyTorch returns bool",
    ),
];

#[test]
fn every_op_matches_pytorch() {
    let dir = repo_root().join("tests/fixtures/ops");
    let manifest = fixture_cases(&dir);
    let host = interpreter_host();
    let mut failures = Vec::new();
    let mut per_op: HashMap<String, usize> = HashMap::new();
    for case in &manifest {
        let (op, program, id) = (case.op.clone(), case.program.clone(), case.id.clone());
        let inputs: Vec<Array> = case.arrays("inputs");
        let expected: Vec<Array> = case.arrays("outputs");
        let (rtol, atol) = (
            case.json["rtol"].as_f64().unwrap_or(0.0),
            case.json["atol"].as_f64().unwrap_or(0.0),
        );
        let equal_nan = case.json["equal_nan"].as_bool().unwrap_or(false);
        let result = thunder_torch::parse_trace(&program)
            .and_then(|t| thunder_core::compile_trace(&host, t))
            .and_then(|(_, compiled)| compiled.run(&inputs));
        let actual = match result {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{id}: error: {e}"));
                continue;
            }
        };
        if actual.len() != expected.len() {
            failures.push(format!(
                "{id}: {} outputs, PyTorch gives {}",
                actual.len(),
                expected.len()
            ));
            continue;
        }
        if actual.len() != expected.len() {
            failures.push(format!(
                "{id}: {} outputs, PyTorch gives {}",
                actual.len(),
                expected.len()
            ));
            continue;
        }
        for (k, (a, e)) in actual.iter().zip(&expected).enumerate() {
            if a.dtype() != e.dtype() || a.shape() != e.shape() {
                failures.push(format!(
                    "{id}: output {k} is {}, PyTorch gives {}",
                    a.ty(),
                    e.ty()
                ));
                continue;
            }
            let (av, ev) = (
                a.to_f64_vec().expect("host array"),
                e.to_f64_vec().expect("host array"),
            );
            if let Some(i) = (0..av.len()).find(|&i| !close(av[i], ev[i], rtol, atol, equal_nan)) {
                failures.push(format!(
                    "{id}: output {k} element {i}: got {} expected {} (rtol {rtol}, atol {atol})",
                    av[i], ev[i]
                ));
            }
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
        manifest.len() > 1000,
        "the fixture set is unexpectedly small: {}",
        manifest.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from PyTorch:\n{}",
        failures.len(),
        manifest.len(),
        failures
            .iter()
            .take(60)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(per_op.len() >= 40, "only {} ops covered", per_op.len());
}
