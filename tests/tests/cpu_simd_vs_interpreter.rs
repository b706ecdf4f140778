//! The cpu-simd executor against the reference interpreter (and PyTorch): every case of
//! `tests/fixtures/ops` runs through a host with cpu-simd (priority 20) above the interpreter
//! and through the interpreter alone, and the outputs must agree. The test also counts what
//! cpu-simd claimed, so it cannot pass by cpu-simd claiming nothing, and runs the demo's MLP
//! training step (value_and_grad + SGD) both ways.
//!
//! Tolerances against the interpreter (which computes in f64 and rounds once):
//! - elementwise f32: rtol 1e-5, atol 1e-6 (exp/log/tanh/erf are vectorized approximations
//!   within 1 to 5 ulp, see cpu-simd's `math.rs`; everything else rounds like the
//!   interpreter);
//! - reductions and matmul (sum, amax, mean, matmul, linear, softmax): f32 rtol 1e-4, atol
//!   1e-5, since GEMM sums in f32 in another order (sums are accumulated in f64 like the
//!   interpreter's);
//! - f64: rtol 1e-10, atol 1e-12; bf16/f16 tanh-GELU atol 1e-6 (see `tolerance`); every other
//!   dtype exactly.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use thunder_core::host::Config;
use thunder_core::{Array, DType, PluginHost};
use thunder_tests::{close, fixture_cases, interpreter_host, interpreter_library, repo_root};
use thunder_torch::prelude::*;

/// Cases where the interpreter deliberately differs from PyTorch (see ops_vs_pytorch.rs);
/// cpu-simd follows the interpreter there.
const PYTORCH_DEVIATIONS: &[&str] = &["gelu/c9", "pow/c54", "polygamma/c24"];

/// Ops whose results depend on summation order.
const ORDER_DEPENDENT: &[&str] = &[
    "sum",
    "amax",
    "mean",
    "matmul",
    "linear",
    "softmax",
    "scaled_dot_product_attention",
    "sdpa_fwd_lse",
    "sdpa_bwd",
];

fn cpu_simd_library() -> PathBuf {
    thunder_tests::plugin_library("thunder_cpu_simd")
}

/// cpu-simd at priority 20 above the interpreter, both from this build.
fn simd_host() -> Arc<PluginHost> {
    static HOST: OnceLock<Arc<PluginHost>> = OnceLock::new();
    HOST.get_or_init(|| {
        let text = format!(
            "[[executor]]\nname = \"cpu-simd\"\nlibrary = \"{}\"\npriority = 20\nrequires = \"^0.1\"\n\n\
             [[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\nrequires = \"^0.1\"\n",
            cpu_simd_library().display(),
            interpreter_library().display()
        );
        let config = Config::parse(&text, std::path::Path::new("<test>")).expect("config");
        let host = PluginHost::load(&config, &[]);
        assert!(host.issues().is_empty(), "load issues: {:?}", host.issues());
        assert_eq!(host.entries().len(), 2);
        Arc::new(host)
    })
    .clone()
}

fn tolerance(op: &str, dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 if ORDER_DEPENDENT.contains(&op) => (1e-4, 1e-5),
        DType::F32 => (1e-5, 1e-6),
        DType::F64 => (1e-10, 1e-12),
        // tanh-GELU's `1 + tanh(z)` cancels below x = -4: an ulp of cpu-simd's f32 tanh is
        // ~1% of the result there (of size 1e-5), which can round a bf16/f16 result to the
        // neighbour of the interpreter's (f64, rounded once); the error stays below 1e-6.
        DType::BF16 | DType::F16 if op == "gelu" => (0.0, 1e-6),
        _ => (0.0, 0.0),
    }
}

/// The first element where `a` and `e` differ beyond the tolerance, as a message.
fn mismatch(a: &Array, e: &Array, rtol: f64, atol: f64, equal_nan: bool) -> Option<String> {
    if a.dtype() != e.dtype() || a.shape() != e.shape() {
        return Some(format!("got {} expected {}", a.ty(), e.ty()));
    }
    let (av, ev) = (
        a.to_f64_vec().expect("host array"),
        e.to_f64_vec().expect("host array"),
    );
    (0..av.len())
        .find(|&i| !close(av[i], ev[i], rtol, atol, equal_nan))
        .map(|i| {
            format!(
                "element {i}: got {} expected {} (rtol {rtol}, atol {atol})",
                av[i], ev[i]
            )
        })
}

