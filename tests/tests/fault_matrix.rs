//! The fault matrix: a plugin that misbehaves in each way we know of must leave the host
//! working, be reported by name with what it did, and lose its work to the next executor, whose
//! results must equal the interpreter's. Most rows use `tests/plugins/faulty`, whose `fault`
//! option picks the misbehaviour; the rest are libraries that must not load at all.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use thunder_core::host::exec_trace::ExecutionTrace;
use thunder_core::host::Config;
use thunder_core::{compile_trace, jit_with, Array, Error, PluginHost};
use thunder_tests::{close, interpreter_config, interpreter_host, interpreter_library, target_dir};
use thunder_torch::parse_trace;

/// A chain the faulty plugin can claim whole (neg, exp, add), then an op it cannot (mul).
/// {0, 2} is not convex: `c` reads `a` directly and through `b`.
const PROGRAM: &str = "def computation(x, y):
  # x: \"cpu f32[2, 3]\"
  # y: \"cpu f32[2, 3]\"
  a = prims.neg(x)
  b = prims.exp(a)
  c = prims.add(a, b)
  d = prims.mul(c, y)
  return (c, d)
";

fn lib(name: &str) -> PathBuf {
    let p = target_dir().join(format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace`)",
        p.display()
    );
    p
}

fn faulty_library() -> PathBuf {
    lib("thunder_test_faulty")
}

fn inputs() -> Vec<Array> {
    vec![
        Array::from_slice(&[0.5f32, -1.0, 2.0, 0.0, -3.5, 1.25], &[2, 3]).unwrap(),
        Array::from_slice(&[1.0f32, 2.0, -0.5, 4.0, 0.25, -2.0], &[2, 3]).unwrap(),
    ]
}

/// The program's outputs on the interpreter alone.
fn reference() -> Vec<Vec<f32>> {
    let (_, p) = compile_trace(&interpreter_host(), parse_trace(PROGRAM).unwrap()).unwrap();
    values(&p.run(&inputs()).unwrap())
}

fn values(outs: &[Array]) -> Vec<Vec<f32>> {
    outs.iter().map(|a| a.to_vec::<f32>().unwrap()).collect()
}

/// Equal to the interpreter's up to f32 rounding of `exp`; NaN (what the faulty plugin writes
/// before it fails in `run`) never passes.
fn assert_matches_interpreter(outs: &[Array]) {
    let got = values(outs);
    let want = reference();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(
            g.len() == w.len()
                && g.iter()
                    .zip(w)
                    .all(|(&g, &w)| close(g as f64, w as f64, 1e-6, 0.0, false)),
            "results differ from the interpreter's: {got:?} vs {want:?}"
        );
    }
}

/// A config with the interpreter (priority 0) and the faulty plugin with `faulty_entry`'s
/// extra lines (priority, run_fallback, options).
fn config_text(faulty_entry: &str) -> String {
    format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\n\n\
         [[executor]]\nname = \"faulty\"\nlibrary = \"{}\"\n{faulty_entry}\n",
        interpreter_library().display(),
        faulty_library().display()
    )
}

fn load(text: &str) -> PluginHost {
    PluginHost::load(&Config::parse(text, "plugins.toml".as_ref()).unwrap(), &[])
}

/// The interpreter and the faulty plugin above it, with fault `fault`.
fn faulty_host(fault: &str) -> PluginHost {
    let host = load(&config_text(&format!(
        "priority = 10\n[executor.options]\nfault = \"{fault}\"\n"
    )));
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    host
}

fn compile(host: &PluginHost) -> (ExecutionTrace, thunder_core::runtime::CompiledProgram) {
    let (traces, program) = compile_trace(host, parse_trace(PROGRAM).unwrap()).unwrap();
    (traces.execution, program)
}

/// The execution trace names the faulty plugin and says what it did, in a `# Note:` line.
fn assert_noted(et: &ExecutionTrace, what: &[&str]) {
    let printed = et.print();
    let found = printed
        .lines()
        .any(|l| l.starts_with("# Note: plugin `faulty`: ") && what.iter().all(|w| l.contains(w)));
    assert!(found, "no note naming faulty with {what:?} in:\n{printed}");
    assert!(
        et.notes.iter().all(|n| n.executor == "faulty"),
        "{:?}",
        et.notes
    );
}

/// Compiles and runs twice (the host keeps working), checking the results and the report, and
/// returns the execution trace.
fn survives(host: &PluginHost, what: &[&str]) -> ExecutionTrace {
    let (et, program) = compile(host);
    assert_noted(&et, what);
    for _ in 0..2 {
        assert_matches_interpreter(&program.run(&inputs()).unwrap());
    }
    et
}

fn executors(et: &ExecutionTrace) -> Vec<String> {
    et.executors_used()
}

#[test]
fn healthy_faulty_plugin_wins_its_claims() {
    let host = faulty_host("none");
    let (et, program) = compile(&host);
    assert_eq!(executors(&et), ["faulty", "interpreter"]);
    assert!(et.notes.is_empty(), "{:?}", et.notes);
    assert!(!et.print().contains("# Note"));
    assert_matches_interpreter(&program.run(&inputs()).unwrap());
}

/// Priority decides who claims: below the interpreter, the (healthy) faulty plugin gets
/// nothing; an executor list for one run (`--executors` / `THUNDER_EXECUTORS`) reorders too.
#[test]
fn reordering_priority_changes_who_claims() {
    let below = load(&config_text(
        "priority = -10\n[executor.options]\nfault = \"none\"\n",
    ));
    assert_eq!(executors(&compile(&below).0), ["interpreter"]);
    let mut above = faulty_host("none");
    assert_eq!(executors(&compile(&above).0), ["faulty", "interpreter"]);
    above.restrict_to(&["interpreter", "faulty"]).unwrap();
    assert_eq!(executors(&compile(&above).0), ["interpreter"]);
    above.restrict_to(&["faulty", "interpreter"]).unwrap();
    let (et, program) = compile(&above);
    assert_eq!(executors(&et), ["faulty", "interpreter"]);
    assert_matches_interpreter(&program.run(&inputs()).unwrap());
}

#[test]
fn panic_claim() {
    let et = survives(
        &faulty_host("panic_claim"),
        &["claim failed", "Panic", "deliberate panic in claim"],
    );
    assert_eq!(executors(&et), ["interpreter"]);
}

#[test]
fn panic_compile() {
    let et = survives(
        &faulty_host("panic_compile"),
        &[
            "compile failed for a region of 3 ops (prims.neg, prims.exp, prims.add)",
            "panicked in compile",
            "fell back to the next executors",
        ],
    );
    assert_eq!(executors(&et), ["interpreter"]);
}

#[test]
fn error_compile() {
    let et = survives(
        &faulty_host("error_compile"),
        &[
            "compile failed",
            "Internal: faulty: deliberate error in compile",
        ],
    );
    assert_eq!(executors(&et), ["interpreter"]);
}

#[test]
fn create_refuses_bad_options() {
    let host = load(&config_text(
        "priority = 10\n[executor.options]\nfault = \"bogus\"\n",
    ));
    assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
    let issue = &host.issues()[0];
    assert_eq!(issue.executor.as_deref(), Some("faulty"));
    assert!(
        issue.message.contains("create failed") && issue.message.contains("unknown fault `bogus`"),
        "{}",
        issue.message
    );
    let faulty = host.entries().iter().find(|e| e.name == "faulty").unwrap();
    assert!(!faulty.is_active());
    let (et, program) = compile(&host);
    assert_eq!(executors(&et), ["interpreter"]);
    assert_matches_interpreter(&program.run(&inputs()).unwrap());
}

/// Without `run_fallback`, a failure in `run` is the caller's error, naming plugin and region;
/// nothing the plugin wrote comes back, and the host keeps working.
fn run_failure_is_an_error(fault: &str, what: &str) {
    let host = faulty_host(fault);
    let (et, program) = compile(&host);
    assert_eq!(executors(&et), ["faulty", "interpreter"]);
    for _ in 0..2 {
        match program.run(&inputs()) {
            Err(Error::Plugin { plugin, message }) => {
                assert_eq!(plugin, "faulty");
                assert!(
                    message.contains("region0 failed in run") && message.contains(what),
                    "{message}"
                );
                assert!(message.contains("run_fallback = true"), "{message}");
            }
            other => panic!("expected a plugin error, got {other:?}"),
        }
    }
    // Another program on the same host still runs.
    let (_, p) = compile_trace(
        &host,
        parse_trace(
            "def computation(x):\n  # x: \"cpu f32[2]\"\n  y = prims.sin(x)\n  return (y,)\n",
        )
        .unwrap(),
    )
    .unwrap();
    let x = Array::from_slice(&[0.0f32, 0.0], &[2]).unwrap();
    assert_eq!(p.run(&[x]).unwrap()[0].to_vec::<f32>().unwrap(), [0.0, 0.0]);
}

/// With `run_fallback = true` the program is compiled again without the plugin and re-run;
/// the result is the interpreter's (not the NaNs the plugin wrote before failing).
fn run_failure_falls_back(fault: &str, what: &str) {
    let host = load(&config_text(&format!(
        "priority = 10\nrun_fallback = true\n[executor.options]\nfault = \"{fault}\"\n"
    )));
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    assert!(host
        .entries()
        .iter()
        .any(|e| e.name == "faulty" && e.run_fallback));
    let (et, program) = compile(&host);
    assert_eq!(executors(&et), ["faulty", "interpreter"]);
    assert!(program.fallback_execution().is_none());
    for _ in 0..2 {
        assert_matches_interpreter(&program.run(&inputs()).unwrap());
    }
    assert_eq!(program.fallbacks(), 1);
    let fallback = program.fallback_execution().unwrap();
    assert_eq!(executors(fallback), ["interpreter"]);
    assert_noted(
        fallback,
        &[
            "region0 failed in run",
            what,
            "compiled again without it and re-run",
        ],
    );
}

#[test]
fn panic_run() {
    run_failure_is_an_error("panic_run", "panicked in run");
}

#[test]
fn panic_run_with_run_fallback() {
    run_failure_falls_back("panic_run", "panicked in run");
}

#[test]
fn error_run() {
    run_failure_is_an_error("error_run", "deliberate error in run");
}

#[test]
fn error_run_with_run_fallback() {
    run_failure_falls_back("error_run", "deliberate error in run");
}

/// The fallback is compiled once: later calls go straight to it and never reach the plugin
/// again, and the jitted function's last traces show what runs now.
#[test]
fn run_fallback_is_built_once_and_shown_in_last_traces() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let host = load(&config_text(&format!(
        "priority = 10\nrun_fallback = true\n[executor.options]\nfault = \"error_run\"\nrun_log = \"{}\"\n",
        log.display()
    )));
    let f = jit_with(Arc::new(host), |xs| {
        let a = thunder_torch::neg(&xs[0])?;
        let b = thunder_torch::exp(&a)?;
        let c = thunder_torch::add(&a, &b)?;
        let d = thunder_torch::mul(&c, &xs[1])?;
        Ok(vec![c, d])
    });
    for _ in 0..3 {
        assert_matches_interpreter(&f.call(&inputs()).unwrap());
    }
    let runs = std::fs::read_to_string(&log).unwrap();
    assert_eq!(runs.lines().count(), 1, "faulty ran again:\n{runs}");
    assert_eq!((f.cache_misses(), f.cache_hits()), (1, 2));
    let traces = f.last_traces().unwrap();
    assert_eq!(executors(&traces.execution), ["interpreter"]);
    assert_noted(&traces.execution, &["failed in run", "run_fallback"]);
}

/// When the faulty plugin is the only executor, falling back leaves nobody to run its ops: the
/// error says both what it did and that no executor is left.
#[test]
fn failures_with_no_executor_left_say_why() {
    let alone = |entry: &str| {
        let text = format!(
            "[[executor]]\nname = \"faulty\"\nlibrary = \"{}\"\n{entry}",
            faulty_library().display()
        );
        load(&text)
    };
    let program = parse_trace(
        "def computation(x):\n  # x: \"cpu f32[2]\"\n  y = prims.neg(x)\n  return (y,)\n",
    )
    .unwrap();
    let x = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();

    let host = alone("[executor.options]\nfault = \"error_compile\"\n");
    match compile_trace(&host, program.clone()).map(|_| ()) {
        Err(Error::Plugin { plugin, message }) => {
            assert_eq!(plugin, "faulty");
            assert!(
                message.contains("compile failed for a region of 1 op (prims.neg)")
                    && message.contains("and without it: no executor can run prims.neg"),
                "{message}"
            );
        }
        other => panic!("expected a plugin error, got {other:?}"),
    }

    let host = alone("run_fallback = true\n[executor.options]\nfault = \"error_run\"\n");
    let (_, p) = compile_trace(&host, program).unwrap();
    for _ in 0..2 {
        match p.run(std::slice::from_ref(&x)) {
            Err(Error::Plugin { plugin, message }) => {
                assert_eq!(plugin, "faulty");
                assert!(
                    message.contains("region0 failed in run")
                        && message.contains("re-running without it failed: no executor can run"),
                    "{message}"
                );
            }
            other => panic!("expected a plugin error, got {other:?}"),
        }
    }
    assert_eq!(p.fallbacks(), 0);
}

#[test]
fn claim_out_of_range() {
    let et = survives(
        &faulty_host("claim_out_of_range"),
        &[
            "claim of ops [7] rejected",
            "op index 7 is out of range (the trace has 4 ops)",
        ],
    );
    assert_eq!(executors(&et), ["interpreter"]);
}

#[test]
fn claim_overlap() {
    // Its first region (neg) stands; the second (neg, exp, add) overlaps it and is rejected,
    // so exp and add go to the interpreter.
    let et = survives(
        &faulty_host("claim_overlap"),
        &[
            "claim of ops [0, 1, 2] rejected",
            "op 0 (prims.neg) is already claimed by another region of `faulty`",
            "may not overlap",
        ],
    );
    assert_eq!(executors(&et), ["faulty", "interpreter"]);
    assert_eq!(et.steps[0].ops, [0]);
}

#[test]
fn claim_claimed() {
    // Below the interpreter, which claims everything first.
    let host = load(&config_text(
        "priority = -10\n[executor.options]\nfault = \"claim_claimed\"\n",
    ));
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    let et = survives(
        &host,
        &[
            "claim of ops [0, 1, 2] rejected",
            "op 0 (prims.neg) is already claimed by `interpreter`",
        ],
    );
    assert_eq!(executors(&et), ["interpreter"]);
}

#[test]
fn claim_nonconvex() {
    let et = survives(
        &faulty_host("claim_nonconvex"),
        &[
            "claim of ops [0, 2] rejected",
            "not convex: op 2 (prims.add) depends on the region through ops outside it",
        ],
    );
    assert_eq!(executors(&et), ["interpreter"]);
}

/// The notes reach the user through `thunder trace --stage execution`.
#[test]
fn rejected_claims_are_shown_by_thunder_trace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prog.py"), PROGRAM).unwrap();
    std::fs::write(
        dir.path().join("plugins.toml"),
        config_text("priority = 10\n[executor.options]\nfault = \"claim_nonconvex\"\n"),
    )
    .unwrap();
    let out = std::process::Command::new(thunder_tests::thunder_binary())
        .current_dir(dir.path())
        .env_remove("THUNDER_CONFIG")
        .env_remove("THUNDER_EXECUTORS")
        .args([
            "--config",
            "plugins.toml",
            "trace",
            "prog.py",
            "--stage",
            "execution",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("# Note: plugin `faulty`: claim of ops [0, 2] rejected: not convex"),
        "{stdout}"
    );
}

/// A plugin folder holding `files` (copied), loaded next to the interpreter.
fn folder_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

fn load_with_folder(dir: &Path) -> PluginHost {
    PluginHost::load(&interpreter_config(), &[dir.to_path_buf()])
}

/// Only the interpreter loaded, and it still runs the program.
fn host_still_works(host: &PluginHost) {
    assert_eq!(
        host.entries()
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        ["interpreter"]
    );
    let (et, program) = compile(host);
    assert!(et.notes.is_empty());
    assert_matches_interpreter(&program.run(&inputs()).unwrap());
}

fn issue_for<'a>(host: &'a PluginHost, file: &str) -> &'a str {
    let issue = host
        .issues()
        .iter()
        .find(|i| i.path.as_ref().is_some_and(|p| p.ends_with(file)))
        .unwrap_or_else(|| panic!("no load issue for {file}: {:?}", host.issues()));
    &issue.message
}

