use super::*;
use thunder_abi::PluginErrorKind;

/// `(dtype, a, b, a + b)`.
type AddCase = (DTypeCode, Vec<f64>, Vec<f64>, Vec<f64>);
type F32Fn = fn(f32) -> f32;

fn unary(symbol: &str, x: &Buf) -> Result<Buf, PluginError> {
    eval(symbol, &[x], |ids| vec![val(ids[0])], x.dtype, &x.shape)
}

fn binary(symbol: &str, a: &Buf, b: &Buf) -> Buf {
    eval(
        symbol,
        &[a, b],
        |ids| vec![val(ids[0]), val(ids[1])],
        a.dtype,
        &a.shape,
    )
    .expect(symbol)
}

#[test]
fn unary_float_ops_agree_with_std_f32_within_one_rounding() {
    let xs = [0.5f32, 1.0, 2.0, 3.0];
    let x = Buf::new(F32, &[4], &xs.map(f64::from));
    let cases: [(&str, F32Fn); 22] = [
        ("prims.neg", |v| -v),
        ("prims.abs", f32::abs),
        ("prims.exp", f32::exp),
        ("prims.log", f32::ln),
        ("prims.sqrt", f32::sqrt),
        ("prims.rsqrt", |v| 1.0 / v.sqrt()),
        ("prims.tanh", f32::tanh),
        ("prims.sin", f32::sin),
        ("prims.cos", f32::cos),
        ("prims.reciprocal", |v| 1.0 / v),
        ("prims.exp2", f32::exp2),
        ("prims.expm1", f32::exp_m1),
        ("prims.log1p", f32::ln_1p),
        ("prims.log2", f32::log2),
        ("prims.log10", f32::log10),
        ("prims.tan", f32::tan),
        ("prims.atan", f32::atan),
        ("prims.sinh", f32::sinh),
        ("prims.cosh", f32::cosh),
        ("prims.asinh", f32::asinh),
        ("prims.erfc", |v| libm::erfcf(v)),
        ("prims.lgamma", |v| libm::lgammaf(v)),
    ];
    for (symbol, f) in cases {
        let got = unary(symbol, &x).expect(symbol).f64s();
        for (g, &v) in got.iter().zip(&xs) {
            let want = f64::from(f(v));
            // std's f32 functions may be one ulp off the correctly rounded result.
            assert!(
                (g - want).abs() <= want.abs() * f64::from(f32::EPSILON),
                "{symbol}({v}) = {g}, want {want}"
            );
            assert_eq!(*g as f32 as f64, *g, "{symbol}({v}) = {g} is not an f32");
        }
    }
    // Exact cases: no tolerance.
    let exact = Buf::new(F32, &[2], &[4.0, 0.25]);
    assert_floats(
        &unary("prims.sqrt", &exact).expect("sqrt").f64s(),
        &[2.0, 0.5],
    );
    assert_floats(
        &unary("prims.rsqrt", &exact).expect("rsqrt").f64s(),
        &[0.5, 2.0],
    );
    assert_floats(
        &unary("prims.reciprocal", &exact).expect("recip").f64s(),
        &[0.25, 4.0],
    );
}

#[test]
fn erf_matches_tabulated_values() {
    let x = Buf::new(F64, &[4], &[0.0, 0.5, -1.0, 2.0]);
    let got = unary("prims.erf", &x).expect("erf").f64s();
    let want = [
        0.0,
        0.520_499_877_813_046_5,
        -0.842_700_792_949_714_9,
        0.995_322_265_018_952_7,
    ];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-15, "erf: got {g}, want {w}");
    }
}

#[test]
fn erfinv_inverts_erf_and_handles_the_edges() {
    use thunder_abi::prims::special::erfinv;
    for &x in &[-2.9, -1.0, -0.3, 1e-9, 0.2, 0.8, 1.7, 2.2, 2.9] {
        let got = erfinv(libm::erf(x));
        // Towards the tails erf(x) is flat, so its own rounding moves the inverse more.
        let tol = if x.abs() > 2.0 { 1e-12 } else { 1e-14 };
        assert!((got - x).abs() <= tol * x.abs(), "erfinv(erf({x})) = {got}");
    }
    assert_eq!(erfinv(1.0), f64::INFINITY);
    assert_eq!(erfinv(-1.0), f64::NEG_INFINITY);
    assert!(erfinv(1.5).is_nan() && erfinv(f64::NAN).is_nan());
    assert!(erfinv(-0.0).is_sign_negative());
    // Tabulated: erfinv(0.5) = 0.4769362762044699
    assert!((erfinv(0.5) - 0.476_936_276_204_469_9).abs() < 1e-15);
}

