//! Peeled rows kept in registers beside staged ones (`THUNDER_CUDA_FUSER_ROWS=peel_cache=1`,
//! off by default, read once per process: hence a test binary of its own): the arrays that do
//! not fit half a thread's registers go to shared memory. `scripts/golden_cpu_run.py` runs
//! the golden on the CPU against numpy.

mod common;

use common::{check_golden, softmax_grad};
use thunder_cuda_fuser::codegen;

const H100: codegen::Target = codegen::Target {
    max_shared_bytes: 227 * 1024 - 1024,
    clusters: true,
};

#[test]
fn one_operand_of_a_gradient_is_kept_in_registers_and_the_other_staged() {
    std::env::set_var("THUNDER_CUDA_FUSER_ROWS", "peel_cache=1");
    // f32 rows of 30,001 (not a multiple of 4: peeled) on a 1024-thread block: eight 16-byte
    // vectors a thread hold a row, 32 registers, half of the 64 such a thread may use; the
    // second operand would need 32 more, so it is staged (7,501 slots).
    let (kernels, launches, text) = common::generate_for(&softmax_grad("f32", 30001), H100);
    assert_eq!(kernels.len(), 1, "{text}");
    assert_eq!(
        launches,
        vec![codegen::Launch::StagedRows {
            rows: 4,
            block: 1024,
            shared_bytes: 7501 * 16,
        }]
    );
    assert_eq!(text.matches("uint4 cache_n").count(), 1, "{text}");
    assert!(text.contains("[8];"), "{text}");
    assert_eq!(text.matches("stage_copy(&stage_n").count(), 1, "{text}");
    // The staged operand is read from its slots in both passes, the cached one from memory in
    // the first pass and from registers in the second.
    assert_eq!(text.matches("= stage_n").count(), 2, "{text}");
    assert_eq!(text.matches("[it] = r_n").count(), 1, "{text}");
    assert_eq!(text.matches("= cache_n").count(), 1, "{text}");
    check_golden("softmax_grad_f32_mixed", &text);

    // bf16 vocabulary rows: planned on 1024 threads, one operand would fit registers (seven
    // vectors a thread); but staged half-type rows run on 512 threads, where a thread holds 13
    // vectors, too many: the plan is made again, and both operands are staged.
    let (_, launches, text) = common::generate_for(&softmax_grad("bf16", 50257), H100);
    assert_eq!(
        launches,
        vec![codegen::Launch::StagedRows {
            rows: 4,
            block: 512,
            shared_bytes: 2 * 6283 * 16,
        }]
    );
    assert!(!text.contains("cache_n"), "{text}");
    assert_eq!(text.matches("stage_copy(&stage_n").count(), 2, "{text}");
}
