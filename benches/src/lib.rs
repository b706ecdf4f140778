//! Helpers shared by the benchmarks in this folder: where cargo put the interpreter plugin and
//! the `thunder` binary, a host that loads only that plugin, and the programs the benches time
//! (kept here so that the PyTorch peer script in `peer/` can mirror them exactly). `thunder
//! bench` (thunder-cli/src/commands/bench.rs) times the same programs on the configured
//! executors.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use thunder_core::device::Device;
use thunder_core::host::Config;
use thunder_core::ir::TensorType;
use thunder_core::{Array, DType, PluginHost, Tensor};
use thunder_torch::prelude::*;

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

/// `x = x * 1.01 + 0.1`, `repeats` times (`2 * repeats` elementwise ops).
pub fn scale_shift(x: &Tensor, repeats: usize) -> Tensor {
    let mut x = x.clone();
    for _ in 0..repeats {
        x = &x * CHAIN_MUL + CHAIN_ADD;
    }
    x
}

/// `x = tanh(x * 1.01 + 0.1)`, `repeats` times (`3 * repeats` elementwise ops).
pub fn tanh_scale_shift(x: &Tensor, repeats: usize) -> Tensor {
    let mut x = x.clone();
    for _ in 0..repeats {
        x = (&x * CHAIN_MUL + CHAIN_ADD).tanh();
    }
    x
}

/// The cached-call program: `x = x * 1.01 + 0.1`, five times (10 elementwise ops).
pub fn elementwise_chain(xs: &[Tensor]) -> Vec<Tensor> {
    vec![scale_shift(&xs[0], CHAIN_REPEATS)]
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

// ---------------------------------------------------------------------------------------------
// Training step (benches/train_step.rs; `train_step` in peer/torch_peer.py mirrors it).

/// The MLP trained by the train-step bench: `(fan_in, fan_out)` per `Linear`, ReLU between.
pub const TRAIN_LAYERS: [(i64, i64); 3] = [(64, 128), (128, 128), (128, 10)];
/// Weights and biases: `w1, b1, w2, b2, w3, b3`.
pub const TRAIN_PARAMS: usize = 2 * TRAIN_LAYERS.len();
pub const TRAIN_BATCH: i64 = 256;
pub const TRAIN_FEATURES: i64 = TRAIN_LAYERS[0].0;
pub const TRAIN_CLASSES: i64 = TRAIN_LAYERS[TRAIN_LAYERS.len() - 1].1;
pub const TRAIN_LR: f64 = 0.01;
pub const TRAIN_MOMENTUM: f64 = 0.9;

/// splitmix64: a small seeded generator, so the helpers need no `rand` dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-bound, bound).
    fn uniform(&mut self, bound: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        (2.0 * unit - 1.0) * bound
    }
}

/// `w1, b1, w2, b2, w3, b3`, uniform in ±1/sqrt(fan_in) as `torch.nn.Linear` initializes them.
/// `requires_grad` marks them for `value_and_grad` (it is part of the cache key).
pub fn train_params(seed: u64, requires_grad: bool) -> Vec<Array> {
    let mut rng = SplitMix(seed);
    let mut params = Vec::with_capacity(TRAIN_PARAMS);
    for (fan_in, fan_out) in TRAIN_LAYERS {
        let bound = 1.0 / (fan_in as f32).sqrt();
        let mut uniform = |n: i64| -> Vec<f32> { (0..n).map(|_| rng.uniform(bound)).collect() };
        let w = Array::from_slice(&uniform(fan_in * fan_out), &[fan_out, fan_in]).expect("w");
        let b = Array::from_slice(&uniform(fan_out), &[fan_out]).expect("b");
        params.push(w.with_requires_grad(requires_grad));
        params.push(b.with_requires_grad(requires_grad));
    }
    params
}

