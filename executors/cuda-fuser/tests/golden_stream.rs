//! Streamed row loads (`stream=1` in the row tuning, off by default; read once per process:
//! hence a test binary of its own).

mod common;

use thunder_cuda_fuser::codegen;

const LAYER_NORM: &str = r#"def computation(x, w, b):
  # x: "cuda:0 bf16[8192, 768]"
  # w: "cuda:0 bf16[768]"
  # b: "cuda:0 bf16[768]"
  t0 = ltorch.layer_norm(x, [768], w, b, 1e-05)
  return (t0,)
"#;

/// A warp-per-row kernel streams its row (`__ldcs`) only where no later kernel of the region
/// reads the same tensor: here a column sum reads `x` after the layer_norm.
#[test]
fn rows_that_a_later_kernel_reads_again_are_not_streamed() {
    std::env::set_var("THUNDER_CUDA_FUSER_ROWS", "stream=1");
    let (kernels, launches, text) = common::generate(&LAYER_NORM.replace(
        "  return (t0,)",
        "  t1 = ltorch.sum(x, [0])\n  return (t0, t1)",
    ));
    assert_eq!(kernels.len(), 2, "{text}");
    assert!(
        matches!(launches[0], codegen::Launch::WarpRows { .. }),
        "{launches:?}"
    );
    assert!(kernels[0].inputs[0].read_later, "{text}");
    assert!(!text.contains("__ldcs"), "{text}");
    // Alone, it streams.
    let (kernels, _, text) = common::generate(LAYER_NORM);
    assert!(!kernels[0].inputs[0].read_later);
    assert!(text.contains("__ldcs"), "{text}");
}