#[test]
fn not_a_plugin() {
    // Loadable, but without the entry symbol: skipped without an issue; a file that is not a
    // library at all is reported.
    let other = std::fs::read(lib("thunder_test_not_a_plugin")).unwrap();
    let dir = folder_with(&[
        ("libother.so", &other),
        ("libtext.so", b"this is not an ELF file"),
    ]);
    let host = load_with_folder(dir.path());
    assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
    let msg = issue_for(&host, "libtext.so");
    assert!(
        msg.contains("cannot load library: not a shared library"),
        "{msg}"
    );
    host_still_works(&host);
}

#[test]
fn truncated_file() {
    let bytes = std::fs::read(faulty_library()).unwrap();
    let dir = folder_with(&[
        ("libhead.so", &bytes[..4096]),
        ("libhalf.so", &bytes[..bytes.len() / 2]),
    ]);
    let host = load_with_folder(dir.path());
    assert_eq!(host.issues().len(), 2, "{:?}", host.issues());
    for file in ["libhead.so", "libhalf.so"] {
        let msg = issue_for(&host, file);
        assert!(msg.contains("cannot load library"), "{msg}");
    }
    let half = issue_for(&host, "libhalf.so");
    assert!(half.contains("truncated or corrupt"), "{half}");
    host_still_works(&host);
}

