use super::*;
use thunder_abi::PluginErrorKind;

fn broadcast(x: &Buf, shape: &[i64], dims: &[i64]) -> Result<Buf, PluginError> {
    eval(
        "prims.broadcast_in_dim",
        &[x],
        |i| vec![val(i[0]), ints(shape), ints(dims)],
        x.dtype,
        shape,
    )
}

#[test]
fn broadcast_in_dim_repeats_size_one_and_missing_dims() {
    let row = Buf::new(F32, &[3], &[1.0, 2.0, 3.0]);
    assert_floats(
        &broadcast(&row, &[2, 3], &[1]).expect("rows").f64s(),
        &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
    );
    assert_floats(
        &broadcast(&row, &[3, 2], &[0]).expect("cols").f64s(),
        &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0],
    );
    let col = Buf::new(I16, &[2, 1], &[4.0, 5.0]);
    assert_eq!(
        broadcast(&col, &[2, 3], &[0, 1])
            .expect("size-1 dim")
            .i64s(),
        [4, 4, 4, 5, 5, 5]
    );
    let scalar = Buf::new(B8, &[], &[1.0]);
    assert_eq!(
        broadcast(&scalar, &[2, 2], &[]).expect("from ()").bools(),
        [true; 4]
    );
    let empty = broadcast(&row, &[0, 3], &[1]).expect("to an empty shape");
    assert_eq!((empty.numel(), empty.shape.clone()), (0, vec![0, 3]));
}

#[test]
fn broadcast_in_dim_refuses_mismatched_sizes() {
    let x = Buf::new(F32, &[2], &[1.0, 2.0]);
    assert_err(
        broadcast(&x, &[2, 3], &[1]),
        PluginErrorKind::Invalid,
        &["prims.broadcast_in_dim", "size 2"],
    );
}

#[test]
fn reshape_keeps_row_major_order() {
    let x = Buf::new(F64, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = eval(
        "prims.reshape",
        &[&x],
        |i| vec![val(i[0]), ints(&[3, 2])],
        F64,
        &[3, 2],
    )
    .expect("reshape");
    assert_floats(&out.f64s(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let s = Buf::new(I32, &[], &[9.0]);
    let out = eval(
        "prims.reshape",
        &[&s],
        |i| vec![val(i[0]), ints(&[1, 1])],
        I32,
        &[1, 1],
    )
    .expect("() to (1, 1)");
    assert_eq!(out.i64s(), [9]);
    let e = Buf::new(F32, &[0], &[]);
    let out = eval(
        "prims.reshape",
        &[&e],
        |i| vec![val(i[0]), ints(&[3, 0])],
        F32,
        &[3, 0],
    )
    .expect("(0,) to (3, 0)");
    assert_eq!(out.numel(), 0);
    let bad = eval(
        "prims.reshape",
        &[&x],
        |i| vec![val(i[0]), ints(&[4])],
        F64,
        &[4],
    );
    assert_err(bad, PluginErrorKind::Invalid, &["prims.reshape"]);
}

#[test]
fn transpose_2d_and_3d() {
    let x = Buf::new(F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = eval(
        "prims.transpose",
        &[&x],
        |i| vec![val(i[0]), ints(&[1, 0])],
        F32,
        &[3, 2],
    )
    .expect("2d");
    assert_floats(&out.f64s(), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);

    // out[i][j][k] = in[j][k][i] for perm (2, 0, 1) of an input of shape (2, 3, 4).
    let values: Vec<f64> = (0..24).map(f64::from).collect();
    let x = Buf::new(I32, &[2, 3, 4], &values);
    let out = eval(
        "prims.transpose",
        &[&x],
        |i| vec![val(i[0]), ints(&[2, 0, 1])],
        I32,
        &[4, 2, 3],
    )
    .expect("3d");
    let mut want = Vec::new();
    for i in 0..4 {
        for j in 0..2 {
            for k in 0..3 {
                want.push((j * 3 + k) * 4 + i);
            }
        }
    }
    assert_eq!(out.i64s(), want);
}

#[test]
fn transpose_refuses_a_non_permutation() {
    let x = Buf::new(F32, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let r = eval(
        "prims.transpose",
        &[&x],
        |i| vec![val(i[0]), ints(&[0, 0])],
        F32,
        &[2, 2],
    );
    assert_err(
        r,
        PluginErrorKind::Invalid,
        &["prims.transpose", "permutation"],
    );
}
