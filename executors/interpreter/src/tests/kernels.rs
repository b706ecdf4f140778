//! prod/amin, argmax/argmin, cumsum, the two-output var_mean/topk/sort, convolution and the
//! RNG prims, driven through hand-built trace views.

use super::*;

impl Trace {
    /// Appends `symbol(args)` with one output per `(dtype, shape)`; returns their ids.
    fn op_n(&mut self, symbol: &str, args: Vec<ArgView>, outs: &[(DTypeCode, &[i64])]) -> Vec<u32> {
        let ids: Vec<u32> = outs
            .iter()
            .map(|(dtype, shape)| self.value(*dtype, shape, DeviceDesc::CPU))
            .collect();
        self.view.ops.push(OpView {
            symbol: symbol.into(),
            args: args.into(),
            outputs: ids.clone().into(),
            claimed: false,
            composite: false,
        });
        ids
    }
}

#[test]
fn prod_and_amin_reduce_like_torch() {
    let x = Buf::new(F32, &[2, 3], &[1.5, -2.0, 4.0, f64::NAN, 0.0, -0.0]);
    let prod = eval(
        "prims.prod",
        &[&x],
        |i| vec![val(i[0]), ints(&[1])],
        F32,
        &[2],
    )
    .expect("prod");
    assert_eq!(prod.f64s()[0], -12.0);
    assert!(prod.f64s()[1].is_nan());
    let amin = eval(
        "prims.amin",
        &[&x],
        |i| vec![val(i[0]), ints(&[0])],
        F32,
        &[3],
    )
    .expect("amin");
    let v = amin.f64s();
    assert!(v[0].is_nan() && v[1] == -2.0 && v[2] == 0.0 && v[2].is_sign_negative());
    // An i8 product wraps like a fixed-width kernel: 16 * 16 = 256 = 0 (mod 256).
    let y = Buf::new(I8, &[2], &[16.0, 16.0]);
    let wrapped = eval(
        "prims.prod",
        &[&y],
        |i| vec![val(i[0]), ints(&[0])],
        I8,
        &[],
    )
    .expect("i8");
    assert_eq!(wrapped.i64s(), [0]);
}

#[test]
fn argmax_takes_the_first_extremum_and_nan_wins() {
    let x = Buf::new(
        F64,
        &[2, 4],
        &[1.0, 3.0, 3.0, 0.0, 2.0, f64::NAN, 5.0, f64::NAN],
    );
    let arg = |sym: &str| {
        eval(sym, &[&x], |i| vec![val(i[0]), ArgView::Int(1)], I64, &[2])
            .expect(sym)
            .i64s()
    };
    assert_eq!(arg("prims.argmax"), [1, 1]);
    assert_eq!(arg("prims.argmin"), [3, 1]);
    let bad = eval(
        "prims.argmax",
        &[&x],
        |i| vec![val(i[0]), ArgView::Int(2)],
        I64,
        &[2],
    );
    assert!(bad.is_err());
}

#[test]
fn cumsum_runs_along_one_dim() {
    let x = Buf::new(I16, &[2, 3], &[1.0, 2.0, 3.0, 30000.0, 30000.0, 1.0]);
    let out = eval(
        "prims.cumsum",
        &[&x],
        |i| vec![val(i[0]), ArgView::Int(1)],
        I16,
        &[2, 3],
    )
    .expect("cumsum");
    // i16 wraps: 60000 - 65536 = -5536.
    assert_eq!(out.i64s(), [1, 3, 6, 30000, -5536, -5535]);
    let down = eval(
        "prims.cumsum",
        &[&x],
        |i| vec![val(i[0]), ArgView::Int(0)],
        I16,
        &[2, 3],
    )
    .expect("dim 0");
    assert_eq!(down.i64s(), [1, 2, 3, 30001, 30002, 4]);
}

