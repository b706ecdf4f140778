//! What the layout tests share: CUDA traces seen as the host offers them to cuBLAS, the claims
//! checked by emulation (each claimed region's cuBLASLt call run on the host as column-major
//! BLAS would, against the interpreter running the same ops on the CPU), and the GPT-2 block.
#![allow(dead_code)]

use std::sync::Arc;
use thunder_abi::{RegionSpec, TraceView};
use thunder_core::autograd::{split_forward_backward, value_and_grad};
use thunder_core::host::view::trace_view;
use thunder_core::ir::{BoundSymbol, TensorType, Trace, Value};
use thunder_core::{compile_trace, Array, Device};
use thunder_cublas::shape::LtCall;
use thunder_cublas::{claims, plan_region};

/// Ops the Triton executor (priority 50, asked before cuBLAS) claims whole on the GPU.
pub const TRITON: [&str; 3] = [
    "ltorch.scaled_dot_product_attention",
    "ltorch.sdpa_fwd_lse",
    "ltorch.sdpa_bwd",
];

/// The final round of claiming as the host runs it with `kept` claimed whole by an executor
/// asked earlier: composites nobody claimed are decomposed and cuBLAS asked again, until none
/// is left. Returns the ops, the view cuBLAS saw and its claims.
pub fn claim_rounds(trace: &Trace, kept: &[&str]) -> (Vec<BoundSymbol>, TraceView, Vec<Vec<u32>>) {
    let mut bsyms = trace.bsyms.clone();
    loop {
        let mut view = trace_view(trace, &bsyms);
        for op in view.ops.iter_mut() {
            op.claimed = kept.contains(&op.symbol.as_str());
        }
        let regions = claims(&view);
        let mut owned = vec![false; bsyms.len()];
        for r in &regions {
            for &i in r {
                owned[i as usize] = true;
            }
        }
        let mut next = Vec::new();
        let mut changed = false;
        for (i, b) in bsyms.iter().enumerate() {
            if b.sym.is_composite() && !owned[i] && !view.ops[i].claimed {
                next.extend(b.subsymbols.iter().cloned());
                changed = true;
            } else {
                next.push(b.clone());
            }
        }
        if !changed {
            return (bsyms, view, regions);
        }
        bsyms = next;
    }
}

/// The region spec the host would build for `ops`: inputs read from outside, outputs read
/// by others or returned.
pub fn spec(trace: &Trace, bsyms: &[BoundSymbol], ops: &[u32]) -> RegionSpec {
    let inside = |i: usize| ops.contains(&(i as u32));
    let mut inputs: Vec<u32> = Vec::new();
    let mut produced = Vec::new();
    for &i in ops {
        for v in bsyms[i as usize].input_values() {
            if !produced.contains(&v) && !inputs.contains(&v.0) {
                inputs.push(v.0);
            }
        }
        produced.extend(bsyms[i as usize].outputs.iter().copied());
    }
    let outputs: Vec<u32> = produced
        .iter()
        .filter(|v| {
            trace.outputs.contains(v)
                || bsyms
                    .iter()
                    .enumerate()
                    .any(|(j, b)| !inside(j) && b.input_values().any(|x| x == **v))
        })
        .map(|v| v.0)
        .collect();
    RegionSpec {
        ops: ops.to_vec().into(),
        inputs: inputs.into(),
        outputs: outputs.into(),
    }
}

/// `D = op(A) op(B)` per batch, column-major, exactly as BLAS reads `call`: every index is
/// checked against the buffers, and every element of `d_len` must be written once.
pub fn gemm_colmajor(call: &LtCall, a: &[f64], b: &[f64], d_len: usize) -> Vec<f64> {
    let (m, n) = (call.d.rows as usize, call.d.cols as usize);
    let (a_rows, a_cols) = (call.a.rows as usize, call.a.cols as usize);
    let (b_rows, b_cols) = (call.b.rows as usize, call.b.cols as usize);
    let (am, ak) = if call.transa {
        (a_cols, a_rows)
    } else {
        (a_rows, a_cols)
    };
    let (bk, bn) = if call.transb {
        (b_cols, b_rows)
    } else {
        (b_rows, b_cols)
    };
    assert_eq!(
        (am, bn, ak),
        (m, n, bk),
        "op(A), op(B) and D disagree: {call:?}"
    );
    for l in [call.a, call.b, call.d] {
        assert!(
            l.ld as usize >= l.rows.max(1) as usize,
            "ld < rows: {call:?}"
        );
    }
    let at = |x: &[f64], base: usize, ld: usize, i: usize, j: usize| -> f64 {
        let idx = base + i + j * ld;
        assert!(
            idx < x.len(),
            "read {idx} past a buffer of {}: {call:?}",
            x.len()
        );
        x[idx]
    };
    let mut d = vec![f64::NAN; d_len];
    for l in 0..call.d.batch as usize {
        let (sa, sb, sd) = (
            l * call.a.stride as usize,
            l * call.b.stride as usize,
            l * call.d.stride as usize,
        );
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for p in 0..ak {
                    let x = if call.transa {
                        at(a, sa, call.a.ld as usize, p, i)
                    } else {
                        at(a, sa, call.a.ld as usize, i, p)
                    };
                    let y = if call.transb {
                        at(b, sb, call.b.ld as usize, j, p)
                    } else {
                        at(b, sb, call.b.ld as usize, p, j)
                    };
                    acc += x * y;
                }
                let idx = sd + i + j * call.d.ld as usize;
                assert!(idx < d.len(), "write {idx} past D of {}: {call:?}", d.len());
                assert!(d[idx].is_nan(), "D[{idx}] written twice: {call:?}");
                d[idx] = acc;
            }
        }
    }
    assert!(
        d.iter().all(|x| !x.is_nan()),
        "D not fully written: {call:?}"
    );
    d
}

