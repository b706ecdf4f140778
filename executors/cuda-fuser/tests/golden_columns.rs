//! Golden sources of column reductions (sums over leading dims: bias and layer_norm weight
//! gradients), which `col_kernel` generates: vectors along the kept dim, one pass that also
//! stores the fused elementwise outputs, and the reduced dim split between blocks where there
//! are few column tiles. `THUNDER_BLESS=1` rewrites the files, as in `golden.rs`.

mod common;

use common::check_golden;
use thunder_cuda_fuser::codegen::Launch;

/// The launches of the whole trace planned as one region, and their source.
fn generate(text: &str) -> (Vec<Launch>, String) {
    let (_, launches, source) = common::generate(text);
    (launches, source)
}

const BIAS_GRAD_768_BF16: &str = r#"def computation(g, x):
  # g: "cuda:0 bf16[8, 1024, 768]"
  # x: "cuda:0 bf16[8, 1024, 768]"
  t0 = ltorch.mul(g, x)
  t1 = ltorch.sum(t0, [0, 1], False)
  return (t0, t1)
"#;

#[test]
fn a_bias_gradient_over_768_columns_splits_the_tokens_and_stores_its_product_once() {
    let (launches, text) = generate(BIAS_GRAD_768_BF16);
    // 768 bf16 columns: 12 tiles of 8 threads x 8 columns (128 bytes), 32 blocks each
    // over 256 of the 8192 tokens.
    assert_eq!(
        launches,
        vec![Launch::SplitRows {
            rows: 12,
            block: 256,
            splits: 32,
            scratch: 8 * 32 * 768 + 4 * 12,
            counters: 8 * 32 * 768,
        }],
        "{text}"
    );
    // 16-byte loads of both inputs and a 16-byte store of the product, in the one loop
    // that also accumulates: each input is read once.
    assert_eq!(
        text.matches("*reinterpret_cast<const uint4*>(in").count(),
        2,
        "{text}"
    );
    assert_eq!(
        text.matches("*reinterpret_cast<uint4*>(out0 + e0)").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("for (ix_t c = ").count(), 1, "{text}");
    assert!(
        text.contains("team_reduce_v<float, 8, 32, 8>(acc"),
        "{text}"
    );
    assert!(text.contains("atomicAdd("), "{text}");
    check_golden("column_bias_grad_768_bf16", &text);
}

const BIAS_GRAD_3072_BF16: &str = r#"def computation(g):
  # g: "cuda:0 bf16[8192, 3072]"
  t0 = ltorch.sum(g, [0], False)
  return (t0,)
"#;

#[test]
fn a_bias_gradient_over_3072_columns_is_split_less() {
    let (launches, text) = generate(BIAS_GRAD_3072_BF16);
    // 48 tiles of 64 columns; 11 blocks each make 528.
    assert_eq!(
        launches,
        vec![Launch::SplitRows {
            rows: 48,
            block: 256,
            splits: 11,
            scratch: 8 * 11 * 3072 + 4 * 48,
            counters: 8 * 11 * 3072,
        }]
    );
    assert_eq!(
        text.matches("*reinterpret_cast<const uint4*>(in0").count(),
        1,
        "{text}"
    );
    check_golden("column_bias_grad_3072_bf16", &text);
}

const ODD_COLUMNS_BF16: &str = r#"def computation(g):
  # g: "cuda:0 bf16[64, 50257]"
  t0 = ltorch.sum(g, [0], False)
  return (t0,)
"#;

#[test]
fn odd_column_counts_take_a_column_a_thread_and_enough_tiles_are_not_split() {
    let (launches, text) = generate(ODD_COLUMNS_BF16);
    // 64 threads side by side (128 bytes), 786 tiles: enough blocks without splitting.
    assert_eq!(
        launches,
        vec![Launch::BlockPerRow {
            rows: 50257u64.div_ceil(64),
            block: 256
        }]
    );
    assert!(!text.contains("uint4"), "{text}");
    assert!(
        text.contains("team_reduce_v<float, 64, 4, 1>(acc"),
        "{text}"
    );
    assert!(!text.contains("atomicAdd("), "{text}");
}

const LAYER_NORM_WEIGHT_GRAD_F32: &str = r#"def computation(g, x, m, s):
  # g: "cuda:0 f32[4, 250, 1000]"
  # x: "cuda:0 f32[4, 250, 1000]"
  # m: "cuda:0 f32[4, 250, 1]"
  # s: "cuda:0 f32[4, 250, 1]"
  t0 = ltorch.sub(x, m)
  t1 = ltorch.mul(t0, s)
  t2 = ltorch.mul(g, t1)
  t3 = ltorch.sum(t2, [0, 1], False)
  t4 = ltorch.sum(g, [0, 1], False)
  return (t3, t4)
"#;

