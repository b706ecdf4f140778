//! Residuals that are views of other forward values (a linear layer's transposed, broadcast
//! weight) are recomputed in the backward instead of saved: the forward returns the weight
//! itself, and the gradients still match `value_and_grad` and finite differences.

use std::cell::Cell;
use std::collections::HashSet;
use thunder_core::autograd::{split_forward_backward_vjp, value_and_grad, vjp_in_trace};
use thunder_core::ir::{TensorType, Trace, Value};
use thunder_core::trace_ctx::trace_with;
use thunder_core::{compile_trace, Array, DType, Device, Tensor};
use thunder_tests::finite_differences::values;
use thunder_tests::interpreter_host;
use thunder_torch::prelude::*;

fn layer(xs: &[Tensor]) -> Vec<Tensor> {
    // A linear layer on a 3-D input: the weight is transposed and broadcast over the batch.
    vec![xs[0].linear(&xs[1], None).tanh()]
}

#[test]
fn a_linear_layer_saves_its_weight_not_a_transposed_copy() {
    let host = interpreter_host();
    let x = values(&[2, 3, 4], 1, -1.0, 1.0).with_requires_grad(true);
    let w = values(&[5, 4], 2, -1.0, 1.0).with_requires_grad(true);
    let c = values(&[2, 3, 5], 3, -1.0, 1.0);
    let ty = |a: &Array| -> TensorType { a.ty().clone() };
    let inputs = vec![
        ("x".to_string(), ty(&x)),
        ("w".to_string(), ty(&w)),
        ("c".to_string(), ty(&c)),
    ];
    let forward_len = Cell::new(0);
    let joint = trace_with(&inputs, HashSet::new(), "vjp", |xs| {
        let pairs = vec![(0, xs[2].clone())];
        let r = vjp_in_trace(&xs[..2], &[0, 1], |p| Ok(layer(p)), &pairs)?;
        forward_len.set(r.forward_len);
        Ok(r.outputs.into_iter().chain(r.grads).collect())
    })
    .unwrap();
    let cots = joint.inputs[2..].to_vec();
    let (fwd, bwd, saved) =
        split_forward_backward_vjp(&joint, forward_len.get(), 1, &cots).unwrap();
    // The weight (input 1) is saved as itself; no saved value is a [5, 4]-sized view of it.
    let w_value = fwd.inputs[1];
    assert!(saved.contains(&w_value), "the weight is saved: {saved:?}");
    let view_prims = ["prims.transpose", "prims.broadcast_in_dim", "prims.reshape"];
    for b in &fwd.bsyms {
        if view_prims.contains(&b.sym.id) && b.input_values().any(|v| v == w_value) {
            assert!(
                !saved.contains(&b.outputs[0]),
                "{} of the weight is saved instead of recomputed",
                b.sym.id
            );
        }
    }
    assert!(
        bwd.bsyms
            .iter()
            .any(|b| view_prims.contains(&b.sym.id) && b.input_values().any(|v| v == w_value)),
        "the backward recomputes the weight's view"
    );

    let (_, fwd) = compile_trace(&host, fwd).unwrap();
    let (_, bwd) = compile_trace(&host, bwd).unwrap();
    let mut outs = fwd.run(&[x.clone(), w.clone()]).unwrap();
    let residuals = outs.split_off(1);
    let mut bwd_in = residuals;
    bwd_in.push(c.clone());
    let grads = bwd.run(&bwd_in).unwrap();

    let vg = value_and_grad(Some(host.clone()), |xs: &[Tensor]| {
        vec![(&layer(&xs[..2])[0] * &xs[2]).sum(None, false)]
    });
    let (_, want) = vg.call(&[x.clone(), w.clone(), c.clone()]).unwrap();
    for (g, e) in grads.iter().zip(&want) {
        let (g, e) = (g.to_f64_vec().unwrap(), e.to_f64_vec().unwrap());
        assert_eq!(g.len(), e.len());
        for (a, b) in g.iter().zip(&e) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }
}

