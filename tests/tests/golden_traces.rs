//! Golden traces: each `tests/golden/*.trace` holds a program and its expected printed trace at
//! every stage: initial, after the passes, the execution trace on the interpreter alone, the
//! execution trace on the default CPU executors (cpu-simd asked first, as `plugins.toml` does,
//! which pins the partition), and for programs with `requires_grad` inputs the grad
//! transform's forward and backward. One test per file, so a failure names it;
//! `THUNDER_BLESS=1 cargo test -p thunder-tests --test golden_traces` rewrites them, otherwise
//! a mismatch prints a unified diff. The printed initial and final traces must also parse back
//! into traces equal to the ones the program produced.

use std::path::PathBuf;
use thunder_core::ir::Trace;
use thunder_core::passes::default_passes;
use thunder_core::text::print_trace;
use thunder_tests::{check_golden, default_cpu_host, interpreter_host, repo_root};
use thunder_torch::parse_trace;

fn section_header(name: &str) -> String {
    format!("==== {name} ====\n")
}

/// The program section of a golden file.
fn program_of(text: &str) -> Option<String> {
    let mut lines = text.split_inclusive('\n');
    lines.find(|l| l.trim_end() == "==== program ====")?;
    Some(
        lines
            .take_while(|l| !l.starts_with("==== "))
            .collect::<String>(),
    )
}

/// Every stage of `program`, printed, in file order.
fn stages(file: &str, program: &str) -> Vec<(String, String)> {
    let initial = parse_trace(program).unwrap_or_else(|e| panic!("{file}: program: {e}"));
    let mut final_trace = initial.clone();
    for pass in default_passes() {
        final_trace = pass.run(&final_trace).expect("pass");
    }
    // The printed form is the trace: it must parse back into the very trace that was printed.
    for (name, trace) in [("initial", &initial), ("final", &final_trace)] {
        let printed = print_trace(trace);
        let reparsed: Trace = parse_trace(&printed)
            .unwrap_or_else(|e| panic!("{file}: the printed {name} trace does not parse: {e}"));
        assert!(
            reparsed == *trace,
            "{file}: the printed {name} trace parses into a different trace:\n{printed}"
        );
        assert_eq!(
            print_trace(&reparsed),
            printed,
            "{file}: {name} prints differently after a round trip"
        );
    }
    let (alone, _) = thunder_core::compile_trace(&interpreter_host(), initial.clone())
        .unwrap_or_else(|e| panic!("{file}: compile on the interpreter: {e}"));
    let (default, _) = thunder_core::compile_trace(&default_cpu_host(), initial.clone())
        .unwrap_or_else(|e| panic!("{file}: compile on cpu-simd and the interpreter: {e}"));
    let mut out = vec![
        ("initial".into(), print_trace(&initial)),
        ("final".into(), print_trace(&final_trace)),
        ("execution".into(), alone.execution.print()),
        (
            "execution on cpu-simd, interpreter".into(),
            default.execution.print(),
        ),
    ];
    // Programs with requires_grad inputs also pin the grad transform's forward and backward.
    if initial.inputs.iter().any(|&v| initial.ty(v).requires_grad) {
        let types = initial.input_types();
        let names = initial.input_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let program = std::sync::Arc::new(initial.clone());
        let vg = thunder_core::autograd::value_and_grad(
            Some(interpreter_host()),
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

fn golden_dir() -> PathBuf {
    repo_root().join("tests/golden")
}

/// Regenerates every stage of `tests/golden/<name>.trace` from its program and compares.
fn check(name: &str) {
    let path = golden_dir().join(format!("{name}.trace"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let program = program_of(&text)
        .unwrap_or_else(|| panic!("{}: no `==== program ====` section", path.display()));
    let mut actual = section_header("program") + &program;
    for (stage, body) in stages(name, &program) {
        actual += &section_header(&stage);
        actual += &body;
    }
    if let Err(diff) = check_golden(&path, &actual) {
        panic!("{diff}");
    }
}

macro_rules! golden {
    ($($name:ident),* $(,)?) => {
        const FILES: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                check(stringify!($name));
            }
        )*
    };
}

golden! {
    dce_cse,
    elementwise_chain,
    grad_mlp_layer,
    half_precision_promotion,
    indexing_and_joining,
    matmul_shapes,
    mlp,
    reductions,
    rounding_and_bitwise,
    scalars_and_empty,
    stats_sorts_conv_rng,
}

/// A golden file without a test above would never be checked.
#[test]
fn every_golden_file_has_a_test() {
    let mut on_disk: Vec<String> = std::fs::read_dir(golden_dir())
        .expect("golden folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "trace"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = FILES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "add the new golden file to `golden!`");
}
