//! The generated CUDA source of every kernel family, checked as golden text (CI has no GPU:
//! this is where codegen changes show up; the GPU check runs them against the interpreter).
//! `THUNDER_BLESS=1 cargo test -p thunder-cuda-kernels` rewrites the files; review the diff.

use std::path::PathBuf;
use thunder_abi::TraceView;
use thunder_core::host::view::trace_view;
use thunder_cuda_kernels::codegen::{self, Launch, Param};
use thunder_cuda_kernels::spec;
use thunder_torch::parse_trace;

fn view_of(text: &str) -> TraceView {
    let trace = parse_trace(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    trace_view(&trace, &trace.bsyms)
}

/// Every op of the trace decoded and generated; the text of all kernels with their launches.
fn generate(text: &str) -> (Vec<codegen::Kernel>, String) {
    let view = view_of(text);
    let mut kernels = Vec::new();
    let mut out = String::new();
    for (i, op) in view.ops.iter().enumerate() {
        let spec = spec::decode(&view, op).unwrap_or_else(|e| panic!("{}: {e}", op.symbol));
        let outs: Vec<_> = op
            .outputs
            .iter()
            .map(|&v| view.values[v as usize].dtype)
            .collect();
        for k in codegen::generate(&spec, &outs, &format!("k{i}")) {
            out.push_str(&format!(
                "// {}: launch {:?}, params {:?}\n",
                op.symbol, k.launch, k.params
            ));
            out.push_str(&k.source);
            out.push('\n');
            kernels.push(k);
        }
    }
    (kernels, out)
}

fn check_golden(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.cu"));
    if let Err(diff) = thunder_tests::check_golden(&path, text) {
        panic!("{diff}");
    }
}

#[test]
fn reductions_of_ints_bools_and_halves_over_any_dims() {
    let (k, text) = generate(
        r#"def computation(x, b, h):
  # x: "cuda:0 i32[3, 4, 5]"
  # b: "cuda:0 b8[6, 7]"
  # h: "cuda:0 f16[2, 9]"
  t0 = prims.sum(x, [0, 2])
  t1 = prims.amax(b, [1])
  t2 = prims.argmax(h, 1)
  t3, t4 = prims.var_mean(h, [0, 1], 1)
  t5 = prims.prod(x, [])
  return (t0, t1, t2, t3, t4, t5)
"#,
    );
    assert_eq!(k[0].launch, Launch::Rows { rows: 4, block: 32 });
    assert!(k[0].source.contains("u64_t acc"), "ints wrap in 64 bits");
    assert_eq!(k[2].launch, Launch::Rows { rows: 2, block: 32 });
    assert!(
        k[2].source.contains("pick("),
        "argmax folds (value, index) pairs"
    );
    assert_eq!(
        k[3].params,
        vec![Param::Input(0), Param::Output(0), Param::Output(1)]
    );
    assert_eq!(k[3].launch, Launch::Rows { rows: 1, block: 32 });
    assert!(k[3].source.contains("/ 17.0"), "N - correction = 18 - 1");
    assert_eq!(
        k[4].launch,
        Launch::Rows {
            rows: 60,
            block: 32
        }
    );
    check_golden("reductions", &text);
}

#[test]
fn scans_and_sorts() {
    let (k, text) = generate(
        r#"def computation(x, y):
  # x: "cuda:0 i64[3, 300]"
  # y: "cuda:0 f32[5, 6, 7]"
  t0 = prims.cumsum(x, 1)
  t1, t2 = prims.sort(y, 1, True, True)
  t3, t4 = prims.topk(y, 3, 2, False, True)
  return (t0, t1, t2, t3, t4)
"#,
    );
    assert_eq!(
        k[0].launch,
        Launch::Rows {
            rows: 3,
            block: 256
        }
    );
    assert_eq!(
        k[1].launch,
        Launch::Rows {
            rows: 35,
            block: 32
        }
    );
    assert!(k[1].source.contains("sv[8]"), "6 slots round up to 8");
    assert_eq!(
        k[2].launch,
        Launch::Rows {
            rows: 30,
            block: 32
        }
    );
    check_golden("scans_sorts", &text);
}

#[test]
fn gathers_scatters_and_interior_padding() {
    let (k, text) = generate(
        r#"def computation(a, i, j, s, h, q):
  # a: "cuda:0 f32[4, 5]"
  # i: "cuda:0 i64[3]"
  # j: "cuda:0 i32[4, 2]"
  # s: "cuda:0 f16[4, 2]"
  # h: "cuda:0 f16[4, 5]"
  # q: "cuda:0 i8[3, 5]"
  t0 = prims.take(a, i, 0)
  t1 = prims.take_along_axis(a, j, 1)
  t2 = prims.scatter_add(h, j, s, 1)
  t3 = prims.pad(a, 0.5, [1, 0, 1, 0, 2, 2])
  return (t0, t1, t2, t3)
"#,
    );
    assert!(
        k[0].has_flag() && k[1].has_flag(),
        "gathers check their indices"
    );
    assert_eq!(k[0].launch, Launch::Elements { n: 15, block: 256 });
    // scatter_add: a copy, then the atomic adds.
    assert!(!k[2].has_flag() && k[3].has_flag());
    assert!(
        k[3].source.contains("atomicCAS"),
        "f16 adds go through the 32-bit word"
    );
    assert_eq!(
        k[4].launch,
        Launch::Elements {
            n: 8 * 15,
            block: 256
        }
    );
    check_golden("indexing", &text);
}

#[test]
fn factories_random_integer_matmul_and_floor_divide() {
    let (k, text) = generate(
        r#"def computation(a, b, x, c, d):
  # a: "cuda:0 i32[2, 3, 4]"
  # b: "cuda:0 i32[2, 4, 5]"
  # x: "cuda:0 i64[6]"
  # c: "cuda:0 f64[3, 0]"
  # d: "cuda:0 f64[0, 2]"
  t0 = prims.full([2, 3], 300, devices.cuda0, dtypes.i16)
  t1 = prims.iota(5, 2, -3, devices.cuda0, dtypes.u8)
  t2 = prims.uniform([2, 4, 3], 0.0, 1.0, 7, 5, devices.cuda0, dtypes.bf16)
  t3 = prims.normal([7], 1.5, 2.0, 3, 0, devices.cuda0, dtypes.f64)
  t4 = prims.matmul(a, b)
  t5 = prims.floor_divide(x, -4)
  t6 = prims.matmul(c, d)
  return (t0, t1, t2, t3, t4, t5, t6)
"#,
    );
    assert_eq!(k[0].launch, Launch::Elements { n: 6, block: 256 });
    assert!(k[2].source.contains("philox(block, 7ULL, w)"));
    assert_eq!(k[4].launch, Launch::Elements { n: 30, block: 256 });
    assert!(
        k[5].has_flag(),
        "integer division by zero is a device error"
    );
    let view = view_of(
        "def computation(x):\n  # x: \"cuda:0 f16[6]\"\n  t0 = prims.floor_divide(x, 0.5)\n  return (t0,)\n",
    );
    let spec = spec::decode(&view, &view.ops[0]).expect("decodes");
    let f = codegen::generate(&spec, &[thunder_abi::DTypeCode::F16], "f");
    assert!(
        !f[0].has_flag(),
        "float division cannot fail: no flag, no synchronization"
    );
    // An empty inner dim still writes zeros.
    assert_eq!(k[6].launch, Launch::Elements { n: 6, block: 256 });
    assert!(k[6].source.contains("double acc = 0;"));
    check_golden("factories_matmul_divide", &text);
}

#[test]
fn integer_division_pow_and_convolution() {
    let (k, text) = generate(
        r#"def computation(a, b, s, x, w, bias, y, v):
  # a: "cuda:0 i32[2, 3]"
  # b: "cuda:0 i32[2, 3]"
  # s: "cuda:0 u8[]"
  # x: "cuda:0 i8[2, 4, 5, 5]"
  # w: "cuda:0 i8[6, 2, 3, 2]"
  # bias: "cuda:0 i8[6]"
  # y: "cuda:0 i64[1, 2, 0]"
  # v: "cuda:0 i64[3, 2, 2]"
  t0 = prims.remainder(a, b)
  t1 = prims.fmod(a, -3)
  t2 = prims.div(7, b)
  t3 = prims.pow(s, 3)
  t4 = prims.convolution(x, w, bias, [2, 1], [1, 0], [1, 2], 2)
  t5 = prims.convolution(y, v, None, [1], [1], [1], 1)
  return (t0, t1, t2, t3, t4, t5)
"#,
    );
    for (i, call) in [
        "rem_int(x, y)",
        "fmod_int(x, y)",
        "div_trunc_int(x, y)",
        "pow_int(x, y)",
    ]
    .into_iter()
    .enumerate()
    {
        assert!(k[i].has_flag(), "kernel {i}: a device error is possible");
        assert!(k[i].source.contains(call), "kernel {i}: {call}");
    }
    assert!(k[3].source.contains("if (y < 0) { report(err, 3, y);"));
    assert_eq!(k[3].launch, Launch::Elements { n: 1, block: 256 });
    // [2, 6, 3, 2]: (5 + 2 - 3) / 2 + 1 = 3 rows, (5 - 3) / 1 + 1 = 3 cols... with dilation 2.
    assert_eq!(
        k[4].launch,
        Launch::Elements {
            n: 2 * 6 * 3 * 3,
            block: 128
        }
    );
    assert!(!k[4].has_flag(), "a convolution cannot fail");
    assert!(k[4].source.contains("const i64_t g = c1 / 3LL;"));
    assert!(k[4].params.contains(&Param::Input(2)), "the bias");
    // An empty spatial input with padding: the output [1, 3, 1] is bias-free zeros.
    assert_eq!(k[5].launch, Launch::Elements { n: 3, block: 128 });
    check_golden("int_divide_conv", &text);
}

#[test]
fn deterministic_scatters_gather_in_index_order() {
    let view = view_of(
        r#"def computation(h, j, s, q, i, r):
  # h: "cuda:0 f32[4, 5]"
  # j: "cuda:0 i64[3, 2]"
  # s: "cuda:0 f32[4, 2]"
  # q: "cuda:0 i8[3, 5]"
  # i: "cuda:0 i32[2]"
  # r: "cuda:0 i8[3, 2]"
  t0 = prims.scatter_add(h, j, s, 1)
  t1 = prims.index_add(q, i, r, 1)
  return (t0, t1)
"#,
    );
    let mut text = String::new();
    for (n, op) in view.ops.iter().enumerate() {
        let mut spec = spec::decode(&view, op).expect("decodes");
        if let spec::Spec::ScatterAdd { deterministic, .. } = &mut spec {
            *deterministic = true;
        }
        let outs = [view.values[op.outputs[0] as usize].dtype];
        let kernels = codegen::generate(&spec, &outs, &format!("d{n}"));
        assert_eq!(kernels.len(), 1, "one kernel, no atomics");
        assert!(
            !kernels[0].source.contains("atomic")
                || kernels[0].source.contains("atomicCAS((u64_t*)err")
        );
        assert!(kernels[0].has_flag());
        text.push_str(&format!(
            "// {}: launch {:?}\n{}\n",
            op.symbol, kernels[0].launch, kernels[0].source
        ));
    }
    check_golden("deterministic_scatter", &text);
}

/// The kernels of cross-entropy regions ([`thunder_cuda_kernels::ce`]): the bf16 head's
/// forward and backward (reading the 16-bit logits through the joined convert, writing the
/// bf16 gradient), f16 logits with i32 targets, f32 logits alone, and bf16 rows of 100 (13
/// vectors: `scripts/ce_emulate` runs them on one- and two-thread blocks, so that the loops'
/// four-vector batches are full).
#[test]
fn cross_entropy_regions_read_16_bit_logits_once_per_row() {
    use thunder_cuda_kernels::ce;
    let text = r#"def computation(h, t, g, lse, f, ti, x, hb, tb, lb):
  # h: "cuda:0 bf16[2, 4, 16]"
  # t: "cuda:0 i64[8]"
  # g: "cuda:0 f32[]"
  # lse: "cuda:0 f32[8]"
  # f: "cuda:0 f16[3, 8]"
  # ti: "cuda:0 i32[3]"
  # x: "cuda:0 f32[3, 6]"
  # hb: "cuda:0 bf16[4, 100]"
  # tb: "cuda:0 i64[4]"
  # lb: "cuda:0 f32[4]"
  t0 = prims.convert_element_type(h, dtypes.f32)
  t1 = prims.reshape(t0, [8, 16])
  t2, t3 = ltorch.cross_entropy_lse(t1, t, ignore_index=-100)
  t4 = prims.convert_element_type(h, dtypes.f32)
  t5 = prims.reshape(t4, [8, 16])
  t6 = ltorch.cross_entropy_bwd(g, t5, t, lse, ignore_index=-100)
  t7 = prims.reshape(t6, [2, 4, 16])
  t8 = prims.convert_element_type(t7, dtypes.bf16)
  t9 = prims.convert_element_type(f, dtypes.f32)
  t10, t11 = ltorch.cross_entropy_lse(t9, ti, ignore_index=1)
  t12, t13 = ltorch.cross_entropy_lse(x, ti, ignore_index=-100)
  t14 = prims.full([], 1.0, devices.cuda0, dtypes.f32)
  t15 = ltorch.cross_entropy_bwd(t14, x, ti, t13, ignore_index=-100)
  t16 = prims.convert_element_type(hb, dtypes.f32)
  t17, t18 = ltorch.cross_entropy_lse(t16, tb, ignore_index=-100)
  t19 = prims.convert_element_type(hb, dtypes.f32)
  t20 = ltorch.cross_entropy_bwd(g, t19, tb, lb, ignore_index=-100)
  t21 = prims.convert_element_type(t20, dtypes.bf16)
  return (t2, t3, t8, t10, t11, t12, t15, t17, t18, t21)
"#;
    let view = view_of(text);
    let mut out = String::new();
    let mut regions = Vec::new();
    for i in 0..view.ops.len() {
        let Some(r) = ce::region(&view, i) else {
            continue;
        };
        let dtypes: Vec<_> = r.outputs.iter().map(|o| o.1).collect();
        out.push_str(&format!("// region {:?}\n", r.ops));
        for k in codegen::generate(&r.spec, &dtypes, &format!("ce{i}")) {
            out.push_str(&format!(
                "// {}: launch {:?}, params {:?}\n",
                view.ops[i].symbol, k.launch, k.params
            ));
            out.push_str(&k.source);
            out.push('\n');
        }
        regions.push(r.ops);
    }
    assert_eq!(
        regions,
        [
            vec![0, 1, 2],
            vec![3, 4, 5, 6, 7],
            vec![8, 9],
            vec![10],
            vec![12],
            vec![13, 14],
            vec![15, 16, 17]
        ]
    );
    check_golden("cross_entropy", &out);
}
