//! Cross-entropy under autograd as the plugin sees it on cuda:0 (no GPU needed: the claim is
//! a pure function of the trace view): nanoGPT's head `cross_entropy(logits.float().view(-1,
//! V), t)` over bf16 logits.

use thunder_abi::{DTypeCode, TraceView};
use thunder_core::autograd::{split_forward_backward, value_and_grad};
use thunder_core::host::view::trace_view;
use thunder_core::ir::{TensorType, Trace};
use thunder_core::{DType, Device, Tensor};
use thunder_cuda_common::cross_entropy::joined_ops;
use thunder_cuda_kernels::spec::Spec;
use thunder_cuda_kernels::{ce, claims};
use thunder_torch::parse_trace;

/// The forward and backward traces of nanoGPT's LM head and loss: `linear(h, wte)` in
/// `dtype`, `.float()`, flattened rows, cross-entropy against `i64` targets.
pub fn head_traces(dtype: DType, b: i64, t: i64, c: i64, v: i64) -> (Trace, Trace) {
    thunder_torch::register();
    let f = value_and_grad(None, move |x: &[Tensor]| {
        let logits = thunder_torch::linear(&x[0], &x[1], None).unwrap_or_else(|e| panic!("{e}"));
        let lf = thunder_torch::to(&logits, DType::F32).unwrap_or_else(|e| panic!("{e}"));
        let l2 = thunder_torch::reshape(&lf, &[b * t, v]).unwrap_or_else(|e| panic!("{e}"));
        let t2 = thunder_torch::reshape(&x[2], &[b * t]).unwrap_or_else(|e| panic!("{e}"));
        vec![thunder_torch::cross_entropy(&l2, &t2).unwrap_or_else(|e| panic!("{e}"))]
    });
    let ty = |shape: &[i64], dtype: DType, grad: bool| TensorType {
        shape: shape.to_vec(),
        dtype,
        device: Device::Cuda(0),
        requires_grad: grad,
    };
    let (joint, forward_len, n_outputs) = f
        .joint_trace(&[
            ty(&[b, t, c], dtype, true),
            ty(&[v, c], dtype, true),
            ty(&[b, t], DType::I64, false),
        ])
        .expect("joint trace");
    let (fwd, bwd, _) = split_forward_backward(&joint, forward_len, n_outputs).expect("split");
    (fwd, bwd)
}

fn op_index(view: &TraceView, symbol: &str) -> usize {
    let found: Vec<usize> = (0..view.ops.len())
        .filter(|&i| view.ops[i].symbol.as_str() == symbol)
        .collect();
    assert_eq!(found.len(), 1, "{symbol}");
    found[0]
}

fn symbols(view: &TraceView, ops: &[u32]) -> Vec<String> {
    ops.iter()
        .map(|&i| view.ops[i as usize].symbol.to_string())
        .collect()
}

fn shape(view: &TraceView, v: u32) -> Vec<i64> {
    view.values[v as usize].shape.to_vec()
}

#[test]
fn the_forward_joins_the_float_convert_and_reads_bf16_logits() {
    let (fwd, _) = head_traces(DType::BF16, 2, 4, 8, 16);
    let view = trace_view(&fwd, &fwd.bsyms);
    let i = op_index(&view, ce::FWD);
    let r = ce::region(&view, i).expect("claimed");
    assert_eq!(
        symbols(&view, &r.ops),
        [
            "prims.convert_element_type",
            "prims.reshape",
            "ltorch.cross_entropy_lse"
        ]
    );
    let Spec::CrossEntropy {
        logits,
        target,
        rows,
        classes,
        ignore_index,
        loss,
    } = &r.spec
    else {
        panic!("{:?}", r.spec)
    };
    // The kernels read the linear's bf16 output as it lies ([2, 4, 16]), 8 rows of 16.
    assert_eq!(
        (logits.dtype, logits.shape.as_slice()),
        (DTypeCode::BF16, &[2, 4, 16][..])
    );
    assert_eq!((*rows, *classes, *ignore_index), (8, 16, -100));
    assert_eq!(
        (target.dtype, target.shape.as_slice()),
        (DTypeCode::I64, &[8][..])
    );
    assert_eq!(*loss, DTypeCode::F32);
    // Outputs: the op's loss and lse, then two scratch buffers.
    let op = &view.ops[i];
    let values: Vec<Option<u32>> = r.outputs.iter().map(|o| o.0).collect();
    assert_eq!(
        values,
        [Some(op.outputs[0]), Some(op.outputs[1]), None, None]
    );
    // The saved residuals are the bf16 logits and the lse, not the f32 copy.
    for out in fwd.outputs.iter().skip(1) {
        let ty = fwd.ty(*out);
        assert!(ty.dtype != DType::F32 || ty.shape.len() == 1, "saved {ty}");
    }
    assert!(claims(&view).contains(&r.ops));
    assert_eq!(
        joined_ops(&view),
        r.ops[..2].iter().map(|&o| o as usize).collect::<Vec<_>>()
    );
}

