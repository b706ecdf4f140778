//! Attention under autograd, as the plugin sees it on a described H100 (no GPU needed: the
//! claim is a pure function of the trace view and the device's arch): the forward trace's
//! `ltorch.sdpa_fwd_lse` and the backward's `ltorch.sdpa_bwd` are claimed by the matching
//! packages, with the launches, grids and scratch the kernels expect; shapes, dtypes and devices
//! the kernels cannot take are refused with the reason, and those ops keep their decomposition
//! for the host to run instead.

use thunder_abi::{OpView, TraceView};
use thunder_core::autograd::{split_forward_backward, value_and_grad};
use thunder_core::host::services::host_services;
use thunder_core::host::view::trace_view;
use thunder_core::ir::{BoundSymbol, TensorType, Trace};
use thunder_core::{DType, Device, Tensor};
use thunder_triton::bind::{self, Param, ScratchPlan};
use thunder_triton::{DeviceProps, Runtime, Triton};

fn h100() -> Runtime {
    Runtime {
        driver_version: 12040,
        devices: vec![DeviceProps {
            arch: 90,
            max_shared_optin: 232_448,
        }],
    }
}

/// The forward and backward traces of `sum(sdpa(q, k, v, is_causal))` for inputs on cuda:0.
fn grad_traces(dtype: DType, q: &[i64], kv: &[i64], causal: bool) -> (Trace, Trace) {
    thunder_torch::register();
    let f = value_and_grad(None, move |x: &[Tensor]| {
        vec![
            thunder_torch::scaled_dot_product_attention(&x[0], &x[1], &x[2], None, causal, None)
                .and_then(|o| thunder_torch::sum(&o, None, false))
                .unwrap_or_else(|e| panic!("{e}")),
        ]
    });
    let ty = |shape: &[i64]| TensorType {
        shape: shape.to_vec(),
        dtype,
        device: Device::Cuda(0),
        requires_grad: true,
    };
    let (joint, forward_len, n_outputs) = f
        .joint_trace(&[ty(q), ty(kv), ty(kv)])
        .expect("joint trace");
    let (fwd, bwd, _) = split_forward_backward(&joint, forward_len, n_outputs).expect("split");
    (fwd, bwd)
}

fn plugin() -> Triton {
    Triton::create(host_services(), &[]).expect("created")
}

/// The index of the only op with `symbol` in the view.
fn op_index(view: &TraceView, symbol: &str) -> usize {
    let found: Vec<usize> = view
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.symbol.as_str() == symbol)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{symbol} in {:?}",
        view.ops
            .iter()
            .map(|o| o.symbol.as_str())
            .collect::<Vec<_>>()
    );
    found[0]
}

fn bsym<'a>(trace: &'a Trace, symbol: &str) -> &'a BoundSymbol {
    trace
        .bsyms
        .iter()
        .find(|b| b.sym.id == symbol)
        .unwrap_or_else(|| panic!("no {symbol}"))
}

fn plan_of(p: &Triton, view: &TraceView, op: &OpView) -> bind::Plan {
    let pkg = p.find_on(&h100(), view, op).expect("covered");
    let inputs: Vec<u32> = op.input_values().collect();
    bind::plan(pkg, view, op, &inputs, &op.outputs).expect("plan")
}