#[test]
fn every_op_case_matches_the_interpreter_and_pytorch() {
    let dir = repo_root().join("tests/fixtures/ops");
    let manifest = fixture_cases(&dir);
    let (simd, interp) = (simd_host(), interpreter_host());
    let mut failures = Vec::new();
    let (mut claimed_cases, mut claimed_ops) = (0usize, 0usize);
    let mut claimed_per_op: HashMap<String, usize> = HashMap::new();
    for case in &manifest {
        let (op, program, key, id) = (
            case.op.clone(),
            case.program.clone(),
            case.key.clone(),
            case.id.clone(),
        );
        let inputs: Vec<Array> = case.arrays("inputs");
        let torch: Vec<Array> = case.arrays("outputs");
        let run = |host: &PluginHost| {
            thunder_torch::parse_trace(&program)
                .and_then(|t| thunder_core::compile_trace(host, t))
                .and_then(|(traces, compiled)| Ok((traces, compiled.run(&inputs)?)))
        };
        let ((traces, got), want) = match (run(&simd), run(&interp)) {
            (Ok(g), Ok((_, w))) => (g, w),
            (Err(e), Ok(_)) => {
                failures.push(format!("{id}: fails with cpu-simd only: {e}"));
                continue;
            }
            // A case the interpreter cannot run is not this test's business.
            (_, Err(_)) => continue,
        };
        let exec = &traces.execution;
        for note in exec.notes.iter().filter(|n| n.executor == "cpu-simd") {
            failures.push(format!("{id}: note about cpu-simd: {}", note.message));
        }
        let ops: usize = exec
            .steps
            .iter()
            .filter(|s| s.executor == "cpu-simd")
            .map(|s| s.ops.len())
            .sum();
        if ops > 0 {
            claimed_cases += 1;
            claimed_ops += ops;
            *claimed_per_op.entry(op.clone()).or_default() += 1;
        }
        for (k, (a, e)) in got.iter().zip(&want).enumerate() {
            let (rtol, atol) = tolerance(&op, e.dtype());
            if let Some(m) = mismatch(a, e, rtol, atol, true) {
                failures.push(format!(
                    "{id}: output {k} differs from the interpreter: {m}"
                ));
            }
        }
        if !PYTORCH_DEVIATIONS.contains(&key.as_str()) {
            let (rtol, atol) = (
                case.json["rtol"].as_f64().unwrap_or(0.0),
                case.json["atol"].as_f64().unwrap_or(0.0),
            );
            let equal_nan = case.json["equal_nan"].as_bool().unwrap_or(false);
            for (k, (a, e)) in got.iter().zip(&torch).enumerate() {
                if let Some(m) = mismatch(a, e, rtol, atol, equal_nan) {
                    failures.push(format!("{id}: output {k} differs from PyTorch: {m}"));
                }
            }
        }
    }
    let mut per_op: Vec<_> = claimed_per_op.into_iter().collect();
    per_op.sort();
    eprintln!(
        "cpu-simd claimed ops in {claimed_cases} of {} cases ({claimed_ops} ops): {per_op:?}",
        manifest.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures
            .iter()
            .take(60)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        claimed_cases > 500 && per_op.len() >= 35,
        "cpu-simd claimed too little: {claimed_cases} cases, {} ops",
        per_op.len()
    );
}

/// The demo's model (thunder-cli/src/commands/demo/mlp.rs): 64 → 128 → 128 → 10 with ReLU.
const LAYERS: [(i64, i64); 3] = [(64, 128), (128, 128), (128, 10)];
const BATCH: i64 = 256;

fn logits(p: &[thunder_core::Tensor], x: &thunder_core::Tensor) -> thunder_core::Tensor {
    let h1 = x.linear(&p[0], Some(&p[1])).relu();
    let h2 = h1.linear(&p[2], Some(&p[3])).relu();
    h2.linear(&p[4], Some(&p[5]))
}

fn init_params() -> Vec<Array> {
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, &(fan_in, fan_out))| {
            let scale = |a: Array| {
                let bound = 1.0 / (fan_in as f64).sqrt();
                let v: Vec<f32> = a
                    .to_f64_vec()
                    .expect("host array")
                    .iter()
                    .map(|x| (x * bound) as f32)
                    .collect();
                Array::from_slice(&v, a.shape()).expect("param")
            };
            let w = Array::random(&[fan_out, fan_in], DType::F32, 10 + i as u64).expect("w");
            let b = Array::random(&[fan_out], DType::F32, 20 + i as u64).expect("b");
            [scale(w), scale(b)].map(|a| a.with_requires_grad(true))
        })
        .collect()
}