#[test]
fn digamma_matches_tabulated_values_and_poles() {
    use thunder_abi::prims::special::digamma;
    let euler = 0.577_215_664_901_532_9;
    for (x, want) in [
        (1.0, -euler),
        (0.5, -euler - 2.0 * std::f64::consts::LN_2),
        (2.0, 1.0 - euler),
        (10.0, 2.251_752_589_066_721),
        (-0.5, 0.036_489_973_978_576_52),
        (100.0, 4.600_161_852_738_087),
    ] {
        let got = digamma(x);
        assert!(
            (got - want).abs() <= 1e-14 * want.abs().max(1.0),
            "digamma({x}) = {got}"
        );
    }
    assert_eq!(digamma(0.0), f64::NEG_INFINITY);
    assert_eq!(digamma(-0.0), f64::INFINITY);
    assert!(digamma(-3.0).is_nan() && digamma(f64::NAN).is_nan());
}

#[test]
fn rounding_is_half_to_even_and_keeps_the_sign_of_zero() {
    let x = Buf::new(F32, &[6], &[0.5, 1.5, 2.5, -0.5, -1.7, 2.2]);
    let got = |s: &str| unary(s, &x).expect(s).f64s();
    assert_floats(&got("prims.round"), &[0.0, 2.0, 2.0, -0.0, -2.0, 2.0]);
    assert_floats(&got("prims.floor"), &[0.0, 1.0, 2.0, -1.0, -2.0, 2.0]);
    assert_floats(&got("prims.ceil"), &[1.0, 2.0, 3.0, -0.0, -1.0, 3.0]);
    assert_floats(&got("prims.trunc"), &[0.0, 1.0, 2.0, -0.0, -1.0, 2.0]);
    assert!(got("prims.round")[3].is_sign_negative());
}

#[test]
fn signbit_gives_b8_and_sees_negative_zero_and_nan() {
    let x = Buf::new(F64, &[5], &[-0.0, 0.0, -f64::NAN, f64::NAN, -3.0]);
    let out = eval(
        "prims.signbit",
        &[&x],
        |ids| vec![val(ids[0])],
        B8,
        &x.shape,
    )
    .expect("signbit");
    assert_eq!(out.bools(), [true, false, true, false, true]);
    let ints = Buf::new(I32, &[1], &[-1.0]);
    assert_err(
        eval(
            "prims.signbit",
            &[&ints],
            |ids| vec![val(ids[0])],
            B8,
            &ints.shape,
        ),
        PluginErrorKind::Unsupported,
        &["i32"],
    );
}

#[test]
fn int_neg_and_abs_wrap_to_the_width() {
    let x = Buf::new(I8, &[3], &[-128.0, 5.0, -3.0]);
    assert_eq!(unary("prims.neg", &x).expect("neg").i64s(), [-128, -5, 3]);
    assert_eq!(unary("prims.abs", &x).expect("abs").i64s(), [-128, 5, 3]);
    let u = Buf::new(U8, &[2], &[1.0, 0.0]);
    assert_eq!(unary("prims.neg", &u).expect("neg u8").i64s(), [255, 0]);
}

#[test]
fn transcendental_on_ints_and_any_unary_on_bool_are_unsupported() {
    let x = Buf::new(I32, &[2], &[1.0, 2.0]);
    assert_err(
        unary("prims.exp", &x),
        PluginErrorKind::Unsupported,
        &["prims.exp", "i32"],
    );
    let b = Buf::new(B8, &[1], &[1.0]);
    assert_err(
        unary("prims.neg", &b),
        PluginErrorKind::Unsupported,
        &["prims.neg", "b8"],
    );
}

