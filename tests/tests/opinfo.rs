//! The OpInfo conformance harness: every entry of the OpInfo tables (`tests/opinfo`), every
//! dtype it supports, every sample, on every executor the workspace's `plugins.toml` lists.
//!
//! - Each executor is asked alone, with the interpreter behind it for whatever it leaves
//!   (`restrict_to([executor, "interpreter"])`, as `THUNDER_EXECUTORS=executor,interpreter`
//!   would), and its outputs must match PyTorch (fixtures from
//!   `scripts/gen_opinfo_fixtures.py`) and the interpreter alone, within the entry's
//!   dtype-dependent tolerance. Counting what each executor claimed keeps the harness from
//!   passing by checking nothing.
//! - Every error case must come back from tracing as `Error::Op` naming the op, with the
//!   expected substring in its message, without a panic; a run-time case (an index out of
//!   range, which only the values show) must trace, then fail to run on every executor with
//!   an error naming the prim at fault.
//! - Every prim and ltorch op must have an entry, and the dtypes an entry lists must be exactly
//!   those the op's meta accepts on its first sample.
//!
//! Run with `--nocapture` to see the summary line.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use thunder_core::host::Config;
use thunder_core::{Array, DType, PluginHost};
use thunder_opinfo::{build, sample_key, table, ErrorCase, ErrorKind, OpInfo, SArg, View};
use thunder_tests::{close, load_fixture_array, repo_root, target_dir};

/// Samples where every executor differs from PyTorch, with the reason. Keys are
/// `op/dtype/index`; the harness fails once a listed key matches again, so the list cannot go
/// stale.
const KNOWN_DEVIATIONS: &[(&str, &str)] = &[
    (
        "ltorch.gelu/bf16/6",
        "gelu(+inf) is +inf (0.5 * inf * (1 + erf(inf))); PyTorch's CPU kernel returns NaN",
    ),
    ("ltorch.gelu/f32/6", "as ltorch.gelu/bf16/6"),
    (
        "prims.trigamma/f16/6",
        "BUG, found by these samples: trigamma(-inf) is +inf on the interpreter and cpu-simd; \
         PyTorch (and the limit, which does not exist) give NaN",
    ),
    ("prims.trigamma/bf16/6", "as prims.trigamma/f16/6"),
    ("prims.trigamma/f32/6", "as prims.trigamma/f16/6"),
    ("prims.trigamma/f64/6", "as prims.trigamma/f16/6"),
    (
        "ltorch.polygamma/f16/13",
        "polygamma(1, -inf): prims.trigamma's bug",
    ),
    ("ltorch.polygamma/bf16/13", "as ltorch.polygamma/f16/13"),
    ("ltorch.polygamma/f32/13", "as ltorch.polygamma/f16/13"),
    ("ltorch.polygamma/f64/13", "as ltorch.polygamma/f16/13"),
];

/// The executors `plugins.toml` lists, each with the library of this build.
fn workspace_config() -> Config {
    let path = repo_root().join("plugins.toml");
    let mut config = Config::load(&path).expect("plugins.toml");
    config.plugin_dirs.clear();
    for e in &mut config.executors {
        let lib = target_dir().join(format!(
            "{}thunder_{}{}",
            std::env::consts::DLL_PREFIX,
            e.name.replace('-', "_"),
            std::env::consts::DLL_SUFFIX
        ));
        // The interpreter and cpu-simd are built by every workspace build; another listed
        // executor that is not built here is skipped (and said so).
        let required = e.name == "interpreter" || e.name == "cpu-simd";
        assert!(
            lib.exists() || !required,
            "{} is missing: build the workspace first (`cargo build --workspace`)",
            lib.display()
        );
        if !lib.exists() {
            eprintln!("opinfo: executor `{}` is not built here; skipped", e.name);
            e.enabled = false;
        }
        e.library = Some(lib.display().to_string());
    }
    config.executors.retain(|e| e.enabled);
    config
}

