//! The plugin surface: info, options, claiming, regions, descriptors and their errors.

use super::*;
use crate::{plugin_info, Interpreter};
use thunder_abi::abi_stable::std_types::RStr;
use thunder_abi::prims::Prim;
use thunder_abi::{DeviceKind, HostServices, LogLevel, OptionValue, PluginErrorKind};

extern "C" fn no_alloc(_: DeviceDesc, _: usize, _: usize) -> *mut c_void {
    std::ptr::null_mut()
}
extern "C" fn no_free(_: DeviceDesc, _: *mut c_void, _: usize, _: usize) {}
extern "C" fn no_log(_: LogLevel, _: RStr<'_>, _: RStr<'_>) {}

const SERVICES: HostServices = HostServices {
    alloc: no_alloc,
    free: no_free,
    log: no_log,
};
const CUDA: DeviceDesc = DeviceDesc {
    kind: DeviceKind::Cuda,
    index: 0,
};

#[test]
fn info_lists_every_prim_and_the_cpu() {
    let info = plugin_info();
    assert_eq!(info.name.as_str(), "interpreter");
    assert_eq!(info.version.as_str(), env!("CARGO_PKG_VERSION"));
    assert_eq!(
        info.devices.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
        ["cpu"]
    );
    let symbols: Vec<&str> = info.symbols.iter().map(|s| s.as_str()).collect();
    let prims: Vec<&str> = Prim::ALL.iter().map(|p| p.id()).collect();
    assert_eq!(symbols, prims);
    assert!(symbols.contains(&"prims.convert_element_type"));
}

#[test]
fn create_refuses_unknown_options() {
    assert!(Interpreter::create(SERVICES, &[]).is_ok());
    let err = Interpreter::create(SERVICES, &[("threads".to_string(), OptionValue::Int(4))])
        .expect_err("unknown option");
    assert_eq!(err.kind, PluginErrorKind::Invalid);
    assert!(err.message.contains("threads"), "{}", err.message);
}

#[test]
fn claims_runs_of_cpu_prims_only() {
    let mut t = Trace::new();
    let x = t.input(F32, &[2]);
    let a = t.op("prims.add", vec![val(x), val(x)], F32, &[2]);
    let s = t.op("ltorch.softmax", vec![val(a), ArgView::Int(0)], F32, &[2]);
    let m = t.op("prims.mul", vec![val(s), val(s)], F32, &[2]);
    let n = t.op("prims.neg", vec![val(m)], F32, &[2]);
    t.op_on("prims.exp", vec![val(n)], F32, &[2], CUDA);
    t.op_on(
        "prims.full",
        vec![
            ints(&[2]),
            ArgView::Float(1.0),
            ArgView::Device(CUDA),
            ArgView::DType(F32),
        ],
        F32,
        &[2],
        CUDA,
    );
    t.op("prims.sin", vec![val(x)], F32, &[2]);
    t.op("prims.cos", vec![val(x)], F32, &[2]);
    // What compile would refuse is not claimed: an exp of ints, a malformed add.
    let i = t.input(I32, &[2]);
    t.op("prims.exp", vec![val(i)], I32, &[2]);
    t.op("prims.add", vec![val(i)], I32, &[2]);
    t.op("prims.abs", vec![val(i)], I32, &[2]);
    let claims = Interpreter.claim(&t.view).expect("claim");
    assert_eq!(claims, vec![vec![0], vec![2, 3], vec![6, 7], vec![10]]);
    t.view.ops[2].claimed = true;
    let claims = Interpreter.claim(&t.view).expect("claim");
    assert_eq!(claims, vec![vec![0], vec![3], vec![6, 7], vec![10]]);
    // Every claimed op compiles on its own.
    for op in claims.concat() {
        let o = &t.view.ops[op as usize];
        let mut inputs: Vec<u32> = o.input_values().collect();
        inputs.dedup();
        let region = RegionSpec {
            ops: vec![op].into(),
            inputs: inputs.into(),
            outputs: o.outputs.clone(),
        };
        assert!(
            Interpreter.compile(&t.view, &region).is_ok(),
            "op {op} was claimed but does not compile"
        );
    }
}

