//! Ops declared by a plugin (tests/plugins/custom-op): callable from the Rust API and from
//! trace text, printed in traces, run by the plugin when it claims them and through their
//! decomposition when it does not, differentiable through the decomposition.

use std::sync::Arc;
use thunder_core::autograd::value_and_grad;
use thunder_core::host::Config;
use thunder_core::ir::Arg;
use thunder_core::{jit_with, Array, DType, PluginHost, Tensor};
use thunder_tests::{interpreter_library, target_dir};
use thunder_torch::prelude::*;

fn host(claim: bool) -> Arc<PluginHost> {
    let lib = target_dir().join(format!(
        "{}thunder_test_custom_op{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        lib.exists(),
        "{} is missing: build the workspace first",
        lib.display()
    );
    let text = format!(
        "[[executor]]\nname = \"custom-op\"\nlibrary = \"{}\"\npriority = 10\n[executor.options]\nclaim = {claim}\n\n\
         [[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\n",
        lib.display(),
        interpreter_library().display()
    );
    // The plugin's decompositions call ltorch ops: the library is registered before they parse.
    thunder_torch::register();
    let host = PluginHost::load(&Config::parse(&text, "t.toml".as_ref()).unwrap(), &[]);
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    Arc::new(host)
}

fn rms_norm(x: &Tensor, w: &Tensor) -> thunder_core::Result<Tensor> {
    let mut out = thunder_torch::custom(
        "mylib.rms_norm",
        vec![Arg::Value(x.value()), Arg::Value(w.value())],
    )?;
    Ok(out.remove(0))
}

/// The reference, computed here in f64 from the definition.
fn reference(x: &[f32], w: &[f32]) -> Vec<f64> {
    let c = w.len();
    x.chunks(c)
        .flat_map(|row| {
            let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / c as f64;
            let s = 1.0 / (ms + 1e-6).sqrt();
            row.iter()
                .zip(w)
                .map(move |(&v, &wi)| v as f64 * s * wi as f64)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn inputs() -> (Array, Array, Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.3).collect();
    let w: Vec<f32> = (0..4).map(|i| 0.5 + i as f32 * 0.25).collect();
    (
        Array::from_slice(&x, &[3, 4]).unwrap(),
        Array::from_slice(&w, &[4]).unwrap(),
        x,
        w,
    )
}

fn check_close(got: &Array, want: &[f64]) {
    for (g, w) in got.to_vec::<f32>().unwrap().iter().zip(want) {
        assert!((*g as f64 - w).abs() < 1e-5, "{g} vs {w}");
    }
}

#[test]
fn plugin_declares_its_ops() {
    let h = host(true);
    let e = h.entries().iter().find(|e| e.name == "custom-op").unwrap();
    assert_eq!(
        e.custom_ops,
        vec![
            "mylib.rms_norm".to_string(),
            "mylib.opaque_square".to_string()
        ]
    );
}

#[test]
fn claimed_op_runs_on_its_plugin() {
    let f = jit_with(
        host(true),
        |xs: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            Ok(vec![rms_norm(&xs[0], &xs[1])?])
        },
    );
    let (x, w, xv, wv) = inputs();
    let out = f.call(&[x, w]).unwrap();
    check_close(&out[0], &reference(&xv, &wv));
    let exec = f.last_traces().unwrap().execution.print();
    assert!(
        exec.contains("t9 = custom-op.region0(x0, x1)")
            && exec.contains("    # t9 = mylib.rms_norm(x0, x1)"),
        "{exec}"
    );
    assert!(!exec.contains("interpreter"), "{exec}");
}

#[test]
fn unclaimed_op_runs_through_its_decomposition() {
    let f = jit_with(
        host(false),
        |xs: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            Ok(vec![rms_norm(&xs[0], &xs[1])?])
        },
    );
    let (x, w, xv, wv) = inputs();
    let out = f.call(&[x, w]).unwrap();
    check_close(&out[0], &reference(&xv, &wv));
    let t = f.last_traces().unwrap();
    let initial = thunder_core::text::print_trace(&t.initial);
    assert!(
        initial.contains("= mylib.rms_norm(x0, x1)") && initial.contains("ltorch.rsqrt("),
        "{initial}"
    );
    let exec = t.execution.print();
    assert!(
        exec.contains("interpreter.region0(") && exec.contains("prims.rsqrt("),
        "{exec}"
    );
}

#[test]
fn trace_text_calls_plugin_ops_and_round_trips() {
    let _h = host(true);
    let text = "def computation(x, w):\n  # x: \"cpu f32[3, 4]\"\n  # w: \"cpu f32[4]\"\n  y = mylib.rms_norm(x, w)\n  z = mylib.opaque_square(y)\n  return (z,)\n";
    let t = thunder_torch::parse_trace(text).unwrap();
    let printed = thunder_core::text::print_trace(&t);
    assert!(
        printed.contains("y = mylib.rms_norm(x, w)  # y: \"cpu f32[3, 4]\""),
        "{printed}"
    );
    assert_eq!(
        thunder_core::text::print_trace(&thunder_torch::parse_trace(&printed).unwrap()),
        printed
    );
}

#[test]
fn gradients_flow_through_the_decomposition() {
    // The same function written with ltorch ops is the reference.
    let plain = |x: &Tensor, w: &Tensor| {
        (x * x)
            .mean(Some(&[-1]), true)
            .add(1e-6)
            .rsqrt()
            .mul(x)
            .mul(w)
    };
    let a = value_and_grad(
        Some(host(false)),
        |xs: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            Ok(vec![rms_norm(&xs[0], &xs[1])?.sum(None, false)])
        },
    );
    let b = value_and_grad(Some(host(false)), move |xs: &[Tensor]| {
        vec![plain(&xs[0], &xs[1]).sum(None, false)]
    });
    let (x, w, _, _) = inputs();
    let args = [x.with_requires_grad(true), w.with_requires_grad(true)];
    let (_, ga) = a.call(&args).unwrap();
    let (_, gb) = b.call(&args).unwrap();
    for (p, q) in ga.iter().zip(&gb) {
        assert_eq!(p.to_vec::<f32>().unwrap(), q.to_vec::<f32>().unwrap());
    }
}