#[test]
fn the_backward_reads_bf16_logits_and_writes_the_bf16_gradient() {
    let (_, bwd) = head_traces(DType::BF16, 2, 4, 8, 16);
    let view = trace_view(&bwd, &bwd.bsyms);
    let i = op_index(&view, ce::BWD);
    let r = ce::region(&view, i).expect("claimed");
    assert_eq!(
        symbols(&view, &r.ops),
        [
            "prims.convert_element_type",
            "prims.reshape",
            "ltorch.cross_entropy_bwd",
            "prims.reshape",
            "prims.convert_element_type",
            "prims.reshape"
        ]
    );
    let Spec::CrossEntropyBwd {
        grad,
        logits,
        lse,
        rows,
        classes,
        out,
        ..
    } = &r.spec
    else {
        panic!("{:?}", r.spec)
    };
    assert_eq!((grad.dtype, grad.shape.len()), (DTypeCode::F32, 0));
    assert_eq!(
        (logits.dtype, logits.shape.as_slice()),
        (DTypeCode::BF16, &[2, 4, 16][..])
    );
    assert_eq!(
        (lse.dtype, lse.shape.as_slice()),
        (DTypeCode::F32, &[8][..])
    );
    assert_eq!((*rows, *classes, *out), (8, 16, DTypeCode::BF16));
    // The region returns the bf16 gradient re-viewed as the rows the LM head's two gradient
    // GEMMs read ([8, 16], after the convert's [2, 4, 16]): that reshape has two readers, and
    // left outside it would be a copy of the whole gradient.
    let written = r.outputs[0].0.expect("a region output");
    let last = &view.ops[*r.ops.last().expect("ops") as usize];
    assert_eq!(last.outputs[0], written);
    assert_eq!(shape(&view, written), [8, 16]);
    let gemms = view
        .ops
        .iter()
        .filter(|o| o.input_values().any(|v| v == written))
        .map(|o| o.symbol.as_str())
        .collect::<Vec<_>>();
    assert!(gemms.len() >= 2, "{gemms:?}");
    assert_eq!((r.outputs.len(), r.outputs[1].0), (2, None));
    assert!(claims(&view).contains(&r.ops));
    let mut left: Vec<u32> = r.ops.clone();
    left.retain(|&o| o as usize != i);
    assert_eq!(
        joined_ops(&view),
        left.iter().map(|&o| o as usize).collect::<Vec<_>>()
    );
}

#[test]
fn f32_and_f16_heads_are_claimed_f64_is_decomposed() {
    // f32 logits: `.float()` is no convert, so the op stands alone.
    let (fwd, bwd) = head_traces(DType::F32, 1, 3, 4, 5);
    for (t, sym) in [(&fwd, ce::FWD), (&bwd, ce::BWD)] {
        let view = trace_view(t, &t.bsyms);
        let i = op_index(&view, sym);
        let r = ce::region(&view, i).expect("claimed");
        assert_eq!(r.ops, [i as u32], "{sym}");
        assert!(joined_ops(&view).is_empty());
    }
    let (fwd, bwd) = head_traces(DType::F16, 1, 3, 4, 5);
    for (t, sym) in [(&fwd, ce::FWD), (&bwd, ce::BWD)] {
        let view = trace_view(t, &t.bsyms);
        let r = ce::region(&view, op_index(&view, sym)).expect("claimed");
        assert!(r.ops.len() >= 3, "{sym}: {:?}", symbols(&view, &r.ops));
    }
    // f64 logits are not the kernels' (the decomposition runs in f64).
    let text = r#"def computation(x, t):
  # x: "cuda:0 f64[4, 6]"
  # t: "cuda:0 i64[4]"
  t1, t2 = ltorch.cross_entropy_lse(x, t, ignore_index=-100)
  return (t1, t2)
"#;
    let trace = parse_trace(text).expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    let err = ce::decode_region(&view, 0).expect_err("f64 is not claimed");
    assert!(err.contains("f64 logits"), "{err}");
    assert!(claims(&view).is_empty());
}

#[test]
fn a_convert_with_another_reader_stays_outside() {
    // The f32 logits are also returned: the convert cannot join (its output must exist).
    let text = r#"def computation(x, t):
  # x: "cuda:0 bf16[4, 6]"
  # t: "cuda:0 i32[4]"
  t0 = prims.convert_element_type(x, dtypes.f32)
  t1, t2 = ltorch.cross_entropy_lse(t0, t, ignore_index=-100)
  return (t1, t2, t0)
"#;
    let trace = parse_trace(text).expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    let r = ce::region(&view, 1).expect("claimed");
    assert_eq!(r.ops, [1]);
    let Spec::CrossEntropy { logits, target, .. } = &r.spec else {
        panic!()
    };
    assert_eq!(
        (logits.dtype, target.dtype),
        (DTypeCode::F32, DTypeCode::I32)
    );
    assert!(joined_ops(&view).is_empty());
}

#[test]
fn targets_of_other_shapes_or_dtypes_are_refused() {
    let text = r#"def computation(x, t):
  # x: "cuda:0 f32[4, 6]"
  # t: "cuda:0 i16[4]"
  t1, t2 = ltorch.cross_entropy_lse(x, t, ignore_index=-100)
  return (t1, t2)
"#;
    let trace = parse_trace(text).expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    let err = ce::decode_region(&view, 0).expect_err("i16 targets");
    assert!(err.contains("expected i32 or i64 [4]"), "{err}");
    let text = text
        .replace("cuda:0 f32", "cpu f32")
        .replace("cuda:0 i16", "cpu i64");
    let trace = parse_trace(&text).expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    assert!(ce::decode_region(&view, 0).is_err(), "a CPU op");
}
