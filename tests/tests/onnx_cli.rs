//! `thunder run model.onnx` and `thunder examine model.onnx` through the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use thunder_core::runtime::npy::read_npy;
use thunder_tests::{interpreter_library, repo_root, thunder_binary};

fn fixture(name: &str) -> PathBuf {
    repo_root().join("thunder-onnx/tests/fixtures").join(name)
}

fn thunder(dir: &Path, args: &[&str]) -> Output {
    let config = dir.join("plugins.toml");
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n",
        interpreter_library().display()
    );
    std::fs::write(&config, text).unwrap();
    Command::new(thunder_binary())
        .current_dir(dir)
        .env_remove("THUNDER_CONFIG")
        .env_remove("THUNDER_EXECUTORS")
        .arg("--config")
        .arg(&config)
        .args(args)
        .output()
        .expect("run thunder")
}

#[test]
fn run_writes_outputs_by_graph_name_matching_onnx_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("bert_tiny");
    let model = f.join("model.onnx");
    let ids = format!("input_ids={}", f.join("case1.in.input_ids.npy").display());
    let mask = format!(
        "attention_mask={}",
        f.join("case1.in.attention_mask.npy").display()
    );
    let o = thunder(
        dir.path(),
        &[
            "run",
            model.to_str().unwrap(),
            "-i",
            &ids,
            "-i",
            &mask,
            "--out",
            "o",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("translate") && stderr.contains("compile"),
        "{stderr}"
    );
    let got = read_npy(&dir.path().join("o/out_last_hidden_state.npy")).unwrap();
    let want = read_npy(&f.join("case1.out.last_hidden_state.npy")).unwrap();
    assert_eq!(got.shape(), want.shape());
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    let scale = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let err = g
        .iter()
        .zip(&w)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(err <= 1e-4 * scale, "error {err} against scale {scale}");
}

#[test]
fn run_names_a_missing_input() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("bert_tiny").join("model.onnx");
    let o = thunder(
        dir.path(),
        &[
            "run",
            model.to_str().unwrap(),
            "-i",
            "input_ids=zeros:i64[1,4]",
        ],
    );
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("input `attention_mask`: missing"),
        "{stderr}"
    );
}

#[test]
fn examine_lists_every_unsupported_node() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("unsupported").join("model.onnx");
    let o = thunder(dir.path(), &["examine", model.to_str().unwrap()]);
    assert!(!o.status.success());
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("2 unsupported nodes"), "{stdout}");
    assert!(
        stdout.contains("(op TopK, domain ai.onnx, opset 14)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(op CumSum, domain ai.onnx, opset 14)"),
        "{stdout}"
    );
}

#[test]
fn examine_imports_and_shows_the_execution_trace() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("gpt2_tiny").join("model.onnx");
    let o = thunder(
        dir.path(),
        &[
            "examine",
            model.to_str().unwrap(),
            "-i",
            "input_ids=zeros:i64[2,7]",
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("input  input_ids i64[batch, sequence]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("every node has an importer rule"),
        "{stdout}"
    );
    assert!(stdout.contains("imported for (cpu i64[2, 7])"), "{stdout}");
    assert!(stdout.contains("interpreter.region"), "{stdout}");
}

#[test]
fn a_truncated_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("gpt2_tiny").join("model.onnx")).unwrap();
    let path = dir.path().join("cut.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let o = thunder(
        dir.path(),
        &[
            "run",
            path.to_str().unwrap(),
            "-i",
            "input_ids=zeros:i64[1,4]",
        ],
    );
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("cut.onnx: not a valid ONNX model"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--device cuda:0` moves the imported program and its weights to the GPU; on a machine
/// without CUDA that is an error saying so (the GPU run is checked by scripts/gpu/onnx_cuda.sh).
#[test]
fn run_on_a_cuda_device_without_cuda_says_so() {
    if thunder_core::cuda::device_count().is_ok() {
        return; // a CUDA machine: the interpreter-only config here cannot run it.
    }
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("bert_tiny");
    let model = f.join("model.onnx");
    let ids = format!("input_ids={}", f.join("case1.in.input_ids.npy").display());
    let mask = format!(
        "attention_mask={}",
        f.join("case1.in.attention_mask.npy").display()
    );
    let o = thunder(
        dir.path(),
        &[
            "run",
            model.to_str().unwrap(),
            "-i",
            &ids,
            "-i",
            &mask,
            "--device",
            "cuda:0",
        ],
    );
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("no CUDA driver"), "{stderr}");
}

/// `thunder bench model.onnx` imports the model for the given inputs and profiles it like a
/// trace program: first call, steady state and the regions with their executors.
#[test]
fn bench_profiles_an_onnx_model_by_region() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("resnet_tiny");
    let model = f.join("model.onnx");
    let pixels = format!("pixels={}", f.join("case0.in.pixels.npy").display());
    let o = thunder(
        dir.path(),
        &["bench", model.to_str().unwrap(), "-i", &pixels, "--json"],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    let regions = report["regions"].as_array().expect("regions");
    assert!(!regions.is_empty(), "{report}");
    assert!(
        regions.iter().all(|r| r["executor"] == "interpreter"),
        "{report}"
    );
    let o = thunder(
        dir.path(),
        &["bench", model.to_str().unwrap(), "-i", &pixels, "--grad"],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--grad is not supported for ONNX"));
}