#[test]
fn op_without_decomposition_has_no_gradient_and_needs_a_claim() {
    let square = |xs: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
        let y = thunder_torch::custom("mylib.opaque_square", vec![Arg::Value(xs[0].value())])?
            .remove(0);
        Ok(vec![y.sum(None, false)])
    };
    let x = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let err = value_and_grad(Some(host(true)), square)
        .call(&[x.clone().with_requires_grad(true)])
        .unwrap_err();
    match err {
        e if e.op_name().is_some() => assert!(
            e.op_name() == Some("mylib.opaque_square")
                && e.op_message().unwrap_or_default().contains("no grad rule"),
            "{e}"
        ),
        other => panic!("expected an op error, got {other:?}"),
    }
    let ok = jit_with(host(true), square)
        .call(std::slice::from_ref(&x))
        .unwrap();
    assert_eq!(ok[0].to_vec::<f32>().unwrap(), vec![5.0]);
    let err = jit_with(host(false), square)
        .call(&[x])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no executor can run mylib.opaque_square"),
        "{err}"
    );
}

#[test]
fn bad_calls_name_the_op_and_plugin() {
    let f = jit_with(
        host(true),
        |xs: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            Ok(vec![rms_norm(&xs[0], &xs[1])?])
        },
    );
    let err = f
        .call(&[
            Array::random(&[3, 4], DType::F32, 0).unwrap(),
            Array::random(&[5], DType::F32, 0).unwrap(),
        ])
        .unwrap_err();
    match err {
        e if e.op_name().is_some() => {
            let message = e.op_message().unwrap_or_default();
            assert!(
                e.op_name() == Some("mylib.rms_norm")
                    && message.contains("custom-op")
                    && message.contains("[5]"),
                "{message}"
            )
        }
        other => panic!("expected an op error, got {other:?}"),
    }
    let g = jit_with(host(true), |xs: &[Tensor]| {
        thunder_torch::custom("mylib.nope", vec![Arg::Value(xs[0].value())])
    });
    let err = g
        .call(&[Array::random(&[2], DType::F32, 0).unwrap()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown op `mylib.nope`"), "{err}");
}