/// Zero momentum buffers shaped like `params` (torch's first step then sets `buf = grad`).
pub fn zero_buffers(params: &[Array]) -> Vec<Array> {
    params
        .iter()
        .map(|p| Array::zeros(TensorType::new(p.shape().to_vec(), p.dtype(), Device::Cpu)))
        .collect::<thunder_core::Result<_>>()
        .expect("zero buffers")
}

/// One batch: `x: f32[256, 64]` from N(0, 1), `y: i64[256]` class indices in `0..10`.
pub fn train_batch(seed: u64) -> (Array, Array) {
    let x = Array::random(&[TRAIN_BATCH, TRAIN_FEATURES], DType::F32, seed).expect("x");
    let mut rng = SplitMix(seed ^ 0x5EED);
    let y: Vec<i64> = (0..TRAIN_BATCH)
        .map(|_| (rng.next_u64() % TRAIN_CLASSES as u64) as i64)
        .collect();
    (x, Array::from_slice(&y, &[TRAIN_BATCH]).expect("y"))
}

/// Logits of the MLP for `x: [B, 64]`; `p` holds `w1, b1, w2, b2, w3, b3`.
pub fn train_logits(p: &[Tensor], x: &Tensor) -> Tensor {
    let mut h = x.clone();
    for (i, layer) in p.chunks(2).enumerate() {
        h = h.linear(&layer[0], Some(&layer[1]));
        if i + 1 < TRAIN_LAYERS.len() {
            h = h.relu();
        }
    }
    h
}

/// The loss for `value_and_grad`: inputs `w1, b1, w2, b2, w3, b3, x, y`; output the mean
/// cross-entropy.
pub fn train_loss(xs: &[Tensor]) -> Vec<Tensor> {
    let n = TRAIN_PARAMS;
    vec![train_logits(&xs[..n], &xs[n]).cross_entropy(&xs[n + 1])]
}

/// The SGD update as its own program: inputs `params, grads, bufs` (6 each); outputs
/// `new_params, new_bufs`.
pub fn sgd_update(xs: &[Tensor]) -> thunder_core::Result<Vec<Tensor>> {
    let n = TRAIN_PARAMS;
    let (params, bufs) = thunder_torch::optim::sgd(
        &xs[..n],
        &xs[n..2 * n],
        &xs[2 * n..3 * n],
        TRAIN_LR,
        TRAIN_MOMENTUM,
        0.0,
    )?;
    Ok(params.into_iter().chain(bufs).collect())
}

/// One training step as `thunder demo` runs it: `loss_and_grad` (a `value_and_grad` of
/// [`train_loss`]: forward program, then backward program), then `sgd` (a jitted
/// [`sgd_update`]). Returns `(loss, new params, new bufs)`; the new parameters keep
/// `requires_grad` (it is part of the cache key).
pub fn train_step_two_programs(
    loss_and_grad: &thunder_core::autograd::ValueAndGrad,
    sgd: &thunder_core::Jitted,
    params: Vec<Array>,
    bufs: Vec<Array>,
    x: &Array,
    y: &Array,
) -> thunder_core::Result<(Array, Vec<Array>, Vec<Array>)> {
    let mut inputs = params.clone();
    inputs.extend([x.clone(), y.clone()]);
    let (mut outs, grads) = loss_and_grad.call(&inputs)?;
    let mut update = params;
    update.extend(grads);
    update.extend(bufs);
    let mut out = sgd.call(&update)?;
    let bufs = out.split_off(TRAIN_PARAMS);
    let params = out
        .into_iter()
        .map(|p| p.with_requires_grad(true))
        .collect();
    Ok((outs.remove(0), params, bufs))
}

