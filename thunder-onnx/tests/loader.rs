//! The loader and importer on bad input: truncated and corrupted files are errors naming the
//! file, never panics; unsupported nodes are named with their op type, domain and opset.

use prost::Message;
use std::path::{Path, PathBuf};
use thunder_core::ir::TensorType;
use thunder_core::{DType, Device};
use thunder_onnx::proto::*;
use thunder_onnx::{import, unsupported_nodes, OnnxError, OnnxModel};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("model.onnx")
}

/// Loads and, when that works, imports for the declared shapes with symbolic dims set to 2:
/// whatever the bytes, the result is Ok or an Err, and a load error names the file.
fn load_and_import(bytes: &[u8], path: &Path) -> Result<(), String> {
    let model = match OnnxModel::from_bytes(bytes, path) {
        Ok(m) => m,
        Err(e) => {
            let text = e.to_string();
            if !text.contains(&path.display().to_string()) {
                return Err(format!("load error does not name the file: {text}"));
            }
            return Ok(());
        }
    };
    let types: Vec<TensorType> = model
        .inputs
        .iter()
        .map(|s| {
            let shape = s
                .dims
                .as_ref()
                .map(|d| {
                    d.iter()
                        .map(|d| match d {
                            thunder_onnx::Dim::Fixed(n) => (*n).min(64),
                            thunder_onnx::Dim::Symbolic(_) => 2,
                        })
                        .collect()
                })
                .unwrap_or_default();
            TensorType::new(shape, s.dtype, Device::Cpu)
        })
        .collect();
    let _ = import(&model, &types);
    Ok(())
}

#[test]
fn truncated_models_are_errors_naming_the_file() {
    for name in ["bert_tiny", "gpt2_tiny", "resnet_tiny_bn"] {
        let path = fixture(name);
        let bytes = std::fs::read(&path).unwrap();
        let mut cuts: Vec<usize> = (0..bytes.len()).step_by(bytes.len() / 300 + 1).collect();
        cuts.extend([0, 1, 2, 7, bytes.len() - 1]);
        let mut errors = 0;
        for cut in cuts {
            let result = std::panic::catch_unwind(|| load_and_import(&bytes[..cut], &path));
            match result {
                Err(_) => panic!("{name} truncated to {cut} bytes: panicked"),
                Ok(Err(e)) => panic!("{name} truncated to {cut} bytes: {e}"),
                Ok(Ok(())) => {}
            }
            if OnnxModel::from_bytes(&bytes[..cut], &path).is_err() {
                errors += 1;
            }
        }
        assert!(
            errors > 100,
            "{name}: only {errors} truncations were refused"
        );
    }
}

#[test]
fn corrupted_models_never_panic() {
    let path = fixture("gpt2_tiny_legacy");
    let bytes = std::fs::read(&path).unwrap();
    // A fixed xorshift stream: flip bytes at pseudo-random offsets, 400 variants.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..400 {
        let mut b = bytes.clone();
        for _ in 0..1 + round % 8 {
            let at = (next() as usize) % b.len();
            b[at] = (next() & 0xff) as u8;
        }
        let result = std::panic::catch_unwind(|| load_and_import(&b, &path));
        match result {
            Err(_) => panic!("corruption round {round}: panicked"),
            Ok(Err(e)) => panic!("corruption round {round}: {e}"),
            Ok(Ok(())) => {}
        }
    }
}

#[test]
fn missing_file_and_garbage_name_the_file() {
    let path = Path::new("/nonexistent/model.onnx");
    let err = OnnxModel::load(path).unwrap_err().to_string();
    assert!(
        err.contains("/nonexistent/model.onnx") && err.contains("cannot read"),
        "{err}"
    );
    let err = OnnxModel::from_bytes(b"\xff\xff\xff\xff not protobuf", Path::new("g.onnx"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("g.onnx: not a valid ONNX model"), "{err}");
    let err = OnnxModel::from_bytes(&[], Path::new("empty.onnx"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("empty.onnx") && err.contains("no graph"),
        "{err}"
    );
}

fn value_info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d),
                            dim_param: None,
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

fn node(name: &str, op: &str, domain: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: name.into(),
        op_type: op.into(),
        domain: domain.into(),
        attribute: vec![],
    }
}

fn model_bytes(nodes: Vec<NodeProto>, output: &str) -> Vec<u8> {
    ModelProto {
        ir_version: 8,
        opset_import: vec![
            OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            },
            OperatorSetIdProto {
                domain: "com.microsoft".into(),
                version: 1,
            },
        ],
        producer_name: "test".into(),
        producer_version: String::new(),
        graph: Some(GraphProto {
            node: nodes,
            name: "g".into(),
            initializer: vec![],
            input: vec![value_info("x", 1, &[2, 3])],
            output: vec![value_info(output, 1, &[2, 3])],
        }),
    }
    .encode_to_vec()
}

