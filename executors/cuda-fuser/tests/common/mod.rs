//! What the golden-source tests share: a trace decomposed to prims as the fuser sees it, every
//! kernel of it planned and generated, and the comparison with the files in `tests/golden`.
// Each test crate compiling this module uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use thunder_abi::TraceView;
use thunder_core::host::view::trace_view;
use thunder_core::host::Config;
use thunder_core::ir::{BoundSymbol, Trace};
use thunder_core::PluginHost;
use thunder_cuda_fuser::codegen::{self, Launch};
use thunder_cuda_fuser::{plan, support};
use thunder_torch::parse_trace;

fn leaves(b: &BoundSymbol, out: &mut Vec<BoundSymbol>) {
    if b.subsymbols.is_empty() {
        out.push(b.clone());
    } else {
        for s in &b.subsymbols {
            leaves(s, out);
        }
    }
}

/// `trace` decomposed to prims, as the fuser sees it after every composite went unclaimed.
pub fn flat_view(trace: &Trace) -> TraceView {
    let mut flat = Vec::new();
    for b in &trace.bsyms {
        leaves(b, &mut flat);
    }
    trace_view(trace, &flat)
}

/// The program `text` decomposed to prims (see [`flat_view`]).
pub fn view_of(text: &str) -> TraceView {
    flat_view(&parse_trace(text).unwrap_or_else(|e| panic!("{e}\n{text}")))
}

/// Plans the whole trace as one region (every op must be accepted) and generates every kernel:
/// the kernels, their launches and the source, each kernel under its launch.
pub fn generate(text: &str) -> (Vec<plan::Kernel>, Vec<Launch>, String) {
    generate_for(text, codegen::Target::PORTABLE)
}

/// [`generate`] for a device described by `target`.
pub fn generate_for(
    text: &str,
    target: codegen::Target,
) -> (Vec<plan::Kernel>, Vec<Launch>, String) {
    let view = view_of(text);
    let ops: Vec<u32> = (0..view.ops.len() as u32).collect();
    for op in view.ops.iter() {
        assert!(
            support::accepts(&view, op),
            "the fuser should accept {}",
            op.symbol
        );
    }
    let kernels = plan::plan(&view, &ops, &view.outputs).expect("plans");
    let mut launches = Vec::new();
    let mut source = String::new();
    for (i, k) in kernels.iter().enumerate() {
        let g = codegen::generate_for(k, &format!("thunder_fused_{i}"), target);
        source.push_str(&format!("// launch: {:?}\n", g.launch));
        source.push_str(&g.source);
        source.push('\n');
        launches.push(g.launch);
    }
    (kernels, launches, source)
}

/// `text` against `tests/golden/NAME.cu` (`THUNDER_BLESS=1` rewrites it); a mismatch panics
/// with a unified diff.
pub fn check_golden(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.cu"));
    if let Err(diff) = thunder_tests::check_golden(&path, text) {
        panic!("{diff}");
    }
}

/// A host with only the interpreter (the reference), loaded from the target dir.
pub fn interpreter() -> PluginHost {
    // target/debug/deps/<test> -> target/debug
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent()?.parent().map(PathBuf::from))
        .expect("target dir");
    let lib = dir.join(format!(
        "{}thunder_interpreter{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        lib.exists(),
        "{} missing: cargo build --workspace first",
        lib.display()
    );
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n",
        lib.display()
    );
    PluginHost::load(
        &Config::parse(&text, "<test>".as_ref()).expect("config"),
        &[],
    )
}

/// Every kernel of `trace` (one region: every op accepted) evaluated on the host by `emulate`
/// against the interpreter running the same program on the CPU, on random inputs (from
/// `seed`), within `rtol` relative to `1 + |expected|`.
pub fn emulate_against_interpreter(name: &str, trace: &Trace, rtol: f64, seed: u64) {
    use std::collections::HashMap;
    use thunder_core::{Array, Device};
    let text = thunder_core::text::print_trace(trace);
    let view = flat_view(trace);
    let ops: Vec<u32> = (0..view.ops.len() as u32).collect();
    let kernels = plan::plan(&view, &ops, &view.outputs).expect("plans");
    let cpu = trace.on_device(Device::Cpu);
    let inputs: Vec<Array> = cpu
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            Array::random(&cpu.ty(v).shape, cpu.ty(v).dtype, seed + i as u64).expect("input")
        })
        .collect();
    let (_, program) = thunder_core::compile_trace(&interpreter(), cpu.clone()).expect("compiles");
    let want = program.run(&inputs).expect("runs");
    let mut memory: HashMap<u32, Vec<f64>> = HashMap::new();
    for (&v, a) in trace.inputs.iter().zip(&inputs) {
        memory.insert(v.0, a.to_f64_vec().expect("host array"));
    }
    thunder_cuda_fuser::emulate::run(&kernels, &mut memory);
    for (k, (&v, w)) in trace.outputs.iter().zip(&want).enumerate() {
        let got = memory
            .get(&v.0)
            .unwrap_or_else(|| panic!("{name}: output {k} written by no kernel\n{text}"));
        let w = w.to_f64_vec().expect("host array");
        assert_eq!(got.len(), w.len(), "{name}: output {k} length");
        for (i, (g, e)) in got.iter().zip(&w).enumerate() {
            let ok = (g.is_nan() && e.is_nan()) || (g - e).abs() <= rtol * (1.0 + e.abs());
            assert!(
                ok,
                "{name}: output {k}[{i}]: plan gives {g}, interpreter {e}\n{text}"
            );
        }
    }
}

/// softmax's backward from its output `y` and cotangent `g` over rows of `cols` (as ltorch's
/// VJP writes it), both `dtype`, returning `dtype`.
pub fn softmax_grad(dtype: &str, cols: i64) -> String {
    format!(
        r#"def computation(y, g):
  # y: "cuda:0 {dtype}[4, {cols}]"
  # g: "cuda:0 {dtype}[4, {cols}]"
  t0 = prims.convert_element_type(y, dtypes.f32)
  t1 = prims.convert_element_type(g, dtypes.f32)
  t2 = ltorch.mul(t1, t0)
  t3 = ltorch.sum(t2, [1], True)
  t4 = ltorch.sub(t1, t3)
  t5 = ltorch.mul(t0, t4)
  t6 = prims.convert_element_type(t5, dtypes.{dtype})
  return (t6,)
"#
    )
}