/// A whole training step in one program: forward, gradients (recorded in the same trace by
/// `value_and_grad_in_trace`) and the SGD update. Inputs: `params` (6), `bufs` (6), `x`, `y`;
/// outputs: `loss, new_params (6), new_bufs (6)`.
pub fn fused_train_step(xs: &[Tensor]) -> thunder_core::Result<Vec<Tensor>> {
    let n = TRAIN_PARAMS;
    let (params, rest) = xs.split_at(n);
    let (bufs, data) = rest.split_at(n);
    let inputs: Vec<Tensor> = params.iter().chain(data).cloned().collect();
    let wrt: Vec<usize> = (0..n).collect();
    let r = thunder_core::autograd::value_and_grad_in_trace(&inputs, &wrt, |p| Ok(train_loss(p)))?;
    let (new_params, new_bufs) =
        thunder_torch::optim::sgd(params, &r.grads, bufs, TRAIN_LR, TRAIN_MOMENTUM, 0.0)?;
    Ok(std::iter::once(r.outputs[0].clone())
        .chain(new_params)
        .chain(new_bufs)
        .collect())
}

// ---------------------------------------------------------------------------------------------
// GPT-2 (benches/translation_gpt2.rs). At GPT-2-small size the program is only traced,
// differentiated, split and compiled, never run; the bench runs a tiny configuration of the same
// code once as a check.

/// Sizes of a GPT-2 model and of the batch it is traced for.
#[derive(Debug, Clone, Copy)]
pub struct Gpt2Config {
    pub layers: usize,
    /// Width C.
    pub embd: i64,
    pub heads: i64,
    /// Sequence length T; also the block size (rows of `wpe`).
    pub seq: i64,
    pub vocab: i64,
    pub batch: i64,
}

/// GPT-2 small: 12 layers, C = 768, 12 heads, T = 1024, vocab 50257; batch 1.
pub const GPT2_SMALL: Gpt2Config = Gpt2Config {
    layers: 12,
    embd: 768,
    heads: 12,
    seq: 1024,
    vocab: 50257,
    batch: 1,
};

/// A tiny GPT-2 that the interpreter runs in milliseconds, for checking the program.
pub const GPT2_TINY: Gpt2Config = Gpt2Config {
    layers: 2,
    embd: 32,
    heads: 4,
    seq: 16,
    vocab: 50,
    batch: 2,
};

/// Inputs per transformer block, in this order.
pub const GPT2_BLOCK_INPUT_NAMES: [&str; 12] = [
    "ln1_w", "ln1_b", "w_qkv", "b_qkv", "w_proj", "b_proj", "ln2_w", "ln2_b", "w_fc", "b_fc",
    "w_fc2", "b_fc2",
];
/// Inputs before the blocks: `tokens, targets, wte, wpe`.
pub const GPT2_LEADING_INPUTS: usize = 4;

