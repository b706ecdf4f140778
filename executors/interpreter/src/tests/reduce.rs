//! Reductions, matmul and full.

use super::*;
use thunder_abi::PluginErrorKind;

fn reduce(symbol: &str, x: &Buf, dims: &[i64], out: &[i64]) -> Result<Buf, PluginError> {
    eval(symbol, &[x], |i| vec![val(i[0]), ints(dims)], x.dtype, out)
}

#[test]
fn sum_over_each_set_of_dims() {
    let x = Buf::new(F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_floats(
        &reduce("prims.sum", &x, &[1], &[2]).expect("dim 1").f64s(),
        &[6.0, 15.0],
    );
    assert_floats(
        &reduce("prims.sum", &x, &[0], &[3]).expect("dim 0").f64s(),
        &[5.0, 7.0, 9.0],
    );
    let all = reduce("prims.sum", &x, &[1, 0], &[]).expect("all dims");
    assert_eq!(all.shape, Vec::<i64>::new());
    assert_floats(&all.f64s(), &[21.0]);
    assert_floats(
        &reduce("prims.sum", &x, &[], &[2, 3])
            .expect("no dims")
            .f64s(),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    );
}

#[test]
fn sum_over_a_zero_size_dim_is_zero() {
    let x = Buf::new(F64, &[0, 3], &[]);
    assert_floats(
        &reduce("prims.sum", &x, &[0], &[3])
            .expect("sum of nothing")
            .f64s(),
        &[0.0; 3],
    );
    let y = Buf::new(I32, &[3, 0], &[]);
    assert_eq!(
        reduce("prims.sum", &y, &[1], &[3])
            .expect("int sum of nothing")
            .i64s(),
        [0, 0, 0]
    );
}

#[test]
fn f16_sum_accumulates_wide_and_int_sum_wraps() {
    // A running f16 sum of ones stalls at 2048 (2048 + 1 ties back to 2048).
    let ones = Buf::new(F16, &[4096], &[1.0; 4096]);
    assert_floats(
        &reduce("prims.sum", &ones, &[0], &[])
            .expect("f16 sum")
            .f64s(),
        &[4096.0],
    );
    let x = Buf::new(I8, &[2], &[100.0, 100.0]);
    assert_eq!(
        reduce("prims.sum", &x, &[0], &[]).expect("i8 sum").i64s(),
        [-56]
    );
    let b = Buf::new(B8, &[2], &[1.0, 1.0]);
    assert_err(
        reduce("prims.sum", &b, &[0], &[]),
        PluginErrorKind::Unsupported,
        &["prims.sum", "b8"],
    );
}

#[test]
fn amax_propagates_nan_and_handles_ints_and_bools() {
    let x = Buf::new(F32, &[2, 2], &[1.0, f64::NAN, 3.0, 2.0]);
    assert_floats(
        &reduce("prims.amax", &x, &[1], &[2]).expect("rows").f64s(),
        &[f64::NAN, 3.0],
    );
    assert_floats(
        &reduce("prims.amax", &x, &[0], &[2]).expect("cols").f64s(),
        &[3.0, f64::NAN],
    );
    let n = Buf::new(I64, &[3], &[-5.0, -3.0, -9.0]);
    assert_eq!(
        reduce("prims.amax", &n, &[0], &[]).expect("ints").i64s(),
        [-3]
    );
    let b = Buf::new(B8, &[2, 2], &[0.0, 0.0, 0.0, 1.0]);
    assert_eq!(
        reduce("prims.amax", &b, &[1], &[2]).expect("bools").bools(),
        [false, true]
    );
}

#[test]
fn amax_over_a_zero_size_dim_is_an_error() {
    let x = Buf::new(F32, &[0, 2], &[]);
    assert_err(
        reduce("prims.amax", &x, &[0], &[2]),
        PluginErrorKind::Invalid,
        &["prims.amax", "size 0"],
    );
    // Reducing a non-empty dim of an empty tensor is fine: the output is empty too.
    let out = reduce("prims.amax", &x, &[1], &[0]).expect("empty output");
    assert_eq!(out.numel(), 0);
}

fn matmul(a: &Buf, b: &Buf, out: &[i64]) -> Result<Buf, PluginError> {
    eval(
        "prims.matmul",
        &[a, b],
        |i| vec![val(i[0]), val(i[1])],
        a.dtype,
        out,
    )
}

#[test]
fn matmul_2d_batched_and_int() {
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
    // [[1, 2, 3], [4, 5, 6]] @ [[7, 8], [9, 10], [11, 12]]
    let out = matmul(
        &Buf::new(F32, &[2, 3], &a),
        &Buf::new(F32, &[3, 2], &b),
        &[2, 2],
    )
    .expect("f32");
    assert_floats(&out.f64s(), &[58.0, 64.0, 139.0, 154.0]);
    let out = matmul(
        &Buf::new(I32, &[2, 3], &a),
        &Buf::new(I32, &[3, 2], &b),
        &[2, 2],
    )
    .expect("i32");
    assert_eq!(out.i64s(), [58, 64, 139, 154]);
    // Two batches of [1, 3] @ [3, 1].
    let out = matmul(
        &Buf::new(F64, &[2, 1, 3], &a),
        &Buf::new(F64, &[2, 3, 1], &b),
        &[2, 1, 1],
    )
    .expect("batched");
    assert_floats(&out.f64s(), &[7.0 + 16.0 + 27.0, 40.0 + 55.0 + 72.0]);
}

#[test]
fn matmul_edge_cases() {
    let a = Buf::new(F32, &[2, 0], &[]);
    let b = Buf::new(F32, &[0, 3], &[]);
    assert_floats(&matmul(&a, &b, &[2, 3]).expect("k = 0").f64s(), &[0.0; 6]);
    // A running f16 sum 2048 + 1 + 1 stays at 2048; accumulating wide gives 2050, an f16.
    let a = Buf::new(F16, &[1, 3], &[2048.0, 1.0, 1.0]);
    let b = Buf::new(F16, &[3, 1], &[1.0, 1.0, 1.0]);
    assert_floats(&matmul(&a, &b, &[1, 1]).expect("f16").f64s(), &[2050.0]);
    let p = Buf::new(B8, &[1, 1], &[1.0]);
    assert_err(
        matmul(&p, &p, &[1, 1]),
        PluginErrorKind::Unsupported,
        &["prims.matmul", "b8"],
    );
    let q = Buf::new(F32, &[2, 2], &[1.0; 4]);
    let r = Buf::new(F32, &[3, 2], &[1.0; 6]);
    assert_err(
        matmul(&q, &r, &[2, 2]),
        PluginErrorKind::Invalid,
        &["prims.matmul", "cannot multiply"],
    );
}

fn full(shape: &[i64], fill: ArgView, dtype: DTypeCode) -> Result<Buf, PluginError> {
    eval(
        "prims.full",
        &[],
        |_| {
            vec![
                ints(shape),
                fill,
                ArgView::Device(DeviceDesc::CPU),
                ArgView::DType(dtype),
            ]
        },
        dtype,
        shape,
    )
}

#[test]
fn full_converts_its_fill_value() {
    assert_floats(
        &full(&[2, 2], ArgView::Float(1.5), F32).expect("f32").f64s(),
        &[1.5; 4],
    );
    assert_eq!(
        full(&[3], ArgView::Int(-7), I32).expect("i32").i64s(),
        [-7; 3]
    );
    assert_eq!(
        full(&[2], ArgView::Float(2.7), U8)
            .expect("float to u8")
            .i64s(),
        [2, 2]
    );
    assert_eq!(
        full(&[2], ArgView::Int(2), B8)
            .expect("int to bool")
            .bools(),
        [true, true]
    );
    assert_floats(
        &full(&[1], ArgView::Float(0.1), F16).expect("f16").f64s(),
        &[0.099_975_585_937_5],
    );
    assert_floats(
        &full(&[1], ArgView::Bool(true), BF16)
            .expect("bool to bf16")
            .f64s(),
        &[1.0],
    );
    let scalar = full(&[], ArgView::Float(-2.0), F64).expect("()");
    assert_eq!((scalar.shape.len(), scalar.f64s()), (0, vec![-2.0]));
    assert_eq!(full(&[0], ArgView::Int(1), I64).expect("(0,)").numel(), 0);
    let r = full(&[1], ArgView::Int(300), I8);
    assert_err(r, PluginErrorKind::Invalid, &["prims.full", "300"]);
}
