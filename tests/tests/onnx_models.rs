//! ONNX models exported from PyTorch (scripts/gen_onnx_fixtures.py) run through thunder-onnx
//! on the CPU executors and compared with ONNX Runtime's outputs stored beside them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thunder_core::runtime::npy::read_npy;
use thunder_core::{Array, PluginHost};
use thunder_onnx::{OnnxModel, OnnxSession};
use thunder_tests::{default_cpu_host, interpreter_host, repo_root};

fn fixtures() -> PathBuf {
    repo_root().join("thunder-onnx/tests/fixtures")
}

/// `case<i>.in.<name>.npy` / `case<i>.out.<name>.npy` of a model folder, by case.
fn cases(dir: &Path) -> Vec<(HashMap<String, Array>, HashMap<String, Array>)> {
    let mut out = Vec::new();
    for i in 0.. {
        let prefix = format!("case{i}.");
        let (mut ins, mut outs) = (HashMap::new(), HashMap::new());
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            let rest = rest.strip_suffix(".npy").unwrap();
            let a = read_npy(&dir.join(&name)).unwrap();
            if let Some(n) = rest.strip_prefix("in.") {
                ins.insert(n.to_string(), a);
            } else if let Some(n) = rest.strip_prefix("out.") {
                outs.insert(n.to_string(), a);
            }
        }
        if ins.is_empty() && outs.is_empty() {
            break;
        }
        out.push((ins, outs));
    }
    out
}

/// Largest |got - want| over the largest |want|: the error relative to the output's scale.
fn relative_error(got: &Array, want: &Array) -> f64 {
    assert_eq!(got.shape(), want.shape());
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    let scale = w.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-30);
    let err = g
        .iter()
        .zip(&w)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    err / scale
}

fn check_model(name: &str, host: Arc<PluginHost>) {
    check_dir(name, &fixtures().join(name), host)
}

fn check_dir(name: &str, dir: &Path, host: Arc<PluginHost>) {
    let model = OnnxModel::load(&dir.join("model.onnx")).unwrap();
    assert!(thunder_onnx::unsupported_nodes(&model).is_empty());
    let session = OnnxSession::new(model, host);
    let cases = cases(dir);
    assert!(!cases.is_empty(), "{name}: no cases");
    let mut shapes = std::collections::HashSet::new();
    for (i, (ins, want)) in cases.iter().enumerate() {
        shapes.insert(ins.values().map(|a| a.shape().to_vec()).collect::<Vec<_>>());
        let got = session
            .run_named(ins.clone())
            .unwrap_or_else(|e| panic!("{name} case {i}: {e}"));
        assert_eq!(got.len(), want.len(), "{name}: output count");
        for (out_name, a) in &got {
            let w = &want[out_name];
            assert_eq!(a.dtype(), w.dtype(), "{name} case {i} {out_name}: dtype");
            if w.dtype() != thunder_core::DType::F32 && w.dtype() != thunder_core::DType::F64 {
                assert_eq!(
                    a.to_f64_vec().unwrap(),
                    w.to_f64_vec().unwrap(),
                    "{name} case {i} {out_name}"
                );
                continue;
            }
            let err = relative_error(a, w);
            eprintln!(
                "{name} case {i} {out_name}{:?}: relative error {err:.2e}",
                a.shape()
            );
            assert!(
                err <= 1e-4,
                "{name} case {i} output {out_name}: relative error {err:e} > 1e-4"
            );
        }
    }
    // One specialisation per distinct input signature, reused on repeated shapes.
    assert_eq!(session.cached(), shapes.len(), "{name}: cache entries");
    let (ins, _) = &cases[0];
    session.run_named(ins.clone()).unwrap();
    assert_eq!(
        session.cached(),
        shapes.len(),
        "{name}: a repeated signature recompiled"
    );
}

macro_rules! model_tests {
    ($($test:ident => $name:literal;)*) => {$(
        #[test]
        fn $test() {
            check_model($name, default_cpu_host());
        }
    )*};
}

model_tests! {
    bert_tiny_legacy_exporter => "bert_tiny";
    bert_tiny_dynamo_exporter => "bert_tiny_dynamo";
    gpt2_tiny_dynamo_exporter => "gpt2_tiny";
    gpt2_tiny_legacy_exporter => "gpt2_tiny_legacy";
    resnet_tiny => "resnet_tiny";
    resnet_tiny_batch_norm => "resnet_tiny_bn";
    cnn_small => "cnn_small";
    cnn_small_external_data => "cnn_small_external";
    op_mix => "opmix";
    vit_tiny_legacy_exporter => "vit_tiny";
    vit_tiny_dynamo_exporter => "vit_tiny_dynamo";
}

/// Single-node models (scalar and empty shapes, broadcasting, each dtype ONNX Runtime has a
/// kernel for, attribute corners such as asymmetric pads and negative slice steps).
fn check_ops(host: Arc<PluginHost>) {
    let root = fixtures().join("ops");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.len() > 60, "{} op cases", names.len());
    let mut failed = Vec::new();
    for name in names {
        let (dir, host) = (root.join(&name), host.clone());
        let n = name.clone();
        if std::panic::catch_unwind(move || check_dir(&n, &dir, host)).is_err() {
            failed.push(name);
        }
    }
    assert!(
        failed.is_empty(),
        "op cases failed (messages above): {failed:?}"
    );
}

#[test]
fn single_ops_on_the_interpreter() {
    check_ops(interpreter_host());
}

#[test]
fn single_ops_on_the_cpu_executors() {
    check_ops(default_cpu_host());
}

/// The interpreter alone agrees too (the reference executor, no fused kernels).
#[test]
fn gpt2_tiny_on_the_interpreter() {
    check_model("gpt2_tiny", interpreter_host());
}

#[test]
fn wrong_input_shape_names_the_input() {
    let dir = fixtures().join("resnet_tiny");
    let session = OnnxSession::new(
        OnnxModel::load(&dir.join("model.onnx")).unwrap(),
        default_cpu_host(),
    );
    let x = Array::random(&[1, 3, 32], thunder_core::DType::F32, 0).unwrap();
    let err = session.run(&[x]).unwrap_err().to_string();
    assert!(err.contains("input `pixels`"), "{err}");
    assert!(err.contains("batch"), "{err}");
    let ids = Array::random(&[1, 3, 32, 32], thunder_core::DType::I64, 0).unwrap();
    let err = session.run(&[ids]).unwrap_err().to_string();
    assert!(err.contains("expected pixels f32"), "{err}");
}