/// `tokens, targets, wte, wpe`, then `h{l}_{name}` per block, then `ln_f_w, ln_f_b`.
pub fn gpt2_input_names(cfg: &Gpt2Config) -> Vec<String> {
    let mut names: Vec<String> = ["tokens", "targets", "wte", "wpe"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for l in 0..cfg.layers {
        names.extend(GPT2_BLOCK_INPUT_NAMES.iter().map(|n| format!("h{l}_{n}")));
    }
    names.extend(["ln_f_w".to_string(), "ln_f_b".to_string()]);
    names
}

fn weight_type(shape: Vec<i64>) -> TensorType {
    let mut t = TensorType::new(shape, DType::F32, Device::Cpu);
    t.requires_grad = true;
    t
}

/// Types of one block's weights, in [`GPT2_BLOCK_INPUT_NAMES`] order, for width `c`.
fn gpt2_block_weight_types(c: i64) -> [TensorType; 12] {
    [
        weight_type(vec![c]),
        weight_type(vec![c]),
        weight_type(vec![3 * c, c]),
        weight_type(vec![3 * c]),
        weight_type(vec![c, c]),
        weight_type(vec![c]),
        weight_type(vec![c]),
        weight_type(vec![c]),
        weight_type(vec![4 * c, c]),
        weight_type(vec![4 * c]),
        weight_type(vec![c, 4 * c]),
        weight_type(vec![c]),
    ]
}

/// Types of the GPT-2 inputs: token ids `i64[B, T]`, targets `i64[B*T]`, then every weight
/// as f32 with `requires_grad` (shapes as nanoGPT's, `Linear` weights `[out, in]`).
pub fn gpt2_input_types(cfg: &Gpt2Config) -> Vec<TensorType> {
    let (c, v) = (cfg.embd, cfg.vocab);
    let int = |shape: Vec<i64>| TensorType::new(shape, DType::I64, Device::Cpu);
    let mut types = vec![
        int(vec![cfg.batch, cfg.seq]),
        int(vec![cfg.batch * cfg.seq]),
        weight_type(vec![v, c]),
        weight_type(vec![cfg.seq, c]),
    ];
    for _ in 0..cfg.layers {
        types.extend(gpt2_block_weight_types(c));
    }
    types.extend([weight_type(vec![c]), weight_type(vec![c])]);
    types
}

/// A weight of `ty` named `name`: `scale * N(0, 1)`, plus 1 for layer-norm weights.
fn gpt2_weight(ty: &TensorType, name: &str, seed: u64, scale: f64) -> Array {
    let offset = if name.contains("ln") && name.ends_with("_w") {
        1.0
    } else {
        0.0
    };
    let values: Vec<f64> = Array::random(&ty.shape, DType::F64, seed)
        .expect("random weights")
        .to_f64_vec()
        .expect("host array")
        .into_iter()
        .map(|x| offset + scale * x)
        .collect();
    Array::from_f64(&values, &ty.shape, DType::F32)
        .expect("weights")
        .with_requires_grad(true)
}

/// Inputs for [`gpt2_input_types`]: token ids and targets uniform in `0..vocab`, weights
/// `scale * N(0, 1)`, layer-norm weights `1 + scale * N(0, 1)`. Only for small configs.
pub fn gpt2_inputs(cfg: &Gpt2Config, seed: u64, scale: f64) -> Vec<Array> {
    let names = gpt2_input_names(cfg);
    let mut rng = SplitMix(seed);
    gpt2_input_types(cfg)
        .into_iter()
        .zip(names)
        .enumerate()
        .map(|(i, (ty, name))| {
            if ty.dtype == DType::I64 {
                let ids: Vec<i64> = (0..ty.numel())
                    .map(|_| (rng.next_u64() % cfg.vocab as u64) as i64)
                    .collect();
                return Array::from_slice(&ids, &ty.shape).expect("ids");
            }
            gpt2_weight(&ty, &name, seed ^ (i as u64 + 1), scale)
        })
        .collect()
}

/// One-hot rows as f32: `ids[..., None] == arange(0, classes)`. Stands in for a gather
/// (embedding lookup) until thunder-core has a gather prim.
fn one_hot(ids: &Tensor, classes: i64, dtype: DType) -> thunder_core::Result<Tensor> {
    let iota = thunder_torch::arange(0, classes, 1, ids.device(), DType::I64)?;
    let mut shape = ids.shape().to_vec();
    shape.push(1);
    Ok(ids.reshape(&shape).eq(&iota).to_dtype(dtype))
}

/// Causal self-attention of one GPT-2 block on `x: [B, T, C]`, as nanoGPT writes it: q, k and
/// v split from one projection, heads moved before time, `scaled_dot_product_attention` with
/// `is_causal` (which trains through `sdpa_fwd_lse`/`sdpa_bwd`, saving no T x T value).
fn gpt2_attention(cfg: &Gpt2Config, x: &Tensor, p: &[Tensor]) -> thunder_core::Result<Tensor> {
    let (b, t, c, h) = (cfg.batch, cfg.seq, cfg.embd, cfg.heads);
    let qkv = thunder_torch::split(&x.linear(&p[0], Some(&p[1])), c, 2)?;
    let heads = |u: &Tensor| u.reshape(&[b, t, h, c / h]).transpose(1, 2);
    let y = thunder_torch::scaled_dot_product_attention(
        &heads(&qkv[0]),
        &heads(&qkv[1]),
        &heads(&qkv[2]),
        None,
        true,
        None,
    )?;
    let y = y.transpose(1, 2).reshape(&[b, t, c]);
    Ok(y.linear(&p[2], Some(&p[3])))
}

/// One pre-norm GPT-2 block on `x: [B, T, C]`: `x + attn(ln1(x))`, then `x + mlp(ln2(x))`
/// with `mlp = linear 4C, gelu(tanh), linear C`. `p` holds the 12 weights in
/// [`GPT2_BLOCK_INPUT_NAMES`] order.
pub fn gpt2_block(cfg: &Gpt2Config, x: &Tensor, p: &[Tensor]) -> thunder_core::Result<Tensor> {
    let c = cfg.embd;
    let h = x.layer_norm(&[c], Some(&p[0]), Some(&p[1]), 1e-5);
    let x = x + gpt2_attention(cfg, &h, &p[2..6])?;
    let h = x.layer_norm(&[c], Some(&p[6]), Some(&p[7]), 1e-5);
    let mlp = h
        .linear(&p[8], Some(&p[9]))
        .gelu("tanh")
        .linear(&p[10], Some(&p[11]));
    Ok(x + mlp)
}

/// GPT-2 forward with the LM loss: token + position embeddings, `cfg.layers` pre-norm blocks
/// ([`gpt2_block`]), final layer norm, tied output projection (`x @ wte^T`), mean cross-entropy
/// against `targets`. Inputs as [`gpt2_input_types`]; one output, the loss.
pub fn gpt2_loss(cfg: &Gpt2Config, xs: &[Tensor]) -> thunder_core::Result<Vec<Tensor>> {
    let (b, t, c, v) = (cfg.batch, cfg.seq, cfg.embd, cfg.vocab);
    let (tokens, targets, wte, wpe) = (&xs[0], &xs[1], &xs[2], &xs[3]);
    // Embeddings as one-hot matmuls (see `one_hot`): [B, T, V] @ [V, C] and [T, T] @ [T, C].
    let positions = thunder_torch::arange(0, t, 1, tokens.device(), DType::I64)?;
    let tok_emb = one_hot(tokens, v, wte.dtype())?.matmul(wte);
    let pos_emb = one_hot(&positions, cfg.seq, wpe.dtype())?.matmul(wpe);
    let mut x = tok_emb + pos_emb;
    let n_block = GPT2_BLOCK_INPUT_NAMES.len();
    let blocks_end = GPT2_LEADING_INPUTS + cfg.layers * n_block;
    for p in xs[GPT2_LEADING_INPUTS..blocks_end].chunks(n_block) {
        x = gpt2_block(cfg, &x, p)?;
    }
    let (ln_w, ln_b) = (&xs[blocks_end], &xs[blocks_end + 1]);
    let x = x.layer_norm(&[c], Some(ln_w), Some(ln_b), 1e-5);
    let logits = x.matmul(&wte.t());
    Ok(vec![logits.reshape(&[b * t, v]).cross_entropy(targets)])
}

// ---------------------------------------------------------------------------------------------
// The CPU workloads of `thunder bench` (issue 7); `--sections issue7` of peer/torch_peer.py
// times the same ones in PyTorch.

/// Elements of the large elementwise chains: 2^24 f32, a 64 MiB buffer.
pub const BIG_NUMEL: i64 = 1 << 24;
/// `x * 1.01 + 0.1` four times: the 8-op chain.
pub const CHAIN8_REPEATS: usize = 4;
/// `tanh(x * 1.01 + 0.1)` four times.
pub const TANH_REPEATS: usize = 4;
/// Square sgemm size.
pub const SGEMM_N: i64 = 2048;

/// The 8-op chain: `x = x * 1.01 + 0.1`, four times.
pub fn chain8(xs: &[Tensor]) -> Vec<Tensor> {
    vec![scale_shift(&xs[0], CHAIN8_REPEATS)]
}

/// `x = tanh(x * 1.01 + 0.1)`, four times.
pub fn tanh4(xs: &[Tensor]) -> Vec<Tensor> {
    vec![tanh_scale_shift(&xs[0], TANH_REPEATS)]
}

/// `a @ b`.
pub fn matmul2(xs: &[Tensor]) -> Vec<Tensor> {
    vec![xs[0].matmul(&xs[1])]
}

/// The bf16 MLP layer benchmark (a GPT-2 small MLP on 512 tokens): rows, width, hidden.
pub const MLP_BF16: (i64, i64, i64) = (512, 768, 3072);

/// `x: bf16[rows, width]`, `w1: [hidden, width]`, `b1`, `w2: [width, hidden]`, `b2`, every
/// one with `requires_grad`, normal values scaled by 0.05 for the weights.
pub fn mlp_bf16_inputs(seed: u64) -> thunder_core::Result<Vec<Array>> {
    let (r, c, h) = MLP_BF16;
    let shapes: [(Vec<i64>, f64); 5] = [
        (vec![r, c], 1.0),
        (vec![h, c], 0.05),
        (vec![h], 0.05),
        (vec![c, h], 0.05),
        (vec![c], 0.05),
    ];
    shapes
        .iter()
        .enumerate()
        .map(|(i, (shape, scale))| {
            let v: Vec<f64> = Array::random(shape, DType::F64, seed ^ (i as u64 + 1))?
                .to_f64_vec()?
                .into_iter()
                .map(|x| x * scale)
                .collect();
            Ok(Array::from_f64(&v, shape, DType::BF16)?.with_requires_grad(true))
        })
        .collect()
}

/// `mean(linear(gelu_tanh(linear(x, w1, b1)), w2, b2))`, in the inputs' dtype.
pub fn mlp_bf16_loss(xs: &[Tensor]) -> thunder_core::Result<Vec<Tensor>> {
    let y = xs[0]
        .linear(&xs[1], Some(&xs[2]))
        .gelu("tanh")
        .linear(&xs[3], Some(&xs[4]));
    Ok(vec![y.mean(None, false)])
}

/// The block of the GPT-2 block benchmark: B 2, T 128, C 256, 4 heads (`layers` and `vocab`
/// are not used by a lone block).
pub const GPT2_BLOCK: Gpt2Config = Gpt2Config {
    layers: 1,
    embd: 256,
    heads: 4,
    seq: 128,
    vocab: 0,
    batch: 2,
};

/// `x`, then the block's weights.
pub fn gpt2_block_input_names() -> Vec<&'static str> {
    std::iter::once("x").chain(GPT2_BLOCK_INPUT_NAMES).collect()
}