/// Elementwise chains are recomputed in the backward from the GEMM output they started from:
/// a tanh-GELU MLP saves its first linear's output once, not the GELU's f32 intermediates
/// (tanh, products, the output), and its gradients still match finite differences.
#[test]
fn an_mlp_saves_the_gemm_output_not_the_gelu_chain() {
    let (n, d, h) = (3, 4, 6);
    fn mlp(xs: &[Tensor]) -> Tensor {
        let hidden = xs[0].linear(&xs[1], None).gelu("tanh");
        (&hidden.linear(&xs[2], None) * &xs[3]).sum(None, false)
    }
    let vg = value_and_grad(Some(interpreter_host()), move |xs: &[Tensor]| vec![mlp(xs)]);
    let x = values(&[n, d], 11, -1.0, 1.0).with_requires_grad(true);
    let w1 = values(&[h, d], 12, -1.0, 1.0).with_requires_grad(true);
    let w2 = values(&[d, h], 13, -1.0, 1.0).with_requires_grad(true);
    let c = values(&[n, d], 14, -1.0, 1.0);
    vg.call(&[x, w1, w2, c]).unwrap();
    let traces = vg.last_traces().unwrap();
    let bwd = traces.backward.final_trace();
    let hidden_sized: Vec<&str> = bwd
        .inputs
        .iter()
        .filter(|&&v| bwd.ty(v).shape == [n, h])
        .map(|&v| bwd.name(v))
        .collect();
    assert_eq!(
        hidden_sized.len(),
        1,
        "saved [n, h] values: {hidden_sized:?} (only the first GEMM's output should be)"
    );
    let text = thunder_core::text::print_trace(bwd);
    assert!(
        text.contains("prims.tanh"),
        "the backward recomputes tanh:\n{text}"
    );
    // The recomputed chain and the GELU backward that reads it form one run with no GEMM
    // inside (a fuser keeps the f32 intermediates in registers): the recomputation comes
    // after the GEMM giving the hidden gradient, and w2's weight-gradient GEMM after the last
    // op reading the tanh.
    let ids: Vec<&str> = bwd.bsyms.iter().map(|b| b.sym.id).collect();
    let at = ids.iter().position(|&s| s == "prims.tanh").unwrap();
    let tanh = bwd.bsyms[at].outputs[0];
    let last_reader = (0..ids.len())
        .rev()
        .find(|&i| bwd.bsyms[i].input_values().any(|v| v == tanh))
        .unwrap();
    let gemms: Vec<usize> = (0..ids.len())
        .filter(|&i| ids[i] == "prims.matmul")
        .collect();
    assert!(gemms.iter().any(|&i| i < at), "{text}");
    assert!(
        gemms.iter().all(|&i| i < at || i > last_reader),
        "a GEMM between the recomputed tanh and its last reader:\n{text}"
    );
    thunder_tests::finite_differences::check(
        "mlp with recomputed gelu",
        thunder_tests::op!(|x| mlp(x)),
        vec![
            values(&[n, d], 11, -1.0, 1.0),
            values(&[h, d], 12, -1.0, 1.0),
            values(&[d, h], 13, -1.0, 1.0),
            values(&[n, d], 14, -1.0, 1.0),
        ],
    );
}

