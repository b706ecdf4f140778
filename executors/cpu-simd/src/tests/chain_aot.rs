//! Programs compiled ahead of time (`chain_aot.rs`): the matcher, on the GPT-2 block's GELU
//! backward as its trace orders it and as a hand-built trace orders it, and on near misses;
//! and that group's results, bit for bit against the same f32 operations (the bias gradient
//! within an ulp of its f64 sum), on row lengths with partial blocks and threads. The CI runs
//! these under each `THUNDER_CPU_SIMD_ISA`, so the kernel, the program and the tile path all
//! meet the same reference.

use super::gelu_bench::gelu_backward;
use super::math::ulp_distance;
use super::{data, ints, Tb};
use crate::chain::{Arith, Un, Val, Vi};
use crate::chain_aot::{find, Kernel};
use thunder_abi::{ArgView, DTypeCode::F32};

fn ld(dst: u8, acc: usize) -> Vi {
    Vi::Load {
        dst,
        acc,
        splat: false,
    }
}

fn bin(op: Arith, dst: u8, a: Val, b: Val) -> Vi {
    Vi::Binary { op, dst, a, b }
}

fn r(x: u8) -> Val {
    Val::Reg(x)
}

fn c(x: f32) -> Val {
    Val::Lit(x)
}

/// The GELU backward as the GPT-2 block's trace gives it (`THUNDER_CPU_SIMD_TRACE=1`), with
/// its accesses numbered from `base`.
fn block_program(base: usize) -> Vec<Vi> {
    use Arith::{Add, Mul, Sub};
    let (cube, scale) = (0.044715, 0.797_884_6);
    vec![
        ld(0, base),
        ld(1, base + 1),
        bin(Add, 2, r(0), r(1)),
        bin(Mul, 1, r(2), r(2)),
        bin(Mul, 0, r(1), r(2)),
        bin(Mul, 3, r(0), c(cube)),
        bin(Add, 0, r(2), r(3)),
        bin(Mul, 3, r(0), c(scale)),
        Vi::Unary {
            op: Un::Tanh,
            dst: 0,
            a: 3,
        },
        bin(Add, 3, r(0), c(1.0)),
        ld(4, base + 2),
        bin(Mul, 5, r(4), r(3)),
        bin(Mul, 6, r(2), c(0.5)),
        bin(Mul, 7, r(4), r(6)),
        bin(Mul, 4, r(5), c(0.5)),
        bin(Mul, 5, r(0), r(0)),
        bin(Sub, 0, c(1.0), r(5)),
        bin(Mul, 5, r(7), r(0)),
        bin(Mul, 0, r(5), c(scale)),
        bin(Add, 5, r(4), r(0)),
        bin(Mul, 4, r(0), c(cube)),
        bin(Mul, 0, r(4), r(2)),
        bin(Mul, 7, r(4), r(1)),
        bin(Add, 1, r(5), r(7)),
        bin(Mul, 7, r(0), r(2)),
        bin(Add, 2, r(1), r(7)),
        bin(Add, 1, r(2), r(7)),
        Vi::Sum {
            src: 1,
            red: 0,
            row: false,
        },
        bin(Mul, 7, r(6), r(3)),
        Vi::Store {
            src: 7,
            acc: base + 3,
        },
        Vi::Store {
            src: 1,
            acc: base + 4,
        },
    ]
}

/// The same values in the order the hand-built trace of `gelu_bench` gives them: `h` first,
/// the gradient's loads later, registers allocated differently.
fn hand_built_program() -> Vec<Vi> {
    use Arith::{Add, Mul, Sub};
    let (cube, scale) = (0.044715, 0.797_884_6);
    vec![
        ld(0, 0),
        ld(1, 1),
        bin(Add, 2, r(0), r(1)),
        bin(Mul, 1, r(2), r(2)),
        bin(Mul, 0, r(1), r(2)),
        bin(Mul, 3, r(0), c(cube)),
        bin(Add, 0, r(2), r(3)),
        bin(Mul, 3, r(0), c(scale)),
        Vi::Unary {
            op: Un::Tanh,
            dst: 0,
            a: 3,
        },
        bin(Add, 3, r(0), c(1.0)),
        bin(Mul, 4, r(2), c(0.5)),
        bin(Mul, 5, r(4), r(3)),
        ld(6, 2),
        bin(Mul, 7, r(6), r(3)),
        bin(Mul, 3, r(6), r(4)),
        bin(Mul, 4, r(7), c(0.5)),
        bin(Mul, 7, r(0), r(0)),
        bin(Sub, 0, c(1.0), r(7)),
        bin(Mul, 7, r(3), r(0)),
        bin(Mul, 0, r(7), c(scale)),
        bin(Add, 7, r(4), r(0)),
        bin(Mul, 4, r(0), c(cube)),
        bin(Mul, 0, r(4), r(2)),
        bin(Mul, 3, r(4), r(1)),
        bin(Add, 1, r(7), r(3)),
        bin(Mul, 3, r(0), r(2)),
        bin(Add, 2, r(1), r(3)),
        bin(Add, 1, r(2), r(3)),
        Vi::Sum {
            src: 1,
            red: 0,
            row: false,
        },
        Vi::Store { src: 5, acc: 3 },
        Vi::Store { src: 1, acc: 4 },
    ]
}