/// `x: f32[B, T, C]` and the 12 weights, all with `requires_grad` (the backward computes the
/// gradient of the block's input too, as in a model).
pub fn gpt2_block_input_types(cfg: &Gpt2Config) -> Vec<TensorType> {
    std::iter::once(weight_type(vec![cfg.batch, cfg.seq, cfg.embd]))
        .chain(gpt2_block_weight_types(cfg.embd))
        .collect()
}

/// Inputs for [`gpt2_block_input_types`]: `x` from N(0, 1), weights as [`gpt2_inputs`]'s.
pub fn gpt2_block_inputs(cfg: &Gpt2Config, seed: u64, scale: f64) -> Vec<Array> {
    gpt2_block_input_types(cfg)
        .iter()
        .zip(gpt2_block_input_names())
        .enumerate()
        .map(|(i, (ty, name))| {
            let scale = if name == "x" { 1.0 } else { scale };
            gpt2_weight(ty, name, seed ^ (i as u64 + 1), scale)
        })
        .collect()
}

/// The loss of the GPT-2 block benchmark: `mean(block(x)^2)`; inputs as
/// [`gpt2_block_input_types`].
pub fn gpt2_block_loss(cfg: &Gpt2Config, xs: &[Tensor]) -> thunder_core::Result<Vec<Tensor>> {
    let y = gpt2_block(cfg, &xs[0], &xs[1..13])?;
    Ok(vec![(&y * &y).mean(None, false)])
}
