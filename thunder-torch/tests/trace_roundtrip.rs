use std::collections::HashSet;
use thunder_core::ir::TensorType;
use thunder_core::text::print_trace;
use thunder_core::trace_ctx::trace_with;
use thunder_core::{DType, Device};
use thunder_torch::parse_trace;
use thunder_torch::prelude::*;

/// A program traced from the Rust API (nested composites, f16 promotion, two outputs) prints,
/// parses back into an equal trace, and prints the same again.
#[test]
fn traced_program_round_trips_through_text() {
    let inputs = vec![
        (
            "x".to_string(),
            TensorType::new(vec![8, 16], DType::F16, Device::Cpu),
        ),
        (
            "w".to_string(),
            TensorType::new(vec![4, 16], DType::F16, Device::Cpu),
        ),
    ];
    let t = trace_with(&inputs, HashSet::new(), "Tracing", |xs| {
        let y = thunder_torch::linear(&xs[0], &xs[1], None)?;
        let z = (&y * 2.0 + 1i64).gelu("tanh").softmax(-1);
        Ok(vec![z, y])
    })
    .unwrap();
    let text = print_trace(&t);
    assert!(text.contains("t1 = ltorch.linear(x, w, None)"), "{text}");
    assert!(
        text.contains("      # t0 = prims.transpose(w, [1, 0])"),
        "{text}"
    );
    let t2 = parse_trace(&text).unwrap();
    let text2 = print_trace(&t2);
    assert_eq!(text, text2);
    assert_eq!(t, t2);
}