/// One host per executor: the executor first, the interpreter behind it.
fn hosts() -> Vec<(String, Arc<PluginHost>)> {
    let config = workspace_config();
    let names: Vec<String> = config.executors.iter().map(|e| e.name.clone()).collect();
    assert!(
        names.iter().any(|n| n == "interpreter"),
        "plugins.toml lists no interpreter: {names:?}"
    );
    let mut out = Vec::new();
    // The interpreter first: the others are compared with it.
    let mut order = vec!["interpreter".to_string()];
    order.extend(names.into_iter().filter(|n| n != "interpreter"));
    for name in order {
        let mut host = PluginHost::load(&config, &[]);
        assert!(host.issues().is_empty(), "load issues: {:?}", host.issues());
        let lineup: Vec<&str> = if name == "interpreter" {
            vec!["interpreter"]
        } else {
            vec![name.as_str(), "interpreter"]
        };
        host.restrict_to(&lineup).expect("restrict_to");
        let entry = host.entries().iter().find(|e| e.name == name);
        if entry.is_none_or(|e| !e.is_active()) {
            eprintln!("opinfo: executor `{name}` is not available here; skipped");
            continue;
        }
        out.push((name, Arc::new(host)));
    }
    out
}

struct Fixtures {
    manifest: serde_json::Map<String, serde_json::Value>,
    dir: PathBuf,
    files: HashMap<String, Vec<u8>>,
}

impl Fixtures {
    fn load() -> Fixtures {
        let dir = repo_root().join("tests/fixtures/opinfo");
        let text = std::fs::read_to_string(dir.join("manifest.json"))
            .expect("tests/fixtures/opinfo/manifest.json: run scripts/gen_opinfo_fixtures.py");
        let manifest = serde_json::from_str(&text).expect("manifest.json");
        Fixtures {
            manifest,
            dir,
            files: HashMap::new(),
        }
    }