/// A linear layer with a bias before a GELU saves the GEMM's output (written anyway), not the
/// biased pre-activation, which only the forward's fused GELU kernel would otherwise write: in
/// bf16 and f32, and the f32 gradients still match finite differences.
#[test]
fn a_biased_linear_before_gelu_saves_the_gemm_output_not_the_biased_value() {
    let (b, t, d, h) = (2i64, 3i64, 4i64, 6i64);
    fn mlp(xs: &[Tensor]) -> Tensor {
        let hidden = xs[0].linear(&xs[1], Some(&xs[2])).gelu("tanh");
        (&hidden.linear(&xs[3], Some(&xs[4])) * &xs[5]).sum(None, false)
    }
    let shapes: [&[i64]; 6] = [&[b, t, d], &[h, d], &[h], &[d, h], &[d], &[b, t, d]];
    let f32_inputs: Vec<Array> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| values(s, 21 + i as u64, -1.0, 1.0).with_requires_grad(i < 5))
        .collect();
    for dtype in [DType::BF16, DType::F32] {
        let inputs: Vec<Array> = f32_inputs
            .iter()
            .map(|a| {
                let v = a.to_f64_vec().unwrap();
                Array::from_f64(&v, &a.ty().shape, dtype)
                    .unwrap()
                    .with_requires_grad(a.ty().requires_grad)
            })
            .collect();
        let vg = value_and_grad(Some(interpreter_host()), move |xs: &[Tensor]| vec![mlp(xs)]);
        vg.call(&inputs).unwrap();
        let traces = vg.last_traces().unwrap();
        let (fwd, bwd) = (traces.forward.final_trace(), traces.backward.final_trace());
        let made_by: Vec<&str> = bwd
            .inputs
            .iter()
            .filter(|&&v| bwd.ty(v).numel() == (b * t * h) as usize)
            .map(|&v| {
                let name = bwd.name(v);
                fwd.bsyms
                    .iter()
                    .find(|s| s.outputs.iter().any(|&o| fwd.name(o) == name))
                    .map_or("an input", |s| s.sym.id)
            })
            .collect();
        assert_eq!(
            made_by,
            ["prims.matmul"],
            "{dtype:?}: the saved hidden-sized values' producers:\n{}\n{}",
            thunder_core::text::print_trace(fwd),
            thunder_core::text::print_trace(bwd)
        );
    }
    thunder_tests::finite_differences::check(
        "biased mlp with recomputed bias and gelu",
        thunder_tests::op!(|x| mlp(x)),
        f32_inputs
            .iter()
            .map(|a| a.clone().with_requires_grad(false))
            .collect(),
    );
}

fn heads_attention(xs: &[Tensor], h: i64) -> Vec<Tensor> {
    let (b, t, c3) = (xs[0].shape()[0], xs[0].shape()[1], xs[0].shape()[2]);
    let c = c3 / 3;
    let qkv = thunder_torch::split(&xs[0], c, 2).expect("split");
    let heads = |u: &Tensor| u.reshape(&[b, t, h, c / h]).transpose(1, 2);
    let (q, k, v) = (heads(&qkv[0]), heads(&qkv[1]), heads(&qkv[2]));
    let y =
        thunder_torch::scaled_dot_product_attention(&q, &k, &v, None, true, None).expect("sdpa");
    vec![y.transpose(1, 2).reshape(&[b, t, c])]
}

/// Attention on q, k, v split from one f64 `[2, 5, 24]` input (2 heads) on `device`, split into
/// forward and backward: (forward, backward, saved, attention's q, k, v and its output in the
/// forward).
fn split_heads_attention(device: Device) -> (Trace, Trace, Vec<Value>, Vec<Value>, Value) {
    let ty = |shape: &[i64], requires_grad: bool| TensorType {
        requires_grad,
        ..TensorType::new(shape.to_vec(), DType::F64, device)
    };
    let inputs = vec![
        ("x".to_string(), ty(&[2, 5, 24], true)),
        ("c".to_string(), ty(&[2, 5, 8], false)),
    ];
    let forward_len = Cell::new(0);
    let joint = trace_with(&inputs, HashSet::new(), "vjp", |xs| {
        let pairs = vec![(0, xs[1].clone())];
        let r = vjp_in_trace(&xs[..1], &[0], |p| Ok(heads_attention(p, 2)), &pairs)?;
        forward_len.set(r.forward_len);
        Ok(r.outputs.into_iter().chain(r.grads).collect())
    })
    .unwrap();
    let cots = joint.inputs[1..].to_vec();
    let (fwd, bwd, saved) =
        split_forward_backward_vjp(&joint, forward_len.get(), 1, &cots).unwrap();
    let sdpa = fwd
        .bsyms
        .iter()
        .find(|b| b.sym.id == "ltorch.sdpa_fwd_lse")
        .expect("the forward keeps attention's op whole");
    let qkv: Vec<_> = sdpa.input_values().take(3).collect();
    let out = sdpa.outputs[0];
    (fwd, bwd, saved, qkv, out)
}