#[test]
fn two_output_prims_write_both_outputs() {
    let mut t = Trace::new();
    let a = t.input(F32, &[2, 4]);
    let vm = t.op_n(
        "prims.var_mean",
        vec![val(a), ints(&[1]), ArgView::Int(1)],
        &[(F32, &[2]), (F32, &[2])],
    );
    let tk = t.op_n(
        "prims.topk",
        vec![
            val(a),
            ArgView::Int(2),
            ArgView::Int(1),
            ArgView::Bool(true),
            ArgView::Bool(true),
        ],
        &[(F32, &[2, 2]), (I64, &[2, 2])],
    );
    let st = t.op_n(
        "prims.sort",
        vec![
            val(a),
            ArgView::Int(1),
            ArgView::Bool(false),
            ArgView::Bool(true),
        ],
        &[(F32, &[2, 4]), (I64, &[2, 4])],
    );
    let x = Buf::new(
        F32,
        &[2, 4],
        &[1.0, 2.0, 3.0, 4.0, 2.0, f64::NAN, 2.0, -1.0],
    );
    let outs = t
        .run(&[&x], &[vm[0], vm[1], tk[0], tk[1], st[0], st[1]])
        .expect("run");
    assert_floats(&outs[0].f64s()[..1], &[f64::from(5.0f32 / 3.0)]);
    assert_floats(&outs[1].f64s()[..1], &[2.5]);
    assert_eq!(outs[2].f64s()[..2], [4.0, 3.0]);
    assert!(outs[2].f64s()[2].is_nan() && outs[2].f64s()[3] == 2.0);
    assert_eq!(outs[3].i64s(), [3, 2, 1, 0]);
    assert_eq!(outs[5].i64s(), [0, 1, 2, 3, 3, 0, 2, 1]);
    // The wrong number of outputs is a compile error, not a panic.
    let mut bad = Trace::new();
    let b = bad.input(F32, &[3]);
    bad.op(
        "prims.var_mean",
        vec![val(b), ints(&[0]), ArgView::Int(1)],
        F32,
        &[],
    );
    assert!(bad.compile(&[1]).is_err());
}

#[test]
fn convolution_is_cross_correlation_with_groups() {
    // [1, 2, 4] input, two groups of one channel, kernel 2, stride 2, padding 1.
    let x = Buf::new(
        F64,
        &[1, 2, 4],
        &[1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0],
    );
    let w = Buf::new(F64, &[2, 1, 2], &[1.0, -1.0, 0.5, 0.5]);
    let b = Buf::new(F64, &[2], &[0.0, 100.0]);
    let out = eval(
        "prims.convolution",
        &[&x, &w, &b],
        |i| {
            vec![
                val(i[0]),
                val(i[1]),
                val(i[2]),
                ints(&[2]),
                ints(&[1]),
                ints(&[1]),
                ArgView::Int(2),
            ]
        },
        F64,
        &[1, 2, 3],
    )
    .expect("conv");
    // Windows (pad, 1), (2, 3), (4, pad) per channel.
    assert_floats(&out.f64s(), &[-1.0, -1.0, 4.0, 105.0, 125.0, 120.0]);
}

#[test]
fn uniform_and_normal_are_seeded_and_in_range() {
    let run = |sym: &str, seed: i64, offset: i64| {
        eval(
            sym,
            &[],
            |_| {
                vec![
                    ints(&[1000]),
                    ArgView::Float(-2.0),
                    ArgView::Float(3.0),
                    ArgView::Int(seed),
                    ArgView::Int(offset),
                    ArgView::Device(DeviceDesc::CPU),
                    ArgView::DType(F32),
                ]
            },
            F32,
            &[1000],
        )
        .expect(sym)
        .f64s()
    };
    let u = run("prims.uniform", 1, 0);
    assert!(u.iter().all(|&x| (-2.0..3.0).contains(&x)));
    assert_eq!(u, run("prims.uniform", 1, 0));
    assert_ne!(u, run("prims.uniform", 1, 1));
    let n = run("prims.normal", -1, 0);
    let mean = n.iter().sum::<f64>() / 1000.0;
    assert!((mean + 2.0).abs() < 0.3, "normal(-2, 3) mean {mean}");
}
