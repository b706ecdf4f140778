//! Rows staged in shared memory (the default tuning, spelt out as `THUNDER_CUDA_FUSER_ROWS=
//! stage=1,peel_cache=0` since the variable is read once per process: hence a test binary of
//! its own).
//! `scripts/golden_cpu_run.py` runs both goldens on the CPU against numpy.

mod common;

use common::check_golden;
use thunder_cuda_fuser::codegen;

fn staging_on() {
    std::env::set_var("THUNDER_CUDA_FUSER_ROWS", "stage=1,peel_cache=0");
}

const LOG_SOFTMAX_VOCAB_BF16: &str = r#"def computation(x):
  # x: "cuda:0 bf16[4, 50257]"
  t0 = ltorch.log_softmax(x, -1)
  return (t0,)
"#;

/// An H100's blocks may opt in to 227 KiB of shared memory, and form clusters.
const H100: codegen::Target = codegen::Target {
    max_shared_bytes: 227 * 1024 - 1024,
    clusters: true,
};

/// The same without clusters (what a device before sm_90 would be with that much).
const H100_WITHOUT_CLUSTERS: codegen::Target = codegen::Target {
    clusters: false,
    ..H100
};

#[test]
fn vocabulary_rows_are_staged_in_shared_memory_where_the_device_has_room() {
    staging_on();
    let (kernels, launches, text) = common::generate_for(LOG_SOFTMAX_VOCAB_BF16, H100);
    assert_eq!(kernels.len(), 1, "{text}");
    // 6,283 sixteen-byte slots (50,257 / 8, rounded up): the row is copied there once, before
    // the first pass, and the three passes read the slots.
    assert_eq!(
        launches,
        vec![codegen::Launch::StagedRows {
            rows: 4,
            block: 512,
            shared_bytes: 6283 * 16,
        }]
    );
    // Half-type staged rows run 512 threads a row (two rows a multiprocessor).
    assert_eq!(
        text.matches("stage_copy(&stage_n0[slot]").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("stage_wait();").count(), 1, "{text}");
    assert_eq!(text.matches("= stage_n0[slot];").count(), 3, "{text}");
    assert_eq!(
        text.matches("reinterpret_cast<const uint4*>(in0").count(),
        1,
        "{text}"
    );
    // The scalar head and tail are read from memory in every pass.
    assert_eq!(text.matches("c = body_end + lane").count(), 3, "{text}");
    check_golden("log_softmax_vocab_bf16_staged", &text);
    // Without the opt-in (48 KiB), the row is read three times, as before.
    let (_, launches, _) = common::generate_for(LOG_SOFTMAX_VOCAB_BF16, codegen::Target::PORTABLE);
    assert!(matches!(launches[0], codegen::Launch::BlockPerRow { .. }));
}

#[test]
fn a_softmax_gradient_over_vocabulary_rows_stages_both_operands() {
    staging_on();
    let (kernels, launches, text) =
        common::generate_for(&common::softmax_grad("bf16", 50257), H100);
    assert_eq!(kernels.len(), 1, "{text}");
    // The output and the gradient, 6,283 slots each.
    assert_eq!(
        launches,
        vec![codegen::Launch::StagedRows {
            rows: 4,
            block: 512,
            shared_bytes: 2 * 6283 * 16,
        }]
    );
    assert_eq!(text.matches("stage_copy(&stage_n").count(), 2, "{text}");
    assert_eq!(text.matches("= stage_n").count(), 4, "{text}");
    check_golden("softmax_grad_vocab_bf16_staged", &text);
    // f32 rows of the same length: one block holds only the first operand (201 KiB of 226)
    // and re-reads the other from L2 ...
    let f32_text = common::softmax_grad("f32", 50257);
    let (_, launches, text) = common::generate_for(&f32_text, H100_WITHOUT_CLUSTERS);
    assert_eq!(
        launches,
        vec![codegen::Launch::StagedRows {
            rows: 4,
            block: 1024,
            shared_bytes: 12565 * 16,
        }]
    );
    assert_eq!(text.matches("stage_copy(&stage_n").count(), 1, "{text}");
    assert!(!text.contains("cluster"), "{text}");
}

/// ... where clusters exist, a pair of blocks shares each row: each stages half of both
/// operands (6,283 of the 12,565 slots), reduces its half, and the two partials are added in
/// rank order through distributed shared memory, so both blocks scale with the same sum.
#[test]
fn a_pair_of_blocks_shares_a_row_that_one_cannot_stage() {
    staging_on();
    let f32_text = common::softmax_grad("f32", 50257);
    let (kernels, launches, text) = common::generate_for(&f32_text, H100);
    assert_eq!(kernels.len(), 1, "{text}");
    assert_eq!(
        launches,
        vec![codegen::Launch::ClusterRows {
            rows: 4,
            block: 1024,
            shared_bytes: 2 * 6283 * 16,
            cluster: 2,
        }]
    );
    assert!(
        text.contains("__cluster_dims__(2, 1, 1) __launch_bounds__(1024)"),
        "{text}"
    );
    assert!(
        text.contains("for (ix_t r = blockIdx.x / 2; r < rows; r += gridDim.x / 2)"),
        "{text}"
    );
    // Both operands staged, the second after the first's 6,283 slots.
    assert_eq!(text.matches("stage_copy(&stage_n").count(), 2, "{text}");
    assert!(text.contains("row_stage + 100528)"), "{text}");
    // The block's half of the vectors; rank 0 takes the scalar head and tail.
    assert!(
        text.contains("for (ix_t c0 = lo + lane * 4; c0 < hi; c0 += team * 4)"),
        "{text}"
    );
    assert_eq!(text.matches("c < head_mine;").count(), 2, "{text}");
    assert_eq!(text.matches("c = tail_from + lane;").count(), 2, "{text}");
    // One partial published, combined in rank order, and a barrier closing each row.
    assert!(
        text.contains("SumOp()(cluster_ld(&cpart5, 0), cluster_ld(&cpart5, 1))"),
        "{text}"
    );
    assert_eq!(text.matches("cluster_sync();").count(), 2, "{text}");
    check_golden("softmax_grad_vocab_f32_cluster", &text);
    // Rows of 65,536 f32: two blocks would each stage 2 x 128 KiB; four blocks a row, a
    // quarter of each operand each.
    let (_, launches, text) = common::generate_for(&common::softmax_grad("f32", 65536), H100);
    assert_eq!(
        launches,
        vec![codegen::Launch::ClusterRows {
            rows: 4,
            block: 1024,
            shared_bytes: 2 * 4096 * 16,
            cluster: 4,
        }]
    );
    assert!(
        text.contains("SumOp()(SumOp()(SumOp()(cluster_ld(&cpart5, 0), cluster_ld(&cpart5, 1)), cluster_ld(&cpart5, 2)), cluster_ld(&cpart5, 3))"),
        "{text}"
    );
    assert!(
        text.contains("share = ((cols - 0) / 4 + 4 - 1) / 4"),
        "{text}"
    );
    // Without clusters, one block a row.
    let (_, launches, _) = common::generate_for(&f32_text, H100_WITHOUT_CLUSTERS);
    assert!(
        matches!(launches[0], codegen::Launch::StagedRows { .. }),
        "{launches:?}"
    );
}