fn interpreter() -> Arc<thunder_core::PluginHost> {
    thunder_tests::interpreter_host()
}

/// Runs region `ops` of a (CUDA) trace two ways on random inputs: its cuBLASLt call emulated
/// on the host, and its ops on the CPU with the interpreter. They must agree.
pub fn check_region(trace: &Trace, bsyms: &[BoundSymbol], view: &TraceView, ops: &[u32]) {
    let region = spec(trace, bsyms, ops);
    let plan = plan_region(view, &region).unwrap_or_else(|e| panic!("region {ops:?}: {e:?}"));
    let call = plan.gemm.lt_call();
    let mut sub = trace.clone();
    sub.inputs = region.inputs.iter().map(|&v| Value(v)).collect();
    sub.outputs = region.outputs.iter().map(|&v| Value(v)).collect();
    sub.bsyms = ops.iter().map(|&i| bsyms[i as usize].clone()).collect();
    let cpu = sub.on_device(Device::Cpu);
    let inputs: Vec<Array> = cpu
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let mut t = cpu.ty(v).clone();
            t.requires_grad = false;
            Array::random(&t.shape, t.dtype, 31 + i as u64).expect("input")
        })
        .collect();
    let (_, program) = compile_trace(&interpreter(), cpu.clone()).expect("compiles");
    let want = program.run(&inputs).expect("runs")[0]
        .to_f64_vec()
        .expect("host");
    let buffer = |v: u32| -> Vec<f64> {
        let k = region
            .inputs
            .iter()
            .position(|&x| x == v)
            .unwrap_or_else(|| panic!("t{v} is not an input of region {ops:?}"));
        inputs[k].to_f64_vec().expect("host")
    };
    assert_eq!(plan.bias, None, "emulation covers products without bias");
    let got = gemm_colmajor(&call, &buffer(plan.rhs), &buffer(plan.lhs), want.len());
    let scale = want.iter().fold(1.0f64, |a, x| a.max(x.abs()));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * scale,
            "region {ops:?} element {i}: emulated {g}, interpreter {w} ({call:?})"
        );
    }
}

/// The GPT-2 block of `scripts/gpu/gpt2_block_peer.py` in trace text, on cuda:0.
pub fn gpt2_block(b: i64, t: i64, c: i64, h: i64, dtype: &str) -> String {
    let d = c / h;
    let names: [(&str, Vec<i64>); 14] = [
        ("x", vec![b, t, c]),
        ("ln1_w", vec![c]),
        ("ln1_b", vec![c]),
        ("w_qkv", vec![3 * c, c]),
        ("b_qkv", vec![3 * c]),
        ("w_o", vec![c, c]),
        ("b_o", vec![c]),
        ("ln2_w", vec![c]),
        ("ln2_b", vec![c]),
        ("w_fc", vec![4 * c, c]),
        ("b_fc", vec![4 * c]),
        ("w_pr", vec![c, 4 * c]),
        ("b_pr", vec![c]),
        ("r", vec![b, t, c]),
    ];
    let args: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
    let mut s = format!("def block({}):\n", args.join(", "));
    for (n, shape) in &names {
        let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
        s.push_str(&format!(
            "  # {n}: \"cuda:0 {dtype}[{}]\"\n",
            dims.join(", ")
        ));
    }
    let mut body = vec![
        format!("h = ltorch.layer_norm(x, [{c}], weight=ln1_w, bias=ln1_b)"),
        "qkv = ltorch.linear(h, w_qkv, b_qkv)".into(),
        format!("q, k, v = ltorch.split(qkv, [{c}, {c}, {c}], dim=2)"),
    ];
    for n in ["q", "k", "v"] {
        body.push(format!("{n}4 = ltorch.reshape({n}, [{b}, {t}, {h}, {d}])"));
        body.push(format!("{n}h = ltorch.permute({n}4, [0, 2, 1, 3])"));
    }
    body.extend([
        "att = ltorch.scaled_dot_product_attention(qh, kh, vh, is_causal=True)".to_string(),
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
        "return loss".into(),
    ]);
    for line in body {
        s.push_str(&format!("  {line}\n"));
    }
    s
}

/// The forward and backward traces of `text`'s first output with respect to every input,
/// after the default passes: what `thunder bench --grad` compiles.
pub fn grad_traces(text: &str) -> (Trace, Trace) {
    thunder_torch::register();
    let prog = thunder_torch::parse_trace(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let types: Vec<TensorType> = prog
        .inputs
        .iter()
        .map(|&v| {
            let mut t = prog.ty(v).clone();
            t.requires_grad = true;
            t
        })
        .collect();
    let names = prog.input_names();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let prog = Arc::new(prog);
    let f = value_and_grad(None, move |xs: &[thunder_core::Tensor]| {
        thunder_core::trace_ctx::replay(&prog, xs)
    })
    .with_input_names(&name_refs);
    let (joint, forward_len, n_outputs) = f.joint_trace(&types).expect("joint trace");
    let (fwd, bwd, _) = split_forward_backward(&joint, forward_len, n_outputs).expect("split");
    let passes = |mut t: Trace| {
        for pass in thunder_core::passes::default_passes() {
            t = pass.run(&t).expect("pass");
        }
        t
    };
    (passes(fwd), passes(bwd))
}