    /// PyTorch's outputs for `key`, `Err` with the reason when there are none to compare.
    fn outputs(&mut self, key: &str, fingerprint: &str) -> Result<Vec<Array>, String> {
        let entry = self
            .manifest
            .get(key)
            .ok_or("no PyTorch fixture (run scripts/gen_opinfo_fixtures.py)")?;
        if entry["fingerprint"].as_str() != Some(fingerprint) {
            return Err("the fixture is stale: the sample changed since \
                 scripts/gen_opinfo_fixtures.py last ran"
                .into());
        }
        if let Some(e) = entry["torch_error"].as_str() {
            return Err(format!("PyTorch refuses it: {e}"));
        }
        let file = entry["file"].as_str().unwrap_or_default().to_string();
        let dir = self.dir.clone();
        let bytes = self
            .files
            .entry(file.clone())
            .or_insert_with(|| std::fs::read(dir.join(&file)).expect("fixture file"));
        let st = safetensors::SafeTensors::deserialize(bytes).expect("safetensors");
        Ok(entry["outputs"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str())
                    .map(|n| load_fixture_array(&st, n))
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// The first element where `got` and `want` differ beyond `(rtol, atol)`, as a message.
fn mismatch(got: &Array, want: &Array, tol: thunder_opinfo::Tol) -> Option<String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Some(format!("got {} expected {}", got.ty(), want.ty()));
    }
    let (rtol, atol) = tol.for_dtype(want.dtype());
    let (g, w) = (
        got.to_f64_vec().expect("host array"),
        want.to_f64_vec().expect("host array"),
    );
    (0..g.len())
        .find(|&i| !close(g[i], w[i], rtol, atol, true))
        .map(|i| {
            format!(
                "element {i}: got {} expected {} (rtol {rtol}, atol {atol})",
                g[i], w[i]
            )
        })
}

#[derive(Default)]
struct Counts {
    ops: usize,
    op_dtypes: usize,
    samples: usize,
    /// Samples with a 0-d tensor, an empty tensor, a transposed or expanded input.
    scalar: usize,
    empty: usize,
    strided: usize,
    vs_torch: usize,
    errors: usize,
    /// Of which only running can refuse (indices out of range).
    run_errors: usize,
    /// executor -> (samples where it ran at least one op, op×dtype pairs it claimed)
    claimed: BTreeMap<String, (usize, HashSet<(String, DType)>)>,
}

/// Runs every sample of `info` for `dtype` on every host.
fn check_samples(
    info: &OpInfo,
    dtype: DType,
    hosts: &[(String, Arc<PluginHost>)],
    fixtures: &mut Fixtures,
    counts: &mut Counts,
    failures: &mut Vec<String>,
) {
    for (i, sample) in info.samples(dtype).iter().enumerate() {
        let key = sample_key(&info.id, dtype, i);
        let id = format!("{key} ({})", sample.note);
        let built = match build(&info.id, &sample.args) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{id}: does not trace: {e}"));
                continue;
            }
        };
        counts.samples += 1;
        let tensors = || {
            sample.args.iter().filter_map(|a| match a {
                SArg::Tensor(t, v) => Some((t, v)),
                SArg::Lit(_) => None,
            })
        };
        counts.scalar += tensors().any(|(t, _)| t.shape().is_empty()) as usize;
        counts.empty += tensors().any(|(t, _)| t.numel() == 0) as usize;
        counts.strided += tensors().any(|(_, v)| *v != View::Plain) as usize;
        let fingerprint = built.fingerprint().expect("fingerprint");
        let torch = fixtures.outputs(&key, &fingerprint);
        match &torch {
            Ok(_) => counts.vs_torch += 1,
            // A fixture that is missing or stale is a failure; a PyTorch refusal is not.
            Err(reason) if !reason.starts_with("PyTorch refuses") => {
                failures.push(format!("{id}: {reason}"))
            }
            Err(_) => {}
        }
        let mut reference: Option<Vec<Array>> = None;
        for (name, host) in hosts {
            let run = thunder_core::compile_trace(host, built.trace.clone())
                .and_then(|(traces, compiled)| Ok((traces, compiled.run(&built.inputs)?)));
            let (traces, got) = match run {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{id}: on {name}: {e}"));
                    continue;
                }
            };
            let exec = &traces.execution;
            for note in exec.notes.iter().filter(|n| &n.executor == name) {
                failures.push(format!("{id}: on {name}: {note}"));
            }
            if exec
                .steps
                .iter()
                .any(|s| &s.executor == name && !s.ops.is_empty())
            {
                let c = counts.claimed.entry(name.clone()).or_default();
                c.0 += 1;
                c.1.insert((info.id.clone(), dtype));
            }
            if got.len() != built.trace.outputs.len() {
                failures.push(format!("{id}: on {name}: {} outputs", got.len()));
                continue;
            }
            if let Ok(want) = &torch {
                let deviation = KNOWN_DEVIATIONS.iter().any(|(k, _)| *k == key);
                for (k, (g, w)) in got.iter().zip(want).enumerate() {
                    if let Some(m) = mismatch(g, w, info.tol) {
                        if !deviation {
                            failures.push(format!(
                                "{id}: on {name}: output {k} differs from PyTorch: {m}"
                            ));
                        }
                    } else if deviation {
                        failures.push(format!(
                            "{key} is listed as a known deviation but matches PyTorch"
                        ));
                    }
                }
            }
            match &reference {
                None => reference = Some(got),
                Some(want) => {
                    for (k, (g, w)) in got.iter().zip(want).enumerate() {
                        if let Some(m) = mismatch(g, w, info.tol) {
                            failures.push(format!(
                                "{id}: on {name}: output {k} differs from the interpreter: {m}"
                            ));
                        }
                    }
                }
            }
        }
    }
}

/// A run-time error case: it traces, and running it fails on every executor with an error
/// that names the op and contains the expected text.
fn check_run_error(
    info: &OpInfo,
    case: &ErrorCase,
    hosts: &[(String, Arc<PluginHost>)],
    failures: &mut Vec<String>,
) {
    let id = format!("{} run-time error case `{}`", info.id, case.note);
    let built = match build(&info.id, &case.args) {
        Ok(b) => b,
        Err(e) => return failures.push(format!("{id}: does not trace: {e}")),
    };
    for (name, host) in hosts {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            thunder_core::compile_trace(host, built.trace.clone())
                .and_then(|(_, compiled)| compiled.run(&built.inputs))
        }));
        match result {
            Err(_) => failures.push(format!("{id}: on {name}: panicked")),
            Ok(Ok(_)) => failures.push(format!("{id}: on {name}: ran without an error")),
            Ok(Err(e)) => {
                let text = e.to_string();
                // At run time an executor sees prims only, so the error names the prim the
                // op decomposed into (which the expected text spells out).
                if !text.contains(&case.expect) {
                    failures.push(format!(
                        "{id}: on {name}: `{text}` does not contain `{}`",
                        case.expect
                    ));
                }
            }
        }
    }
}

