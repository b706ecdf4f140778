//! Programs written as people write them (`tests/natural/*.py`: keyword arguments, torch's
//! defaults, no type annotations) run on inputs from `.npy` files and match PyTorch, which ran
//! the very same program text (`scripts/gen_natural_fixtures.py` binds `ltorch.<op>` to torch's
//! function of that name, so the keyword names and defaults are torch's).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use thunder_core::ir::TensorType;
use thunder_core::runtime::npy::read_npy;
use thunder_core::Array;
use thunder_tests::{close, default_cpu_host, repo_root};

/// Inputs (`NAME.npy`) and PyTorch's outputs (`out_K.npy`) of one program, by name.
fn fixture(folder: &Path) -> (HashMap<String, Array>, Vec<Array>) {
    let mut inputs = HashMap::new();
    let mut outputs = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(folder)
        .expect("fixture folder")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("file name");
        let array = read_npy(&path).expect("npy fixture");
        match stem.strip_prefix("out_") {
            Some(k) => outputs.push((k.parse::<usize>().expect("out_K"), array)),
            None => {
                inputs.insert(stem.to_string(), array);
            }
        }
    }
    outputs.sort_by_key(|(k, _)| *k);
    (inputs, outputs.into_iter().map(|(_, a)| a).collect())
}

fn programs() -> Vec<(String, String)> {
    let dir = repo_root().join("tests/natural");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("tests/natural")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .map(|p| {
            let name = p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_string();
            (name, std::fs::read_to_string(&p).expect("program"))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn natural_programs_match_pytorch() {
    let host = default_cpu_host();
    let mut failures = Vec::new();
    let programs = programs();
    assert!(
        programs.len() >= 12,
        "expected the natural programs, found {}",
        programs.len()
    );
    for (name, text) in &programs {
        let (inputs, expected) = fixture(&repo_root().join("tests/fixtures/natural").join(name));
        let types: HashMap<String, TensorType> = inputs
            .iter()
            .map(|(n, a)| (n.clone(), a.ty().clone()))
            .collect();
        let result = thunder_torch::parse_trace_with(text, &types).and_then(|trace| {
            let ordered: Vec<Array> = trace
                .input_names()
                .iter()
                .map(|n| inputs[n].clone())
                .collect();
            let (_, compiled) = thunder_core::compile_trace(&host, trace)?;
            compiled.run(&ordered)
        });
        let actual = match result {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        if actual.len() != expected.len() {
            failures.push(format!(
                "{name}: {} outputs, PyTorch gives {}",
                actual.len(),
                expected.len()
            ));
            continue;
        }
        for (k, (a, e)) in actual.iter().zip(&expected).enumerate() {
            if a.dtype() != e.dtype() || a.shape() != e.shape() {
                failures.push(format!(
                    "{name}: output {k} is {}, PyTorch gives {}",
                    a.ty(),
                    e.ty()
                ));
                continue;
            }
            let (av, ev) = (a.to_f64_vec().expect("host"), e.to_f64_vec().expect("host"));
            // f32 programs: torch.testing's f32 tolerances, a little looser for reductions.
            let bad = av
                .iter()
                .zip(&ev)
                .filter(|(x, y)| !close(**x, **y, 1e-5, 1e-5, true))
                .count();
            if bad > 0 {
                failures.push(format!(
                    "{name}: output {k}: {bad} elements differ from PyTorch"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `ltorch.<op>(` calls in the programs that pass at least one argument by keyword.
fn ops_called_by_keyword() -> BTreeSet<String> {
    let mut ops = BTreeSet::new();
    for (_, text) in programs() {
        for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let Some(at) = line.find("ltorch.") else {
                continue;
            };
            let rest = &line[at..];
            let Some(open) = rest.find('(') else { continue };
            let args = &rest[open..];
            // A keyword argument: `name=` not part of `==`.
            let keyword = args.split([',', '(']).any(|part| {
                part.trim().split_once('=').is_some_and(|(k, _)| {
                    !k.is_empty() && k.trim().chars().all(|c| c.is_alphanumeric() || c == '_')
                })
            });
            if keyword {
                ops.insert(rest[..open].to_string());
            }
        }
    }
    ops
}

#[test]
fn every_ltorch_op_is_called_by_keyword() {
    let called = ops_called_by_keyword();
    let missing: Vec<&str> = thunder_torch::symbols()
        .iter()
        .map(|s| s.id)
        .filter(|id| !called.contains(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "ltorch ops no natural program calls by keyword: {}",
        missing.join(", ")
    );
}

#[test]
fn nested_calls_run_first_and_print_as_flat_statements() {
    let text = "def f(x, w):\n  y = ltorch.relu(ltorch.matmul(x, ltorch.transpose(w, 0, 1)))\n  return ltorch.sum(y, dim=0), ltorch.exp(x)\n";
    let f32 = |shape: &[usize]| {
        thunder_core::text::parse_type(&format!(
            "cpu f32[{}]",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .expect("type")
    };
    let types = HashMap::from([
        ("x".to_string(), f32(&[2, 3])),
        ("w".to_string(), f32(&[4, 3])),
    ]);
    let trace = thunder_torch::parse_trace_with(text, &types).expect("nested calls parse");
    let printed = thunder_core::text::print_trace(&trace);
    // One statement per call, inner calls first, and the text parses back to the same trace.
    let calls: Vec<&str> = printed
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.starts_with('#') && l.contains(" = ltorch."))
        .collect();
    let ops: Vec<&str> = calls
        .iter()
        .filter_map(|l| l.split(" = ").nth(1))
        .filter_map(|r| r.split('(').next())
        .collect();
    assert_eq!(
        ops,
        [
            "ltorch.transpose",
            "ltorch.matmul",
            "ltorch.relu",
            "ltorch.sum",
            "ltorch.exp"
        ],
        "{printed}"
    );
    assert!(
        calls.iter().all(|l| l.matches("ltorch.").count() == 1),
        "{printed}"
    );
    let again = thunder_torch::parse_trace(&printed).expect("printed trace parses");
    assert_eq!(thunder_core::text::print_trace(&again), printed);
}

#[test]
fn return_of_a_literal_is_an_error_naming_it() {
    let text = "def f(x):\n  # x: \"cpu f32[2]\"\n  return 3\n";
    let err = thunder_torch::parse_trace(text).expect_err("return 3 is refused");
    let msg = err.to_string();
    assert!(
        msg.contains("line 3") && msg.contains("`return` takes names or calls"),
        "{msg}"
    );
}
