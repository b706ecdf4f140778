//! The generated CUDA source of representative regions, checked as golden text (CI has no GPU:
//! this is where codegen changes show up). `THUNDER_BLESS=1 cargo test -p thunder-cuda-fuser`
//! rewrites the files; review the diff like code. A mismatch prints a unified diff.

mod common;

use common::{check_golden, view_of};
use thunder_cuda_fuser::{codegen, plan, support};

/// The kernels of the whole trace planned as one region, and their source.
fn generate(text: &str) -> (Vec<plan::Kernel>, String) {
    let (kernels, _, source) = common::generate(text);
    (kernels, source)
}

const CHAIN8: &str = r#"def computation(x):
  # x: "cuda:0 f32[16777216]"
  t0 = prims.mul(x, 1.01)
  t1 = prims.add(t0, 0.1)
  t2 = prims.mul(t1, 1.01)
  t3 = prims.add(t2, 0.1)
  t4 = prims.mul(t3, 1.01)
  t5 = prims.add(t4, 0.1)
  t6 = prims.mul(t5, 1.01)
  t7 = prims.add(t6, 0.1)
  return (t7,)
"#;

#[test]
fn chain_of_eight_is_one_vectorized_kernel() {
    let (kernels, text) = generate(CHAIN8);
    assert_eq!(kernels.len(), 1);
    assert!(text.contains("uint4"), "16-byte loads expected");
    check_golden("chain8", &text);
}

const SOFTMAX: &str = r#"def computation(x):
  # x: "cuda:0 f32[64, 4096]"
  t0 = ltorch.softmax(x, -1)
  return (t0,)
"#;

#[test]
fn softmax_is_one_block_per_row_kernel() {
    let (kernels, text) = generate(SOFTMAX);
    assert_eq!(kernels.len(), 1, "{text}");
    assert_eq!(kernels[0].reductions.len(), 2);
    assert!(text.contains("block_reduce<float>(acc"), "{text}");
    // f32 outputs keep the accurate exp and division.
    assert!(
        text.contains("expf(v") && !text.contains("fast_exp2(("),
        "{text}"
    );
    assert!(text.contains(" / v"), "{text}");
    check_golden("softmax", &text);
}

const LAYER_NORM_BF16: &str = r#"def computation(x, w, b):
  # x: "cuda:0 bf16[8, 768]"
  # w: "cuda:0 bf16[768]"
  # b: "cuda:0 bf16[768]"
  t0 = ltorch.layer_norm(x, [768], w, b, 1e-05)
  return (t0,)
"#;

#[test]
fn bf16_layer_norm_is_one_kernel_computed_in_f32() {
    let (kernels, text) = generate(LAYER_NORM_BF16);
    assert_eq!(kernels.len(), 1, "{text}");
    assert!(text.contains("bf16_to_f32("), "{text}");
    assert!(text.contains("f32_to_bf16("), "{text}");
    // 16-byte loads, a block of 96 threads (768 / 8), and the row read from memory once,
    // pipelined: each block loads its first row before the row loop and its next row at the
    // top of each, and every pass takes the row from registers. The weight and bias, the same
    // for every row, are loaded once, before the loop.
    assert!(text.contains("__launch_bounds__(96)"), "{text}");
    assert_eq!(
        text.matches("next_n0[it] = *reinterpret_cast").count(),
        2,
        "{text}"
    );
    assert!(text.contains("if (r + (ix_t)gridDim.x < rows) {"), "{text}");
    assert_eq!(text.matches("= cache_n0[it];").count(), 3, "{text}");
    let before_loop = text.split("for (ix_t r = ").next().unwrap_or_default();
    assert!(
        before_loop.contains("hoist_n13[it] = *reinterpret_cast"),
        "{text}"
    );
    assert!(
        before_loop.contains("hoist_n16[it] = *reinterpret_cast"),
        "{text}"
    );
    check_golden("layer_norm_bf16", &text);
}

const LAYER_NORM_BF16_GPT2: &str = r#"def computation(x, w, b):
  # x: "cuda:0 bf16[8192, 768]"
  # w: "cuda:0 bf16[768]"
  # b: "cuda:0 bf16[768]"
  t0 = ltorch.layer_norm(x, [768], w, b, 1e-05)
  return (t0,)
"#;