#[test]
fn unsupported_nodes_are_all_listed_and_named() {
    let bytes = model_bytes(
        vec![
            node("relu0", "Relu", "", &["x"], &["a"]),
            node("fused", "FusedGemm", "com.microsoft", &["a"], &["b"]),
            node("", "Loop", "", &["b"], &["c"]),
            node("sig", "Sigmoid", "", &["c"], &["y"]),
        ],
        "y",
    );
    let model = OnnxModel::from_bytes(&bytes, Path::new("u.onnx")).unwrap();
    let listed: Vec<String> = unsupported_nodes(&model)
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(
        listed,
        [
            "node `fused` (op FusedGemm, domain com.microsoft, opset 1)",
            "node `c` (op Loop, domain ai.onnx, opset 17)"
        ]
    );
    let ty = TensorType::new(vec![2, 3], DType::F32, Device::Cpu);
    let err = import(&model, &[ty]).unwrap_err();
    assert!(matches!(err, OnnxError::Unsupported { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "unsupported node `fused` (op FusedGemm, domain com.microsoft, opset 1)"
    );
}

#[test]
fn dangling_inputs_and_bad_outputs_are_named() {
    let bytes = model_bytes(vec![node("r", "Relu", "", &["nope"], &["y"])], "y");
    let model = OnnxModel::from_bytes(&bytes, Path::new("d.onnx")).unwrap();
    let ty = TensorType::new(vec![2, 3], DType::F32, Device::Cpu);
    let err = import(&model, std::slice::from_ref(&ty))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("node `r` (op Relu") && err.contains("input `nope`"),
        "{err}"
    );
    let bytes = model_bytes(vec![node("r", "Relu", "", &["x"], &["a"])], "y");
    let model = OnnxModel::from_bytes(&bytes, Path::new("d.onnx")).unwrap();
    let err = import(&model, &[ty]).unwrap_err().to_string();
    assert!(err.contains("graph output `y`"), "{err}");
}

#[test]
fn initializer_data_must_fill_its_shape() {
    let mut m = ModelProto::decode(
        model_bytes(vec![node("r", "Relu", "", &["x"], &["y"])], "y").as_slice(),
    )
    .unwrap();
    if let Some(g) = m.graph.as_mut() {
        g.initializer.push(TensorProto {
            dims: vec![4],
            data_type: 1,
            float_data: vec![1.0, 2.0],
            name: "w".into(),
            ..Default::default()
        });
    }
    let err = OnnxModel::from_bytes(&m.encode_to_vec(), Path::new("i.onnx"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("i.onnx: initializer `w`") && err.contains("float_data holds 2 values"),
        "{err}"
    );
}

/// Einsum equations the importer cannot express are errors naming the node and the reason.
#[test]
fn bad_einsum_equations_are_named() {
    let cases = [
        ("ii->i", "a label repeated within operand `ii` (a diagonal)"),
        ("ij,jk->ik", "has 2 operands, 1 were given"),
        ("ijk->i", "term `ijk` has 3 labels for an operand of rank 2"),
        ("ij->iz", "output label `z` is in no operand"),
        ("i1->i", "`1` in term `i1` is not a letter"),
    ];
    for (eq, want) in cases {
        let mut n = node("e", "Einsum", "", &["x"], &["y"]);
        n.attribute.push(AttributeProto {
            name: "equation".into(),
            r#type: 3,
            s: eq.as_bytes().to_vec(),
            ..Default::default()
        });
        let model = OnnxModel::from_bytes(&model_bytes(vec![n], "y"), Path::new("e.onnx")).unwrap();
        let ty = TensorType::new(vec![2, 3], DType::F32, Device::Cpu);
        let err = import(&model, &[ty]).unwrap_err().to_string();
        assert!(
            err.contains("node `e` (op Einsum") && err.contains(want),
            "{eq}: {err}"
        );
    }
}

/// `load` memory-maps the file and shares aligned weights with the mapping; every weight must
/// hold what decoding the same bytes from memory gives (external data included).
#[test]
fn mapped_weights_match_a_decode_from_memory() {
    for name in [
        "cnn_small",
        "cnn_small_external",
        "resnet_tiny_bn",
        "gpt2_tiny",
    ] {
        let path = fixture(name);
        let mapped = OnnxModel::load(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let copied = OnnxModel::from_bytes(&bytes, &path).unwrap();
        assert_eq!(mapped.initializer_names, copied.initializer_names, "{name}");
        assert!(!mapped.initializers.is_empty(), "{name}: no weights");
        for (w, a) in &mapped.initializers {
            let b = &copied.initializers[w];
            assert_eq!(a.ty(), b.ty(), "{name}: {w}");
            let (va, vb) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
            assert!(
                va.iter().zip(&vb).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{name}: weight {w} differs"
            );
        }
    }
}

/// External data cut short is an error naming the data file and the bytes it lacks.
#[test]
fn truncated_external_data_names_the_data_file() {
    let src = fixture("cnn_small_external");
    let dir = std::env::temp_dir().join(format!("thunder-onnx-trunc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("model.onnx");
    std::fs::copy(&src, &model).unwrap();
    let data = std::fs::read(src.with_file_name("weights.bin")).unwrap();
    std::fs::write(dir.join("weights.bin"), &data[..data.len() / 2]).unwrap();
    let err = OnnxModel::load(&model).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(err.contains("weights.bin"), "{err}");
    assert!(err.contains("past the file's end"), "{err}");
}