#[test]
fn a_causal_training_step_claims_the_forward_with_lse_and_the_backward() {
    let p = plugin();
    let (fwd, bwd) = grad_traces(DType::BF16, &[8, 12, 1024, 64], &[8, 12, 1024, 64], true);

    let view = trace_view(&fwd, &fwd.bsyms);
    let i = op_index(&view, "ltorch.sdpa_fwd_lse");
    assert!(
        !view
            .ops
            .iter()
            .any(|o| o.symbol.as_str() == "ltorch.scaled_dot_product_attention"),
        "the forward keeps sdpa_fwd_lse whole, not the inference op"
    );
    assert!(p.claim_on(&h100(), &view).contains(&vec![i as u32]));
    let op = &view.ops[i];
    assert_eq!(
        p.find_on(&h100(), &view, op).expect("covered").name(),
        "sdpa_fwd_lse_bf16_d64_causal"
    );
    let plan = plan_of(&p, &view, op);
    assert_eq!(plan.launches.len(), 1);
    assert!(plan.scratch.is_empty());
    let l = &plan.launches[0];
    // q, k, v in; out and lse out; scale 1/sqrt(64); L, S; Triton's two null scratch pointers.
    assert_eq!(
        l.params,
        vec![
            Param::Input(0),
            Param::Input(1),
            Param::Input(2),
            Param::Output(0),
            Param::Output(1),
            Param::F32(0.125),
            Param::I32(1024),
            Param::I32(1024),
            Param::GlobalScratch { bytes: 0, align: 1 },
            Param::ProfileScratch { bytes: 0, align: 1 },
        ]
    );
    // Blocks of 64 query rows (head dim 64, causal: see compile_kernels.py).
    assert_eq!(l.grid, [16, 96, 1]);

    let view = trace_view(&bwd, &bwd.bsyms);
    let i = op_index(&view, "ltorch.sdpa_bwd");
    assert!(p.claim_on(&h100(), &view).contains(&vec![i as u32]));
    let op = &view.ops[i];
    assert_eq!(
        p.find_on(&h100(), &view, op).expect("covered").name(),
        "sdpa_bwd_bf16_d64_causal"
    );
    let plan = plan_of(&p, &view, op);
    // delta: one f32 per query row of every (batch, head).
    assert_eq!(
        plan.scratch,
        vec![ScratchPlan {
            bytes: 8 * 12 * 1024 * 4
        }]
    );
    assert_eq!(plan.pointer_align, 16);
    let [pre, main] = &plan.launches[..] else {
        panic!("two launches: {:?}", plan.launches)
    };
    // sdpa_bwd(grad_out, q, k, v, out, lse): inputs in that order (each read once here).
    let input = |k: usize| {
        let id = op.input_values().nth(k).expect("input");
        Param::Input(op.input_values().position(|v| v == id).expect("pos"))
    };
    assert_eq!(
        pre.params[..4],
        [input(4), input(0), Param::Scratch(0), Param::I32(1024)]
    );
    assert_eq!(pre.grid, [8, 96, 1]);
    assert_eq!(
        main.params[..12],
        [
            input(1),
            input(2),
            input(3),
            input(0),
            input(5),
            Param::Scratch(0),
            Param::Output(0),
            Param::Output(1),
            Param::Output(2),
            Param::F32(0.125),
            Param::I32(1024),
            Param::I32(1024),
        ]
    );
    // max(S/128, L/128) programs per (batch, head).
    assert_eq!(main.grid, [8, 96, 1]);
    assert_eq!(main.block, 128);
}

#[test]
fn fewer_queries_than_keys_and_head_dim_128_in_f16() {
    let p = plugin();
    let (fwd, bwd) = grad_traces(DType::F16, &[2, 3, 128, 128], &[2, 3, 384, 128], false);
    let view = trace_view(&fwd, &fwd.bsyms);
    let op = &view.ops[op_index(&view, "ltorch.sdpa_fwd_lse")];
    assert_eq!(
        p.find_on(&h100(), &view, op).expect("covered").name(),
        "sdpa_fwd_lse_f16_d128"
    );
    let view = trace_view(&bwd, &bwd.bsyms);
    let op = &view.ops[op_index(&view, "ltorch.sdpa_bwd")];
    assert_eq!(
        p.find_on(&h100(), &view, op).expect("covered").name(),
        "sdpa_bwd_f16_d128"
    );
    let plan = plan_of(&p, &view, op);
    assert_eq!(plan.launches[0].grid, [1, 6, 1]);
    assert_eq!(plan.launches[1].grid, [3, 6, 1], "S/128 key blocks");
    assert_eq!(plan.launches[1].block, 256);
}

