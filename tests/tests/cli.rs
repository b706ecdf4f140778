//! The `thunder` binary: run, trace, plugins, examine, and its errors for bad input.

use std::path::Path;
use std::process::{Command, Output};
use thunder_core::runtime::npy::{read_npy, write_npy};
use thunder_core::Array;
use thunder_tests::{interpreter_library, thunder_binary};

fn write_config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("plugins.toml");
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n",
        interpreter_library().display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn thunder(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(thunder_binary());
    cmd.current_dir(dir)
        .env_remove("THUNDER_CONFIG")
        .env_remove("THUNDER_EXECUTORS");
    if !args.contains(&"--config") {
        cmd.arg("--config").arg(write_config(dir));
    }
    cmd.args(args).output().expect("run thunder")
}

const PROGRAM: &str = "def computation(x, w):\n  # x: \"cpu f32[2, 3]\"\n  # w: \"cpu f32[3]\"\n  y = ltorch.mul(x, w)\n  z = ltorch.add(y, 1.0)\n  return (z, y)\n";

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prog.py"), PROGRAM).unwrap();
    write_npy(
        &dir.path().join("x.npy"),
        &Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap(),
    )
    .unwrap();
    dir
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn run_writes_outputs_in_return_order() {
    let dir = setup();
    let o = thunder(
        dir.path(),
        &[
            "run",
            "prog.py",
            "--input",
            "x=x.npy",
            "--input",
            "w=ones:f32[3]",
            "--out",
            "out",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let z = read_npy(&dir.path().join("out/out_0.npy")).unwrap();
    let y = read_npy(&dir.path().join("out/out_1.npy")).unwrap();
    assert_eq!(
        z.to_vec::<f32>().unwrap(),
        vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    );
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
}

#[test]
fn trace_prints_each_stage() {
    let dir = setup();
    let initial = thunder(dir.path(), &["trace", "prog.py", "--stage", "initial"]);
    let text = String::from_utf8_lossy(&initial.stdout);
    assert!(
        text.contains("y = ltorch.mul(x, w)")
            && text.contains("prims.broadcast_in_dim(w, [2, 3], [1])"),
        "{text}"
    );
    let exec = thunder(dir.path(), &["trace", "prog.py", "--stage", "execution"]);
    let text = String::from_utf8_lossy(&exec.stdout);
    assert!(
        text.contains("y, z = interpreter.region0(w, x)") && text.contains("del x, w"),
        "{text}"
    );
}

#[test]
fn plugins_json_lists_the_interpreter() {
    let dir = setup();
    let o = thunder(dir.path(), &["plugins", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = &v["executors"][0];
    assert_eq!(e["name"], "interpreter");
    assert_eq!(e["abi_version"], "1.2.0");
    assert_eq!(e["available"], true);
    assert_eq!(v["load_errors"].as_array().map(Vec::len), Some(0));
}

#[test]
fn examine_reports_claims_and_unsupported_ops() {
    let dir = setup();
    let o = thunder(dir.path(), &["examine", "prog.py"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("prims.mul") && out.contains("-> interpreter"),
        "{out}"
    );
    // With the only executor disabled, every op is reported unsupported.
    let cfg = dir.path().join("off.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\nenabled = false\n",
            interpreter_library().display()
        ),
    )
    .unwrap();
    let o = Command::new(thunder_binary())
        .current_dir(dir.path())
        .args(["--config", "off.toml", "examine", "prog.py"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !o.status.success() && out.contains("unsupported") && out.contains("prims.mul"),
        "{out}"
    );
}

/// `--device cuda:0` examines the program as it would run there: with only the (CPU)
/// interpreter configured, every op is one nobody can run on CUDA, each with the reason.
#[test]
fn examine_on_a_device_says_what_its_executors_leave_out() {
    let dir = setup();
    let o = thunder(dir.path(), &["examine", "prog.py", "--device", "cuda:0"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{out}");
    for want in ["prims.mul", "prims.add", "cuda:0 f32[2, 3]", "interpreter:"] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let o = thunder(dir.path(), &["examine", "prog.py", "--device", "tpu"]);
    assert!(
        !o.status.success() && stderr(&o).contains("--device: `tpu` is not a device"),
        "{}",
        stderr(&o)
    );
}

/// `opinfo-check` runs the OpInfo samples on a device against the interpreter on the CPU; on
/// the CPU with the interpreter alone every sample agrees; on CUDA it fails, either at once
/// (no driver, as in CI) or with every sample unclaimed (no CUDA executor configured).
#[test]
fn opinfo_check_counts_agreeing_and_unclaimed_samples() {
    let dir = setup();
    let o = thunder(
        dir.path(),
        &[
            "opinfo-check",
            "--device",
            "cpu",
            "--only",
            "prims.add,ltorch.softmax",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let line = out.lines().next().unwrap_or_default();
    let counts: Vec<&str> = line.rsplit(' ').nth(2).unwrap_or("").split('/').collect();
    assert!(
        counts.len() == 2 && counts[0] == counts[1] && counts[0] != "0",
        "{out}"
    );
    let o = thunder(
        dir.path(),
        &["opinfo-check", "--device", "cuda:0", "--only", "prims.add"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = stderr(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        err.contains("--device cuda:0: no CUDA driver")
            || (out.contains("0/") && out.contains("prims.add")),
        "{out}{err}"
    );
}

/// `opinfo-check --grads` differentiates every case of the gradient fixtures on the device and
/// compares with the interpreter: on the CPU with the interpreter alone all agree; a folder
/// without a manifest is an error naming it.
#[test]
fn opinfo_check_runs_the_gradient_samples() {
    let dir = setup();
    let fixtures = thunder_tests::repo_root().join("tests/fixtures/grads");
    let fixtures = fixtures.to_string_lossy();
    let o = thunder(
        dir.path(),
        &[
            "opinfo-check",
            "--device",
            "cpu",
            "--no-samples",
            "--grads",
            &fixtures,
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let line = out
        .lines()
        .find(|l| l.starts_with("gradient samples on cpu: "))
        .unwrap_or_default();
    let counts: Vec<usize> = line
        .rsplit(' ')
        .nth(1)
        .unwrap_or("")
        .split('/')
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        counts.len() == 2 && counts[0] == counts[1] && counts[0] >= 346,
        "{out}"
    );
    let o = thunder(
        dir.path(),
        &[
            "opinfo-check",
            "--device",
            "cpu",
            "--no-samples",
            "--grads",
            "nowhere",
        ],
    );
    assert!(
        !o.status.success()
            && stderr(&o).contains("nowhere/manifest.json: cannot read the manifest"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_inputs_get_clear_errors() {
    let dir = setup();
    let p = dir.path();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "run",
                "prog.py",
                "--input",
                "x=x.npy",
                "--input",
                "nope=ones:f32[3]",
            ],
            "unknown input `nope`; the program's inputs are: x, w",
        ),
        (
            vec!["run", "prog.py", "--input", "x=x.npy"],
            "missing input `w`",
        ),
        (
            vec![
                "run",
                "prog.py",
                "--input",
                "x=x.npy",
                "--input",
                "w=ones:f64[3]",
            ],
            "input `w`: the program's annotation says \"cpu f32[3]\" but the given input is \"cpu f64[3]\"",
        ),
        (
            vec![
                "run",
                "prog.py",
                "--input",
                "x=bad.npy",
                "--input",
                "w=ones:f32[3]",
            ],
            "bad.npy: not a valid .npy file",
        ),
        (
            vec![
                "run",
                "prog.py",
                "--input",
                "x=missing.npy",
                "--input",
                "w=ones:f32[3]",
            ],
            "missing.npy: cannot read",
        ),
        (
            vec!["run", "broken.py"],
            "line 4, column 21: expected an argument",
        ),
        (
            vec!["--config", "bad.toml", "plugins"],
            "bad.toml: field `priorty`",
        ),
        (
            vec!["--config", "badtype.toml", "plugins"],
            "field `priority`",
        ),
        (
            vec!["--executors", "cuda-fuser", "plugins"],
            "unknown executor `cuda-fuser`",
        ),
    ];
    std::fs::write(p.join("bad.npy"), b"\x93NUMPY garbage").unwrap();
    std::fs::write(
        p.join("broken.py"),
        PROGRAM.replace("ltorch.mul(x, w)", "ltorch.mul(x, )"),
    )
    .unwrap();
    std::fs::write(
        p.join("bad.toml"),
        "[[executor]]\nname = \"interpreter\"\npriorty = 1\n",
    )
    .unwrap();
    std::fs::write(
        p.join("badtype.toml"),
        "[[executor]]\nname = \"interpreter\"\npriority = \"high\"\n",
    )
    .unwrap();
    for (args, want) in cases {
        let o = thunder(p, &args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(err.contains(want), "{args:?}: expected `{want}` in:\n{err}");
        assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    }
}

#[test]
fn run_with_grad_writes_gradients() {
    let dir = setup();
    let p = dir.path();
    std::fs::write(p.join("loss.py"), "def computation(x, w):\n  # x: \"cpu f32[2, 3]\"\n  # w: \"cpu f32[3]\"\n  y = ltorch.mul(x, w)\n  z = ltorch.sum(y, None, False)\n  return (z,)\n").unwrap();
    write_npy(
        &p.join("w.npy"),
        &Array::from_slice(&[1.0f32, -2.0, 0.5], &[3]).unwrap(),
    )
    .unwrap();
    let o = thunder(
        p,
        &[
            "run", "loss.py", "-i", "x=x.npy", "-i", "w=w.npy", "--grad", "--out", "g",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // d/dx sum(x * w) = w broadcast over rows; d/dw = column sums of x.
    assert_eq!(
        read_npy(&p.join("g/grad_x.npy"))
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![1.0, -2.0, 0.5, 1.0, -2.0, 0.5]
    );
    assert_eq!(
        read_npy(&p.join("g/grad_w.npy"))
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![5.0, 7.0, 9.0]
    );
    assert_eq!(
        read_npy(&p.join("g/out_0.npy"))
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![1.0 * 5.0 - 2.0 * 7.0 + 0.5 * 9.0]
    );

    let o = thunder(
        p,
        &[
            "run", "loss.py", "-i", "x=x.npy", "-i", "w=w.npy", "--grad", "--wrt", "w", "--out",
            "h",
        ],
    );
    assert!(
        o.status.success() && p.join("h/grad_w.npy").exists() && !p.join("h/grad_x.npy").exists()
    );

    let o = thunder(
        p,
        &[
            "run", "loss.py", "-i", "x=x.npy", "-i", "w=w.npy", "--grad", "--wrt", "v",
        ],
    );
    assert!(
        stderr(&o).contains("--wrt: unknown input `v`"),
        "{}",
        stderr(&o)
    );
    let o = thunder(
        p,
        &["run", "prog.py", "-i", "x=x.npy", "-i", "w=w.npy", "--grad"],
    );
    assert!(
        stderr(&o).contains("must be a floating-point scalar"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_skipped_symbol_goes_to_the_next_executor() {
    // cpu-simd would fuse the exp with the add; with `skip` it is never asked about exp, so the
    // interpreter runs it. A misspelt key is still an error naming it.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let config = |skip: &str| {
        format!(
            "[[executor]]\nname = \"cpu-simd\"\nlibrary = \"{}\"\npriority = 20\n{skip}\n\
             [[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n",
            thunder_tests::plugin_library("thunder_cpu_simd").display(),
            interpreter_library().display()
        )
    };
    std::fs::write(p.join("plain.toml"), config("")).unwrap();
    std::fs::write(p.join("skip.toml"), config("skip = [\"prims.exp\"]")).unwrap();
    std::fs::write(p.join("bad.toml"), config("skips = [\"prims.exp\"]")).unwrap();
    std::fs::write(p.join("typo.toml"), config("skip = [\"prims.expp\"]")).unwrap();
    std::fs::write(
        p.join("prog.py"),
        "def computation(x):\n  # x: \"cpu f32[64]\"\n  t0 = prims.add(x, 1.0)\n  t1 = prims.exp(t0)\n  return (t1,)\n",
    )
    .unwrap();
    let trace = |cfg: &str| {
        let o = thunder(
            p,
            &["--config", cfg, "trace", "prog.py", "--stage", "execution"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let plain = trace("plain.toml");
    assert!(!plain.contains("interpreter.region"), "{plain}");
    let skipped = trace("skip.toml");
    assert!(skipped.contains("cpu-simd.region"), "{skipped}");
    assert!(skipped.contains("interpreter.region"), "{skipped}");
    let o = thunder(
        p,
        &[
            "--config",
            "bad.toml",
            "trace",
            "prog.py",
            "--stage",
            "execution",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("skips"), "{}", stderr(&o));
    // A name the plugin does not list is loaded, with a warning naming it.
    let o = thunder(p, &["--config", "typo.toml", "plugins"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`skip`: `prims.expp` is not among the symbols `cpu-simd` lists"),
        "{}",
        stderr(&o)
    );
}
