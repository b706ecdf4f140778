//! Discovering and loading 5 plugins from a plugin folder (target: ≤ 25 ms).
//!
//! Run with `cargo build --release -p thunder-interpreter && cargo bench -p thunder-benches
//! --bench plugin_discovery`.
//!
//! The 5 plugins are real and distinct: the interpreter, and the executor template of
//! `templates/executor-template` built out of tree 4 times under different executor names
//! (`THUNDER_EXECUTOR_NAME`, read at compile time) into `<target>/bench-plugins`. Each copy
//! is its own file, so each is a separate `dlopen`, relocation and initialization. They are
//! dropped into `<target>/bench-plugins/plugins`, and the config names only that folder:
//! `plugin_dirs = [...]`, no `[[executor]]` entries. What is timed is `PluginHost::load`:
//! listing the folder, the trust checks on folder and files, for each library the
//! completeness check, `dlopen`, the entry-symbol lookup and ABI-version check, abi_stable's
//! root-module layout check, the plugin's `info`, `create` and `available`, and sorting.
//!
//! - `plugin_discovery/cold_5_plugins` (printed, not criterion): a true first load. The bench
//!   re-runs itself in a fresh process ([`CHILD_ENV`]) that times one `PluginHost::load` and
//!   prints it; the parent repeats that [`COLD_RUNS`] times and prints min / median / mean /
//!   max. The libraries come from the page cache (warm disk, cold process): the start-up cost a
//!   user's program pays once.
//! - `plugin_discovery/repeat_load_5_plugins` (criterion): the same load again in one process.
//!   abi_stable never unloads a library, so every timed load after the first finds the 5
//!   libraries mapped already: the cost of discovery and bookkeeping without the loader.

use criterion::{black_box, Criterion};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use thunder_benches::{interpreter_library, target_dir};
use thunder_core::host::Config;
use thunder_core::PluginHost;

/// Set in the child process to the plugin folder to load from.
const CHILD_ENV: &str = "THUNDER_BENCH_DISCOVERY_DIR";
const COLD_RUNS: usize = 30;
/// Executor names of the 4 template builds; with the interpreter, 5 plugins.
const TEMPLATE_NAMES: [&str; 4] = ["bench-a", "bench-b", "bench-c", "bench-d"];
const PLUGINS: usize = TEMPLATE_NAMES.len() + 1;
const BUDGET: Duration = Duration::from_millis(25);

fn library_name(stem: &str) -> String {
    format!(
        "{}{stem}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("cannot create the template copy");
    for entry in std::fs::read_dir(from).expect("cannot read the template") {
        let entry = entry.expect("cannot read the template");
        let name = entry.file_name();
        if name == "target" || name == "Cargo.lock" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&src, &dst);
        } else {
            // Rewrite only when changed, so cargo sees an unchanged source as fresh.
            let bytes = std::fs::read(&src).expect("cannot read the template");
            if std::fs::read(&dst).ok().as_deref() != Some(&bytes[..]) {
                std::fs::write(&dst, bytes).expect("cannot copy the template");
            }
        }
    }
}

/// Builds the 4 template plugins and fills `<target>/bench-plugins/plugins` with them and
/// the interpreter. Returns the plugin folder.
fn prepare_plugins() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = target_dir()
        .parent()
        .expect("target folder")
        .join("bench-plugins");
    let src = root.join("template-src");
    copy_dir(&repo.join("templates/executor-template"), &src);
    let manifest = src.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("template Cargo.toml");
    let abi = repo
        .join("thunder-abi")
        .canonicalize()
        .expect("thunder-abi");
    let text = text.replace(
        "\"THUNDER_ABI_PATH\"",
        &format!("\"{}\"", abi.display().to_string().replace('\\', "\\\\")),
    );
    std::fs::write(&manifest, text).expect("cannot write the template Cargo.toml");
    std::fs::copy(repo.join("Cargo.lock"), src.join("Cargo.lock")).expect("Cargo.lock");

    let plugins = root.join("plugins");
    let _ = std::fs::remove_dir_all(&plugins);
    std::fs::create_dir_all(&plugins).expect("cannot create the plugin folder");
    let build = root.join("target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    for name in TEMPLATE_NAMES {
        let status = Command::new(&cargo)
            .args([
                "build",
                "--release",
                "--offline",
                "--quiet",
                "--manifest-path",
            ])
            .arg(&manifest)
            .env("CARGO_TARGET_DIR", &build)
            .env("THUNDER_EXECUTOR_NAME", name)
            .status()
            .expect("cannot run cargo");
        assert!(status.success(), "building the template as `{name}` failed");
        let built = build
            .join("release")
            .join(library_name("thunder_executor_template"));
        let stem = format!("thunder_{}", name.replace('-', "_"));
        std::fs::copy(&built, plugins.join(library_name(&stem))).expect("cannot copy a plugin");
    }
    std::fs::copy(
        interpreter_library(),
        plugins.join(library_name("thunder_interpreter")),
    )
    .expect("cannot copy the interpreter");
    plugins
}