/// What the kernels cannot take is not claimed, with the constraint named, and the op keeps a
/// decomposition the host runs instead.
#[test]
fn shapes_dtypes_and_devices_outside_the_kernels_are_left_to_the_decomposition() {
    let p = plugin();
    // S = 192: the forward takes key blocks of 64, the backward needs blocks of 128.
    let (fwd, bwd) = grad_traces(DType::BF16, &[1, 2, 256, 64], &[1, 2, 192, 64], true);
    let view = trace_view(&fwd, &fwd.bsyms);
    let i = op_index(&view, "ltorch.sdpa_fwd_lse");
    assert!(p.claim_on(&h100(), &view).contains(&vec![i as u32]));
    let view = trace_view(&bwd, &bwd.bsyms);
    let i = op_index(&view, "ltorch.sdpa_bwd");
    assert!(!p.claim_on(&h100(), &view).contains(&vec![i as u32]));
    let why = p
        .find_on(&h100(), &view, &view.ops[i])
        .expect_err("refused");
    assert!(why.contains("k.shape[2] % 128 == 0"), "{why}");
    assert!(
        !bsym(&bwd, "ltorch.sdpa_bwd").subsymbols.is_empty(),
        "the host can decompose what is refused"
    );

    let refused = |dtype, q: &[i64], kv: &[i64], want: &str| {
        let (fwd, bwd) = grad_traces(dtype, q, kv, false);
        for (t, symbol) in [(&fwd, "ltorch.sdpa_fwd_lse"), (&bwd, "ltorch.sdpa_bwd")] {
            let view = trace_view(t, &t.bsyms);
            let i = op_index(&view, symbol);
            assert!(
                !p.claim_on(&h100(), &view).contains(&vec![i as u32]),
                "{symbol} {q:?}"
            );
            let why = p
                .find_on(&h100(), &view, &view.ops[i])
                .expect_err("refused");
            assert!(why.contains(want), "{symbol}: {why} (wanted {want})");
            assert!(!bsym(t, symbol).subsymbols.is_empty());
        }
    };
    refused(
        DType::BF16,
        &[1, 2, 1000, 64],
        &[1, 2, 1000, 64],
        "q.shape[2] % 128 == 0",
    );
    refused(
        DType::BF16,
        &[1, 2, 128, 80],
        &[1, 2, 128, 80],
        "q.shape[3] == 64",
    );
    refused(
        DType::F32,
        &[1, 2, 128, 64],
        &[1, 2, 128, 64],
        "is f32, the kernel takes",
    );

    // An A100 (sm_80): every package is built for sm_90.
    let a100 = Runtime {
        driver_version: 12040,
        devices: vec![DeviceProps {
            arch: 80,
            max_shared_optin: 166_912,
        }],
    };
    let (_, bwd) = grad_traces(DType::BF16, &[1, 2, 128, 64], &[1, 2, 128, 64], false);
    let view = trace_view(&bwd, &bwd.bsyms);
    assert!(p.claim_on(&a100, &view).is_empty());
    let i = op_index(&view, "ltorch.sdpa_bwd");
    let why = p
        .find_on(&a100, &view, &view.ops[i])
        .expect_err("wrong arch");
    assert!(
        why.contains("built for sm_90 but the device is sm_80"),
        "{why}"
    );
}

/// Inference keeps the whole attention op for the forward-only packages.
#[test]
fn without_grad_the_inference_package_takes_the_whole_op() {
    let p = plugin();
    let trace = thunder_torch::parse_trace("def computation(q, k, v):\n  # q: \"cuda:0 f16[2, 4, 256, 64]\"\n  # k: \"cuda:0 f16[2, 4, 256, 64]\"\n  # v: \"cuda:0 f16[2, 4, 256, 64]\"\n  t0 = ltorch.scaled_dot_product_attention(q, k, v, None, True, None)\n  return (t0,)\n").expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    assert_eq!(p.claim_on(&h100(), &view), vec![vec![0u32]]);
    assert_eq!(
        p.find_on(&h100(), &view, &view.ops[0])
            .expect("covered")
            .name(),
        "sdpa_fwd_f16_d64_causal"
    );
}