#[test]
fn gelu_backward_programs_match_their_kernel() {
    for (prog, accs) in [
        (block_program(0), vec![0, 1, 2, 3, 4]),
        (block_program(5), vec![5, 6, 7, 8, 9]),
        (hand_built_program(), vec![0, 1, 2, 3, 4]),
    ] {
        let got = find(&prog).expect("the GELU backward matches");
        assert_eq!(got.kernel, Kernel::GeluTanhBackward);
        assert_eq!(got.accs, accs);
        assert_eq!(got.reds, vec![0]);
    }
}

#[test]
fn near_misses_do_not_match() {
    let base = block_program(0);
    let mut misses: Vec<(&str, Vec<Vi>)> = Vec::new();
    // 0.5 becomes 0.25 in `h`'s factor.
    let mut p = base.clone();
    p[12] = bin(Arith::Mul, 6, r(2), c(0.25));
    misses.push(("a literal", p));
    // 1 - t^2 becomes t^2 - 1.
    let mut p = base.clone();
    p[16] = bin(Arith::Sub, 0, r(5), c(1.0));
    misses.push(("swapped operands", p));
    // Without the bias gradient.
    let mut p = base.clone();
    p.remove(27);
    misses.push(("a missing sum", p));
    // `h` stored where `dy` is, and `dy` into `h`'s access twice over: two stores to one
    // access cannot be two slots.
    let mut p = base.clone();
    p[29] = Vi::Store { src: 7, acc: 4 };
    misses.push(("one access stored twice", p));
    // The bias read from the product's access.
    let mut p = base.clone();
    p[1] = ld(1, 0);
    misses.push(("one access for two loads", p));
    // exp instead of tanh.
    let mut p = base;
    p[8] = Vi::Unary {
        op: Un::Exp,
        dst: 0,
        a: 3,
    };
    misses.push(("another function", p));
    for (what, p) in misses {
        assert_eq!(find(&p), None, "{what}");
    }
}

#[test]
fn gelu_backward_group_is_exact() {
    let fma = crate::exec::isa_level() >= 1;
    // On AVX-512 the vector tanh divides with a reciprocal and a correction (`vmath.rs`), so
    // its bits may differ from `math::tanh`'s by an ulp: there `h` and `dy` are checked
    // within what that ulp can move them, elsewhere bit for bit.
    let exact = crate::exec::isa_level() < 2;
    let tanh = |x: f32| {
        if fma {
            crate::math::tanh::<true>(x)
        } else {
            crate::math::tanh::<false>(x)
        }
    };
    for (rows, cols) in [(37i64, 200i64), (3, 1000), (5, 67), (256, 1024), (1, 64)] {
        let (n, cu) = ((rows * cols) as usize, cols as usize);
        // Products in [-4, 4): tanh's saturation and both signs.
        let mm: Vec<f32> = data(n, 51).iter().map(|v| v * 4.0).collect();
        let (b, g) = (data(cu, 52), data(n, 53));
        let mut t = Tb::default();
        let (ins, outs) = gelu_backward(&mut t, rows, cols);
        let got = t.run(
            &[
                (ins[0], mm.clone()),
                (ins[1], b.clone()),
                (ins[2], g.clone()),
            ],
            &outs,
        );
        let mut db = vec![0f64; cu];
        for i in 0..n {
            let (b, g) = (b[i % cu], g[i]);
            let y = mm[i] + b;
            let y2 = y * y;
            let z = (y + y2 * y * 0.044715) * 0.797_884_6;
            let th = tanh(z);
            let a = th + 1.0;
            let hy = y * 0.5;
            let h = hy * a;
            let di = (g * hy) * (1.0 - th * th) * 0.797_884_6;
            let dk = di * 0.044715;
            let dk_yy = (dk * y) * y;
            let dy = (((g * a) * 0.5 + di) + dk * y2 + dk_yy) + dk_yy;
            // The bias gradient sums the group's own `dy`.
            db[i % cu] += f64::from(got[1][i]);
            let at = format!("[{rows}, {cols}] at {i}");
            if exact {
                assert_eq!(got[0][i].to_bits(), h.to_bits(), "h {at}");
                assert_eq!(got[1][i].to_bits(), dy.to_bits(), "dy {at}");
            } else {
                // An ulp of tanh (at most 6e-8) times what multiplies it, plus roundings.
                let tol_h = 4e-7 * (hy.abs() + h.abs());
                let tol_dy = 1e-6 * g.abs() * (1.0 + y.abs() * (1.0 + 0.134 * y2));
                assert!(
                    (got[0][i] - h).abs() <= tol_h,
                    "h {at}: {} against {h}",
                    got[0][i]
                );
                assert!(
                    (got[1][i] - dy).abs() <= tol_dy + 1e-30,
                    "dy {at}: {} against {dy}",
                    got[1][i]
                );
            }
        }
        for (j, &want) in db.iter().enumerate() {
            let u = ulp_distance(got[2][j], want as f32);
            assert!(
                u <= 1,
                "[{rows}, {cols}] db[{j}] = {}, want {want} ({u} ulp)",
                got[2][j]
            );
        }
    }
}

