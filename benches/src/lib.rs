//! Helpers shared by the benchmarks in this folder: where cargo put the interpreter plugin and
//! the `thunder` binary, a host that loads only that plugin, and the programs the benches time
//! (kept here so that the PyTorch peer script in `peer/` can mirror them exactly).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use thunder_core::device::Device;
use thunder_core::host::Config;
use thunder_core::ir::TensorType;
use thunder_core::{Array, DType, PluginHost, Tensor};

/// Elements of the cached-call input (a 1-D f32 tensor).
pub const CHAIN_NUMEL: i64 = 64;
/// `x * MUL + ADD`, repeated [`CHAIN_REPEATS`] times: 2 ops each, 10 ops in all.
pub const CHAIN_MUL: f64 = 1.01;
pub const CHAIN_ADD: f64 = 0.1;
pub const CHAIN_REPEATS: usize = 5;

/// Blocks of `linear + gelu(tanh) + softmax` in the translation bench.
pub const MLP_BLOCKS: usize = 12;
/// Batch and width of the translation bench's MLP (every linear is `WIDTH x WIDTH`).
pub const MLP_BATCH: i64 = 4;
pub const MLP_WIDTH: i64 = 16;

/// The cargo profile folder holding the running bench binary (`target/release`): cargo puts
/// bench binaries in `target/release/deps/<bench>-<hash>`, so it is two folders up.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("cannot find the path of the running bench binary");
    exe.parent()
        .and_then(Path::parent)
        .map(PathBuf::from)
        .expect("bench binary has no grandparent folder")
}

/// `target/release/libthunder_interpreter.so` (or the platform's spelling).
pub fn interpreter_library() -> PathBuf {
    let lib = target_dir().join(format!(
        "{}thunder_interpreter{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        lib.exists(),
        "{} is missing: run `cargo build --release -p thunder-interpreter` first",
        lib.display()
    );
    lib
}

/// `target/release/thunder`, if it was built (`cargo build --release -p thunder-cli`).
pub fn thunder_binary() -> Option<PathBuf> {
    let bin = target_dir().join(format!("thunder{}", std::env::consts::EXE_SUFFIX));
    bin.exists().then_some(bin)
}

/// The text of a plugins.toml naming only the interpreter plugin of this build.
pub fn interpreter_config_text() -> String {
    format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\n",
        interpreter_library().display()
    )
}

/// A config naming only the interpreter plugin of this build.
pub fn interpreter_config() -> Config {
    Config::parse(&interpreter_config_text(), Path::new("<bench>"))
        .expect("bench config does not parse")
}

/// A host with the interpreter plugin and nothing else; panics on any load issue.
pub fn interpreter_host() -> Arc<PluginHost> {
    let host = PluginHost::load(&interpreter_config(), &[]);
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
    Arc::new(host)
}

/// The cached-call program: `x = x * 1.01 + 0.1`, five times (10 elementwise ops).
pub fn elementwise_chain(xs: &[Tensor]) -> Vec<Tensor> {
    let mut x = xs[0].clone();
    for _ in 0..CHAIN_REPEATS {
        x = &x * CHAIN_MUL + CHAIN_ADD;
    }
    vec![x]
}

/// What [`elementwise_chain`] computes, in f32 as the interpreter does, for checking outputs.
pub fn elementwise_chain_reference(x: f32) -> f32 {
    let mut x = x;
    for _ in 0..CHAIN_REPEATS {
        x = x * CHAIN_MUL as f32 + CHAIN_ADD as f32;
    }
    x
}

pub fn chain_input() -> Array {
    Array::random(&[CHAIN_NUMEL], DType::F32, 0).expect("random input")
}

/// The translation program: `h = softmax(gelu(linear(h, w_i, b_i)), -1)` for each block.
/// Inputs: `x`, then `w_i, b_i` per block.
pub fn mlp(xs: &[Tensor]) -> Vec<Tensor> {
    let mut h = xs[0].clone();
    for block in xs[1..].chunks(2) {
        h = h
            .linear(&block[0], Some(&block[1]))
            .gelu("tanh")
            .softmax(-1);
    }
    vec![h]
}

pub fn mlp_input_types() -> Vec<TensorType> {
    let ty = |shape: Vec<i64>| TensorType::new(shape, DType::F32, Device::Cpu);
    let mut types = vec![ty(vec![MLP_BATCH, MLP_WIDTH])];
    for _ in 0..MLP_BLOCKS {
        types.push(ty(vec![MLP_WIDTH, MLP_WIDTH]));
        types.push(ty(vec![MLP_WIDTH]));
    }
    types
}

pub fn mlp_inputs() -> Vec<Array> {
    mlp_input_types()
        .iter()
        .enumerate()
        .map(|(i, ty)| Array::random(&ty.shape, ty.dtype, i as u64).expect("random input"))
        .collect()
}
