//! What the cuDNN executor claims (trace views parsed from text, no GPU needed), and its
//! unavailable path on machines without a driver or without cuDNN.

use thunder_abi::export::Executor;
use thunder_abi::{DTypeCode, TraceView};
use thunder_core::host::view::trace_view;
use thunder_cudnn::shape::{conv_of, Work};
use thunder_cudnn::{claims, Cudnn};
use thunder_torch::parse_trace;

fn view(text: &str) -> TraceView {
    let t = parse_trace(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    trace_view(&t, &t.bsyms)
}

/// `prims.convolution` of `a` and `w` (and `b` when given) with the given geometry.
fn conv_text(a: &str, w: &str, b: Option<&str>, rest: &str) -> String {
    let (params, bias_decl, bias) = match b {
        Some(b) => (", b", format!("  # b: \"{b}\"\n"), "b"),
        None => ("", String::new(), "None"),
    };
    format!(
        "def computation(a, w{params}):\n  # a: \"{a}\"\n  # w: \"{w}\"\n{bias_decl}  t0 = prims.convolution(a, w, {bias}, {rest})\n  return (t0,)\n"
    )
}

#[test]
fn float_convolutions_on_cuda_are_claimed_in_one_to_three_dims() {
    let cases = [
        // conv1d, bias, stride 2, dilation 2, padding 3
        (
            "cuda:0 f32[4, 6, 20]",
            "cuda:0 f32[8, 6, 5]",
            Some("cuda:0 f32[8]"),
            "[2], [3], [2], 1",
            vec![4, 8, 9],
        ),
        // conv2d, grouped, f16
        (
            "cuda:0 f16[2, 8, 9, 9]",
            "cuda:0 f16[12, 2, 3, 3]",
            None,
            "[2, 2], [1, 1], [1, 1], 4",
            vec![2, 12, 5, 5],
        ),
        // depthwise conv2d, bf16, bias
        (
            "cuda:0 bf16[1, 16, 8, 8]",
            "cuda:0 bf16[16, 1, 3, 3]",
            Some("cuda:0 bf16[16]"),
            "[1, 1], [1, 1], [1, 1], 16",
            vec![1, 16, 8, 8],
        ),
        // conv3d, f64, asymmetric geometry
        (
            "cuda:0 f64[2, 4, 5, 6, 7]",
            "cuda:0 f64[8, 4, 3, 3, 1]",
            None,
            "[1, 2, 1], [1, 0, 0], [1, 1, 1], 1",
            vec![2, 8, 5, 2, 7],
        ),
        // empty batch: claimed, launches nothing
        (
            "cuda:0 f32[0, 3, 8, 8]",
            "cuda:0 f32[4, 3, 3, 3]",
            Some("cuda:0 f32[4]"),
            "[1, 1], [1, 1], [1, 1], 1",
            vec![0, 4, 8, 8],
        ),
    ];
    for (a, w, b, rest, out) in cases {
        let v = view(&conv_text(a, w, b, rest));
        let c = conv_of(&v, &v.ops[0]).unwrap_or_else(|e| panic!("{a} * {w}: {e}"));
        assert_eq!(c.y_shape(), out, "{a} * {w}");
        assert_eq!(c.bias, b.is_some());
        assert_eq!(claims(&v), vec![vec![0]], "{a} * {w}");
    }
    let v = view(&conv_text(
        "cuda:0 f32[0, 3, 8, 8]",
        "cuda:0 f32[4, 3, 3, 3]",
        None,
        "[1, 1], [1, 1], [1, 1], 1",
    ));
    assert_eq!(
        conv_of(&v, &v.ops[0]).expect("claimed").work(),
        Work::Nothing
    );
}

#[test]
fn the_geometry_reaches_the_descriptors() {
    let v = view(&conv_text(
        "cuda:1 f16[4, 6, 20]",
        "cuda:1 f16[3, 2, 5]",
        Some("cuda:1 f16[3]"),
        "[2], [3], [2], 3",
    ));
    let c = conv_of(&v, &v.ops[0]).expect("claimed");
    assert_eq!((c.dtype, c.device, c.groups), (DTypeCode::F16, 1, 3));
    let g = c.dnn().expect("fits");
    assert_eq!(g.x, vec![4, 6, 1, 20]);
    assert_eq!(g.w, vec![3, 2, 1, 5]);
    assert_eq!(g.y, vec![4, 3, 1, 9]);
    assert_eq!(
        (g.padding, g.stride, g.dilation),
        (vec![0, 3], vec![1, 2], vec![1, 2])
    );
}

#[test]
fn integers_cpu_tensors_and_four_spatial_dims_are_left_to_others() {
    let refused = [
        (
            "cuda:0 i32[1, 2, 5]",
            "cuda:0 i32[3, 2, 2]",
            "[1], [0], [1], 1",
            "i32",
        ),
        (
            "cuda:0 i64[1, 2, 5, 5]",
            "cuda:0 i64[3, 2, 2, 2]",
            "[1, 1], [0, 0], [1, 1], 1",
            "i64",
        ),
        (
            "cuda:0 u8[1, 2, 5]",
            "cuda:0 u8[3, 2, 2]",
            "[1], [0], [1], 1",
            "u8",
        ),
        (
            "cpu f32[1, 2, 5, 5]",
            "cpu f32[3, 2, 2, 2]",
            "[1, 1], [0, 0], [1, 1], 1",
            "not a CUDA tensor",
        ),
        (
            "cuda:0 f32[1, 2, 4, 4, 4, 4]",
            "cuda:0 f32[3, 2, 2, 2, 2, 2]",
            "[1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1], 1",
            "4 spatial dims",
        ),
    ];
    for (a, w, rest, why) in refused {
        let v = view(&conv_text(a, w, None, rest));
        let e = conv_of(&v, &v.ops[0]).expect_err(a);
        assert!(e.contains(why), "{a}: {e}");
        assert!(claims(&v).is_empty(), "{a} * {w}");
    }
}

#[test]
fn only_convolutions_are_claimed_and_claimed_ops_are_skipped() {
    let text = "def computation(a, w, x, w2):\n  # a: \"cuda:0 f32[2, 3, 8, 8]\"\n  # w: \"cuda:0 f32[4, 3, 3, 3]\"\n  # x: \"cuda:0 f32[4]\"\n  # w2: \"cuda:0 f32[2, 4, 3, 3]\"\n  t0 = prims.convolution(a, w, None, [1, 1], [1, 1], [1, 1], 1)\n  t1 = prims.neg(x)\n  t2 = prims.convolution(t0, w2, None, [1, 1], [0, 0], [1, 1], 1)\n  return (t1, t2)\n";
    let mut v = view(text);
    assert_eq!(claims(&v), vec![vec![0], vec![2]]);
    v.ops[0].claimed = true;
    assert_eq!(claims(&v), vec![vec![2]]);
}

#[test]
fn plugin_advertises_convolution_alone() {
    let info = thunder_cudnn::plugin_info();
    let symbols: Vec<String> = info.symbols.iter().map(|s| s.to_string()).collect();
    assert_eq!(symbols, vec!["prims.convolution".to_string()]);
    assert_eq!(info.name.as_str(), "cudnn");
}

#[test]
fn without_a_driver_or_cudnn_it_is_unavailable_and_claims_nothing() {
    let e = Cudnn::create(thunder_core::host::services::host_services(), &[]).expect("create");
    match e.available() {
        Ok(()) => eprintln!("CUDA and cuDNN are present: the unavailable path does not apply here"),
        Err(reason) => {
            assert!(
                reason.contains("no CUDA driver") || reason.contains("cuDNN"),
                "{reason}"
            );
            let v = view(&conv_text(
                "cuda:0 f32[2, 3, 8, 8]",
                "cuda:0 f32[4, 3, 3, 3]",
                None,
                "[1, 1], [1, 1], [1, 1], 1",
            ));
            assert_eq!(claims(&v), vec![vec![0]], "claimable in principle");
            assert!(e.claim(&v).expect("claim").is_empty());
        }
    }
}

#[test]
fn options_are_checked_by_name() {
    let s = thunder_core::host::services::host_services();
    let bad = Cudnn::create(
        s,
        &[("workspace_mb".into(), thunder_abi::OptionValue::Int(-1))],
    );
    assert!(bad.err().expect("refused").message.contains("workspace_mb"));
    let bad = Cudnn::create(s, &[("tf32".into(), thunder_abi::OptionValue::Bool(true))]);
    assert!(bad
        .err()
        .expect("refused")
        .message
        .contains("unknown option `tf32`"));
}
