//! Helpers shared by the integration tests: where cargo put the plugins and the binary, and a
//! host that loads the interpreter plugin built in this workspace.

pub mod finite_differences;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use thunder_core::host::Config;
use thunder_core::PluginHost;

/// The cargo profile folder holding this test binary (`target/debug`), where the workspace's
/// cdylib plugins and the `thunder` binary are built.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/debug/deps/<test> -> target/debug
    exe.parent()
        .and_then(|p| p.parent())
        .map(PathBuf::from)
        .expect("target dir")
}

/// Checks `actual` against the golden file at `path`. With `THUNDER_BLESS` set it rewrites the
/// file instead; otherwise a mismatch (or a missing file) is an `Err` holding a unified diff of
/// the expected and the actual text, so a failure shows only what changed.
pub fn check_golden(path: &std::path::Path, actual: &str) -> Result<(), String> {
    if std::env::var_os("THUNDER_BLESS").is_some() {
        return std::fs::write(path, actual)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()));
    }
    let expected = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "{}: {e} (run with THUNDER_BLESS=1 to create it)",
            path.display()
        )
    })?;
    if expected == actual {
        return Ok(());
    }
    let diff = similar::TextDiff::from_lines(expected.as_str(), actual);
    Err(format!(
        "{} differs (THUNDER_BLESS=1 to accept, then review the diff):\n{}",
        path.display(),
        diff.unified_diff()
            .context_radius(3)
            .header("expected", "actual")
    ))
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn interpreter_library() -> PathBuf {
    plugin_library("thunder_interpreter")
}

/// The cdylib of plugin `crate_name` (e.g. `thunder_cpu_simd`) in this build.
pub fn plugin_library(crate_name: &str) -> PathBuf {
    let lib = target_dir().join(format!(
        "{}{crate_name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        lib.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace`)",
        lib.display()
    );
    lib
}

/// The default CPU executors of `plugins.toml` (cpu-simd asked first, the interpreter for the
/// rest), from this build.
pub fn default_cpu_host() -> Arc<PluginHost> {
    thunder_torch::register();
    static HOST: OnceLock<Arc<PluginHost>> = OnceLock::new();
    HOST.get_or_init(|| {
        let text = format!(
            "[[executor]]\nname = \"cpu-simd\"\nlibrary = \"{}\"\npriority = 20\n\n\
             [[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\n",
            plugin_library("thunder_cpu_simd").display(),
            interpreter_library().display()
        );
        let config = Config::parse(&text, std::path::Path::new("<test>")).expect("test config");
        let host = PluginHost::load(&config, &[]);
        assert!(host.issues().is_empty(), "load issues: {:?}", host.issues());
        Arc::new(host)
    })
    .clone()
}

/// A config naming only the interpreter plugin of this build.
pub fn interpreter_config() -> Config {
    thunder_torch::register();
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\nrequires = \"^0.1\"\n",
        interpreter_library().display()
    );
    Config::parse(&text, std::path::Path::new("<test>")).expect("test config")
}

pub fn interpreter_host() -> Arc<PluginHost> {
    thunder_torch::register();
    static HOST: OnceLock<Arc<PluginHost>> = OnceLock::new();
    HOST.get_or_init(|| {
        let host = PluginHost::load(&interpreter_config(), &[]);
        assert!(host.issues().is_empty(), "load issues: {:?}", host.issues());
        assert_eq!(host.entries().len(), 1);
        Arc::new(host)
    })
    .clone()
}

pub fn thunder_binary() -> PathBuf {
    let bin = target_dir().join(format!("thunder{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace`)",
        bin.display()
    );
    bin
}

/// Elementwise closeness in the spirit of torch.testing: |a - e| <= atol + rtol * |e|.
pub fn close(actual: f64, expected: f64, rtol: f64, atol: f64, equal_nan: bool) -> bool {
    if actual.is_nan() || expected.is_nan() {
        return equal_nan && actual.is_nan() && expected.is_nan();
    }
    if actual.is_infinite() || expected.is_infinite() {
        return actual == expected;
    }
    (actual - expected).abs() <= atol + rtol * expected.abs()
}

/// Loads tensor `name` of a safetensors fixture as an `Array` of the same dtype and shape.
pub fn load_fixture_array(st: &safetensors::SafeTensors, name: &str) -> thunder_core::Array {
    use safetensors::Dtype;
    use thunder_core::DType;
    let view = st
        .tensor(name)
        .unwrap_or_else(|e| panic!("fixture tensor {name}: {e}"));
    let dtype = match view.dtype() {
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::U8,
        Dtype::I8 => DType::I8,
        Dtype::I16 => DType::I16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        other => panic!("fixture dtype {other:?} is not one of ours"),
    };
    let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
    let ty = thunder_core::ir::TensorType::new(shape, dtype, thunder_core::Device::Cpu);
    thunder_core::Array::from_bytes(view.data(), ty).expect("fixture array")
}

/// One case of a fixture manifest (`tests/fixtures/ops` or `tests/fixtures/grads`), with its
/// safetensors file loaded once per file.
pub struct FixtureCase {
    pub op: String,
    /// `op/case`, e.g. `add/c3` (what KNOWN_DEVIATIONS lists).
    pub key: String,
    /// The key with the case's note, for failure messages.
    pub id: String,
    pub program: String,
    pub json: serde_json::Value,
    file: std::sync::Arc<Vec<u8>>,
}

impl FixtureCase {
    pub fn str(&self, field: &str) -> String {
        self.json[field].as_str().unwrap_or_default().to_string()
    }

    /// A stored tensor by name.
    pub fn array(&self, name: &str) -> thunder_core::Array {
        let st = safetensors::SafeTensors::deserialize(&self.file).expect("safetensors");
        load_fixture_array(&st, name)
    }

    /// The tensors named by a list field of the case (`inputs`, `outputs`, `grads`).
    pub fn arrays(&self, field: &str) -> Vec<thunder_core::Array> {
        let st = safetensors::SafeTensors::deserialize(&self.file).expect("safetensors");
        self.json[field]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str())
                    .map(|n| load_fixture_array(&st, n))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The case's `(rtol, atol)` (0 when absent: exact).
    pub fn tolerances(&self) -> (f64, f64) {
        (
            self.json["rtol"].as_f64().unwrap_or(0.0),
            self.json["atol"].as_f64().unwrap_or(0.0),
        )
    }
}

/// Every case of the manifest in `dir` (a folder under `tests/fixtures`).
pub fn fixture_cases(dir: &std::path::Path) -> Vec<FixtureCase> {
    let manifest: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"),
    )
    .expect("json");
    let mut files: std::collections::HashMap<String, std::sync::Arc<Vec<u8>>> =
        std::collections::HashMap::new();
    manifest
        .into_iter()
        .map(|json| {
            let s = |k: &str| json[k].as_str().unwrap_or_default().to_string();
            let (op, file_name) = (s("op"), s("file"));
            let key = format!("{op}/{}", s("case"));
            let file = files
                .entry(file_name.clone())
                .or_insert_with(|| {
                    std::sync::Arc::new(std::fs::read(dir.join(&file_name)).expect("fixture file"))
                })
                .clone();
            FixtureCase {
                id: format!("{key} ({})", s("note")),
                program: s("program"),
                op,
                key,
                json,
                file,
            }
        })
        .collect()
}