fn config(plugins: &Path) -> Config {
    let text = format!(
        "plugin_dirs = [\"{}\"]\n",
        plugins.display().to_string().replace('\\', "\\\\")
    );
    Config::parse(&text, Path::new("<bench>")).expect("bench config does not parse")
}

fn check(host: &PluginHost) {
    assert!(
        host.issues().is_empty(),
        "plugin load issues: {:?}",
        host.issues()
    );
    let mut names: Vec<&str> = host.entries().iter().map(|e| e.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        ["bench-a", "bench-b", "bench-c", "bench-d", "interpreter"],
        "expected the 5 bench plugins"
    );
    assert!(host.entries().iter().all(|e| e.is_active()));
}

/// Child mode: one first load of the folder in this fresh process, its time in ns on stdout.
fn cold_child(plugins: &Path) {
    let config = config(plugins);
    let start = Instant::now();
    let host = PluginHost::load(&config, &[]);
    let elapsed = start.elapsed();
    check(&host);
    println!("{}", elapsed.as_nanos());
}

fn run_cold_child(exe: &Path, plugins: &Path) -> Duration {
    let out = Command::new(exe)
        .env(CHILD_ENV, plugins)
        .stderr(Stdio::inherit())
        .output()
        .expect("cannot re-run the bench binary");
    assert!(
        out.status.success(),
        "cold-load child failed: {}",
        out.status
    );
    let text = String::from_utf8_lossy(&out.stdout);
    Duration::from_nanos(
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("cold-load child printed `{text}`")),
    )
}

fn fmt(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn cold_load(plugins: &Path, runs: usize) {
    let exe = std::env::current_exe().expect("path of the bench binary");
    let mut times: Vec<Duration> = (0..runs).map(|_| run_cold_child(&exe, plugins)).collect();
    times.sort();
    let mean = times.iter().sum::<Duration>() / runs as u32;
    let median = times[runs / 2];
    println!(
        "plugin_discovery/cold_{PLUGINS}_plugins ({runs} fresh processes)\n                        time:   min {}  median {}  mean {}  max {}  (budget {}: {})",
        fmt(times[0]),
        fmt(median),
        fmt(mean),
        fmt(times[runs - 1]),
        fmt(BUDGET),
        if cfg!(debug_assertions) {
            "not comparable: a debug build"
        } else if median <= BUDGET {
            "met"
        } else {
            "MISSED"
        }
    );
    // criterion's estimates.json shape, so tools that read criterion's output can read it.
    let home = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let target = target_dir();
            target
                .parent()
                .map_or(target.clone(), Path::to_path_buf)
                .join("criterion")
        });
    let dir = home.join(format!("plugin_discovery/cold_{PLUGINS}_plugins/new"));
    if std::fs::create_dir_all(&dir).is_ok() {
        let json = format!(
            "{{\"mean\":{{\"point_estimate\":{}}},\"median\":{{\"point_estimate\":{}}},\"runs\":{runs}}}\n",
            mean.as_nanos(),
            median.as_nanos()
        );
        let _ = std::fs::write(dir.join("estimates.json"), json);
    }
}

fn repeat_load(c: &mut Criterion, plugins: &Path) {
    let config = config(plugins);
    let first = PluginHost::load(&config, &[]);
    check(&first);
    c.benchmark_group("plugin_discovery")
        .bench_function(format!("repeat_load_{PLUGINS}_plugins"), |b| {
            b.iter_with_large_drop(|| PluginHost::load(black_box(&config), &[]))
        });
}

fn main() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        return cold_child(Path::new(&dir));
    }
    let bench_mode = std::env::args().any(|a| a == "--bench");
    if std::env::args().any(|a| a == "--list") {
        println!("plugin_discovery/repeat_load_{PLUGINS}_plugins: benchmark");
        return;
    }
    let plugins = prepare_plugins();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    // `cargo test --benches` (no `--bench`): one cold load and one criterion pass, as a smoke test.
    cold_load(&plugins, if bench_mode { COLD_RUNS } else { 1 });
    repeat_load(&mut c, &plugins);
    c.final_summary();
}
