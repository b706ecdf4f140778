//! Golden traces: each `tests/golden/*.trace` holds a program and its expected printed trace at
//! every stage. `THUNDER_BLESS=1 cargo test -p thunder-tests --test golden_traces` rewrites the
//! expectations; otherwise a mismatch prints a unified diff. Each printed stage must also parse
//! back into an equal trace that prints the same.

use std::path::Path;
use thunder_core::passes::default_passes;
use thunder_core::text::{parse_trace, print_trace};
use thunder_tests::{interpreter_host, repo_root};

fn section_header(name: &str) -> String {
    format!("==== {name} ====\n")
}

fn split_sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        if let Some(name) = line
            .trim_end()
            .strip_prefix("==== ")
            .and_then(|l| l.strip_suffix(" ===="))
        {
            out.push((name.to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
        }
    }
    out
}

fn stages(program: &str) -> Vec<(String, String)> {
    let initial = parse_trace(program).unwrap_or_else(|e| panic!("program does not parse: {e}"));
    let mut final_trace = initial.clone();
    for pass in default_passes() {
        final_trace = pass.run(&final_trace).expect("pass");
    }
    let host = interpreter_host();
    let (traces, _) = thunder_core::compile_trace(&host, initial.clone()).expect("compile");
    let mut out = vec![
        ("initial".into(), print_trace(&initial)),
        ("final".into(), print_trace(&final_trace)),
        ("execution".into(), traces.execution.print()),
    ];
    // Programs with requires_grad inputs also pin the grad transform's forward and backward.
    if initial.inputs.iter().any(|&v| initial.ty(v).requires_grad) {
        let types = initial.input_types();
        let names = initial.input_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let program = std::sync::Arc::new(initial.clone());
        let vg = thunder_core::autograd::value_and_grad(
            Some(host.clone()),
            move |xs: &[thunder_core::Tensor]| thunder_core::trace_ctx::replay(&program, xs),
        )
        .with_input_names(&names);
        let (joint, forward_len, n_outputs) = vg.joint_trace(&types).expect("joint trace");
        let (fwd, bwd, _) =
            thunder_core::autograd::split_forward_backward(&joint, forward_len, n_outputs)
                .expect("split");
        out.push(("forward".into(), print_trace(&fwd)));
        out.push(("backward".into(), print_trace(&bwd)));
    }
    out
}

fn check_file(path: &Path, bless: bool) -> Option<String> {
    let text = std::fs::read_to_string(path).expect("golden file");
    let sections = split_sections(&text);
    let program = sections
        .iter()
        .find(|(n, _)| n == "program")
        .map(|(_, b)| b.clone())
        .expect("a program section");
    let actual = stages(&program);
    // Round trip: every parseable stage parses into an equal trace that prints the same.
    for (name, printed) in actual
        .iter()
        .filter(|(n, _)| matches!(n.as_str(), "initial" | "final"))
    {
        let reparsed = parse_trace(printed)
            .unwrap_or_else(|e| panic!("{}: {name} does not parse back: {e}", path.display()));
        assert_eq!(
            &print_trace(&reparsed),
            printed,
            "{}: {name} does not print the same after parsing",
            path.display()
        );
        let original = parse_trace(printed).expect("parse");
        assert!(
            reparsed == original,
            "{}: {name}: traces differ after a round trip",
            path.display()
        );
    }
    if bless {
        let mut out = section_header("program") + &program;
        for (name, body) in &actual {
            out += &section_header(name);
            out += body;
        }
        std::fs::write(path, out).expect("write golden");
        return None;
    }
    let mut report = String::new();
    let written: Vec<&str> = sections
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| *n != "program")
        .collect();
    let produced: Vec<&str> = actual.iter().map(|(n, _)| n.as_str()).collect();
    if written != produced {
        report += &format!(
            "{}: sections {written:?} but the program produces {produced:?}\n",
            path.display()
        );
    }
    for (stage, got) in &actual {
        let expected = sections
            .iter()
            .find(|(n, _)| n == stage)
            .map(|(_, b)| b.as_str())
            .unwrap_or("");
        if expected != got {
            let diff = similar::TextDiff::from_lines(expected, got.as_str());
            report += &format!(
                "{} [{stage}]:\n{}\n",
                path.display(),
                diff.unified_diff().header("expected", "actual")
            );
        }
    }
    (!report.is_empty()).then_some(report)
}

#[test]
fn golden_traces_match() {
    let bless = std::env::var_os("THUNDER_BLESS").is_some();
    let mut files: Vec<_> = std::fs::read_dir(repo_root().join("tests/golden"))
        .expect("golden folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "trace"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "expected golden files, found {}",
        files.len()
    );
    let failures: Vec<String> = files.iter().filter_map(|f| check_file(f, bless)).collect();
    assert!(
        failures.is_empty(),
        "golden traces differ (THUNDER_BLESS=1 to accept):\n{}",
        failures.join("\n")
    );
}