fn sum(src: u8, red: usize, row: bool) -> Vi {
    Vi::Sum { src, red, row }
}

fn st(src: u8, acc: usize) -> Vi {
    Vi::Store { src, acc }
}

fn splat(dst: u8, acc: usize) -> Vi {
    Vi::Load {
        dst,
        acc,
        splat: true,
    }
}

/// The GPT-2 block's two layer-norm backward groups (17 and 20 instructions) and the end of
/// their input gradients (11), as its trace gives them.
fn layer_norm_programs() -> [Vec<Vi>; 3] {
    use Arith::{Add, Mul, Sub};
    let centred = vec![
        ld(0, 0),
        sum(0, 0, false),
        ld(1, 1),
        bin(Mul, 2, r(0), r(1)),
        ld(3, 2),
        splat(4, 3),
        bin(Mul, 5, r(3), r(4)),
        bin(Mul, 6, r(0), r(5)),
        sum(6, 1, false),
        bin(Mul, 6, r(2), r(4)),
        bin(Mul, 4, r(2), r(3)),
        sum(4, 2, true),
        st(6, 4),
        bin(Mul, 6, r(5), r(1)),
        ld(1, 5),
        bin(Add, 5, r(6), r(1)),
        st(5, 6),
    ];
    let centring = vec![
        ld(0, 0),
        sum(0, 0, false),
        ld(1, 1),
        bin(Mul, 2, r(0), r(1)),
        ld(3, 2),
        splat(4, 3),
        bin(Sub, 5, r(3), r(4)),
        splat(4, 4),
        bin(Mul, 3, r(5), r(4)),
        bin(Mul, 6, r(0), r(3)),
        sum(6, 1, false),
        bin(Mul, 6, r(2), r(4)),
        bin(Mul, 4, r(2), r(5)),
        sum(4, 2, true),
        st(5, 5),
        st(6, 6),
        bin(Mul, 6, r(3), r(1)),
        ld(1, 7),
        bin(Add, 3, r(6), r(1)),
        st(3, 8),
    ];
    let input_grad = vec![
        splat(0, 0),
        ld(1, 1),
        bin(Mul, 2, r(0), r(1)),
        ld(1, 2),
        bin(Add, 0, r(1), r(2)),
        bin(Add, 1, r(0), r(2)),
        Vi::Unary {
            op: Un::Neg,
            dst: 2,
            a: 1,
        },
        ld(0, 3),
        bin(Add, 3, r(0), r(1)),
        sum(2, 0, true),
        st(3, 4),
    ];
    [centred, centring, input_grad]
}