/// Losses of three steps of value_and_grad + momentum SGD on `host`, and the final params.
fn train(host: Arc<PluginHost>) -> (Vec<f32>, Vec<Array>, Vec<String>) {
    let loss_and_grad = thunder_core::autograd::value_and_grad(Some(host.clone()), |xs| {
        vec![logits(&xs[..6], &xs[6]).cross_entropy(&xs[7])]
    });
    let sgd = thunder_core::jit_with(host, |xs: &[thunder_core::Tensor]| {
        let (p, bufs) =
            thunder_torch::optim::sgd(&xs[0..6], &xs[6..12], &xs[12..18], 0.05, 0.9, 0.0)?;
        thunder_core::Result::Ok(p.into_iter().chain(bufs).collect::<Vec<_>>())
    });
    let mut params = init_params();
    let mut bufs: Vec<Array> = params
        .iter()
        .map(|p| Array::from_f64(&vec![0.0; p.numel()], p.shape(), p.dtype()).expect("buf"))
        .collect();
    let x = Array::random(&[BATCH, 64], DType::F32, 7).expect("x");
    let labels: Vec<i64> = (0..BATCH).map(|i| (i * 7 + 3) % 10).collect();
    let y = Array::from_slice(&labels, &[BATCH]).expect("y");
    let mut losses = Vec::new();
    for _ in 0..3 {
        let mut inputs = params.clone();
        inputs.extend([x.clone(), y.clone()]);
        let (loss, grads) = loss_and_grad.call(&inputs).expect("value_and_grad");
        losses.push(loss[0].to_vec::<f32>().expect("loss")[0]);
        let mut update = params.clone();
        update.extend(grads);
        update.extend(bufs);
        let mut out = sgd.call(&update).expect("sgd");
        bufs = out.split_off(6);
        params = out
            .into_iter()
            .map(|p| p.with_requires_grad(true))
            .collect();
    }
    let traces = loss_and_grad.last_traces().expect("traces");
    let executors = [&traces.forward.execution, &traces.backward.execution]
        .iter()
        .flat_map(|e| e.steps.iter().map(|s| s.executor.clone()))
        .collect();
    (losses, params, executors)
}

#[test]
fn mlp_training_steps_match_the_interpreter() {
    let (simd_losses, simd_params, executors) = train(simd_host());
    let (ref_losses, ref_params, _) = train(interpreter_host());
    assert!(
        executors.iter().any(|e| e == "cpu-simd"),
        "cpu-simd ran none of the training step: {executors:?}"
    );
    eprintln!("losses: cpu-simd {simd_losses:?}, interpreter {ref_losses:?}");
    for (a, b) in simd_losses.iter().zip(&ref_losses) {
        assert!(
            close(*a as f64, *b as f64, 1e-5, 1e-6, false),
            "losses differ: {simd_losses:?} vs {ref_losses:?}"
        );
    }
    assert!(
        ref_losses[2] < ref_losses[0],
        "the loss does not fall: {ref_losses:?}"
    );
    for (k, (a, e)) in simd_params.iter().zip(&ref_params).enumerate() {
        if let Some(m) = mismatch(a, e, 1e-4, 1e-5, false) {
            panic!("parameter {k} after 3 steps: {m}");
        }
    }
}

