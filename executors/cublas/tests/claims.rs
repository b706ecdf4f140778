//! What the cuBLAS executor claims and how it maps shapes (pure functions, no GPU needed), and
//! its unavailable path on machines without a driver.

use thunder_abi::export::Executor;
use thunder_abi::{DTypeCode, TraceView};
use thunder_core::host::view::trace_view;
use thunder_cublas::layout::Operand;
use thunder_cublas::shape::{gemm_of, Gemm};
use thunder_cublas::{claims, Cublas};
use thunder_torch::parse_trace;

fn view(text: &str) -> TraceView {
    let t = parse_trace(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    trace_view(&t, &t.bsyms)
}

#[test]
fn batched_matmul_maps_to_one_strided_batch() {
    let v = view(
        "def computation(a, b):\n  # a: \"cuda:0 bf16[2, 3, 64, 32]\"\n  # b: \"cuda:0 bf16[2, 3, 32, 16]\"\n  t0 = prims.matmul(a, b)\n  return (t0,)\n",
    );
    assert_eq!(
        gemm_of(&v, &v.ops[0]),
        Some(Gemm {
            m: 64,
            n: 16,
            k: 32,
            batch: 6,
            dtype: DTypeCode::BF16,
            lhs: Operand::row_major(64, 32),
            rhs: Operand::row_major(32, 16),
            out: Operand::row_major(64, 16),
            bias: false,
            gelu: false
        })
    );
    assert_eq!(claims(&v), vec![vec![0]]);
}

#[test]
fn linear_takes_its_bias_and_a_following_tanh_gelu() {
    let text = |approx: &str| {
        format!("def computation(x, w, b):\n  # x: \"cuda:0 f16[8, 128, 768]\"\n  # w: \"cuda:0 f16[3072, 768]\"\n  # b: \"cuda:0 f16[3072]\"\n  t0 = ltorch.linear(x, w, b)\n  t1 = ltorch.gelu(t0, \"{approx}\")\n  return (t1,)\n")
    };
    let v = view(&text("tanh"));
    let g = gemm_of(&v, &v.ops[0]).expect("linear is a product");
    assert_eq!(
        (g.m, g.n, g.k, g.batch, g.rhs.transposed, g.bias),
        (1024, 3072, 768, 1, true, true)
    );
    assert_eq!(g.flops(), 2.0 * 1024.0 * 3072.0 * 768.0);
    assert_eq!(
        claims(&v),
        vec![vec![0, 1]],
        "tanh gelu fuses as the epilogue"
    );
    // Erf GELU is not what cuBLASLt's epilogue computes: linear alone.
    let v = view(&text("none"));
    assert_eq!(claims(&v), vec![vec![0]]);
}

#[test]
fn cpu_f64_mixed_and_empty_products_are_left_to_others() {
    for (a, b) in [
        ("cpu f32[4, 8]", "cpu f32[8, 2]"),
        ("cuda:0 f64[4, 8]", "cuda:0 f64[8, 2]"),
        ("cuda:0 f32[0, 8]", "cuda:0 f32[8, 2]"),
        ("cuda:0 f32[4, 0]", "cuda:0 f32[0, 2]"),
    ] {
        let v = view(&format!(
            "def computation(a, b):\n  # a: \"{a}\"\n  # b: \"{b}\"\n  t0 = prims.matmul(a, b)\n  return (t0,)\n"
        ));
        assert!(claims(&v).is_empty(), "{a} @ {b}");
    }
}

#[test]
fn without_a_driver_it_is_unavailable_and_claims_nothing() {
    let e = Cublas::create(thunder_core::host::services::host_services(), &[]).expect("create");
    match e.available() {
        Ok(()) => eprintln!("a CUDA driver is present: the no-driver path does not apply here"),
        Err(reason) => {
            assert!(
                reason.contains("no CUDA driver") || reason.contains("cuBLASLt"),
                "{reason}"
            );
            let v = view("def computation(a, b):\n  # a: \"cuda:0 f32[4, 8]\"\n  # b: \"cuda:0 f32[8, 2]\"\n  t0 = prims.matmul(a, b)\n  return (t0,)\n");
            assert!(e.claim(&v).expect("claim").is_empty());
        }
    }
}

#[test]
fn options_are_checked_by_name() {
    let s = thunder_core::host::services::host_services();
    let bad = Cublas::create(
        s,
        &[("workspace_mb".into(), thunder_abi::OptionValue::Int(-1))],
    );
    assert!(bad.err().expect("refused").message.contains("workspace_mb"));
    let bad = Cublas::create(s, &[("tf23".into(), thunder_abi::OptionValue::Bool(true))]);
    assert!(bad
        .err()
        .expect("refused")
        .message
        .contains("unknown option `tf23`"));
}
