//! BatchNormalization folded into the Conv before it at load: every eligible pair of the tiny
//! BN ResNet fixture folds (its outputs against ONNX Runtime's are checked by
//! tests/tests/onnx_models.rs), and a pair whose convolution result is needed elsewhere stays.

use prost::Message;
use std::path::{Path, PathBuf};
use thunder_onnx::proto::*;
use thunder_onnx::OnnxModel;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/resnet_tiny_bn/model.onnx")
}

fn count(model: &OnnxModel, op: &str) -> usize {
    model.graph.node.iter().filter(|n| n.op_type == op).count()
}

#[test]
fn every_inference_batch_norm_after_a_conv_folds() {
    let model = OnnxModel::load(&fixture()).unwrap();
    assert_eq!(model.batch_norms_folded, 6);
    assert_eq!(count(&model, "BatchNormalization"), 0);
    assert_eq!(count(&model, "Conv"), 6);
    // Each folded Conv reads its new weights and bias, which are initializers.
    for conv in model.graph.node.iter().filter(|n| n.op_type == "Conv") {
        assert_eq!(conv.input.len(), 3, "{conv:?}");
        for name in &conv.input[1..] {
            assert!(model.initializers.contains_key(name), "{name}");
        }
    }
}

#[test]
fn a_conv_result_read_elsewhere_keeps_its_batch_norm() {
    let bytes = std::fs::read(fixture()).unwrap();
    let mut proto = ModelProto::decode(bytes.as_slice()).unwrap();
    let graph = proto.graph.as_mut().unwrap();
    let first_conv = graph
        .node
        .iter()
        .find(|n| n.op_type == "Conv")
        .unwrap()
        .output[0]
        .clone();
    graph.output.push(ValueInfoProto {
        name: first_conv,
        ..Default::default()
    });
    let model = OnnxModel::from_bytes(&proto.encode_to_vec(), &fixture()).unwrap();
    assert_eq!(model.batch_norms_folded, 5);
    assert_eq!(count(&model, "BatchNormalization"), 1);
}