#[test]
fn layer_norm_weight_and_bias_gradients_share_one_split_pass() {
    let (launches, text) = generate(LAYER_NORM_WEIGHT_GRAD_F32);
    assert_eq!(launches.len(), 1, "{text}");
    // The per-token mean and rstd are read per element (broadcast along the kept dim), the
    // activations and gradients 16 bytes at a time; both sums are split the same way.
    assert!(
        text.contains("*reinterpret_cast<const uint4*>(in0"),
        "{text}"
    );
    assert!(matches!(launches[0], Launch::SplitRows { .. }), "{text}");
    assert_eq!(
        text.matches("team_reduce_v<float, 8, 32, 4>(acc").count(),
        4,
        "{text}"
    );
}

const GELU_BWD_REGION_BF16: &str = r#"def computation(a, b, c):
  # a: "cuda:0 bf16[8, 1024, 2304]"
  # b: "cuda:0 bf16[8, 1024, 2304]"
  # c: "cuda:0 bf16[8, 1024, 2304]"
  t0 = ltorch.add(a, b)
  t1 = ltorch.add(t0, c)
  t2 = ltorch.sum(t1, [0, 1], False)
  return (t1, t2)
"#;

#[test]
fn the_gpt2_backward_sum_of_three_reads_each_input_once() {
    // The shape of the H200 dump (`ColumnTiles { rows: 2304, tile: 16 }`, 144 blocks, the
    // inputs read twice): now 36 tiles x 15 splits, one loop that sums and stores.
    let (launches, text) = generate(GELU_BWD_REGION_BF16);
    assert_eq!(
        launches,
        vec![Launch::SplitRows {
            rows: 36,
            block: 256,
            splits: 15,
            scratch: 8 * 15 * 2304 + 4 * 36,
            counters: 8 * 15 * 2304,
        }],
        "{text}"
    );
    assert_eq!(text.matches("for (ix_t c = ").count(), 1, "{text}");
    for i in 0..3 {
        assert_eq!(
            text.matches(&format!("reinterpret_cast<const uint4*>(in{i} + "))
                .count(),
            1,
            "{text}"
        );
    }
    assert_eq!(
        text.matches("*reinterpret_cast<uint4*>(out0 + e0)").count(),
        1,
        "{text}"
    );
}

const LN_WEIGHT_GRAD_BF16: &str = r#"def computation(g, x, mean, rstd):
  # g: "cuda:0 bf16[8, 1024, 768]"
  # x: "cuda:0 bf16[8, 1024, 768]"
  # mean: "cuda:0 f32[8, 1024, 1]"
  # rstd: "cuda:0 f32[8, 1024, 1]"
  t0 = ltorch.sub(x, mean)
  t1 = ltorch.mul(t0, rstd)
  t2 = ltorch.mul(g, t1)
  t3 = ltorch.sum(t2, [0, 1], False)
  return (t3,)
"#;

/// A layer norm's weight gradient reads its per-token mean and rstd (f32) once per token, not
/// per column: they do not bound the vector, so the bf16 columns are still read 16 bytes (8
/// columns) per thread, as in the bias gradient above.
#[test]
fn per_token_f32_statistics_do_not_narrow_the_column_vectors() {
    let (launches, text) = generate(LN_WEIGHT_GRAD_BF16);
    assert!(
        matches!(launches.as_slice(), [Launch::SplitRows { rows: 12, .. }]),
        "768 columns in 12 tiles of 64: {launches:?}\n{text}"
    );
    assert!(text.contains("tx * 8"), "{text}");
    assert!(
        text.contains("const uint4 r_n"),
        "16-byte column loads: {text}"
    );
}

/// Attention's qkv gradient after `passes::MergedCats`: dq, dk, dv ([B, H, T, D]) catted along
/// H of their [B, T, H, D] transposes, then the bias gradient's sum over (B, T).
const QKV_GRAD_CAT_OF_HEADS: &str = r#"def computation(dq, dk, dv):
  # dq: "cuda:0 bf16[8, 12, 1024, 64]"
  # dk: "cuda:0 bf16[8, 12, 1024, 64]"
  # dv: "cuda:0 bf16[8, 12, 1024, 64]"
  t0 = prims.transpose(dq, [0, 2, 1, 3])
  t1 = prims.transpose(dk, [0, 2, 1, 3])
  t2 = prims.transpose(dv, [0, 2, 1, 3])
  t3 = prims.cat(2, t0, t1, t2)
  t4 = prims.sum(t3, [0, 1])
  return (t3, t4)
"#;

/// The cat reads every head in place, 16 bytes at a time (a vector never crosses a head, D
/// being a multiple of 8), and the column sum reads the cat's output once: two kernels, where
/// three transposes were written before the cat.
#[test]
fn the_qkv_gradient_cats_the_heads_in_place_then_sums_the_columns() {
    let (launches, text) = generate(QKV_GRAD_CAT_OF_HEADS);
    assert_eq!(launches.len(), 2, "{text}");
    assert!(
        matches!(launches[0], Launch::Pointwise { .. }),
        "{launches:?}"
    );
    assert!(
        matches!(launches[1], Launch::SplitRows { .. }),
        "{launches:?}"
    );
    let cat = text
        .split("// launch: SplitRows")
        .next()
        .unwrap_or_default();
    assert_eq!(cat.matches("uint4 r_n").count(), 3, "{text}");
    check_golden("qkv_grad_cat_of_heads", &text);
}
