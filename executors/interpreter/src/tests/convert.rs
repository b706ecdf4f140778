use super::*;

fn convert(x: &Buf, to: DTypeCode) -> Buf {
    eval(
        "prims.convert_element_type",
        &[x],
        |i| vec![val(i[0]), ArgView::DType(to)],
        to,
        &x.shape,
    )
    .expect("convert_element_type")
}

#[test]
fn convert_from_f64_to_every_dtype() {
    let x = Buf::new(F64, &[5], &[-1.7, 0.0, 2.5, 300.0, f64::NAN]);
    // f16(1.7) = 1 + 717/1024 and bf16(1.7) = 1 + 90/128: the next mantissa bits round up.
    let cases: [(DTypeCode, [f64; 5]); 10] = [
        (B8, [1.0, 0.0, 1.0, 1.0, 1.0]),
        (U8, [255.0, 0.0, 2.0, 44.0, 0.0]),
        (I8, [-1.0, 0.0, 2.0, 44.0, 0.0]),
        (I16, [-1.0, 0.0, 2.0, 300.0, 0.0]),
        (I32, [-1.0, 0.0, 2.0, 300.0, 0.0]),
        (I64, [-1.0, 0.0, 2.0, 300.0, 0.0]),
        (F16, [-1.700_195_312_5, 0.0, 2.5, 300.0, f64::NAN]),
        (BF16, [-1.703_125, 0.0, 2.5, 300.0, f64::NAN]),
        (F32, [f64::from(-1.7f32), 0.0, 2.5, 300.0, f64::NAN]),
        (F64, [-1.7, 0.0, 2.5, 300.0, f64::NAN]),
    ];
    for (dtype, want) in cases {
        let got = convert(&x, dtype);
        assert_eq!(got.dtype, dtype);
        assert_floats(&got.f64s(), &want);
    }
}

#[test]
fn convert_from_every_dtype_to_f32() {
    let cases: [(DTypeCode, Vec<f64>, Vec<f64>); 9] = [
        (B8, vec![1.0, 0.0], vec![1.0, 0.0]),
        (U8, vec![255.0, 7.0], vec![255.0, 7.0]),
        (I8, vec![-128.0, 127.0], vec![-128.0, 127.0]),
        (I16, vec![-32768.0, 5.0], vec![-32768.0, 5.0]),
        // 2^24 + 1 is not an f32; it ties between 2^24 and 2^24 + 2 and goes to even.
        (I32, vec![16_777_217.0, -3.0], vec![16_777_216.0, -3.0]),
        (
            F16,
            vec![f64::from(f16::from_f32(0.1).to_f32()), -2.0],
            vec![0.099_975_585_937_5, -2.0],
        ),
        (BF16, vec![1.5, -0.5], vec![1.5, -0.5]),
        (F32, vec![0.25, 1e30], vec![0.25, f64::from(1e30f32)]),
        (
            F64,
            vec![0.1, 1e300],
            vec![f64::from(0.1f32), f64::INFINITY],
        ),
    ];
    for (dtype, values, want) in cases {
        let x = Buf::new(dtype, &[2], &values);
        assert_floats(&convert(&x, F32).f64s(), &want);
    }
    let big = Buf::i64s_of(&[1], &[(1 << 53) + 1]);
    assert_floats(&convert(&big, F32).f64s(), &[2f64.powi(53)]);
}

#[test]
fn convert_to_bool_and_between_int_widths() {
    let x = Buf::new(I32, &[4], &[0.0, -3.0, 256.0, 200.0]);
    assert_eq!(convert(&x, B8).bools(), [false, true, true, true]);
    assert_eq!(convert(&x, U8).i64s(), [0, 253, 0, 200]);
    assert_eq!(convert(&x, I8).i64s(), [0, -3, 0, -56]);
    let b = Buf::new(B8, &[2], &[1.0, 0.0]);
    assert_eq!(convert(&b, I64).i64s(), [1, 0]);
    assert_floats(&convert(&b, BF16).f64s(), &[1.0, 0.0]);
}

#[test]
fn f16_and_bf16_round_correctly_just_above_a_tie() {
    // 1 + 2^-11 alone is a tie (to even: 1); the 2^-40 beyond it must round up. Rounding that
    // looks only at the top 32 bits of the f64 sees a tie and returns 1.
    let x = Buf::new(
        F64,
        &[2],
        &[1.0 + 2f64.powi(-11) + 2f64.powi(-40), 1.0 + 2f64.powi(-11)],
    );
    assert_floats(&convert(&x, F16).f64s(), &[1.000_976_562_5, 1.0]);
    let y = Buf::new(
        F64,
        &[2],
        &[1.0 + 2f64.powi(-8) + 2f64.powi(-40), 1.0 + 2f64.powi(-8)],
    );
    assert_floats(&convert(&y, BF16).f64s(), &[1.007_812_5, 1.0]);
    // f16 subnormals: the smallest is 2^-24; half of it is a tie to 0, a hair more rounds up.
    let tiny = Buf::new(
        F64,
        &[3],
        &[
            2f64.powi(-25),
            2f64.powi(-25) + 2f64.powi(-40),
            -3.0 * 2f64.powi(-25),
        ],
    );
    assert_floats(
        &convert(&tiny, F16).f64s(),
        &[0.0, 2f64.powi(-24), -2f64.powi(-23)],
    );
    // Past the largest finite value (65504 and 2^128 - 2^120) by half an ulp: infinity.
    let huge = Buf::new(F64, &[2], &[65520.0, 65519.0]);
    assert_floats(&convert(&huge, F16).f64s(), &[f64::INFINITY, 65504.0]);
    let huge = Buf::new(F64, &[1], &[2f64.powi(128) - 2f64.powi(119)]);
    assert_floats(&convert(&huge, BF16).f64s(), &[f64::INFINITY]);
}

#[test]
fn int_to_bf16_rounds_once() {
    // 2^60 + 2^52 + 1 is above the tie 2^60 + 2^52, so bf16 rounds up to 2^60 + 2^53. Going
    // through f64 first would drop the +1, leave an exact tie and round to even (2^60).
    let x = Buf::i64s_of(&[1], &[(1 << 60) + (1 << 52) + 1]);
    assert_floats(&convert(&x, BF16).f64s(), &[2f64.powi(60) + 2f64.powi(53)]);
}
