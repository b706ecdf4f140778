//! How the fuser plans the backward regions of a GPT-2 block: each program is traced with
//! `vjp_in_trace` on CUDA tensors (bf16, the shapes of the block scaled down), split into
//! forward and backward, and the backward's maximal runs of fuser-accepted ops are planned as
//! the claim would cut them. The tests pin how many kernels a region becomes (what the GPU
//! pays in launches and round trips through memory) and check each plan's meaning against the
//! reference interpreter on the host (`emulate`).

mod common;

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use thunder_core::autograd::{split_forward_backward_vjp, vjp_in_trace};
use thunder_core::ir::{BoundSymbol, TensorType, Trace};
use thunder_core::trace_ctx::trace_with;
use thunder_core::{Array, Tensor};
use thunder_cuda_fuser::{emulate, plan, support};

/// The backward trace (after the default passes) of the program `text` (inputs annotated),
/// every floating-point input differentiated, with a cotangent input per output.
fn backward_of(text: &str) -> Trace {
    let program = thunder_torch::parse_trace(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut all: Vec<(String, TensorType)> = program
        .input_names()
        .into_iter()
        .zip(&program.inputs)
        .map(|(n, &v)| (n, program.ty(v).clone()))
        .collect();
    let n_in = all.len();
    let out_types: Vec<TensorType> = program
        .outputs
        .iter()
        .map(|&v| program.ty(v).clone())
        .collect();
    for (i, t) in out_types.iter().enumerate() {
        all.push((format!("cot{i}"), t.clone()));
    }
    let wrt: Vec<usize> = (0..n_in).filter(|&i| all[i].1.dtype.is_float()).collect();
    let forward_len = Cell::new(0);
    let n_out = out_types.len();
    let joint = trace_with(&all, HashSet::new(), "vjp", |xs| {
        let pairs: Vec<(usize, Tensor)> = (0..n_out).map(|i| (i, xs[n_in + i].clone())).collect();
        let r = vjp_in_trace(
            &xs[..n_in],
            &wrt,
            |p| thunder_core::trace_ctx::replay(&program, p),
            &pairs,
        )?;
        forward_len.set(r.forward_len);
        Ok(r.outputs.into_iter().chain(r.grads).collect())
    })
    .expect("joint trace");
    let cots = joint.inputs[n_in..].to_vec();
    let (_, bwd, _) =
        split_forward_backward_vjp(&joint, forward_len.get(), n_out, &cots).expect("splits");
    let mut t = bwd;
    for pass in thunder_core::passes::default_passes() {
        t = pass.run(&t).expect("pass");
    }
    t
}

/// `trace` decomposed to prims as the claim sees it on a GPU: the attention ops stay whole (the
/// Triton executor claims them), everything else is offered to the fuser as prims.
fn claim_ops(trace: &Trace) -> (Vec<BoundSymbol>, thunder_abi::TraceView) {
    fn leaves(b: &BoundSymbol, out: &mut Vec<BoundSymbol>) {
        if b.subsymbols.is_empty() || b.sym.id.starts_with("ltorch.sdpa_") {
            out.push(b.clone());
        } else {
            for s in &b.subsymbols {
                leaves(s, out);
            }
        }
    }
    let mut flat = Vec::new();
    for b in &trace.bsyms {
        leaves(b, &mut flat);
    }
    let view = thunder_core::host::view::trace_view(trace, &flat);
    (flat, view)
}

fn claim_view(trace: &Trace) -> thunder_abi::TraceView {
    claim_ops(trace).1
}

/// The kernels of each region the fuser would claim in `trace` (maximal runs of accepted ops).
fn regions(trace: &Trace) -> Vec<(Vec<u32>, Vec<plan::Kernel>)> {
    let view = claim_view(trace);
    thunder_cuda_fuser::claim::runs(&view, |op| support::accepts(&view, op))
        .into_iter()
        .map(|ops| {
            let outputs = region_outputs(&view, &ops);
            let kernels = plan::plan(&view, &ops, &outputs).expect("plans");
            (ops, kernels)
        })
        .collect()
}

/// The values the ops `ops` write that another op or the trace's outputs read.
fn region_outputs(view: &thunder_abi::TraceView, ops: &[u32]) -> Vec<u32> {
    let inside: HashSet<u32> = ops.iter().copied().collect();
    let mut outs: Vec<u32> = ops
        .iter()
        .flat_map(|&i| view.ops[i as usize].outputs.iter().copied())
        .filter(|v| {
            view.outputs.contains(v)
                || view.ops.iter().enumerate().any(|(j, op)| {
                    !inside.contains(&(j as u32)) && op.input_values().any(|x| x == *v)
                })
        })
        .collect();
    outs.sort_unstable();
    outs.dedup();
    outs
}

/// One line per kernel: its domain, reduced dims, and the values it reads and writes.
fn describe(view: &thunder_abi::TraceView, kernels: &[plan::Kernel]) -> String {
    let value = |v: u32| {
        let m = &view.values[v as usize];
        format!("t{v}:{:?}{:?}", m.dtype, m.shape.as_slice())
    };
    kernels
        .iter()
        .map(|k| {
            let ins: Vec<String> = k.inputs.iter().map(|i| value(i.value)).collect();
            let outs: Vec<String> = k.outputs.iter().map(|o| value(o.value)).collect();
            format!(
                "  F {:?} reduce {:?}: {} reductions; in {}; out {}\n",
                k.full_shape,
                k.reduced,
                k.reductions.len(),
                ins.join(" "),
                outs.join(" ")
            )
        })
        .collect()
}

/// Every kernel of `trace` (one region: every op accepted) evaluated on the host against the
/// interpreter on random inputs, within `rtol`.
fn emulate_against_interpreter(name: &str, trace: &Trace, rtol: f64) {
    common::emulate_against_interpreter(name, trace, rtol, 31);
}

const LAYER_NORM: &str = r#"def computation(x, w, b):
  # x: "cuda:0 bf16[2, 8, 64]"
  # w: "cuda:0 bf16[64]"
  # b: "cuda:0 bf16[64]"
  y = ltorch.layer_norm(x, [64], w, b, 1e-05)
  return (y,)
"#;

/// A layer_norm backward is two kernels that each read `dy` and `x` once and write only
/// results: a column kernel for the weight and bias gradients and a row kernel for `dx`. No
/// f32 intermediate crosses between them (they were written by the first and read by the
/// second), and no kernel writes back a tensor it reads.
#[test]
fn layer_norm_backward_is_a_column_and_a_row_kernel() {
    let t = backward_of(LAYER_NORM);
    let text = thunder_core::text::print_trace(&t);
    let view = claim_view(&t);
    let regions = regions(&t);
    assert_eq!(regions.len(), 1, "{text}");
    let kernels = &regions[0].1;
    let plans = describe(&view, kernels);
    assert_eq!(kernels.len(), 2, "{plans}");
    assert_eq!(kernels[0].reduced, vec![0, 1], "{plans}");
    assert_eq!(kernels[1].reduced, vec![2], "{plans}");
    for k in kernels {
        for o in &k.outputs {
            let shape = &view.values[o.value as usize].shape;
            assert!(
                t.outputs.iter().any(|v| v.0 == o.value),
                "a kernel writes an intermediate {shape:?}:\n{plans}"
            );
        }
    }
    for dtype in ["bf16", "f16", "f32"] {
        let text = LAYER_NORM.replace("bf16", dtype);
        let rtol = if dtype == "f32" { 1e-5 } else { 2e-2 };
        emulate_against_interpreter(
            &format!("layer_norm backward {dtype}"),
            &backward_of(&text),
            rtol,
        );
    }
    // Rows not a multiple of a vector (8 bf16), and an empty batch.
    for (from, to) in [("64", "61"), ("2, 8, 61", "0, 8, 61")] {
        let text = LAYER_NORM.replace("64", "61").replace(from, to);
        emulate_against_interpreter(
            &format!("layer_norm backward {to}"),
            &backward_of(&text),
            2e-2,
        );
    }
}

const BIAS_GELU: &str = r#"def computation(x, b):
  # x: "cuda:0 bf16[2, 8, 256]"
  # b: "cuda:0 bf16[256]"
  t = ltorch.add(x, b)
  y = ltorch.gelu(t, approximate='tanh')
  return (y,)
"#;

/// The tanh-GELU backward with its bias gradient: one column kernel that reads the cotangent
/// and the GELU's input and writes `dx` and the bias gradient, no f32 intermediate.
#[test]
fn gelu_backward_with_bias_gradient_is_one_column_kernel() {
    let t = backward_of(BIAS_GELU);
    let view = claim_view(&t);
    let regions = regions(&t);
    assert_eq!(regions.len(), 1);
    let plans = describe(&view, &regions[0].1);
    assert_eq!(regions[0].1.len(), 1, "{plans}");
    for dtype in ["bf16", "f16", "f32"] {
        let rtol = if dtype == "f32" { 1e-5 } else { 2e-2 };
        let text = BIAS_GELU.replace("bf16", dtype);
        emulate_against_interpreter(
            &format!("bias-gelu backward {dtype}"),
            &backward_of(&text),
            rtol,
        );
    }
}

/// The GPT-2 block of `scripts/gpu/gpt2_block_peer.py` (B2 T16 C64 H4): its backward regions.
fn gpt2_block(b: i64, t: i64, c: i64, h: i64) -> String {
    let d = c / h;
    let mut s = String::from(
        "def block(x, ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w_fc, b_fc, w_pr, b_pr, r):\n",
    );
    for (n, shape) in [
        ("x", format!("{b}, {t}, {c}")),
        ("ln1_w", format!("{c}")),
        ("ln1_b", format!("{c}")),
        ("w_qkv", format!("{}, {c}", 3 * c)),
        ("b_qkv", format!("{}", 3 * c)),
        ("w_o", format!("{c}, {c}")),
        ("b_o", format!("{c}")),
        ("ln2_w", format!("{c}")),
        ("ln2_b", format!("{c}")),
        ("w_fc", format!("{}, {c}", 4 * c)),
        ("b_fc", format!("{}", 4 * c)),
        ("w_pr", format!("{c}, {}", 4 * c)),
        ("b_pr", format!("{c}")),
        ("r", format!("{b}, {t}, {c}")),
    ] {
        s.push_str(&format!("  # {n}: \"cuda:0 bf16[{shape}]\"\n"));
    }
    let body = [
        format!("h = ltorch.layer_norm(x, [{c}], weight=ln1_w, bias=ln1_b)"),
        "qkv = ltorch.linear(h, w_qkv, b_qkv)".into(),
        format!("q, k, v = ltorch.split(qkv, [{c}, {c}, {c}], dim=2)"),
        format!("q4 = ltorch.reshape(q, [{b}, {t}, {h}, {d}])"),
        "qh = ltorch.permute(q4, [0, 2, 1, 3])".into(),
        format!("k4 = ltorch.reshape(k, [{b}, {t}, {h}, {d}])"),
        "kh = ltorch.permute(k4, [0, 2, 1, 3])".into(),
        format!("v4 = ltorch.reshape(v, [{b}, {t}, {h}, {d}])"),
        "vh = ltorch.permute(v4, [0, 2, 1, 3])".into(),
        "att = ltorch.scaled_dot_product_attention(qh, kh, vh, is_causal=True)".into(),
        "at = ltorch.permute(att, [0, 2, 1, 3])".into(),
        format!("a2 = ltorch.reshape(at, [{b}, {t}, {c}])"),
        "o = ltorch.linear(a2, w_o, b_o)".into(),
        "x1 = ltorch.add(x, o)".into(),
        format!("h2 = ltorch.layer_norm(x1, [{c}], weight=ln2_w, bias=ln2_b)"),
        "fc = ltorch.linear(h2, w_fc, b_fc)".into(),
        "gl = ltorch.gelu(fc, approximate='tanh')".into(),
        "pr = ltorch.linear(gl, w_pr, b_pr)".into(),
        "y = ltorch.add(x1, pr)".into(),
        "yr = ltorch.mul(y, r)".into(),
        "loss = ltorch.mean(yr)".into(),
        "return (loss,)".into(),
    ];
    for line in body {
        s.push_str(&format!("  {line}\n"));
    }
    s
}

/// The backward of the GPT-2 block: no kernel writes back a tensor it reads, and split's
/// gradient is one concatenation (no pads). Prints every region's kernels (`--nocapture`).
#[test]
fn gpt2_block_backward_regions() {
    let t = backward_of(&gpt2_block(2, 16, 64, 4));
    let text = thunder_core::text::print_trace(&t);
    let view = claim_view(&t);
    let mut report = String::new();
    let mut cats = 0;
    // Intermediates of the recomputed GELU and layer norms, once written as f32 [B, T, C]
    // tensors by one region (before a GEMM) and read by the next.
    let mut f32_crossings = Vec::new();
    for (i, (ops, kernels)) in regions(&t).iter().enumerate() {
        let names: Vec<&str> = ops
            .iter()
            .map(|&o| {
                view.ops[o as usize]
                    .symbol
                    .as_str()
                    .trim_start_matches("prims.")
            })
            .collect();
        cats += names.iter().filter(|&&n| n == "cat").count();
        assert!(!names.contains(&"pad"), "{text}");
        report.push_str(&format!(
            "region {i}: {}\n{}",
            names.join(" "),
            describe(&view, kernels)
        ));
        for k in kernels {
            for o in &k.outputs {
                let m = &view.values[o.value as usize];
                if m.dtype == thunder_abi::DTypeCode::F32
                    && m.shape.len() == 3
                    && m.shape[..2] == [2, 16]
                    && m.shape[2] > 1
                {
                    f32_crossings.push(o.value);
                }
                assert!(
                    k.inputs.iter().all(|i| i.value != o.value),
                    "t{} is read and written by one kernel:\n{report}",
                    o.value
                );
            }
        }
    }
    eprintln!("{text}\n{report}");
    assert_eq!(cats, 1, "{report}");
    assert!(
        f32_crossings.is_empty(),
        "f32 activations {f32_crossings:?} cross between kernels:\n{report}"
    );
}

/// The GPT-2 block's backward run region by region as on a GPU, the fuser's regions through
/// their plans (`emulate`) and every other op (GEMMs, attention) through the interpreter, gives
/// the interpreter's gradients: the reordered backward and every region's kernels compute the
/// right values.
#[test]
fn gpt2_block_backward_emulated_region_by_region() {
    let t = backward_of(&gpt2_block(2, 16, 64, 4));
    let (flat, view) = claim_ops(&t);
    // The same backward on the CPU, for the interpreter: the CUDA trace moved there, values
    // and factories' device arguments alike. Tracing the program on the CPU would not do: the
    // grad transform saves different residuals there (attention's q, k, v are rebuilt, not
    // saved; `thunder_core::autograd::remat`).
    let cpu = t.on_device(thunder_core::Device::Cpu);
    let (flat_cpu, _) = claim_ops(&cpu);
    assert_eq!(flat.len(), flat_cpu.len());
    let host = common::interpreter();
    let inputs: Vec<Array> = cpu
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            Array::random(&cpu.ty(v).shape, cpu.ty(v).dtype, 71 + i as u64).expect("input")
        })
        .collect();
    let (_, program) = thunder_core::compile_trace(&host, cpu.clone()).expect("compiles");
    let want = program.run(&inputs).expect("runs");

    let mut memory: HashMap<u32, Vec<f64>> = HashMap::new();
    for (&v, a) in t.inputs.iter().zip(&inputs) {
        memory.insert(v.0, a.to_f64_vec().expect("host array"));
    }
    let runs = thunder_cuda_fuser::claim::runs(&view, |op| support::accepts(&view, op));
    // A region runs at its first op; the reshapes peeled off a run (`claim::runs`) sit inside
    // its span and run after it.
    let mut done = vec![false; flat.len()];
    for i in 0..flat.len() {
        if done[i] {
            continue;
        }
        if let Some(ops) = runs.iter().find(|r| r.first() == Some(&(i as u32))) {
            let outputs = region_outputs(&view, ops);
            let kernels = plan::plan(&view, ops, &outputs).expect("plans");
            emulate::run(&kernels, &mut memory);
            for &j in ops {
                done[j as usize] = true;
            }
            continue;
        }
        // One op the fuser leaves to another executor, run by the interpreter.
        let b = &flat_cpu[i];
        let mut one = cpu.clone();
        one.bsyms = vec![b.clone()];
        one.inputs = Vec::new();
        for v in b.input_values() {
            if !one.inputs.contains(&v) {
                one.inputs.push(v);
            }
        }
        one.outputs = b.outputs.clone();
        let args: Vec<Array> = one
            .inputs
            .iter()
            .map(|&v| {
                let ty = cpu.ty(v);
                let data = memory
                    .get(&v.0)
                    .unwrap_or_else(|| panic!("{}: t{} not computed", b.sym.id, v.0));
                Array::from_f64(data, &ty.shape, ty.dtype).expect("array")
            })
            .collect();
        let (_, op_program) = thunder_core::compile_trace(&host, one).expect("compiles");
        let outs = op_program.run(&args).expect("runs");
        for (&v, a) in b.outputs.iter().zip(&outs) {
            memory.insert(v.0, a.to_f64_vec().expect("host array"));
        }
        done[i] = true;
    }
    for (k, (&v, w)) in t.outputs.iter().zip(&want).enumerate() {
        let got = memory
            .get(&v.0)
            .unwrap_or_else(|| panic!("gradient {k} written by no kernel"));
        let w = w.to_f64_vec().expect("host array");
        assert_eq!(got.len(), w.len(), "gradient {k} length");
        let scale = w.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-30);
        let worst = got
            .iter()
            .zip(&w)
            .map(|(g, e)| (g - e).abs())
            .fold(0f64, f64::max);
        // bf16 results of sums taken in another order differ by a few bf16 ulps of the largest.
        assert!(
            worst <= 3e-2 * scale,
            "gradient {k} ({:?}): worst |diff| {worst} against max |ref| {scale}",
            t.ty(v).shape
        );
    }
}