/// `index_add` (an embedding's backward) runs on cpu-simd: duplicates accumulate in order, any
/// dim, a strided source, a `full` base filled rather than read; f32, f64 and i64 agree with
/// the interpreter, and an index out of range is an error naming the prim.
#[test]
fn index_add_runs_on_cpu_simd_and_matches_the_interpreter() {
    thunder_torch::register();
    let programs = [
        (
            "rows, duplicates",
            "def f(a, i, s):\n  # a: \"cpu DT[6, 5]\"\n  # i: \"cpu i64[4]\"\n  # s: \"cpu DT[4, 5]\"\n  t0 = prims.index_add(a, i, s, 0)\n  return (t0,)\n",
            vec![2i64, 0, 2, 5],
        ),
        (
            "dim 1 of a transposed source",
            "def f(a, i, s):\n  # a: \"cpu DT[3, 6, 2]\"\n  # i: \"cpu i64[4]\"\n  # s: \"cpu DT[2, 4, 3]\"\n  t0 = prims.transpose(s, [2, 1, 0])\n  t1 = prims.index_add(a, i, t0, 1)\n  return (t1,)\n",
            vec![1i64, 1, 4, 0],
        ),
        (
            "a zeros base",
            "def f(a, i, s):\n  # a: \"cpu DT[6, 5]\"\n  # i: \"cpu i64[3]\"\n  # s: \"cpu DT[3, 5]\"\n  t0 = prims.full([6, 5], ZERO, devices.cpu, dtypes.DT)\n  t1 = prims.index_add(t0, i, s, 0)\n  t2 = prims.add(t1, a)\n  return (t2,)\n",
            vec![3i64, 3, 1],
        ),
    ];
    for dtype in [DType::F32, DType::F64, DType::I64] {
        for (what, text, index) in &programs {
            let zero = if dtype == DType::I64 { "0" } else { "0.0" };
            let text = text.replace("DT", dtype.short_name()).replace("ZERO", zero);
            let prog = thunder_torch::parse_trace(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let inputs: Vec<Array> = prog
                .inputs
                .iter()
                .enumerate()
                .map(|(k, &v)| {
                    let ty = prog.ty(v);
                    if k == 1 {
                        Array::from_f64(
                            &index.iter().map(|&x| x as f64).collect::<Vec<_>>(),
                            &ty.shape,
                            DType::I64,
                        )
                        .expect("index")
                    } else {
                        Array::random(&ty.shape, dtype, 7 + k as u64).expect("input")
                    }
                })
                .collect();
            let (traces, simd) =
                thunder_core::compile_trace(&simd_host(), prog.clone()).expect("compiles");
            let exec = traces.execution.print();
            // The executor of the region each `prims.index_add` line is listed under.
            let mut current = "";
            let mut ran_by = Vec::new();
            for l in exec.lines() {
                if let Some(at) = l.find(".region") {
                    current = l[..at].rsplit(' ').next().unwrap_or("");
                }
                if l.contains("prims.index_add") {
                    ran_by.push(current);
                }
            }
            assert_eq!(ran_by, ["cpu-simd"], "{what} {dtype:?}:\n{exec}");
            let (_, reference) =
                thunder_core::compile_trace(&interpreter_host(), prog).expect("compiles");
            let (got, want) = (
                simd.run(&inputs).expect("runs"),
                reference.run(&inputs).expect("runs"),
            );
            let (rtol, atol) = if dtype == DType::F32 {
                (1e-6, 1e-6)
            } else {
                (1e-12, 1e-12)
            };
            if let Some(m) = mismatch(&got[0], &want[0], rtol, atol, false) {
                panic!("{what} {dtype:?}: {m}");
            }
        }
    }
    // i64 sums wrap (as torch's and the interpreter's do) rather than panic.
    let text = programs[0].1.replace("DT", "i64");
    let prog = thunder_torch::parse_trace(&text).expect("parses");
    let (_, simd) = thunder_core::compile_trace(&simd_host(), prog).expect("compiles");
    let wide = Array::from_slice(&[i64::MAX; 30], &[6, 5]).expect("a");
    let ones = Array::from_slice(&[1i64; 20], &[4, 5]).expect("s");
    let idx = Array::from_slice(&[0i64, 0, 1, 5], &[4]).expect("index");
    let got = simd.run(&[wide, idx, ones]).expect("runs")[0]
        .to_vec::<i64>()
        .expect("i64");
    assert_eq!(&got[..5], &[i64::MIN + 1; 5], "row 0: MAX + 1 + 1 wraps");
    assert_eq!(&got[5..10], &[i64::MIN; 5], "row 1: MAX + 1 wraps");
    assert_eq!(&got[10..15], &[i64::MAX; 5], "row 2: untouched");
    // An index past the rows: an error naming the prim, from cpu-simd's run.
    let text = programs[0].1.replace("DT", "f32");
    let prog = thunder_torch::parse_trace(&text).expect("parses");
    let (_, simd) = thunder_core::compile_trace(&simd_host(), prog).expect("compiles");
    let bad = Array::from_f64(&[0.0, 6.0, 1.0, 1.0], &[4], DType::I64).expect("index");
    let err = simd
        .run(&[
            Array::random(&[6, 5], DType::F32, 1).expect("a"),
            bad,
            Array::random(&[4, 5], DType::F32, 2).expect("s"),
        ])
        .expect_err("index 6 of 6 rows")
        .to_string();
    assert!(
        err.contains("prims.index_add") && err.contains("index 6 is out of bounds"),
        "{err}"
    );
}
