//! Helpers shared by the integration tests: where cargo put the plugins and the binary, and a
//! host that loads the interpreter plugin built in this workspace.

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

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn interpreter_library() -> PathBuf {
    let lib = target_dir().join(format!(
        "{}thunder_interpreter{}",
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

/// A config naming only the interpreter plugin of this build.
pub fn interpreter_config() -> Config {
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\nrequires = \"^0.1\"\n",
        interpreter_library().display()
    );
    Config::parse(&text, std::path::Path::new("<test>")).expect("test config")
}

pub fn interpreter_host() -> Arc<PluginHost> {
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
