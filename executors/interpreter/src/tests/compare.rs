//! Comparisons, where, and bool arithmetic.

use super::*;
use thunder_abi::PluginErrorKind;

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
fn comparisons_follow_ieee_with_nan() {
    let a = Buf::new(F32, &[3], &[1.0, 2.0, f64::NAN]);
    let b = Buf::new(F32, &[3], &[2.0, 2.0, f64::NAN]);
    let cases: [(&str, [bool; 3]); 6] = [
        ("prims.eq", [false, true, false]),
        ("prims.ne", [true, false, true]),
        ("prims.lt", [true, false, false]),
        ("prims.le", [true, true, false]),
        ("prims.gt", [false, false, false]),
        ("prims.ge", [false, true, false]),
    ];
    for (symbol, want) in cases {
        let out = eval(symbol, &[&a, &b], |i| vec![val(i[0]), val(i[1])], B8, &[3]).expect(symbol);
        assert_eq!(out.bools(), want, "{symbol}");
    }
}

#[test]
fn comparisons_against_literals_compare_numerically() {
    let n = Buf::new(I32, &[3], &[1.0, 2.0, 3.0]);
    let lt = eval(
        "prims.lt",
        &[&n],
        |i| vec![val(i[0]), ArgView::Float(2.5)],
        B8,
        &[3],
    )
    .expect("n < 2.5");
    assert_eq!(lt.bools(), [true, true, false]);
    let ge = eval(
        "prims.ge",
        &[&n],
        |i| vec![ArgView::Int(2), val(i[0])],
        B8,
        &[3],
    )
    .expect("2 >= n");
    assert_eq!(ge.bools(), [true, true, false]);
    let b = Buf::new(B8, &[2], &[1.0, 0.0]);
    let gt = eval(
        "prims.gt",
        &[&b],
        |i| vec![val(i[0]), ArgView::Bool(false)],
        B8,
        &[2],
    )
    .expect("b > false");
    assert_eq!(gt.bools(), [true, false]);
}

#[test]
fn where_selects_from_tensors_and_literals() {
    let pred = Buf::new(B8, &[3], &[1.0, 0.0, 1.0]);
    let a = Buf::new(F32, &[3], &[1.0, 2.0, 3.0]);
    let out = eval(
        "prims.where",
        &[&pred, &a],
        |i| vec![val(i[0]), val(i[1]), ArgView::Float(0.5)],
        F32,
        &[3],
    );
    assert_floats(&out.expect("where").f64s(), &[1.0, 0.5, 3.0]);
    let b = Buf::new(I64, &[3], &[10.0, 20.0, 30.0]);
    let out = eval(
        "prims.where",
        &[&pred, &b],
        |i| vec![val(i[0]), ArgView::Int(7), val(i[1])],
        I64,
        &[3],
    );
    assert_eq!(out.expect("where literal first").i64s(), [7, 20, 7]);
}

#[test]
fn bool_add_and_mul_are_or_and_and() {
    let a = Buf::new(B8, &[4], &[0.0, 0.0, 1.0, 1.0]);
    let b = Buf::new(B8, &[4], &[0.0, 1.0, 0.0, 1.0]);
    assert_eq!(
        binary("prims.add", &a, &b).bools(),
        [false, true, true, true]
    );
    assert_eq!(
        binary("prims.mul", &a, &b).bools(),
        [false, false, false, true]
    );
    assert_eq!(
        binary("prims.maximum", &a, &b).bools(),
        [false, true, true, true]
    );
    assert_eq!(
        binary("prims.minimum", &a, &b).bools(),
        [false, false, false, true]
    );
    let r = eval(
        "prims.sub",
        &[&a, &b],
        |i| vec![val(i[0]), val(i[1])],
        B8,
        &[4],
    );
    assert_err(r, PluginErrorKind::Unsupported, &["prims.sub", "b8"]);
}
