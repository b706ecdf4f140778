//! The third-party path, end to end: `templates/executor-template` is copied into a temp folder
//! as a separate Cargo project, built out of tree against this repository's `thunder-abi` with
//! `cargo build --release`, and its `.so` dropped into a temp plugin folder. The unchanged host
//! loads it from there, it claims the ops it implements, and results are right.
//!
//! The build uses `<target>/sdk-template` as its target folder, so compiled dependencies are
//! reused between runs (the first run compiles abi_stable in release mode: about a minute).
//! It runs offline: the template's lockfile is this workspace's `Cargo.lock`, whose crates
//! the workspace build has already fetched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use thunder_core::host::partition::partition;
use thunder_core::host::Config;
use thunder_core::{Array, PluginHost};
use thunder_tests::{interpreter_host, interpreter_library, repo_root, target_dir, thunder_binary};

/// The executor name the template gives itself (`NAME` in its src/lib.rs).
const TEMPLATE: &str = "template";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        // A build of the template in place must not be copied along.
        if name == "target" || name == "Cargo.lock" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A TOML basic string holding `path`.
fn toml_path(path: &Path) -> String {
    format!(
        "\"{}\"",
        path.display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
    )
}

/// Builds the template as a third party would: a copy in its own folder, the `thunder-abi`
/// placeholder pointed at this repository, `cargo build --release`. Returns the library.
fn build_template(project: &Path) -> PathBuf {
    let template = repo_root().join("templates/executor-template");
    copy_dir(&template, project);
    let manifest = project.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let placeholder = "\"THUNDER_ABI_PATH\"";
    assert!(
        text.contains(placeholder),
        "the template's Cargo.toml has no {placeholder} placeholder"
    );
    let abi = repo_root().join("thunder-abi").canonicalize().unwrap();
    std::fs::write(&manifest, text.replace(placeholder, &toml_path(&abi))).unwrap();
    // The versions this workspace builds with, already in the local registry cache.
    std::fs::copy(repo_root().join("Cargo.lock"), project.join("Cargo.lock")).unwrap();

    // <target>/debug -> <target>/sdk-template: wherever this workspace's target folder is.
    let target = target_dir()
        .parent()
        .expect("target folder")
        .join("sdk-template");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(project)
        .args(["build", "--release", "--offline", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("THUNDER_EXECUTOR_NAME")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("cannot run cargo");
    assert!(
        out.status.success(),
        "building the template failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lib = target.join("release").join(format!(
        "{}thunder_executor_template{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

/// Two f32 inputs and one f64 input: the template claims the f32 `neg` and `mul`s, the
/// interpreter the `exp` and the f64 `neg` (a dtype the template refuses).
const PROGRAM: &str = "def computation(x, y, w):
  # x: \"cpu f32[2, 3]\"
  # y: \"cpu f32[2, 3]\"
  # w: \"cpu f64[3]\"
  a = ltorch.neg(x)
  b = ltorch.mul(a, y)
  c = ltorch.exp(b)
  d = ltorch.mul(c, 2.0)
  e = ltorch.neg(w)
  return (d, b, e)
";

const X: [f32; 6] = [0.5, -1.0, 1.5, -2.0, 0.25, 0.0];
const Y: [f32; 6] = [1.0, 2.0, -1.0, 0.5, 4.0, 3.0];
const W: [f64; 3] = [1.5, -0.0, -7.25];

fn inputs() -> Vec<Array> {
    vec![
        Array::from_slice(&X, &[2, 3]).unwrap(),
        Array::from_slice(&Y, &[2, 3]).unwrap(),
        Array::from_slice(&W, &[3]).unwrap(),
    ]
}

#[test]
fn out_of_tree_template_plugin_builds_loads_from_a_plugin_folder_claims_ops_and_computes_right() {
    let work = tempfile::tempdir().unwrap();
    let library = build_template(&work.path().join("my-executor"));

    // Drop the .so into a plugin folder; list it by name only, above the interpreter.
    let plugins = work.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let dropped = plugins.join(library.file_name().unwrap());
    std::fs::copy(&library, &dropped).unwrap();
    let config_text = format!(
        "plugin_dirs = [{}]\n\n[[executor]]\nname = \"{TEMPLATE}\"\npriority = 10\nrequires = \"^0.1\"\n\n[[executor]]\nname = \"interpreter\"\nlibrary = {}\npriority = 0\n",
        toml_path(&plugins),
        toml_path(&interpreter_library())
    );
    let config_path = work.path().join("plugins.toml");
    std::fs::write(&config_path, &config_text).unwrap();
    let host = PluginHost::load(&Config::load(&config_path).unwrap(), &[]);
    assert!(host.issues().is_empty(), "load issues: {:?}", host.issues());
    let names: Vec<&str> = host.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, [TEMPLATE, "interpreter"], "asked in priority order");
    let t = &host.entries()[0];
    assert!(
        t.is_active() && t.listed,
        "the template is loaded and active"
    );
    assert_eq!(t.path, dropped, "found in the plugin folder");
    assert_eq!(t.version, "0.1.0");
    assert_eq!(t.abi_version, thunder_core::host::HOST_ABI_VERSION);
    assert_eq!(t.symbols, ["prims.neg", "prims.mul"]);

    // It claims its ops: the f32 neg and muls; the interpreter takes the rest.
    let trace = thunder_torch::parse_trace(PROGRAM).unwrap();
    let part = partition(&host, &trace, &Default::default()).unwrap();
    let mut claims: BTreeSet<(String, Vec<String>)> = BTreeSet::new();
    for r in &part.regions {
        let ops = r
            .ops
            .iter()
            .map(|&i| part.bsyms[i].sym.id.to_string())
            .collect();
        claims.insert((host.entries()[r.executor].name.clone(), ops));
    }
    let region = |exec: &str, ops: &[&str]| {
        (
            exec.to_string(),
            ops.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        claims,
        BTreeSet::from([
            region(TEMPLATE, &["prims.neg", "prims.mul"]),
            region(TEMPLATE, &["prims.mul"]),
            region("interpreter", &["prims.exp"]),
            region("interpreter", &["prims.neg"]),
        ]),
        "regions: {claims:?}"
    );

    // It runs them: the execution trace names it, and the results are the known values.
    let (traces, program) = thunder_core::compile_trace(&host, trace.clone()).unwrap();
    let printed = traces.execution.print();
    assert!(
        printed.contains("b = template.region0(x, y)")
            && printed.contains("d = template.region2(c)")
            && printed.contains("c = interpreter.region1(b)"),
        "{printed}"
    );
    let outputs = program.run(&inputs()).unwrap();
    let b: Vec<f32> = X.iter().zip(&Y).map(|(x, y)| -x * y).collect();
    assert_eq!(b, [-0.5, 2.0, 1.5, 1.0, -1.0, -0.0]);
    assert_eq!(outputs[1].to_vec::<f32>().unwrap(), b);
    let d = outputs[0].to_vec::<f32>().unwrap();
    for (got, b) in d.iter().zip(&b) {
        let want = 2.0 * (*b as f64).exp();
        assert!(
            ((*got as f64) - want).abs() <= 1e-6 * want,
            "d: {got} vs {want}"
        );
    }
    assert_eq!(outputs[2].to_vec::<f64>().unwrap(), [-1.5, 0.0, 7.25]);
    // And bit for bit what the interpreter alone computes.
    let (_, reference) = thunder_core::compile_trace(&interpreter_host(), trace).unwrap();
    let want = reference.run(&inputs()).unwrap();
    for (got, want) in outputs.iter().zip(&want) {
        assert_eq!(
            got.bytes().expect("host array"),
            want.bytes().expect("host array")
        );
    }

    // The `thunder` binary, unchanged, sees it too: examine agrees with the interpreter, and
    // the partition graph has a cluster per region in each executor's color.
    std::fs::write(work.path().join("prog.py"), PROGRAM).unwrap();
    let thunder = |args: &[&str]| {
        let o = Command::new(thunder_binary())
            .current_dir(work.path())
            .env_remove("THUNDER_CONFIG")
            .env_remove("THUNDER_EXECUTORS")
            .arg("--config")
            .arg(&config_path)
            .args(args)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "thunder {args:?}:\n{out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    };
    let out = thunder(&["examine", "prog.py", "--random-inputs"]);
    assert!(
        out.contains("prims.mul                        x2    -> template")
            && out.contains("consistency: template, interpreter vs interpreter alone")
            && out.contains("all 3 outputs match the interpreter within tolerance"),
        "{out}"
    );
    thunder(&["partition", "prog.py", "--dot", "graph.dot"]);
    let dot = std::fs::read_to_string(work.path().join("graph.dot")).unwrap();
    assert_eq!(dot.matches("subgraph cluster_region").count(), 4, "{dot}");
    let fill = |region: &str| {
        let line = dot
            .lines()
            .find(|l| l.contains(&format!("label=\"{region}\"")))
            .unwrap_or_else(|| panic!("no cluster `{region}` in:\n{dot}"));
        line.split("fillcolor=\"").nth(1).unwrap()[..7].to_string()
    };
    assert_eq!(fill("template.region0"), fill("template.region2"));
    assert_eq!(fill("interpreter.region1"), fill("interpreter.region3"));
    assert_ne!(fill("template.region0"), fill("interpreter.region1"));
}
