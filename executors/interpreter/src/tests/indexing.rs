//! The data-movement prims through the executor's trait methods: results on strided inputs,
//! what decode refuses, and index values checked at run time.

use super::*;
use thunder_abi::PluginErrorKind;

fn int(v: i64) -> ArgView {
    ArgView::Int(v)
}

#[test]
fn take_and_cat_read_strided_inputs() {
    // Memory [[1, 2], [3, 4], [5, 6]] viewed as its transpose [[1, 3, 5], [2, 4, 6]].
    let mut x = Buf::new(F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    x.strides = vec![1, 2];
    let index = Buf::new(I32, &[4], &[2.0, 0.0, 2.0, 1.0]);
    let out = eval(
        "prims.take",
        &[&x, &index],
        |i| vec![val(i[0]), val(i[1]), int(1)],
        F32,
        &[2, 4],
    )
    .expect("take");
    assert_floats(&out.f64s(), &[5.0, 1.0, 5.0, 3.0, 6.0, 2.0, 6.0, 4.0]);
    let y = Buf::new(F32, &[1, 3], &[7.0, 8.0, 9.0]);
    let out = eval(
        "prims.cat",
        &[&y, &x],
        |i| vec![int(0), val(i[0]), val(i[1])],
        F32,
        &[3, 3],
    )
    .expect("cat");
    assert_floats(&out.f64s(), &[7.0, 8.0, 9.0, 1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
}

#[test]
fn decode_refuses_malformed_indexing_ops() {
    let x = Buf::new(F32, &[2, 3], &[0.0; 6]);
    let f = Buf::new(F32, &[2], &[0.0, 1.0]);
    assert_err(
        eval(
            "prims.take",
            &[&x, &f],
            |i| vec![val(i[0]), val(i[1]), int(0)],
            F32,
            &[2, 3],
        ),
        PluginErrorKind::Invalid,
        &["prims.take", "integer dtype"],
    );
    assert_err(
        eval(
            "prims.slice",
            &[&x],
            |i| vec![val(i[0]), ints(&[0, 0]), ints(&[2, 3]), ints(&[1, 1])],
            F32,
            &[2, 2],
        ),
        PluginErrorKind::Invalid,
        &["prims.slice", "declares output f32[2, 2]", "f32[2, 3]"],
    );
    assert_err(
        eval(
            "prims.cat",
            &[&x, &f],
            |i| vec![int(0), val(i[0]), val(i[1])],
            F32,
            &[4, 3],
        ),
        PluginErrorKind::Invalid,
        &["prims.cat", "cannot concatenate"],
    );
}

#[test]
fn out_of_range_index_values_fail_the_run_naming_the_prim() {
    let x = Buf::new(F64, &[3], &[1.0, 2.0, 3.0]);
    for bad in [3.0, -1.0] {
        let index = Buf::new(I64, &[2], &[0.0, bad]);
        assert_err(
            eval(
                "prims.take",
                &[&x, &index],
                |i| vec![val(i[0]), val(i[1]), int(0)],
                F64,
                &[2],
            ),
            PluginErrorKind::Invalid,
            &[
                "prims.take",
                &format!("index {bad} is out of bounds for dim 0 with size 3"),
            ],
        );
    }
    let index = Buf::new(I64, &[2], &[1.0, 9.0]);
    let src = Buf::new(F64, &[2], &[1.0, 1.0]);
    assert_err(
        eval(
            "prims.scatter_add",
            &[&x, &index, &src],
            |i| vec![val(i[0]), val(i[1]), val(i[2]), int(0)],
            F64,
            &[3],
        ),
        PluginErrorKind::Invalid,
        &["prims.scatter_add", "index 9 is out of bounds"],
    );
}