#[test]
fn many_short_rows_get_a_warp_each() {
    // 8192 rows of 96 vectors: a warp per row (three vectors a lane, held in registers),
    // four rows a block, the partials combined by shuffles with no block barrier.
    let (kernels, launches, text) = common::generate(LAYER_NORM_BF16_GPT2);
    assert_eq!(kernels.len(), 1, "{text}");
    assert_eq!(
        launches,
        vec![codegen::Launch::WarpRows {
            rows: 8192,
            rows_per_block: 4,
            lanes: 32
        }]
    );
    assert!(text.contains("__launch_bounds__(128)"), "{text}");
    assert!(text.contains("uint4 cache_n0[3];"), "{text}");
    // The weight and bias, read only by the output pass, are loaded with the row in the
    // first pass and kept in registers.
    assert_eq!(
        text.matches("cache_n13[it] = *reinterpret_cast").count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.matches("cache_n16[it] = *reinterpret_cast").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("= cache_n16[it];").count(), 1, "{text}");
    // Row loads are not streamed by default (`stream=0`, see `RowVector::stream_loads`).
    assert!(!text.contains("__ldcs("), "{text}");
    assert_eq!(
        text.matches("warp_reduce<32, float>(acc").count(),
        2,
        "{text}"
    );
    let body = text.split("extern \"C\"").nth(1).unwrap_or_default();
    assert!(!body.contains("block_reduce"), "{text}");
    check_golden("layer_norm_bf16_gpt2", &text);
}

const SOFTMAX_BF16_4096: &str = r#"def computation(x):
  # x: "cuda:0 bf16[8192, 4096]"
  t0 = ltorch.softmax(x, -1)
  return (t0,)
"#;

#[test]
fn long_rows_keep_two_vectors_a_thread_where_the_rows_fill_the_gpu() {
    // 512 vectors a row: 256 threads of two (in registers) rather than 512 of one.
    let (_, launches, text) = common::generate(SOFTMAX_BF16_4096);
    assert_eq!(
        launches,
        vec![codegen::Launch::BlockPerRow {
            rows: 8192,
            block: 256
        }]
    );
    assert!(text.contains("uint4 cache_n0[2];"), "{text}");
    // bf16 outputs only: exp as the hardware's exp2 of a scaled argument, and the division by
    // the row's sum as a product with its reciprocal (within a few f32 ulps).
    assert!(text.contains("fast_exp2((v4) * 1.44269504089f)"), "{text}");
    assert!(!text.contains("expf(v"), "{text}");
    // The output, rounded to bf16 already, is stored by its top half.
    assert!(text.contains("s_out0[j] = bf16_bits(v"), "{text}");
    assert!(text.contains("((v5) * (1.0f / (v7)))"), "{text}");
    check_golden("softmax_bf16_4096", &text);
}

/// A layer_norm or rms_norm of `dtype` over 8192 rows of `cols`, with its weight (and bias).
fn norm(op: &str, dtype: &str, cols: i64) -> String {
    let bias = op == "layer_norm";
    let mut text = format!(
        "def computation(x, w{}):\n  # x: \"cuda:0 {dtype}[8192, {cols}]\"\n  # w: \"cuda:0 {dtype}[{cols}]\"\n",
        if bias { ", b" } else { "" }
    );
    if bias {
        text.push_str(&format!("  # b: \"cuda:0 {dtype}[{cols}]\"\n"));
        text.push_str(&format!(
            "  t0 = ltorch.layer_norm(x, [{cols}], w, b, 1e-05)\n"
        ));
    } else {
        text.push_str(&format!("  t0 = ltorch.rms_norm(x, [{cols}], w, 1e-06)\n"));
    }
    text.push_str("  return (t0,)\n");
    text
}

/// Rows are pipelined where the H100 showed it pays (`RowVector::plan_pipeline`): a weight
/// to hoist, one row array, blocks of at most 256. A softmax (no weight) and f32 rows of 4096
/// (blocks of 512) keep a block a row; rows of 768 keep a warp each.
#[test]
fn rows_are_pipelined_where_a_weight_is_hoisted() {
    for (op, dtype, cols, block) in [
        ("layer_norm", "bf16", 4096, 256),
        ("rms_norm", "bf16", 4096, 256),
        ("layer_norm", "bf16", 2048, 128),
        ("rms_norm", "f16", 2048, 128),
    ] {
        let (_, launches, text) = common::generate(&norm(op, dtype, cols));
        assert_eq!(
            launches,
            vec![codegen::Launch::PipelinedRows {
                rows: 8192,
                block,
                per_sm: 8
            }],
            "{op} {dtype} {cols}"
        );
        let before_loop = text.split("for (ix_t r = ").next().unwrap_or_default();
        assert!(before_loop.contains("hoist_n"), "{text}");
        assert!(before_loop.contains("next_n0[it] = "), "{text}");
    }
    let (_, launches, _) = common::generate(&norm("layer_norm", "f32", 4096));
    assert!(
        matches!(
            launches[..],
            [codegen::Launch::BlockPerRow { block: 512, .. }]
        ),
        "{launches:?}"
    );
    let (_, launches, _) = common::generate(&norm("layer_norm", "bf16", 768));
    assert!(
        matches!(launches[..], [codegen::Launch::WarpRows { .. }]),
        "{launches:?}"
    );
}