#[test]
fn layer_norm_programs_match_their_kernels() {
    let [centred, centring, input_grad] = layer_norm_programs();
    for (prog, kernel, accs, rows) in [
        (
            centred.clone(),
            Kernel::LayerNormBackward,
            (0..7).collect::<Vec<_>>(),
            vec![false, false, true],
        ),
        (
            centring,
            Kernel::LayerNormBackwardCentring,
            (0..9).collect(),
            vec![false, false, true],
        ),
        (
            input_grad,
            Kernel::LayerNormInputGrad,
            (0..5).collect(),
            vec![true],
        ),
    ] {
        let got = find(&prog).expect("a layer norm's backward matches");
        assert_eq!(got.kernel, kernel);
        assert_eq!(got.accs, accs);
        assert_eq!(got.rows, rows);
    }
    // The row sum taken over the rows instead: no kernel has that.
    let mut p = centred.clone();
    p[11] = sum(4, 2, false);
    assert_eq!(find(&p), None);
    // The mean read as a full tensor rather than per row.
    let mut p = centred;
    p[5] = ld(4, 3);
    assert_eq!(find(&p), None);
}

/// `kernels::reduce_tile`'s sum of a row: eight running f64 sums over its whole chunks of 8,
/// added in turn, then its remainder's sum (written out here, not called).
fn tile_sum(row: &[f32]) -> f64 {
    let mut lanes = [0f64; 8];
    let whole = row.len() / 8 * 8;
    for c in row[..whole].chunks_exact(8) {
        for (s, &x) in lanes.iter_mut().zip(c) {
            *s += f64::from(x);
        }
    }
    let tail: f64 = row[whole..].iter().map(|&x| f64::from(x)).sum();
    lanes.iter().sum::<f64>() + tail
}

/// A layer norm's backward group built by hand (the centring form) on `[rows, cols]`:
/// outputs bit for bit against the same f32 operations, the row sums against `reduce_tile`'s
/// order bit for bit, the sums over the rows within an ulp of their f64 sums.
#[test]
fn layer_norm_backward_group_is_exact() {
    for (rows, cols) in [(37i64, 200i64), (3, 1000), (5, 67), (256, 256), (2, 4100)] {
        let (n, cu, ru) = ((rows * cols) as usize, cols as usize, rows as usize);
        let s = [rows, cols];
        let mut t = Tb::default();
        let v = ArgView::Value;
        let row = |t: &mut Tb, x: u32| {
            t.op(
                "broadcast_in_dim",
                vec![v(x), ints(&s), ints(&[1])],
                F32,
                &s,
            )
        };
        let col = |t: &mut Tb, x: u32| {
            t.op(
                "broadcast_in_dim",
                vec![v(x), ints(&s), ints(&[0])],
                F32,
                &s,
            )
        };
        let (g, w, x) = (t.value(F32, &s), t.value(F32, &[cols]), t.value(F32, &s));
        let (mean, rstd, b) = (
            t.value(F32, &[rows]),
            t.value(F32, &[rows]),
            t.value(F32, &[cols]),
        );
        let (wb, mb, rb, bb) = (
            row(&mut t, w),
            col(&mut t, mean),
            col(&mut t, rstd),
            row(&mut t, b),
        );
        let db = t.op("sum", vec![v(g), ints(&[0])], F32, &[cols]);
        let gw = t.op("mul", vec![v(g), v(wb)], F32, &s);
        let xc = t.op("sub", vec![v(x), v(mb)], F32, &s);
        let xhat = t.op("mul", vec![v(xc), v(rb)], F32, &s);
        let gx = t.op("mul", vec![v(g), v(xhat)], F32, &s);
        let dw = t.op("sum", vec![v(gx), ints(&[0])], F32, &[cols]);
        let first = t.op("mul", vec![v(gw), v(rb)], F32, &s);
        let gwx = t.op("mul", vec![v(gw), v(xc)], F32, &s);
        let rsum = t.op("sum", vec![v(gwx), ints(&[1])], F32, &[rows]);
        let xw = t.op("mul", vec![v(xhat), v(wb)], F32, &s);
        let y = t.op("add", vec![v(xw), v(bb)], F32, &s);
        let (dg, dw_, dx) = (data(n, 61), data(cu, 62), data(n, 63));
        let (dm, dr, dbias) = (data(ru, 64), data(ru, 65), data(cu, 66));
        let got = t.run(
            &[
                (g, dg.clone()),
                (w, dw_.clone()),
                (x, dx.clone()),
                (mean, dm.clone()),
                (rstd, dr.clone()),
                (b, dbias.clone()),
            ],
            &[db, dw, first, rsum, xc, y],
        );
        let (mut want_db, mut want_dw) = (vec![0f64; cu], vec![0f64; cu]);
        for i in 0..ru {
            let mut gwx_row = Vec::with_capacity(cu);
            for j in 0..cu {
                let k = i * cu + j;
                let gw = dg[k] * dw_[j];
                let xc = dx[k] - dm[i];
                let xhat = xc * dr[i];
                want_db[j] += f64::from(dg[k]);
                want_dw[j] += f64::from(dg[k] * xhat);
                gwx_row.push(gw * xc);
                let at = format!("[{rows}, {cols}] at {k}");
                assert_eq!(got[2][k].to_bits(), (gw * dr[i]).to_bits(), "first {at}");
                assert_eq!(got[4][k].to_bits(), xc.to_bits(), "xc {at}");
                let y = xhat * dw_[j] + dbias[j];
                assert_eq!(got[5][k].to_bits(), y.to_bits(), "y {at}");
            }
            // Rows longer than a tile (4096) are folded tile by tile.
            let want = gwx_row.chunks(4096).map(tile_sum).fold(0.0, |a, s| a + s) as f32;
            assert_eq!(
                got[3][i].to_bits(),
                want.to_bits(),
                "[{rows}, {cols}] row sum {i}"
            );
        }
        for j in 0..cu {
            for (what, got, want) in [("db", got[0][j], want_db[j]), ("dw", got[1][j], want_dw[j])]
            {
                let u = ulp_distance(got, want as f32);
                assert!(
                    u <= 1,
                    "[{rows}, {cols}] {what}[{j}] = {got}, want {want} ({u} ulp)"
                );
            }
        }
    }
}