#[test]
fn multi_op_region_with_intermediates_and_a_passthrough_output() {
    // y = sum(exp(x * 0) * x, dim 1); the region also hands back x itself and the product.
    let mut t = Trace::new();
    let x = t.input(F32, &[2, 3]);
    let zero = t.op("prims.mul", vec![val(x), ArgView::Float(0.0)], F32, &[2, 3]);
    let one = t.op("prims.exp", vec![val(zero)], F32, &[2, 3]);
    let prod = t.op("prims.mul", vec![val(one), val(x)], F32, &[2, 3]);
    let y = t.op("prims.sum", vec![val(prod), ints(&[1])], F32, &[2]);
    let xb = Buf::new(F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let outs = t.run(&[&xb], &[y, x, prod]).expect("region");
    assert_floats(&outs[0].f64s(), &[6.0, 15.0]);
    assert_floats(&outs[1].f64s(), &xb.f64s());
    assert_floats(&outs[2].f64s(), &xb.f64s());
    // The compiled region runs again with other data.
    let compiled = t.compile(&[y]).expect("compile");
    let x2 = Buf::new(F32, &[2, 3], &[1.0; 6]);
    let mut out = Buf::zeros(F32, &[2]);
    let od = out.desc_mut();
    compiled
        .run(&[x2.desc()], &[od], &ExecContext::CPU)
        .expect("second run");
    assert_floats(&out.f64s(), &[3.0, 3.0]);
}

#[test]
fn strided_and_offset_input_descriptors_are_honoured() {
    // Memory holds [[1, 2], [3, 4], [5, 6]]; viewed as its transpose (2, 3) with strides (1, 2).
    let mut t = Trace::new();
    let x = t.input(F32, &[2, 3]);
    t.op("prims.neg", vec![val(x)], F32, &[2, 3]);
    let mut xb = Buf::new(F32, &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    xb.shape = vec![2, 3];
    xb.strides = vec![1, 2];
    assert_floats(
        &t.run1(&[&xb]).expect("transposed").f64s(),
        &[-1.0, -3.0, -5.0, -2.0, -4.0, -6.0],
    );
    // The same data after two f32s of padding, reached through byte_offset, walked backwards.
    let mut padded = Buf::new(F32, &[8], &[0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    padded.shape = vec![2, 3];
    padded.strides = vec![-1, -2];
    padded.byte_offset = 7 * 4;
    assert_floats(
        &t.run1(&[&padded]).expect("negative strides").f64s(),
        &[-6.0, -4.0, -2.0, -5.0, -3.0, -1.0],
    );
    // Stride 0 repeats one row.
    let mut row = Buf::new(F32, &[3], &[7.0, 8.0, 9.0]);
    row.shape = vec![2, 3];
    row.strides = vec![0, 1];
    assert_floats(
        &t.run1(&[&row]).expect("stride 0").f64s(),
        &[-7.0, -8.0, -9.0, -7.0, -8.0, -9.0],
    );
}

#[test]
fn strided_output_descriptors_are_written_through_their_strides() {
    let mut t = Trace::new();
    let x = t.input(I32, &[2, 2]);
    let y = t.op("prims.add", vec![val(x), ArgView::Int(10)], I32, &[2, 2]);
    let compiled = t.compile(&[y]).expect("compile");
    let xb = Buf::new(I32, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let mut out = Buf::zeros(I32, &[2, 2]);
    out.strides = vec![1, 2];
    let od = out.desc_mut();
    compiled
        .run(&[xb.desc()], &[od], &ExecContext::CPU)
        .expect("run");
    assert_eq!(out.i64s(), [11, 13, 12, 14]);
}

#[test]
fn mismatched_descriptors_are_errors() {
    let mut t = Trace::new();
    let x = t.input(F32, &[2]);
    t.op("prims.abs", vec![val(x)], F32, &[2]);
    let wrong_dtype = Buf::new(F64, &[2], &[1.0, 2.0]);
    assert_err(
        t.run1(&[&wrong_dtype]),
        PluginErrorKind::Invalid,
        &["input 0", "f32[2]", "f64[2]"],
    );
    let wrong_shape = Buf::new(F32, &[3], &[1.0, 2.0, 3.0]);
    assert_err(
        t.run1(&[&wrong_shape]),
        PluginErrorKind::Invalid,
        &["input 0", "f32[3]"],
    );
    let mut bad_strides = Buf::new(F32, &[2], &[1.0, 2.0]);
    bad_strides.strides = vec![1, 1];
    assert_err(
        t.run1(&[&bad_strides]),
        PluginErrorKind::Invalid,
        &["strides"],
    );
    let ok = Buf::new(F32, &[2], &[1.0, 2.0]);
    assert_err(
        t.run1(&[&ok, &ok]),
        PluginErrorKind::Invalid,
        &["expected 1 inputs"],
    );
    let mut null = Buf::new(F32, &[2], &[1.0, 2.0]);
    null.bytes.clear();
    assert_err(t.run1(&[&null]), PluginErrorKind::Invalid, &["null"]);

    let compiled = t.compile(&[1]).expect("compile");
    let out = Buf::zeros(F16, &[2]);
    let err = compiled
        .run(&[ok.desc()], &[out.desc()], &ExecContext::CPU)
        .expect_err("f16 output");
    assert!(err.message.contains("output 0"), "{}", err.message);
}

#[test]
fn scalar_and_empty_shapes() {
    let a = Buf::new(F32, &[], &[2.5]);
    let b = Buf::new(F32, &[], &[1.0]);
    let out = eval(
        "prims.add",
        &[&a, &b],
        |i| vec![val(i[0]), val(i[1])],
        F32,
        &[],
    )
    .expect("()");
    assert_floats(&out.f64s(), &[3.5]);
    let e = Buf::new(F16, &[0], &[]);
    let out = eval(
        "prims.mul",
        &[&e, &e],
        |i| vec![val(i[0]), val(i[1])],
        F16,
        &[0],
    )
    .expect("(0,)");
    assert_eq!((out.numel(), out.shape.clone()), (0, vec![0]));
    let out = eval(
        "prims.lt",
        &[&e],
        |i| vec![val(i[0]), ArgView::Float(1.0)],
        B8,
        &[0],
    )
    .expect("(0,) compare");
    assert_eq!(out.numel(), 0);
    let out =
        eval("prims.sum", &[&a], |i| vec![val(i[0]), ints(&[])], F32, &[]).expect("sum of ()");
    assert_floats(&out.f64s(), &[2.5]);
}

#[test]
fn malformed_ops_are_compile_errors_naming_the_op() {
    let x = Buf::new(F32, &[2], &[1.0, 2.0]);
    let arity = eval("prims.add", &[&x], |i| vec![val(i[0])], F32, &[2]);
    assert_err(
        arity,
        PluginErrorKind::Invalid,
        &["prims.add", "expected 2 arguments"],
    );
    let out_meta = eval(
        "prims.add",
        &[&x],
        |i| vec![val(i[0]), val(i[0])],
        F64,
        &[2],
    );
    assert_err(
        out_meta,
        PluginErrorKind::Invalid,
        &["prims.add", "f64[2]", "f32[2]"],
    );
    let not_prim = eval("ltorch.relu", &[&x], |i| vec![val(i[0])], F32, &[2]);
    assert_err(not_prim, PluginErrorKind::Unsupported, &["ltorch.relu"]);

    let mut t = Trace::new();
    let x = t.input(F32, &[2]);
    let later = t.view.values.len() as u32 + 1;
    t.op("prims.neg", vec![val(later)], F32, &[2]);
    t.op("prims.neg", vec![val(x)], F32, &[2]);
    let err = t.compile(&[later]).err().expect("read before write");
    assert!(
        err.message.contains("prims.neg") && err.message.contains("not defined"),
        "{}",
        err.message
    );

    let mut t = Trace::new();
    let x = t.input(F32, &[2]);
    t.op("prims.neg", vec![val(x)], F32, &[2]);
    let err = t.compile(&[99]).err().expect("unknown output");
    assert_eq!(err.kind, PluginErrorKind::Invalid);
    assert!(err.message.contains("99"), "{}", err.message);
}