const BIAS_GRAD: &str = r#"def computation(g):
  # g: "cuda:0 f32[256, 512]"
  t0 = prims.sum(g, [0])
  return (t0,)
"#;

#[test]
fn a_column_sum_splits_each_column_over_a_team_of_a_tile() {
    let (kernels, text) = generate(BIAS_GRAD);
    assert_eq!(kernels.len(), 1);
    assert_eq!(
        codegen::generate(&kernels[0], "k").launch,
        // 16 tiles of 8 threads x 4 f32 columns (128 bytes); 256 rows are too few to split.
        codegen::Launch::BlockPerRow {
            rows: 16,
            block: 256
        }
    );
    assert!(text.contains("team_reduce_v<float, 8, 32, 4>"), "{text}");
    check_golden("column_sum", &text);
}

const BIAS_GELU_F16: &str = r#"def computation(x, b):
  # x: "cuda:0 f16[128, 1024]"
  # b: "cuda:0 f16[1024]"
  t0 = ltorch.add(x, b)
  t1 = ltorch.gelu(t0, "tanh")
  return (t1,)
"#;

#[test]
fn broadcast_bias_and_tanh_gelu_in_f16() {
    let (kernels, text) = generate(BIAS_GELU_F16);
    assert_eq!(kernels.len(), 1, "{text}");
    // The bias is read per element from coordinates, the activations 16 bytes at a time.
    assert!(text.contains("in1[i1]"), "{text}");
    check_golden("bias_gelu_f16", &text);
}

const SCALAR_AND_EMPTY: &str = r#"def computation(a, e):
  # a: "cuda:0 f32[]"
  # e: "cuda:0 f64[0]"
  t0 = prims.exp(a)
  t1 = prims.neg(e)
  return (t0, t1)
"#;

#[test]
fn scalar_and_empty_shapes_plan_and_generate() {
    let (kernels, text) = generate(SCALAR_AND_EMPTY);
    assert_eq!(kernels.len(), 2, "{text}");
    assert!(text.contains("n = 1"), "{text}");
    assert!(text.contains("n = 0"), "{text}");
    check_golden("scalar_and_empty", &text);
}

#[test]
fn cpu_tensors_are_not_claimed() {
    let view = view_of(&CHAIN8.replace("cuda:0", "cpu"));
    assert!(view.ops.iter().all(|op| !support::accepts(&view, op)));
}

const CROSS_ENTROPY: &str = r#"def computation(a, t):
  # a: "cuda:0 f32[32, 1000]"
  # t: "cuda:0 i64[32]"
  t0 = ltorch.cross_entropy(a, t)
  return (t0,)
"#;

#[test]
fn cross_entropy_builds_its_one_hot_in_registers() {
    let (kernels, text) = generate(CROSS_ENTROPY);
    // The one-hot is an iota compared with the target, never a tensor in memory.
    assert!(kernels.iter().all(|k| k.inputs.len() <= 2), "{text}");
    assert!(text.contains("i64_t)(i"), "{text}");
    check_golden("cross_entropy", &text);
}

const SLICE_TRANSPOSE: &str = r#"def computation(x):
  # x: "cuda:0 f32[64, 96]"
  q, k, v = ltorch.split(x, [32, 32, 32], 1)
  t = prims.transpose(k, [1, 0])
  f = prims.flip(v, [0])
  s = prims.slice(t, [0, 0], [32, 64], [1, 1])
  r = prims.transpose(s, [1, 0])
  y = ltorch.mul(q, r)
  z = ltorch.add(y, f)
  return (z,)
"#;

#[test]
fn slices_transposes_and_flips_fold_into_the_loads() {
    let (kernels, text) = generate(SLICE_TRANSPOSE);
    assert_eq!(kernels.len(), 1, "{text}");
    // The three thirds of x are read in place: at base 0, 32 and 64 (flipped: 63 * 96 + 64).
    assert!(
        text.contains("in0[32 + i0 * 96 + i1]") && text.contains("in0[6112 + i0 * -96 + i1]"),
        "{text}"
    );
    check_golden("slice_transpose_flip", &text);
}

const ARANGE_TRIL: &str = r#"def computation(x):
  # x: "cuda:0 f32[6, 6]"
  r = ltorch.arange(0, 6, 1, devices.cuda0, dtypes.i64)
  y = ltorch.tril(x, 0)
  return (y, r)