/// The end of a layer norm's input gradient built by hand: `r + b` and the row sums of `-b`,
/// with `b = (u + s v) + s v`, bit for bit (the row sums in `reduce_tile`'s order). Its rows
/// are split between threads, unlike the groups that also sum over the rows. The rows of 94
/// cancel: with `s = 0` and `u` holding 1e20 and -1e20 in the same one of `reduce_tile`'s
/// eight sums, in the row's last partial block, only that order of additions gives the
/// reference's bits.
#[test]
fn layer_norm_input_grad_group_is_exact() {
    for (rows, cols) in [
        (37i64, 200i64),
        (5, 67),
        (300, 256),
        (1, 64),
        (3, 94),
        (2, 70),
    ] {
        let cancel = cols == 94;
        let (n, cu, ru) = ((rows * cols) as usize, cols as usize, rows as usize);
        let s = [rows, cols];
        let mut t = Tb::default();
        let v = ArgView::Value;
        let (sc, x, u, res) = (
            t.value(F32, &[rows]),
            t.value(F32, &s),
            t.value(F32, &s),
            t.value(F32, &s),
        );
        let sb = t.op(
            "broadcast_in_dim",
            vec![v(sc), ints(&s), ints(&[0])],
            F32,
            &s,
        );
        let sv = t.op("mul", vec![v(sb), v(x)], F32, &s);
        let a = t.op("add", vec![v(u), v(sv)], F32, &s);
        let b = t.op("add", vec![v(a), v(sv)], F32, &s);
        let nb = t.op("neg", vec![v(b)], F32, &s);
        let rs = t.op("sum", vec![v(nb), ints(&[1])], F32, &[rows]);
        let out = t.op("add", vec![v(res), v(b)], F32, &s);
        let (mut ds, dx, mut du, dr) = (data(ru, 71), data(n, 72), data(n, 73), data(n, 74));
        if cancel {
            ds.fill(0.0);
            for i in 0..ru {
                du[i * cu + 64] = 1e20;
                du[i * cu + 80] = -1e20;
            }
        }
        let got = t.run(
            &[
                (sc, ds.clone()),
                (x, dx.clone()),
                (u, du.clone()),
                (res, dr.clone()),
            ],
            &[rs, out],
        );
        for i in 0..ru {
            let mut nbs = Vec::with_capacity(cu);
            for j in 0..cu {
                let k = i * cu + j;
                let sv = ds[i] * dx[k];
                let b = (du[k] + sv) + sv;
                nbs.push(-b);
                let at = format!("[{rows}, {cols}] at {k}");
                assert_eq!(got[1][k].to_bits(), (dr[k] + b).to_bits(), "out {at}");
            }
            let want = (0.0 + tile_sum(&nbs)) as f32;
            assert_eq!(
                got[0][i].to_bits(),
                want.to_bits(),
                "[{rows}, {cols}] row {i}"
            );
        }
    }
}
