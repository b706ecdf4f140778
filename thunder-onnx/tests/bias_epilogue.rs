//! Every Linear layer's bias Add lands on the 2-d product of its MatMul (the importer computes
//! a MatMul of a batch of rows as one product on the flattened rows), not on the reshape back:
//! the `add(matmul(x, w), broadcast(b))` pattern cpu-simd runs as the GEMM's epilogue.

use std::collections::HashSet;
use std::path::Path;
use thunder_core::ir::TensorType;
use thunder_core::text::print_trace;
use thunder_core::{DType, Device};
use thunder_onnx::{import, OnnxModel};

/// The printed trace of a fixture imported for `[2, 8]` i64 inputs.
fn trace_of(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("model.onnx");
    let model = OnnxModel::load(&path).expect("load");
    let types: Vec<TensorType> = model
        .inputs
        .iter()
        .map(|_| TensorType::new(vec![2, 8], DType::I64, Device::Cpu))
        .collect();
    print_trace(&import(&model, &types).expect("import").trace)
}

/// (2-d matmul outputs, adds reading one of them, adds reading one reshaped).
fn count(text: &str) -> (usize, usize, usize) {
    let mut products = HashSet::new();
    let mut reshaped = HashSet::new();
    let (mut adds, mut late) = (0, 0);
    // The trace's top-level calls (their prims are the indented `#` lines under them).
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let Some((lhs, rhs)) = line.trim().split_once(" = ") else {
            continue;
        };
        let out = lhs.split(':').next().unwrap_or(lhs).trim();
        let args: Vec<&str> = rhs
            .split_once('(')
            .map(|(_, a)| a)
            .unwrap_or("")
            .split([',', ')', ' '])
            .collect();
        let reads_product = args.iter().any(|a| products.contains(*a));
        let reads_reshaped = args.iter().any(|a| reshaped.contains(*a));
        if rhs.starts_with("ltorch.matmul(") && line.contains("f32[") {
            // Only the 2-d products (`f32[rows, n]`): the attention's are batched.
            let ty = line.rsplit("f32[").next().unwrap_or("");
            if ty.split(']').next().unwrap_or("").split(',').count() == 2 {
                products.insert(out.to_string());
            }
        } else if rhs.starts_with("ltorch.add(") && reads_product {
            adds += 1;
        } else if rhs.starts_with("ltorch.add(") && reads_reshaped {
            late += 1;
        } else if rhs.starts_with("ltorch.reshape(") && reads_product {
            reshaped.insert(out.to_string());
        }
    }
    (products.len(), adds, late)
}

#[test]
fn linear_biases_are_added_to_the_product() {
    // GPT-2's tied output projection has no bias.
    for (name, unbiased) in [("bert_tiny", 0), ("gpt2_tiny", 1)] {
        let text = trace_of(name);
        let (products, adds, late) = count(&text);
        assert!(products > unbiased, "{name}: no 2-d product in\n{text}");
        assert!(
            adds == products - unbiased && late == 0,
            "{name}: {products} products, {adds} read by an add, {late} adds after a reshape\n{text}"
        );
    }
}