"#;

/// An index ramp with no strided load beside it still needs the element's coordinates (on an
/// H100 this kernel once failed to compile: `i0` undefined).
#[test]
fn index_ramps_alone_declare_their_coordinates() {
    let (_, text) = generate(ARANGE_TRIL);
    assert!(text.contains("const ix_t i0 ="), "{text}");
    check_golden("arange_tril", &text);
}

const PAD: &str = r#"def computation(x):
  # x: "cuda:0 f32[2, 3]"
  y = prims.pad(x, 0.0, [1, 0, 0, 0, 2, 0])
  return (y,)
"#;

#[test]
fn pads_read_inside_their_bounds_only() {
    let (kernels, text) = generate(PAD);
    assert_eq!(kernels.len(), 1, "{text}");
    assert!(
        text.contains("i0 >= 1 && i0 < 3 && i1 >= 0 && i1 < 3"),
        "{text}"
    );
    check_golden("pad", &text);
}

#[test]
fn interior_padding_is_not_claimed() {
    let view = view_of(&PAD.replace("[1, 0, 0, 0, 2, 0]", "[1, 0, 1, 0, 2, 0]"));
    assert!(view.ops.iter().all(|op| !support::accepts(&view, op)));
}

const CAT: &str = r#"def computation(a, b):
  # a: "cuda:0 f32[2, 3]"
  # b: "cuda:0 f32[2, 5]"
  y = prims.cat(1, a, b)
  return (y,)
"#;

#[test]
fn concatenations_read_each_part_in_its_range() {
    let (kernels, text) = generate(CAT);
    assert_eq!(kernels.len(), 1, "{text}");
    assert!(text.contains("i1 >= 0 && i1 < 3"), "{text}");
    check_golden("cat", &text);
}

const CAT_OF_HEADS: &str = r#"def computation(q, k, v):
  # q: "cuda:0 bf16[2, 3, 4, 8]"
  # k: "cuda:0 bf16[2, 3, 4, 8]"
  # v: "cuda:0 bf16[2, 3, 4, 8]"
  t0 = prims.transpose(q, [0, 2, 1, 3])
  t1 = prims.transpose(k, [0, 2, 1, 3])
  t2 = prims.transpose(v, [0, 2, 1, 3])
  y = prims.cat(3, t0, t1, t2)
  return (y,)
"#;

/// Pieces whose bounds along the innermost dim are multiples of the vector (8 bf16) are read
/// 16 bytes at a time, each vector wholly inside one piece (its guard checked once), even
/// through a transpose that keeps the innermost dim.
#[test]
fn a_cat_of_whole_vectors_reads_each_piece_in_vectors() {
    let (kernels, text) = generate(CAT_OF_HEADS);
    assert_eq!(kernels.len(), 1, "{text}");
    assert_eq!(text.matches("uint4 r_n").count(), 3, "{text}");
    assert!(text.contains("if (i0 >= 0 && i0 < 2"), "{text}");
    check_golden("cat_of_heads", &text);
}

const DIGAMMA: &str = r#"def computation(x):
  # x: "cuda:0 f32[8]"
  y = prims.digamma(x)
  return (y,)
"#;

/// Math the CUDA library lacks comes with its device function, once, in the kernels using it.
#[test]
fn digamma_brings_its_device_function() {
    let (_, text) = generate(DIGAMMA);
    assert_eq!(
        text.matches("__device__ double thunder_digamma(").count(),
        1,
        "{text}"
    );
    assert!(text.contains("thunder_digammaf("), "{text}");
    check_golden("digamma", &text);
}

const LOSS_MEAN_BF16: &str = r#"def computation(y, r):
  # y: "cuda:0 bf16[8, 1024, 768]"
  # r: "cuda:0 bf16[8, 1024, 768]"
  t0 = ltorch.mul(y, r)
  t1 = ltorch.mean(t0)
  return (t1,)
"#;

#[test]
fn a_loss_mean_over_one_long_row_is_split_between_blocks() {
    let (kernels, text) = generate(LOSS_MEAN_BF16);
    assert_eq!(kernels.len(), 1, "{text}");
    let rows = 8 * 1024 * 768 / (1024 * 16);
    assert_eq!(
        codegen::generate(&kernels[0], "k").launch,
        codegen::Launch::SplitRows {
            rows: 1,
            block: 1024,
            splits: rows,
            scratch: 8 * u64::from(rows) + 4,
            counters: 8 * u64::from(rows),
        }
    );
    assert!(text.contains("atomicAdd("), "{text}");
    assert!(text.contains("split_scratch"), "{text}");
    check_golden("loss_mean_split", &text);
}

