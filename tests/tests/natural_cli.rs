//! The CLI on programs without annotations: `-i` types them for `run`, `trace`, `examine`,
//! `partition` and `bench`, and `thunder bench PROGRAM` reports the first call, the steady
//! state and the regions.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use thunder_core::runtime::npy::read_npy;
use thunder_tests::{interpreter_library, repo_root, thunder_binary};

fn thunder(dir: &Path, args: &[String]) -> Output {
    let config = dir.join("plugins.toml");
    std::fs::write(
        &config,
        format!(
            "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n",
            interpreter_library().display()
        ),
    )
    .expect("config");
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

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn mlp() -> (PathBuf, Vec<String>) {
    let fixtures = repo_root().join("tests/fixtures/natural/mlp");
    let mut inputs = Vec::new();
    for name in ["x", "w1", "b1", "w2", "b2"] {
        inputs.push("-i".to_string());
        inputs.push(format!(
            "{name}={}",
            fixtures.join(format!("{name}.npy")).display()
        ));
    }
    (repo_root().join("tests/natural/mlp.py"), inputs)
}

fn args(words: &[&str], program: &Path, inputs: &[String]) -> Vec<String> {
    let mut out: Vec<String> = words[..1].iter().map(|s| s.to_string()).collect();
    out.push(program.display().to_string());
    out.extend(inputs.iter().cloned());
    out.extend(words[1..].iter().map(|s| s.to_string()));
    out
}

#[test]
fn run_takes_types_from_the_inputs_and_matches_pytorch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (program, inputs) = mlp();
    let o = thunder(
        dir.path(),
        &args(&["run", "--out", "out"], &program, &inputs),
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let got = read_npy(&dir.path().join("out/out_0.npy")).expect("out_0");
    let want =
        read_npy(&repo_root().join("tests/fixtures/natural/mlp/out_0.npy")).expect("fixture");
    assert_eq!(got.ty(), want.ty());
    let (g, w) = (
        got.to_f64_vec().expect("host"),
        want.to_f64_vec().expect("host"),
    );
    assert!(g
        .iter()
        .zip(&w)
        .all(|(a, b)| (a - b).abs() <= 1e-5 + 1e-5 * b.abs()));
}

#[test]
fn trace_examine_and_partition_take_inputs_the_same_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (program, inputs) = mlp();
    let o = thunder(
        dir.path(),
        &args(&["trace", "--stage", "initial"], &program, &inputs),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("# x: \"cpu f32[4, 6]\""), "{out}");
    assert!(out.contains("h = ltorch.linear(x, w1, b1)"), "{out}");
    let o = thunder(dir.path(), &args(&["examine"], &program, &inputs));
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("every op is supported"), "{out}");
    let o = thunder(
        dir.path(),
        &args(&["partition", "--dot", "g.dot"], &program, &inputs),
    );
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(dir.path().join("g.dot").exists());
    // Without inputs, the unannotated program says how to type it.
    let o = thunder(dir.path(), &args(&["trace"], &program, &[]));
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("parameter `x` has no type: give it as an input (`-i x=FILE.npy`)"),
        "{err}"
    );
}

#[test]
fn bench_program_reports_first_call_steady_state_and_regions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (program, inputs) = mlp();
    let o = thunder(
        dir.path(),
        &args(&["bench", "--reps", "5"], &program, &inputs),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for words in [
        "first call",
        "passes + claims + compile",
        "steady state",
        "5 samples",
        "interpreter",
    ] {
        assert!(out.contains(words), "`{words}` not in\n{out}");
    }
    let o = thunder(
        dir.path(),
        &args(&["bench", "--reps", "5", "--json"], &program, &inputs),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("bench --json is JSON");
    assert_eq!(json["steady"]["samples"], 5);
    assert!(json["first_call"]["total_ms"].as_f64().expect("total_ms") > 0.0);
    assert!(json["first_call"]["compile_ms"].as_f64().is_some());
    let regions = json["regions"].as_array().expect("regions");
    assert!(!regions.is_empty());
    let share: f64 = regions
        .iter()
        .map(|r| r["share"].as_f64().expect("share"))
        .sum();
    assert!((share - 1.0).abs() < 1e-9, "shares add up to {share}");
    assert!(regions
        .iter()
        .all(|r| r["executor"] == "interpreter" && r["pass"] == "forward"));
}

#[test]
fn bench_grad_times_forward_and_backward() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = repo_root().join("tests/fixtures/natural/attention");
    std::fs::write(
        dir.path().join("loss.py"),
        "def computation(logits, tgt):\n  l = ltorch.cross_entropy(logits, target=tgt)\n  return l\n",
    )
    .expect("program");
    let inputs: Vec<String> = ["logits", "tgt"]
        .iter()
        .flat_map(|n| {
            [
                "-i".to_string(),
                format!("{n}={}", fixtures.join(format!("{n}.npy")).display()),
            ]
        })
        .collect();
    let o = thunder(
        dir.path(),
        &args(
            &["bench", "--grad", "--reps", "3", "--json"],
            Path::new("loss.py"),
            &inputs,
        ),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(json["grad"], true);
    assert!(json["first_call"]["compile_ms"].is_null());
    let passes: Vec<&str> = json["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .filter_map(|r| r["pass"].as_str())
        .collect();
    assert!(
        passes.contains(&"forward") && passes.contains(&"backward"),
        "{passes:?}"
    );
    // --print-traces: both execution traces on stderr, the JSON report unchanged on stdout.
    let o = thunder(
        dir.path(),
        &args(
            &["bench", "--grad", "--reps", "3", "--json", "--print-traces"],
            Path::new("loss.py"),
            &inputs,
        ),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    serde_json::from_str::<serde_json::Value>(&out).expect("stdout is still the JSON report");
    assert!(
        err.contains("def computation(") && err.contains("def backward("),
        "{err}"
    );
    assert!(err.contains("# Executors:"), "{err}");
}

#[test]
fn ops_lists_each_ltorch_signature() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = thunder(dir.path(), &["ops".to_string()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for line in [
        "    softmax(input: Tensor, dim: int)",
        "    var(input: Tensor, dim: list[int]? = None, *, correction: number = 1, keepdim: bool = False)",
        "    scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor? = None, *, is_causal: bool = False, scale: float? = None)",
        "    add(input: Tensor|number, other: Tensor|number)",
    ] {
        assert!(out.contains(line), "`{line}` not in the listing");
    }
    let o = thunder(dir.path(), &["ops".to_string(), "--json".to_string()]);
    let json: serde_json::Value = serde_json::from_str(&text(&o).0).expect("JSON");
    let gelu = json["symbols"]
        .as_array()
        .expect("symbols")
        .iter()
        .find(|s| s["id"] == "ltorch.gelu")
        .expect("ltorch.gelu listed");
    assert_eq!(
        gelu["signature"],
        "input: Tensor, approximate: str = \"none\""
    );
}
