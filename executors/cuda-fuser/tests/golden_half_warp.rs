//! Row teams of half a warp (`THUNDER_CUDA_FUSER_ROWS=warp_lanes=16`, read once per process:
//! hence a test binary of its own). Two rows a warp: a lane past the last row computes the
//! last row again, so that every lane of the warp takes part in the shuffles, and stores
//! nothing. `scripts/golden_cpu_run.py` runs the golden on the CPU against numpy.

mod common;

use common::check_golden;
use thunder_cuda_fuser::codegen::Launch;

#[test]
fn half_warp_teams_take_two_rows_a_warp() {
    std::env::set_var("THUNDER_CUDA_FUSER_ROWS", "warp_lanes=16");
    // 8191 rows: the last warp's second row does not exist.
    let text = r#"def computation(x, w, b):
  # x: "cuda:0 bf16[8191, 768]"
  # w: "cuda:0 bf16[768]"
  # b: "cuda:0 bf16[768]"
  t0 = ltorch.layer_norm(x, [768], w, b, 1e-05)
  return (t0,)
"#;
    let (_, launches, source) = common::generate(text);
    assert_eq!(
        launches,
        vec![Launch::WarpRows {
            rows: 8191,
            rows_per_block: 8,
            lanes: 16
        }]
    );
    assert!(source.contains("uint4 cache_n0[6];"), "{source}");
    assert_eq!(
        source.matches("warp_reduce<16, float>(acc").count(),
        2,
        "{source}"
    );
    assert!(source.contains("if (live) {"), "{source}");
    check_golden("layer_norm_bf16_half_warp", &source);
}