/// On a GPU, q, k and v after their head transposes feed an attention kernel that the
/// executors there give contiguous operands, so the forward materializes them anyway: they are
/// saved as they are, not rebuilt in the backward from saved slices (which the forward then had
/// to write too).
#[test]
fn attention_on_a_gpu_saves_its_head_views_not_their_slices() {
    let (_, bwd, saved, qkv, out) = split_heads_attention(Device::Cuda(0));
    assert!(
        saved.contains(&out),
        "attention's output is saved: {saved:?}"
    );
    for v in &qkv {
        assert!(
            saved.contains(v),
            "{v:?} (an input of attention) is saved: {saved:?}"
        );
    }
    assert!(
        !bwd.bsyms
            .iter()
            .any(|b| b.sym.id == "prims.transpose" && b.outputs.iter().any(|o| qkv.contains(o))),
        "the backward does not rebuild q, k, v"
    );
}

/// On the CPU, attention reads q, k and v through their strides, so they are rebuilt in the
/// backward from their source (here the input) rather than written by the forward to be saved;
/// and its output, read only through the heads' merge, is rebuilt from the merged value (here
/// the program's output). Gradients still match `value_and_grad`.
#[test]
fn attention_on_the_cpu_rebuilds_its_head_views() {
    let host = interpreter_host();
    let h = 2;
    let x = values(&[2, 5, 24], 4, -1.0, 1.0).with_requires_grad(true);
    let cot = values(&[2, 5, 8], 5, -1.0, 1.0);
    let (fwd, bwd, saved, qkv, out) = split_heads_attention(Device::Cpu);
    assert!(!saved.contains(&out), "{out:?} is not saved: {saved:?}");
    assert!(
        saved.contains(&fwd.outputs[0]),
        "the merged output is saved: {saved:?}"
    );
    assert!(
        bwd.bsyms
            .iter()
            .any(|b| b.sym.id == "prims.transpose" && b.outputs.contains(&out)),
        "the backward unmerges the heads"
    );
    for v in &qkv {
        assert!(!saved.contains(v), "{v:?} is not saved: {saved:?}");
        assert!(
            bwd.bsyms
                .iter()
                .any(|b| b.sym.id == "prims.transpose" && b.outputs.contains(v)),
            "the backward rebuilds {v:?}"
        );
    }
    assert!(
        saved.contains(&fwd.inputs[0]),
        "the input is saved in their place: {saved:?}\n{}",
        thunder_core::text::print_trace(&bwd)
    );

    let (_, fwd) = compile_trace(&host, fwd).unwrap();
    let (_, bwd) = compile_trace(&host, bwd).unwrap();
    let mut outs = fwd.run(std::slice::from_ref(&x)).unwrap();
    let mut bwd_in = outs.split_off(1);
    bwd_in.push(cot.clone());
    let grads = bwd.run(&bwd_in).unwrap();
    let vg = value_and_grad(Some(host.clone()), move |xs: &[Tensor]| {
        vec![(&heads_attention(&xs[..1], h)[0] * &xs[1]).sum(None, false)]
    });
    let (_, want) = vg.call(&[x.clone(), cot.clone()]).unwrap();
    let (g, e) = (
        grads[0].to_f64_vec().unwrap(),
        want[0].to_f64_vec().unwrap(),
    );
    assert_eq!(g.len(), e.len());
    for (a, b) in g.iter().zip(&e) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
    }
}
