//! Loading one executor plugin.
//!
//! Run with `cargo build --release -p thunder-interpreter -p thunder-cli && cargo bench -p
//! thunder-benches --bench plugin_load`.
//!
//! - `plugin_load/repeat_load_interpreter` (criterion): `PluginHost::load(&config, &[])` with a
//!   config naming the interpreter library. abi_stable never unloads a library (it leaks it on
//!   purpose), so after the first iteration the library stays mapped and every timed load is a
//!   *repeat* load: `dlopen` of an already-mapped library (a reference-count bump, no
//!   relocation or initializers), the entry-symbol lookup and ABI-version check, abi_stable's
//!   header lookup and root-module layout check, the plugin's `info` and `create`, plus the
//!   config bookkeeping. Dropping the host (the executor's destructor) is not timed.
//! - `plugin_load/cold_first_load` (printed, not criterion): a true first load. The bench
//!   binary re-runs itself in a fresh process (`THUNDER_BENCH_COLD_LOAD=1`) that times a single
//!   `PluginHost::load` with `Instant` and prints it; the parent repeats that
//!   [`COLD_RUNS`] times and prints min / median / mean / max. Each child maps the library from
//!   the page cache (warm disk cache, cold process): that is the cost a user's program pays
//!   once at start-up, without process start-up itself.
//! - `plugin_load_process/thunder_plugins_{interpreter,no_plugins}` (criterion, only if
//!   `target/release/thunder` exists): wall time of `thunder --config FILE plugins` with the
//!   interpreter config and with an empty config; the difference is roughly the cold load plus
//!   printing one plugin's line.

use criterion::{black_box, Criterion};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use thunder_benches::{interpreter_config, interpreter_config_text, thunder_binary};
use thunder_core::PluginHost;

const COLD_ENV: &str = "THUNDER_BENCH_COLD_LOAD";
const COLD_RUNS: usize = 30;

/// Child mode: one first load in this fresh process, its time in ns on stdout.
fn cold_child() {
    let config = interpreter_config();
    let start = Instant::now();
    let host = PluginHost::load(&config, &[]);
    let elapsed = start.elapsed();
    assert!(
        host.issues().is_empty(),
        "plugin load issues: {:?}",
        host.issues()
    );
    assert_eq!(
        host.entries().len(),
        1,
        "expected exactly the interpreter plugin"
    );
    println!("{}", elapsed.as_nanos());
}

fn run_cold_child(exe: &Path) -> Duration {
    let out = Command::new(exe)
        .env(COLD_ENV, "1")
        .stderr(Stdio::inherit())
        .output()
        .expect("cannot re-run the bench binary");
    assert!(
        out.status.success(),
        "cold-load child failed: {}",
        out.status
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let ns: u64 = text
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("cold-load child printed `{text}`"));
    Duration::from_nanos(ns)
}

fn fmt(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} µs", ns / 1e3)
    }
}

/// Times `COLD_RUNS` first loads, each in a fresh process (one run in `cargo test` mode).
fn cold_first_load(runs: usize) {
    let exe = std::env::current_exe().expect("path of the bench binary");
    let mut times: Vec<Duration> = (0..runs).map(|_| run_cold_child(&exe)).collect();
    times.sort();
    let mean = times.iter().sum::<Duration>() / runs as u32;
    let median = times[runs / 2];
    println!(
        "plugin_load/cold_first_load ({runs} fresh processes)\n                        time:   min {}  median {}  mean {}  max {}",
        fmt(times[0]),
        fmt(median),
        fmt(mean),
        fmt(times[runs - 1])
    );
    // Same shape as criterion's estimates.json so peer/torch_peer.py and other tools can read it.
    // criterion writes under `$CRITERION_HOME`, else `target/criterion` (one above `release`).
    let home = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let target = thunder_benches::target_dir();
            target
                .parent()
                .map_or(target.clone(), Path::to_path_buf)
                .join("criterion")
        });
    let dir = home.join("plugin_load/cold_first_load/new");
    if std::fs::create_dir_all(&dir).is_ok() {
        let json = format!(
            "{{\"mean\":{{\"point_estimate\":{}}},\"median\":{{\"point_estimate\":{}}},\"runs\":{runs}}}\n",
            mean.as_nanos(),
            median.as_nanos()
        );
        let _ = std::fs::write(dir.join("estimates.json"), json);
    }
}

fn repeat_load(c: &mut Criterion) {
    let config = interpreter_config();
    // The first load maps the library; every timed one after it is a repeat load.
    let first = PluginHost::load(&config, &[]);
    assert!(
        first.issues().is_empty(),
        "plugin load issues: {:?}",
        first.issues()
    );
    c.benchmark_group("plugin_load")
        .bench_function("repeat_load_interpreter", |b| {
            b.iter_with_large_drop(|| PluginHost::load(black_box(&config), &[]))
        });
}

fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("cannot write a bench config");
    path
}

fn thunder_plugins(c: &mut Criterion) {
    let Some(bin) = thunder_binary() else {
        eprintln!("plugin_load_process: target/release/thunder not built (`cargo build --release -p thunder-cli`); skipped");
        return;
    };
    let dir = std::env::temp_dir().join(format!("thunder-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("cannot create a temp folder");
    let with = write_config(&dir, "interpreter.toml", &interpreter_config_text());
    let without = write_config(&dir, "empty.toml", "");
    let mut group = c.benchmark_group("plugin_load_process");
    group.sample_size(20);
    for (name, config) in [
        ("thunder_plugins_interpreter", &with),
        ("thunder_plugins_no_plugins", &without),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let status = Command::new(&bin)
                    .arg("--config")
                    .arg(config)
                    .arg("plugins")
                    .env_remove("THUNDER_EXECUTORS")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .expect("cannot run thunder");
                assert!(status.success(), "thunder plugins failed: {status}");
            })
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Criterion options that take a value (the value is not a name filter).
const VALUE_OPTIONS: &[&str] = &[
    "-c",
    "--color",
    "-s",
    "--save-baseline",
    "-b",
    "--baseline",
    "--load-baseline",
    "--profile-time",
    "--sample-size",
    "--warm-up-time",
    "--measurement-time",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--output-format",
    "--plotting-backend",
    "--format",
];

/// Whether the name filters given on the command line (as criterion takes them) select `name`.
fn selected(name: &str) -> bool {
    let mut filters = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if VALUE_OPTIONS.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filters.push(arg);
        }
    }
    filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
}

fn main() {
    if std::env::var_os(COLD_ENV).is_some() {
        return cold_child();
    }
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) criterion runs each
    // bench once as a smoke test, and the cold load runs once too.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let listing = std::env::args().any(|a| a == "--list");
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    repeat_load(&mut c);
    if !listing && selected("plugin_load/cold_first_load") {
        cold_first_load(if bench_mode { COLD_RUNS } else { 1 });
    }
    thunder_plugins(&mut c);
    c.final_summary();
}