const TRANSPOSE_BF16: &str = r#"def computation(x, y):
  # x: "cuda:0 bf16[4, 384, 256]"
  # y: "cuda:0 bf16[4, 256, 384]"
  t0 = prims.transpose(x, [0, 2, 1])
  t1 = ltorch.add(t0, y)
  return (t1,)
"#;

#[test]
fn a_transposed_read_is_staged_through_shared_memory_tiles() {
    let (kernels, text) = generate(TRANSPOSE_BF16);
    assert_eq!(kernels.len(), 1, "{text}");
    assert_eq!(
        codegen::generate(&kernels[0], "k").launch,
        codegen::Launch::Tiles {
            tiles: 4 * 8 * 12,
            block: 256
        }
    );
    // x is staged (read along its dim 1), y read in place along the last dim.
    assert!(text.contains("__shared__ u16_t tile"), "{text}");
    assert!(text.contains("in1[e]") || text.contains("in1[i0"), "{text}");
    check_golden("transpose_tiles", &text);
}

const LOG_SOFTMAX_VOCAB_BF16: &str = r#"def computation(x):
  # x: "cuda:0 bf16[4, 50257]"
  t0 = ltorch.log_softmax(x, -1)
  return (t0,)
"#;

#[test]
fn odd_length_rows_peel_a_scalar_head_and_tail_off_vector_loops() {
    let (kernels, text) = generate(LOG_SOFTMAX_VOCAB_BF16);
    assert_eq!(kernels.len(), 1, "{text}");
    // Rows of 50,257 start at every alignment: a head up to the 16-byte boundary, 8-wide
    // vectors, then the tail, in each of the three passes.
    assert!(
        text.contains("const ix_t head_ = (8 - (r * cols) % 8) % 8"),
        "{text}"
    );
    assert_eq!(text.matches("c0 < body_end").count(), 3, "{text}");
    assert_eq!(text.matches("c = body_end + lane").count(), 3, "{text}");
    // Without room to stage the row (48 KiB, the portable limit) it is read in every pass.
    assert_eq!(
        text.matches("reinterpret_cast<const uint4*>(in0").count(),
        3,
        "{text}"
    );
    check_golden("log_softmax_vocab_bf16", &text);
}

const ARANGE_BF16: &str = r#"def computation(x):
  # x: "cuda:0 bf16[300]"
  r = ltorch.arange(0, 300, 1, devices.cuda0, dtypes.bf16)
  t0 = ltorch.add(x, r)
  return (r, t0)
"#;

#[test]
fn iotas_in_bf16_are_rounded_like_every_bf16_value() {
    let (_, text) = generate(ARANGE_BF16);
    // 257 is no bf16: the iota is rounded before the sum reads it (PyTorch's arange in bf16
    // holds 256 there), and every bf16 value is stored by its top half.
    assert!(
        text.contains("= round_bf16((0.0f + 1.0f * (float)(i0)));"),
        "{text}"
    );
    assert!(text.contains("s_out0[j] = bf16_bits(v0);"), "{text}");
    assert!(!text.contains("f32_to_bf16(v"), "{text}");
}

/// Offsets are 32-bit where every one the kernel computes stays below 2^30, and 64-bit where
/// the iteration space or a load's reach does not (a slice near the end of a large input).
#[test]
fn offsets_are_32_bit_only_where_every_one_fits() {
    let neg = |shape: &str| {
        format!(
            "def computation(x):\n  # x: \"cuda:0 f32[{shape}]\"\n  t0 = ltorch.neg(x)\n  return (t0,)\n"
        )
    };
    let (_, text) = generate(&neg("8192, 4096"));
    assert!(text.contains("typedef int ix_t;"), "{text}");
    let (_, text) = generate(&neg("32768, 32768"));
    assert!(text.contains("typedef long long ix_t;"), "{text}");
    // The output is small, but the slice reads from element 2^30 - 64 on.
    let tail = r#"def computation(x):
  # x: "cuda:0 f32[16384, 65536]"
  s = prims.slice(x, [16383, 65472], [16384, 65536], [1, 1])
  t0 = ltorch.neg(s)
  return (t0,)
"#;
    let (_, text) = generate(tail);
    assert!(text.contains("typedef long long ix_t;"), "{text}");
    assert!(text.contains("1073741760"), "{text}");
    let (_, text) = generate(
        &tail
            .replace("16383, 65472", "0, 0")
            .replace("[16384, 65536], [1", "[1, 64], [1"),
    );
    assert!(text.contains("typedef int ix_t;"), "{text}");
}