#[test]
fn binary_float_ops() {
    let a = Buf::new(F32, &[3], &[6.0, -1.0, 2.0]);
    let b = Buf::new(F32, &[3], &[4.0, 3.0, 0.5]);
    let f = |v: f32| f64::from(v);
    let cases: [(&str, [f64; 3]); 7] = [
        ("prims.add", [10.0, 2.0, 2.5]),
        ("prims.sub", [2.0, -4.0, 1.5]),
        ("prims.mul", [24.0, -3.0, 1.0]),
        ("prims.div", [1.5, f(-1.0f32 / 3.0), 4.0]),
        ("prims.pow", [1296.0, -1.0, f(2.0f32.sqrt())]),
        ("prims.maximum", [6.0, 3.0, 2.0]),
        ("prims.minimum", [4.0, -1.0, 0.5]),
    ];
    for (symbol, want) in cases {
        assert_floats(&binary(symbol, &a, &b).f64s(), &want);
    }
}

#[test]
fn binary_int_ops_truncate_and_wrap() {
    let a = Buf::new(I32, &[4], &[7.0, -7.0, 2.0, 5.0]);
    let b = Buf::new(I32, &[4], &[2.0, 2.0, 10.0, -3.0]);
    let cases: [(&str, [i64; 4]); 6] = [
        ("prims.add", [9, -5, 12, 2]),
        ("prims.sub", [5, -9, -8, 8]),
        ("prims.mul", [14, -14, 20, -15]),
        ("prims.div", [3, -3, 0, -1]),
        ("prims.maximum", [7, 2, 10, 5]),
        ("prims.minimum", [2, -7, 2, -3]),
    ];
    for (symbol, want) in cases {
        assert_eq!(binary(symbol, &a, &b).i64s(), want, "{symbol}");
    }
    let base = Buf::new(I32, &[4], &[3.0, -2.0, 0.0, 7.0]);
    let exp = Buf::new(I32, &[4], &[4.0, 3.0, 0.0, 1.0]);
    assert_eq!(binary("prims.pow", &base, &exp).i64s(), [81, -8, 1, 7]);
    let two = Buf::new(I8, &[1], &[2.0]);
    assert_eq!(
        binary("prims.pow", &two, &Buf::new(I8, &[1], &[7.0])).i64s(),
        [-128]
    );
    let three = Buf::new(U8, &[2], &[3.0, 2.0]);
    assert_eq!(
        binary("prims.pow", &three, &Buf::new(U8, &[2], &[5.0, 8.0])).i64s(),
        [243, 0]
    );
}

#[test]
fn remainder_fmod_and_floor_divide_follow_their_sign_conventions() {
    let a = Buf::new(I8, &[5], &[7.0, -7.0, 7.0, -7.0, -128.0]);
    let b = Buf::new(I8, &[5], &[3.0, 3.0, -3.0, -3.0, -1.0]);
    assert_eq!(binary("prims.remainder", &a, &b).i64s(), [1, 2, -2, -1, 0]);
    assert_eq!(binary("prims.fmod", &a, &b).i64s(), [1, -1, 1, -1, 0]);
    // -128 // -1 wraps to -128 in i8, as in torch.
    assert_eq!(
        binary("prims.floor_divide", &a, &b).i64s(),
        [2, -3, -3, 2, -128]
    );
    let x = Buf::new(F64, &[4], &[7.5, -7.5, 1.0, -0.0]);
    let y = Buf::new(F64, &[4], &[2.0, 2.0, 0.1, 3.0]);
    assert_floats(
        &binary("prims.remainder", &x, &y).f64s(),
        &[1.5, 0.5, 1.0 % 0.1, -0.0],
    );
    assert_floats(
        &binary("prims.fmod", &x, &y).f64s(),
        &[1.5, -1.5, 1.0 % 0.1, -0.0],
    );
    // floor(1 / 0.1) would be 10; torch (and we) give 9.
    assert_floats(
        &binary("prims.floor_divide", &x, &y).f64s(),
        &[3.0, -4.0, 9.0, -0.0],
    );
    for symbol in ["prims.remainder", "prims.fmod", "prims.floor_divide"] {
        let zero = Buf::new(I32, &[1], &[0.0]);
        let r = eval(
            symbol,
            &[&zero, &zero],
            |i| vec![val(i[0]), val(i[1])],
            I32,
            &[1],
        );
        assert_err(r, PluginErrorKind::Invalid, &[symbol, "division by zero"]);
    }
}