fn check_errors(
    info: &OpInfo,
    hosts: &[(String, Arc<PluginHost>)],
    counts: &mut Counts,
    failures: &mut Vec<String>,
) {
    for case in info.error_cases() {
        if case.kind == ErrorKind::Run {
            counts.errors += 1;
            counts.run_errors += 1;
            check_run_error(info, &case, hosts, failures);
            continue;
        }
        let id = format!("{} error case `{}`", info.id, case.note);
        let (op, args) = (info.id.as_str(), &case.args);
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build(op, args).map(|_| ())));
        counts.errors += 1;
        match result {
            Err(_) => failures.push(format!("{id}: panicked")),
            Ok(Ok(())) => failures.push(format!("{id}: traced without an error")),
            Ok(Err(e)) if e.op_name().is_some() => {
                let (op, message) = (
                    e.op_name().unwrap_or_default(),
                    e.op_message().unwrap_or_default(),
                );
                let tag = e.op_kind_of().map(|k| k.tag());
                if op != info.id {
                    failures.push(format!("{id}: the error names `{op}`: {message}"));
                } else if case.op_kind.is_some() && tag != case.op_kind {
                    failures.push(format!(
                        "{id}: error of kind {tag:?}, expected {:?}: {message}",
                        case.op_kind
                    ));
                } else if !message.contains(&case.expect) {
                    failures.push(format!(
                        "{id}: message `{message}` does not contain `{}`",
                        case.expect
                    ));
                }
            }
            Ok(Err(other)) => failures.push(format!("{id}: not an op error: {other:?}")),
        }
    }
}

/// The dtypes an entry lists are exactly those its meta accepts on its first sample.
fn check_dtypes(info: &OpInfo, failures: &mut Vec<String>) {
    for dtype in DType::ALL {
        let samples = info.samples(dtype);
        let Some(first) = samples.first() else {
            failures.push(format!(
                "{}: no samples for {}",
                info.id,
                dtype.short_name()
            ));
            continue;
        };
        let traced = build(&info.id, &first.args);
        let listed = info.dtypes.contains(&dtype);
        match (listed, traced) {
            (true, Err(e)) => failures.push(format!(
                "{}: lists {} but its first sample does not trace: {e}",
                info.id,
                dtype.short_name()
            )),
            (false, Ok(_)) => failures.push(format!(
                "{}: accepts {} but does not list it",
                info.id,
                dtype.short_name()
            )),
            _ => {}
        }
    }
}

#[test]
fn every_symbol_has_an_opinfo_entry() {
    let ids: HashSet<&str> = table().iter().map(|e| e.id.as_str()).collect();
    let symbols = thunder_opinfo::symbol_ids();
    let missing: Vec<&&str> = symbols.iter().filter(|s| !ids.contains(**s)).collect();
    assert!(
        missing.is_empty(),
        "no OpInfo entry (add a row in tests/opinfo/src): {missing:?}"
    );
    let unknown: Vec<&&str> = ids.iter().filter(|i| !symbols.contains(*i)).collect();
    assert!(
        unknown.is_empty(),
        "entries for unknown symbols: {unknown:?}"
    );
    assert_eq!(ids.len(), table().len(), "an op has two entries");
}