#[test]
fn abi_major_mismatch() {
    let wrong = std::fs::read(lib("thunder_test_wrong_abi")).unwrap();
    let dir = folder_with(&[("libwrong.so", &wrong)]);
    let host = load_with_folder(dir.path());
    assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
    let msg = issue_for(&host, "libwrong.so");
    let ours = thunder_core::host::HOST_ABI_VERSION.to_string();
    assert!(msg.contains("2.0.0") && msg.contains(&ours), "{msg}");
    host_still_works(&host);
}

#[test]
fn type_layout_mismatch() {
    let bad = std::fs::read(lib("thunder_test_bad_layout")).unwrap();
    let dir = folder_with(&[("libbadlayout.so", &bad)]);
    let host = load_with_folder(dir.path());
    assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
    let msg = issue_for(&host, "libbadlayout.so");
    // abi_stable's verdict, on one line: the root module type comes from another crate.
    assert!(msg.starts_with("ABI layout check failed: "), "{msg}");
    assert!(
        msg.contains("mismatched package")
            && msg.contains("thunder-abi")
            && msg.contains("thunder-test-bad-layout"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
    host_still_works(&host);
}

#[test]
fn sha256_mismatch() {
    let wrong = "0".repeat(64);
    // With an explicit library, the pin is checked before any of its code runs.
    let host = load(&config_text(&format!(
        "priority = 10\nsha256 = \"{wrong}\"\n"
    )));
    assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
    let issue = &host.issues()[0];
    assert_eq!(issue.executor.as_deref(), Some("faulty"));
    assert!(
        issue.message.contains("executor[1].sha256")
            && issue.message.contains("does not match the pinned")
            && issue.message.contains("not loaded"),
        "{}",
        issue.message
    );
    host_still_works(&host);

    // Found in a folder, it is checked once its name is known, and disabled.
    let dir = folder_with(&[("libfaulty.so", &std::fs::read(faulty_library()).unwrap())]);
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n\n\
         [[executor]]\nname = \"faulty\"\npriority = 10\nsha256 = \"{wrong}\"\n",
        interpreter_library().display()
    );
    let host = PluginHost::load(
        &Config::parse(&text, "plugins.toml".as_ref()).unwrap(),
        &[dir.path().to_path_buf()],
    );
    let faulty = host.entries().iter().find(|e| e.name == "faulty").unwrap();
    assert!(!faulty.is_active());
    assert!(issue_for(&host, "libfaulty.so").contains("does not match the pinned"));
    let (et, program) = compile(&host);
    assert_eq!(executors(&et), ["interpreter"]);
    assert_matches_interpreter(&program.run(&inputs()).unwrap());
}

#[test]
fn malformed_plugins_toml() {
    let cases = [
        ("[[executor]\nname = \"a\"\n", "<document>", "line 1"),
        (
            "[[executor]]\nname = \"a\"\npriority = \n",
            "priority",
            "line 3",
        ),
        (
            "[[executor]]\nname = \"a\"\npriorty = 3\n",
            "priorty",
            "line 3",
        ),
        (
            "[[executor]]\nname = \"a\"\nrun_fallback = \"yes\"\n",
            "run_fallback",
            "line 3",
        ),
        (
            "allow_writable_plugins = 1\n",
            "allow_writable_plugins",
            "line 1",
        ),
        (
            "[[executor]]\nname = \"a\"\nrequires = \"lots\"\n",
            "executor[0].requires",
            "semver",
        ),
        (
            "[[executor]]\nname = \"a\"\nsha256 = \"abc\"\n",
            "executor[0].sha256",
            "64 hex digits",
        ),
        ("executor = 3\n", "executor", "line 1"),
        ("\u{0}\u{1}binary", "<document>", ""),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugins.toml");
    for (text, field, detail) in cases {
        std::fs::write(&path, text).unwrap();
        match PluginHost::from_config_file(&path, &[]) {
            Err(Error::Config {
                path: p,
                field: f,
                message,
            }) => {
                assert_eq!(p, path);
                assert_eq!(f, field, "{text:?}: {message}");
                assert!(message.contains(detail), "{text:?}: {message}");
            }
            Err(other) => panic!("{text:?}: expected a config error, got {other}"),
            Ok(_) => panic!("{text:?}: expected a config error"),
        }
    }
    // A good config afterwards loads and runs.
    std::fs::write(&path, config_text("priority = 10\n")).unwrap();
    let host = PluginHost::from_config_file(&path, &[]).unwrap();
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    let (_, program) = compile(&host);
    assert_matches_interpreter(&program.run(&inputs()).unwrap());
}

#[cfg(unix)]
mod permissions {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A folder holding a copy of the faulty plugin (0755 in a 0755 folder).
    fn plugin_folder() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("plugins");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("libthunder_test_faulty.so");
        std::fs::copy(faulty_library(), &file).unwrap();
        chmod(&dir, 0o755);
        chmod(&file, 0o755);
        (root, dir, file)
    }

    fn load_from(dir: &Path, allow: bool) -> PluginHost {
        let text = format!(
            "allow_writable_plugins = {allow}\n[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n",
            interpreter_library().display()
        );
        PluginHost::load(
            &Config::parse(&text, "plugins.toml".as_ref()).unwrap(),
            &[dir.to_path_buf()],
        )
    }

    #[test]
    fn plugin_with_safe_permissions_loads() {
        let (_root, dir, _) = plugin_folder();
        let host = load_from(&dir, false);
        assert!(host.issues().is_empty(), "{:?}", host.issues());
        assert!(host
            .entries()
            .iter()
            .any(|e| e.name == "faulty" && e.is_active()));
    }

    #[test]
    fn writable_plugin_file_is_refused() {
        let (_root, dir, file) = plugin_folder();
        chmod(&file, 0o775);
        let host = load_from(&dir, false);
        assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
        let msg = issue_for(&host, "libthunder_test_faulty.so");
        assert!(
            msg.contains(&format!("plugin file {}", file.display()))
                && msg.contains("writable by its group (mode 0775)")
                && msg.contains(&format!("chmod go-w {}", file.display()))
                && msg.contains("allow_writable_plugins = true"),
            "{msg}"
        );
        host_still_works(&host);
    }

    #[test]
    fn writable_plugin_folder_is_refused() {
        let (_root, dir, _) = plugin_folder();
        chmod(&dir, 0o777);
        let host = load_from(&dir, false);
        assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
        let issue = &host.issues()[0];
        assert_eq!(issue.path.as_deref(), Some(dir.as_path()));
        assert!(
            issue.message.contains("plugin folder")
                && issue.message.contains("its group and others (mode 0777)")
                && issue.message.contains("chmod go-w"),
            "{}",
            issue.message
        );
        host_still_works(&host);
        chmod(&dir, 0o755);
    }

    #[test]
    fn writable_library_listed_by_path_is_refused() {
        let (_root, _dir, file) = plugin_folder();
        chmod(&file, 0o757);
        let text = format!(
            "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n\n[[executor]]\nname = \"faulty\"\nlibrary = \"{}\"\npriority = 10\n",
            interpreter_library().display(),
            file.display()
        );
        let host = load(&text);
        assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
        let issue = &host.issues()[0];
        assert_eq!(issue.executor.as_deref(), Some("faulty"));
        assert!(
            issue.message.contains("writable by others (mode 0757)"),
            "{}",
            issue.message
        );
        host_still_works(&host);
    }

    #[test]
    fn allow_writable_plugins_overrides_the_refusal() {
        let (_root, dir, file) = plugin_folder();
        chmod(&file, 0o777);
        chmod(&dir, 0o777);
        let host = load_from(&dir, true);
        assert!(host.issues().is_empty(), "{:?}", host.issues());
        assert!(host
            .entries()
            .iter()
            .any(|e| e.name == "faulty" && e.is_active()));
        chmod(&dir, 0o755);
    }
}