#[test]
fn bitwise_ops_and_shifts_match_twos_complement() {
    let a = Buf::new(I8, &[4], &[-128.0, -1.0, 85.0, 5.0]);
    let b = Buf::new(I8, &[4], &[127.0, -86.0, -86.0, 3.0]);
    assert_eq!(binary("prims.bitwise_and", &a, &b).i64s(), [0, -86, 0, 1]);
    assert_eq!(binary("prims.bitwise_or", &a, &b).i64s(), [-1, -1, -1, 7]);
    assert_eq!(binary("prims.bitwise_xor", &a, &b).i64s(), [-1, 85, -1, 6]);
    let s = Buf::new(I8, &[4], &[7.0, 8.0, -1.0, 1.0]);
    let v = Buf::new(I8, &[4], &[5.0, -5.0, -5.0, -5.0]);
    assert_eq!(
        binary("prims.bitwise_left_shift", &v, &s).i64s(),
        [-128, 0, 0, -10]
    );
    assert_eq!(
        binary("prims.bitwise_right_shift", &v, &s).i64s(),
        [0, -1, -1, -3]
    );
    let t = Buf::new(B8, &[2], &[1.0, 0.0]);
    let f = Buf::new(B8, &[2], &[1.0, 1.0]);
    assert_eq!(binary("prims.bitwise_xor", &t, &f).bools(), [false, true]);
    let x = Buf::new(F32, &[1], &[1.0]);
    let r = eval(
        "prims.bitwise_and",
        &[&x, &x],
        |i| vec![val(i[0]), val(i[1])],
        F32,
        &[1],
    );
    assert_err(
        r,
        PluginErrorKind::Unsupported,
        &["prims.bitwise_and", "f32"],
    );
}

#[test]
fn add_in_every_dtype() {
    let cases: [AddCase; 7] = [
        (
            B8,
            vec![0.0, 1.0, 1.0],
            vec![0.0, 0.0, 1.0],
            vec![0.0, 1.0, 1.0],
        ),
        (U8, vec![250.0, 1.0], vec![10.0, 2.0], vec![4.0, 3.0]),
        (
            I8,
            vec![100.0, -100.0],
            vec![100.0, -100.0],
            vec![-56.0, 56.0],
        ),
        (I16, vec![30000.0], vec![30000.0], vec![-5536.0]),
        (I32, vec![2147483647.0], vec![1.0], vec![-2147483648.0]),
        // f16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 and goes to even; 65504 + 16 rounds
        // up to 65536, past the largest f16, so it overflows.
        (
            F16,
            vec![1.0, 65504.0],
            vec![2f64.powi(-11), 16.0],
            vec![1.0, f64::INFINITY],
        ),
        // bf16: 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
        (
            BF16,
            vec![1.0, 1.0],
            vec![2f64.powi(-8), 3.0 * 2f64.powi(-8)],
            vec![1.0, 1.015625],
        ),
    ];
    for (dtype, a, b, want) in cases {
        let n = a.len() as i64;
        let out = binary(
            "prims.add",
            &Buf::new(dtype, &[n], &a),
            &Buf::new(dtype, &[n], &b),
        );
        assert_floats(&out.f64s(), &want);
    }
    let a = Buf::i64s_of(&[1], &[i64::MAX]);
    let b = Buf::i64s_of(&[1], &[1]);
    assert_eq!(binary("prims.add", &a, &b).i64s(), [i64::MIN]);
    let a = Buf::new(F32, &[2], &[1.0, 1.0]);
    let b = Buf::new(F32, &[2], &[2f64.powi(-24), 3.0 * 2f64.powi(-24)]);
    assert_floats(
        &binary("prims.add", &a, &b).f64s(),
        &[1.0, f64::from(1.0f32 + 2f32.powi(-22))],
    );
    let a = Buf::new(F64, &[1], &[0.1]);
    let b = Buf::new(F64, &[1], &[0.2]);
    assert_floats(
        &binary("prims.add", &a, &b).f64s(),
        &[0.300_000_000_000_000_04],
    );
}