#[test]
fn listed_dtypes_are_what_the_meta_accepts() {
    let mut failures = Vec::new();
    for info in table() {
        check_dtypes(info, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_sample_on_every_executor_matches_pytorch_and_every_error_case_is_typed() {
    let hosts = hosts();
    let mut fixtures = Fixtures::load();
    let mut counts = Counts::default();
    let mut failures = Vec::new();
    // `THUNDER_OPINFO=add,softmax` checks only the ops whose id contains one of the words (as
    // Thunder's `pytest -k`); the whole-table minimums below then do not apply.
    let filter: Vec<String> = std::env::var("THUNDER_OPINFO")
        .map(|v| {
            v.split(',')
                .map(|w| w.trim().to_string())
                .filter(|w| !w.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let selected = |id: &str| filter.is_empty() || filter.iter().any(|w| id.contains(w.as_str()));
    for info in table().iter().filter(|i| selected(&i.id)) {
        counts.ops += 1;
        for &dtype in &info.dtypes {
            counts.op_dtypes += 1;
            check_samples(
                info,
                dtype,
                &hosts,
                &mut fixtures,
                &mut counts,
                &mut failures,
            );
        }
        check_errors(info, &hosts, &mut counts, &mut failures);
    }
    let claimed: Vec<String> = hosts
        .iter()
        .map(|(name, _)| {
            let (samples, pairs) = counts.claimed.get(name).cloned().unwrap_or_default();
            format!(
                "{name} claimed {samples} samples ({} op×dtype)",
                pairs.len()
            )
        })
        .collect();
    eprintln!(
        "opinfo: {} ops, {} ops×dtype combinations, {} samples ({} checked against PyTorch; \
         {} with a 0-d input, {} with an empty one, {} non-contiguous), {} error cases checked ({} at run time on every executor); \
         per executor: {}",
        counts.ops,
        counts.op_dtypes,
        counts.samples,
        counts.vs_torch,
        counts.scalar,
        counts.empty,
        counts.strided,
        counts.errors,
        counts.run_errors,
        claimed.join(", ")
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures
            .iter()
            .take(80)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        counts.samples > 0,
        "no sample matched THUNDER_OPINFO={filter:?}"
    );
    if !filter.is_empty() {
        eprintln!("opinfo: THUNDER_OPINFO={filter:?} selected the ops above");
        return;
    }
    // Sane minimums, so that an empty table or a broken fixture set cannot pass.
    assert!(counts.ops >= 150, "only {} ops", counts.ops);
    assert!(
        counts.op_dtypes >= 1000,
        "only {} op×dtype",
        counts.op_dtypes
    );
    assert!(counts.samples >= 5000, "only {} samples", counts.samples);
    assert!(
        counts.vs_torch * 10 >= counts.samples * 9,
        "few PyTorch references"
    );
    assert!(counts.errors >= 150, "only {} error cases", counts.errors);
    for (what, n) in [
        ("0-d", counts.scalar),
        ("empty", counts.empty),
        ("non-contiguous", counts.strided),
    ] {
        assert!(
            n * 10 >= counts.samples,
            "only {n} samples with a {what} input"
        );
    }
    assert!(
        hosts.len() >= 2,
        "only {} executors checked: the interpreter and cpu-simd at least",
        hosts.len()
    );
    for (name, _) in &hosts {
        let (samples, pairs) = counts.claimed.get(name).cloned().unwrap_or_default();
        assert!(
            samples >= 100 && pairs.len() >= 50,
            "`{name}` claimed too little: {samples} samples, {} op×dtype",
            pairs.len()
        );
    }
}

/// Fixtures are matched by fingerprint, so generating a sample twice must give the same
/// program and bytes.
#[test]
fn samples_are_deterministic() {
    let mut checked = 0;
    for info in table() {
        for &dtype in &info.dtypes {
            let (a, b) = (info.samples(dtype), info.samples(dtype));
            assert_eq!(a.len(), b.len(), "{}", info.id);
            for (x, y) in a.iter().zip(&b) {
                let (Ok(x), Ok(y)) = (build(&info.id, &x.args), build(&info.id, &y.args)) else {
                    continue;
                };
                assert_eq!(
                    x.fingerprint().expect("fingerprint"),
                    y.fingerprint().expect("fingerprint"),
                    "{} {}",
                    info.id,
                    dtype.short_name()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 5000, "only {checked} samples compared");
}