#[test]
fn scalar_literals_work_in_either_position() {
    let x = Buf::new(F32, &[2], &[1.0, 4.0]);
    let left = eval(
        "prims.sub",
        &[&x],
        |i| vec![val(i[0]), ArgView::Float(1.5)],
        F32,
        &[2],
    )
    .expect("x - 1.5");
    assert_floats(&left.f64s(), &[-0.5, 2.5]);
    let right = eval(
        "prims.sub",
        &[&x],
        |i| vec![ArgView::Float(10.0), val(i[0])],
        F32,
        &[2],
    )
    .expect("10 - x");
    assert_floats(&right.f64s(), &[9.0, 6.0]);
    let recip = eval(
        "prims.div",
        &[&x],
        |i| vec![ArgView::Int(1), val(i[0])],
        F32,
        &[2],
    )
    .expect("1 / x");
    assert_floats(&recip.f64s(), &[1.0, 0.25]);
    let square = eval(
        "prims.pow",
        &[&x],
        |i| vec![val(i[0]), ArgView::Int(2)],
        F32,
        &[2],
    )
    .expect("x ** 2");
    assert_floats(&square.f64s(), &[1.0, 16.0]);
    let n = Buf::new(I32, &[1], &[3.0]);
    let ten_minus = eval(
        "prims.sub",
        &[&n],
        |i| vec![ArgView::Int(10), val(i[0])],
        I32,
        &[1],
    )
    .expect("10 - n");
    assert_eq!(ten_minus.i64s(), [7]);
    let b = Buf::new(B8, &[2], &[0.0, 1.0]);
    let any = eval(
        "prims.add",
        &[&b],
        |i| vec![ArgView::Bool(true), val(i[0])],
        B8,
        &[2],
    )
    .expect("true + b");
    assert_eq!(any.bools(), [true, true]);
}

#[test]
fn float_literal_on_int_tensor_and_out_of_range_int_literal_are_refused() {
    let n = Buf::new(I8, &[1], &[3.0]);
    let float = eval(
        "prims.add",
        &[&n],
        |i| vec![val(i[0]), ArgView::Float(0.5)],
        I8,
        &[1],
    );
    assert_err(
        float,
        PluginErrorKind::Unsupported,
        &["prims.add", "float scalar"],
    );
    let wide = eval(
        "prims.add",
        &[&n],
        |i| vec![val(i[0]), ArgView::Int(300)],
        I8,
        &[1],
    );
    assert_err(wide, PluginErrorKind::Unsupported, &["prims.add", "300"]);
}

#[test]
fn maximum_and_minimum_propagate_nan() {
    let a = Buf::new(F32, &[3], &[f64::NAN, 1.0, -2.0]);
    let b = Buf::new(F32, &[3], &[1.0, f64::NAN, 2.0]);
    assert_floats(
        &binary("prims.maximum", &a, &b).f64s(),
        &[f64::NAN, f64::NAN, 2.0],
    );
    assert_floats(
        &binary("prims.minimum", &a, &b).f64s(),
        &[f64::NAN, f64::NAN, -2.0],
    );
}

#[test]
fn int_division_by_zero_is_an_error_not_a_panic() {
    let a = Buf::new(I32, &[2], &[1.0, 2.0]);
    let b = Buf::new(I32, &[2], &[1.0, 0.0]);
    let r = eval(
        "prims.div",
        &[&a, &b],
        |i| vec![val(i[0]), val(i[1])],
        I32,
        &[2],
    );
    assert_err(
        r,
        PluginErrorKind::Invalid,
        &["prims.div", "integer division by zero"],
    );
    let r = eval(
        "prims.div",
        &[&a],
        |i| vec![val(i[0]), ArgView::Int(0)],
        I32,
        &[2],
    );
    assert_err(
        r,
        PluginErrorKind::Invalid,
        &["prims.div", "division by zero"],
    );
    // The float case is IEEE, not an error.
    let f = eval(
        "prims.div",
        &[&Buf::new(F32, &[1], &[1.0])],
        |i| vec![val(i[0]), ArgView::Float(0.0)],
        F32,
        &[1],
    );
    assert_floats(&f.expect("1.0 / 0.0").f64s(), &[f64::INFINITY]);
}

#[test]
fn int_negative_power_is_an_error() {
    let a = Buf::new(I64, &[1], &[2.0]);
    let b = Buf::new(I64, &[1], &[-1.0]);
    let r = eval(
        "prims.pow",
        &[&a, &b],
        |i| vec![val(i[0]), val(i[1])],
        I64,
        &[1],
    );
    assert_err(r, PluginErrorKind::Invalid, &["prims.pow", "negative"]);
    let r = eval(
        "prims.pow",
        &[&a],
        |i| vec![val(i[0]), ArgView::Int(-2)],
        I64,
        &[1],
    );
    assert_err(r, PluginErrorKind::Invalid, &["prims.pow", "negative"]);
}
